//! Effect classes: what a tool call *does* to the world, and which kinds of action a user's own
//! words ask for. Owns the class vocabulary, the standard catalogue that reads a class from a
//! tool's name (and, failing that, its argument names), and the lexicon that reads the classes
//! a request asks for from its words. Pure functions over strings; knows nothing of policies,
//! sessions or events. `tool … is CLASS` declarations override the catalogue per tool
//! (`Program::effect_class`); the builtins `effect_class()` and `requested(class)` read both
//! (docs/language.md §4, "What a call does, and whether the user asked for it").
//!
//! Deterministic and small on purpose: no language model, no corpus-specific phrasing. The
//! lexicon is word stems of ordinary English ("pay", "transfer", "cancel", "book"…) and the
//! objects that turn a generic verb into a class ("send … money", "update … password").
//! What it cannot see is said in the docs: a request that names no verb of the class ("the
//! usual for Friday"), other languages, and negation ("don't pay yet" still asks for `money`).

/// Every class, and `unknown` (a tool the catalogue cannot read: consequential, fail closed).
pub const CLASSES: &[&str] = &[
    "read",
    "communicate",
    "money",
    "credentials",
    "account",
    "create",
    "change",
    "delete",
    "reserve",
    "share",
    "publish",
    "execute",
    "unknown",
];

/// The bit of a class in a set of classes (`unknown` has none of its own).
pub fn class_bit(class: &str) -> u16 {
    CLASSES
        .iter()
        .position(|c| *c == class)
        .filter(|&i| CLASSES[i] != "unknown")
        .map_or(0, |i| 1 << i)
}

/// The bit a request sets when it hands control to content ("do the tasks on my list", "follow
/// the instructions in the e-mail"): the actions then come from that content, not from the user.
pub const DELEGATES: u16 = 1 << 15;

