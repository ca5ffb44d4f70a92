//! Explain traces (`warden replay --explain`, `warden serve --explain`, `Options::explain`):
//! every rule that ran, where it is and what it says, and each check it made — comparisons,
//! `has`, quantifiers and builtin calls — with its location, its text, its result, its operands'
//! values and the labels they carry. The format is documented in docs/explain.md.
//!
//! Values of content that carries a `redact` label, and values at `mask` paths, never appear:
//! `Secrets` collects them from the event and `redact` replaces them (and anything that
//! contains them) by `[redacted]` before a trace leaves the decision.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::decide::Decision;
use super::RuleTrace;
use crate::compile::{self, Program};
use crate::diagnostics::{SourceFile, SourceMap, Span};
use crate::state::Draft;
use crate::vm::{self, Observation, Probe};

/// What stands in for a masked value.
pub const REDACTED: &str = "[redacted]";

/// The longest rendering of one value, in bytes; a longer one is cut and says how much is left
/// out.
pub const MAX_VALUE_BYTES: usize = 4096;

/// Renders a value of a trace: compact JSON, `undefined` for no value, and a masked value as
/// `[redacted]`. Beyond [`MAX_VALUE_BYTES`] the text is cut (at a character boundary) and ends
/// with `…(N more bytes)`.
pub fn render_value(v: Option<&Value>) -> String {
    let text = match v {
        None => return "undefined".into(),
        Some(Value::String(s)) if s == REDACTED => return REDACTED.into(),
        Some(v) => v.to_string(),
    };
    if text.len() <= MAX_VALUE_BYTES {
        return text;
    }
    let mut cut = MAX_VALUE_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…({} more bytes)", &text[..cut], text.len() - cut)
}

/// What must not appear in a trace: the values of content carrying a `redact` label and the
/// values at `mask` paths, as JSON values and as the texts inside them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Secrets {
    values: Vec<Value>,
    texts: Vec<String>,
    /// `texts`, lower-cased: a value matches a secret whatever its case.
    lower: Vec<String>,
}

impl Secrets {
    /// The secrets of one event.
    pub(crate) fn of(program: &Program, state: &Draft<'_>, payload: &Value) -> Secrets {
        let mut s = Secrets::default();
        let mask = program
            .labels
            .iter()
            .filter(|l| l.redact)
            .fold(0u64, |m, l| m | (1u64 << l.bit));
        if mask != 0 {
            s.collect_redacted(program, state, payload, mask, 0);
        }
        // `mask` paths: the value there (a tool argument's value, if it is one).
        for path in &program.masked {
            let mut v = Some(payload);
            for seg in path {
                v = v.and_then(|x| match seg {
                    compile::Seg::Key(k) => x.get(&**k),
                    compile::Seg::Index(n) => x.get(*n),
                });
            }
            if let Some(v) = v {
                let v = v
                    .get("value")
                    .filter(|_| v.get("provenance").is_some() || path.len() == 2)
                    .unwrap_or(v);
                s.add(v);
            }
        }
        s
    }

    /// Adds the values at the places a step's `modify` rules redact ([`Decision::redacted`],
    /// read from the payload): what a `modify` hides is a secret wherever else it would show.
    pub(crate) fn with_redactions(mut self, payload: &Value, places: &[String]) -> Self {
        for place in places {
            if let Some(v) = payload.pointer(place) {
                self.add(v);
            }
        }
        self
    }

