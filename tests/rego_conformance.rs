//! Rego conformance. The corpus (`tests/rego/corpus/`) holds the answers of a real OPA, and
//! every case must get the same answer through Warden's Rego path, or name a difference that
//! docs/rego.md lists (`the_corpus_agrees_with_the_opa_it_was_recorded_from`).
//!
//! The other tests hold Warden to plain regorus over the real-world-shaped policies in
//! `tests/rego/`: the direct value is computed with a plain regorus engine and the input a
//! Warden decision builds, and a Warden policy comparing the Rego expression with that value
//! (`org.rule == <value>`) must fire. They also check folding, imports, and the load errors of
//! `tests/rego/errors/`.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use warden::acs::envelope;
use warden::compile::Program;
use warden::guardian::{Guardian, Policy};
use warden::vm::{Env, Facts, Node, Val};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/rego")
}

/// A JSON value written as a Warden literal.
fn literal(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(literal).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => {
            if m.is_empty() {
                return "{:}".into();
            }
            format!(
                "{{{}}}",
                m.iter()
                    .map(|(k, v)| format!("{k:?}: {}", literal(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    }
}

fn direct(file: &str, query: &str, input: &Value) -> Option<Value> {
    let mut engine = regorus::Engine::new();
    let path = dir().join(file);
    engine
        .add_policy(
            path.display().to_string(),
            std::fs::read_to_string(&path).unwrap(),
        )
        .unwrap();
    engine.set_input(regorus::Value::from_json_str(&input.to_string()).unwrap());
    let results = engine.eval_query(query.to_string(), false).unwrap();
    let v = &results.result.first()?.expressions.first()?.value;
    serde_json::from_str(&v.to_json_str().unwrap()).ok()
}

fn envelope(payload: &Value) -> Vec<u8> {
    serde_json::to_vec(&envelope::request(
        1,
        "steps/toolCallRequest",
        "6f1c1a62-8a55-4a8e-9b8a-3f6f0f0b9b01",
        "2026-12-01T10:00:00Z",
        json!({"agent_id": "a", "session_id": "2b0a5c56-3d3f-4d4f-8c5e-9a3f8b2a1c00"}),
        payload.clone(),
    ))
    .unwrap()
}

/// (rego file, package, Warden expression over alias `org`, Rego query, payload)
fn cases() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Value,
)> {
    let call = |tool: &str, args: Value| json!({"tool": {"name": tool}, "arguments": args});
    let untrusted = |v: &str| json!({"value": v, "provenance": {"provenance_id": format!("p-{v}"), "origin": "tool_output"}});
    vec![
        (
            "rbac.rego",
            "acme.rbac",
            "org.admins",
            "data.acme.rbac.admins",
            call("x", json!({})),
        ),
        (
            "rbac.rego",
            "acme.rbac",
            "org.role_tools",
            "data.acme.rbac.role_tools",
            call("x", json!({})),
        ),
        (
            "rbac.rego",
            "acme.rbac",
            "org.finance_tools",
            "data.acme.rbac.finance_tools",
            call("x", json!({})),
        ),
        (
            "rbac.rego",
            "acme.rbac",
            "org.max_transfer",
            "data.acme.rbac.max_transfer",
            call("x", json!({})),
        ),
        (
            "rbac.rego",
            "acme.rbac",
            "org.break_glass",
            "data.acme.rbac.break_glass",
            call("x", json!({})),
        ),
        (
            "domains.rego",
            "acme.domains",
            "org.trusted_domains",
            "data.acme.domains.trusted_domains",
            call("x", json!({})),
        ),
        (
            "domains.rego",
            "acme.domains",
            "org.host(\"https://docs.example.org/a/b\")",
            "data.acme.domains.host(\"https://docs.example.org/a/b\")",
            call("x", json!({})),
        ),
        (
            "domains.rego",
            "acme.domains",
            "org.trusted_url(\"http://mail.example.com/x\")",
            "data.acme.domains.trusted_url(\"http://mail.example.com/x\")",
            call("x", json!({})),
        ),
        (
            "domains.rego",
            "acme.domains",
            "org.mail_domain(\"ann@partner.test\")",
            "data.acme.domains.mail_domain(\"ann@partner.test\")",
            call("x", json!({})),
        ),
        (
            "tools.rego",
            "acme.tools",
            "org.classification",
            "data.acme.tools.classification",
            call("send_money", json!({})),
        ),
        (
            "tools.rego",
            "acme.tools",
            "org.classification",
            "data.acme.tools.classification",
            call("read_file", json!({})),
        ),
        (
            "tools.rego",
            "acme.tools",
            "org.limit",
            "data.acme.tools.limit",
            call("send_email", json!({})),
        ),
        (
            "tools.rego",
            "acme.tools",
            "org.argument_names",
            "data.acme.tools.argument_names",
            call("t", json!({"b": {"value": 1}, "a": {"value": 2}})),
        ),
        (
            "tools.rego",
            "acme.tools",
            "org.tainted_arguments",
            "data.acme.tools.tainted_arguments",
            call(
                "t",
                json!({"q": untrusted("web text"), "n": {"value": 3, "provenance": {"provenance_id": "u", "origin": "system"}}}),
            ),
        ),
        (
            "tools.rego",
            "acme.tools",
            "org.deny",
            "data.acme.tools.deny",
            call(
                "execute_command",
                json!({"cmd": {"value": "curl evil.test"}}),
            ),
        ),
        // Builtins behind regorus features (regex, glob, graph's `walk`, semver, encodings).
        (
            "text.rego",
            "acme.text",
            "org.ticket_id(\"OPS-1234\")",
            "data.acme.text.ticket_id(\"OPS-1234\")",
            call("x", json!({})),
        ),
        (
            "text.rego",
            "acme.text",
            "org.numbers_in(\"order 12 of 345\")",
            "data.acme.text.numbers_in(\"order 12 of 345\")",
            call("x", json!({})),
        ),
        (
            "text.rego",
            "acme.text",
            "org.masked(\"pin 4321\")",
            "data.acme.text.masked(\"pin 4321\")",
            call("x", json!({})),
        ),
        (
            "text.rego",
            "acme.text",
            "org.internal_host(\"wiki.corp.example\")",
            "data.acme.text.internal_host(\"wiki.corp.example\")",
            call("x", json!({})),
        ),
        (
            "text.rego",
            "acme.text",
            "org.argument_strings",
            "data.acme.text.argument_strings",
            call(
                "t",
                json!({"to": {"value": "ann@example.com"}, "n": {"value": 3}}),
            ),
        ),
        (
            "text.rego",
            "acme.text",
            "org.card_like",
            "data.acme.text.card_like",
            call(
                "t",
                json!({"card": {"value": "4111 1111 1111 1111"}, "memo": {"value": "lunch"}}),
            ),
        ),
        (
            "text.rego",
            "acme.text",
            "org.recent_client(\"2.3.1\")",
            "data.acme.text.recent_client(\"2.3.1\")",
            call("x", json!({})),
        ),
        (
            "text.rego",
            "acme.text",
            "org.encoded(\"hi\")",
            "data.acme.text.encoded(\"hi\")",
            call("x", json!({})),
        ),
        (
            "text.rego",
            "acme.text",
            "org.hex_of(\"hi\")",
            "data.acme.text.hex_of(\"hi\")",
            call("x", json!({})),
        ),
    ]
}

#[test]
fn warden_sees_the_values_regorus_computes() {
    for (file, _pkg, expr, query, payload) in cases() {
        // The input a Warden decision builds for this payload (labels from std.taint).
        let mut labels = serde_json::Map::new();
        if let Some(args) = payload["arguments"].as_object() {
            for (k, v) in args {
                if let Some(origin) = v.pointer("/provenance/origin").and_then(Value::as_str) {
                    let l = if origin == "tool_output" {
                        "untrusted"
                    } else {
                        "trusted"
                    };
                    labels.insert(k.clone(), json!([l]));
                }
            }
        }
        // Rules, Rego's included, see the payload with its provenance completed
        // (docs/language.md §4, "Content without provenance").
        let entered = warden::acs::payload::complete(
            "steps/toolCallRequest",
            "6f1c1a62-8a55-4a8e-9b8a-3f6f0f0b9b01",
            &payload,
        )
        .unwrap_or_else(|| payload.clone());
        let input = json!({
            "payload": entered,
            "metadata": {"agent_id": "a", "session_id": "2b0a5c56-3d3f-4d4f-8c5e-9a3f8b2a1c00"},
            "session": {"turn": 0},
            "labels": {"arguments": labels},
        });
        // Undefined is absent in Warden (docs/rego.md, "Values").
        let same = match direct(file, query, &input) {
            None | Some(Value::Null) => format!("not present({expr})"),
            Some(want) => format!("{expr} == {}", literal(&want)),
        };
        let policy = format!(
            "use std.taint\nuse rego \"{file}\" as org\nrule same on toolCallRequest when {same} => deny \"same\"\ndefault allow\n"
        );
        let p = Policy::from_source_in("conformance.ward", &policy, dir())
            .unwrap_or_else(|d| panic!("{query}: {d}"));
        let out: Value =
            serde_json::from_slice(&Guardian::new(p).handle(&envelope(&payload))).unwrap();
        assert_eq!(
            out["result"]["reason_codes"][0], "same",
            "{query}: Warden's value differs from regorus's ({same}: {out})"
        );
    }
}

#[test]
fn data_only_rules_are_folded_and_input_rules_are_called() {
    let policy = "use rego \"rbac.rego\" as rbac\nuse rego \"tools.rego\" as tools\n\
        rule a on toolCallRequest when tool.name in rbac.finance_tools and tools.classification == \"high\" => deny \"a\"\n\
        default allow\n";
    let p = Policy::from_source_in("fold.ward", policy, dir()).unwrap();
    let dump = warden::compile::dump(p.program());
    assert!(
        dump.contains("folded from Rego data.acme.rbac.finance_tools"),
        "{dump}"
    );
    assert!(
        dump.contains("rego       data.acme.tools.classification"),
        "{dump}"
    );
}

#[test]
fn a_missing_rego_rule_is_a_check_error_naming_file_and_rule() {
    let policy = "use rego \"rbac.rego\" as rbac\nrule a on toolCallRequest when tool.name in rbac.finanse_tools => deny \"a\"\ndefault allow\n";
    let err = Policy::from_source_in("missing.ward", policy, dir()).unwrap_err();
    let d = err
        .items
        .iter()
        .find(|d| d.code == "check::unknown_rego_rule")
        .expect("reported");
    assert!(
        d.message.contains("rbac.rego") && d.message.contains("finanse_tools"),
        "{}",
        d.message
    );
    assert_eq!(d.help.as_deref(), Some("did you mean `finance_tools`?"));
}

#[test]
fn a_rego_error_at_decision_time_is_a_decision_failure() {
    let dir = std::env::temp_dir().join("warden-rego-error");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.rego"),
        "package bad\nimport rego.v1\nboom := x if { x := 1 / input.payload.arguments.n.value }\n",
    )
    .unwrap();
    let policy = "use rego \"bad.rego\" as bad\nrule a on toolCallRequest when bad.boom == 1 => allow \"fine\"\ndefault allow\n";
    let p = Policy::from_source_in("err.ward", policy, dir).unwrap();
    let payload = json!({"tool": {"name": "t"}, "arguments": {"n": {"value": 0}}});
    let out: Value = serde_json::from_slice(&Guardian::new(p).handle(&envelope(&payload))).unwrap();
    // Either Rego reports the division by zero (a decision failure: deny) or the rule is
    // undefined (false); never an error-driven allow through rule `a`.
    let codes = out["result"]["reason_codes"].to_string();
    assert!(!codes.contains("fine"), "{out}");
}

/// The decision a policy over `tests/rego` reaches for one `toolCallRequest` payload.
fn decide(policy: &str, payload: &Value) -> Value {
    let p = Policy::from_source_in("case.ward", policy, dir()).unwrap_or_else(|d| panic!("{d}"));
    let out: Value = serde_json::from_slice(&Guardian::new(p).handle(&envelope(payload))).unwrap();
    out["result"].clone()
}

#[test]
fn a_rule_read_through_an_import_alias_evaluates_only_what_it_needs() {
    // gate.rego reads `n.reserved` through `import data.acme.names as n`; names.rego also
    // holds `level`, whose evaluation is an error. OPA never evaluates `level` here.
    let policy = "use rego \"gate.rego\" as gate\nuse rego \"names.rego\" as names\n\
        rule reserved on toolCallRequest when gate.reserved_user => deny \"reserved\"\n\
        rule three on toolCallRequest when gate.reserved_count == 3 => ask \"three\" approver human \"it\"\n\
        default allow\n";
    let root = json!({"tool": {"name": "add_user"}, "arguments": {"user": {"value": "root"}}});
    let result = decide(policy, &root);
    assert_eq!(result["decision"], "deny", "{result}");
    assert_eq!(result["reason_codes"][0], "reserved", "{result}");
    let ann = json!({"tool": {"name": "add_user"}, "arguments": {"user": {"value": "ann"}}});
    let result = decide(policy, &ann);
    assert_eq!(result["decision"], "ask", "{result}");
    assert_eq!(result["reason_codes"][0], "three", "{result}");
    // `level` is really broken: asked for directly, it fails (at load, where it is folded).
    let policy = "use rego \"names.rego\" as names\n\
        rule lvl on toolCallRequest when names.level == \"high\" => deny \"lvl\"\n\
        default allow\n";
    if let Ok(p) = Policy::from_source_in("level.ward", policy, dir()) {
        let out: Value = serde_json::from_slice(&Guardian::new(p).handle(&envelope(&ann))).unwrap();
        assert_eq!(
            out["result"]["reason_codes"][0], "warden.decision_failure",
            "{out}"
        );
    }
}

#[test]
fn an_import_after_rules_is_accepted() {
    let policy = "use rego \"late_import.rego\" as late\nuse rego \"rbac.rego\" as rbac\n\
        rule over on toolCallRequest when late.over_limit => deny \"over\"\n\
        rule once on toolCallRequest when late.tool_limit == 1 => ask \"once\" approver human \"it\"\n\
        default allow\n";
    let big = json!({"tool": {"name": "send_money"}, "arguments": {"amount": {"value": 5000}}});
    let result = decide(policy, &big);
    assert_eq!(result["reason_codes"][0], "over", "{result}");
    let mail = json!({"tool": {"name": "send_email"}, "arguments": {"amount": {"value": 1}}});
    let result = decide(policy, &mail);
    assert_eq!(result["reason_codes"][0], "once", "{result}");
}

/// `tests/rego/errors/*.rego`: each line that ends in `# missing: NAME` calls a function this
/// build cannot run. Loading the file must fail with `check::unknown_rego_builtin` at that
/// line of that file, naming the function — and nothing else.
#[test]
fn a_missing_builtin_is_a_load_error_at_its_line() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir().join("errors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rego"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut want: Vec<(usize, String)> = text
            .lines()
            .enumerate()
            .filter_map(|(i, l)| {
                let (_, name) = l.split_once("# missing: ")?;
                Some((i + 1, name.trim().to_string()))
            })
            .collect();
        want.sort();
        let policy = format!("use rego \"errors/{name}\" as e\ndefault allow\n");
        let err = match Policy::from_source_in("errors.ward", &policy, dir()) {
            Ok(_) => panic!("{name}: loaded, but calls {want:?}"),
            Err(e) => e,
        };
        let json = err.to_json();
        let mut got: Vec<(usize, String)> = Vec::new();
        for d in &json {
            assert_eq!(
                d.code,
                "check::unknown_rego_builtin",
                "{name}: {}",
                err.render(false)
            );
            assert!(d.file.ends_with(&name), "{name}: reported in {}", d.file);
            let help = d.help.clone().unwrap_or_default();
            let called = want
                .iter()
                .find(|(_, f)| d.message.contains(&format!("`{f}`")))
                .map(|(_, f)| f.clone())
                .unwrap_or_else(|| panic!("{name}: {}", d.message));
            assert!(!help.is_empty(), "{name}: no hint for {called}");
            got.push((d.line, called));
        }
        got.sort();
        assert_eq!(got, want, "{name}: {}", err.render(false));
    }
}

/// docs/rego.md lists exactly the builtins this build of regorus has (the first ```text block
/// under `## Builtins`).
#[test]
fn the_documented_builtins_are_the_built_ones() {
    let doc =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/rego.md"))
            .unwrap();
    let section = &doc[doc
        .find("\n## Builtins")
        .expect("docs/rego.md has ## Builtins")..];
    let start = section.find("```text\n").expect("a ```text block") + "```text\n".len();
    let block = &section[start..start + section[start..].find("```").unwrap()];
    let mut documented: Vec<&str> = block.split_whitespace().collect();
    documented.sort_unstable();
    let mut built: Vec<&str> = regorus::unstable::BUILTINS
        .keys()
        .copied()
        .filter(|n| !n.starts_with("__"))
        .chain(["print"])
        .collect();
    built.sort_unstable();
    let missing: Vec<&&str> = built.iter().filter(|b| !documented.contains(b)).collect();
    let extra: Vec<&&str> = documented.iter().filter(|d| !built.contains(d)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/rego.md's builtins differ from the build: undocumented {missing:?}, not built {extra:?}"
    );
}

/// Session facts for evaluating a Rego rule through the VM with an input the caller gives: the
/// default input (the only thing that reads them) is never built.
struct NoFacts;

impl Facts for NoFacts {
    fn node_of(&self, _: &Program, _: &Val<'_>) -> Option<Node> {
        None
    }
    fn labels_of(&self, _: &Program, _: &Val<'_>) -> Option<u64> {
        None
    }
    fn infer_node(&self, _: &Program, _: &Value, _: u64) -> Node {
        Node::default()
    }
    fn turns_since(&self, _: u8) -> f64 {
        f64::INFINITY
    }
    fn history_count(&self, _: &Program, _: u32, _: Option<&str>) -> u64 {
        0
    }
    fn effect_state(&self, _: u32) -> Option<&'static str> {
        None
    }
    fn requested_now(&self) -> bool {
        false
    }
    fn asked_for(&self, _: &str) -> bool {
        false
    }
    fn delegated(&self) -> bool {
        false
    }
    fn named_objects(&self) -> u32 {
        0
    }
    fn said_by_user(&self, _: &Value) -> bool {
        false
    }
    fn place_name(&self, _: u32) -> Option<std::sync::Arc<str>> {
        None
    }
    fn turn(&self) -> u64 {
        0
    }
    fn intent_declared(&self) -> bool {
        false
    }
    fn intent_raw(&self) -> Option<Arc<str>> {
        None
    }
    fn intent_scope_mode(&self) -> Option<Arc<str>> {
        None
    }
    fn intent_parsed(&self) -> Option<Value> {
        None
    }
    fn intent_permits(&self, _: &str, _: Option<&str>, _: Option<&str>) -> bool {
        true
    }
}

