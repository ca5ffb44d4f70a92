//! The journal in PostgreSQL (`--state postgres://…`, feature `postgres`): the same records as
//! the embedded store ([`super::store`]), in a table keyed by the same global sequence number,
//! with an index from each session to its records.
//!
//! One thread (the committer) owns the connection that writes. It takes every batch waiting
//! (group commit), writes them in one transaction and settles each batch's [`Durable`] only
//! after `COMMIT` returned: an answer never goes out for a decision the database does not
//! hold. Reads (restart, a returning session, `warden audit`) go to a second thread with a
//! connection of its own (the sync client runs a runtime of its own, which cannot be entered
//! from the HTTP transport's tokio threads); they see what was committed, which is everything
//! acknowledged. The writer holds a session-level
//! advisory lock for as long as it lives, so a second Guardian on the same database is refused
//! (as a second process on a state folder is), and a killed Guardian's lock goes with its
//! connection. This module owns the schema; it knows records only as [`Record`]s to encode.

use std::str::FromStr;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use postgres::{Client, Config, NoTls};

use crate::guardian::journal::{self, Durable, Journal, Record};

/// The journal's records, by sequence number.
const JOURNAL: &str = "warden_journal";
/// Key-value facts about the journal (its `format`).
const META: &str = "warden_meta";
/// The value of `format` in the meta table: JSON of [`Record`], as in the embedded store.
pub const FORMAT: &str = "warden-journal-1";
/// The advisory lock the writing Guardian holds (`WARDEN` in ASCII).
pub const LOCK_KEY: i64 = 0x5741_5244_454e;
/// How long an open waits for another writer's lock to go (a killed Guardian's connection
/// may take a moment to be noticed).
const LOCK_WAIT: Duration = Duration::from_secs(3);
/// The most batches one group commit takes.
const MAX_GROUP: usize = 4096;

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

/// Records to write; a session whose records they replace (a compaction); the promise to
/// settle once they are committed.
type Batch = journal::Queued<String>;

/// What the reader thread is asked for.
enum Read {
    All,
    From(i64, i64),
    Of(String),
}

type ReadReply = mpsc::Sender<Result<Vec<(u64, Record)>, String>>;

/// The journal in a PostgreSQL database.
pub struct PgStore {
    reader: Mutex<Option<mpsc::Sender<(Read, ReadReply)>>>,
    tx: Option<mpsc::Sender<Batch>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The URL without its password.
    pub url: String,
}

