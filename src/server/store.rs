//! The durable journal behind `--state DIR`. Two parts, each on its own thread:
//!
//! - a **write-ahead log** (`DIR/wal/*.wal`): the committer takes every batch of records
//!   waiting (group commit), appends them as one frame, `fdatasync`s, and only then lets the
//!   requests be answered. One sequential write and one flush per group is what a durable
//!   answer costs.
//! - a **redb database** (`DIR/warden.redb`): the filer moves what the log holds into a table
//!   keyed by a global sequence number, in as few transactions as it can. Each row names the
//!   previous row of its session, and a second table each session's last row, so a session
//!   that left memory is restored alone by walking its chain back. A log segment is deleted
//!   once the database holds all of it durably.
//!
//! Reads (restart, a returning session, `warden audit`) go to the database, after the filer
//! has caught up with everything acknowledged. At open, segments a crash left behind are
//! filed first. This module owns the on-disk format; it knows records only as
//! [`Record`]s to encode, never what they mean.
//!
//! It needs no server: with feature `journal` alone it is built by itself, and
//! [`open_guardian`] gives an embedding (the Python wheel's `state=`) a Guardian over a folder,
//! its sessions restored.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use redb::{Database, Durability, MultimapTableDefinition, ReadableTable, TableDefinition};

use crate::acs::crypto;
use crate::guardian::journal::{self, Durable, Journal, JournalError, Record};
use crate::guardian::{Guardian, Options, Policy};

/// Sequence number → a row: the sequence number of the previous row of the same session
/// ([`NO_PREVIOUS`] for a session's first row and for rows of no session), 8 bytes little
/// endian, then the record's JSON.
const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Session id → the sequence number of its last row: the head of its chain.
///
/// A chain rather than an index of every row: the filer then writes one small entry per
/// session per filing, not one per record (a multimap insert per record was 6 µs of the
/// filer's 14 per request under load).
const SESSION_LAST: TableDefinition<&str, u64> = TableDefinition::new("session_last");
/// The index of every row by session, in journals written before the chains (migrated at open).
const OLD_BY_SESSION: MultimapTableDefinition<&str, u64> =
    MultimapTableDefinition::new("by_session");
/// `meta` key naming the table layout; journals without it are migrated at open.
const LAYOUT_KEY: &str = "layout";
const LAYOUT: &[u8] = b"chained-1";
/// The previous-row link of a session's first row and of rows that belong to no session.
const NO_PREVIOUS: u64 = u64::MAX;

/// redb's page cache for the journal.
const CACHE_BYTES: usize = 32 << 20;

/// Format of the records in `log`: JSON of [`Record`].
pub const FORMAT: &[u8] = b"warden-journal-1";

/// The log's folder inside a state folder.
const WAL_DIR: &str = "wal";
/// A segment past this size is closed and a new one begun (so filed ones can be deleted).
/// Segments are written full of zeros before they are used: a flush of a write into blocks the
/// file already has is a flush of that data alone, where an append also commits the file's
/// new size through the file system's journal, with whatever else is waiting there.
const SEGMENT_BYTES: u64 = 8 << 20;
/// The first segment after an open is small: a short-lived process (a `warden hook`) should
/// not pay for zeroing a whole segment.
const FIRST_SEGMENT_BYTES: u64 = 256 << 10;
/// The most batches one group commit takes.
const MAX_GROUP: usize = 4096;
/// Groups the filer may be behind before the committer waits for it (bounds memory).
const FILER_BACKLOG: usize = 8192;
/// How long records wait in the filer before they are filed (unless a reader needs them).
const FILE_EVERY: Duration = Duration::from_millis(250);
/// How often the filer makes the database durable (and deletes the log it no longer needs).
/// Between those commits the database's transactions are not flushed: the log already holds
/// what they hold, so a flush per filing would only compete with the log's own.
const FILE_DURABLY_EVERY: Duration = Duration::from_secs(1);

/// An encoded record and the session it belongs to.
type Encoded = (Option<String>, Vec<u8>);

/// Records to write; a session whose records they replace (a compaction); and the promise to
/// settle once they are durable.
type Batch = journal::Queued<Vec<u8>>;

/// One batch with its place in the sequence: what a log frame holds.
#[derive(Debug, Clone, PartialEq)]
struct Group {
    /// The sequence number of the first record.
    first: u64,
    replaces: Option<String>,
    records: Vec<Encoded>,
}

/// What the committer tells the filer.
enum ToFiler {
    Groups(Vec<Group>),
    /// A segment is complete: its path and the sequence number after its last record.
    Closed(PathBuf, u64),
}

/// What the threads share: how far the log and the database are, why they stopped, and a
/// zeroed segment made ready by the filer for the committer's next rotation.
#[derive(Default)]
struct Progress {
    spare: Mutex<Option<PathBuf>>,
    /// Wakes the filer before its time: a reader waits for it, the committer's queue to it is
    /// full, or the journal is closing.
    alarm: Mutex<Alarm>,
    ring: Condvar,
    /// The sequence number after the last record acknowledged (in the log).
    logged: AtomicU64,
    /// The sequence number after the last record filed durably in the database, and the
    /// error that stopped the journal, if one did.
    filed: Mutex<(u64, Option<String>)>,
    caught_up: Condvar,
}

#[derive(Default)]
struct Alarm {
    wanted: bool,
    closing: bool,
}

impl Progress {
    fn wake_filer(&self, closing: bool) {
        let mut a = self.alarm.lock().unwrap_or_else(|e| e.into_inner());
        a.wanted = true;
        a.closing |= closing;
        self.ring.notify_all();
    }
}

/// The journal: a write-ahead log in front of a redb database.
pub struct Store {
    db: Arc<Database>,
    progress: Arc<Progress>,
    tx: Option<mpsc::Sender<Batch>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The folder.
    pub path: PathBuf,
}

/// Journal records read and restored at a time by [`open_guardian`].
const RESTORE_CHUNK: usize = 1024;

/// A Guardian that journals every decided step to the folder `dir` (created if missing)
/// before it answers, with every session the folder holds restored: a session decided before
/// a restart continues where it was. What an embedding without the server opens (`warden
/// serve --state DIR` does the same, saying how far it got). Records are read in chunks, so
/// the restore never holds the whole journal; ended sessions past their tombstone leave
/// memory at the end (their records are compacted by the next
/// [`Guardian::sweep_sessions`]). One process at a time: a folder another Guardian has open
/// is refused.
pub fn open_guardian(policy: Policy, options: Options, dir: &Path) -> Result<Guardian, String> {
    let store = Arc::new(Store::open(dir)?);
    let journal: Arc<dyn Journal> = store.clone();
    let g = Guardian::with_journal(policy, options, journal);
    let mut next = 0;
    loop {
        let chunk = store.records_from(next, RESTORE_CHUNK)?;
        let Some((last, _)) = chunk.last() else { break };
        next = last + 1;
        g.restore(chunk.into_iter().map(|(_, r)| r));
    }
    g.sweep_memory();
    Ok(g)
}

