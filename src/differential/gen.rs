//! Random policies (as source text) and random event streams for the differential test.
//!
//! It owns a grammar subset that always type-checks: three labels over `origin`, `source`
//! and `derived_from`; rules on toolCallRequest, toolCallResult, userMessage, turnEnd and
//! postCompact whose conditions combine `==`, `!=`, `<`, `>`, `in`, `not in`, `has`,
//! `and`/`or`/`not`, `any`/`all` over arguments, payload lists and constant lists, the builtins
//! `len`, `lower`, `upper`, `starts_with`, `ends_with`, `contains`, `present`, `derived_from`,
//! `lineage_depth`, `turns_since`, `effect_class`, `requested`, `delegated`, `read_at`, and
//! `count`/`exists` with every window, `by` keys and `$` keys; decisions of every kind; a
//! default or none. Events: sessionStart (with or without an Intent's `raw` request),
//! turnStart/turnEnd, userMessage (texts the request lexicon reads and texts it does not),
//! toolCallRequest (arguments of every JSON kind, or absent), toolCallResult (answering an
//! earlier or a never-made call, or none) and postCompact,
//! with provenance whose `derived_from` points at ids seen before, not yet, or never, or with
//! no id or no provenance at all where the hook's own origin applies.
//!
//! It knows which constructs the VM does not implement yet: the `PENDING_*` switches (semantics
//! docs/language.md states that the VM did not follow yet) and `BUG_*` switches (VM bugs this test found) keep them out of
//! what is generated. Flip a switch when its fix lands. It knows nothing of the evaluators.

use crate::acs::fields::ORIGINS;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// Switches: constructs the VM does not implement (yet). `true` keeps them out.

/// docs/language.md: a present value of the wrong type is a type error that fails the decision (the VM
/// reads it as undefined). While set, each tool argument keeps one JSON kind (`to` a string,
/// `amount` a number, …) and outputs and message parts are strings, so no condition can meet a
/// wrongly typed value; the test also stops comparing a stream at the first type error.
pub const PENDING_TYPE_ERRORS: bool = false;
/// docs/language.md: a quantifier over an absent collection is undefined (the VM ranges over nothing:
/// `any` false, `all` true). While set, quantifiers over collections that may be absent
/// (`args.tags.value`) are guarded: `(present(args.tags) and (any …))`.
pub const PENDING_QUANTIFIER_ABSENT: bool = false;
/// docs/language.md: JSON `null` is absent (the VM compares it as a value). While set, no nulls.
pub const PENDING_NULL_IS_ABSENT: bool = false;
/// docs/language.md: `args["name"]` is the tool argument, like `args.name` (the VM compares the
/// `{value, provenance}` wrapper). While set, no bracket access to arguments.
pub const PENDING_BRACKET_INDEX: bool = false;
/// docs/language.md: `matches` is an unanchored regular-expression search (the VM matches a glob).
/// While set, no `matches`.
pub const PENDING_REGEX_MATCHES: bool = false;
/// The reference does not model lineage inference (`state/infer.rs`): a carrier with no
/// provenance, or `agent_generated` content with no `derived_from`, has its sources inferred
/// from the session's content by the VM. While set, every carrier has a provenance and
/// `agent_generated` content always names a parent.
pub const PENDING_INFERENCE: bool = false;

/// An optional provenance (always present, while inference is not modelled).
fn maybe_provenance(p: f64) -> BoxedStrategy<Option<Value>> {
    if PENDING_INFERENCE {
        provenance(ORIGINS.to_vec()).prop_map(Some).boxed()
    } else {
        prop::option::weighted(p, provenance(ORIGINS.to_vec())).boxed()
    }
}

/// The provenance of an item whose hook has an origin of its own (a user message's content, a
/// tool's outputs): often none at all, or a record without an id — the hook's origin and an
/// id from the request fill in (docs/language.md §4), no inference needed.
fn item_provenance(p: f64) -> BoxedStrategy<Option<Value>> {
    prop::option::weighted(p, provenance(ORIGINS.to_vec())).boxed()
}

/// A tool argument's provenance. A claim that the user wrote an argument is checked against
/// what the user said by lineage inference, which the reference does not model: while
/// `PENDING_INFERENCE`, arguments never claim `user_input`.
fn argument_provenance(p: f64) -> BoxedStrategy<Option<Value>> {
    if PENDING_INFERENCE {
        provenance(argument_origins()).prop_map(Some).boxed()
    } else {
        prop::option::weighted(p, provenance(ORIGINS.to_vec())).boxed()
    }
}

/// Every origin but `user_input`.
fn argument_origins() -> Vec<&'static str> {
    ORIGINS
        .iter()
        .copied()
        .filter(|o| *o != "user_input")
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Pools

