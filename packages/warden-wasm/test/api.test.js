// @warden/wasm under Node (`npm test`): the API docs/wasm.md states, and the decisions of a
// trace equal `warden replay`'s when WARDEN_BIN names the binary (scripts/build-wasm.sh
// sets it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { gzipSync } from "node:zlib";
import { Policy, Guardian, PolicyError, check, fmt, init, runTests } from "../node.js";

const root = new URL("../../../", import.meta.url);
const GOOD = "package p\n\nrule no_rm on toolCallRequest\n  when tool.name == \"rm\"\n  => deny \"no.rm\": \"no deleting\"\n\ndefault allow\n";
const injection = readFileSync(new URL("examples/traces/injection.jsonl", root), "utf8");

test("check: a clean policy has no diagnostics; an unknown name is an error with its place", () => {
  assert.deepEqual(check(GOOD).filter((d) => d.severity === "error"), []);
  const d = check(GOOD.replace("tool.name", "tool.nmae"));
  const errors = d.filter((x) => x.severity === "error");
  assert.ok(errors.length >= 1, JSON.stringify(d));
  assert.equal(errors[0].line, 4);
  assert.ok(errors[0].column > 1);
  assert.match(errors[0].code, /::/);
});

test("Policy.fromSource throws a PolicyError carrying the diagnostics", () => {
  assert.throws(
    () => Policy.fromSource("rule {"),
    (e) => e instanceof PolicyError && e.diagnostics.length > 0 && /policy:1:/.test(e.message),
  );
  const p = Policy.fromSource(GOOD);
  assert.match(p.digest, /^[0-9a-f]{64}$/);
});

test("fmt formats, and refuses what does not parse", () => {
  const out = fmt(GOOD.replace("when ", "when   "));
  assert.equal(fmt(out), out);
  assert.throws(() => fmt("rule {"), PolicyError);
});

test("init resolves to the same API", async () => {
  const api = await init();
  assert.equal(typeof api.check, "function");
});

test("runTests runs a policy's test blocks: all pass, and a wrong expectation fails at its line", () => {
  const source = readFileSync(new URL("examples/argument_provenance.ward", root), "utf8");
  const ok = runTests(source, "argument_provenance.ward");
  assert.equal(ok.tests.length, 5, JSON.stringify(ok.summary));
  assert.deepEqual(ok.tests.map((t) => t.status), Array(5).fill("passed"));
  assert.equal(ok.summary.line, "5 passed, 0 failed");

  // The second test expects a deny; make it expect an allow.
  const wrong = source.replace('amount: 20) => deny "provenance.recipient"', "amount: 20) => allow");
  const lineOf = wrong.split("\n").findIndex((l) => l.includes('from tool_output "read_file", amount: 20) => allow')) + 1;
  const bad = runTests(wrong, "argument_provenance.ward");
  assert.equal(bad.summary.failed, 1);
  const failed = bad.tests.find((t) => t.status === "failed");
  assert.equal(failed.name, "recipient read from a file is denied");
  assert.equal(failed.failures[0].line, lineOf);
  assert.match(failed.failures[0].actual, /deny/);
  assert.match(failed.failures[0].expected, /allow/);
});

test("runTests throws a PolicyError when the policy does not load", () => {
  assert.throws(
    () => runTests("rule {\ntest \"t\" {}\n"),
    (e) => e instanceof PolicyError && e.diagnostics.length > 0,
  );
});

// A budget, so growth is a decision (docs/wasm.md gives today's size): what a browser
// downloads is the gzipped module.
test("the module stays under 1.4 MB gzipped", () => {
  const wasm = readFileSync(new URL("../pkg/warden_wasm_bg.wasm", import.meta.url));
  const gz = gzipSync(wasm, { level: 9 }).length;
  assert.ok(gz < 1.4 * 1024 * 1024, `${gz} bytes gzipped`);
});

test("Guardian.decide denies what the policy denies and allows the rest", () => {
  const p = Policy.fromSource(GOOD, "p");
  const g = new Guardian(p, { explain: true });
  const denied = g.decide("toolCallRequest", { tool: { name: "rm", arguments: {} } });
  assert.equal(denied.result.decision, "deny", JSON.stringify(denied));
  const allowed = g.decide("toolCallRequest", { tool: { name: "ls", arguments: {} } });
  assert.equal(allowed.result.decision, "allow", JSON.stringify(allowed));
  const bad = g.handle("not json");
  assert.equal(bad.error.code, -32700);
});

test("replay of a trace gives one response per request", () => {
  const g = new Guardian(Policy.default(), { explain: true });
  const out = g.replay(injection);
  assert.equal(out.length, injection.split("\n").filter((l) => l.trim()).length);
  assert.ok(out.some((r) => r.response.result && r.response.result.decision === "deny"));
});

test("the decisions equal `warden replay --explain` on the same trace", { skip: !process.env.WARDEN_BIN && "WARDEN_BIN not set" }, () => {
  const cli = execFileSync(process.env.WARDEN_BIN, ["replay", "--explain", "-"], { input: injection, encoding: "utf8" })
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
  const ours = new Guardian(Policy.default(), { explain: true }).replay(injection).map((r) => r.response);
  assert.deepEqual(ours.map(comparable), cli.map(comparable));
});

// What may differ between two runs: the Guardian's own timings and times.
export function comparable(r) {
  return JSON.parse(JSON.stringify(r), (k, v) => (/^(timestamp|server_timestamp|took_us|elapsed_us|latency_us|decided_at)$/.test(k) ? undefined : v));
}

test("Rego imports: refused with a message that says why (a policy given as text has no files)", () => {
  const source = readFileSync(new URL("examples/rego_interop.ward", root), "utf8");
  const errors = check(source, "rego_interop.ward").filter((d) => d.severity === "error");
  // One error per `use rego`, at its path, saying there is no folder (then the `from rego` rule
  // names a package that was not loaded).
  assert.deepEqual(errors.filter((d) => d.code === "check::missing_rego").map((d) => [d.code, d.line]), [
    ["check::missing_rego", 4],
    ["check::missing_rego", 5],
    ["check::missing_rego", 6],
  ]);
  assert.match(errors[0].message, /given as text, with no folder to read Rego files from/);
  assert.match(errors[0].help, /WebAssembly package and the playground have no files/);
  assert.throws(
    () => Policy.fromSource(source, "rego_interop.ward"),
    (e) => e instanceof PolicyError && e.diagnostics[0].code === "check::missing_rego",
  );
  assert.throws(() => runTests(source, "rego_interop.ward"), PolicyError);
});
