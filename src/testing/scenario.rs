//! Running one test: its steps become ACS request envelopes, sent in order to a fresh
//! [`Guardian`]; each decision is checked against the step's expectation. `docs/testing.md`
//! says what each step sends.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::value::{json_kind, Constants};
use super::{Coverage, Failure, Suite, TestResult, TestStatus, TraceRule};
use crate::acs::envelope::{self, DecodeOptions, Modifications, Response};
use crate::acs::{crypto, fields, ids, time, DecisionKind};
use crate::compile::json_const;
use crate::diagnostics::{Code, Diagnostic, FileId, Span};
use crate::guardian::{self, Guardian, Policy, RuleTrace};
use crate::syntax::ast::{
    CallArg, Expectation, Expr, Hook, Ident, Modification, Output, PlaceSegment, ProvenanceSpec,
    Step, StepKind, StringLit, Test,
};

/// Unix seconds of the first step's timestamp (2026-01-01T00:00:00Z); each envelope is one
/// second later than the one before.
const BASE_UNIX: i64 = 1_767_225_600;

const UNTRUSTED_ORIGINS: [&str; 4] = ["tool_output", "retrieved", "a2a_inbound", "external"];
use crate::acs::fields::ORIGINS;

/// A decision as the test sees it.
#[derive(Debug, Clone)]
pub(super) struct Decided {
    kind: DecisionKind,
    codes: Vec<String>,
    mods: Option<Modifications>,
}

enum Answer {
    Decided(Decided),
    Error(String),
}

struct Sent {
    method: String,
    request_id: String,
    answer: Answer,
    traces: Vec<RuleTrace>,
}

impl Sent {
    fn proceeds(&self) -> bool {
        matches!(&self.answer, Answer::Decided(d) if d.kind.proceeds())
    }
}

/// Content that entered a session: what later `from …` clauses derive from.
struct Content {
    id: String,
    origin: String,
    source: Option<String>,
}

struct Session {
    id: String,
    /// Prefix of turn ids (`t` at the top, `NAME-t` in a subagent).
    turn_prefix: String,
    turn: u32,
    parent_turn: Option<String>,
    content: Vec<Content>,
    last_user: Option<String>,
    last_call: HashMap<String, String>,
    committed: Vec<String>,
    memory: HashMap<String, (Value, Value)>,
    started: bool,
    steps: u64,
    /// The request id of the latest `ask` (what an `approve` step grants).
    last_ask: Option<String>,
}

impl Session {
    fn new(id: String, turn_prefix: String, parent_turn: Option<String>) -> Self {
        Session {
            id,
            turn_prefix,
            turn: 1,
            parent_turn,
            content: Vec::new(),
            last_user: None,
            last_call: HashMap::new(),
            committed: Vec::new(),
            memory: HashMap::new(),
            started: false,
            steps: 0,
            last_ask: None,
        }
    }

    fn turn_id(&self) -> String {
        format!("{}{}", self.turn_prefix, self.turn)
    }

    fn latest(&self, pred: impl Fn(&Content) -> bool) -> Option<&Content> {
        self.content.iter().rev().find(|c| pred(c))
    }
}

fn describe_decided(d: &Decided) -> String {
    let mut s = d.kind.as_str().to_string();
    for c in &d.codes {
        s.push_str(&format!(" \"{c}\""));
    }
    if let Some(m) = &d.mods {
        let mut parts = Vec::new();
        for r in &m.redactions {
            parts.push(format!(
                "redact {} with \"{}\"",
                r.path,
                r.effective_replacement()
            ));
        }
        for (k, v) in &m.parameter_overrides {
            parts.push(format!("set args.{k} = {v}"));
        }
        if let Some(c) = &m.modified_content {
            parts.push(format!("replace with {}", Value::String(c.clone())));
        }
        if !parts.is_empty() {
            s.push_str(&format!(" {{ {} }}", parts.join(", ")));
        }
    }
    s
}

/// Runs one test of a suite.
pub(super) fn run_test(suite: &Suite, test: &Test, color: bool) -> TestResult {
    let started = time::Stopwatch::start();
    let mut run = Run::new(suite, test, color);
    let outcome = run.prepare().and_then(|()| run.steps());
    if let Err(message) = outcome {
        let span = run.current.unwrap_or(test.span);
        run.test_error(span, &message);
    }
    let status = if run.failures.is_empty() {
        TestStatus::Passed
    } else {
        TestStatus::Failed
    };
    TestResult {
        file: suite.display.clone(),
        name: test.name.value.clone(),
        status,
        steps: run.checked_steps,
        failures: run.failures,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        coverage: run.coverage,
    }
}

struct Run<'s> {
    suite: &'s Suite,
    test: &'s Test,
    color: bool,
    consts: Constants<'s>,
    guardian: Option<Guardian>,
    metadata_mock: Map<String, Value>,
    intent_mock: Option<Value>,
    seq: u64,
    failures: Vec<Failure>,
    coverage: Coverage,
    checked_steps: usize,
    /// The step being run (where a test error points).
    current: Option<Span>,
}

impl<'s> Run<'s> {
    fn new(suite: &'s Suite, test: &'s Test, color: bool) -> Self {
        Run {
            suite,
            test,
            color,
            consts: Constants::new(&suite.checked),
            guardian: None,
            metadata_mock: Map::new(),
            intent_mock: None,
            seq: 0,
            failures: Vec::new(),
            coverage: Coverage::default(),
            checked_steps: 0,
            current: None,
        }
    }

    fn file(&self) -> FileId {
        self.suite.test_file
    }

    fn source_text(&self, span: Span) -> String {
        let text = &self.suite.checked.loaded.sources.get(self.file()).text;
        text.get(span.range()).unwrap_or("").to_string()
    }

