//! The abstract syntax tree. Every node carries the byte span it was parsed from, so that the
//! checker, the formatter and the language server can point back into the source.

use crate::diagnostics::Span;

/// A name as written, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// One parsed `.ward` file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Module {
    pub items: Vec<Item>,
}

impl Module {
    pub fn package(&self) -> Option<&Package> {
        self.items.iter().find_map(|item| match item {
            Item::Package(p) => Some(p),
            _ => None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Package(Package),
    Use(Use),
    Let(Let),
    Pred(PredDecl),
    Label(Label),
    Rule(RuleDecl),
    Default(DefaultDecl),
    Test(Test),
    Mask(Mask),
    Effect(EffectDecl),
    Tool(ToolDecl),
}

/// `tool NAME(ARG: TYPE, OPTIONAL?: TYPE, …)`: the arguments a tool takes and their types.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDecl {
    /// The tool name, as a bare name or a string.
    pub name: StringLit,
    pub quoted: bool,
    pub params: Vec<ToolParam>,
    /// `as CLASS` after the parameters: what the tool does, overriding the catalogue's
    /// (src/actions.rs).
    pub class: Option<Ident>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolParam {
    pub name: Ident,
    /// Written `NAME?`: the call may leave it out.
    pub optional: bool,
    pub ty: ArgType,
    /// `as ROLE`: the argument's role, overriding the catalogue's (src/roles.rs).
    pub role: Option<Ident>,
    pub span: Span,
}

/// The type of a declared tool argument's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgType {
    String,
    Number,
    /// A whole number.
    Integer,
    Bool,
    Object,
    /// Any JSON value.
    Any,
    /// `[T]`: a list whose every element is a `T`.
    List(Box<ArgType>),
}

impl ArgType {
    pub const NAMES: &'static [&'static str] =
        &["string", "number", "integer", "bool", "object", "any"];

    pub fn from_name(name: &str) -> Option<ArgType> {
        Some(match name {
            "string" => ArgType::String,
            "number" => ArgType::Number,
            "integer" => ArgType::Integer,
            "bool" => ArgType::Bool,
            "object" => ArgType::Object,
            "any" => ArgType::Any,
            _ => return None,
        })
    }
}

impl std::fmt::Display for ArgType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgType::String => f.write_str("string"),
            ArgType::Number => f.write_str("number"),
            ArgType::Integer => f.write_str("integer"),
            ArgType::Bool => f.write_str("bool"),
            ArgType::Object => f.write_str("object"),
            ArgType::Any => f.write_str("any"),
            ArgType::List(t) => write!(f, "[{t}]"),
        }
    }
}

/// `effect NAME for TOOL [not_executed_on_error] = key(PART, …)`: how a call's real-world
/// effect is identified (docs/effects.md).
#[derive(Debug, Clone, PartialEq)]
pub struct EffectDecl {
    pub name: Ident,
    /// The tool name, as a bare name or a string.
    pub tool: StringLit,
    /// Whether `tool` was written as a string.
    pub tool_quoted: bool,
    pub not_executed_on_error: bool,
    /// `lease N turns` / `lease DURATION`.
    pub lease: Option<Lease>,
    pub key: Vec<Expr>,
    pub span: Span,
}

/// How long a reservation may wait for its result before it becomes ambiguous.
#[derive(Debug, Clone, PartialEq)]
pub enum Lease {
    Turns(u64),
    Time(Duration),
}

/// `mask args.password`: a payload field whose value explain traces never show.
#[derive(Debug, Clone, PartialEq)]
pub struct Mask {
    pub place: Place,
    pub span: Span,
}

