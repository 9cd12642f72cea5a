//! The keeper: a small process the host starts, which spawns the host's task processes and makes sure
//! that none of them outlives the host, however the host ends (SIGKILL, an OOM kill or a crash
//! included).
//!
//! **Spawning.** The host sends the keeper, over a socket only the two of them hold, each process to
//! start (program, arguments, environment, directory) with the descriptors of its standard streams,
//! or with a terminal's size; the keeper starts it as the leader of a process group of its own (of a
//! session on a fresh pseudo-terminal, whose master it hands back), answers with its pid, reaps it
//! when it exits and reports the exit. A spawn copies the spawner's descriptor table into the child
//! and closes it again at `exec`: the keeper's table is a handful of entries, where the host's holds
//! two pipes per live task, so a start costs the same whatever the number of tasks alive. The keeper
//! closes what it inherited beyond its standard streams, so a task holds only its own three.
//!
//! **Ending.** The keeper knows every group it spawned, and the host tells it every group that is
//! gone. When the socket closes (the host is gone, however it ended) the keeper SIGKILLs every group
//! still registered and every process whose environment carries the host's marker
//! (`TASKHOST_PROCESS`) (descendants that left their group or session: `setsid` daemons, double
//! forks), in rounds until a round finds nothing or a second has passed, and exits. It needs no
//! privilege: the task processes are the user's own.
//!
//! It runs in its own process group with no terminal signals, its stdout and stderr closed, so
//! neither a terminal's Ctrl-C nor a client waiting for the host's output ever waits for it. Should
//! the keeper itself die (a task of the same user can kill it), its processes are adopted by the host
//! (a child subreaper), which reaps them, and a new keeper is started and told of every live group
//! ([`Keepers`]: at once, then with a backoff; while none runs, starts are refused). A
//! process that both cleared its environment and left its group is recognised only where the host
//! has a cgroup (`crate::cgroup`: every keeper joins it, its children are born in it, and the keeper
//! ends it last); while the host lives, the binary ends such processes at exit.
//!
//! **Why the keeper spawns.** `posix_spawn` copies the spawner's descriptor table into the child and
//! `exec` closes every close-on-exec entry again, so a host holding two pipes per live task paid for
//! every live task at every start (perf: 35% of a 6,000-task run in `do_close_on_exec`). The keeper's
//! table is a handful of entries, so a start costs the same at any scale.
//!
//! **What holds where.** The host alive, or the host dead and a keeper alive: no task process survives
//! beyond the handover's grace (groups, then the marker sweep, then the cgroup). A keeper killed while the host lives: its tasks
//! run on (the host reaps them) and the next keeper, told of their groups (`Watch`), takes over; a
//! task the dead one held for a successor is carried by the next (`Request::Carry`, `handover/carried.rs`:
//! second handles of the host's read ends; its exit read from its zombie's `/proc` entry, since it
//! is the host's child), so a keeper's death loses no task at the next upgrade or crash. Where
//! the host may make a cgroup v2, should the keeper and the host both be killed before another keeper
//! started, the next host ends and removes the dead host's cgroup (a dead host is told by its pid's
//! start time). Without a cgroup, in that double-kill window the tasks outlive both. Not used: a pid
//! namespace with the keeper as init (tasks would see other pids than the host), and
//! `PR_SET_PDEATHSIG` on tasks (it would end them with their keeper, the opposite of a restart).
//!
//! **Handover.** A `--listen` host asks its keeper to hold its running tasks for a successor
//! (`Request::Handover`, then a hold per task with its output's read ends, typed by whom it is held
//! for, [`HeldAs`]; its kept files by name in the kept directory told once with
//! `Request::KeptDir`). When that host is gone, the keeper ends what it does not hold (a subagent's
//! agent, a foreground call that cannot become a task), keeps the held tasks for the grace while
//! draining their output into their kept files, with a watchdog that ends them should the keeper be
//! killed meanwhile, and hands them to the first successor of the same user that connects: every
//! task with its descriptors and exit, then the gone host's lock and listening sockets. The
//! successor takes the keeper as its own. A host that stops withdraws the handover
//! (`Request::NoHandover`): its tasks end with it. All of it is in `handover/` (its module doc
//! says which file holds what); the protocol is told in the host's `serve/handover/`.
//!
//! Entry points: `Keepers::start` and `Keepers::spawn` (`slot.rs`, the host's side, which replaces a
//! dead keeper), `Keeper::spawn` (`client.rs`), `serve` (`server.rs`, the keeper process), the messages
//! (`wire.rs`) and their descriptors (`fds.rs`); for a handover `Keepers::enable_handover`,
//! `handover::wait::wait` and `Keepers::take_waiting`.

mod backoff;
mod client;
mod ending;
mod fds;
pub(crate) mod handover;
mod os_bytes;
mod server;
mod shared;
mod slot;
mod wire;

pub use client::{Keeper, KeeperSpawnError, KeptProcess, KeptStreams};
pub use handover::adopt::{Handed, HandedTask, HandoverError};
pub use handover::held::HoldSetup;
pub use handover::hold::{HeldAs, HeldFromStart, HeldStream, Hold};
pub use handover::room::NoRoom;
pub use handover::unheld::ReadEnds;
pub use handover::watchdog::watch as watchdog;
pub use server::serve;
pub use slot::{AdoptedKeeper, Keepers};
pub use wire::Launch;

#[cfg(test)]
mod tests;
