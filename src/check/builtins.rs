//! The builtin functions: one table ([`BUILTINS`]) of each builtin's name, arity, argument and
//! result types, where it may be used, how it is lowered and what it means. The checker reads
//! it for arity, each argument's type, the result's type, placement and the help of its
//! diagnostics; the reference evaluator for the arity and the kind of value each call must
//! give; the compiler for the VM function of a plain builtin ([`Builtin`]);
//! the VM for a builtin's name in its errors; the language server for completion and hover; and
//! `tests/docs.rs` checks that docs/language.md §6.5 documents every entry.
//!
//! It lives in `check`, the first stage that knows builtins, so that every later stage
//! (`compile`, `vm`, `lsp`) reads it without a module calling one upstream of it.
//!
//! To add a builtin: see "How to add a builtin" in ARCHITECTURE.md.

use super::expr::Scope;
use super::types::Type;

/// The builtin functions the VM implements itself (`Op::Call`): the plain builtins, which take
/// their arguments' values and nothing else. The others compile to their own instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Len,
    Lower,
    Upper,
    StartsWith,
    EndsWith,
    Contains,
    Domain,
    ToString,
    Glob,
    TypeOf,
}

impl Builtin {
    /// The registry entry of this VM function.
    pub fn spec(self) -> &'static BuiltinSpec {
        BUILTINS
            .iter()
            .find(|s| s.lowering == Lowering::Vm(self))
            .expect("every VM builtin is in BUILTINS")
    }

    /// The name a policy calls it by.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// How many arguments a builtin takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arity {
    pub min: u8,
    pub max: u8,
}

impl Arity {
    const fn exactly(n: u8) -> Arity {
        Arity { min: n, max: n }
    }

    pub fn admits(self, n: usize) -> bool {
        (self.min as usize..=self.max as usize).contains(&n)
    }

    /// As diagnostics say it: `2`, `0 or 1`, `1 to 3`.
    pub fn describe(self) -> String {
        match self.max - self.min {
            0 => self.min.to_string(),
            1 => format!("{} or {}", self.min, self.max),
            _ => format!("{} to {}", self.min, self.max),
        }
    }
}

/// Where a builtin may be called. What the checker says elsewhere stays its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    /// Constants, label conditions, rules and history filters.
    Anywhere,
    /// Wherever an event is in view: label conditions, rules and history filters, not
    /// constants.
    Events,
    /// Rule conditions only (the session's provenance graph, history or intent).
    Rules,
    /// Conditions of rules on `toolCallRequest` only.
    ToolCallRules,
}

impl Allowed {
    pub(crate) fn admits(self, scope: Scope) -> bool {
        match self {
            Allowed::Anywhere => true,
            Allowed::Events => !matches!(scope, Scope::Const),
            Allowed::Rules => matches!(scope, Scope::Rule(_)),
            Allowed::ToolCallRules => {
                matches!(scope, Scope::Rule(h) if h.name == "toolCallRequest")
            }
        }
    }
}

/// What a builtin's argument must be; the checker holds each argument to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// Any value.
    Any,
    /// A payload field whose presence is asked: any value, warned about in a constant.
    Field,
    /// A string.
    Text,
    /// A string, or a list of strings.
    TextOrList,
    /// A string or a collection (list, set, object).
    Sized,
    /// A value that carries provenance: a tool argument, a payload field with provenance.
    Provenance,
    /// An origin, written as its name (`user_input`).
    Origin,
    /// A label, written as its name.
    Label,
    /// An origin or a label, written as its name.
    OriginOrLabel,
    /// An effect class: a string, checked against the classes when written out.
    EffectClass,
    /// A declared effect's name.
    Effect,
}

/// What a builtin gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    Bool,
    Number,
    Text,
    /// A list of strings.
    Texts,
    /// A list of arguments, each with provenance of its own (`links`).
    Args,
    /// One of the argument roles.
    Role,
    /// One of the effect classes.
    Class,
    /// A set of origins.
    Origins,
}

