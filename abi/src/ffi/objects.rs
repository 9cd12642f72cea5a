//! The trait objects that cross the boundary. Host-implemented ones carry host vtables (the host never
//! unloads); plugin-implemented ones carry the plugin's, so the host holds each of them with a guard on
//! its generation and drops them before that generation unloads.
//!
//! The host refuses with a typed [`HostError`] (a kind a plugin branches on, and the message the
//! model reads); a plugin's own errors (its init, starter, cancel, input, item handler) cross as
//! text (`RString`), which the host shows. No method may panic (a panic through an `abi_stable`
//! trait object aborts the process). The [`crate::sdk`] wrappers uphold that for plugin code.

#![allow(
    non_local_definitions,
    missing_docs,
    reason = "abi_stable's #[sabi_trait] expands impls and items it does not document"
)]

use abi_stable::sabi_trait;
use abi_stable::std_types::{RBox, ROption, RResult, RStr, RString, RVec};

use super::data::{
    FfiKill, FfiOutcome, FfiRead, FfiSnapshot, Level, McpItemKind, TaskDecl, ToolCall, ToolResult,
    ToolSpec,
};
use super::error::HostError;
use super::work::{
    ExternalRequest, ExternalResult, ExternalStarted, ProcessRequest, ProcessResult,
    SubagentRequest,
};

