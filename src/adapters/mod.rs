//! Platform adapters: agent platforms whose own hook protocols are mapped onto ACS steps before
//! a Guardian sees them. They need nothing beyond the standard library, so they are in the core.
//!
//! - [`core_agent`]: `warden hook --dialect=core-agent`, core-agent's observation hooks.
//! - [`mcp_proxy`]: `warden mcp-proxy`, a gateway between an MCP client and an MCP server;
//!   [`mcp_upstream`]: the server's side of it over Streamable HTTP.
//! - [`http`]: the small HTTP/1.1 client they (and the operator commands) share.

pub mod core_agent;
pub mod http;
pub mod mcp_proxy;
pub mod mcp_upstream;