    /// A canonical JSON text with every secret in it masked (the JSON re-rendered canonically);
    /// text that is not JSON is masked as text.
    pub(crate) fn mask_canonical(&self, canonical: &str) -> String {
        if self.is_empty() {
            return canonical.to_string();
        }
        match serde_json::from_str::<Value>(canonical) {
            Ok(mut v) => {
                self.scrub(&mut v, 0);
                crate::acs::jcs::canonicalize(&v)
            }
            Err(_) => scrub_text(canonical, &self.texts),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty() && self.texts.is_empty()
    }

    fn add(&mut self, v: &Value) {
        if !self.values.contains(v) {
            self.values.push(v.clone());
        }
        self.add_texts(v, 0);
    }

    fn add_texts(&mut self, v: &Value, depth: usize) {
        if depth > 64 {
            return;
        }
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Array(a) => {
                a.iter().for_each(|x| self.add_texts(x, depth + 1));
                return;
            }
            Value::Object(m) => {
                m.values().for_each(|x| self.add_texts(x, depth + 1));
                return;
            }
            Value::Bool(_) | Value::Null => return,
        };
        if !text.is_empty() && !self.texts.contains(&text) {
            self.lower.push(text.to_lowercase());
            self.texts.push(text);
        }
    }

    fn collect_redacted(
        &mut self,
        program: &Program,
        state: &Draft<'_>,
        v: &Value,
        mask: u64,
        depth: usize,
    ) {
        if depth > 64 {
            return;
        }
        match v {
            Value::Object(m) => {
                if let (Some(value), Some(_)) = (m.get("value"), m.get("provenance")) {
                    // The label it carries, or one its direct sources carry (declared or
                    // inferred): a value taken from secret content is that secret.
                    let carrier = vm::Val::Json(v);
                    let labels = state.labels_of(program, &carrier).unwrap_or(0);
                    let sources = state.node_of(program, &carrier).map_or(0, |n| n.source_any);
                    if (labels | sources) & mask != 0 {
                        self.add(value);
                    }
                }
                for child in m.values() {
                    self.collect_redacted(program, state, child, mask, depth + 1);
                }
            }
            Value::Array(a) => {
                for child in a {
                    self.collect_redacted(program, state, child, mask, depth + 1);
                }
            }
            _ => {}
        }
    }

    /// Whether `text` shows a secret: it contains one (in any case), or, for a string of at
    /// least 4 characters, is part of one (a `domain(…)` of a secret URL).
    fn leaks(&self, text: &str, string: bool) -> bool {
        let lower = text.to_lowercase();
        self.lower.iter().any(|t| {
            occurs(&lower, t) || (string && lower.chars().count() >= 4 && t.contains(&lower))
        })
    }

    /// Masks `v` where it is or contains a secret. Returns whether anything was masked.
    fn scrub(&self, v: &mut Value, depth: usize) -> bool {
        if self.values.contains(v) {
            *v = Value::String(REDACTED.into());
            return true;
        }
        let leaf = match v {
            Value::String(s) => self.leaks(s, true),
            Value::Number(n) => self.leaks(&n.to_string(), false),
            Value::Bool(_) | Value::Null => false,
            Value::Array(a) => {
                if depth > 64 {
                    true
                } else {
                    let mut any = false;
                    for x in a.iter_mut() {
                        any |= self.scrub(x, depth + 1);
                    }
                    return any;
                }
            }
            Value::Object(m) => {
                if depth > 64 || m.keys().any(|k| self.leaks(k, true)) {
                    true
                } else {
                    let mut any = false;
                    for x in m.values_mut() {
                        any |= self.scrub(x, depth + 1);
                    }
                    return any;
                }
            }
        };
        if leaf {
            *v = Value::String(REDACTED.into());
        }
        leaf
    }

    /// The texts to mask in source text shown next to the trace.
    pub(crate) fn texts(&self) -> Arc<[String]> {
        self.texts.clone().into()
    }
}

