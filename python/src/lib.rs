//! `warden._warden`: the native half of the Python package (docs/python.md). It wraps the
//! embedding API (`warden::guardian`) and builds request envelopes for `Guardian.decide`; the
//! pure-Python half (`python/warden/__init__.py`) turns keyword arguments into the payload and
//! the JSON answer into a dict. Every decision runs with the GIL released. With `state=DIR`
//! a Guardian journals its decisions to that folder (`warden::server::store`, the library's
//! feature `journal`) and restores its sessions from it when opened again.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};
use serde_json::{json, Map, Value};

use warden::acs::{envelope, ids, time};
use warden::guardian::log::DecisionLog;
use warden::guardian::{self, ApproveError, OnDecisionFailure, Options, Protocol};

create_exception!(
    warden,
    PolicyError,
    PyException,
    "A policy that does not load: its diagnostics, rendered, are the message."
);
create_exception!(
    warden,
    ApprovalError,
    PyException,
    "An approval that was not granted: unknown ask, wrong approver, expired or already granted."
);

/// Where a Python Guardian's decision records go: a file (JSON lines, appended) or a callable
/// given each record as JSON text (the Python half turns it into a dict).
enum PyLog {
    File(Mutex<std::fs::File>),
    Call(Py<PyAny>),
}

impl DecisionLog for PyLog {
    fn record(&self, record: &Value) {
        let line = record.to_string();
        match self {
            PyLog::File(f) => {
                let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
                let _ = f
                    .write_all(line.as_bytes())
                    .and_then(|_| f.write_all(b"\n"));
            }
            // Called with the GIL taken again (the decision runs without it); an exception in
            // the callable is printed and never fails the decision.
            PyLog::Call(c) => Python::attach(|py| {
                if let Err(e) = c.call1(py, (line,)) {
                    e.print(py);
                }
            }),
        }
    }
}

/// The decision log a constructor was given: a path (`str` or `os.PathLike`) or a callable.
fn decision_log(log: &Bound<'_, PyAny>) -> PyResult<PyLog> {
    if log.is_callable() {
        return Ok(PyLog::Call(log.clone().unbind()));
    }
    let path: PathBuf = log.extract().map_err(|_| {
        PyTypeError::new_err("decision_log must be a path (str or os.PathLike) or a callable")
    })?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| PyValueError::new_err(format!("decision_log {}: {e}", path.display())))?;
    Ok(PyLog::File(Mutex::new(file)))
}

/// Methods a `decide` session announces in its ClientHello (strict mode).
const METHODS: &[&str] = &[
    "steps/sessionStart",
    "steps/userMessage",
    "steps/agentResponse",
    "steps/turnStart",
    "steps/turnEnd",
    "steps/toolCallRequest",
    "steps/toolCallResult",
    "steps/memoryRead",
    "steps/memoryWrite",
    "steps/knowledgeRetrieval",
    "steps/sessionEnd",
    "system/ping",
];

fn policy_error(d: warden::diagnostics::Diagnostics) -> PyErr {
    PolicyError::new_err(d.render(false))
}

/// A checked and compiled policy.
#[pyclass(module = "warden", frozen)]
struct Policy {
    inner: guardian::Policy,
}

#[pymethods]
impl Policy {
    /// Loads the policy rooted at a `.ward` file (and the files it `use`s).
    #[staticmethod]
    fn from_file(py: Python<'_>, path: PathBuf) -> PyResult<Policy> {
        let loaded = py.detach(|| guardian::Policy::load(&path));
        loaded.map(|inner| Policy { inner }).map_err(policy_error)
    }

    /// A policy from source text; `name` is its module name (rules fire as `name.rule`).
    /// With `base_dir`, relative `use` paths resolve against it.
    #[staticmethod]
    #[pyo3(signature = (text, name = "policy", base_dir = None))]
    fn from_source(
        py: Python<'_>,
        text: &str,
        name: &str,
        base_dir: Option<PathBuf>,
    ) -> PyResult<Policy> {
        let loaded = py.detach(|| match base_dir {
            Some(dir) => guardian::Policy::from_source_in(name, text, dir),
            None => guardian::Policy::from_source(name, text),
        });
        loaded.map(|inner| Policy { inner }).map_err(policy_error)
    }

    /// The default policy built into Warden (stdlib/defaults.ward).
    #[staticmethod]
    fn default() -> Policy {
        Policy {
            inner: guardian::Policy::embedded_default(),
        }
    }

    /// SHA-256 of the compiled program: names the policy in the audit chain.
    #[getter]
    fn digest(&self) -> &str {
        self.inner.digest()
    }

    /// The checker's warnings, rendered ("" when there are none).
    #[getter]
    fn warnings(&self) -> String {
        self.inner.warnings.render(false)
    }

