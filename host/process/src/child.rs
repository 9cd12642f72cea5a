//! One child process as the service keeps it: its streams, its exit, its kill.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;

pub use crate::exit::Exit;
use crate::input::{Input, InputError};
use crate::render::{SpillRef, render_read};
use crate::stream::StreamBuf;
use crate::terminal::render_terminal;
use taskhost_common::wording;
use taskhost_registry::{TaskOutcome, TerminalStatus};

/// The output and status of a settled process.
pub(crate) struct Streams {
    pub(crate) out: StreamBuf,
    pub(crate) err: StreamBuf,
}

impl Streams {
    /// Standard output's stream, or standard error's.
    pub(crate) fn side(&mut self, stdout: bool) -> &mut StreamBuf {
        if stdout { &mut self.out } else { &mut self.err }
    }
}

/// One child process (or the record of one that failed to spawn).
pub struct Process {
    pub(crate) pgid: Option<i32>,
    pub(crate) streams: Mutex<Streams>,
    pub(crate) exit: watch::Sender<Option<Exit>>,
    pub(crate) kill_requested: AtomicBool,
    pub(crate) grace: Duration,
    pub(crate) runtime: Handle,
    /// The terminal's input, for a process run under one (`None`: stdin is closed or a protocol pipe).
    pub(crate) input: Option<Input>,
    /// Bumped each time output arrives, for waits on output.
    pub(crate) arrived: watch::Sender<u64>,
    /// What a keeper would hold of this process for a handover, until it is asked to.
    pub(crate) hold: Mutex<Option<(crate::keeper::Hold, Vec<std::os::fd::OwnedFd>)>>,
    /// The name the keeper holds it under, once asked (another name later goes as a rename).
    pub(crate) held_as: Mutex<Option<crate::keeper::HeldAs>>,
    /// Told where the reads stand each time a read moves them.
    reads: Mutex<Option<ReadsMoved>>,
    /// The bound that ended it (`memory limit 256 MiB`), once it settled.
    pub(crate) ended_by: Mutex<Option<String>>,
}

/// A callback told where the reads of stdout and stderr stand, and where they stood when it was
/// last told.
struct ReadsMoved {
    told: [u64; 2],
    tell: Box<dyn Fn(u64, u64) + Send + Sync>,
}

/// Sends `signal` to a whole process group; false if none of it is left.
pub(crate) fn signal_group(pgid: i32, signal: nix::sys::signal::Signal) -> bool {
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal).is_ok()
}

/// Ends process group `pgid` (SIGKILL): a task that cannot be served.
pub fn end_group(pgid: i32) {
    signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
}

/// The name of a signal, as status lines show it (`SIGTERM`).
pub fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned())
}

impl Process {
    /// The pid of the process group's leader (the task's own process), `None` for a process that
    /// failed to spawn.
    pub fn pgid(&self) -> Option<i32> {
        self.pgid
    }

    pub(crate) fn new(
        pgid: Option<i32>,
        streams: Streams,
        exit: watch::Sender<Option<Exit>>,
        grace: Duration,
        runtime: &Handle,
        input: Option<Input>,
    ) -> Arc<Self> {
        Arc::new(Self {
            pgid,
            streams: Mutex::new(streams),
            exit,
            kill_requested: AtomicBool::new(false),
            grace,
            runtime: runtime.clone(),
            input,
            arrived: watch::Sender::new(0),
            hold: Mutex::new(None),
            held_as: Mutex::new(None),
            reads: Mutex::new(None),
            ended_by: Mutex::new(None),
        })
    }

    /// Calls `tell` with where the reads of stdout and stderr stand each time a read moves them
    /// (before the read is answered: a durable record of it keeps a successor from repeating it).
    pub fn on_reads(&self, tell: impl Fn(u64, u64) + Send + Sync + 'static) {
        let told = {
            let s = self.streams.lock();
            [s.out.cursor(), s.err.cursor()]
        };
        *self.reads.lock() = Some(ReadsMoved {
            told,
            tell: Box::new(tell),
        });
    }

    fn reads_moved(&self, now: [u64; 2]) {
        let mut reads = self.reads.lock();
        if let Some(r) = reads.as_mut()
            && r.told != now
        {
            r.told = now;
            (r.tell)(now[0], now[1]);
        }
    }

    /// True for a process run under a pseudo-terminal: it takes input, and its output is shown as
    /// the terminal draws it.
    pub fn takes_input(&self) -> bool {
        self.input.is_some()
    }

    /// Types `text` into the process's terminal (`\u{3}` interrupts, `\u{4}` ends the input at the
    /// start of a line), then, with `eof`, the terminal's end-of-file character. Blocks the calling
    /// thread (never one of the runtime's) until the terminal took every byte, for at most a few
    /// seconds.
    ///
    /// # Errors
    /// [`InputError`]: no terminal, the process ended, or it stopped reading its input.
    pub fn write_input(&self, text: &[u8], eof: bool) -> Result<(), InputError> {
        let input = self.input.as_ref().ok_or(InputError::NoTerminal)?;
        if self.exit.borrow().is_some() {
            return Err(InputError::Ended);
        }
        let mut bytes = text.to_vec();
        if eof {
            bytes.push(0x04);
        }
        input.write(&self.runtime, bytes)
    }

