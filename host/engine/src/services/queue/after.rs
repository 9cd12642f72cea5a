//! Tasks that run after others (`after: ["bash-3"]`, pueue's `--after`): which ids a start may
//! name, checked before it is recorded, and the wait for them to end.

use taskhost_common::wording;
use taskhost_registry::{Agent, Registry, TaskId, TaskStatus};

use crate::services::DeclareError;

/// Refuses `after` unless each id is a task its owner `caller` may reach (an unknown id and one of
/// another owner read alike: `unknown task X`); returns the ids, each once, in the order given.
///
/// No cycle can form: a task may name only tasks that exist already, each of which named its own
/// before this one existed. Naming itself, or a later task, is naming an unknown one.
pub(super) fn checked(
    registry: &Registry,
    after: &[String],
    caller: Option<&Agent>,
) -> Result<Vec<TaskId>, DeclareError> {
    let mut ids: Vec<TaskId> = Vec::new();
    for id in after {
        match registry.get(id, caller) {
            Ok(snapshot) if !ids.contains(&snapshot.id) => ids.push(snapshot.id),
            Ok(_) => {}
            Err(e) => {
                return Err(DeclareError::Refused(format!(
                    "after: {e} (a task waits only for tasks that exist already, so no cycle can form)"
                )));
            }
        }
    }
    Ok(ids)
}

/// Waits until every task of `after` ended; `Err` with the detail the waiting task settles with
/// when one did not complete with exit 0 (or was dropped before it ended).
///
/// # Cancel safety
/// Dropping the future changes nothing.
pub(super) async fn ended(registry: &Registry, after: &[TaskId]) -> Result<(), String> {
    for id in after {
        let Some(end) = registry.ended(id.as_str()).await else {
            return Err(wording::not_run_after(id.as_str(), "it is gone"));
        };
        let exit_zero = matches!(end.detail.as_deref(), None | Some("exit code: 0"));
        if end.status != TaskStatus::Completed || !exit_zero {
            let how = match &end.detail {
                Some(d) => format!("{}, {d}", end.status),
                None => end.status.to_string(),
            };
            return Err(wording::not_run_after(id.as_str(), &how));
        }
    }
    Ok(())
}