impl Returns {
    /// The checker's type for it.
    pub fn ty(self) -> Type {
        match self {
            Returns::Bool => Type::Bool,
            Returns::Number => Type::Number,
            Returns::Text => Type::String,
            Returns::Texts => Type::List(Box::new(Type::String)),
            Returns::Args => Type::List(Box::new(Type::Arg)),
            Returns::Role => Type::Enum(crate::roles::ROLES),
            Returns::Class => Type::Enum(crate::actions::CLASSES),
            Returns::Origins => Type::Set(Box::new(Type::Enum(crate::acs::fields::ORIGINS))),
        }
    }

    /// Whether a value of JSON kind `kind` (`"bool"`, `"number"`, `"string"`, `"list"`,
    /// `"object"`) is one this builtin may give.
    pub fn admits_kind(self, kind: &str) -> bool {
        match self {
            Returns::Bool => kind == "bool",
            Returns::Number => kind == "number",
            Returns::Text | Returns::Role | Returns::Class => kind == "string",
            Returns::Texts | Returns::Args | Returns::Origins => kind == "list",
        }
    }
}

/// How a call is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `NAME(…)`.
    Function,
    /// `intent.permits(…)`: a member of the session's intent.
    IntentMember,
}

/// How the compiler lowers a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lowering {
    /// `Op::Call` of this VM function, after the arguments' values.
    Vm(Builtin),
    /// Its own instructions (`compile::lower`): it reads provenance, labels, history, the
    /// intent, effects or a field's presence rather than values alone.
    Special,
}

/// One builtin.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinSpec {
    /// What a policy writes (`intent.permits` for the intent's member).
    pub name: &'static str,
    pub form: Form,
    pub arity: Arity,
    /// Its parameters, in order (`arity.max` of them).
    pub params: &'static [Param],
    pub returns: Returns,
    pub allowed: Allowed,
    pub lowering: Lowering,
    /// One line: what the call gives. The help of an arity error, and the hover text.
    pub doc: &'static str,
    /// For hover, when the plain `name(arg1, …)` and [`doc`](Self::doc) say too little: the
    /// signature(s) and the text.
    pub hover: Option<(&'static str, &'static str)>,
}

impl BuiltinSpec {
    /// The hover's signature and text.
    pub fn signature_and_text(&self) -> (String, &'static str) {
        match self.hover {
            Some((signature, text)) => (signature.to_string(), text),
            None => {
                let params: Vec<String> = (0..self.arity.max)
                    .map(|i| format!("arg{}", i + 1))
                    .collect();
                (format!("{}({})", self.name, params.join(", ")), self.doc)
            }
        }
    }
}

const fn special(
    name: &'static str,
    params: &'static [Param],
    returns: Returns,
    allowed: Allowed,
    doc: &'static str,
) -> BuiltinSpec {
    BuiltinSpec {
        name,
        form: Form::Function,
        arity: Arity::exactly(params.len() as u8),
        params,
        returns,
        allowed,
        lowering: Lowering::Special,
        doc,
        hover: None,
    }
}

const fn plain(
    name: &'static str,
    params: &'static [Param],
    returns: Returns,
    b: Builtin,
    doc: &'static str,
) -> BuiltinSpec {
    BuiltinSpec {
        name,
        form: Form::Function,
        arity: Arity::exactly(params.len() as u8),
        params,
        returns,
        allowed: Allowed::Anywhere,
        lowering: Lowering::Vm(b),
        doc,
        hover: None,
    }
}

use Param::*;