/// What a case evaluates to: a value, undefined, or an evaluation error.
#[derive(Debug, Clone)]
enum Answer {
    Value(Value),
    Undefined,
    Error,
}

/// OPA's answer as the corpus records it (`expect`, `undefined: true` or `error`), or, under
/// `warden`, the answer Warden gives instead (a documented difference).
fn answer_in(v: &Value) -> Option<Answer> {
    if v.get("error").is_some_and(|e| !e.is_null()) {
        Some(Answer::Error)
    } else if v["undefined"] == true {
        Some(Answer::Undefined)
    } else {
        v.get("expect").cloned().map(Answer::Value)
    }
}

/// JSON equality with numbers compared by value (`2` and `2.0` are one Rego number).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || x.as_f64().zip(y.as_f64()).is_some_and(|(x, y)| x == y)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

fn same_answer(a: &Answer, b: &Answer) -> bool {
    match (a, b) {
        (Answer::Value(x), Answer::Value(y)) => same_json(x, y),
        (Answer::Undefined, Answer::Undefined) | (Answer::Error, Answer::Error) => true,
        _ => false,
    }
}

fn has_null(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.iter().any(has_null),
        Value::Object(m) => m.values().any(has_null),
        _ => false,
    }
}

/// The `use rego` lines for a corpus file: the file itself as `c`, the modules it imports
/// (`modules`) and its data document (`data`).
fn uses(name: &str, spec: &Value) -> String {
    let mut out = format!("use rego \"corpus/{name}.rego\" as c\n");
    for (i, m) in spec["modules"].as_array().into_iter().flatten().enumerate() {
        out += &format!("use rego \"corpus/{}\" as m{i}\n", m.as_str().unwrap());
    }
    if let Some(d) = spec["data"].as_str() {
        out += &format!("use rego data \"corpus/{d}\" as d\n");
    }
    out
}

