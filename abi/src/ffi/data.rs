//! Plain data that crosses the boundary.

use abi_stable::StableAbi;
use abi_stable::std_types::{ROption, RString, RVec};

/// A tool a plugin offers: its name, description and JSON schema (as JSON text).
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ToolSpec {
    /// The tool's name, unique across loaded plugins.
    pub name: RString,
    /// What the model is told the tool does.
    pub description: RString,
    /// The JSON schema of the arguments, as JSON text.
    pub input_schema_json: RString,
    /// More of the tool's MCP description, as a JSON object's text (`{}` for none): `execution`
    /// (`{"taskSupport": "optional"}` for a tool MCP clients may run as a task), `annotations`,
    /// `title`, `outputSchema`.
    pub mcp_json: RString,
}

/// One call of a tool.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ToolCall {
    /// The calling session; empty when the caller has none.
    pub session: RString,
    /// The arguments, as JSON text (an object).
    pub arguments_json: RString,
    /// The rest of the MCP request, as JSON text (an object): its `_meta` (the client's
    /// capabilities under `io.modelcontextprotocol/clientCapabilities`, whatever the protocol
    /// era), and on a retried call its `inputResponses` and `requestState`. `{}` for a call that
    /// did not come over MCP.
    pub request_json: RString,
}

/// What a tool call returns: text for the model, and whether it is an error; or, for a tool that
/// speaks MCP itself, the whole MCP result.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    /// The result text.
    pub text: RString,
    /// True for an error result (the model sees `Error: ...`).
    pub is_error: bool,
    /// The MCP result as JSON text, when the tool gives one: a `CallToolResult` (content blocks of
    /// any kind, `structuredContent`), an `InputRequiredResult` (`"resultType": "input_required"`),
    /// or `{"error": {"code", "message", "data"}}` for a JSON-RPC error. MCP clients get it as it
    /// is; `text` and `is_error` still serve everything else (logs, tests).
    pub mcp_json: ROption<RString>,
    /// The registry id of the background task this call started, if it started one (see
    /// [`ToolResult::started`]). The host reads the task from here, never from `text`: MCP Tasks
    /// makes it the client's task, and every MCP answer carries it as
    /// `_meta: {"taskhost/started": {"task": ID}}`.
    pub started_task: ROption<RString>,
}

impl ToolCall {
    /// The calling session (empty when the caller has none).
    pub fn session(&self) -> &str {
        self.session.as_str()
    }

    /// The arguments, as JSON text.
    pub fn arguments(&self) -> &str {
        self.arguments_json.as_str()
    }

    /// The rest of the MCP request, as JSON text (see [`ToolCall::request_json`]).
    pub fn request(&self) -> &str {
        self.request_json.as_str()
    }
}

impl ToolResult {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: RString::from(text.into()),
            is_error: false,
            mcp_json: ROption::RNone,
            started_task: ROption::RNone,
        }
    }

    /// A successful result of a call that started the background task `id`: `text` is what the
    /// model reads (worded as the tool likes), `id` is what the host and MCP clients act on.
    pub fn started(text: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            started_task: ROption::RSome(RString::from(id.into())),
            ..Self::ok(text)
        }
    }

    /// An error result; the text is shown as `Error: <text>`.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: RString::from(format!("Error: {}", text.into())),
            is_error: true,
            mcp_json: ROption::RNone,
            started_task: ROption::RNone,
        }
    }

    /// A result given as MCP JSON (see [`ToolResult::mcp_json`]); `text` is what callers that are
    /// not MCP see.
    pub fn mcp(text: impl Into<String>, is_error: bool, mcp: &serde_json::Value) -> Self {
        Self {
            text: RString::from(text.into()),
            is_error,
            mcp_json: ROption::RSome(mcp.to_string().into()),
            started_task: ROption::RNone,
        }
    }

    /// The background task this call started, if any (see [`ToolResult::started_task`]).
    pub fn started_task(&self) -> Option<&str> {
        self.started_task
            .as_ref()
            .map(RString::as_str)
            .into_option()
    }

    /// The MCP result, when the tool gave one.
    pub fn mcp_json(&self) -> Option<&str> {
        self.mcp_json.as_ref().map(RString::as_str).into_option()
    }
}

/// What a plugin may register besides tools, and whose list may change.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum McpItemKind {
    /// A tool (only for [`crate::ffi::HostApi::list_changed`]).
    Tool = 1,
    /// A prompt (`prompts/list`, `prompts/get`), keyed by its name.
    Prompt,
    /// A resource (`resources/list`, `resources/read`), keyed by its URI.
    Resource,
    /// A resource template (`resources/templates/list`, and reads of URIs it matches), keyed by
    /// its URI template.
    ResourceTemplate,
    /// Not an MCP item: a set of routes on the host's HTTP listener, keyed by the path prefix it
    /// serves (`{"prefix": "/"}`); the handler answers each request as the SDK's `http` module
    /// says. Its changes tell no MCP client.
    HttpRoute,
}

impl McpItemKind {
    /// The item's name in messages (`prompt`, `resource`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::Resource => "resource",
            Self::ResourceTemplate => "resource template",
            Self::HttpRoute => "HTTP route",
        }
    }
}

/// A producer's declaration of a task (identity only; the work comes with the [`crate::ffi::Starter`]).
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct TaskDecl {
    /// Producer kind, also the id prefix (`bash`, `subagent`).
    pub kind: RString,
    /// One-line model-facing label.
    pub label: RString,
    /// Byte cap for model-facing reads and notices, if any.
    pub output_limit_bytes: ROption<u64>,
    /// The owning session (its agent owns the task); `RNone` for an unowned task.
    pub owner_session: ROption<RString>,
    /// Tasks (of the same owner) this one waits for: it runs once every one of them ended, and
    /// settles `failed` without running when one did not complete with exit 0. An unknown id, one
    /// of another owner, or the task itself refuses the start.
    pub after: RVec<RString>,
}