    /// Reads the `with` mocks (they apply to the whole test) and builds the Guardian.
    fn prepare(&mut self) -> Result<(), String> {
        let mut overrides = HashMap::new();
        for step in &self.test.steps {
            let StepKind::With { target, value } = &step.kind else {
                continue;
            };
            self.current = Some(step.span);
            let path = self.source_text(target.span);
            let path = path.trim();
            let v = self
                .consts
                .json(value)
                .map_err(|e| format!("the value of the mock `with {path}` is not constant: {e}"))?;
            let root = path.split('.').next().unwrap_or("");
            if path == "intent" {
                self.intent_mock = Some(match v {
                    Value::String(raw) => json!({ "raw": raw }),
                    Value::Object(mut o) => {
                        if o.contains_key("parsed") && !o.contains_key("parser_provenance") {
                            o.insert(
                                "parser_provenance".into(),
                                json!({"provenance_id": "p-intent-mock", "origin": "user_input"}),
                            );
                        }
                        Value::Object(o)
                    }
                    other => {
                        return Err(format!(
                            "`with intent as …` needs a string or an object, not {}",
                            json_kind(&other)
                        ))
                    }
                });
            } else if let Some(rest) = path.strip_prefix("metadata.") {
                let mut cur = &mut self.metadata_mock;
                let parts: Vec<&str> = rest.split('.').collect();
                for (i, part) in parts.iter().enumerate() {
                    if i + 1 == parts.len() {
                        cur.insert(part.to_string(), v.clone());
                    } else {
                        let next = cur
                            .entry(part.to_string())
                            .or_insert_with(|| Value::Object(Map::new()));
                        if !next.is_object() {
                            *next = Value::Object(Map::new());
                        }
                        cur = next.as_object_mut().expect("an object");
                    }
                }
            } else if root == "rego" || self.suite.rego_aliases.iter().any(|a| a == root) {
                return Err(format!(
                    "cannot mock `{path}`: Rego rules and data are not mocked; tests run the imported Rego itself (rules that read only `data` are folded when the policy loads, the others are evaluated by the Rego engine at each decision). Change the Rego files, or mock the `let` constant that uses the Rego value"
                ));
            } else if !path.contains('.') && self.consts.contains(path) {
                let original = self.suite.const_json(path);
                if let Some(orig) = original {
                    if json_kind(&orig) != json_kind(&v) {
                        return Err(format!(
                            "the mock `with {path}` gives {} but the constant is {}",
                            json_kind(&v),
                            json_kind(&orig)
                        ));
                    }
                }
                overrides.insert(path.to_string(), json_const(&v));
            } else {
                return Err(format!(
                    "cannot mock `{path}`: a mock replaces a `let` constant, `intent`, or a `metadata.…` field"
                ));
            }
        }
        self.current = None;
        let policy = if overrides.is_empty() {
            self.suite.policy.clone()
        } else {
            let mut program = crate::compile::compile_with(&self.suite.checked, &overrides)
                .map_err(|d| {
                    let first = d.first().map(|d| d.message.clone()).unwrap_or_default();
                    format!("the policy does not compile with these mocks: {first}")
                })?;
            self.suite.adjust(&mut program);
            Policy::from_program(program).with_sources(self.suite.checked.loaded.sources.clone())
        };
        self.guardian = Some(Guardian::with_options(
            policy,
            guardian::Options {
                explain: true,
                ..guardian::Options::default()
            },
        ));
        Ok(())
    }

    fn steps(&mut self) -> Result<(), String> {
        let test = self.test;
        if let Some(fixture) = &test.fixture {
            return self.fixture(&fixture.value, &test.steps);
        }
        let mut session = Session::new(
            ids::v4_from_seed(&format!(
                "{}::{}::session",
                self.suite.display, test.name.value
            )),
            "t".into(),
            None,
        );
        self.run_steps(&mut session, &test.steps)
    }

