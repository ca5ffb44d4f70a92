//! A fast hasher (FxHash, rustc's) for the program's maps and sets keyed by names the policy
//! wrote: hooks, tool names in rules, `tool` declarations, string constants. SipHash's keyed
//! resistance to flooding is for tables an attacker fills; these are filled once, at compile
//! time, from the policy, and a request only looks names up in them (a colliding name costs a
//! few compares against the policy's own keys). Tables keyed by request data (session ids,
//! provenance ids, effect keys) keep std's SipHash.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash: per 8-byte word, rotate, xor, multiply.
#[derive(Debug, Default, Clone, Copy)]
pub struct NameHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl NameHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for NameHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// The hasher of [`NameMap`] and [`NameSet`].
pub type BuildNameHasher = BuildHasherDefault<NameHasher>;

/// A map keyed by policy-side names (module docs).
pub type NameMap<K, V> = HashMap<K, V, BuildNameHasher>;

/// A set of policy-side names (module docs).
pub type NameSet<K> = HashSet<K, BuildNameHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_it_holds_and_nothing_else() {
        let names: NameSet<&str> = ["send_email", "send_money", "a", ""].into_iter().collect();
        for n in ["send_email", "send_money", "a", ""] {
            assert!(names.contains(n));
        }
        for n in ["send_emai", "send_email\0", "b", "send_money_"] {
            assert!(!names.contains(n));
        }
    }
}