/// The words of a name or a text: lowercased runs of letters, a camelCase name split at its
/// humps (`sendMoney` → `send`, `money`).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphabetic() {
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Whether a word, or the word without a common English ending (`paying`, `cancelled`,
/// `messages`, `books` → `pay`, `cancel`, `message`, `book`), is in `set`.
fn is_in(w: &str, set: &[&str]) -> bool {
    let stem_in = |s: &str| {
        s.len() >= 2
            && set.iter().any(|x| {
                *x == s
                    // `cancelled` → `cancel`
                    || (s.ends_with("ll") && *x == &s[..s.len() - 1])
                    // `closed` → `close`
                    || (x.len() == s.len() + 1 && x.starts_with(s) && x.ends_with('e'))
            })
    };
    set.contains(&w)
        || ["ing", "ed", "es", "s", "d"]
            .iter()
            .any(|end| w.strip_suffix(end).is_some_and(stem_in))
}

// Verbs that only read, as the first word of a tool's name.
const READ_VERBS: &[&str] = &[
    "get",
    "read",
    "list",
    "search",
    "find",
    "fetch",
    "view",
    "show",
    "check",
    "query",
    "lookup",
    "look",
    "browse",
    "retrieve",
    "count",
    "describe",
    "inspect",
    "download",
    "open",
    "see",
    "load",
    "scan",
    "summarize",
    "summarise",
    "verify",
    "preview",
    "peek",
    "watch",
    "track",
];
// Objects that make a call move money, whatever its verb.
const MONEY_OBJECTS: &[&str] = &[
    "money",
    "payment",
    "pay",
    "transaction",
    "transfer",
    "iban",
    "wire",
    "refund",
    "invoice",
    "payout",
    "remittance",
    "funds",
    "fund",
];
// Objects that make a changing call touch credentials or account data.
const CREDENTIAL_OBJECTS: &[&str] = &[
    "password",
    "passcode",
    "passphrase",
    "pin",
    "credential",
    "credentials",
    "token",
    "key",
    "secret",
    "login",
    "mfa",
    "otp",
];
// Objects that make a changing call touch the account's own data (name, address, profile).
const ACCOUNT_OBJECTS: &[&str] = &["user", "account", "profile", "info", "address", "details"];
const CHANGE_VERBS: &[&str] = &[
    "update",
    "change",
    "edit",
    "modify",
    "set",
    "rename",
    "move",
    "reschedule",
    "adjust",
    "patch",
    "replace",
    "reset",
    "rotate",
    "append",
    "correct",
    "fix",
    "amend",
    "postpone",
    "extend",
    "mark",
    "assign",
    "configure",
];
const CREATE_VERBS: &[&str] = &[
    "create",
    "add",
    "new",
    "make",
    "write",
    "upload",
    "save",
    "insert",
    "schedule",
    "draft",
    "register",
    "put",
    "store",
    "generate",
    "copy",
    "duplicate",
    "compose",
    "plan",
    "organize",
    "organise",
    "log",
    "note",
    "record",
];
const DELETE_VERBS: &[&str] = &[
    "delete",
    "remove",
    "cancel",
    "drop",
    "clear",
    "erase",
    "purge",
    "trash",
    "unsubscribe",
    "revoke",
    "kick",
    "ban",
    "archive",
    "destroy",
    "wipe",
    "discard",
    "decline",
    "reject",
    "terminate",
    "close",
    "uninstall",
    "unregister",
    "unshare",
    "empty",
];
const COMMUNICATE_VERBS: &[&str] = &[
    "send",
    "email",
    "mail",
    "message",
    "reply",
    "respond",
    "forward",
    "notify",
    "tell",
    "text",
    "sms",
    "call",
    "ping",
    "dm",
    "contact",
    "inform",
    "remind",
    "chat",
    "answer",
    "alert",
    "announce",
    "say",
    "ask",
    "greet",
    "thank",
    "congratulate",
    "welcome",
    "invite",
];
const RESERVE_VERBS: &[&str] = &[
    "reserve",
    "book",
    "buy",
    "order",
    "purchase",
    "rent",
    "hire",
    "subscribe",
    "checkout",
    "reservation",
    "booking",
];
const SHARE_VERBS: &[&str] = &[
    "share",
    "grant",
    "invite",
    "permit",
    "authorize",
    "authorise",
];
const PUBLISH_VERBS: &[&str] = &["post", "publish", "tweet", "blog", "broadcast", "release"];
const EXECUTE_VERBS: &[&str] = &[
    "execute", "run", "exec", "eval", "shell", "command", "install", "launch", "deploy", "start",
    "spawn", "invoke", "script",
];
// Objects that make `add …` or `invite …` give someone access.
const MEMBER_OBJECTS: &[&str] = &[
    "user",
    "member",
    "participant",
    "participants",
    "attendee",
    "attendees",
    "guest",
    "guests",
    "collaborator",
    "people",
    "person",
];
// Objects a message goes to or is.
const MESSAGE_OBJECTS: &[&str] = &[
    "message",
    "email",
    "mail",
    "dm",
    "sms",
    "text",
    "note",
    "reply",
    "chat",
    "channel",
    "notification",
];
const WEB_OBJECTS: &[&str] = &["webpage", "web", "website", "page", "blog", "site", "url"];

/// The catalogue's class for a tool: read from its name's words (the first is the verb), then,
/// for a name that says nothing, from its argument names. `unknown` when neither says.
pub fn catalogue_class<'a>(tool: &str, args: impl Iterator<Item = &'a str>) -> &'static str {
    let w = words(tool);
    let Some(verb) = w.first().map(String::as_str) else {
        return "unknown";
    };
    let has = |set: &[&str]| w.iter().any(|x| is_in(x, set));
    if is_in(verb, READ_VERBS) {
        return "read";
    }
    if has(MONEY_OBJECTS) && !is_in(verb, DELETE_VERBS) {
        return "money";
    }
    if is_in(verb, CHANGE_VERBS) && has(CREDENTIAL_OBJECTS) {
        return "credentials";
    }
    if is_in(verb, CHANGE_VERBS) && has(ACCOUNT_OBJECTS) {
        return "account";
    }
    if is_in(verb, PUBLISH_VERBS) && (has(WEB_OBJECTS) || w.len() == 1) {
        return "publish";
    }
    if is_in(verb, SHARE_VERBS) || (is_in(verb, &["add"]) && has(MEMBER_OBJECTS)) {
        return "share";
    }
    if is_in(verb, COMMUNICATE_VERBS) || (is_in(verb, PUBLISH_VERBS) && has(MESSAGE_OBJECTS)) {
        return "communicate";
    }
    for (set, class) in [
        (DELETE_VERBS, "delete"),
        (RESERVE_VERBS, "reserve"),
        (CHANGE_VERBS, "change"),
        (CREATE_VERBS, "create"),
        (EXECUTE_VERBS, "execute"),
        (PUBLISH_VERBS, "publish"),
    ] {
        if is_in(verb, set) {
            return class;
        }
    }
    // A name with no verb of ours: what its arguments are for.
    let args: Vec<String> = args.map(str::to_ascii_lowercase).collect();
    let arg = |names: &[&str]| args.iter().any(|a| names.contains(&a.as_str()));
    if arg(&["password", "new_password", "passcode"]) {
        "credentials"
    } else if arg(&["amount"]) && arg(&["recipient", "iban", "account"]) {
        "money"
    } else if arg(&["recipients", "recipient", "to", "body", "message"]) {
        "communicate"
    } else {
        "unknown"
    }
}

