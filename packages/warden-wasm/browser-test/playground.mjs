// The playground in a real browser (docs/wasm.md, "Tests"): starts `warden playground`, drives
// headless Chromium through chromedriver with the WebDriver protocol (plain HTTP, Node's fetch;
// no npm packages), and checks what a person would see:
//   1. a policy typed with an error shows the diagnostic (line:column, message) and underlines
//      it, and clicking the diagnostic puts the cursor there;
//   2. the fixed policy and a trace typed into the trace box show one decision per request,
//      and those decisions (the rendered words, codes and rules, and the response JSON the
//      page shows) equal `warden replay --explain` on the same policy and trace;
//   3. the link the page keeps in its address bar reopens the same policy and trace;
//   4. the example's test blocks run in the page and pass; with one expectation wrong (opened
//      from a link), that test fails at its line.
// A screenshot of the decisions goes to target/playground-screenshot.png.
//
// Run by scripts/browser-test.sh, which finds the binaries; environment:
//   WARDEN_BIN     the `warden` binary (serves the page, runs the replay compared with)
//   PLAYGROUND_DIR the built playground (scripts/build-playground.sh)
//   CHROME_BIN, CHROMEDRIVER_BIN  the browser and its driver
//   SCREENSHOT     where the screenshot goes
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run scripts/browser-test.sh)`);
  return v;
};
const WARDEN = env("WARDEN_BIN");
const PLAYGROUND = env("PLAYGROUND_DIR");
const CHROME = env("CHROME_BIN");
const DRIVER = env("CHROMEDRIVER_BIN");
const SCREENSHOT = env("SCREENSHOT");
const root = new URL("../../../", import.meta.url);
// The key W3C WebDriver returns an element reference under.
const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";

const POLICY = `package play

use std.taint

rule recipient_from_tool_output on toolCallRequest
  when tool.name == "send_money" and taken_from(args.recipient, tool_output)
  => deny "provenance.recipient": "the recipient was taken from a tool output"

rule no_rm on toolCallRequest
  when tool.name == "rm"
  => deny "files.rm": "no deleting"

default allow
`;
// The same policy with a misspelt field on line 6.
const BROKEN = POLICY.replace("when tool.name == \"send_money\"", "when tool.nmae == \"send_money\"");
const TRACE = readFileSync(new URL("examples/traces/injection.jsonl", root), "utf8");

const children = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Starts a process; resolves with it once `ready(stdout so far)` returns a value.
function start(cmd, args, ready, what) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    let out = "";
    let err = "";
    const timer = setTimeout(() => reject(new Error(`${what} did not start in 20 s: ${out}${err}`)), 20000);
    child.stdout.on("data", (d) => {
      out += d;
      const v = ready(out);
      if (v !== undefined) {
        clearTimeout(timer);
        resolve({ child, value: v });
      }
    });
    child.stderr.on("data", (d) => (err += d));
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}): ${out}${err}`));
    });
  });
}

// One WebDriver command; throws with the driver's message on an error.
async function wd(base, method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok || (json.value && json.value.error)) {
    throw new Error(`WebDriver ${method} ${path}: ${JSON.stringify(json.value).slice(0, 500)}`);
  }
  return json.value;
}

async function until(what, f, ms = 15000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await f();
    if (last) return last;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
}

// What may differ between two runs: times.
const comparable = (r) =>
  JSON.parse(JSON.stringify(r), (k, v) => (/^(timestamp|server_timestamp|took_us|elapsed_us|latency_us|decided_at)$/.test(k) ? undefined : v));

