//! What a plugin implements: the plugin itself ([`Plugin`]), a raw tool handler ([`Handler`]), and a
//! running task's control ([`TaskControl`]) with the handle that settles it ([`TaskHandle`]).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use taskhost_common::panic_text;

use crate::ffi::{CompletionBox, FfiOutcome, ToolCall, ToolResult};

/// What a plugin is, once initialized. Both methods have defaults.
pub trait Plugin: Send + Sync + 'static {
    /// The plugin's section of the system prompt.
    fn prompt_section(&self) -> String {
        String::new()
    }
    /// Called once when the plugin's generation is retired.
    fn dispose(&self) {}
}

/// A plugin with no state of its own and no prompt section.
pub struct NoState;

impl Plugin for NoState {}

/// A tool's raw handler: any `Fn(&ToolCall) -> ToolResult`, its arguments left as JSON text.
/// [`crate::sdk::Tool`] is the typed form most tools use.
pub trait Handler: Send + Sync + 'static {
    /// Handles one call.
    fn call(&self, call: &ToolCall) -> ToolResult;
}

impl<F: Fn(&ToolCall) -> ToolResult + Send + Sync + 'static> Handler for F {
    fn call(&self, call: &ToolCall) -> ToolResult {
        self(call)
    }
}

/// How a task's output is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Incrementally, through [`TaskControl::read`] (a `None` reads as no new output).
    Stream,
    /// Once, from the outcome: reads return nothing while the task runs.
    Final,
}

/// Controls one running task, on the plugin side.
pub trait TaskControl: Send + 'static {
    /// Requests termination; idempotent; must lead to [`TaskHandle::complete`] being called.
    ///
    /// # Errors
    /// Why the cancel could not be delivered; the kill that asked fails with it.
    fn cancel(&mut self, reason: Option<&str>) -> Result<(), String>;
    /// For a [`Output::Stream`] task: the output since the previous call.
    fn read(&mut self) -> Option<String> {
        None
    }
    /// True when the task takes input through [`TaskControl::write`] (the default: it takes none).
    fn takes_input(&self) -> bool {
        false
    }
    /// Delivers `input` as typed, then, with `eof`, the end of the input. Called only when
    /// [`TaskControl::takes_input`] is true, one call at a time.
    ///
    /// # Errors
    /// Why the input could not be delivered; the caller sees it.
    fn write(&mut self, input: &str, eof: bool) -> Result<(), String> {
        let _ = (input, eof);
        Err("this task takes no input".to_owned())
    }
}

/// Settles one task; clone it freely. The first [`TaskHandle::complete`] wins.
#[derive(Clone)]
pub struct TaskHandle(pub(crate) Arc<CompletionBox>);

impl TaskHandle {
    /// Reports the outcome (call it once the task's resources are released).
    pub fn complete(&self, outcome: FfiOutcome) {
        self.0.complete(outcome);
    }
}

/// Runs `f` with a panic caught and worded as `<what> panicked: <payload>`.
pub(crate) fn contained<R>(what: &str, f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| format!("{what} panicked: {}", panic_text(&*p)))
}
