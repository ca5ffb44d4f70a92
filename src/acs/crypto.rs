//! ACS baseline cryptography: per-session HMAC keys, envelope signatures, `request_hash`, the
//! audit-chain `entry_hash` rule, and the SHA-256 and hex helpers everything else uses
//! ([`sha256`], [`sha256_hex`], [`hex`], [`parse_hash`]).
//!
//! Everything hashed or MACed here is the RFC 8785 canonical form ([`crate::acs::jcs`]) of a
//! JSON value, so callers should pass the envelope exactly as it was decoded (not a struct
//! re-serialised with members added or dropped).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fmt;

use crate::acs::jcs;

type HmacSha256 = Hmac<Sha256>;

/// The only signature algorithm implemented: the ACS-Core baseline.
pub const HMAC_SHA256: &str = "HMAC-SHA256";

/// Derives the per-session HMAC key: HKDF-SHA256 with no salt, `info` = the UTF-8
/// `session_id`, 32 bytes of output (the convention both upstream implementations follow).
pub fn session_key(ikm: &[u8], session_id: &str) -> [u8; 32] {
    let hk = Hkdf::<Sha256>::new(None, ikm);
    let mut okm = [0u8; 32];
    // 32 bytes is far below HKDF-SHA256's 255 * 32 byte limit, so expand cannot fail.
    hk.expand(session_id.as_bytes(), &mut okm)
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    okm
}

/// Why an envelope's signature did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The envelope is not an object with `params`, `result` or `error`.
    #[error("not a request or response envelope")]
    NotAnEnvelope,
    /// No `signature` member where one belongs.
    #[error("signature is missing")]
    Missing,
    /// The signature member is not `{algorithm, value, key_id}` with string values.
    #[error("signature is malformed: {0}")]
    Malformed(&'static str),
    /// An algorithm other than HMAC-SHA256.
    #[error("unsupported signature algorithm {0:?}")]
    UnsupportedAlgorithm(String),
    /// The MAC does not match the envelope.
    #[error("signature does not match the envelope")]
    Mismatch,
}

/// Which member of the envelope holds the signature: `params`, `result` or `error`.
fn signature_holder(envelope: &Value) -> Option<&'static str> {
    let obj = envelope.as_object()?;
    ["params", "result", "error"]
        .into_iter()
        .find(|k| obj.get(*k).is_some_and(Value::is_object))
}

/// The bytes a signature covers: JCS of the envelope with `params.signature`,
/// `result.signature` or `error.signature` removed.
pub fn signing_input(envelope: &Value) -> Vec<u8> {
    let mut copy = envelope.clone();
    if let Value::Object(top) = &mut copy {
        for k in ["params", "result", "error"] {
            if let Some(Value::Object(inner)) = top.get_mut(k) {
                inner.shift_remove("signature");
            }
        }
    }
    jcs::to_vec(&copy)
}

fn mac(key: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length.
    HmacSha256::new_from_slice(key).expect("HMAC accepts any key length")
}

/// Computes the HMAC-SHA256 signature value (standard base64, padded) of an envelope.
pub fn sign(key: &[u8], envelope: &Value) -> String {
    let mut m = mac(key);
    m.update(&signing_input(envelope));
    STANDARD.encode(m.finalize().into_bytes())
}

/// Signs `envelope` and stores `{algorithm: "HMAC-SHA256", value, key_id}` in its
/// `params`/`result`/`error` member, replacing any previous signature.
pub fn attach_signature(
    key: &[u8],
    key_id: &str,
    envelope: &mut Value,
) -> Result<(), SignatureError> {
    let holder = signature_holder(envelope).ok_or(SignatureError::NotAnEnvelope)?;
    let value = sign(key, envelope);
    let mut sig = Map::new();
    sig.insert("algorithm".into(), Value::String(HMAC_SHA256.into()));
    sig.insert("value".into(), Value::String(value));
    sig.insert("key_id".into(), Value::String(key_id.into()));
    if let Some(Value::Object(inner)) = envelope.get_mut(holder) {
        inner.insert("signature".into(), Value::Object(sig));
    }
    Ok(())
}

/// Checks an envelope's HMAC-SHA256 signature against `key` in constant time.
pub fn verify(key: &[u8], envelope: &Value) -> Result<(), SignatureError> {
    let holder = signature_holder(envelope).ok_or(SignatureError::NotAnEnvelope)?;
    let sig = envelope[holder]
        .get("signature")
        .ok_or(SignatureError::Missing)?;
    let sig = sig
        .as_object()
        .ok_or(SignatureError::Malformed("not an object"))?;
    let text = |k: &'static str| {
        sig.get(k)
            .and_then(Value::as_str)
            .ok_or(SignatureError::Malformed(k))
    };
    let algorithm = text("algorithm")?;
    let value = text("value")?;
    text("key_id")?;
    if algorithm != HMAC_SHA256 {
        return Err(SignatureError::UnsupportedAlgorithm(algorithm.to_owned()));
    }
    let raw = STANDARD
        .decode(value)
        .map_err(|_| SignatureError::Malformed("value is not padded standard base64"))?;
    let mut m = mac(key);
    m.update(&signing_input(envelope));
    m.verify_slice(&raw).map_err(|_| SignatureError::Mismatch)
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lowercase hex SHA-256 of `bytes` (a policy digest, a test's stand-in hash).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&sha256(bytes))
}

