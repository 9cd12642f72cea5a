//! What keeps a task from signalling its keeper or its host: a seccomp filter the keeper installs
//! on itself before it spawns anything, which every task inherits and none can remove.
//!
//! One principal's task must not cost another principal's tasks their handover: a task that
//! killed its keeper (`kill -9 $PPID`) left every other task without one to hold it across the
//! next upgrade. The filter makes `kill`, `tkill`, `tgkill`, `rt_sigqueueinfo`,
//! `rt_tgsigqueueinfo`, `pidfd_open` and `ptrace` fail with `EPERM` when aimed at the keeper (its
//! pid, its threads, its group), the host (its pid, its threads at that moment, its group) or every
//! process at once (`-1`); `pidfd_send_signal` says `ENOSYS` (its target cannot be told from its
//! arguments, and callers fall back to `kill`). It costs nothing per start: the kernel copies the
//! filter with the process. A successor that takes the keeper over after a crash (another pid) is
//! named by one more filter, which the tasks started from then on carry.
//!
//! Why this and not the alternatives: a pid namespace needs `CAP_SYS_ADMIN` (a user namespace for a
//! normal user, which breaks `sudo` in tasks just the same and maps ids), and tasks would see other
//! pids than the host reports; another uid is not to be had by a normal user. What it costs: a filter
//! needs `no_new_privs`, which every task inherits (a setuid program such as `sudo` gains no
//! privilege in a task of a normal user's host). What it leaves: a thread the host starts after its
//! keeper did is not named (a task that guesses that thread's id can still signal the host), and
//! root's tasks can still reach both by other means (`/proc/PID/mem`).

use std::collections::BTreeMap;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

/// Why the filter was not installed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ShieldError {
    /// The filter could not be built or the kernel refused it.
    #[error("cannot keep tasks from signalling the keeper: {0}")]
    Seccomp(#[from] seccompiler::Error),
    /// This architecture is not one seccompiler knows.
    #[error("cannot keep tasks from signalling the keeper: {0}")]
    Arch(#[from] seccompiler::BackendError),
}

/// The pids of process `pid` and of each of its threads.
fn threads_of(pid: i32) -> Vec<i32> {
    let mut ids = vec![pid];
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        ids.extend(
            tasks
                .flatten()
                .filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok())
                .filter(|&t| t != pid),
        );
    }
    ids
}

/// Installs the filter on every thread of this process (the keeper, once its threads run), naming
/// it and its parent (the host) as the processes no descendant may signal.
pub(crate) fn install() -> Result<(), ShieldError> {
    let me = nix::unistd::getpid().as_raw();
    let host = nix::unistd::getppid().as_raw();
    let mut targets = threads_of(me);
    targets.push(-me);
    if host > 1 {
        targets.extend(threads_of(host));
        if let Ok(group) = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(host))) {
            targets.push(-group.as_raw());
        }
    }
    targets.push(-1);
    apply(&targets, &[host.max(0)], me)?;
    let unknown = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_pidfd_send_signal, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS.cast_unsigned()),
        std::env::consts::ARCH.try_into()?,
    )?;
    let program: seccompiler::BpfProgram = unknown.try_into()?;
    Ok(seccompiler::apply_filter_all_threads(&program)?)
}

/// Names one more host no descendant may signal: `host`, a successor that took this keeper over
/// after its own host died (with another pid than the one [`install`] named). Tasks started from
/// now on carry it.
pub(crate) fn also(host: i32) -> Result<(), ShieldError> {
    let mut targets = threads_of(host);
    if let Ok(group) = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(host))) {
        targets.push(-group.as_raw());
    }
    apply(&targets, &[host], nix::unistd::getpid().as_raw())
}

/// The filter that refuses the signalling calls aimed at `targets` (processes and groups), and
/// `tgkill` at the processes `hosts` and `me`.
fn apply(targets: &[i32], hosts: &[i32], me: i32) -> Result<(), ShieldError> {
    let arch = std::env::consts::ARCH.try_into()?;
    let aimed = |arg: u8, at: &[i32]| -> Result<Vec<SeccompRule>, ShieldError> {
        at.iter()
            .map(|&p| {
                let is = SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    u64::from(p.cast_unsigned()),
                )?;
                Ok(SeccompRule::new(vec![is])?)
            })
            .collect()
    };
    let processes: Vec<i32> = hosts.iter().copied().chain([me]).collect();
    let mut refused = BTreeMap::new();
    refused.insert(libc::SYS_kill, aimed(0, targets)?);
    refused.insert(libc::SYS_tkill, aimed(0, targets)?);
    refused.insert(libc::SYS_tgkill, aimed(0, &processes)?);
    refused.insert(libc::SYS_rt_sigqueueinfo, aimed(0, targets)?);
    refused.insert(libc::SYS_rt_tgsigqueueinfo, aimed(0, &processes)?);
    refused.insert(libc::SYS_pidfd_open, aimed(0, targets)?);
    refused.insert(libc::SYS_ptrace, aimed(1, targets)?);
    let refuse = SeccompFilter::new(
        refused,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.cast_unsigned()),
        arch,
    )?;
    let program: seccompiler::BpfProgram = refuse.try_into()?;
    Ok(seccompiler::apply_filter_all_threads(&program)?)
}
