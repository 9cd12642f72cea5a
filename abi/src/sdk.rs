//! The plugin author's side: plain Rust traits and closures, wrapped into the boundary's objects with
//! every call under `catch_unwind`, so a plugin panic becomes an error result instead of an abort.
//!
//! ```ignore
//! use taskhost_abi::{Host, Plugin, ToolResult, export_plugin, serde_json::json};
//!
//! struct Echo;
//! impl Plugin for Echo {}
//!
//! fn init(host: Host) -> Result<Echo, String> {
//!     host.register_tool("echo", "Echoes its text.", json!({"type": "object"}), |call| {
//!         ToolResult::ok(call.arguments_json.to_string())
//!     })?;
//!     Ok(Echo)
//! }
//!
//! export_plugin!(name: "echo", init: init);
//! ```

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};

use crate::glue::{ListenerGlue, PluginGlue, ToolGlue, WorkerGlue};
use crate::objects::*;
use crate::types::*;

pub use crate::args::{
    bool_arg, invalid_wait_for, non_empty, open_own_file, positive_config, shown,
};

/// What a plugin is, once initialized. Both methods have defaults.
pub trait Plugin: Send + Sync + 'static {
    /// The plugin's section of the system prompt.
    fn prompt_section(&self) -> String {
        String::new()
    }
    /// Called once when the plugin's generation is retired.
    fn dispose(&self) {}
}

/// A tool handler: any `Fn(&ToolCall) -> ToolResult`.
pub trait Tool: Send + Sync + 'static {
    /// Handles one call.
    fn call(&self, call: &ToolCall) -> ToolResult;
}

impl<F: Fn(&ToolCall) -> ToolResult + Send + Sync + 'static> Tool for F {
    fn call(&self, call: &ToolCall) -> ToolResult {
        self(call)
    }
}

/// Controls one running task, on the plugin side.
pub trait TaskControl: Send + 'static {
    /// Requests termination; idempotent; must lead to [`TaskHandle::complete`] being called.
    ///
    /// # Errors
    /// Why the cancel could not be delivered; the kill that asked fails with it.
    fn cancel(&mut self, reason: Option<&str>) -> Result<(), String>;
    /// For stream kinds: the output since the previous call. `None` (the default) marks a final-output
    /// kind.
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

/// The text of a panic payload.
pub fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

pub(crate) fn contained<R>(what: &str, f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| format!("{what} panicked: {}", panic_text(&*p)))
}

/// How a started task's output is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskKind {
    /// Incrementally, through the control's reads.
    Stream,
    /// Once, from the outcome.
    Final,
    /// Decided by the control's first read (`Some`: a stream).
    Probe,
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

/// The host handle, as a plugin uses it. Cheap to clone.
#[derive(Clone)]
pub struct Host(pub(crate) Arc<HostBox>);

