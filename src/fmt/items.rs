//! Items, decisions and test steps.

use super::expr::{flat, flat_modification, is_chain, El, P_POSTFIX};
use super::out::{self, quote};
use super::{Blanks, Printer};
use crate::diagnostics::Span;
use crate::syntax::ast::*;

fn hooks(hooks: &[Hook]) -> String {
    hooks
        .iter()
        .map(|h| h.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn path(p: &[Ident]) -> String {
    p.iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(".")
}

/// `from X`, or `from [X, Y]` for several sources; empty for none.
pub(super) fn sources(specs: &[ProvenanceSpec]) -> String {
    match specs {
        [] => String::new(),
        [one] => provenance(one),
        many => {
            let parts: Vec<String> = many
                .iter()
                .map(|p| provenance(p)["from ".len()..].to_string())
                .collect();
            format!("from [{}]", parts.join(", "))
        }
    }
}

pub(super) fn provenance(p: &ProvenanceSpec) -> String {
    let mut s = format!("from {}", p.origin.name);
    if let Some(src) = &p.source {
        s.push(' ');
        s.push_str(&quote(&src.value));
    }
    s
}

/// Rules and tests span several lines, so a blank line always sets them apart.
fn is_block(item: &Item) -> bool {
    matches!(item, Item::Rule(_) | Item::Test(_))
}

/// One clause of a decision after its reason, with where it was written.
struct Clause<'d> {
    at: u32,
    text: Option<String>,
    modification: Option<&'d Modification>,
}

fn clauses(d: &Decision) -> Vec<Clause<'_>> {
    let mut v = Vec::new();
    let mut text = |at: u32, s: String| {
        v.push(Clause {
            at,
            text: Some(s),
            modification: None,
        })
    };
    if let Some(a) = &d.approver {
        text(
            a.span.start,
            format!("approver {} {}", a.kind.as_str(), quote(&a.id.value)),
        );
    }
    if let Some(q) = &d.question {
        text(q.span.start, format!("question {}", quote(&q.value)));
    }
    if let Some(r) = &d.resolve {
        text(r.span.start, format!("resolve {}", r.name));
    }
    if let Some(b) = &d.because {
        text(b.span.start, format!("because {}", b.name));
    }
    if let Some(t) = &d.timeout {
        text(t.span.start, format!("timeout {}", out::duration(t)));
    }
    if let Some((k, s)) = &d.on_timeout {
        text(s.start, format!("else {}", k.as_str()));
    }
    if let Some(t) = &d.expires {
        text(t.span.start, format!("expires {}", out::duration(t)));
    }
    if let Some((scope, s)) = &d.extend {
        text(s.start, format!("extend intent {}", scope.as_str()));
    }
    for m in &d.modifications {
        v.push(Clause {
            at: m.span().start,
            text: None,
            modification: Some(m),
        });
    }
    v
}

fn decision_head(d: &Decision) -> String {
    let mut s = d.kind.as_str().to_string();
    if let Some(r) = &d.reason {
        s.push(' ');
        s.push_str(&quote(&r.code.value));
        if let Some(why) = &r.reasoning {
            s.push_str(": ");
            s.push_str(&quote(&why.value));
        }
    }
    s
}

fn flat_decision(src: &str, d: &Decision) -> String {
    let mut s = decision_head(d);
    for c in clauses(d) {
        s.push(' ');
        match (c.text, c.modification) {
            (Some(t), _) => s.push_str(&t),
            (None, Some(m)) => s.push_str(&flat_modification(src, m)),
            (None, None) => {}
        }
    }
    s
}

fn flat_expectation(src: &str, e: &Expectation) -> String {
    let mut s = format!("=> {}", e.kind.as_str());
    for c in &e.codes {
        s.push(' ');
        s.push_str(&quote(&c.value));
    }
    if !e.modifications.is_empty() {
        let mods: Vec<String> = e
            .modifications
            .iter()
            .map(|m| flat_modification(src, m))
            .collect();
        s.push_str(&format!(" {{{}}}", mods.join(", ")));
    }
    s
}

