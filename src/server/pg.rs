//! The journal in PostgreSQL (`--state postgres://…`, feature `postgres`): the same records as
//! the embedded store ([`super::store`]), in a table keyed by a global sequence number, with an
//! index from each session to its records; and the leases that let several Guardians share
//! one database (docs/serve.md, "Fleet").
//!
//! One thread (the committer) owns the connection that writes. It takes every batch waiting
//! (group commit), writes them in one transaction and settles each batch's [`Durable`] only
//! after `COMMIT` returned: an answer never goes out for a decision the database does not
//! hold. Reads and lease claims (a returning or moving session, `warden audit`) go to a second
//! thread with a connection of its own (the sync client runs a runtime of its own, which
//! cannot be entered from the HTTP transport's tokio threads).
//!
//! Each session is decided by one Guardian at a time: the one holding its row in
//! `warden_lease`, with a fencing token that grows at every change of hands. A record is
//! written with the token its Guardian held when it decided; the commit locks the session's
//! lease row and writes the record only if the row still carries that token, so a Guardian
//! that lost a session (paused, partitioned, presumed dead) cannot add to it afterwards. The
//! committer also renews the leases it holds, and deletes a session's lease row when it
//! compacts the session (same transaction, same fencing). This module owns the schema and the
//! lease protocol; it knows records only as [`Record`]s to encode, and sessions only by id.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use postgres::{Client, Config, NoTls};

use crate::guardian::journal::{self, Claim, Durable, Journal, JournalError, Record};

/// The journal's records, by sequence number.
const JOURNAL: &str = "warden_journal";
/// Where the journal's sequence numbers come from (several Guardians write it).
const SEQ: &str = "warden_journal_seq";
/// Key-value facts about the journal (its `format`).
const META: &str = "warden_meta";
/// Which Guardian decides each session, with its fencing token and expiry.
const LEASE: &str = "warden_lease";
/// The value of `format` in the meta table: JSON of [`Record`], as in the embedded store.
pub const FORMAT: &str = "warden-journal-1";
/// The advisory lock taken for the length of the schema's creation, so Guardians starting
/// together do not race on `CREATE … IF NOT EXISTS` (`WARDEN` in ASCII).
pub const LOCK_KEY: i64 = 0x5741_5244_454e;
/// The most batches one group commit takes.
const MAX_GROUP: usize = 4096;
/// The token of a session's first lease row: 1 for a new session; for one that has records
/// already, its row was deleted with its compaction (a row is deleted nowhere else), and a
/// token restarting at 1 could match one a Guardian still holds for the session from before
/// (a decision on a stale copy, waiting to commit). The database's clock in milliseconds is
/// past every token the session had (each take adds one).
const FIRST_TOKEN: &str = "CASE WHEN EXISTS (SELECT 1 FROM warden_journal j WHERE j.session = $1) \
     THEN (extract(epoch FROM clock_timestamp()) * 1000)::bigint ELSE 1 END";
/// The default lease duration (`warden serve --lease-ms`).
pub const DEFAULT_LEASE_MS: u64 = 10_000;

/// Who this Guardian is to the others, and how long its leases last.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// Written in each lease it holds; named to a request that reached the wrong Guardian.
    pub guardian: String,
    /// How long a lease lasts unless renewed.
    pub lease: Duration,
}

impl Default for Fleet {
    fn default() -> Fleet {
        Fleet {
            guardian: default_guardian_id(None),
            lease: Duration::from_millis(DEFAULT_LEASE_MS),
        }
    }
}

/// The fleet settings `warden serve` sets from its flags before it opens the store (the
/// stores are opened through [`super::backend::Backend::open`] by several commands, which
/// otherwise take the defaults).
static FLEET: OnceLock<Fleet> = OnceLock::new();

/// Sets this process's Guardian id and lease duration; the first call wins.
pub fn set_fleet(fleet: Fleet) {
    let _ = FLEET.set(fleet);
}

/// `HOST:PORT` for a Guardian listening on a fixed port (a restart on it takes its own
/// leases back at once), `HOST:pid-PID` otherwise.
pub fn default_guardian_id(port: Option<u16>) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "warden".into());
    match port.filter(|p| *p != 0) {
        Some(p) => format!("{host}:{p}"),
        None => format!("{host}:pid-{}", std::process::id()),
    }
}

