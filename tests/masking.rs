//! No secret leaves Warden (docs/explain.md, "Masking"): a value under a `redact` label, at a
//! `mask` path, or replaced by a `modify`'s redaction never appears in an answer (its explain
//! trace included), a decision-log record, an approval request (the answer's and the operator's
//! listing) or the audit chain, whatever the session does with it. And the JSON pointers of
//! redactions address the payload as the ACS `modifications` schema means them.

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Value};
use warden::acs::{envelope, ids, time};
use warden::guardian::{journal, Guardian, MemoryJournal, Options, Policy, Protocol};

const SESSION: &str = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f";
/// 2026-12-01T10:00:00Z, in seconds.
const T0: i64 = 1_796_119_200;

const POLICY: &str = r#"
label vault_secret redact when origin == tool_output and source_id == "vault"
mask args.password
rule key on toolCallRequest when tool.name == "pay" and args.memo matches "^SECRET"
  => modify "secret.key" redact args.memo with "[KEY]"
rule large on toolCallRequest when tool.name == "pay" and args.amount > 1000
  => ask "pay.large" approver human "finance"
rule shout on toolCallRequest when tool.name == "pay" and upper(args.password) == "X"
  => deny "never"
rule leak on toolCallRequest when tool.name == "post" and args.body has vault_secret
  => deny "vault.leak"
rule note on toolCallRequest when tool.name == "post" and contains(args.body, "SECRET")
  => modify "note.secret" redact args.body
rule tokens on toolCallRequest when tool.name == "store"
  => modify "store.tokens" redact each k, a in args when a matches "^SECRET" with "[TOKEN]"
default allow
"#;

/// One step of a session, over the secrets drawn for the case.
#[derive(Debug, Clone)]
enum Step {
    /// The vault tool returns secret `i`.
    Vault(usize),
    /// A payment: its amount, memo (a secret or plain text) and password (a secret).
    Pay {
        large: bool,
        memo: Option<usize>,
        password: usize,
    },
    /// A post whose body is derived from the latest vault output (or written by the agent).
    Post { derived: bool, secret: usize },
    /// A call with a secret among plain arguments and in a list (`redact each`).
    Store(usize),
    /// The approver grants the latest ask, and the same call comes again.
    ApproveAndRetry,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3usize).prop_map(Step::Vault),
        (any::<bool>(), proptest::option::of(0..3usize), 0..3usize).prop_map(
            |(large, memo, password)| Step::Pay {
                large,
                memo,
                password
            }
        ),
        (any::<bool>(), 0..3usize).prop_map(|(derived, secret)| Step::Post { derived, secret }),
        (0..3usize).prop_map(Step::Store),
        Just(Step::ApproveAndRetry),
    ]
}

/// Three secrets: `SECRET` and a random tail, so that nothing else in the outputs contains one.
fn secrets() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec("[A-Z0-9]{8,16}", 3)
        .prop_map(|tails| tails.into_iter().map(|t| format!("SECRET{t}")).collect())
}

struct Run {
    guardian: Guardian,
    journal: Arc<MemoryJournal>,
    log: Arc<common::Collect>,
    n: u32,
    /// Everything that left Warden, as text.
    out: Vec<String>,
    last_vault: Option<String>,
    last_ask: Option<(u32, Value)>,
}

impl Run {
    fn new() -> Run {
        let journal = Arc::new(MemoryJournal::default());
        let options = Options {
            explain: true,
            protocol: Protocol {
                audit: true,
                ..Default::default()
            },
            ..Default::default()
        };
        let policy = Policy::from_source("mask.ward", POLICY).unwrap_or_else(|d| panic!("{d}"));
        let guardian = Guardian::with_journal(policy, options, journal.clone());
        let log = Arc::new(common::Collect::default());
        assert!(guardian.set_decision_log(log.clone()));
        Run {
            guardian,
            journal,
            log,
            n: 0,
            out: Vec::new(),
            last_vault: None,
            last_ask: None,
        }
    }

    fn send(&mut self, method: &str, payload: Value) -> Value {
        self.n += 1;
        let req = envelope::request(
            self.n,
            method,
            &ids::counter(0, self.n.into()),
            &time::rfc3339(T0 + i64::from(self.n)),
            json!({"agent_id": "a", "session_id": SESSION, "turn_id": "t1",
                   "user_context": {"user_id": "u1"}, "environment": "production"}),
            payload,
        );
        let out = self.guardian.handle(&serde_json::to_vec(&req).unwrap());
        let response: Value = serde_json::from_slice(&out).unwrap();
        self.out.push(String::from_utf8_lossy(&out).into_owned());
        let result = response["result"].clone();
        if result["decision"] == "ask" {
            self.last_ask = Some((self.n, payload_of(&req)));
        }
        result
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.send(
            "steps/toolCallRequest",
            json!({"tool": {"name": tool}, "arguments": arguments}),
        )
    }

