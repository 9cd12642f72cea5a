//! The boundary objects the SDK makes of a plugin's plain Rust values: every method runs the plugin's
//! code under `catch_unwind` (a panic through an abi_stable object would abort the host).

use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, ROption, RResult, RStr, RString};

use super::plugin::{Handler, Output, Plugin, TaskControl, TaskHandle, contained};
use crate::ffi::*;

pub(crate) struct ToolGlue<T>(pub(crate) T);

impl<T: Handler> ToolHandler for ToolGlue<T> {
    fn call(&self, call: ToolCall) -> ToolResult {
        contained("tool call", || self.0.call(&call)).unwrap_or_else(ToolResult::error)
    }
}

pub(crate) struct StarterGlue<C, F>(
    pub(crate) Option<F>,
    pub(crate) Output,
    pub(crate) std::marker::PhantomData<fn() -> C>,
);

impl<C: TaskControl, F: FnOnce(TaskHandle) -> Result<C, String> + Send + 'static> Starter
    for StarterGlue<C, F>
{
    fn run(&mut self, completion: CompletionBox) -> RResult<HooksBox, RString> {
        let Some(start) = self.0.take() else {
            return RErr("task starter called twice".into());
        };
        let handle = TaskHandle(Arc::new(completion));
        match contained("task starter", || start(handle)) {
            Ok(Ok(control)) => {
                let glue = HooksGlue {
                    control,
                    stream: self.1 == Output::Stream,
                    pending: String::new(),
                };
                ROk(Hooks_TO::from_value(glue, TD_Opaque))
            }
            Ok(Err(e)) | Err(e) => RErr(e.into()),
        }
    }
}

pub(crate) struct HooksGlue<C> {
    control: C,
    stream: bool,
    /// Output read from the control and not yet handed to a read: what a peek took.
    pending: String,
}

impl<C: TaskControl> Hooks for HooksGlue<C> {
    fn cancel(&mut self, reason: ROption<RStr<'_>>) -> RResult<(), RString> {
        let reason = reason.into_option().map(|r| r.as_str().to_owned());
        match contained("cancel", || self.control.cancel(reason.as_deref())) {
            Ok(Ok(())) => ROk(()),
            Ok(Err(e)) | Err(e) => RErr(e.into()),
        }
    }

    fn is_stream(&self) -> bool {
        self.stream
    }

    fn read(&mut self) -> RString {
        self.take_output();
        std::mem::take(&mut self.pending).into()
    }

    fn takes_input(&self) -> bool {
        contained("takes_input", || self.control.takes_input()).unwrap_or(false)
    }

    fn write(&mut self, input: RStr<'_>, eof: bool) -> RResult<(), RString> {
        match contained("input writer", || self.control.write(input.as_str(), eof)) {
            Ok(Ok(())) => ROk(()),
            Ok(Err(e)) | Err(e) => RErr(e.into()),
        }
    }

    /// The control's reads are consuming, so a peek reads into the pending text the next read
    /// returns: nothing is lost, and the control needs no peek of its own.
    fn peek(&mut self) -> RString {
        self.take_output();
        self.pending.as_str().into()
    }
}

impl<C: TaskControl> HooksGlue<C> {
    /// Appends the control's new output to the pending text.
    fn take_output(&mut self) {
        match contained("output reader", || self.control.read()) {
            Ok(Some(delta)) => self.pending.push_str(&delta),
            Ok(None) => {}
            Err(e) => self.pending.push_str(&format!("[{e}]")),
        }
    }
}

pub(crate) struct ListenerGlue<F>(pub(crate) F);

impl<F: Fn(FfiSnapshot) + Send + Sync + 'static> Listener for ListenerGlue<F> {
    fn task_done(&self, snapshot: FfiSnapshot) {
        let _ = contained("listener", || (self.0)(snapshot));
    }
}

pub(crate) struct WorkerGlue<F>(pub(crate) Option<F>, pub(crate) Arc<HostBox>);

impl<F: FnOnce() + Send + 'static> Worker for WorkerGlue<F> {
    fn run(&mut self) {
        if let Some(work) = self.0.take()
            && let Err(e) = contained("worker", work)
        {
            self.1.log(Level::Error, "plugin".into(), e.as_str().into());
        }
    }
}

pub(crate) struct PluginGlue<P>(pub(crate) P);

impl<P: Plugin> PluginInstance for PluginGlue<P> {
    fn prompt_section(&self) -> RString {
        contained("prompt_section", || self.0.prompt_section())
            .unwrap_or_default()
            .into()
    }

    fn dispose(&self) {
        let _ = contained("dispose", || self.0.dispose());
    }
}