    fn __repr__(&self) -> String {
        format!("<warden.Policy {}>", &self.inner.digest()[..12])
    }
}

/// Decides ACS requests against a policy, keeping per-session state between steps.
#[pyclass(module = "warden", frozen, subclass)]
struct Guardian {
    inner: guardian::Guardian,
    strict: bool,
    agent_id: String,
    session_id: String,
    /// Sessions `decide` has said hello for (strict mode).
    greeted: Mutex<HashSet<String>>,
    next_id: AtomicU64,
}

/// Request bytes: `bytes`, `bytearray` or `str` (UTF-8).
fn request_bytes(request: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = request.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else if let Ok(b) = request.cast::<PyByteArray>() {
        Ok(b.to_vec())
    } else if let Ok(s) = request.cast::<PyString>() {
        Ok(s.to_cow()?.as_bytes().to_vec())
    } else {
        Err(PyTypeError::new_err(
            "handle() takes the request envelope as bytes, bytearray or str",
        ))
    }
}

fn object(what: &str, text: &str) -> PyResult<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(PyTypeError::new_err(format!("{what} must be a dict"))),
        Err(e) => Err(PyValueError::new_err(format!("{what}: {e}"))),
    }
}

impl Guardian {
    fn envelope(&self, method: &str, metadata: Map<String, Value>, payload: Value) -> Vec<u8> {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        envelope::request(
            n,
            method,
            &ids::random_v4(n),
            &time::now_rfc3339_ms(),
            Value::Object(metadata),
            payload,
        )
        .to_string()
        .into_bytes()
    }

    /// In strict mode, the session's `handshake/hello` (once per session); the error
    /// response if it was refused.
    fn hello(&self, session: &str, metadata: &Map<String, Value>) -> Option<Vec<u8>> {
        if !self.strict {
            return None;
        }
        let mut greeted = self.greeted.lock().unwrap_or_else(|e| e.into_inner());
        if greeted.contains(session) {
            return None;
        }
        let out = self.inner.handle(&self.envelope(
            "handshake/hello",
            metadata.clone(),
            json!({
                "acs_versions_supported": [envelope::ACS_VERSION],
                "methods_implemented": METHODS,
                "transports_supported": ["stdio"],
                "provenance_producer": "deterministic",
                "profiles_supported": ["acs-core", "acs-provenance"],
            }),
        ));
        let refused = serde_json::from_slice::<Value>(&out)
            .map(|v| v.get("error").is_some())
            .unwrap_or(true);
        if refused {
            return Some(out);
        }
        greeted.insert(session.to_string());
        None
    }
}

