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

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

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
    if text.is_ascii() {
        return ascii_words(text);
    }
    char_words(text)
}

/// [`words`] of any text, a character at a time.
fn char_words(text: &str) -> Vec<String> {
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

/// [`words`] of ASCII text: the same cuts on bytes, each word allocated once at its length
/// (a user message is read this way on every step it arrives in). A test holds the two to
/// each other.
fn ascii_words(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len() / 5 + 1);
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_alphabetic() {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        // A word runs on over letters, and ends before an upper-case letter that follows a
        // lower-case one (a camelCase hump).
        while i < b.len()
            && b[i].is_ascii_alphabetic()
            && !(b[i].is_ascii_uppercase() && b[i - 1].is_ascii_lowercase())
        {
            i += 1;
        }
        out.push(text[start..i].to_ascii_lowercase());
    }
    out
}

/// Whether a word, or the word without a common English ending (`paying`, `cancelled`,
/// `messages`, `books` → `pay`, `cancel`, `message`, `book`), is in `set`: a few hashed
/// look-ups, whatever the set's size (a user message is read against every set below).
fn is_in(w: &str, set: &Words) -> bool {
    let ix = set.index();
    let stem_in = |s: &str| {
        s.len() >= 2
            && (ix.exact.contains(s)
                // `cancelled` → `cancel`
                || (s.ends_with("ll") && ix.exact.contains(&s[..s.len() - 1]))
                // `closed` → `close`
                || ix.without_e.contains(s))
    };
    ix.exact.contains(w)
        || ENDINGS
            .iter()
            .any(|end| w.strip_suffix(end).is_some_and(stem_in))
}

/// The endings [`is_in`] strips.
const ENDINGS: [&str; 5] = ["ing", "ed", "es", "s", "d"];

/// [`is_in`] for a short list written where it is used: the same reading, by a scan.
fn is_in_list(w: &str, set: &[&str]) -> bool {
    // Every reading keeps the word's first letter (a stem is a prefix of it, and of two
    // letters at least): a word whose first letter starts no word of the set is in none.
    let first = w.as_bytes().first();
    if !set.iter().any(|x| x.as_bytes().first() == first) {
        return false;
    }
    let stem_in = |s: &str| {
        s.len() >= 2
            && set.iter().any(|x| {
                *x == s
                    || (s.ends_with("ll") && *x == &s[..s.len() - 1])
                    || (x.len() == s.len() + 1 && x.starts_with(s) && x.ends_with('e'))
            })
    };
    set.contains(&w)
        || ENDINGS
            .iter()
            .any(|end| w.strip_suffix(end).is_some_and(stem_in))
}

/// A set of words [`is_in`] reads, indexed on first use.
struct Words {
    list: &'static [&'static str],
    index: std::sync::OnceLock<WordIndex>,
}

/// The look-ups of [`is_in`]: the words, and the words that end in `e` without it.
struct WordIndex {
    exact: std::collections::HashSet<&'static str>,
    without_e: std::collections::HashSet<&'static str>,
}

impl Words {
    const fn new(list: &'static [&'static str]) -> Words {
        Words {
            list,
            index: std::sync::OnceLock::new(),
        }
    }

    fn index(&self) -> &WordIndex {
        self.index.get_or_init(|| WordIndex {
            exact: self.list.iter().copied().collect(),
            without_e: self
                .list
                .iter()
                .filter_map(|x| x.strip_suffix('e'))
                .collect(),
        })
    }
}

// Verbs that only read, as the first word of a tool's name.
static READ_VERBS: Words = Words::new(&[
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
]);
// Objects that make a call move money, whatever its verb.
static MONEY_OBJECTS: Words = Words::new(&[
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
]);
// Objects that make a changing call touch credentials or account data.
static CREDENTIAL_OBJECTS: Words = Words::new(&[
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
]);
// Objects that make a changing call touch the account's own data (name, address, profile).
static ACCOUNT_OBJECTS: Words =
    Words::new(&["user", "account", "profile", "info", "address", "details"]);
static CHANGE_VERBS: Words = Words::new(&[
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
    "correct",
    "fix",
    "amend",
    "postpone",
    "extend",
    "mark",
    "assign",
    "configure",
]);
static CREATE_VERBS: Words = Words::new(&[
    "create",
    "add",
    // Adding to a record makes new content in it: `append_to_file` creates.
    "append",
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
]);
static DELETE_VERBS: Words = Words::new(&[
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
]);
static COMMUNICATE_VERBS: Words = Words::new(&[
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
]);
static RESERVE_VERBS: Words = Words::new(&[
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
]);
static SHARE_VERBS: Words = Words::new(&[
    "share",
    "grant",
    "invite",
    "permit",
    "authorize",
    "authorise",
]);
static PUBLISH_VERBS: Words =
    Words::new(&["post", "publish", "tweet", "blog", "broadcast", "release"]);
