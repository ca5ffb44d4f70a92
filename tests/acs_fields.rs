//! Checks `warden::acs::fields` against the vendored ACS v0.1.0 JSON Schemas, in both directions:
//! every schema property is in the table with the same type and required-ness, and every table
//! field of a schema-backed hook exists in the schema.
//!
//! The schemas are read from `vendor/acs/v0.1.0` (`$WARDEN_ACS_DIR/v0.1.0` when that is set).
//! A missing directory is a test failure, not a skip.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use warden::acs::fields::*;

fn acs_dir() -> PathBuf {
    let dir = std::env::var_os("WARDEN_ACS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/vendor/acs")))
        .join("v0.1.0");
    assert!(
        dir.join("provenance.json").is_file(),
        "ACS v0.1.0 schemas not found at {} (set WARDEN_ACS_DIR)",
        dir.display()
    );
    dir
}

fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON in {}: {e}", path.display()))
}

/// One field as the schema describes it, with its type rendered like [`describe`] renders a `Ty`.
#[derive(Debug)]
struct Expected {
    path: String,
    ty: String,
    items: Option<String>,
    required: bool,
}

/// Renders a table type so it compares with [`kind`].
fn describe(ty: Ty) -> String {
    match ty {
        Ty::String => "string".into(),
        Ty::Number => "number".into(),
        Ty::Integer => "integer".into(),
        Ty::Bool => "bool".into(),
        Ty::Any => "any".into(),
        Ty::Enum(values) => format!("enum{values:?}"),
        Ty::Object => "object".into(),
        Ty::List => "list".into(),
        Ty::Map => "map".into(),
        Ty::Provenance => "provenance".into(),
        Ty::Intent => "intent".into(),
    }
}

fn is_provenance_ref(node: &Value) -> bool {
    node.get("$ref")
        .and_then(Value::as_str)
        .is_some_and(|r| Path::new(r).file_name() == Some("provenance.json".as_ref()))
}

/// Follows a `$ref` to any file other than provenance.json (which stays a leaf).
fn resolve(node: &Value, file: &Path) -> (Value, PathBuf) {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) if !is_provenance_ref(node) => {
            let target = file.parent().unwrap().join(r);
            let value = load(&target);
            resolve(&value, &target)
        }
        _ => (node.clone(), file.to_path_buf()),
    }
}

/// The type of an already-resolved schema node.
fn kind(node: &Value) -> String {
    if node == &Value::Bool(true) {
        return "any".into();
    }
    if is_provenance_ref(node) {
        return "provenance".into();
    }
    if let Some(values) = node.get("enum") {
        let values: Vec<&str> = values
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().expect("string enum"))
            .collect();
        return format!("enum{values:?}");
    }
    match node.get("type") {
        None => "any".into(),
        Some(Value::String(t)) => match t.as_str() {
            "string" => "string".into(),
            "number" => "number".into(),
            "integer" => "integer".into(),
            "boolean" => "bool".into(),
            "array" => "list".into(),
            "object" => {
                let open = node
                    .get("additionalProperties")
                    .is_some_and(|a| a != &Value::Bool(false));
                if open && node.get("properties").is_none() {
                    "map".into()
                } else {
                    "object".into()
                }
            }
            other => panic!("unhandled schema type {other:?}"),
        },
        Some(other) => panic!("unhandled schema type {other}"),
    }
}

/// The item type of a list, or the value type of a map.
fn items_kind(node: &Value, file: &Path) -> Option<String> {
    let inner = match kind(node).as_str() {
        "list" => node.get("items")?,
        "map" => node.get("additionalProperties")?,
        _ => return None,
    };
    Some(kind(&resolve(inner, file).0))
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Records one property and everything under it.
fn walk(node: &Value, file: &Path, path: String, required: bool, out: &mut Vec<Expected>) {
    let (node, file) = resolve(node, file);
    out.push(Expected {
        path: path.clone(),
        ty: kind(&node),
        items: items_kind(&node, &file),
        required,
    });
    walk_children(&node, &file, &path, out);
}

/// Records the sub-fields of a node: object properties (`p.x`), list items (`p[].x`), map
/// values (`p.*.x`).
fn walk_children(node: &Value, file: &Path, prefix: &str, out: &mut Vec<Expected>) {
    let (node, file) = resolve(node, file);
    match kind(&node).as_str() {
        "object" => {
            let required: Vec<&str> = node
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (name, child) in node
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let req = required.contains(&name.as_str());
                walk(child, &file, join(prefix, name), req, out);
            }
        }
        "list" => {
            if let Some(items) = node.get("items") {
                walk_children(items, &file, &format!("{prefix}[]"), out);
            }
        }
        "map" => {
            if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
                walk_children(values, &file, &join(prefix, "*"), out);
            }
        }
        _ => {}
    }
}

