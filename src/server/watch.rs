//! Policy hot reload: reading the policy's files until they hold still, compiling exactly the
//! bytes that held still and swapping the result into a running Guardian ([`Reloader`]), and
//! `--watch`, which does so after every change to a `.ward` file in the policy's folder (the
//! watcher needs feature `watch`). Owns when, and from which bytes, a reload happens; the record
//! of a reload is the Guardian's ([`Guardian::reload_policy`]). Knows nothing of transports.
//!
//! A reload never takes content its author had not finished writing, as far as a reader can
//! tell: every file of the policy (the root and the `use`d modules the last compile read) is
//! read twice, `settle` apart, and compared by size, modification time and SHA-256; if anything
//! differs, nothing is loaded and the next quiet period is awaited. The policy is compiled from
//! the root's second read (never a third read), and every `use`d file the compiler read must
//! hold the bytes of that second read too. On Linux the watcher also waits, before reading, for
//! every `.ward` file written to be closed (inotify reports it), for up to 5 s. A
//! writer that pauses longer than the quiet period plus `settle` (and, on Linux, closes the file
//! or stays open past the limit) cannot be told from a finished one: saving by write-then-rename
//! (docs/serve.md) is what makes a save atomic.

use std::path::{Path, PathBuf};
#[cfg(feature = "watch")]
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime};

use crate::acs::crypto;
use crate::guardian::{Guardian, Policy};

/// What a reload did.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    /// The new policy is in force: the digest it replaced and its own.
    Swapped {
        /// The digest replaced.
        old: String,
        /// The digest now in force.
        new: String,
    },
    /// The files compile to the policy already in force.
    Unchanged,
    /// A file changed between the two reads (it is still being written): nothing was loaded.
    Unstable(String),
    /// The files held still but do not make a policy (diagnostics, rendered), or the reload
    /// could not be recorded: the last good policy keeps serving.
    Rejected(String),
}

/// What one read of a file saw. Two reads agree when size, modification time and content
/// hash all agree.
#[derive(Debug, Clone)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    sha256: [u8; 32],
    bytes: Vec<u8>,
}

impl PartialEq for Stamp {
    fn eq(&self, other: &Stamp) -> bool {
        self.len == other.len && self.modified == other.modified && self.sha256 == other.sha256
    }
}

/// Why a read saw no [`Stamp`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unread {
    /// The file cannot be read (missing, no permission): a lasting condition.
    Failed(String),
    /// The file changed during the read.
    Moving(String),
}

/// Reads a file once: its metadata before and after the bytes, which must agree with each
/// other and with the number of bytes read (else the file changed under the read).
fn stamp(path: &Path) -> Result<Stamp, Unread> {
    let shown = path.display();
    let failed = |e: std::io::Error| Unread::Failed(format!("cannot read {shown}: {e}"));
    let before = std::fs::metadata(path).map_err(failed)?;
    let bytes = crate::diagnostics::read_import(path, crate::diagnostics::MAX_SOURCE_BYTES)
        .map_err(Unread::Failed)?;
    let after = std::fs::metadata(path).map_err(failed)?;
    let modified = before.modified().ok();
    if before.len() != after.len()
        || modified != after.modified().ok()
        || bytes.len() as u64 != after.len()
    {
        return Err(Unread::Moving(format!("{shown} changed while it was read")));
    }
    Ok(Stamp {
        len: after.len(),
        modified,
        sha256: crypto::sha256(&bytes),
        bytes,
    })
}

/// The files on disk a compiled policy read besides its root (its `use`d modules): every
/// source that is neither the root nor embedded (`<std.…>`).
fn used_files(policy: &Policy, root: &Path) -> Vec<PathBuf> {
    let root = root.display().to_string();
    let mut out: Vec<PathBuf> = policy
        .sources()
        .iter()
        .map(|(_, f)| &f.name)
        .filter(|n| **n != root && !n.starts_with('<'))
        .map(PathBuf::from)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Compiles the root file from `bytes`, as [`Policy::load`] would from the file (same name,
/// same folder for its `use`s, so the same digest).
fn compile(root: &Path, bytes: &[u8]) -> Result<Policy, String> {
    let shown = root.display().to_string();
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "{shown}: the file is not valid UTF-8 (byte {}); save it as UTF-8\n",
            e.valid_up_to()
        )
    })?;
    if text.trim().is_empty() {
        return Err(format!(
            "{shown}: the file is empty; a policy file is never empty (truncated, or not yet \
             written?)\n"
        ));
    }
    let dir = root
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    Policy::from_source_in(&shown, text, dir).map_err(|d| d.render(false))
}

