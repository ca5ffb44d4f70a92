//! The typed view of every ACS v0.1.0 hook payload: which fields a policy may read after
//! `on <hook>`, their types, whether they are required, and which decisions each hook may
//! legally return. The policy checker and the language server both read this table.
//!
//! Where the hook's schema is vendored in `vendor/acs/v0.1.0` the table follows it exactly
//! ([`Source::Schema`], checked field by field by `tests/acs_fields.rs`). Where it could not be
//! obtained, the fields are rebuilt from the specification text and the reference
//! implementation's types ([`Source::Notes`]; docs/acs.md#hooks).
//!
//! Conventions:
//! - Paths are relative to `params.payload` (for [`METADATA`], to `params.metadata`).
//! - Object children are `parent.child`; list items are `list[]`, their fields `list[].x`;
//!   map values are `map.*`, their fields `map.*.x`.
//! - `required` means "required inside its parent object, when the parent is present".
//! - Provenance sub-objects are typed [`Ty::Provenance`]; their own fields live once in
//!   [`PROVENANCE`]. IBAC Intent objects are [`Ty::Intent`], fields in [`INTENT`].
//! - One deliberate deviation from the vendored schemas: every `provenance` member is
//!   `required: false`. The vendored (older, `a0c16bf`) hook schemas require it, but current
//!   upstream made it optional in the base schemas (docs/acs.md#provenance).

use serde_json::Value;

/// The type of a payload field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// A JSON string (any `format`/`pattern` constraint is not tracked here).
    String,
    /// Any JSON number.
    Number,
    /// A JSON number with no fractional part.
    Integer,
    /// `true` or `false`.
    Bool,
    /// Any JSON value (e.g. a tool argument's `value`).
    Any,
    /// A string restricted to these values.
    Enum(&'static [&'static str]),
    /// An object; its sub-fields are separate [`Field`] entries `path.child`.
    Object,
    /// An array; the item type is [`Field::items`]; item sub-fields are entries `path[].child`.
    List,
    /// A string-keyed map; the value type is [`Field::items`]; value sub-fields are `path.*.child`.
    Map,
    /// A Provenance object; its fields are in [`PROVENANCE`].
    Provenance,
    /// An IBAC Intent object; its fields are in [`INTENT`].
    Intent,
}

/// One field of a payload (or of metadata, provenance, intent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Normalised path, e.g. `tool.name`, `arguments.*.value`, `outputs[].provenance`.
    pub path: &'static str,
    /// Its type.
    pub ty: Ty,
    /// For [`Ty::List`]: the item type. For [`Ty::Map`]: the value type. Otherwise `None`.
    pub items: Option<Ty>,
    /// Required inside its parent object (when the parent is present).
    pub required: bool,
    /// One line, shown on hover.
    pub doc: &'static str,
}

/// Where a hook's field list comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A vendored schema, path relative to `vendor/acs/v0.1.0`.
    Schema(&'static str),
    /// Rebuilt from the specification text (the schema could not be obtained;
    /// docs/acs.md#gap-missing-schemas).
    Notes,
}

/// The decisions a hook may return are [`crate::acs::DecisionKind`]s.
pub use crate::acs::decision::DecisionKind;

/// One hook (ACS method) a policy can attach to.
#[derive(Debug)]
pub struct HookSpec {
    /// The wire method, e.g. `steps/toolCallRequest`.
    pub method: &'static str,
    /// What a policy writes after `on`: the bare step name for `steps/*`, else the method.
    pub name: &'static str,
    /// The decisions this hook may legally return.
    pub decisions: &'static [DecisionKind],
    /// The step has already happened; the Guardian only records it.
    pub audit_only: bool,
    /// Where the table comes from (a vendored schema, or docs/acs.md).
    pub source: Source,
    /// One line on the hook, for hover.
    pub doc: &'static str,
    /// The hook's payload fields.
    pub fields: &'static [Field],
}

impl HookSpec {
    /// Whether this hook may legally return `d`.
    pub fn allows(&self, d: DecisionKind) -> bool {
        self.decisions.contains(&d)
    }

    /// The legal decisions as words: `allow, deny, modify`.
    pub fn decision_words(&self) -> String {
        let words: Vec<&str> = self.decisions.iter().map(|k| k.as_str()).collect();
        words.join(", ")
    }
}

/// Find a hook by its short name (`toolCallRequest`) or its method (`steps/toolCallRequest`).
pub fn hook(name: &str) -> Option<&'static HookSpec> {
    HOOKS.iter().find(|h| h.name == name || h.method == name)
}

/// Exact path match in the normalised form (`a.b`, `a[].b`, `a.*.b`).
pub fn lookup(fields: &'static [Field], path: &str) -> Option<&'static Field> {
    fields.iter().find(|f| f.path == path)
}

/// The direct children of `prefix` (`""` = top level; `"tool"` gives `tool.name`...;
/// `"outputs[]"` gives `outputs[].value`...; `"arguments.*"` gives `arguments.*.value`...).
pub fn children<'a>(
    fields: &'static [Field],
    prefix: &'a str,
) -> impl Iterator<Item = &'static Field> + 'a {
    fields.iter().filter(move |f| parent(f.path) == prefix)
}

fn parent(path: &str) -> &str {
    path.rsplit_once('.').map_or("", |(p, _)| p)
}

/// `payload.tool.name`, read without `Value::pointer` (which allocates a string per path
/// segment): the same answer for every JSON value.
pub fn tool_name(payload: &Value) -> Option<&str> {
    member(payload, "tool")
        .and_then(|t| member(t, "name"))
        .and_then(Value::as_str)
}

/// `v.get(key)` for an object `v`, with small objects scanned instead of hashed: a
/// `serde_json::Map` hashes every key with SipHash, which costs more than comparing a handful
/// of keys (keys are unique, so the answer is the same).
pub fn member<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => map_member(m, key),
        _ => None,
    }
}