/// Lowercase hex of `bytes`, two digits each.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Decodes a 64-character lowercase hex SHA-256 digest.
pub fn parse_hash(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

/// `request_hash` of a ContextEntry: lowercase hex SHA-256 of JCS(request `params`), with
/// `params.signature` included (agt-go's reading; the spec leaves it open).
pub fn request_hash(params: &Value) -> String {
    hex(&Sha256::digest(jcs::to_vec(params)))
}

/// [`request_hash`] of `params` with its `payload` member read from `payload` (the params of
/// a request whose payload moved into the typed request: no copy of it is put back).
pub fn request_hash_with_payload(params: &Value, payload: &Value) -> String {
    match params {
        Value::Object(m) => hex(&Sha256::digest(jcs::object_replacing(
            m, "payload", payload,
        ))),
        other => request_hash(other),
    }
}

/// Lowercase hex SHA-256 of the RFC 8785 canonical form of `v` (Warden's `action_hash`).
pub fn canonical_hash(v: &Value) -> String {
    hex(&Sha256::digest(jcs::to_vec(v)))
}

/// A `previous_hash` that is not 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("previous_hash {0:?} is not 64 lowercase hex digits")]
pub struct InvalidHash(pub String);

/// `entry_hash` of an audit ContextEntry: lowercase hex SHA-256 of
/// JCS(entry minus `entry_hash` and `previous_hash`) followed by the raw 32 bytes of
/// `previous_hash` (nothing for the first entry).
pub fn entry_hash(entry: &Value, previous_hash: Option<&str>) -> Result<String, InvalidHash> {
    let prev = match previous_hash {
        None => None,
        Some(h) => Some(parse_hash(h).ok_or_else(|| InvalidHash(h.to_owned()))?),
    };
    Ok(entry_hash_raw(entry, prev.as_ref()))
}

/// [`entry_hash`] of an entry held as a map (the chain's own entries), without copying it.
pub fn entry_hash_of_map(
    entry: &Map<String, Value>,
    previous_hash: Option<&str>,
) -> Result<String, InvalidHash> {
    let prev = match previous_hash {
        None => None,
        Some(h) => Some(parse_hash(h).ok_or_else(|| InvalidHash(h.to_owned()))?),
    };
    Ok(hash_content(
        &jcs::object_without(entry, &HASH_FIELDS),
        prev.as_ref(),
    ))
}

/// The members an entry's hash does not cover: the hashes themselves.
const HASH_FIELDS: [&str; 2] = ["entry_hash", "previous_hash"];

fn entry_hash_raw(entry: &Value, prev: Option<&[u8; 32]>) -> String {
    let content = match entry {
        Value::Object(m) => jcs::object_without(m, &HASH_FIELDS),
        other => jcs::to_vec(other),
    };
    hash_content(&content, prev)
}

fn hash_content(content: &[u8], prev: Option<&[u8; 32]>) -> String {
    let mut h = Sha256::new();
    h.update(content);
    if let Some(p) = prev {
        h.update(p);
    }
    hex(&h.finalize())
}

/// The first broken link found by [`verify_chain`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainError {
    /// Index of the offending entry.
    pub index: usize,
    /// What is wrong with it.
    pub reason: ChainErrorReason,
}

/// Why a chain entry does not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainErrorReason {
    /// The entry is not a JSON object.
    NotAnObject,
    /// `entry_hash` is absent or not 64 lowercase hex digits.
    BadEntryHash,
    /// The first entry has a non-null `previous_hash`.
    RootHasPrevious,
    /// A later entry has no `previous_hash`, or it is not a valid hash.
    MissingPrevious,
    /// `previous_hash` differs from the preceding entry's `entry_hash`.
    PreviousMismatch,
    /// The recomputed hash differs from the stored `entry_hash`.
    EntryHashMismatch {
        /// The hash recomputed from the entry's content.
        computed: String,
    },
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.index;
        match &self.reason {
            ChainErrorReason::NotAnObject => write!(f, "entry {i} is not an object"),
            ChainErrorReason::BadEntryHash => {
                write!(f, "entry {i} has no valid entry_hash")
            }
            ChainErrorReason::RootHasPrevious => {
                write!(f, "entry {i} is the root but has a previous_hash")
            }
            ChainErrorReason::MissingPrevious => {
                write!(f, "entry {i} has no valid previous_hash")
            }
            ChainErrorReason::PreviousMismatch => {
                write!(
                    f,
                    "entry {i}'s previous_hash is not entry {}'s entry_hash",
                    i - 1
                )
            }
            ChainErrorReason::EntryHashMismatch { computed } => {
                write!(
                    f,
                    "entry {i}'s entry_hash does not match its content ({computed})"
                )
            }
        }
    }
}

