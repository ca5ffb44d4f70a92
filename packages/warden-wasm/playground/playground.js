// The playground page (docs/wasm.md, "The playground"): a policy editor with highlighting and
// the checker's diagnostics as you type, a trace replayed through a Guardian with the decisions
// and their explanations, the policy's test blocks, and the whole state in the URL's fragment.
// Everything runs here, in the browser, from @warden/wasm (copied to ./warden/ by
// scripts/build-playground.sh).
import { init } from "./warden/index.js";
import { render, offsetOf } from "./highlight.js";
import { encodeFragment, decodeFragment } from "./share.js";
import { summarizeReplay } from "./explain.js";

// What diagnostics and explain traces call the policy (`warden replay --policy policy.ward`).
const FILE = "policy.ward";

const $ = (id) => document.getElementById(id);
const source = $("source");
const overlay = $("highlight");
const trace = $("trace");

// A DOM element: h("div", {class: "x"}, child, "text", …).
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

let warden = null;
let diagnostics = [];
let panel = "trace";

function setStatus(text, error = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", error);
}

// Moves the editor's caret to a 1-based line and column and scrolls it into view.
function reveal(line, column = 1) {
  const at = offsetOf(source.value, line, column);
  source.focus();
  source.setSelectionRange(at, at);
  const lineHeight = parseFloat(getComputedStyle(source).lineHeight) || 19;
  source.scrollTop = Math.max(0, (line - 3) * lineHeight);
  syncScroll();
}

// `file:line[:col]` of this policy → a link that reveals it; of another file → plain text.
function sourceLink(file, line, column) {
  const text = column ? `${file}:${line}:${column}` : `${file}:${line}`;
  if (file !== FILE || !line) return h("code", {}, text);
  return h("a", { class: "loc", href: `#L${line}`, onclick: (e) => { e.preventDefault(); reveal(line, column || 1); } }, text);
}

function syncScroll() {
  overlay.scrollTop = source.scrollTop;
  overlay.scrollLeft = source.scrollLeft;
}

function paintEditor() {
  const text = source.value;
  const marks = diagnostics.map((d) => ({
    start: offsetOf(text, d.line, d.column),
    end: offsetOf(text, d.end_line, d.end_column),
    cls: d.severity === "error" ? "diag-error" : "diag-warning",
  }));
  overlay.innerHTML = render(text, marks);
  syncScroll();
}

function showDiagnostics() {
  const list = $("diagnostics");
  list.replaceChildren();
  const errors = diagnostics.filter((d) => d.severity === "error").length;
  const warnings = diagnostics.length - errors;
  $("diagnostic-count").textContent = diagnostics.length ? `(${errors} errors, ${warnings} warnings)` : "";
  if (!diagnostics.length) {
    list.append(h("li", { class: "clean" }, "No errors or warnings."));
    return;
  }
  for (const d of diagnostics) {
    list.append(
      h("li", { class: `diagnostic ${d.severity}`, "data-line": d.line, "data-column": d.column, onclick: () => reveal(d.line, d.column) },
        h("span", { class: "where" }, `${d.line}:${d.column}`), " ",
        h("span", { class: "severity" }, `${d.severity}[${d.code}]`), ": ",
        h("span", { class: "message" }, d.message),
        d.help ? h("div", { class: "hint" }, "hint: ", d.help) : null));
  }
}

function renderCheck(c) {
  const cls = c.outcome === "true" ? "outcome-true" : c.outcome === "false" ? "outcome-false" : "";
  const values = c.values.map((v, i) => {
    const labels = c.labels && c.labels[i];
    return labels && labels.length ? `${v} {${labels.join(", ")}}` : v;
  });
  return h("li", { class: "check" },
    h("span", { class: "text" }, c.text), " → ", h("span", { class: cls }, c.outcome),
    values.length ? h("span", { class: "values" }, `   [${values.join(", ")}]`) : null);
}

