//! `warden playground` (src/cli/playground.rs): the static server the browser opens the
//! playground from. Driven over real sockets: what it serves, with which content types, what
//! it refuses, and the error when the playground is not built. The page itself is tested in
//! Chromium by scripts/browser-test.sh.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running `warden playground` on a free loopback port; killed when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["playground", "--port", "0", "--dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run warden playground");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the address line");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Server { child, addr }
}

/// Sends `request` as is and returns (status code, headers lower-cased, body).
fn send(addr: &str, request: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    let cut = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&raw[..cut]).to_ascii_lowercase();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (code, head, raw[cut + 4..].to_vec())
}

fn get(addr: &str, path: &str) -> (u16, String, Vec<u8>) {
    send(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
    )
}

fn site() -> tempfile_dir::Dir {
    let d = tempfile_dir::Dir::new();
    let site = d.0.join("site");
    std::fs::create_dir_all(site.join("warden/pkg")).unwrap();
    std::fs::write(site.join("index.html"), "<!doctype html><title>p</title>").unwrap();
    std::fs::write(site.join("playground.js"), "export {};").unwrap();
    std::fs::write(site.join("warden/pkg/m.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(d.0.join("secret.txt"), "outside").unwrap();
    d
}

/// A temporary directory, removed when dropped (no crate for it).
mod tempfile_dir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "warden-playground-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn serves_the_files_with_the_types_a_browser_needs() {
    let d = site();
    let server = serve(&d.0.join("site"));
    assert!(
        server.addr.starts_with("127.0.0.1:"),
        "loopback by default: {}",
        server.addr
    );
    let (code, head, body) = get(&server.addr, "/");
    assert_eq!(code, 200, "{head}");
    assert!(head.contains("content-type: text/html"), "{head}");
    assert_eq!(body, b"<!doctype html><title>p</title>");
    let (code, head, _) = get(&server.addr, "/playground.js");
    assert_eq!(code, 200);
    assert!(head.contains("content-type: text/javascript"), "{head}");
    let (code, head, body) = get(&server.addr, "/warden/pkg/m.wasm?v=2");
    assert_eq!(code, 200);
    assert!(head.contains("content-type: application/wasm"), "{head}");
    assert_eq!(body, b"\0asm\x01\0\0\0");
    let (code, head, body) = send(&server.addr, "HEAD /index.html HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(code, 200);
    assert!(head.contains("content-length: 31"), "{head}");
    assert!(body.is_empty(), "HEAD has no body");
    assert_eq!(get(&server.addr, "/missing.js").0, 404);
}

#[test]
fn refuses_paths_out_of_the_directory_and_other_methods() {
    let d = site();
    let server = serve(&d.0.join("site"));
    for path in [
        "/../secret.txt",
        "/warden/%2e%2e/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
    ] {
        let (code, _, body) = get(&server.addr, path);
        assert_eq!(code, 403, "{path}");
        assert!(
            !String::from_utf8_lossy(&body).contains("outside"),
            "{path}"
        );
    }
    let (code, _, _) = send(
        &server.addr,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(code, 405);
}

#[test]
fn an_unbuilt_playground_is_an_error_naming_the_script() {
    let d = tempfile_dir::Dir::new();
    let dir = d.0.join("nothing-here");
    let (code, out, err) = common::warden(
        &["playground", "--port", "0", "--dir", dir.to_str().unwrap()],
        b"",
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("scripts/build-playground.sh"), "{err}");
    assert!(err.contains("nothing-here"), "{err}");
}
