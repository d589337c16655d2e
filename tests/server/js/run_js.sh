#!/usr/bin/env bash
# Runs the JavaScript client tests against `ltx serve`:
#   sdk  sdk_test.mjs: the OpenAI Node SDK and curl
#   web  web_test.mjs: the web page in headless Chromium
# Either against a server that runs already:
#   tests/server/js/run_js.sh sdk|web|all --url http://127.0.0.1:8000 [--api-key KEY]
# or against one it starts (the demo bundle, a temporary data dir, a free port) and stops after:
#   tests/server/js/run_js.sh sdk|web|all --ltx build/ltx [--api-key KEY] [-- more serve flags]
# The tests read the server's address and key from the environment this script sets
# (LTX_SERVE_URL, LTX_SERVE_API_KEY); ltx itself reads neither.
# Exits 77 (CTest's SKIP_RETURN_CODE) when node, the node_modules (`npm ci` in this folder) or,
# for web, Chromium is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 1 ] || usage
which_tests="$1"
shift
case "$which_tests" in sdk | web | all) ;; *) usage ;; esac

url="" ltx="" key=""
serve_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --url) url="$2"; shift 2 ;;
    --ltx) ltx="$2"; shift 2 ;;
    --api-key) key="$2"; shift 2 ;;
    --) shift; serve_flags=("$@"); break ;;
    *) echo "run_js.sh: unknown argument $1" >&2; usage ;;
  esac
done
if [ -z "$url" ] && [ -z "$ltx" ]; then
  echo "run_js.sh: give --url of a running server or --ltx to start one" >&2
  exit 2
fi

skip() {
  echo "run_js.sh: SKIP: $*" >&2
  exit 77
}
command -v node >/dev/null || skip "node is not installed (scripts/install-deps installs it)"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || skip "node $(node --version) is older than 20 (openai@6 needs 20)"
[ -d "$here/node_modules/openai" ] && [ -d "$here/node_modules/puppeteer-core" ] ||
  skip "no node_modules in $here: run 'npm ci' there (needs the network once)"
chromium="${LTX_CHROMIUM:-/usr/bin/chromium}"
if [ "$which_tests" != sdk ] && [ ! -x "$chromium" ]; then
  skip "no Chromium at $chromium (Debian package chromium)"
fi
command -v curl >/dev/null || skip "curl is not installed"

server_pid=""
tmp=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  [ -z "$tmp" ] || rm -rf "$tmp"
}
trap cleanup EXIT

if [ -z "$url" ]; then
  tmp="$(mktemp -d)"
  args=(serve --host 127.0.0.1 --port 0 --port-file "$tmp/port" --data-dir "$tmp/data")
  [ -z "$key" ] || args+=(--api-key "$key")
  "$ltx" "${args[@]}" "${serve_flags[@]}" >"$tmp/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    [ -s "$tmp/port" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; echo "run_js.sh: ltx serve exited" >&2; exit 1; }
    sleep 0.1
  done
  [ -s "$tmp/port" ] || { cat "$tmp/serve.log" >&2; echo "run_js.sh: no port after 60 s" >&2; exit 1; }
  url="http://127.0.0.1:$(cat "$tmp/port")"
fi

# Ready means the models are loaded; a job then starts without waiting for them.
auth=()
[ -z "$key" ] || auth=(-H "Authorization: Bearer $key")
ready=""
for _ in $(seq 1200); do
  if curl -sf "${auth[@]}" "$url/ready" >/dev/null 2>&1; then ready=1; break; fi
  if [ -n "$server_pid" ] && ! kill -0 "$server_pid" 2>/dev/null; then break; fi
  sleep 0.25
done
if [ -z "$ready" ]; then
  [ -z "$tmp" ] || cat "$tmp/serve.log" >&2
  echo "run_js.sh: $url/ready did not answer 200 within 300 s" >&2
  exit 1
fi

export LTX_SERVE_URL="$url" LTX_SERVE_API_KEY="$key" LTX_CHROMIUM="$chromium"
export LTX_WEB_SCREENSHOT="${LTX_WEB_SCREENSHOT:-$root/build/test-artifacts/web_page.png}"
cd "$here"
status=0
if [ "$which_tests" = sdk ] || [ "$which_tests" = all ]; then node sdk_test.mjs || status=1; fi
if [ "$which_tests" = web ] || [ "$which_tests" = all ]; then node web_test.mjs || status=1; fi
if [ "$status" -ne 0 ] && [ -n "$tmp" ]; then
  echo "--- ltx serve log" >&2
  tail -50 "$tmp/serve.log" >&2
fi
exit "$status"
