// The app Vite bundles (docs/wasm.md, Tests): imports @warden/wasm as any app would, lets the
// bundler place the .wasm, decides two requests and puts what came out in
// `document.body.dataset.result` (JSON) for run.mjs to read.
import { init } from "@warden/wasm";

const POLICY = `package app

rule no_rm on toolCallRequest
  when tool.name == "rm"
  => deny "files.rm": "no deleting"

default allow
`;

async function main() {
  const { Policy, Guardian, check, PolicyError } = await init();
  const g = new Guardian(Policy.fromSource(POLICY, "app"));
  const decision = (name) => g.decide("toolCallRequest", { tool: { name, arguments: {} } }).result;
  const rm = decision("rm");
  const ls = decision("ls");
  let error = null;
  try {
    Policy.fromSource("rule {");
  } catch (e) {
    error = { isPolicyError: e instanceof PolicyError, diagnostics: e.diagnostics.length };
  }
  return {
    rm,
    ls: { decision: ls.decision },
    checkErrors: check(POLICY).filter((d) => d.severity === "error").length,
    // Rego cannot be imported in WebAssembly (docs/wasm.md): the checker says so.
    rego: check(`use rego "org.rego" as org\n${POLICY}`, "app").map((d) => [d.code, d.message]),
    error,
    wasmUrls: performance.getEntriesByType("resource").map((e) => e.name).filter((n) => n.endsWith(".wasm")),
  };
}

main().then(
  (r) => (document.body.dataset.result = JSON.stringify(r)),
  (e) => (document.body.dataset.result = JSON.stringify({ failed: String(e && e.stack ? e.stack : e) })),
);
