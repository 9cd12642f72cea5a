//! The part of a generation's host handle that serves people's views and says who asks: the
//! caller's agent (an overseer for a view that shows every owner), a task's kept output tail, the
//! records, and the host's status (plugins and health). The [`HostApi`](taskhost_abi::HostApi) methods call
//! these.

use taskhost_abi::abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};

use taskhost_abi::HostError;
use taskhost_registry::Agent;

use super::host_api::GenHost;
use super::host_error::{host_error, internal};

impl GenHost {
    /// The caller's agent for authorization: the open session's agent, or a stand-in carrying the
    /// session id (authorization compares sessions), or none for an empty caller.
    pub(super) fn caller(&self, caller: RStr<'_>) -> Option<Agent> {
        let id = caller.as_str();
        if id.is_empty() {
            return None;
        }
        if id == taskhost_abi::sdk::http::EVERY_OWNER {
            return Some(Agent::overseer(id));
        }
        Some(
            self.services()
                .sessions
                .agent(id)
                .unwrap_or_else(|| Agent::new(id, id)),
        )
    }

    pub(super) fn kept_tail(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        max_bytes: u64,
        drawn: taskhost_process::Drawn,
    ) -> RResult<RString, HostError> {
        let owner = caller.as_str();
        let caller = self.caller(caller);
        let services = self.services();
        let known = services.registry.get(id.as_str(), caller.as_ref());
        let Some(state) = &services.state else {
            return known.map_or_else(|e| RErr(host_error(&e)), |_| ROk(RString::new()));
        };
        let record = match state.task(id.as_str()) {
            Ok(record) => record,
            Err(e) => return RErr(internal(e)),
        };
        // A task only the records hold (an earlier host's, past those brought back) is its
        // owner's to read, as a live one is.
        let every = owner == taskhost_abi::sdk::http::EVERY_OWNER;
        let own_record = record
            .as_ref()
            .is_some_and(|r| every || !owner.is_empty() && r.owner.as_deref() == Some(owner));
        match known {
            Err(taskhost_registry::RegistryError::UnknownTask(_)) if own_record => {}
            Err(e) => return RErr(host_error(&e)),
            Ok(_) => {}
        }
        match record {
            Some(record) => match state.kept_tail_drawn(&record, max_bytes, [0, 0], drawn) {
                Ok(text) => ROk(text.into()),
                Err(e) => RErr(internal(format!("task {id}'s kept output: {e}"))),
            },
            None => ROk(RString::new()),
        }
    }

    pub(super) fn records_json(&self, caller: RStr<'_>, limit: u64) -> RString {
        let owner = caller.as_str();
        let state = self.services().state.clone();
        let read = match state {
            Some(state) if owner == taskhost_abi::sdk::http::EVERY_OWNER => {
                state.newest_tasks(None, limit)
            }
            Some(state) if !owner.is_empty() => state.newest_tasks(Some(owner), limit),
            _ => Ok(Vec::new()),
        };
        let records = read.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the task records");
            Vec::new()
        });
        let rows: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id, "kind": r.kind, "label": r.label, "owner": r.owner,
                    "status": r.status, "detail": r.detail, "started_at_ms": r.started_at_ms,
                    "finished_at_ms": r.finished_at_ms, "expired_at_ms": r.expired_at_ms,
                })
            })
            .collect();
        serde_json::json!({ "records": rows }).to_string().into()
    }

    pub(super) fn status_json(&self) -> RString {
        let source = self.shared.status.read().clone();
        source
            .map_or_else(|| "{}".to_owned(), |s| s().to_string())
            .into()
    }
}