/// The database file inside a state folder.
pub fn db_path(dir: &Path) -> PathBuf {
    dir.join("warden.redb")
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Store {
    /// Opens (creating if needed) the store in `dir`, filing what a crash left in the log.
    pub fn open(dir: &Path) -> Result<Store, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = db_path(dir);
        // A small page cache: the journal is written once and read back only at a restart or
        // for a returning session, and redb's default (1 GiB) would let a restart's reads grow
        // the process by up to the journal's size.
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        prepare(&db, &path)?;
        // The database is locked now: the log is this process's alone.
        let wal = dir.join(WAL_DIR);
        std::fs::create_dir_all(&wal).map_err(|e| format!("{}: {e}", wal.display()))?;
        recover(&db, &wal)?;
        let next = {
            let r = db.begin_read().map_err(err)?;
            let last = r
                .open_table(LOG)
                .map_err(err)?
                .last()
                .map_err(err)?
                .map_or(0, |(k, _)| k.value() + 1);
            let meta = r.open_table(META).map_err(err)?;
            let filed = meta
                .get("filed")
                .map_err(err)?
                .map_or(0, |v| decode_u64(v.value()));
            last.max(filed)
        };
        let segment = Segment::create(&wal, next, FIRST_SEGMENT_BYTES)?;
        let db = Arc::new(db);
        let progress = Arc::new(Progress {
            spare: Mutex::new(None),
            alarm: Mutex::new(Alarm::default()),
            ring: Condvar::new(),
            logged: AtomicU64::new(next),
            filed: Mutex::new((next, None)),
            caught_up: Condvar::new(),
        });
        let (tx, rx) = mpsc::channel::<Batch>();
        let (to_filer, from_committer) = mpsc::sync_channel::<ToFiler>(FILER_BACKLOG);
        let committer = {
            let progress = progress.clone();
            std::thread::Builder::new()
                .name("warden-journal".into())
                .spawn(move || commit_loop(segment, wal, rx, to_filer, next, &progress))
                .map_err(err)?
        };
        let filer = {
            let db = db.clone();
            let progress = progress.clone();
            std::thread::Builder::new()
                .name("warden-filer".into())
                .spawn({
                    let wal = dir.join(WAL_DIR);
                    move || file_loop(&db, &wal, from_committer, &progress)
                })
                .map_err(err)?
        };
        Ok(Store {
            db,
            progress,
            tx: Some(tx),
            threads: vec![committer, filer],
            path,
        })
    }

    /// Waits until the database holds every record acknowledged so far.
    pub(super) fn caught_up(&self) -> Result<(), String> {
        let target = self.progress.logged.load(Ordering::SeqCst);
        if self
            .progress
            .filed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            < target
        {
            self.progress.wake_filer(false);
        }
        let mut filed = self
            .progress
            .filed
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(e) = &filed.1 {
                return Err(e.clone());
            }
            if filed.0 >= target {
                return Ok(());
            }
            filed = self
                .progress
                .caught_up
                .wait(filed)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Every record, in the order it was written.
    pub fn records(&self) -> Result<Vec<Record>, String> {
        self.caught_up()?;
        read_records(&self.db)
    }

    /// Up to `max` records from sequence number `from` on, with their sequence numbers: a
    /// restart reads the journal in such chunks, so it never holds the whole journal.
    pub fn records_from(&self, from: u64, max: usize) -> Result<Vec<(u64, Record)>, String> {
        self.caught_up()?;
        let r = self.db.begin_read().map_err(err)?;
        let t = r.open_table(LOG).map_err(err)?;
        let mut out = Vec::with_capacity(max.min(4096));
        for item in t.range(from..).map_err(err)?.take(max) {
            let (k, v) = item.map_err(err)?;
            out.push((k.value(), decode_row(k.value(), v.value())?));
        }
        Ok(out)
    }

    /// One session's records, in the order they were written: its chain, walked back from
    /// its last row.
    pub fn records_of(&self, session: &str) -> Result<Vec<Record>, String> {
        self.caught_up()?;
        let r = self.db.begin_read().map_err(err)?;
        let log = r.open_table(LOG).map_err(err)?;
        let heads = r.open_table(SESSION_LAST).map_err(err)?;
        let mut seq = match heads.get(session).map_err(err)? {
            Some(v) => v.value(),
            None => return Ok(Vec::new()),
        };
        let mut out = Vec::new();
        while seq != NO_PREVIOUS {
            let row = log
                .get(seq)
                .map_err(err)?
                .ok_or_else(|| broken_chain(session, seq))?;
            let (prev, json) = split_row(seq, row.value())?;
            let prev = next_link(session, seq, prev)?;
            out.push(parse_record(seq, json)?);
            seq = prev;
        }
        out.reverse();
        Ok(out)
    }

    /// Encodes the records here (on the caller's thread, so encoding runs in parallel) and
    /// queues them for the committer.
    fn write(&self, records: Vec<Record>, replaces: Option<String>) -> Durable {
        journal::enqueue(self.tx.as_ref(), &records, replaces, |r| {
            serde_json::to_vec(r).map_err(err)
        })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // The committer ends when its queue closes, then the filer when it has filed the rest
        // (and deleted the log it filed).
        self.tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Journal for Store {
    fn append(&self, records: Vec<Record>) -> Result<(), JournalError> {
        self.submit(records).wait()
    }

    fn submit(&self, records: Vec<Record>) -> Durable {
        if records.is_empty() {
            return Durable::settled(Ok(()));
        }
        self.write(records, None)
    }

    fn compact(&self, session: &str, summary: Record) -> Result<bool, JournalError> {
        self.write(vec![summary], Some(session.to_string()))
            .wait()?;
        Ok(true)
    }

    fn compact_submit(&self, session: &str, summary: Record) -> Durable {
        self.write(vec![summary], Some(session.to_string()))
    }

    fn session_records(&self, session: &str) -> Option<Result<Vec<Record>, JournalError>> {
        Some(self.records_of(session).map_err(JournalError::Failed))
    }
}

// ---------------------------------------------------------------------------------------------
// rows and chains

/// A row's link to the previous row of its session, and the record's JSON.
fn split_row(seq: u64, row: &[u8]) -> Result<(u64, &[u8]), String> {
    if row.len() < 8 {
        return Err(format!(
            "journal record {seq}: the row is shorter than its link ({} bytes)",
            row.len()
        ));
    }
    let (link, json) = row.split_at(8);
    Ok((decode_u64(link), json))
}

fn parse_record(seq: u64, json: &[u8]) -> Result<Record, String> {
    serde_json::from_slice(json).map_err(|e| format!("journal record {seq}: {e}"))
}

fn decode_row(seq: u64, row: &[u8]) -> Result<Record, String> {
    let (_, json) = split_row(seq, row)?;
    parse_record(seq, json)
}

fn encode_row(out: &mut Vec<u8>, prev: u64, json: &[u8]) {
    out.clear();
    out.extend_from_slice(&prev.to_le_bytes());
    out.extend_from_slice(json);
}

/// The step back along a chain, refusing a link that does not go back (damage would
/// otherwise loop).
fn next_link(session: &str, seq: u64, prev: u64) -> Result<u64, String> {
    if prev != NO_PREVIOUS && prev >= seq {
        return Err(format!(
            "journal record {seq} of session {session:?} links forward to {prev}: the journal \
             is damaged"
        ));
    }
    Ok(prev)
}

fn broken_chain(session: &str, seq: u64) -> String {
    format!(
        "journal record {seq} of session {session:?} is missing although its chain names it: \
         the journal is damaged"
    )
}

/// Rewrites a journal of the layout before the chains (rows of bare JSON, an index of every
/// row by session) into chained rows, in chunks so that a large journal is never held whole.
fn migrate_to_chains(w: &redb::WriteTransaction) -> Result<(), String> {
    const CHUNK: usize = 1024;
    let mut log = w.open_table(LOG).map_err(err)?;
    let mut heads: HashMap<String, u64> = HashMap::new();
    let mut from = 0u64;
    let mut row = Vec::new();
    loop {
        let chunk: Vec<(u64, Vec<u8>)> = log
            .range(from..)
            .map_err(err)?
            .take(CHUNK)
            .map(|item| item.map(|(k, v)| (k.value(), v.value().to_vec())))
            .collect::<Result<_, _>>()
            .map_err(err)?;
        let Some(&(last, _)) = chunk.last() else {
            break;
        };
        for (seq, json) in chunk {
            let rec = parse_record(seq, &json)?;
            let prev = match rec.session() {
                Some(s) => heads.insert(s.to_string(), seq).unwrap_or(NO_PREVIOUS),
                None => NO_PREVIOUS,
            };
            encode_row(&mut row, prev, &json);
            log.insert(seq, row.as_slice()).map_err(err)?;
        }
        from = last + 1;
    }
    let mut last = w.open_table(SESSION_LAST).map_err(err)?;
    for (session, seq) in &heads {
        last.insert(session.as_str(), *seq).map_err(err)?;
    }
    drop((log, last));
    w.delete_multimap_table(OLD_BY_SESSION).map_err(err)?;
    Ok(())
}

/// Checks the format, creates the tables, migrates a journal of an earlier layout.
fn prepare(db: &Database, path: &Path) -> Result<(), String> {
    let w = db.begin_write().map_err(err)?;
    {
        let mut meta = w.open_table(META).map_err(err)?;
        let existing = meta.get("format").map_err(err)?.map(|v| v.value().to_vec());
        match existing {
            None => {
                meta.insert("format", FORMAT).map_err(err)?;
            }
            Some(f) if f == FORMAT => {}
            Some(f) => {
                return Err(format!(
                    "{}: unknown journal format {:?}",
                    path.display(),
                    String::from_utf8_lossy(&f)
                ))
            }
        }
        w.open_table(LOG).map_err(err)?;
        w.open_table(SESSION_LAST).map_err(err)?;
        let layout = meta
            .get(LAYOUT_KEY)
            .map_err(err)?
            .map(|v| v.value().to_vec());
        match layout {
            Some(l) if l == LAYOUT => {}
            Some(l) => {
                return Err(format!(
                    "{}: unknown journal layout {:?} (written by a newer Warden?)",
                    path.display(),
                    String::from_utf8_lossy(&l)
                ))
            }
            None => {
                migrate_to_chains(&w)?;
                meta.remove("indexed").map_err(err)?;
                meta.insert(LAYOUT_KEY, LAYOUT).map_err(err)?;
            }
        }
    }
    w.commit().map_err(err)
}

fn read_records(db: &Database) -> Result<Vec<Record>, String> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(LOG).map_err(err)?;
    let mut out = Vec::new();
    for item in t.iter().map_err(err)? {
        let (k, v) = item.map_err(err)?;
        out.push(decode_row(k.value(), v.value())?);
    }
    Ok(out)
}

/// Reads the records of a state folder (for `warden audit`), filing first what a crash left
/// in the log.
pub fn read_dir(dir: &Path) -> Result<Vec<Record>, String> {
    let path = db_path(dir);
    if !path.is_file() {
        return Err(format!("{}: no Warden state here", path.display()));
    }
    Store::open(dir)?.records()
}

// ---------------------------------------------------------------------------------------------
// the database side

/// Files groups into the database in one transaction (durable or not); gives the sequence
/// number after the last record filed.
fn file(db: &Database, groups: &[Group], durable: bool) -> Result<u64, String> {
    let mut w = db.begin_write().map_err(err)?;
    w.set_durability(if durable {
        Durability::Immediate
    } else {
        Durability::None
    });
    let mut end = 0;
    {
        let mut t = w.open_table(LOG).map_err(err)?;
        let mut last = w.open_table(SESSION_LAST).map_err(err)?;
        // The heads of the chains this filing moved (`None`: the chain was compacted away),
        // written once each at the end.
        let mut heads: HashMap<&str, Option<u64>> = HashMap::new();
        let mut row = Vec::new();
        for g in groups {
            if let Some(old) = &g.replaces {
                let mut seq = chain_head(&heads, &last, old)?.unwrap_or(NO_PREVIOUS);
                while seq != NO_PREVIOUS {
                    let prev = match t.remove(seq).map_err(err)? {
                        Some(row) => split_row(seq, row.value())?.0,
                        None => return Err(broken_chain(old, seq)),
                    };
                    seq = next_link(old, seq, prev)?;
                }
                heads.insert(old, None);
            }
            let mut n = g.first;
            for (session, json) in &g.records {
                let prev = match session {
                    Some(s) => {
                        let prev = chain_head(&heads, &last, s)?;
                        heads.insert(s, Some(n));
                        prev.unwrap_or(NO_PREVIOUS)
                    }
                    None => NO_PREVIOUS,
                };
                encode_row(&mut row, prev, json);
                t.insert(n, row.as_slice()).map_err(err)?;
                n += 1;
            }
            end = end.max(n);
        }
        for (session, head) in heads {
            match head {
                Some(seq) => {
                    last.insert(session, seq).map_err(err)?;
                }
                None => {
                    last.remove(session).map_err(err)?;
                }
            }
        }
        if !groups.is_empty() {
            let mut meta = w.open_table(META).map_err(err)?;
            meta.insert("filed", end.to_le_bytes().as_slice())
                .map_err(err)?;
        }
    }
    w.commit().map_err(err)?;
    Ok(end)
}

/// A session's chain head during a filing: as this filing left it, else as the table has it.
fn chain_head(
    moved: &HashMap<&str, Option<u64>>,
    last: &redb::Table<&'static str, u64>,
    session: &str,
) -> Result<Option<u64>, String> {
    match moved.get(session) {
        Some(head) => Ok(*head),
        None => Ok(last.get(session).map_err(err)?.map(|v| v.value())),
    }
}

fn decode_u64(b: &[u8]) -> u64 {
    b.try_into().map(u64::from_le_bytes).unwrap_or(0)
}

fn file_loop(db: &Database, wal: &Path, rx: mpsc::Receiver<ToFiler>, progress: &Progress) {
    let mut closed: Vec<(PathBuf, u64)> = Vec::new();
    let mut pending: Vec<Group> = Vec::new();
    // What the database holds durably (a crash keeps it), against what it holds at all.
    let mut durable_end = progress.filed.lock().unwrap_or_else(|e| e.into_inner()).0;
    let mut last_durable = Instant::now();
    let mut last_filed = Instant::now();
    let mut open = true;
    while open {
        // Records wait here a little: a redb transaction costs about the same for ten records
        // as for a thousand, and each wake-up of this thread costs the cores the decisions
        // need; so it sleeps, and files in large steps. A reader (who must see everything
        // acknowledged) or a full queue wakes it early.
        let wanted = {
            let deadline = last_filed + FILE_EVERY;
            let mut alarm = progress.alarm.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let now = Instant::now();
                if alarm.wanted || alarm.closing || now >= deadline {
                    break;
                }
                alarm = progress
                    .ring
                    .wait_timeout(alarm, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            std::mem::take(&mut alarm.wanted)
        };
        loop {
            match rx.try_recv() {
                Ok(ToFiler::Groups(g)) => pending.extend(g),
                Ok(ToFiler::Closed(p, end)) => closed.push((p, end)),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        let flush = !open || last_durable.elapsed() >= FILE_DURABLY_EVERY;
        last_filed = Instant::now();
        if pending.is_empty() && !flush && !wanted {
            continue;
        }
        let outcome = file(db, &pending, flush);
        pending.clear();
        let mut filed = progress.filed.lock().unwrap_or_else(|e| e.into_inner());
        match outcome {
            Ok(end) => {
                filed.0 = filed.0.max(end);
                if flush {
                    durable_end = filed.0;
                    last_durable = Instant::now();
                }
            }
            // The records are safe in the log (a restart files them), but reads would miss
            // them: stop the journal.
            Err(e) => {
                filed.1.get_or_insert(format!(
                    "the journal's database could not file records: {e}"
                ));
            }
        }
        drop(filed);
        progress.caught_up.notify_all();
        delete_filed(&mut closed, durable_end, progress);
        if open {
            prepare_spare(wal, progress);
        }
    }
    if let Some(p) = progress
        .spare
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        let _ = std::fs::remove_file(p);
    }
}

/// Deletes the closed segments whose records the database holds durably.
fn delete_filed(closed: &mut Vec<(PathBuf, u64)>, durable_end: u64, progress: &Progress) {
    if progress
        .filed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .1
        .is_some()
    {
        return;
    }
    closed.retain(|(path, end)| {
        if *end <= durable_end {
            let _ = std::fs::remove_file(path);
            false
        } else {
            true
        }
    });
}

// ---------------------------------------------------------------------------------------------
// the log side

/// The segment being written.
struct Segment {
    file: File,
    path: PathBuf,
    /// Bytes of frames written.
    bytes: u64,
    /// Bytes zeroed ahead.
    capacity: u64,
    /// Set when the file is open for direct writes (`O_DIRECT`).
    direct: Option<DirectTail>,
}

/// The block size direct writes are aligned to (a multiple of any device's logical block).
const BLOCK: usize = 4096;

/// What direct writes need: an aligned buffer, and the frames' bytes in the last block
/// written only in part, which the next write writes again with its own frame after them.
///
/// Why direct: a buffered write copies the frame into the page cache and `fdatasync` then
/// walks the file system's writeback path to find and send it; a direct write sends it at
/// once, and the flush only has to empty the device's cache. On this project's virtual disk
/// that took the kernel's share of a group commit from about 70 to 45 µs
/// (benches/RESULTS.md).
struct DirectTail {
    buffer: AlignedBuffer,
    tail: Vec<u8>,
}

/// A byte buffer whose start is aligned to [`BLOCK`].
struct AlignedBuffer {
    raw: Vec<u8>,
    start: usize,
}

impl AlignedBuffer {
    fn new() -> AlignedBuffer {
        AlignedBuffer {
            raw: Vec::new(),
            start: 0,
        }
    }

    /// `len` zeroed bytes starting on a block boundary.
    fn zeroed(&mut self, len: usize) -> &mut [u8] {
        if self.raw.len() < self.start + len {
            self.raw = vec![0; len.next_power_of_two().max(BLOCK) + BLOCK];
            self.start = self.raw.as_ptr().align_offset(BLOCK);
        }
        let out = &mut self.raw[self.start..self.start + len];
        out.fill(0);
        out
    }
}

/// Opens a segment for writing: with `O_DIRECT` where the file system takes it, buffered
/// where it does not (tmpfs before Linux 6.6, some network file systems).
fn open_for_log(path: &Path) -> std::io::Result<(File, bool)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        if let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            return Ok((file, true));
        }
    }
    Ok((open_buffered(path)?, false))
}

fn open_buffered(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
}

/// Writes a file of `len` zeros and flushes it.
fn zeroed(path: &Path, len: u64) -> std::io::Result<File> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)?;
    let chunk = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    file.sync_all()?;
    Ok(file)
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