static EXECUTE_VERBS: Words = Words::new(&[
    "execute", "run", "exec", "eval", "shell", "command", "install", "launch", "deploy", "start",
    "spawn", "invoke", "script",
]);
// Objects that make `add …` or `invite …` give someone access.
static MEMBER_OBJECTS: Words = Words::new(&[
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
]);
// Objects a message goes to or is.
static MESSAGE_OBJECTS: Words = Words::new(&[
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
]);
static WEB_OBJECTS: Words =
    Words::new(&["webpage", "web", "website", "page", "blog", "site", "url"]);

/// The catalogue's class for a tool: read from its name's words (the first is the verb), then,
/// for a name that says nothing, from its argument names. `unknown` when neither says.
pub fn catalogue_class<'a>(tool: &str, args: impl Iterator<Item = &'a str>) -> &'static str {
    let w = words(tool);
    let Some(verb) = w.first().map(String::as_str) else {
        return "unknown";
    };
    let has = |set: &Words| w.iter().any(|x| is_in(x, set));
    if is_in(verb, &READ_VERBS) {
        return "read";
    }
    if has(&MONEY_OBJECTS) && !is_in(verb, &DELETE_VERBS) {
        return "money";
    }
    if is_in(verb, &CHANGE_VERBS) && has(&CREDENTIAL_OBJECTS) {
        return "credentials";
    }
    if is_in(verb, &CHANGE_VERBS) && has(&ACCOUNT_OBJECTS) {
        return "account";
    }
    if is_in(verb, &PUBLISH_VERBS) && (has(&WEB_OBJECTS) || w.len() == 1) {
        return "publish";
    }
    if is_in(verb, &SHARE_VERBS) || (is_in_list(verb, &["add"]) && has(&MEMBER_OBJECTS)) {
        return "share";
    }
    if is_in(verb, &COMMUNICATE_VERBS) || (is_in(verb, &PUBLISH_VERBS) && has(&MESSAGE_OBJECTS)) {
        return "communicate";
    }
    for (set, class) in [
        (&DELETE_VERBS, "delete"),
        (&RESERVE_VERBS, "reserve"),
        (&CHANGE_VERBS, "change"),
        (&CREATE_VERBS, "create"),
        (&EXECUTE_VERBS, "execute"),
        (&PUBLISH_VERBS, "publish"),
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
static ASK_MONEY: Words = Words::new(&[
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
]);
static MONEY_NOUNS: Words = Words::new(&[
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
]);
static ASK_CREDENTIAL_NOUNS: Words = Words::new(&[
    "password",
    "passcode",
    "passphrase",
    "credentials",
    "credential",
    "pin",
    "login",
]);
static ACCOUNT_NOUNS: Words = Words::new(&[
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
]);
static ASK_COMMUNICATE: Words = Words::new(&[
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
]);
static ASK_CREATE: Words = Words::new(&[
    "create", "add", "make", "new", "schedule", "set", "organize", "organise", "plan", "write",
    "draft", "save", "append", "put", "note", "register", "sign", "arrange", "book", "setup",
    "prepare", "compose", "log", "record", "store", "copy", "invite", "include",
]);
static ASK_CHANGE: Words = Words::new(&[
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
]);
static ASK_DELETE: Words = Words::new(&[
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
]);
static ASK_RESERVE: Words = Words::new(&[
    "book",
    "reserve",
    "reservation",
    "booking",
    "rent",
    "order",
    "buy",
    "purchase",
    "hire",
]);
static ASK_SHARE: Words = Words::new(&[
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
]);
// Places people are let into.
static SHARED_PLACES: Words = Words::new(&[
    "slack",
    "workspace",
    "team",
    "channel",
    "group",
    "organization",
    "organisation",
    "org",
    "project",
    "repository",
    "repo",
    "folder",
]);
static ASK_PUBLISH: Words = Words::new(&[
    "post", "publish", "tweet", "blog", "website", "online", "upload",
]);
static ASK_EXECUTE: Words =
    Words::new(&["run", "execute", "install", "launch", "deploy", "script"]);
// Words that hand the choice of actions to content.
static DELEGATE_NOUNS: Words = Words::new(&[
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
]);
static DELEGATE_VERBS: Words = Words::new(&[
    "follow", "do", "complete", "execute", "perform", "carry", "handle", "take", "act", "fulfil",
    "fulfill", "finish", "address", "get", "go", "work", "update",
]);

// Words a request's other sets are read with: a sum with a giving verb asks to pay, a
// money noun with a changing verb asks to change a payment, "into" with a shared place asks
// to share it, and an account noun near a changing verb asks to change the account.
static GIVING_VERBS: Words = Words::new(&["send", "give", "return"]);
static MONEY_CHANGING_VERBS: Words =
    Words::new(&["schedule", "update", "change", "set", "increase"]);
static INTO: Words = Words::new(&["into"]);
static ACCOUNT_CHANGING_VERBS: Words = Words::new(&[
    "update", "change", "correct", "fix", "set", "edit", "modify", "new", "moved", "replace",
]);

/// The sets [`requested_classes`] reads, each with its bit in [`ASKED`].
static ASKED_SETS: [&Words; 19] = [
    &GIVING_VERBS,
    &MONEY_CHANGING_VERBS,
    &INTO,
    &ACCOUNT_CHANGING_VERBS,
    &ASK_MONEY,
    &MONEY_NOUNS,
    &ASK_CREDENTIAL_NOUNS,
    &ACCOUNT_NOUNS,
    &ASK_COMMUNICATE,
    &ASK_CREATE,
    &ASK_CHANGE,
    &ASK_DELETE,
    &ASK_RESERVE,
    &ASK_SHARE,
    &SHARED_PLACES,
    &ASK_PUBLISH,
    &ASK_EXECUTE,
    &DELEGATE_NOUNS,
    &DELEGATE_VERBS,
];

/// Every word of [`ASKED_SETS`] with the bits of the sets it is in.
static ASKED: LazyLock<Masks> = LazyLock::new(|| {
    Masks::of(
        ASKED_SETS
            .iter()
            .enumerate()
            .map(|(i, set)| (1u32 << i, set.list)),
    )
});

/// The bit of `set` in [`ASKED`]. Every set [`requested_classes`] reads is listed (a debug
/// build, so every test that reads a request, asserts it).
fn asked_bit(set: &Words) -> u32 {
    let at = ASKED_SETS.iter().position(|s| std::ptr::eq(*s, set));
    debug_assert!(
        at.is_some(),
        "a set requested_classes reads is not in ASKED_SETS"
    );
    at.map_or(0, |i| 1 << i)
}

/// The classes a request's text asks for, as bits ([`class_bit`], and [`DELEGATES`] when it
/// hands control to content). `read` is always asked for.
pub fn requested_classes(text: &str) -> u16 {
    classes_in(text, without_reminded(words(text)))
}

/// Whether `text`, lower-cased, holds the lower-case ASCII `phrase`: as `to_lowercase` then
/// `contains` read it (no other character lower-cases to these letters), without the copy.
fn contains_ignoring_case(text: &str, phrase: &[u8]) -> bool {
    let (b, Some(&first)) = (text.as_bytes(), phrase.first()) else {
        return true;
    };
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), b).any(|i| {
        b.get(i..i + phrase.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(phrase))
    })
}

