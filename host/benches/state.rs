//! The durable state's figures for `scripts/bench` (release builds): 1,000 background starts through
//! the bash plugin with the store on (`sync` normal, then full) against the store off, the records a
//! burst of starts writes per second (16 threads starting at once, so group commit has work to
//! batch), and the database's size per 10,000 settled tasks.

mod common;

use std::sync::Arc;
use std::time::Instant;

use taskhost_registry::{JournalStart, TaskId, TaskSnapshot, TaskStatus};
use taskhost_store::{Store, Sync};

/// Seconds to start 1,000 background `sleep 60` tasks on a host with `state`, its files in `dir`
/// (made private here).
fn starts(dir: &std::path::Path, state: Option<Arc<Store>>) -> f64 {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .expect("a private directory");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let host = common::bash_host_with_state(&rt, dir, 10_000, state);
    let seconds = common::background_sleeps(&rt, &host, 1000);
    rt.block_on(host.shutdown());
    seconds
}

fn row(name: &str, unit: &str, value: f64, baseline_name: &str, baseline: f64, target: &str) {
    println!(
        "{{\"name\":\"{name}\",\"unit\":\"{unit}\",\"value\":{value:.1},\"baseline_name\":\"{baseline_name}\",\"baseline\":{baseline:.1},\"ratio\":{:.2},\"target\":\"{target}\"}}",
        value / baseline
    );
}

fn main() {
    let dir = common::scratch("state");
    let off = starts(&dir.join("off"), None);
    for (sync, name) in [(Sync::Normal, "normal"), (Sync::Full, "full")] {
        let store = Arc::new(Store::open(&dir.join(format!("state-{name}")), sync).expect("store"));
        let on = starts(&dir.join(format!("on-{name}")), Some(store.clone()));
        store.close();
        row(
            &format!("1,000 background starts, store on (sync {name})"),
            "ms",
            on * 1e3,
            "the same, store off",
            off * 1e3,
            "ratio <= 1.2",
        );
    }
    burst_and_size(&dir.join("burst"));
}

/// Records written per second by 16 threads starting 1,000 tasks each, and the database's size per
/// 10,000 records once they settled.
fn burst_and_size(dir: &std::path::Path) {
    let store = Store::open(dir, Sync::Normal).expect("store");
    let journal = store.journal().expect("journal");
    let one = |journal: &Arc<dyn taskhost_registry::Journal>| {
        let start = JournalStart {
            kind: "bash",
            label: "sleep 60",
            owner_session: Some("session-1"),
            started_at_ms: 1,
        };
        journal.begin(&start).expect("begin");
    };
    let t = Instant::now();
    for _ in 0..4000 {
        one(&journal);
    }
    let sequential = 4000.0 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..16 {
            let journal = journal.clone();
            s.spawn(move || {
                for _ in 0..1000 {
                    one(&journal);
                }
            });
        }
    });
    let rate = 16_000.0 / t.elapsed().as_secs_f64();
    for n in 1..=20_000u64 {
        let snapshot = TaskSnapshot {
            id: TaskId::new(format!("bash-{n}")),
            kind: "bash".into(),
            label: "sleep 60".into(),
            output_limit_bytes: None,
            owner_session: None,
            status: TaskStatus::Completed,
            detail: Some("exit code: 0".into()),
            started_at_ms: 1,
            finished_at_ms: Some(2),
            reported: false,
        };
        journal.settled(&snapshot, Box::new(|| {}));
    }
    drop(journal);
    store.close();
    let (size, json) = common::state_sizes(dir);
    row(
        "task records written per second, 16 threads starting at once",
        "records/s",
        rate,
        "one thread starting one at a time",
        sequential,
        "",
    );
    row(
        "database size per 10,000 settled tasks (with its WAL)",
        "KiB",
        size as f64 * 10_000.0 / 20_000.0 / 1024.0,
        "the same records as `taskhost tasks --json` lines",
        json as f64 * 10_000.0 / 20_000.0 / 1024.0,
        "",
    );
}
