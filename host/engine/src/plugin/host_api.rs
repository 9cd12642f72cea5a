//! The host handle each generation receives: the plugin's only way to reach the registry, the tool
//! table, the services and logs. A pure adapter: each method converts the plugin's values
//! (`requests`), makes one call of a service or of the loader's tables, and converts the answer back
//! (`convert`).

use parking_lot::Mutex;
use std::sync::{Arc, Weak};

use taskhost_abi::abi_stable::sabi_trait::TD_Opaque;
use taskhost_abi::abi_stable::std_types::{RErr, ROk, ROption, RResult, RStr, RString, RVec};
use taskhost_abi::{
    Completion_TO, FfiKill, FfiOutcome, FfiRead, FfiSnapshot, HostApi, Level, ListenerBox,
    McpHandlerBox, McpItemKind, StarterBox, TaskDecl, ToolHandlerBox, ToolSpec, WorkerBox,
};
use taskhost_abi::{
    ExternalRequest, ExternalResult, ExternalStarted, ProcessRequest, ProcessResult,
    SubagentRequest,
};
use taskhost_abi::{HostError, HostErrorKind};
use taskhost_registry::{ProducerError, SurfaceScope, TaskOutcome};

use super::call_scope::CallScope;
use super::generation::{GenBox, Generation, ToolEntry};
use super::host_error::{host_error, started};
use super::table::Shared;
use super::task_bridge::{HostCompletion, registry_hooks};
use super::{convert, requests};
use crate::services::Services;

/// The host side of one generation's handle. Holds its generation weakly (the plugin keeps the handle,
/// and the generation keeps the plugin).
pub(crate) struct GenHost {
    pub(crate) generation: Weak<Generation>,
    pub(crate) shared: Arc<Shared>,
}

pub(super) fn err(e: impl ToString) -> RString {
    RString::from(e.to_string())
}

impl GenHost {
    pub(super) fn services(&self) -> &Services {
        &self.shared.services
    }

    fn generation(&self) -> Result<Arc<Generation>, RString> {
        self.generation
            .upgrade()
            .ok_or_else(|| err("plugin generation is unloading"))
    }
}

impl HostApi for GenHost {
    fn register_tool(&self, spec: ToolSpec, handler: ToolHandlerBox) -> RResult<(), HostError> {
        let generation = match self.generation() {
            Ok(g) => g,
            Err(e) => return RErr(HostError::new(HostErrorKind::Unavailable, e)),
        };
        let schema: serde_json::Value = match serde_json::from_str(spec.input_schema_json.as_str())
        {
            Ok(v @ serde_json::Value::Object(_)) => v,
            _ => {
                return RErr(HostError::new(
                    HostErrorKind::Invalid,
                    format!("tool {}: the input schema is not a JSON object", spec.name),
                ));
            }
        };
        let entry = ToolEntry {
            name: spec.name.as_str().to_owned(),
            description: spec.description.as_str().to_owned(),
            input_schema: Arc::new(schema),
            mcp: Arc::new(serde_json::from_str(spec.mcp_json.as_str()).unwrap_or_default()),
            handler: Arc::new(GenBox::new(handler, generation.clone())),
        };
        match self.shared.add_tool(&generation, entry) {
            Ok(()) => ROk(()),
            Err(e) => RErr(HostError::new(HostErrorKind::Refused, e)),
        }
    }

    fn unregister_tool(&self, name: RStr<'_>) {
        if let Ok(generation) = self.generation() {
            self.shared.remove_tool(&generation, name.as_str());
        }
    }

    fn start_task(&self, decl: TaskDecl, starter: StarterBox) -> RResult<RString, HostError> {
        let generation = match self.generation() {
            Ok(g) => g,
            Err(e) => return RErr(HostError::new(HostErrorKind::Unavailable, e)),
        };
        let run = move || {
            let mut starter = starter;
            let (tx, rx) = tokio::sync::oneshot::channel();
            let completion =
                Completion_TO::from_value(HostCompletion(Mutex::new(Some(tx))), TD_Opaque);
            // The registry calls this on the thread that called start_task: one of the generation's.
            let started = starter.run(completion).into_result();
            drop(starter);
            match started {
                Ok(hooks) => Ok(registry_hooks(generation, hooks, rx)),
                Err(e) => Err(ProducerError(e.as_str().to_owned())),
            }
        };
        started(self.services().declare(&requests::declaration(&decl), run))
    }

    fn start_process_task(
        &self,
        decl: TaskDecl,
        request: ProcessRequest,
    ) -> RResult<RString, HostError> {
        started(self.services().start_process(
            &requests::declaration(&decl),
            requests::process_spec(&request),
        ))
    }