/// [`requested_classes`] over the text and its words (without those a reminder names).
fn classes_in(text: &str, w: Vec<String>) -> u16 {
    // Each word's sets, looked up once (not once per set it is tested against).
    let masks: Vec<u32> = w.iter().map(|x| ASKED.bits(x)).collect();
    let said = masks.iter().fold(0, |all, m| all | m);
    let any = |set: &Words| said & asked_bit(set) != 0;
    let at = |i: usize, set: &Words| masks[i] & asked_bit(set) != 0;
    let mut bits = class_bit("read");
    let mut add = |cond: bool, class: &str| {
        if cond {
            bits |= class_bit(class);
        }
    };
    // "send 50 to …", "give her €20": a sum with a giving verb.
    // (The currency signs but `$` are not ASCII: an ASCII text is scanned for `$` alone.)
    let sum = (if text.is_ascii() {
        text.contains('$')
    } else {
        text.chars().any(|c| matches!(c, '€' | '$' | '£' | '¥'))
    }) || text.split_whitespace().any(|t| {
        let t = t.trim_matches(|c: char| !c.is_alphanumeric());
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
    });
    add(
        any(&ASK_MONEY)
            || ((any(&MONEY_NOUNS) || sum) && any(&GIVING_VERBS))
            || (any(&MONEY_NOUNS) && any(&MONEY_CHANGING_VERBS)),
        "money",
    );
    add(any(&ASK_CREDENTIAL_NOUNS), "credentials");
    add(account_change(&w, &masks), "account");
    add(any(&ASK_COMMUNICATE), "communicate");
    add(any(&ASK_CREATE), "create");
    // "set up a payment" creates one; "set the amount" changes it.
    let changes = w.iter().enumerate().any(|(i, x)| {
        at(i, &ASK_CHANGE) && !(x == "set" && w.get(i + 1).is_some_and(|n| n == "up"))
    });
    add(changes, "change");
    add(
        any(&ASK_DELETE) || contains_ignoring_case(text, b"call off"),
        "delete",
    );
    add(any(&ASK_RESERVE), "reserve");
    // "get Dora into our Slack", "bring him into the team": someone let into a shared place.
    add(
        any(&ASK_SHARE) || (any(&INTO) && any(&SHARED_PLACES)),
        "share",
    );
    add(any(&ASK_PUBLISH), "publish");
    add(any(&ASK_EXECUTE), "execute");
    // "the following tasks", "these two steps": the user listing their own tasks, not
    // pointing at someone else's.
    let handed = (0..w.len()).any(|i| {
        at(i, &DELEGATE_NOUNS)
            && !i.checked_sub(1).is_some_and(|p| {
                is_in_list(
                    &w[p],
                    &["following", "these", "two", "three", "both", "few"],
                )
            })
    });
    if any(&DELEGATE_VERBS) && handed {
        bits |= DELEGATES;
    }
    bits
}

