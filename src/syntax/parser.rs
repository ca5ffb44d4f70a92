//! From source text to AST. The whole file is parsed first; if that fails, the file is cut at
//! the lines where top-level items start and each piece is parsed alone, so that every broken
//! item gets its own diagnostic and the good ones still reach the checker.

use pest::iterators::Pair;
use pest::Parser as _;

use super::ast::*;
use super::trivia;
use crate::diagnostics::{Code, Diagnostic, FileId, Span};

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/warden.pest"]
struct WardenParser;

/// Deepest bracket or `not` nesting accepted; deeper input is refused with a diagnostic rather
/// than risking the parser's stack.
pub const MAX_NESTING: usize = 64;

/// Deepest expression tree accepted (long `and`/`or` chains count too).
const MAX_EXPR_DEPTH: usize = 512;

/// Parses one file. Always returns a module (possibly partial) and every diagnostic found.
pub fn parse(file: FileId, text: &str) -> (Module, Vec<Diagnostic>) {
    super::on_deep_stack(|| parse_here(file, text))
}

fn parse_here(file: FileId, text: &str) -> (Module, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let scan = trivia::scan(text, MAX_NESTING);
    if let Some(at) = scan.too_deep {
        diagnostics.push(
            Diagnostic::error(
                Code::SyntaxTooDeep,
                file,
                Span::new(at, at + 1),
                "nesting is too deep",
            )
            .with_label("this opens more than 64 nested brackets or `not`s")
            .with_help("split the expression with `let` constants or flatten it"),
        );
        return (Module::default(), diagnostics);
    }

    let mut builder = Builder {
        file,
        base: 0,
        diagnostics: &mut diagnostics,
    };
    match WardenParser::parse(Rule::file, text) {
        Ok(mut pairs) => {
            let file_pair = pairs.next().expect("file rule yields one pair");
            let items = file_pair
                .into_inner()
                .filter(|p| p.as_rule() != Rule::EOI)
                .filter_map(|p| builder.item(p))
                .collect();
            (Module { items }, diagnostics)
        }
        Err(whole) => {
            // Recover: parse item by item.
            let mut starts = scan.item_starts.clone();
            if starts.first() != Some(&0) {
                starts.insert(0, 0);
            }
            let mut items = Vec::new();
            let mut reported = false;
            for (n, &start) in starts.iter().enumerate() {
                let end = starts.get(n + 1).copied().unwrap_or(text.len());
                let chunk = &text[start..end];
                if is_blank(chunk) {
                    continue;
                }
                match WardenParser::parse(Rule::item_only, chunk) {
                    Ok(mut pairs) => {
                        builder.base = start;
                        let pair = pairs.next().expect("item_only yields one pair");
                        for p in pair.into_inner().filter(|p| p.as_rule() != Rule::EOI) {
                            if let Some(item) = builder.item(p) {
                                items.push(item);
                            }
                        }
                    }
                    Err(e) => {
                        reported = true;
                        builder
                            .diagnostics
                            .push(syntax_error(file, chunk, start, &e));
                    }
                }
            }
            if !reported {
                // The pieces parse alone but not together: report the whole-file error.
                builder
                    .diagnostics
                    .push(syntax_error(file, text, 0, &whole));
            }
            (Module { items }, diagnostics)
        }
    }
}

fn is_blank(chunk: &str) -> bool {
    let scan = trivia::scan(chunk, usize::MAX);
    let mut rest = chunk.to_string();
    for c in scan.comments.iter().rev() {
        rest.replace_range(c.span.range(), "");
    }
    rest.trim().is_empty()
}

fn rule_name(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::EOI => "end of input",
        Rule::item | Rule::item_only | Rule::file => {
            "an item (package, use, let, label, rule, default or test)"
        }
        Rule::package_decl => "`package`",
        Rule::use_decl => "`use`",
        Rule::let_decl => "`let`",
        Rule::pred_decl => "`pred`",
        Rule::pred_param => "a parameter name",
        Rule::label_decl => "`label`",
        Rule::rule_decl => "`rule`",
        Rule::default_decl => "`default`",
        Rule::test_decl => "`test`",
        Rule::effect_decl => "`effect`",
        Rule::tool_decl => "`tool`",
        Rule::ident | Rule::dotted => "a name",
        Rule::hook | Rule::hook_list => "a hook name (e.g. toolCallRequest)",
        Rule::string => "a string",
        Rule::int => "a whole number",
        Rule::number => "a number",
        Rule::duration => "a duration (e.g. 30s, 5m)",
        Rule::expr
        | Rule::or_expr
        | Rule::and_expr
        | Rule::not_expr
        | Rule::cmp_expr
        | Rule::add_expr
        | Rule::mul_expr
        | Rule::unary
        | Rule::postfix => "an expression",
        Rule::decision => "a decision (allow, deny, ask, defer or modify)",
        Rule::decision_word => "allow, deny, ask, defer or modify",
        Rule::reason => "a reason code string",
        Rule::cmp_op => "a comparison",
        Rule::or_op => "`or`",
        Rule::and_op => "`and`",
        Rule::approver => "`approver`",
        Rule::approver_kind => "human, agent or service",
        Rule::timeout_clause => "`timeout`",
        Rule::expires_clause => "`expires`",
        Rule::extend_clause => "`extend intent`",
        Rule::else_clause => "`else`",
        Rule::modification => "a modification (redact, set or replace)",
        Rule::window => "a window (this turn, last N turns, last 10m or session)",
        Rule::by_key => "`by`",
        Rule::test_step => "a test step (session, user, call, turn, expect, …)",
        Rule::expectation => "an expectation (`=> allow`, `=> deny \"code\"`, …)",
        Rule::object_entry => "a `key: value` entry",
        Rule::member => "`.field`",
        Rule::index => "`[index]`",
        Rule::call => "`(arguments)`",
        Rule::place => "a payload path",
        _ => return None,
    })
}