/// Whether a `--state` value names a PostgreSQL database rather than a folder.
pub fn is_url(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => url.to_string(),
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Connects, taking the password from `PGPASSWORD` when the URL has none. No TLS: the database
/// is on the same host (loopback or a Unix socket; docs/serve.md).
fn connect(url: &str) -> Result<Client, String> {
    let mut config = Config::from_str(url).map_err(|e| format!("{}: {e}", redact(url)))?;
    if config.get_password().is_none() {
        if let Ok(p) = std::env::var("PGPASSWORD") {
            config.password(p);
        }
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.application_name("warden");
    config
        .connect(NoTls)
        .map_err(|e| format!("{}: {e}", redact(url)))
}

/// Records to write, each with its session's fencing token (`None`: a Guardian-wide record);
/// a session whose records they replace (a compaction); the promise to settle once they are
/// committed.
type Batch = journal::Queued<(Option<i64>, String)>;

/// A query for the reader thread, run on its connection.
type Job = Box<dyn FnOnce(&mut Client) + Send>;

/// A lease this Guardian holds, as far as it knows.
#[derive(Debug, Clone)]
struct Lease {
    token: i64,
    /// A commit or a renewal found the token gone: the session is someone else's.
    lost: bool,
    /// Last claimed or written: a lease unused for long is let go.
    used: Instant,
}

type Leases = Arc<Mutex<HashMap<String, Lease>>>;

/// A session and the token this Guardian holds for it.
type Held = (String, i64);

/// The journal in a PostgreSQL database.
pub struct PgStore {
    reader: Mutex<Option<mpsc::Sender<Job>>>,
    tx: Option<mpsc::Sender<Batch>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    leases: Leases,
    fleet: Fleet,
    /// The URL without its password.
    pub url: String,
}

impl PgStore {
    /// Connects, creates the tables if they are missing and starts the committer, with this
    /// process's fleet settings ([`set_fleet`]).
    pub fn open(url: &str) -> Result<PgStore, String> {
        PgStore::open_as(url, FLEET.get().cloned().unwrap_or_default())
    }

    /// Like [`PgStore::open`], as the Guardian `fleet` names.
    pub fn open_as(url: &str, fleet: Fleet) -> Result<PgStore, String> {
        let shown = redact(url);
        let mut writer = connect(url)?;
        prepare(&mut writer).map_err(|e| format!("{shown}: {e}"))?;
        // An answer waits for COMMIT: that COMMIT must mean durable.
        let sync: String = writer
            .query_one("SHOW synchronous_commit", &[])
            .map_err(err)?
            .get(0);
        if sync == "off" {
            writer
                .batch_execute("SET synchronous_commit TO on")
                .map_err(err)?;
        }
        let reader = connect(url)?;
        let leases: Leases = Arc::default();
        let (tx, rx) = mpsc::channel::<Batch>();
        let committer = {
            let leases = leases.clone();
            let fleet = fleet.clone();
            std::thread::Builder::new()
                .name("warden-journal".into())
                .spawn(move || commit_loop(writer, rx, &leases, &fleet))
                .map_err(err)?
        };
        let (ask, asked) = mpsc::channel::<Job>();
        let read_thread = std::thread::Builder::new()
            .name("warden-pg-read".into())
            .spawn(move || read_loop(reader, asked))
            .map_err(err)?;
        Ok(PgStore {
            reader: Mutex::new(Some(ask)),
            tx: Some(tx),
            threads: vec![committer, read_thread],
            leases,
            fleet,
            url: shown,
        })
    }

    /// This Guardian's id in the leases it holds.
    pub fn guardian(&self) -> &str {
        &self.fleet.guardian
    }

    /// Runs `f` on the reader's connection and waits for its answer.
    fn on_reader<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let (reply, answer) = mpsc::channel();
        {
            let ask = self.reader.lock().unwrap_or_else(|e| e.into_inner());
            let Some(ask) = ask.as_ref() else {
                return Err("the journal is closed".into());
            };
            ask.send(Box::new(move |c: &mut Client| {
                let _ = reply.send(f(c));
            }))
            .map_err(|_| "the journal's reader stopped".to_string())?;
        }
        answer
            .recv()
            .map_err(|_| "the journal's reader stopped".to_string())?
    }

    fn read(&self, sql: String, session: Option<String>, range: Option<(i64, i64)>) -> Rows {
        self.on_reader(move |c| match (&session, &range) {
            (Some(s), _) => query(c, &sql, &[s]),
            (None, Some((f, n))) => query(c, &sql, &[f, n]),
            (None, None) => query(c, &sql, &[]),
        })
    }

    /// Every record, in the order it was written.
    pub fn records(&self) -> Result<Vec<Record>, String> {
        let sql = format!("SELECT seq, record::text FROM {JOURNAL} ORDER BY seq");
        Ok(self
            .read(sql, None, None)?
            .into_iter()
            .map(|(_, r)| r)
            .collect())
    }

    /// Up to `max` records from sequence number `from` on, with their sequence numbers.
    pub fn records_from(&self, from: u64, max: usize) -> Result<Vec<(u64, Record)>, String> {
        let from = i64::try_from(from).map_err(err)?;
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let sql = format!(
            "SELECT seq, record::text FROM {JOURNAL} WHERE seq >= $1 ORDER BY seq LIMIT $2"
        );
        self.read(sql, None, Some((from, max)))
    }

    /// One session's records, in the order they were written.
    pub fn records_of(&self, session: &str) -> Result<Vec<Record>, String> {
        let sql =
            format!("SELECT seq, record::text FROM {JOURNAL} WHERE session = $1 ORDER BY seq");
        Ok(self
            .read(sql, Some(session.to_string()), None)?
            .into_iter()
            .map(|(_, r)| r)
            .collect())
    }

    /// Takes the session's lease in the database if it is free, expired or already this
    /// Guardian's (a new token each time), or says who holds it.
    fn acquire(&self, session: &str) -> Claim {
        let (me, ms) = (self.fleet.guardian.clone(), lease_ms(&self.fleet));
        let s = session.to_string();
        let got = self.on_reader(move |c| {
            let taken = c
                .query_opt(
                    &format!(
                        "INSERT INTO {LEASE} AS l (session, guardian, token, expires) \
                         VALUES ($1, $2, {FIRST_TOKEN}, now() + $3 * interval '1 millisecond') \
                         ON CONFLICT (session) DO UPDATE SET guardian = $2, \
                           token = l.token + 1, expires = now() + $3 * interval '1 millisecond' \
                         WHERE l.expires < now() OR l.guardian = $2 \
                         RETURNING token"
                    ),
                    &[&s, &me, &ms],
                )
                .map_err(err)?;
            if let Some(row) = taken {
                return Ok(Ok(row.get::<_, i64>(0)));
            }
            let row = c
                .query_opt(
                    &format!(
                        "SELECT guardian, \
                           (extract(epoch FROM expires - now()) * 1000)::bigint \
                         FROM {LEASE} WHERE session = $1"
                    ),
                    &[&s],
                )
                .map_err(err)?;
            Ok(Err(row.map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))))
        });
        match got {
            Ok(Ok(token)) => {
                self.leases
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(
                        session.to_string(),
                        Lease {
                            token,
                            lost: false,
                            used: Instant::now(),
                        },
                    );
                Claim::Taken { token }
            }
            Ok(Err(Some((holder, expires_in_ms)))) => Claim::Busy {
                holder,
                expires_in_ms,
            },
            // Gone between the two statements (it expired and was never retaken): try later.
            Ok(Err(None)) => Claim::Busy {
                holder: String::new(),
                expires_in_ms: 0,
            },
            Err(e) => Claim::Failed(e),
        }
    }

    /// The token of each session `records` belong to, claimed now if this Guardian has never
    /// held it (a subagent's new session, a compaction after a restart).
    fn tokens(&self, sessions: &[&str]) -> Result<HashMap<String, i64>, JournalError> {
        let mut out = HashMap::new();
        for s in sessions {
            if out.contains_key(*s) {
                continue;
            }
            let known = self
                .leases
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(*s)
                .map(|l| {
                    l.used = Instant::now();
                    (!l.lost).then_some(l.token)
                });
            let token = match known {
                Some(Some(t)) => t,
                Some(None) => return Err(taken_over(Some(s))),
                None => match self.acquire(s) {
                    Claim::Held { token: Some(t) } | Claim::Taken { token: t } => t,
                    Claim::Held { token: None } => {
                        return Err(JournalError::LeaseLost(format!("session {s}: no lease")))
                    }
                    Claim::Busy { holder, .. } => {
                        return Err(JournalError::LeaseLost(format!(
                            "Guardian {holder:?} holds session {s}"
                        )))
                    }
                    Claim::Failed(e) => return Err(JournalError::Failed(e)),
                },
            };
            out.insert(s.to_string(), token);
        }
        Ok(out)
    }

    /// Encodes the records here (on the caller's thread), each with its session's token, and
    /// queues them for the committer.
    /// `lease`: the token the records' session was decided under (its records then carry
    /// that one, not whichever this Guardian holds now: a newer one means the session was
    /// taken again and restored since, and they must not commit).
    fn write(&self, records: Vec<Record>, replaces: Option<String>, lease: Option<i64>) -> Durable {
        let decided = match (lease, records.first().and_then(Record::session)) {
            (Some(t), Some(s)) => Some((s.to_string(), t)),
            _ => None,
        };
        let sessions: Vec<&str> = records
            .iter()
            .filter_map(Record::session)
            .filter(|s| decided.as_ref().is_none_or(|(d, _)| d != s))
            .collect();
        let mut tokens = match self.tokens(&sessions) {
            Ok(t) => t,
            Err(e) => return Durable::settled_as(Err(e)),
        };
        tokens.extend(decided);
        journal::enqueue(self.tx.as_ref(), &records, replaces, |r| {
            let token = r.session().and_then(|s| tokens.get(s).copied());
            Ok((token, serde_json::to_string(r).map_err(err)?))
        })
    }

    /// Lets every lease this Guardian holds go at once (a clean stop): the other Guardians
    /// take its sessions without waiting for the leases to expire.
    /// Returns how many were let go.
    pub fn release_all(&self) -> Result<usize, String> {
        let held: Vec<(String, i64)> = {
            let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
            leases.drain().map(|(s, l)| (s, l.token)).collect()
        };
        if held.is_empty() {
            return Ok(0);
        }
        let me = self.fleet.guardian.clone();
        let n = held.len();
        self.on_reader(move |c| release(c, &me, &held))?;
        Ok(n)
    }
}