/// Reloads one policy file into one Guardian, reading its files twice `settle` apart. Keeps the
/// list of `use`d files the last compile read, so that they are read twice too.
#[derive(Debug)]
pub struct Reloader {
    root: PathBuf,
    settle: Duration,
    used: Vec<PathBuf>,
}

/// How many times one reload reads again because the compiled policy `use`s a file it had not
/// read twice (a `use` added by the edit being loaded).
const MAX_ROUNDS: usize = 4;

impl Reloader {
    /// A reloader for the policy at `root`, reading it after `settle` of quiet.
    pub fn new(root: PathBuf, settle: Duration) -> Reloader {
        Reloader {
            root,
            settle,
            used: Vec::new(),
        }
    }

    /// The policy's root file.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads the policy's files twice, `settle` apart; compiles and swaps in what held still.
    pub fn reload(&mut self, g: &Guardian) -> Reload {
        let settle = self.settle;
        self.reload_with(g, || std::thread::sleep(settle))
    }

    /// [`Reloader::reload`] with `between` run between the two reads instead of sleeping
    /// (tests write there, to stand for an author still saving).
    fn reload_with(&mut self, g: &Guardian, mut between: impl FnMut()) -> Reload {
        for _ in 0..MAX_ROUNDS {
            let files: Vec<PathBuf> = std::iter::once(self.root.clone())
                .chain(self.used.iter().cloned())
                .collect();
            let first: Vec<_> = files.iter().map(|f| stamp(f)).collect();
            between();
            let second: Vec<_> = files.iter().map(|f| stamp(f)).collect();
            for ((f, a), b) in files.iter().zip(&first).zip(&second) {
                match (a, b) {
                    (Ok(a), Ok(b)) if a == b => {}
                    // A `use`d module gone for good: the compile says what that means.
                    (Err(Unread::Failed(a)), Err(Unread::Failed(b))) if a == b => {
                        if *f == self.root {
                            return Reload::Rejected(format!("{a}\n"));
                        }
                    }
                    (_, Err(Unread::Failed(e) | Unread::Moving(e)))
                    | (Err(Unread::Failed(e) | Unread::Moving(e)), _) => {
                        return Reload::Unstable(e.clone())
                    }
                    (Ok(_), Ok(_)) => {
                        return Reload::Unstable(format!(
                            "{} changed between two reads {} ms apart",
                            f.display(),
                            self.settle.as_millis()
                        ))
                    }
                }
            }
            let Some(Ok(root)) = second.first() else {
                return Reload::Rejected(format!("cannot read {}\n", self.root.display()));
            };
            let policy = match compile(&self.root, &root.bytes) {
                Ok(p) => p,
                Err(why) => return Reload::Rejected(why),
            };
            let used = used_files(&policy, &self.root);
            if used.iter().any(|u| !files.contains(u)) {
                // The edit `use`s a file not yet read twice: read everything again with it.
                self.used = used;
                continue;
            }
            // The compiler read the `use`d files itself: they must hold the stable bytes.
            for (_, f) in policy.sources().iter() {
                let Some(i) = files.iter().position(|p| p.display().to_string() == f.name) else {
                    continue;
                };
                let same = matches!(&second[i], Ok(s) if s.bytes == f.text.as_bytes());
                if !same {
                    return Reload::Unstable(format!("{} changed while it was compiled", f.name));
                }
            }
            self.used = used;
            if *policy.digest() == *g.policy_digest() {
                return Reload::Unchanged;
            }
            return match g.reload_policy(policy) {
                Ok((old, new)) => Reload::Swapped {
                    old: old.to_string(),
                    new: new.to_string(),
                },
                Err(e) => Reload::Rejected(format!("the reload could not be recorded: {e}\n")),
            };
        }
        Reload::Unstable(format!(
            "the modules {} uses kept changing",
            self.root.display()
        ))
    }

    /// Reloads and says on stderr what happened (nothing when the policy is unchanged).
    pub fn reload_and_log(&mut self, g: &Guardian) -> Reload {
        let r = self.reload(g);
        let shown = self.root.display();
        match &r {
            Reload::Swapped { old, new } => {
                eprintln!("warden: reloaded {shown}: policy {old} replaced by {new}")
            }
            Reload::Unchanged => {}
            Reload::Unstable(why) => eprintln!(
                "warden: {shown} is still being written ({why}); waiting for a stable file, \
                 the current policy keeps serving"
            ),
            Reload::Rejected(why) => {
                eprintln!("{why}warden: {shown} was not reloaded; the current policy keeps serving")
            }
        }
        r
    }
}

