//! `warden test --watch`: run, then re-run whenever a `.ward`, `.jsonl` (trace), `.rego` or
//! `.json` (Rego data) file under the watched paths changes. Events are debounced (a run starts once 200 ms pass without another
//! change), each run clears the screen first, and every run re-runs all the tests under the
//! watched paths (simple, and cheap: a run takes milliseconds). The loop ends on Ctrl-C, or
//! when `q` is typed (when standard input is a terminal).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

/// How long the files must stay quiet before a re-run.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// The ANSI sequence that clears the screen and homes the cursor.
pub const CLEAR: &str = "\x1b[2J\x1b[H";

enum Msg {
    Changed,
    Quit,
}

fn relevant(p: &Path) -> bool {
    p.extension()
        .is_some_and(|x| x == "ward" || x == "jsonl" || x == "rego" || x == "json")
}

/// Runs `run` now and after every debounced change; returns when told to stop.
pub fn watch(paths: &[PathBuf], mut run: impl FnMut()) -> Result<(), String> {
    let (tx, rx) = mpsc::channel::<Msg>();
    let events = tx.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            let changed: Vec<PathBuf> = ev.paths.into_iter().filter(|p| relevant(p)).collect();
            if !changed.is_empty() && !ev.kind.is_access() {
                let _ = events.send(Msg::Changed);
            }
        }
    })
    .map_err(|e| format!("cannot watch files: {e}"))?;
    for p in paths {
        // A file is watched through its folder: editors replace files by renaming.
        let (target, mode) = if p.is_dir() {
            (p.clone(), RecursiveMode::Recursive)
        } else {
            let parent = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            (parent.to_path_buf(), RecursiveMode::NonRecursive)
        };
        watcher
            .watch(&target, mode)
            .map_err(|e| format!("cannot watch {}: {e}", target.display()))?;
    }
    if std::io::stdin().is_terminal() {
        std::thread::spawn(move || {
            let mut line = String::new();
            while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
                if line.trim() == "q" {
                    break;
                }
                line.clear();
            }
            let _ = tx.send(Msg::Quit);
        });
    }
    loop {
        print!("{CLEAR}");
        run();
        println!("watching for changes (Ctrl-C or q to stop)");
        // Wait for a change, then for quiet.
        match rx.recv() {
            Ok(Msg::Changed) => {}
            Ok(Msg::Quit) | Err(_) => return Ok(()),
        }
        loop {
            match rx.recv_timeout(DEBOUNCE) {
                Ok(Msg::Changed) => continue,
                Ok(Msg::Quit) => return Ok(()),
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    }
}