const TOOLS: &[&str] = &["send", "read", "exec"];
const STRS: &[&str] = &["alice", "bob", "Bob", "1", "web:x", ""];
const NUMS: &[f64] = &[0.0, 5.0, 100.0, 1000.0];
const TAGS: &[&str] = &["a", "b", "ab"];
const SOURCES: &[&str] = &["web:a", "webmail", "vault", "fs"];
const LABELS: &[&str] = &["l0", "l1", "l2"];
const CODES: &[&str] = &["c0", "c1", "c2", "c3"];
/// Provenance ids; `ghost*` are named in `derived_from` but never sent.
const PROV_IDS: &[&str] = &["p0", "p1", "p2", "p3", "p4", "p5"];
const PARENT_IDS: &[&str] = &["p0", "p1", "p2", "p3", "p4", "p5", "ghost0", "ghost1"];
const TURN_IDS: &[&str] = &["t0", "t1", "t2", "t3"];
/// Time windows whose resolution (1/16 of the window) divides every event time (multiples of
/// 4 s): the VM's counters are exact there (`state::slots` buckets a time window in 16ths).
const TIME_WINDOWS: &[&str] = &["last 16s", "last 32s", "last 64s"];
const TIME_STEPS_S: &[u64] = &[0, 4, 8, 20, 40, 100];

/// The hooks rules are written on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Request,
    Result,
    Message,
    TurnEnd,
    Compact,
}

impl Hook {
    fn name(self) -> &'static str {
        match self {
            Hook::Request => "toolCallRequest",
            Hook::Result => "toolCallResult",
            Hook::Message => "userMessage",
            Hook::TurnEnd => "turnEnd",
            Hook::Compact => "postCompact",
        }
    }

    fn has_tool(self) -> bool {
        matches!(self, Hook::Request | Hook::Result)
    }
}

fn s(x: &str) -> String {
    format!("{x:?}")
}

fn num(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

fn label() -> impl Strategy<Value = &'static str> {
    select(LABELS)
}

fn small() -> impl Strategy<Value = u32> {
    0u32..4
}

fn cmp() -> impl Strategy<Value = &'static str> {
    select(&["==", "!=", "<", ">", "<=", ">="][..])
}

fn paren(x: String) -> String {
    format!("({x})")
}

// ---------------------------------------------------------------------------------------------
// Policies

/// A label condition over one Provenance record.
fn label_cond() -> BoxedStrategy<String> {
    let atom = prop_oneof![
        select(ORIGINS).prop_map(|o| format!("origin == {o}")),
        select(ORIGINS).prop_map(|o| format!("origin != {o}")),
        (select(ORIGINS), select(ORIGINS)).prop_map(|(a, b)| format!("origin in {{{a}, {b}}}")),
        select(SOURCES).prop_map(|x| format!("source == {}", s(x))),
        Just("starts_with(source, \"web\")".to_string()),
        Just("source_id in {\"vault\", \"fs\"}".to_string()),
        Just("len(derived_from) > 0".to_string()),
    ]
    .boxed();
    prop_oneof![
        3 => atom.clone(),
        1 => (atom.clone(), atom.clone()).prop_map(|(a, b)| format!("{a} and {b}")),
        1 => (atom.clone(), atom.clone()).prop_map(|(a, b)| format!("{a} or {b}")),
        1 => atom.prop_map(|a| format!("not ({a})")),
    ]
    .boxed()
}

fn tool_atom() -> BoxedStrategy<String> {
    prop_oneof![
        select(TOOLS).prop_map(|t| format!("tool.name == {}", s(t))),
        select(TOOLS).prop_map(|t| format!("tool.name != {}", s(t))),
        (select(TOOLS), select(TOOLS)).prop_map(|(a, b)| format!(
            "tool.name in {{{}, {}}}",
            s(a),
            s(b)
        )),
        select(TOOLS).prop_map(|t| format!("tool.name not in [{}]", s(t))),
        Just("tool.name in k_tools".to_string()),
        Just("starts_with(tool.name, \"se\")".to_string()),
    ]
    .boxed()
}

/// A quantifier over a collection that may be absent, guarded while the VM ranges over
/// nothing there.
fn guarded(present: &str, q: String) -> String {
    if PENDING_QUANTIFIER_ABSENT {
        format!("(present({present}) and ({q}))")
    } else {
        q
    }
}

