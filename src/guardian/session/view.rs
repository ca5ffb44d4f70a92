//! The view a step is decided as: a wrapped MCP message is decided as the ACS hook it is (a
//! `tools/call` as its `toolCallRequest`, a result of `tools/call`, `resources/read` or
//! `prompts/get` as its `toolCallResult`), so rules written for the hooks decide MCP traffic
//! too; and the [`Event`] the engine takes, built from the view. Deciding and restoring both
//! build their event here, so a restore takes in exactly what the decision did.
//!
//! Owns: the MCP views and the event. Must not know: sessions, the journal, the engine.

use serde_json::Value;

use crate::acs::fields;
use crate::state::Event;

/// A request as its hook decides it.
pub(crate) struct View {
    /// The hook the step is decided as.
    pub hook: &'static fields::HookSpec,
    /// For a wrapped MCP message: the method it arrived as (its own rules run too).
    pub wrapped: Option<&'static str>,
    /// The payload the view decides, when it is not the request's own.
    payload: Option<Value>,
}

impl View {
    /// The view of a request of `hook` with this payload.
    pub fn of(hook: &'static fields::HookSpec, payload: &Value, request_id: &str) -> View {
        match mcp_view_of(hook, payload, request_id) {
            Some((h, view)) => View {
                hook: h,
                wrapped: Some(hook.method),
                payload: Some(view),
            },
            None => View {
                hook,
                wrapped: None,
                payload: None,
            },
        }
    }

    /// The payload decided: the view's, or the request's own (`original`).
    pub fn payload<'a>(&'a self, original: &'a Value) -> &'a Value {
        self.payload.as_ref().unwrap_or(original)
    }

    /// The event the engine takes for this view.
    pub fn event<'a>(
        &'a self,
        original: &'a Value,
        request_id: &'a str,
        metadata: &'a Value,
        time_ms: Option<i64>,
        extra_labels: u64,
    ) -> Event<'a> {
        Event {
            method: self.hook.method,
            request_id,
            payload: self.payload(original),
            metadata,
            time_ms,
            extra_labels,
            wrapped_method: self.wrapped,
        }
    }
}

/// A wrapped MCP tool call's method.
const MCP_TOOLS_CALL: &str = "protocols/MCP/tools/call";
/// A wrapped MCP result's method (Warden's extension; docs/mcp.md).
const MCP_RESULT: &str = "protocols/MCP/result";

/// Methods the Guardian answers: every hook, plus ping and the handshake.
pub fn is_known_method(m: &str) -> bool {
    fields::hook(m).is_some() || m == "system/ping" || m == "handshake/hello"
}

/// The view a wrapped MCP message is decided as, if any. The toolCallRequest view of a wrapped MCP `tools/call`: `params.name` is the tool, each of
/// `params.arguments` an argument (with its provenance when the platform gave one as
/// `{value, provenance}`). Rules written `on toolCallRequest` decide MCP calls too.
fn mcp_view_of(
    hook: &'static fields::HookSpec,
    payload: &Value,
    request_id: &str,
) -> Option<(&'static fields::HookSpec, Value)> {
    match hook.method {
        MCP_TOOLS_CALL => mcp_tool_call_view(payload),
        MCP_RESULT => mcp_result_view(payload, request_id),
        _ => None,
    }
}

/// The toolCallResult view of a wrapped MCP result (`protocols/MCP/result`, Warden's
/// extension: the MCP response message, with the MCP request it answers in `request` and
/// the wrapped request's ACS `request_id_ref`), for the methods whose results are content:
/// each content item of a `tools/call` result, each of a `resources/read`'s `contents`, each
/// of a `prompts/get`'s `messages`, or the error, is an output with `tool_output` provenance
/// whose `source_id` is the tool (or the MCP method). The results of other methods (an
/// `initialize`, a `tools/list`) are decided on `protocols/MCP/result` alone and bring no
/// content into the session. The ids are derived from the step's `request_id`, so a replay
/// of the journal rebuilds the same nodes.
fn mcp_result_view(
    payload: &Value,
    request_id: &str,
) -> Option<(&'static fields::HookSpec, Value)> {
    let request = payload.get("request");
    let method = request
        .and_then(|r| r.get("method"))
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    if !matches!(method, "tools/call" | "resources/read" | "prompts/get") {
        return None;
    }
    let params = request.and_then(|r| r.get("params"));
    let tool = match method {
        "tools/call" => params
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("unknown"),
        other => other,
    };
    let result = payload.get("result");
    let error = payload.get("error");
    let items: Vec<Value> = match (method, result, error) {
        (_, _, Some(e)) => vec![e.clone()],
        ("tools/call", Some(r), None) => {
            let mut v: Vec<Value> = r
                .get("content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if let Some(s) = r.get("structuredContent") {
                v.push(s.clone());
            }
            v
        }
        ("resources/read", Some(r), None) => r
            .get("contents")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        ("prompts/get", Some(r), None) => r
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let failed = error.is_some()
        || result
            .and_then(|r| r.get("isError"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    let ref_id = payload.get("request_id_ref").and_then(Value::as_str);
    let outputs: Vec<Value> = items
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            serde_json::json!({"value": value, "provenance": {
                "provenance_id": format!("{request_id}:mcp-output:{i}"),
                "origin": "tool_output",
                "source_id": tool,
            }})
        })
        .collect();
    let mut view = payload.as_object().cloned().unwrap_or_default();
    let mut tool_obj = serde_json::json!({"name": tool, "provider": "mcp"});
    if method == "resources/read" {
        if let Some(uri) = params.and_then(|p| p.get("uri")) {
            view.insert("operation".into(), uri.clone());
        }
        tool_obj["name"] = Value::String("resources/read".into());
    }
    view.insert("tool".into(), tool_obj);
    view.insert(
        "exit_status".into(),
        Value::String(if failed { "failure" } else { "success" }.into()),
    );
    view.insert("outputs".into(), Value::Array(outputs));
    if let Some(r) = ref_id {
        view.insert("request_id_ref".into(), Value::String(r.into()));
    }
    Some((fields::hook("steps/toolCallResult")?, Value::Object(view)))
}

/// See [`mcp_view_of`].
fn mcp_tool_call_view(payload: &Value) -> Option<(&'static fields::HookSpec, Value)> {
    let params = payload.get("params");
    let name = params
        .and_then(|p| p.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    let arguments: serde_json::Map<String, Value> = params
        .and_then(|p| p.get("arguments"))
        .and_then(Value::as_object)
        .map(|args| {
            args.iter()
                .map(|(k, v)| {
                    let wrapped = match v {
                        Value::Object(o)
                            if o.contains_key("value") && o.contains_key("provenance") =>
                        {
                            v.clone()
                        }
                        other => serde_json::json!({"value": other}),
                    };
                    (k.clone(), wrapped)
                })
                .collect()
        })
        .unwrap_or_default();
    // The MCP payload itself stays, so rules written `on protocols/MCP/tools/call` read
    // `params…` from the same payload the toolCallRequest rules read `tool` and `args` from.
    let mut view = payload.as_object().cloned().unwrap_or_default();
    view.insert(
        "tool".into(),
        serde_json::json!({"name": name, "provider": "mcp"}),
    );
    view.insert("arguments".into(), Value::Object(arguments));
    Some((fields::hook("steps/toolCallRequest")?, Value::Object(view)))
}
