//! The keeper: a small process the host starts so that no task process outlives the host, however
//! the host ends (SIGKILL, an OOM kill or a crash included).
//!
//! The host tells the keeper, over a pipe that only the host holds open, every process group it
//! spawns (`+<pgid>`) and every group that is gone (`-<pgid>`). When the pipe closes (the host is
//! gone, however it ended) the keeper SIGKILLs every group still registered and every process whose
//! environment carries the host's marker (`TASKHOST_PROCESS`) (descendants that left their
//! group or session: `setsid` daemons, double forks), in rounds until a round finds nothing or a
//! second has passed, and exits. It needs no privilege: the task processes are the user's own.
//!
//! It runs in its own process group with no terminal signals, its stdout and stderr closed, so
//! neither a terminal's Ctrl-C nor a client waiting for the host's output ever waits for it. A
//! process that both cleared its environment and left its group is not recognised (a cgroup per task
//! would be needed); while the host lives, the binary ends such processes at exit.

use parking_lot::Mutex;
use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::escaped::MARKER;

/// The host's end of the keeper: the pipe and the process.
pub struct Keeper {
    pipe: Mutex<Option<ChildStdin>>,
    child: Mutex<Option<Child>>,
}

impl Keeper {
    /// Starts `program keeper --marker <marker_prefix>` (the `taskhost` binary's keeper command),
    /// which ends the processes whose marker starts with `marker_prefix`.
    ///
    /// # Errors
    /// When the program cannot be spawned.
    pub fn start(program: &Path, marker_prefix: &str) -> std::io::Result<Self> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(program)
            .args(["keeper", "--marker", marker_prefix])
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let pipe = child.stdin.take();
        Ok(Self {
            pipe: Mutex::new(pipe),
            child: Mutex::new(Some(child)),
        })
    }

    /// The keeper's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.lock().as_ref().map(Child::id)
    }

    /// Registers a spawned process group.
    pub fn group_started(&self, pgid: i32) {
        self.send(&format!("+{pgid}\n"));
    }

    /// Unregisters a process group that is gone (so a later process reusing the number is safe).
    pub fn group_ended(&self, pgid: i32) {
        self.send(&format!("-{pgid}\n"));
    }

    fn send(&self, line: &str) {
        let mut pipe = self.pipe.lock();
        if let Some(p) = pipe.as_mut()
            && let Err(e) = p.write_all(line.as_bytes())
        {
            tracing::error!(error = %e, "the keeper is gone: task processes may outlive a crash of the host");
            *pipe = None;
        }
    }

    /// Closes the pipe (the keeper ends what is left, normally nothing) and reaps the keeper, waiting
    /// up to two seconds.
    pub fn stop(&self) {
        self.pipe.lock().take();
        let child = self.child.lock().take();
        if let Some(mut child) = child {
            let deadline = Instant::now() + Duration::from_secs(2);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The keeper's side: reads registrations from `input` until it closes, then ends every registered
/// group and every process whose marker starts with `marker_prefix`. Returns how many signals it sent.
pub fn run(input: impl BufRead, marker_prefix: &str) -> usize {
    let mut groups = HashSet::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let (sign, number) = line.split_at(line.len().min(1));
        match (sign, number.parse::<i32>()) {
            ("+", Ok(g)) if g > 1 => {
                groups.insert(g);
            }
            ("-", Ok(g)) => {
                groups.remove(&g);
            }
            _ => {}
        }
    }
    end_everything(&groups, marker_prefix, Duration::from_secs(1))
}

/// SIGKILLs the groups and the marked processes, in rounds, until a round finds nothing alive or
/// `within` has passed.
fn end_everything(groups: &HashSet<i32>, marker_prefix: &str, within: Duration) -> usize {
    let prefix = format!("{MARKER}={marker_prefix}");
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
        for pid in marked(&prefix) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keeper_ends_registered_groups_and_marked_processes_when_its_input_closes() {
        use std::os::unix::process::CommandExt;
        // A group the host registered, and one it unregistered (must be spared).
        let mut grouped = Command::new("sleep")
            .arg("100")
            .process_group(0)
            .spawn()
            .expect("sleep");
        let mut spared = Command::new("sleep")
            .arg("100")
            .process_group(0)
            .spawn()
            .expect("sleep");
        // A marked process in no registered group (a setsid daemon).
        let fake_host = 999_999_999u32;
        let mut marked = Command::new("sleep")
            .arg("100")
            .env(MARKER, format!("{fake_host}:0:1"))
            .process_group(0)
            .spawn()
            .expect("sleep");
        let input = format!(
            "+{}\n+{}\n-{}\ngarbage\n",
            grouped.id(),
            spared.id(),
            spared.id()
        );
        let signals = run(std::io::Cursor::new(input), &format!("{fake_host}:"));
        assert!(signals >= 2, "{signals}");
        for (child, ended) in [
            (&mut grouped, true),
            (&mut marked, true),
            (&mut spared, false),
        ] {
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut status = child.try_wait().expect("try_wait");
            while ended && status.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
                status = child.try_wait().expect("try_wait");
            }
            assert_eq!(status.is_some(), ended, "pid {}", child.id());
        }
        let _ = spared.kill();
        let _ = spared.wait();
    }
}
