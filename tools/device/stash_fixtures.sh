#!/usr/bin/env bash
# The device tool sends at most 64 MiB, tracked files included; the fixtures alone are ~58 MiB.
# `stash` moves the fixtures that test_cuda does not read out of the tree before a device call,
# `restore` puts them back (git status shows them deleted in between).
set -euo pipefail
cd "$(dirname "$0")/../../tests/fixtures"
stash=${LTX_FIXTURE_STASH:-/tmp/ltx_fixture_stash}
files=(tiny_ltx2_19b.safetensors transformer_keys_ltx25_22b.txt transformer_keys_ltx23_22b.txt
       text_tokenizer_cases.json sampling_steps.safetensors sampling_guiders.safetensors
       media_reference.safetensors ltx23.fp8_cast.io.safetensors
       ltx23.fp8_scaled.weights.safetensors ltx23.fp8_scaled.io.safetensors
       ltx23.fp8_scaled.linear.safetensors ltx23.textproc.io.safetensors
       ltx2.textproc.io.safetensors)
# The whole pipelines' recordings (test_cuda compares its pipelines with the CPU instead), but
# the text contexts they share.
for f in e2e_*.io.safetensors; do [ "$f" = e2e_text.io.safetensors ] || files+=("$f"); done
mkdir -p "$stash"
case ${1:-} in
  stash) for f in "${files[@]}"; do if [ -f "$f" ]; then mv "$f" "$stash/"; fi; done ;;
  restore) for f in "${files[@]}" $(cd "$stash" && ls e2e_*.io.safetensors 2>/dev/null); do
             if [ -f "$stash/$f" ]; then mv "$stash/$f" .; fi; done ;;
  *) echo "usage: tools/device/stash_fixtures.sh stash|restore" >&2; exit 2 ;;
esac
