//! The PostgreSQL side of the tests that need one: the server's URL from
//! `WARDEN_TEST_POSTGRES_URL` (skipped with a message without it, a failure under CI), and a
//! database of each test's own, dropped at the end. A test crate using it declares
//! `mod serve_common` too.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::serve_common::{chain_heads, tmp};
use warden::guardian::journal::Record;

/// The server's URL, or `None` after saying why the test is skipped (a failure under CI).
pub fn server_url() -> Option<String> {
    match std::env::var("WARDEN_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            crate::common::unavailable(
                "WARDEN_TEST_POSTGRES_URL is not set (start a throwaway PostgreSQL with \
                 `scripts/postgres-test-setup.sh start DIR` and export the URL it prints)",
            );
            None
        }
    }
}

/// A database of the test's own, dropped at the end.
pub struct Db {
    pub admin: String,
    pub name: String,
    pub url: String,
}

impl Db {
    pub fn create(server: &str, tag: &str) -> Db {
        let name = format!("warden_{tag}_{}", std::process::id());
        let mut c = postgres::Client::connect(server, postgres::NoTls).unwrap();
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let (base, query) = match server.split_once('?') {
            Some((b, q)) => (b, format!("?{q}")),
            None => (server, String::new()),
        };
        let authority_end = base.find("://").map_or(0, |i| i + 3);
        let base = match base[authority_end..].find('/') {
            Some(i) => &base[..authority_end + i],
            None => base,
        };
        Db {
            admin: server.to_string(),
            url: format!("{base}/{name}{query}"),
            name,
        }
    }

    pub fn sql(&self, q: &str) -> Vec<postgres::Row> {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).unwrap();
        c.query(q, &[]).unwrap()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// A test's own database, scratch folder and policy file.
pub struct Scratch {
    pub db: Db,
    pub dir: PathBuf,
    pub policy: PathBuf,
}

impl Scratch {
    /// The database `warden_{tag}_PID`, the folder `pg-{tag}` (`_` as `-`), and
    /// `policy_text` written to `p.ward` in it.
    pub fn new(server: &str, tag: &str, policy_text: &str) -> Scratch {
        let db = Db::create(server, tag);
        let dir = tmp(&format!("pg-{}", tag.replace('_', "-")));
        let policy = dir.join("p.ward");
        std::fs::write(&policy, policy_text).unwrap();
        Scratch { db, dir, policy }
    }
}

/// Asserts that every chain in the database at `url` verifies and ends where the one in the
/// folder `reference_state` ends; the database's chain heads.
pub fn assert_chains_match(url: &str, reference_state: &Path) -> HashMap<String, (usize, String)> {
    let pg = warden::server::backend::read(Path::new(url)).unwrap();
    let folder = warden::server::backend::read(reference_state).unwrap();
    let heads = chain_heads(&pg);
    assert_eq!(heads, chain_heads(&folder));
    heads
}

/// A record sealing `session` at `at_ms`, with no entries.
pub fn sealed(session: &str, at_ms: i64) -> Record {
    Record::Sealed {
        session: session.into(),
        agent: None,
        at_ms,
        labels: 0,
        entries: Vec::new(),
    }
}