/// Compares a table with the schema's fields in both directions; returns the mismatches.
fn compare(what: &str, table: &[&'static Field], expected: &[Expected]) -> Vec<String> {
    let mut problems = Vec::new();
    for e in expected {
        let Some(f) = table.iter().find(|f| f.path == e.path) else {
            problems.push(format!(
                "{what}: schema field `{}` missing from the table",
                e.path
            ));
            continue;
        };
        if describe(f.ty) != e.ty {
            problems.push(format!(
                "{what}: `{}` is {} in the schema, {:?} in the table",
                e.path, e.ty, f.ty
            ));
        }
        if f.items.map(describe) != e.items {
            problems.push(format!(
                "{what}: `{}` items are {:?} in the schema, {:?} in the table",
                e.path, e.items, f.items
            ));
        }
        // The one deliberate deviation: provenance is optional in the table (docs/acs.md#provenance).
        let want_required = e.required && f.ty != Ty::Provenance;
        if f.required != want_required {
            problems.push(format!(
                "{what}: `{}` required={} in the table, expected {want_required}",
                e.path, f.required
            ));
        }
    }
    for f in table {
        if !expected.iter().any(|e| e.path == f.path) {
            problems.push(format!(
                "{what}: table field `{}` is not in the schema",
                f.path
            ));
        }
    }
    problems
}

fn assert_no_problems(problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{} mismatches:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn schema_backed_hooks_match_their_schemas() {
    let dir = acs_dir();
    let mut problems = Vec::new();
    let mut checked = 0;
    for h in HOOKS {
        let Source::Schema(file) = h.source else {
            continue;
        };
        let path = dir.join(file);
        let mut expected = Vec::new();
        walk_children(&load(&path), &path, "", &mut expected);
        assert!(!expected.is_empty(), "{file}: no properties found");
        let table: Vec<&Field> = h.fields.iter().collect();
        problems.extend(compare(h.method, &table, &expected));
        checked += 1;
    }
    assert_no_problems(problems);
    assert_eq!(
        checked, 11,
        "expected the 11 vendored hook schemas to back a hook each"
    );
}

#[test]
fn every_copied_hook_schema_is_used() {
    let dir = acs_dir().join("hooks");
    let used: HashSet<&str> = HOOKS
        .iter()
        .filter_map(|h| match h.source {
            Source::Schema(f) => Some(f),
            Source::Notes => None,
        })
        .collect();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".json") {
            let rel = format!("hooks/{name}");
            assert!(
                used.contains(rel.as_str()),
                "{rel} is copied but no HookSpec uses it"
            );
        }
    }
}

#[test]
fn metadata_matches_request_envelope() {
    let path = acs_dir().join("request-envelope.json");
    let envelope = load(&path);
    let defs = envelope
        .get("$defs")
        .or_else(|| envelope.get("definitions"))
        .expect("definitions");
    let mut expected = Vec::new();
    walk_children(&defs["Metadata"], &path, "", &mut expected);
    let table: Vec<&Field> = METADATA.iter().collect();
    assert_no_problems(compare("Metadata", &table, &expected));
}

#[test]
fn provenance_matches_provenance_schema() {
    let path = acs_dir().join("provenance.json");
    let mut expected = Vec::new();
    walk_children(&load(&path), &path, "", &mut expected);
    let table: Vec<&Field> = PROVENANCE.iter().collect();
    assert_no_problems(compare("Provenance", &table, &expected));
    assert_eq!(lookup(PROVENANCE, "origin").unwrap().ty, Ty::Enum(ORIGINS));
}

#[test]
fn agbom_component_lists_match_component_schema() {
    let path = acs_dir().join("agbom/component.json");
    let component = load(&path);
    for (hook_name, list) in [
        ("agbom/snapshot", "components[]"),
        ("agbom/changed", "components[]"),
        ("agbom/changed", "added[]"),
    ] {
        let mut expected = Vec::new();
        walk_children(&component, &path, list, &mut expected);
        let prefix = format!("{list}.");
        let table: Vec<&Field> = hook(hook_name)
            .unwrap()
            .fields
            .iter()
            .filter(|f| f.path.starts_with(&prefix))
            .collect();
        assert_no_problems(compare(&format!("{hook_name} {list}"), &table, &expected));
    }
}