/// The words of a request without the verb a reminder is about ("add a reminder to my calendar
/// to book a table", "remind me to pay the rent"): the verb after a "to" that follows "remind"
/// or "reminder" within eight words is what the reminder will say, not what the user asks for
/// now.
fn without_reminded(w: Vec<String>) -> Vec<String> {
    let reminds = |x: &str| is_in_list(x, &["remind", "reminder"]);
    let reminded = |i: usize| {
        i >= 1
            && w[i - 1] == "to"
            && (2..=8).any(|k| i.checked_sub(k).is_some_and(|j| reminds(&w[j])))
    };
    let keep: Vec<bool> = (0..w.len()).map(|i| !reminded(i)).collect();
    w.into_iter()
        .zip(keep)
        .filter_map(|(x, keep)| keep.then_some(x))
        .collect()
}

/// Whether the words ask to change the account's own data: a changing verb with an account
/// noun at most four words after it ("update my account information", "change my home
/// address"), or the noun followed closely by the verb ("my address changed"). A noun and a
/// verb far apart ("my iPhone subscription … set up a payment") ask for nothing of the kind.
fn account_change(w: &[String], masks: &[u32]) -> bool {
    let verbs: Vec<usize> = (0..w.len())
        .filter(|&i| masks[i] & asked_bit(&ACCOUNT_CHANGING_VERBS) != 0)
        .collect();
    (0..w.len())
        .filter(|&j| masks[j] & asked_bit(&ACCOUNT_NOUNS) != 0)
        .any(|j| {
            verbs
                .iter()
                .any(|&i| (i < j && j - i <= 4) || (j < i && i - j <= 2))
        })
}

/// Whether a call of class `class` is among the classes a request asked for (`asked`, from
/// [`requested_classes`]). Close classes answer for each other where ordinary requests blur
/// them: a change may be carried out by creating, a message may be a post, a reservation is a
/// thing created, a share may be carried out as a message. A request to message someone is
/// not a request to give anyone access (a new member, a shared file): `share` is asked for only
/// in its own words. `unknown` is never asked for by class.
pub fn admits(asked: u16, class: &str) -> bool {
    let has = |c: &str| asked & class_bit(c) != 0;
    match class {
        "read" => true,
        "communicate" => has("communicate") || has("share") || has("publish"),
        "create" => has("create") || has("change") || has("reserve"),
        "change" => has("change"),
        "share" => has("share"),
        "publish" => has("publish") || has("communicate"),
        "unknown" => false,
        c => has(c),
    }
}

