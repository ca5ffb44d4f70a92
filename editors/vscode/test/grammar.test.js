// The TextMate grammar tokenizes every policy in examples/ and stdlib/ with VS Code's own
// engine (vscode-textmate + vscode-oniguruma), and the key constructs get their scopes.
const test = require("node:test");
const assert = require("node:assert");
const fs = require("node:fs");
const path = require("node:path");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const root = path.join(__dirname, "..", "..", "..");
const grammarPath = path.join(__dirname, "..", "syntaxes", "ward.tmLanguage.json");

async function loadGrammar() {
  const wasm = fs.readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm")).buffer;
  await oniguruma.loadWASM(wasm);
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) =>
      scopeName === "source.ward"
        ? vsctm.parseRawGrammar(fs.readFileSync(grammarPath, "utf8"), grammarPath)
        : null,
  });
  return registry.loadGrammar("source.ward");
}

/** Every token of a file: { line, text, scopes }. */
function tokenize(grammar, text) {
  const out = [];
  let stack = vsctm.INITIAL;
  text.split("\n").forEach((line, i) => {
    const r = grammar.tokenizeLine(line, stack);
    for (const t of r.tokens) {
      out.push({ line: i, text: line.slice(t.startIndex, t.endIndex), scopes: t.scopes });
    }
    stack = r.ruleStack;
  });
  return out;
}

function files(dir) {
  return fs
    .readdirSync(path.join(root, dir))
    .filter((f) => f.endsWith(".ward"))
    .map((f) => path.join(root, dir, f));
}

const has = (tok, scope) => tok.scopes.some((s) => s.startsWith(scope));

let grammar;
test.before(async () => {
  grammar = await loadGrammar();
});

const policies = [...files("examples"), ...files("stdlib")];

test("there are example policies to tokenize", () => {
  assert.ok(files("examples").length >= 5, "examples/ has policies");
});

