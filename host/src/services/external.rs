//! External tasks: work that runs elsewhere (a cluster's job), started, followed and stopped by the
//! host with the commands a plugin gave it (`HostApi::start_external_task`). The host follows the
//! work's output file as it grows and polls its state on its own runtime, so no plugin code runs
//! while the work does and a reload of the plugin never touches it.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use taskhost_registry::{ProducerError, TaskHooks, TaskOutcome};

use super::declare::TaskDeclaration;
use super::handles::Services;
use crate::process::{ProcessService, ProcessSpec};

/// How long one start, poll or cancel command may run.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// Unread output kept in memory; past it the oldest is dropped (the file keeps all of it).
const UNREAD_MAX: usize = 1 << 20;

/// An external task's commands, its id substituted.
#[derive(Clone, Debug)]
pub struct External {
    /// Starts the work; its last line of output is the work's id.
    pub start: String,
    /// Prints the work's state (`{id}` substituted).
    pub poll: String,
    /// Stops the work (`{id}` substituted).
    pub cancel: String,
    /// The work's output file (`{id}` substituted).
    pub output: String,
    /// How often the state is polled.
    pub poll_every: Duration,
}

/// Runs `command` (bash) for `session` to its end; its stdout, or why it failed.
pub(crate) async fn run_command(
    processes: &ProcessService,
    session: &str,
    command: &str,
) -> Result<String, String> {
    let process = processes
        .spawn(&ProcessSpec::new(command), session)
        .map_err(|e| e.to_string())?;
    let exit = match tokio::time::timeout(COMMAND_LIMIT, process.wait()).await {
        Ok(exit) => exit,
        Err(_) => {
            process.kill();
            process.wait().await;
            return Err(format!("{command:?} did not end within {COMMAND_LIMIT:?}"));
        }
    };
    let (out, err) = process.read_streams();
    match exit {
        crate::process::Exit::Code(0) => Ok(out),
        crate::process::Exit::Code(c) => Err(format!("{} (exit code {c})", err.trim())),
        other => Err(format!("{} ({other:?})", err.trim())),
    }
}

/// The work's id as the start command printed it: its last non-empty line, which must be safe to put
/// into a shell command.
fn work_id(stdout: &str) -> Result<String, String> {
    let id = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default();
    let safe = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if safe {
        Ok(id.to_owned())
    } else {
        Err(format!(
            "the start command printed no usable id (letters, digits, '.', '_', '-'): {:?}",
            taskhost_registry::excerpt(stdout.trim())
        ))
    }
}

/// What a poll answered.
fn parse_state(line: &str) -> Option<TaskOutcome> {
    let line = line.trim();
    let (word, detail) = line.split_once(' ').unwrap_or((line, ""));
    let with = |o: TaskOutcome| {
        if detail.is_empty() {
            o
        } else {
            o.with_detail(detail)
        }
    };
    match word {
        "completed" => Some(with(TaskOutcome::completed())),
        "killed" => Some(with(TaskOutcome::killed())),
        "failed" => Some(with(TaskOutcome::failed(detail))),
        _ => None,
    }
}

/// The output file followed from where the last look stopped.
struct Follow {
    path: PathBuf,
    offset: u64,
    unread: String,
    dropped: bool,
    /// The file was refused (a link, another user's): said once in the output.
    refused: bool,
}