fn syntax_error(
    file: FileId,
    chunk: &str,
    base: usize,
    e: &pest::error::Error<Rule>,
) -> Diagnostic {
    let pos = match e.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    };
    let found = found_token(&chunk[pos..]);
    let (expected, _) = match &e.variant {
        pest::error::ErrorVariant::ParsingError {
            positives,
            negatives,
        } => (
            {
                let mut names: Vec<&str> = positives.iter().filter_map(|r| rule_name(*r)).collect();
                names.sort_unstable();
                names.dedup();
                names
            },
            negatives.len(),
        ),
        pest::error::ErrorVariant::CustomError { .. } => (Vec::new(), 0),
    };
    let expected_text = match expected.len() {
        0 => String::from("something else"),
        1 => expected[0].to_string(),
        n => format!("{} or {}", expected[..n - 1].join(", "), expected[n - 1]),
    };
    let found_text = if found.is_empty() {
        "end of input".to_string()
    } else {
        format!("`{}`", found.escape_debug())
    };
    let start = base + pos;
    let end = start + found.len().max(usize::from(!found.is_empty()));
    let mut d = Diagnostic::error(
        Code::SyntaxUnexpected,
        file,
        Span::new(start, end.min(base + chunk.len()).max(start)),
        format!("expected {expected_text}, found {found_text}"),
    )
    .with_label(format!("expected {expected_text}"));
    let before = chunk[..pos].trim_end();
    let after_decision = ["deny", "ask", "defer", "modify", "allow"]
        .iter()
        .any(|w| before.ends_with(w));
    if let Some(help) = hint_for(found) {
        d = d.with_help(help);
    } else if after_decision
        && expected_text == "a string"
        && found.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
    {
        // `deny org.reason`: a reason code computed at run time.
        d = d.with_help(
            "a reason code is a literal string, checked when the policy loads; for reasons a Rego \
             rule computes, make the rule a deny set: `rule NAME on HOOK from rego \"data.pkg.deny\"` \
             (docs/rego.md)",
        );
    } else if !expected.is_empty() {
        d = d.with_help(format!(
            "insert {expected_text} here, or remove what is in the way"
        ));
    }
    d
}

/// The token at the error position, for the message.
fn found_token(rest: &str) -> &str {
    let rest_trim = rest.trim_start();
    let skipped = rest.len() - rest_trim.len();
    let rest = &rest[skipped..];
    let Some(first) = rest.chars().next() else {
        return "";
    };
    let len = if first.is_alphanumeric() || first == '_' {
        rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len())
    } else {
        let two = rest.get(..2);
        if matches!(
            two,
            Some("&&" | "||" | "==" | "!=" | "<=" | ">=" | "=>" | "->")
        ) {
            2
        } else {
            first.len_utf8()
        }
    };
    &rest[..len]
}

fn hint_for(found: &str) -> Option<&'static str> {
    Some(match found {
        "&&" | "&" => "Warden writes conjunction as `and`",
        "||" | "|" => "Warden writes disjunction as `or`",
        "!" => "Warden writes negation as `not`",
        "=" => "comparison is `==`; `=` only appears in `let` and `set`",
        "'" => "strings use double quotes: \"…\"",
        ";" => "Warden needs no semicolons; start the next item on a new line",
        "if" | "then" => "a rule is `rule NAME on HOOK when CONDITION => DECISION`",
        _ => return None,
    })
}

struct Builder<'d> {
    file: FileId,
    base: usize,
    diagnostics: &'d mut Vec<Diagnostic>,
}