fn request_atom() -> BoxedStrategy<String> {
    let to = prop_oneof![
        select(STRS).prop_map(|x| format!("args.to == {}", s(x))),
        select(STRS).prop_map(|x| format!("args.to != {}", s(x))),
        (select(STRS), select(STRS)).prop_map(|(a, b)| format!(
            "args.to in {{{}, {}}}",
            s(a),
            s(b)
        )),
        select(STRS).prop_map(|x| format!("args.to not in [{}]", s(x))),
        Just("starts_with(args.to, \"b\")".to_string()),
        Just("ends_with(args.to, \"b\")".to_string()),
        Just("lower(args.to) == \"bob\"".to_string()),
        Just("upper(args.to) == \"BOB\"".to_string()),
        small().prop_map(|n| format!("len(args.to) > {n}")),
        Just("contains(args.to, \"o\")".to_string()),
    ];
    let amount = prop_oneof![
        (cmp(), select(NUMS)).prop_map(|(c, n)| format!("args.amount {c} {}", num(n))),
        (select(NUMS), select(NUMS)).prop_map(|(a, b)| format!(
            "args.amount in [{}, {}]",
            num(a),
            num(b)
        )),
        select(NUMS).prop_map(|n| format!("args.amount + 1 > {}", num(n))),
        Just("args.amount > k_limit".to_string()),
        select(NUMS).prop_map(|n| format!(
            "(any n in [1, 100]: n < args.amount) and args.amount != {}",
            num(n)
        )),
    ];
    let tags = prop_oneof![
        select(TAGS).prop_map(|t| format!("{} in args.tags.value", s(t))),
        small().prop_map(|n| format!("len(args.tags) > {n}")),
        select(TAGS).prop_map(|t| guarded(
            "args.tags",
            format!("any t in args.tags.value: t == {}", s(t))
        )),
        Just(guarded(
            "args.tags",
            "all t in args.tags.value: starts_with(t, \"a\")".into()
        )),
        select(TAGS).prop_map(|t| format!("contains(args.tags.value, {})", s(t))),
        // The elements of a list argument, each an argument of its own.
        select(TAGS)
            .prop_map(|t| guarded("args.tags", format!("any t in args.tags: t == {}", s(t)))),
        (small(), select(TAGS)).prop_map(|(n, t)| guarded(
            "args.tags",
            format!("any i, t in args.tags.value: i == {n} and t == {}", s(t))
        )),
    ];
    let other = prop_oneof![
        select(STRS).prop_map(|x| format!("args.meta.value.k == {}", s(x))),
        Just("args.flag == true".to_string()),
        Just("not args.flag".to_string()),
        select(&["to", "amount", "tags", "meta", "flag", "x"][..])
            .prop_map(|a| format!("present(args.{a})")),
        select(&["to", "amount", "tags", "meta", "flag", "x"][..])
            .prop_map(|a| format!("not present(args.{a})")),
        (select(&["to", "amount", "x"][..]), label())
            .prop_map(|(a, l)| format!("args.{a} has {l}")),
        label().prop_map(|l| format!("any a in args: a has {l}")),
        label().prop_map(|l| format!("all a in args: a has {l}")),
        (select(&["to", "amount", "x"][..]), label())
            .prop_map(|(a, l)| format!("any k, a in args: (k == \"{a}\" and a has {l})")),
        select(ORIGINS).prop_map(|o| format!("derived_from(args.to, {o})")),
        small().prop_map(|n| format!("lineage_depth(args.to) > {n}")),
        // Direct sources: by origin and by label, some and every one.
        (select(&["to", "x"][..]), select(ORIGINS))
            .prop_map(|(a, o)| format!("taken_from(args.{a}, {o})")),
        (select(&["to", "x"][..]), select(ORIGINS))
            .prop_map(|(a, o)| format!("taken_only_from(args.{a}, {o})")),
        (select(&["to", "x"][..]), label()).prop_map(|(a, l)| format!("taken_from(args.{a}, {l})")),
        (select(&["to", "x"][..]), label())
            .prop_map(|(a, l)| format!("taken_only_from(args.{a}, {l})")),
        select(ORIGINS).prop_map(|o| format!("\"{o}\" in sources(args.to)")),
        // Lineage inference (state/infer.rs; the reference's own model in reference/infer.rs).
        (select(&["to", "x"][..]), select(ORIGINS))
            .prop_map(|(a, o)| format!("found_in(args.{a}, {o})")),
        select(&["to", "x"][..]).prop_map(|a| format!("lineage_inferred(args.{a})")),
        // Places (`read_at`): the `to` of the call a result answers.
        (select(&["to", "x"][..]), select(STRS))
            .prop_map(|(a, p)| format!("\"{}\" in read_at(args.{a})", p.to_lowercase())),
        (select(&["to", "x"][..]), small())
            .prop_map(|(a, n)| format!("len(read_at(args.{a})) > {n}")),
        select(&["to", "x"][..])
            .prop_map(|a| format!("all p in read_at(args.{a}): p == lower(args.to)")),
        // What the call does and whether the user's words asked for it (src/actions.rs).
        select(&["read", "communicate", "execute", "money"][..])
            .prop_map(|c| format!("effect_class() == {c}")),
        select(&["communicate", "execute", "money", "delete"][..])
            .prop_map(|c| format!("requested(\"{c}\")")),
        Just("not requested(effect_class())".to_string()),
        Just("delegated()".to_string()),
        Just("requested_object()".to_string()),
    ];
    let mut atoms = vec![
        (3, tool_atom()),
        (3, to.boxed()),
        (2, amount.boxed()),
        (2, tags.boxed()),
        (3, other.boxed()),
        (2, turns_since()),
        (4, history(Hook::Request)),
        (
            1,
            small().prop_map(|n| format!("len(k_tools) == {n}")).boxed(),
        ),
    ];
    if !BUG_BARE_ARGUMENT_CONDITION {
        atoms.push((1, Just("args.flag".to_string()).boxed()));
        atoms.push((1, Just("any n in [1]: args.flag".to_string()).boxed()));
    }
    if !PENDING_BRACKET_INDEX {
        atoms.push((
            1,
            select(STRS)
                .prop_map(|x| format!("args[\"to\"] == {}", s(x)))
                .boxed(),
        ));
    }
    if !PENDING_REGEX_MATCHES {
        atoms.push((
            1,
            select(&["^b", "b$", "o.", "^b.*b$", "x*", "^$"][..])
                .prop_map(|p| format!("args.to matches {}", s(p)))
                .boxed(),
        ));
    }
    proptest::strategy::Union::new_weighted(atoms).boxed()
}

