//! The host's process service: every child process of every producer is spawned, read, signalled and
//! reaped here, on the host's runtime (no thread per process), with one environment policy. With a
//! [`keeper`], the keeper process does the spawning and reaping of piped children for the service, so
//! a start never copies the host's descriptor table.
//!
//! A child runs `bash -c <command>` in its own process group with stdin closed and a scrubbed
//! environment, or, when asked for a terminal, in a session of its own on a pseudo-terminal that
//! takes input ([`Process::write_input`]) and whose output is shown as the terminal draws it. Each
//! output stream keeps an in-memory tail and spills beyond it to a private 0600 file, whose cap keeps
//! the head and the latest output. A kill sends SIGTERM to the group, then SIGKILL after the grace if any of the
//! group is still alive. When a process settles, whatever is left of its group is ended too: a task's
//! processes never outlive it.

#![forbid(unsafe_code)]

pub mod bounds;
mod budget;
mod cgroup;
mod child;
mod coloured;
pub mod env;
mod escaped;
mod exit;
mod input;
pub mod keeper;
mod kept_gap;
mod kept_read;
mod launch;
mod master;
mod owner_bounds;
pub mod private_dir;
mod provider_tokens;
mod render;
mod rolling;
mod service;
mod spawned;
mod spec;
mod spill_handle;
mod spill_layout;
mod spills;
mod splice;
mod started;
mod stream;
mod stream_resume;
mod supervise;
mod terminal;
pub mod trusted_path;

pub use budget::DEFAULT_SPILL_BUDGET;
pub use child::{Exit, Process, ProcessWatch, end_group, signal_name};
pub use coloured::render_coloured;
pub use escaped::{end_all_children, reap_inherited};
pub use input::InputError;
pub use owner_bounds::OwnerBounds;
pub use render::{Drawn, SpillRef, render_read, render_read_drawn};
pub use service::ProcessService;
pub use spawned::raise_file_limit;
pub use spec::{Pipes, ProcessSpec, SpawnError, TtySize, check_workdir};
pub use started::started_at_ms;
pub use taskhost_registry::excerpt;
pub use terminal::render_terminal;
