//! The typed decode straight from the bytes (`acs::shell`) against the full decode, on
//! generated envelopes: valid ones of every optional shape, near-valid ones (a field of the
//! wrong type or text, one missing or given twice, a name escaped, a member this version does
//! not define), and byte-level damage to both. Whenever the shell decode gives a request, the
//! full decode gives the same one, and the tree rebuilt from it for the audit entry hashes as
//! the request received does. A valid common envelope always takes the shell decode.

use proptest::prelude::*;
use warden::acs::crypto;
use warden::acs::envelope::{
    decode_request_with, metadata_tree, reattach_payload, tree_without_payload, DecodeOptions,
};
use warden::acs::jcs;
use warden::acs::shell;

/// A small deterministic generator, so one seed is one document (proptest varies the seed).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const UUID: &str = "\"8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10\"";
const SID: &str = "\"5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30\"";

/// Values a field may be given instead of its valid one: wrong types, wrong texts, escapes.
const OTHERS: &[&str] = &[
    "7",
    "-3.5",
    "1e300",
    "null",
    "true",
    "[]",
    "{}",
    "[\"r1\",\"r2\"]",
    "[1]",
    "{\"a\":[1,{\"b\":null}]}",
    "\"\"",
    "\"x\"",
    "\"0.1.0\"",
    "\"1.0.0\"",
    "\"0.2.7\"",
    "\"v0.1.0\"",
    "\"2026-09-19T10:00:00Z\"",
    "\"2026-09-19 10:00\"",
    "\"0123456789abcdef\"",
    "\"0123456789abcde\"",
    "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0\"",
    "\"\\u00e9t\\u00e9 \\\"quoted\\\" \\ud83d\\ude00\"",
    "\"\\u0030.1.0\"",
    "\"development\"",
    "\"staging\"",
    "\"production\"",
    "\"prod\"",
    "\"system/ping\"",
    "\"steps/toolCallRequest\"",
    "\"steps/unknownHook\"",
    "\"hooks/x\"",
    UUID,
    SID,
];

/// A member's name as written: mostly plain, sometimes with its first character escaped
/// (the same name once unescaped).
fn name(g: &mut Gen, key: &str) -> String {
    if g.chance(5) {
        let mut chars = key.chars();
        let first = chars.next().map(|c| c as u32).unwrap_or(0);
        format!("\"\\u{first:04x}{}\"", chars.as_str())
    } else {
        format!("\"{key}\"")
    }
}

/// An object's text from (name, value text) members: shuffled, sometimes a member dropped,
/// given twice, or a member this version does not define added.
fn object(g: &mut Gen, members: Vec<(&str, String)>) -> String {
    let mut out: Vec<String> = Vec::new();
    for (k, v) in &members {
        if g.chance(2) {
            continue;
        }
        out.push(format!("{}:{v}", name(g, k)));
        if g.chance(1) {
            out.push(format!("{}:{v}", name(g, k)));
        }
    }
    if g.chance(15) {
        let extra = g.pick(&["x-extra", "custom", "acs", "payload_", "dept"]);
        let v = g.pick(OTHERS);
        out.push(format!("\"{extra}\":{v}"));
    }
    for i in (1..out.len()).rev() {
        let j = g.below(i as u64 + 1) as usize;
        out.swap(i, j);
    }
    format!("{{{}}}", out.join(","))
}

/// The valid value most of the time, another one sometimes.
fn field(g: &mut Gen, valid: &str) -> String {
    if g.chance(3) {
        g.pick(OTHERS).to_owned()
    } else {
        valid.to_owned()
    }
}

