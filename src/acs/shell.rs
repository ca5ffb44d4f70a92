//! The typed decode of a common request envelope straight from its bytes.
//!
//! [`super::envelope::decode_request_with`] builds the whole JSON tree and then reads the
//! typed request out of it: every member name and string of the envelope's shell (the top
//! level, `params`, `metadata`) is allocated twice and every name hashed. This module reads
//! the shell member by member with the strict parser (`json::Reader`) and writes each
//! field where the typed request keeps it; only the payload and members this version does not
//! define become trees.
//!
//! It is a fast path, not a second definition of a valid envelope: it answers only for an
//! envelope that is valid and common, and gives up (`None`) on anything else — any parse
//! error, any envelope error, a `system/ping` (read leniently), a signature block (its
//! members this version does not define are kept only by the tree), a duplicate name. The
//! caller then decodes the same bytes the full way, which gives the error or the request. So
//! the only promise to keep is one-sided: when this returns a request, the full decode returns
//! the same one (a property test in `tests/acs_wire.rs` holds the two together).
//!
//! It knows the envelope's shape and checks; it must not know sessions, policies or the
//! Guardian.

use super::envelope::{
    id_keeps_its_digits, is_namespaced_method, is_semver, is_uuid, major_is_zero, DecodeOptions,
    Environment, Id, Metadata, Params, Request, SessionState, UserContext,
};
use super::json::Reader;
use super::time::is_rfc3339;
use serde_json::map::Entry;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The request, if the bytes are a valid envelope of the common shape (module docs).
pub fn decode(bytes: &[u8], opts: &DecodeOptions<'_>) -> Option<Request> {
    let mut r = Reader::new(bytes, opts.limits).ok()?;
    let (id, method, params) = read_top(&mut r)?;
    r.finish().ok()?;
    let method_ok = method != "system/ping"
        && is_namespaced_method(&method)
        && opts.known_method.is_none_or(|known| known(&method));
    if !method_ok || !params_ok(&params) {
        return None;
    }
    Some(Request {
        jsonrpc: "2.0".to_owned(),
        method: method.into_owned(),
        id,
        params,
    })
}

/// The top level: `jsonrpc` "2.0", an id, a method and params, nothing else.
fn read_top<'a>(r: &mut Reader<'a>) -> Option<(Id, Cow<'a, str>, Params)> {
    object(r, 0)?;
    let (mut id, mut jsonrpc, mut method, mut params) = (None, None, None, None);
    let mut seen = Seen::default();
    while let Some(key) = next_key(r, seen.any())? {
        match &*key {
            "id" => {
                seen.once(0)?;
                id = Some(checked_id(&r.value(1).ok()?)?);
            }
            "jsonrpc" => {
                seen.once(1)?;
                jsonrpc = Some(string(r)?);
            }
            "method" => {
                seen.once(2)?;
                method = Some(string(r)?);
            }
            "params" => {
                seen.once(3)?;
                params = Some(read_params(r)?);
            }
            _ => return None,
        }
    }
    if jsonrpc.as_deref() != Some("2.0") {
        return None;
    }
    Some((id?, method?, params?))
}

/// An id as the full decode reads it, refused where that decode refuses it (not a string or
/// a number, or a float so large its digits are lost).
fn checked_id(v: &Value) -> Option<Id> {
    Id::from_value(v).filter(id_keeps_its_digits)
}

fn read_params(r: &mut Reader<'_>) -> Option<Params> {
    object(r, 1)?;
    let mut p = Params::blank();
    let mut seen = Seen::default();
    while let Some(key) = next_key(r, seen.any())? {
        match &*key {
            "acs_version" => {
                seen.once(0)?;
                p.acs_version = owned(r)?;
            }
            "request_id" => {
                seen.once(1)?;
                p.request_id = owned(r)?;
            }
            "timestamp" => {
                seen.once(2)?;
                p.timestamp = owned(r)?;
            }
            "nonce" => {
                seen.once(3)?;
                p.nonce = Some(owned(r)?);
            }
            "tenant_id" => {
                seen.once(4)?;
                p.tenant_id = Some(owned(r)?);
            }
            "metadata" => {
                seen.once(5)?;
                read_metadata(r, &mut p.metadata)?;
            }
            "payload" => {
                seen.once(6)?;
                p.payload = r.value(2).ok()?;
            }
            // Its unknown members are dropped by the typed form: the full decode keeps them.
            "signature" => return None,
            _ => {
                seen.any_mark();
                extra(r, &mut p.extra, key, 2)?;
            }
        }
    }
    // acs_version, request_id, timestamp, metadata and payload are required.
    seen.all(&[0, 1, 2, 5, 6]).then_some(p)
}