impl Builder<'_> {
    /// A pair's span without the whitespace pest leaves at its end.
    fn span(&self, pair: &Pair<Rule>) -> Span {
        let s = pair.as_span();
        let trimmed = pair
            .as_str()
            .trim_end_matches([' ', '\t', '\r', '\n'])
            .len();
        Span::new(self.base + s.start(), self.base + s.start() + trimmed)
    }

    fn ident(&self, pair: Pair<Rule>) -> Ident {
        Ident {
            name: pair.as_str().to_string(),
            span: self.span(&pair),
        }
    }

    fn dotted(&self, pair: Pair<Rule>) -> Vec<Ident> {
        let start = self.base + pair.as_span().start();
        let mut offset = 0;
        pair.as_str()
            .split('.')
            .map(|seg| {
                let s = start + offset;
                offset += seg.len() + 1;
                Ident {
                    name: seg.to_string(),
                    span: Span::new(s, s + seg.len()),
                }
            })
            .collect()
    }

    fn error(&mut self, code: Code, span: Span, message: String, help: &str) {
        self.diagnostics.push(
            Diagnostic::error(code, self.file, span, message)
                .with_label("here")
                .with_help(help),
        );
    }

    /// A tool's name written bare or quoted (`effect … for NAME`, `tool NAME(…)`), and whether
    /// it was quoted.
    fn tool_name(&mut self, pair: Pair<Rule>) -> Option<(StringLit, bool)> {
        let pair = pair.into_inner().next()?;
        if pair.as_rule() == Rule::string {
            return Some((self.string(pair), true));
        }
        let id = self.ident(pair);
        Some((
            StringLit {
                value: id.name,
                span: id.span,
            },
            false,
        ))
    }

    /// `string`, `[number]`, …: an unknown type name is reported and read as `any`.
    fn arg_type(&mut self, pair: Pair<Rule>) -> Option<ArgType> {
        let inner = pair.into_inner().next()?;
        match inner.as_rule() {
            Rule::list_type => Some(ArgType::List(Box::new(
                self.arg_type(inner.into_inner().next()?)?,
            ))),
            Rule::any_type => Some(ArgType::Any),
            _ => {
                let id = self.ident(inner);
                Some(match ArgType::from_name(&id.name) {
                    Some(t) => t,
                    None => {
                        self.error(
                            Code::SyntaxUnknownType,
                            id.span,
                            format!("`{}` is not an argument type", id.name),
                            &format!(
                                "the types are {}, and [T] for a list of T",
                                ArgType::NAMES.join(", ")
                            ),
                        );
                        ArgType::Any
                    }
                })
            }
        }
    }

    fn item(&mut self, pair: Pair<Rule>) -> Option<Item> {
        let span = self.span(&pair);
        let rule = pair.as_rule();
        let mut inner = pair.into_inner();
        Some(match rule {
            Rule::mask_decl => Item::Mask(Mask {
                place: self.place(inner.next()?),
                span,
            }),
            Rule::effect_decl => {
                let name = self.ident(inner.next()?);
                let (tool, tool_quoted) = self.tool_name(inner.next()?)?;
                let mut not_executed_on_error = false;
                let mut lease = None;
                let mut key = Vec::new();
                for p in inner {
                    match p.as_rule() {
                        Rule::not_executed_flag => not_executed_on_error = true,
                        Rule::lease_clause => {
                            let l = p.into_inner().next()?;
                            lease = Some(match l.as_rule() {
                                Rule::lease_turns => Lease::Turns(self.int(l.into_inner().next()?)),
                                _ => Lease::Time(self.duration(l)),
                            });
                        }
                        _ => key.push(self.expr(p, 0)),
                    }
                }
                Item::Effect(EffectDecl {
                    name,
                    tool,
                    tool_quoted,
                    not_executed_on_error,
                    lease,
                    key,
                    span,
                })
            }
            Rule::tool_decl => {
                let (name, quoted) = self.tool_name(inner.next()?)?;
                let mut params = Vec::new();
                let mut class = None;
                for p in inner {
                    if p.as_rule() == Rule::tool_class {
                        class = p.into_inner().next().map(|c| self.ident(c));
                        continue;
                    }
                    let pspan = self.span(&p);
                    let mut parts = p.into_inner();
                    let pname = self.ident(parts.next()?);
                    let mut optional = false;
                    let mut ty = ArgType::Any;
                    let mut role = None;
                    for q in parts {
                        match q.as_rule() {
                            Rule::optional_flag => optional = true,
                            Rule::arg_role => role = q.into_inner().next().map(|r| self.ident(r)),
                            _ => ty = self.arg_type(q)?,
                        }
                    }
                    params.push(ToolParam {
                        name: pname,
                        optional,
                        ty,
                        role,
                        span: pspan,
                    });
                }
                Item::Tool(ToolDecl {
                    name,
                    quoted,
                    params,
                    class,
                    span,
                })
            }
            Rule::package_decl => Item::Package(Package {
                path: self.dotted(inner.next()?),
                span,
            }),
            Rule::use_decl => {
                let body = inner.next()?;
                match body.as_rule() {
                    Rule::use_module => {
                        let mut parts = body.into_inner();
                        let path = self.dotted(parts.next()?);
                        let alias = parts.next().map(|p| self.ident(p));
                        Item::Use(Use {
                            kind: UseKind::Module { path },
                            alias,
                            span,
                        })
                    }
                    _ => {
                        let mut parts = body.into_inner().peekable();
                        let data = parts.peek().map(|p| p.as_rule()) == Some(Rule::rego_data);
                        if data {
                            parts.next();
                        }
                        let path = self.string(parts.next()?);
                        let alias = parts.next().map(|p| self.ident(p));
                        let kind = if data {
                            UseKind::RegoData { path }
                        } else {
                            UseKind::Rego { path }
                        };
                        Item::Use(Use { kind, alias, span })
                    }
                }
            }
            Rule::let_decl => {
                let name = self.ident(inner.next()?);
                let value = self.expr(inner.next()?, 0);
                Item::Let(Let { name, value, span })
            }
            Rule::pred_decl => {
                let name = self.ident(inner.next()?);
                let mut params = Vec::new();
                let mut body = None;
                for p in inner {
                    match p.as_rule() {
                        Rule::pred_param => {
                            let mut parts = p.into_inner();
                            let name = self.ident(parts.next()?);
                            let ty = parts.next().map(|t| self.ident(t));
                            params.push(Param { name, ty });
                        }
                        _ => body = Some(self.expr(p, 0)),
                    }
                }
                Item::Pred(PredDecl {
                    name,
                    params,
                    body: body?,
                    span,
                })
            }
            Rule::label_decl => {
                let name = self.ident(inner.next()?);
                let flags = inner.next()?;
                let redact = flags.into_inner().next().is_some();
                let when = inner.next().map(|p| self.expr(p, 0));
                Item::Label(Label {
                    name,
                    redact,
                    when,
                    span,
                })
            }
            Rule::rule_decl => {
                let name = self.ident(inner.next()?);
                let hooks = self.hooks(inner.next()?);
                let mut when = None;
                let mut decision = None;
                let mut rego = None;
                for p in inner {
                    match p.as_rule() {
                        Rule::decision => decision = Some(self.decision(p)),
                        Rule::rego_source => {
                            let s = self.string(p.into_inner().next()?);
                            decision = Some(Decision {
                                kind: DecisionKind::Deny,
                                reason: Some(Reason {
                                    code: StringLit {
                                        value: name.name.clone(),
                                        span: name.span,
                                    },
                                    reasoning: None,
                                }),
                                approver: None,
                                question: None,
                                timeout: None,
                                on_timeout: None,
                                expires: None,
                                extend: None,
                                resolve: None,
                                because: None,
                                modifications: Vec::new(),
                                span: s.span,
                            });
                            rego = Some(s);
                        }
                        _ => when = Some(self.expr(p, 0)),
                    }
                }
                Item::Rule(RuleDecl {
                    name,
                    hooks,
                    rego,
                    when,
                    decision: decision?,
                    span,
                })
            }
            Rule::default_decl => {
                let mut hooks = Vec::new();
                let mut decision = None;
                for p in inner {
                    match p.as_rule() {
                        Rule::hook_list => hooks = self.hooks(p),
                        _ => decision = Some(self.decision(p)),
                    }
                }
                Item::Default(DefaultDecl {
                    hooks,
                    decision: decision?,
                    span,
                })
            }
            Rule::test_decl => {
                let name = self.string(inner.next()?);
                let mut strict = false;
                let mut fixture = None;
                let mut steps = Vec::new();
                for p in inner {
                    match p.as_rule() {
                        Rule::strict_flag => strict = true,
                        Rule::string => fixture = Some(self.string(p)),
                        Rule::test_step => steps.extend(self.step(p)),
                        _ => {}
                    }
                }
                Item::Test(Test {
                    name,
                    strict,
                    fixture,
                    steps,
                    span,
                })
            }
            _ => return None,
        })
    }

    fn hooks(&self, pair: Pair<Rule>) -> Vec<Hook> {
        pair.into_inner().map(|p| self.hook(p)).collect()
    }

    fn hook(&self, p: Pair<Rule>) -> Hook {
        Hook {
            name: p.as_str().to_string(),
            span: self.span(&p),
        }
    }

    fn string(&mut self, pair: Pair<Rule>) -> StringLit {
        let span = self.span(&pair);
        let body = pair.into_inner().next().map_or("", |p| p.as_str());
        let value = self.unescape(body, span.start as usize + 1);
        StringLit { value, span }
    }

    fn unescape(&mut self, body: &str, start: usize) -> String {
        let mut out = String::with_capacity(body.len());
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some((_, e)) = chars.next() else { break };
            match e {
                '"' => out.push('"'),
                '\\' => out.push('\\'),
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                'u' => {
                    let rest = &body[i + 2..];
                    let parsed = rest
                        .strip_prefix('{')
                        .and_then(|r| r.find('}').map(|n| &r[..n]))
                        .filter(|hex| (1..=6).contains(&hex.len()))
                        .and_then(|hex| u32::from_str_radix(hex, 16).ok().map(|v| (hex.len(), v)));
                    match parsed.and_then(|(n, v)| char::from_u32(v).map(|c| (n, c))) {
                        Some((n, ch)) => {
                            out.push(ch);
                            for _ in 0..n + 2 {
                                chars.next();
                            }
                        }
                        None => self.error(
                            Code::SyntaxBadEscape,
                            Span::new(start + i, start + i + 2),
                            "invalid unicode escape".into(),
                            "write a code point as \\u{1F600} (one to six hex digits)",
                        ),
                    }
                }
                other => self.error(
                    Code::SyntaxBadEscape,
                    Span::new(start + i, start + i + 1 + other.len_utf8()),
                    format!("unknown escape `\\{other}`"),
                    "the escapes are \\\" \\\\ \\n \\t \\r \\0 and \\u{…}",
                ),
            }
        }
        out
    }

    fn duration(&mut self, pair: Pair<Rule>) -> Duration {
        let span = self.span(&pair);
        let text = pair.as_str();
        let digits_end = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let unit = match &text[digits_end..] {
            "ms" => DurationUnit::Millis,
            "s" => DurationUnit::Seconds,
            "m" => DurationUnit::Minutes,
            "h" => DurationUnit::Hours,
            _ => DurationUnit::Days,
        };
        let millis = text[..digits_end]
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit.millis()));
        let millis = millis.unwrap_or_else(|| {
            self.error(
                Code::SyntaxBadNumber,
                span,
                "duration is too large".into(),
                "durations must fit in 64-bit milliseconds",
            );
            0
        });
        Duration { millis, unit, span }
    }

    fn int(&mut self, pair: Pair<Rule>) -> u64 {
        let span = self.span(&pair);
        pair.as_str().parse().unwrap_or_else(|_| {
            self.error(
                Code::SyntaxBadNumber,
                span,
                "number is too large".into(),
                "use a number below 2^64",
            );
            0
        })
    }

    fn decision(&mut self, pair: Pair<Rule>) -> Decision {
        let span = self.span(&pair);
        let inner = pair.into_inner().next().expect("decision has a body");
        let kind = match inner.as_rule() {
            Rule::allow_d => DecisionKind::Allow,
            Rule::deny_d => DecisionKind::Deny,
            Rule::ask_d => DecisionKind::Ask,
            Rule::defer_d => DecisionKind::Defer,
            _ => DecisionKind::Modify,
        };
        let mut d = Decision {
            kind,
            reason: None,
            approver: None,
            question: None,
            timeout: None,
            on_timeout: None,
            expires: None,
            extend: None,
            resolve: None,
            because: None,
            modifications: Vec::new(),
            span,
        };
        let mut seen: Vec<Rule> = Vec::new();
        for p in inner.into_inner() {
            let rule = p.as_rule();
            if rule != Rule::modification && rule != Rule::reason {
                if seen.contains(&rule) {
                    let span = self.span(&p);
                    self.error(
                        Code::SyntaxDuplicatePart,
                        span,
                        format!(
                            "`{}` is given twice",
                            p.as_str().split_whitespace().next().unwrap_or("")
                        ),
                        "give each part of a decision once",
                    );
                    continue;
                }
                seen.push(rule);
            }
            match rule {
                Rule::reason => {
                    let mut parts = p.into_inner();
                    let code = parts.next().map(|s| self.string(s));
                    let reasoning = parts.next().map(|s| self.string(s));
                    d.reason = code.map(|code| Reason { code, reasoning });
                }
                Rule::approver => {
                    let aspan = self.span(&p);
                    let mut parts = p.into_inner();
                    let kind = match parts.next().map(|k| k.as_str()) {
                        Some("agent") => ApproverKind::Agent,
                        Some("service") => ApproverKind::Service,
                        _ => ApproverKind::Human,
                    };
                    if let Some(id) = parts.next() {
                        let id = self.string(id);
                        d.approver = Some(Approver {
                            kind,
                            id,
                            span: aspan,
                        });
                    }
                }
                Rule::question => {
                    d.question = p.into_inner().next().map(|s| self.string(s));
                }
                Rule::timeout_clause => {
                    d.timeout = p.into_inner().next().map(|t| self.duration(t));
                }
                Rule::else_clause => {
                    if let Some(w) = p.into_inner().next() {
                        let wspan = self.span(&w);
                        d.on_timeout = DecisionKind::parse(w.as_str()).map(|k| (k, wspan));
                    }
                }
                Rule::expires_clause => {
                    d.expires = p.into_inner().next().map(|t| self.duration(t));
                }
                Rule::extend_clause => {
                    let espan = self.span(&p);
                    let scope = match p.into_inner().next().map(|w| w.as_str()) {
                        Some("this_request") => ExtendScope::ThisRequest,
                        _ => ExtendScope::Session,
                    };
                    d.extend = Some((scope, espan));
                }
                Rule::resolve_clause => d.resolve = p.into_inner().next().map(|i| self.ident(i)),
                Rule::because_clause => d.because = p.into_inner().next().map(|i| self.ident(i)),
                Rule::modification => {
                    if let Some(m) = self.modification(p) {
                        d.modifications.push(m);
                    }
                }
                _ => {}
            }
        }
        d
    }

    fn modification(&mut self, pair: Pair<Rule>) -> Option<Modification> {
        let span = self.span(&pair);
        let inner = pair.into_inner().next()?;
        let rule = inner.as_rule();
        let mut parts = inner.into_inner();
        Some(match rule {
            Rule::redact_m => {
                let place = self.place(parts.next()?);
                let replacement = parts.next().and_then(|w| self.clause_expr(w));
                Modification::Redact {
                    place,
                    replacement,
                    span,
                }
            }
            Rule::redact_each_m => self.redact_each(parts, span)?,
            Rule::set_m => {
                let place = self.place(parts.next()?);
                let value = self.expr(parts.next()?, 0);
                Modification::Set { place, value, span }
            }
            _ => Modification::Replace {
                content: self.expr(parts.next()?, 0),
                span,
            },
        })
    }

    /// `redact each [k,] a in PLACE [when COND] [with EXPR]`: the choice of elements becomes a
    /// quantifier of kind `Each` over the place (its body `true` without `when`).
    fn redact_each(
        &mut self,
        parts: pest::iterators::Pairs<Rule>,
        span: Span,
    ) -> Option<Modification> {
        let mut names = Vec::new();
        let (mut collection, mut body, mut replacement) = (None, None, None);
        for p in parts {
            match p.as_rule() {
                Rule::ident => names.push(self.ident(p)),
                Rule::place => collection = Some(self.place(p)),
                Rule::redact_when => body = self.clause_expr(p),
                Rule::redact_with => replacement = self.clause_expr(p),
                _ => {}
            }
        }
        let collection = collection?;
        let var = names.pop()?;
        let key = names.pop();
        let body = body.unwrap_or(Expr {
            kind: ExprKind::Bool(true),
            span: collection.span,
        });
        let select = Expr {
            span: Span {
                start: var.span.start,
                end: body.span.end.max(collection.span.end),
            },
            kind: ExprKind::Quantifier {
                kind: QuantifierKind::Each,
                key,
                var,
                over: Box::new(collection.to_expr()),
                body: Box::new(body),
            },
        };
        Some(Modification::RedactEach {
            collection,
            select,
            replacement,
            span,
        })
    }

    /// The expression of a `when EXPR` / `with EXPR` clause.
    fn clause_expr(&mut self, pair: Pair<Rule>) -> Option<Expr> {
        let inner = pair.into_inner().next()?;
        Some(self.expr(inner, 0))
    }

    fn place(&mut self, pair: Pair<Rule>) -> Place {
        let span = self.span(&pair);
        let segments = pair
            .into_inner()
            .map(|p| match p.as_rule() {
                Rule::int => {
                    let s = self.span(&p);
                    PlaceSegment::Index(self.int(p), s)
                }
                _ => PlaceSegment::Field(self.ident(p)),
            })
            .collect();
        Place { segments, span }
    }

    fn too_deep(&mut self, span: Span) -> Expr {
        self.error(
            Code::SyntaxTooDeep,
            span,
            "expression is too deeply nested".into(),
            "split it with `let` constants, or use `in {…}` instead of long `or` chains",
        );
        Expr {
            kind: ExprKind::Bool(false),
            span,
        }
    }

    fn expr(&mut self, pair: Pair<Rule>, depth: usize) -> Expr {
        let span = self.span(&pair);
        if depth > MAX_EXPR_DEPTH {
            return self.too_deep(span);
        }
        let rule = pair.as_rule();
        match rule {
            Rule::expr | Rule::paren => {
                let nested = depth + usize::from(rule == Rule::paren);
                let inner = pair.into_inner().next().expect("expr has a body");
                self.expr(inner, nested)
            }
            Rule::or_expr | Rule::and_expr | Rule::add_expr | Rule::mul_expr => {
                self.binary_chain(pair, depth, span, rule)
            }
            Rule::not_expr => {
                let mut parts = pair.into_inner();
                let first = parts.next().expect("not_expr has a body");
                if first.as_rule() == Rule::not_op {
                    let operand = self.expr(parts.next().expect("not has an operand"), depth + 1);
                    Expr {
                        kind: ExprKind::Unary(UnaryOp::Not, Box::new(operand)),
                        span,
                    }
                } else {
                    self.expr(first, depth)
                }
            }
            Rule::cmp_expr => self.comparison(pair, depth, span),
            Rule::unary => self.negation(pair, depth),
            Rule::postfix => self.postfix(pair, depth, span),
            Rule::ident => Expr {
                kind: ExprKind::Name(pair.as_str().to_string()),
                span,
            },
            Rule::current => Expr {
                kind: ExprKind::Current,
                span,
            },
            Rule::boolean => Expr {
                kind: ExprKind::Bool(pair.as_str() == "true"),
                span,
            },
            Rule::null => Expr {
                kind: ExprKind::Null,
                span,
            },
            Rule::number => {
                let text: String = pair.as_str().chars().filter(|c| *c != '_').collect();
                let value = match text.parse::<f64>() {
                    Ok(v) if v.is_finite() => v,
                    _ => {
                        self.error(
                            Code::SyntaxBadNumber,
                            span,
                            "number is out of range".into(),
                            "numbers are 64-bit floating point",
                        );
                        0.0
                    }
                };
                Expr {
                    kind: ExprKind::Number(value),
                    span,
                }
            }
            Rule::duration => Expr {
                kind: ExprKind::Duration(self.duration(pair)),
                span,
            },
            Rule::string => {
                let s = self.string(pair);
                Expr {
                    kind: ExprKind::String(s.value),
                    span,
                }
            }
            Rule::set | Rule::list => {
                let items = pair.into_inner().map(|p| self.expr(p, depth + 1)).collect();
                Expr {
                    kind: if rule == Rule::set {
                        ExprKind::Set(items)
                    } else {
                        ExprKind::List(items)
                    },
                    span,
                }
            }
            Rule::object => self.object(pair, depth, span),
            Rule::quantifier => self.quantifier(pair, depth, span),
            Rule::history => self.history(pair, depth, span),
            _ => {
                // Unreachable for well-formed pairs; degrade to an error, never a panic.
                self.error(
                    Code::SyntaxInternal,
                    span,
                    format!("unexpected syntax node {rule:?}"),
                    "please report this input",
                );
                Expr {
                    kind: ExprKind::Bool(false),
                    span,
                }
            }
        }
    }

    /// A chain of one binary operator's level (`or`, `and`, `+ -`, `* / %`), left-associative.
    fn binary_chain(&mut self, pair: Pair<Rule>, depth: usize, span: Span, rule: Rule) -> Expr {
        let mut parts = pair.into_inner();
        let first = parts.next().expect("binary chain has an operand");
        let mut lhs = self.expr(first, depth);
        let mut chain = 0;
        while let Some(op) = parts.next() {
            let Some(rhs_pair) = parts.next() else { break };
            chain += 1;
            if depth + chain > MAX_EXPR_DEPTH {
                return self.too_deep(span);
            }
            let op = match (rule, op.as_str()) {
                (Rule::or_expr, _) => BinaryOp::Or,
                (Rule::and_expr, _) => BinaryOp::And,
                (_, "+") => BinaryOp::Add,
                (_, "-") => BinaryOp::Sub,
                (_, "*") => BinaryOp::Mul,
                (_, "/") => BinaryOp::Div,
                _ => BinaryOp::Rem,
            };
            let rhs = self.expr(rhs_pair, depth + chain + 1);
            let s = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span: s,
            };
        }
        lhs
    }

    /// A comparison (`==`, `in`, `has`, `matches`, …), or its one operand.
    fn comparison(&mut self, pair: Pair<Rule>, depth: usize, span: Span) -> Expr {
        let mut parts = pair.into_inner();
        let lhs = self.expr(parts.next().expect("cmp has an operand"), depth);
        match (parts.next(), parts.next()) {
            (Some(op), Some(rhs)) => {
                let text = op.as_str();
                let inner = op.into_inner().next().map(|o| o.as_rule());
                let op = match Some((inner.unwrap_or(Rule::cmp_op), text)) {
                    Some((Rule::not_in, _)) => BinaryOp::NotIn,
                    Some((Rule::in_op, _)) => BinaryOp::In,
                    Some((Rule::has_op, _)) => BinaryOp::Has,
                    Some((Rule::matches_op, _)) => BinaryOp::Matches,
                    Some((_, "==")) => BinaryOp::Eq,
                    Some((_, "!=")) => BinaryOp::Ne,
                    Some((_, "<=")) => BinaryOp::Le,
                    Some((_, ">=")) => BinaryOp::Ge,
                    Some((_, "<")) => BinaryOp::Lt,
                    _ => BinaryOp::Gt,
                };
                let rhs = self.expr(rhs, depth + 1);
                Expr {
                    kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                    span,
                }
            }
            _ => lhs,
        }
    }

    /// Negations of an operand; a negated number literal is the negative number.
    fn negation(&mut self, pair: Pair<Rule>, depth: usize) -> Expr {
        let mut negations = Vec::new();
        let mut operand = None;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::neg_op => negations.push(self.span(&p)),
                _ => operand = Some(p),
            }
        }
        let mut e = self.expr(operand.expect("unary has an operand"), depth);
        for s in negations.into_iter().rev() {
            let whole = s.to(e.span);
            e = match e.kind {
                ExprKind::Number(n) => Expr {
                    kind: ExprKind::Number(-n),
                    span: whole,
                },
                kind => Expr {
                    kind: ExprKind::Unary(UnaryOp::Neg, Box::new(Expr { kind, span: e.span })),
                    span: whole,
                },
            };
        }
        e
    }

    /// A primary and its members, indexes and calls.
    fn postfix(&mut self, pair: Pair<Rule>, depth: usize, span: Span) -> Expr {
        let mut parts = pair.into_inner();
        let mut e = self.expr(parts.next().expect("postfix has a primary"), depth);
        for (n, p) in parts.enumerate() {
            if depth + n > MAX_EXPR_DEPTH {
                return self.too_deep(span);
            }
            let s = e.span.to(self.span(&p));
            let kind = match p.as_rule() {
                Rule::member => {
                    let field = self.ident(p.into_inner().next().expect("member name"));
                    ExprKind::Member(Box::new(e), field)
                }
                Rule::index => {
                    let idx = self.expr(p.into_inner().next().expect("index"), depth + 1);
                    ExprKind::Index(Box::new(e), Box::new(idx))
                }
                _ => {
                    let args = p
                        .into_inner()
                        .map(|a| {
                            let mut parts: Vec<_> = a.into_inner().collect();
                            let value = parts.pop().expect("argument value");
                            let name = parts.pop().map(|n| self.ident(n));
                            Arg {
                                name,
                                value: self.expr(value, depth + 1),
                            }
                        })
                        .collect();
                    ExprKind::Call(Box::new(e), args)
                }
            };
            e = Expr { kind, span: s };
        }
        e
    }

    /// An object written out.
    fn object(&mut self, pair: Pair<Rule>, depth: usize, span: Span) -> Expr {
        let entries = pair
            .into_inner()
            .filter_map(|entry| {
                let mut parts = entry.into_inner();
                let key = parts.next()?;
                let key = if key.as_rule() == Rule::string {
                    self.string(key)
                } else {
                    StringLit {
                        value: key.as_str().to_string(),
                        span: self.span(&key),
                    }
                };
                let value = self.expr(parts.next()?, depth + 1);
                Some((key, value))
            })
            .collect();
        Expr {
            kind: ExprKind::Object(entries),
            span,
        }
    }

    /// `any`/`all` (with the element's key, when named).
    fn quantifier(&mut self, pair: Pair<Rule>, depth: usize, span: Span) -> Expr {
        let mut parts = pair.into_inner();
        let kind = match parts.next().map(|p| p.as_str()) {
            Some("all") => QuantifierKind::All,
            _ => QuantifierKind::Any,
        };
        let first = self.ident(parts.next().expect("quantifier variable"));
        let mut next = parts.next().expect("quantifier range");
        let (key, var) = if next.as_rule() == Rule::ident {
            let var = self.ident(next);
            next = parts.next().expect("quantifier range");
            (Some(first), var)
        } else {
            (None, first)
        };
        let over = self.expr(next, depth + 1);
        let body = self.expr(parts.next().expect("quantifier body"), depth + 1);
        Expr {
            kind: ExprKind::Quantifier {
                kind,
                key,
                var,
                over: Box::new(over),
                body: Box::new(body),
            },
            span,
        }
    }

    /// `count(…)`/`exists(…)` over the session's history.
    fn history(&mut self, pair: Pair<Rule>, depth: usize, span: Span) -> Expr {
        let mut parts = pair.into_inner();
        let kind = match parts.next().map(|p| p.as_str()) {
            Some("exists") => HistoryKind::Exists,
            _ => HistoryKind::Count,
        };
        let hook = self.hook(parts.next().expect("history hook"));
        let mut h = History {
            kind,
            hook,
            filter: None,
            window: None,
            by: None,
        };
        for p in parts {
            let twice = match p.as_rule() {
                Rule::window => h.window.is_some(),
                Rule::by_key => h.by.is_some(),
                _ => false,
            };
            if twice {
                let s = self.span(&p);
                self.error(
                    Code::SyntaxDuplicatePart,
                    s,
                    "a history expression takes one window and one key".into(),
                    "remove the second one",
                );
                continue;
            }
            match p.as_rule() {
                Rule::window => h.window = Some(self.window(p)),
                Rule::by_key => {
                    h.by = Some(self.expr(p.into_inner().next().expect("key"), depth + 1))
                }
                _ => h.filter = Some(self.expr(p, depth + 1)),
            }
        }
        Expr {
            kind: ExprKind::History(Box::new(h)),
            span,
        }
    }

    fn window(&mut self, pair: Pair<Rule>) -> Window {
        let span = self.span(&pair);
        let inner = pair.into_inner().next().expect("window kind");
        let kind = match inner.as_rule() {
            Rule::this_turn => WindowKind::ThisTurn,
            Rule::whole_session => WindowKind::Session,
            Rule::last_turns => {
                let n = self.int(inner.into_inner().next().expect("turn count"));
                WindowKind::LastTurns(n.min(u32::MAX as u64) as u32)
            }
            _ => WindowKind::LastTime(self.duration(inner.into_inner().next().expect("duration"))),
        };
        Window { kind, span }
    }

    fn expectation(&mut self, pair: Pair<Rule>) -> Expectation {
        let span = self.span(&pair);
        let mut e = Expectation {
            kind: DecisionKind::Allow,
            codes: Vec::new(),
            modifications: Vec::new(),
            span,
        };
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::decision_word => {
                    e.kind = DecisionKind::parse(p.as_str()).unwrap_or(DecisionKind::Allow)
                }
                Rule::string => {
                    let s = self.string(p);
                    e.codes.push(s);
                }
                Rule::expect_modify => {
                    for m in p.into_inner() {
                        if let Some(m) = self.modification(m) {
                            e.modifications.push(m);
                        }
                    }
                }
                _ => {}
            }
        }
        e
    }

    fn provenance_spec(&mut self, pair: Pair<Rule>) -> ProvenanceSpec {
        let span = self.span(&pair);
        let mut parts = pair.into_inner();
        let origin = self.ident(parts.next().expect("origin"));
        let source = parts.next().map(|s| self.string(s));
        ProvenanceSpec {
            origin,
            source,
            span,
        }
    }

    fn provenance_clause(&mut self, pair: Pair<Rule>) -> ProvenanceSpec {
        let inner = pair.into_inner().next().expect("provenance");
        self.provenance_spec(inner)
    }

    /// Every source of a `from` clause (`from X` or `from [X, Y]`).
    fn provenance_clauses(&mut self, pair: Pair<Rule>) -> Vec<ProvenanceSpec> {
        pair.into_inner().map(|p| self.provenance_spec(p)).collect()
    }

    /// `-> origin value => expectation` (the parts after the arrow).
    fn output<'i>(&mut self, parts: impl Iterator<Item = Pair<'i, Rule>>) -> Option<Output> {
        let mut origin = None;
        let mut value = None;
        let mut expect = None;
        for p in parts {
            match p.as_rule() {
                Rule::output_origin => origin = p.into_inner().next().map(|i| self.ident(i)),
                Rule::expectation => expect = Some(self.expectation(p)),
                _ => value = Some(self.expr(p, 0)),
            }
        }
        Some(Output {
            origin,
            value: value?,
            expect,
        })
    }

    fn step(&mut self, pair: Pair<Rule>) -> Option<Step> {
        let span = self.span(&pair);
        let inner = pair.into_inner().next()?;
        let rule = inner.as_rule();
        let mut expect = None;
        let kind = match rule {
            Rule::with_step => {
                let mut parts = inner.into_inner();
                let target = self.expr(parts.next()?, 0);
                let value = self.expr(parts.next()?, 0);
                StepKind::With { target, value }
            }
            Rule::session_step => {
                let mut intent = None;
                let mut permits = None;
                let mut strict = false;
                for p in inner.into_inner() {
                    match p.as_rule() {
                        Rule::string => intent = Some(self.string(p)),
                        Rule::list => permits = Some(self.expr(p, 0)),
                        Rule::strict_flag => strict = true,
                        Rule::expectation => expect = Some(self.expectation(p)),
                        _ => {}
                    }
                }
                StepKind::Session {
                    intent,
                    permits,
                    strict,
                }
            }
            Rule::user_step => {
                let mut text = None;
                for p in inner.into_inner() {
                    match p.as_rule() {
                        Rule::string => text = Some(self.string(p)),
                        _ => expect = Some(self.expectation(p)),
                    }
                }
                StepKind::User(text?)
            }
            Rule::agent_step => {
                let mut text = None;
                let mut from = None;
                for p in inner.into_inner() {
                    match p.as_rule() {
                        Rule::string => text = Some(self.string(p)),
                        Rule::from_clause => from = Some(self.provenance_clause(p)),
                        _ => expect = Some(self.expectation(p)),
                    }
                }
                StepKind::Agent { text: text?, from }
            }
            Rule::call_step => {
                let mut parts = inner.into_inner();
                let tool = self.ident(parts.next()?);
                let mut args = Vec::new();
                let mut output = None;
                for p in parts {
                    match p.as_rule() {
                        Rule::call_arg => {
                            let mut a = p.into_inner();
                            let name = self.ident(a.next()?);
                            let v = a.next()?;
                            let mut element_from = Vec::new();
                            let value = if v.as_rule() == Rule::arg_elements {
                                let span = self.span(&v);
                                let mut items = Vec::new();
                                for el in v.into_inner() {
                                    let mut parts = el.into_inner();
                                    items.push(self.expr(parts.next()?, 0));
                                    element_from.push(
                                        parts
                                            .next()
                                            .map(|f| self.provenance_clauses(f))
                                            .unwrap_or_default(),
                                    );
                                }
                                Expr {
                                    kind: ExprKind::List(items),
                                    span,
                                }
                            } else {
                                self.expr(v, 0)
                            };
                            if element_from.iter().all(Vec::is_empty) {
                                element_from.clear();
                            }
                            let from = a
                                .next()
                                .map(|f| self.provenance_clauses(f))
                                .unwrap_or_default();
                            args.push(CallArg {
                                name,
                                value,
                                from,
                                element_from,
                            });
                        }
                        Rule::expectation => expect = Some(self.expectation(p)),
                        Rule::call_output => output = self.output(p.into_inner()),
                        _ => {}
                    }
                }
                StepKind::Call { tool, args, output }
            }
            Rule::result_step => {
                let mut parts = inner.into_inner().peekable();
                let tool = self.ident(parts.next()?);
                let status = if parts.peek().map(|p| p.as_rule()) == Some(Rule::exit_status) {
                    parts.next().map(|p| p.as_str().to_string())
                } else {
                    None
                };
                let output = self.output(parts)?;
                StepKind::Result {
                    tool,
                    status,
                    output,
                }
            }
            Rule::retrieve_step => {
                let mut parts = inner.into_inner();
                let query = self.string(parts.next()?);
                let output = self.output(parts)?;
                StepKind::Retrieve { query, output }
            }
            Rule::memory_step => {
                let mut parts = inner.into_inner();
                let write = parts.next()?.as_str() == "write";
                let key = self.string(parts.next()?);
                let mut from = None;
                let mut rest = Vec::new();
                for p in parts {
                    match p.as_rule() {
                        Rule::from_clause => from = Some(self.provenance_clause(p)),
                        Rule::expectation => expect = Some(self.expectation(p)),
                        _ => rest.push(p),
                    }
                }
                let output = if rest.is_empty() {
                    None
                } else {
                    self.output(rest.into_iter())
                };
                StepKind::Memory {
                    write,
                    key,
                    output,
                    from,
                }
            }
            Rule::compact_step | Rule::turn_step => {
                if let Some(p) = inner.into_inner().next() {
                    expect = Some(self.expectation(p));
                }
                if rule == Rule::compact_step {
                    StepKind::Compact
                } else {
                    StepKind::Turn
                }
            }
            Rule::skill_step => {
                let mut parts = inner.into_inner();
                let op = parts.next()?.as_str().to_string();
                let skill_id = self.string(parts.next()?);
                let mut digest = None;
                for p in parts {
                    match p.as_rule() {
                        Rule::string => digest = Some(self.string(p)),
                        _ => expect = Some(self.expectation(p)),
                    }
                }
                StepKind::Skill {
                    op,
                    skill_id,
                    digest,
                }
            }
            Rule::subagent_step => {
                let mut parts = inner.into_inner();
                let name = self.string(parts.next()?);
                let mut steps = Vec::new();
                for p in parts {
                    match p.as_rule() {
                        Rule::test_step => steps.extend(self.step(p)),
                        _ => expect = Some(self.expectation(p)),
                    }
                }
                StepKind::Subagent { name, steps }
            }
            Rule::send_step => {
                let mut parts = inner.into_inner();
                let hook = self.hook(parts.next()?);
                let payload = self.expr(parts.next()?, 0);
                if let Some(p) = parts.next() {
                    expect = Some(self.expectation(p));
                }
                StepKind::Send { hook, payload }
            }
            Rule::expect_step => {
                let mut parts = inner.into_inner();
                let request_id = self.string(parts.next()?);
                expect = parts.next().map(|p| self.expectation(p));
                StepKind::Expect { request_id }
            }
            Rule::approve_step => StepKind::Approve {
                approver: inner.into_inner().next().map(|s| self.string(s)),
            },
            _ => return None,
        };
        Some(Step { kind, expect, span })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(src: &str) -> Module {
        let (m, d) = parse(FileId(0), src);
        assert!(d.is_empty(), "unexpected diagnostics: {d:#?}");
        m
    }

    #[test]
    fn parses_the_design_sketch_rule() {
        let m = parse_ok(
            r#"package a.b
use std.taint
use rego "org.rego" as org
let consequential = {"send_money", "send_email"}
label untrusted when origin in {tool_output, retrieved} and not source in org.trusted
rule taint_window on toolCallRequest
  when tool.name in consequential and turns_since(untrusted) <= 3
  => deny "taint.window": "consequential call within 3 turns of untrusted content"
rule email_burst on toolCallRequest
  when count(toolCallRequest when tool.name == "send_email", this turn) >= 3
  => ask "rate.email": "fourth email" approver human "oncall" timeout 5m else deny
default allow
"#,
        );
        assert_eq!(m.items.len(), 8);
        let Item::Rule(r) = &m.items[5] else { panic!() };
        assert_eq!(r.name.name, "taint_window");
        assert_eq!(r.decision.kind, DecisionKind::Deny);
    }

    #[test]
    fn recovers_and_reports_every_broken_item() {
        let src =
            "rule a on x when => deny \"c\"\nlet ok = 1\nrule b on y when x == => deny \"d\"\n";
        let (m, d) = parse(FileId(0), src);
        assert_eq!(d.len(), 2, "{d:#?}");
        assert_eq!(m.items.len(), 1);
    }

    #[test]
    fn bad_escape_is_reported() {
        let (_, d) = parse(FileId(0), r#"let x = "a\qb""#);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, Code::SyntaxBadEscape);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let src = format!("let x = {}1{}", "(".repeat(500), ")".repeat(500));
        let (_, d) = parse(FileId(0), &src);
        assert_eq!(d[0].code, Code::SyntaxTooDeep);
    }
}