type Rows = Result<Vec<(u64, Record)>, String>;

fn lease_ms(fleet: &Fleet) -> f64 {
    fleet.lease.as_millis() as f64
}

/// Expires the given leases now, if they still carry this Guardian's tokens.
fn release(c: &mut Client, me: &str, held: &[(String, i64)]) -> Result<(), String> {
    let (sessions, tokens): (Vec<&str>, Vec<i64>) =
        held.iter().map(|(s, t)| (s.as_str(), *t)).unzip();
    c.execute(
        &format!(
            "UPDATE {LEASE} l SET expires = now() \
             FROM unnest($1::text[], $2::bigint[]) AS t(s, k) \
             WHERE l.session = t.s AND l.token = t.k AND l.guardian = $3"
        ),
        &[&sessions, &tokens, &me],
    )
    .map_err(err)?;
    Ok(())
}

impl Drop for PgStore {
    fn drop(&mut self) {
        let _ = self.release_all();
        self.tx.take();
        self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Journal for PgStore {
    fn append(&self, records: Vec<Record>) -> Result<(), JournalError> {
        self.submit(records).wait()
    }

    fn submit(&self, records: Vec<Record>) -> Durable {
        if records.is_empty() {
            return Durable::settled(Ok(()));
        }
        self.write(records, None, None)
    }

    fn submit_as(&self, records: Vec<Record>, lease: Option<i64>) -> Durable {
        if records.is_empty() {
            return Durable::settled(Ok(()));
        }
        self.write(records, None, lease)
    }

    fn compact(&self, session: &str, summary: Record) -> Result<bool, JournalError> {
        self.write(vec![summary], Some(session.to_string()), None)
            .wait()?;
        // Its row went with the compaction: nothing to renew or let go.
        self.leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session);
        Ok(true)
    }

    fn session_records(&self, session: &str) -> Option<Result<Vec<Record>, JournalError>> {
        Some(self.records_of(session).map_err(JournalError::Failed))
    }

    fn claim(&self, session: &str) -> Claim {
        {
            let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(l) = leases.get_mut(session).filter(|l| !l.lost) {
                l.used = Instant::now();
                return Claim::Held {
                    token: Some(l.token),
                };
            }
        }
        self.acquire(session)
    }

    fn peek(&self, session: &str) -> Claim {
        let mine = self
            .leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session)
            .is_some_and(|l| !l.lost);
        if mine {
            return Claim::Held { token: None };
        }
        let (me, s) = (self.fleet.guardian.clone(), session.to_string());
        let got = self.on_reader(move |c| {
            let row = c
                .query_opt(
                    &format!(
                        "SELECT guardian, \
                           (extract(epoch FROM expires - now()) * 1000)::bigint \
                         FROM {LEASE} WHERE session = $1 AND expires > now() AND guardian <> $2"
                    ),
                    &[&s, &me],
                )
                .map_err(err)?;
            Ok(row.map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1))))
        });
        match got {
            Ok(None) => Claim::Held { token: None },
            Ok(Some((holder, expires_in_ms))) => Claim::Busy {
                holder,
                expires_in_ms,
            },
            Err(e) => Claim::Failed(e),
        }
    }
}