impl Follow {
    /// Appends what the file gained since the last look.
    fn catch_up(&mut self) {
        let mut file = match taskhost_abi::sdk::open_own_file(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return, // not written yet
            Err(e) => {
                if !self.refused {
                    self.refused = true;
                    tracing::warn!(error = %e, "not following an output file");
                    self.unread.push_str(&format!("[output not read: {e}]\n"));
                }
                return;
            }
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut fresh = Vec::new();
        if let Ok(n) = file.by_ref().take(8 << 20).read_to_end(&mut fresh) {
            self.offset += n as u64;
            self.unread
                .push_str(&crate::process::render_terminal(&fresh));
        }
        if self.unread.len() > UNREAD_MAX {
            let mut cut = self.unread.len() - UNREAD_MAX;
            while !self.unread.is_char_boundary(cut) {
                cut += 1;
            }
            self.unread.drain(..cut);
            self.dropped = true;
        }
    }

    fn rendered(&self) -> String {
        if self.dropped {
            format!(
                "{}{}[some output was dropped from memory; full output: {}]",
                self.unread,
                if self.unread.ends_with('\n') || self.unread.is_empty() {
                    ""
                } else {
                    "\n"
                },
                self.path.display()
            )
        } else {
            self.unread.clone()
        }
    }

    fn take(&mut self) -> String {
        let text = self.rendered();
        self.unread.clear();
        self.dropped = false;
        text
    }
}

impl Services {
    /// Starts the external work `external` describes as the task `decl` declares; returns the task's
    /// id and the work's own id (the start command's answer). Must not be called on the runtime's
    /// threads (the start command runs to its end first).
    ///
    /// # Errors
    /// As [`Services::declare`], or the start command failed or printed no usable id.
    pub fn start_external(
        &self,
        decl: &TaskDeclaration,
        external: External,
    ) -> Result<(String, String), String> {
        let session = decl.session_key();
        let (processes, runtime) = (self.processes.clone(), self.runtime.clone());
        let work_id = Arc::new(Mutex::new(String::new()));
        let started_id = work_id.clone();
        let task_id = self.declare(decl, move || {
            let (id, hooks) = start(&processes, &runtime, &session, external)?;
            *started_id.lock() = id;
            Ok(hooks)
        })?;
        let work_id = work_id.lock().clone();
        Ok((task_id, work_id))
    }
}

/// Starts the work (runs its start command, blocking the calling thread, never one of the runtime's)
/// and returns its id and the registry hooks that follow it.
///
/// # Errors
/// The start command's failure or unusable output.
fn start(
    processes: &Arc<ProcessService>,
    runtime: &tokio::runtime::Handle,
    session: &str,
    external: External,
) -> Result<(String, TaskHooks), ProducerError> {
    let out = runtime
        .block_on(run_command(processes, session, &external.start))
        .map_err(|e| ProducerError(format!("the start command failed: {e}")))?;
    let id = work_id(&out).map_err(ProducerError)?;
    let with_id = |s: &str| s.replace("{id}", &id);
    let (poll, cancel) = (with_id(&external.poll), with_id(&external.cancel));
    let follow = Arc::new(Mutex::new(Follow {
        path: PathBuf::from(with_id(&external.output)),
        offset: 0,
        unread: String::new(),
        dropped: false,
        refused: false,
    }));
    let (processes_done, session_done) = (processes.clone(), session.to_owned());
    let every = external.poll_every.max(Duration::from_millis(50));
    // The output file is read only by reads: the registry's drain at settlement is one, so what the
    // work wrote last is in the task's output.
    let done = async move {
        loop {
            tokio::time::sleep(every).await;
            match run_command(&processes_done, &session_done, &poll).await {
                Ok(answer) => {
                    let first = answer.lines().next().unwrap_or_default();
                    if let Some(outcome) = parse_state(first) {
                        return Ok(outcome);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "an external task's poll failed; polling on"),
            }
        }
    };
    let (processes_cancel, session_cancel, handle) =
        (processes.clone(), session.to_owned(), runtime.clone());
    let cancel = move |_reason: Option<&str>| {
        let (processes, session, cancel) = (
            processes_cancel.clone(),
            session_cancel.clone(),
            cancel.clone(),
        );
        handle.spawn(async move {
            if let Err(e) = run_command(&processes, &session, &cancel).await {
                tracing::warn!(error = %e, "an external task's cancel command failed");
            }
        });
        Ok(())
    };
    let (read, peek) = (follow.clone(), follow);
    let hooks = TaskHooks::new(done, cancel)
        .with_reader(move || {
            let mut f = read.lock();
            f.catch_up();
            f.take()
        })
        .with_peeker(move || {
            let mut f = peek.lock();
            f.catch_up();
            f.rendered()
        });
    Ok((id, hooks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_the_last_line_and_must_be_shell_safe() {
        assert_eq!(work_id("Submitted\n1234\n\n"), Ok("1234".to_owned()));
        assert!(work_id("").is_err());
        assert!(work_id("12; rm -rf /").is_err());
    }

    #[test]
    fn a_poll_line_maps_to_an_outcome_or_to_still_running() {
        assert_eq!(parse_state("running"), None);
        assert_eq!(parse_state("PENDING"), None);
        let done = parse_state("completed exit code: 0").unwrap();
        assert_eq!(done.detail.as_deref(), Some("exit code: 0"));
        let failed = parse_state("failed TIMEOUT, exit code: 0, signal: 15").unwrap();
        assert_eq!(failed.status, taskhost_registry::TerminalStatus::Failed);
        assert_eq!(
            failed.detail.as_deref(),
            Some("TIMEOUT, exit code: 0, signal: 15")
        );
        assert_eq!(
            parse_state("killed").unwrap().status,
            taskhost_registry::TerminalStatus::Killed
        );
    }
}