    fn start_subagent_task(
        &self,
        decl: TaskDecl,
        request: SubagentRequest,
    ) -> RResult<RString, HostError> {
        match requests::subagent_run(&request) {
            Ok(run) => started(
                self.services()
                    .start_subagent(&requests::declaration(&decl), run),
            ),
            Err(e) => RErr(HostError::new(HostErrorKind::Invalid, e)),
        }
    }

    fn start_external_task(
        &self,
        decl: TaskDecl,
        request: ExternalRequest,
    ) -> RResult<ExternalStarted, HostError> {
        let begun = self
            .services()
            .start_external(&requests::declaration(&decl), requests::external(&request))
            .map(|(task_id, external_id)| ExternalStarted {
                task_id: task_id.into(),
                external_id: external_id.into(),
            });
        started(begun)
    }

    fn run_subagent(&self, session: RStr<'_>, request: SubagentRequest) -> FfiOutcome {
        // Plugin code runs on generation threads, never on the runtime's, so blocking is sound.
        let outcome = match requests::subagent_run(&request) {
            Err(e) => TaskOutcome::failed(e),
            Ok(run) => self
                .services()
                .run_subagent(session.as_str(), run, CallScope::current()),
        };
        convert::outcome_to_ffi(&outcome)
    }

    fn run_external(&self, session: RStr<'_>, request: ExternalRequest) -> ExternalResult {
        // Plugin code runs on generation threads, never on the runtime's, so blocking is sound.
        convert::external(self.services().run_external(
            session.as_str(),
            requests::external(&request),
            &CallScope::current(),
        ))
    }

    fn run_process(
        &self,
        session: RStr<'_>,
        request: ProcessRequest,
        timeout_ms: u64,
    ) -> ProcessResult {
        let promote = request
            .promote_on_timeout
            .as_ref()
            .into_option()
            .map(requests::declaration);
        // Plugin code runs on generation threads, never on the runtime's, so blocking is sound.
        convert::foreground(self.services().run_foreground(
            session.as_str(),
            &requests::process_spec(&request),
            std::time::Duration::from_millis(timeout_ms.max(1)),
            promote.as_ref(),
            &CallScope::current(),
        ))
    }

    fn attach_surface(&self, name: RStr<'_>) -> u64 {
        let Ok(generation) = self.generation() else {
            return 0;
        };
        let registration = self
            .services()
            .registry
            .attach_surface(name.as_str(), SurfaceScope::Global);
        let key = self.shared.next_key();
        generation.state().surfaces.push((key, registration));
        key
    }

    fn detach_surface(&self, key: u64) {
        if let Ok(generation) = self.generation() {
            generation.state().surfaces.retain(|(k, _)| *k != key);
        }
    }

    fn get_task(&self, caller: RStr<'_>, id: RStr<'_>) -> RResult<FfiSnapshot, HostError> {
        let caller = self.caller(caller);
        match self.services().registry.get(id.as_str(), caller.as_ref()) {
            Ok(s) => ROk(convert::snapshot(&s)),
            Err(e) => RErr(host_error(&e)),
        }
    }

    fn list_tasks(&self, caller: RStr<'_>) -> RVec<FfiSnapshot> {
        let caller = self.caller(caller);
        self.services()
            .registry
            .list(caller.as_ref())
            .iter()
            .map(convert::snapshot)
            .collect()
    }

    fn read_task(&self, caller: RStr<'_>, id: RStr<'_>) -> RResult<FfiRead, HostError> {
        let caller = self.caller(caller);
        match self.services().registry.read(id.as_str(), caller.as_ref()) {
            Ok(r) => ROk(convert::read(r)),
            Err(e) => RErr(host_error(&e)),
        }
    }

    fn peek_task(&self, caller: RStr<'_>, id: RStr<'_>) -> RResult<FfiRead, HostError> {
        let caller = self.caller(caller);
        match self.services().registry.peek(id.as_str(), caller.as_ref()) {
            Ok(r) => ROk(convert::read(r)),
            Err(e) => RErr(host_error(&e)),
        }
    }

    fn write_task(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        input: RStr<'_>,
        eof: bool,
    ) -> RResult<(), HostError> {
        let caller = self.caller(caller);
        match self.services().registry.write(
            id.as_str(),
            caller.as_ref(),
            input.as_str().as_bytes(),
            eof,
        ) {
            Ok(()) => ROk(()),
            Err(e) => RErr(host_error(&e)),
        }
    }

    fn kill_task(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        reason: ROption<RStr<'_>>,
    ) -> RResult<FfiKill, HostError> {
        self.kill(
            caller,
            id.as_str(),
            reason.into_option().map(|r| r.as_str()),
        )
    }

