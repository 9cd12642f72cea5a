//! The handover, in the store: what a successor records as its own before the gone host's lock
//! is let go (`taken.rs`, the running tasks its keeper handed over, [`Takeover`]; `takeover.rs`,
//! the store opened taking them over), the foreground commands a host that hands over records
//! before they start, so that a successor can make one its caller's task after a crash
//! (`foregrounds.rs`), and the running tasks whose keeper died holding them (`unheld.rs`). The
//! protocol as a whole is told by the host's handover folder (`host/src/serve/handover/`).

pub(crate) mod foregrounds;
pub(crate) mod taken;
mod takeover;
mod unheld;

pub use taken::Takeover;
