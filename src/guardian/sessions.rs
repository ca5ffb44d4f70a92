//! The session table: which sessions the Guardian holds in memory, who may open one
//! (admission: a cap on all sessions and a smaller one per agent, so one client cannot take
//! every slot), and when a session leaves memory (an ended session's tombstone after the skew
//! window, an idle session after the idle time). Every operation is O(1) amortised and takes
//! one shard's lock, never a lock over the whole table. Owns where a session lives; knows
//! nothing of what a session holds, of deciding a step, or of the journal.
//!
//! A session that has only said hello (*bare*: admitted by [`Table::admit_hello`], not yet
//! [`Table::established`] by a first step) is cheap to let go: bare sessions sit in a pool of
//! their own ([`Limits::hello_pool`]) from which the oldest is dropped when a new hello needs
//! the room, and each leaves after [`Limits::hello_ms`] without a first step. So a flood of
//! hellos holds at most the pool, for at most that long, and never refuses a new hello. One
//! agent's bare sessions are held up to its share of the pool ([`Limits::hello_share`]):
//! beyond it, a hello of that agent drops that agent's own oldest bare session, so a flood
//! under one agent id churns only its own hellos.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What became of a session looked up to be dropped as bare.
enum Bare {
    Removed,
    /// Bare, but being decided right now (its first step, most likely).
    Busy,
    /// No longer held, or no longer bare.
    Gone,
}

/// Shards of the table; a power of two so a hash picks one with a mask.
const SHARDS: usize = 64;

/// How many expired queue entries one admission looks at before it goes on (the rest are
/// swept by later admissions or by [`Table::sweep`]).
const SWEEP_PER_ADMISSION: usize = 8;

/// Why a session was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The table holds its maximum of sessions.
    Full(usize),
    /// This agent holds its maximum share of sessions.
    AgentFull(usize),
}

/// What the table asks of what it holds: whether a session whose wait in a retirement queue
/// ran out leaves memory (`sealed_queue`: the wait was a tombstone's).
pub trait Retire {
    fn verdict(&self, now_ms: i64, sealed_queue: bool, limits: &Limits) -> Verdict;
}

/// What a sweep decided about one session whose wait ran out.
pub enum Verdict {
    /// Drop it from memory.
    Remove,
    /// Drop it from memory, and list it for [`Table::take_listed`] (an ended session
    /// whose records can be compacted).
    RemoveAndList,
    /// Look again at this time (Guardian clock, ms).
    Keep(i64),
}

type Shard<V> = Mutex<HashMap<Arc<str>, V>>;

/// A bare session in the hello queue.
struct Hello {
    at: i64,
    id: Arc<str>,
    agent: Arc<str>,
}

struct Entry<T> {
    session: Arc<Mutex<T>>,
    agent: Arc<str>,
    /// Only said hello so far.
    bare: bool,
}

/// Sessions by id, sharded, with admission counts and two retirement queues.
pub struct Table<T> {
    shards: Box<[Shard<Entry<T>>]>,
    hasher: std::collections::hash_map::RandomState,
    count: AtomicUsize,
    /// Sessions per agent, sharded by the agent's id like the sessions.
    agents: Box<[Shard<usize>]>,
    /// Ended sessions, in the order they ended: (ended at, id).
    sealed: Mutex<VecDeque<(i64, Arc<str>)>>,
    /// Sessions to look at for idleness, roughly in the order they become due: (due at, id).
    idle: Mutex<VecDeque<(i64, Arc<str>)>>,
    /// Removed sessions listed by their verdict, until someone takes them.
    listed: Mutex<Vec<Arc<str>>>,
    /// Bare sessions, in the order they said hello. Entries of sessions since established or
    /// removed are dropped when they reach the front (or when their agent's are looked at).
    hellos: Mutex<VecDeque<Hello>>,
    /// Bare sessions per agent, sharded like `agents`.
    bare_agents: Box<[Shard<usize>]>,
    /// Bare sessions held.
    bare: AtomicUsize,
    /// Bare sessions dropped to make room for a newer hello.
    hellos_evicted: AtomicUsize,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: Default::default(),
            count: AtomicUsize::new(0),
            agents: (0..SHARDS).map(|_| Mutex::default()).collect(),
            sealed: Mutex::default(),
            idle: Mutex::default(),
            listed: Mutex::default(),
            hellos: Mutex::default(),
            bare_agents: (0..SHARDS).map(|_| Mutex::default()).collect(),
            bare: AtomicUsize::new(0),
            hellos_evicted: AtomicUsize::new(0),
        }
    }
}

