//! The part of a generation's host handle that serves people's views and says who asks: the
//! caller's agent (an overseer for a view that shows every owner), a task's kept output tail, the
//! records, the owners' names, a task's details, and the host's status (plugins and health). The
//! [`HostApi`](taskhost_abi::HostApi) methods call these.

use std::collections::BTreeMap;

use taskhost_abi::abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};

use taskhost_abi::HostError;
use taskhost_abi::sdk::http::EVERY_OWNER;
use taskhost_process::OwnerBounds;
use taskhost_registry::{Agent, TaskSnapshot};
use taskhost_store::TaskRecord;

use super::host_api::GenHost;
use super::host_error::{host_error, internal};
use crate::owner_names;

impl GenHost {
    /// The caller's agent for authorization: the open session's agent, or a stand-in carrying the
    /// session id (authorization compares sessions), or none for an empty caller.
    pub(super) fn caller(&self, caller: RStr<'_>) -> Option<Agent> {
        let id = caller.as_str();
        if id.is_empty() {
            return None;
        }
        if id == EVERY_OWNER {
            return Some(Agent::overseer(id));
        }
        Some(
            self.services()
                .sessions
                .agent(id)
                .unwrap_or_else(|| Agent::new(id, id)),
        )
    }

    /// Task `id` as `caller` may see it: its live snapshot, if it is live here, and its record, if
    /// the state holds one. A task only the records hold (an earlier host's, past those brought
    /// back) is its owner's to see, as a live one is.
    fn visible(
        &self,
        caller: RStr<'_>,
        id: &str,
    ) -> Result<(Option<TaskSnapshot>, Option<TaskRecord>), HostError> {
        let owner = caller.as_str();
        let agent = self.caller(caller);
        let services = self.services();
        let known = services.registry.get(id, agent.as_ref());
        let Some(state) = &services.state else {
            return known.map(|t| (Some(t), None)).map_err(|e| host_error(&e));
        };
        let record = state.task(id).map_err(internal)?;
        let every = owner == EVERY_OWNER;
        let own_record = record
            .as_ref()
            .is_some_and(|r| every || !owner.is_empty() && r.owner.as_deref() == Some(owner));
        match known {
            Err(taskhost_registry::RegistryError::UnknownTask(_)) if own_record => {
                Ok((None, record))
            }
            Err(e) => Err(host_error(&e)),
            Ok(task) => Ok((Some(task), record)),
        }
    }

    pub(super) fn kept_tail(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        max_bytes: u64,
        drawn: taskhost_process::Drawn,
    ) -> RResult<RString, HostError> {
        let (state, record) = match (&self.services().state, self.visible(caller, id.as_str())) {
            (_, Err(e)) => return RErr(e),
            (Some(state), Ok((_, Some(record)))) => (state, record),
            _ => return ROk(RString::new()),
        };
        match state.kept_tail_drawn(&record, max_bytes, [0, 0], drawn) {
            Ok(text) => ROk(text.into()),
            Err(e) => RErr(internal(format!("task {id}'s kept output: {e}"))),
        }
    }

    pub(super) fn names_json(&self, caller: RStr<'_>, owners_json: RStr<'_>) -> RString {
        let caller = caller.as_str();
        let every = caller == EVERY_OWNER;
        let ids: Vec<String> = serde_json::from_str(owners_json.as_str()).unwrap_or_default();
        let ids = ids
            .iter()
            .map(String::as_str)
            .filter(|id| every || !caller.is_empty() && *id == caller);
        let services = self.services();
        let principals = services.state.as_ref().map_or_else(BTreeMap::new, |state| {
            state.principals().map_or_else(
                |e| {
                    tracing::warn!(error = %e, "cannot read the principals' names");
                    BTreeMap::new()
                },
                |all| all.into_iter().map(|p| (p.owner, p.name)).collect(),
            )
        });
        let names = owner_names::names(ids, &principals, |id| services.sessions.client_name(id));
        serde_json::json!({ "names": names }).to_string().into()
    }

    pub(super) fn details_json(&self, caller: RStr<'_>, id: RStr<'_>) -> RString {
        let Ok((task, record)) = self.visible(caller, id.as_str()) else {
            return "{}".into();
        };
        let services = self.services();
        let owner = task
            .as_ref()
            .and_then(|t| t.owner_session.as_ref().map(ToString::to_string))
            .or_else(|| record.as_ref().and_then(|r| r.owner.clone()));
        let bounds = match (&services.policies, &owner) {
            (Some(policies), Some(owner)) => policies.bounds_of(owner).ok().flatten(),
            _ => None,
        };
        let running = services.facts.running(id.as_str());
        let kill = services.facts.kill_of(id.as_str());
        let output_bytes = services
            .state
            .as_ref()
            .zip(record.as_ref())
            .map(|(state, r)| {
                let dir = state.output_dir().through();
                [&r.stdout_path, &r.stderr_path]
                    .into_iter()
                    .flatten()
                    .filter_map(|name| std::fs::metadata(dir.join(name)).ok())
                    .map(|m| m.len())
                    .sum::<u64>()
            });
        serde_json::json!({
            "id": id.as_str(),
            "owner": owner,
            "bounds": bounds.map(|b| serde_json::json!({
                "policy": b.policy, "write": b.write, "filesystem": b.filesystem,
                "git_writable": b.git_writable, "network": b.network, "memory_max": b.memory_max,
                "pids_max": b.pids_max, "cpu_max_millis": b.cpu_max_millis,
            })),
            "ahead": services.queue.ahead_of(id.as_str()),
            "output_bytes": output_bytes,
            "pid": running.as_ref().and_then(|r| r.0),
            "cwd": running.and_then(|r| r.1).map(|c| c.display().to_string()),
            "killed_by": kill.map(|k| serde_json::json!({"by": k.by, "reason": k.reason})),
        })
        .to_string()
        .into()
    }

    pub(super) fn records_json(&self, caller: RStr<'_>, limit: u64) -> RString {
        let owner = caller.as_str();
        let state = self.services().state.clone();
        let read = match state {
            Some(state) if owner == EVERY_OWNER => state.newest_tasks(None, limit),
            Some(state) if !owner.is_empty() => state.newest_tasks(Some(owner), limit),
            _ => Ok(Vec::new()),
        };
        let records = read.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the task records");
            Vec::new()
        });
        // A task this host holds is listed live; its record would only be sent to be dropped.
        let registry = &self.services().registry;
        let wanted: std::collections::HashSet<&str> = registry
            .not_held(records.iter().map(|r| r.id.as_str()))
            .into_iter()
            .collect();
        let rows: Vec<serde_json::Value> = records
            .iter()
            .filter(|r| wanted.contains(r.id.as_str()))
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
