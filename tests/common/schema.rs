//! Locating the vendored ACS material (`vendor/acs`) and validating envelopes against the ACS
//! v0.1.0 schemas with a real JSON Schema (2020-12) validator.
//!
//! `response-envelope.json` refers to `modifications.json`, `request-envelope.json`,
//! `ask-details.json` and `defer-details.json` by relative URI. The first two are loaded from
//! the vendored schema folder; the last two could not be obtained from upstream, so Warden's
//! stand-ins in `tests/acs/schemas/` are registered in their place. Nothing is fetched.

use std::path::PathBuf;
use std::sync::OnceLock;

use jsonschema::{Registry, Validator};
use serde_json::Value;

/// Base URI the current response schema uses for its siblings.
const GENAI_BASE: &str =
    "https://genai-security-project.github.io/agent-control-standard/schema/v0.1.0/";
/// Older base URI used by the request and modifications schemas' own `$id`s.
const ACS_ORG_BASE: &str = "https://acs.org/schema/v0.1.0/";

/// The ACS material: `vendor/acs` in this repository (`$WARDEN_ACS_DIR` points at another
/// copy with the same layout). Panics (never skips) when it is missing.
pub fn acs_dir() -> PathBuf {
    let dir = std::env::var_os("WARDEN_ACS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/vendor/acs")));
    assert!(
        dir.join("v0.1.0/response-envelope.json").is_file(),
        "ACS material not found at {} (WARDEN_ACS_DIR must name a folder holding v0.1.0/ and fixtures/)",
        dir.display()
    );
    dir
}

/// This crate's test data folder, `tests/acs`.
pub fn test_data_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/acs"))
}

/// Reads and parses a JSON file, panicking with its path on failure.
pub fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

struct Validators {
    response: Validator,
    request: Validator,
}

fn validators() -> &'static Validators {
    static V: OnceLock<Validators> = OnceLock::new();
    V.get_or_init(|| {
        let vendored = acs_dir().join("v0.1.0");
        let local = test_data_dir().join("schemas");
        let request = read_json(&vendored.join("request-envelope.json"));
        let response = read_json(&vendored.join("response-envelope.json"));
        let modifications = read_json(&vendored.join("modifications.json"));
        let ask = read_json(&local.join("ask-details.json"));
        let defer = read_json(&local.join("defer-details.json"));
        let mut resources: Vec<(String, Value)> = Vec::new();
        for base in [GENAI_BASE, ACS_ORG_BASE] {
            resources.push((format!("{base}request-envelope.json"), request.clone()));
            resources.push((format!("{base}modifications.json"), modifications.clone()));
            resources.push((format!("{base}ask-details.json"), ask.clone()));
            resources.push((format!("{base}defer-details.json"), defer.clone()));
        }
        resources.push((
            format!("{GENAI_BASE}response-envelope.json"),
            response.clone(),
        ));
        let registry: &'static Registry<'static> = Box::leak(Box::new(
            Registry::new()
                .extend(resources)
                .expect("schema URIs are valid")
                .prepare()
                .expect("schemas resolve offline"),
        ));
        let build = |schema: &Value| {
            jsonschema::options()
                .offline()
                .with_registry(registry)
                .should_validate_formats(true)
                .build(schema)
                .expect("schema compiles")
        };
        Validators {
            response: build(&response),
            request: build(&request),
        }
    })
}

fn errors(validator: &Validator, v: &Value) -> Vec<String> {
    validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// The schema violations of a response envelope (empty when valid).
pub fn response_errors(v: &Value) -> Vec<String> {
    errors(&validators().response, v)
}

/// The schema violations of a request envelope (empty when valid).
pub fn request_errors(v: &Value) -> Vec<String> {
    errors(&validators().request, v)
}

/// Asserts that `v` is a schema-valid ACS response envelope.
pub fn assert_valid_response(v: &Value) {
    let errs = response_errors(v);
    assert!(
        errs.is_empty(),
        "response does not match response-envelope.json:\n  {}\n{}",
        errs.join("\n  "),
        serde_json::to_string_pretty(v).unwrap_or_default()
    );
}

/// Asserts that `v` is a schema-valid ACS request envelope.
pub fn assert_valid_request(v: &Value) {
    let errs = request_errors(v);
    assert!(
        errs.is_empty(),
        "request does not match request-envelope.json:\n  {}\n{}",
        errs.join("\n  "),
        serde_json::to_string_pretty(v).unwrap_or_default()
    );
}