/// Retirement rules the table applies.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_sessions: usize,
    pub max_per_agent: usize,
    /// An ended session's tombstone stays this long (the skew window: a replay of its
    /// requests fails the timestamp check after it). `None`: tombstones go only when the
    /// table is full.
    pub tombstone_ms: Option<u64>,
    /// A session with no request for this long leaves memory. `None`: never.
    pub idle_ms: Option<u64>,
    /// A session that has only said hello leaves memory this long after its hello. `None`:
    /// only as an idle one.
    pub hello_ms: Option<u64>,
    /// The most bare sessions held (see [`Limits::hello_pool`]).
    pub max_hellos: usize,
    /// The most bare sessions one agent holds (see [`Limits::hello_share`]).
    pub max_hellos_per_agent: usize,
}

impl Limits {
    /// The bare sessions held at most: `max_hellos`, and never more than half of the table or
    /// of one agent's share, so hellos alone never fill either.
    pub fn hello_pool(&self) -> usize {
        self.max_hellos
            .min(self.max_sessions / 2)
            .min(self.max_per_agent / 2)
            .max(1)
    }

    /// The bare sessions one agent holds at most: `max_hellos_per_agent`, and never more
    /// than the pool.
    pub fn hello_share(&self) -> usize {
        self.max_hellos_per_agent.min(self.hello_pool()).max(1)
    }
}