/// Kinds of thing a call acts on, each with the words that name it in a tool's name and the
/// wider words that name it in a user's request. A request that asks to book a hotel has asked
/// for a reservation, but not of a car; one that asks to delete a file has asked for a deletion,
/// but not of a calendar event. A call's kinds are those its tool's name names; a name that
/// names none (`send_money`, `frobnicate`) has none, and nothing is checked of it by kind.
const OBJECTS: &[ObjectRow] = &[
    (
        "lodging",
        &[
            "hotel",
            "room",
            "lodging",
            "accommodation",
            "hostel",
            "apartment",
        ],
        &[
            "hotel",
            "room",
            "stay",
            "staying",
            "accommodation",
            "lodging",
            "hostel",
            "inn",
            "motel",
            "airbnb",
            "suite",
            "night",
            "apartment",
            "place",
            "resort",
            "bnb",
        ],
    ),
    (
        "vehicle",
        &["car", "vehicle", "bike", "scooter"],
        &[
            "car", "vehicle", "auto", "suv", "van", "drive", "ride", "bike", "scooter", "taxi",
            "cab", "wheels",
        ],
    ),
    (
        "restaurant",
        &["restaurant", "table", "dining"],
        &[
            "restaurant",
            "table",
            "dinner",
            "lunch",
            "breakfast",
            "brunch",
            "meal",
            "eat",
            "eatery",
            "dining",
            "dine",
            "cuisine",
            "food",
            "bistro",
            "cafe",
            "bar",
        ],
    ),
    (
        "flight",
        &["flight", "ticket", "airline", "seat"],
        &[
            "flight", "fly", "plane", "airline", "ticket", "seat", "airport",
        ],
    ),
    (
        "event",
        &["event", "calendar", "meeting", "appointment"],
        &[
            "event",
            "calendar",
            "meeting",
            "appointment",
            "schedule",
            "sync",
            "call",
            "reminder",
            "remind",
            "agenda",
            "lunch",
            "dinner",
            "breakfast",
            "session",
            "class",
            "party",
            "standup",
            "interview",
            "invite",
            "invitation",
            "slot",
            "date",
            "reschedule",
            "postpone",
            "visit",
            "checkup",
            "consultation",
            "lesson",
            "workshop",
            "webinar",
            "conference",
            "ceremony",
            "hangout",
            "catchup",
            "review",
            "demo",
        ],
    ),
    (
        "file",
        &[
            "file",
            "document",
            "doc",
            "drive",
            "folder",
            "sheet",
            "spreadsheet",
        ],
        &[
            "file",
            "document",
            "doc",
            "docx",
            "drive",
            "folder",
            "spreadsheet",
            "sheet",
            "xlsx",
            "txt",
            "pdf",
            "csv",
            "md",
            "attachment",
            "list",
            "notes",
            "report",
        ],
    ),
    (
        "channel",
        &["channel", "group", "room"],
        &["channel", "group", "room", "workspace", "slack", "team"],
    ),
    (
        "member",
        &[
            "user",
            "member",
            "participant",
            "attendee",
            "guest",
            "collaborator",
        ],
        &[
            "user",
            "member",
            "participant",
            "attendee",
            "guest",
            "collaborator",
            "people",
            "person",
            "colleague",
            "coworker",
            "employee",
            "invite",
            "add",
            "remove",
            "kick",
            "join",
            "onboard",
            "team",
            "everyone",
            "everybody",
            "slack",
            "workspace",
            "organization",
            "organisation",
            "org",
        ],
    ),
    (
        "standing_payment",
        &[
            "scheduled",
            "recurring",
            "standing",
            "subscription",
            "mandate",
        ],
        &[
            "scheduled",
            "schedule",
            "recurring",
            "standing",
            "subscription",
            "rent",
            "monthly",
            "weekly",
            "yearly",
            "annual",
            "regular",
            "repeat",
            "repeating",
            "every",
            "debit",
            "mandate",
        ],
    ),
];

/// The kinds of thing a tool's name says it acts on, as bits (one per `OBJECTS` row); 0 when
/// its name names none.
pub fn tool_objects(tool: &str) -> u32 {
    static IN_TOOL: LazyLock<Masks> = LazyLock::new(|| lexicon(|(_, t, _)| t));
    words(tool).iter().fold(0, |bits, w| bits | IN_TOOL.bits(w))
}

/// The kinds of thing a request's words name, as bits (one per `OBJECTS` row). A word
/// written in two parts counts joined too ("check-up", "e-mail", "catch up").
pub fn named_objects(text: &str) -> u32 {
    objects_in(&words(text))
}

