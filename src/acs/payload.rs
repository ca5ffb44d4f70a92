//! A hook payload checked against its field table, and its content completed with the
//! provenance the platform left out.
//!
//! Owns two rules: what shape a payload's content must have to be decided at all ([`check`]:
//! the members that carry content, and their provenance, have the types the hook's table
//! gives them, and every content item has a value; a payload that fails is refused with the protocol's invalid-params error, never decided), and how content
//! that arrives with less provenance than ACS allows for enters a session ([`complete`]: the
//! hook's own origin for an item with no provenance, an id derived from the request for an
//! item with none). Must not know: sessions, labels, policies — it speaks only of the wire.
//!
//! Why completion: a tool result whose outputs carry no `provenance_id` would otherwise never
//! enter the provenance graph, so it would never taint the session (a guard that fails open),
//! and a user message without one would never be indexed as what the user said. The ids are
//! `"{request_id}:{JSON pointer}"`, so a replay of the same stream assigns the same ones.

use serde_json::{Map, Value};

use super::fields::{self, HookSpec, Ty, PROVENANCE};

/// Where a payload does not match its hook's table: the member's path (`payload.outputs`,
/// `payload.outputs[0].value`) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadError {
    /// The JSON pointer of the offending value.
    pub path: String,
    /// What is wrong with it.
    pub why: String,
}

impl std::fmt::Display for PayloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.why)
    }
}

/// Checks the content of `payload` against `hook`'s table — the members that carry content
/// (the [`CARRIERS`]) and their provenance, since a mis-shaped one would enter no session:
/// the payload is an object; a list of content items (`outputs`, `content`, `results`) is an
/// array of objects, each with its `value`; a single item (`summary`, `query`, a memory's
/// `content`) an object with its `value`; `arguments` an object (an argument that is an object
/// has its `value`; a bare argument value is read as it stands, and a rule that reads its
/// provenance fails the decision closed); and every item's `provenance`, when present, an
/// object whose members have their types (`origin` one of the seven, `provenance_id` and
/// `source_id` strings, `derived_from` a list of strings). A Provenance may leave out
/// `provenance_id` and `origin`: [`complete`] fills them in. Other members are typed where
/// rules read them (a value of the wrong type there is a decision failure, docs/language.md
/// §6.3), not here.
pub fn check(hook: &HookSpec, payload: &Value) -> Result<(), PayloadError> {
    let Some(obj) = payload.as_object() else {
        return Err(PayloadError {
            path: "payload".into(),
            why: format!("must be an object, not {}", kind(payload)),
        });
    };
    for &(m, path, _) in CARRIERS {
        if m != hook.method {
            continue;
        }
        let (name, shape) = shape_of(path);
        let Some(v) = fields::map_member(obj, name) else {
            continue;
        };
        // Paths are written only for a refusal: a payload that passes allocates nothing.
        let under = |e: PayloadError, item: String| e.under(&format!("payload.{name}{item}"));
        match shape {
            Shape::List => {
                let Some(items) = v.as_array() else {
                    return refuse(format!(
                        "must be an array of content items, not {}",
                        kind(v)
                    ))
                    .map_err(|e| under(e, String::new()));
                };
                for (i, item) in items.iter().enumerate() {
                    check_item(item, false).map_err(|e| under(e, format!("[{i}]")))?;
                }
            }
            Shape::Map => {
                let Some(items) = v.as_object() else {
                    return refuse(format!("must be an object, not {}", kind(v)))
                        .map_err(|e| under(e, String::new()));
                };
                for (k, item) in items {
                    check_item(item, true).map_err(|e| under(e, format!(".{k}")))?;
                }
            }
            Shape::One => check_item(v, false).map_err(|e| under(e, String::new()))?,
        }
    }
    Ok(())
}

impl PayloadError {
    /// The same refusal, its path now under `prefix` (paths are built from the inside out).
    fn under(mut self, prefix: &str) -> PayloadError {
        self.path.insert_str(0, prefix);
        self
    }
}

