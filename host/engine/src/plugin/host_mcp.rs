//! The part of a generation's host handle that reaches MCP clients: registering prompts, resources
//! and templates, saying a list or a resource changed, and what a tool call does with its client
//! (log, progress, ask). The [`HostApi`](taskhost_abi::HostApi) methods call these.

use std::sync::Arc;

use taskhost_abi::abi_stable::std_types::{RErr, ROk, ROption, RResult, RStr, RString};
use taskhost_abi::{McpHandlerBox, McpItemKind};

use super::call_scope::CallScope;
use super::generation::GenBox;
use super::generation::ItemEntry;
use super::host_api::GenHost;
use taskhost_abi::{HostError, HostErrorKind};

/// Why a call cannot ask its client: it has none.
const NO_CLIENT: &str = "this call has no MCP client to ask";

/// A refusal for want of what the request needs.
fn unavailable(message: &str) -> HostError {
    HostError::new(HostErrorKind::Unavailable, message)
}

impl GenHost {
    pub(super) fn add_item(
        &self,
        kind: McpItemKind,
        spec: &RString,
        handler: McpHandlerBox,
    ) -> RResult<(), HostError> {
        let generation = match self.generation.upgrade() {
            Some(g) => g,
            None => return RErr(unavailable("plugin generation is unloading")),
        };
        let handler = Arc::new(GenBox::new(handler, generation.clone()));
        let entry = match ItemEntry::new(kind, spec.as_str(), handler) {
            Ok(entry) => entry,
            Err(e) => return RErr(HostError::new(HostErrorKind::Invalid, e)),
        };
        match self.shared.add_item(&generation, entry) {
            Ok(()) => ROk(()),
            Err(e) => RErr(HostError::new(HostErrorKind::Refused, e)),
        }
    }

    pub(super) fn drop_item(&self, kind: McpItemKind, key: RStr<'_>) {
        if let Some(generation) = self.generation.upgrade() {
            self.shared.remove_item(&generation, kind, key.as_str());
        }
    }

    pub(super) fn tell_list_changed(&self, kind: McpItemKind) {
        self.shared.fire_list_changed(kind);
    }

    pub(super) fn tell_resource_updated(&self, uri: RStr<'_>) {
        self.shared.fire_resource_updated(uri.as_str());
    }

    pub(super) fn log_to_client(&self, level: RStr<'_>, logger: RStr<'_>, data: RStr<'_>) {
        if let Some(client) = CallScope::current().client {
            let data = serde_json::from_str(data.as_str())
                .unwrap_or_else(|_| serde_json::Value::String(data.as_str().to_owned()));
            client.log(level.as_str(), logger.as_str(), data);
        }
    }

    pub(super) fn progress_to_client(&self, progress: f64, total: ROption<f64>, message: RStr<'_>) {
        if let Some(client) = CallScope::current().client {
            client.progress(progress, total.into_option(), message.as_str());
        }
    }

    pub(super) fn ask_client_all(&self, requests: RStr<'_>) -> RResult<RString, HostError> {
        let call = CallScope::current();
        let Some(client) = call.client else {
            return RErr(unavailable(NO_CLIENT));
        };
        let Ok(serde_json::Value::Object(requests)) = serde_json::from_str(requests.as_str())
        else {
            return RErr(HostError::new(
                HostErrorKind::Invalid,
                "the requests are not a JSON object of key to request",
            ));
        };
        match client.ask_all(requests, &call.cancel) {
            Ok(answers) => ROk(serde_json::Value::Object(answers).to_string().into()),
            Err(e) => RErr(HostError::new(HostErrorKind::Refused, e)),
        }
    }

    pub(super) fn ask_client(
        &self,
        method: RStr<'_>,
        params: RStr<'_>,
    ) -> RResult<RString, HostError> {
        let call = CallScope::current();
        let Some(client) = call.client else {
            return RErr(unavailable(NO_CLIENT));
        };
        let params = match serde_json::from_str(params.as_str()) {
            Ok(p) => p,
            Err(e) => {
                return RErr(HostError::new(
                    HostErrorKind::Invalid,
                    format!("the request's params are not JSON: {e}"),
                ));
            }
        };
        match client.ask(method.as_str(), params, &call.cancel) {
            Ok(answer) => ROk(answer.to_string().into()),
            Err(e) => RErr(HostError::new(HostErrorKind::Refused, e)),
        }
    }
}
