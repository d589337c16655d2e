#!/usr/bin/env bash
# Prepares a GPU-machine run (DEVELOPERS.md, "GPU runs"): the GPU machine has CUDA, cuDNN, CMake
# and ninja but none of our Debian build dependencies, so they travel as one archive of Debian 12
# packages unpacked there into /opt/devroot (never into /). Optionally a base commit's sources
# travel too, for an A/B of two builds in one device call.
#   tools/device/prepare.sh [BASE_COMMIT]
# Writes .devdeps/devroot.tar.xz (and .devdeps/base.tar.xz) and adds .devdeps/ to
# .git/info/exclude. Carry ".devdeps" and run tools/device/run.sh there.
# The device tool sends at most 64 MiB (tracked files included): the archive is ~6 MiB; see
# tools/device/stash_fixtures.sh for the fixtures test_cuda does not read.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
mkdir -p .devdeps
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download libopenblas-dev libopenblas0-pthread libopenblas-pthread-dev \
   libopenblas0 libgfortran5 libquadmath0 nlohmann-json3-dev libcli11-dev libgtest-dev pkgconf \
   pkgconf-bin libpkgconf3 > /dev/null)
mkdir -p "$work/root"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
# Static libraries (but GoogleTest's, which is only static) and docs are not needed there.
find "$work/root" -name '*.a' ! -name 'libgtest*' -delete
rm -rf "$work/root/usr/share/doc" "$work/root/usr/share/man"
tar -C "$work/root" -cf - usr | xz -9e -T2 > .devdeps/devroot.tar.xz
echo "prepare: .devdeps/devroot.tar.xz $(du -h .devdeps/devroot.tar.xz | cut -f1)"
if [ $# -ge 1 ]; then
  git archive "$1" CMakeLists.txt src | xz -6 > .devdeps/base.tar.xz
  git rev-parse "$1" > .devdeps/base.commit
  echo "prepare: .devdeps/base.tar.xz ($1)"
fi
