// Types of @warden/wasm under Node (node.js): the browser entry's, and the API exported at the
// top level too, since the module is instantiated when node.js is imported.
import type { Warden } from "./index.js";
export * from "./index.js";
export declare const Policy: Warden["Policy"];
export declare const Guardian: Warden["Guardian"];
export declare const check: Warden["check"];
export declare const fmt: Warden["fmt"];
export declare const runTests: Warden["runTests"];
