//! Running a child agent over ACP: spawn it through the process service, `initialize`, `session/new`,
//! send the prompt, collect the agent's message chunks, answer permission requests by policy, and map
//! the stop reason to a task outcome. Cancel is ACP `session/cancel`, then closing stdin, then the
//! process group after the grace.
//!
//! The agent is spawned through the process service with piped stdin and stdout (the same environment
//! policy, plus the variables the subagent plugin's `pass_env` names; its own process group).
//! `initialize` and `session/new` run under a setup timeout. Stop reasons map to outcomes (`end_turn`
//! completed with the last message, `cancelled` killed, `max-tokens`, `refusal` and the rest failed); a
//! crash or garbage fails with the exit code and the tail of stderr. ACP runs in the host, not in the
//! plugin, so async runtimes and signal handlers stay out of plugins.

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, NewSessionRequest, PermissionOptionKind,
    PromptRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use taskhost_registry::{CancellationToken, TaskOutcome};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::process::{Exit, ProcessService, ProcessSpec};

/// How permission requests from the child are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PermissionPolicy {
    /// Reject (pick a reject option, else cancel the request). The default.
    Reject,
    /// Allow once (or always, if that is all that is offered).
    Allow,
}

impl PermissionPolicy {
    fn answer(self, request: &RequestPermissionRequest) -> RequestPermissionResponse {
        let kinds: &[PermissionOptionKind] = match self {
            Self::Allow => &[
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::AllowAlways,
            ],
            Self::Reject => &[
                PermissionOptionKind::RejectOnce,
                PermissionOptionKind::RejectAlways,
            ],
        };
        let choice = kinds.iter().find_map(|k| {
            request
                .options
                .iter()
                .find(|o| o.kind == *k)
                .map(|o| o.option_id.clone())
        });
        RequestPermissionResponse::new(match choice {
            Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
            None => RequestPermissionOutcome::Cancelled,
        })
    }
}

/// One child agent run.
#[derive(Clone, Debug)]
pub struct SubagentRun {
    /// The agent command: program and arguments.
    pub command: Vec<String>,
    /// The session's working directory (the host's when `None`).
    pub cwd: Option<PathBuf>,
    /// The prompt.
    pub prompt: String,
    /// How permission requests are answered.
    pub permission_policy: PermissionPolicy,
    /// How long cancel waits at each step (ACP cancel, closed stdin) before the next.
    pub grace: Duration,
    /// How long `initialize` and `session/new` may take.
    pub setup_timeout: Duration,
    /// Host variables passed to the agent past the environment policy (those the host has).
    pub pass_env: Vec<String>,
    /// The agent's `HOME` (the host's when `None`).
    pub home: Option<PathBuf>,
}

/// The agent's messages: chunks accumulate into the current message; anything else between messages
/// (a tool call, a plan) closes it.
#[derive(Default)]
struct Transcript {
    current: String,
    last: String,
    /// When progress was last reported.
    reported_at: Option<std::time::Instant>,
}

impl Transcript {
    fn update(&mut self, update: &SessionUpdate) {
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                if let ContentBlock::Text(t) = &chunk.content {
                    self.current.push_str(&t.text);
                }
            }
            SessionUpdate::AgentThoughtChunk(_) | SessionUpdate::UserMessageChunk(_) => {}
            _ => {
                if !self.current.is_empty() {
                    self.last = std::mem::take(&mut self.current);
                }
            }
        }
    }

    /// Tells `progress` the message so far, unless it was told less than 100 ms ago.
    fn report(&mut self, progress: &super::call::Progress) {
        let now = std::time::Instant::now();
        if self
            .reported_at
            .is_some_and(|at| now.duration_since(at) < Duration::from_millis(100))
        {
            return;
        }
        let message = self.final_message();
        if let Some(line) = message.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
            self.reported_at = Some(now);
            progress(message.len() as f64, line.to_owned());
        }
    }

    /// The last non-empty message, as the model may read it: escape sequences and control
    /// characters removed (newline and tab kept), as for every task's output.
    fn final_message(&self) -> String {
        let message = if self.current.is_empty() {
            &self.last
        } else {
            &self.current
        };
        crate::process::render_terminal(message.as_bytes())
    }
}