impl PgStore {
    /// Connects, takes the writer's lock, creates the tables if they are missing and starts
    /// the committer after the last record.
    pub fn open(url: &str) -> Result<PgStore, String> {
        let shown = redact(url);
        let mut writer = connect(url)?;
        let started = Instant::now();
        loop {
            let row = writer
                .query_one("SELECT pg_try_advisory_lock($1)", &[&LOCK_KEY])
                .map_err(|e| format!("{shown}: {e}"))?;
            if row.get::<_, bool>(0) {
                break;
            }
            if started.elapsed() >= LOCK_WAIT {
                return Err(format!(
                    "{shown}: another Warden holds this database's journal (advisory lock \
                     {LOCK_KEY}): one Guardian writes a database at a time"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
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
        let next: i64 = writer
            .query_one(
                &format!("SELECT coalesce(max(seq) + 1, 0) FROM {JOURNAL}"),
                &[],
            )
            .map_err(err)?
            .get(0);
        let reader = connect(url)?;
        let (tx, rx) = mpsc::channel::<Batch>();
        let committer = std::thread::Builder::new()
            .name("warden-journal".into())
            .spawn(move || commit_loop(writer, rx, next))
            .map_err(err)?;
        let (ask, asked) = mpsc::channel::<(Read, ReadReply)>();
        let read_thread = std::thread::Builder::new()
            .name("warden-pg-read".into())
            .spawn(move || read_loop(reader, asked))
            .map_err(err)?;
        Ok(PgStore {
            reader: Mutex::new(Some(ask)),
            tx: Some(tx),
            threads: vec![committer, read_thread],
            url: shown,
        })
    }

    fn read(&self, what: Read) -> Result<Vec<(u64, Record)>, String> {
        let (reply, answer) = mpsc::channel();
        {
            let ask = self.reader.lock().unwrap_or_else(|e| e.into_inner());
            let Some(ask) = ask.as_ref() else {
                return Err("the journal is closed".into());
            };
            ask.send((what, reply))
                .map_err(|_| "the journal's reader stopped".to_string())?;
        }
        answer
            .recv()
            .map_err(|_| "the journal's reader stopped".to_string())?
    }

    /// Every record, in the order it was written.
    pub fn records(&self) -> Result<Vec<Record>, String> {
        Ok(self.read(Read::All)?.into_iter().map(|(_, r)| r).collect())
    }

    /// Up to `max` records from sequence number `from` on, with their sequence numbers.
    pub fn records_from(&self, from: u64, max: usize) -> Result<Vec<(u64, Record)>, String> {
        let from = i64::try_from(from).map_err(err)?;
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        self.read(Read::From(from, max))
    }

    /// One session's records, in the order they were written.
    pub fn records_of(&self, session: &str) -> Result<Vec<Record>, String> {
        Ok(self
            .read(Read::Of(session.to_string()))?
            .into_iter()
            .map(|(_, r)| r)
            .collect())
    }

    /// Encodes the records here (on the caller's thread) and queues them for the committer.
    fn write(&self, records: Vec<Record>, replaces: Option<String>) -> Durable {
        journal::enqueue(self.tx.as_ref(), &records, replaces, |r| {
            serde_json::to_string(r).map_err(err)
        })
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.tx.take();
        self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Journal for PgStore {
    fn append(&self, records: Vec<Record>) -> Result<(), String> {
        self.submit(records).wait()
    }

    fn submit(&self, records: Vec<Record>) -> Durable {
        if records.is_empty() {
            return Durable::settled(Ok(()));
        }
        self.write(records, None)
    }

    fn compact(&self, session: &str, summary: Record) -> Result<bool, String> {
        self.write(vec![summary], Some(session.to_string()))
            .wait()?;
        Ok(true)
    }

    fn session_records(&self, session: &str) -> Option<Result<Vec<Record>, String>> {
        Some(self.records_of(session))
    }
}

/// Creates the tables and the index if they are missing; checks the format.
fn prepare(c: &mut Client) -> Result<(), String> {
    c.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {META} (key text PRIMARY KEY, value text NOT NULL);
         CREATE TABLE IF NOT EXISTS {JOURNAL} (
             seq bigint PRIMARY KEY,
             session text,
             record json NOT NULL
         );
         CREATE INDEX IF NOT EXISTS {JOURNAL}_session ON {JOURNAL} (session, seq);"
    ))
    .map_err(err)?;
    c.execute(
        &format!("INSERT INTO {META} (key, value) VALUES ('format', $1) ON CONFLICT DO NOTHING"),
        &[&FORMAT],
    )
    .map_err(err)?;
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
fn read_loop(mut c: Client, asked: mpsc::Receiver<(Read, ReadReply)>) {
    let all = format!("SELECT seq, record::text FROM {JOURNAL} ORDER BY seq");
    let from =
        format!("SELECT seq, record::text FROM {JOURNAL} WHERE seq >= $1 ORDER BY seq LIMIT $2");
    let of = format!("SELECT seq, record::text FROM {JOURNAL} WHERE session = $1 ORDER BY seq");
    while let Ok((what, reply)) = asked.recv() {
        let out = match &what {
            Read::All => query(&mut c, &all, &[]),
            Read::From(f, n) => query(&mut c, &from, &[f, n]),
            Read::Of(s) => query(&mut c, &of, &[s]),
        };
        let _ = reply.send(out);
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

/// Every record of the database's journal (for `warden audit`): read without the writer's
/// lock, so it works beside a running Guardian too (it sees what was committed).
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

/// The committer: every batch waiting, in one transaction; each batch settled after COMMIT.
/// A failed transaction stops the journal (every later batch fails, so the Guardian refuses
/// rather than answer without a record): restart the Guardian once the database is back.
fn commit_loop(mut c: Client, rx: mpsc::Receiver<Batch>, mut next: i64) {
    let mut broken: Option<String> = None;
    while let Ok(first) = rx.recv() {
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
        match commit(&mut c, &batch, next) {
            Ok(n) => {
                next = n;
                for (_, _, done) in batch {
                    done.settle(Ok(()));
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

/// Writes the batches in one transaction: runs of plain appends as one multi-row `INSERT`
/// (arrays unnested), a compaction as a `DELETE` of the session's records before its summary.
fn commit(c: &mut Client, batch: &[Batch], mut next: i64) -> Result<i64, String> {
    let insert = format!(
        "INSERT INTO {JOURNAL} (seq, session, record) \
         SELECT s, k, r::json FROM unnest($1::bigint[], $2::text[], $3::text[]) AS t(s, k, r)"
    );
    let delete = format!("DELETE FROM {JOURNAL} WHERE session = $1");
    let mut t = c.transaction().map_err(err)?;
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
    for (records, replaces, _) in batch {
        if let Some(old) = replaces {
            flush(&mut t, &mut seqs, &mut sessions, &mut bodies)?;
            t.execute(&delete, &[old]).map_err(err)?;
        }
        for (session, body) in records {
            seqs.push(next);
            sessions.push(session.as_deref());
            bodies.push(body);
            next += 1;
        }
    }
    flush(&mut t, &mut seqs, &mut sessions, &mut bodies)?;
    t.commit().map_err(err)?;
    Ok(next)
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
