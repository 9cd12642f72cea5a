//! The handover, in the process crate: what a `--listen` host's keeper holds of its running tasks
//! for the next host, how it keeps them while no host runs, and how a successor takes them and the
//! keeper back. The protocol as a whole (who sends what, when, which version) is told by the
//! host's handover folder (`host/src/serve/handover/`); the messages are `super::wire`'s.
//!
//! - The host's side: `asks.rs`, what a host tells its keeper (the setup, each task held, a
//!   foreground command renamed as the task it became, the handover withdrawn); `state.rs`, what
//!   every keeper of a host is told again; `unheld.rs`, the holds a replacing keeper carries when
//!   one dies; `takeover.rs`, `ProcessService`'s holds and a successor taking a task back.
//! - What is held: `hold.rs`, a [`Hold`] as it travels, for whom ([`HeldAs`]: a task, or a
//!   foreground command that may become one) and, for a peer of protocol 4 or earlier, under the
//!   string name those spoke; `held.rs`, what the keeper holds of each task; `kept_file.rs`, a
//!   held stream's kept file.
//! - The keeper's side: `wait.rs`, its host gone, it drains the held tasks into their kept files
//!   for the grace and hands them to the first successor; `watchdog.rs`, which ends them should
//!   the keeper be killed meanwhile; `carried.rs`, a dead keeper's held tasks carried on.
//! - The successor's side: `adopt.rs`, connecting to the keeper left waiting and taking the tasks,
//!   the lock, the listening sockets and the keeper.

pub(crate) mod adopt;
mod asks;
pub(crate) mod carried;
pub(crate) mod held;
pub(crate) mod hold;
pub(crate) mod kept_file;
pub(crate) mod room;
pub(crate) mod state;
pub(crate) mod takeover;
pub(crate) mod unheld;
pub(crate) mod wait;
pub(crate) mod watchdog;

#[cfg(test)]
mod tests;
