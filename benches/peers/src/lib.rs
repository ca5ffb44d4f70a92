//! What the peer benchmarks share: the histories (the main crate's checked-in generator), their
//! conversion to each peer's input, and the hand-written Rust reference.
//!
//! The hand-written reference comes in two sizes:
//! - [`HandCheck`]: the bare O(1) check, a struct holding the last untrusted turn and a match
//!   on the tool name. It is handed the tool name and the turn number; it parses nothing.
//! - [`HostSession`]: the same job Warden's `decide_event` does, written by hand for these two
//!   policies only: read the turn from the metadata and the tool from the payload, insert the
//!   event's provenance records (labels, origins and depth from their parents), keep per-turn
//!   counters, decide, and keep the changes only if the step goes ahead. It is also the host
//!   that maintains the [`Summary`] handed to regorus-with-a-summary and to Cedar.

#[path = "../../support/history.rs"]
pub mod history;

use std::collections::HashMap;

use serde_json::{json, Value};

pub const HS: [u64; 4] = [10, 100, 1_000, 10_000];

pub const CONSEQUENTIAL: [&str; 4] = [
    "send_email",
    "send_money",
    "update_password",
    "post_webpage",
];

/// Turn number of a `turn_id` written by the generator (`t{n}`).
pub fn turn_of(v: &Value) -> u64 {
    v["params"]["metadata"]["turn_id"]
        .as_str()
        .and_then(|t| t.strip_prefix('t'))
        .and_then(|n| n.parse().ok())
        .expect("generator turn ids are t{n}")
}

/// The Rego history-array input: `{history: [{method, turn, payload}], event: {…}}`.
pub fn rego_history_input(events: &[Value], probe: &Value) -> Value {
    let entry = |v: &Value| json!({"method": v["method"], "turn": turn_of(v), "payload": v["params"]["payload"]});
    json!({
        "history": events.iter().map(entry).collect::<Vec<_>>(),
        "event": entry(probe),
    })
}

// ---------------------------------------------------------------------------------------------
// The hand-written reference.

/// The bare check: the last turn untrusted content entered, and a match on the tool name.
#[derive(Clone, Copy, Debug, Default)]
pub struct HandCheck {
    pub last_untrusted_turn: Option<u64>,
}

impl HandCheck {
    /// True: deny.
    #[inline]
    pub fn deny(&self, tool: &str, turn: u64) -> bool {
        match tool {
            "send_email" | "send_money" | "update_password" | "post_webpage" => self
                .last_untrusted_turn
                .is_some_and(|t| turn.saturating_sub(t) <= 3),
            _ => false,
        }
    }
}

pub const UNTRUSTED: u8 = 1;
pub const WEB: u8 = 2;

const ORIGINS: [&str; 8] = [
    "user_input",
    "system",
    "tool_output",
    "retrieved",
    "a2a_inbound",
    "external",
    "agent_generated",
    "other",
];

fn origin_bit(o: &str) -> u8 {
    1 << ORIGINS.iter().position(|x| *x == o).unwrap_or(7)
}

fn labels_of_origins(origins: u8) -> u8 {
    let mut l = 0;
    if origins
        & (origin_bit("tool_output")
            | origin_bit("retrieved")
            | origin_bit("a2a_inbound")
            | origin_bit("external"))
        != 0
    {
        l |= UNTRUSTED;
    }
    if origins & (origin_bit("retrieved") | origin_bit("external")) != 0 {
        l |= WEB;
    }
    l
}

/// One provenance node: labels, the origins anywhere in its lineage, the lineage depth.
#[derive(Clone, Copy, Debug, Default)]
pub struct Node {
    pub labels: u8,
    pub origins: u8,
    pub depth: u32,
}

/// What the host keeps per session (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct HostSession {
    pub nodes: HashMap<String, Node>,
    pub turn: u64,
    pub turn_id: String,
    /// Last turn each label entered the context: [untrusted, web].
    pub last_seen: [Option<u64>; 2],
    /// Labels that entered in the current turn.
    pub turn_labels: u8,
    pub calls_this_turn: u32,
    pub calls_by_tool: HashMap<String, u32>,
    pub last_read_file_turn: Option<u64>,
    /// The declared Intent's tools (`None`: no intent declared).
    pub intent: Option<Vec<String>>,
}