    fn run(&mut self, step: &Step, secrets: &[String]) {
        let plain = |v: Value| json!({"value": v, "provenance": {"origin": "agent_generated"}});
        match step {
            Step::Vault(i) => {
                let id = format!("vault-{}", self.n + 1);
                self.send(
                    "steps/toolCallResult",
                    json!({"tool": {"name": "vault"}, "exit_status": "success",
                           "outputs": [{"value": secrets[*i], "provenance":
                               {"provenance_id": id, "origin": "tool_output", "source_id": "vault"}}]}),
                );
                self.last_vault = Some(id);
            }
            Step::Pay {
                large,
                memo,
                password,
            } => {
                let memo = memo.map_or_else(|| "rent".to_string(), |i| secrets[i].clone());
                self.call(
                    "pay",
                    json!({"to": plain(json!("bob")),
                           "amount": plain(json!(if *large { 2000 } else { 10 })),
                           "memo": plain(json!(memo)),
                           "password": plain(json!(secrets[*password]))}),
                );
            }
            Step::Post { derived, secret } => {
                let provenance = match (&self.last_vault, derived) {
                    (Some(id), true) => json!({"origin": "agent_generated", "derived_from": [id]}),
                    _ => json!({"origin": "agent_generated"}),
                };
                let body = format!("note: {}", secrets[*secret]);
                self.call(
                    "post",
                    json!({"body": {"value": body, "provenance": provenance}}),
                );
            }
            Step::Store(i) => {
                self.call(
                    "store",
                    json!({"name": plain(json!("db")), "token": plain(json!(secrets[*i])),
                           "tags": plain(json!(["x", secrets[*i]]))}),
                );
            }
            Step::ApproveAndRetry => {
                let Some((n, payload)) = self.last_ask.take() else {
                    return;
                };
                let granted = self
                    .guardian
                    .approve(&ids::counter(0, n.into()), "finance", None);
                self.out.push(format!("{granted:?}"));
                self.send("steps/toolCallRequest", payload);
            }
        }
    }

    /// Every output besides the answers: decision-log records, the approvals an operator
    /// lists, the audit chain.
    fn collect(&mut self) {
        self.out
            .extend(self.log.0.lock().unwrap().iter().map(Value::to_string));
        for a in self.guardian.approvals(Some(T0 * 1000)) {
            self.out.push(a.approval.action.clone());
            self.out.push(format!("{:?}", a.approval));
        }
        let records = self.journal.records.lock().unwrap().clone();
        for (_, entries) in journal::chains(&records) {
            self.out.extend(entries.iter().map(Value::to_string));
        }
    }
}

fn payload_of(req: &Value) -> Value {
    req["params"]["payload"].clone()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_secret_appears_in_any_output(
        secrets in secrets(),
        steps in proptest::collection::vec(step(), 1..10),
    ) {
        let mut run = Run::new();
        for s in &steps {
            run.run(s, &secrets);
        }
        run.collect();
        for text in &run.out {
            for secret in &secrets {
                let lower = secret.to_lowercase();
                prop_assert!(
                    !text.contains(secret.as_str()) && !text.contains(lower.as_str()),
                    "{secret} in {text}"
                );
            }
        }
    }
}

#[test]
fn every_kind_of_output_is_covered() {
    // The property above is not vacuous: one session produces each kind of output, and the
    // masked places show their stand-ins.
    let secrets: Vec<String> = ["SECRETAAAA1111", "SECRETBBBB2222", "SECRETCCCC3333"]
        .map(String::from)
        .to_vec();
    let mut run = Run::new();
    for s in [
        Step::Vault(0),
        Step::Post {
            derived: true,
            secret: 0,
        },
        Step::Pay {
            large: true,
            memo: Some(1),
            password: 2,
        },
    ] {
        run.run(&s, &secrets);
    }
    run.collect();
    let all = run.out.join("\n");
    assert!(all.contains("\"[redacted]\""), "{all}");
    assert!(all.contains("[KEY]"), "{all}");
    assert!(
        all.contains("\"entry_hash\""),
        "the audit chain is collected: {all}"
    );
    assert!(
        all.contains("\"policy_digest\""),
        "the decision log is collected: {all}"
    );
    assert!(
        all.contains("\"pending\"") || all.contains("approver_id"),
        "{all}"
    );
    for s in &secrets {
        assert!(!all.contains(s.as_str()), "{s} in {all}");
    }
}