fn result_atom() -> BoxedStrategy<String> {
    let status = select(&["success", "failure", "timeout", "blocked"][..]);
    prop_oneof![
        3 => tool_atom(),
        1 => status.clone().prop_map(|e| format!("exit_status == {e}")),
        1 => (status.clone(), status).prop_map(|(a, b)| format!("exit_status in {{{a}, {b}}}")),
        2 => label().prop_map(|l| format!("any o in outputs: o has {l}")),
        1 => label().prop_map(|l| format!("outputs[0] has {l}")),
        1 => label().prop_map(|l| format!("outputs has {l}")),
        1 => select(STRS).prop_map(|x| format!("outputs[0].value == {}", s(x))),
        1 => select(STRS).prop_map(|x| format!("any o in outputs: o.value == {}", s(x))),
        1 => Just("all o in outputs: o.provenance.origin == tool_output".to_string()),
        1 => small().prop_map(|n| format!("len(outputs) > {n}")),
        1 => select(NUMS).prop_map(|n| format!("duration_ms > {}", num(n))),
        1 => select(ORIGINS).prop_map(|o| format!("derived_from(outputs[0], {o})")),
        2 => turns_since(),
        4 => history(Hook::Result),
    ]
    .boxed()
}

fn message_atom() -> BoxedStrategy<String> {
    prop_oneof![
        2 => label().prop_map(|l| format!("any p in content: p has {l}")),
        1 => label().prop_map(|l| format!("content[0] has {l}")),
        1 => Just("all p in content: p.type == text".to_string()),
        1 => select(STRS).prop_map(|x| format!("content[0].value == {}", s(x))),
        1 => Just("contains(content[0].value, \"o\")".to_string()),
        1 => small().prop_map(|n| format!("len(content) > {n}")),
        2 => turns_since(),
        4 => history(Hook::Message),
    ]
    .boxed()
}

fn turn_end_atom() -> BoxedStrategy<String> {
    prop_oneof![
        1 => Just("outcome == completed".to_string()),
        1 => Just("outcome != error".to_string()),
        2 => turns_since(),
        3 => history(Hook::TurnEnd),
    ]
    .boxed()
}

fn compact_atom() -> BoxedStrategy<String> {
    prop_oneof![
        2 => label().prop_map(|l| format!("summary has {l}")),
        1 => small().prop_map(|n| format!("lineage_depth(summary) > {n}")),
        1 => select(ORIGINS).prop_map(|o| format!("derived_from(summary, {o})")),
        1 => small().prop_map(|n| format!("len(entries_compacted) > {n}")),
        1 => turns_since(),
        2 => history(Hook::Compact),
    ]
    .boxed()
}

fn turns_since() -> BoxedStrategy<String> {
    (label(), cmp(), small())
        .prop_map(|(l, c, n)| format!("turns_since({l}) {c} {n}"))
        .boxed()
}

/// A filter conjunct that cannot fail on any event the generator writes.
fn filter_atom(past: Hook) -> BoxedStrategy<String> {
    let tool = prop_oneof![
        select(TOOLS).prop_map(|t| format!("tool.name == {}", s(t))),
        select(TOOLS).prop_map(|t| format!("tool.name != {}", s(t))),
        (select(TOOLS), select(TOOLS)).prop_map(|(a, b)| format!(
            "tool.name in {{{}, {}}}",
            s(a),
            s(b)
        )),
    ];
    match past {
        Hook::Request => prop_oneof![
            tool,
            label().prop_map(|l| format!("args.to has {l}")),
            Just("present(args.to)".to_string()),
            Just("not present(args.flag)".to_string()),
            label().prop_map(|l| format!("any a in args: a has {l}")),
        ]
        .boxed(),
        Hook::Result => prop_oneof![
            tool,
            Just("exit_status == failure".to_string()),
            Just("exit_status in {success, timeout}".to_string()),
            label().prop_map(|l| format!("any o in outputs: o has {l}")),
        ]
        .boxed(),
        Hook::Message => prop_oneof![
            label().prop_map(|l| format!("any p in content: p has {l}")),
            Just("content[0].type == text".to_string()),
        ]
        .boxed(),
        Hook::TurnEnd => Just("outcome == completed".to_string()).boxed(),
        Hook::Compact => label().prop_map(|l| format!("summary has {l}")).boxed(),
    }
}