async function main() {
  // `warden replay` on the policy and the trace the page will get, named as the page names it.
  const dir = mkdtempSync(join(tmpdir(), "warden-browser-"));
  writeFileSync(join(dir, "policy.ward"), POLICY);
  writeFileSync(join(dir, "trace.jsonl"), TRACE);
  const cli = execFileSync(WARDEN, ["replay", "--policy", "policy.ward", "--explain", "trace.jsonl"], { cwd: dir, encoding: "utf8" })
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
  rmSync(dir, { recursive: true, force: true });

  const server = await start(WARDEN, ["playground", "--dir", PLAYGROUND, "--port", "0"], (out) => {
    const m = /http:\/\/[^\s]+\//.exec(out);
    return m ? m[0] : undefined;
  }, "warden playground");
  const page = server.value;
  const driverPort = await freePort();
  await start(DRIVER, [`--port=${driverPort}`], (out) => (/started successfully|ChromeDriver was started/.test(out) ? true : undefined), "chromedriver");
  const driver = `http://127.0.0.1:${driverPort}`;
  const session = await wd(driver, "POST", "/session", {
    capabilities: {
      alwaysMatch: {
        browserName: "chrome",
        "goog:chromeOptions": {
          binary: CHROME,
          args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1500,1100"],
        },
      },
    },
  });
  const s = `/session/${session.sessionId}`;
  const run = (script, ...args) => wd(driver, "POST", `${s}/execute/sync`, { script, args });
  const find = async (css) => {
    const found = await wd(driver, "POST", `${s}/element`, { using: "css selector", value: css });
    if (!found || !found[ELEMENT]) throw new Error(`no element ${css}: ${JSON.stringify(found)}`);
    return found[ELEMENT];
  };
  const type = async (css, text) => {
    const el = await find(css);
    await wd(driver, "POST", `${s}/element/${el}/clear`, {});
    await wd(driver, "POST", `${s}/element/${el}/value`, { text });
  };
  const ready = () => until("the page to load its WebAssembly module", () => run("return document.body.dataset.ready === 'true'"));

  try {
    await wd(driver, "POST", `${s}/url`, { url: page });
    await ready();
    assert.equal(await run("return document.title"), "Warden playground");

    // 1. A policy with an error: the diagnostic shows, with its place, and is underlined.
    await type("#source", BROKEN);
    const diag = await until("the diagnostic", () =>
      run(`const li = document.querySelector('#diagnostics li.error');
           return li && {line: li.dataset.line, column: li.dataset.column, text: li.textContent,
             underlined: document.querySelectorAll('#highlight .diag-error').length};`));
    assert.equal(diag.line, "6", diag.text);
    assert.match(diag.text, /^6:\d+ error\[/);
    assert.match(diag.text, /nmae/);
    assert.ok(diag.underlined > 0, "the error is underlined in the editor");
    assert.match(await run("return document.querySelector('#decisions').textContent"), /has errors/);
    // Clicking the diagnostic puts the cursor at its line and column: on the misspelt field.
    await wd(driver, "POST", `${s}/element/${await find("#diagnostics li.error")}/click`, {});
    const caret = await run("return document.querySelector('#source').selectionStart");
    const at = BROKEN.split("\n").slice(0, Number(diag.line) - 1).reduce((n, l) => n + l.length + 1, 0) + Number(diag.column) - 1;
    assert.equal(caret, at);
    assert.equal(BROKEN.slice(at, at + 4), "nmae");
    console.log(`ok - the typed error shows as: ${diag.text}`);

    // 2. The fixed policy and a trace, typed in as a person would paste it: the decisions equal `warden replay`'s.
    await type("#source", POLICY);
    await until("the diagnostics to clear", () => run("return !document.querySelector('#diagnostics li.error')"));
    await type("#trace", TRACE);
    const requests = TRACE.split("\n").filter((l) => l.trim()).length;
    const shown = await until(`${requests} decisions`, async () => {
      const d = await run(`return [...document.querySelectorAll('#decisions article.decision')].map((a) => ({
          line: Number(a.dataset.line),
          decision: a.querySelector('.decision-word').textContent,
          codes: [...a.querySelectorAll('.codes code')].map((c) => c.textContent),
          fired: [...a.querySelectorAll('ul.fired li')].map((li) => li.dataset.rule),
          where: [...a.querySelectorAll('ul.fired li .loc, ul.fired li code + code')].map((x) => x.textContent),
          args: [...a.querySelectorAll('tr.argument')].map((tr) => tr.textContent),
          raw: a.querySelector('pre.raw').textContent }));`);
      return d.length === requests ? d : undefined;
    });
    assert.equal(shown.length, cli.length);
    for (const [i, want] of cli.entries()) {
      const got = shown[i];
      const result = want.result || {};
      assert.equal(got.decision, want.error ? "error" : result.decision, `line ${got.line}`);
      assert.deepEqual(got.codes, result.reason_codes || [], `line ${got.line}`);
      const fired = (result.policy_data && result.policy_data.warden && result.policy_data.warden.fired) || [];
      assert.deepEqual(got.fired, fired, `line ${got.line}`);
      assert.deepEqual(comparable(JSON.parse(got.raw)), comparable(want), `line ${got.line}: the response the page shows`);
    }
    const denied = shown.find((d) => d.decision === "deny");
    assert.ok(denied, "the injected payment is denied");
    assert.deepEqual(denied.codes, ["provenance.recipient"]);
    assert.deepEqual(denied.where, ["policy.ward:5"], "the rule's file:line");
    assert.ok(denied.args.some((a) => a.startsWith("recipient") && /agent_generated/.test(a) && /p-out-1: tool_output of read_file, line 5/.test(a)),
      `where the recipient came from: ${denied.args.join(" | ")}`);
    console.log(`ok - ${shown.length} decisions in the page equal \`warden replay --explain\` (${shown.map((d) => d.decision).join(" ")})`);

    // The screenshot: the decisions, the deny's explanation open.
    await run(`const a = document.querySelector('#decisions article[data-decision="deny"]');
               a.scrollIntoView(); a.querySelectorAll('details').forEach((d) => (d.open = !d.querySelector('pre.raw')));`);
    await sleep(200);
    const png = await wd(driver, "GET", `${s}/screenshot`);
    writeFileSync(SCREENSHOT, Buffer.from(png, "base64"));
    console.log(`ok - screenshot written to ${SCREENSHOT}`);

    // 3. The link in the address bar holds the policy and the trace.
    await sleep(400); // the trace's debounced save to the URL
    const link = await run("return window.location.href");
    await wd(driver, "POST", `${s}/url`, { url: "about:blank" });
    await wd(driver, "POST", `${s}/url`, { url: link });
    await ready();
    const reopened = await run("return {policy: document.querySelector('#source').value, trace: document.querySelector('#trace').value, n: document.querySelectorAll('#decisions article.decision').length}");
    assert.equal(reopened.policy, POLICY);
    assert.equal(reopened.trace, TRACE);
    assert.equal(reopened.n, requests);
    console.log("ok - the page's link reopens the same policy, trace and decisions");

    // 4. The example's test blocks, run in the page.
    await wd(driver, "POST", `${s}/element/${await find("#sample")}/click`, {});
    await until("the example", () => run("return document.querySelector('#source').value.includes('package examples.provenance')"));
    await wd(driver, "POST", `${s}/element/${await find("#tab-tests")}/click`, {});
    const summary = await until("the test results", () => run("const s = document.querySelector('#test-summary'); return s && s.textContent"));
    assert.equal(summary, "5 passed, 0 failed");
    const statuses = await run("return [...document.querySelectorAll('#tests article.test')].map((t) => t.dataset.status)");
    assert.deepEqual(statuses, Array(5).fill("passed"));
    console.log(`ok - the example's tests run in the page: ${summary}`);

    // A link to the example with one expectation wrong opens on the tests, one failing at its line.
    const example = readFileSync(new URL("examples/argument_provenance.ward", root), "utf8");
    const wrong = example.replace('amount: 20) => deny "provenance.recipient"', "amount: 20) => allow");
    assert.notEqual(wrong, example);
    const wrongLine = wrong.split("\n").findIndex((l) => l.includes('"read_file", amount: 20) => allow')) + 1;
    const b64 = (t) => Buffer.from(t, "utf8").toString("base64url");
    await wd(driver, "POST", `${s}/url`, { url: "about:blank" });
    await wd(driver, "POST", `${s}/url`, { url: `${page}#policy=${b64(wrong)}&trace=&panel=tests` });
    await ready();
    const failing = await until("the failing test", () =>
      run(`const f = document.querySelector('#tests article[data-status="failed"]');
           return f && {summary: document.querySelector('#test-summary').textContent,
             name: f.querySelector('.name').textContent, failure: f.querySelector('.failure').textContent};`));
    assert.equal(failing.summary, "4 passed, 1 failed");
    assert.equal(failing.name, "recipient read from a file is denied");
    assert.match(failing.failure, new RegExp(`^policy\\.ward:${wrongLine}:\\d+ `));
    assert.match(failing.failure, /expected: allow/);
    assert.match(failing.failure, /actual: +deny/);
    console.log(`ok - a failing test shows at its line: ${failing.failure.split("\n")[0]}`);
  } finally {
    await wd(driver, "DELETE", s).catch(() => {});
  }
}

try {
  await main();
  console.log("browser test passed");
} catch (e) {
  console.error(`browser test FAILED: ${e.stack || e}`);
  process.exitCode = 1;
} finally {
  for (const c of children) c.kill();
}