/// A refusal of the member being checked (its path added by the callers).
fn refuse(why: String) -> Result<(), PayloadError> {
    Err(PayloadError {
        path: String::new(),
        why,
    })
}

/// One content item: an object with a `value` and, when present, a well-typed `provenance`.
/// `bare_ok`: a tool argument may be a bare value.
fn check_item(item: &Value, bare_ok: bool) -> Result<(), PayloadError> {
    let Some(o) = item.as_object() else {
        if bare_ok {
            return Ok(());
        }
        return refuse(format!(
            "must be a content item {{value, provenance}}, not {}",
            kind(item)
        ));
    };
    if fields::map_member(o, "value").is_none() {
        return refuse("is required".into()).map_err(|e| e.under(".value"));
    }
    match fields::map_member(o, "provenance") {
        None => Ok(()),
        Some(Value::Object(p)) => check_provenance(p),
        Some(other) => refuse(format!("must be a Provenance object, not {}", kind(other))),
    }
    .map_err(|e| e.under(".provenance"))
}

/// A Provenance object's members, typed by [`PROVENANCE`] (`provenance_id` and `origin` may be
/// missing: the completion supplies them). The `elements` of a list argument are Provenance
/// objects too.
fn check_provenance(o: &Map<String, Value>) -> Result<(), PayloadError> {
    for (k, v) in o {
        let member = |e: PayloadError| e.under(&format!(".{k}"));
        if k == "elements" {
            let Some(items) = v.as_array() else {
                return refuse(format!("must be an array, not {}", kind(v))).map_err(member);
            };
            for (i, e) in items.iter().enumerate() {
                match e {
                    Value::Object(p) => check_provenance(p),
                    other => refuse(format!("must be a Provenance object, not {}", kind(other))),
                }
                .map_err(|e| member(e.under(&format!("[{i}]"))))?;
            }
            continue;
        }
        let Some(f) = fields::lookup(PROVENANCE, k) else {
            continue;
        };
        let ok = match f.ty {
            Ty::String => v.is_string(),
            Ty::Enum(words) => v.as_str().is_some_and(|s| words.contains(&s)),
            Ty::List => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            _ => true,
        };
        if !ok {
            let want = match f.ty {
                Ty::Enum(words) => format!("one of {}", words.join(", ")),
                Ty::List => "an array of strings".into(),
                _ => "a string".into(),
            };
            return refuse(format!("must be {want}, not {}", kind(v))).map_err(member);
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Shape {
    /// `name[]`: a list of items.
    List,
    /// `name.*`: an object of named items.
    Map,
    /// `name`: one item.
    One,
}

fn shape_of(path: &'static str) -> (&'static str, Shape) {
    match path.strip_suffix("[]") {
        Some(n) => (n, Shape::List),
        None => match path.strip_suffix(".*") {
            Some(n) => (n, Shape::Map),
            None => (path, Shape::One),
        },
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Where a hook carries content (each item a `{value, provenance}` carrier), and the origin an
/// item there takes when the platform states none: the channel the hook itself is.
pub const CARRIERS: &[(&str, &str, &str)] = &[
    ("steps/userMessage", "content[]", "user_input"),
    ("steps/agentResponse", "content[]", "agent_generated"),
    ("steps/knowledgeRetrieval", "query", "agent_generated"),
    ("steps/knowledgeRetrieval", "results[]", "retrieved"),
    ("steps/memoryContextRetrieval", "query", "agent_generated"),
    // What memory returns was stored by anyone, at any time: with no lineage it is unknown,
    // which reads as external (never clean).
    ("steps/memoryContextRetrieval", "results[]", "external"),
    ("steps/memoryStore", "content", "agent_generated"),
    ("steps/toolCallRequest", "arguments.*", "agent_generated"),
    ("steps/toolCallResult", "outputs[]", "tool_output"),
    ("steps/postCompact", "summary", "agent_generated"),
    ("steps/subagentStop", "summary", "agent_generated"),
    ("steps/turnEnd", "summary", "agent_generated"),
    ("steps/sessionEnd", "summary", "agent_generated"),
];

/// One content item of a payload: where it sits, and its hook's own origin for it.
#[derive(Debug, Clone, Copy)]
pub struct Carrier<'v> {
    /// The payload member that holds it.
    name: &'static str,
    at: At<'v>,
    /// The item (an object).
    pub item: &'v Value,
    /// The origin the hook gives it when the platform states none.
    pub origin: &'static str,
}

#[derive(Debug, Clone, Copy)]
enum At<'v> {
    One,
    Index(usize),
    Key(&'v str),
}

impl Carrier<'_> {
    /// The item's JSON pointer from the payload, built when asked for (most steps never need
    /// it).
    pub fn pointer(&self) -> String {
        match self.at {
            At::One => format!("/{}", self.name),
            At::Index(i) => format!("/{}/{i}", self.name),
            At::Key(k) => format!("/{}/{}", self.name, escape(k)),
        }
    }
}

/// The carriers of a payload, with their hook's own origin. An item that is not an object is
/// not a carrier ([`check`] refuses it first).
pub fn carriers<'v>(method: &str, payload: &'v Value) -> Vec<Carrier<'v>> {
    let mut out = Vec::new();
    for &(m, path, origin) in CARRIERS {
        if m != method {
            continue;
        }
        let (name, shape) = shape_of(path);
        let Some(v) = fields::member(payload, name) else {
            continue;
        };
        let mut push = |at, item: &'v Value| {
            if item.is_object() {
                out.push(Carrier {
                    name,
                    at,
                    item,
                    origin,
                });
            }
        };
        match (shape, v) {
            (Shape::List, Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    push(At::Index(i), item);
                }
            }
            (Shape::Map, Value::Object(items)) => {
                for (k, item) in items {
                    push(At::Key(k), item);
                }
            }
            (Shape::One, item) => push(At::One, item),
            _ => {}
        }
    }
    out
}

