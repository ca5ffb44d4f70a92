//! Everything the user said in a session, compacted (`infer::compact`): the text
//! `found_in(x, user_input)` and the claim check search. Owns the text and its cap; knows
//! nothing of events or policies.
//!
//! The text only grows. A draft writes what its step adds beside the committed text, and the
//! state appends it in place when the step is kept, so a user message costs its own length,
//! not the length of everything said before it (copying the whole text on every message made
//! a long session quadratic). A snapshot shares the committed text; the first commit after it
//! copies the text once.

use std::sync::Arc;

/// The most the user's words may take in a session, compacted, before `found_in(x,
/// user_input)` stops finding anything.
pub const MAX_USER_TEXT: usize = 1 << 20;

/// The user's words: pieces apart (`|`), each cut to its lower-cased letters and digits.
#[derive(Debug, Clone)]
pub struct UserText {
    /// What committed steps added; `None` once the text would pass [`MAX_USER_TEXT`] bytes:
    /// nothing is found in it from then on (fail closed).
    committed: Option<Arc<String>>,
    /// What the step being decided adds, not yet committed (each piece led by `|`).
    added: String,
}

impl Default for UserText {
    fn default() -> Self {
        UserText {
            committed: Some(Arc::new(String::new())),
            added: String::new(),
        }
    }
}

impl PartialEq for UserText {
    /// Equal when they hold the same words, however they are split between committed and
    /// added.
    fn eq(&self, other: &Self) -> bool {
        match (&self.committed, &other.committed) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a.len() + self.added.len() == b.len() + other.added.len()
                    && a.bytes()
                        .chain(self.added.bytes())
                        .eq(b.bytes().chain(other.added.bytes()))
            }
            _ => false,
        }
    }
}

impl UserText {
    /// Adds compacted pieces (pending until [`UserText::settle`]). Past the cap the whole text
    /// is dropped.
    pub fn add(&mut self, pieces: &[String]) {
        let Some(committed) = &self.committed else {
            return;
        };
        let grow: usize = pieces.iter().map(|p| p.len() + 1).sum();
        if committed.len() + self.added.len() + grow > MAX_USER_TEXT {
            self.committed = None;
            self.added = String::new();
            return;
        }
        for p in pieces {
            self.added.push('|');
            self.added.push_str(p);
        }
    }

    /// Whether `piece` (compacted, without `|`) occurs in the text as one contiguous run.
    /// Pieces are kept apart by `|`, which no piece holds, so a run lies wholly in the
    /// committed text or wholly in what is added.
    pub fn contains(&self, piece: &str) -> bool {
        self.committed
            .as_ref()
            .is_some_and(|c| c.contains(piece) || self.added.contains(piece))
    }

    /// Makes what was added part of the committed text, in place unless a snapshot shares it.
    pub fn settle(&mut self) {
        if self.added.is_empty() {
            return;
        }
        let added = std::mem::take(&mut self.added);
        if let Some(c) = &mut self.committed {
            Arc::make_mut(c).push_str(&added);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_piece_is_found_before_and_after_it_is_settled() {
        let mut t = UserText::default();
        t.add(&pieces(&["sendtobob", "iban123"]));
        assert!(t.contains("bob") && t.contains("iban123"));
        assert!(!t.contains("bobiban"), "a run never crosses two pieces");
        let before = t.clone();
        t.settle();
        assert_eq!(t, before);
        t.add(&pieces(&["later"]));
        assert!(t.contains("tobob") && t.contains("later"));
        assert!(!t.contains("123later"));
    }

    #[test]
    fn settling_appends_in_place_unless_shared() {
        let mut t = UserText::default();
        t.add(&pieces(&["first"]));
        t.settle();
        let ptr = Arc::as_ptr(t.committed.as_ref().unwrap());
        t.add(&pieces(&["second"]));
        t.settle();
        assert_eq!(ptr, Arc::as_ptr(t.committed.as_ref().unwrap()));
        let snapshot = t.clone();
        t.add(&pieces(&["third"]));
        t.settle();
        assert!(t.contains("third") && !snapshot.contains("third"));
    }

    #[test]
    fn past_the_cap_nothing_is_found() {
        let mut t = UserText::default();
        t.add(&pieces(&["known"]));
        t.settle();
        t.add(&[String::from("x").repeat(MAX_USER_TEXT)]);
        assert!(!t.contains("known") && !t.contains("x"));
        t.add(&pieces(&["again"]));
        t.settle();
        assert!(!t.contains("again"));
        assert_ne!(t, UserText::default());
    }
}
