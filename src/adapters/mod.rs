//! Platform adapters: agent platforms whose own hook protocols are mapped onto ACS steps before
//! a Guardian sees them. They need nothing beyond the standard library, so they are in the core.
//!
//! - [`core_agent`]: `warden hook --dialect=core-agent`, core-agent's observation hooks.

pub mod core_agent;
