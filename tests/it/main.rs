//! Integration tests: real cdylibs loaded by the real host. Build the workspace first (`scripts/test`
#![allow(clippy::unwrap_used)]
//! does), so the test plugins exist next to this binary.

mod fixtures;
mod loading;
mod reload;
mod watch;
