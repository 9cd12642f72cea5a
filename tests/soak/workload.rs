//! The load: per session, a streamer keeping fifty tasks producing output and a churner that kills,
//! waits on, lists and leaves unread other tasks, each checking what it reads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::{Fixture, probe_lines};
use crate::ledger::{Ledger, checksum};
use crate::plan::Rng;
use crate::{LINES, STREAMING_PER_SESSION};

/// The MCP session name of soak session `s`.
pub fn session_name(s: usize) -> String {
    format!("soak-{s}")
}

/// A started task a streamer reads until it settles.
struct Stream {
    id: String,
    expected: String,
    status: &'static str,
    got: String,
}

fn bash_stream(s: usize, n: usize) -> (String, String) {
    let command = format!(
        "i=1; while [ $i -le {LINES} ]; do echo \"s{s} t{n} line $i of {LINES}\"; \
         [ $((i % 30)) -eq 0 ] && sleep 0.04; i=$((i+1)); done"
    );
    let expected = (1..=LINES)
        .map(|i| format!("s{s} t{n} line {i} of {LINES}\n"))
        .collect();
    (command, expected)
}

pub struct Soak<'a> {
    pub f: &'a Fixture,
    pub ledger: &'a Ledger,
    pub storming: &'a AtomicBool,
}

