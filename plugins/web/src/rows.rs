//! A task as the page shows it: one row of JSON, and a fingerprint that changes when the row does.

use std::borrow::Cow;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::http::Viewer;

/// One row of the page's list, borrowed from the task or record it shows; serialized straight
/// into the event's text (10,000 rows built as JSON values cost more than listing the tasks).
#[derive(Debug, taskhost_abi::serde::Serialize)]
#[serde(crate = "taskhost_abi::serde")]
pub(crate) struct Row<'a> {
    pub(crate) id: Cow<'a, str>,
    kind: Cow<'a, str>,
    command: Cow<'a, str>,
    /// The owner's name where known, else its id; empty for none.
    owner: Cow<'a, str>,
    owner_id: Cow<'a, str>,
    pub(crate) status: Cow<'a, str>,
    detail: Option<Cow<'a, str>>,
    pub(crate) started_at_ms: u64,
    finished_at_ms: Option<u64>,
    /// A record's alone: whether retention removed its output.
    #[serde(skip_serializing_if = "Option::is_none")]
    expired: Option<bool>,
}

/// The owner a row shows: by name when it is the viewer's own, by id otherwise (until [`named`]
/// names it), empty for none.
fn shown_owner<'a>(owner: Option<&'a str>, viewer: &Viewer) -> Cow<'a, str> {
    match owner {
        Some(o) if o == viewer.owner => Cow::Owned(viewer.name.clone()),
        Some(o) => Cow::Borrowed(o),
        None => Cow::Borrowed(""),
    }
}

/// Names the owners of `rows` the host knows a name of (a principal's, a session's client's) in
/// place of their ids; each row keeps its owner's id in `owner_id`. An overseer's rows alone
/// have owners other than the viewer, so only they are asked about.
pub(crate) fn named(host: &Host, viewer: &Viewer, rows: &mut [Row<'_>]) {
    if !viewer.all_owners || rows.is_empty() {
        return;
    }
    let ids: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r.owner_id.as_ref())
        .filter(|id| !id.is_empty() && *id != viewer.owner)
        .collect();
    if ids.is_empty() {
        return;
    }
    let ids: Vec<&str> = ids.into_iter().collect();
    let names = host.owner_names(viewer.caller(), &ids);
    for row in rows.iter_mut() {
        if let Some(name) = names.get(row.owner_id.as_ref()) {
            row.owner = Cow::Owned(name.clone());
        }
    }
}

/// The row of `task` for `viewer`.
pub(crate) fn row<'a>(task: &'a FfiSnapshot, viewer: &Viewer) -> Row<'a> {
    Row {
        id: Cow::Borrowed(task.id.as_str()),
        kind: Cow::Borrowed(task.kind.as_str()),
        command: Cow::Borrowed(task.label.as_str()),
        owner: shown_owner(task.owner(), viewer),
        owner_id: Cow::Borrowed(task.owner().unwrap_or_default()),
        status: Cow::Borrowed(task.status.as_str()),
        detail: task.detail().map(Cow::Borrowed),
        started_at_ms: task.started_at_ms,
        finished_at_ms: task.finished_at_ms.into_option(),
        expired: None,
    }
}

/// The row of a record only the state directory holds (a task of an earlier host that was not
/// brought back), shaped as [`row`]'s; `expired` when retention removed its output.
pub(crate) fn record_row<'a>(record: &'a Value, viewer: &Viewer) -> Row<'a> {
    let text = |key: &str| Cow::Borrowed(record[key].as_str().unwrap_or_default());
    Row {
        id: text("id"),
        kind: text("kind"),
        command: text("label"),
        owner: shown_owner(record["owner"].as_str(), viewer),
        owner_id: text("owner"),
        status: text("status"),
        detail: record["detail"].as_str().map(Cow::Borrowed),
        started_at_ms: record["started_at_ms"].as_u64().unwrap_or(0),
        finished_at_ms: record["finished_at_ms"].as_u64(),
        expired: Some(!record["expired_at_ms"].is_null()),
    }
}

/// The rows of the viewer's live tasks, then those of its `records` no live task has.
pub(crate) fn with_records<'a>(
    host: &Host,
    live: &'a [FfiSnapshot],
    records: &'a [Value],
    viewer: &Viewer,
) -> Vec<Row<'a>> {
    let mut rows: Vec<Row<'a>> = live.iter().map(|t| row(t, viewer)).collect();
    rows.extend(record_rows(records, live, viewer));
    named(host, viewer, &mut rows);
    rows
}

/// The records a page looks at: of the viewer's newest `RECORDS_MAX`, those of tasks the host
/// does not hold (those it holds are listed live).
pub(crate) fn records(host: &Host, viewer: &Viewer) -> Vec<Value> {
    host.task_records(viewer.caller(), RECORDS_MAX)
}

/// The rows of the settled `records` that no task in `live` has.
pub(crate) fn record_rows<'a>(
    records: &'a [Value],
    live: &[FfiSnapshot],
    viewer: &Viewer,
) -> Vec<Row<'a>> {
    let known: std::collections::HashSet<&str> = live.iter().map(|t| t.id.as_str()).collect();
    records
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
pub(crate) fn newest(rows: &[Row<'_>]) -> Option<String> {
    rows.iter()
        .filter(|r| !r.id.is_empty())
        .max_by_key(|r| (r.status == "running", r.started_at_ms, r.id.as_ref()))
        .map(|r| r.id.clone().into_owned())
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
    use super::{Row, newest, record_row};
    use taskhost_abi::prelude::*;
    use taskhost_abi::sdk::http::Viewer;

    #[test]
    fn the_newest_running_task_is_chosen_else_the_newest() {
        let viewer = Viewer::default();
        let records = [
            json!({"id": "bash-1", "status": "running", "started_at_ms": 10}),
            json!({"id": "bash-2", "status": "completed", "started_at_ms": 30}),
            json!({"id": "bash-3", "status": "running", "started_at_ms": 20}),
        ];
        let rows: Vec<Row<'_>> = records.iter().map(|r| record_row(r, &viewer)).collect();
        assert_eq!(newest(&rows).as_deref(), Some("bash-3"));
        assert_eq!(newest(&rows[1..2]).as_deref(), Some("bash-2"));
        assert_eq!(newest(&[]), None);
    }

    #[test]
    fn a_row_is_written_as_the_page_reads_it() {
        let viewer = Viewer::default();
        let record = json!({"id": "bash-7", "kind": "bash", "label": "make", "owner": "principal-2",
            "status": "completed", "detail": "exit code: 3", "started_at_ms": 5,
            "finished_at_ms": 9, "expired_at_ms": null});
        let written = taskhost_abi::serde_json::to_value(record_row(&record, &viewer)).unwrap();
        assert_eq!(
            written,
            json!({"id": "bash-7", "kind": "bash", "command": "make", "owner": "principal-2",
                "owner_id": "principal-2", "status": "completed", "detail": "exit code: 3",
                "started_at_ms": 5, "finished_at_ms": 9, "expired": false})
        );
    }
}
