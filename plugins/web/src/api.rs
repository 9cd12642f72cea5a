//! The page's requests: who signs in, the task list, one task's output tail, its details or its
//! whole kept output (a download), a kill, and the host's
//! status (its plugins' paths, the keeper's pid, its health: an overseer's alone).

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::http::{HttpRequest, HttpResponse};

use crate::rows::{named, records, row, with_records};

/// How much of each output stream a tail shows.
pub(crate) const TAIL_BYTES: u64 = 16 * 1024;

/// How much of each output stream a download holds at most: its kept output, past this its
/// latest part (the text then names the kept file that holds all of it).
pub(crate) const DOWNLOAD_BYTES: u64 = 64 * 1024 * 1024;

/// Answers a request under `/api/`; 404 for anything else.
pub(crate) fn answer(host: &Host, request: &HttpRequest) -> HttpResponse {
    let owner = request.viewer.caller();
    let parts: Vec<&str> = request.path.trim_matches('/').split('/').collect();
    match (request.method.as_str(), parts.as_slice()) {
        ("GET", ["api", "whoami"]) => HttpResponse::json(&json!({
            "name": request.viewer.name,
            "all_owners": request.viewer.all_owners,
        })),
        ("GET", ["api", "tasks"]) => {
            let live = host.list_tasks(owner);
            let records = records(host, &request.viewer);
            let rows = with_records(host, &live, &records, &request.viewer);
            HttpResponse::json(&json!({ "tasks": rows }))
        }
        ("GET", ["api", "tasks", id, "tail"]) => match host.task_tail(owner, id, TAIL_BYTES) {
            Ok(text) => HttpResponse::json(&json!({ "id": id, "text": text })),
            Err(e) => HttpResponse::status(404, e),
        },
        ("GET", ["api", "tasks", id, "details"]) => {
            HttpResponse::json(&host.task_details(owner, id))
        }
        ("GET", ["api", "tasks", id, "output"]) => {
            match host.task_tail(owner, id, DOWNLOAD_BYTES) {
                Ok(text) => HttpResponse::ok("text/plain; charset=utf-8", text),
                Err(e) => HttpResponse::status(404, e),
            }
        }
        ("POST", ["api", "tasks", id, "kill"]) => {
            let reason = format!("killed from the web view by {}", request.viewer.name);
            match host.kill_task(owner, id, Some(&reason)) {
                Ok(kill) => {
                    let mut task = [row(&kill.snapshot, &request.viewer)];
                    named(host, &request.viewer, &mut task);
                    let [task] = task;
                    HttpResponse::json(&json!({ "requested": kill.requested, "task": task }))
                }
                Err(e) => HttpResponse::status(404, e),
            }
        }
        ("GET", ["api", "status"]) if request.viewer.all_owners => {
            HttpResponse::json(&host.host_status())
        }
        ("GET", ["api", "status"]) => HttpResponse::status(
            403,
            "the host's status is an overseer's (a token made with --all-owners)",
        ),
        _ => HttpResponse::status(404, "nothing is served here"),
    }
}
