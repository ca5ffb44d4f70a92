//! The durable journal behind `--state DIR`: one redb database (`DIR/warden.redb`) holding the
//! journal records in a table keyed by a global sequence number, and an index from each
//! session to its records (so a session that left memory is restored alone). Writes are group
//! committed: a committer thread takes every record batch waiting, writes them in one
//! transaction, commits with `Durability::Immediate` (fsync) and only then releases the
//! requests, so an answered decision is on disk.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use redb::{
    Database, Durability, MultimapTableDefinition, ReadableMultimapTable, ReadableTable,
    TableDefinition,
};

use crate::guardian::journal::{Durable, Journal, Record, Settle};

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Session id → the sequence numbers of its records.
const BY_SESSION: MultimapTableDefinition<&str, u64> = MultimapTableDefinition::new("by_session");

/// redb's page cache for the journal.
const CACHE_BYTES: usize = 32 << 20;

/// Format of the records in `log`: JSON of [`Record`].
pub const FORMAT: &[u8] = b"warden-journal-1";

/// Records to write, each with its session id; a session whose records they replace (a
/// compaction); and the promise to settle once they are durable.
type Batch = (Vec<(Option<String>, Vec<u8>)>, Option<String>, Settle);

/// The redb-backed journal.
pub struct Store {
    db: Arc<Database>,
    tx: Option<mpsc::Sender<Batch>>,
    committer: Option<std::thread::JoinHandle<()>>,
    pub path: PathBuf,
}

/// The database file inside a state folder.
pub fn db_path(dir: &Path) -> PathBuf {
    dir.join("warden.redb")
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Store {
    /// Opens (creating if needed) the store in `dir`.
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
        {
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
                w.open_multimap_table(BY_SESSION).map_err(err)?;
                // A journal written before the index existed is indexed once.
                if meta.get("indexed").map_err(err)?.is_none() {
                    let log = w.open_table(LOG).map_err(err)?;
                    let mut index = w.open_multimap_table(BY_SESSION).map_err(err)?;
                    for item in log.iter().map_err(err)? {
                        let (k, v) = item.map_err(err)?;
                        let rec: Record = serde_json::from_slice(v.value())
                            .map_err(|e| format!("journal record {}: {e}", k.value()))?;
                        if let Some(session) = rec.session() {
                            index.insert(session, k.value()).map_err(err)?;
                        }
                    }
                    meta.insert("indexed", b"1".as_slice()).map_err(err)?;
                }
            }
            w.commit().map_err(err)?;
        }
        let db = Arc::new(db);
        let next = {
            let r = db.begin_read().map_err(err)?;
            let t = r.open_table(LOG).map_err(err)?;
            let last = t.last().map_err(err)?.map(|(k, _)| k.value());
            last.map_or(0, |k| k + 1)
        };
        let (tx, rx) = mpsc::channel::<Batch>();
        let writer = db.clone();
        let committer = std::thread::Builder::new()
            .name("warden-journal".into())
            .spawn(move || commit_loop(&writer, rx, next))
            .map_err(err)?;
        Ok(Store {
            db,
            tx: Some(tx),
            committer: Some(committer),
            path,
        })
    }

    /// Every record, in the order it was written.
    pub fn records(&self) -> Result<Vec<Record>, String> {
        read_records(&self.db)
    }

    /// Up to `max` records from sequence number `from` on, with their sequence numbers: a
    /// restart reads the journal in such chunks, so it never holds the whole journal.
    pub fn records_from(&self, from: u64, max: usize) -> Result<Vec<(u64, Record)>, String> {
        let r = self.db.begin_read().map_err(err)?;
        let t = r.open_table(LOG).map_err(err)?;
        let mut out = Vec::with_capacity(max.min(4096));
        for item in t.range(from..).map_err(err)?.take(max) {
            let (k, v) = item.map_err(err)?;
            let rec: Record = serde_json::from_slice(v.value())
                .map_err(|e| format!("journal record {}: {e}", k.value()))?;
            out.push((k.value(), rec));
        }
        Ok(out)
    }

    /// One session's records, in the order they were written.
    pub fn records_of(&self, session: &str) -> Result<Vec<Record>, String> {
        let r = self.db.begin_read().map_err(err)?;
        let log = r.open_table(LOG).map_err(err)?;
        let index = r.open_multimap_table(BY_SESSION).map_err(err)?;
        let mut out = Vec::new();
        for seq in index.get(session).map_err(err)? {
            let seq = seq.map_err(err)?.value();
            if let Some(v) = log.get(seq).map_err(err)? {
                out.push(
                    serde_json::from_slice(v.value())
                        .map_err(|e| format!("journal record {seq}: {e}"))?,
                );
            }
        }
        Ok(out)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(c) = self.committer.take() {
            let _ = c.join();
        }
    }
}

