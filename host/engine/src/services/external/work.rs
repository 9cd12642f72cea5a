//! One piece of external work once started: its id, its output file followed, its state polled, and
//! its cancel command.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use taskhost_registry::{TaskHooks, TaskOutcome};
use tokio::runtime::Handle;

use super::commands::{parse_state, run_command, work_id};
use super::follow::Follow;
use crate::process::ProcessService;

/// An external task's commands; `{id}` in `poll`, `cancel` and `output` stands for the work's id.
#[derive(Clone, Debug)]
pub struct External {
    /// Starts the work; its last line of output is the work's id.
    pub start: String,
    /// Prints the work's state.
    pub poll: String,
    /// Stops the work.
    pub cancel: String,
    /// The work's output file.
    pub output: String,
    /// How often the state is polled.
    pub poll_every: Duration,
}

/// Told where the reads of the work's output stand after each read (bytes of its file consumed).
pub type ReadMark = Arc<std::sync::OnceLock<Box<dyn Fn(u64) + Send + Sync>>>;

/// Started external work. Cheap to clone; every clone follows the same output.
#[derive(Clone)]
pub struct ExternalWork {
    /// The work's id, as the start command printed it.
    pub id: String,
    poll: String,
    cancel: String,
    every: Duration,
    session: String,
    processes: Arc<ProcessService>,
    runtime: Handle,
    follow: Arc<Mutex<Follow>>,
    read_mark: ReadMark,
}

impl ExternalWork {
    /// Runs the start command (blocking the calling thread, never one of the runtime's) for
    /// `session`.
    ///
    /// # Errors
    /// The start command's failure or unusable output.
    pub fn start(
        processes: &Arc<ProcessService>,
        runtime: &Handle,
        session: &str,
        external: External,
    ) -> Result<Self, String> {
        let out = runtime
            .block_on(run_command(processes, session, &external.start))
            .map_err(|e| format!("the start command failed: {e}"))?;
        let id = work_id(&out)?;
        let with_id = |s: &str| s.replace("{id}", &id);
        Ok(Self {
            poll: with_id(&external.poll),
            cancel: with_id(&external.cancel),
            every: external.poll_every.max(Duration::from_millis(50)),
            follow: Arc::new(Mutex::new(Follow::new(
                PathBuf::from(with_id(&external.output)),
                0,
            ))),
            session: session.to_owned(),
            processes: processes.clone(),
            runtime: runtime.clone(),
            read_mark: ReadMark::default(),
            id,
        })
    }

    /// Follows work an earlier host started, as its record says, from where its reads stood.
    pub fn resume(
        processes: &Arc<ProcessService>,
        runtime: &Handle,
        session: &str,
        record: &taskhost_store::ExternalRecord,
    ) -> Self {
        Self {
            id: record.work_id.clone(),
            poll: record.poll.clone(),
            cancel: record.cancel.clone(),
            every: Duration::from_millis(record.poll_every_ms).max(Duration::from_millis(50)),
            session: session.to_owned(),
            processes: processes.clone(),
            runtime: runtime.clone(),
            follow: Arc::new(Mutex::new(Follow::new(
                PathBuf::from(&record.output),
                record.read_offset,
            ))),
            read_mark: ReadMark::default(),
        }
    }

    /// How this work is followed, for the records: a later host resumes it from `read_offset`.
    pub fn record(&self, read_offset: u64) -> taskhost_store::ExternalRecord {
        taskhost_store::ExternalRecord {
            work_id: self.id.clone(),
            poll: self.poll.clone(),
            cancel: self.cancel.clone(),
            output: self.follow.lock().path().display().to_string(),
            poll_every_ms: self.every.as_millis() as u64,
            read_offset,
        }
    }

    /// Where each read's end is told (once; later calls are ignored).
    pub fn mark_reads(&self, mark: impl Fn(u64) + Send + Sync + 'static) {
        let _ = self.read_mark.set(Box::new(mark));
    }

    /// Polls the work's state until it ended; its outcome. Cancel safe.
    pub async fn settled(&self) -> TaskOutcome {
        loop {
            tokio::time::sleep(self.every).await;
            match run_command(&self.processes, &self.session, &self.poll).await {
                Ok(answer) => {
                    let first = answer.lines().next().unwrap_or_default();
                    if let Some(outcome) = parse_state(first) {
                        return outcome;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "an external task's poll failed; polling on"),
            }
        }
    }

    /// Runs the cancel command in the background; the work ends when the poll says so.
    pub fn cancel(&self) {
        let (processes, session, cancel) = (
            self.processes.clone(),
            self.session.clone(),
            self.cancel.clone(),
        );
        self.runtime.spawn(async move {
            if let Err(e) = run_command(&processes, &session, &cancel).await {
                tracing::warn!(error = %e, "an external task's cancel command failed");
            }
        });
    }

    /// The output written since the previous read (a read consumes it).
    pub fn read(&self) -> String {
        let mut follow = self.follow.lock();
        follow.catch_up();
        let text = follow.take();
        if !text.is_empty()
            && let Some(mark) = self.read_mark.get()
        {
            mark(follow.offset());
        }
        text
    }

    /// The output a read would return now, left unread.
    pub fn peek(&self) -> String {
        let mut follow = self.follow.lock();
        follow.catch_up();
        follow.rendered()
    }

    /// The registry hooks of the work as a stream task. The output file is read only by reads: the
    /// registry's drain at settlement is one, so what the work wrote last is in the task's output.
    pub fn hooks(self) -> TaskHooks {
        let (done, cancel, read, peek) = (self.clone(), self.clone(), self.clone(), self);
        TaskHooks::new(async move { Ok(done.settled().await) }, move |_reason| {
            cancel.cancel();
            Ok(())
        })
        .with_reader(move || read.read())
        .with_peeker(move || peek.peek())
    }
}