impl Segment {
    /// A new segment of `len` zeros whose first record will have sequence number `first`.
    fn create(dir: &Path, first: u64, len: u64) -> Result<Segment, String> {
        let path = dir.join(format!("{first:020}.wal"));
        drop(zeroed(&path, len).map_err(|e| format!("{}: {e}", path.display()))?);
        // The new name must survive a crash too.
        sync_dir(dir)?;
        Segment::at(path, len)
    }

    fn at(path: PathBuf, capacity: u64) -> Result<Segment, String> {
        let (file, direct) = open_for_log(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Segment {
            file,
            path,
            bytes: 0,
            capacity,
            direct: direct.then(|| DirectTail {
                buffer: AlignedBuffer::new(),
                tail: Vec::new(),
            }),
        })
    }

    /// Appends a frame and makes it durable.
    fn write_durably(&mut self, frame: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        match &mut self.direct {
            None => self.file.write_all_at(frame, self.bytes)?,
            Some(d) => {
                // Whole blocks from the start of the one partly written: its frames again,
                // this frame, zeros to the block's end (zeros where a frame would start end
                // the segment, as the zeroing ahead made them).
                let from = self.bytes - d.tail.len() as u64;
                let end = d.tail.len() + frame.len();
                let out = d.buffer.zeroed(end.div_ceil(BLOCK) * BLOCK);
                out[..d.tail.len()].copy_from_slice(&d.tail);
                out[d.tail.len()..end].copy_from_slice(frame);
                match self.file.write_all_at(out, from) {
                    Ok(()) => {
                        let kept = end % BLOCK;
                        d.tail.clear();
                        d.tail.extend_from_slice(&out[end - kept..end]);
                    }
                    // A file system that took `O_DIRECT` at open but refuses the write
                    // (alignment it wants larger, a FUSE mount): buffered from here on.
                    Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                        self.direct = None;
                        self.file = open_buffered(&self.path)?;
                        self.file.write_all_at(frame, self.bytes)?;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        self.file.sync_data()?;
        self.bytes += frame.len() as u64;
        Ok(())
    }

    /// The next segment: the filer's spare renamed, or (when it has none ready) one made here.
    fn next(dir: &Path, first: u64, progress: &Progress) -> Result<Segment, String> {
        let spare = progress
            .spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(spare) = spare {
            let path = dir.join(format!("{first:020}.wal"));
            if std::fs::rename(&spare, &path).is_ok() {
                sync_dir(dir)?;
                return Segment::at(path, SEGMENT_BYTES);
            }
        }
        Segment::create(dir, first, SEGMENT_BYTES)
    }
}

/// Zeroes a spare segment for the committer when it has none ready (a file the recovery
/// ignores until it is renamed into the log).
fn prepare_spare(dir: &Path, progress: &Progress) {
    if progress
        .spare
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some()
    {
        return;
    }
    let path = dir.join("spare.tmp");
    if zeroed(&path, SEGMENT_BYTES).is_ok() {
        *progress.spare.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
    }
}

fn commit_loop(
    mut segment: Segment,
    dir: PathBuf,
    rx: mpsc::Receiver<Batch>,
    to_filer: mpsc::SyncSender<ToFiler>,
    mut next: u64,
    progress: &Progress,
) {
    // After a failure nothing more is acknowledged: a later record must never be durable
    // while an earlier one is not (a session's next step may have been decided on it).
    let mut broken: Option<String> = None;
    let mut frame = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
            if batch.len() >= MAX_GROUP {
                break;
            }
        }
        if broken.is_none() {
            broken = progress
                .filed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .1
                .clone();
        }
        if let Some(why) = &broken {
            for (_, _, done) in batch {
                done.settle(Err(why.clone()));
            }
            continue;
        }
        let mut groups = Vec::with_capacity(batch.len());
        let mut settles = Vec::with_capacity(batch.len());
        let mut n = next;
        for (records, replaces, done) in batch {
            let g = Group {
                first: n,
                replaces,
                records,
            };
            n += g.records.len() as u64;
            groups.push(g);
            settles.push(done);
        }
        frame.clear();
        encode_frame(&mut frame, &groups);
        match segment.write_durably(&frame) {
            Ok(()) => {
                next = n;
                progress.logged.store(next, Ordering::SeqCst);
                for done in settles {
                    done.settle(Ok(()));
                }
                if send_to_filer(&to_filer, ToFiler::Groups(groups), progress).is_err() {
                    broken = Some("the journal's filer stopped".into());
                    continue;
                }
                if segment.bytes >= segment.capacity {
                    match Segment::next(&dir, next, progress) {
                        Ok(new) => {
                            let old = std::mem::replace(&mut segment, new);
                            let closed = ToFiler::Closed(old.path, next);
                            let _ = send_to_filer(&to_filer, closed, progress);
                        }
                        Err(e) => broken = Some(format!("the journal could not commit: {e}")),
                    }
                }
            }
            Err(e) => {
                let why = format!("the journal could not commit: {e}");
                broken = Some(why.clone());
                for done in settles {
                    done.settle(Err(why.clone()));
                }
            }
        }
    }
    // Closing: the filer deletes this segment too, once it filed it.
    let _ = to_filer.send(ToFiler::Closed(segment.path, next));
    drop(to_filer);
    progress.wake_filer(true);
}

/// Queues for the filer; a full queue wakes it before waiting for room.
fn send_to_filer(
    to: &mpsc::SyncSender<ToFiler>,
    m: ToFiler,
    progress: &Progress,
) -> Result<(), ()> {
    match to.try_send(m) {
        Ok(()) => Ok(()),
        Err(mpsc::TrySendError::Full(m)) => {
            progress.wake_filer(false);
            to.send(m).map_err(|_| ())
        }
        Err(mpsc::TrySendError::Disconnected(_)) => Err(()),
    }
}

/// One frame: `len: u32 | digest: [u8; 8] | body`, the digest being the first 8 bytes of the
/// body's SHA-256 (a torn write at a crash shows as a frame whose digest does not match).
/// The body is the groups: `count: u32`, then per group `first: u64`, `replaces` (a string or
/// none), `records: u32` and per record its session (a string or none) and its bytes. A
/// string is `len: u32 | bytes`, none is `u32::MAX`.
fn encode_frame(out: &mut Vec<u8>, groups: &[Group]) {
    let start = out.len();
    out.extend_from_slice(&[0; 12]);
    put_u32(out, groups.len());
    for g in groups {
        out.extend_from_slice(&g.first.to_le_bytes());
        put_opt(out, g.replaces.as_deref().map(str::as_bytes));
        put_u32(out, g.records.len());
        for (session, bytes) in &g.records {
            put_opt(out, session.as_deref().map(str::as_bytes));
            put_opt(out, Some(bytes));
        }
    }
    let body = start + 12;
    let len = u32::try_from(out.len() - body).unwrap_or(u32::MAX);
    let digest = crypto::sha256(&out[body..]);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..body].copy_from_slice(&digest[..8]);
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_opt(out: &mut Vec<u8>, s: Option<&[u8]>) {
    match s {
        None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
        Some(b) => {
            put_u32(out, b.len());
            out.extend_from_slice(b);
        }
    }
}

/// Reads the frames of one segment. A frame that is cut short or whose digest does not match
/// ends the segment: `Err(valid_len)` says where the intact frames end.
fn decode_segment(bytes: &[u8]) -> (Vec<Group>, Result<(), usize>) {
    let mut groups = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(frame) = bytes.get(at..at + 12) else {
            // Fewer bytes left than a frame's header: the zeros a direct write pads its last
            // block with (a segment that grew past its zeroed size ends there), or a cut.
            let rest = &bytes[at..];
            return (groups, rest.iter().all(|b| *b == 0).then_some(()).ok_or(at));
        };
        let len = u32::from_le_bytes(frame[..4].try_into().unwrap_or_default()) as usize;
        if len == 0 {
            // The zeros written ahead: no frame was written here (a body is never empty).
            return (groups, Ok(()));
        }
        let Some(body) = bytes.get(at + 12..at + 12 + len) else {
            return (groups, Err(at));
        };
        if crypto::sha256(body)[..8] != frame[4..12] {
            return (groups, Err(at));
        }
        match decode_body(body) {
            Some(mut g) => groups.append(&mut g),
            None => return (groups, Err(at)),
        }
        at += 12 + len;
    }
    (groups, Ok(()))
}