impl Printer<'_> {
    pub(super) fn module(&mut self, m: &Module) {
        let mut prev: Option<&Item> = None;
        for item in &m.items {
            let blanks = match prev {
                Some(p) if is_block(p) || is_block(item) => Blanks::Force,
                _ => Blanks::Keep,
            };
            self.anchor(item.span().start, 0, blanks);
            self.item(item);
            let end = self.code_end(item.span());
            self.flush(end, 0, Blanks::Drop);
            prev = Some(item);
        }
        self.flush(u32::MAX, 0, Blanks::Keep);
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Package(p) => self.out.push(&format!("package {}", path(&p.path))),
            Item::Mask(m) => self
                .out
                .push(&format!("mask {}", super::expr::place_text(&m.place))),
            Item::Effect(e) => {
                let tool = if e.tool_quoted {
                    quote(&e.tool.value)
                } else {
                    e.tool.value.clone()
                };
                let mut s = format!("effect {} for {tool}", e.name.name);
                if e.not_executed_on_error {
                    s.push_str(" not_executed_on_error");
                }
                match &e.lease {
                    Some(crate::syntax::ast::Lease::Turns(n)) => s.push_str(&format!(
                        " lease {n} {}",
                        if *n == 1 { "turn" } else { "turns" }
                    )),
                    Some(crate::syntax::ast::Lease::Time(d)) => {
                        s.push_str(&format!(" lease {}", super::out::duration(d)))
                    }
                    None => {}
                }
                let parts: Vec<String> = e.key.iter().map(|k| flat(self.src, k, 0, true)).collect();
                s.push_str(&format!(" = key({})", parts.join(", ")));
                self.out.push(&s);
            }
            Item::Tool(t) => {
                let name = if t.quoted {
                    quote(&t.name.value)
                } else {
                    t.name.value.clone()
                };
                let params: Vec<String> = t
                    .params
                    .iter()
                    .map(|p| {
                        let mut s = format!(
                            "{}{}: {}",
                            p.name.name,
                            if p.optional { "?" } else { "" },
                            p.ty
                        );
                        if let Some(role) = &p.role {
                            s.push_str(" as ");
                            s.push_str(&role.name);
                        }
                        s
                    })
                    .collect();
                let class = t
                    .class
                    .as_ref()
                    .map_or(String::new(), |c| format!(" as {}", c.name));
                self.out
                    .push(&format!("tool {name}({}){class}", params.join(", ")));
            }
            Item::Use(u) => {
                let mut s = match &u.kind {
                    UseKind::Module { path: p } => format!("use {}", path(p)),
                    UseKind::Rego { path: p } => format!("use rego {}", quote(&p.value)),
                    UseKind::RegoData { path: p } => format!("use rego data {}", quote(&p.value)),
                };
                if let Some(a) = &u.alias {
                    s.push_str(" as ");
                    s.push_str(&a.name);
                }
                self.out.push(&s);
            }
            Item::Let(l) => {
                self.out.push(&format!("let {} = ", l.name.name));
                self.expr(&l.value, 0, true, 0, 0);
            }
            Item::Pred(p) => {
                let params: Vec<String> = p
                    .params
                    .iter()
                    .map(|q| match &q.ty {
                        Some(t) => format!("{}: {}", q.name.name, t.name),
                        None => q.name.name.clone(),
                    })
                    .collect();
                self.out
                    .push(&format!("pred {}({}) =", p.name.name, params.join(", ")));
                // A body that does not fit: an `and`/`or` chain (or one after a comment) goes on
                // the next lines, its chain's operators at column 2 (as a rule's `and` under
                // `when`); any other body stays after `=` and breaks inside its own brackets,
                // as a `let`'s value does.
                let text = format!(" {}", flat(self.src, &p.body, 0, true));
                let head = Span::new(p.span.start as usize, p.body.span.start as usize);
                let comment_before = self.has_comment_between(head);
                if !comment_before && !self.has_comment_in(p.body.span) && self.fits(&text, 0) {
                    self.out.push(&text);
                } else if !comment_before && is_chain(&p.body).is_none() {
                    self.out.push(" ");
                    self.expr(&p.body, 0, true, 0, 0);
                } else {
                    self.anchor(p.body.span.start, 6, Blanks::Drop);
                    self.expr(&p.body, 0, true, 6, 0);
                }
            }
            Item::Label(l) => {
                self.out.push(&format!("label {}", l.name.name));
                if l.redact {
                    self.out.push(" redact");
                }
                if let Some(w) = &l.when {
                    let text = format!(" when {}", flat(self.src, w, 0, true));
                    if !self.has_comment_in(w.span) && self.fits(&text, 0) {
                        self.out.push(&text);
                    } else {
                        self.anchor(w.span.start, 2, Blanks::Drop);
                        self.out.push("when ");
                        self.expr(w, 0, true, 2, 0);
                    }
                }
            }
            Item::Rule(r) => {
                self.out
                    .push(&format!("rule {} on {}", r.name.name, hooks(&r.hooks)));
                if let Some(source) = &r.rego {
                    self.anchor(source.span.start, 2, Blanks::Drop);
                    self.out
                        .push(&format!("from rego {}", quote(&source.value)));
                    return;
                }
                if let Some(w) = &r.when {
                    self.anchor(w.span.start, 2, Blanks::Drop);
                    self.out.push("when ");
                    self.expr(w, 0, true, 2, 0);
                }
                self.anchor(r.decision.span.start, 2, Blanks::Drop);
                self.out.push("=> ");
                self.decision(&r.decision, 2);
            }
            Item::Default(d) => {
                self.out.push("default ");
                if !d.hooks.is_empty() {
                    self.out.push(&format!("on {} ", hooks(&d.hooks)));
                }
                self.decision(&d.decision, 0);
            }
            Item::Test(t) => {
                self.out.push(&format!("test {}", quote(&t.name.value)));
                if t.strict {
                    self.out.push(" strict");
                }
                if let Some(f) = &t.fixture {
                    self.out.push(&format!(" from {}", quote(&f.value)));
                }
                self.block(&t.steps, t.span, 0);
            }
        }
    }

    /// A decision: on one line if it fits, else its clauses one per line under it.
    fn decision(&mut self, d: &Decision, indent: usize) {
        let text = flat_decision(self.src, d);
        if !self.has_comment_in(d.span) && self.fits(&text, 0) {
            self.out.push(&text);
            return;
        }
        self.out.push(&decision_head(d));
        for c in clauses(d) {
            self.anchor(c.at, indent + 2, Blanks::Drop);
            match (c.text, c.modification) {
                (Some(t), _) => self.out.push(&t),
                (None, Some(m)) => self.modification(m, indent + 2),
                (None, None) => {}
            }
        }
    }

    /// ` { steps }` of a test or a subagent; `span` ends just past the closing brace.
    fn block(&mut self, steps: &[Step], span: Span, indent: usize) {
        let close_at = span.end.saturating_sub(1);
        let inner = Span {
            start: span.start,
            end: close_at,
        };
        if steps.is_empty() && !self.has_comment_between(inner) {
            self.out.push(" {}");
            return;
        }
        self.out.push(" {");
        for step in steps {
            self.anchor(step.span.start, indent + 2, Blanks::Keep);
            self.step(step, indent + 2);
            let end = self.code_end(step.span);
            self.flush(end, indent + 2, Blanks::Drop);
        }
        self.flush(close_at, indent + 2, Blanks::Keep);
        self.out.line(indent);
        self.out.push("}");
    }

    fn expectation(&mut self, e: &Expectation, indent: usize) {
        let text = flat_expectation(self.src, e);
        if !self.has_comment_in(e.span) && self.fits(&text, 0) {
            self.out.push(&text);
            return;
        }
        self.out.push(&format!("=> {}", e.kind.as_str()));
        for c in &e.codes {
            self.out.push(" ");
            self.out.push(&quote(&c.value));
        }
        if !e.modifications.is_empty() {
            self.out.push(" ");
            let els: Vec<El> = e.modifications.iter().map(El::Mod).collect();
            let start = e.modifications[0].span().start;
            let close =
                self.find_close(e.modifications[e.modifications.len() - 1].span().end, b'}');
            let span = Span {
                start,
                end: close + 1,
            };
            self.seq("{", "}", &els, span, indent, 0);
        }
    }

    fn output(&mut self, o: &Output, indent: usize) {
        let mut text = String::from(" -> ");
        if let Some(origin) = &o.origin {
            text.push_str(&origin.name);
            text.push(' ');
        }
        text.push_str(&flat(self.src, &o.value, 0, true));
        if let Some(e) = &o.expect {
            text.push(' ');
            text.push_str(&flat_expectation(self.src, e));
        }
        if self.fits(&text, 0) {
            self.out.push(" -> ");
        } else {
            // A long step continues on the next line, from its output.
            self.out.line(indent + 2);
            self.out.push("-> ");
        }
        if let Some(origin) = &o.origin {
            self.out.push(&origin.name);
            self.out.push(" ");
        }
        self.expr(&o.value, 0, true, indent, 0);
        if let Some(e) = &o.expect {
            self.out.push(" ");
            self.expectation(e, indent);
        }
    }

    fn step(&mut self, step: &Step, indent: usize) {
        let mut expect_done = false;
        match &step.kind {
            StepKind::With { target, value } => {
                self.out.push("with ");
                self.expr(target, P_POSTFIX, false, indent, 0);
                self.out.push(" as ");
                self.expr(value, 0, true, indent, 0);
            }
            StepKind::Session {
                intent,
                permits,
                strict,
            } => {
                self.out.push("session");
                if let Some(i) = intent {
                    self.out.push(&format!(" intent {}", quote(&i.value)));
                }
                if let Some(p) = permits {
                    self.out.push(" permits ");
                    self.expr(p, 0, true, indent, 0);
                }
                if *strict {
                    self.out.push(" strict");
                }
            }
            StepKind::User(text) => self.out.push(&format!("user {}", quote(&text.value))),
            StepKind::Agent { text, from } => {
                self.out.push(&format!("agent {}", quote(&text.value)));
                if let Some(p) = from {
                    self.out.push(" ");
                    self.out.push(&provenance(p));
                }
            }
            StepKind::Call { tool, args, output } => {
                self.out.push(&format!("call {}", tool.name));
                let from = args.last().map_or(tool.span.end, |a| a.end());
                let close = self.find_close(from, b')');
                let span = Span {
                    start: tool.span.end,
                    end: close + 1,
                };
                let els: Vec<El> = args.iter().map(El::CallArg).collect();
                self.seq("(", ")", &els, span, indent, 0);
                if let Some(e) = &step.expect {
                    self.out.push(" ");
                    self.expectation(e, indent);
                }
                expect_done = true;
                if let Some(o) = output {
                    self.output(o, indent);
                }
            }
            StepKind::Result {
                tool,
                status,
                output,
            } => {
                self.out.push(&format!("result {}", tool.name));
                if let Some(s) = status {
                    self.out.push(" ");
                    self.out.push(s);
                }
                self.output(output, indent);
            }
            StepKind::Retrieve { query, output } => {
                self.out.push(&format!("retrieve {}", quote(&query.value)));
                self.output(output, indent);
            }
            StepKind::Memory {
                write,
                key,
                output,
                from,
            } => {
                let op = if *write { "write" } else { "read" };
                self.out.push(&format!("memory {op} {}", quote(&key.value)));
                if let Some(o) = output {
                    self.output(o, indent);
                }
                if let Some(p) = from {
                    self.out.push(" ");
                    self.out.push(&provenance(p));
                }
            }
            StepKind::Compact => self.out.push("compact"),
            StepKind::Turn => self.out.push("turn"),
            StepKind::Skill {
                op,
                skill_id,
                digest,
            } => {
                self.out
                    .push(&format!("skill {op} {}", quote(&skill_id.value)));
                if let Some(d) = digest {
                    self.out.push(&format!(" digest {}", quote(&d.value)));
                }
            }
            StepKind::Subagent { name, steps } => {
                self.out.push(&format!("subagent {}", quote(&name.value)));
                // The block ends before the step's own expectation, if any.
                let end = match &step.expect {
                    Some(e) => self
                        .src
                        .get(..e.span.start as usize)
                        .and_then(|s| s.rfind('}'))
                        .map_or(step.span.end, |i| i as u32 + 1),
                    None => self.code_end(step.span),
                };
                self.block(
                    steps,
                    Span {
                        start: step.span.start,
                        end,
                    },
                    indent,
                );
            }
            StepKind::Send { hook, payload } => {
                self.out.push(&format!("send {} ", hook.name));
                self.expr(payload, 0, true, indent, 0);
            }
            StepKind::Expect { request_id } => {
                self.out
                    .push(&format!("expect {}", quote(&request_id.value)));
            }
            StepKind::Approve { approver } => {
                self.out.push("approve");
                if let Some(a) = approver {
                    self.out.push(&format!(" as {}", quote(&a.value)));
                }
            }
        }
        if !expect_done {
            if let Some(e) = &step.expect {
                self.out.push(" ");
                self.expectation(e, indent);
            }
        }
    }
}