fn optional(
    g: &mut Gen,
    members: &mut Vec<(&'static str, String)>,
    key: &'static str,
    valid: &str,
) {
    if g.chance(40) {
        let v = field(g, valid);
        members.push((key, v));
    }
}

fn metadata(g: &mut Gen) -> String {
    let mut m = vec![
        ("agent_id", field(g, "\"agent\"")),
        ("session_id", field(g, SID)),
    ];
    optional(g, &mut m, "turn_id", "\"t1\"");
    optional(g, &mut m, "parent_turn_id", "\"t0\"");
    optional(g, &mut m, "agent_name", "\"n\"");
    optional(g, &mut m, "platform", "\"p\"");
    optional(g, &mut m, "platform_version", "\"1.2\"");
    let env = g.pick(&["\"development\"", "\"staging\"", "\"production\""]);
    optional(g, &mut m, "environment", env);
    if g.chance(25) {
        let mut u = Vec::new();
        optional(g, &mut u, "user_id", "\"u\"");
        optional(g, &mut u, "authentication_method", "\"sso\"");
        optional(g, &mut u, "roles", "[\"r1\",\"r2\"]");
        let u = object(g, u);
        m.push(("user_context", field(g, &u)));
    }
    if g.chance(25) {
        let mut s = Vec::new();
        optional(g, &mut s, "chain_hash", "\"h\"");
        let s = object(g, s);
        m.push(("session_state", field(g, &s)));
    }
    object(g, m)
}

fn payload(g: &mut Gen) -> String {
    let name = g.pick(&["send_email", "search", "w\\u00e9b"]);
    let v = g.pick(OTHERS);
    format!("{{\"tool\":{{\"name\":\"{name}\"}},\"arguments\":{{\"to\":{{\"value\":{v},\"provenance\":{{\"provenance_id\":\"p1\",\"origin\":\"user_input\"}}}}}}}}")
}

fn envelope(g: &mut Gen) -> String {
    let mut p = vec![
        ("acs_version", field(g, "\"0.1.0\"")),
        ("request_id", field(g, UUID)),
        ("timestamp", field(g, "\"2026-09-19T10:00:00.5+02:00\"")),
    ];
    optional(g, &mut p, "nonce", "\"0123456789abcdef01\"");
    optional(g, &mut p, "tenant_id", "\"tenant\"");
    let m = metadata(g);
    p.push(("metadata", field(g, &m)));
    let pl = payload(g);
    p.push(("payload", field(g, &pl)));
    if g.chance(5) {
        p.push((
            "signature",
            "{\"algorithm\":\"HMAC-SHA256\",\"value\":\"dmFsdWU=\",\"key_id\":\"k\",\"x\":1}"
                .into(),
        ));
    }
    let params = object(g, p);
    let id = if g.chance(10) {
        g.pick(&["18446744073709551616", "1e300", "null", "[]"])
    } else {
        g.pick(&[
            "7",
            "\"req-1\"",
            "-3.5",
            "18446744073709551615",
            "-9223372036854775808",
        ])
    };
    let method = if g.chance(4) {
        "\"system/ping\""
    } else {
        g.pick(&[
            "\"steps/toolCallRequest\"",
            "\"steps/userMessage\"",
            "\"steps/toolCallResult\"",
        ])
    };
    let top = vec![
        ("jsonrpc", field(g, "\"2.0\"")),
        ("id", id.to_owned()),
        ("method", field(g, method)),
        ("params", field(g, &params)),
    ];
    object(g, top)
}

/// Byte-level damage, sometimes: a byte dropped, doubled or replaced, the text cut short.
fn damage(g: &mut Gen, text: String) -> Vec<u8> {
    let mut b = text.into_bytes();
    if b.is_empty() || !g.chance(20) {
        return b;
    }
    let at = g.below(b.len() as u64) as usize;
    match g.below(4) {
        0 => {
            b.remove(at);
        }
        1 => b.insert(at, b[at]),
        2 => {
            b[at] = *[b'"', b'\\', b',', b'}', b'{', b'x', 0xff]
                .get(g.below(7) as usize)
                .unwrap()
        }
        _ => b.truncate(at),
    }
    b
}

/// The one-sided promise of `acs::shell` (module docs), for one document.
fn agrees(bytes: &[u8], opts: &DecodeOptions<'_>) -> Result<bool, TestCaseError> {
    let Some(fast) = shell::decode(bytes, opts) else {
        return Ok(false);
    };
    let text = String::from_utf8_lossy(bytes);
    let (full, raw) = match decode_request_with(bytes, opts) {
        Ok(ok) => ok,
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "the shell decode accepted what the full decode refuses ({}): {text}",
                e.to_value()
            )))
        }
    };
    prop_assert_eq!(&fast, &full, "{}", text);
    // What the audit entry reads: the request hash, and the envelope's canonical form whole.
    let mut tree = tree_without_payload(&fast);
    prop_assert_eq!(
        crypto::request_hash_with_payload(&tree["params"], &fast.params.payload),
        crypto::request_hash(&raw["params"]),
        "{}",
        text
    );
    reattach_payload(&mut tree, &fast.params.payload);
    prop_assert_eq!(
        jcs::canonicalize(&tree),
        jcs::canonicalize(&raw),
        "{}",
        text
    );
    // The trees built by hand are serde's, members in serde's order.
    let by_serde = serde_json::to_value(&fast).unwrap();
    prop_assert_eq!(
        serde_json::to_string(&tree).unwrap(),
        serde_json::to_string(&by_serde).unwrap(),
        "{}",
        text
    );
    prop_assert_eq!(
        serde_json::to_string(&metadata_tree(&fast.params.metadata)).unwrap(),
        serde_json::to_string(&by_serde["params"]["metadata"]).unwrap()
    );
    Ok(true)
}