function renderArgument(a) {
  const value = a.value === undefined ? "(none)" : JSON.stringify(a.value);
  const origin = a.origin ? [a.origin, a.source ? ` (${a.source})` : ""].join("") : "no provenance sent";
  const chain = a.derivedFrom.map((d) =>
    d.unknown
      ? `${d.id} (not in the trace)`
      : `${d.id}: ${d.origin}${d.source ? ` of ${d.source}` : ""}, line ${d.line}${d.value !== undefined ? `: ${clip(JSON.stringify(d.value), 60)}` : ""}`);
  return h("tr", { class: "argument", "data-name": a.name },
    h("td", {}, h("code", {}, a.name)),
    h("td", {}, h("code", {}, clip(value, 80))),
    h("td", { class: "origin" }, origin, chain.length ? h("ul", { class: "lineage muted" }, chain.map((c) => h("li", {}, "← ", c))) : null),
    h("td", {}, a.labels.map((l) => h("span", { class: "label" }, l))));
}

function clip(text, n) {
  return text.length > n ? text.slice(0, n) + "…" : text;
}

function renderDecision(s, response) {
  const word = s.error ? "error" : s.decision || "?";
  const head = h("div", { class: "head" },
    h("span", { class: "where" }, `#${s.line}`),
    h("span", {}, s.hook + (s.tool ? ` ${s.tool}` : "")),
    h("span", { class: `decision-word ${word}` }, word),
    s.codes.length ? h("span", { class: "codes" }, s.codes.map((c) => h("code", {}, c))) : null);
  const card = h("article", { class: "decision", "data-line": s.line, "data-decision": word }, head);
  if (s.error) card.append(h("div", { class: "reasoning" }, s.error));
  else if (s.reasoning) card.append(h("div", { class: "reasoning" }, s.reasoning));
  if (s.fired.length) {
    card.append(h("h4", {}, "Rules that fired"),
      h("ul", { class: "fired" }, s.fired.map((f) => h("li", { "data-rule": f.rule }, h("code", {}, f.rule), " ", f.file ? sourceLink(f.file, f.line) : null))));
  }
  const ran = s.rules.filter((r) => r.checks.length);
  if (ran.length) {
    card.append(h("h4", {}, "Checks"));
    for (const r of ran) {
      const body = h("ul", {}, r.checks.map(renderCheck));
      const title = h("summary", {}, h("code", {}, r.rule), r.fired ? " fired " : " did not fire ", sourceLink(r.file, r.line, r.column));
      card.append(h("details", { class: "rule", open: r.fired }, title, body));
    }
  }
  if (s.arguments.length) {
    card.append(h("h4", {}, "Arguments: where each came from"),
      h("table", {}, h("tr", {}, h("th", {}, "argument"), h("th", {}, "value"), h("th", {}, "origin"), h("th", {}, "labels")),
        s.arguments.map(renderArgument)));
  }
  card.append(h("details", {}, h("summary", {}, "response JSON"), h("pre", { class: "raw" }, JSON.stringify(response, null, 2))));
  return card;
}

function runTrace() {
  const out = $("decisions");
  out.replaceChildren();
  $("decision-count").textContent = "";
  if (!warden) return;
  if (diagnostics.some((d) => d.severity === "error")) {
    out.append(h("div", { class: "notice error" }, "The policy has errors: fix them to run the trace."));
    return;
  }
  if (!trace.value.trim()) {
    out.append(h("div", { class: "notice" }, "Paste a trace (one ACS request per line) above."));
    return;
  }
  let replayed;
  try {
    const policy = warden.Policy.fromSource(source.value, FILE);
    replayed = new warden.Guardian(policy, { explain: true }).replay(trace.value);
  } catch (e) {
    out.append(h("div", { class: "notice error" }, String(e.message || e)));
    return;
  }
  const summaries = summarizeReplay(trace.value, replayed);
  const byLine = new Map(replayed.map((r) => [r.line, r.response]));
  const counts = {};
  for (const s of summaries) {
    const word = s.error ? "error" : s.decision;
    counts[word] = (counts[word] || 0) + 1;
    out.append(renderDecision(s, byLine.get(s.line)));
  }
  $("decision-count").textContent = `(${Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ")})`;
}