/// `count(…)` / `exists(…)` of a past hook, seen from a rule on `current`.
fn history(current: Hook) -> BoxedStrategy<String> {
    select(&[Hook::Request, Hook::Result, Hook::Message, Hook::TurnEnd][..])
        .prop_flat_map(move |past| {
            let filter = prop_oneof![
                2 => Just(None),
                2 => filter_atom(past).prop_map(|a| Some(paren(a))),
                1 => (filter_atom(past), filter_atom(past)).prop_map(|(a, b)| Some(format!("(({a}) or ({b}))"))),
                1 => (filter_atom(past), filter_atom(past)).prop_map(|(a, b)| Some(format!("({a}) and ({b})"))),
            ];
            let key = if past.has_tool() && current.has_tool() {
                prop_oneof![
                    3 => Just(None),
                    1 => Just(Some("tool.name == $.tool.name".to_string())),
                    1 => Just(Some("$.tool.name == tool.name".to_string())),
                ]
                .boxed()
            } else {
                Just(None).boxed()
            };
            let mut bys = vec![None];
            if past.has_tool() && current.has_tool() {
                bys.push(Some("tool.name"));
            }
            if past == Hook::Request && current == Hook::Request {
                bys.push(Some("args.to"));
                if !BUG_KEY_KINDS_COLLIDE {
                    bys.push(Some("args.x"));
                }
            }
            let window = select(&[
                None,
                Some("session"),
                Some("this turn"),
                Some("last 1 turn"),
                Some("last 2 turns"),
                Some("last 3 turns"),
                Some("TIME0"),
                Some("TIME1"),
                Some("TIME2"),
            ][..]);
            let kind = prop_oneof![
                (cmp(), small()).prop_map(|(c, n)| format!("count(#) {c} {n}")),
                Just("exists(#)".to_string()),
                Just("not exists(#)".to_string()),
            ];
            (Just(past), filter, key, any::<bool>(), select(bys), window, kind)
        })
        .prop_map(|(past, filter, key, key_first, by, window, kind)| {
            // Several key parts, one of which may be undefined on the current event.
            let by = if BUG_UNDEFINED_KEY_PART && key.is_some() {
                None
            } else {
                by
            };
            let mut inner = past.name().to_string();
            let parts: Vec<String> = match (filter, key) {
                (Some(f), Some(k)) if key_first => vec![k, f],
                (f, k) => f.into_iter().chain(k).collect(),
            };
            if !parts.is_empty() {
                inner.push_str(" when ");
                inner.push_str(&parts.join(" and "));
            }
            if let Some(w) = window {
                let w = match w {
                    "TIME0" => TIME_WINDOWS[0],
                    "TIME1" => TIME_WINDOWS[1],
                    "TIME2" => TIME_WINDOWS[2],
                    other => other,
                };
                inner.push_str(", ");
                inner.push_str(w);
            }
            if let Some(b) = by {
                inner.push_str(", by ");
                inner.push_str(b);
            }
            paren(kind.replace('#', &inner))
        })
        .boxed()
}

/// A condition: atoms joined with `and`, `or`, `not`, each parenthesised.
fn cond(hook: Hook) -> BoxedStrategy<String> {
    let atom = match hook {
        Hook::Request => request_atom(),
        Hook::Result => result_atom(),
        Hook::Message => message_atom(),
        Hook::TurnEnd => turn_end_atom(),
        Hook::Compact => compact_atom(),
    }
    .prop_map(paren);
    atom.prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| paren(format!("{a} and {b}"))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| paren(format!("{a} or {b}"))),
            inner.prop_map(|a| format!("not {a}")),
        ]
    })
    .boxed()
}