fn decode_body(mut b: &[u8]) -> Option<Vec<Group>> {
    fn u32_(b: &mut &[u8]) -> Option<u32> {
        let (h, t) = b.split_first_chunk::<4>()?;
        *b = t;
        Some(u32::from_le_bytes(*h))
    }
    fn opt(b: &mut &[u8]) -> Option<Option<Vec<u8>>> {
        let n = u32_(b)?;
        if n == u32::MAX {
            return Some(None);
        }
        let (h, t) = b.split_at_checked(n as usize)?;
        *b = t;
        Some(Some(h.to_vec()))
    }
    let count = u32_(&mut b)?;
    let mut groups = Vec::new();
    for _ in 0..count {
        let (first, t) = b.split_first_chunk::<8>()?;
        b = t;
        let replaces = opt(&mut b)?.map(String::from_utf8).transpose().ok()?;
        let n = u32_(&mut b)?;
        let mut records = Vec::new();
        for _ in 0..n {
            let session = opt(&mut b)?.map(String::from_utf8).transpose().ok()?;
            records.push((session, opt(&mut b)??));
        }
        groups.push(Group {
            first: u64::from_le_bytes(*first),
            replaces,
            records,
        });
    }
    b.is_empty().then_some(groups)
}

/// Files what the log holds beyond the database (a crash between the two), then deletes the
/// log. Only the newest segment may end in a torn frame (the write in flight at the crash,
/// never acknowledged); damage anywhere else is refused.
fn recover(db: &Database, dir: &Path) -> Result<(), String> {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    for spare in files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "tmp"))
    {
        let _ = std::fs::remove_file(spare);
    }
    let mut segments: Vec<PathBuf> = files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    segments.sort();
    let filed = {
        let r = db.begin_read().map_err(err)?;
        let meta = r.open_table(META).map_err(err)?;
        let v = meta
            .get("filed")
            .map_err(err)?
            .map(|v| decode_u64(v.value()));
        v.unwrap_or(0)
    };
    for (i, path) in segments.iter().enumerate() {
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let (groups, end) = decode_segment(&bytes);
        if let Err(at) = end {
            if i + 1 != segments.len() {
                return Err(format!(
                    "{}: the journal's log is damaged at byte {at} (not at its end, so not a \
                     write cut short by a crash); move the file aside to start without it",
                    path.display()
                ));
            }
        }
        let unfiled: Vec<Group> = groups.into_iter().filter(|g| g.first >= filed).collect();
        if !unfiled.is_empty() {
            file(db, &unfiled, true)?;
        }
    }
    for path in &segments {
        std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(first: u64, n: usize, replaces: Option<&str>) -> Group {
        Group {
            first,
            replaces: replaces.map(str::to_string),
            records: (0..n)
                .map(|i| {
                    (
                        (i % 2 == 0).then(|| format!("s{i}")),
                        format!("record {first}+{i}").into_bytes(),
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn frames_round_trip_and_a_torn_tail_is_found() {
        let a = vec![group(0, 3, None), group(3, 1, Some("old"))];
        let b = vec![group(4, 2, None)];
        let mut bytes = Vec::new();
        encode_frame(&mut bytes, &a);
        let first_len = bytes.len();
        let mut second = Vec::new();
        encode_frame(&mut second, &b);
        bytes.extend_from_slice(&second);
        let (groups, end) = decode_segment(&bytes);
        assert_eq!(end, Ok(()));
        assert_eq!(groups, [a.clone(), b].concat());
        // Cut anywhere inside the second frame: the first survives, the cut is reported.
        for cut in first_len..bytes.len() {
            let (groups, end) = decode_segment(&bytes[..cut]);
            assert_eq!(groups, a);
            assert_eq!(
                end,
                if cut == first_len {
                    Ok(())
                } else {
                    Err(first_len)
                }
            );
        }
        // The zeros written ahead of the frames end the segment cleanly.
        let mut ahead = bytes.clone();
        ahead.extend_from_slice(&[0; 4096]);
        assert_eq!(decode_segment(&ahead), (groups.clone(), Ok(())));
        // A segment that grew past its zeroed size ends where a direct write's padding
        // ends, which may leave fewer zeros than a frame header: still a clean end.
        for pad in 1..12 {
            let mut padded = bytes.clone();
            padded.extend_from_slice(&vec![0; pad]);
            assert_eq!(decode_segment(&padded), (groups.clone(), Ok(())), "{pad}");
        }
        let mut short = bytes.clone();
        short.extend_from_slice(&[0, 0, 1]);
        assert_eq!(decode_segment(&short).1, Err(bytes.len()));
        // A flipped bit in the body fails the digest.
        let mut bad = bytes.clone();
        bad[first_len + 20] ^= 1;
        assert_eq!(decode_segment(&bad).1, Err(first_len));
    }

    /// Frames of many sizes, written one by one (direct where the file system allows it, and
    /// buffered), read back whole: the blocks a direct write writes again keep every earlier
    /// frame, and the zeros after the last end the segment.
    #[test]
    fn frames_written_one_by_one_read_back_whole() {
        for direct in [true, false] {
            let dir = tmp(if direct { "direct" } else { "buffered" });
            std::fs::create_dir_all(&dir).unwrap();
            let mut segment = Segment::create(&dir, 0, 8 << 10).unwrap();
            if !direct {
                segment.direct = None;
                segment.file = open_buffered(&segment.path).unwrap();
            }
            let mut written = Vec::new();
            let mut first = 0;
            // Past the zeroed 8 KiB too: the file grows.
            for i in 0..120usize {
                let g = group(first, 1 + i * 7 % 13, None);
                first += g.records.len() as u64;
                let mut frame = Vec::new();
                encode_frame(&mut frame, std::slice::from_ref(&g));
                segment.write_durably(&frame).unwrap();
                written.push(g);
            }
            // And on until the last frame ends fewer than a frame header's bytes before a
            // block's end: a direct write pads that block with too few zeros to read as a
            // header (the end of a segment a crash or a rotation left so must read clean).
            let mut i = 0usize;
            while segment.bytes % BLOCK as u64 <= (BLOCK - 12) as u64 {
                let g = group(first, 1 + i % 5, None);
                first += g.records.len() as u64;
                let mut frame = Vec::new();
                encode_frame(&mut frame, std::slice::from_ref(&g));
                segment.write_durably(&frame).unwrap();
                written.push(g);
                i += 1;
                assert!(i < 100_000, "no frame ended near a block's end");
            }
            assert!(segment.bytes > 8 << 10, "{}", segment.bytes);
            let bytes = std::fs::read(&segment.path).unwrap();
            assert_eq!(decode_segment(&bytes), (written, Ok(())));
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn a_guardian_over_a_folder_keeps_its_sessions_across_a_reopen() {
        let dir = tmp("open-guardian");
        let policy = || {
            Policy::from_source(
                "p",
                r#"
rule burst on toolCallRequest
  when tool.name == "send_email" and count(toolCallRequest when tool.name == "send_email", session) >= 2
  => deny "burst": "two emails a session"

default allow
"#,
            )
            .unwrap()
        };
        let chat = crate::acs::build::Conversation::new("t");
        let email = |g: &Guardian| {
            let call = chat.tool_call("send_email", serde_json::json!({}));
            let r: serde_json::Value = serde_json::from_slice(&g.handle(&call.to_vec())).unwrap();
            r["result"]["decision"].clone()
        };
        let g = open_guardian(policy(), Options::default(), &dir).unwrap();
        assert_eq!(email(&g), "allow");
        assert_eq!(email(&g), "allow");
        let second = open_guardian(policy(), Options::default(), &dir);
        assert!(second.is_err(), "one Guardian at a time per folder");
        drop(g);
        let g = open_guardian(policy(), Options::default(), &dir).unwrap();
        assert_eq!(g.session_ids(), vec![chat.session_id().to_string()]);
        assert_eq!(email(&g), "deny", "the two emails before the reopen count");
        drop(g);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("warden-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn sealed(session: &str, at_ms: i64) -> Record {
        Record::Sealed {
            session: session.into(),
            agent: None,
            at_ms,
            labels: 0,
            entries: Vec::new(),
        }
    }

    fn group_of(first: u64, records: &[Record], replaces: Option<&str>) -> Group {
        Group {
            first,
            replaces: replaces.map(str::to_string),
            records: records
                .iter()
                .map(|r| {
                    (
                        r.session().map(str::to_string),
                        serde_json::to_vec(r).unwrap(),
                    )
                })
                .collect(),
        }
    }

    fn write_segment(dir: &Path, first: u64, frames: &[Vec<Group>], tail: &[u8]) {
        let mut bytes = Vec::new();
        for f in frames {
            encode_frame(&mut bytes, f);
        }
        bytes.extend_from_slice(tail);
        bytes.extend_from_slice(&[0; 1024]);
        std::fs::write(dir.join(WAL_DIR).join(format!("{first:020}.wal")), bytes).unwrap();
    }

    #[test]
    fn what_a_crash_left_in_the_log_is_filed_at_open_and_a_torn_tail_dropped() {
        let dir = tmp("recover");
        drop(Store::open(&dir).unwrap());
        let (a, b, c) = (sealed("s1", 1), sealed("s2", 2), sealed("s1", 3));
        let mut torn = Vec::new();
        encode_frame(&mut torn, &[group_of(3, &[sealed("s3", 4)], None)]);
        torn.truncate(torn.len() - 5);
        write_segment(
            &dir,
            0,
            &[
                vec![group_of(0, &[a.clone(), b.clone()], None)],
                vec![group_of(2, std::slice::from_ref(&c), None)],
            ],
            &torn,
        );
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.records().unwrap(), [a.clone(), b, c.clone()]);
        assert_eq!(store.records_of("s1").unwrap(), [a, c]);
        // The recovered log is gone; the store writes a fresh one after the last record.
        let names: Vec<String> = std::fs::read_dir(dir.join(WAL_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().any(|n| n == "00000000000000000003.wal"),
            "{names:?}"
        );
        assert!(
            !names.iter().any(|n| n == "00000000000000000000.wal"),
            "{names:?}"
        );
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_group_the_database_already_holds_is_not_filed_again() {
        let dir = tmp("refile");
        {
            let store = Store::open(&dir).unwrap();
            store
                .append(vec![sealed("s1", 1), sealed("s2", 2)])
                .unwrap();
        }
        // A log naming those sequence numbers again (as if the crash came after the database
        // flush and before the log was deleted), including a compaction of s1: filing it twice
        // would drop s1's record.
        write_segment(
            &dir,
            0,
            &[vec![group_of(0, &[sealed("s1", 9)], Some("s1"))]],
            &[],
        );
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.records().unwrap(), [sealed("s1", 1), sealed("s2", 2)]);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn damage_before_the_last_segment_is_refused() {
        let dir = tmp("damage");
        drop(Store::open(&dir).unwrap());
        write_segment(
            &dir,
            0,
            &[vec![group_of(0, &[sealed("s1", 1)], None)]],
            b"garbage!",
        );
        write_segment(&dir, 1, &[vec![group_of(1, &[sealed("s2", 2)], None)]], &[]);
        let e = Store::open(&dir).err().expect("refused");
        assert!(
            e.contains("damaged") && e.contains("00000000000000000000.wal"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Records of several sessions, interleaved within groups and across filings, with
    /// compactions both of a session filed earlier and of one whose records are in the same
    /// filing: each session's chain gives exactly its records, in order, against a plain list.
    #[test]
    fn each_session_reads_back_its_own_records_through_its_chain() {
        let dir = tmp("chains");
        drop(Store::open(&dir).unwrap());
        let db = Database::create(db_path(&dir)).unwrap();
        let mut model: Vec<(u64, Record)> = Vec::new();
        let mut next = 0u64;
        let mut filing = Vec::new();
        for round in 0..40i64 {
            let session = format!("s{}", round % 7);
            let replaces = (round % 9 == 8).then(|| format!("s{}", round % 5));
            if let Some(old) = &replaces {
                model.retain(|(_, r)| r.session() != Some(old.as_str()));
            }
            let records: Vec<Record> = (0..(round % 3 + 1))
                .map(|i| sealed(if i == 1 { "s6" } else { &session }, round * 10 + i))
                .collect();
            for r in &records {
                model.push((next, r.clone()));
                next += 1;
            }
            filing.push(group_of(
                next - records.len() as u64,
                &records,
                replaces.as_deref(),
            ));
            // File every few rounds, so chains run both within one filing and across them.
            if round % 4 == 3 {
                file(&db, &filing, false).unwrap();
                filing.clear();
            }
        }
        file(&db, &filing, true).unwrap();
        drop(db);
        let store = Store::open(&dir).unwrap();
        for s in 0..8 {
            let session = format!("s{s}");
            let want: Vec<Record> = model
                .iter()
                .filter(|(_, r)| r.session() == Some(session.as_str()))
                .map(|(_, r)| r.clone())
                .collect();
            assert_eq!(store.records_of(&session).unwrap(), want, "{session}");
        }
        assert_eq!(store.records_from(0, 10_000).unwrap(), model);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A journal of the layout before the chains (bare JSON rows and an index of every row)
    /// is rewritten at open: everything reads back as before, and it goes on taking records.
    #[test]
    fn a_journal_of_the_earlier_layout_is_migrated_at_open() {
        let dir = tmp("migrate");
        std::fs::create_dir_all(&dir).unwrap();
        let old = [sealed("a", 1), sealed("b", 2), sealed("a", 3)];
        {
            let db = Database::create(db_path(&dir)).unwrap();
            let w = db.begin_write().unwrap();
            {
                let mut meta = w.open_table(META).unwrap();
                meta.insert("format", FORMAT).unwrap();
                meta.insert("indexed", b"1".as_slice()).unwrap();
                let mut log = w.open_table(LOG).unwrap();
                let mut index = w.open_multimap_table(OLD_BY_SESSION).unwrap();
                for (seq, r) in old.iter().enumerate() {
                    let json = serde_json::to_vec(r).unwrap();
                    log.insert(seq as u64, json.as_slice()).unwrap();
                    index.insert(r.session().unwrap(), seq as u64).unwrap();
                }
            }
            w.commit().unwrap();
        }
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.records().unwrap(), old);
        assert_eq!(
            store.records_of("a").unwrap(),
            [sealed("a", 1), sealed("a", 3)]
        );
        store.append(vec![sealed("b", 4)]).unwrap();
        store.compact("a", sealed("a", 5)).unwrap();
        assert_eq!(
            store.records_of("b").unwrap(),
            [sealed("b", 2), sealed("b", 4)]
        );
        assert_eq!(store.records_of("a").unwrap(), [sealed("a", 5)]);
        drop(store);
        // The old index is gone, and a second open does not migrate again.
        let db = Database::create(db_path(&dir)).unwrap();
        let r = db.begin_read().unwrap();
        assert!(r.open_multimap_table(OLD_BY_SESSION).is_err());
        let meta = r.open_table(META).unwrap();
        assert_eq!(meta.get(LAYOUT_KEY).unwrap().unwrap().value(), LAYOUT);
        assert!(meta.get("indexed").unwrap().is_none());
        drop((meta, r, db));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Damage to a chain is an error that names the record, never a loop or a silent gap.
    #[test]
    fn a_damaged_chain_is_reported() {
        let dir = tmp("broken");
        {
            let store = Store::open(&dir).unwrap();
            store
                .append(vec![sealed("a", 1), sealed("a", 2), sealed("a", 3)])
                .unwrap();
        }
        let db = Database::create(db_path(&dir)).unwrap();
        let w = db.begin_write().unwrap();
        w.open_table(LOG).unwrap().remove(1).unwrap();
        w.commit().unwrap();
        drop(db);
        let store = Store::open(&dir).unwrap();
        let e = store.records_of("a").unwrap_err();
        assert!(e.contains("record 1") && e.contains("damaged"), "{e}");
        drop(store);
        // A link that points forward (as damage could) is refused rather than followed.
        let db = Database::create(db_path(&dir)).unwrap();
        let w = db.begin_write().unwrap();
        {
            let mut log = w.open_table(LOG).unwrap();
            let mut row = Vec::new();
            encode_row(&mut row, 2, &serde_json::to_vec(&sealed("a", 3)).unwrap());
            log.insert(2, row.as_slice()).unwrap();
        }
        w.commit().unwrap();
        drop(db);
        let store = Store::open(&dir).unwrap();
        let e = store.records_of("a").unwrap_err();
        assert!(e.contains("links forward"), "{e}");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn records_are_read_back_as_soon_as_they_are_acknowledged() {
        let dir = tmp("read");
        let store = Store::open(&dir).unwrap();
        store.append(vec![sealed("s1", 1)]).unwrap();
        // Read at once: the reader nudges the filer rather than wait for its 100 ms.
        assert_eq!(store.records_of("s1").unwrap(), [sealed("s1", 1)]);
        store.compact("s1", sealed("s1", 2)).unwrap();
        assert_eq!(store.records_of("s1").unwrap(), [sealed("s1", 2)]);
        assert_eq!(store.records_from(0, 10).unwrap(), [(1, sealed("s1", 2))]);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
