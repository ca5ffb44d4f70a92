//! Lineage inference, modelled plainly (docs/state.md, "Lineage inference"): every token of the
//! content that entered the session, with the own origin and labels of the content it came in,
//! in one list that is scanned; and the user's words, compacted, in another. No hashing, no
//! caps, no caches: rebuilt from the recorded steps for every decision. Text is cut as `text`
//! cuts it; what is indexed, when, and how a value's sources follow from it is modelled here.

use std::collections::BTreeSet;

use serde_json::Value;

/// What inference can see: every token that entered, and what the user said.
#[derive(Debug, Default)]
pub struct Index {
    /// (token, own origin of the content it came in, that content's labels and places)
    entries: Vec<(String, String, BTreeSet<String>, BTreeSet<String>)>,
    /// The user's words, each piece compacted.
    user_pieces: Vec<String>,
}

/// Where every token of a value appeared: the origins each token was seen in, intersected
/// over the tokens, and the labels of some / every piece of content holding one.
pub struct Found {
    pub origins: BTreeSet<String>,
    pub any: BTreeSet<String>,
    pub all: BTreeSet<String>,
}

impl Index {
    /// Files `value`'s tokens under content of origin `own` carrying `labels`; content the user
    /// wrote is kept as the user's words too.
    pub fn add(
        &mut self,
        value: &Value,
        own: &str,
        labels: &BTreeSet<String>,
        places: &BTreeSet<String>,
    ) {
        let mut toks = Vec::new();
        crate::text::value_tokens(value, &mut toks, 0);
        for t in toks {
            self.entries
                .push((t, own.to_string(), labels.clone(), places.clone()));
        }
        if own == "user_input" {
            crate::text::compact_leaves(value, &mut self.user_pieces, 0);
        }
    }

    /// Where `value` was taken from; `None` when a token of it appeared nowhere, it has no
    /// token, or no origin holds every token.
    pub fn sources(&self, value: &Value) -> Option<Found> {
        let mut toks = Vec::new();
        crate::text::value_tokens(value, &mut toks, 0);
        if toks.is_empty() {
            return None;
        }
        let mut found: Option<Found> = None;
        for t in &toks {
            let seen: Vec<_> = self.entries.iter().filter(|(k, ..)| k == t).collect();
            if seen.is_empty() {
                return None;
            }
            // An origin the wire does not know stands for none (its labels still count).
            let origins: BTreeSet<String> = seen
                .iter()
                .map(|(_, o, ..)| o.clone())
                .filter(|o| crate::acs::fields::ORIGINS.contains(&o.as_str()))
                .collect();
            let mut all: Option<BTreeSet<String>> = found.as_ref().map(|f| f.all.clone());
            let mut any = found.as_ref().map(|f| f.any.clone()).unwrap_or_default();
            for (_, _, labels, _) in &seen {
                any.extend(labels.iter().cloned());
                all = Some(match all {
                    Some(a) => a.intersection(labels).cloned().collect(),
                    None => labels.clone(),
                });
            }
            let origins = match &found {
                Some(f) => f.origins.intersection(&origins).cloned().collect(),
                None => origins,
            };
            found = Some(Found {
                origins,
                any,
                all: all.unwrap_or_default(),
            });
        }
        found.filter(|f| !f.origins.is_empty())
    }

    /// The places of the content any token of `value` appeared in (`read_at` of a value of
    /// inferred lineage), found or not, apart from tokens the user said (in content of origin
    /// `user_input`): those may be the user's.
    pub fn places(&self, value: &Value) -> BTreeSet<String> {
        let mut toks = Vec::new();
        crate::text::value_tokens(value, &mut toks, 0);
        toks.retain(|t| {
            !self
                .entries
                .iter()
                .any(|(k, own, ..)| k == t && own == "user_input")
        });
        self.entries
            .iter()
            .filter(|(k, ..)| toks.contains(k))
            .flat_map(|(.., places)| places.iter().cloned())
            .collect()
    }

    /// Whether some token of `value` appeared in content the user did not write (of an origin
    /// the wire knows).
    pub fn seen_elsewhere(&self, value: &Value) -> bool {
        let mut toks = Vec::new();
        crate::text::value_tokens(value, &mut toks, 0);
        toks.iter().any(|t| {
            self.entries.iter().any(|(k, own, ..)| {
                k == t && own != "user_input" && crate::acs::fields::ORIGINS.contains(&own.as_str())
            })
        })
    }

    /// Whether every string and number of `value`, compacted, occurs in one piece of what the
    /// user said.
    pub fn said_by_user(&self, value: &Value) -> bool {
        let mut pieces = Vec::new();
        crate::text::compact_leaves(value, &mut pieces, 0);
        !pieces.is_empty()
            && pieces
                .iter()
                .all(|p| !p.is_empty() && self.user_pieces.iter().any(|u| u.contains(p.as_str())))
    }
}

/// The carriers of a payload (`{value, provenance}` whose provenance has a string id), as
/// (id, value), in document order; a carrier's own value is not searched further.
pub fn carriers<'v>(v: &'v Value, out: &mut Vec<(&'v str, &'v Value)>) {
    match v {
        Value::Object(m) => {
            if let (Some(value), Some(id)) = (
                m.get("value"),
                m.get("provenance")
                    .and_then(|p| p.get("provenance_id"))
                    .and_then(Value::as_str),
            ) {
                out.push((id, value));
                return;
            }
            m.values().for_each(|c| carriers(c, out));
        }
        Value::Array(a) => a.iter().for_each(|c| carriers(c, out)),
        _ => {}
    }
}
