//! The language's keywords, as the language server sees them: one table that completion
//! (`complete.rs`) and semantic tokens (`tokens.rs`) both read. `tests/keywords.rs` holds it,
//! and the editor grammars in `editors/`, to the keyword-like literals of
//! `grammar/warden.pest`: a word the grammar gains or loses fails that test until every list
//! follows.

/// Where a word is a keyword.
#[derive(Debug, Clone, Copy)]
pub(super) enum Where {
    /// Everywhere the checker resolved nothing else.
    Everywhere,
    /// Highlighted only inside the items these words start (elsewhere a tool, an argument or a
    /// field may be called so); completion offers it everywhere, as it always has.
    Within(&'static [&'static str]),
    /// Only inside the items these words start, for completion too: an `effect` declaration's
    /// `for`, `key`, `lease`, which are common names elsewhere.
    Only(&'static [&'static str]),
}

/// An ask decision's newer parts: `expires 10m`, `extend intent this_request`.
const ASK: Where = Where::Within(&["rule", "default"]);
/// A test step's words.
const TEST: Where = Where::Within(&["test"]);
const EFFECT: Where = Where::Only(&["effect"]);

/// Every keyword of the language, with where it is one.
pub(super) const KEYWORDS: &[(&str, Where)] = &[
    // Items (`ITEM_WORDS`) and their parts.
    ("package", Where::Everywhere),
    ("use", Where::Everywhere),
    ("rego", Where::Everywhere),
    ("data", Where::Everywhere),
    ("as", Where::Everywhere),
    ("let", Where::Everywhere),
    ("pred", Where::Everywhere),
    ("label", Where::Everywhere),
    ("redact", Where::Everywhere),
    ("rule", Where::Everywhere),
    ("on", Where::Everywhere),
    ("when", Where::Everywhere),
    ("default", Where::Everywhere),
    ("mask", Where::Everywhere),
    ("effect", Where::Everywhere),
    ("for", EFFECT),
    ("key", EFFECT),
    ("lease", EFFECT),
    ("not_executed_on_error", EFFECT),
    // `tool` is a payload field elsewhere (`tool.name`).
    ("tool", Where::Within(&["tool"])),
    ("test", Where::Everywhere),
    // Decisions and their parts.
    ("allow", Where::Everywhere),
    ("deny", Where::Everywhere),
    ("ask", Where::Everywhere),
    ("defer", Where::Everywhere),
    ("modify", Where::Everywhere),
    ("approver", Where::Everywhere),
    ("human", Where::Everywhere),
    ("agent", Where::Everywhere),
    ("service", Where::Everywhere),
    ("question", Where::Everywhere),
    ("timeout", Where::Everywhere),
    ("else", Where::Everywhere),
    ("resolve", Where::Everywhere),
    ("because", Where::Everywhere),
    ("expires", ASK),
    ("extend", ASK),
    ("this_request", ASK),
    ("set", Where::Everywhere),
    ("replace", Where::Everywhere),
    ("with", Where::Everywhere),
    // `redact each k, a in args when …`: a common name elsewhere.
    ("each", Where::Within(&["rule", "default"])),
    // Expressions and history.
    ("and", Where::Everywhere),
    ("or", Where::Everywhere),
    ("not", Where::Everywhere),
    ("in", Where::Everywhere),
    ("has", Where::Everywhere),
    ("matches", Where::Everywhere),
    ("true", Where::Everywhere),
    ("false", Where::Everywhere),
    ("null", Where::Everywhere),
    ("any", Where::Everywhere),
    ("all", Where::Everywhere),
    ("count", Where::Everywhere),
    ("exists", Where::Everywhere),
    ("this", Where::Everywhere),
    ("turn", Where::Everywhere),
    ("turns", Where::Everywhere),
    ("last", Where::Everywhere),
    ("session", Where::Everywhere),
    ("by", Where::Everywhere),
    ("intent", Where::Everywhere),
    ("permits", Where::Everywhere),
    // Test steps.
    ("strict", Where::Everywhere),
    ("from", Where::Everywhere),
    ("user", Where::Everywhere),
    ("call", Where::Everywhere),
    ("result", Where::Everywhere),
    ("retrieve", Where::Everywhere),
    ("memory", Where::Everywhere),
    ("compact", Where::Everywhere),
    ("skill", Where::Everywhere),
    ("subagent", Where::Everywhere),
    ("send", Where::Everywhere),
    ("expect", Where::Everywhere),
    ("approve", TEST),
    ("success", TEST),
    ("failure", TEST),
    ("blocked", TEST),
    ("read", TEST),
    ("write", TEST),
    ("register", TEST),
    ("load", TEST),
    ("unload", TEST),
    ("digest", TEST),
];

/// The words that start a top-level item at the start of a line.
pub(super) const ITEM_WORDS: &[&str] = &[
    "package", "use", "let", "label", "rule", "default", "test", "mask", "effect", "pred", "tool",
];

/// Whether `word` is highlighted as a keyword inside an item started by `item`.
pub(super) fn highlighted(word: &str, item: &str) -> bool {
    KEYWORDS.iter().any(|(w, at)| {
        *w == word
            && match at {
                Where::Everywhere => true,
                Where::Within(items) | Where::Only(items) => items.contains(&item),
            }
    })
}

/// The keywords completion offers inside an item started by `item`.
pub(super) fn offered(item: &str) -> impl Iterator<Item = &'static str> + '_ {
    KEYWORDS.iter().filter_map(move |(w, at)| match at {
        Where::Only(items) if !items.contains(&item) => None,
        _ => Some(*w),
    })
}

/// Every word the language server treats as a keyword somewhere.
pub fn all() -> impl Iterator<Item = &'static str> {
    KEYWORDS.iter().map(|(w, _)| *w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_word_is_a_keyword_once() {
        for w in ITEM_WORDS {
            assert!(all().any(|k| k == *w), "{w}");
        }
        let mut words: Vec<&str> = all().collect();
        words.sort_unstable();
        let n = words.len();
        words.dedup();
        assert_eq!(n, words.len(), "a keyword listed twice");
    }
}
