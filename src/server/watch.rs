//! Policy hot reload: recompiling the policy file and swapping it into a running Guardian
//! ([`reload`]), and `--watch`, which reloads on every change to a `.ward` file in the policy's
//! folder (the watcher needs feature `watch`). Owns when a reload happens; knows nothing of
//! transports or the journal.

use std::path::Path;
#[cfg(feature = "watch")]
use std::path::PathBuf;
#[cfg(feature = "watch")]
use std::sync::{mpsc, Arc};
#[cfg(feature = "watch")]
use std::time::Duration;

use crate::guardian::{Guardian, Policy};

/// What a reload did.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    Swapped(String),
    Unchanged,
    Rejected(String),
}

/// Recompiles the policy at `path` and swaps it in if it checks and differs.
pub fn reload(g: &Guardian, path: &Path) -> Reload {
    match Policy::load(path) {
        Ok(p) if *p.digest() == *g.policy_digest() => Reload::Unchanged,
        Ok(p) => {
            let d = p.digest().to_string();
            g.set_policy(p);
            Reload::Swapped(d)
        }
        Err(d) => Reload::Rejected(d.render(false)),
    }
}

/// Watches the policy's folder and reloads (debounced by `quiet`) on every change to a
/// `.ward` file. The returned watcher must be kept alive.
#[cfg(feature = "watch")]
pub fn watch(
    g: Arc<Guardian>,
    path: PathBuf,
    quiet: Duration,
) -> Result<notify::RecommendedWatcher, String> {
    use notify::Watcher as _;
    let (tx, rx) = mpsc::channel::<()>();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        if let Ok(ev) = ev {
            let relevant = ev
                .paths
                .iter()
                .any(|p| p.extension().is_some_and(|x| x == "ward"));
            if relevant && !matches!(ev.kind, notify::EventKind::Access(_)) {
                let _ = tx.send(());
            }
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
    std::thread::Builder::new()
        .name("warden-watch".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                // Debounce: wait until the folder has been quiet for `quiet`.
                while rx.recv_timeout(quiet).is_ok() {}
                match reload(&g, &path) {
                    Reload::Swapped(d) => {
                        eprintln!("warden: reloaded {} (policy {d})", path.display())
                    }
                    Reload::Unchanged => {}
                    Reload::Rejected(why) => eprintln!(
                        "{why}warden: {} has errors; the last good policy keeps serving",
                        path.display()
                    ),
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(watcher)
}