#[test]
fn a_list_element_is_redacted_inside_its_argument_s_value() {
    let policy = Policy::from_source(
        "list.ward",
        "rule first on toolCallRequest when tool.name == \"mail\" => modify \"mail.first\" redact args.to[0]\ndefault allow\n",
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let guardian = Guardian::new(policy);
    let payload = json!({"tool": {"name": "mail"},
        "arguments": {"to": {"value": ["a@example.com", "b@example.com"],
                             "provenance": {"origin": "agent_generated"}}}});
    let req = envelope::request(
        1,
        "steps/toolCallRequest",
        &ids::counter(0, 1),
        &time::rfc3339(T0),
        json!({"agent_id": "a", "session_id": SESSION}),
        payload.clone(),
    );
    let out: Value =
        serde_json::from_slice(&guardian.handle(&serde_json::to_vec(&req).unwrap())).unwrap();
    let path = out["result"]["modifications"]["redactions"][0]["path"]
        .as_str()
        .unwrap();
    assert_eq!(path, "/arguments/to/value/0");
    // The pointer names the element in the payload the platform sent.
    assert_eq!(payload.pointer(path), Some(&json!("a@example.com")));
    common::schema::assert_valid_response(&out);
}

/// The answer's redactions for one call of `tool` with `arguments` (plain values) under `policy`.
fn redactions(policy: &str, tool: &str, arguments: Value) -> Value {
    let guardian =
        Guardian::new(Policy::from_source("p.ward", policy).unwrap_or_else(|d| panic!("{d}")));
    let arguments: serde_json::Map<String, Value> = arguments
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), json!({"value": v})))
        .collect();
    let req = envelope::request(
        1,
        "steps/toolCallRequest",
        &ids::counter(0, 1),
        &time::rfc3339(T0),
        json!({"agent_id": "a", "session_id": SESSION}),
        json!({"tool": {"name": tool}, "arguments": arguments}),
    );
    let out: Value =
        serde_json::from_slice(&guardian.handle(&serde_json::to_vec(&req).unwrap())).unwrap();
    common::schema::assert_valid_response(&out);
    out["result"]["modifications"]["redactions"].clone()
}

#[test]
fn redact_each_redacts_exactly_the_chosen_places() {
    let policy = "let aws = \"AKIA[0-9A-Z]{16}\"\nrule r on toolCallRequest when tool.name == \"send\"\n  => modify \"k\" redact each k, a in args when type_of(a) == \"string\" and a matches aws with \"[\" + \"KEY]\"\ndefault allow\n";
    let got = redactions(
        policy,
        "send",
        json!({"memo": "AKIA0123456789ABCDEF", "note": "hello", "n": 3, "token": "AKIAZZZZZZZZZZZZZZZZ"}),
    );
    assert_eq!(
        got,
        json!([{"path": "/arguments/memo/value", "replacement": "[KEY]"},
               {"path": "/arguments/token/value", "replacement": "[KEY]"}])
    );
    let list = "rule r on toolCallRequest when tool.name == \"mail\"\n  => modify \"x\" redact each r in args.to when not ends_with(r, \"@corp.example\")\ndefault allow\n";
    let got = redactions(
        list,
        "mail",
        json!({"to": ["a@corp.example", "eve@evil.example", "b@corp.example", "x@y.example"]}),
    );
    assert_eq!(
        got,
        json!([{"path": "/arguments/to/value/1", "replacement": "[REDACTED]"},
               {"path": "/arguments/to/value/3", "replacement": "[REDACTED]"}])
    );
}

#[test]
fn a_failing_test_s_report_shows_no_secret() {
    // What `warden test` prints and the language server shows for a failed step: the step's
    // text (which writes the secret), the expected and actual decisions, the rendered report.
    use warden::testing::{self, RunOptions, Suite};
    let dir = std::env::temp_dir().join(format!("warden-mask-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("p.ward");
    std::fs::write(
        &file,
        "mask args.password\n\
         rule key on toolCallRequest when args.memo matches \"^SECRET\" => modify \"k\" redact args.memo\n\
         default allow\n\
         test \"fails on purpose\" {\n  call login(password: \"SECRETPASS42\", memo: \"SECRETMEMO77\") => deny \"never\"\n}\n",
    )
    .unwrap();
    let suite = Suite::load(&file).unwrap_or_else(|e| panic!("{}", e.diagnostics.render(false)));
    let mut report = testing::Report::default();
    let opts = RunOptions {
        filter: None,
        color: false,
        jobs: 1,
    };
    testing::run_suites(std::slice::from_ref(&suite), &opts, &mut report);
    let failures = &report.results[0].failures;
    assert_eq!(failures.len(), 1, "the test fails");
    let f = &failures[0];
    let shown = format!(
        "{}\n{}\n{:?}\n{:?}\n{}\n{}",
        f.step,
        f.message,
        f.expected,
        f.actual,
        f.rendered,
        serde_json::to_string(f).unwrap()
    );
    assert!(shown.contains("[redacted]"), "{shown}");
    for secret in ["SECRETPASS42", "SECRETMEMO77"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}
