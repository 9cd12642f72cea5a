//! The network part: `network = "none"` leaves a bounded process only Unix sockets.
//!
//! A seccomp filter (as Codex does) refuses with EACCES `socket` and `socketpair` for every address
//! family but `AF_UNIX`, and `io_uring_setup` (whose operations could open sockets past the
//! filter); every other system call is let through. Chosen over a network namespace because it
//! needs no privilege (only `no_new_privs`, already set), costs microseconds where a namespace
//! costs milliseconds to make and to tear down, and leaves the task the host's Unix sockets it
//! may reach. A program that calls `connect` gets the OS's answer from `socket` (EACCES) before.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::model::{Bounds, BoundsError, Mechanism, denied, failed, unsupported};

pub(super) fn probe() -> Vec<Mechanism> {
    vec![Mechanism {
        part: "network",
        how: seccomp_here().map(|()| {
            "seccomp: socket and socketpair refused for every family but AF_UNIX".to_owned()
        }),
    }]
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
    filter().map(|_| ())
}

pub(super) fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    if bounds.network {
        return Ok(());
    }
    seccomp_here().map_err(|why| unsupported(bounds, "network", why))
}

/// Installs the filter when the network is off (`no_new_privs` is already set).
pub(super) fn restrict(bounds: &Bounds) -> Result<(), BoundsError> {
    if bounds.network {
        return Ok(());
    }
    check(bounds)?;
    let program = filter().map_err(|why| unsupported(bounds, "network", why))?;
    seccompiler::apply_filter(&program)
        .map_err(|e| failed(bounds, "network", std::io::Error::other(e)))
}

/// The filter: EACCES for a socket of any family but `AF_UNIX`, and for `io_uring_setup`.
fn filter() -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let not_unix = || {
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| e.to_string())
    };
    let mut rules = BTreeMap::from([
        (libc::SYS_socket, vec![not_unix()?]),
        (libc::SYS_socketpair, vec![not_unix()?]),
        (libc::SYS_io_uring_setup, Vec::new()),
    ]);
    // On x86-64 the x32 system calls share the architecture and carry this bit in their number:
    // a kernel built with x32 would otherwise open an AF_INET socket through `socket | X32`.
    if cfg!(target_arch = "x86_64") {
        const X32: i64 = 0x4000_0000;
        rules.insert(X32 | libc::SYS_socket, vec![not_unix()?]);
        rules.insert(X32 | libc::SYS_socketpair, vec![not_unix()?]);
        rules.insert(X32 | libc::SYS_io_uring_setup, Vec::new());
    }
    let refuse = SeccompAction::Errno(libc::EACCES as u32);
    SeccompFilter::new(rules, SeccompAction::Allow, refuse, arch)
        .and_then(BpfProgram::try_from)
        .map_err(|e| e.to_string())
}
