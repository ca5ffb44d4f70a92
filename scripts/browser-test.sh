#!/usr/bin/env bash
# The playground in headless Chromium (packages/warden-wasm/browser-test/playground.mjs,
# docs/wasm.md): types a policy with an error, types in a trace, compares the decisions with
# `warden replay`, writes target/playground-screenshot.png.
#
# Needs Debian's chromium and chromium-driver. Without them it skips (one line, exit 0), unless
# CI is set: then their absence fails. WARDEN_BIN names the `warden` binary (default:
# target/release/warden, else target/debug/warden); the playground is built into
# target/playground/ if it is not there (scripts/build-playground.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

find_bin() {
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  done
  return 1
}
chrome="${CHROME_BIN:-$(find_bin chromium chromium-browser google-chrome || true)}"
driver="${CHROMEDRIVER_BIN:-$(find_bin chromedriver || true)}"
if [ -z "$chrome" ] || [ -z "$driver" ]; then
  missing=$([ -z "$chrome" ] && echo -n "chromium " ; [ -z "$driver" ] && echo -n "chromium-driver")
  if [ -n "${CI:-}" ]; then
    echo "browser test: FAILED: missing $missing (apt-get install chromium chromium-driver)" >&2
    exit 1
  fi
  echo "browser test skipped: install chromium and chromium-driver (apt-get install chromium chromium-driver)"
  exit 0
fi

target="$root/target"
warden="${WARDEN_BIN:-}"
if [ -z "$warden" ]; then
  for t in "${CARGO_TARGET_DIR:-$target}/release/warden" "${CARGO_TARGET_DIR:-$target}/debug/warden"; do
    if [ -x "$t" ]; then warden="$t"; break; fi
  done
fi
if [ -z "$warden" ] || [ ! -x "$warden" ]; then
  echo "browser test: no warden binary: build one with cargo build, or set WARDEN_BIN" >&2
  exit 1
fi
if [ ! -f "$target/playground/index.html" ]; then
  bash "$root/scripts/build-playground.sh" --no-wasm
fi
mkdir -p "$target"
WARDEN_BIN="$warden" PLAYGROUND_DIR="$target/playground" CHROME_BIN="$chrome" \
  CHROMEDRIVER_BIN="$driver" SCREENSHOT="$target/playground-screenshot.png" \
  node "$root/packages/warden-wasm/browser-test/playground.mjs"
