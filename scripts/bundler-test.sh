#!/usr/bin/env bash
# @warden/wasm through a real bundler, and tsc over its types (docs/wasm.md, "Tests"). In
# packages/warden-wasm/bundler-test/: `tsc --strict` over two files that use the API (as a
# bundled app and as a Node program), then `vite build` of an app that imports the package,
# then that bundle in headless Chromium (run.mjs), which must deny and allow as the policy says.
#
# Needs the fixture's npm install (`npm ci` there; CI does it), the module built
# (scripts/build-wasm.sh), and Debian's chromium and chromium-driver. Without the install or the
# browser it skips (one line, exit 0), unless CI is set: then it fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fixture="$root/packages/warden-wasm/bundler-test"

skip() {
  if [ -n "${CI:-}" ]; then
    echo "bundler test: FAILED: $1" >&2
    exit 1
  fi
  echo "bundler test skipped: $1"
  exit 0
}
find_bin() {
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  done
  return 1
}
[ -x "$fixture/node_modules/.bin/vite" ] && [ -x "$fixture/node_modules/.bin/tsc" ] ||
  skip "no npm install in $fixture (run: (cd $fixture && npm ci))"
[ -f "$root/packages/warden-wasm/pkg/warden_wasm_bg.wasm" ] ||
  skip "the module is not built (run scripts/build-wasm.sh)"
chrome="${CHROME_BIN:-$(find_bin chromium chromium-browser google-chrome || true)}"
driver="${CHROMEDRIVER_BIN:-$(find_bin chromedriver || true)}"
[ -n "$chrome" ] && [ -n "$driver" ] ||
  skip "install chromium and chromium-driver (apt-get install chromium chromium-driver)"

cd "$fixture"
npm run --silent types
npm run --silent build
CHROME_BIN="$chrome" CHROMEDRIVER_BIN="$driver" node run.mjs