/// A tool call's arguments as `{name: value}` (each argument's `value`, without its
/// provenance), with what an explain trace would mask masked: values carrying a `redact`
/// label, values at `mask` paths, values the step's `modify` rules redact, and anything
/// containing them. `None` when the payload has no `arguments` object. Decision logs record
/// this.
pub(crate) fn masked_arguments(
    program: &Program,
    state: &Draft<'_>,
    payload: &Value,
    redacted: &[String],
) -> Option<Value> {
    let args = payload.get("arguments")?.as_object()?;
    let secrets = Secrets::of(program, state, payload).with_redactions(payload, redacted);
    let mut out = Map::new();
    for (name, a) in args {
        let mut v = match a {
            Value::Object(m) if m.contains_key("value") => m["value"].clone(),
            other => other.clone(),
        };
        if !secrets.is_empty() {
            secrets.scrub(&mut v, 0);
        }
        out.insert(name.clone(), v);
    }
    Some(Value::Object(out))
}

/// A tool call's arguments as `{name: "[redacted]"}`: every value masked (a failed decision's
/// log record, when the policy redacts anything). `None` without an `arguments` object.
pub(crate) fn all_masked(payload: &Value) -> Option<Value> {
    let args = payload.get("arguments")?.as_object()?;
    Some(Value::Object(
        args.keys()
            .map(|k| (k.clone(), Value::String(REDACTED.into())))
            .collect(),
    ))
}

/// Whether a call made from a secret returns a secret: a string computed from one
/// (`lower`, `domain`, `string`, a Rego function) is one; a number or a boolean (a length, a
/// test) is shown, as a comparison's result is.
fn derived_secret(o: &Observation, secrets: &Secrets) -> bool {
    // A kind word (`type_of`'s answer) says what a value is, not what it holds; a secret that
    // is itself such a word stays masked as the secret it is.
    const KIND_WORDS: &[&str] = &["string", "number", "bool", "list", "object"];
    o.probe == Probe::Call
        && o.returned.as_ref().is_some_and(|r| {
            !r.is_boolean()
                && !r.is_number()
                && !r.as_str().is_some_and(|w| KIND_WORDS.contains(&w))
        })
        && o.operands.iter().any(|op| {
            op.value
                .as_ref()
                .is_some_and(|v| secrets.scrub(&mut v.clone(), 0))
        })
}

/// Masks every secret in the traces' values, and what calls computed from them.
pub(crate) fn redact(traces: &mut [RuleTrace], secrets: &Secrets) {
    if secrets.is_empty() {
        return;
    }
    // What calls computed from secrets is secret too, wherever it shows up in the trace
    // (`upper(args.password) == "X"` compares a secret).
    let mut secrets = secrets.clone();
    loop {
        let derived: Vec<Value> = traces
            .iter()
            .flat_map(|t| &t.observations)
            .filter(|o| derived_secret(o, &secrets))
            .filter_map(|o| o.returned.clone())
            .filter(|r| !secrets.values.contains(r))
            .collect();
        if derived.is_empty() {
            break;
        }
        derived.iter().for_each(|r| secrets.add(r));
    }
    let texts = secrets.texts();
    for t in traces {
        t.masked = texts.clone();
        for o in &mut t.observations {
            for operand in &mut o.operands {
                if let Some(v) = &mut operand.value {
                    secrets.scrub(v, 0);
                }
            }
            if let Some(v) = &mut o.returned {
                secrets.scrub(v, 0);
            }
        }
    }
}

/// `text` with every occurrence of a masked text replaced by `[redacted]` (ignoring ASCII
/// case when both are ASCII).
pub fn scrub_text(text: &str, masked: &[String]) -> String {
    let mut out = text.to_string();
    for m in masked.iter().filter(|m| !m.is_empty()) {
        if out.is_ascii() && m.is_ascii() {
            let (hay, needle) = (out.to_ascii_lowercase(), m.to_ascii_lowercase());
            let mut next = String::with_capacity(out.len());
            let (mut at, mut from) = (0, 0);
            while let Some(i) = hay[from..].find(&needle).map(|i| from + i) {
                from = i + needle.len();
                if !standalone(&hay, i, needle.len()) {
                    continue;
                }
                next.push_str(&out[at..i]);
                next.push_str(REDACTED);
                at = from;
            }
            next.push_str(&out[at..]);
            out = next;
        } else if out.contains(m.as_str()) {
            out = out.replace(m.as_str(), REDACTED);
        }
    }
    out
}

