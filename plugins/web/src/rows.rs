//! A task as the page shows it: one row of JSON, and a fingerprint that changes when the row does.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::http::Viewer;

/// The owner a row shows: by name when it is the viewer's own, by id otherwise (until [`named`]
/// names it), empty for none.
fn shown_owner(owner: Option<&str>, viewer: &Viewer) -> String {
    match owner {
        Some(o) if o == viewer.owner => viewer.name.clone(),
        Some(o) => o.to_owned(),
        None => String::new(),
    }
}

/// Names the owners of `rows` the host knows a name of (a principal's, a session's client's) in
/// place of their ids; each row keeps its owner's id in `owner_id`. An overseer's rows alone
/// have owners other than the viewer, so only they are asked about.
pub(crate) fn named(host: &Host, viewer: &Viewer, rows: &mut [Value]) {
    if !viewer.all_owners || rows.is_empty() {
        return;
    }
    let ids: std::collections::BTreeSet<&str> = rows
        .iter()
        .filter_map(|r| r["owner_id"].as_str())
        .filter(|id| !id.is_empty() && *id != viewer.owner)
        .collect();
    if ids.is_empty() {
        return;
    }
    let ids: Vec<&str> = ids.into_iter().collect();
    let names = host.owner_names(viewer.caller(), &ids);
    for row in rows.iter_mut() {
        let name = row["owner_id"]
            .as_str()
            .and_then(|id| names.get(id))
            .cloned();
        if let Some(name) = name {
            row["owner"] = Value::String(name);
        }
    }
}

/// The row of `task` for `viewer`.
pub(crate) fn row(task: &FfiSnapshot, viewer: &Viewer) -> Value {
    let owner = shown_owner(task.owner(), viewer);
    json!({
        "id": task.id.as_str(),
        "kind": task.kind.as_str(),
        "command": task.label.as_str(),
        "owner": owner,
        "owner_id": task.owner().unwrap_or_default(),
        "status": task.status.as_str(),
        "detail": task.detail(),
        "started_at_ms": task.started_at_ms,
        "finished_at_ms": task.finished_at_ms.into_option(),
    })
}

/// The row of a record only the state directory holds (a task of an earlier host that was not
/// brought back), shaped as [`row`]'s; `expired` when retention removed its output.
pub(crate) fn record_row(record: &Value, viewer: &Viewer) -> Value {
    let owner = shown_owner(record["owner"].as_str(), viewer);
    json!({
        "id": record["id"],
        "kind": record["kind"],
        "command": record["label"],
        "owner": owner,
        "owner_id": record["owner"].as_str().unwrap_or_default(),
        "status": record["status"],
        "detail": record["detail"],
        "started_at_ms": record["started_at_ms"],
        "finished_at_ms": record["finished_at_ms"],
        "expired": !record["expired_at_ms"].is_null(),
    })
}

/// The rows of the viewer's live tasks, then those of its records no live task has.
pub(crate) fn with_records(host: &Host, live: &[FfiSnapshot], viewer: &Viewer) -> Vec<Value> {
    let mut rows: Vec<Value> = live.iter().map(|t| row(t, viewer)).collect();
    rows.extend(record_rows(host, live, viewer));
    named(host, viewer, &mut rows);
    rows
}

/// The rows of the viewer's settled records that no task in `live` has, newest `RECORDS_MAX`
/// records looked at.
pub(crate) fn record_rows(host: &Host, live: &[FfiSnapshot], viewer: &Viewer) -> Vec<Value> {
    let known: std::collections::HashSet<&str> = live.iter().map(|t| t.id.as_str()).collect();
    host.task_records(viewer.caller(), RECORDS_MAX)
        .iter()
        // A record of a task still starting or running is this host's (then live, or about to
        // be: listed next step) or another live host's: only settled records are history.
        .filter(|r| {
            !matches!(
                r["status"].as_str(),
                Some("starting" | "queued" | "running" | "stopping")
            )
        })
        .filter(|r| r["id"].as_str().is_some_and(|id| !known.contains(id)))
        .map(|r| record_row(r, viewer))
        .collect()
}

/// The task a page shows when its person chose none: the newest running one, else the newest (by
/// start, then id), as the page's own `newest()` picks among the rows it holds.
pub(crate) fn newest(rows: &[Value]) -> Option<String> {
    let key = |r: &Value| {
        (
            r["status"] == "running",
            r["started_at_ms"].as_u64().unwrap_or(0),
            r["id"].as_str().unwrap_or_default().to_owned(),
        )
    };
    rows.iter()
        .filter(|r| r["id"].is_string())
        .max_by_key(|r| key(r))
        .and_then(|r| r["id"].as_str().map(str::to_owned))
}

/// How many records a page looks at, newest first.
pub(crate) const RECORDS_MAX: u64 = 20_000;

/// A fingerprint of what a row shows that can change (status, detail, end).
pub(crate) fn fingerprint(task: &FfiSnapshot) -> u64 {
    let mut h = DefaultHasher::new();
    task.status.as_str().hash(&mut h);
    task.detail().hash(&mut h);
    task.finished_at_ms.into_option().hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::newest;
    use taskhost_abi::prelude::*;

    #[test]
    fn the_newest_running_task_is_chosen_else_the_newest() {
        let row = |id: &str, status: &str, at: u64| json!({"id": id, "status": status, "started_at_ms": at});
        let rows = [
            row("bash-1", "running", 10),
            row("bash-2", "completed", 30),
            row("bash-3", "running", 20),
        ];
        assert_eq!(newest(&rows).as_deref(), Some("bash-3"));
        assert_eq!(newest(&rows[1..2]).as_deref(), Some("bash-2"));
        assert_eq!(newest(&[]), None);
    }
}