    fn wait_task(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        timeout_ms: f64,
    ) -> RResult<FfiSnapshot, HostError> {
        let caller = self.caller(caller);
        // Plugin code runs on generation threads, never on the runtime's, so blocking here is sound.
        let waited = self
            .services()
            .runtime
            .block_on(self.services().registry.wait(
                id.as_str(),
                timeout_ms,
                caller.as_ref(),
                None,
            ));
        match waited {
            Ok(s) => ROk(convert::snapshot(&s)),
            Err(e) => RErr(host_error(&e)),
        }
    }

    fn wait_output(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        pattern: RStr<'_>,
        timeout_ms: f64,
    ) -> RResult<FfiSnapshot, HostError> {
        let pattern = match regex::Regex::new(pattern.as_str()) {
            Ok(p) => p,
            Err(e) => {
                return RErr(HostError::new(
                    HostErrorKind::Invalid,
                    taskhost_common::invalid_wait_for(pattern.as_str(), &e),
                ));
            }
        };
        let caller = self.caller(caller);
        // Plugin code runs on generation threads, never on the runtime's, so blocking here is sound.
        let waited = self
            .services()
            .runtime
            .block_on(self.services().registry.wait_for_output(
                id.as_str(),
                timeout_ms,
                caller.as_ref(),
                None,
                |text| pattern.is_match(text),
            ));
        match waited {
            Ok(s) => ROk(convert::snapshot(&s)),
            Err(e) => RErr(host_error(&e)),
        }
    }

    fn on_task_done(&self, listener: ListenerBox) -> u64 {
        let Ok(generation) = self.generation() else {
            return 0;
        };
        let key = self.shared.next_key();
        self.shared
            .add_listener(key, Arc::new(GenBox::new(listener, generation)));
        key
    }

    fn remove_listener(&self, key: u64) {
        self.shared.remove_listener(key);
    }

    fn notify(&self, session: RStr<'_>, task: RStr<'_>, text: RStr<'_>) {
        let task = (!task.is_empty()).then(|| task.as_str());
        self.services()
            .sessions
            .notify(session.as_str(), task, text.as_str());
    }

    fn log(&self, level: Level, target: RStr<'_>, message: RStr<'_>) {
        self.write_log(level, target.as_str(), message.as_str());
    }

    fn spawn_worker(&self, worker: WorkerBox) {
        self.run_worker(worker);
    }

    fn config_json(&self) -> RString {
        self.generation
            .upgrade()
            .map_or_else(|| "{}".into(), |g| g.config_json.as_str().into())
    }

    fn register_item(
        &self,
        kind: McpItemKind,
        spec_json: RString,
        handler: McpHandlerBox,
    ) -> RResult<(), HostError> {
        self.add_item(kind, &spec_json, handler)
    }

    fn unregister_item(&self, kind: McpItemKind, key: RStr<'_>) {
        self.drop_item(kind, key);
    }

    fn list_changed(&self, kind: McpItemKind) {
        self.tell_list_changed(kind);
    }

    fn resource_updated(&self, uri: RStr<'_>) {
        self.tell_resource_updated(uri);
    }

    fn call_log(&self, level: RStr<'_>, logger: RStr<'_>, data_json: RStr<'_>) {
        self.log_to_client(level, logger, data_json);
    }

    fn call_progress(&self, progress: f64, total: ROption<f64>, message: RStr<'_>) {
        self.progress_to_client(progress, total, message);
    }

    fn call_ask(&self, method: RStr<'_>, params_json: RStr<'_>) -> RResult<RString, HostError> {
        self.ask_client(method, params_json)
    }

    fn task_tail(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        max_bytes: u64,
    ) -> RResult<RString, HostError> {
        self.kept_tail(caller, id, max_bytes, taskhost_process::Drawn::Plain)
    }

    fn task_tail_coloured(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        max_bytes: u64,
    ) -> RResult<RString, HostError> {
        self.kept_tail(caller, id, max_bytes, taskhost_process::Drawn::Coloured)
    }

    fn host_status_json(&self) -> RString {
        self.status_json()
    }

    fn task_records_json(&self, caller: RStr<'_>, limit: u64) -> RString {
        self.records_json(caller, limit)
    }

    fn owner_names_json(&self, caller: RStr<'_>, owners_json: RStr<'_>) -> RString {
        self.names_json(caller, owners_json)
    }

    fn task_details_json(&self, caller: RStr<'_>, id: RStr<'_>) -> RString {
        self.details_json(caller, id)
    }

    fn call_ask_all(&self, requests_json: RStr<'_>) -> RResult<RString, HostError> {
        self.ask_client_all(requests_json)
    }
}