/// One argument as the summary describes it.
#[derive(Clone, Debug)]
pub struct ArgSummary {
    pub name: String,
    pub untrusted: bool,
    pub origins: Vec<&'static str>,
    pub depth: u32,
}

/// What a host hands a policy engine that cannot iterate history: everything the 20 rules read.
#[derive(Clone, Debug)]
pub struct Summary {
    pub tool: String,
    pub turns_since_untrusted: i64,
    pub turns_since_web: i64,
    pub turns_since_read_file: i64,
    pub calls_this_turn: i64,
    pub calls_by_tool: Vec<(String, i64)>,
    pub intent_declared: bool,
    pub intent_permits_tool: bool,
    pub intent_tools: Vec<String>,
    pub args: Vec<ArgSummary>,
}

/// "Never": larger than any window.
pub const NEVER: i64 = 1 << 40;

/// The event's changes, decided on before they are kept.
pub struct Draft {
    turn: u64,
    new_turn: bool,
    nodes: Vec<(String, Node)>,
    labels: u8,
    turn_labels: u8,
}

fn records(payload: &Value) -> impl Iterator<Item = &Value> {
    ["content", "arguments", "outputs"]
        .into_iter()
        .flat_map(move |k| {
            let items: Box<dyn Iterator<Item = &Value>> = match payload.get(k) {
                Some(Value::Array(a)) => Box::new(a.iter()),
                Some(Value::Object(m)) => Box::new(m.values()),
                _ => Box::new(std::iter::empty()),
            };
            items.filter_map(|i| i.get("provenance"))
        })
}

impl HostSession {
    fn node_for(&self, draft: &Draft, r: &Value) -> Option<(String, Node, bool)> {
        let id = r.get("provenance_id")?.as_str()?;
        let origin = r.get("origin")?.as_str()?;
        let lookup = |id: &str| {
            draft
                .nodes
                .iter()
                .find(|(k, _)| k == id)
                .map(|(_, n)| *n)
                .or_else(|| self.nodes.get(id).copied())
        };
        if let Some(n) = lookup(id) {
            return Some((id.to_string(), n, false));
        }
        let mut n = Node {
            labels: 0,
            origins: origin_bit(origin),
            depth: 0,
        };
        let parents = r.get("derived_from").and_then(Value::as_array);
        for p in parents.into_iter().flatten().filter_map(Value::as_str) {
            let pn = lookup(p).unwrap_or(Node {
                labels: labels_of_origins(origin_bit("external")),
                origins: origin_bit("external"),
                depth: 0,
            });
            n.labels |= pn.labels;
            n.origins |= pn.origins;
            n.depth = n.depth.max(pn.depth + 1);
        }
        n.labels |= labels_of_origins(origin_bit(origin));
        if origin == "agent_generated" && parents.is_none_or(|p| p.is_empty()) {
            n.labels |= draft.turn_labels;
        }
        Some((id.to_string(), n, true))
    }

