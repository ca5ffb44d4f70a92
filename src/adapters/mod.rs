//! Platform adapters (feature `cli`): agent platforms whose own hook protocols are mapped onto
//! ACS steps before a Guardian sees them.
//!
//! - [`core_agent`]: `warden hook --dialect=core-agent`, core-agent's observation hooks.

pub mod core_agent;