/// [`named_objects`] over the request's words.
fn objects_in(w: &[String]) -> u32 {
    static IN_REQUEST: LazyLock<Masks> = LazyLock::new(|| lexicon(|(_, _, r)| r));
    let mut bits = w.iter().fold(0, |bits, x| bits | IN_REQUEST.bits(x));
    let mut joined = String::new();
    for pair in w.windows(2) {
        joined.clear();
        joined.push_str(&pair[0]);
        joined.push_str(&pair[1]);
        bits |= IN_REQUEST.bits(&joined);
    }
    bits
}

/// What a user's message asks for and names: [`requested_classes`] and [`named_objects`],
/// reading its words once.
pub fn read_request(text: &str) -> (u16, u32) {
    let w = words(text);
    let objects = objects_in(&w);
    (classes_in(text, without_reminded(w)), objects)
}

type ObjectRow = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

/// Words and the sets they are in, as bits, read with the endings [`is_in`] strips: one round
/// of look-ups answers for every set at once (`cancelled` → `cancel`, `closed` → `close`).
struct Masks {
    exact: WordMap,
    /// The words that end in `e`, without it.
    without_e: WordMap,
    /// Which (first byte, length) pairs any key of either map has: per first byte, a bit per
    /// length (31 and longer share bit 31). A look-up whose pair no key has is answered
    /// without hashing: most of a message's words are in no set.
    shapes: [u32; 256],
}

/// The bit of [`Masks::shapes`] for a key's length.
fn length_bit(len: usize) -> u32 {
    1 << len.min(31)
}

/// A map of this module's own words, hashed with FNV-1a: unkeyed, which is safe here because
/// its keys are fixed when it is built (a message's words are only looked up, never inserted,
/// so no input can crowd one bucket), and several times cheaper than SipHash on short words.
type WordMap = std::collections::HashMap<&'static str, u32, BuildHasherDefault<Fnv>>;

/// FNV-1a, 64 bits.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Masks {
    fn of(sets: impl IntoIterator<Item = (u32, &'static [&'static str])>) -> Masks {
        let (mut exact, mut without_e) = (Default::default(), Default::default());
        let mut shapes = [0u32; 256];
        let mut add = |m: &mut WordMap, w: &'static str, bit| {
            if let Some(&first) = w.as_bytes().first() {
                shapes[usize::from(first)] |= length_bit(w.len());
            }
            *m.entry(w).or_insert(0) |= bit;
        };
        for (bit, words) in sets {
            for w in words {
                add(&mut exact, w, bit);
                if let Some(stem) = w.strip_suffix('e') {
                    add(&mut without_e, stem, bit);
                }
            }
        }
        Masks {
            exact,
            without_e,
            shapes,
        }
    }

    /// The bits of the sets `w` is in, as [`is_in`] reads each.
    fn bits(&self, w: &str) -> u32 {
        let get = |m: &WordMap, s: &str| match s.as_bytes().first() {
            Some(&first) if self.shapes[usize::from(first)] & length_bit(s.len()) != 0 => {
                m.get(s).copied().unwrap_or(0)
            }
            _ => 0,
        };
        let mut bits = get(&self.exact, w);
        // No ending can be stripped from a word that ends in no ending's last letter.
        let last = w.as_bytes().last();
        if !ENDINGS.iter().any(|e| e.as_bytes().last() == last) {
            return bits;
        }
        for end in ENDINGS {
            let Some(s) = w.strip_suffix(end).filter(|s| s.len() >= 2) else {
                continue;
            };
            bits |= get(&self.exact, s) | get(&self.without_e, s);
            if s.ends_with("ll") {
                bits |= get(&self.exact, &s[..s.len() - 1]);
            }
        }
        bits
    }
}

/// One column of [`OBJECTS`]: each word with the kinds it names.
fn lexicon(column: fn(&ObjectRow) -> &'static [&'static str]) -> Masks {
    Masks::of(
        OBJECTS
            .iter()
            .enumerate()
            .map(|(i, row)| (1u32 << i, column(row))),
    )
}

/// Whether every kind of thing a call's tool names (`tool`, from [`tool_objects`]) is among
/// those the user's words named (`named`, from [`named_objects`]). A tool that names no kind
/// is not checked by kind.
pub fn objects_admitted(named: u32, tool: u32) -> bool {
    tool & !named == 0
}

