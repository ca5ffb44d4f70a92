// Warden syntax highlighting for the playground's editor: `tokens(text)` splits a policy into
// classed spans (the same categories as the VS Code grammar, editors/vscode/syntaxes), and
// `render(text, marks)` turns text, tokens and diagnostic ranges into the HTML of the overlay
// drawn under the textarea. No DOM here, so Node tests it (test/playground.test.js).

const DECISIONS = new Set(["allow", "deny", "ask", "defer", "modify"]);
const DECLARATIONS = new Set([
  "rule", "label", "let", "pred", "effect", "tool", "mask", "package", "use", "test", "default",
]);
const KEYWORDS = new Set([
  "when", "else", "as", "rego", "data", "on", "approver", "human", "agent", "service", "question",
  "timeout", "expires", "extend", "this_request", "resolve", "because", "redact", "each", "set",
  "replace", "with", "not_executed_on_error", "key", "lease", "this", "turn", "turns", "last",
  "session", "by", "user", "call", "result", "retrieve", "memory", "compact", "skill", "subagent",
  "expect", "approve", "from", "strict", "intent", "permits", "write", "read", "load", "register",
  "unload", "send", "count", "exists", "digest", "success", "failure", "blocked",
]);
const OPERATOR_WORDS = new Set(["and", "or", "not", "in", "has", "matches", "any", "all"]);
const CONSTANTS = new Set(["true", "false", "null"]);
const BUILTINS = new Set([
  "turns_since", "derived_from", "lineage_depth", "len", "lower", "upper", "starts_with",
  "ends_with", "contains", "present", "domain", "string", "effect_state", "sources", "taken_from",
  "taken_only_from", "found_in", "lineage_inferred", "glob", "type_of", "role", "links",
  "requested_by_user", "effect_class", "requested", "delegated", "requested_object", "read_at",
]);

const isWordStart = (c) => /[A-Za-z_]/.test(c);
const isWord = (c) => /[A-Za-z0-9_]/.test(c);

// `tool` and `mask` declare only at the start of a line (elsewhere `tool.name` is a field).
const LINE_START_ONLY = new Set(["tool", "mask"]);
const atLineStart = (text, i) => i === 0 || text[i - 1] === "\n";
const NAMED = new Set(["rule", "pred", "label", "let", "effect"]);

// [{start, end, cls}] over the text, in order, covering only what is highlighted.
export function tokens(text) {
  const out = [];
  let i = 0;
  // What the next word is: "name" (after rule, pred, …), "namespace" (after package, use) or
  // "hook" (after on, until the end of the line or `when`).
  let expect = null;
  const push = (start, end, cls) => out.push({ start, end, cls });
  while (i < text.length) {
    const c = text[i];
    if ((c === "/" && text[i + 1] === "/") || c === "#") {
      const end = lineEnd(text, i);
      push(i, end, "comment");
      i = end;
    } else if (c === "/" && text[i + 1] === "*") {
      const close = text.indexOf("*/", i + 2);
      const end = close < 0 ? text.length : close + 2;
      push(i, end, "comment");
      i = end;
    } else if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"' && text[j] !== "\n") j += text[j] === "\\" ? 2 : 1;
      const end = Math.min(text[j] === '"' ? j + 1 : j, text.length);
      push(i, end, "string");
      i = end;
    } else if (/[0-9]/.test(c)) {
      const m = /^[0-9][0-9_]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?:ms|s|m|h|d)?/.exec(text.slice(i, i + 64));
      push(i, i + m[0].length, "number");
      i += m[0].length;
    } else if (isWordStart(c)) {
      let j = i + 1;
      const dotted = expect === "namespace";
      while (j < text.length && (isWord(text[j]) || (dotted && text[j] === "." && isWordStart(text[j + 1] || "")))) j++;
      const word = text.slice(i, j);
      const member = i > 0 && text[i - 1] === ".";
      let k = j;
      while (text[k] === " " || text[k] === "\t") k++;
      const call = text[k] === "(";
      let cls = "ident";
      if (member) cls = "member";
      else if (expect === "name") cls = "name";
      else if (expect === "namespace" && word !== "rego" && word !== "data") cls = "namespace";
      else if (expect === "hook" && word !== "when" && !DECISIONS.has(word)) cls = "hook";
      else if (DECISIONS.has(word)) cls = "decision";
      else if (DECLARATIONS.has(word) && (atLineStart(text, i) || !LINE_START_ONLY.has(word))) cls = "declaration";
      else if (OPERATOR_WORDS.has(word)) cls = "operator";
      else if (CONSTANTS.has(word)) cls = "constant";
      else if (KEYWORDS.has(word) || word === "rego" || word === "data") cls = "keyword";
      else if (call && BUILTINS.has(word)) cls = "builtin";
      else if (call) cls = "call";
      push(i, j, cls);
      if (member) {
        // a field: what was expected still is
      } else if (NAMED.has(word) && cls === "declaration") expect = "name";
      else if ((word === "package" || word === "use") && cls === "declaration") expect = "namespace";
      else if (word === "on" && expect !== "hook") expect = "hook";
      else if (cls === "hook") expect = "hook";
      else if (expect === "namespace" && cls === "keyword") expect = "namespace";
      else expect = null;
      i = j;
    } else {
      const two = text.slice(i, i + 2);
      if (["=>", "->", "==", "!=", "<=", ">="].includes(two)) {
        push(i, i + 2, "operator");
        i += 2;
        expect = null;
      } else {
        if ("<>=+-*%$".includes(c)) push(i, i + 1, "operator");
        if (c === "\n") expect = null;
        i++;
      }
    }
  }
  return out;
}

function lineEnd(text, i) {
  const n = text.indexOf("\n", i);
  return n < 0 ? text.length : n;
}

const escape = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

// The overlay's HTML: highlighted tokens, and each mark ({start, end, cls}: a diagnostic's
// range, in UTF-16 offsets) underlined. An empty mark is widened to one character so it shows.
export function render(text, marks = []) {
  const toks = tokens(text);
  const ms = marks.map((m) => ({ ...m, end: Math.max(m.end, Math.min(m.start + 1, text.length)) }));
  const cuts = new Set([0, text.length]);
  for (const t of toks) cuts.add(t.start).add(t.end);
  for (const m of ms) cuts.add(Math.max(0, Math.min(m.start, text.length))).add(Math.min(m.end, text.length));
  const points = [...cuts].sort((a, b) => a - b);
  let html = "";
  let ti = 0;
  for (let p = 0; p + 1 < points.length; p++) {
    const a = points[p];
    const b = points[p + 1];
    while (ti < toks.length && toks[ti].end <= a) ti++;
    const classes = [];
    if (ti < toks.length && toks[ti].start <= a && a < toks[ti].end) classes.push("tok-" + toks[ti].cls);
    for (const m of ms) if (m.start <= a && a < m.end) classes.push(m.cls);
    const piece = escape(text.slice(a, b));
    html += classes.length ? `<span class="${classes.join(" ")}">${piece}</span>` : piece;
  }
  // A final newline needs a line after it to keep the overlay as tall as the textarea.
  return html + "\n";
}

// UTF-16 offset of a 1-based line and column (the column counts characters, as the checker's
// diagnostics do).
export function offsetOf(text, line, column) {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    const n = text.indexOf("\n", offset);
    if (n < 0) return text.length;
    offset = n + 1;
  }
  const end = lineEnd(text, offset);
  let i = offset;
  for (let c = 1; c < column && i < end; c++) {
    i += text.codePointAt(i) > 0xffff ? 2 : 1;
  }
  return i;
}
