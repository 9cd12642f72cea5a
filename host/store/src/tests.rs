//! The store on a real directory: numbers, records, settlements.

use std::sync::mpsc::channel;

use taskhost_registry::{JournalStart, TaskId, TaskSnapshot, TaskStatus};

use crate::{Store, Sync};

/// A private scratch directory, removed when dropped.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start<'a>(kind: &'a str, label: &'a str) -> JournalStart<'a> {
    JournalStart {
        kind,
        label,
        owner_session: Some("s"),
        started_at_ms: 1,
    }
}

#[test]
fn numbers_continue_across_hosts_and_an_abandoned_one_is_not_given_again() {
    let dir = Dir::new("numbers");
    let first = Store::open(&dir.0, Sync::Normal).expect("open");
    let journal = first.journal().expect("journal");
    assert_eq!(journal.begin(&start("bash", "a")), Ok(1));
    assert_eq!(journal.begin(&start("bash", "b")), Ok(2));
    assert_eq!(journal.begin(&start("slurm", "c")), Ok(1));
    journal.abandon("bash", 2);
    drop(journal);
    first.close();
    let next = Store::open(&dir.0, Sync::Full).expect("open again");
    let journal = next.journal().expect("journal");
    assert_eq!(journal.begin(&start("bash", "d")), Ok(3));
    drop(journal);
    next.close();
    let ids: Vec<String> = Store::open_to_read(&dir.0)
        .expect("read")
        .tasks()
        .expect("tasks")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["bash-1", "slurm-1", "bash-3"]);
}

#[test]
fn a_settlement_is_told_once_its_record_is_written() {
    let dir = Dir::new("settled");
    let store = Store::open(&dir.0, Sync::Normal).expect("open");
    let journal = store.journal().expect("journal");
    let n = journal.begin(&start("bash", "true")).expect("begun");
    let snapshot = TaskSnapshot {
        id: TaskId::new(format!("bash-{n}")),
        kind: "bash".into(),
        label: "true".into(),
        output_limit_bytes: None,
        owner_session: None,
        status: TaskStatus::Completed,
        detail: Some("exit code: 0".into()),
        started_at_ms: 1,
        finished_at_ms: Some(2),
        reported: false,
    };
    let (told, heard) = channel();
    let reader = Store::open_to_read(&dir.0).expect("read");
    journal.settled(
        &snapshot,
        Box::new(move || {
            let record = reader.task("bash-1").expect("read").expect("a record");
            let _ = told.send((record.status, record.detail));
        }),
    );
    assert_eq!(
        heard.recv().expect("told"),
        ("completed".to_owned(), Some("exit code: 0".to_owned()))
    );
}
