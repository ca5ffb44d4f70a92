//! What the user said in a session, compacted (`infer::compact`): the text
//! `found_in(x, user_input)` and the claim check search. Owns the text, its chunks and its
//! cap; knows nothing of events or policies.
//!
//! The text only grows at its end. A draft writes what its step adds beside the committed
//! text, and the state appends it in place when the step is kept, so a user message costs its
//! own length, not the length of everything said before it (copying the whole text on every
//! message made a long session quadratic). Older words are sealed in chunks a snapshot
//! shares; a search reads the newest first; past [`MAX_USER_TEXT`] the oldest chunks are
//! forgotten.

use std::collections::VecDeque;
use std::sync::Arc;

/// The most of the user's words a session keeps, compacted: past it the oldest are forgotten,
/// so a value the user said only before them is not found (fail closed).
pub const MAX_USER_TEXT: usize = 1 << 20;

/// The size a chunk of older words is sealed at: a search reads the newest words first, so a
/// value the user said lately is found after reading a few kilobytes, whatever the session's
/// length.
const CHUNK: usize = 4 << 10;

/// The user's words: pieces apart (`|`), each cut to its lower-cased letters and digits.
/// Cloning it (a draft, a snapshot) copies two pointers.
#[derive(Debug, Clone, Default)]
pub struct UserText {
    /// Older words in sealed chunks of whole pieces, oldest first.
    sealed: Arc<VecDeque<Arc<str>>>,
    /// The bytes in `sealed`.
    sealed_len: usize,
    /// The newest committed words (under [`CHUNK`] bytes), appended in place.
    tail: Arc<String>,
    /// What the step being decided adds, not yet committed (each piece led by `|`).
    added: String,
}

impl PartialEq for UserText {
    /// Equal when they hold the same words, however they are split into chunks or between
    /// committed and added.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.bytes().eq(other.bytes())
    }
}

impl UserText {
    fn len(&self) -> usize {
        self.sealed_len + self.tail.len() + self.added.len()
    }

    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.sealed
            .iter()
            .flat_map(|c| c.bytes())
            .chain(self.tail.bytes())
            .chain(self.added.bytes())
    }

    /// Adds compacted pieces, pending until [`UserText::settle`].
    pub fn add(&mut self, pieces: &[String]) {
        for p in pieces {
            self.added.push('|');
            self.added.push_str(p);
        }
    }

    /// Whether `piece` (compacted, without `|`) occurs in the text as one contiguous run,
    /// newest words first. Pieces are kept apart by `|`, which no piece holds, and chunks hold
    /// whole pieces, so a run lies wholly in one chunk.
    pub fn contains(&self, piece: &str) -> bool {
        let needle = piece.as_bytes();
        if scan(self.added.as_bytes(), needle) || scan(self.tail.as_bytes(), needle) {
            return true;
        }
        if self.sealed.is_empty() {
            return false;
        }
        // One searcher for every sealed chunk: building it is most of a short chunk's cost.
        let finder = memchr::memmem::Finder::new(needle);
        self.sealed
            .iter()
            .rev()
            .any(|c| finder.find(c.as_bytes()).is_some())
    }

    /// Makes what was added part of the committed text, in place unless a snapshot shares
    /// the newest chunk; seals the newest chunk once it is full and forgets the oldest past
    /// [`MAX_USER_TEXT`].
    pub fn settle(&mut self) {
        if self.added.is_empty() {
            return;
        }
        let added = std::mem::take(&mut self.added);
        Arc::make_mut(&mut self.tail).push_str(&added);
        if self.tail.len() < CHUNK {
            return;
        }
        let full: Arc<str> = Arc::from(self.tail.as_str());
        self.tail = Arc::default();
        self.sealed_len += full.len();
        let sealed = Arc::make_mut(&mut self.sealed);
        sealed.push_back(full);
        while self.sealed_len > MAX_USER_TEXT {
            let Some(old) = sealed.pop_front() else { break };
            self.sealed_len -= old.len();
        }
    }
}

/// Whether `needle` occurs in `text`. A short text (the newest words, under a chunk) is read
/// with a plain scan, first byte by `memchr`: a substring searcher costs more to build than
/// such a text costs to read. A long one, or a long needle, gets the searcher, whose time
/// does not depend on how the two are made.
fn scan(text: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    if text.len() > CHUNK || needle.len() > 64 {
        return memchr::memmem::find(text, needle).is_some();
    }
    let mut at = 0;
    while let Some(i) = memchr::memchr(first, &text[at..]) {
        let start = at + i + 1;
        match text.get(start..start + rest.len()) {
            Some(tail) if tail == rest => return true,
            Some(_) => at = start,
            None => return false,
        }
    }
    false
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
        let ptr = Arc::as_ptr(&t.tail);
        t.add(&pieces(&["second"]));
        t.settle();
        assert_eq!(ptr, Arc::as_ptr(&t.tail));
        let snapshot = t.clone();
        t.add(&pieces(&["third"]));
        t.settle();
        assert!(t.contains("third") && !snapshot.contains("third"));
        assert!(snapshot.contains("second"));
    }

    #[test]
    fn full_chunks_are_sealed_and_still_searched() {
        let mut t = UserText::default();
        for i in 0..2_000 {
            t.add(&[format!("message{i}word")]);
            t.settle();
        }
        assert!(t.sealed.len() > 1, "{} chunks", t.sealed.len());
        assert!(t.contains("message0word") && t.contains("message1999word"));
        assert!(!t.contains("message2000word"));
        assert!(
            t.sealed.iter().all(|c| c.starts_with('|')),
            "chunks hold whole pieces"
        );
    }

    #[test]
    fn past_the_cap_the_oldest_words_are_forgotten() {
        let mut t = UserText::default();
        t.add(&pieces(&["oldest"]));
        t.settle();
        for i in 0..(2 * MAX_USER_TEXT / 1000) {
            t.add(&[format!("{i}{}", "x".repeat(1000))]);
            t.settle();
        }
        assert!(!t.contains("oldest"), "forgotten: not found (fail closed)");
        assert!(t.contains(&format!("{}x", 2 * MAX_USER_TEXT / 1000 - 1)));
        assert!(t.len() <= MAX_USER_TEXT + CHUNK);
    }

    proptest::proptest! {
        /// The plain scan finds a needle exactly where the substring searcher does, on texts
        /// and needles of few letters (so near misses abound), short and past a chunk.
        #[test]
        fn the_plain_scan_agrees_with_the_searcher(
            text in "[ab|]{0,40}",
            needle in "[ab]{0,6}",
            long in proptest::bool::ANY,
        ) {
            let text = if long { text.repeat(CHUNK / 8) } else { text };
            let wanted = memchr::memmem::find(text.as_bytes(), needle.as_bytes()).is_some();
            proptest::prop_assert_eq!(scan(text.as_bytes(), needle.as_bytes()), wanted);
        }
    }
}