/// Reloads the policy at `path` once, reading its files twice `settle` apart (see
/// [`Reloader`]).
pub fn reload(g: &Guardian, path: &Path, settle: Duration) -> Reload {
    Reloader::new(path.to_path_buf(), settle).reload(g)
}

/// How many reloads in a row may find the files still changing before the watcher stops
/// trying until the next change it is told of.
#[cfg(feature = "watch")]
const MAX_UNSTABLE: usize = 100;

/// How long after its last change a file still open for writing is waited for (Linux only:
/// inotify tells when a file written is closed; other platforms' watchers do not).
#[cfg(feature = "watch")]
pub const OPEN_LIMIT: Duration = Duration::from_secs(5);

/// What the watcher was told about a `.ward` file.
#[cfg(feature = "watch")]
enum Change {
    /// Its content was written (it may still be open for writing).
    Written(PathBuf),
    /// A writer closed it.
    Closed(PathBuf),
    /// Created, renamed, removed, its metadata changed.
    Other,
}

#[cfg(feature = "watch")]
fn change(ev: notify::Event) -> Option<Change> {
    use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
    let path = ev
        .paths
        .iter()
        .find(|p| p.extension().is_some_and(|x| x == "ward"))?
        .clone();
    // Only inotify reports closes: elsewhere a write is just a change.
    let tracks_close = cfg!(any(target_os = "linux", target_os = "android"));
    match ev.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) if tracks_close => {
            Some(Change::Closed(path))
        }
        EventKind::Access(_) => None,
        EventKind::Modify(ModifyKind::Data(_)) if tracks_close => Some(Change::Written(path)),
        _ => Some(Change::Other),
    }
}

