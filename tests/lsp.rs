//! Protocol tests for `warden lsp`: recorded LSP sessions, replayed over stdio.
//!
//! Each file in `tests/lsp/sessions/` is one session against the workspace `tests/lsp/ws/`: a
//! JSON array of steps, run in order after `initialize`/`initialized`, and followed by
//! `shutdown`/`exit` (the server must then exit by itself):
//!
//! - `{"open": "policy.ward"}` opens a workspace file (or `"text": "…"` for an inline one);
//! - `{"notify": METHOD, "params": …}` sends a notification;
//! - `{"request": METHOD, "params": …, "expect": …}` sends a request and matches its result;
//! - `{"notification": METHOD, "expect": …}` waits for the server's next notification of
//!   that method and matches its params.
//!
//! Matching: objects match when every key of the expectation matches (extra keys in the reply
//! are ignored); arrays match element by element and must have the same length;
//! `{"$contains": [...]}` matches an array containing a match for each listed element;
//! `{"$tokens": [...]}` matches semantic tokens (`{"data": [...]}`) containing each listed token,
//! written `"LINE:CHARACTER+LENGTH TYPE[.MODIFIER…]"` in absolute positions with the legend's
//! names (`"3:2+6 variable.declaration"`), or `"LINE:CHARACTER none"` for no token starting
//! there; `"$any"` matches anything. Strings may use `${WS}` (the workspace folder's URI) and `${STD}`
//! (the URI of the folder the server writes the embedded stdlib to).
//!
//! `WARDEN_LSP_BLESS=1 cargo test --test lsp` records the reply received as each `expect` that
//! is `null` (to record a new session; review the diff); `WARDEN_LSP_BLESS=all` re-records all.
//!
//! Every wait is bounded (`TIMEOUT`), and the server is killed if a session fails.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(30);

/// The semantic token legend the server advertised: type names and modifier names.
static LEGEND: OnceLock<(Vec<String>, Vec<String>)> = OnceLock::new();

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn ws_dir() -> PathBuf {
    root().join("tests/lsp/ws")
}

fn file_uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

struct Server {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<Value>,
    pending: Vec<Value>,
    next_id: i64,
    tmp: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_frame(r: &mut impl BufRead) -> Option<Value> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            len = v.trim().parse::<usize>().ok();
        }
    }
    let mut buf = vec![0; len?];
    r.read_exact(&mut buf).ok()?;
    serde_json::from_slice(&buf).ok()
}

