#!/usr/bin/env bash
# Builds the npm package @warden/wasm (packages/warden-wasm, docs/wasm.md): the wasm32 module
# (release, once), its wasm-bindgen glue into packages/warden-wasm/pkg/, and prints the
# module's size. With --test, runs `npm test` there too (WARDEN_BIN, if set, is the binary the
# replay comparison runs). wasm-bindgen-cli is installed under ~/.cache at the version the
# crate pins (the two must be equal).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pkg="$root/packages/warden-wasm"
version=0.2.130
bindgen_root="${WARDEN_WASM_TOOLS:-$HOME/.cache/warden-wasm}/wasm-bindgen-$version"
if [ ! -x "$bindgen_root/bin/wasm-bindgen" ]; then
  rustup target add wasm32-unknown-unknown
  # Not --locked: the CLI's lock file names crate versions some mirrors lack.
  cargo install --quiet wasm-bindgen-cli --version "$version" --root "$bindgen_root"
fi
# The package is a workspace of its own: without this its build would go to its own target/.
target="${CARGO_TARGET_DIR:-$root/target}"
(cd "$pkg" && CARGO_TARGET_DIR="$target" cargo build --release --locked --target wasm32-unknown-unknown)
rm -rf "$pkg/pkg"
"$bindgen_root/bin/wasm-bindgen" --target web --remove-name-section --remove-producers-section \
  --out-dir "$pkg/pkg" \
  "$target/wasm32-unknown-unknown/release/warden_wasm.wasm"
size=$(wc -c < "$pkg/pkg/warden_wasm_bg.wasm")
gz=$(gzip -9 -c "$pkg/pkg/warden_wasm_bg.wasm" | wc -c)
echo "warden_wasm_bg.wasm: $size bytes ($gz gzipped)"
if [ "${1:-}" = "--test" ]; then
  (cd "$pkg" && npm test)
fi