/// The value at a path of member names (`at(v, &["provenance", "origin"])`): what
/// `Value::pointer` reads for a pointer of plain names, without parsing a pointer (which
/// allocates two strings per name). Names only: an array's element is not reached.
///
/// ```
/// use serde_json::json;
/// use warden::acs::fields::at;
///
/// let v = json!({"provenance": {"origin": "user_input"}, "a/b": [1]});
/// assert_eq!(at(&v, &["provenance", "origin"]), v.pointer("/provenance/origin"));
/// assert_eq!(at(&v, &["a/b"]), v.pointer("/a~1b"));
/// assert_eq!(at(&v, &["provenance", "turn"]), None);
/// assert_eq!(at(&v, &["a/b", "0"]), None);
/// ```
pub fn at<'v>(v: &'v Value, names: &[&str]) -> Option<&'v Value> {
    names.iter().try_fold(v, |v, name| member(v, name))
}

/// [`member`] on the map itself.
pub fn map_member<'v>(m: &'v serde_json::Map<String, Value>, key: &str) -> Option<&'v Value> {
    /// Up to this many keys a scan beats a SipHash of the key.
    const SCAN_UP_TO: usize = 8;
    if m.len() <= SCAN_UP_TO {
        m.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        m.get(key)
    }
}

/// [`map_member`], mutable.
pub fn map_member_mut<'v>(
    m: &'v mut serde_json::Map<String, Value>,
    key: &str,
) -> Option<&'v mut Value> {
    const SCAN_UP_TO: usize = 8;
    if m.len() <= SCAN_UP_TO {
        m.iter_mut()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v)
    } else {
        m.get_mut(key)
    }
}

/// [`member`], mutable.
pub fn member_mut<'v>(v: &'v mut Value, key: &str) -> Option<&'v mut Value> {
    match v {
        Value::Object(m) => map_member_mut(m, key),
        _ => None,
    }
}

/// How deep [`provenance_records`] looks into a payload.
pub const PROVENANCE_WALK_DEPTH: usize = 64;

/// Every Provenance record in a payload, in document order: each object with a string
/// `provenance_id` and a string `origin` (the walk does not look inside one), then, when the
/// record has Warden's `elements` extension (docs/language.md), the records of a list
/// argument's elements, which are lineage nodes too. Nothing deeper than
/// [`PROVENANCE_WALK_DEPTH`] is visited.
pub fn provenance_records(payload: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    walk_provenance(payload, &mut out, 0);
    out
}