impl Server {
    fn start(name: &str) -> Server {
        let tmp = root().join("target/lsp-tests").join(name);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
            .arg("lsp")
            .env("TMPDIR", &tmp)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting warden lsp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            while let Some(v) = read_frame(&mut r) {
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Server {
            child,
            stdin,
            rx,
            pending: Vec::new(),
            next_id: 0,
            tmp,
        }
    }

    fn send(&mut self, v: &Value) {
        let body = serde_json::to_string(v).unwrap();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn recv(&mut self, what: &str) -> Value {
        match self.rx.recv_timeout(TIMEOUT) {
            Ok(v) => v,
            Err(_) => {
                panic!("no message from warden lsp within {TIMEOUT:?} while waiting for {what}")
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let v = self.recv(method);
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                if let Some(e) = v.get("error") {
                    panic!("{method} failed: {e}");
                }
                return v.get("result").cloned().unwrap_or(Value::Null);
            }
            self.pending.push(v);
        }
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn notification(&mut self, method: &str) -> Value {
        if let Some(i) = self
            .pending
            .iter()
            .position(|v| v.get("method") == Some(&json!(method)) && v.get("id").is_none())
        {
            return self.pending.remove(i)["params"].clone();
        }
        loop {
            let v = self.recv(method);
            if v.get("method") == Some(&json!(method)) && v.get("id").is_none() {
                return v["params"].clone();
            }
            self.pending.push(v);
        }
    }

    fn initialize(&mut self) {
        let ws = file_uri(&ws_dir());
        let result = self.request(
            "initialize",
            json!({
                "processId": null,
                "rootUri": ws,
                "workspaceFolders": [{"uri": ws, "name": "ws"}],
                "capabilities": {},
            }),
        );
        assert!(result["capabilities"].is_object(), "initialize: {result}");
        let legend = &result["capabilities"]["semanticTokensProvider"]["legend"];
        let names = |k: &str| -> Vec<String> {
            legend[k]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let _ = LEGEND.set((names("tokenTypes"), names("tokenModifiers")));
        self.notify("initialized", json!({}));
    }

    fn shutdown(mut self) {
        let r = self.request("shutdown", Value::Null);
        assert_eq!(r, Value::Null);
        self.notify("exit", Value::Null);
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "warden lsp exited with {status}");
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "warden lsp did not exit after `exit`"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn substitute(v: &Value, vars: &[(&str, String)]) -> Value {
    match v {
        Value::String(s) => {
            let mut s = s.clone();
            for (k, val) in vars {
                s = s.replace(k, val);
            }
            Value::String(s)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| {
                    (
                        substitute(&json!(k), vars).as_str().unwrap().to_string(),
                        substitute(x, vars),
                    )
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The inverse of `substitute`, for blessing.
fn unsubstitute(v: &Value, vars: &[(&str, String)]) -> Value {
    match v {
        Value::String(s) => {
            let mut s = s.clone();
            for (k, val) in vars {
                s = s.replace(val.as_str(), k);
            }
            Value::String(s)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| unsubstitute(x, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| {
                    (
                        unsubstitute(&json!(k), vars).as_str().unwrap().to_string(),
                        unsubstitute(x, vars),
                    )
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Semantic tokens' `data` decoded to absolute positions: `(line, character)` → `"+LENGTH
/// TYPE[.MODIFIER…]"`.
fn decode_tokens(data: &[Value]) -> std::collections::BTreeMap<(u64, u64), String> {
    let (types, modifiers) = LEGEND.get().expect("the legend, from initialize");
    let mut out = std::collections::BTreeMap::new();
    let (mut line, mut col) = (0, 0);
    for t in data.chunks(5) {
        let n: Vec<u64> = t.iter().map(|x| x.as_u64().unwrap()).collect();
        if n[0] > 0 {
            col = 0;
        }
        line += n[0];
        col += n[1];
        let mut name = types[n[3] as usize].clone();
        for (i, m) in modifiers.iter().enumerate() {
            if n[4] & (1 << i) != 0 {
                name = format!("{name}.{m}");
            }
        }
        out.insert((line, col), format!("+{} {name}", n[2]));
    }
    out
}

fn match_tokens(wanted: &[Value], actual: &Value, path: &str) -> Result<(), String> {
    let data = actual["data"]
        .as_array()
        .ok_or(format!("{path}: expected semantic tokens, got {actual}"))?;
    let tokens = decode_tokens(data);
    for want in wanted {
        let want = want
            .as_str()
            .ok_or(format!("{path}: {want} is not a string"))?;
        let (at, what) = want.split_once(['+', ' ']).ok_or(format!(
            "{path}: `{want}` is not LINE:CHARACTER+LENGTH TYPE"
        ))?;
        let (line, col) = at
            .split_once(':')
            .and_then(|(l, c)| Some((l.parse().ok()?, c.parse().ok()?)))
            .ok_or(format!("{path}: `{want}`: bad position"))?;
        let got = tokens.get(&(line, col));
        let ok = match (what, got) {
            ("none", None) => true,
            (_, Some(g)) => g[1..] == *what,
            _ => false,
        };
        if !ok {
            let near: Vec<String> = tokens
                .range((line, 0)..(line + 1, 0))
                .map(|((l, c), t)| format!("{l}:{c}{t}"))
                .collect();
            return Err(format!(
                "{path}: wanted `{want}`, got {}; line {line} has {near:?}",
                got.map_or("no token".to_string(), |g| format!("`{at}{g}`"))
            ));
        }
    }
    Ok(())
}

/// Whether `actual` matches the pattern `expected`; on a mismatch, the path to it.
fn matches(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    match expected {
        Value::String(s) if s == "$any" => Ok(()),
        Value::Object(o) if o.len() == 1 && o.contains_key("$tokens") => {
            let wanted = o["$tokens"]
                .as_array()
                .ok_or(format!("{path}: $tokens is not an array"))?;
            match_tokens(wanted, actual, path)
        }
        Value::Object(o) if o.len() == 1 && o.contains_key("$contains") => {
            let items = actual
                .as_array()
                .ok_or(format!("{path}: expected an array, got {actual}"))?;
            for (i, want) in o["$contains"].as_array().unwrap().iter().enumerate() {
                if !items.iter().any(|x| matches(want, x, path).is_ok()) {
                    return Err(format!(
                        "{path}: no element matches $contains[{i}] = {want}"
                    ));
                }
            }
            Ok(())
        }
        Value::Object(o) => {
            let a = actual
                .as_object()
                .ok_or(format!("{path}: expected an object, got {actual}"))?;
            for (k, want) in o {
                let got = a.get(k).unwrap_or(&Value::Null);
                matches(want, got, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        Value::Array(items) => {
            let a = actual
                .as_array()
                .ok_or(format!("{path}: expected an array, got {actual}"))?;
            if a.len() != items.len() {
                return Err(format!(
                    "{path}: expected {} elements, got {}: {actual}",
                    items.len(),
                    a.len()
                ));
            }
            for (i, (want, got)) in items.iter().zip(a).enumerate() {
                matches(want, got, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ if expected == actual => Ok(()),
        _ => Err(format!("{path}: expected {expected}, got {actual}")),
    }
}

fn run_session(path: &Path) -> Vec<String> {
    let name = path.file_stem().unwrap().to_string_lossy().to_string();
    let text = std::fs::read_to_string(path).unwrap();
    let mut steps: Vec<Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let bless = std::env::var_os("WARDEN_LSP_BLESS").is_some();
    let mut server = Server::start(&name);
    let std_dir = server
        .tmp
        .join(format!("warden-{}-stdlib/std", env!("CARGO_PKG_VERSION")));
    let vars = vec![
        ("${STD}", file_uri(&std_dir)),
        ("${WS}", file_uri(&ws_dir())),
    ];
    server.initialize();
    let mut methods = Vec::new();
    for (i, step) in steps.iter_mut().enumerate() {
        let here = format!("{}: step {i}", path.display());
        // `"//"` keys are comments.
        if step
            .as_object()
            .is_some_and(|o| o.keys().all(|k| k == "//"))
        {
            continue;
        }
        let s = substitute(step, &vars);
        let actual = if let Some(file) = s.get("open").and_then(Value::as_str) {
            let text = match s.get("text").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None => std::fs::read_to_string(ws_dir().join(file)).unwrap(),
            };
            server.notify(
                "textDocument/didOpen",
                json!({"textDocument": {
                    "uri": file_uri(&ws_dir().join(file)),
                    "languageId": "ward",
                    "version": 1,
                    "text": text,
                }}),
            );
            methods.push("textDocument/didOpen".to_string());
            continue;
        } else if let Some(m) = s.get("notify").and_then(Value::as_str) {
            server.notify(m, s["params"].clone());
            methods.push(m.to_string());
            continue;
        } else if let Some(m) = s.get("request").and_then(Value::as_str) {
            methods.push(m.to_string());
            server.request(m, s["params"].clone())
        } else if let Some(m) = s.get("notification").and_then(Value::as_str) {
            methods.push(m.to_string());
            server.notification(m)
        } else {
            panic!("{here}: unknown step {s}");
        };
        let unset = s.get("expect").is_none_or(Value::is_null);
        if bless && (unset || std::env::var("WARDEN_LSP_BLESS").as_deref() == Ok("all")) {
            step["expect"] = unsubstitute(&actual, &vars);
            continue;
        }
        let expected = s
            .get("expect")
            .unwrap_or_else(|| panic!("{here}: no `expect`"));
        if let Err(e) = matches(expected, &actual, "") {
            panic!(
                "{here} ({}): {e}\nfull reply: {}",
                s.get("request").or(s.get("notification")).unwrap(),
                serde_json::to_string_pretty(&actual).unwrap()
            );
        }
    }
    server.shutdown();
    if bless {
        let out = serde_json::to_string_pretty(&steps).unwrap();
        std::fs::write(path, out + "\n").unwrap();
    }
    methods
}

fn sessions() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("tests/lsp/sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    v
}

/// Every feature the server advertises is exercised by at least one recorded session.
const FEATURES: &[&str] = &[
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/publishDiagnostics",
    "textDocument/hover",
    "textDocument/definition",
    "textDocument/references",
    "textDocument/completion",
    "textDocument/documentSymbol",
    "workspace/symbol",
    "textDocument/formatting",
    "textDocument/semanticTokens/full",
    "textDocument/codeAction",
    "textDocument/codeLens",
    "workspace/executeCommand",
    "window/showMessage",
];

#[test]
fn recorded_sessions() {
    let mut seen = std::collections::BTreeSet::new();
    let all = sessions();
    assert!(!all.is_empty());
    for s in &all {
        for m in run_session(s) {
            seen.insert(m);
        }
    }
    let missing: Vec<&&str> = FEATURES.iter().filter(|f| !seen.contains(**f)).collect();
    assert!(missing.is_empty(), "no recorded session covers {missing:?}");
}

#[test]
fn capabilities_are_advertised() {
    let mut s = Server::start("capabilities");
    let ws = file_uri(&ws_dir());
    let r = s.request(
        "initialize",
        json!({"processId": null, "rootUri": ws, "capabilities": {}}),
    );
    s.notify("initialized", json!({}));
    let caps = &r["capabilities"];
    assert_eq!(
        caps["textDocumentSync"]["change"],
        json!(2),
        "incremental sync"
    );
    for key in [
        "hoverProvider",
        "definitionProvider",
        "referencesProvider",
        "completionProvider",
        "documentSymbolProvider",
        "workspaceSymbolProvider",
        "documentFormattingProvider",
        "semanticTokensProvider",
        "codeActionProvider",
        "codeLensProvider",
        "executeCommandProvider",
    ] {
        assert!(!caps[key].is_null(), "{key} not advertised: {caps}");
    }
    assert_eq!(r["serverInfo"]["name"], json!("warden"));
    s.shutdown();
}

#[test]
fn unknown_requests_get_an_error_not_a_hang() {
    let mut s = Server::start("unknown");
    s.initialize();
    s.next_id += 1;
    let id = s.next_id;
    s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "warden/nonsense", "params": {}}));
    let v = s.recv("the error reply");
    assert_eq!(v["id"], json!(id));
    assert_eq!(v["error"]["code"], json!(-32601));
    // A request about a document that is not open answers null.
    let r = s.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": "file:///nowhere.ward"}, "position": {"line": 0, "character": 0}}),
    );
    assert_eq!(r, Value::Null);
    s.shutdown();
}

#[test]
fn a_burst_of_edits_is_checked_once_not_once_per_edit() {
    let mut s = Server::start("coalesce");
    s.initialize();
    let uri = "file:///coalesce/burst.ward";
    // A policy large enough that checking it takes a while, as a real one does: the edits
    // queue up behind the first check.
    let mut text = String::from("default allow\n");
    for i in 0..600 {
        text.push_str(&format!(
            "rule r{i} on toolCallRequest when tool.name == \"t{i}\" and args.n > {i} => deny \"c{i}\"\n"
        ));
    }
    s.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "ward", "version": 1, "text": text}}),
    );
    let first = s.notification("textDocument/publishDiagnostics");
    assert_eq!(first["version"], json!(1));
    // 40 edits, each typing one character at the start, then a request: all queued at once.
    const N: i32 = 40;
    let mut burst = String::new();
    for v in 2..=N + 1 {
        let body = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": v},
            "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                          "end": {"line": 0, "character": 0}}, "text": "x"}]}})
        .to_string();
        burst.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    }
    s.stdin.write_all(burst.as_bytes()).unwrap();
    s.stdin.flush().unwrap();
    let symbols = s.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri}}),
    );
    assert!(symbols.is_array(), "{symbols}");
    let published: Vec<Value> = s
        .pending
        .iter()
        .filter(|v| v["method"] == json!("textDocument/publishDiagnostics"))
        .map(|v| v["params"].clone())
        .collect();
    // The queue is drained as it stands when the first edit is read: a few checks at most
    // (the reader may not have queued every edit yet), never one per edit.
    assert!(
        !published.is_empty() && published.len() < 5,
        "{} publications for {N} edits",
        published.len()
    );
    let last = published.last().unwrap();
    assert_eq!(last["version"], json!(N + 1));
    // The text is every edit applied: 40 x's before `default`, one syntax error.
    let diags = last["diagnostics"].as_array().unwrap();
    assert!(!diags.is_empty(), "{last}");
    s.shutdown();
}