/// How the conversation ended, before the process is accounted for.
enum End {
    Stopped(StopReason),
    Cancelled,
    SetupTimeout(&'static str),
}

/// Runs the child to quiescence and returns the task outcome (never fails: every failure is a
/// `failed` or `killed` outcome with a clear detail). With `progress`, the agent's message so far is
/// reported as it grows (its length and latest line, at most ten times a second).
///
/// # Cancel safety
/// Not cancel safe: dropping the future abandons the conversation without `session/cancel`; the
/// agent's process group is ended when its process settles or its session is disposed. Cancel
/// through `cancel` instead, which runs the whole cancel sequence.
pub async fn run(
    processes: &ProcessService,
    session: &str,
    run: SubagentRun,
    cancel: CancellationToken,
    progress: Option<super::call::Progress>,
) -> TaskOutcome {
    let (process, (stdin, stdout)) = match processes.spawn_piped(&agent_spec(&run), session) {
        Ok(spawned) => spawned,
        Err(e) => return not_started(&run, &e.0),
    };
    let transcript: Arc<Mutex<Transcript>> = Arc::default();
    let seen = transcript.clone();
    let policy = run.permission_policy;
    let (grace, setup_timeout) = (run.grace, run.setup_timeout);
    let cwd = agent_cwd(&run);
    let prompt = run.prompt.clone();
    let token = cancel.clone();
    let cancelled = cancel.clone();
    let conversation = Client
        .v1()
        .name("taskhost-subagent")
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                let mut t = seen.lock();
                t.update(&n.update);
                if let Some(report) = &progress {
                    t.report(report);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                // ACP: once the client sent session/cancel, every permission request is answered
                // `cancelled`, whatever the policy.
                if cancelled.is_cancelled() {
                    return responder.respond(RequestPermissionResponse::new(
                        RequestPermissionOutcome::Cancelled,
                    ));
                }
                responder.respond(policy.answer(&request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(
            ByteStreams::new(stdin.compat_write(), stdout.compat()),
            async move |cx: ConnectionTo<Agent>| {
                converse(cx, setup_timeout, cwd, prompt, token, grace).await
            },
        );
    let result = conversation.await;
    let output = transcript.lock().final_message();
    settle(&process, &run, result, output, cancel.is_cancelled()).await
}

/// The outcome of a run whose agent could not be started, saying `why`.
fn not_started(run: &SubagentRun, why: &str) -> TaskOutcome {
    TaskOutcome::failed(format!(
        "cannot start agent {}: {why}",
        crate::process::excerpt(&run.command.join(" ")),
    ))
}

/// The agent session's working directory: the run's, else the host's, else `/`.
fn agent_cwd(run: &SubagentRun) -> PathBuf {
    run.cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Accounts for the agent's process once its conversation `result` is in: the connection is gone,
/// so stdin is closed; the agent has its grace to exit, then is ended. The task's outcome.
async fn settle(
    process: &Arc<crate::process::Process>,
    run: &SubagentRun,
    result: Result<End, agent_client_protocol::Error>,
    output: String,
    cancelled: bool,
) -> TaskOutcome {
    if tokio::time::timeout(run.grace, process.wait())
        .await
        .is_err()
    {
        process.kill();
    }
    let exit = process.wait().await;
    let ended = Ended {
        result,
        command: shell_words(&run.command),
        exit,
        bound: process.ended_by_bound(),
        stderr: process.stderr_tail(400),
        output,
        setup_timeout: run.setup_timeout,
        cancelled,
    };
    ended.outcome()
}

/// The process spec of an agent run: its command, cwd and grace, and the variables it is passed.
fn agent_spec(run: &SubagentRun) -> ProcessSpec {
    let mut spec = ProcessSpec::new(run.command.join(" "));
    spec.argv = Some(run.command.clone());
    spec.workdir = run.cwd.clone();
    spec.grace = run.grace;
    spec.extra_env = run
        .pass_env
        .iter()
        .filter_map(|name| Some((name.clone(), std::env::var(name).ok()?)))
        .collect();
    if let Some(home) = &run.home {
        spec.extra_env
            .push(("HOME".to_owned(), home.display().to_string()));
    }
    spec
}

/// The conversation over an open connection: `initialize` and `session/new` (each within the setup
/// timeout), then the prompt until its stop reason; a cancel sends `session/cancel` and waits the
/// grace for the agent to stop.
async fn converse(
    cx: ConnectionTo<Agent>,
    setup_timeout: Duration,
    cwd: PathBuf,
    prompt: String,
    token: CancellationToken,
    grace: Duration,
) -> Result<End, agent_client_protocol::Error> {
    let setup = async {
        type Setup = Result<
            Result<agent_client_protocol::v1::schema::SessionId, End>,
            agent_client_protocol::Error,
        >;
        let init = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task();
        match tokio::time::timeout(setup_timeout, init).await {
            Err(_) => return Setup::Ok(Err(End::SetupTimeout("initialize"))),
            Ok(r) => r?,
        };
        let new = cx.send_request(NewSessionRequest::new(cwd)).block_task();
        match tokio::time::timeout(setup_timeout, new).await {
            Err(_) => Setup::Ok(Err(End::SetupTimeout("session/new"))),
            Ok(r) => Setup::Ok(Ok(r?.session_id)),
        }
    };
    let session_id = tokio::select! {
        r = setup => match r? {
            Ok(id) => id,
            Err(end) => return Ok(end),
        },
        () = token.cancelled() => return Ok(End::Cancelled),
    };
    let prompt = cx
        .send_request(PromptRequest::new(
            session_id.clone(),
            vec![ContentBlock::Text(TextContent::new(prompt))],
        ))
        .block_task();
    tokio::pin!(prompt);
    tokio::select! {
        r = &mut prompt => Ok(End::Stopped(r?.stop_reason)),
        () = token.cancelled() => {
            cx.send_notification(CancelNotification::new(session_id))?;
            match tokio::time::timeout(grace, &mut prompt).await {
                Ok(Ok(r)) => Ok(End::Stopped(r.stop_reason)),
                _ => Ok(End::Cancelled),
            }
        }
    }
}

/// How a run ended, with what is needed to say why.
struct Ended {
    result: Result<End, agent_client_protocol::Error>,
    /// The agent command as a person would type it.
    command: String,
    exit: Exit,
    /// The bound that ended the agent (`memory limit 256 MiB`), if one did.
    bound: Option<String>,
    stderr: String,
    output: String,
    setup_timeout: Duration,
    cancelled: bool,
}

impl Ended {
    /// The task outcome: the stop reason mapped, a failure with the exit and the stderr tail.
    fn outcome(self) -> TaskOutcome {
        let why = |what: String| {
            let exit = match self.exit {
                _ if self.bound.is_some() => {
                    format!(
                        "; agent killed: {}",
                        self.bound.as_deref().unwrap_or_default()
                    )
                }
                Exit::Code(c) => format!("; agent exited with code {c}"),
                Exit::Signal(s) => format!("; agent ended by {}", crate::process::signal_name(s)),
                Exit::Unknown => String::new(),
            };
            let stderr = if self.stderr.is_empty() {
                String::new()
            } else {
                format!("; stderr: {}", self.stderr)
            };
            // An agent that exits on its own before answering usually refuses its environment
            // (Claude's ACP adapter will not run as root without IS_SANDBOX=1): running it by hand
            // shows why.
            let hint = match self.exit {
                Exit::Code(c) if c != 0 => format!(
                    "; to see why, run `{}` by hand as this user, in the same directory",
                    self.command
                ),
                _ => String::new(),
            };
            format!("{what}{exit}{stderr}{hint}")
        };
        match self.result {
            Ok(End::Stopped(StopReason::EndTurn)) => {
                TaskOutcome::completed().with_output(self.output)
            }
            Ok(End::Stopped(StopReason::Cancelled) | End::Cancelled) => TaskOutcome::killed(),
            Ok(End::Stopped(StopReason::MaxTokens)) => TaskOutcome::failed("max-tokens"),
            Ok(End::Stopped(StopReason::MaxTurnRequests)) => {
                TaskOutcome::failed("max-turn-requests")
            }
            Ok(End::Stopped(StopReason::Refusal)) => TaskOutcome::failed("refusal"),
            Ok(End::Stopped(other)) => TaskOutcome::failed(format!("{other:?}").to_lowercase()),
            Ok(End::SetupTimeout(step)) => TaskOutcome::failed(why(format!(
                "agent did not answer {step} within {} ms",
                self.setup_timeout.as_millis()
            ))),
            Err(_) if self.cancelled => TaskOutcome::killed(),
            Err(e) => TaskOutcome::failed(why(format!("agent connection failed: {e}"))),
        }
    }
}

/// `argv` as a person would type it: each word quoted when it needs to be.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:@+,".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