    /// The event's changes: the turn, the provenance records it brings.
    pub fn draft(&self, payload: &Value, metadata: &Value) -> Draft {
        let tid = metadata
            .get("turn_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let new_turn = !tid.is_empty() && tid != self.turn_id;
        let mut d = Draft {
            turn: self.turn + new_turn as u64,
            new_turn,
            nodes: Vec::new(),
            labels: 0,
            turn_labels: if new_turn { 0 } else { self.turn_labels },
        };
        for r in records(payload) {
            if let Some((id, n, new)) = self.node_for(&d, r) {
                d.labels |= n.labels;
                d.turn_labels |= n.labels;
                if new {
                    d.nodes.push((id, n));
                }
            }
        }
        d
    }

    fn turns_since(&self, d: &Draft, label: u8, idx: usize) -> i64 {
        if d.labels & label != 0 {
            0
        } else {
            self.last_seen[idx].map_or(NEVER, |t| (d.turn - t) as i64)
        }
    }

    /// Keeps an event's changes (the step went ahead).
    pub fn commit(&mut self, d: Draft, method: &str, payload: &Value, metadata: &Value) {
        if d.new_turn {
            self.turn = d.turn;
            self.turn_id = metadata["turn_id"].as_str().unwrap_or("").to_string();
            self.calls_this_turn = 0;
            self.calls_by_tool.clear();
        }
        self.turn_labels = d.turn_labels;
        if d.labels & UNTRUSTED != 0 {
            self.last_seen[0] = Some(d.turn);
        }
        if d.labels & WEB != 0 {
            self.last_seen[1] = Some(d.turn);
        }
        self.nodes.extend(d.nodes);
        if method == "steps/toolCallRequest" {
            let tool = payload["tool"]["name"].as_str().unwrap_or("");
            self.calls_this_turn += 1;
            *self.calls_by_tool.entry(tool.to_string()).or_default() += 1;
            if tool == "read_file" {
                self.last_read_file_turn = Some(d.turn);
            }
        }
        if self.intent.is_none() && matches!(method, "steps/sessionStart" | "steps/agentTrigger") {
            if let Some(i) = payload.get("intent") {
                let tools = i["parsed"]["capabilities"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["tool"].as_str().map(String::from))
                    .collect();
                self.intent = Some(tools);
            }
        }
    }

    /// Feeds one history envelope through the host (every history step goes ahead).
    pub fn observe(&mut self, v: &Value) {
        let (method, p) = (v["method"].as_str().unwrap_or(""), &v["params"]);
        let d = self.draft(&p["payload"], &p["metadata"]);
        self.commit(d, method, &p["payload"], &p["metadata"]);
    }

    /// The taint-window policy, like-for-like with Warden's `decide_event`: true is deny.
    pub fn decide_taint_window(&mut self, method: &str, payload: &Value, metadata: &Value) -> bool {
        let d = self.draft(payload, metadata);
        let deny = method == "steps/toolCallRequest"
            && payload["tool"]["name"]
                .as_str()
                .is_some_and(|t| CONSEQUENTIAL.contains(&t))
            && self.turns_since(&d, UNTRUSTED, 0) <= 3;
        if !deny {
            self.commit(d, method, payload, metadata);
        }
        deny
    }

    /// The summary the 20-rule policy needs for this event (computed on a draft; nothing kept).
    pub fn summary(&self, payload: &Value, metadata: &Value) -> Summary {
        let d = self.draft(payload, metadata);
        let tool = payload["tool"]["name"].as_str().unwrap_or("").to_string();
        let same_turn = !d.new_turn;
        let mut args = Vec::new();
        if let Some(Value::Object(m)) = payload.get("arguments") {
            for (k, a) in m {
                let Some(n) = a.get("provenance").and_then(|r| self.node_for(&d, r)) else {
                    continue;
                };
                let n = n.1;
                args.push(ArgSummary {
                    name: k.clone(),
                    untrusted: n.labels & UNTRUSTED != 0,
                    origins: (0..8)
                        .filter(|i| n.origins & (1 << i) != 0)
                        .map(|i| ORIGINS[i])
                        .collect(),
                    depth: n.depth,
                });
            }
        }
        Summary {
            turns_since_untrusted: self.turns_since(&d, UNTRUSTED, 0),
            turns_since_web: self.turns_since(&d, WEB, 1),
            turns_since_read_file: self
                .last_read_file_turn
                .map_or(NEVER, |t| (d.turn - t) as i64),
            calls_this_turn: if same_turn {
                self.calls_this_turn as i64
            } else {
                0
            },
            calls_by_tool: if same_turn {
                self.calls_by_tool
                    .iter()
                    .map(|(k, v)| (k.clone(), *v as i64))
                    .collect()
            } else {
                Vec::new()
            },
            intent_declared: self.intent.is_some(),
            intent_permits_tool: self
                .intent
                .as_ref()
                .is_none_or(|t| t.is_empty() || t.contains(&tool)),
            intent_tools: self.intent.clone().unwrap_or_default(),
            tool,
            args,
        }
    }
}

impl Summary {
    /// The regorus input for the one-rule taint-window policy: only what it reads.
    pub fn to_rego_taint(&self) -> regorus::Value {
        regorus::Value::from(json!({
            "event": {"tool": self.tool},
            "summary": {"turns_since_untrusted": self.turns_since_untrusted},
        }))
    }