fn decision(hook: Hook) -> BoxedStrategy<String> {
    let code = || select(CODES).prop_map(s);
    match hook {
        Hook::Request => prop_oneof![
            2 => Just("allow".to_string()),
            1 => code().prop_map(|c| format!("allow {c}")),
            3 => code().prop_map(|c| format!("deny {c}: \"no\"")),
            1 => code().prop_map(|c| format!("ask {c} approver human \"h\"")),
            1 => code().prop_map(|c| format!("defer {c} timeout 1m else deny")),
            1 => code().prop_map(|c| format!("modify {c} redact args.to")),
            1 => code().prop_map(|c| format!("modify {c} redact args.to with \"[X]\"")),
            1 => (code(), select(NUMS)).prop_map(|(c, n)| format!("modify {c} set args.amount = {}", num(n))),
            1 => code().prop_map(|c| format!("modify {c} set args.to = \"bob\"")),
            1 => code().prop_map(|c| format!("modify {c} redact each k, a in args when k == \"to\" or a == \"bob\" with \"[\" + \"X]\"")),
            1 => code().prop_map(|c| format!("modify {c} redact each a in args")),
            1 => code().prop_map(|c| format!("modify {c} redact each x in args.to when x != \"bob\"")),
        ]
        .boxed(),
        Hook::Result => prop_oneof![
            2 => Just("allow".to_string()),
            3 => code().prop_map(|c| format!("deny {c}")),
            1 => code().prop_map(|c| format!("modify {c} redact outputs[0].value")),
            1 => code().prop_map(|c| format!("modify {c} redact outputs[0].value with \"[X]\"")),
            1 => code().prop_map(|c| format!("modify {c} redact each o in outputs when o.value == \"a\"")),
        ]
        .boxed(),
        Hook::Message => prop_oneof![
            2 => Just("allow".to_string()),
            3 => code().prop_map(|c| format!("deny {c}")),
            1 => code().prop_map(|c| format!("modify {c} redact content[0].value")),
            1 => code().prop_map(|c| format!("modify {c} replace with \"hidden\"")),
        ]
        .boxed(),
        Hook::TurnEnd => prop_oneof![
            Just("allow".to_string()),
            code().prop_map(|c| format!("allow {c}")),
        ]
        .boxed(),
        Hook::Compact => prop_oneof![
            Just("allow".to_string()),
            code().prop_map(|c| format!("modify {c} replace with \"gone\"")),
            code().prop_map(|c| format!("modify {c} redact summary.value")),
        ]
        .boxed(),
    }
}

fn rule() -> BoxedStrategy<(Hook, Option<String>, String)> {
    prop_oneof![
        6 => Just(Hook::Request),
        3 => Just(Hook::Result),
        3 => Just(Hook::Message),
        1 => Just(Hook::TurnEnd),
        1 => Just(Hook::Compact),
    ]
    .prop_flat_map(|h| (Just(h), prop::option::weighted(0.9, cond(h)), decision(h)))
    .boxed()
}

fn defaults() -> BoxedStrategy<String> {
    let catch_all = prop_oneof![
        Just(""),
        Just("default allow\n"),
        Just("default allow \"d0\"\n"),
        Just("default deny \"d1\"\n"),
    ];
    let specific = prop_oneof![
        3 => Just(""),
        1 => Just("default on toolCallRequest ask \"d2\" approver human \"h\"\n"),
        1 => Just("default on toolCallRequest, userMessage deny \"d3\"\n"),
        1 => Just("default on toolCallResult allow\n"),
    ];
    (catch_all, specific)
        .prop_map(|(a, b)| format!("{a}{b}"))
        .boxed()
}

/// A policy's source text.
pub fn policy() -> BoxedStrategy<String> {
    let labels = prop::collection::vec(prop::option::weighted(0.9, label_cond()), 3);
    let tools = prop::collection::vec(select(TOOLS), 1..4);
    let rules = prop::collection::vec(rule(), 1..6);
    (labels, tools, select(NUMS), rules, defaults())
        .prop_map(|(labels, tools, limit, rules, defaults)| {
            let mut out = String::new();
            for (i, l) in labels.iter().enumerate() {
                match l {
                    Some(c) => out.push_str(&format!("label l{i} when {c}\n")),
                    None => out.push_str(&format!("label l{i}\n")),
                }
            }
            // A set written with repeats, when the generator picks one twice.
            let mut tools: Vec<String> = tools.iter().map(|t| s(t)).collect();
            if BUG_SET_REPEATS {
                let mut seen = Vec::new();
                tools.retain(|t| {
                    let fresh = !seen.contains(t);
                    seen.push(t.clone());
                    fresh
                });
            }
            out.push_str(&format!("let k_tools = {{{}}}\n", tools.join(", ")));
            out.push_str(&format!("let k_limit = {}\n", num(limit)));
            for (i, (hook, when, decision)) in rules.iter().enumerate() {
                out.push_str(&format!("rule r{i} on {}", hook.name()));
                if let Some(w) = when {
                    out.push_str(&format!(" when {w}"));
                }
                out.push_str(&format!(" => {decision}\n"));
            }
            out.push_str(&defaults);
            out
        })
        .boxed()
}

// ---------------------------------------------------------------------------------------------
// Events

/// One generated event; the request id and the time are assigned by position.
#[derive(Debug, Clone)]
pub struct GenEvent {
    pub method: &'static str,
    pub payload: Value,
    pub metadata: Value,
    /// Seconds since the previous event.
    pub step_s: u64,
    /// For postCompact: the events (by position, wrapping; past the end: never sent) whose
    /// request ids go into `entries_compacted`; for toolCallResult, the call it answers (its
    /// `request_id_ref`), if any.
    pub compacted: Vec<usize>,
}