    fn run_steps(&mut self, s: &mut Session, steps: &[Step]) -> Result<(), String> {
        for step in steps {
            self.current = Some(step.span);
            self.step(s, step)?;
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Sending

    fn send(&mut self, s: &mut Session, method: &str, payload: Value) -> Sent {
        self.send_in_turn(s, method, payload, true)
    }

    fn send_in_turn(
        &mut self,
        s: &mut Session,
        method: &str,
        payload: Value,
        with_turn: bool,
    ) -> Sent {
        self.seq += 1;
        s.steps += 1;
        let request_id = ids::v4_from_seed(&format!(
            "{}::{}::{}::{}",
            self.suite.display, self.test.name.value, s.id, self.seq
        ));
        let mut metadata = Map::new();
        metadata.insert("agent_id".into(), json!("warden-test"));
        metadata.insert("session_id".into(), json!(s.id));
        if with_turn {
            metadata.insert("turn_id".into(), json!(s.turn_id()));
            if let Some(p) = &s.parent_turn {
                metadata.insert("parent_turn_id".into(), json!(p));
            }
        }
        for (k, v) in &self.metadata_mock {
            metadata.insert(k.clone(), v.clone());
        }
        let envelope = envelope::request(
            self.seq,
            method,
            &request_id,
            &time::rfc3339(BASE_UNIX + self.seq as i64),
            Value::Object(metadata),
            payload,
        );
        let bytes = serde_json::to_vec(&envelope).unwrap_or_default();
        let sent = self.deliver(method, &request_id, &bytes);
        if sent.proceeds() {
            s.committed.push(request_id);
        } else if matches!(&sent.answer, Answer::Decided(d) if d.kind == DecisionKind::Ask) {
            s.last_ask = Some(request_id);
        }
        sent
    }

    /// Decodes the envelope as a Guardian would and decides it, with the explain trace.
    fn deliver(&mut self, method: &str, request_id: &str, bytes: &[u8]) -> Sent {
        let guardian = self.guardian.as_ref().expect("prepared");
        let known = |m: &str| guardian::is_known_method(m);
        let opts = DecodeOptions {
            known_method: Some(&known),
            ..DecodeOptions::default()
        };
        let (response, traces) = match envelope::decode_request_with(bytes, &opts) {
            Ok((req, _)) => guardian.decide_traced(&req),
            Err(resp) => (*resp, Vec::new()),
        };
        self.coverage.record(&traces);
        Sent {
            method: method.to_string(),
            request_id: request_id.to_string(),
            answer: answer(&response),
            traces,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Checking

    fn test_error(&mut self, span: Span, message: &str) {
        let d = Diagnostic::error(Code::TestError, self.file(), span, message.to_string())
            .with_label("this test cannot run");
        let rendered =
            crate::diagnostics::render(&self.suite.checked.loaded.sources, &d, self.color);
        let (line, column) = self.line_col(span);
        self.failures.push(Failure {
            step: self.first_line(span),
            file: self.suite.display.clone(),
            line,
            column,
            method: None,
            request_id: None,
            expected: None,
            actual: None,
            message: message.to_string(),
            fired: Vec::new(),
            trace: Vec::new(),
            rendered,
        });
    }

    fn line_col(&self, span: Span) -> (usize, usize) {
        let (l, c) = self
            .suite
            .checked
            .loaded
            .sources
            .get(self.file())
            .line_col(span.start as usize);
        (l, c)
    }

    fn first_line(&self, span: Span) -> String {
        self.source_text(span)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    }

    /// Checks one decision against an expectation (or, without one, against `strict`).
    fn check(&mut self, span: Span, expect: Option<&Expectation>, sent: &Sent) {
        self.checked_steps += 1;
        let problem = match (&sent.answer, expect) {
            (Answer::Error(e), _) => Some(format!("the Guardian answered a JSON-RPC error: {e}")),
            (Answer::Decided(d), Some(exp)) => self.mismatch(exp, d),
            (Answer::Decided(d), None) if self.test.strict && d.kind != DecisionKind::Allow => Some(format!(
                "this strict test expects every step without an expectation to be allowed, but it was {}",
                d.kind.as_str()
            )),
            (Answer::Decided(_), None) => None,
        };
        let Some(message) = problem else { return };
        let expected = match expect {
            Some(e) => Some(self.expectation_text(e)),
            None if self.test.strict => Some("allow (strict)".to_string()),
            None => None,
        };
        let actual = match &sent.answer {
            Answer::Decided(d) => describe_decided(d),
            Answer::Error(e) => format!("error: {e}"),
        };
        self.fail(span, message, expected, Some(actual), Some(sent));
    }

    fn fail(
        &mut self,
        span: Span,
        message: String,
        expected: Option<String>,
        actual: Option<String>,
        sent: Option<&Sent>,
    ) {
        let label = match (&expected, &actual) {
            (Some(e), Some(a)) => format!("expected {e}, got {a}"),
            (None, Some(a)) => format!("got {a}"),
            (Some(e), None) => format!("expected {e}"),
            (None, None) => "this step failed".to_string(),
        };
        let message = format!(
            "step `{}` of test \"{}\": {message}",
            self.first_line(span),
            self.test.name.value
        );
        let mut d = Diagnostic::error(Code::TestFailed, self.file(), span, message.clone())
            .with_label(label);
        if let Some(sent) = sent {
            d = d.with_help(format!(
                "sent {} (request_id {})",
                sent.method, sent.request_id
            ));
        }
        let trace = sent.map(|s| self.trace(&s.traces)).unwrap_or_default();
        let fired: Vec<String> = trace
            .iter()
            .filter(|r| r.fired)
            .map(|r| r.rule.clone())
            .collect();
        let mut rendered =
            crate::diagnostics::render(&self.suite.checked.loaded.sources, &d, self.color);
        if let Some(e) = &expected {
            rendered.push_str(&format!("    expected: {e}\n"));
        }
        if let Some(a) = &actual {
            rendered.push_str(&format!("    actual:   {a}\n"));
        }
        if sent.is_some() {
            rendered.push_str(&format!(
                "    rules that fired: {}\n",
                if fired.is_empty() {
                    "none".to_string()
                } else {
                    fired.join(", ")
                }
            ));
            if !trace.is_empty() {
                rendered.push_str("    explain:\n");
                for r in &trace {
                    rendered.push_str(&format!(
                        "      {} {}\n",
                        r.rule,
                        if r.fired { "fired" } else { "did not fire" }
                    ));
                    for c in &r.checks {
                        rendered.push_str(&format!("        {} → {}", c.text, c.outcome()));
                        if !c.values.is_empty() {
                            rendered.push_str(&format!("   {}", c.operands_text()));
                        }
                        rendered.push('\n');
                    }
                }
            }
        }
        let (line, column) = self.line_col(span);
        // What the decision masked stays masked in the report too: the step's own text (a
        // test writes the secret it sends) and everything around it.
        let masked: Vec<String> = sent
            .map(|s| {
                s.traces
                    .iter()
                    .flat_map(|t| t.masked.iter().cloned())
                    .collect()
            })
            .unwrap_or_default();
        let mask = |t: String| guardian::explain::scrub_text(&t, &masked);
        self.failures.push(Failure {
            step: mask(self.first_line(span)),
            file: self.suite.display.clone(),
            line,
            column,
            method: sent.map(|s| s.method.clone()),
            request_id: sent.map(|s| s.request_id.clone()),
            expected: expected.map(mask),
            actual: actual.map(mask),
            message: mask(message),
            fired,
            trace,
            rendered: mask(rendered),
        });
    }

    fn trace(&self, traces: &[RuleTrace]) -> Vec<TraceRule> {
        guardian::explain::rules(
            traces,
            self.suite.policy.program(),
            &self.suite.checked.loaded.sources,
        )
    }

    fn expectation_text(&self, e: &Expectation) -> String {
        let t = self.source_text(e.span);
        let t = t.trim();
        t.strip_prefix("=>").unwrap_or(t).trim().to_string()
    }

    fn mismatch(&self, exp: &Expectation, d: &Decided) -> Option<String> {
        if exp.kind != d.kind {
            return Some(format!(
                "expected {}, but the decision was {}",
                exp.kind.as_str(),
                d.kind.as_str()
            ));
        }
        let missing: Vec<String> = exp
            .codes
            .iter()
            .filter(|c| !d.codes.contains(&c.value))
            .map(|c| format!("\"{}\"", c.value))
            .collect();
        if !missing.is_empty() {
            return Some(format!(
                "the decision is {} but lacks the reason code(s) {}",
                d.kind.as_str(),
                missing.join(", ")
            ));
        }
        let empty = Modifications::default();
        let mods = d.mods.as_ref().unwrap_or(&empty);
        for m in &exp.modifications {
            match m {
                Modification::Redact {
                    place, replacement, ..
                } => {
                    if let Some(why) = self.redaction_mismatch(mods, place, replacement.as_ref()) {
                        return Some(why);
                    }
                }
                Modification::RedactEach { .. } => {
                    return Some(
                        "an expectation names each redacted place (`redact args.x`), not \
                         `redact each`"
                            .to_string(),
                    )
                }
                Modification::Set { place, value, .. } => {
                    let arg = match place.segments.get(1) {
                        Some(PlaceSegment::Field(id)) => id.name.clone(),
                        _ => String::new(),
                    };
                    let want = match self.consts.json(value) {
                        Ok(v) => v,
                        Err(e) => {
                            return Some(format!(
                                "the expected value of args.{arg} is not constant: {e}"
                            ))
                        }
                    };
                    match mods.parameter_overrides.get(&arg) {
                        None => return Some(format!("the modification does not set args.{arg}")),
                        Some(v) if !json_equal(v, &want) => {
                            return Some(format!(
                                "the modification sets args.{arg} to {v}, not {want}"
                            ))
                        }
                        Some(_) => {}
                    }
                }
                Modification::Replace { content, .. } => {
                    let want = match self.consts.json(content) {
                        Ok(v) => v,
                        Err(e) => {
                            return Some(format!("the expected replacement is not constant: {e}"))
                        }
                    };
                    match &mods.modified_content {
                        None => {
                            return Some(
                                "the modification does not replace the content".to_string(),
                            )
                        }
                        Some(c) if want.as_str() != Some(c.as_str()) => {
                            return Some(format!(
                                "the content is replaced with {:?}, not {want}",
                                c
                            ))
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        None
    }

    /// Whether the answer redacts `place` (with the expected replacement, when one is given).
    fn redaction_mismatch(
        &self,
        mods: &Modifications,
        place: &crate::syntax::ast::Place,
        replacement: Option<&crate::syntax::ast::Expr>,
    ) -> Option<String> {
        let p = place.pointer();
        let Some(r) = mods.redactions.iter().find(|r| r.path == p) else {
            return Some(format!("the modification does not redact {p}"));
        };
        let want = match replacement.map(|e| self.consts.json(e)) {
            None => return None,
            Some(Ok(Value::String(w))) => w,
            Some(Ok(other)) => {
                return Some(format!("the expected replacement {other} is not a string"))
            }
            Some(Err(e)) => return Some(format!("the expected replacement is not constant: {e}")),
        };
        (r.effective_replacement() != want).then(|| {
            format!(
                "{p} is redacted with \"{}\", not \"{want}\"",
                r.effective_replacement()
            )
        })
    }

    // -----------------------------------------------------------------------------------------
    // Provenance

    fn fresh_id(&mut self, s: &Session) -> String {
        self.seq_prov(s)
    }

    fn seq_prov(&self, s: &Session) -> String {
        format!(
            "p-{}-{}-{}",
            s.turn_prefix,
            self.seq,
            s.content.len() + s.steps as usize
        )
    }

    /// The provenance of a value, from an optional origin word (`-> ORIGIN`) and an optional
    /// `from` clause; `default_origin` when neither says.
    fn provenance(
        &mut self,
        s: &mut Session,
        origin: Option<&str>,
        from: Option<&ProvenanceSpec>,
        source: Option<&str>,
        salt: &str,
    ) -> Result<Value, String> {
        let id = format!("{}-{salt}", self.fresh_id(s));
        let mut prov = Map::new();
        prov.insert("provenance_id".into(), json!(id));
        match from {
            Some(spec) => {
                let word = spec.origin.name.as_str();
                let src = spec.source.as_ref().map(|x| x.value.as_str());
                let parent = match word {
                    "user" | "trusted" if src.is_none() => s.last_user.clone().or_else(|| {
                        s.latest(|c| c.origin == "user_input" || c.origin == "system")
                            .map(|c| c.id.clone())
                    }),
                    "untrusted" => s
                        .latest(|c| {
                            UNTRUSTED_ORIGINS.contains(&c.origin.as_str())
                                && src.is_none_or(|x| c.source.as_deref() == Some(x))
                        })
                        .map(|c| c.id.clone()),
                    w => {
                        let w = canonical_origin(w)?;
                        s.latest(|c| {
                            c.origin == w && src.is_none_or(|x| c.source.as_deref() == Some(x))
                        })
                        .map(|c| c.id.clone())
                    }
                };
                match parent {
                    Some(p) => {
                        prov.insert("origin".into(), json!(origin.unwrap_or("agent_generated")));
                        prov.insert("derived_from".into(), json!([p]));
                    }
                    None => {
                        let o = match word {
                            "user" | "trusted" => "user_input",
                            "untrusted" => "tool_output",
                            w => canonical_origin(w)?,
                        };
                        prov.insert("origin".into(), json!(origin.unwrap_or(o)));
                        if let Some(x) = src.or(source) {
                            prov.insert("source_id".into(), json!(x));
                        }
                    }
                }
            }
            None => match origin {
                Some(o) => {
                    prov.insert("origin".into(), json!(o));
                    if let Some(x) = source {
                        prov.insert("source_id".into(), json!(x));
                    }
                }
                None => {
                    prov.insert("origin".into(), json!("agent_generated"));
                    if let Some(u) = &s.last_user {
                        prov.insert("derived_from".into(), json!([u]));
                    }
                }
            },
        }
        Ok(Value::Object(prov))
    }

    /// The provenance of a call argument (or a list argument's element) with the sources its
    /// `from` clause names: none (taken from the user's latest message), one, or several
    /// (`from [user, tool_output "crm"]`: derived from the latest content of each).
    fn argument_provenance(
        &mut self,
        s: &mut Session,
        from: &[ProvenanceSpec],
        salt: &str,
    ) -> Result<Value, String> {
        match from {
            [] => self.provenance(s, None, None, None, salt),
            [f] if f.origin.name == "agent_generated" && f.source.is_none() => {
                let parent = s
                    .latest(|c| c.origin == "agent_generated")
                    .map(|c| c.id.clone());
                let mut p = self.provenance(s, Some("agent_generated"), None, None, salt)?;
                if let (Some(parent), Some(o)) = (parent, p.as_object_mut()) {
                    o.insert("derived_from".into(), json!([parent]));
                }
                Ok(p)
            }
            [f] => self.provenance(s, None, Some(f), None, salt),
            many => {
                let mut parents = Vec::new();
                for f in many {
                    let p = self.provenance(s, None, Some(f), None, salt)?;
                    match p.get("derived_from").and_then(Value::as_array) {
                        Some(d) => parents.extend(d.iter().cloned()),
                        None => {
                            return Err(format!(
                                "`from [..]` names {}{}, but no such content came earlier in \
                                 this test to take the value from",
                                f.origin.name,
                                f.source
                                    .as_ref()
                                    .map(|x| format!(" \"{}\"", x.value))
                                    .unwrap_or_default()
                            ))
                        }
                    }
                }
                let id = format!("{}-{salt}", self.fresh_id(s));
                Ok(
                    json!({"provenance_id": id, "origin": "agent_generated", "derived_from": parents}),
                )
            }
        }
    }

    /// Sends a step that brings content in, remembers the content if the step went ahead, and
    /// checks the answer against the expectation.
    fn send_content(
        &mut self,
        s: &mut Session,
        method: &str,
        payload: Value,
        prov: &Value,
        span: Span,
        expect: Option<&Expectation>,
    ) {
        let sent = self.send(s, method, payload);
        if sent.proceeds() {
            Self::remember(s, prov);
        }
        self.check(span, expect, &sent);
    }

    /// Remembers the content a step brought in (only once the step went ahead).
    fn remember(s: &mut Session, prov: &Value) {
        let id = prov
            .get("provenance_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let origin = prov
            .get("origin")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let source = prov
            .get("source_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        if origin == "user_input" {
            s.last_user = Some(id.clone());
        }
        s.content.push(Content { id, origin, source });
    }

    /// The origin of a step's output: `untrusted` is the step's natural untrusted origin,
    /// `trusted` is `user_input`, an ACS origin is itself.
    fn output_origin(out: &Output, natural: &str) -> Result<String, String> {
        Ok(match out.origin.as_ref().map(|i| i.name.as_str()) {
            None | Some("untrusted") => natural.to_string(),
            Some("trusted") | Some("user") => "user_input".to_string(),
            Some(w) => canonical_origin(w)?.to_string(),
        })
    }

    // -----------------------------------------------------------------------------------------
    // Steps

    fn ensure_session(&mut self, s: &mut Session, span: Span) {
        if s.started || self.intent_mock.is_none() {
            return;
        }
        s.started = true;
        let intent = self.intent_mock.clone().unwrap_or(Value::Null);
        let sent = self.send(s, "steps/sessionStart", json!({ "intent": intent }));
        if !sent.proceeds() {
            self.check(span, None, &sent);
        }
    }

    /// Runs one step: each kind of step is its own function below, which builds the
    /// envelope(s) the step sends and checks the answer against the step's expectation
    /// (docs/testing.md, "Steps and what they send").
    fn step(&mut self, s: &mut Session, step: &Step) -> Result<(), String> {
        let span = step.span;
        let expect = step.expect.as_ref();
        if !matches!(step.kind, StepKind::With { .. } | StepKind::Session { .. }) {
            self.ensure_session(s, span);
        }
        match &step.kind {
            StepKind::With { .. } => Ok(()),
            StepKind::Session {
                intent,
                permits,
                strict,
            } => self.session_start(s, span, expect, intent.as_ref(), permits.as_ref(), *strict),
            StepKind::User(text) => self.user_message(s, span, expect, text),
            StepKind::Agent { text, from } => {
                self.agent_response(s, span, expect, text, from.as_ref())
            }
            StepKind::Call { tool, args, output } => {
                self.tool_call(s, span, expect, tool, args, output.as_ref())
            }
            StepKind::Result {
                tool,
                status,
                output,
            } => self.tool_result(s, span, expect, tool, status.as_deref(), output),
            StepKind::Retrieve { query, output } => {
                self.knowledge_retrieval(s, span, expect, query, output)
            }
            StepKind::Memory {
                write: true,
                key,
                output,
                from,
            } => self.memory_store(s, span, expect, key, output.as_ref(), from.as_ref()),
            StepKind::Memory {
                write: false,
                key,
                output,
                from,
            } => self.memory_retrieval(s, span, expect, key, output.as_ref(), from.as_ref()),
            StepKind::Compact => self.compact(s, span, expect),
            StepKind::Turn => self.next_turn(s, span, expect),
            StepKind::Skill {
                op,
                skill_id,
                digest,
            } => self.skill(s, span, expect, op, skill_id, digest.as_ref()),
            StepKind::Subagent { name, steps } => self.subagent(s, span, expect, name, steps),
            StepKind::Send { hook, payload } => self.send_raw(s, span, expect, hook, payload),
            StepKind::Approve { approver } => self.approve(s, span, approver.as_ref()),
            StepKind::Expect { .. } => {
                Err("`expect \"request-id\"` steps belong in a fixture test: `test \"…\" from \"trace.jsonl\" { … }`".into())
            }
        }
    }

    /// `session [intent "…"] [permits …] [strict]`: `steps/sessionStart` with the Intent (or
    /// the mocked one).
    fn session_start(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        intent: Option<&StringLit>,
        permits: Option<&Expr>,
        strict: bool,
    ) -> Result<(), String> {
        s.started = true;
        let mut payload = Map::new();
        if let Some(mock) = &self.intent_mock {
            payload.insert("intent".into(), mock.clone());
        } else if intent.is_some() || permits.is_some() || strict {
            let mut i = Map::new();
            if let Some(raw) = intent {
                i.insert("raw".into(), json!(raw.value));
            }
            if let Some(p) = permits {
                let parsed = self.consts.json(p)?;
                i.insert("parsed".into(), parsed);
                i.insert(
                    "parser_provenance".into(),
                    json!({"provenance_id": format!("p-intent-{}", s.turn_prefix), "origin": "user_input"}),
                );
            }
            if strict {
                i.insert("scope_mode".into(), json!("strict"));
            }
            payload.insert("intent".into(), Value::Object(i));
        }
        let sent = self.send(s, "steps/sessionStart", Value::Object(payload));
        self.check(span, expect, &sent);
        Ok(())
    }

    /// `user "…"`: `steps/userMessage`, the text with `user_input` provenance.
    fn user_message(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        text: &StringLit,
    ) -> Result<(), String> {
        let prov = self.provenance(s, Some("user_input"), None, None, "user")?;
        let payload =
            json!({"content": [{"type": "text", "value": text.value, "provenance": prov}]});
        self.send_content(s, "steps/userMessage", payload, &prov, span, expect);
        Ok(())
    }

    /// `agent "…" [from …]`: `steps/agentResponse`.
    fn agent_response(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        text: &StringLit,
        from: Option<&ProvenanceSpec>,
    ) -> Result<(), String> {
        let prov = match from {
            // `from agent_generated` is the model's own earlier output; other sources as for a
            // call's argument.
            Some(f) => self.argument_provenance(s, std::slice::from_ref(f), "agent")?,
            None => {
                let mut p = self.provenance(s, Some("agent_generated"), None, None, "agent")?;
                if let Some(o) = p.as_object_mut() {
                    o.remove("source_id");
                }
                p
            }
        };
        let payload =
            json!({"content": [{"type": "text", "value": text.value, "provenance": prov}]});
        self.send_content(s, "steps/agentResponse", payload, &prov, span, expect);
        Ok(())
    }

    /// `call TOOL(args…) [-> output]`: `steps/toolCallRequest`, then, if the call goes ahead
    /// and an output is given, its `steps/toolCallResult`.
    fn tool_call(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        tool: &Ident,
        args: &[CallArg],
        output: Option<&Output>,
    ) -> Result<(), String> {
        let arguments = self.call_arguments(s, args)?;
        let payload = json!({"tool": {"name": tool.name}, "arguments": arguments});
        let sent = self.send(s, "steps/toolCallRequest", payload);
        s.last_call
            .insert(tool.name.clone(), sent.request_id.clone());
        self.check(span, expect, &sent);
        if let Some(out) = output {
            if sent.proceeds() {
                let origin = Self::output_origin(out, "tool_output")?;
                self.result(
                    s,
                    span,
                    &tool.name,
                    Some(&sent.request_id),
                    "success",
                    out,
                    &origin,
                )?;
            } else if let Some(e) = &out.expect {
                let what = match &sent.answer {
                    Answer::Decided(d) => d.kind.as_str().to_string(),
                    Answer::Error(_) => "an error".to_string(),
                };
                self.checked_steps += 1;
                let exp = self.expectation_text(e);
                self.fail(
                    span,
                    format!(
                        "the call was answered {what}, so it never ran and its result was not sent"
                    ),
                    Some(exp),
                    Some("no result (the call did not run)".into()),
                    Some(&sent),
                );
            }
        }
        Ok(())
    }

    /// A call's `arguments`: each `{value, provenance}`, with per-element provenance for a
    /// list written `[x from SPEC, y]`.
    fn call_arguments(
        &mut self,
        s: &mut Session,
        args: &[CallArg],
    ) -> Result<Map<String, Value>, String> {
        let mut arguments = Map::new();
        for (i, a) in args.iter().enumerate() {
            let value = self.consts.json(&a.value)?;
            let mut prov = self.argument_provenance(s, &a.from, &format!("arg{i}"))?;
            if !a.element_from.is_empty() {
                let mut records = Vec::new();
                let mut parents = Vec::new();
                for (j, from) in a.element_from.iter().enumerate() {
                    if from.is_empty() {
                        records.push(Value::Null);
                        continue;
                    }
                    let r = self.argument_provenance(s, from, &format!("arg{i}.{j}"))?;
                    if let Some(p) = r.get("derived_from").and_then(Value::as_array) {
                        parents.extend(p.iter().cloned());
                    }
                    records.push(r);
                }
                if let Some(o) = prov.as_object_mut() {
                    // Unless said otherwise, the list was taken from its elements' sources.
                    if a.from.is_empty() && !parents.is_empty() {
                        o.insert("origin".into(), json!("agent_generated"));
                        o.insert("derived_from".into(), Value::Array(parents));
                    }
                    o.insert("elements".into(), Value::Array(records));
                }
            }
            arguments.insert(
                a.name.name.clone(),
                json!({"value": value, "provenance": prov}),
            );
        }
        Ok(arguments)
    }

    /// `result TOOL [status] -> output`: `steps/toolCallResult` for the tool's last call.
    fn tool_result(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        tool: &Ident,
        status: Option<&str>,
        output: &Output,
    ) -> Result<(), String> {
        let origin = Self::output_origin(output, "tool_output")?;
        let req = s.last_call.get(&tool.name).cloned();
        let status = status.unwrap_or("success");
        let mut out = output.clone();
        out.expect = expect.cloned().or(out.expect);
        self.result(s, span, &tool.name, req.as_deref(), status, &out, &origin)
    }

    /// `retrieve "query" -> output`: `steps/knowledgeRetrieval`, one result.
    fn knowledge_retrieval(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        query: &StringLit,
        output: &Output,
    ) -> Result<(), String> {
        let origin = Self::output_origin(output, "retrieved")?;
        let qprov = self.provenance(s, None, None, None, "query")?;
        let value = self.consts.json(&output.value)?;
        let rprov = self.provenance(s, Some(&origin), None, Some("knowledge"), "doc")?;
        let payload = json!({
            "query": {"value": query.value, "provenance": qprov},
            "results": [{"value": value, "source_id": "knowledge", "provenance": rprov}],
        });
        self.send_content(
            s,
            "steps/knowledgeRetrieval",
            payload,
            &rprov,
            span,
            expect.or(output.expect.as_ref()),
        );
        Ok(())
    }

    /// `memory write "key" [-> output] [from …]`: `steps/memoryStore`; the session remembers
    /// the value for a later read.
    fn memory_store(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        key: &StringLit,
        output: Option<&Output>,
        from: Option<&ProvenanceSpec>,
    ) -> Result<(), String> {
        let value = match output {
            Some(o) => self.consts.json(&o.value)?,
            None => Value::String(String::new()),
        };
        let origin = match output.and_then(|o| o.origin.as_ref()) {
            Some(_) => Some(Self::output_origin(output.expect("some"), "tool_output")?),
            None => None,
        };
        let prov = self.provenance(s, origin.as_deref(), from, Some(&key.value), "mem")?;
        let payload = json!({
            "memory_id": key.value,
            "memory_store": {"name": "default"},
            "content": {"value": value, "provenance": prov},
        });
        let sent = self.send(s, "steps/memoryStore", payload);
        if sent.proceeds() {
            Self::remember(s, &prov);
            s.memory.insert(key.value.clone(), (value, prov));
        }
        self.check(span, expect, &sent);
        Ok(())
    }

    /// `memory read "key" [-> output] [from …]`: `steps/memoryContextRetrieval`, by default
    /// of what was written under the key.
    fn memory_retrieval(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        key: &StringLit,
        output: Option<&Output>,
        from: Option<&ProvenanceSpec>,
    ) -> Result<(), String> {
        let stored = s.memory.get(&key.value).cloned();
        let (value, prov) = match (output, stored) {
            (Some(o), Some((_, prov))) if o.origin.is_none() && from.is_none() => {
                (self.consts.json(&o.value)?, prov)
            }
            (Some(o), _) => {
                let origin = Self::output_origin(o, "retrieved")?;
                let value = self.consts.json(&o.value)?;
                (
                    value,
                    self.provenance(s, Some(&origin), from, Some(&key.value), "mem")?,
                )
            }
            (None, Some((v, prov))) if from.is_none() => (v, prov),
            (None, stored) => (
                stored.map_or(Value::String(String::new()), |(v, _)| v),
                self.provenance(s, Some("retrieved"), from, Some(&key.value), "mem")?,
            ),
        };
        let payload = json!({
            "query": {"value": key.value},
            "memory_store": {"name": "default"},
            "results": [{"memory_id": key.value, "value": value, "provenance": prov}],
        });
        self.send_content(
            s,
            "steps/memoryContextRetrieval",
            payload,
            &prov,
            span,
            expect,
        );
        Ok(())
    }

    /// `compact`: `steps/preCompact` over the committed steps, then, if it goes ahead,
    /// `steps/postCompact` with a summary.
    fn compact(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
    ) -> Result<(), String> {
        let entries = s.committed.clone();
        let mut origins: Vec<&str> = Vec::new();
        for c in &s.content {
            if !origins.contains(&c.origin.as_str()) {
                origins.push(c.origin.as_str());
            }
        }
        let origins: Vec<String> = origins.iter().map(|o| o.to_string()).collect();
        let pre = json!({
            "entries_to_compact": entries,
            "pre_compact_provenance_summary": {"origins_seen": origins, "entry_count": entries.len()},
        });
        let sent = self.send(s, "steps/preCompact", pre);
        if !sent.proceeds() {
            self.check(span, expect, &sent);
            return Ok(());
        }
        let prov = json!({"provenance_id": format!("{}-summary", self.fresh_id(s)), "origin": "agent_generated"});
        let seed = format!("{}{}", s.id, self.seq);
        let post = json!({
            "summary": {"value": format!("a summary of {} entries", entries.len()), "provenance": prov},
            "entries_compacted": entries,
            "pre_compact_chain_hash": crypto::sha256_hex(format!("{seed}pre").as_bytes()),
            "post_compact_chain_hash": crypto::sha256_hex(format!("{seed}post").as_bytes()),
        });
        self.send_content(s, "steps/postCompact", post, &prov, span, expect);
        Ok(())
    }

    /// `turn`: `steps/turnEnd` of the open turn, then `steps/turnStart` of the next.
    fn next_turn(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
    ) -> Result<(), String> {
        let end = self.send(
            s,
            "steps/turnEnd",
            json!({"turn_id": s.turn_id(), "outcome": "completed"}),
        );
        if let Answer::Error(_) = end.answer {
            self.check(span, expect, &end);
            return Ok(());
        }
        s.turn += 1;
        let mut payload = json!({"turn_id": s.turn_id(), "triggered_by": "user_message"});
        if let Some(p) = &s.parent_turn {
            payload["parent_turn_id"] = json!(p);
        }
        let sent = self.send(s, "steps/turnStart", payload);
        self.check(span, expect, &sent);
        Ok(())
    }

    /// `skill register|load|unload "id" [digest "…"]`: `steps/skillRegister`, `steps/skillLoad`
    /// or `steps/skillUnload`.
    fn skill(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        op: &str,
        skill_id: &StringLit,
        digest: Option<&StringLit>,
    ) -> Result<(), String> {
        let digest = match digest {
            Some(d) => match d.value.split_once(':') {
                Some((alg, v)) => json!({"algorithm": alg, "value": v}),
                None => json!({"algorithm": "sha256", "value": d.value}),
            },
            None => {
                json!({"algorithm": "sha256", "value": crypto::sha256_hex(skill_id.value.as_bytes())})
            }
        };
        let (method, payload) = match op {
            "register" => (
                "steps/skillRegister",
                json!({"skill_id": skill_id.value, "definition": {"digest": digest}, "declared_capabilities": []}),
            ),
            "load" => (
                "steps/skillLoad",
                json!({"skill_id": skill_id.value, "digest": digest, "load_path": [{"skill_id": skill_id.value}]}),
            ),
            _ => ("steps/skillUnload", json!({"skill_id": skill_id.value})),
        };
        let sent = self.send(s, method, payload);
        self.check(span, expect, &sent);
        Ok(())
    }

    /// `subagent "name" { steps }`: `steps/subagentStart`, the child's steps in its own
    /// session, then `steps/subagentStop` with a summary derived from what the child read.
    fn subagent(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        name: &StringLit,
        steps: &[Step],
    ) -> Result<(), String> {
        let child_id =
            ids::v4_from_seed(&format!("{}::subagent::{}::{}", s.id, name.value, self.seq));
        let start = json!({
            "subagent_session_id": child_id,
            "parent_session_id": s.id,
            "parent_step_id": s.committed.last().cloned().unwrap_or_default(),
        });
        let sent = self.send(s, "steps/subagentStart", start);
        if !sent.proceeds() {
            self.check(span, expect, &sent);
            return Ok(());
        }
        let mut child = Session::new(
            child_id.clone(),
            format!("{}-t", name.value),
            Some(s.turn_id()),
        );
        child.started = true;
        self.run_steps(&mut child, steps)?;
        // The summary is derived from what the subagent read that the parent cannot
        // vouch for: unknown lineage in the parent's session, so never clean.
        let read: Vec<String> = child
            .content
            .iter()
            .filter(|c| UNTRUSTED_ORIGINS.contains(&c.origin.as_str()))
            .map(|c| c.id.clone())
            .collect();
        let mut prov = json!({"provenance_id": format!("{}-subagent", self.fresh_id(s)), "origin": "agent_generated"});
        if !read.is_empty() {
            prov["derived_from"] = json!(read);
        }
        let stop = json!({
            "subagent_session_id": child_id,
            "summary": {"value": format!("{} finished", name.value), "provenance": prov},
            "subagent_step_count": child.steps,
        });
        let stopped = self.send(s, "steps/subagentStop", stop);
        if stopped.proceeds() {
            Self::remember(s, &prov);
        }
        // The expectation is about starting the subagent.
        let _ = stopped;
        self.check(span, expect, &sent);
        Ok(())
    }

    /// `send HOOK { payload }`: the payload as written, on the hook's method.
    fn send_raw(
        &mut self,
        s: &mut Session,
        span: Span,
        expect: Option<&Expectation>,
        hook: &Hook,
        payload: &Expr,
    ) -> Result<(), String> {
        let Some(spec) = crate::acs::fields::hook(&hook.name) else {
            return Err(format!("unknown hook `{}`", hook.name));
        };
        let payload = self.consts.json(payload)?;
        let sent = self.send(s, spec.method, payload.clone());
        if sent.proceeds() {
            for p in fields::provenance_records(&payload) {
                Self::remember(s, p);
            }
            if spec.method == "steps/sessionStart" {
                s.started = true;
            }
        }
        self.check(span, expect, &sent);
        Ok(())
    }

    /// `approve [as "ID"]`: grants the session's latest ask through the Guardian (no envelope).
    fn approve(
        &mut self,
        s: &mut Session,
        span: Span,
        approver: Option<&StringLit>,
    ) -> Result<(), String> {
        let Some(ask) = s.last_ask.take() else {
            return Err("`approve`: this session has no ask to approve yet".into());
        };
        let guardian = self.guardian.as_ref().expect("prepared");
        let at_ms = (BASE_UNIX + self.seq as i64) * 1000;
        let who = match approver {
            Some(a) => a.value.clone(),
            None => guardian
                .approvals(Some(at_ms))
                .into_iter()
                .find(|i| i.request_id == ask)
                .map(|i| i.approval.approver_id.clone())
                .unwrap_or_default(),
        };
        self.checked_steps += 1;
        if let Err(e) = guardian.approve(&ask, &who, Some(at_ms)) {
            self.fail(
                span,
                format!("the approval was refused: {e}"),
                None,
                None,
                None,
            );
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn result(
        &mut self,
        s: &mut Session,
        span: Span,
        tool: &str,
        request: Option<&str>,
        status: &str,
        out: &Output,
        origin: &str,
    ) -> Result<(), String> {
        let value = self.consts.json(&out.value)?;
        let prov = self.provenance(s, Some(origin), None, Some(tool), "out")?;
        let mut payload = json!({
            "tool": {"name": tool},
            "exit_status": status,
            "outputs": [{"value": value, "provenance": prov}],
        });
        if let Some(r) = request {
            payload["request_id_ref"] = json!(r);
        }
        self.send_content(
            s,
            "steps/toolCallResult",
            payload,
            &prov,
            span,
            out.expect.as_ref(),
        );
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Fixtures

    fn fixture(&mut self, path: &str, steps: &[Step]) -> Result<(), String> {
        let dir = self.suite.test_dir.clone();
        let full = dir.join(path);
        let text = std::fs::read_to_string(&full)
            .map_err(|e| format!("cannot read the trace {}: {e}", full.display()))?;
        let mut by_id: HashMap<String, usize> = HashMap::new();
        let mut sent: Vec<Sent> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let mut v: Value = serde_json::from_str(line)
                .map_err(|e| format!("{}:{}: not JSON: {e}", full.display(), n + 1))?;
            let request_id = v["params"]["request_id"].as_str().unwrap_or("").to_string();
            let method = v["method"].as_str().unwrap_or("").to_string();
            if !self.metadata_mock.is_empty() {
                if let Some(m) = v["params"]["metadata"].as_object_mut() {
                    for (k, val) in &self.metadata_mock {
                        m.insert(k.clone(), val.clone());
                    }
                }
            }
            if let Some(intent) = &self.intent_mock {
                if matches!(method.as_str(), "steps/sessionStart" | "steps/agentTrigger") {
                    if let Some(p) = v["params"]["payload"].as_object_mut() {
                        p.insert("intent".into(), intent.clone());
                    }
                }
            }
            let bytes = serde_json::to_vec(&v).unwrap_or_default();
            let idx = sent.len();
            if let Some(id) = v.get("id") {
                let key = match id {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                by_id.entry(format!("#id:{key}")).or_insert(idx);
            }
            if !request_id.is_empty() {
                by_id.insert(request_id.clone(), idx);
            }
            sent.push(self.deliver(&method, &request_id, &bytes));
        }
        let mut expected = vec![false; sent.len()];
        for step in steps {
            self.current = Some(step.span);
            match &step.kind {
                StepKind::With { .. } => {}
                StepKind::Expect { request_id } => {
                    let idx = by_id
                        .get(&request_id.value)
                        .or_else(|| by_id.get(&format!("#id:{}", request_id.value)))
                        .copied();
                    let Some(idx) = idx else {
                        self.checked_steps += 1;
                        self.fail(
                            step.span,
                            format!(
                                "the trace has no request with request_id or id \"{}\"",
                                request_id.value
                            ),
                            step.expect.as_ref().map(|e| self.expectation_text(e)),
                            None,
                            None,
                        );
                        continue;
                    };
                    expected[idx] = true;
                    let s = std::mem::replace(
                        &mut sent[idx],
                        Sent {
                            method: String::new(),
                            request_id: String::new(),
                            answer: Answer::Error(String::new()),
                            traces: Vec::new(),
                        },
                    );
                    self.check(step.span, step.expect.as_ref(), &s);
                    sent[idx] = s;
                }
                _ => return Err("a fixture test holds only `expect` and `with` steps".into()),
            }
        }
        // Errors and, in a strict test, any decision other than allow fail on the test line.
        for (i, s) in sent.iter().enumerate() {
            if expected[i] {
                continue;
            }
            let bad = match &s.answer {
                Answer::Error(_) => true,
                Answer::Decided(d) => self.test.strict && d.kind != DecisionKind::Allow,
            };
            if bad {
                self.check(self.test.name.span, None, s);
            }
        }
        Ok(())
    }
}

fn json_equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn canonical_origin(w: &str) -> Result<&'static str, String> {
    ORIGINS.iter().copied().find(|o| *o == w).ok_or_else(|| {
        format!(
            "unknown origin `{w}`: use user, trusted, untrusted or one of {}",
            ORIGINS.join(", ")
        )
    })
}

fn answer(r: &Response) -> Answer {
    if let Some(e) = r.as_error() {
        return Answer::Error(format!("{} {}", e.code, e.message));
    }
    match r.as_result() {
        Some(res) => Answer::Decided(Decided {
            kind: res.decision,
            codes: res.reason_codes.clone(),
            mods: res.modifications.clone(),
        }),
        None => Answer::Error("empty response".into()),
    }
}
