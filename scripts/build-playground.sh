#!/usr/bin/env bash
# Assembles the playground (docs/wasm.md, "The playground") into target/playground/: the page
# (packages/warden-wasm/playground/), the package's JavaScript and its WebAssembly module under
# warden/, and the example it opens with under samples/. Builds the module first
# (scripts/build-wasm.sh) unless --no-wasm is given and packages/warden-wasm/pkg/ exists.
# Serve the result with `warden playground` or any static file server.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pkg="$root/packages/warden-wasm"
out="$root/target/playground"
if [ "${1:-}" != "--no-wasm" ] || [ ! -f "$pkg/pkg/warden_wasm_bg.wasm" ]; then
  bash "$root/scripts/build-wasm.sh"
fi
rm -rf "$out"
mkdir -p "$out/warden/pkg" "$out/samples"
cp "$pkg"/playground/*.html "$pkg"/playground/*.js "$pkg"/playground/*.css "$out/"
cp "$pkg/index.js" "$pkg/api.js" "$out/warden/"
cp "$pkg/pkg/warden_wasm.js" "$pkg/pkg/warden_wasm_bg.wasm" "$out/warden/pkg/"
# The example: a policy whose test blocks pass, and a trace in which an injected instruction
# makes the agent send money to an account a tool output named.
cp "$root/examples/argument_provenance.ward" "$out/samples/policy.ward"
cp "$root/examples/traces/injection.jsonl" "$out/samples/trace.jsonl"
echo "playground: $out ($(du -sh "$out" | cut -f1)); open it with: warden playground --dir $out"