/// Every builtin, in the order completion offers them.
pub const BUILTINS: &[BuiltinSpec] = &[
    special(
        "turns_since",
        &[Label], Returns::Number,
        Allowed::Rules,
        "turns since content with this label last entered the context (a large number if never)",
    ),
    special(
        "derived_from",
        &[Provenance, Origin], Returns::Bool,
        Allowed::Anywhere,
        "whether a value's lineage includes content of this origin",
    ),
    special(
        "lineage_depth",
        &[Provenance], Returns::Number,
        Allowed::Anywhere,
        "the length of the longest derived_from chain behind a value",
    ),
    plain("len", &[Sized], Returns::Number, Builtin::Len, "the length of a string, list, set or object"),
    plain("lower", &[Text], Returns::Text, Builtin::Lower, "the string in lower case"),
    plain("upper", &[Text], Returns::Text, Builtin::Upper, "the string in upper case"),
    plain(
        "starts_with",
        &[Text, Text], Returns::Bool,
        Builtin::StartsWith,
        "whether the string starts with the prefix",
    ),
    plain(
        "ends_with",
        &[Text, Text], Returns::Bool,
        Builtin::EndsWith,
        "whether the string ends with the suffix",
    ),
    plain(
        "contains",
        &[Sized, Any], Returns::Bool,
        Builtin::Contains,
        "whether the string contains the text, or the collection the element",
    ),
    special(
        "present",
        &[Field], Returns::Bool,
        Allowed::Anywhere,
        "whether the field is present in this payload",
    ),
    plain(
        "domain",
        &[Text], Returns::Text,
        Builtin::Domain,
        "the host part of a URL (`https://a.example/x` → `a.example`)",
    ),
    plain("string", &[Any], Returns::Text, Builtin::ToString, "the value as a string"),
    special(
        "sources",
        &[Provenance], Returns::Origins,
        Allowed::Rules,
        "the origins of the places a value was taken from (its direct sources), e.g. {\"user_input\"}",
    ),
    special(
        "links",
        &[TextOrList], Returns::Args,
        Allowed::Rules,
        "the web and e-mail addresses written in a text value, each an argument whose sources are inferred from its own text",
    ),
    special(
        "requested_by_user",
        &[], Returns::Bool,
        Allowed::Events,
        "whether this content is the output of a call whose every destination and identifier argument was found in the user's request (the page at the URL the user typed, the file the user named)",
    ),
    special(
        "role",
        &[Text], Returns::Role,
        Allowed::Rules,
        "the role of the named argument in this call's tool: destination, secret, amount, identifier, text or none (its `tool` declaration's, else the standard catalogue's)",
    ),
    special(
        "effect_class",
        &[], Returns::Class,
        Allowed::ToolCallRules,
        "what this call does: read, communicate, money, credentials, account, create, change, delete, reserve, share, publish, execute or unknown (its `tool` declaration's `as CLASS`, else the standard catalogue's, from the tool's name)",
    ),
    special(
        "requested",
        &[EffectClass], Returns::Bool,
        Allowed::Rules,
        "whether the user's own words (the Intent's raw text, the user's messages) ask for an action of this effect class",
    ),
    special(
        "requested_object",
        &[], Returns::Bool,
        Allowed::ToolCallRules,
        "whether the user's own words name every kind of thing this call's tool acts on (a hotel, a car, a restaurant, a flight, an event, a file, a channel, a member, a standing payment), read from the tool's name; true for a tool whose name names none",
    ),
    special(
        "delegated",
        &[], Returns::Bool,
        Allowed::Rules,
        "whether the user's words hand the choice of actions to content (\"do the tasks on my list\", \"follow the e-mail's instructions\")",
    ),
    special(
        "read_at",
        &[Provenance], Returns::Texts,
        Allowed::Rules,
        "the places a value's direct sources were read at: the destination arguments (a channel, an inbox's owner, a page's address) of the calls whose results it was taken from, lower-cased; a rule fails (decision failure) when one is a place Warden cannot name",
    ),
    special(
        "lineage_inferred",
        &[Provenance], Returns::Bool,
        Allowed::Rules,
        "whether a value's sources were inferred from the session's content (no declared lineage)",
    ),
    special(
        "found_in",
        &[Any, Origin], Returns::Bool,
        Allowed::Rules,
        "whether every token of a value appeared in content of this origin (lineage inference)",
    ),
    special(
        "taken_from",
        &[Provenance, OriginOrLabel], Returns::Bool,
        Allowed::Rules,
        "whether some direct source of a value has this origin or carries this label",
    ),
    special(
        "taken_only_from",
        &[Provenance, OriginOrLabel], Returns::Bool,
        Allowed::Rules,
        "whether every direct source of a value has this origin or carries this label",
    ),
    plain(
        "glob",
        &[Text, Text], Returns::Bool,
        Builtin::Glob,
        "whether the whole text matches the glob pattern (`*` any run, `?` one character)",
    ),
    plain(
        "type_of",
        &[Any], Returns::Text,
        Builtin::TypeOf,
        "the kind of a value: \"string\", \"number\", \"bool\", \"list\" or \"object\"",
    ),
    BuiltinSpec {
        name: "effect_state",
        form: Form::Function,
        arity: Arity { min: 0, max: 1 },
        params: &[Effect],
        returns: Returns::Text,
        allowed: Allowed::ToolCallRules,
        lowering: Lowering::Special,
        doc: "the state of this call's effect key: \"none\", \"reserved\", \"committed\", \"failed\" or \"ambiguous\" (docs/effects.md)",
        hover: Some((
            "effect_state(effect) -> string\neffect_state() -> string",
            "The state of this call's key for the declared effect: `\"none\"`, `\"reserved\"`, `\"committed\"`, `\"failed\"` or `\"ambiguous\"`; without an argument, the strongest over all the call's effects. Undefined for a call without such a key; rules on toolCallRequest only (docs/effects.md)",
        )),
    },
    BuiltinSpec {
        name: "intent.permits",
        form: Form::IntentMember,
        arity: Arity { min: 1, max: 3 },
        params: &[Any, Any, Any],
        returns: Returns::Bool,
        allowed: Allowed::Rules,
        lowering: Lowering::Special,
        doc: "whether the session's declared intent permits this tool (and resource or operation)",
        hover: Some((
            "intent.permits(tool, resource: …, operation: …) -> bool",
            "Whether the session's declared intent permits this tool (and resource or operation)",
        )),
    },
];