/// The class named by a word of the vocabulary, if it is one.
pub fn class_word(word: &str) -> Option<&'static str> {
    CLASSES.iter().copied().find(|c| *c == word)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The phrase search reads as lower-casing the text and searching it did, on texts of
        /// the phrase's letters in both cases among non-ASCII letters.
        #[test]
        fn the_phrase_is_found_as_in_the_lower_cased_text(text in "[cCaAlLoOfF ÄéİK]{0,24}") {
            proptest::prop_assert_eq!(
                contains_ignoring_case(&text, b"call off"),
                text.to_lowercase().contains("call off")
            );
        }
    }

    #[test]
    fn the_phrase_is_found_in_any_case() {
        for (text, found) in [
            ("Please CALL OFF the meeting", true),
            ("Éva said: Call Off dinner", true),
            ("call of", false),
            ("recall offers", true),
            ("cal l off", false),
        ] {
            assert_eq!(contains_ignoring_case(text, b"call off"), found, "{text}");
            assert_eq!(text.to_lowercase().contains("call off"), found, "{text}");
        }
    }

    fn class(tool: &str) -> &'static str {
        catalogue_class(tool, std::iter::empty())
    }

    #[test]
    fn ascii_words_cut_as_the_general_reading_does() {
        let mut fixed = vec![
            "",
            "sendMoney to Bob",
            "aBC ABc  x9y-z",
            "look this up and mail it to a@example.com",
            "HTTPServer getURL iPhone",
        ];
        // And pseudo-random ASCII over letters of both cases, digits and punctuation.
        let alphabet = b"aZbYcX09 _-.@\tQq";
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut random = Vec::new();
        for _ in 0..2000 {
            let len = (seed % 24) as usize;
            let mut t = String::new();
            for _ in 0..len {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                t.push(alphabet[(seed >> 33) as usize % alphabet.len()] as char);
            }
            random.push(t);
        }
        fixed.extend(random.iter().map(String::as_str));
        for t in fixed {
            assert_eq!(ascii_words(t), char_words(t), "{t:?}");
        }
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
            ("append_to_file", "create"),
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
        // Returning a sum is paying it back; letting someone into a shared place is sharing.
        assert!(asks(
            "The bill came to 12.00; look up what they sent and return whatever is over",
            "money"
        ));
        assert!(!asks("Return the book to the library", "money"));
        assert!(asks("Please get Dora into our Slack", "share"));
        // Creating is not changing: "set up" and "create" ask for new records, not edits.
        assert!(!asks(
            "Set up a recurring scheduled transaction for rent",
            "change"
        ));
        assert!(asks(
            "Set up a recurring scheduled transaction for rent",
            "create"
        ));
        assert!(asks("Set the rent payment to 1200", "change"));
        assert!(!asks("Create a new event on Friday", "change"));
        assert!(asks("Add a line to notes.txt", "create"));
        // What a reminder is about is not asked for now.
        let reminder = "Add a reminder to my calendar for October 15th to book a table";
        assert!(!asks(reminder, "reserve"));
        assert!(asks(reminder, "create"));
        assert!(!asks("Remind me to pay the rent on Friday", "money"));
        assert!(asks(
            "Book a table for two and remind me to bring the gift",
            "reserve"
        ));
        assert!(!asks("Put the trip into my calendar", "share"));
        let todo = requested_classes("Please do all the tasks on my TODO list at the link");
        assert!(todo & DELEGATES != 0);
        assert!(requested_classes("what time is it") & DELEGATES == 0);
        let listed = requested_classes("Perform the following tasks in order: 1. count my events");
        assert!(listed & DELEGATES == 0);
    }

    #[test]
    fn the_kind_of_thing_a_call_acts_on_must_be_named() {
        let admitted =
            |text: &str, tool: &str| objects_admitted(named_objects(text), tool_objects(tool));
        assert!(admitted("book me a room in Paris", "reserve_hotel"));
        assert!(!admitted("book me a room in Paris", "reserve_car_rental"));
        assert!(!admitted("book me a room in Paris", "reserve_restaurant"));
        assert!(admitted("we need wheels: rent a car", "reserve_car_rental"));
        assert!(admitted("get us a table for dinner", "reserve_restaurant"));
        assert!(!admitted(
            "delete the largest file",
            "cancel_calendar_event"
        ));
        assert!(admitted(
            "move my dentist check-up to 10am",
            "reschedule_calendar_event"
        ));
        assert!(admitted("drop the notes.docx", "delete_file"));
        assert!(!admitted(
            "pay the bill like last month",
            "update_scheduled_transaction"
        ));
        assert!(admitted(
            "raise my rent payment",
            "update_scheduled_transaction"
        ));
        assert!(!admitted("post this to #general", "add_user_to_channel"));
        assert!(admitted(
            "add Ann to the general channel",
            "add_user_to_channel"
        ));
        // A tool whose name names no kind of thing is not checked by kind.
        assert_eq!(tool_objects("send_money"), 0);
        assert!(admitted("anything", "send_money"));
    }

    #[test]
    fn the_indexed_sets_answer_as_the_scan_does() {
        // The catalogue's sets, and the request's (every one in ASKED_SETS).
        let catalogue: [&Words; 15] = [
            &READ_VERBS,
            &MONEY_OBJECTS,
            &CREDENTIAL_OBJECTS,
            &ACCOUNT_OBJECTS,
            &CHANGE_VERBS,
            &CREATE_VERBS,
            &DELETE_VERBS,
            &COMMUNICATE_VERBS,
            &RESERVE_VERBS,
            &SHARE_VERBS,
            &PUBLISH_VERBS,
            &EXECUTE_VERBS,
            &MEMBER_OBJECTS,
            &MESSAGE_OBJECTS,
            &WEB_OBJECTS,
        ];
        let sets: Vec<&Words> = catalogue.into_iter().chain(ASKED_SETS).collect();
        let mut probes: Vec<String> = ["", "a", "ed", "es", "s", "d", "ing", "lled", "zzz"]
            .iter()
            .map(|p| p.to_string())
            .collect();
        for set in &sets {
            for w in set.list {
                let stem = w.strip_suffix('e').unwrap_or(w);
                for form in [w.to_string(), format!("{w}l"), stem.to_string()] {
                    for end in ["", "ing", "ed", "es", "s", "d", "led", "ling"] {
                        probes.push(format!("{form}{end}"));
                    }
                }
                probes.push(w[..w.len() / 2].to_string());
            }
        }
        for set in &sets {
            for p in &probes {
                assert_eq!(
                    is_in(p, set),
                    is_in_list(p, set.list),
                    "{p:?} in {:?}",
                    set.list
                );
            }
        }
        // The request's sets in one index: each set's bit answers as `is_in` does.
        for set in ASKED_SETS {
            assert_ne!(asked_bit(set), 0);
            for p in &probes {
                assert_eq!(
                    ASKED.bits(p) & asked_bit(set) != 0,
                    is_in(p, set),
                    "{p:?} in {:?}",
                    set.list
                );
            }
        }
    }

    #[test]
    fn the_object_lexicon_answers_as_the_word_scan_does() {
        let scan = |w: &str, col: fn(&ObjectRow) -> &'static [&'static str]| {
            OBJECTS
                .iter()
                .enumerate()
                .filter(|(_, row)| is_in_list(w, col(row)))
                .fold(0u32, |b, (i, _)| b | 1 << i)
        };
        let lex = lexicon(|(_, _, r)| r);
        let mut probes: Vec<String> = Vec::new();
        for (_, t, r) in OBJECTS {
            for w in t.iter().chain(r.iter()) {
                for end in ["", "s", "es", "d", "ed", "ing", "led", "ling", "x"] {
                    probes.push(format!("{w}{end}"));
                }
                probes.push(w[..w.len() - 1].to_string());
            }
        }
        probes.extend(
            ["closed", "cancelled", "calling", "dated", "the", "a", "zz"].map(String::from),
        );
        for p in &probes {
            assert_eq!(lex.bits(p), scan(p, |(_, _, r)| r), "{p}");
        }
    }

    #[test]
    fn a_message_read_once_answers_as_its_two_readings() {
        for text in [
            "Please pay the bill in my inbox and remind me to book a table",
            "change my e-mail password, then send Bob $20 for the check-up",
            "Remind me to cancel the meeting. Also delete the file.",
            "",
        ] {
            assert_eq!(
                read_request(text),
                (requested_classes(text), named_objects(text)),
                "{text}"
            );
        }
    }

    #[test]
    fn an_account_change_needs_its_verb_near_its_noun() {
        let asks = |text: &str| requested_classes(text) & class_bit("account") != 0;
        assert!(asks("please update my account information"));
        assert!(asks("change my home address to 3 Elm St"));
        assert!(asks("my address changed last week"));
        assert!(!asks(
            "I got the iPhone subscription service. Set up a recurring payment for it"
        ));
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
