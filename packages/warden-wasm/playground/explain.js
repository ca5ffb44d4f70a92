// What the playground shows of one replayed request, as plain data (no DOM; Node tests it):
// the decision and its reason codes, the rules that fired with file:line, every rule that ran
// with its checks and the labels their operands carry (from the explain trace the Guardian
// attaches, `result.policy_data.warden`, docs/explain.md), and, for a tool call, where each
// argument came from: its provenance, followed back through the records earlier lines of the
// trace introduced.

// Provenance records seen so far in a trace: provenance_id → {origin, source, value, line}.
export class ProvenanceIndex {
  constructor() {
    this.records = new Map();
  }

  // Notes every `{value, provenance: {provenance_id, …}}` inside a request's payload.
  add(request, line) {
    const payload = request && request.params && request.params.payload;
    const walk = (v, depth) => {
      if (depth > 32 || v === null || typeof v !== "object") return;
      if (v.provenance && typeof v.provenance === "object" && typeof v.provenance.provenance_id === "string") {
        const p = v.provenance;
        if (!this.records.has(p.provenance_id)) {
          this.records.set(p.provenance_id, {
            origin: p.origin,
            source: p.source_id,
            value: v.value,
            derivedFrom: Array.isArray(p.derived_from) ? p.derived_from : [],
            line,
          });
        }
      }
      for (const x of Array.isArray(v) ? v : Object.values(v)) walk(x, depth + 1);
    };
    walk(payload, 0);
  }

  // The chain behind one provenance id, nearest first, each id once.
  lineage(ids, limit = 16) {
    const out = [];
    const seen = new Set();
    const queue = [...ids];
    while (queue.length && out.length < limit) {
      const id = queue.shift();
      if (seen.has(id)) continue;
      seen.add(id);
      const r = this.records.get(id);
      out.push({ id, ...(r || { unknown: true }) });
      if (r) queue.push(...r.derivedFrom);
    }
    return out;
  }
}

const hookOf = (method) => String(method || "").replace(/^steps\//, "");

// The values a check saw, parsed back from their rendering where they are JSON.
function parseValue(text) {
  try {
    return JSON.parse(text);
  } catch (_) {
    return undefined;
  }
}

// One request and its response → what the page renders.
export function summarize(request, response, index, line) {
  const method = request && request.method;
  const payload = (request && request.params && request.params.payload) || {};
  const out = {
    line,
    method: method || null,
    hook: hookOf(method),
    tool: (payload.tool && payload.tool.name) || null,
    error: null,
    decision: null,
    codes: [],
    reasoning: "",
    fired: [],
    rules: [],
    arguments: [],
  };
  if (!response || response.error) {
    out.error = response ? `${response.error.code}: ${response.error.message}` : "no response";
    return out;
  }
  const r = response.result || {};
  out.decision = r.decision || null;
  out.codes = r.reason_codes || [];
  out.reasoning = r.reasoning || "";
  const warden = (r.policy_data && r.policy_data.warden) || {};
  const rules = warden.rules || [];
  out.rules = rules.map((rule) => ({
    rule: rule.rule,
    fired: !!rule.fired,
    file: rule.file,
    line: rule.line,
    column: rule.column,
    text: rule.text,
    checks: (rule.checks || []).map((c) => ({
      at: c.at,
      kind: c.kind,
      text: c.text,
      outcome: c.kind === "call" ? c.returned : c.result === null ? "undefined" : String(c.result),
      values: c.values || [],
      labels: c.labels || null,
    })),
  }));
  const where = new Map(rules.map((rule) => [rule.rule, rule]));
  out.fired = (warden.fired || []).map((name) => {
    const rule = where.get(name);
    return { rule: name, file: rule ? rule.file : null, line: rule ? rule.line : null };
  });
  // Labels the checks saw on each provenance record (an argument's labels, when a rule
  // looked at it).
  const labelsOf = new Map();
  for (const rule of rules) {
    for (const c of rule.checks || []) {
      (c.values || []).forEach((text, i) => {
        const labels = c.labels && c.labels[i];
        const v = parseValue(text);
        const id = v && v.provenance && v.provenance.provenance_id;
        if (id && Array.isArray(labels)) {
          const set = labelsOf.get(id) || new Set();
          labels.forEach((l) => set.add(l));
          labelsOf.set(id, set);
        }
      });
    }
  }
  const args = payload.arguments;
  if (args && typeof args === "object" && !Array.isArray(args)) {
    for (const [name, arg] of Object.entries(args)) {
      const carried = arg && typeof arg === "object" && arg.provenance && typeof arg.provenance === "object";
      const p = carried ? arg.provenance : null;
      const id = p && p.provenance_id;
      out.arguments.push({
        name,
        value: carried ? arg.value : arg,
        origin: p ? p.origin || null : null,
        source: p ? p.source_id || null : null,
        derivedFrom: p && Array.isArray(p.derived_from) ? index.lineage(p.derived_from) : [],
        labels: id && labelsOf.has(id) ? [...labelsOf.get(id)].sort() : [],
      });
    }
  }
  return out;
}

// A replay (`[{line, response}]`) and its trace text → one summary per request.
export function summarizeReplay(traceText, replayed) {
  const byLine = new Map(replayed.map((r) => [r.line, r.response]));
  const index = new ProvenanceIndex();
  const out = [];
  traceText.split("\n").forEach((text, i) => {
    const line = i + 1;
    if (!text.trim()) return;
    let request = null;
    try {
      request = JSON.parse(text);
    } catch (_) {
      /* the Guardian answered it with a parse error */
    }
    out.push(summarize(request, byLine.get(line), index, line));
    if (request) index.add(request, line);
  });
  return out;
}