function runTests() {
  const out = $("tests");
  out.replaceChildren();
  if (!warden) return;
  let report;
  try {
    report = warden.runTests(source.value, FILE);
  } catch (e) {
    out.append(h("div", { class: "notice error" }, "The policy does not load: fix the errors on the left."));
    return;
  }
  out.append(h("div", { class: "summary", id: "test-summary" }, report.summary.line));
  if (!report.tests.length) out.append(h("div", { class: "notice" }, "The policy has no test blocks."));
  for (const t of report.tests) {
    const card = h("article", { class: "test", "data-status": t.status },
      h("div", { class: "head" }, h("span", { class: `test-status ${t.status}` }, t.status), h("span", { class: "name" }, t.name),
        h("span", { class: "muted" }, `${t.steps} decisions checked`)));
    for (const f of t.failures) {
      card.append(h("div", { class: "failure" },
        sourceLink(f.file, f.line, f.column), " ", f.message,
        f.expected ? `\n  expected: ${f.expected}` : "", f.actual ? `\n  actual:   ${f.actual}` : "",
        f.fired && f.fired.length ? `\n  fired:    ${f.fired.join(", ")}` : ""));
    }
    out.append(card);
  }
}

function selectPanel(name) {
  panel = name;
  for (const p of ["trace", "tests"]) {
    $(`tab-${p}`).setAttribute("aria-selected", String(p === name));
    $(`panel-${p}`).hidden = p !== name;
  }
}

function saveToUrl() {
  history.replaceState(null, "", encodeFragment({ policy: source.value, trace: trace.value, panel }));
}

// The policy changed: check it, repaint, rerun what is showing.
function update() {
  if (warden) diagnostics = warden.check(source.value, FILE);
  paintEditor();
  showDiagnostics();
  if (panel === "trace") runTrace();
  else runTests();
  saveToUrl();
}

function debounce(f, ms) {
  let t;
  return () => {
    clearTimeout(t);
    t = setTimeout(f, ms);
  };
}

async function loadSample() {
  const [policy, sample] = await Promise.all(
    ["samples/policy.ward", "samples/trace.jsonl"].map((p) => fetch(p).then((r) => (r.ok ? r.text() : ""))));
  source.value = policy;
  trace.value = sample;
}

async function main() {
  const state = decodeFragment(currentFragment());
  if (state.policy !== undefined || state.trace !== undefined) {
    source.value = state.policy || "";
    trace.value = state.trace || "";
  } else {
    await loadSample();
  }
  if (state.panel) selectPanel(state.panel);
  paintEditor();
  try {
    warden = await init();
  } catch (e) {
    setStatus(`The WebAssembly module did not load: ${e.message || e}`, true);
    return;
  }
  setStatus(state.errors.length ? state.errors.join("; ") : "ready: everything runs in this page", state.errors.length > 0);
  const later = debounce(update, 150);
  source.addEventListener("input", () => {
    paintEditor();
    later();
  });
  source.addEventListener("scroll", syncScroll);
  source.addEventListener("keydown", (e) => {
    if (e.key === "Tab" && !e.shiftKey && !e.ctrlKey && !e.metaKey) {
      e.preventDefault();
      const { selectionStart: a, selectionEnd: b } = source;
      source.setRangeText("  ", a, b, "end");
      paintEditor();
      later();
    }
  });
  trace.addEventListener("input", debounce(() => {
    if (panel === "trace") runTrace();
    saveToUrl();
  }, 250));
  $("tab-trace").addEventListener("click", () => { selectPanel("trace"); update(); });
  $("tab-tests").addEventListener("click", () => { selectPanel("tests"); update(); });
  $("run-tests").addEventListener("click", runTests);
  $("format").addEventListener("click", () => {
    try {
      source.value = warden.fmt(source.value);
      update();
    } catch (e) {
      setStatus("Not formatted: the policy does not parse (see the diagnostics).", true);
    }
  });
  $("sample").addEventListener("click", async () => {
    await loadSample();
    update();
  });
  $("share").addEventListener("click", async () => {
    saveToUrl();
    try {
      await navigator.clipboard.writeText(window.location.href);
      setStatus("link copied: it holds the policy and the trace");
    } catch (_) {
      setStatus("the link is in the address bar: it holds the policy and the trace");
    }
  });
  window.addEventListener("hashchange", () => {
    const s = decodeFragment(currentFragment());
    if (s.policy !== undefined && s.policy !== source.value) source.value = s.policy;
    if (s.trace !== undefined && s.trace !== trace.value) trace.value = s.trace;
    update();
  });
  update();
  document.body.dataset.ready = "true";
}

function currentFragment() {
  return window.location.hash || "";
}

main();
