//! Lineage inference: where an argument that arrived without `derived_from` was taken from.
//!
//! Content that enters the session (user messages, the Intent's text, tool outputs, retrieval
//! and memory results, agent replies) is cut into identifier-like tokens, and each token is
//! filed in a per-session index with the origins and labels of the content it appeared in. An
//! argument value is cut the same way; its inferred sources are the origins in which *every*
//! one of its tokens appeared. A value with a token found nowhere, or with no token at all,
//! has unknown sources (read as `external`, never as clean). Lookup costs O(tokens of the
//! value), whatever the history; the index is capped per session, and once full every
//! inference answers "unknown" (fail closed).
//!
//! This module owns the index entries (how text is cut is `text`'s); it must not know about
//! rules or the VM.

/// What the index keeps per token: the own origins (bits) of the content it appeared in, and
/// the union and intersection of that content's labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub origins: u8,
    pub labels_any: u64,
    pub labels_all: u64,
    /// The places of the content it appeared in (`read_at`).
    pub places: u64,
}

impl Seen {
    pub fn merge(self, other: Seen) -> Seen {
        Seen {
            origins: self.origins | other.origins,
            labels_any: self.labels_any | other.labels_any,
            labels_all: self.labels_all & other.labels_all,
            places: self.places | other.places,
        }
    }
}

/// The index key of a token: a 64-bit SipHash under keys drawn once per process, so a
/// collision (two tokens read as one) has probability about 2⁻⁶⁴ per pair and cannot be
/// aimed at from outside. The index is rebuilt from the journal on restore, so keys need not
/// survive a restart.
pub fn token_key(token: &str) -> u64 {
    use std::hash::BuildHasher;
    static KEYS: std::sync::LazyLock<std::collections::hash_map::RandomState> =
        std::sync::LazyLock::new(std::collections::hash_map::RandomState::new);
    KEYS.hash_one(token)
}

/// The token index: each token's [`token_key`] to where it was seen. The keys are already
/// keyed SipHash values, unpredictable without the process's key, so the table uses them as
/// its hashes rather than hashing them a second time.
pub type TokenIndex =
    std::collections::HashMap<u64, Seen, std::hash::BuildHasherDefault<KeyAsHash>>;

/// The hasher of [`TokenIndex`]: a `u64` key is its own hash.
#[derive(Clone, Copy, Default)]
pub struct KeyAsHash(u64);

impl std::hash::Hasher for KeyAsHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys reach it; any other input is still hashed, slowly.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Tokens indexed per session at most; past it, inference answers "unknown".
pub const MAX_TOKENS: usize = 262_144;

pub use crate::text::{compact_leaves, each_token, each_value_token};
use serde_json::Value;

/// The [`token_key`] of each token of a JSON value, in order (a value has a handful).
pub fn value_token_keys(v: &Value) -> smallvec::SmallVec<[u64; 8]> {
    let mut keys = smallvec::SmallVec::new();
    each_value_token(v, &mut |t| keys.push(token_key(t)), 0);
    keys
}

#[cfg(test)]
mod tests {
    use crate::text::tokens;

    fn toks(s: &str) -> Vec<String> {
        let mut v = Vec::new();
        tokens(s, &mut v);
        v
    }

    #[test]
    fn identifiers_are_normalised() {
        assert_eq!(
            toks("Visit https://www.Example.com/a/ now."),
            vec!["visit", "example.com", "example.com/a", "now"]
        );
        assert_eq!(
            toks("mail bob@x.io, IBAN GB29NWBK60161331926819"),
            vec!["mail", "bob@x.io", "iban", "gb29nwbk60161331926819"]
        );
        assert_eq!(toks("www.true-site.com"), vec!["true-site.com"]);
        assert_eq!(toks("a an of"), Vec::<String>::new());
    }
}
