//! One step of the page's event stream (`/api/events?watch=ID`). Events:
//! - `tasks`: `{"rows": [...], "removed": [...], "full": bool, "watching": id}`, the rows that
//!   are new or changed since the previous step (all of them at the first, `full`, with the
//!   records of earlier hosts' tasks no live task has), and the ids no longer listed; on the first
//!   step of a stream that names no task to watch, `watching` is the one it chose (the newest
//!   running, else the newest), whose tail and details follow in the same step: the page shows it
//!   without opening a second stream (which would send every row again);
//! - `tail`: `{"id", "runs"}`, the watched task's output tail with its colours, as
//!   [`crate::colours::runs`], when it changed;
//! - `details`: the watched task's details, as [`taskhost_abi::sdk::http::Host::task_details`],
//!   when they changed, looked at when another task is watched, when the rows changed, and else
//!   at most every [`STATUS_EVERY_MS`] (their output size grows at every step of a writing task);
//! - `host`: the host's status (plugins, health), every [`STATUS_EVERY_MS`], to an overseer alone
//!   (a viewer with `all_owners`).
//!
//! The stream's state (what the page was sent) travels through the host between steps, so a new
//! generation of this plugin picks the stream up where the old one left it.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::http::{Events, EventsRequest};

use crate::api::TAIL_BYTES;
use crate::rows::{Row, fingerprint, named, record_rows, records, row};

/// How often the host's status is sent, and the list looked at when no task registered or settled.
pub(crate) const STATUS_EVERY_MS: u64 = 1000;

/// How soon a running task's output is looked at again while the page watches it.
pub(crate) const FOLLOW_MS: u64 = 50;

/// What the page was sent, kept between steps.
#[derive(Default, Deserialize)]
#[serde(crate = "taskhost_abi::serde", default)]
struct Sent {
    rows: BTreeMap<String, u64>,
    tail: Option<(String, u64)>,
    details: Option<(String, u64)>,
    details_at_ms: u64,
    /// The task this stream chose to watch, its page having named none.
    chosen: Option<String>,
    status_at_ms: u64,
    listed_at_ms: u64,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One event: its name and its data.
type Event = (String, String);

/// The `tasks` event's data, written straight to its text.
#[derive(taskhost_abi::serde::Serialize)]
#[serde(crate = "taskhost_abi::serde")]
struct TasksEvent<'a> {
    rows: &'a [Row<'a>],
    removed: &'a [&'a String],
    full: bool,
    watching: Option<&'a str>,
}

impl Sent {
    /// The `tasks` event: the rows that changed since the last list and the ids gone (all rows and
    /// earlier hosts' records on the `first` step), if any; remembers what it sent.
    fn list(
        &mut self,
        host: &Host,
        request: &EventsRequest,
        first: bool,
        now: u64,
    ) -> Option<Event> {
        let tasks = host.list_tasks(request.viewer.caller());
        // The records of earlier hosts' tasks are settled: sent once, never followed.
        let records = if first {
            records(host, &request.viewer)
        } else {
            Vec::new()
        };
        let mut rows = Vec::new();
        let mut seen = BTreeMap::new();
        for task in &tasks {
            let print = fingerprint(task);
            if self.rows.get(task.id.as_str()) != Some(&print) {
                rows.push(row(task, &request.viewer));
            }
            seen.insert(task.id.to_string(), print);
        }
        rows.extend(record_rows(&records, &tasks, &request.viewer));
        named(host, &request.viewer, &mut rows);
        let asked = request.query.get("watch").is_some_and(|w| !w.is_empty());
        if first && !asked {
            self.chosen = crate::rows::newest(&rows);
        }
        let removed: Vec<&String> = self
            .rows
            .keys()
            .filter(|id| !seen.contains_key(*id))
            .collect();
        let event = (first || !rows.is_empty() || !removed.is_empty()).then(|| {
            let data = TasksEvent {
                rows: &rows,
                removed: &removed,
                full: first,
                watching: if first { self.chosen.as_deref() } else { None },
            };
            let text = taskhost_abi::serde_json::to_string(&data).unwrap_or_default();
            ("tasks".to_owned(), text)
        });
        self.rows = seen;
        self.listed_at_ms = now;
        event
    }