impl Item {
    pub fn span(&self) -> Span {
        match self {
            Item::Package(x) => x.span,
            Item::Use(x) => x.span,
            Item::Let(x) => x.span,
            Item::Pred(x) => x.span,
            Item::Label(x) => x.span,
            Item::Rule(x) => x.span,
            Item::Default(x) => x.span,
            Item::Test(x) => x.span,
            Item::Mask(x) => x.span,
            Item::Effect(x) => x.span,
            Item::Tool(x) => x.span,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    pub path: Vec<Ident>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum UseKind {
    /// `use std.taint` or `use acme.rules as acme`: another Warden module.
    Module { path: Vec<Ident> },
    /// `use rego "org.rego" as org`: Rego modules, files or folders.
    Rego { path: StringLit },
    /// `use rego data "data.json" as d`: a Rego data document.
    RegoData { path: StringLit },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Use {
    pub kind: UseKind,
    pub alias: Option<Ident>,
    pub span: Span,
}

impl Use {
    /// The name the module is known by in this file: the alias, or the last path segment.
    pub fn local_name(&self) -> Option<&Ident> {
        match (&self.alias, &self.kind) {
            (Some(alias), _) => Some(alias),
            (None, UseKind::Module { path }) => path.last(),
            (None, _) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Let {
    pub name: Ident,
    pub value: Expr,
    pub span: Span,
}

/// `pred NAME(PARAM, …) = BODY`: a named condition, inlined where it is called.
#[derive(Debug, Clone, PartialEq)]
pub struct PredDecl {
    pub name: Ident,
    pub params: Vec<Param>,
    pub body: Expr,
    pub span: Span,
}

/// A predicate's parameter: `v`, or `x: number` with its type as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ty: Option<Ident>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub name: Ident,
    /// `label secret redact`: values carrying this label are masked in explain traces.
    pub redact: bool,
    pub when: Option<Expr>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    /// As written: `toolCallRequest`, `agbom/snapshot`, `protocols/MCP/tools/call`.
    pub name: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleDecl {
    pub name: Ident,
    pub hooks: Vec<Hook>,
    /// `from rego "data.pkg.deny"`: the rule's decisions come from a Rego deny set. Its
    /// `decision` is then a deny with the rule's name as reason code.
    pub rego: Option<StringLit>,
    pub when: Option<Expr>,
    pub decision: Decision,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DefaultDecl {
    /// Empty: the default for every hook.
    pub hooks: Vec<Hook>,
    pub decision: Decision,
    pub span: Span,
}

/// The word after `=>` is an [`crate::acs::DecisionKind`] (one type from the AST to the wire).
pub use crate::acs::decision::DecisionKind;

#[derive(Debug, Clone, PartialEq)]
pub struct Reason {
    pub code: StringLit,
    pub reasoning: Option<StringLit>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub kind: DecisionKind,
    pub reason: Option<Reason>,
    pub approver: Option<Approver>,
    pub question: Option<StringLit>,
    pub timeout: Option<Duration>,
    /// `else deny`: what happens when an ask or a defer times out.
    pub on_timeout: Option<(DecisionKind, Span)>,
    /// `expires 10m` (ask only): how long a granted approval stays usable.
    pub expires: Option<Duration>,
    /// `extend intent [session|this_request]` (ask only): the intent extension offered to the
    /// approver.
    pub extend: Option<(ExtendScope, Span)>,
    /// `resolve human_approval` (defer only).
    pub resolve: Option<Ident>,
    /// `because insufficient_context` (defer only).
    pub because: Option<Ident>,
    pub modifications: Vec<Modification>,
    pub span: Span,
}

/// The scope of an `extend intent` (ACS `intent_extension.scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtendScope {
    /// The approval covers the approved call only.
    ThisRequest,
    /// The approved call's tool joins the session's Intent.
    Session,
}

impl ExtendScope {
    pub fn as_str(self) -> &'static str {
        match self {
            ExtendScope::ThisRequest => "this_request",
            ExtendScope::Session => "session",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApproverKind {
    Human,
    Agent,
    Service,
}

impl ApproverKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ApproverKind::Human => "human",
            ApproverKind::Agent => "agent",
            ApproverKind::Service => "service",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Approver {
    pub kind: ApproverKind,
    pub id: StringLit,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Duration {
    pub millis: u64,
    /// The unit as written, kept so the formatter prints `5m`, not `300000ms`.
    pub unit: DurationUnit,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationUnit {
    Millis,
    Seconds,
    Minutes,
    Hours,
    Days,
}

impl DurationUnit {
    pub fn suffix(self) -> &'static str {
        match self {
            DurationUnit::Millis => "ms",
            DurationUnit::Seconds => "s",
            DurationUnit::Minutes => "m",
            DurationUnit::Hours => "h",
            DurationUnit::Days => "d",
        }
    }

    pub fn millis(self) -> u64 {
        match self {
            DurationUnit::Millis => 1,
            DurationUnit::Seconds => 1_000,
            DurationUnit::Minutes => 60_000,
            DurationUnit::Hours => 3_600_000,
            DurationUnit::Days => 86_400_000,
        }
    }
}

impl Duration {
    pub fn amount(&self) -> u64 {
        self.millis / self.unit.millis()
    }
}

/// A place in the payload a modification writes: `args.card`, `outputs[0].value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Place {
    pub segments: Vec<PlaceSegment>,
    pub span: Span,
}

impl Place {
    /// The JSON Pointer (relative to the payload) this place names: `args` is `arguments`, and
    /// `args.x` is the argument's value (`/arguments/x/value`), not its provenance; what is
    /// inside an argument is inside its value (`args.to[0]` is `/arguments/to/value/0`, as the
    /// ACS `modifications` schema's pointers into the payload need).
    pub fn pointer(&self) -> String {
        pointer_of(&self.segments)
    }
}

impl Place {
    /// The place read as an expression (`args.to[0]` as the member and index chain).
    pub fn to_expr(&self) -> Expr {
        let mut segments = self.segments.iter();
        let first = match segments.next() {
            Some(PlaceSegment::Field(id)) => Expr {
                kind: ExprKind::Name(id.name.clone()),
                span: id.span,
            },
            _ => Expr {
                kind: ExprKind::Null,
                span: self.span,
            },
        };
        segments.fold(first, |e, seg| match seg {
            PlaceSegment::Field(id) => Expr {
                span: e.span.to(id.span),
                kind: ExprKind::Member(Box::new(e), id.clone()),
            },
            PlaceSegment::Index(n, s) => Expr {
                // Up to the closing bracket.
                span: Span {
                    start: e.span.start,
                    end: s.end + 1,
                },
                kind: ExprKind::Index(
                    Box::new(e),
                    Box::new(Expr {
                        kind: ExprKind::Number(*n as f64),
                        span: *s,
                    }),
                ),
            },
        })
    }
}

/// [`Place::pointer`] of a place's segments.
pub fn pointer_of(segments: &[PlaceSegment]) -> String {
    let on_argument =
        matches!(segments.first(), Some(PlaceSegment::Field(id)) if id.name == "args");
    let mut out = String::new();
    for (i, seg) in segments.iter().enumerate() {
        out.push('/');
        match seg {
            PlaceSegment::Field(id) if i == 0 && on_argument => out.push_str("arguments"),
            PlaceSegment::Field(id) => out.push_str(&id.name.replace('~', "~0").replace('/', "~1")),
            PlaceSegment::Index(n, _) => out.push_str(&n.to_string()),
        }
        // After the argument's name: its value.
        if on_argument && i == 1 {
            out.push_str("/value");
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
pub enum PlaceSegment {
    Field(Ident),
    Index(u64, Span),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Modification {
    Redact {
        place: Place,
        /// `with EXPR`: a constant string expression (`"[REDACTED]"` without it).
        replacement: Option<Expr>,
        span: Span,
    },
    /// `redact each k, a in PLACE [when COND] [with EXPR]`: every element of the collection at
    /// `collection` (the arguments, a list argument, a payload list) for which `select`'s body
    /// holds. `select` is that choice as a quantifier of kind [`QuantifierKind::Each`] over the
    /// place, so names, types and scopes are a quantifier's.
    RedactEach {
        collection: Place,
        select: Expr,
        replacement: Option<Expr>,
        span: Span,
    },
    Set {
        place: Place,
        value: Expr,
        span: Span,
    },
    Replace {
        content: Expr,
        span: Span,
    },
}

impl Modification {
    pub fn span(&self) -> Span {
        match self {
            Modification::Redact { span, .. }
            | Modification::RedactEach { span, .. }
            | Modification::Set { span, .. }
            | Modification::Replace { span, .. } => *span,
        }
    }
}

/// A string literal: its decoded value and where the quotes were.
#[derive(Debug, Clone, PartialEq)]
pub struct StringLit {
    pub value: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Bool(bool),
    /// `null`: JSON null. Absent when Warden reads it; `null` when passed to Rego.
    Null,
    Number(f64),
    String(String),
    Duration(Duration),
    /// A bare name: a constant, a label, a payload field, a builtin root or an enum value.
    Name(String),
    /// `$`: the current event, inside a history filter.
    Current,
    Member(Box<Expr>, Ident),
    Index(Box<Expr>, Box<Expr>),
    Call(Box<Expr>, Vec<Arg>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    Set(Vec<Expr>),
    List(Vec<Expr>),
    Object(Vec<(StringLit, Expr)>),
    Quantifier {
        kind: QuantifierKind,
        /// `any name, a in args`: the name (of a map or `args`) or index (of a list) of
        /// each element.
        key: Option<Ident>,
        var: Ident,
        over: Box<Expr>,
        body: Box<Expr>,
    },
    History(Box<History>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Not,
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Has,
    Matches,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Or => "or",
            BinaryOp::And => "and",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::In => "in",
            BinaryOp::NotIn => "not in",
            BinaryOp::Has => "has",
            BinaryOp::Matches => "matches",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
        }
    }

    /// `==`, `!=`, `<`, `<=`, `>`, `>=`, `in`, `not in`: a comparison of two values.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq
                | BinaryOp::Ne
                | BinaryOp::Lt
                | BinaryOp::Le
                | BinaryOp::Gt
                | BinaryOp::Ge
                | BinaryOp::In
                | BinaryOp::NotIn
        )
    }

    /// Binding strength, higher binds tighter (used by the formatter to place parentheses).
    pub fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::And => 2,
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge
            | BinaryOp::In
            | BinaryOp::NotIn
            | BinaryOp::Has
            | BinaryOp::Matches => 4,
            BinaryOp::Add | BinaryOp::Sub => 5,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 6,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantifierKind {
    Any,
    All,
    /// The elements a `redact each` chooses: the keys (names or positions) of every element
    /// whose body is true or undefined (never written as an expression).
    Each,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryKind {
    Count,
    Exists,
}

#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub kind: HistoryKind,
    pub hook: Hook,
    pub filter: Option<Expr>,
    pub window: Option<Window>,
    pub by: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum WindowKind {
    ThisTurn,
    LastTurns(u32),
    LastTime(Duration),
    Session,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub kind: WindowKind,
    pub span: Span,
}

// ---------------------------------------------------------------------------------------------
// Tests

#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    pub name: StringLit,
    pub strict: bool,
    /// `test "…" from "trace.jsonl" { … }`: a recorded trace to replay.
    pub fixture: Option<StringLit>,
    pub steps: Vec<Step>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    pub kind: DecisionKind,
    /// Reason codes the decision must carry.
    pub codes: Vec<StringLit>,
    /// For `=> modify { … }`: modifications the decision must contain.
    pub modifications: Vec<Modification>,
    pub span: Span,
}

/// Where a test value came from: `from user`, `from tool_output "read_file"`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvenanceSpec {
    pub origin: Ident,
    pub source: Option<StringLit>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CallArg {
    pub name: Ident,
    pub value: Expr,
    /// `from SPEC` or `from [SPEC, …]`: where the argument was taken from (empty: not said).
    pub from: Vec<ProvenanceSpec>,
    /// `[x from SPEC, y]`: each element's own sources, when the list was written so
    /// (`value` is then the list of the elements).
    pub element_from: Vec<Vec<ProvenanceSpec>>,
}

impl CallArg {
    /// Where the argument's text ends (after its `from` clause, if any).
    pub fn end(&self) -> u32 {
        self.from.last().map_or(self.value.span.end, |p| p.span.end)
    }
}

/// The content a step produces: `-> untrusted "text"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub origin: Option<Ident>,
    pub value: Expr,
    pub expect: Option<Expectation>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub kind: StepKind,
    pub expect: Option<Expectation>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    With {
        target: Expr,
        value: Expr,
    },
    Session {
        intent: Option<StringLit>,
        permits: Option<Expr>,
        strict: bool,
    },
    User(StringLit),
    Agent {
        text: StringLit,
        from: Option<ProvenanceSpec>,
    },
    Call {
        tool: Ident,
        args: Vec<CallArg>,
        output: Option<Output>,
    },
    Result {
        tool: Ident,
        status: Option<String>,
        output: Output,
    },
    Retrieve {
        query: StringLit,
        output: Output,
    },
    Memory {
        write: bool,
        key: StringLit,
        output: Option<Output>,
        from: Option<ProvenanceSpec>,
    },
    Compact,
    Turn,
    Skill {
        op: String,
        skill_id: StringLit,
        digest: Option<StringLit>,
    },
    Subagent {
        name: StringLit,
        steps: Vec<Step>,
    },
    Send {
        hook: Hook,
        payload: Expr,
    },
    Expect {
        request_id: StringLit,
    },
    /// `approve [as "ID"]`: grant the session's latest ask (as its own approver by default).
    Approve {
        approver: Option<StringLit>,
    },
}
