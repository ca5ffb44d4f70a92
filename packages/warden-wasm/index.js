// @warden/wasm for browsers and bundlers: `await init()` once, then use the API (docs/wasm.md).
import initWasm, * as raw from "./pkg/warden_wasm.js";
import { bind } from "./api.js";

let api;
export async function init(wasm) {
  if (!api) {
    await initWasm(wasm === undefined ? undefined : { module_or_path: wasm });
    api = bind(raw);
  }
  return api;
}
export { PolicyError } from "./api.js";