fn known(m: &str) -> bool {
    m.starts_with("steps/") && m != "steps/unknownHook"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Generated and damaged envelopes: the shell decode never accepts what the full decode
    /// refuses, and what it accepts it reads the same.
    #[test]
    fn the_shell_decode_agrees_with_the_full_decode(seed in any::<u64>()) {
        let mut g = Gen(seed);
        let text = envelope(&mut g);
        let bytes = damage(&mut g, text);
        agrees(&bytes, &DecodeOptions::default())?;
        let opts = DecodeOptions { known_method: Some(&known), ..Default::default() };
        agrees(&bytes, &opts)?;
    }
}

/// Every valid envelope of the common shape takes the shell decode (so the property above is
/// not vacuous, and the fast path is the path taken): all of its optional members, escapes in
/// its strings and names, members this version does not define.
#[test]
fn valid_common_envelopes_take_the_shell_decode() {
    let cases = [
        r#"{"jsonrpc":"2.0","id":7,"method":"steps/toolCallRequest","params":{"acs_version":"0.1.0","request_id":"8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10","timestamp":"2026-09-19T10:00:00Z","metadata":{"agent_id":"a","session_id":"5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30"},"payload":{}}}"#,
        r#" { "params" : { "payload" : {"a":[1,2,{"b":null}]}, "metadata" : {"session_id":"5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30","agent_id":"","turn_id":"t1","parent_turn_id":"t0","agent_name":"n\u00e9","platform":"p","platform_version":"1","environment":"staging","user_context":{"user_id":"u","roles":["r1","r2"],"authentication_method":"sso","dept":"x"},"session_state":{"chain_hash":"h","seen":3},"custom":true}, "x-extra":{"a":[1]}, "nonce":"0123456789abcdef0", "tenant_id":"t", "timestamp":"2026-09-19T10:00:00.5+02:00", "request_id":"8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10", "acs_version":"0.2.7" }, "method":"steps/userMessage", "id":"r\"1", "jsonrpc":"2.0" } "#,
        r#"{"jsonrpc":"2.0","id":-3.5,"method":"steps/toolCallResult","params":{"\u0061cs_version":"0.1.0","request_id":"8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10","timestamp":"2026-09-19T10:00:00Z","metadata":{"agent_id":"a","session_id":"5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30"},"payload":{"outputs":[{"value":"\ud83d\ude00 \"hi\""}]}}}"#,
    ];
    for (i, text) in cases.iter().enumerate() {
        assert!(
            agrees(text.as_bytes(), &DecodeOptions::default()).unwrap(),
            "case {i} did not take the shell decode"
        );
    }
}

/// What the shell decode leaves to the full decode, though the envelope is valid: a
/// `system/ping` (read leniently there) and a signature block (whose members this version
/// does not define only the tree keeps).
#[test]
fn pings_and_signed_envelopes_take_the_full_decode() {
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"system/ping","params":{"acs_version":"0.1.0","request_id":"8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10","timestamp":"2026-09-19T10:00:00Z","metadata":{"agent_id":"a","session_id":"5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30"},"payload":{}}}"#;
    let signed = r#"{"jsonrpc":"2.0","id":1,"method":"steps/toolCallRequest","params":{"acs_version":"0.1.0","request_id":"8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10","timestamp":"2026-09-19T10:00:00Z","metadata":{"agent_id":"a","session_id":"5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30"},"payload":{},"signature":{"algorithm":"HMAC-SHA256","value":"dmFsdWU=","key_id":"k","x":1}}}"#;
    for text in [ping, signed] {
        let opts = DecodeOptions::default();
        assert!(shell::decode(text.as_bytes(), &opts).is_none(), "{text}");
        assert!(
            decode_request_with(text.as_bytes(), &opts).is_ok(),
            "{text}"
        );
    }
}