/// Creates the tables, the sequence and the index if they are missing (one Guardian at a
/// time); checks the format.
fn prepare(c: &mut Client) -> Result<(), String> {
    let mut t = c.transaction().map_err(err)?;
    t.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .map_err(err)?;
    t.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {META} (key text PRIMARY KEY, value text NOT NULL);
         CREATE TABLE IF NOT EXISTS {JOURNAL} (
             seq bigint PRIMARY KEY,
             session text,
             record json NOT NULL
         );
         CREATE INDEX IF NOT EXISTS {JOURNAL}_session ON {JOURNAL} (session, seq);
         CREATE TABLE IF NOT EXISTS {LEASE} (
             session text PRIMARY KEY,
             guardian text NOT NULL,
             token bigint NOT NULL,
             expires timestamptz NOT NULL
         );
         CREATE SEQUENCE IF NOT EXISTS {SEQ} MINVALUE 0 START 0;"
    ))
    .map_err(err)?;
    // A journal written before the sequence existed continues after its last record.
    t.execute(
        &format!(
            "SELECT setval('{SEQ}', m, true) FROM (SELECT max(seq) AS m FROM {JOURNAL}) j \
             WHERE m IS NOT NULL AND m >= (SELECT CASE WHEN is_called THEN last_value \
               ELSE last_value - 1 END FROM {SEQ})"
        ),
        &[],
    )
    .map_err(err)?;
    t.execute(
        &format!("INSERT INTO {META} (key, value) VALUES ('format', $1) ON CONFLICT DO NOTHING"),
        &[&FORMAT],
    )
    .map_err(err)?;
    t.commit().map_err(err)?;
    check_format(c)
}

