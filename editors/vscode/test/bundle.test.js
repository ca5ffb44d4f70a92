// The packaged extension is one bundled file (esbuild): it must load with nothing but VS Code's
// own `vscode` module beside it (no node_modules ship in the .vsix) and export the entry points.
const test = require("node:test");
const assert = require("node:assert");
const fs = require("node:fs");
const path = require("node:path");
const Module = require("node:module");

const bundle = path.join(__dirname, "..", "out", "extension.js");
const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "package.json"), "utf8"));

test("the bundle loads without node_modules and exports activate/deactivate", () => {
  assert.ok(fs.existsSync(bundle), "run `npm run compile` first");
  const resolve = Module._resolveFilename;
  const load = Module._load;
  const asked = [];
  Module._resolveFilename = function (request, parent, ...rest) {
    if (request === "vscode") return "vscode";
    if (parent && parent.filename === bundle && !request.startsWith("node:") &&
        !Module.builtinModules.includes(request)) {
      asked.push(request);
    }
    return resolve.call(this, request, parent, ...rest);
  };
  Module._load = function (request, ...rest) {
    // Enough of the API for the client library's load-time code (it subclasses VS Code's
    // classes): every member is a class.
    if (request === "vscode") {
      return new Proxy({}, { get: (t, k) => (k in t ? t[k] : (t[k] = class {})) });
    }
    return load.call(this, request, ...rest);
  };
  try {
    const ext = require(bundle);
    assert.strictEqual(typeof ext.activate, "function");
    assert.strictEqual(typeof ext.deactivate, "function");
  } finally {
    Module._resolveFilename = resolve;
    Module._load = load;
  }
  assert.deepStrictEqual(asked, [], "the bundle requires packages that would not ship");
});

test("the manifest is publishable: publisher, license file, bundled entry point", () => {
  assert.match(pkg.publisher, /^[a-z0-9][a-z0-9-]*$/);
  assert.strictEqual(pkg.license, "Apache-2.0");
  assert.ok(fs.existsSync(path.join(__dirname, "..", "LICENSE")));
  assert.strictEqual(pkg.main, "./out/extension.js");
  assert.match(pkg.scripts["vscode:prepublish"], /compile/);
});
