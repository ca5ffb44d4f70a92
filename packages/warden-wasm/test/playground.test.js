// The playground's modules that need no browser (packages/warden-wasm/playground/): the
// highlighter, the link's encoding, and what the page shows of a replayed decision. The page
// itself runs in Chromium in browser-test/playground.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { tokens, render, offsetOf } from "../playground/highlight.js";
import { toBase64url, fromBase64url, encodeFragment, decodeFragment } from "../playground/share.js";
import { summarizeReplay } from "../playground/explain.js";
import { Policy, Guardian } from "../node.js";

const root = new URL("../../../", import.meta.url);

test("the highlighter classes a rule's parts", () => {
  const text = 'package a.b\nrule no_rm on toolCallRequest\n  when tool.name == "rm" and len(args.x) > 3 // why\n  => deny "c": "d"\n';
  const classed = tokens(text).map((t) => `${t.cls}:${text.slice(t.start, t.end)}`);
  for (const want of [
    "declaration:package", "namespace:a.b", "declaration:rule", "name:no_rm", "keyword:on",
    "hook:toolCallRequest", "keyword:when", "ident:tool", "member:name", "operator:==",
    'string:"rm"', "operator:and", "builtin:len", "number:3", "comment:// why", "operator:=>",
    "decision:deny",
  ]) {
    assert.ok(classed.includes(want), `${want} in ${classed.join(" ")}`);
  }
});

test("the overlay escapes the text, keeps every character, and underlines a diagnostic's range", () => {
  const text = 'let x = "<b>&"\nrule r on toolCallRequest\n  when tool.nmae == "x"\n  => deny\n';
  const start = offsetOf(text, 3, 8);
  const html = render(text, [{ start, end: start + 9, cls: "diag-error" }]);
  assert.ok(!html.includes("<b>"), "markup in the policy is escaped");
  const plain = html.replace(/<[^>]+>/g, "").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  assert.equal(plain, text + "\n");
  const underlined = [...html.matchAll(/<span class="[^"]*diag-error[^"]*">([^<]*)<\/span>/g)].map((m) => m[1]).join("");
  assert.equal(underlined, "tool.nmae");
});

test("offsetOf counts columns in characters, as the checker does", () => {
  const text = "ab\n😀x\n";
  assert.equal(offsetOf(text, 2, 2), 5, "the emoji is one column and two UTF-16 units");
  assert.equal(offsetOf(text, 9, 1), text.length);
});

test("the link's fragment round-trips any text, and says when it is damaged", () => {
  const policy = 'rule r on toolCallRequest\n  when tool.name == "ünï 😀"\n  => deny\n';
  assert.equal(fromBase64url(toBase64url(policy)), policy);
  assert.match(toBase64url("???>>>"), /^[A-Za-z0-9_-]*$/);
  const state = decodeFragment(encodeFragment({ policy, trace: "{}\n", panel: "tests" }));
  assert.deepEqual(state, { errors: [], policy, trace: "{}\n", panel: "tests" });
  const bad = decodeFragment("#policy=%%%&trace=" + toBase64url("x"));
  assert.equal(bad.trace, "x");
  assert.equal(bad.policy, undefined);
  assert.equal(bad.errors.length, 1);
});

test("a replayed decision shows its rule's file:line, its checks, and where each argument came from", () => {
  const source = readFileSync(new URL("examples/argument_provenance.ward", root), "utf8");
  const trace = readFileSync(new URL("examples/traces/injection.jsonl", root), "utf8");
  const replayed = new Guardian(Policy.fromSource(source, "policy.ward"), { explain: true }).replay(trace);
  const shown = summarizeReplay(trace, replayed);
  assert.equal(shown.length, replayed.length);
  const deny = shown.find((s) => s.decision === "deny");
  assert.equal(deny.line, 6);
  assert.equal(deny.tool, "send_money");
  assert.deepEqual(deny.codes, ["provenance.recipient"]);
  const ruleLine = source.split("\n").findIndex((l) => l.startsWith("rule recipient_from_tool_output")) + 1;
  assert.deepEqual(deny.fired, [{ rule: "examples.provenance.recipient_from_tool_output", file: "policy.ward", line: ruleLine }]);
  const rule = deny.rules.find((r) => r.fired);
  assert.ok(rule.checks.some((c) => c.text === "taken_from(args.recipient, tool_output)" && c.outcome === "true"), JSON.stringify(rule.checks));
  const recipient = deny.arguments.find((a) => a.name === "recipient");
  assert.equal(recipient.value, "XX99ATTACKER0000");
  assert.equal(recipient.origin, "agent_generated");
  assert.equal(recipient.derivedFrom[0].id, "p-out-1");
  assert.equal(recipient.derivedFrom[0].origin, "tool_output");
  assert.equal(recipient.derivedFrom[0].source, "read_file");
  assert.equal(recipient.derivedFrom[0].line, 5);
  // The checks saw labels on the recipient: they are shown with it.
  const labelled = rule.checks.flatMap((c) => (c.labels || []).flat()).filter(Boolean);
  assert.ok(recipient.labels.includes("untrusted"), JSON.stringify(recipient.labels));
  assert.deepEqual(recipient.labels, [...new Set(labelled)].sort());
  // A line that is not JSON gets the Guardian's parse error.
  const broken = summarizeReplay("not json\n", new Guardian(Policy.default()).replay("not json\n"));
  assert.match(broken[0].error, /^-32700/);
});