fn check_format(c: &mut Client) -> Result<(), String> {
    let row = c
        .query_opt(
            &format!("SELECT value FROM {META} WHERE key = 'format'"),
            &[],
        )
        .map_err(err)?;
    match row.map(|r| r.get::<_, String>(0)) {
        Some(f) if f == FORMAT => Ok(()),
        Some(f) => Err(format!("unknown journal format {f:?}")),
        None => Err("no Warden state here".into()),
    }
}

fn query(
    c: &mut Client,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<Vec<(u64, Record)>, String> {
    let rows = c.query(sql, params).map_err(err)?;
    rows.iter()
        .map(|row| {
            let seq: i64 = row.get(0);
            let text: &str = row.get(1);
            let rec: Record =
                serde_json::from_str(text).map_err(|e| format!("journal record {seq}: {e}"))?;
            Ok((u64::try_from(seq).unwrap_or(0), rec))
        })
        .collect()
}

/// The reader thread: one query at a time on its own connection.
fn read_loop(mut c: Client, asked: mpsc::Receiver<Job>) {
    while let Ok(job) = asked.recv() {
        job(&mut c);
    }
}

/// Whether the database holds a Warden journal (for the commands that read a stopped
/// Guardian's state, which should not create one).
pub fn has_state(url: &str) -> Result<bool, String> {
    let mut c = connect(url)?;
    let row = c
        .query_one(&format!("SELECT to_regclass('{META}') IS NOT NULL"), &[])
        .map_err(err)?;
    if !row.get::<_, bool>(0) {
        return Ok(false);
    }
    check_format(&mut c).map_err(|e| format!("{}: {e}", redact(url)))?;
    Ok(true)
}

/// Every record of the database's journal (for `warden audit`): read without any lease, so
/// it works beside running Guardians too (it sees what was committed).
pub fn read_url(url: &str) -> Result<Vec<Record>, String> {
    if !has_state(url)? {
        return Err(format!("{}: no Warden state here", redact(url)));
    }
    let mut c = connect(url)?;
    let sql = format!("SELECT seq, record::text FROM {JOURNAL} ORDER BY seq");
    Ok(query(&mut c, &sql, &[])
        .map_err(|e| format!("{}: {e}", redact(url)))?
        .into_iter()
        .map(|(_, r)| r)
        .collect())
}

/// A lease unused this long (claimed or written) is let go rather than renewed: its session
/// is idle here, and another Guardian may take it without waiting.
fn unused_after(fleet: &Fleet) -> Duration {
    (fleet.lease * 6).max(Duration::from_secs(60))
}

/// The committer: every batch waiting, in one transaction; each batch settled after COMMIT.
/// Between groups, and at least every third of a lease, it renews the leases in use. A failed
/// transaction stops the journal (every later batch fails, so the Guardian refuses rather than
/// answer without a record): restart the Guardian once the database is back.
fn commit_loop(mut c: Client, rx: mpsc::Receiver<Batch>, leases: &Leases, fleet: &Fleet) {
    let mut broken: Option<String> = None;
    let every = (fleet.lease / 3).max(Duration::from_millis(10));
    let mut renewed = Instant::now();
    loop {
        let first = match rx.recv_timeout(every.saturating_sub(renewed.elapsed())) {
            Ok(b) => Some(b),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if broken.is_none() && renewed.elapsed() >= every {
            renewed = Instant::now();
            if let Err(e) = renew(&mut c, leases, fleet) {
                broken = Some(format!("the journal could not renew its leases: {e}"));
            }
        }
        let Some(first) = first else { continue };
        let mut batch = vec![first];
        while batch.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(b) => batch.push(b),
                Err(_) => break,
            }
        }
        if let Some(why) = &broken {
            for (_, _, done) in batch {
                done.settle(Err(why.clone()));
            }
            continue;
        }
        match commit(&mut c, &batch, fleet) {
            Ok(kept) => {
                // Marked before any answer goes: the next claim of a fenced session then
                // re-takes or refuses it rather than decide on the stale memory again.
                let lost: Vec<(String, i64)> = batch
                    .iter()
                    .zip(&kept)
                    .filter(|(_, ok)| !**ok)
                    .flat_map(|((records, _, _), _)| records.iter())
                    .filter_map(|(s, (k, _))| Some((s.clone()?, (*k)?)))
                    .collect();
                mark_lost(leases, &lost);
                for ((records, _, done), ok) in batch.into_iter().zip(kept) {
                    if ok {
                        done.settle(Ok(()));
                    } else {
                        let s = records.iter().find_map(|(s, _)| s.clone());
                        done.settle_as(Err(taken_over(s.as_deref())));
                    }
                }
            }
            Err(e) => {
                let why = format!("the journal could not commit: {e}");
                broken = Some(why.clone());
                for (_, _, done) in batch {
                    done.settle(Err(why.clone()));
                }
            }
        }
    }
}