impl TaskDecl {
    /// A declaration of a task of `kind` labelled `label`, owned by `owner_session`'s agent (unowned
    /// when `None`), without an output limit.
    pub fn new(kind: &str, label: &str, owner_session: Option<&str>) -> Self {
        Self {
            kind: kind.into(),
            label: label.into(),
            output_limit_bytes: ROption::RNone,
            owner_session: owner_session.map(RString::from).into(),
            after: RVec::new(),
        }
    }
}

/// A task's lifecycle state.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfiStatus {
    /// Running.
    Running,
    /// Cancel delivered, not settled.
    Stopping,
    /// Finished on its own.
    Completed,
    /// Cancelled.
    Killed,
    /// Broke.
    Failed,
    /// Its host stopped while it ran; its end is unknown (a task brought back from the records).
    Lost,
    /// Recorded, waiting for a slot or for the tasks it runs after; its work has not begun.
    Queued,
}

impl FfiStatus {
    /// The lower-case name used in status lines.
    pub fn as_str(self) -> &'static str {
        match self {
            FfiStatus::Running => "running",
            FfiStatus::Stopping => "stopping",
            FfiStatus::Completed => "completed",
            FfiStatus::Killed => "killed",
            FfiStatus::Failed => "failed",
            FfiStatus::Lost => "lost",
            FfiStatus::Queued => "queued",
        }
    }

    /// True for completed, killed, failed and lost.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            FfiStatus::Completed | FfiStatus::Killed | FfiStatus::Failed | FfiStatus::Lost
        )
    }
}

/// How a task ended, as a producer reports it through [`crate::ffi::Completion::complete`]. A non-terminal
/// status is recorded as `failed`.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct FfiOutcome {
    /// Completed, killed or failed.
    pub status: FfiStatus,
    /// Kind-specific detail (`exit code: 3`).
    pub detail: ROption<RString>,
    /// Final output, for final-output kinds.
    pub output: ROption<RString>,
}

impl FfiOutcome {
    /// Finished on its own, with a detail (`exit code: 0`).
    pub fn completed(detail: &str) -> Self {
        Self::new(FfiStatus::Completed, Some(detail), None)
    }

    /// Stopped by a cancel, with a detail (`signal: SIGTERM`).
    pub fn killed(detail: &str) -> Self {
        Self::new(FfiStatus::Killed, Some(detail), None)
    }

    /// Broke, with what went wrong.
    pub fn failed(detail: &str) -> Self {
        Self::new(FfiStatus::Failed, Some(detail), None)
    }

    /// Its detail, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_ref().map(RString::as_str).into_option()
    }

    /// Its final output, if any.
    pub fn output(&self) -> Option<&str> {
        self.output.as_ref().map(RString::as_str).into_option()
    }

    /// The same outcome carrying a final-output task's output.
    pub fn with_output(mut self, output: &str) -> Self {
        self.output = ROption::RSome(output.into());
        self
    }

    /// An outcome with a status and optional detail and output.
    pub fn new(status: FfiStatus, detail: Option<&str>, output: Option<&str>) -> Self {
        Self {
            status,
            detail: detail.map(RString::from).into(),
            output: output.map(RString::from).into(),
        }
    }
}

/// A read-only projection of one task.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct FfiSnapshot {
    /// The task id (`bash-3`).
    pub id: RString,
    /// The producer kind.
    pub kind: RString,
    /// The label.
    pub label: RString,
    /// The output cap, if any.
    pub output_limit_bytes: ROption<u64>,
    /// The owner's session, if owned.
    pub owner_session: ROption<RString>,
    /// The lifecycle state.
    pub status: FfiStatus,
    /// Kind-specific detail.
    pub detail: ROption<RString>,
    /// Registration time, ms since the Unix epoch.
    pub started_at_ms: u64,
    /// Settlement time, ms since the Unix epoch.
    pub finished_at_ms: ROption<u64>,
    /// Whether the terminal state was reported (a completion notice is owed only while false).
    pub reported: bool,
}

impl FfiSnapshot {
    /// The owning session, if the task is owned.
    pub fn owner(&self) -> Option<&str> {
        self.owner_session
            .as_ref()
            .map(RString::as_str)
            .into_option()
    }

    /// The task's detail (an exit code, a signal, why it failed), if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_ref().map(RString::as_str).into_option()
    }

    /// The status line a read of this task ends with ([`crate::wording::status_line`]).
    pub fn status_line(&self) -> String {
        crate::wording::status_line(self.status.as_str(), self.detail())
    }
}

/// What a read returns.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct FfiRead {
    /// The delta (stream kinds) or the final output (final kinds, once settled).
    pub text: RString,
    /// The state after the read.
    pub snapshot: FfiSnapshot,
}

/// What a kill returns.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct FfiKill {
    /// True when cancellation was requested of a live task; false when it had already finished.
    pub requested: bool,
    /// The state after the kill.
    pub snapshot: FfiSnapshot,
}

/// A log record's level, as [`crate::ffi::HostApi::log`] takes it.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Errors.
    Error = 1,
    /// Warnings.
    Warn,
    /// Information.
    Info,
    /// Debugging.
    Debug,
    /// Tracing.
    Trace,
}