impl std::error::Error for ChainError {}

/// Checks a whole chain from its root: linkage (`previous_hash` = the preceding `entry_hash`,
/// null or absent on the root) and every `entry_hash`. Reports the first broken link.
pub fn verify_chain(entries: &[Value]) -> Result<(), ChainError> {
    let mut prev: Option<[u8; 32]> = None;
    for (index, entry) in entries.iter().enumerate() {
        let fail = |reason| ChainError { index, reason };
        let obj = entry
            .as_object()
            .ok_or_else(|| fail(ChainErrorReason::NotAnObject))?;
        let stored = obj
            .get("entry_hash")
            .and_then(Value::as_str)
            .and_then(|s| parse_hash(s).map(|h| (s, h)));
        let (stored_hex, stored) = stored.ok_or_else(|| fail(ChainErrorReason::BadEntryHash))?;
        let previous = obj.get("previous_hash").unwrap_or(&Value::Null);
        match (prev, previous) {
            (None, Value::Null) => {}
            (None, _) => return Err(fail(ChainErrorReason::RootHasPrevious)),
            (Some(expected), Value::String(s)) => {
                let got = parse_hash(s).ok_or_else(|| fail(ChainErrorReason::MissingPrevious))?;
                if got != expected {
                    return Err(fail(ChainErrorReason::PreviousMismatch));
                }
            }
            (Some(_), _) => return Err(fail(ChainErrorReason::MissingPrevious)),
        }
        let computed = entry_hash_raw(entry, prev.as_ref());
        if computed != stored_hex {
            return Err(fail(ChainErrorReason::EntryHashMismatch { computed }));
        }
        prev = Some(stored);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sign_verify_roundtrip_and_tamper() {
        let key = session_key(b"secret", "5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30");
        let mut env = json!({"jsonrpc":"2.0","id":1,"method":"system/ping",
            "params":{"acs_version":"0.1.0","payload":{}}});
        assert_eq!(verify(&key, &env), Err(SignatureError::Missing));
        attach_signature(&key, "k1", &mut env).unwrap();
        assert_eq!(verify(&key, &env), Ok(()));
        assert_eq!(verify(b"other", &env), Err(SignatureError::Mismatch));
        env["params"]["payload"]["echo"] = json!("x");
        assert_eq!(verify(&key, &env), Err(SignatureError::Mismatch));
        env["params"]["signature"]["value"] = json!("not base64!");
        assert!(matches!(
            verify(&key, &env),
            Err(SignatureError::Malformed(_))
        ));
        env["params"]["signature"]["algorithm"] = json!("ML-DSA-65");
        assert!(matches!(
            verify(&key, &env),
            Err(SignatureError::UnsupportedAlgorithm(_))
        ));
        assert_eq!(verify(&key, &json!([])), Err(SignatureError::NotAnEnvelope));
    }

    #[test]
    fn chain_reports_first_broken_link() {
        let e0 = json!({"entry_id":"1","step_id":"a","step_type":"steps/sessionStart"});
        let h0 = entry_hash(&e0, None).unwrap();
        let mut e0s = e0.clone();
        e0s["entry_hash"] = json!(h0);
        e0s["previous_hash"] = Value::Null;
        let e1 = json!({"entry_id":"2","step_id":"b","step_type":"steps/userMessage"});
        let h1 = entry_hash(&e1, Some(&h0)).unwrap();
        let mut e1s = e1.clone();
        e1s["entry_hash"] = json!(h1);
        e1s["previous_hash"] = json!(h0);
        assert_eq!(verify_chain(&[e0s.clone(), e1s.clone()]), Ok(()));

        let mut bad = e1s.clone();
        bad["step_id"] = json!("c");
        let err = verify_chain(&[e0s.clone(), bad]).unwrap_err();
        assert_eq!(err.index, 1);
        assert!(matches!(
            err.reason,
            ChainErrorReason::EntryHashMismatch { .. }
        ));

        let err = verify_chain(&[e1s.clone()]).unwrap_err();
        assert_eq!(
            (err.index, err.reason),
            (0, ChainErrorReason::RootHasPrevious)
        );
        let err = verify_chain(&[e0s.clone(), e0s.clone()]).unwrap_err();
        assert_eq!(
            (err.index, err.reason),
            (1, ChainErrorReason::MissingPrevious)
        );
        assert!(entry_hash(&e1, Some("ABC")).is_err());
    }
}