/// The error of records whose session another Guardian took over.
fn taken_over(session: Option<&str>) -> JournalError {
    JournalError::LeaseLost(format!(
        "another Guardian took session {} over",
        session.unwrap_or("?")
    ))
}

/// Marks the leases whose tokens these are as lost (a newer token of the session stays).
fn mark_lost(leases: &Leases, lost: &[(String, i64)]) {
    if lost.is_empty() {
        return;
    }
    let mut leases = leases.lock().unwrap_or_else(|e| e.into_inner());
    for (s, t) in lost {
        if let Some(l) = leases.get_mut(s).filter(|l| l.token == *t) {
            l.lost = true;
        }
    }
}

/// Locks the lease rows of `pairs` (session, token) that still carry this Guardian's tokens,
/// in session order (two Guardians' commits then never wait on each other in a cycle), and
/// gives back those found.
fn lock_held(
    t: &mut postgres::Transaction<'_>,
    me: &str,
    pairs: &[(&str, i64)],
) -> Result<HashSet<(String, i64)>, String> {
    if pairs.is_empty() {
        return Ok(HashSet::new());
    }
    let (sessions, tokens): (Vec<&str>, Vec<i64>) = pairs.iter().copied().unzip();
    let rows = t
        .query(
            &format!(
                "SELECT l.session, l.token FROM {LEASE} l \
                 JOIN unnest($1::text[], $2::bigint[]) AS t(s, k) \
                   ON l.session = t.s AND l.token = t.k \
                 WHERE l.guardian = $3 ORDER BY l.session FOR UPDATE OF l"
            ),
            &[&sessions, &tokens, &me],
        )
        .map_err(err)?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
        .collect())
}

