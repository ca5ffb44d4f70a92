//! `warden playground`: serves the built playground (docs/wasm.md, "The playground") over HTTP
//! so a browser can open it: a static file server on `std::net`, for one person on their own
//! machine. It answers GET and HEAD with the files under one directory, with the content types
//! a browser needs (`application/wasm` among them), and refuses any path that would leave that
//! directory. Everything the page does runs in the browser; this only hands it the files.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

#[derive(Args, Debug)]
pub struct PlaygroundArgs {
    /// The built playground (scripts/build-playground.sh writes target/playground)
    #[arg(long, default_value = "target/playground")]
    dir: PathBuf,
    /// The port to listen on (0: any free port; the address is printed)
    #[arg(long, default_value_t = 8765)]
    port: u16,
    /// The address to listen on. The default is loopback: only this machine can open the page
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
}

/// The longest request head read (request line and headers).
const MAX_HEAD: usize = 16 * 1024;

pub fn run(args: PlaygroundArgs) -> i32 {
    if !args.dir.join("index.html").is_file() {
        eprintln!(
            "error: {} holds no built playground (no index.html): build it with \
             scripts/build-playground.sh in the Warden repository, or name the directory with --dir",
            args.dir.display()
        );
        return 2;
    }
    let root = match args.dir.canonicalize() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {}: {e}", args.dir.display());
            return 2;
        }
    };
    let addr = SocketAddr::new(args.bind, args.port);
    let listener = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {addr}: {e} (pick another port with --port)");
            return 2;
        }
    };
    let local = listener.local_addr().unwrap_or(addr);
    let host = match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
        IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    println!(
        "warden playground: serving {} at http://{host}:{}/ (Ctrl-C stops it)",
        root.display(),
        local.port()
    );
    let _ = std::io::stdout().flush();
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let root = root.clone();
        // One thread per connection: a browser opens several at once and may hold them open.
        std::thread::spawn(move || {
            let _ = serve_connection(stream, &root);
        });
    }
    0
}

/// Answers one request and closes the connection.
fn serve_connection(stream: TcpStream, root: &Path) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?.take(MAX_HEAD as u64));
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // The headers: read and ignored, up to the blank line.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let mut out = stream;
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return respond(
            &mut out,
            400,
            "Bad Request",
            "text/plain; charset=utf-8",
            b"",
            true,
        );
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return respond(
            &mut out,
            405,
            "Method Not Allowed",
            "text/plain; charset=utf-8",
            b"only GET and HEAD\n",
            head_only,
        );
    }
    match resolve(root, target) {
        Resolved::File(path) => match std::fs::read(&path) {
            Ok(body) => respond(&mut out, 200, "OK", content_type(&path), &body, head_only),
            Err(_) => not_found(&mut out, head_only),
        },
        Resolved::NotFound => not_found(&mut out, head_only),
        Resolved::Refused => respond(
            &mut out,
            403,
            "Forbidden",
            "text/plain; charset=utf-8",
            b"that path leaves the playground's directory\n",
            head_only,
        ),
        Resolved::Malformed => respond(
            &mut out,
            400,
            "Bad Request",
            "text/plain; charset=utf-8",
            b"malformed path\n",
            head_only,
        ),
    }
}

fn not_found(out: &mut TcpStream, head_only: bool) -> std::io::Result<()> {
    respond(
        out,
        404,
        "Not Found",
        "text/plain; charset=utf-8",
        b"not found\n",
        head_only,
    )
}

fn respond(
    out: &mut TcpStream,
    code: u16,
    reason: &str,
    content_type: &str,
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())?;
    if !head_only {
        out.write_all(body)?;
    }
    out.flush()
}

/// What a request target names.
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    File(PathBuf),
    NotFound,
    /// A path that would leave the directory (`..`, an absolute path, a link pointing out).
    Refused,
    Malformed,
}

/// The file a request target (`/warden/pkg/x.wasm?v=1`) names under `root` (canonical).
/// A directory stands for its index.html; names starting with a dot are never served.
fn resolve(root: &Path, target: &str) -> Resolved {
    let path = target.split(['?', '#']).next().unwrap_or("");
    if !path.starts_with('/') {
        return Resolved::Malformed;
    }
    let Some(decoded) = crate::adapters::http::percent_decode(path) else {
        return Resolved::Malformed;
    };
    let mut file = root.to_path_buf();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => continue,
            ".." => return Resolved::Refused,
            s if s.contains('\\') || s.contains('\0') || s.contains(':') => {
                return Resolved::Refused
            }
            s if s.starts_with('.') => return Resolved::NotFound,
            s => file.push(s),
        }
    }
    if file.is_dir() {
        file.push("index.html");
    }
    // A symbolic link may point anywhere: what is served is what lies under the root.
    match file.canonicalize() {
        Ok(real) if real.starts_with(root) && real.is_file() => Resolved::File(real),
        Ok(real) if !real.starts_with(root) => Resolved::Refused,
        _ => Resolved::NotFound,
    }
}

/// The content type of a file served, by its extension.
fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "wasm" => "application/wasm",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" | "ward" | "jsonl" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_under_the_root_and_nowhere_else() {
        let dir = std::env::temp_dir().join(format!("warden-playground-{}", std::process::id()));
        let site = dir.join("site");
        std::fs::create_dir_all(site.join("sub")).unwrap();
        std::fs::write(site.join("index.html"), "<p>").unwrap();
        std::fs::write(site.join("sub/a b.js"), "x").unwrap();
        std::fs::write(site.join(".hidden"), "x").unwrap();
        std::fs::write(dir.join("secret"), "x").unwrap();
        let root = site.canonicalize().unwrap();
        let file = |p: &str| Resolved::File(root.join(p));
        assert_eq!(resolve(&root, "/"), file("index.html"));
        assert_eq!(resolve(&root, "/index.html?x=1#y"), file("index.html"));
        assert_eq!(resolve(&root, "/sub/a%20b.js"), file("sub/a b.js"));
        assert_eq!(resolve(&root, "/../secret"), Resolved::Refused);
        assert_eq!(
            resolve(&root, "/sub/%2e%2e/%2e%2e/secret"),
            Resolved::Refused
        );
        assert_eq!(resolve(&root, "/..%2fsecret"), Resolved::Refused);
        assert_eq!(resolve(&root, "/sub\\..\\..\\secret"), Resolved::Refused);
        assert_eq!(resolve(&root, "/.hidden"), Resolved::NotFound);
        assert_eq!(resolve(&root, "/missing.js"), Resolved::NotFound);
        assert_eq!(resolve(&root, "/%zz"), Resolved::Malformed);
        assert_eq!(resolve(&root, "http://elsewhere/"), Resolved::Malformed);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.join("secret"), site.join("link")).unwrap();
            assert_eq!(resolve(&root, "/link"), Resolved::Refused);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn content_types_are_what_browsers_require() {
        assert_eq!(
            content_type(Path::new("m.wasm")),
            "application/wasm",
            "WebAssembly.instantiateStreaming needs it"
        );
        assert_eq!(
            content_type(Path::new("a.js")),
            "text/javascript; charset=utf-8",
            "module scripts need a JavaScript type"
        );
        assert_eq!(
            content_type(Path::new("i.HTML")),
            "text/html; charset=utf-8"
        );
        assert_eq!(content_type(Path::new("s.css")), "text/css; charset=utf-8");
        assert_eq!(
            content_type(Path::new("p.ward")),
            "text/plain; charset=utf-8"
        );
        assert_eq!(content_type(Path::new("blob")), "application/octet-stream");
    }
}