fn provenance(origins: Vec<&'static str>) -> BoxedStrategy<Value> {
    (
        // Sometimes no id: Warden assigns one from the request and the item's place.
        prop::option::weighted(0.85, select(PROV_IDS)),
        select(origins),
        prop::option::weighted(0.5, select(SOURCES)),
        prop::option::weighted(0.5, prop::collection::vec(select(PARENT_IDS), 0..3)),
    )
        .prop_map(|(id, origin, source, parents)| {
            let mut p = json!({"origin": origin});
            if let Some(id) = id {
                p["provenance_id"] = json!(id);
            }
            if let Some(src) = source {
                p["source_id"] = json!(src);
            }
            match parents {
                Some(parents) if !parents.is_empty() => p["derived_from"] = json!(parents),
                _ if PENDING_INFERENCE && origin == "agent_generated" => {
                    p["derived_from"] = json!([PARENT_IDS[0]])
                }
                Some(parents) => p["derived_from"] = json!(parents),
                None => {}
            }
            p
        })
        .boxed()
}

/// A value of another kind than expected, or null, once type errors are implemented.
fn stray() -> BoxedStrategy<Value> {
    let mut values = vec![
        json!("bob"),
        json!(5),
        json!(true),
        json!(["a"]),
        json!({"k": "bob"}),
    ];
    if !PENDING_NULL_IS_ABSENT {
        values.push(Value::Null);
    }
    select(values).boxed()
}

/// A value of the expected kind, or (rarely, once the VM has type errors) of another.
fn kinded(expected: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    if PENDING_TYPE_ERRORS && PENDING_NULL_IS_ABSENT {
        expected
    } else {
        prop_oneof![6 => expected, 1 => stray()].boxed()
    }
}

fn argument(value: BoxedStrategy<Value>) -> BoxedStrategy<Option<Value>> {
    prop::option::weighted(
        0.75,
        (value, argument_provenance(0.7)).prop_map(|(v, p)| match p {
            Some(p) => json!({"value": v, "provenance": p}),
            None => json!({"value": v}),
        }),
    )
    .boxed()
}

fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        select(NUMS).prop_map(|n| json!(n as i64)),
        Just(json!(1000.5)),
        Just(json!(1.0)),
    ]
    .boxed()
}

fn request_payload() -> BoxedStrategy<Value> {
    let to = kinded(select(STRS).prop_map(|x| json!(x)).boxed());
    let amount = kinded(number());
    let tags = kinded(
        prop::collection::vec(select(TAGS), 0..3)
            .prop_map(|t| json!(t))
            .boxed(),
    );
    let meta = kinded(select(STRS).prop_map(|x| json!({"k": x})).boxed());
    let flag = kinded(any::<bool>().prop_map(|b| json!(b)).boxed());
    // `x` is only ever tested in ways no kind can fail: present, has, and as a `by` key.
    let x = select(vec![
        json!("1"),
        json!(1),
        json!(true),
        json!("true"),
        json!("a"),
    ])
    .boxed();
    (
        select(TOOLS),
        argument(to),
        argument(amount),
        argument(tags),
        argument(meta),
        argument(flag),
        argument(x),
    )
        .prop_map(|(tool, to, amount, tags, meta, flag, x)| {
            let mut args = serde_json::Map::new();
            for (name, a) in [
                ("to", to),
                ("amount", amount),
                ("tags", tags),
                ("meta", meta),
                ("flag", flag),
                ("x", x),
            ] {
                if let Some(a) = a {
                    args.insert(name.into(), a);
                }
            }
            json!({"tool": {"name": tool}, "arguments": args})
        })
        .boxed()
}

fn text() -> BoxedStrategy<Value> {
    kinded(select(STRS).prop_map(|x| json!(x)).boxed())
}

/// What a user might say: words the request lexicon reads (src/actions.rs) and words it does not.
const SAYINGS: &[&str] = &[
    "please send it to bob",
    "run the nightly job",
    "do all the tasks on my list",
    "pay bob 5",
    "what is on my calendar",
    "cancel it",
];

fn item(kind: BoxedStrategy<Option<&'static str>>) -> BoxedStrategy<Value> {
    item_with(kind, text())
}

fn item_with(
    kind: BoxedStrategy<Option<&'static str>>,
    text: BoxedStrategy<Value>,
) -> BoxedStrategy<Value> {
    (kind, text, item_provenance(0.8))
        .prop_map(|(kind, v, p)| {
            let mut o = json!({"value": v});
            if let Some(k) = kind {
                o["type"] = json!(k);
            }
            if let Some(p) = p {
                o["provenance"] = p;
            }
            o
        })
        .boxed()
}