/// Pushes the expiry of leases this transaction has locked a lease's length ahead.
fn extend(
    t: &mut postgres::Transaction<'_>,
    fleet: &Fleet,
    held: &HashSet<(String, i64)>,
) -> Result<(), String> {
    if held.is_empty() {
        return Ok(());
    }
    let sessions: Vec<&str> = held.iter().map(|(s, _)| s.as_str()).collect();
    t.execute(
        &format!(
            "UPDATE {LEASE} SET expires = now() + $2 * interval '1 millisecond' \
             WHERE session = ANY($1) AND guardian = $3"
        ),
        &[&sessions, &lease_ms(fleet), &fleet.guardian],
    )
    .map_err(err)?;
    Ok(())
}

/// Renews the leases in use and lets go of those unused for long; a lease whose token is gone
/// is marked lost.
fn renew(c: &mut Client, leases: &Leases, fleet: &Fleet) -> Result<(), String> {
    let (keep, idle): (Vec<Held>, Vec<Held>) = {
        let mut map = leases.lock().unwrap_or_else(|e| e.into_inner());
        let old = unused_after(fleet);
        let mut keep = Vec::new();
        let mut idle = Vec::new();
        map.retain(|s, l| {
            if l.lost {
                return false;
            }
            if l.used.elapsed() >= old {
                idle.push((s.clone(), l.token));
                return false;
            }
            keep.push((s.clone(), l.token));
            true
        });
        (keep, idle)
    };
    if !idle.is_empty() {
        release(c, &fleet.guardian, &idle)?;
    }
    if keep.is_empty() {
        return Ok(());
    }
    let mut t = c.transaction().map_err(err)?;
    let pairs: Vec<(&str, i64)> = keep.iter().map(|(s, k)| (s.as_str(), *k)).collect();
    let held = lock_held(&mut t, &fleet.guardian, &pairs)?;
    extend(&mut t, fleet, &held)?;
    t.commit().map_err(err)?;
    let gone: Vec<(String, i64)> = keep.into_iter().filter(|p| !held.contains(p)).collect();
    mark_lost(leases, &gone);
    Ok(())
}