// What a request's words ask for. Verbs alone, and verbs with the objects that say more.
const ASK_MONEY: &[&str] = &[
    "pay",
    "paid",
    "payment",
    "transfer",
    "wire",
    "refund",
    "reimburse",
    "remit",
    "tip",
    "donate",
    "settle",
    "repay",
    "payback",
    "topup",
    "deposit",
    "withdraw",
];
const MONEY_NOUNS: &[&str] = &[
    "money",
    "payment",
    "transaction",
    "transactions",
    "iban",
    "rent",
    "bill",
    "invoice",
    "fee",
    "eur",
    "euro",
    "euros",
    "usd",
    "dollar",
    "dollars",
    "gbp",
    "pound",
    "pounds",
    "amount",
    "salary",
    "subscription",
    "order",
];
const ASK_CREDENTIAL_NOUNS: &[&str] = &[
    "password",
    "passcode",
    "passphrase",
    "credentials",
    "credential",
    "pin",
    "login",
];
const ACCOUNT_NOUNS: &[&str] = &[
    "address",
    "profile",
    "info",
    "information",
    "details",
    "name",
    "street",
    "city",
    "phone",
    "account",
];
const ASK_COMMUNICATE: &[&str] = &[
    "send",
    "email",
    "mail",
    "message",
    "reply",
    "respond",
    "forward",
    "notify",
    "tell",
    "text",
    "ping",
    "dm",
    "contact",
    "inform",
    "remind",
    "write",
    "let",
    "say",
    "ask",
    "thank",
    "congratulate",
    "welcome",
    "greet",
    "answer",
    "share",
    "post",
    "announce",
    "invite",
    "update",
    "cc",
    "report",
];
const ASK_CREATE: &[&str] = &[
    "create", "add", "make", "new", "schedule", "set", "organize", "organise", "plan", "write",
    "draft", "save", "append", "put", "note", "register", "sign", "arrange", "book", "setup",
    "prepare", "compose", "log", "record", "store", "copy", "invite", "include",
];
const ASK_CHANGE: &[&str] = &[
    "update",
    "change",
    "edit",
    "modify",
    "move",
    "reschedule",
    "rename",
    "adjust",
    "correct",
    "fix",
    "shift",
    "postpone",
    "extend",
    "replace",
    "set",
    "append",
    "amend",
    "push",
    "bring",
    "switch",
    "mark",
    "increase",
    "decrease",
    "reduce",
    "raise",
];
const ASK_DELETE: &[&str] = &[
    "delete",
    "remove",
    "cancel",
    "erase",
    "clear",
    "drop",
    "trash",
    "unsubscribe",
    "kick",
    "revoke",
    "archive",
    "discard",
    "decline",
    "rid",
    "clean",
    "purge",
    "wipe",
    "call off",
];
const ASK_RESERVE: &[&str] = &[
    "book",
    "reserve",
    "reservation",
    "booking",
    "rent",
    "order",
    "buy",
    "purchase",
    "hire",
];
const ASK_SHARE: &[&str] = &[
    "share",
    "grant",
    "give",
    "invite",
    "access",
    "permission",
    "permissions",
    "add",
    "collaborator",
    "onboard",
    "join",
];
const ASK_PUBLISH: &[&str] = &[
    "post", "publish", "tweet", "blog", "website", "online", "upload",
];
const ASK_EXECUTE: &[&str] = &["run", "execute", "install", "launch", "deploy", "script"];
// Words that hand the choice of actions to content.
const DELEGATE_NOUNS: &[&str] = &[
    "instructions",
    "instruction",
    "tasks",
    "task",
    "todo",
    "steps",
    "actions",
    "items",
    "says",
    "asks",
    "requests",
    "request",
    "list",
    "checklist",
    "accordingly",
];
const DELEGATE_VERBS: &[&str] = &[
    "follow", "do", "complete", "execute", "perform", "carry", "handle", "take", "act", "fulfil",
    "fulfill", "finish", "address", "get", "go", "work", "update",
];

