//! The five decisions: one type for the word a policy writes after `=>`, the decisions a hook
//! may legally return ([`crate::acs::fields::HookSpec::decisions`]), what the Guardian combines
//! and the `decision` of an ACS result on the wire. Its words (and their past tenses, used in
//! reasoning text) are spelled here and nowhere else.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A decision: allow, deny, modify, ask or defer, lowercase on the wire.
///
/// Ordered by precedence when rules combine: `Allow < Modify < Ask < Defer < Deny`, so the
/// winning kind of several is their maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionKind {
    /// Let the step proceed.
    Allow,
    /// Let it proceed with modifications.
    Modify,
    /// Route to an approver.
    Ask,
    /// Postpone.
    Defer,
    /// Block the step.
    Deny,
}

impl DecisionKind {
    /// All five, in precedence order (lowest first).
    pub const ALL: [DecisionKind; 5] = [
        DecisionKind::Allow,
        DecisionKind::Modify,
        DecisionKind::Ask,
        DecisionKind::Defer,
        DecisionKind::Deny,
    ];

    /// The word, as a policy writes it and as the wire carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Allow => "allow",
            DecisionKind::Modify => "modify",
            DecisionKind::Ask => "ask",
            DecisionKind::Defer => "defer",
            DecisionKind::Deny => "deny",
        }
    }

    /// The decision a word names, if it names one.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == word)
    }

    /// What happened to the step, for reasoning text: `allowed`, `held for approval`, ….
    pub fn past_tense(self) -> &'static str {
        match self {
            DecisionKind::Allow => "allowed",
            DecisionKind::Modify => "modified",
            DecisionKind::Ask => "held for approval",
            DecisionKind::Defer => "deferred",
            DecisionKind::Deny => "denied",
        }
    }

    /// Whether the step goes ahead (allow or modify).
    pub fn proceeds(self) -> bool {
        matches!(self, DecisionKind::Allow | DecisionKind::Modify)
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for k in DecisionKind::ALL {
            assert_eq!(DecisionKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
            assert_eq!(k.to_string(), k.as_str());
        }
        assert_eq!(DecisionKind::parse("Allow"), None);
        assert!(DecisionKind::ALL.windows(2).all(|w| w[0] < w[1]));
    }
}