#[test]
fn hooks_table_shape() {
    // 19 steps, 2 AgBOM methods, ping, 5 wrapped MCP methods and the wrapped MCP result.
    assert_eq!(HOOKS.len(), 28);
    let names: HashSet<&str> = HOOKS.iter().map(|h| h.name).collect();
    let methods: HashSet<&str> = HOOKS.iter().map(|h| h.method).collect();
    assert_eq!(names.len(), 28, "duplicate hook names");
    assert_eq!(methods.len(), 28, "duplicate hook methods");
    for h in HOOKS {
        match h.method.strip_prefix("steps/") {
            Some(step) => assert_eq!(h.name, step),
            None => assert_eq!(h.name, h.method),
        }
        assert!(
            h.allows(DecisionKind::Allow),
            "{} must allow Allow",
            h.method
        );
    }
    let by_short = hook("toolCallRequest").unwrap();
    let by_method = hook("steps/toolCallRequest").unwrap();
    assert!(std::ptr::eq(by_short, by_method));
    assert!(hook("nonsense").is_none());
}

#[test]
fn decision_rules() {
    use DecisionKind::*;
    let audit_only: Vec<&str> = HOOKS
        .iter()
        .filter(|h| h.audit_only)
        .map(|h| h.name)
        .collect();
    assert_eq!(
        audit_only,
        ["subagentStop", "skillUnload", "turnEnd", "sessionEnd"]
    );
    for h in HOOKS.iter().filter(|h| h.audit_only) {
        assert_eq!(h.decisions, [Allow], "{} is audit-only", h.method);
    }
    let ping = hook("system/ping").unwrap();
    assert!(!ping.audit_only);
    assert_eq!(ping.decisions, [Allow]);
    let post = hook("postCompact").unwrap();
    assert!(!post.allows(Deny));
    assert!(post.allows(Modify));
    let tcr = hook("toolCallRequest").unwrap();
    for d in [Allow, Deny, Modify, Ask, Defer] {
        assert!(tcr.allows(d));
    }
}

/// Structural rules for every table, including the Notes-backed hooks the schema tests
/// cannot reach.
#[test]
fn tables_are_well_formed() {
    let mut tables: Vec<(&str, &'static [Field])> = vec![
        ("Metadata", METADATA),
        ("Provenance", PROVENANCE),
        ("Intent", INTENT),
    ];
    tables.extend(HOOKS.iter().map(|h| (h.method, h.fields)));
    for (what, fields) in tables {
        let mut seen = HashSet::new();
        for f in fields {
            assert!(seen.insert(f.path), "{what}: duplicate path {}", f.path);
            assert!(
                !f.doc.is_empty() && !f.doc.contains('\n'),
                "{what}: `{}` needs a one-line doc",
                f.path
            );
            let has_items = matches!(f.ty, Ty::List | Ty::Map);
            assert_eq!(f.items.is_some(), has_items, "{what}: `{}` items", f.path);
            if f.ty == Ty::Provenance {
                assert!(
                    !f.required,
                    "{what}: `{}` provenance must be optional",
                    f.path
                );
            }
            // The parent of a nested path must be an object, a list of objects or a map of objects.
            let Some((parent, _)) = f.path.rsplit_once('.') else {
                continue;
            };
            let (container, want) = if let Some(p) = parent.strip_suffix("[]") {
                (p, Ty::List)
            } else if let Some(p) = parent.strip_suffix(".*") {
                (p, Ty::Map)
            } else {
                (parent, Ty::Object)
            };
            let c = lookup(fields, container)
                .unwrap_or_else(|| panic!("{what}: `{}` has no parent `{container}`", f.path));
            assert_eq!(c.ty, want, "{what}: parent of `{}`", f.path);
            if want != Ty::Object {
                assert_eq!(c.items, Some(Ty::Object), "{what}: items of `{container}`");
            }
        }
    }
}

#[test]
fn children_and_lookup() {
    let tcr = hook("toolCallRequest").unwrap();
    let paths = |prefix: &str| {
        children(tcr.fields, prefix)
            .map(|f| f.path)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        paths("tool"),
        ["tool.name", "tool.version", "tool.provider"]
    );
    assert_eq!(
        paths("arguments.*"),
        ["arguments.*.value", "arguments.*.provenance"]
    );
    assert_eq!(
        paths(""),
        [
            "tool",
            "operation",
            "capability",
            "arguments",
            "raw_command",
            "intent"
        ]
    );
    let result = hook("steps/toolCallResult").unwrap();
    let outputs: Vec<_> = children(result.fields, "outputs[]")
        .map(|f| f.path)
        .collect();
    assert_eq!(outputs, ["outputs[].value", "outputs[].provenance"]);
    assert_eq!(lookup(tcr.fields, "arguments.*.value").unwrap().ty, Ty::Any);
    assert!(lookup(tcr.fields, "arguments.value").is_none());
    assert_eq!(
        lookup(METADATA, "user_context.roles").unwrap().items,
        Some(Ty::String)
    );
    assert_eq!(
        lookup(INTENT, "parser_provenance").unwrap().ty,
        Ty::Provenance
    );
}