/// Watches the policy's folder and reloads on every change to a `.ward` file: once the folder
/// has been quiet for `quiet` (and, on Linux, every `.ward` file written has been closed, or
/// left alone for [`OPEN_LIMIT`]), the files are read twice `quiet` apart ([`Reloader`]); if
/// they changed, the watcher waits for the next quiet period and tries again. The returned
/// watcher must be kept alive.
#[cfg(feature = "watch")]
pub fn watch(
    g: Arc<Guardian>,
    path: PathBuf,
    quiet: Duration,
) -> Result<notify::RecommendedWatcher, String> {
    use notify::Watcher as _;
    use std::collections::HashMap;
    use std::time::Instant;
    let (tx, rx) = mpsc::channel::<Change>();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        if let Some(c) = ev.ok().and_then(change) {
            let _ = tx.send(c);
        }
    })
    .map_err(|e| e.to_string())?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    watcher
        .watch(&dir, notify::RecursiveMode::Recursive)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut reloader = Reloader::new(path, quiet);
    // Files written and not yet closed, with the time of their last write.
    let mut open: HashMap<PathBuf, Instant> = HashMap::new();
    let note = |c: Change, open: &mut HashMap<PathBuf, Instant>| match c {
        Change::Written(p) => {
            open.insert(p, Instant::now());
        }
        Change::Closed(p) => {
            open.remove(&p);
        }
        Change::Other => {}
    };
    std::thread::Builder::new()
        .name("warden-watch".into())
        .spawn(move || {
            while let Ok(c) = rx.recv() {
                note(c, &mut open);
                for _ in 0..MAX_UNSTABLE {
                    let mut told = false;
                    loop {
                        // Debounce: wait until the folder has been quiet for `quiet`.
                        while let Ok(c) = rx.recv_timeout(quiet) {
                            note(c, &mut open);
                        }
                        open.retain(|_, at| at.elapsed() < OPEN_LIMIT);
                        let Some(p) = open.keys().next() else { break };
                        if !told {
                            eprintln!(
                                "warden: {} is still open for writing; waiting for it to be \
                                 closed (at most {} s after its last change), the current \
                                 policy keeps serving",
                                p.display(),
                                OPEN_LIMIT.as_secs()
                            );
                            told = true;
                        }
                    }
                    if !matches!(reloader.reload_and_log(&g), Reload::Unstable(_)) {
                        break;
                    }
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(watcher)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guardian::MemoryJournal;
    use crate::guardian::{Options, Record};
    use std::sync::Arc;

    const OLD: &str = "rule no_ls on toolCallRequest when tool.name == \"ls\" => deny \"no_ls\": \"no\"\ndefault allow\n";
    const CHUNK1: &str = "default allow\n";
    const NEW: &str = "default allow\nrule no_ls on toolCallRequest when tool.name == \"ls\" => deny \"no_ls\": \"no\"\nrule no_rm on toolCallRequest when tool.name == \"rm\" => deny \"no_rm\": \"no\"\n";

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("warden-reload-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn guardian(root: &Path) -> (Guardian, Arc<MemoryJournal>) {
        std::fs::write(root, OLD).unwrap();
        let j = Arc::new(MemoryJournal::default());
        let g = Guardian::with_journal(Policy::load(root).unwrap(), Options::default(), j.clone());
        (g, j)
    }

    #[test]
    fn a_file_that_changes_between_the_two_reads_is_not_loaded() {
        let d = dir("two-reads");
        let root = d.join("p.ward");
        let (g, j) = guardian(&root);
        let before = g.policy_digest();
        // The first chunk is a complete policy on its own; the second lands between the reads.
        std::fs::write(&root, CHUNK1).unwrap();
        assert!(Policy::from_source("c", CHUNK1).is_ok());
        let mut r = Reloader::new(root.clone(), Duration::ZERO);
        let out = r.reload_with(&g, || {
            std::fs::OpenOptions::new()
                .append(true)
                .open(&root)
                .and_then(|mut f| {
                    std::io::Write::write_all(&mut f, &NEW.as_bytes()[CHUNK1.len()..])
                })
                .unwrap()
        });
        assert!(matches!(out, Reload::Unstable(_)), "{out:?}");
        assert_eq!(g.policy_digest(), before);
        assert!(j.take().is_empty());
        // Once it holds still, the whole file is loaded and the reload recorded.
        let out = r.reload_with(&g, || {});
        let new = Policy::load(&root).unwrap().digest().to_string();
        assert_eq!(
            out,
            Reload::Swapped {
                old: before.to_string(),
                new: new.clone()
            }
        );
        assert_eq!(*g.policy_digest(), *new);
        match j.take().as_slice() {
            [Record::PolicyReload { old, new: n, at }] => {
                assert_eq!(**old, *before);
                assert_eq!(*n, new);
                assert!(crate::acs::time::rfc3339_unix_ms(at).is_some(), "{at}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.reload_with(&g, || {}), Reload::Unchanged);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_used_module_is_read_twice_and_compiled_from_what_held_still() {
        let d = dir("used");
        let root = d.join("p.ward");
        let (g, _j) = guardian(&root);
        std::fs::write(
            d.join("extra.ward"),
            "rule no_rm on toolCallRequest when tool.name == \"rm\" => deny \"no_rm\": \"no\"\n",
        )
        .unwrap();
        std::fs::write(&root, format!("use extra\n{OLD}")).unwrap();
        let mut r = Reloader::new(root.clone(), Duration::ZERO);
        // The module changes between the reads: the first round learns it is used, the second
        // sees it change.
        let mut n = 0;
        let out = r.reload_with(&g, || {
            n += 1;
            if n == 2 {
                std::fs::write(d.join("extra.ward"), "rule no_rm on toolCallRequest when tool.name == \"rm\" => deny \"no_rm\": \"not\"\n").unwrap();
            }
        });
        assert!(
            matches!(out, Reload::Unstable(ref w) if w.contains("extra.ward")),
            "{out:?}"
        );
        assert_eq!(r.used, vec![d.join("extra.ward")]);
        let out = r.reload_with(&g, || {});
        assert!(matches!(out, Reload::Swapped { .. }), "{out:?}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn empty_unreadable_or_broken_files_are_rejected() {
        let d = dir("rejected");
        let root = d.join("p.ward");
        let (g, j) = guardian(&root);
        let before = g.policy_digest();
        let mut r = Reloader::new(root.clone(), Duration::ZERO);
        std::fs::write(&root, "").unwrap();
        assert!(matches!(r.reload_with(&g, || {}), Reload::Rejected(w) if w.contains("empty")));
        std::fs::write(&root, [0xff, 0xfe]).unwrap();
        assert!(matches!(r.reload_with(&g, || {}), Reload::Rejected(w) if w.contains("UTF-8")));
        std::fs::write(&root, "rule broken on toolCallRequest when").unwrap();
        assert!(matches!(r.reload_with(&g, || {}), Reload::Rejected(_)));
        std::fs::remove_file(&root).unwrap();
        assert!(
            matches!(r.reload_with(&g, || {}), Reload::Rejected(w) if w.contains("cannot read"))
        );
        assert_eq!(g.policy_digest(), before);
        assert!(j.take().is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }
}