fn read_metadata(r: &mut Reader<'_>, m: &mut Metadata) -> Option<()> {
    object(r, 2)?;
    let mut seen = Seen::default();
    while let Some(key) = next_key(r, seen.any())? {
        match &*key {
            "agent_id" => {
                seen.once(0)?;
                m.agent_id = owned(r)?;
            }
            "session_id" => {
                seen.once(1)?;
                m.session_id = owned(r)?;
            }
            "turn_id" => {
                seen.once(2)?;
                m.turn_id = Some(owned(r)?);
            }
            "parent_turn_id" => {
                seen.once(3)?;
                m.parent_turn_id = Some(owned(r)?);
            }
            "agent_name" => {
                seen.once(4)?;
                m.agent_name = Some(owned(r)?);
            }
            "platform" => {
                seen.once(5)?;
                m.platform = Some(owned(r)?);
            }
            "platform_version" => {
                seen.once(6)?;
                m.platform_version = Some(owned(r)?);
            }
            "environment" => {
                seen.once(7)?;
                m.environment = Some(environment(r)?);
            }
            "user_context" => {
                seen.once(8)?;
                m.user_context = Some(user_context(r)?);
            }
            "session_state" => {
                seen.once(9)?;
                m.session_state = Some(session_state(r)?);
            }
            _ => {
                seen.any_mark();
                extra(r, &mut m.extra, key, 3)?;
            }
        }
    }
    seen.all(&[0, 1]).then_some(())
}

fn environment(r: &mut Reader<'_>) -> Option<Environment> {
    match &*string(r)? {
        "development" => Some(Environment::Development),
        "staging" => Some(Environment::Staging),
        "production" => Some(Environment::Production),
        _ => None,
    }
}

fn user_context(r: &mut Reader<'_>) -> Option<UserContext> {
    object(r, 3)?;
    let mut u = UserContext::default();
    let mut seen = Seen::default();
    while let Some(key) = next_key(r, seen.any())? {
        match &*key {
            "user_id" => {
                seen.once(0)?;
                u.user_id = Some(owned(r)?);
            }
            "authentication_method" => {
                seen.once(1)?;
                u.authentication_method = Some(owned(r)?);
            }
            "roles" => {
                seen.once(2)?;
                let roles = match r.value(4).ok()? {
                    Value::Array(items) => items
                        .into_iter()
                        .map(|v| match v {
                            Value::String(s) => Some(s),
                            _ => None,
                        })
                        .collect::<Option<Vec<String>>>()?,
                    _ => return None,
                };
                u.roles = Some(roles);
            }
            _ => {
                seen.any_mark();
                extra(r, &mut u.extra, key, 4)?;
            }
        }
    }
    Some(u)
}

fn session_state(r: &mut Reader<'_>) -> Option<SessionState> {
    object(r, 3)?;
    let mut s = SessionState::default();
    let mut seen = Seen::default();
    while let Some(key) = next_key(r, seen.any())? {
        match &*key {
            "chain_hash" => {
                seen.once(0)?;
                s.chain_hash = Some(owned(r)?);
            }
            _ => {
                seen.any_mark();
                extra(r, &mut s.extra, key, 4)?;
            }
        }
    }
    Some(s)
}

/// The checks of the full decode that read a field's text, not its type (the types were
/// checked as each field was read).
fn params_ok(p: &Params) -> bool {
    is_semver(&p.acs_version)
        && major_is_zero(&p.acs_version)
        && is_uuid(&p.request_id)
        && is_rfc3339(&p.timestamp)
        && p.nonce
            .as_ref()
            .is_none_or(|n| (16..=64).contains(&n.chars().count()))
        && is_uuid(&p.metadata.session_id)
        && p.payload.is_object()
}

/// Opens an object at the reader, `open` containers deep; anything else gives up.
fn object(r: &mut Reader<'_>, open: usize) -> Option<()> {
    (r.peek()? == b'{').then_some(())?;
    r.open_object(open).ok()
}

/// The next member name, or `None` inside `Some` at the object's end.
fn next_key<'a>(r: &mut Reader<'a>, after_first: bool) -> Option<Option<Cow<'a, str>>> {
    r.next_key(!after_first).ok()
}

/// A string value; anything else gives up.
fn string<'a>(r: &mut Reader<'a>) -> Option<Cow<'a, str>> {
    (r.peek()? == b'"').then_some(())?;
    r.string().ok()
}

fn owned(r: &mut Reader<'_>) -> Option<String> {
    string(r).map(Cow::into_owned)
}

/// A member this version does not define, kept as received; a second one of the same name
/// gives up (the full decode refuses it).
fn extra(
    r: &mut Reader<'_>,
    into: &mut Map<String, Value>,
    key: Cow<'_, str>,
    open: usize,
) -> Option<()> {
    let v = r.value(open).ok()?;
    match into.entry(key.into_owned()) {
        Entry::Vacant(slot) => {
            slot.insert(v);
            Some(())
        }
        Entry::Occupied(_) => None,
    }
}

/// The known members of an object read so far (by index), and whether any member was.
#[derive(Default)]
struct Seen {
    known: u16,
    any: bool,
}

impl Seen {
    /// Marks known member `i`; `None` if it was already read (a duplicate name).
    fn once(&mut self, i: u16) -> Option<()> {
        self.any = true;
        let bit = 1 << i;
        if self.known & bit != 0 {
            return None;
        }
        self.known |= bit;
        Some(())
    }

    fn any_mark(&mut self) {
        self.any = true;
    }

    fn any(&self) -> bool {
        self.any
    }

    fn all(&self, required: &[u16]) -> bool {
        required.iter().all(|i| self.known & (1 << i) != 0)
    }
}
