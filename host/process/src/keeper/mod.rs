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

mod client;
mod fds;
mod os_bytes;
mod server;
mod slot;
mod wire;

pub use client::{Keeper, KeeperSpawnError, KeptProcess, KeptStreams};
pub use server::serve;
pub use slot::Keepers;
pub(crate) use wire::Launch;

#[cfg(test)]
mod tests;