fn lock<X>(m: &Mutex<X>) -> std::sync::MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T: Retire> Table<T> {
    fn shard_of(&self, key: &str) -> usize {
        (self.hasher.hash_one(key) as usize) & (SHARDS - 1)
    }

    /// The session with this id, if it is held.
    pub fn get(&self, id: &str) -> Option<Arc<Mutex<T>>> {
        lock(&self.shards[self.shard_of(id)])
            .get(id)
            .map(|e| e.session.clone())
    }

    /// Number of sessions held.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// The ids of every session held (a snapshot, shard by shard).
    pub fn ids(&self) -> Vec<String> {
        self.shards
            .iter()
            .flat_map(|s| lock(s).keys().map(|k| k.to_string()).collect::<Vec<_>>())
            .collect()
    }

    /// Every session held with its id (a snapshot, shard by shard).
    pub fn entries(&self) -> Vec<(String, Arc<Mutex<T>>)> {
        self.shards
            .iter()
            .flat_map(|s| {
                lock(s)
                    .iter()
                    .map(|(k, e)| (k.to_string(), e.session.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Holds `make()` as session `id` for `agent`, unless a session `id` is already held
    /// (that one is returned and `make` is not called). `counted`: whether the caps apply
    /// (a subagent's session, opened by its parent's step, is held whatever the caps say).
    /// When the table is full, expired tombstones and idle sessions are swept first.
    pub fn admit(
        &self,
        id: &str,
        agent: &str,
        now_ms: i64,
        limits: &Limits,
        counted: bool,
        make: impl FnOnce() -> T,
    ) -> Result<Arc<Mutex<T>>, Refusal> {
        self.admit_as(id, agent, now_ms, limits, counted, false, make)
    }

    /// Like [`Table::admit`] (counted), for a session opened by a hello: held as bare until
    /// [`Table::established`]. When the bare pool is full, the oldest bare session leaves
    /// first, so a hello is never refused for want of room in the pool.
    pub fn admit_hello(
        &self,
        id: &str,
        agent: &str,
        now_ms: i64,
        limits: &Limits,
        make: impl FnOnce() -> T,
    ) -> Result<Arc<Mutex<T>>, Refusal> {
        if let Some(s) = self.get(id) {
            return Ok(s);
        }
        if self.bare_of(agent) >= limits.hello_share() {
            self.evict_oldest_hello_of(agent);
        }
        while self.bare.load(Ordering::SeqCst) >= limits.hello_pool() {
            if !self.evict_oldest_hello() {
                break;
            }
        }
        let s = self.admit_as(id, agent, now_ms, limits, true, true, make)?;
        lock(&self.hellos).push_back(Hello {
            at: now_ms,
            id: Arc::from(id),
            agent: Arc::from(agent),
        });
        Ok(s)
    }

    /// Session `id` took its first step at `now_ms`: it is no longer bare, and from now on
    /// leaves memory as an idle session.
    pub fn established(&self, id: &str, now_ms: i64, limits: &Limits) {
        let key = {
            let mut shard = lock(&self.shards[self.shard_of(id)]);
            let agent = match shard.get_mut(id) {
                Some(e) if e.bare => {
                    e.bare = false;
                    e.agent.clone()
                }
                _ => return,
            };
            self.bare_gone(&agent);
            shard.get_key_value(id).map(|(k, _)| k.clone())
        };
        if let (Some(idle), Some(_), Some(key)) = (limits.idle_ms, limits.hello_ms, key) {
            lock(&self.idle).push_back((now_ms.saturating_add(idle as i64), key));
        }
    }

    /// Whether session `id` is held and bare (it has only said hello).
    pub fn is_bare(&self, id: &str) -> bool {
        lock(&self.shards[self.shard_of(id)])
            .get(id)
            .is_some_and(|e| e.bare)
    }

    /// Bare sessions held now, and dropped so far to make room for newer hellos.
    pub fn hello_counts(&self) -> (usize, usize) {
        (
            self.bare.load(Ordering::SeqCst),
            self.hellos_evicted.load(Ordering::SeqCst),
        )
    }

    /// Bare sessions `agent` holds.
    fn bare_of(&self, agent: &str) -> usize {
        let shard = lock(&self.bare_agents[self.shard_of(agent)]);
        shard.get(agent).copied().unwrap_or(0)
    }

    /// One bare session (of `agent`) is held no longer, or is no longer bare.
    fn bare_gone(&self, agent: &Arc<str>) {
        self.bare.fetch_sub(1, Ordering::SeqCst);
        let mut shard = lock(&self.bare_agents[self.shard_of(agent)]);
        if let Some(n) = shard.get_mut(agent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                shard.remove(agent);
            }
        }
    }

    /// Drops `agent`'s oldest bare session that nobody is deciding right now (the agent is
    /// at its share of the pool); `false` when it has none that can go. Entries of `agent`
    /// no longer bare leave the queue on the way.
    fn evict_oldest_hello_of(&self, agent: &str) -> bool {
        let mut q = lock(&self.hellos);
        let mut i = 0;
        while i < q.len() {
            if &*q[i].agent != agent {
                i += 1;
                continue;
            }
            match self.remove_if_bare(&q[i].id) {
                Bare::Removed => {
                    q.remove(i);
                    self.hellos_evicted.fetch_add(1, Ordering::SeqCst);
                    return true;
                }
                Bare::Busy => i += 1,
                Bare::Gone => {
                    q.remove(i);
                }
            }
        }
        false
    }

    /// Drops the oldest bare session that nobody is deciding right now; `false` when the
    /// hello queue holds none that can go. A bare session being decided right now goes back
    /// to the queue's end (its first step may yet be refused, leaving it bare).
    fn evict_oldest_hello(&self) -> bool {
        let mut budget = lock(&self.hellos).len();
        while budget > 0 {
            budget -= 1;
            let Some(h) = lock(&self.hellos).pop_front() else {
                return false;
            };
            match self.remove_if_bare(&h.id) {
                Bare::Removed => {
                    self.hellos_evicted.fetch_add(1, Ordering::SeqCst);
                    return true;
                }
                Bare::Busy => lock(&self.hellos).push_back(h),
                Bare::Gone => {}
            }
        }
        false
    }

    /// Removes session `id` if it is still bare and nobody is deciding it right now.
    fn remove_if_bare(&self, id: &str) -> Bare {
        let mut shard = lock(&self.shards[self.shard_of(id)]);
        let removed = match shard.get(id) {
            Some(e) if e.bare && e.session.try_lock().is_ok() => shard.remove(id),
            Some(e) if e.bare => return Bare::Busy,
            _ => return Bare::Gone,
        };
        drop(shard);
        match removed {
            Some(e) => {
                self.forget(&e);
                Bare::Removed
            }
            None => Bare::Gone,
        }
    }

    /// The counts a removed entry leaves.
    fn forget(&self, e: &Entry<T>) {
        self.count.fetch_sub(1, Ordering::SeqCst);
        if e.bare {
            self.bare_gone(&e.agent);
        }
        self.release_agent(&e.agent);
    }

    #[allow(clippy::too_many_arguments)]
    fn admit_as(
        &self,
        id: &str,
        agent: &str,
        now_ms: i64,
        limits: &Limits,
        counted: bool,
        bare: bool,
        make: impl FnOnce() -> T,
    ) -> Result<Arc<Mutex<T>>, Refusal> {
        if let Some(s) = self.get(id) {
            return Ok(s);
        }
        if counted {
            self.sweep_some(now_ms, limits, SWEEP_PER_ADMISSION, true);
            if self.count.load(Ordering::SeqCst) >= limits.max_sessions {
                return Err(Refusal::Full(limits.max_sessions));
            }
        }
        let agent: Arc<str> = Arc::from(agent);
        {
            let mut agents = lock(&self.agents[self.shard_of(&agent)]);
            let n = agents.entry(agent.clone()).or_insert(0);
            if counted && *n >= limits.max_per_agent {
                return Err(Refusal::AgentFull(limits.max_per_agent));
            }
            *n += 1;
        }
        let key: Arc<str> = Arc::from(id);
        let mut shard = lock(&self.shards[self.shard_of(id)]);
        if let Some(e) = shard.get(id) {
            // Admitted by someone else meanwhile: give the agent's slot back.
            let s = e.session.clone();
            drop(shard);
            self.release_agent(&agent);
            return Ok(s);
        }
        let session = Arc::new(Mutex::new(make()));
        if bare {
            self.bare.fetch_add(1, Ordering::SeqCst);
            *lock(&self.bare_agents[self.shard_of(&agent)])
                .entry(agent.clone())
                .or_insert(0) += 1;
        }
        shard.insert(
            key.clone(),
            Entry {
                session: session.clone(),
                agent,
                bare,
            },
        );
        drop(shard);
        self.count.fetch_add(1, Ordering::SeqCst);
        // A bare session waits in the hello queue only (a flood of hellos must not grow the idle
        // queue, whose entries last the idle time); it joins the idle queue when established.
        let in_hello_queue = bare && limits.hello_ms.is_some();
        if let (Some(idle), false) = (limits.idle_ms, in_hello_queue) {
            lock(&self.idle).push_back((now_ms.saturating_add(idle as i64), key));
        }
        Ok(session)
    }

    fn release_agent(&self, agent: &Arc<str>) {
        let mut agents = lock(&self.agents[self.shard_of(agent)]);
        if let Some(n) = agents.get_mut(agent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                agents.remove(agent);
            }
        }
    }

    /// Drops session `id` from memory (a no-op if it is not held).
    pub fn remove(&self, id: &str) -> bool {
        let removed = lock(&self.shards[self.shard_of(id)]).remove(id);
        match removed {
            Some(e) => {
                self.forget(&e);
                true
            }
            None => false,
        }
    }

    /// The sessions removed with [`Verdict::RemoveAndList`] since the last call.
    pub fn take_listed(&self) -> Vec<Arc<str>> {
        std::mem::take(&mut *lock(&self.listed))
    }

    /// Session `id` ended at `at_ms`: its tombstone is due for removal after the skew window.
    pub fn note_sealed(&self, id: &str, at_ms: i64) {
        lock(&self.sealed).push_back((at_ms, Arc::from(id)));
    }

    /// Sweeps every expired tombstone and idle session (what a server's housekeeping thread
    /// calls). Returns how many sessions left memory.
    pub fn sweep(&self, now_ms: i64, limits: &Limits) -> usize {
        self.sweep_some(now_ms, limits, usize::MAX, true)
    }

    /// Sweeps expired tombstones only (an ended session has no later records, so this is
    /// safe in the middle of a restore; an idle one may have).
    pub fn sweep_tombstones(&self, now_ms: i64, limits: &Limits) -> usize {
        self.sweep_some(now_ms, limits, usize::MAX, false)
    }

    /// At most `budget` queue entries looked at; a session someone is deciding right now is
    /// kept.
    fn sweep_some(&self, now_ms: i64, limits: &Limits, budget: usize, idle: bool) -> usize {
        let mut removed = 0;
        let mut looked = 0;
        let full = self.count.load(Ordering::SeqCst) >= limits.max_sessions;
        // Tombstones: after the skew window, or (without one) only when the table is full.
        let wait = match limits.tombstone_ms {
            Some(w) => Some(w as i64),
            None if full => Some(0),
            None => None,
        };
        if let Some(wait) = wait {
            while looked < budget {
                let next = {
                    let mut q = lock(&self.sealed);
                    match q.front() {
                        Some((at, _)) if at.saturating_add(wait) <= now_ms => q.pop_front(),
                        _ => None,
                    }
                };
                let Some((_, id)) = next else { break };
                looked += 1;
                if self.retire(&id, now_ms, true, limits) {
                    removed += 1;
                }
            }
        }
        if let (true, Some(wait)) = (idle, limits.hello_ms) {
            removed += self.sweep_hellos(now_ms, wait as i64, budget, &mut looked);
        }
        if idle && limits.idle_ms.is_some() {
            while looked < budget {
                let next = {
                    let mut q = lock(&self.idle);
                    match q.front() {
                        Some((due, _)) if *due <= now_ms => q.pop_front(),
                        _ => None,
                    }
                };
                let Some((_, id)) = next else { break };
                looked += 1;
                if self.retire(&id, now_ms, false, limits) {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Bare sessions whose hello is older than `wait`: removed (unless being decided).
    fn sweep_hellos(&self, now_ms: i64, wait: i64, budget: usize, looked: &mut usize) -> usize {
        let mut removed = 0;
        while *looked < budget {
            let next = {
                let mut q = lock(&self.hellos);
                match q.front() {
                    Some(h) if h.at.saturating_add(wait) <= now_ms => q.pop_front(),
                    _ => None,
                }
            };
            let Some(mut h) = next else { break };
            *looked += 1;
            match self.remove_if_bare(&h.id) {
                Bare::Removed => removed += 1,
                // Looked at again a hello timeout from now.
                Bare::Busy => {
                    h.at = now_ms;
                    lock(&self.hellos).push_back(h)
                }
                Bare::Gone => {}
            }
        }
        removed
    }

    fn retire(&self, id: &Arc<str>, now_ms: i64, sealed_queue: bool, limits: &Limits) -> bool {
        let Some(session) = self.get(id) else {
            return false;
        };
        let verdict = match session.try_lock() {
            Ok(s) => s.verdict(now_ms, sealed_queue, limits),
            Err(std::sync::TryLockError::Poisoned(p)) => {
                p.into_inner().verdict(now_ms, sealed_queue, limits)
            }
            // Being decided right now: not idle.
            Err(std::sync::TryLockError::WouldBlock) => Verdict::Keep(now_ms.saturating_add(1)),
        };
        match verdict {
            Verdict::Remove => self.remove(id),
            Verdict::RemoveAndList => {
                let removed = self.remove(id);
                if removed {
                    lock(&self.listed).push(id.clone());
                }
                removed
            }
            Verdict::Keep(due) => {
                if !sealed_queue {
                    lock(&self.idle).push_back((due, id.clone()));
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, per_agent: usize) -> Limits {
        Limits {
            max_sessions: max,
            max_per_agent: per_agent,
            tombstone_ms: Some(100),
            idle_ms: Some(1_000),
            hello_ms: Some(50),
            max_hellos: 4,
            max_hellos_per_agent: 4,
        }
    }

    /// A stand-in session: (ended, last active).
    #[derive(Debug, Default)]
    struct S(bool, i64);

    impl Retire for S {
        fn verdict(&self, now: i64, sealed_queue: bool, l: &Limits) -> Verdict {
            if sealed_queue {
                return if self.0 {
                    Verdict::Remove
                } else {
                    Verdict::Keep(now)
                };
            }
            let idle = l.idle_ms.unwrap() as i64;
            if self.1 + idle <= now {
                Verdict::Remove
            } else {
                Verdict::Keep(self.1 + idle)
            }
        }
    }

    #[test]
    fn one_agent_cannot_take_every_slot() {
        let t: Table<S> = Table::default();
        let l = limits(10, 3);
        for i in 0..3 {
            t.admit(&format!("a{i}"), "greedy", 0, &l, true, S::default)
                .unwrap();
        }
        assert_eq!(
            t.admit("a3", "greedy", 0, &l, true, S::default).err(),
            Some(Refusal::AgentFull(3))
        );
        assert!(t.admit("b0", "other", 0, &l, true, S::default).is_ok());
        // Removing one gives the agent its slot back.
        assert!(t.remove("a0"));
        assert!(t.admit("a3", "greedy", 0, &l, true, S::default).is_ok());
        assert_eq!(t.len(), 4);
    }

    #[test]
    fn a_full_table_sweeps_expired_tombstones_before_refusing() {
        let t: Table<S> = Table::default();
        let l = Limits {
            idle_ms: None,
            ..limits(2, 2)
        };
        t.admit("a", "x", 0, &l, true, || S(true, 0)).unwrap();
        t.note_sealed("a", 0);
        t.admit("b", "y", 0, &l, true, S::default).unwrap();
        // The tombstone is within its window: full.
        assert_eq!(
            t.admit("c", "z", 50, &l, true, S::default).err(),
            Some(Refusal::Full(2))
        );
        // After it, the tombstone goes and the new session comes in.
        assert!(t.admit("c", "z", 150, &l, true, S::default).is_ok());
        assert!(t.get("a").is_none());
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn uncounted_sessions_are_held_whatever_the_caps() {
        let t: Table<S> = Table::default();
        let l = limits(1, 1);
        t.admit("a", "x", 0, &l, true, S::default).unwrap();
        assert!(t.admit("child", "x", 0, &l, false, S::default).is_ok());
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn idle_sessions_leave_and_active_ones_stay() {
        let t: Table<S> = Table::default();
        let l = limits(10, 10);
        t.admit("quiet", "x", 0, &l, true, S::default).unwrap();
        t.admit("busy", "x", 0, &l, true, S::default).unwrap();
        t.get("busy").unwrap().lock().unwrap().1 = 900;
        assert_eq!(t.sweep(1_000, &l), 1);
        assert!(t.get("quiet").is_none());
        assert!(t.get("busy").is_some());
        // `busy` is looked at again when its own idle time runs out.
        assert_eq!(t.sweep(1_899, &l), 0);
        assert_eq!(t.sweep(1_900, &l), 1);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn a_full_hello_pool_drops_its_oldest_bare_session_and_never_refuses() {
        let t: Table<S> = Table::default();
        let l = limits(100, 100);
        assert_eq!(l.hello_pool(), 4);
        t.admit_hello("kept", "x", 0, &l, S::default).unwrap();
        t.established("kept", 0, &l);
        for i in 0..1_000 {
            t.admit_hello(&format!("h{i}"), "x", 0, &l, S::default)
                .unwrap();
        }
        assert_eq!(t.hello_counts(), (4, 996));
        assert_eq!(t.len(), 5, "the established session and the pool");
        assert!(t.get("kept").is_some());
        assert!(t.get("h999").is_some() && t.get("h995").is_none());
    }

    #[test]
    fn an_agent_at_its_hello_share_drops_its_own_oldest_bare_session() {
        let t: Table<S> = Table::default();
        let l = Limits {
            max_hellos: 6,
            max_hellos_per_agent: 2,
            ..limits(100, 100)
        };
        assert_eq!((l.hello_pool(), l.hello_share()), (6, 2));
        t.admit_hello("honest", "a", 0, &l, S::default).unwrap();
        for i in 0..1_000 {
            t.admit_hello(&format!("flood{i}"), "x", 0, &l, S::default)
                .unwrap();
        }
        // The flood holds its share and no more; the other agent's hello is untouched.
        assert_eq!(t.hello_counts(), (3, 998));
        assert!(t.get("honest").is_some());
        assert!(t.get("flood999").is_some() && t.get("flood998").is_some());
        assert!(t.get("flood997").is_none());
        // A bare session that took its step is no longer counted in its agent's share.
        t.established("flood999", 0, &l);
        t.admit_hello("x-next", "x", 0, &l, S::default).unwrap();
        assert!(t.get("flood998").is_some() && t.get("flood999").is_some());
        assert_eq!(t.bare_of("x"), 2);
        assert_eq!(t.bare_of("a"), 1);
    }

    #[test]
    fn bare_sessions_leave_after_the_hello_time_and_established_ones_stay() {
        let t: Table<S> = Table::default();
        let l = limits(100, 100);
        t.admit_hello("bare", "x", 0, &l, S::default).unwrap();
        t.admit_hello("stepped", "x", 0, &l, S::default).unwrap();
        t.established("stepped", 0, &l);
        assert_eq!(t.sweep(49, &l), 0);
        assert_eq!(t.sweep(50, &l), 1);
        assert!(t.get("bare").is_none() && t.get("stepped").is_some());
        assert_eq!(t.hello_counts().0, 0);
    }

    #[test]
    fn bare_sessions_wait_in_the_hello_queue_only() {
        let t: Table<S> = Table::default();
        let l = limits(100, 100);
        for i in 0..10 {
            t.admit_hello(&format!("h{i}"), "x", 0, &l, S::default)
                .unwrap();
        }
        assert_eq!(
            lock(&t.idle).len(),
            0,
            "a flood of hellos does not grow the idle queue"
        );
        t.established("h9", 5, &l);
        assert_eq!(lock(&t.idle).len(), 1);
    }

    #[test]
    fn a_bare_session_being_decided_is_not_dropped_and_stays_in_the_queue() {
        let t: Table<S> = Table::default();
        let l = limits(100, 100);
        let busy = t.admit_hello("busy", "x", 0, &l, S::default).unwrap();
        let guard = busy.lock().unwrap();
        assert_eq!(t.sweep(100, &l), 0, "being decided: kept");
        assert!(!t.evict_oldest_hello());
        drop(guard);
        // Still bare and queued: it leaves a hello timeout after it was looked at.
        assert_eq!(t.sweep(149, &l), 0);
        assert_eq!(t.sweep(150, &l), 1);
        assert_eq!(t.hello_counts(), (0, 0));
    }
}