for (const file of policies) {
  const name = path.relative(root, file);
  test(`tokenizes ${name}`, () => {
    const text = fs.readFileSync(file, "utf8");
    const tokens = tokenize(grammar, text);
    const lines = text.split("\n");
    const tokensOf = (i) => tokens.filter((t) => t.line === i && t.text.trim() !== "");
    const first = (i, word) => tokensOf(i).find((t) => t.text === word);

    lines.forEach((line, i) => {
      const where = `${name}:${i + 1}: ${line}`;
      // Whole-line comments are comments throughout.
      if (/^\s*\/\//.test(line)) {
        for (const t of tokensOf(i)) assert.ok(has(t, "comment.line"), `${where}: ${JSON.stringify(t)}`);
        return;
      }
      // `rule NAME on HOOK…`: the rule's name and every hook.
      const rule = line.match(/^rule\s+(\w+)\s+on\s+([\w/]+(?:\s*,\s*[\w/]+)*)/);
      if (rule) {
        assert.ok(has(first(i, "rule"), "keyword.control"), where);
        assert.ok(has(first(i, rule[1]), "entity.name.function.rule"), where);
        for (const hook of rule[2].split(/\s*,\s*/)) {
          assert.ok(has(first(i, hook), "support.type.hook"), `${where}: hook ${hook}`);
        }
      }
      const label = line.match(/^label\s+(\w+)/);
      if (label) assert.ok(has(first(i, label[1]), "entity.name.type.label"), where);
      const constant = line.match(/^let\s+(\w+)/);
      if (constant) assert.ok(has(first(i, constant[1]), "variable.other.constant"), where);
      const pred = line.match(/^pred\s+(\w+)/);
      if (pred) {
        assert.ok(has(first(i, "pred"), "keyword.control.pred"), where);
        assert.ok(has(first(i, pred[1]), "entity.name.function.pred"), where);
      }
      if (/^default\b/.test(line)) assert.ok(has(first(i, "default"), "keyword.control"), where);
      // `effect NAME for TOOL … = key(…)`: the keywords, the effect's name, a bare tool name.
      const effect = line.match(/^effect\s+(\w+)\s+for\s+(\w+|"[^"]*")/);
      if (effect) {
        assert.ok(has(first(i, "effect"), "keyword.control.effect"), where);
        assert.ok(has(first(i, effect[1]), "variable.other.effect"), where);
        assert.ok(has(first(i, "for"), "keyword.other.effect"), where);
        if (!effect[2].startsWith('"')) assert.ok(has(first(i, effect[2]), "entity.name.function.tool"), where);
        if (/\bkey\(/.test(line)) assert.ok(has(first(i, "key"), "keyword.other.effect"), where);
      }
      if (/^test\s+"/.test(line)) {
        const t = tokensOf(i).find((t) => t.text.startsWith('"'));
        assert.ok(has(t, "string.quoted.double"), where);
      }
      // History expressions name a hook.
      for (const m of line.matchAll(/\b(count|exists)\((\w[\w/]*)/g)) {
        assert.ok(has(first(i, m[2]), "support.type.hook"), `${where}: ${m[2]}`);
      }
      // Decisions after `=>`.
      const decision = line.match(/=>\s*(allow|deny|ask|defer|modify)\b/);
      if (decision) {
        const t = tokensOf(i).find((t) => t.text === decision[1]);
        assert.ok(has(t, "keyword.control.decision"), where);
      }
      // Builtin calls.
      for (const m of line.matchAll(/\b(turns_since|derived_from|lineage_depth|len|lower|starts_with|ends_with|contains|present|effect_state)\(/g)) {
        assert.ok(has(first(i, m[1]), "support.function.builtin"), `${where}: ${m[1]}`);
      }
      // No string leaks past its line: the next line starts outside a string.
      const last = tokens.filter((t) => t.line === i).pop();
      if (last && has(last, "string") && !line.trimEnd().endsWith('"')) {
        assert.fail(`${where}: unterminated string`);
      }
      // Durations and numbers.
      for (const m of line.replace(/"(?:[^"\\]|\\.)*"/g, (s) => " ".repeat(s.length)).replace(/\/\/.*$/, "").matchAll(/\b\d+(ms|s|m|h|d)?\b/g)) {
        const t = tokensOf(i).find((t) => t.text === m[0]);
        assert.ok(t && has(t, "constant.numeric"), `${where}: ${m[0]}`);
      }
    });

    // Across the file: the key scopes all occur.
    const scopes = new Set(tokens.flatMap((t) => t.scopes));
    const want = ["keyword.control.rule.ward", "support.type.hook.ward", "string.quoted.double.ward", "comment.line.double-slash.ward"];
    if (/^rule /m.test(text)) {
      for (const s of want) assert.ok(scopes.has(s), `${name}: no ${s}`);
    }
  });
}

test("a line with everything", () => {
  const line = 'rule r on toolCallRequest, protocols/MCP/tools/call when tool.name == "x" and turns_since(untrusted) <= 3 => deny "c" // end';
  const toks = tokenize(grammar, line);
  const scope = (text) => toks.find((t) => t.text === text).scopes.join(" ");
  assert.match(scope("r"), /entity\.name\.function\.rule/);
  assert.match(scope("toolCallRequest"), /support\.type\.hook/);
  assert.match(scope("protocols/MCP/tools/call"), /support\.type\.hook/);
  assert.match(scope("when"), /keyword\.control/);
  assert.match(scope("name"), /variable\.other\.property/);
  assert.match(scope("turns_since"), /support\.function\.builtin/);
  assert.match(scope("3"), /constant\.numeric/);
  assert.match(scope("deny"), /keyword\.control\.decision/);
  assert.match(scope("// end"), /comment\.line/);
});

test("effect declarations and ask parts", () => {
  const scopesOf = (line) => {
    const toks = tokenize(grammar, line);
    return (text, nth = 0) => toks.filter((t) => t.text === text)[nth].scopes.join(" ");
  };
  let scope = scopesOf("effect charge for charge_card not_executed_on_error lease 2 turns = key(args.payment_id, args.key)");
  assert.match(scope("effect"), /keyword\.control\.effect/);
  assert.match(scope("charge"), /variable\.other\.effect/);
  assert.match(scope("for"), /keyword\.other\.effect/);
  assert.match(scope("charge_card"), /entity\.name\.function\.tool/);
  assert.match(scope("not_executed_on_error"), /storage\.modifier/);
  assert.match(scope("lease"), /keyword\.other\.effect/);
  assert.match(scope("turns"), /keyword\.other\.window/);
  assert.match(scope("key"), /keyword\.other\.effect/);
  assert.match(scope("key", 1), /variable\.other\.property/);

  scope = scopesOf('effect refund for "refund" lease 10m = key(args.payment_id)');
  assert.match(scope("refund"), /variable\.other\.effect/);
  assert.match(scope("refund", 1), /string\.quoted\.double/);
  assert.match(scope("10m"), /constant\.numeric\.duration/);

  scope = scopesOf('rule r on toolCallRequest when effect_state(charge) == "none" => ask "r" approver human "ops" expires 10m extend intent this_request');
  assert.match(scope("effect_state"), /support\.function\.builtin/);
  assert.match(scope("expires"), /keyword\.other\.decision-part/);
  assert.match(scope("10m"), /constant\.numeric\.duration/);
  assert.match(scope("extend"), /keyword\.other\.decision-part/);
  assert.match(scope("intent"), /keyword\.other/);
  assert.match(scope("this_request"), /keyword\.other\.decision-part/);

  scope = scopesOf('  approve as "finance"');
  assert.match(scope("approve"), /keyword\.other\.step/);

  // Elsewhere, `key`, `lease` and `for` are names.
  scope = scopesOf("let limits = {key: 1, lease: 2, for: 3}");
  for (const w of ["key", "lease", "for"]) assert.doesNotMatch(scope(w), /keyword/, w);
});