    /// The Cedar context for the one-rule taint-window policy.
    pub fn to_cedar_taint(&self) -> cedar_policy::Context {
        use cedar_policy::RestrictedExpression as R;
        cedar_policy::Context::from_pairs([
            ("tool".to_string(), R::new_string(self.tool.clone())),
            (
                "turns_since_untrusted".to_string(),
                R::new_long(self.turns_since_untrusted),
            ),
        ])
        .expect("a valid context")
    }

    /// The regorus input (`input.event`, `input.summary`).
    pub fn to_rego(&self) -> regorus::Value {
        let args: serde_json::Map<String, Value> = self
            .args
            .iter()
            .map(|a| {
                (
                    a.name.clone(),
                    json!({"untrusted": a.untrusted, "origins": a.origins, "depth": a.depth}),
                )
            })
            .collect();
        let by_tool: serde_json::Map<String, Value> = self
            .calls_by_tool
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        regorus::Value::from(json!({
            "event": {"tool": self.tool, "args": args},
            "summary": {
                "turns_since_untrusted": self.turns_since_untrusted,
                "turns_since_web": self.turns_since_web,
                "turns_since_read_file": self.turns_since_read_file,
                "calls_this_turn": self.calls_this_turn,
                "calls_this_turn_by_tool": by_tool,
                "intent_declared": self.intent_declared,
                "intent_tools": self.intent_tools,
            }
        }))
    }

    /// The Cedar context.
    pub fn to_cedar(&self) -> cedar_policy::Context {
        use cedar_policy::RestrictedExpression as R;
        let by = |t: &str| {
            self.calls_by_tool
                .iter()
                .find(|(k, _)| k == t)
                .map_or(0, |(_, v)| *v)
        };
        let args = R::new_record(self.args.iter().map(|a| {
            (
                a.name.clone(),
                R::new_record([
                    ("untrusted".to_string(), R::new_bool(a.untrusted)),
                    (
                        "origins".to_string(),
                        R::new_set(a.origins.iter().map(|o| R::new_string(o.to_string()))),
                    ),
                ])
                .expect("distinct keys"),
            )
        }))
        .expect("distinct argument names");
        cedar_policy::Context::from_pairs([
            ("tool".to_string(), R::new_string(self.tool.clone())),
            (
                "turns_since_untrusted".to_string(),
                R::new_long(self.turns_since_untrusted),
            ),
            (
                "turns_since_web".to_string(),
                R::new_long(self.turns_since_web),
            ),
            (
                "turns_since_read_file".to_string(),
                R::new_long(self.turns_since_read_file),
            ),
            (
                "calls_this_turn".to_string(),
                R::new_long(self.calls_this_turn),
            ),
            (
                "emails_this_turn".to_string(),
                R::new_long(by("send_email")),
            ),
            (
                "payments_this_turn".to_string(),
                R::new_long(by("send_money")),
            ),
            ("searches_this_turn".to_string(), R::new_long(by("search"))),
            (
                "read_email_this_turn".to_string(),
                R::new_bool(by("read_email") > 0),
            ),
            (
                "intent_declared".to_string(),
                R::new_bool(self.intent_declared),
            ),
            (
                "intent_permits_tool".to_string(),
                R::new_bool(self.intent_permits_tool),
            ),
            (
                "any_arg_untrusted".to_string(),
                R::new_bool(self.args.iter().any(|a| a.untrusted)),
            ),
            (
                "max_arg_depth".to_string(),
                R::new_long(self.args.iter().map(|a| a.depth as i64).max().unwrap_or(0)),
            ),
            ("args".to_string(), args),
        ])
        .expect("a valid context")
    }
}