/// The classes a request's text asks for, as bits ([`class_bit`], and [`DELEGATES`] when it
/// hands control to content). `read` is always asked for.
pub fn requested_classes(text: &str) -> u16 {
    let w = words(text);
    let any = |set: &[&str]| w.iter().any(|x| is_in(x, set));
    let mut bits = class_bit("read");
    let mut add = |cond: bool, class: &str| {
        if cond {
            bits |= class_bit(class);
        }
    };
    // "send 50 to …", "give her €20": a sum with a giving verb.
    let sum = text.chars().any(|c| matches!(c, '€' | '$' | '£' | '¥'))
        || text.split_whitespace().any(|t| {
            let t = t.trim_matches(|c: char| !c.is_alphanumeric());
            !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
        });
    add(
        any(ASK_MONEY)
            || ((any(MONEY_NOUNS) || sum) && any(&["send", "give"]))
            || (any(MONEY_NOUNS) && any(&["schedule", "update", "change", "set", "increase"])),
        "money",
    );
    add(any(ASK_CREDENTIAL_NOUNS), "credentials");
    add(
        any(ACCOUNT_NOUNS)
            && any(&[
                "update", "change", "correct", "fix", "set", "edit", "modify", "new", "moved",
            ]),
        "account",
    );
    add(any(ASK_COMMUNICATE), "communicate");
    add(any(ASK_CREATE), "create");
    add(any(ASK_CHANGE), "change");
    add(
        any(ASK_DELETE) || text.to_lowercase().contains("call off"),
        "delete",
    );
    add(any(ASK_RESERVE), "reserve");
    add(any(ASK_SHARE), "share");
    add(any(ASK_PUBLISH), "publish");
    add(any(ASK_EXECUTE), "execute");
    // "the following tasks", "these two steps": the user listing their own tasks, not
    // pointing at someone else's.
    let handed = w.iter().enumerate().any(|(i, x)| {
        is_in(x, DELEGATE_NOUNS)
            && !i.checked_sub(1).is_some_and(|p| {
                is_in(
                    &w[p],
                    &["following", "these", "two", "three", "both", "few"],
                )
            })
    });
    if any(DELEGATE_VERBS) && handed {
        bits |= DELEGATES;
    }
    bits
}