fn walk_provenance<'v>(v: &'v Value, out: &mut Vec<&'v Value>, depth: usize) {
    if depth > PROVENANCE_WALK_DEPTH {
        return;
    }
    match v {
        Value::Object(m) => {
            if map_member(m, "provenance_id").is_some_and(Value::is_string)
                && map_member(m, "origin").is_some_and(Value::is_string)
            {
                out.push(v);
                if let Some(Value::Array(records)) = map_member(m, "elements") {
                    for r in records {
                        walk_provenance(r, out, depth + 1);
                    }
                }
                return;
            }
            for child in m.values() {
                walk_provenance(child, out, depth + 1);
            }
        }
        Value::Array(a) => {
            for child in a {
                walk_provenance(child, out, depth + 1);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Constructors and shared vocabularies.

const fn fld(path: &'static str, ty: Ty, required: bool, doc: &'static str) -> Field {
    Field {
        path,
        ty,
        items: None,
        required,
        doc,
    }
}

const fn list(path: &'static str, items: Ty, required: bool, doc: &'static str) -> Field {
    Field {
        path,
        ty: Ty::List,
        items: Some(items),
        required,
        doc,
    }
}

const fn map(path: &'static str, items: Ty, required: bool, doc: &'static str) -> Field {
    Field {
        path,
        ty: Ty::Map,
        items: Some(items),
        required,
        doc,
    }
}

const ORIGIN_VALUES: &[&str] = &[
    "user_input",
    "system",
    "tool_output",
    "retrieved",
    "agent_generated",
    "a2a_inbound",
    "external",
];

/// The seven Provenance `origin` values.
pub static ORIGINS: &[&str] = ORIGIN_VALUES;

const CONTENT_TYPES: &[&str] = &["text", "image", "audio", "file"];
const KNOWLEDGE_SOURCE_TYPES: &[&str] = &[
    "vector_db",
    "search_index",
    "knowledge_base",
    "web_search",
    "other",
];
const MEMORY_SCOPES: &[&str] = &["session", "user", "tenant", "global"];
const COMPONENT_TYPES: &[&str] = &[
    "model",
    "mcp_server",
    "a2a_peer",
    "tool",
    "knowledge_source",
    "memory_store",
    "agent_capability",
];

use DecisionKind::{Allow, Ask, Defer, Deny, Modify};

const ALL_FIVE: &[DecisionKind] = &[Allow, Deny, Modify, Ask, Defer];
const ALLOW_DENY: &[DecisionKind] = &[Allow, Deny];
const ALLOW_DENY_MODIFY: &[DecisionKind] = &[Allow, Deny, Modify];
const ALLOW_MODIFY: &[DecisionKind] = &[Allow, Modify];
const ALLOW_ONLY: &[DecisionKind] = &[Allow];

// ---------------------------------------------------------------------------------------------
// Envelope-level objects.

/// `params.metadata` (request-envelope.json `Metadata`), paths relative to `metadata`.
pub static METADATA: &[Field] = &[
    fld(
        "agent_id",
        Ty::String,
        true,
        "Identifier of the observed agent.",
    ),
    fld(
        "agent_name",
        Ty::String,
        false,
        "Human-readable agent name.",
    ),
    fld(
        "session_id",
        Ty::String,
        true,
        "Session UUID; keys the audit chain.",
    ),
    fld(
        "turn_id",
        Ty::String,
        false,
        "Current turn; set between turnStart and turnEnd.",
    ),
    fld(
        "parent_turn_id",
        Ty::String,
        false,
        "Enclosing turn when turns nest.",
    ),
    fld(
        "session_state",
        Ty::Object,
        false,
        "The client's (non-authoritative) view of session state.",
    ),
    fld(
        "session_state.chain_hash",
        Ty::String,
        false,
        "Chain head as the client last saw it.",
    ),
    fld(
        "environment",
        Ty::Enum(&["development", "staging", "production"]),
        false,
        "Deployment stage the agent runs in.",
    ),
    fld("platform", Ty::String, false, "Agent framework or host."),
    fld(
        "platform_version",
        Ty::String,
        false,
        "Version of the agent framework or host.",
    ),
    fld("user_context", Ty::Object, false, "Who the agent acts for."),
    fld(
        "user_context.user_id",
        Ty::String,
        false,
        "End-user identifier.",
    ),
    list(
        "user_context.roles",
        Ty::String,
        false,
        "Roles granted to the end user.",
    ),
    fld(
        "user_context.authentication_method",
        Ty::String,
        false,
        "How the end user signed in.",
    ),
];

/// A Provenance object (provenance.json), paths relative to the object.
pub static PROVENANCE: &[Field] = &[
    fld(
        "provenance_id",
        Ty::String,
        true,
        "Session-unique id of this lineage node.",
    ),
    fld(
        "origin",
        Ty::Enum(ORIGIN_VALUES),
        true,
        "Channel through which the data entered.",
    ),
    fld(
        "source_id",
        Ty::String,
        false,
        "Which tool, URL, path or store within the origin.",
    ),
    list(
        "derived_from",
        Ty::String,
        false,
        "provenance_ids this data was computed from.",
    ),
];

/// An IBAC Intent object (docs/acs.md#intent; schema missing), paths relative to the object.
pub static INTENT: &[Field] = &[
    fld(
        "raw",
        Ty::String,
        false,
        "The stated purpose, in natural language.",
    ),
    list(
        "parsed",
        Ty::Object,
        false,
        "Capabilities the purpose grants.",
    ),
    fld(
        "parsed[].tool",
        Ty::String,
        false,
        "Tool the capability covers.",
    ),
    fld(
        "parsed[].operation",
        Ty::String,
        false,
        "Operation the capability covers.",
    ),
    fld(
        "parsed[].resource",
        Ty::String,
        false,
        "Resource the capability covers.",
    ),
    fld(
        "parser_provenance",
        Ty::Provenance,
        false,
        "Where `parsed` came from; needed when `parsed` is present, origin user_input.",
    ),
    fld(
        "scope_mode",
        Ty::String,
        false,
        "How strictly to hold to the intent (\"strict\").",
    ),
];

// ---------------------------------------------------------------------------------------------
// AgBOM component fields (agbom/component.json), repeated under each list that holds components.

macro_rules! with_components {
    ([$($p:literal),+] $($extra:expr,)*) => {
        &[
            $($extra,)*
            $(
                fld(concat!($p, ".id"), Ty::String, true, "Stable component id within the AgBOM."),
                fld(concat!($p, ".type"), Ty::Enum(COMPONENT_TYPES), true, "Kind of component."),
                fld(concat!($p, ".name"), Ty::String, false, "Component name."),
                fld(concat!($p, ".version"), Ty::String, false, "Component version."),
                fld(concat!($p, ".provider"), Ty::String, false, "Who supplies the component."),
                fld(concat!($p, ".endpoint"), Ty::String, false, "URI where the component is reached."),
                fld(
                    concat!($p, ".registration_provenance"),
                    Ty::Provenance,
                    false,
                    "How the component got into the AgBOM.",
                ),
                fld(concat!($p, ".model_fields"), Ty::Object, false, "Model details (type model)."),
                fld(
                    concat!($p, ".model_fields.context_window"),
                    Ty::Integer,
                    true,
                    "Context window size in tokens.",
                ),
                map(
                    concat!($p, ".model_fields.args"),
                    Ty::Any,
                    false,
                    "Model settings captured at registration.",
                ),
                fld(
                    concat!($p, ".mcp_server_fields"),
                    Ty::Object,
                    false,
                    "MCP server details (type mcp_server).",
                ),
                list(
                    concat!($p, ".mcp_server_fields.tools"),
                    Ty::String,
                    true,
                    "Ids of the tool components the server exposes.",
                ),
                fld(
                    concat!($p, ".a2a_peer_fields"),
                    Ty::Object,
                    false,
                    "A2A peer details (type a2a_peer).",
                ),
                fld(
                    concat!($p, ".a2a_peer_fields.protocol_version"),
                    Ty::String,
                    true,
                    "A2A protocol version the peer speaks.",
                ),
                fld(
                    concat!($p, ".a2a_peer_fields.agent_card_ref"),
                    Ty::String,
                    false,
                    "URI of the peer's agent card.",
                ),
                fld(concat!($p, ".tool_fields"), Ty::Object, false, "Tool details (type tool)."),
                fld(
                    concat!($p, ".tool_fields.capability"),
                    Ty::String,
                    true,
                    "Abstract capability of the tool.",
                ),
                fld(
                    concat!($p, ".knowledge_source_fields"),
                    Ty::Object,
                    false,
                    "Knowledge source details (type knowledge_source).",
                ),
                fld(
                    concat!($p, ".knowledge_source_fields.source_type"),
                    Ty::Enum(KNOWLEDGE_SOURCE_TYPES),
                    true,
                    "Kind of knowledge source.",
                ),
                fld(
                    concat!($p, ".knowledge_source_fields.schema_ref"),
                    Ty::String,
                    false,
                    "URI of the source's schema.",
                ),
                fld(
                    concat!($p, ".memory_store_fields"),
                    Ty::Object,
                    false,
                    "Memory store details (type memory_store).",
                ),
                fld(
                    concat!($p, ".memory_store_fields.scope"),
                    Ty::Enum(MEMORY_SCOPES),
                    true,
                    "How widely the store is shared.",
                ),
                fld(
                    concat!($p, ".memory_store_fields.store_type"),
                    Ty::String,
                    true,
                    "Storage technology.",
                ),
                fld(
                    concat!($p, ".memory_store_fields.path"),
                    Ty::String,
                    false,
                    "URI of the store.",
                ),
                fld(
                    concat!($p, ".memory_store_fields.window_size"),
                    Ty::Integer,
                    false,
                    "How many items the store keeps in view.",
                ),
                fld(
                    concat!($p, ".agent_capability_fields"),
                    Ty::Object,
                    false,
                    "Composite capability details (type agent_capability).",
                ),
                fld(
                    concat!($p, ".agent_capability_fields.description"),
                    Ty::String,
                    true,
                    "What the capability does.",
                ),
                list(
                    concat!($p, ".agent_capability_fields.tools"),
                    Ty::String,
                    false,
                    "Ids of tool components it uses.",
                ),
                list(
                    concat!($p, ".agent_capability_fields.mcp_servers"),
                    Ty::String,
                    false,
                    "Ids of MCP server components it uses.",
                ),
                list(
                    concat!($p, ".agent_capability_fields.a2a_peers"),
                    Ty::String,
                    false,
                    "Ids of A2A peer components it uses.",
                ),
            )+
        ]
    };
}

// ---------------------------------------------------------------------------------------------
// The hooks, in the order of docs/acs.md#hooks, then wrapped MCP.

/// Every method a policy can attach to: the 22 of docs/acs.md#hooks plus
/// `protocols/MCP/tools/call`.
pub static HOOKS: &[HookSpec] = &[
    HookSpec {
        method: "steps/sessionStart",
        name: "sessionStart",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "A session opens; roots the audit chain and may set the IBAC intent.",
        fields: &[
            fld(
                "user_identity",
                Ty::Any,
                false,
                "Who started the session (shape not fixed).",
            ),
            fld(
                "policy_mode",
                Ty::String,
                false,
                "Policy mode requested by the client.",
            ),
            fld("intent", Ty::Intent, false, "The session's IBAC intent."),
            fld(
                "platform_context",
                Ty::Any,
                false,
                "Host details (shape not fixed).",
            ),
        ],
    },
    HookSpec {
        method: "steps/agentTrigger",
        name: "agentTrigger",
        decisions: ALLOW_DENY_MODIFY,
        audit_only: false,
        source: Source::Notes,
        doc: "Something other than a chat turn wakes the agent.",
        fields: &[
            fld(
                "trigger_type",
                Ty::Enum(&[
                    "user_message",
                    "scheduled",
                    "external_event",
                    "a2a_inbound",
                    "system",
                ]),
                true,
                "What kind of event woke the agent.",
            ),
            fld(
                "trigger_source",
                Ty::Any,
                false,
                "Details of the triggering event (shape not fixed).",
            ),
            fld(
                "intent",
                Ty::Intent,
                false,
                "IBAC intent, when the trigger sets it.",
            ),
        ],
    },
    HookSpec {
        method: "steps/turnStart",
        name: "turnStart",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "An agent turn begins.",
        fields: &[
            fld(
                "turn_id",
                Ty::String,
                false,
                "Id of the turn that is opening.",
            ),
            fld(
                "triggered_by",
                Ty::Enum(&[
                    "user_message",
                    "auto_continuation",
                    "agent_loop",
                    "subagent_return",
                ]),
                false,
                "Why the turn started.",
            ),
            fld(
                "parent_turn_id",
                Ty::String,
                false,
                "Enclosing turn, for nested turns.",
            ),
        ],
    },
    HookSpec {
        method: "steps/userMessage",
        name: "userMessage",
        decisions: ALLOW_DENY_MODIFY,
        audit_only: false,
        source: Source::Schema("hooks/user-message.json"),
        doc: "User input arrives, before the model sees it.",
        fields: &[
            list(
                "content",
                Ty::Object,
                true,
                "The message parts (at least one).",
            ),
            fld(
                "content[].type",
                Ty::Enum(CONTENT_TYPES),
                true,
                "Media kind of this part.",
            ),
            fld("content[].value", Ty::Any, true, "The part's content."),
            fld(
                "content[].provenance",
                Ty::Provenance,
                false,
                "Lineage of this part.",
            ),
        ],
    },
    HookSpec {
        method: "steps/agentResponse",
        name: "agentResponse",
        decisions: ALLOW_DENY_MODIFY,
        audit_only: false,
        source: Source::Schema("hooks/agent-response.json"),
        doc: "The agent's reply is ready, before the user sees it.",
        fields: &[
            list(
                "content",
                Ty::Object,
                true,
                "The reply parts (at least one).",
            ),
            fld(
                "content[].type",
                Ty::Enum(CONTENT_TYPES),
                true,
                "Media kind of this part.",
            ),
            fld("content[].value", Ty::Any, true, "The part's content."),
            fld(
                "content[].provenance",
                Ty::Provenance,
                false,
                "Lineage of this part.",
            ),
            fld(
                "reasoning",
                Ty::String,
                false,
                "The agent's own rationale, if it gave one.",
            ),
        ],
    },
    HookSpec {
        method: "steps/knowledgeRetrieval",
        name: "knowledgeRetrieval",
        decisions: ALLOW_DENY_MODIFY,
        audit_only: false,
        source: Source::Schema("hooks/knowledge-retrieval.json"),
        doc: "The agent pulls knowledge (RAG, search, vector store).",
        fields: &[
            fld(
                "query",
                Ty::Object,
                true,
                "What was asked of the knowledge source.",
            ),
            fld("query.value", Ty::String, true, "The query text."),
            fld(
                "query.provenance",
                Ty::Provenance,
                false,
                "Lineage of the query.",
            ),
            fld(
                "source",
                Ty::Object,
                false,
                "The knowledge source consulted.",
            ),
            fld("source.name", Ty::String, false, "Name of the source."),
            fld(
                "source.type",
                Ty::Enum(KNOWLEDGE_SOURCE_TYPES),
                false,
                "Kind of source.",
            ),
            fld(
                "source.version",
                Ty::String,
                false,
                "Version of the source.",
            ),
            list("results", Ty::Object, true, "What came back."),
            fld("results[].value", Ty::Any, true, "One retrieved item."),
            fld(
                "results[].source_id",
                Ty::String,
                false,
                "Where this item came from.",
            ),
            fld("results[].score", Ty::Number, false, "Relevance score."),
            fld(
                "results[].provenance",
                Ty::Provenance,
                false,
                "Lineage of this item.",
            ),
        ],
    },
    HookSpec {
        method: "steps/memoryContextRetrieval",
        name: "memoryContextRetrieval",
        decisions: ALLOW_DENY_MODIFY,
        audit_only: false,
        source: Source::Schema("hooks/memory-context-retrieval.json"),
        doc: "The agent reads from persistent memory.",
        fields: &[
            fld("query", Ty::Object, false, "What was looked up."),
            fld("query.value", Ty::String, false, "The lookup text."),
            fld(
                "query.provenance",
                Ty::Provenance,
                false,
                "Lineage of the lookup.",
            ),
            fld("memory_store", Ty::Object, false, "The store read from."),
            fld("memory_store.name", Ty::String, false, "Name of the store."),
            fld(
                "memory_store.scope",
                Ty::Enum(MEMORY_SCOPES),
                false,
                "How widely the store is shared.",
            ),
            list("results", Ty::Object, true, "The memories returned."),
            fld(
                "results[].memory_id",
                Ty::String,
                false,
                "Id of this memory.",
            ),
            fld("results[].value", Ty::Any, true, "The remembered content."),
            fld(
                "results[].stored_at",
                Ty::String,
                false,
                "When it was stored (date-time).",
            ),
            fld(
                "results[].provenance",
                Ty::Provenance,
                false,
                "Lineage of this memory.",
            ),
        ],
    },
    HookSpec {
        method: "steps/memoryStore",
        name: "memoryStore",
        decisions: ALLOW_DENY_MODIFY,
        audit_only: false,
        source: Source::Schema("hooks/memory-store.json"),
        doc: "The agent is about to write to persistent memory.",
        fields: &[
            fld(
                "memory_id",
                Ty::String,
                false,
                "Id of the memory being written.",
            ),
            fld("memory_store", Ty::Object, false, "The store written to."),
            fld("memory_store.name", Ty::String, false, "Name of the store."),
            fld(
                "memory_store.scope",
                Ty::Enum(MEMORY_SCOPES),
                false,
                "How widely the store is shared.",
            ),
            fld(
                "operation",
                Ty::Enum(&["create", "update", "delete"]),
                false,
                "Kind of write.",
            ),
            fld("content", Ty::Object, true, "What is being stored."),
            fld("content.value", Ty::Any, true, "The content to store."),
            fld(
                "content.provenance",
                Ty::Provenance,
                false,
                "Lineage of the content.",
            ),
            map(
                "metadata",
                Ty::Any,
                false,
                "Free-form attributes of the write.",
            ),
        ],
    },
    HookSpec {
        method: "steps/toolCallRequest",
        name: "toolCallRequest",
        decisions: ALL_FIVE,
        audit_only: false,
        source: Source::Schema("hooks/tool-call-request.json"),
        doc: "A tool (or any outward action) is about to run; the main enforcement gate.",
        fields: &[
            fld("tool", Ty::Object, true, "The tool being called."),
            fld("tool.name", Ty::String, true, "Tool name."),
            fld("tool.version", Ty::String, false, "Tool version."),
            fld("tool.provider", Ty::String, false, "Who supplies the tool."),
            fld(
                "operation",
                Ty::String,
                false,
                "Sub-operation, for multi-verb tools.",
            ),
            fld(
                "capability",
                Ty::String,
                false,
                "Abstract capability, e.g. filesystem.delete.",
            ),
            map("arguments", Ty::Object, true, "Arguments by name."),
            fld("arguments.*.value", Ty::Any, true, "The argument's value."),
            fld(
                "arguments.*.provenance",
                Ty::Provenance,
                false,
                "Lineage of the argument.",
            ),
            fld(
                "raw_command",
                Ty::String,
                false,
                "Shell-style command line, if any.",
            ),
            fld(
                "intent",
                Ty::Object,
                false,
                "Free-text framing of the call (not IBAC intent).",
            ),
            fld(
                "intent.description",
                Ty::String,
                false,
                "What the call does.",
            ),
            fld("intent.goal", Ty::String, false, "What the call is for."),
        ],
    },
    HookSpec {
        method: "steps/toolCallResult",
        name: "toolCallResult",
        decisions: ALLOW_DENY_MODIFY,
        audit_only: false,
        source: Source::Schema("hooks/tool-call-result.json"),
        doc: "A tool finished, before its output reaches the agent.",
        fields: &[
            fld("tool", Ty::Object, true, "The tool that ran."),
            fld("tool.name", Ty::String, true, "Tool name."),
            fld("tool.version", Ty::String, false, "Tool version."),
            fld("tool.provider", Ty::String, false, "Who supplies the tool."),
            fld(
                "operation",
                Ty::String,
                false,
                "Sub-operation, for multi-verb tools.",
            ),
            fld(
                "request_id_ref",
                Ty::String,
                false,
                "request_id of the matching toolCallRequest.",
            ),
            fld(
                "exit_status",
                Ty::Enum(&["success", "failure", "timeout", "blocked"]),
                true,
                "How the call ended.",
            ),
            list("outputs", Ty::Object, true, "What the tool produced."),
            fld("outputs[].value", Ty::Any, true, "One output."),
            fld(
                "outputs[].provenance",
                Ty::Provenance,
                false,
                "Lineage of this output.",
            ),
            fld(
                "duration_ms",
                Ty::Integer,
                false,
                "Run time in milliseconds.",
            ),
        ],
    },
    HookSpec {
        method: "steps/preCompact",
        name: "preCompact",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Schema("hooks/pre-compact.json"),
        doc: "The context is about to be summarised; deny blocks the compaction.",
        fields: &[
            list(
                "entries_to_compact",
                Ty::String,
                true,
                "step_ids to be folded into the summary.",
            ),
            fld(
                "pre_compact_provenance_summary",
                Ty::Object,
                false,
                "Origin facts of the region to compact.",
            ),
            list(
                "pre_compact_provenance_summary.origins_seen",
                Ty::Enum(ORIGIN_VALUES),
                false,
                "Distinct origins in the region.",
            ),
            fld(
                "pre_compact_provenance_summary.entry_count",
                Ty::Integer,
                false,
                "How many provenance objects were counted.",
            ),
            map(
                "pre_compact_provenance_summary.entry_count_by_origin",
                Ty::Integer,
                false,
                "Count per origin.",
            ),
            map(
                "pre_compact_provenance_summary.earliest_step_id_by_origin",
                Ty::String,
                false,
                "First step_id per origin.",
            ),
            fld(
                "pre_compact_provenance_summary.max_lineage_depth",
                Ty::Integer,
                false,
                "Deepest derived_from chain seen.",
            ),
            fld(
                "triggered_by",
                Ty::Enum(&[
                    "size_threshold",
                    "manual",
                    "agent_initiated",
                    "framework_initiated",
                ]),
                true,
                "Why compaction happens now.",
            ),
            fld(
                "estimated_input_tokens",
                Ty::Integer,
                false,
                "Approximate size of the region.",
            ),
            fld(
                "target_summary_tokens",
                Ty::Integer,
                false,
                "Intended size of the summary.",
            ),
        ],
    },
    HookSpec {
        method: "steps/postCompact",
        name: "postCompact",
        decisions: ALLOW_MODIFY,
        audit_only: false,
        source: Source::Schema("hooks/post-compact.json"),
        doc: "Compaction happened; the summary may be rewritten but never denied.",
        fields: &[
            fld(
                "summary",
                Ty::Object,
                true,
                "The summary that replaced the context.",
            ),
            fld("summary.value", Ty::String, true, "Summary text."),
            fld(
                "summary.provenance",
                Ty::Provenance,
                false,
                "Lineage: agent_generated, derived from every compacted entry.",
            ),
            list(
                "entries_compacted",
                Ty::String,
                true,
                "step_ids that were summarised.",
            ),
            fld(
                "pre_compact_chain_hash",
                Ty::String,
                true,
                "Chain head before compaction (hex).",
            ),
            fld(
                "post_compact_chain_hash",
                Ty::String,
                true,
                "Chain head after this entry (hex).",
            ),
            fld(
                "lineage_depth_after",
                Ty::Integer,
                false,
                "Lineage depth of the summary.",
            ),
        ],
    },
    HookSpec {
        method: "steps/subagentStart",
        name: "subagentStart",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "The agent spawns a subagent.",
        fields: &[
            fld(
                "subagent_session_id",
                Ty::String,
                false,
                "New session id of the subagent.",
            ),
            fld(
                "parent_session_id",
                Ty::String,
                false,
                "Session that spawns it.",
            ),
            fld(
                "parent_step_id",
                Ty::String,
                false,
                "Step of the parent that spawns it.",
            ),
            fld(
                "intent_derivation",
                Ty::Enum(&[
                    "inherit_full",
                    "inherit_subset",
                    "derived_from_parent",
                    "fresh",
                ]),
                false,
                "How the subagent's intent relates to the parent's.",
            ),
            fld(
                "subagent_intent",
                Ty::Intent,
                false,
                "The subagent's IBAC intent.",
            ),
        ],
    },
    HookSpec {
        method: "steps/subagentStop",
        name: "subagentStop",
        decisions: ALLOW_ONLY,
        audit_only: true,
        source: Source::Schema("hooks/subagent-stop.json"),
        doc: "A subagent ended; recorded on the parent's chain.",
        fields: &[
            fld(
                "subagent_session_id",
                Ty::String,
                true,
                "Session id of the subagent that ended.",
            ),
            fld(
                "outcome",
                Ty::Enum(&[
                    "completed",
                    "failed",
                    "cancelled",
                    "timeout",
                    "denied_at_spawn",
                ]),
                true,
                "How the subagent ended.",
            ),
            fld(
                "final_chain_hash",
                Ty::String,
                false,
                "The subagent's last chain head, if kept.",
            ),
            fld(
                "summary",
                Ty::Object,
                false,
                "What the subagent handed back.",
            ),
            fld("summary.value", Ty::Any, true, "The returned value."),
            fld(
                "summary.provenance",
                Ty::Provenance,
                false,
                "Lineage of the returned value.",
            ),
            fld(
                "subagent_step_count",
                Ty::Integer,
                false,
                "How many steps the subagent ran.",
            ),
        ],
    },
    HookSpec {
        method: "steps/skillRegister",
        name: "skillRegister",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "A skill is registered; a denied skill never becomes loadable.",
        fields: &[
            fld("skill_id", Ty::String, true, "Id of the skill."),
            fld(
                "definition",
                Ty::Object,
                true,
                "The skill's loadable artifact.",
            ),
            fld(
                "definition.ref",
                Ty::String,
                false,
                "Where the artifact lives.",
            ),
            fld(
                "definition.digest",
                Ty::Object,
                true,
                "Integrity digest of the artifact.",
            ),
            fld(
                "definition.digest.algorithm",
                Ty::String,
                true,
                "Digest algorithm.",
            ),
            fld("definition.digest.value", Ty::String, true, "Digest value."),
            fld(
                "definition.body",
                Ty::Any,
                false,
                "Inline artifact, inspected but not stored.",
            ),
            list(
                "declared_capabilities",
                Ty::String,
                true,
                "Capabilities the skill claims to need (item shape assumed).",
            ),
            fld(
                "composition",
                Ty::Object,
                false,
                "What the skill is built from.",
            ),
            list(
                "composition.tools",
                Ty::String,
                false,
                "Tools the skill uses.",
            ),
            list(
                "composition.mcp_servers",
                Ty::String,
                false,
                "MCP servers the skill uses.",
            ),
            list(
                "composition.a2a_peers",
                Ty::String,
                false,
                "A2A peers the skill uses.",
            ),
            list(
                "composition.models",
                Ty::String,
                false,
                "Models the skill uses.",
            ),
            list(
                "composition.composed_skills",
                Ty::String,
                false,
                "Skills the skill may load.",
            ),
            fld(
                "registration_provenance",
                Ty::Provenance,
                false,
                "How the skill came to be registered.",
            ),
        ],
    },
    HookSpec {
        method: "steps/skillLoad",
        name: "skillLoad",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "A registered skill is about to be loaded.",
        fields: &[
            fld("skill_id", Ty::String, true, "Id of the skill."),
            fld(
                "digest",
                Ty::Object,
                true,
                "Digest of the artifact being loaded.",
            ),
            fld("digest.algorithm", Ty::String, true, "Digest algorithm."),
            fld("digest.value", Ty::String, true, "Digest value."),
            fld(
                "load_trigger",
                Ty::Enum(&["user", "agent_decision", "skill_composition", "system"]),
                true,
                "What asked for the load.",
            ),
            list(
                "load_path",
                Ty::Object,
                true,
                "Chain of skills leading to this load, root first.",
            ),
            fld(
                "load_path[].skill_id",
                Ty::String,
                false,
                "A skill on the path.",
            ),
            fld(
                "load_path[].step_id",
                Ty::String,
                false,
                "Step at which it loaded.",
            ),
            fld(
                "registration_ref",
                Ty::String,
                false,
                "The skillRegister this load relies on.",
            ),
            fld(
                "parent_step_id",
                Ty::String,
                false,
                "Step that caused the load.",
            ),
            fld(
                "digest_verified",
                Ty::Bool,
                false,
                "Client's claim it checked the digest (a hint).",
            ),
            list(
                "declared_capabilities",
                Ty::String,
                false,
                "Capabilities the skill claims (item shape assumed).",
            ),
        ],
    },
    HookSpec {
        method: "steps/skillUnload",
        name: "skillUnload",
        decisions: ALLOW_ONLY,
        audit_only: true,
        source: Source::Notes,
        doc: "A skill was unloaded.",
        fields: &[
            fld("skill_id", Ty::String, false, "Id of the skill."),
            fld(
                "reason",
                Ty::Enum(&["session_end", "explicit_unload", "replaced", "error"]),
                false,
                "Why it was unloaded.",
            ),
            fld(
                "replaced_by",
                Ty::String,
                false,
                "Skill that took its place.",
            ),
        ],
    },
    HookSpec {
        method: "steps/turnEnd",
        name: "turnEnd",
        decisions: ALLOW_ONLY,
        audit_only: true,
        source: Source::Schema("hooks/turn-end.json"),
        doc: "An agent turn ended; closes the per-turn window.",
        fields: &[
            fld("turn_id", Ty::String, true, "Id of the turn that ended."),
            fld(
                "outcome",
                Ty::Enum(&[
                    "completed",
                    "deferred",
                    "error",
                    "interrupted",
                    "denied_at_start",
                ]),
                true,
                "How the turn ended.",
            ),
            fld(
                "step_count",
                Ty::Integer,
                false,
                "Steps recorded during the turn.",
            ),
            fld("summary", Ty::Object, false, "Recap of the turn."),
            fld("summary.value", Ty::String, true, "Recap text."),
            fld(
                "summary.provenance",
                Ty::Provenance,
                false,
                "Lineage of the recap.",
            ),
            fld(
                "tool_call_count",
                Ty::Integer,
                false,
                "toolCallRequest steps in the turn.",
            ),
        ],
    },
    HookSpec {
        method: "steps/sessionEnd",
        name: "sessionEnd",
        decisions: ALLOW_ONLY,
        audit_only: true,
        source: Source::Notes,
        doc: "The session closed; the Guardian seals the chain.",
        fields: &[
            fld(
                "reason",
                Ty::Enum(&["completed", "cancelled", "error", "timeout"]),
                true,
                "Why the session ended.",
            ),
            fld("summary", Ty::Object, false, "Recap of the session."),
            fld("summary.value", Ty::Any, true, "Recap content."),
            fld(
                "summary.provenance",
                Ty::Provenance,
                false,
                "Lineage of the recap.",
            ),
            fld(
                "final_chain_hash",
                Ty::String,
                false,
                "Client's view of the final chain head.",
            ),
        ],
    },
    HookSpec {
        method: "agbom/snapshot",
        name: "agbom/snapshot",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "The full AgBOM, once per session before content; deny refuses a component.",
        fields: with_components!(["components[]"]
            fld("agent", Ty::Object, false, "The agent the AgBOM describes (document shape assumed)."),
            fld("agent.agent_id", Ty::String, false, "Id of that agent."),
            fld("generated_at", Ty::String, false, "When the AgBOM was produced."),
            fld("agbom_hash", Ty::String, false, "Digest of the AgBOM."),
            list("components", Ty::Object, false, "Every component of the agent."),
        ),
    },
    HookSpec {
        method: "agbom/changed",
        name: "agbom/changed",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "The AgBOM changed (snapshot or diff); deny blocks the hot-swap.",
        fields: with_components!(["components[]", "added[]"]
            fld("agent", Ty::Object, false, "The agent the AgBOM describes (full-snapshot form)."),
            fld("agent.agent_id", Ty::String, false, "Id of that agent."),
            fld("generated_at", Ty::String, false, "When the AgBOM was produced."),
            fld("agbom_hash", Ty::String, false, "Digest of the AgBOM."),
            list("components", Ty::Object, false, "Every component (full-snapshot form)."),
            list("added", Ty::Object, false, "Components added (diff form)."),
            list("removed", Ty::Any, false, "Components removed (diff form; item shape unknown)."),
            list("changed", Ty::Any, false, "Components changed (diff form; item shape unknown)."),
        ),
    },
    HookSpec {
        method: "system/ping",
        name: "system/ping",
        decisions: ALLOW_ONLY,
        audit_only: false,
        source: Source::Notes,
        doc: "Liveness probe; always allowed, never chained or signed.",
        fields: &[fld(
            "echo",
            Ty::String,
            false,
            "Text the Guardian sends back.",
        )],
    },
    HookSpec {
        method: "protocols/MCP/tools/call",
        name: "protocols/MCP/tools/call",
        decisions: ALL_FIVE,
        audit_only: false,
        source: Source::Notes,
        doc: "A wrapped MCP tools/call; the payload is the MCP JSON-RPC message itself.",
        fields: &[
            fld(
                "jsonrpc",
                Ty::String,
                true,
                "MCP JSON-RPC version (\"2.0\").",
            ),
            fld(
                "method",
                Ty::String,
                true,
                "The MCP method (\"tools/call\").",
            ),
            fld("id", Ty::Any, true, "MCP request id (string or number)."),
            fld("params", Ty::Object, true, "MCP call parameters."),
            fld("params.name", Ty::String, true, "Name of the MCP tool."),
            map(
                "params.arguments",
                Ty::Any,
                false,
                "Tool arguments by name.",
            ),
        ],
    },
    HookSpec {
        method: "protocols/MCP/initialize",
        name: "protocols/MCP/initialize",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "A wrapped MCP initialize: the client opens an MCP session with a server.",
        fields: &[
            fld("jsonrpc", Ty::String, true, "MCP JSON-RPC version (\"2.0\")."),
            fld("method", Ty::String, true, "The MCP method (\"initialize\")."),
            fld("id", Ty::Any, true, "MCP request id (string or number)."),
            fld("params", Ty::Object, false, "MCP request parameters."),
            fld("params.protocolVersion", Ty::String, false, "MCP protocol version the client asks for."),
            fld("params.capabilities", Ty::Any, false, "What the client supports."),
            fld("params.clientInfo", Ty::Object, false, "The MCP client."),
            fld("params.clientInfo.name", Ty::String, false, "The MCP client's name."),
            fld("params.clientInfo.version", Ty::String, false, "The MCP client's version."),
        ],
    },
    HookSpec {
        method: "protocols/MCP/tools/list",
        name: "protocols/MCP/tools/list",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "A wrapped MCP tools/list: the client asks which tools the server has.",
        fields: &[
            fld("jsonrpc", Ty::String, true, "MCP JSON-RPC version (\"2.0\")."),
            fld("method", Ty::String, true, "The MCP method (\"tools/list\")."),
            fld("id", Ty::Any, true, "MCP request id (string or number)."),
            fld("params", Ty::Object, false, "MCP request parameters."),
            fld("params.cursor", Ty::String, false, "Pagination cursor."),
        ],
    },
    HookSpec {
        method: "protocols/MCP/resources/read",
        name: "protocols/MCP/resources/read",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "A wrapped MCP resources/read: the client reads a resource by URI.",
        fields: &[
            fld("jsonrpc", Ty::String, true, "MCP JSON-RPC version (\"2.0\")."),
            fld("method", Ty::String, true, "The MCP method (\"resources/read\")."),
            fld("id", Ty::Any, true, "MCP request id (string or number)."),
            fld("params", Ty::Object, false, "MCP request parameters."),
            fld("params.uri", Ty::String, false, "URI of the resource."),
        ],
    },
    HookSpec {
        method: "protocols/MCP/prompts/get",
        name: "protocols/MCP/prompts/get",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "A wrapped MCP prompts/get: the client fetches a prompt template.",
        fields: &[
            fld("jsonrpc", Ty::String, true, "MCP JSON-RPC version (\"2.0\")."),
            fld("method", Ty::String, true, "The MCP method (\"prompts/get\")."),
            fld("id", Ty::Any, true, "MCP request id (string or number)."),
            fld("params", Ty::Object, false, "MCP request parameters."),
            fld("params.name", Ty::String, false, "Name of the prompt."),
            fld("params.arguments", Ty::Any, false, "Prompt arguments by name."),
        ],
    },
    HookSpec {
        method: "protocols/MCP/result",
        name: "protocols/MCP/result",
        decisions: ALLOW_DENY,
        audit_only: false,
        source: Source::Notes,
        doc: "A wrapped MCP response, before it reaches the client (Warden's extension); its content enters the session as tool output.",
        fields: &[
            fld("jsonrpc", Ty::String, true, "MCP JSON-RPC version (\"2.0\")."),
            fld("id", Ty::Any, true, "MCP id of the request answered."),
            fld("result", Ty::Any, false, "The MCP result, when the server succeeded."),
            fld("error", Ty::Any, false, "The MCP error, when it failed."),
            fld("request", Ty::Object, true, "The MCP request answered."),
            fld("request.method", Ty::String, true, "Its MCP method, e.g. \"tools/call\"."),
            fld("request.params", Ty::Any, false, "Its MCP parameters."),
            fld(
                "request_id_ref",
                Ty::String,
                false,
                "request_id of the wrapped request it answers.",
            ),
        ],
    },
];

/// Hooks are identified by their method.
impl PartialEq for HookSpec {
    fn eq(&self, other: &Self) -> bool {
        self.method == other.method
    }
}

impl Eq for HookSpec {}

/// The bit of an ACS origin in an origin set (0 for an unknown word).
pub fn origin_bit(origin: &str) -> u8 {
    ORIGINS
        .iter()
        .position(|o| *o == origin)
        .map_or(0, |i| 1u8 << i)
}