impl Soak<'_> {
    pub fn call(&self, tool: &str, s: usize, args: serde_json::Value) -> String {
        self.f.call(tool, &session_name(s), args)
    }

    pub fn bash(&self, s: usize, command: &str) -> Option<String> {
        let args = json!({"command": command, "run_in_background": true});
        self.started(s, "bash", args, &format!("bash `{command}`"))
    }

    pub fn subagent(&self, s: usize, prompt: &str) -> Option<String> {
        let args = json!({"description": "soak", "prompt": prompt, "run_in_background": true});
        self.started(s, "subagent", args, "subagent")
    }

    pub fn probe(&self, s: usize, lines: u64) -> Option<String> {
        let args = json!({"lines": lines, "interval_ms": 5});
        self.started(s, "probe_start", args, "probe")
    }

    /// Calls `tool` to start a task: the task it reports, recorded as session `s`'s; a failure
    /// when it started none.
    fn started(&self, s: usize, tool: &str, args: serde_json::Value, what: &str) -> Option<String> {
        match self.f.start(tool, &session_name(s), args) {
            Ok(id) => {
                self.ledger.started(s, &id);
                Some(id)
            }
            Err(text) => {
                self.ledger.fail(format!("{what} did not start: {text}"));
                None
            }
        }
    }

    pub fn wait(&self, s: usize, id: &str) -> String {
        self.call(
            "task_output",
            s,
            json!({"task_id": id, "wait": true, "timeout_ms": 30000}),
        )
    }

    pub fn expect(&self, what: &str, got: &str, expected: &str) {
        if got != expected {
            self.ledger
                .fail(format!("{what}: expected {expected:?}, got {got:?}"));
        }
    }

    /// Keeps fifty tasks of session `s` streaming while the storm lasts, reading each without
    /// waiting, and checks each one's whole output once it settles.
    pub fn stream(&self, s: usize) {
        let mut pool: Vec<Stream> = Vec::new();
        let mut n = 0;
        loop {
            let storming = self.storming.load(Ordering::SeqCst);
            while storming && pool.len() < STREAMING_PER_SESSION {
                n += 1;
                let started = match n % 20 {
                    0 => self
                        .subagent(s, &format!("echo: s{s} |sub {n}"))
                        .map(|id| Stream {
                            id,
                            expected: format!("s{s} sub {n}"),
                            status: "[status: completed]",
                            got: String::new(),
                        }),
                    5 | 15 => self.probe(s, 40).map(|id| Stream {
                        id,
                        expected: probe_lines(40),
                        status: "[status: completed, exit code: 0]",
                        got: String::new(),
                    }),
                    _ => {
                        let (command, expected) = bash_stream(s, n);
                        self.bash(s, &command).map(|id| Stream {
                            id,
                            expected,
                            status: "[status: completed, exit code: 0]",
                            got: String::new(),
                        })
                    }
                };
                pool.extend(started);
            }
            if pool.is_empty() && !storming {
                return;
            }
            pool.retain_mut(|t| {
                let text = self.call("task_output", s, json!({"task_id": t.id}));
                let Some(i) = text.rfind("[status: ") else {
                    self.ledger.fail(format!("read of {}: {text}", t.id));
                    return false;
                };
                let (body, status) = text.split_at(i);
                if body != "(no new output)\n" {
                    t.got.push_str(body.strip_suffix('\n').unwrap_or(body));
                    t.got.push('\n');
                }
                if status == "[status: running]" {
                    return true;
                }
                let got = t.got.strip_suffix('\n').unwrap_or(&t.got);
                let expected = t.expected.strip_suffix('\n').unwrap_or(&t.expected);
                if status != t.status || got != expected {
                    self.ledger.fail(format!(
                        "{} ended {status:?} with {} bytes (checksum {:x}), expected {:?} with {} bytes (checksum {:x})",
                        t.id,
                        got.len(),
                        checksum(got),
                        t.status,
                        expected.len(),
                        checksum(expected)
                    ));
                }
                false
            });
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A conversation with a task under a terminal while plugins reload: lines typed one by one at
    /// random intervals are each answered, and the end of input ends it.
    fn converse(&self, s: usize, n: usize, rng: &mut Rng) {
        let args = json!({"command": "while read -r l; do echo \"got $l\"; done", "run_in_background": true, "tty": true});
        let Some(id) = self.started(s, "bash", args, "tty bash") else {
            return;
        };
        let mut seen = String::new();
        for i in 0..4 {
            let line = format!("s{s} c{n} l{i}");
            let sent = self.call(
                "task_input",
                s,
                json!({"task_id": id, "text": format!("{line}\n")}),
            );
            self.expect(
                "input",
                &sent,
                &format!("sent {} bytes to task {id}", line.len() + 1),
            );
            let read = self.call(
                "task_output",
                s,
                json!({"task_id": id, "wait_for": format!("got {line}"), "timeout_ms": 30000}),
            );
            seen.push_str(&read);
            if !read.contains(&format!("got {line}")) {
                self.ledger
                    .fail(format!("{id} did not answer {line:?}: {read:?}"));
            }
            std::thread::sleep(Duration::from_millis(rng.below(40)));
        }
        self.call(
            "task_input",
            s,
            json!({"task_id": id, "text": "", "eof": true}),
        );
        let end = self.wait(s, &id);
        if !end.ends_with("[status: completed, exit code: 0]") {
            self.ledger
                .fail(format!("{id} ended {end:?} after {seen:?}"));
        }
    }

    /// While the storm lasts, session `s` kills, waits on, lists and leaves unread other tasks.
    pub fn churn(&self, s: usize, mut rng: Rng) {
        let mut n = 0;
        while self.storming.load(Ordering::SeqCst) {
            n += 1;
            match rng.below(6) {
                0 => {
                    let Some(id) = self.bash(s, "sleep 30") else {
                        continue;
                    };
                    std::thread::sleep(Duration::from_millis(rng.below(30)));
                    let kill = self.call("task_kill", s, json!({"task_id": id}));
                    self.expect(
                        "kill",
                        &kill,
                        &format!("requested cancellation of task {id}"),
                    );
                    let read = self.wait(s, &id);
                    self.expect(
                        "killed read",
                        &read,
                        "(no new output)\n[status: killed, signal: SIGTERM]",
                    );
                }
                1 => {
                    let Some(id) = self.bash(s, &format!("echo w{n}; sleep 0.0{}", rng.below(10)))
                    else {
                        continue;
                    };
                    let read = self.wait(s, &id);
                    self.expect(
                        "waited read",
                        &read,
                        &format!("w{n}\n[status: completed, exit code: 0]"),
                    );
                }
                2 => {
                    let list = self.call("task_list", s, json!({}));
                    for line in list.lines().filter(|l| !l.is_empty()) {
                        let id = line.split_whitespace().next().unwrap_or_default();
                        if self.ledger.owner_of(id).is_some_and(|o| o != s) {
                            self.ledger
                                .fail(format!("session {s} listed {id} of another session"));
                        }
                    }
                }
                3 => {
                    if let Some(id) = self.bash(s, &format!("echo u{n}")) {
                        self.ledger.unread.lock().unwrap().push((
                            s,
                            id,
                            format!("u{n}\n[status: completed, exit code: 0]"),
                        ));
                    }
                }
                4 => self.converse(s, n, &mut rng),
                _ => {
                    let Some(id) = self.subagent(s, "wait") else {
                        continue;
                    };
                    std::thread::sleep(Duration::from_millis(rng.below(50)));
                    self.call("task_kill", s, json!({"task_id": id}));
                    let read = self.wait(s, &id);
                    self.expect(
                        "killed subagent read",
                        &read,
                        "(no new output)\n[status: killed]",
                    );
                }
            }
        }
    }
}