/// The generator reaches every side of the promise: envelopes both decodes accept, valid ones
/// left to the full decode, and ones both refuse (so the property runs on all three).
#[test]
fn the_generated_envelopes_reach_every_side() {
    let opts = DecodeOptions::default();
    let (mut both, mut full_only, mut neither) = (0, 0, 0);
    for seed in 0..4000 {
        let mut g = Gen(seed);
        let text = envelope(&mut g);
        let bytes = damage(&mut g, text);
        let full = decode_request_with(&bytes, &opts).is_ok();
        match (agrees(&bytes, &opts).unwrap(), full) {
            (true, _) => both += 1,
            (false, true) => full_only += 1,
            (false, false) => neither += 1,
        }
    }
    assert!(
        both > 1000 && full_only > 80 && neither > 1000,
        "{both} {full_only} {neither}"
    );
}

mod guardian {
    //! The shell decode inside the Guardian: a Guardian without a journal takes it, one with a
    //! journal takes the full decode, and both answer every envelope the same.

    use serde_json::{json, Value};
    use std::sync::Arc;
    use warden::acs::{envelope, ids};
    use warden::guardian::{Guardian, MemoryJournal, Options, Policy};

    const SESSION: &str = "5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30";
    const POLICY: &str = "rule prod on toolCallRequest when tool.name == \"deploy\" and metadata.environment == production\n  => deny \"production\"\n\ndefault allow\n";

    fn policy() -> Policy {
        Policy::from_source("p.ward", POLICY).unwrap()
    }

    fn call(n: u64, metadata: Value) -> Vec<u8> {
        envelope::request(
            n,
            "steps/toolCallRequest",
            &ids::counter(9, n),
            "2026-09-19T10:00:00Z",
            metadata,
            json!({"tool": {"name": "deploy"}, "arguments": {}}),
        )
        .to_string()
        .into_bytes()
    }

    fn decision(g: &Guardian, bytes: &[u8]) -> String {
        let out: Value = serde_json::from_slice(&g.handle(bytes)).unwrap();
        out["result"]["decision"]
            .as_str()
            .unwrap_or("error")
            .to_owned()
    }

    /// A session's steps share one metadata tree while their metadata is the same; a step
    /// whose metadata differs from the last one's is decided on its own.
    #[test]
    fn each_step_is_decided_on_its_own_metadata() {
        let g = Guardian::new(policy());
        let meta = |env: Option<&str>, turn: &str| {
            let mut m = json!({"agent_id": "a", "session_id": SESSION, "turn_id": turn});
            if let Some(e) = env {
                m["environment"] = json!(e);
            }
            m
        };
        let steps = [
            (meta(Some("staging"), "t1"), "allow"),
            (meta(Some("staging"), "t1"), "allow"),
            (meta(Some("production"), "t1"), "deny"),
            (meta(Some("production"), "t1"), "deny"),
            (meta(Some("staging"), "t1"), "allow"),
            (meta(None, "t2"), "allow"),
            (meta(Some("production"), "t2"), "deny"),
        ];
        for (n, (m, want)) in steps.into_iter().enumerate() {
            assert_eq!(
                decision(&g, &call(n as u64 + 1, m.clone())),
                want,
                "step {n}: {m}"
            );
        }
    }

    /// The same envelopes, valid and not, to a Guardian that reads them through the shell
    /// decode and to one (with a journal) that reads them through the full decode: the same
    /// answers.
    #[test]
    fn the_shell_path_answers_as_the_full_path() {
        let fast = Guardian::new(policy());
        let full = Guardian::with_journal(
            policy(),
            Options::default(),
            Arc::new(MemoryJournal::default()),
        );
        for seed in 0..600u64 {
            let mut g = super::Gen(seed);
            let text = super::envelope(&mut g);
            let bytes = super::damage(&mut g, text);
            let (a, b) = (fast.handle(&bytes), full.handle(&bytes));
            let (a, b): (Value, Value) = (
                serde_json::from_slice(&a).unwrap(),
                serde_json::from_slice(&b).unwrap(),
            );
            assert_eq!(
                strip_times(a),
                strip_times(b),
                "{}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }

    /// A ping's answer carries the Guardian's clock: it is not the decode's to agree on.
    fn strip_times(mut v: Value) -> Value {
        if let Some(p) = v.pointer_mut("/result/payload") {
            if let Some(m) = p.as_object_mut() {
                m.remove("server_timestamp");
            }
        }
        v
    }
}
