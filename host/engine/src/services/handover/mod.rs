//! The handover, in the engine: a host taking back what a gone predecessor's keeper handed it,
//! and what it records so that its own successor can. The protocol as a whole (who sends what,
//! when, which version) is told by the host's handover folder (`host/src/serve/handover/`).
//!
//! - [`Predecessor`]: the keeper a successor took and the tasks it held, passed to
//!   [`crate::Taskhost::taking_over`], which serves with that keeper and returns the tasks for
//!   [`crate::Taskhost::take_back_tasks`] once the plugins are loaded.
//! - `take_back.rs`: [`Services::take_back`], each handed task served again under its id.
//! - `foregrounds.rs`: a foreground command recorded and held from its start
//!   ([`crate::process::keeper::HeldAs::Foreground`]), made its caller's task by a successor after
//!   a crash; `continued.rs`, the interrupted calls a bridge's welcome names.
//! - `unheld.rs`: tasks whose keeper died holding them, marked and told to their owners.
//! - Elsewhere: the pause of the bridges' sessions before an upgrade, `crate::drain`.

pub(crate) mod continued;
mod foregrounds;
mod take_back;
mod unheld;

use crate::process::keeper::{AdoptedKeeper, Handed};
#[cfg(doc)]
use crate::services::Services;

/// What a gone predecessor's keeper handed this host (see
/// [`crate::process::keeper::Keepers::take_waiting`]): the keeper, which this host serves with
/// instead of starting one, and the running tasks it held.
pub struct Predecessor {
    /// The keeper, taken as this host's.
    pub keeper: AdoptedKeeper,
    /// The tasks, the gone host's row, lock and listening sockets.
    pub handed: Handed,
}