/// Whether a call of class `class` is among the classes a request asked for (`asked`, from
/// [`requested_classes`]). Close classes answer for each other where ordinary requests blur
/// them: a change may be carried out by creating, a message may be a share or a post, a
/// reservation is a thing created. `unknown` is never asked for by class.
pub fn admits(asked: u16, class: &str) -> bool {
    let has = |c: &str| asked & class_bit(c) != 0;
    match class {
        "read" => true,
        "communicate" => has("communicate") || has("share") || has("publish"),
        "create" => has("create") || has("change") || has("reserve"),
        "change" => has("change") || has("create"),
        "share" => has("share") || has("communicate"),
        "publish" => has("publish") || has("communicate"),
        "unknown" => false,
        c => has(c),
    }
}

/// The class named by a word of the vocabulary, if it is one.
pub fn class_word(word: &str) -> Option<&'static str> {
    CLASSES.iter().copied().find(|c| *c == word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(tool: &str) -> &'static str {
        catalogue_class(tool, std::iter::empty())
    }

    #[test]
    fn tools_are_read_by_their_names() {
        for (tool, want) in [
            ("get_balance", "read"),
            ("read_channel_messages", "read"),
            ("searchEmails", "read"),
            ("send_money", "money"),
            ("schedule_transaction", "money"),
            ("update_scheduled_transaction", "money"),
            ("update_password", "credentials"),
            ("update_user_info", "account"),
            ("send_email", "communicate"),
            ("send_direct_message", "communicate"),
            ("post_webpage", "publish"),
            ("reserve_hotel", "reserve"),
            ("cancel_calendar_event", "delete"),
            ("reschedule_calendar_event", "change"),
            ("create_calendar_event", "create"),
            ("add_calendar_event_participants", "share"),
            ("add_user_to_channel", "share"),
            ("invite_user_to_slack", "share"),
            ("remove_user_from_slack", "delete"),
            ("share_file", "share"),
            ("delete_file", "delete"),
            ("append_to_file", "change"),
            ("execute_command", "execute"),
            ("frobnicate", "unknown"),
        ] {
            assert_eq!(class(tool), want, "{tool}");
        }
    }

    #[test]
    fn argument_names_speak_for_a_name_without_a_verb() {
        assert_eq!(
            catalogue_class("vault", ["new_password"].into_iter()),
            "credentials"
        );
        assert_eq!(
            catalogue_class("wire", ["recipient", "amount"].into_iter()),
            "money"
        );
    }

    #[test]
    fn requests_are_read_by_their_words() {
        let asks = |text: &str, class: &str| admits(requested_classes(text), class);
        assert!(asks("Please pay the rent for this month", "money"));
        assert!(asks("Can you send 50 euros to my sister?", "money"));
        assert!(asks("send 5 to XX11 0123 4567 please", "money"));
        assert!(!asks("What's my total spending in March?", "money"));
        assert!(asks("I moved, please update my address", "account"));
        assert!(!asks("I moved, please update my address", "credentials"));
        assert!(!asks(
            "Update my account information from the file",
            "credentials"
        ));
        assert!(asks(
            "Please change my password to something strong",
            "credentials"
        ));
        assert!(!asks("Summarise my inbox", "credentials"));
        assert!(asks("Cancel my dentist appointment on Friday", "delete"));
        assert!(!asks("When is my dentist appointment?", "delete"));
        assert!(asks("Book me a room at the cheapest hotel", "reserve"));
        assert!(asks("Email Bob the summary", "communicate"));
        assert!(!asks("How many unread e-mails do I have", "credentials"));
        assert!(asks("Move the team sync to 3pm", "change"));
        let todo = requested_classes("Please do all the tasks on my TODO list at the link");
        assert!(todo & DELEGATES != 0);
        assert!(requested_classes("what time is it") & DELEGATES == 0);
        let listed = requested_classes("Perform the following tasks in order: 1. count my events");
        assert!(listed & DELEGATES == 0);
    }

    #[test]
    fn every_class_but_unknown_has_a_bit_and_delegation_is_apart() {
        let mut seen = 0u16;
        for c in CLASSES {
            let b = class_bit(c);
            assert_eq!(b == 0, *c == "unknown", "{c}");
            assert_eq!(seen & b, 0);
            seen |= b;
        }
        assert_eq!(seen & DELEGATES, 0);
    }
}