/// Writes the batches in one transaction: first the fencing check (each session's lease row
/// locked and its token compared with the one each record was decided under), then runs of
/// plain appends as one multi-row `INSERT` (arrays unnested), a compaction as a `DELETE` of
/// the session's records before its summary. A batch of a session whose lease was lost is
/// left out (the others commit); gives back which batches were kept.
fn commit(c: &mut Client, batch: &[Batch], fleet: &Fleet) -> Result<Vec<bool>, String> {
    let insert = format!(
        "INSERT INTO {JOURNAL} (seq, session, record) \
         SELECT s, k, r::json FROM unnest($1::bigint[], $2::text[], $3::text[]) AS t(s, k, r)"
    );
    let delete = format!("DELETE FROM {JOURNAL} WHERE session = $1");
    // A compacted session has ended: its lease row goes with its records, under the same
    // fencing (the row is locked above and still this Guardian's, with the summary's token).
    let unlease =
        format!("DELETE FROM {LEASE} WHERE session = $1 AND guardian = $2 AND token = $3");
    let mut t = c.transaction().map_err(err)?;
    let mut pairs: Vec<(&str, i64)> = batch
        .iter()
        .flat_map(|(records, _, _)| records.iter())
        .filter_map(|(s, (k, _))| Some((s.as_deref()?, (*k)?)))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let held = lock_held(&mut t, &fleet.guardian, &pairs)?;
    let kept: Vec<bool> = batch
        .iter()
        .map(|(records, _, _)| {
            records.iter().all(|(s, (k, _))| match (s, k) {
                (None, _) => true,
                (Some(s), Some(k)) => held.contains(&(s.clone(), *k)),
                (Some(_), None) => false,
            })
        })
        .collect();
    extend(&mut t, fleet, &held)?;
    let n: i64 = batch
        .iter()
        .zip(&kept)
        .filter(|(_, k)| **k)
        .map(|((r, _, _), _)| r.len() as i64)
        .sum();
    // Numbers from the shared sequence, in increasing order: each session's records keep
    // the order they were decided in, whichever Guardian decided them.
    let mut numbers: Vec<i64> = if n > 0 {
        t.query(
            &format!("SELECT nextval('{SEQ}') FROM generate_series(1, $1::bigint)"),
            &[&n],
        )
        .map_err(err)?
        .iter()
        .map(|r| r.get::<_, i64>(0))
        .collect()
    } else {
        Vec::new()
    };
    numbers.sort_unstable();
    let mut numbers = numbers.into_iter();
    let mut seqs: Vec<i64> = Vec::new();
    let mut sessions: Vec<Option<&str>> = Vec::new();
    let mut bodies: Vec<&str> = Vec::new();
    let flush = |t: &mut postgres::Transaction<'_>,
                 seqs: &mut Vec<i64>,
                 sessions: &mut Vec<Option<&str>>,
                 bodies: &mut Vec<&str>|
     -> Result<(), String> {
        if !seqs.is_empty() {
            t.execute(&insert, &[&*seqs, &*sessions, &*bodies])
                .map_err(err)?;
            seqs.clear();
            sessions.clear();
            bodies.clear();
        }
        Ok(())
    };
    for ((records, replaces, _), keep) in batch.iter().zip(&kept) {
        if !keep {
            continue;
        }
        if let Some(old) = replaces {
            flush(&mut t, &mut seqs, &mut sessions, &mut bodies)?;
            t.execute(&delete, &[old]).map_err(err)?;
            let token = records
                .iter()
                .find(|(s, _)| s.as_deref() == Some(old.as_str()))
                .and_then(|(_, (k, _))| *k);
            if let Some(k) = token {
                t.execute(&unlease, &[old, &fleet.guardian, &k])
                    .map_err(err)?;
            }
        }
        for (session, (_, body)) in records {
            seqs.push(numbers.next().ok_or("the sequence gave too few numbers")?);
            sessions.push(session.as_deref());
            bodies.push(body);
        }
    }
    flush(&mut t, &mut seqs, &mut sessions, &mut bodies)?;
    t.commit().map_err(err)?;
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_apart_from_folders_and_shown_without_a_password() {
        assert!(is_url("postgres://u@h/db"));
        assert!(is_url("postgresql://h/db"));
        assert!(!is_url("./state"));
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u@h:5432/db"
        );
        assert_eq!(redact("postgres://h/db?x=1"), "postgres://h/db?x=1");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}