    /// Requests termination: SIGTERM to the group now, SIGKILL after the grace if anything of the group
    /// is left (even if the leader already exited). Returns false if the process had already exited.
    pub fn kill(self: &Arc<Self>) -> bool {
        if self.exit.borrow().is_some() {
            return false;
        }
        let first = !self.kill_requested.swap(true, Ordering::SeqCst);
        let Some(pgid) = self.pgid else { return false };
        signal_group(pgid, nix::sys::signal::Signal::SIGTERM);
        if first {
            let grace = self.grace;
            self.runtime.spawn(async move {
                tokio::time::sleep(grace).await;
                signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
            });
        }
        true
    }

    /// The output since the previous read, rendered (stdout, then `[stderr]` and stderr; a notice when
    /// output was dropped from memory).
    pub fn read(&self) -> String {
        // Rendered once the streams are unlocked: the pump goes on filling them meanwhile.
        let (out, err, spills, cursors, note) = {
            let mut s = self.streams.lock();
            let (out, err) = (s.out.read(), s.err.read());
            let cursors = [s.out.cursor(), s.err.cursor()];
            let note = gap_note(&s).or_else(|| more_note(&out, &err));
            (out, err, spill_refs(&s), cursors, note)
        };
        self.reads_moved(cursors);
        with_note(
            render_read(&out.bytes, &err.bytes, out.lossy || err.lossy, &spills),
            note,
        )
    }

    /// The output since the previous read as text, stdout and stderr apart (for a command whose
    /// answer is its stdout).
    pub fn read_streams(&self) -> (String, String) {
        let (out, err, cursors) = {
            let mut s = self.streams.lock();
            let (out, err) = (s.out.read(), s.err.read());
            (out, err, [s.out.cursor(), s.err.cursor()])
        };
        self.reads_moved(cursors);
        (render_terminal(&out.bytes), render_terminal(&err.bytes))
    }

    /// A watch of the output as it grows, from what is unread now, for a wait on output.
    pub fn output_watch(self: &Arc<Self>) -> ProcessWatch {
        let s = self.streams.lock();
        ProcessWatch {
            arrived: self.arrived.subscribe(),
            process: self.clone(),
            streams: [
                WatchedStream::new(s.out.cursor()),
                WatchedStream::new(s.err.cursor()),
            ],
        }
    }

    /// The files the process's stdout and stderr were planned to (kept output, or spills), whether
    /// or not anything was written yet.
    pub fn output_files(&self) -> [Option<std::path::PathBuf>; 2] {
        let s = self.streams.lock();
        [s.out.planned_path(), s.err.planned_path()]
    }

    /// The spill files the process's streams made (that still exist as far as they know).
    pub(crate) fn spill_paths(&self) -> Vec<std::path::PathBuf> {
        let s = self.streams.lock();
        [&s.out, &s.err]
            .into_iter()
            .filter_map(|b| b.spill_file().map(|f| f.path.clone()))
            .collect()
    }

    /// What [`Process::read`] would return now, left unread.
    pub fn peek(&self) -> String {
        let (out, err, spills, note) = {
            let mut s = self.streams.lock();
            s.out.sync_kept();
            s.err.sync_kept();
            let (out, err) = (s.out.peek(), s.err.peek());
            let note = gap_note(&s).or_else(|| more_note(&out, &err));
            (out, err, spill_refs(&s), note)
        };
        with_note(
            render_read(&out.bytes, &err.bytes, out.lossy || err.lossy, &spills),
            note,
        )
    }