/// A Warden call of the case's rule with its arguments and input.
fn warden_call(case: &Value) -> String {
    let mut args: Vec<String> = case["args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(literal)
        .collect();
    args.push(format!("input: {}", literal(&case["input"])));
    format!("c.{}({})", case["rule"].as_str().unwrap(), args.join(", "))
}

/// The section of docs/rego.md that lists the deliberate differences from OPA.
fn documented_differences() -> String {
    let doc =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/rego.md"))
            .unwrap();
    let start = doc
        .find("\n## Differences from OPA")
        .expect("docs/rego.md has ## Differences from OPA");
    let rest = &doc[start + 1..];
    let end = rest[1..].find("\n## ").map_or(rest.len(), |i| i + 1);
    rest[..end].to_string()
}

/// `tests/rego/corpus/NAME.rego` with `NAME.json`: rules, the inputs they are evaluated with,
/// and what real OPA answers — a value, undefined, or an evaluation error — recorded by
/// `scripts/record-rego-corpus.py` (CI re-records and fails on drift). Every case is decided
/// through Warden's Rego path and must give OPA's answer, unless the case names a difference
/// (`difference`, listed in docs/rego.md's "Differences from OPA", and `warden`: the answer
/// Warden gives instead). Each case is checked twice:
///
/// - the value: the VM's Rego call (`vm::Env::rego`, what `c.rule(input: …)` runs) on the
///   policy's loaded bridge gives exactly OPA's JSON (undefined: no value; error: an error);
/// - the decision: a Warden policy with `c.rule(args…, input: {…}) == VALUE` fires (for
///   undefined and `null`: `not present(…)`), read as a condition the call holds exactly when
///   a Rego rule body would (defined and not `false`), and an error is a decision failure.
#[test]
fn the_corpus_agrees_with_the_opa_it_was_recorded_from() {
    let corpus = dir().join("corpus");
    let differences = documented_differences();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.with_extension("rego").exists())
        .collect();
    files.sort();
    let (mut cases, mut agree, mut documented, mut value_only) = (0, 0, 0, 0);
    let mut rules = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    let payload = json!({"tool": {"name": "t"}, "arguments": {}});
    for data in files {
        let name = data.file_stem().unwrap().to_string_lossy().into_owned();
        let spec: Value = serde_json::from_str(&std::fs::read_to_string(&data).unwrap())
            .unwrap_or_else(|e| panic!("{name}.json: {e}"));
        assert!(
            spec["origin"]
                .as_str()
                .is_some_and(|o| o.starts_with("recorded from OPA")),
            "{name}.json: not recorded from OPA (scripts/record-rego-corpus.py)"
        );
        assert!(spec["opa_version"].is_string(), "{name}.json: which OPA?");
        let package = spec["package"].as_str().expect("package");
        let uses = uses(&name, &spec);
        let all = spec["cases"].as_array().expect("cases");

        // One policy that calls every rule of the file at run time, so that each has its
        // id among the program's Rego references.
        let mut policy = uses.clone();
        let mut seen = std::collections::BTreeSet::new();
        for case in all {
            let rule = case["rule"].as_str().unwrap();
            if seen.insert(rule) {
                policy += &format!(
                    "rule r{} on toolCallRequest when present({}) => deny \"r\"\n",
                    seen.len(),
                    warden_call(case)
                );
            }
        }
        policy += "default allow\n";
        let loaded = Policy::from_source_in("corpus.ward", &policy, dir())
            .unwrap_or_else(|d| panic!("{name}: {}", d.render(false)));
        let program = loaded.program();

        for case in all {
            cases += 1;
            let rule = case["rule"].as_str().unwrap();
            rules.insert(format!("{package}.{rule}"));
            let what = format!(
                "{name}: {rule}{} with input {}",
                case.get("args").map(|a| a.to_string()).unwrap_or_default(),
                case["input"]
            );
            let opa = answer_in(case).unwrap_or_else(|| panic!("{what}: no recorded answer"));
            let want = match case.get("difference").and_then(Value::as_str) {
                Some(id) => {
                    assert!(
                        differences.contains(&format!("`{id}`")),
                        "{what}: difference `{id}` is not listed in docs/rego.md"
                    );
                    let w = answer_in(&case["warden"])
                        .unwrap_or_else(|| panic!("{what}: a difference needs `warden`"));
                    assert!(
                        !same_answer(&w, &opa),
                        "{what}: listed as difference `{id}`, but Warden's answer is OPA's"
                    );
                    w
                }
                None => opa.clone(),
            };

            // The value, through the VM's Rego call on the policy's bridge.
            let path = format!("{package}.{rule}");
            let id = program
                .rego_refs
                .iter()
                .position(|p| *p == path)
                .unwrap_or_else(|| panic!("{what}: {path} is not called at run time"))
                as u32;
            let env = Env {
                program,
                payload: &payload,
                metadata: &Value::Null,
                state: &NoFacts,
                rego_cache: None,
            };
            let args: Vec<Value> = case["args"].as_array().cloned().unwrap_or_default();
            let mut error = String::new();
            let got = match env.rego(id, &args, Some(&case["input"])) {
                Ok(Some(v)) => Answer::Value(v),
                Ok(None) => Answer::Undefined,
                Err(e) => {
                    error = format!(" ({e:?})");
                    Answer::Error
                }
            };
            let mut ok = same_answer(&got, &want);
            let mut why = format!("value {got:?}{error}, want {want:?}");

            // The decision, through a policy.
            let call = warden_call(case);
            let same = match &want {
                Answer::Value(v) if !has_null(v) => Some(format!("{call} == {}", literal(v))),
                Answer::Value(Value::Null) | Answer::Undefined => {
                    Some(format!("not present({call})"))
                }
                // A list or object with a `null` inside: a Warden literal cannot spell it
                // (`null` is absent there); the value check above compares it.
                Answer::Value(_) => None,
                Answer::Error => Some(format!("present({call})")),
            };
            // A list literal in Warden holds one type: an input or value with a mixed list
            // cannot be written in a policy, and only its value is checked.
            let spelled = |policy: String| -> Option<Value> {
                match Policy::from_source_in("case.ward", &policy, dir()) {
                    Ok(p) => {
                        let out: Value =
                            serde_json::from_slice(&Guardian::new(p).handle(&envelope(&payload)))
                                .unwrap();
                        Some(out["result"].clone())
                    }
                    Err(d) if d.items.iter().all(|d| d.code == "check::type_mismatch") => None,
                    Err(d) => panic!("{policy}: {}", d.render(false)),
                }
            };
            let mut decided = false;
            if let Some(result) = same.and_then(|same| {
                spelled(format!(
                    "{uses}rule same on toolCallRequest when {same} => deny \"same\"\ndefault allow\n"
                ))
            }) {
                decided = true;
                let code = result["reason_codes"][0].as_str().unwrap_or("").to_string();
                let expected = match want {
                    Answer::Error => "warden.decision_failure",
                    _ => "same",
                };
                if code != expected {
                    ok = false;
                    why += &format!("; the decision gave {code:?}, want {expected:?}");
                }
            }
            if !matches!(want, Answer::Error) {
                let truth = !matches!(want, Answer::Undefined | Answer::Value(Value::Bool(false)));
                let policy = format!(
                    "{uses}rule truth on toolCallRequest when {call} => deny \"truth\"\ndefault allow\n"
                );
                if let Some(result) = spelled(policy).filter(|result| {
                    decided = true;
                    (result["reason_codes"][0] == "truth") != truth
                }) {
                    ok = false;
                    why += &format!("; as a condition: {result}, want {truth}");
                }
            }
            if !decided {
                value_only += 1;
            }
            if ok {
                if case.get("difference").is_some() {
                    documented += 1;
                } else {
                    agree += 1;
                }
            } else {
                failures.push(format!("{what}: {why}"));
            }
        }
    }
    eprintln!(
        "Rego corpus: {} rules, {cases} cases: {agree} agree with OPA, {documented} documented differences, {} failing ({value_only} checked by value only: a mixed list Warden cannot spell)",
        rules.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {cases} cases differ from OPA:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases >= 300, "only {cases} corpus cases");
    assert!(rules.len() >= 60, "only {} corpus rules", rules.len());
}