    /// The `tail` event of the watched task `id`, if its tail changed, and whether it still runs.
    fn tail(&mut self, host: &Host, request: &EventsRequest, id: &str) -> (Option<Event>, bool) {
        let owner = request.viewer.caller();
        let live = host
            .get_task(owner, id)
            .is_ok_and(|t| !t.status.is_terminal());
        let text = host
            .task_tail_coloured(owner, id, TAIL_BYTES)
            .unwrap_or_default();
        let mut h = DefaultHasher::new();
        text.hash(&mut h);
        let print = (id.to_owned(), h.finish());
        if self.tail.as_ref() == Some(&print) {
            return (None, live);
        }
        self.tail = Some(print);
        let event = (
            "tail".to_owned(),
            json!({"id": id, "runs": crate::colours::runs(&text)}).to_string(),
        );
        (Some(event), live)
    }

    /// The `details` event of the watched task `id`, if they changed.
    fn details(&mut self, host: &Host, request: &EventsRequest, id: &str) -> Option<Event> {
        let details = host.task_details(request.viewer.caller(), id);
        let mut h = DefaultHasher::new();
        details.to_string().hash(&mut h);
        let print = (id.to_owned(), h.finish());
        if self.details.as_ref() == Some(&print) {
            return None;
        }
        self.details = Some(print);
        Some(("details".to_owned(), details.to_string()))
    }
}

/// One step: what changed since the previous one, and when to look again.
pub(crate) fn step(host: &Host, request: &EventsRequest) -> Events {
    // A state this generation cannot read (another version's) starts the stream afresh.
    let mut sent: Sent =
        taskhost_abi::serde_json::from_value(request.state.clone()).unwrap_or_default();
    let now = now_ms();
    let mut events = Vec::new();
    let first = request.state.is_null();
    let mut watched_live = false;
    if first || request.changed || now.saturating_sub(sent.listed_at_ms) >= STATUS_EVERY_MS {
        events.extend(sent.list(host, request, first, now));
    }
    let watch = request
        .query
        .get("watch")
        .filter(|w| !w.is_empty())
        .cloned()
        .or_else(|| sent.chosen.clone());
    let watch = watch.as_deref();
    if let Some(id) = watch {
        let listed = !events.is_empty();
        let (tail, live) = sent.tail(host, request, id);
        // What the details hold changes with the row (queued, ended) and with the output (its
        // size): the latter is looked at once a second, not at each step a writing task makes.
        let looked = listed
            || sent.details.as_ref().is_none_or(|d| d.0 != *id)
            || (tail.is_some() && now.saturating_sub(sent.details_at_ms) >= STATUS_EVERY_MS);
        events.extend(tail);
        if looked {
            events.extend(sent.details(host, request, id));
            sent.details_at_ms = now;
        }
        watched_live = live;
    }
    if request.viewer.all_owners && now.saturating_sub(sent.status_at_ms) >= STATUS_EVERY_MS {
        events.push(("host".to_owned(), host.host_status().to_string()));
        sent.status_at_ms = now;
    }
    Events {
        events,
        state: json!({
            "rows": sent.rows,
            "tail": sent.tail,
            "details": sent.details,
            "details_at_ms": sent.details_at_ms,
            "chosen": sent.chosen,
            "status_at_ms": sent.status_at_ms,
            "listed_at_ms": sent.listed_at_ms,
        }),
        follow_ms: Some(if watched_live {
            FOLLOW_MS
        } else {
            STATUS_EVERY_MS
        }),
        end: false,
    }
}