/// The host handle a plugin receives at init. Implemented by the host.
#[sabi_trait]
pub trait HostApi: Send + Sync {
    /// Registers a tool; fails if the name is taken by another plugin.
    fn register_tool(&self, spec: ToolSpec, handler: ToolHandlerBox) -> RResult<(), HostError>;
    /// Unregisters one of this plugin's tools; unknown names are ignored.
    fn unregister_tool(&self, name: RStr<'_>);
    /// Declares a task and, once every registry check passed, calls `starter` (on the calling
    /// thread) to start it. Returns the task id.
    fn start_task(&self, decl: TaskDecl, starter: StarterBox) -> RResult<RString, HostError>;
    /// Declares a task whose work is a child process run by the host's process service: a stream
    /// task (stdout and stderr), killed by SIGTERM then SIGKILL to its group, settled with
    /// `exit code: N`, `signal: SIG...` or `killed before exit`. Its hooks are the host's, so the task
    /// does not keep the calling plugin loaded. Returns the task id.
    fn start_process_task(
        &self,
        decl: TaskDecl,
        request: ProcessRequest,
    ) -> RResult<RString, HostError>;
    /// Runs a child process in the foreground for `session` (its spill files go with the session),
    /// blocking the calling thread until it ends or `timeout_ms` passes (then it is killed, or, with
    /// [`ProcessRequest::promote_on_timeout`], it may become a background task).
    fn run_process(
        &self,
        session: RStr<'_>,
        request: ProcessRequest,
        timeout_ms: u64,
    ) -> ProcessResult;
    /// Declares a final-output task whose work is a child agent over ACP (see [`SubagentRequest`]). Its
    /// hooks are the host's. Returns the task id.
    fn start_subagent_task(
        &self,
        decl: TaskDecl,
        request: SubagentRequest,
    ) -> RResult<RString, HostError>;
    /// Declares a stream task whose work runs elsewhere (see [`ExternalRequest`]): the host runs its
    /// start command once every registry check passed, then follows its output file and polls its
    /// state; cancel runs its cancel command. Its hooks are the host's.
    fn start_external_task(
        &self,
        decl: TaskDecl,
        request: ExternalRequest,
    ) -> RResult<ExternalStarted, HostError>;
    /// Runs a child agent in the foreground for `session`, blocking the calling thread until it ends.
    fn run_subagent(&self, session: RStr<'_>, request: SubagentRequest) -> FfiOutcome;
    /// Runs external work for `session` in the foreground of the current tool call, on the host's
    /// own external-task loop (start command, output file followed, state polled) until it ends or
    /// the call is cancelled (then its cancel command runs). No plugin code runs meanwhile.
    fn run_external(&self, session: RStr<'_>, request: ExternalRequest) -> ExternalResult;
    /// Attaches a control surface (the fence opens); returns a key for [`HostApi::detach_surface`].
    /// The host detaches whatever the generation attached when it is retired, after its successor
    /// attached its own, so the fence never flaps across a reload.
    fn attach_surface(&self, name: RStr<'_>) -> u64;
    /// Detaches a surface attached by this plugin.
    fn detach_surface(&self, key: u64);
    /// A task snapshot, authorized for `caller` (a session id; empty for none).
    fn get_task(&self, caller: RStr<'_>, id: RStr<'_>) -> RResult<FfiSnapshot, HostError>;
    /// The caller's and the unowned tasks, in registration order.
    fn list_tasks(&self, caller: RStr<'_>) -> RVec<FfiSnapshot>;
    /// Reads a task (consuming for stream kinds).
    fn read_task(&self, caller: RStr<'_>, id: RStr<'_>) -> RResult<FfiRead, HostError>;
    /// A stream task's unread output, left unread, with its snapshot (nothing is marked reported).
    fn peek_task(&self, caller: RStr<'_>, id: RStr<'_>) -> RResult<FfiRead, HostError>;
    /// Writes `input` to a live task that takes input (at most 64 KiB), then, with `eof`, its end.
    fn write_task(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        input: RStr<'_>,
        eof: bool,
    ) -> RResult<(), HostError>;
    /// Requests cancellation of a task.
    fn kill_task(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        reason: ROption<RStr<'_>>,
    ) -> RResult<FfiKill, HostError>;
    /// Blocks the calling thread until the task settles or `timeout_ms` passes.
    fn wait_task(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        timeout_ms: f64,
    ) -> RResult<FfiSnapshot, HostError>;
    /// Blocks the calling thread until a stream task's output matches the regular expression
    /// `pattern`, the task settles, or `timeout_ms` passes; nothing is consumed. The host looks only
    /// at output that arrived since its previous look and wakes when more arrives.
    fn wait_output(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        pattern: RStr<'_>,
        timeout_ms: f64,
    ) -> RResult<FfiSnapshot, HostError>;
    /// Registers a completion listener; returns a key for [`HostApi::remove_listener`]. The host
    /// removes the generation's listeners when it is retired.
    fn on_task_done(&self, listener: ListenerBox) -> u64;
    /// Removes a listener.
    fn remove_listener(&self, key: u64);
    /// Sends a notice about `task` (empty for none) to a session (delivered once, to that session
    /// only). A notice about a task that gets reported before the notice is shown may be dropped.
    fn notify(&self, session: RStr<'_>, task: RStr<'_>, text: RStr<'_>);
    /// Logs a record; the host adds the plugin's name and generation.
    fn log(&self, level: Level, target: RStr<'_>, message: RStr<'_>);
    /// Runs `worker` on a thread of this plugin's generation. The generation is not unloaded before the
    /// worker returns.
    fn spawn_worker(&self, worker: WorkerBox);
    /// This plugin's own config table, as JSON text (`{}` when none).
    fn config_json(&self) -> RString;
    /// Registers a prompt, a resource or a resource template: `spec_json` is its MCP description
    /// (a `Prompt`, a `Resource` or a `ResourceTemplate`, as JSON text), `handler` answers its
    /// requests. Fails for a malformed spec or a key another plugin serves.
    fn register_item(
        &self,
        kind: McpItemKind,
        spec_json: RString,
        handler: McpHandlerBox,
    ) -> RResult<(), HostError>;
    /// Unregisters one of this plugin's items; unknown keys are ignored.
    fn unregister_item(&self, kind: McpItemKind, key: RStr<'_>);
    /// Tells every client that the list of `kind` changed (registering and unregistering already
    /// do; this is for a change the host cannot see).
    fn list_changed(&self, kind: McpItemKind);
    /// Tells the clients that subscribed to `uri` that it changed.
    fn resource_updated(&self, uri: RStr<'_>);
    /// Sends a log message to the client of the tool call this thread runs (when it asked for
    /// messages at `level` or above); `data_json` is the message's data as JSON text. Outside a
    /// call, or with no MCP client, nothing is sent.
    fn call_log(&self, level: RStr<'_>, logger: RStr<'_>, data_json: RStr<'_>);
    /// Reports progress of the tool call this thread runs, when its client asked for it.
    fn call_progress(&self, progress: f64, total: ROption<f64>, message: RStr<'_>);
    /// Sends a request to the client of the tool call this thread runs (`sampling/createMessage`,
    /// `elicitation/create`, `roots/list`) and blocks until it answers: its result as JSON text,
    /// or why there is none (no client that can be asked, the client's error, the call cancelled).
    fn call_ask(&self, method: RStr<'_>, params_json: RStr<'_>) -> RResult<RString, HostError>;
    /// As [`HostApi::call_ask`], for several requests at once: `requests_json` maps a key to each
    /// request (`{"method", "params"}`), and the answer maps each key to its result. A call running
    /// as an MCP task shows them all open at once.
    fn call_ask_all(&self, requests_json: RStr<'_>) -> RResult<RString, HostError>;
    /// The last `max_bytes` of each of a task's kept output streams, as a read shows them (stdout,
    /// then `[stderr]` and stderr, terminal output as a terminal would draw it), authorized for
    /// `caller` as [`HostApi::get_task`] is; nothing is consumed. Served from the state
    /// directory's kept files, so a settled or lost task has one too; empty for a task that kept
    /// none (a host without a state directory, a final-output task).
    fn task_tail(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        max_bytes: u64,
    ) -> RResult<RString, HostError>;
    /// The host as people watch it, as a JSON object's text: `plugins` (each with `name`,
    /// `generations` (each with `generation`, `state`, `live_tasks`, `loaded_at_ms`), `path` and
    /// `live_tasks`: its unsettled tasks, those the host runs for it included) and `health`
    /// (`tasks_live`, `threads`, `descriptors`, `rss_bytes`, `keeper_pid`, `store_bytes`,
    /// `uptime_ms`).
    fn host_status_json(&self) -> RString;
    /// Of the newest `limit` records of `caller`'s tasks (every owner's for
    /// [`crate::sdk::http::EVERY_OWNER`]) in the state directory, those of tasks this host does
    /// not hold (earlier hosts' settled, lost and expired ones, and this host's it let go; a task
    /// it holds is in [`HostApi::list_tasks`]'s answer), newest first, as a JSON object's text:
    /// `{"records": [{"id", "kind", "label", "owner", "status", "detail", "started_at_ms",
    /// "finished_at_ms", "expired_at_ms"}]}`; none for an empty caller or a host without a state
    /// directory.
    fn task_records_json(&self, caller: RStr<'_>, limit: u64) -> RString;
    /// As [`HostApi::task_tail`], with each stream's colours and styles kept: before each run of
    /// text drawn with other colours than the run before, one SGR sequence in the canonical form
    /// `ESC [ 0 ; CODES m` (`ESC [ 0 m` for the default), the only escape sequences in the text.
    /// For a person's view; what a model reads stays plain.
    fn task_tail_coloured(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        max_bytes: u64,
    ) -> RResult<RString, HostError>;
    /// The names people know owners by, for `caller`'s view: `owners_json` is a JSON array of
    /// owner ids (`principal-6`, `session-17`); the answer a JSON object's text,
    /// `{"names": {ID: NAME}}`: a principal by its token's name (`taskhost token create NAME`), a
    /// session by its client's name (`clientInfo.name` of its `initialize`) and its number
    /// (`claude-code #17`). Only owners `caller` may see are named (its own; every one for
    /// [`crate::sdk::http::EVERY_OWNER`]); an owner with no better name is left out.
    fn owner_names_json(&self, caller: RStr<'_>, owners_json: RStr<'_>) -> RString;
    /// What the host records of task `id`, for `caller` as [`HostApi::task_tail`] authorizes, as
    /// a JSON object's text: `id`, `owner` (its id), `bounds` (its owner's policy as resolved:
    /// `policy`, `write`, `filesystem`, `git_writable`, `network`, `memory_max`, `pids_max`,
    /// `cpu_max_millis`; null when unbounded), `ahead` (how many tasks run before it, while it
    /// is queued; else null), `output_bytes` (its kept output's size; null when none is kept),
    /// `pid` and `cwd` (its process group's leader and its working directory, while its process
    /// runs; else null), `killed_by` (`{"by", "reason"}`: the owner id that asked to kill it
    /// through a plugin, [`crate::sdk::http::EVERY_OWNER`] for an overseer's view, and the reason
    /// given; null when none did). `{}` for a task `caller` may not see.
    fn task_details_json(&self, caller: RStr<'_>, id: RStr<'_>) -> RString;
}

/// The host handle as the plugin holds it.
pub type HostBox = HostApi_TO<'static, RBox<()>>;

/// Handles calls of one tool. Implemented by the plugin.
#[sabi_trait]
pub trait ToolHandler: Send + Sync {
    /// Handles one call. May block (it runs on a thread of the plugin's generation).
    fn call(&self, call: ToolCall) -> ToolResult;
}

/// A tool handler as the host holds it.
pub type ToolHandlerBox = ToolHandler_TO<'static, RBox<()>>;

/// Answers the MCP requests of one registered prompt, resource or resource template. Implemented
/// by the plugin.
#[sabi_trait]
pub trait McpHandler: Send + Sync {
    /// Answers `method` (`prompts/get`, `resources/read`, `completion/complete`) with `params_json`
    /// (the request's params as JSON text, `_meta` included): the MCP result as JSON text, or a
    /// JSON-RPC error object (`{"code", "message", "data"}`) as JSON text. May block (it runs on a
    /// thread of the plugin's generation).
    fn handle(&self, method: RStr<'_>, params_json: RStr<'_>) -> RResult<RString, RString>;
}

/// An item's handler as the host holds it.
pub type McpHandlerBox = McpHandler_TO<'static, RBox<()>>;

/// Settles one task: the first call wins, later ones are ignored. Implemented by the host.
#[sabi_trait]
pub trait Completion: Send + Sync {
    /// Reports the task's outcome. Call it once the task's resources are released.
    fn complete(&self, outcome: FfiOutcome);
}

/// A completion as the plugin holds it.
pub type CompletionBox = Completion_TO<'static, RBox<()>>;

/// Starts the work of a declared task; called at most once. Implemented by the plugin.
#[sabi_trait]
pub trait Starter: Send {
    /// Starts the work. `completion` settles the task later. An error registers nothing.
    fn run(&mut self, completion: CompletionBox) -> RResult<HooksBox, RString>;
}

/// A starter as the host holds it.
pub type StarterBox = Starter_TO<'static, RBox<()>>;

/// Controls one running task. Implemented by the plugin; dropped by the host once the task settles.
#[sabi_trait]
pub trait Hooks: Send {
    /// Requests termination: idempotent, and it must lead to the completion being called.
    fn cancel(&mut self, reason: ROption<RStr<'_>>) -> RResult<(), RString>;
    /// True for stream kinds, whose output is read with [`Hooks::read`].
    fn is_stream(&self) -> bool;
    /// The output since the previous call (stream kinds).
    fn read(&mut self) -> RString;
    /// True when the task takes input through [`Hooks::write`].
    fn takes_input(&self) -> bool;
    /// Delivers `input` to the task as typed, then, with `eof`, the end of its input.
    fn write(&mut self, input: RStr<'_>, eof: bool) -> RResult<(), RString>;
    /// What the next [`Hooks::read`] would return, left unread (stream kinds).
    fn peek(&mut self) -> RString;
}

/// Task hooks as the host holds them.
pub type HooksBox = Hooks_TO<'static, RBox<()>>;

/// Hears task settlements. Implemented by the plugin.
#[sabi_trait]
pub trait Listener: Send + Sync {
    /// Called once per settled task.
    fn task_done(&self, snapshot: FfiSnapshot);
}

/// A listener as the host holds it.
pub type ListenerBox = Listener_TO<'static, RBox<()>>;

/// Background work of a plugin. Implemented by the plugin.
#[sabi_trait]
pub trait Worker: Send {
    /// Runs to completion on a generation thread.
    fn run(&mut self);
}

/// A worker as the host holds it.
pub type WorkerBox = Worker_TO<'static, RBox<()>>;

/// A loaded plugin. Implemented by the plugin; disposed when its generation is retired.
#[sabi_trait]
pub trait PluginInstance: Send + Sync {
    /// The plugin's section of the system prompt (may be empty).
    fn prompt_section(&self) -> RString;
    /// Called once when the generation is retired, before it is dropped.
    fn dispose(&self);
}

/// A plugin instance as the host holds it.
pub type PluginBox = PluginInstance_TO<'static, RBox<()>>;
