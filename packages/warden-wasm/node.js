// @warden/wasm under Node: the module is read from disk and instantiated synchronously, so
// `init()` resolves at once (the same API as index.js).
import { readFileSync } from "node:fs";
import { initSync } from "./pkg/warden_wasm.js";
import * as raw from "./pkg/warden_wasm.js";
import { bind } from "./api.js";

initSync({ module: readFileSync(new URL("./pkg/warden_wasm_bg.wasm", import.meta.url)) });
const api = bind(raw);
export async function init() {
  return api;
}
export const { Policy, Guardian, check, fmt, runTests } = api;
export { PolicyError } from "./api.js";
