// The API as a Node program imports it (the "node" condition: node.d.ts), type-checked.
import { Policy, Guardian, check, fmt, runTests, init, PolicyError } from "@warden/wasm";
import type { JsonRpcResponse } from "@warden/wasm";

const policy = Policy.fromSource('default allow\n', "p");
const g = new Guardian(policy);
const r: JsonRpcResponse = g.decide("toolCallRequest", { tool: { name: "ls", arguments: {} } });
const n: number = check("default allow\n").length + runTests("default allow\n").summary.passed;
const s: string = fmt("default allow\n");
const api = await init();
const e: boolean = new PolicyError("x") instanceof Error;
// @ts-expect-error runTests returns a report, not a string
const t: string = runTests("default allow\n");
// @ts-expect-error Guardian is a class: `new` is needed
Guardian(policy);
void [r, n, s, api, e, t];
