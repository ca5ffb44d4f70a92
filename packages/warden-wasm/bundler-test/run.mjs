// Runs the app Vite bundled (dist/, `npm run build`) in headless Chromium and checks the
// decisions it reached (docs/wasm.md, Tests). Serves dist/ with Node's http module, drives the
// browser through chromedriver with the WebDriver protocol (Node's fetch), like
// ../browser-test/playground.mjs. Run by scripts/bundler-test.sh, which finds the binaries:
//   CHROME_BIN, CHROMEDRIVER_BIN  the browser and its driver
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { readFileSync, readdirSync } from "node:fs";
import { extname, join, normalize } from "node:path";
import assert from "node:assert/strict";

const CHROME = process.env.CHROME_BIN;
const DRIVER = process.env.CHROMEDRIVER_BIN;
if (!CHROME || !DRIVER) throw new Error("CHROME_BIN and CHROMEDRIVER_BIN must be set (run scripts/bundler-test.sh)");
const dist = new URL("./dist/", import.meta.url).pathname;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The bundler emitted the module as an asset of its own (hashed name), not inlined.
const assets = readdirSync(join(dist, "assets"));
const wasm = assets.filter((f) => f.endsWith(".wasm"));
assert.equal(wasm.length, 1, `one .wasm asset expected in dist/assets: ${assets.join(", ")}`);

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".css": "text/css" };
const server = createServer((req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname)).replace(/^(\.\.[/\\])+/, "");
  try {
    const body = readFileSync(join(dist, path.endsWith("/") ? path + "index.html" : path));
    res.writeHead(200, { "content-type": TYPES[extname(path) || ".html"] || "application/octet-stream" });
    res.end(body);
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const page = `http://127.0.0.1:${server.address().port}/`;

const driverPort = 20000 + Math.floor(Math.random() * 20000);
const driverProc = spawn(DRIVER, [`--port=${driverPort}`], { stdio: "ignore" });
const driver = `http://127.0.0.1:${driverPort}`;
async function wd(method, path, body) {
  const res = await fetch(driver + path, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok || (json.value && json.value.error)) throw new Error(`WebDriver ${method} ${path}: ${JSON.stringify(json.value).slice(0, 500)}`);
  return json.value;
}

let session;
try {
  for (let i = 0; ; i++) {
    try {
      await fetch(driver + "/status");
      break;
    } catch (e) {
      if (i > 100) throw new Error(`chromedriver did not start: ${e}`);
      await sleep(100);
    }
  }
  session = await wd("POST", "/session", {
    capabilities: {
      alwaysMatch: {
        browserName: "chrome",
        "goog:chromeOptions": { binary: CHROME, args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] },
      },
    },
  });
  const s = `/session/${session.sessionId}`;
  await wd("POST", `${s}/url`, { url: page });
  let text;
  for (const end = Date.now() + 20000; Date.now() < end; await sleep(100)) {
    text = await wd("POST", `${s}/execute/sync`, { script: "return document.body.dataset.result || null", args: [] });
    if (text) break;
  }
  assert.ok(text, "the bundled app reported nothing in 20 s");
  const r = JSON.parse(text);
  assert.equal(r.failed, undefined, r.failed);
  assert.equal(r.rm.decision, "deny", JSON.stringify(r.rm));
  assert.match(JSON.stringify(r.rm), /files\.rm/);
  assert.equal(r.ls.decision, "allow");
  assert.equal(r.checkErrors, 0);
  assert.deepEqual(r.rego.map(([code]) => code), ["check::missing_rego"], JSON.stringify(r.rego));
  assert.match(r.rego[0][1], /no folder to read Rego files from/);
  assert.deepEqual(r.error, { isPolicyError: true, diagnostics: r.error.diagnostics });
  assert.ok(r.error.diagnostics > 0);
  assert.deepEqual(r.wasmUrls, [`${page}assets/${wasm[0]}`], "the page loaded the module from the asset Vite emitted");
  console.log(`bundler test: ok (Vite bundle in Chromium: rm denied, ls allowed; module ${wasm[0]})`);
} finally {
  if (session) await wd("DELETE", `/session/${session.sessionId}`).catch(() => {});
  driverProc.kill();
  server.close();
}