/// Secrets shorter than this are masked only where they stand alone (not inside a longer word
/// or number): a one-letter secret would otherwise mask that letter everywhere.
const SHORT_SECRET: usize = 4;

/// Whether the `len` bytes at `i` of `hay` are an occurrence worth masking: any occurrence of
/// a secret of [`SHORT_SECRET`] bytes or more; a shorter one only between non-alphanumerics.
fn standalone(hay: &str, i: usize, len: usize) -> bool {
    if len >= SHORT_SECRET {
        return true;
    }
    let before = hay[..i].chars().next_back();
    let after = hay[i + len..].chars().next();
    !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
}

/// Whether `hay` shows the secret `needle` ([`standalone`] for short ones).
fn occurs(hay: &str, needle: &str) -> bool {
    hay.match_indices(needle)
        .any(|(i, _)| standalone(hay, i, needle.len()))
}

/// The source text of a span, comments dropped and whitespace runs collapsed to one space (a
/// span that ends an item, such as a predicate's body, runs over the comments after it).
pub fn span_text(file: &SourceFile, span: Span) -> String {
    let t = file.text.get(span.range()).unwrap_or("");
    let mut rest = t.to_string();
    for c in crate::syntax::trivia::scan(t, usize::MAX)
        .comments
        .iter()
        .rev()
    {
        rest.replace_range(c.span.range(), " ");
    }
    rest.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `kind` of a check in the JSON form.
pub fn probe_name(p: Probe) -> &'static str {
    match p {
        Probe::Compare => "compare",
        Probe::Has => "has",
        Probe::Any => "any",
        Probe::All => "all",
        Probe::Call => "call",
    }
}

/// One check of an explained rule, ready to show.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// `file:line:column` (1-based; the column counts characters), or the byte range when the
    /// policy's sources are not at hand.
    pub at: String,
    /// The checked expression's source text, whitespace collapsed.
    pub text: String,
    /// What kind of check it was.
    pub probe: Probe,
    /// The truth value of a comparison, `has` or quantifier (`None`: undefined).
    pub result: Option<bool>,
    /// What a call returned, rendered (calls only).
    pub returned: Option<String>,
    /// The operands, rendered: a comparison's two sides, `has`'s value, a quantifier's
    /// collection and the element that decided it, a call's arguments.
    pub values: Vec<String>,
    /// Per operand, the labels it carries (`None`: no provenance); empty when no operand carries
    /// provenance.
    pub labels: Vec<Option<Vec<String>>>,
}