impl Host {
    /// Registers a tool.
    ///
    /// # Errors
    /// The host's refusal (a name already taken, a schema that is not valid JSON).
    pub fn register_tool(
        &self,
        name: &str,
        description: &str,
        schema: serde_json::Value,
        handler: impl Tool,
    ) -> Result<(), String> {
        let spec = ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema_json: schema.to_string().into(),
        };
        let handler = ToolHandler_TO::from_value(ToolGlue(handler), TD_Opaque);
        self.0
            .register_tool(spec, handler)
            .into_result()
            .map_err(String::from)
    }

    /// Registers a tool whose arguments are the type `A`: the input schema is generated from it, and a
    /// call whose arguments do not fit is answered with an error naming the argument (see
    /// [`crate::typed::parse`]) without running `handler`.
    ///
    /// # Errors
    /// As [`Host::register_tool`].
    pub fn register_typed<A>(
        &self,
        name: &str,
        description: &str,
        handler: impl Fn(&ToolCall, A) -> ToolResult + Send + Sync + 'static,
    ) -> Result<(), String>
    where
        A: serde::de::DeserializeOwned + schemars::JsonSchema + 'static,
    {
        self.register_tool(
            name,
            description,
            crate::typed::schema::<A>(),
            move |call: &ToolCall| match crate::typed::parse::<A>(call.arguments()) {
                Ok(args) => handler(call, args),
                Err(e) => ToolResult::error(e),
            },
        )
    }

    /// Unregisters one of this plugin's tools.
    pub fn unregister_tool(&self, name: &str) {
        self.0.unregister_tool(name.into());
    }

    /// Attaches a control surface; returns its key.
    pub fn attach_surface(&self, name: &str) -> u64 {
        self.0.attach_surface(name.into())
    }

    /// Detaches a surface.
    pub fn detach_surface(&self, key: u64) {
        self.0.detach_surface(key);
    }

    /// A snapshot of a task, authorized for `caller`'s session.
    ///
    /// # Errors
    /// The registry's error text (`unknown task ...`, `task ... belongs to another session`).
    pub fn get_task(&self, caller: &str, id: &str) -> Result<FfiSnapshot, String> {
        self.0
            .get_task(caller.into(), id.into())
            .into_result()
            .map_err(String::from)
    }

    /// The caller's and the unowned tasks.
    pub fn list_tasks(&self, caller: &str) -> Vec<FfiSnapshot> {
        self.0.list_tasks(caller.into()).into_vec()
    }

    /// Reads a task.
    ///
    /// # Errors
    /// As [`Host::get_task`]; refused when called (directly, or from a thread it waits on) by the
    /// task's own cancel or reader.
    pub fn read_task(&self, caller: &str, id: &str) -> Result<FfiRead, String> {
        self.0
            .read_task(caller.into(), id.into())
            .into_result()
            .map_err(String::from)
    }

    /// A stream task's unread output, left unread (nothing is marked reported).
    ///
    /// # Errors
    /// As [`Host::read_task`]; also for a final-output task (it has no stream).
    pub fn peek_task(&self, caller: &str, id: &str) -> Result<FfiRead, String> {
        self.0
            .peek_task(caller.into(), id.into())
            .into_result()
            .map_err(String::from)
    }

    /// Writes `input` to a live task that takes input, then, with `eof`, ends its input.
    ///
    /// # Errors
    /// As [`Host::get_task`]; a task that takes no input, a finished task, more than 64 KiB, or the
    /// producer's own error (the program stopped reading).
    pub fn write_task(&self, caller: &str, id: &str, input: &str, eof: bool) -> Result<(), String> {
        self.0
            .write_task(caller.into(), id.into(), input.into(), eof)
            .into_result()
            .map_err(String::from)
    }

    /// Requests cancellation of a task.
    ///
    /// # Errors
    /// As [`Host::get_task`], or the producer's cancel error; refused when called by the task's own
    /// cancel or reader, as [`Host::read_task`] is.
    pub fn kill_task(
        &self,
        caller: &str,
        id: &str,
        reason: Option<&str>,
    ) -> Result<FfiKill, String> {
        let reason = reason.map(RStr::from).into();
        self.0
            .kill_task(caller.into(), id.into(), reason)
            .into_result()
            .map_err(String::from)
    }

    /// Blocks until the task settles or the timeout passes.
    ///
    /// # Errors
    /// As [`Host::get_task`], or `invalid wait timeout: ...`.
    pub fn wait_task(
        &self,
        caller: &str,
        id: &str,
        timeout_ms: f64,
    ) -> Result<FfiSnapshot, String> {
        self.0
            .wait_task(caller.into(), id.into(), timeout_ms)
            .into_result()
            .map_err(String::from)
    }

    /// Blocks until a stream task's output matches the regular expression `pattern`, the task
    /// settles, or `timeout_ms` passes; nothing is consumed (a read afterwards returns it all). The
    /// host matches only what arrived since its previous look and wakes when more arrives.
    ///
    /// # Errors
    /// As [`Host::wait_task`]; a pattern that is not a regular expression; a final-output task; too
    /// many waits of the caller's at once.
    pub fn wait_output(
        &self,
        caller: &str,
        id: &str,
        pattern: &str,
        timeout_ms: f64,
    ) -> Result<FfiSnapshot, String> {
        self.0
            .wait_output(caller.into(), id.into(), pattern.into(), timeout_ms)
            .into_result()
            .map_err(String::from)
    }

    /// Registers a completion listener; returns its key.
    pub fn on_task_done(&self, listener: impl Fn(FfiSnapshot) + Send + Sync + 'static) -> u64 {
        self.0
            .on_task_done(Listener_TO::from_value(ListenerGlue(listener), TD_Opaque))
    }

    /// Removes a listener.
    pub fn remove_listener(&self, key: u64) {
        self.0.remove_listener(key);
    }

    /// Sends a notice to a session, about `task` when given (the host may then drop it if the task
    /// gets read, waited on or killed before the notice is shown).
    pub fn notify(&self, session: &str, task: Option<&str>, text: &str) {
        self.0
            .notify(session.into(), task.unwrap_or_default().into(), text.into());
    }

    /// Logs a record at `level` (see [`crate::types::level`]).
    pub fn log(&self, level: u8, message: &str) {
        self.0.log(level, "plugin".into(), message.into());
    }

    /// Runs `work` on a thread of this plugin's generation (the generation stays loaded until it
    /// returns). A panic in `work` is logged.
    pub fn spawn_worker(&self, work: impl FnOnce() + Send + 'static) {
        let host = self.clone();
        self.0.spawn_worker(Worker_TO::from_value(
            WorkerGlue(Some(work), host),
            TD_Opaque,
        ));
    }

    /// This plugin's config table (an empty object when none).
    pub fn config(&self) -> serde_json::Value {
        serde_json::from_str(self.0.config_json().as_str()).unwrap_or(serde_json::Value::Null)
    }
}