#[pymethods]
impl Guardian {
    /// `strict`: the protocol `warden serve` runs (handshake required, replay protection,
    /// clock skew, audit chain, per-session caps); otherwise the lenient mode of
    /// `warden replay`. `explain`: attach the rules that fired and their checks to every
    /// result (`policy_data.warden`). `on_decision_failure`: "deny" or "error". `state`: a
    /// folder (`str` or `os.PathLike`) the decisions are journalled to before they are
    /// answered, and the sessions restored from when a Guardian opens it again.
    #[new]
    #[pyo3(signature = (policy, *, strict = false, explain = false, on_decision_failure = "deny", agent_id = "python", session_id = None, idle_timeout = Some(3600.0), decision_log = None, state = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        policy: &Policy,
        strict: bool,
        explain: bool,
        on_decision_failure: &str,
        agent_id: &str,
        session_id: Option<String>,
        idle_timeout: Option<f64>,
        decision_log: Option<&Bound<'_, PyAny>>,
        state: Option<PathBuf>,
    ) -> PyResult<Guardian> {
        let on_decision_failure = match on_decision_failure {
            "deny" => OnDecisionFailure::Deny,
            "error" => OnDecisionFailure::Error,
            other => {
                return Err(PyValueError::new_err(format!(
                    "on_decision_failure must be \"deny\" or \"error\", not {other:?}"
                )))
            }
        };
        let mut protocol = if strict {
            Protocol::strict()
        } else {
            Protocol::default()
        };
        protocol.caps.idle_session_ms = match idle_timeout {
            Some(t) if t.is_finite() && t > 0.0 => Some((t * 1000.0) as u64),
            Some(t) => {
                return Err(PyValueError::new_err(format!(
                    "idle_timeout must be a positive number of seconds or None, not {t}"
                )))
            }
            None => None,
        };
        let options = Options {
            on_decision_failure,
            explain,
            protocol,
        };
        let policy = policy.inner.clone();
        let inner = match &state {
            None => guardian::Guardian::with_options(policy, options),
            Some(dir) => py
                .detach(|| warden::server::store::open_guardian(policy, options, dir))
                .map_err(|e| {
                    PyOSError::new_err(format!(
                        "state {}: the journal could not be opened: {e}",
                        dir.display()
                    ))
                })?,
        };
        // Restored sessions said hello before the Guardian was closed: a strict `decide`
        // does not say it again.
        let greeted: HashSet<String> = if state.is_some() {
            inner.session_ids().into_iter().collect()
        } else {
            HashSet::new()
        };
        if let Some(log) = decision_log {
            inner.set_decision_log(Arc::new(self::decision_log(log)?));
        }
        Ok(Guardian {
            inner,
            strict,
            agent_id: agent_id.to_string(),
            session_id: session_id.unwrap_or_else(|| ids::random_v4(0)),
            greeted: Mutex::new(greeted),
            next_id: AtomicU64::new(1),
        })
    }

    /// One JSON-RPC request envelope in, its response envelope out (bytes). Malformed input
    /// gets the JSON-RPC error ACS prescribes, never an exception.
    fn handle<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = request_bytes(request)?;
        let out = py.detach(|| self.inner.handle(&bytes));
        Ok(PyBytes::new(py, &out))
    }

    /// Builds the request envelope for `hook` (`toolCallRequest` or `steps/toolCallRequest`)
    /// with `metadata` and `payload` (JSON objects, as text), says hello first in strict mode,
    /// and returns the response envelope as text. `Guardian.decide` in Python wraps it.
    fn _decide(
        &self,
        py: Python<'_>,
        hook: &str,
        session_id: Option<String>,
        metadata: &str,
        payload: &str,
    ) -> PyResult<String> {
        let mut meta = Map::new();
        meta.insert("agent_id".into(), json!(self.agent_id));
        meta.insert(
            "session_id".into(),
            json!(session_id.as_deref().unwrap_or(&self.session_id)),
        );
        for (k, v) in object("metadata", metadata)? {
            meta.insert(k, v);
        }
        let payload = Value::Object(object("payload", payload)?);
        let session = meta
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let method = if hook.contains('/') {
            hook.to_string()
        } else {
            format!("steps/{hook}")
        };
        let out = py.detach(|| {
            if let Some(refused) = self.hello(&session, &meta) {
                return refused;
            }
            self.inner.handle(&self.envelope(&method, meta, payload))
        });
        String::from_utf8(out).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Every approval the Guardian's sessions asked for and where it stands, as JSON text
    /// (`list_approvals` in Python gives the list of dicts).
    fn _approvals(&self, py: Python<'_>) -> String {
        let list = py.detach(|| self.inner.approvals(None));
        Value::Array(list.iter().map(|a| a.to_json()).collect()).to_string()
    }

    /// Grants the ask `request_id` as `approver`; the grant as JSON text, or ApprovalError.
    fn _approve(&self, py: Python<'_>, request_id: &str, approver: &str) -> PyResult<String> {
        match py.detach(|| self.inner.approve(request_id, approver, None)) {
            Ok(granted) => Ok(granted.to_json(request_id).to_string()),
            Err(e @ ApproveError::Grant(_)) => Err(ApprovalError::new_err(e.to_string())),
            Err(e @ ApproveError::Journal(_)) => Err(PyValueError::new_err(e.to_string())),
        }
    }

    /// The ids of the sessions the Guardian holds.
    fn session_ids(&self, py: Python<'_>) -> Vec<String> {
        py.detach(|| self.inner.session_ids())
    }

    /// Drops ended and idle sessions (idle: no request for `idle_timeout` seconds) from
    /// memory now; returns how many left. Admissions drop a few as they go anyway.
    fn evict_idle(&self, py: Python<'_>) -> usize {
        py.detach(|| self.inner.sweep_sessions())
    }

    /// Replaces the policy; sessions keep their state.
    fn set_policy(&self, py: Python<'_>, policy: &Policy) {
        let p = policy.inner.clone();
        py.detach(|| self.inner.set_policy(p));
    }

    /// The digest of the policy in force.
    #[getter]
    fn policy_digest(&self) -> String {
        self.inner.policy_digest().to_string()
    }

    /// The session `decide` uses when given none.
    #[getter]
    fn session_id(&self) -> &str {
        &self.session_id
    }

    /// `metadata.agent_id` of the requests `decide` builds.
    #[getter]
    fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Whether the Guardian runs the strict protocol.
    #[getter]
    fn strict(&self) -> bool {
        self.strict
    }
}

#[pymodule]
fn _warden(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Policy>()?;
    m.add_class::<Guardian>()?;
    m.add("PolicyError", m.py().get_type::<PolicyError>())?;
    m.add("ApprovalError", m.py().get_type::<ApprovalError>())?;
    m.add("ACS_VERSION", envelope::ACS_VERSION)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
