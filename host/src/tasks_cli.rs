//! `taskhost tasks`: the task table of a state directory for people, with no host running or with
//! one: ids, kind, owner, status, exit, start, end, command (drawn by `tasks_table`);
//! `--json` for tools; `--output ID` for a task's kept output.

use std::path::PathBuf;

use taskhost_store::{Store, TaskRecord};

/// Tasks shown without `--all`: running ones, and those that ended within this many milliseconds.
const RECENT_MS: u64 = 24 * 3600 * 1000;

/// What `taskhost tasks` was asked.
#[derive(Clone, Debug, Default)]
pub struct TasksArgs {
    /// The state directory (the default one when `None`).
    pub state: Option<PathBuf>,
    /// JSON lines instead of a table.
    pub json: bool,
    /// Every record, not only running and recent ones.
    pub all: bool,
    /// Print this task's kept output instead of the table.
    pub output: Option<String>,
}

/// The state directory `state` (the default one when `None`) opened to read, as the commands for
/// people open it (`tasks`, `token list`): `None` when it has no database (nothing is made).
///
/// # Errors
/// `(2, why)` with no directory to use, or one (or a database) that is refused.
pub(crate) fn open_to_read(
    state: Option<PathBuf>,
) -> Result<(PathBuf, Option<Store>), (u8, String)> {
    let dir = state_dir(state)?;
    match Store::open_to_read(&dir) {
        Ok(store) => Ok((dir, Some(store))),
        Err(taskhost_store::StoreError::NoDatabase { .. }) => Ok((dir, None)),
        Err(e) => Err((2, e.to_string())),
    }
}

/// The state directory `state` (the default one when `None`) opened to change records, its
/// database made if missing (`token create`).
///
/// # Errors
/// As [`open_to_read`].
pub(crate) fn open_to_change(state: Option<PathBuf>) -> Result<(PathBuf, Store), (u8, String)> {
    let dir = state_dir(state)?;
    let store = Store::open_to_change(&dir).map_err(|e| (2, e.to_string()))?;
    Ok((dir, store))
}

/// `state`, else the default state directory.
fn state_dir(state: Option<PathBuf>) -> Result<PathBuf, (u8, String)> {
    state
        .or_else(crate::config::default_state_dir)
        .ok_or((2, "no state directory: pass --state DIR".to_owned()))
}

/// `records` as JSON lines, written into one buffer (a long history's lines are not each a string
/// of their own).
fn json_lines(records: &[TaskRecord]) -> String {
    let mut out = Vec::with_capacity(records.len() * 320);
    for r in records {
        let at = out.len();
        if at > 0 {
            out.push(b'\n');
        }
        // A record that does not serialize is left out, as a line of its own would be.
        if serde_json::to_writer(&mut out, r).is_err() {
            out.truncate(at);
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Runs `taskhost tasks`; the text to print.
///
/// # Errors
/// `(2, why)` for a state directory or database that is refused, an unknown task; `(1, why)` for a
/// kept file that cannot be read.
pub fn run(args: &TasksArgs) -> Result<String, (u8, String)> {
    let (dir, store) = match open_to_read(args.state.clone())? {
        (dir, Some(store)) => (dir, store),
        // Nothing to show, and nothing made.
        (dir, None) => {
            return match &args.output {
                Some(id) => Err((2, format!("unknown task {id} in {}", dir.display()))),
                None if args.json => Ok(String::new()),
                None => Ok(format!(
                    "(no tasks in {}: it has no database; a host makes one when it starts)",
                    dir.display()
                )),
            };
        }
    };
    if let Some(id) = &args.output {
        let record = store
            .task(id)
            .map_err(|e| (1, e.to_string()))?
            .ok_or_else(|| (2, format!("unknown task {id} in {}", dir.display())))?;
        if let Some(at) = record.expired_at_ms {
            return Err((
                2,
                format!(
                    "task {id} expired on {}: its output was removed ([state] keep_days, keep_bytes)",
                    clock(at)
                ),
            ));
        }
        return store
            .kept_output(&record)
            .map_err(|e| (1, format!("cannot read {id}'s output: {e}")));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let records: Vec<TaskRecord> = store
        .tasks()
        .map_err(|e| (1, e.to_string()))?
        .into_iter()
        .filter(|r| {
            args.all
                || r.finished_at_ms
                    .is_none_or(|t| now.saturating_sub(t) < RECENT_MS)
        })
        .collect();
    if args.json {
        return Ok(json_lines(&records));
    }
    Ok(crate::tasks_table::table(
        &records,
        &dir,
        crate::tasks_table::Style::for_stdout(now),
    ))
}

/// A time as `YYYY-MM-DD HH:MM:SS` UTC.
pub(crate) fn clock(ms: u64) -> String {
    crate::utc::Utc::from_ms(ms).clock()
}