/// The builtin a policy calls as `name(…)`.
pub fn builtin(name: &str) -> Option<&'static BuiltinSpec> {
    BUILTINS
        .iter()
        .find(|b| b.form == Form::Function && b.name == name)
}

/// Any builtin, by the name it is resolved to (`Resolution::Builtin`), `intent.permits`
/// included.
pub fn spec(name: &str) -> Option<&'static BuiltinSpec> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// The builtins called as `name(…)`.
pub fn functions() -> impl Iterator<Item = &'static BuiltinSpec> {
    BUILTINS.iter().filter(|b| b.form == Form::Function)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_vm_builtin_has_one_entry() {
        for (i, b) in BUILTINS.iter().enumerate() {
            assert!(
                BUILTINS[..i].iter().all(|o| o.name != b.name),
                "{} twice",
                b.name
            );
        }
        for b in [
            Builtin::Len,
            Builtin::Lower,
            Builtin::Upper,
            Builtin::StartsWith,
            Builtin::EndsWith,
            Builtin::Contains,
            Builtin::Domain,
            Builtin::ToString,
            Builtin::Glob,
            Builtin::TypeOf,
        ] {
            let n = BUILTINS
                .iter()
                .filter(|s| s.lowering == Lowering::Vm(b))
                .count();
            assert_eq!(n, 1, "{b:?}");
        }
    }

    #[test]
    fn every_entry_types_each_argument_its_arity_admits() {
        for b in BUILTINS {
            assert_eq!(b.params.len(), b.arity.max as usize, "{}", b.name);
        }
    }

    #[test]
    fn arities_read_as_diagnostics_say_them() {
        assert_eq!(Arity::exactly(2).describe(), "2");
        assert_eq!(spec("effect_state").unwrap().arity.describe(), "0 or 1");
        assert_eq!(spec("intent.permits").unwrap().arity.describe(), "1 to 3");
    }
}