    /// How far the process has got, without consuming anything: the bytes it wrote so far (both
    /// streams) and its latest non-empty output line (stdout's, else stderr's), for progress reports.
    pub fn progress(&self) -> (u64, String) {
        let s = self.streams.lock();
        let last_line = |b: &StreamBuf| {
            render_terminal(&b.peek_tail(512))
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_owned)
        };
        let line = last_line(&s.out).or_else(|| last_line(&s.err));
        (s.out.total() + s.err.total(), line.unwrap_or_default())
    }

    /// The last `max` bytes of stderr (lossy UTF-8), without consuming them: for diagnostics.
    pub fn stderr_tail(&self, max: usize) -> String {
        render_terminal(&self.streams.lock().err.peek_tail(max))
            .trim()
            .to_owned()
    }

    /// Waits for the process to settle (exited and its output drained).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves the process as it is.
    pub async fn wait(&self) -> Exit {
        let mut rx = self.exit.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or(Exit::Unknown),
            Err(_) => Exit::Unknown,
        }
    }

    /// The bound that ended it (`memory limit 256 MiB`), once it settled, when one did.
    pub fn ended_by_bound(&self) -> Option<String> {
        self.ended_by.lock().clone()
    }

    /// The registry outcome of a settled process: an exit code is `completed` (a kill that raced a
    /// normal exit is `killed before exit`), a signal is `killed`; one a bound ended is `killed`
    /// with the bound as its detail.
    pub fn outcome(&self, exit: &Exit) -> TaskOutcome {
        let killed = self.kill_requested.load(Ordering::SeqCst);
        let bound = self.ended_by.lock().clone().filter(|_| !killed);
        let outcome = match exit {
            _ if bound.is_some() => TaskOutcome::killed().with_detail(bound.unwrap_or_default()),
            Exit::Code(c) if !killed => {
                TaskOutcome::completed().with_detail(wording::exit_detail(*c))
            }
            Exit::Signal(s) => {
                TaskOutcome::killed().with_detail(wording::signal_detail(&signal_name(*s)))
            }
            _ => TaskOutcome::new(TerminalStatus::Killed).with_detail("killed before exit"),
        };
        let not_kept = {
            let s = self.streams.lock();
            s.out.not_kept() + s.err.not_kept()
        };
        if not_kept == 0 {
            return outcome;
        }
        let detail = outcome.detail.clone().unwrap_or_default();
        outcome.with_detail(format!(
            "{detail}; {not_kept} bytes of its output were not kept (the disk refused them)"
        ))
    }
}

/// While a stream's kept file misses output (its disk refuses writes), the line that says so.
fn gap_note(s: &Streams) -> Option<String> {
    s.out.gap_note().or_else(|| s.err.gap_note())
}

/// After a read that left part of a handed-over task's kept output for the next one, the line
/// that says so.
fn more_note(out: &crate::stream::StreamRead, err: &crate::stream::StreamRead) -> Option<String> {
    let more = out.more + err.more;
    (more > 0).then(|| wording::more_kept_output(more))
}

/// `text`, then `note` on a line of its own.
fn with_note(mut text: String, note: Option<String>) -> String {
    if let Some(note) = note {
        text.push_str(wording::line_break(&text));
        text.push_str(&note);
    }
    text
}

/// The spill files a read names, as the streams stand.
fn spill_refs(s: &Streams) -> Vec<SpillRef> {
    [s.out.spill_file(), s.err.spill_file()]
        .into_iter()
        .flatten()
        .map(|f| SpillRef {
            path: f.path.clone(),
            head_and_tail: f.head_and_tail,
        })
        .collect()
}

/// The longest unfinished line a watch carries into its next look.
const CARRY_MAX: usize = 64 * 1024;

/// Where a watch stands in one stream.
struct WatchedStream {
    position: u64,
    /// The unfinished last line of the previous look, raw.
    carry: Vec<u8>,
}

impl WatchedStream {
    fn new(position: u64) -> Self {
        Self {
            position,
            carry: Vec::new(),
        }
    }

    /// The unfinished line and what arrived since, as a read shows it; keeps the new unfinished line.
    fn fresh(&mut self, buf: &StreamBuf) -> Option<String> {
        let (new, end) = buf.since(self.position);
        self.position = end;
        if new.is_empty() {
            return None;
        }
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(&new);
        let text = render_terminal(&bytes);
        let line_start = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let keep = line_start.max(bytes.len().saturating_sub(CARRY_MAX));
        self.carry = bytes.split_off(keep);
        Some(text)
    }
}

/// A process's output as it grows ([`taskhost_registry::OutputWatch`]): each look renders only what
/// arrived since the previous one (with each stream's unfinished last line), and waiting is woken by
/// the output pump.
pub struct ProcessWatch {
    process: Arc<Process>,
    arrived: watch::Receiver<u64>,
    streams: [WatchedStream; 2],
}

impl taskhost_registry::OutputWatch for ProcessWatch {
    fn fresh(&mut self) -> Vec<String> {
        self.arrived.mark_unchanged();
        let s = self.process.streams.lock();
        let [out, err] = &mut self.streams;
        [out.fresh(&s.out), err.fresh(&s.err)]
            .into_iter()
            .flatten()
            .collect()
    }

    fn changed(&mut self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if self.arrived.changed().await.is_err() {
                // The process is gone with its pumps: nothing more arrives.
                std::future::pending::<()>().await;
            }
        })
    }
}

/// The process a wait reaped and how it ended, for a status that is an end (an exit or a signal).
pub(crate) fn reaped(status: nix::sys::wait::WaitStatus) -> Option<(i32, Exit)> {
    use nix::sys::wait::WaitStatus;
    match status {
        WaitStatus::Exited(pid, code) => Some((pid.as_raw(), Exit::Code(code))),
        WaitStatus::Signaled(pid, signal, _) => Some((pid.as_raw(), Exit::Signal(signal as i32))),
        _ => None,
    }
}
