// The API as docs/wasm.md shows it, type-checked (`tsc --strict`, never run): what compiles here
// must compile for users, and each @ts-expect-error line must stay an error.
import { init, PolicyError } from "@warden/wasm";
import type { Diagnostic, JsonRpcResponse, Response as RpcResponse, TestReport, Warden } from "@warden/wasm";

export async function useIt(source: string, trace: string): Promise<string[]> {
  const warden: Warden = await init();
  const viaUrl: Warden = await init(new URL("./warden_wasm_bg.wasm", "https://example.test/"));
  const viaFetch: Warden = await init(fetch("/warden_wasm_bg.wasm"));
  const { Policy, Guardian, check, fmt, runTests } = warden;

  const diagnostics: Diagnostic[] = check(source, "mypolicy");
  const lines = diagnostics.map((d) => `${d.file}:${d.line}:${d.column} ${d.severity} ${d.code} ${d.message} ${d.help ?? ""}`);
  const formatted: string = fmt(source);

  let policy;
  try {
    policy = Policy.fromSource(source, "mypolicy");
  } catch (e) {
    if (e instanceof PolicyError) return e.diagnostics.map((d) => d.message);
    throw e;
  }
  const digest: string = policy.digest;
  const warnings: Diagnostic[] = policy.warnings;
  const fallback = Policy.default();

  const g = new Guardian(policy, { explain: true, failWithError: false });
  const plain = new Guardian(fallback);
  const r: JsonRpcResponse = g.decide("toolCallRequest", { tool: { name: "rm", arguments: {} } });
  const sameType: RpcResponse = r;
  const h = plain.handle({ jsonrpc: "2.0", id: 1, method: "toolCallRequest", params: {} });
  const h2 = plain.handle('{"jsonrpc":"2.0","id":2,"method":"toolCallRequest","params":{}}');
  const replayed: { line: number; response: JsonRpcResponse }[] = g.replay(trace);

  const report: TestReport = runTests(source, "mypolicy");
  const summary: string = report.summary.line;
  const failedAt = report.tests.flatMap((t) => t.failures.map((f) => `${t.name} ${f.line}:${f.column} ${f.expected} ${f.actual}`));

  // Wrong uses the types must refuse:
  // @ts-expect-error fromSource takes the source text, not an object
  Policy.fromSource({ text: source });
  // @ts-expect-error a Guardian is built over a Policy, not over its source
  new Guardian(source);
  // @ts-expect-error options are explain and failWithError
  new Guardian(policy, { explian: true });
  // @ts-expect-error check returns diagnostics, not a string
  const wrong: string = check(source);
  // @ts-expect-error decide needs the hook's name and a payload
  g.decide({ tool: { name: "rm" } });
  // @ts-expect-error the API is reached through init(), whose promise must be awaited
  init().check(source);

  void [viaUrl, viaFetch, formatted, digest, warnings, sameType, h, h2, replayed, summary, wrong];
  return [...lines, ...failedAt];
}
