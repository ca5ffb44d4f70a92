//! Argument roles: what a tool argument is *for* — where an action goes (`destination`), a
//! credential (`secret`), a quantity (`amount`), which object it acts on (`identifier`), or
//! prose (`text`). Owns the role vocabulary and the standard catalogue that reads a role from an
//! argument's name when the tool's declaration gives none; knows nothing of policies or events.
//! `tool` declarations override the catalogue per tool (`recipient: string as destination`,
//! `as none` to say an argument has no role); the builtin `role(name)` reads the result.

/// Every role, and `none` (an argument with no role).
pub const ROLES: &[&str] = &[
    "destination",
    "secret",
    "amount",
    "identifier",
    "text",
    "none",
];

/// The standard catalogue: argument names (compared lowercased) and the role each has in
/// most tools. Documented in docs/language.md §5 (a test keeps the two the same).
pub const CATALOGUE: &[(&str, &[&str])] = &[
    (
        "destination",
        &[
            "recipient",
            "recipients",
            "to",
            "cc",
            "bcc",
            "email",
            "emails",
            "user_email",
            "participants",
            "attendees",
            "invitees",
            "user",
            "users",
            "url",
            "urls",
            "link",
            "iban",
            "account",
            "channel",
            "phone",
            "phone_number",
            "webhook",
            "endpoint",
        ],
    ),
    (
        "secret",
        &[
            "password",
            "new_password",
            "passcode",
            "pin",
            "token",
            "api_key",
            "secret",
            "credentials",
        ],
    ),
    ("amount", &["amount", "price", "quantity", "total", "sum"]),
    (
        "identifier",
        &[
            "id",
            "file_id",
            "event_id",
            "message_id",
            "transaction_id",
            "path",
            "file_path",
            "filename",
            "file_name",
            "folder",
            "query",
            "day",
            "date",
            "city",
        ],
    ),
    (
        "text",
        &[
            "body",
            "message",
            "content",
            "text",
            "subject",
            "title",
            "description",
            "note",
            "memo",
            "comment",
        ],
    ),
];

/// Name endings the catalogue also reads (`contact_email`, `callback_url`, `order_id`).
pub const SUFFIXES: &[(&str, &str)] = &[
    ("_email", "destination"),
    ("_emails", "destination"),
    ("_url", "destination"),
    ("_iban", "destination"),
    ("_password", "secret"),
    ("_token", "secret"),
    ("_id", "identifier"),
];

/// The catalogue's names, for a lookup per call that does not scan the lists.
static BY_NAME: std::sync::LazyLock<std::collections::HashMap<&'static str, &'static str>> =
    std::sync::LazyLock::new(|| {
        CATALOGUE
            .iter()
            .flat_map(|(role, names)| names.iter().map(move |n| (*n, *role)))
            .collect()
    });

/// The catalogue's role for an argument name; `none` when it names no role.
pub fn catalogue_role(name: &str) -> &'static str {
    let lower;
    let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
        lower = name.to_ascii_lowercase();
        lower.as_str()
    } else {
        name
    };
    if let Some(role) = BY_NAME.get(name) {
        return role;
    }
    for (suffix, role) in SUFFIXES {
        if name.ends_with(suffix) {
            return role;
        }
    }
    "none"
}

/// The vocabulary's own spelling of a role word, if it is one.
pub fn role_word(word: &str) -> Option<&'static str> {
    ROLES.iter().copied().find(|r| *r == word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_endings_are_read() {
        assert_eq!(catalogue_role("recipients"), "destination");
        assert_eq!(catalogue_role("Recipient"), "destination");
        assert_eq!(catalogue_role("contact_email"), "destination");
        assert_eq!(catalogue_role("password"), "secret");
        assert_eq!(catalogue_role("order_id"), "identifier");
        assert_eq!(catalogue_role("body"), "text");
        assert_eq!(catalogue_role("start_time"), "none");
    }

    #[test]
    fn every_catalogue_role_is_a_role() {
        for (role, _) in CATALOGUE {
            assert!(role_word(role).is_some());
        }
        for (_, role) in SUFFIXES {
            assert!(role_word(role).is_some());
        }
    }
}
