//! Helpers shared by the integration tests. Each test crate uses a different subset.
#![allow(dead_code)]

pub mod schema;