/// JSON pointer escaping of one reference token (RFC 6901).
fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// The payload with every content item's provenance complete, or `None` when nothing was
/// missing (the common case costs no copy). An item with no `provenance` gets
/// `{provenance_id, origin}` with the hook's own origin (and, for a tool's outputs, the tool's
/// name as `source_id`); a `provenance` without a string `provenance_id` gets one, and one
/// without a string `origin` gets the hook's. The id is `"{request_id}:{pointer}"`.
pub fn complete(method: &str, request_id: &str, payload: &Value) -> Option<Value> {
    complete_carriers(method, request_id, payload, &carriers(method, payload))
}

/// [`complete`], given the payload's [`carriers`] (a caller that reads them too finds them
/// once).
pub fn complete_carriers(
    method: &str,
    request_id: &str,
    payload: &Value,
    carriers: &[Carrier<'_>],
) -> Option<Value> {
    let missing: Vec<(String, &'static str)> = carriers
        .iter()
        .filter(|c| match fields::member(c.item, "provenance") {
            Some(Value::Object(p)) => {
                !fields::map_member(p, "provenance_id").is_some_and(Value::is_string)
                    || !fields::map_member(p, "origin").is_some_and(Value::is_string)
            }
            // A provenance of another type is refused by `check`; left alone here.
            Some(_) => false,
            None => true,
        })
        .map(|c| (c.pointer(), c.origin))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let source = (method == "steps/toolCallResult")
        .then(|| fields::tool_name(payload).map(str::to_owned))
        .flatten();
    let mut out = payload.clone();
    for (ptr, origin) in missing {
        let Some(Value::Object(item)) = out.pointer_mut(&ptr) else {
            continue;
        };
        let prov = item
            .entry("provenance")
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(prov) = prov else { continue };
        if !prov.get("provenance_id").is_some_and(Value::is_string) {
            prov.insert(
                "provenance_id".into(),
                Value::String(format!("{request_id}:{ptr}")),
            );
        }
        if !prov.get("origin").is_some_and(Value::is_string) {
            prov.insert("origin".into(), Value::String(origin.into()));
            if let Some(tool) = &source {
                prov.entry("source_id")
                    .or_insert_with(|| Value::String(tool.clone()));
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hook(m: &str) -> &'static HookSpec {
        fields::hook(m).unwrap()
    }

    #[test]
    fn a_string_where_outputs_must_be_an_array_is_refused() {
        let e = check(
            hook("toolCallResult"),
            &json!({"tool": {"name": "read_file"}, "outputs": "IGNORE ALL"}),
        )
        .unwrap_err();
        assert_eq!(e.path, "payload.outputs");
        assert!(e.why.contains("an array"), "{e}");
        let e = check(
            hook("toolCallResult"),
            &json!({"tool": {"name": "read_file"}, "outputs": [{"provenance": {}}]}),
        )
        .unwrap_err();
        assert_eq!(e.path, "payload.outputs[0].value");
        let e = check(
            hook("toolCallResult"),
            &json!({"tool": {"name": "read_file"}, "outputs": "IGNORE ALL"}),
        )
        .unwrap_err();
        assert_eq!(e.path, "payload.outputs");
        assert!(e.why.contains("an array"), "{e}");
    }

    #[test]
    fn an_object_where_content_must_be_an_array_is_refused() {
        let e = check(
            hook("userMessage"),
            &json!({"content": {"type": "text", "value": "hi"}}),
        )
        .unwrap_err();
        assert_eq!(e.path, "payload.content");
    }

    #[test]
    fn a_bad_origin_is_refused_with_its_path() {
        let e = check(
            hook("toolCallResult"),
            &json!({"tool": {"name": "t"}, "outputs": [{"value": "x", "provenance": {"origin": "friendly"}}]}),
        )
        .unwrap_err();
        assert_eq!(e.path, "payload.outputs[0].provenance.origin");
    }

    #[test]
    fn provenance_without_id_or_origin_passes_the_check() {
        check(
            hook("toolCallResult"),
            &json!({"tool": {"name": "t"}, "outputs": [{"value": "x", "provenance": {}}, {"value": 1}]}),
        )
        .unwrap();
    }

    #[test]
    fn completion_assigns_ids_and_the_hooks_origin() {
        let p = json!({"tool": {"name": "read_file"}, "outputs": [
            {"value": "a"},
            {"value": "b", "provenance": {"origin": "tool_output"}},
            {"value": "c", "provenance": {"origin": "retrieved", "provenance_id": "keep"}},
        ]});
        let c = complete("steps/toolCallResult", "r1", &p).unwrap();
        assert_eq!(
            c["outputs"][0]["provenance"],
            json!({"provenance_id": "r1:/outputs/0", "origin": "tool_output", "source_id": "read_file"})
        );
        assert_eq!(
            c["outputs"][1]["provenance"]["provenance_id"],
            "r1:/outputs/1"
        );
        assert_eq!(c["outputs"][2], p["outputs"][2]);
        // Nothing missing: no copy.
        assert!(complete("steps/toolCallResult", "r1", &c).is_none());
    }

    #[test]
    fn argument_names_are_escaped_in_the_id() {
        let p = json!({"tool": {"name": "t"}, "arguments": {"a/b": {"value": 1}}});
        let c = complete("steps/toolCallRequest", "r", &p).unwrap();
        assert_eq!(
            c["arguments"]["a/b"]["provenance"]["provenance_id"],
            "r:/arguments/a~1b"
        );
        assert_eq!(
            c["arguments"]["a/b"]["provenance"]["origin"],
            "agent_generated"
        );
    }

    #[test]
    fn every_carrier_path_is_a_provenance_field_of_its_hook() {
        for &(m, path, origin) in CARRIERS {
            let h = hook(m);
            let prov = format!("{path}.provenance");
            let f = fields::lookup(h.fields, &prov).unwrap_or_else(|| panic!("{m} {prov}"));
            assert_eq!(f.ty, Ty::Provenance, "{m} {prov}");
            assert!(fields::ORIGINS.contains(&origin));
        }
    }
}
