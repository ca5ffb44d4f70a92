//! A clean stop on SIGTERM and SIGINT (docs/serve.md, "Stopping"). Owns the signal handlers,
//! the flag the transports watch, and the stdin reader that a stop ends: the first signal
//! asks for a stop (no new connections or messages; what is in flight is answered; the
//! journal and the decision log are flushed within a deadline), a second one ends the
//! process at once (exit 128 + the signal's number). `warden serve` and `warden mcp-proxy`
//! install it; the library never does.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

/// How long requests in flight are given to be answered once a stop begins.
pub const ANSWER_GRACE: Duration = Duration::from_secs(5);
/// How long the decision log is given to send what it holds once a stop begins.
pub const LOG_GRACE: Duration = Duration::from_secs(5);
/// How often a transport looks at the flag.
pub const POLL: Duration = Duration::from_millis(50);

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNALS: AtomicUsize = AtomicUsize::new(0);
static FIRST: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    if SIGNALS.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: `_exit` is async-signal-safe; the second signal means "now".
        unsafe { libc::_exit(128 + sig) };
    }
    FIRST.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handlers for SIGTERM and SIGINT (restarting interrupted system calls, so
/// nothing else sees the signal) and returns the flag the first one sets.
pub fn install() -> &'static AtomicBool {
    #[cfg(unix)]
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed `sigaction` is a valid start; the handler only touches atomics
        // and calls `_exit`, both async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    &STOP
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The signal that asked for the stop, by name (`SIGTERM`, `SIGINT`), for messages.
pub fn signal_name() -> &'static str {
    #[cfg(unix)]
    match FIRST.load(Ordering::SeqCst) {
        libc::SIGTERM => return "SIGTERM",
        libc::SIGINT => return "SIGINT",
        _ => {}
    }
    "a signal"
}

/// Resolves once a stop is asked for (looked at every [`POLL`]).
pub async fn asked() {
    while !requested() {
        tokio::time::sleep(POLL).await;
    }
}

/// The process's standard input, read directly (no buffer of its own: what was read is the
/// caller's) and ended, as at end of input, once a stop is asked for: a read waits for input
/// at most [`POLL`] at a time and looks at the flag in between.
pub struct StdinUntilStop;

impl Read for StdinUntilStop {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if requested() {
                return Ok(0);
            }
            if !readable(POLL)? {
                continue;
            }
            return read_stdin(buf);
        }
    }
}

/// Whether stdin has input (or its end, or an error) within `wait`.
#[cfg(unix)]
fn readable(wait: Duration) -> io::Result<bool> {
    let mut fd = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut fd, 1, wait.as_millis() as libc::c_int) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::Interrupted => Ok(false),
            _ => Err(e),
        };
    }
    Ok(n > 0)
}

#[cfg(unix)]
fn read_stdin(buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(not(unix))]
fn readable(_: Duration) -> io::Result<bool> {
    Ok(true)
}

#[cfg(not(unix))]
fn read_stdin(buf: &mut [u8]) -> io::Result<usize> {
    io::stdin().read(buf)
}