fn result_payload() -> BoxedStrategy<Value> {
    (
        select(TOOLS),
        select(&["success", "failure", "timeout", "blocked"][..]),
        prop::collection::vec(item(Just(None).boxed()), 0..3),
        prop::option::weighted(0.5, select(NUMS)),
    )
        .prop_map(|(tool, status, outputs, duration)| {
            let mut p = json!({"tool": {"name": tool}, "exit_status": status, "outputs": outputs});
            if let Some(d) = duration {
                p["duration_ms"] = json!(d as i64);
            }
            p
        })
        .boxed()
}

fn message_payload() -> BoxedStrategy<Value> {
    let kind = select(&[Some("text"), Some("image")][..]).boxed();
    let said = prop_oneof![
        2 => text(),
        3 => select(SAYINGS).prop_map(|x| json!(x)),
    ]
    .boxed();
    prop::collection::vec(item_with(kind, said), 1..3)
        .prop_map(|content| json!({"content": content}))
        .boxed()
}

fn compact_payload() -> BoxedStrategy<(Value, Vec<usize>)> {
    (
        maybe_provenance(0.85),
        prop::collection::vec(0usize..40, 0..3),
    )
        .prop_map(|(p, compacted)| {
            let mut summary = json!({"value": "a summary"});
            if let Some(p) = p {
                summary["provenance"] = p;
            }
            let hash = "0".repeat(64);
            (
                json!({"summary": summary, "entries_compacted": [], "pre_compact_chain_hash": hash,
                       "post_compact_chain_hash": hash}),
                compacted,
            )
        })
        .boxed()
}

fn metadata() -> BoxedStrategy<Value> {
    (
        prop::option::weighted(0.3, select(TURN_IDS)),
        prop::option::weighted(0.1, select(TURN_IDS)),
    )
        .prop_map(|(turn, parent)| {
            let mut m = json!({"agent_id": "agent", "session_id": super::SESSION});
            if let Some(t) = turn {
                m["turn_id"] = json!(t);
            }
            if let Some(p) = parent {
                m["parent_turn_id"] = json!(p);
            }
            m
        })
        .boxed()
}

fn event() -> BoxedStrategy<GenEvent> {
    let body: BoxedStrategy<(&'static str, Value, Vec<usize>)> = prop_oneof![
        1 => prop::option::weighted(0.5, select(SAYINGS)).prop_map(|raw| {
            let p = match raw {
                Some(r) => json!({"intent": {"raw": r}}),
                None => json!({}),
            };
            ("steps/sessionStart", p, Vec::new())
        }),
        3 => prop::option::weighted(0.7, select(TURN_IDS))
            .prop_map(|t| {
                let p = match t {
                    Some(t) => json!({"turn_id": t}),
                    None => json!({}),
                };
                ("steps/turnStart", p, Vec::new())
            }),
        2 => (select(TURN_IDS), select(&["completed", "error"][..]))
            .prop_map(|(t, o)| ("steps/turnEnd", json!({"turn_id": t, "outcome": o}), Vec::new())),
        4 => message_payload().prop_map(|p| ("steps/userMessage", p, Vec::new())),
        8 => request_payload().prop_map(|p| ("steps/toolCallRequest", p, Vec::new())),
        5 => (result_payload(), prop::collection::vec(0usize..40, 0..=1))
            .prop_map(|(p, call)| ("steps/toolCallResult", p, call)),
        2 => compact_payload().prop_map(|(p, c)| ("steps/postCompact", p, c)),
    ]
    .boxed();
    (body, metadata(), select(TIME_STEPS_S))
        .prop_map(
            |((method, payload, compacted), metadata, step_s)| GenEvent {
                method,
                payload,
                metadata,
                step_s,
                compacted,
            },
        )
        .boxed()
}

/// An event stream of 1 to `max` events.
pub fn events(max: usize) -> BoxedStrategy<Vec<GenEvent>> {
    prop::collection::vec(event(), 1..=max).boxed()
}

// ---------------------------------------------------------------------------------------------
// VM bugs this test found (see the reproducers in `mod.rs`). `true` keeps them out.

/// A tool argument used directly as a condition or a quantifier's body (`when args.flag`,
/// `any n in [1]: args.flag`) is not read as its value by the VM: it is never true.
pub const BUG_BARE_ARGUMENT_CONDITION: bool = false;
/// `by` keys of different kinds collide in the VM (`"1"` and `1`, `"true"` and `true`).
pub const BUG_KEY_KINDS_COLLIDE: bool = false;
/// `len` of a set literal written with a repeated element counts the repeat in the VM
/// (`len({"a", "a"})` is 2).
pub const BUG_SET_REPEATS: bool = false;
/// With several key parts (a `$` key and a `by` key), one undefined on the current event
/// makes the VM count under the other parts alone (0) where the count is undefined.
pub const BUG_UNDEFINED_KEY_PART: bool = false;
