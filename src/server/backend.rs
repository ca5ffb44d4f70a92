//! Where `--state` keeps the journal: a folder (the embedded store, [`super::store`]) or a
//! PostgreSQL database (`postgres://…`, [`super::pg`], feature `postgres`). Both hold the same
//! records and answer the same reads; this is the one place that tells them apart.

use std::path::Path;

use super::store::Store;
use crate::guardian::journal::{Claim, Durable, Journal, JournalError, Record};

/// An open journal: a state folder, or a PostgreSQL database.
pub enum Backend {
    /// A folder (`--state DIR`).
    Embedded(Store),
    /// A PostgreSQL database (`--state postgres://…`).
    #[cfg(feature = "postgres")]
    Postgres(super::pg::PgStore),
}

/// Whether a `--state` value names a PostgreSQL database (`postgres://` or `postgresql://`).
pub fn is_url(spec: &Path) -> bool {
    spec.to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// The `--state` value for messages (a URL without its password).
pub fn describe(spec: &Path) -> String {
    match spec.to_str() {
        #[cfg(feature = "postgres")]
        Some(s) if is_url(spec) => super::pg::redact(s),
        _ => spec.display().to_string(),
    }
}

#[cfg(not(feature = "postgres"))]
fn no_postgres(spec: &Path) -> String {
    format!(
        "{}: this warden was built without PostgreSQL support (cargo feature `postgres`)",
        describe(spec)
    )
}

impl Backend {
    /// Opens (creating if needed) the journal `spec` names.
    pub fn open(spec: &Path) -> Result<Backend, String> {
        if is_url(spec) {
            #[cfg(feature = "postgres")]
            return super::pg::PgStore::open(spec.to_str().unwrap_or_default())
                .map(Backend::Postgres);
            #[cfg(not(feature = "postgres"))]
            return Err(no_postgres(spec));
        }
        Store::open(spec).map(Backend::Embedded)
    }

    /// Whether `spec` already holds a Warden journal (commands over a stopped Guardian's state
    /// should not create one).
    pub fn exists(spec: &Path) -> Result<bool, String> {
        if is_url(spec) {
            #[cfg(feature = "postgres")]
            return super::pg::has_state(spec.to_str().unwrap_or_default());
            #[cfg(not(feature = "postgres"))]
            return Err(no_postgres(spec));
        }
        Ok(super::store::db_path(spec).is_file())
    }

    /// Every record, in the order it was written.
    pub fn records(&self) -> Result<Vec<Record>, String> {
        match self {
            Backend::Embedded(s) => s.records(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(s) => s.records(),
        }
    }

    /// Up to `max` records from sequence number `from` on, with their sequence numbers.
    pub fn records_from(&self, from: u64, max: usize) -> Result<Vec<(u64, Record)>, String> {
        match self {
            Backend::Embedded(s) => s.records_from(from, max),
            #[cfg(feature = "postgres")]
            Backend::Postgres(s) => s.records_from(from, max),
        }
    }

    /// One session's records, in the order they were written.
    pub fn records_of(&self, session: &str) -> Result<Vec<Record>, String> {
        match self {
            Backend::Embedded(s) => s.records_of(session),
            #[cfg(feature = "postgres")]
            Backend::Postgres(s) => s.records_of(session),
        }
    }

    /// Whether other Guardians may write this journal too (a database a fleet shares): its
    /// sessions are then read when they arrive, not all at start (most are other Guardians').
    pub fn is_shared(&self) -> bool {
        match self {
            Backend::Embedded(_) => false,
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => true,
        }
    }

    /// A clean stop's last step: a folder files everything acknowledged into its database (so
    /// the next start has no log to read); a database lets every lease this Guardian holds go,
    /// so another Guardian takes those sessions at once. Returns the leases let go.
    pub fn close(&self) -> Result<usize, String> {
        match self {
            Backend::Embedded(s) => s.caught_up().map(|()| 0),
            #[cfg(feature = "postgres")]
            Backend::Postgres(s) => s.release_all(),
        }
    }

    fn journal(&self) -> &dyn Journal {
        match self {
            Backend::Embedded(s) => s,
            #[cfg(feature = "postgres")]
            Backend::Postgres(s) => s,
        }
    }
}

impl Journal for Backend {
    fn append(&self, records: Vec<Record>) -> Result<(), JournalError> {
        self.journal().append(records)
    }

    fn submit(&self, records: Vec<Record>) -> Durable {
        self.journal().submit(records)
    }

    fn submit_as(&self, records: Vec<Record>, lease: Option<i64>) -> Durable {
        self.journal().submit_as(records, lease)
    }

    fn session_records(&self, session: &str) -> Option<Result<Vec<Record>, JournalError>> {
        self.journal().session_records(session)
    }

    fn compact(&self, session: &str, summary: Record) -> Result<bool, JournalError> {
        self.journal().compact(session, summary)
    }

    fn compact_submit(&self, session: &str, summary: Record) -> Durable {
        self.journal().compact_submit(session, summary)
    }

    fn claim(&self, session: &str) -> Claim {
        self.journal().claim(session)
    }

    fn peek(&self, session: &str) -> Claim {
        self.journal().peek(session)
    }
}

/// Every record `spec` holds (for `warden audit`). A folder is opened (filing what a crash
/// left in its log first); a database is only read, so a running Guardian may keep writing it.
pub fn read(spec: &Path) -> Result<Vec<Record>, String> {
    if is_url(spec) {
        #[cfg(feature = "postgres")]
        return super::pg::read_url(spec.to_str().unwrap_or_default());
        #[cfg(not(feature = "postgres"))]
        return Err(no_postgres(spec));
    }
    super::store::read_dir(spec)
}