/// Runs a plugin's init under `catch_unwind`; used by [`crate::export_plugin!`].
#[doc(hidden)]
pub fn run_init<P: Plugin>(
    host: HostBox,
    init: fn(Host) -> Result<P, String>,
) -> RResult<PluginBox, RString> {
    let host = Host(Arc::new(host));
    match contained("init", || init(host)) {
        Ok(Ok(plugin)) => ROk(PluginInstance_TO::from_value(PluginGlue(plugin), TD_Opaque)),
        Ok(Err(e)) | Err(e) => RErr(e.into()),
    }
}

/// Builds the root module; used by [`crate::export_plugin!`].
#[doc(hidden)]
pub fn root_module(
    name: extern "C" fn() -> RStr<'static>,
    init: extern "C" fn(HostBox) -> RResult<PluginBox, RString>,
) -> crate::PluginModRef {
    use abi_stable::prefix_type::PrefixTypeTrait;
    crate::PluginMod {
        abi_version: crate::ABI_VERSION,
        name,
        init,
    }
    .leak_into_prefix()
}

/// The symbol abi_stable's loader reads (`abi_stable::library::ROOT_MODULE_LOADER_NAME`), spelled out
/// because [`export_plugin!`](crate::export_plugin) must name it literally; a unit test keeps the two equal.
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// Exports a plugin: `export_plugin!(name: "bash", init: my_init)`, where
/// `fn my_init(host: Host) -> Result<impl Plugin, String>` registers the plugin's tools. Call it once
/// per cdylib. (It writes what `abi_stable::export_root_module` would, through this crate's paths, so a
/// plugin needs no dependency but `taskhost-abi`.)
#[macro_export]
macro_rules! export_plugin {
    (name: $name:expr, init: $init:path $(,)?) => {
        #[doc(hidden)]
        pub fn __taskhost_root_module() -> $crate::PluginModRef {
            extern "C" fn __taskhost_name() -> $crate::abi_stable::std_types::RStr<'static> {
                $crate::abi_stable::std_types::RStr::from_str($name)
            }
            extern "C" fn __taskhost_init(
                host: $crate::HostBox,
            ) -> $crate::abi_stable::std_types::RResult<
                $crate::PluginBox,
                $crate::abi_stable::std_types::RString,
            > {
                $crate::sdk::run_init(host, $init)
            }
            $crate::sdk::root_module(__taskhost_name, __taskhost_init)
        }

        /// The root module header the host reads at load.
        #[allow(non_upper_case_globals)]
        #[unsafe(no_mangle)]
        pub static _1as_0lib_1header_0root_bmodule_bloader: $crate::abi_stable::library::LibHeader = {
            extern "C" fn erased() -> $crate::abi_stable::library::RootModuleResult {
                $crate::abi_stable::library::__call_root_module_loader(__taskhost_root_module)
            }
            // SAFETY: `erased` builds the root module of exactly the type named here.
            unsafe {
                $crate::abi_stable::library::LibHeader::from_constructor::<$crate::PluginModRef>(
                    erased,
                    $crate::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exported_symbol_is_the_one_abi_stable_reads() {
        assert_eq!(
            super::ROOT_MODULE_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }

    #[test]
    fn a_blank_text_argument_is_refused_naming_it_and_quoting_at_most_200_characters() {
        assert_eq!(super::non_empty("prompt", "go".into()), Ok("go".to_owned()));
        assert_eq!(
            super::non_empty("prompt", "  ".into())
                .unwrap_err()
                .text
                .as_str(),
            "Error: invalid prompt: expected a non-empty string, got \"  \""
        );
        let long = super::non_empty("command", " ".repeat(5000)).unwrap_err();
        assert!(long.text.len() < 300, "{}", long.text);
    }

    #[test]
    fn a_positive_config_key_defaults_when_absent_and_names_itself_when_bad() {
        let config = serde_json::json!({"grace_ms": 500, "zero": 0, "text": "5", "neg": -1});
        let get = |key| super::positive_config(&config, "bash", key, 7);
        assert_eq!(get("grace_ms"), Ok(500));
        assert_eq!(get("absent"), Ok(7));
        assert_eq!(
            get("zero"),
            Err("bash: zero must be a positive integer, got 0".to_owned())
        );
        assert_eq!(
            get("text"),
            Err("bash: text must be a positive integer, got \"5\"".to_owned())
        );
        assert!(get("neg").is_err());
    }
}