impl Check {
    fn new(
        program: &Program,
        file: Option<&SourceFile>,
        masked: &[String],
        o: &Observation,
    ) -> Check {
        let (at, text) = match file {
            Some(f) => {
                let (line, column) = f.line_col(o.span.start as usize);
                (
                    format!("{}:{line}:{column}", f.name),
                    scrub_text(&span_text(f, o.span), masked),
                )
            }
            None => (format!("{}..{}", o.span.start, o.span.end), String::new()),
        };
        let labels = if o.operands.iter().any(|op| op.labels.is_some()) {
            o.operands
                .iter()
                .map(|op| {
                    op.labels.map(|bits| {
                        program
                            .label_names(bits)
                            .into_iter()
                            .map(str::to_string)
                            .collect()
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        Check {
            at,
            text,
            probe: o.probe,
            result: o.result,
            returned: (o.probe == Probe::Call).then(|| render_value(o.returned.as_ref())),
            values: o
                .operands
                .iter()
                .map(|op| render_value(op.value.as_ref()))
                .collect(),
            labels,
        }
    }

    /// The result as one word: `true`, `false`, `undefined`, or what a call returned.
    pub fn outcome(&self) -> String {
        match (&self.returned, self.result) {
            (Some(r), _) => r.clone(),
            (None, Some(b)) => b.to_string(),
            (None, None) => "undefined".into(),
        }
    }

    /// The operands as one line: `["x" {untrusted}, 3]`.
    pub fn operands_text(&self) -> String {
        let parts: Vec<String> = self
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| match self.labels.get(i) {
                Some(Some(l)) => format!("{v} {{{}}}", l.join(", ")),
                _ => v.clone(),
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }

    /// The check as explain's JSON shows it.
    pub fn to_json(&self) -> Value {
        let mut c = Map::new();
        c.insert("at".into(), self.at.clone().into());
        c.insert("kind".into(), probe_name(self.probe).into());
        c.insert("text".into(), self.text.clone().into());
        match &self.returned {
            Some(r) => c.insert("returned".into(), r.clone().into()),
            None => c.insert("result".into(), self.result.into()),
        };
        c.insert("values".into(), self.values.clone().into());
        if !self.labels.is_empty() {
            c.insert(
                "labels".into(),
                self.labels
                    .iter()
                    .map(|l| l.clone().map_or(Value::Null, Value::from))
                    .collect(),
            );
        }
        Value::Object(c)
    }
}

impl serde::Serialize for Check {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

/// One rule of an explain trace, ready to show.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// `module.rule`.
    pub rule: String,
    /// Whether the rule fired.
    pub fired: bool,
    /// Where the rule is declared (`None` when the policy's sources are not at hand).
    pub file: Option<String>,
    /// The line of the declaration (1-based).
    pub line: usize,
    /// Its column (1-based, in characters).
    pub column: usize,
    /// The rule's declaration as written.
    pub text: Option<String>,
    /// Its checks, in the order they ran.
    pub checks: Vec<Check>,
}

impl Rule {
    /// The rule as explain's JSON shows it.
    pub fn to_json(&self) -> Value {
        let mut r = Map::new();
        r.insert("rule".into(), self.rule.clone().into());
        r.insert("fired".into(), self.fired.into());
        if let Some(file) = &self.file {
            r.insert("file".into(), file.clone().into());
            r.insert("line".into(), self.line.into());
            r.insert("column".into(), self.column.into());
        }
        if let Some(text) = &self.text {
            r.insert("text".into(), text.clone().into());
        }
        r.insert(
            "checks".into(),
            self.checks.iter().map(Check::to_json).collect(),
        );
        Value::Object(r)
    }
}

impl serde::Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

/// The traces of one decision, with locations and source text from `sources`.
pub fn rules(traces: &[RuleTrace], program: &Program, sources: &SourceMap) -> Vec<Rule> {
    traces
        .iter()
        .map(|t| {
            let file = sources.iter().find(|(i, _)| *i == t.file).map(|(_, f)| f);
            let (line, column) = file.map_or((0, 0), |f| f.line_col(t.span.start as usize));
            Rule {
                rule: t.rule.clone(),
                fired: t.fired,
                file: file.map(|f| f.name.clone()),
                line,
                column,
                text: file.map(|f| {
                    scrub_text(f.text.get(t.span.range()).unwrap_or("").trim(), &t.masked)
                }),
                checks: t
                    .observations
                    .iter()
                    .map(|o| Check::new(program, file, &t.masked, o))
                    .collect(),
            }
        })
        .collect()
}

/// `policy_data.warden`: the rules that fired, and every rule that ran with its checks.
pub(crate) fn to_json(
    decision: &Decision,
    traces: &[RuleTrace],
    program: &Program,
    sources: &SourceMap,
) -> Value {
    let rules: Vec<Value> = rules(traces, program, sources)
        .iter()
        .map(Rule::to_json)
        .collect();
    let mut out = serde_json::json!({"fired": decision.fired, "rules": rules});
    if !decision.unverified_claims.is_empty() {
        // A platform's claim that the user wrote content whose text the user never said.
        out["unverified_claims"] = serde_json::json!(decision.unverified_claims);
    }
    out
}