fn read_records(db: &Database) -> Result<Vec<Record>, String> {
    let r = db.begin_read().map_err(err)?;
    let t = r.open_table(LOG).map_err(err)?;
    let mut out = Vec::new();
    for item in t.iter().map_err(err)? {
        let (k, v) = item.map_err(err)?;
        let rec: Record = serde_json::from_slice(v.value())
            .map_err(|e| format!("journal record {}: {e}", k.value()))?;
        out.push(rec);
    }
    Ok(out)
}

/// Reads the records of a state folder without starting a writer (for `warden audit`).
pub fn read_dir(dir: &Path) -> Result<Vec<Record>, String> {
    let path = db_path(dir);
    if !path.is_file() {
        return Err(format!("{}: no Warden state here", path.display()));
    }
    let db = Database::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    read_records(&db)
}

fn commit_loop(db: &Database, rx: mpsc::Receiver<Batch>, mut next: u64) {
    // After a failed commit nothing more is written: a later record must never be durable
    // while an earlier one is not (a session's next step may have been decided on it).
    let mut broken: Option<String> = None;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
            if batch.len() >= 4096 {
                break;
            }
        }
        if let Some(why) = &broken {
            for (_, _, done) in batch {
                done.settle(Err(why.clone()));
            }
            continue;
        }
        let result = (|| -> Result<u64, String> {
            let mut w = db.begin_write().map_err(err)?;
            w.set_durability(Durability::Immediate);
            let mut n = next;
            {
                let mut t = w.open_table(LOG).map_err(err)?;
                let mut index = w.open_multimap_table(BY_SESSION).map_err(err)?;
                for (recs, replaces, _) in &batch {
                    if let Some(old) = replaces {
                        let seqs: Vec<u64> = index
                            .get(old.as_str())
                            .map_err(err)?
                            .map(|s| s.map(|s| s.value()))
                            .collect::<Result<_, _>>()
                            .map_err(err)?;
                        for seq in seqs {
                            t.remove(seq).map_err(err)?;
                        }
                        index.remove_all(old.as_str()).map_err(err)?;
                    }
                    for (session, r) in recs {
                        t.insert(n, r.as_slice()).map_err(err)?;
                        if let Some(session) = session {
                            index.insert(session.as_str(), n).map_err(err)?;
                        }
                        n += 1;
                    }
                }
            }
            w.commit().map_err(err)?;
            Ok(n)
        })();
        let outcome = match result {
            Ok(n) => {
                next = n;
                Ok(())
            }
            Err(e) => {
                let why = format!("the journal could not commit: {e}");
                broken = Some(why.clone());
                Err(why)
            }
        };
        for (_, _, done) in batch {
            done.settle(outcome.clone());
        }
    }
}

impl Store {
    /// Encodes the records here (on the caller's thread, so encoding runs in parallel) and
    /// queues them for the committer.
    fn write(&self, records: Vec<Record>, replaces: Option<String>) -> Durable {
        let encoded: Result<Vec<(Option<String>, Vec<u8>)>, String> = records
            .iter()
            .map(|r| {
                Ok((
                    r.session().map(str::to_string),
                    serde_json::to_vec(r).map_err(err)?,
                ))
            })
            .collect();
        let encoded = match encoded {
            Ok(e) => e,
            Err(e) => return Durable::settled(Err(e)),
        };
        let Some(tx) = self.tx.as_ref() else {
            return Durable::settled(Err("the journal is closed".into()));
        };
        let (durable, settle) = Durable::pending();
        // A send that fails drops `settle`, which settles `durable` with an error.
        let _ = tx.send((encoded, replaces, settle));
        durable
    }
}

impl Journal for Store {
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
