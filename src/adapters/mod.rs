//! Platform adapters: agent platforms whose own hook protocols are mapped onto ACS steps before
//! a Guardian sees them. They need nothing beyond the standard library, so they are in the core.
//!
//! - [`core_agent`]: `warden hook --dialect=core-agent`, core-agent's observation hooks.
//! - [`mcp_proxy`]: `warden mcp-proxy`, a gateway between an MCP client and an MCP server.

pub mod core_agent;
pub mod mcp_proxy;
