//! The PostgreSQL side of the tests that need one: the server's URL from
//! `WARDEN_TEST_POSTGRES_URL` (skipped with a message without it, a failure under CI), and a
//! database of each test's own, dropped at the end.
#![allow(dead_code)]

/// The server's URL, or `None` after saying why the test is skipped (a failure under CI).
pub fn server_url() -> Option<String> {
    match std::env::var("WARDEN_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "WARDEN_TEST_POSTGRES_URL is not set under CI: .ci/run starts PostgreSQL with \
                 scripts/postgres-test-setup.sh"
            );
            eprintln!(
                "skipped: WARDEN_TEST_POSTGRES_URL is not set (start a throwaway PostgreSQL with \
                 `scripts/postgres-test-setup.sh start DIR` and export the URL it prints)"
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
