//! How the keeper ends what its host leaves: every group, then every marked process, in rounds.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::escaped::MARKER;

/// SIGKILLs the groups and the marked processes, in rounds, until a round finds nothing alive or
/// `within` has passed.
pub(crate) fn end_everything(
    groups: &HashSet<i32>,
    marker_prefixes: &[String],
    within: Duration,
) -> usize {
    let prefixes: Vec<String> = marker_prefixes
        .iter()
        .map(|p| format!("{MARKER}={p}"))
        .collect();
    let own = std::process::id() as i32;
    let deadline = Instant::now() + within;
    let mut signals = 0;
    loop {
        let mut found = false;
        for &g in groups {
            if killpg(Pid::from_raw(g), Signal::SIGKILL).is_ok() {
                found = true;
                signals += 1;
            }
        }
        for pid in prefixes.iter().flat_map(|p| marked(p)) {
            if pid != own && kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                found = true;
                signals += 1;
            }
        }
        if !found || Instant::now() >= deadline {
            return signals;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Live (not zombie) processes whose environment holds a variable starting with `prefix`.
fn marked(prefix: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|var| var.starts_with(prefix.as_bytes()))
            }) && !is_zombie(*pid)
        })
        .collect()
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            == Some("Z")
    })
}
