//! `warden mcp-proxy`: the MCP gateway's command line. Owns loading the policy and the state
//! folder; the proxy itself is `crate::adapters::mcp_proxy`, its HTTP transport
//! `crate::server::mcp_http` (docs/mcp.md).

use std::path::PathBuf;

use std::sync::atomic::AtomicBool;

use clap::Args;

use crate::adapters::mcp_proxy::{self, Config};
use crate::guardian::{Options, Protocol};
use crate::server::serve;

#[derive(Args, Debug)]
pub struct McpProxyArgs {
    /// The policy (default: the embedded default policy)
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Keep the session and its audit chain in this folder (check it with `warden audit verify DIR`)
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// When a new ACS turn starts (MCP has none): `request` (each request the policy decides;
    /// `turns_since(untrusted) <= 3` then means "within the next three requests"),
    /// `idle=SECONDS` (a request after that long without one), or `initialize` (one turn per
    /// MCP connection)
    #[arg(
        long,
        value_name = "request|idle=SECONDS|initialize",
        default_value = "request"
    )]
    turns: mcp_proxy::Turns,
    /// `metadata.agent_id` of the ACS steps
    #[arg(long, default_value = "mcp-proxy")]
    agent_id: String,
    /// The ACS session id (default: a fresh one)
    #[arg(long)]
    session: Option<String>,
    /// Say nothing on standard error when something is refused
    #[arg(long)]
    quiet: bool,
    /// Serve the client MCP's Streamable HTTP transport on this address (endpoint `/mcp`)
    /// instead of stdio, e.g. 127.0.0.1:8931 (port 0 picks a free one; the address is printed)
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// Write one JSON record per decision to a file (appended), `-` (stdout; with --listen
    /// only) or an http:// collector, as `warden serve --decision-log` does (docs/serve.md)
    #[arg(long, value_name = "PATH|-|URL")]
    decision_log: Option<String>,
    /// With an http:// decision log: the most bytes of records queued for the collector
    /// (the batch being sent included); when full, the oldest records are dropped and counted
    #[arg(long, value_name = "BYTES", default_value_t = crate::server::decision_log::QUEUE_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(4..))]
    decision_log_queue_bytes: usize,
    /// Reach the MCP server over Streamable HTTP at this endpoint (http://HOST:PORT/PATH)
    /// instead of starting it
    #[arg(long, value_name = "URL", conflicts_with = "server")]
    server_url: Option<String>,
    /// The MCP server's command and its arguments (after `--`)
    #[arg(
        last = true,
        required_unless_present = "server_url",
        value_name = "SERVER"
    )]
    server: Vec<String>,
}

pub fn run(a: McpProxyArgs) -> i32 {
    let policy = match serve::load_policy(a.policy.as_deref()) {
        Ok(p) => p,
        Err(d) => {
            eprint!("{d}");
            eprintln!("the policy has errors; nothing was run");
            return 2;
        }
    };
    let options = Options {
        protocol: Protocol::strict(),
        ..Options::default()
    };
    let (guardian, store) = match serve::build_serving(policy, options, a.state.as_deref()) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("warden mcp-proxy: {e}");
            return 2;
        }
    };
    let mut decision_log = None;
    if let Some(spec) = &a.decision_log {
        match crate::server::decision_log::open(
            spec,
            a.listen.is_some(),
            crate::server::decision_log::Bounds {
                records: crate::server::decision_log::QUEUE_CAPACITY,
                bytes: a.decision_log_queue_bytes,
            },
        ) {
            Ok(sink) => {
                guardian.set_decision_log(sink.clone());
                decision_log = Some(sink);
            }
            Err(e) => {
                eprintln!("warden mcp-proxy: {e}");
                return 2;
            }
        }
    }
    let upstream = match a.server_url {
        Some(url) => {
            if let Err(e) = mcp_proxy::Upstream::Url(url.clone()).check() {
                eprintln!("warden mcp-proxy: {e}");
                return 2;
            }
            mcp_proxy::Upstream::Url(url)
        }
        None => mcp_proxy::Upstream::Command(a.server),
    };
    let config = Config {
        agent_id: a.agent_id,
        session_id: a.session,
        quiet: a.quiet,
        stop: Some(stop_on_signal()),
        turns: a.turns,
    };
    let ran = match a.listen {
        Some(addr) => crate::server::mcp_http::run(guardian, &upstream, &config, addr, |at| {
            eprintln!("warden mcp-proxy: listening on http://{at}/mcp");
        }),
        None => mcp_proxy::run(guardian, &upstream, &config),
    };
    if let Some(Err(e)) = store.as_deref().map(crate::server::backend::Backend::close) {
        eprintln!("warden mcp-proxy: the journal could not be closed: {e}");
    }
    if let Some(log) = &decision_log {
        log.flush(crate::server::stop::LOG_GRACE);
    }
    if crate::server::stop::requested() {
        eprintln!(
            "warden mcp-proxy: stopped after {}",
            crate::server::stop::signal_name()
        );
    }
    match ran {
        Ok(code) => code,
        Err(e) => {
            eprintln!("warden mcp-proxy: {e}");
            2
        }
    }
}

/// SIGINT and SIGTERM stop the proxy cleanly: the server is stopped and the ACS session ended,
/// which seals its audit chain; the decision log then sends what it holds. A second signal
/// stops at once ([`crate::server::stop`]).
fn stop_on_signal() -> &'static AtomicBool {
    let flag = crate::server::stop::install();
    let _ = std::thread::Builder::new()
        .name("warden-stop".into())
        .spawn(|| {
            while !crate::server::stop::requested() {
                std::thread::sleep(crate::server::stop::POLL);
            }
            eprintln!(
                "warden mcp-proxy: {}: stopping (the MCP server is stopped and the session \
                 ended); a second signal stops at once",
                crate::server::stop::signal_name()
            );
        });
    flag
}
