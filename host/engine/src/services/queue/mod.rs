//! The queue (issue 44, SPEC 9.3): limits on running process tasks, `[tasks] max_running` for the
//! host and `max_running` in a policy for each owner, and tasks that run after others.
//!
//! A start past a limit is not refused: the registry records the task at once, `queued`
//! ([`taskhost_registry::TaskStart::queued`]), and it begins when a slot frees. Within an owner the
//! queue is first in, first out; owners take turns (`turns.rs`), so one owner's long queue never
//! starves another's single task. A start that names tasks to run `after` waits, queued, until they
//! ended (`after.rs`), then takes its turn; when one of them did not complete with exit 0 it settles
//! `failed` without running. Every check that can fail runs before the task is recorded (the
//! fence); a queued task that later cannot start settles `failed` saying why.
//!
//! A queued task is a task: listed, read (its detail says how many are ahead of it), killed (it
//! leaves the queue without running), disposed with its owner. Its hooks are the host's
//! (`deferred.rs`), so a reload of its producer leaves it queued. With a state directory its spec
//! is recorded with it (`durable.rs`): a host that stops or crashes leaves it `queued`, and the
//! next host queues it again, in order.
//!
//! Without any limit configured every start takes a slot at once and nothing is counted.

mod after;
mod deferred;
mod durable;
mod slots;
mod start;
mod turns;

pub(crate) use durable::QueuedSpec;
pub use slots::{OwnerLimit, Queue, Slot};
