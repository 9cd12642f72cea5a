//! The system-call filter of every bounded process (seccomp, as Codex does; `no_new_privs` is
//! already set when it is installed). Every other system call is let through.
//!
//! - Always: `prlimit64` on another process is refused with EPERM. Landlock's scopes keep a task
//!   from signalling or tracing a process outside its bounds, but the kernel lets a process change
//!   the limits of any other of its user, and a CPU limit of zero kills: a task could end its keeper
//!   that way. A process's own limits (`setrlimit`, `prlimit` of pid 0) stay its to change.
//! - Always: `clone3` is refused with ENOSYS, as if this kernel had none (the C library then uses
//!   `clone`): its `CLONE_INTO_CGROUP` places the child in any cgroup v2 whose directory the task
//!   can open, read-only is enough, past its task cgroups and its host's.
//! - `network = "none"` leaves only Unix sockets: `socket` and `socketpair` for every address family
//!   but `AF_UNIX`, and `io_uring_setup` (whose operations could open sockets past the filter), are
//!   refused with EACCES. Chosen over a network namespace because it needs no privilege, costs
//!   microseconds where a namespace costs milliseconds to make and to tear down, and leaves the
//!   task the host's Unix sockets it may reach. A program that calls `connect` gets the OS's answer
//!   from `socket` (EACCES) before.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::model::{Bounds, BoundsError, Mechanism, denied, failed, unsupported};

pub(super) fn probe() -> Vec<Mechanism> {
    let seccomp = seccomp_here();
    vec![
        Mechanism {
            part: "network",
            how: seccomp.clone().map(|()| {
                "seccomp: socket and socketpair refused for every family but AF_UNIX".to_owned()
            }),
        },
        Mechanism {
            part: "signals",
            how: seccomp.map(|()| "seccomp: prlimit of another process refused".to_owned()),
        },
    ]
}

/// Whether this kernel filters system calls and the filter compiles for this architecture.
fn seccomp_here() -> Result<(), String> {
    if denied("seccomp") {
        return Err(format!(
            "seccomp is denied by {} (a test's simulation)",
            super::DENY_ENV
        ));
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if !status.lines().any(|l| l.starts_with("Seccomp:")) {
        return Err(
            "this kernel has no seccomp (no Seccomp: line in /proc/self/status)".to_owned(),
        );
    }
    filters(false).map(|_| ())
}

/// The part a missing filter is named for: the network when it is off, else the limits of other
/// processes (which every bounded task needs kept from it).
fn part(bounds: &Bounds) -> &'static str {
    if bounds.network { "signals" } else { "network" }
}

pub(super) fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    seccomp_here().map_err(|why| unsupported(bounds, part(bounds), why))
}

/// Installs the filters (`no_new_privs` is already set), compiled once. The kernel is asked what
/// it lacks ([`check`]) only when one is refused, so that the refusal names the cause; a filter
/// not installed always refuses the bounds.
pub(super) fn restrict(bounds: &Bounds) -> Result<(), BoundsError> {
    if denied("seccomp") {
        return check(bounds);
    }
    for program in filters(bounds.network).map_err(|why| unsupported(bounds, part(bounds), why))? {
        if let Err(e) = seccompiler::apply_filter(&program) {
            check(bounds)?;
            return Err(failed(bounds, part(bounds), std::io::Error::other(e)));
        }
    }
    Ok(())
}

/// A rule that holds when argument `arg` is not `value` (compared as 32 bits: pids and families).
fn not(arg: u8, value: u64) -> Result<SeccompRule, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, value)
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| e.to_string())
}

/// `n`, and on x86-64 its x32 twin: the x32 system calls share the architecture and carry this bit
/// in their number, so a kernel built with x32 would otherwise open an AF_INET socket through
/// `socket | X32`.
fn numbers(n: i64) -> Vec<i64> {
    if cfg!(target_arch = "x86_64") {
        vec![n, 0x4000_0000 | n]
    } else {
        vec![n]
    }
}

/// One filter refusing with `errno` each call of `calls` whose rules hold (no rule: every call).
fn refusing(calls: &[(i64, Option<(u8, u64)>)], errno: i32) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let mut rules = BTreeMap::new();
    for &(call, unless) in calls {
        for n in numbers(call) {
            let rule = unless.map(|(arg, value)| not(arg, value)).transpose()?;
            rules.insert(n, rule.into_iter().collect::<Vec<_>>());
        }
    }
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .and_then(BpfProgram::try_from)
    .map_err(|e| e.to_string())
}

/// The filters of the module's documentation; with `network` the sockets are let through.
fn filters(network: bool) -> Result<Vec<BpfProgram>, String> {
    let mut all = vec![
        refusing(&[(libc::SYS_prlimit64, Some((0, 0)))], libc::EPERM)?,
        refusing(&[(libc::SYS_clone3, None)], libc::ENOSYS)?,
    ];
    if !network {
        let unix = Some((0, libc::AF_UNIX as u64));
        all.push(refusing(
            &[
                (libc::SYS_socket, unix),
                (libc::SYS_socketpair, unix),
                (libc::SYS_io_uring_setup, None),
            ],
            libc::EACCES,
        )?);
    }
    Ok(all)
}
