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

/// Numbers go on across hosts; an abandoned start's number (never answered to anyone) is given
/// again when it was the last one given, never when a later one was.
#[test]
fn numbers_continue_across_hosts_and_an_abandoned_one_is_given_again_only_if_last() {
    let dir = Dir::new("numbers");
    let first = Store::open(&dir.0, Sync::Normal).expect("open");
    let journal = first.journal().expect("journal");
    assert_eq!(journal.begin(&start("bash", "a")), Ok(1));
    assert_eq!(journal.begin(&start("bash", "b")), Ok(2));
    assert_eq!(journal.begin(&start("slurm", "c")), Ok(1));
    journal.abandon("bash", 2);
    assert_eq!(journal.begin(&start("bash", "b again")), Ok(2));
    assert_eq!(journal.begin(&start("bash", "e")), Ok(3));
    journal.abandon("bash", 2);
    drop(journal);
    first.close();
    let next = Store::open(&dir.0, Sync::Full).expect("open again");
    let journal = next.journal().expect("journal");
    assert_eq!(journal.begin(&start("bash", "d")), Ok(4));
    drop(journal);
    next.close();
    let ids: Vec<String> = Store::open_to_read(&dir.0)
        .expect("read")
        .tasks()
        .expect("tasks")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["bash-1", "slurm-1", "bash-3", "bash-4"]);
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

#[test]
fn retention_expires_the_oldest_settled_output_first_and_keeps_ids_and_running_tasks() {
    use crate::Retention;
    let dir = Dir::new("retention");
    let store = Store::open(&dir.0, Sync::Normal).expect("open");
    let journal = store.journal().expect("journal");
    let output = store.output_dir();
    for n in 1..=4u64 {
        assert_eq!(journal.begin(&start("bash", "x")), Ok(n));
        let path = output.path().join(format!("out-{n}"));
        std::fs::write(&path, vec![b'x'; 100]).expect("written");
        store.set_output(&format!("bash-{n}"), [Some(path), None]);
        if n < 4 {
            let (told, heard) = channel();
            let snapshot = TaskSnapshot {
                id: TaskId::new(format!("bash-{n}")),
                kind: "bash".into(),
                label: "x".into(),
                output_limit_bytes: None,
                owner_session: None,
                status: TaskStatus::Completed,
                detail: None,
                started_at_ms: 1,
                finished_at_ms: Some(10 * n),
                reported: false,
            };
            journal.settled(
                &snapshot,
                Box::new(move || {
                    let _ = told.send(());
                }),
            );
            heard.recv().expect("settled");
        }
    }
    // Room for two settled outputs: the oldest of the three goes; the running one is never counted.
    let expired = store.retain(Retention {
        keep_days: 1_000_000,
        keep_bytes: 200,
    });
    assert_eq!(expired, ["bash-1"]);
    assert!(!output.path().join("out-1").exists());
    assert!(output.path().join("out-4").exists());
    let record = store.task("bash-1").expect("read").expect("its row stays");
    assert!(record.expired_at_ms.is_some() && record.stdout_path.is_none());
    // Nothing is kept past its days: every settled one goes, the running one stays.
    let expired = store.retain(Retention {
        keep_days: 0,
        keep_bytes: 1 << 30,
    });
    assert_eq!(expired, ["bash-3", "bash-2"]);
    assert_eq!(journal.begin(&start("bash", "y")), Ok(5));
}

/// A settled task's snapshot: `bash-N`, ended at `10 * N`.
fn settled(n: u64) -> TaskSnapshot {
    TaskSnapshot {
        id: TaskId::new(format!("bash-{n}")),
        kind: "bash".into(),
        label: "x".into(),
        output_limit_bytes: None,
        owner_session: None,
        status: TaskStatus::Completed,
        detail: None,
        started_at_ms: 1,
        finished_at_ms: Some(10 * n),
        reported: true,
    }
}

/// Retention expires a long history in batches, each durable on its own: a start made between
/// two is written before the next (the writer is never held for the whole history), and no record
/// is marked expired while its kept file is still there.
#[test]
fn retention_expires_in_batches_and_a_start_between_two_is_written_before_the_next() {
    use crate::Retention;
    use crate::retention::BATCH;
    let dir = Dir::new("retention-batches");
    let store = Store::open(&dir.0, Sync::Normal).expect("open");
    let journal = store.journal().expect("journal");
    let output = store.output_dir();
    let total = 3 * BATCH as u64;
    for n in 1..=total {
        journal.begin(&start("bash", "x")).expect("begin");
        let path = output.path().join(format!("out-{n}"));
        std::fs::write(&path, "x").expect("written");
        store.set_output(&format!("bash-{n}"), [Some(path), None]);
        journal.settled(&settled(n), Box::new(|| {}));
    }
    store.sync();
    let mut seen = Vec::new();
    let keep = Retention {
        keep_days: 0,
        keep_bytes: 1 << 30,
    };
    let expired = store.retain_between(keep, |batch| {
        let number = journal.begin(&start("bash", "live")).expect("a start");
        let records = store.tasks().expect("read");
        let marked: Vec<&str> = records
            .iter()
            .filter(|r| r.expired_at_ms.is_some())
            .map(|r| r.id.as_str())
            .collect();
        let kept = |id: &str| output.path().join(id.replace("bash-", "out-")).exists();
        assert_eq!(
            marked.iter().find(|id| kept(id)),
            None,
            "marked, its file kept"
        );
        seen.push((batch.len(), number, marked.len()));
    });
    assert_eq!(expired.len() as u64, total);
    let batches: Vec<(usize, u64, usize)> = (1..=3)
        .map(|k| (BATCH, total + k as u64, k * BATCH))
        .collect();
    assert_eq!(seen, batches);
    assert!(!output.path().join("out-1").exists());
    assert!(!output.path().join(format!("out-{total}")).exists());
}

/// The view's first page reads a long history's newest records only: an owner's (or everyone's)
/// newest `limit`, newest first.
#[test]
fn the_newest_records_are_read_newest_first_and_at_most_the_limit() {
    let dir = Dir::new("newest");
    let store = Store::open(&dir.0, Sync::Normal).expect("open");
    let journal = store.journal().expect("journal");
    for n in 1..=6u64 {
        let owner = if n % 3 == 0 { "other" } else { "s" };
        let begin = JournalStart {
            owner_session: Some(owner),
            started_at_ms: 100 + n,
            ..start("bash", "x")
        };
        assert_eq!(journal.begin(&begin), Ok(n));
    }
    let ids = |records: Vec<crate::TaskRecord>| -> Vec<String> {
        records.into_iter().map(|r| r.id).collect()
    };
    let mine = store.newest_tasks(Some("s"), 3).expect("read");
    assert_eq!(ids(mine), ["bash-5", "bash-4", "bash-2"]);
    let all = store.newest_tasks(None, 2).expect("read");
    assert_eq!(ids(all), ["bash-6", "bash-5"]);
}

/// Principals: a token is shown once and names its principal until revoked; a live name is not
/// given twice; the list never shows a token; a revoked name can be made again, as a new owner.
#[test]
fn a_principals_token_names_it_until_revoked() {
    let dir = Dir::new("principals");
    let store = Store::open_to_change(&dir.0).expect("open");
    let token = store.create_principal("ci-runner").expect("made");
    let text = token.reveal();
    assert!(
        text.starts_with(crate::TOKEN_PREFIX) && text.len() == 9 + 64,
        "{text}"
    );
    let parsed = crate::Token::parse(&text).expect("parses");
    let (name, owner) = store.principal_of(&parsed).expect("read").expect("named");
    assert_eq!(name, "ci-runner");
    assert!(matches!(
        store.create_principal("ci-runner"),
        Err(crate::StoreError::Principal(_))
    ));
    assert!(matches!(
        store.create_principal("no spaces"),
        Err(crate::StoreError::Principal(_))
    ));
    let listed = store.principals().expect("list");
    assert_eq!(listed.len(), 1);
    assert!(!format!("{listed:?}").contains(&text[9..]));
    assert_eq!(store.revoke_principal("ci-runner").expect("revoked"), owner);
    assert_eq!(store.principal_of(&parsed).expect("read"), None);
    assert!(store.revoke_principal("ci-runner").is_err());
    let again = store.create_principal("ci-runner").expect("made again");
    let (_, new_owner) = store.principal_of(&again).expect("read").expect("named");
    assert_ne!(new_owner, owner);
    assert!(
        store
            .owner_of(&crate::OwnerSecret::parse(&again.reveal()[9..]).expect("hex"))
            .expect("read")
            .is_none(),
        "a token does not resume a session"
    );
}

/// A principal made with a policy keeps it: the list shows it and the host finds it by owner; a
/// principal made without one has none, and a malformed policy name is refused.
#[test]
fn a_principal_keeps_the_policy_it_was_made_with() {
    let dir = Dir::new("policies");
    let store = Store::open_to_change(&dir.0).expect("open");
    let grants = crate::PrincipalGrants {
        sees_all: false,
        policy: Some("agents".into()),
    };
    let bound = store.create_principal_with("bot", &grants).expect("made");
    let free = store.create_principal("person").expect("made");
    let (_, bound_owner) = store.principal_of(&bound).expect("read").expect("named");
    let (_, free_owner) = store.principal_of(&free).expect("read").expect("named");
    assert_eq!(
        store.policy_of_principal(&bound_owner).expect("read"),
        Some("agents".to_owned())
    );
    assert_eq!(store.policy_of_principal(&free_owner).expect("read"), None);
    assert_eq!(store.policy_of_principal("session-1").expect("read"), None);
    let listed = store.principals().expect("list");
    assert_eq!(listed[0].policy.as_deref(), Some("agents"));
    assert_eq!(listed[1].policy, None);
    let bad = crate::PrincipalGrants {
        sees_all: false,
        policy: Some("no spaces".into()),
    };
    assert!(matches!(
        store.create_principal_with("other", &bad),
        Err(crate::StoreError::Principal(_))
    ));
}

/// A host that closes removes its lock file: a directory shared by many short-lived hosts (one per
/// client session) does not collect one file per host.
#[test]
fn a_closed_host_leaves_no_lock_file() {
    let dir = Dir::new("locks");
    for _ in 0..3 {
        Store::open(&dir.0, Sync::Normal).expect("open").close();
    }
    let left: Vec<_> = std::fs::read_dir(dir.0.join("hosts"))
        .expect("hosts")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Hosts started at the same moment on one new directory (one per client session of a tool that
/// starts them all at once) each open it: the schema is made once, and no host is refused.
#[test]
fn hosts_opening_one_new_directory_at_once_all_open_it() {
    for round in 0..20 {
        let dir = Dir::new(&format!("race-{round}"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let opened: Vec<_> = (0..4)
            .map(|_| {
                let (dir, barrier) = (dir.0.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(&dir, Sync::Normal).map(|store| store.close())
                })
            })
            .collect();
        for host in opened {
            let result = host.join().expect("the opening thread ended");
            assert!(result.is_ok(), "round {round}: {result:?}");
        }
    }
}

/// Proves: an external work record whose values are not of their types is skipped with a warning
/// (left as it is), while a good one beside it is adopted: one bad row does not keep a host from
/// starting.
#[test]
fn a_bad_external_record_is_skipped_and_the_good_ones_adopted() {
    let dir = Dir::new("bad-external");
    Store::open(&dir.0, Sync::Normal).expect("open").close();
    let conn = rusqlite::Connection::open(dir.0.join("tasks.db")).expect("the database");
    conn.execute_batch(
        "INSERT INTO hosts(id, pid, started_at_ms, ended_at_ms) VALUES (1000, 1, 1, 2);
         INSERT INTO tasks(id, kind, number, host, owner, label, status, started_at_ms)
             VALUES ('slurm-5', 'slurm', 5, 1000, NULL, 'bad', 'running', 1),
                    ('slurm-6', 'slurm', 6, 1000, NULL, 'good', 'running', 1);
         INSERT INTO external VALUES ('slurm-5', X'00', 'true', 'true', 'x', 1000, 0);
         INSERT INTO external VALUES ('slurm-6', '6', 'true', 'true', 'x', 1000, 0);",
    )
    .expect("rows");
    drop(conn);
    let store = Store::open(&dir.0, Sync::Normal).expect("a bad row does not stop the open");
    let adopted: Vec<&str> = store
        .recovered()
        .adopted
        .iter()
        .map(|a| a.record.id.as_str())
        .collect();
    assert_eq!(adopted, ["slurm-6"]);
    store.close();
}

/// A successor takes over the foreground commands the gone host's keeper handed it, by their
/// records' ids; the gone host's other rows (commands that ended with it) are not taken.
#[test]
fn a_takeover_takes_the_handed_foreground_commands_by_their_ids() {
    let dir = Dir::new("foregrounds");
    let gone = Store::open(&dir.0, Sync::Normal).expect("open");
    let record = |label: &str| crate::ForegroundRecord {
        id: 0,
        session: Some("s".into()),
        kind: "bash".into(),
        label: label.into(),
        request: None,
    };
    let held = gone.foreground_began(record("held")).expect("recorded");
    let ended = gone.foreground_began(record("ended")).expect("recorded");
    assert_ne!(held, ended);
    let lock = gone.lock_fd().expect("a lock").try_clone_to_owned();
    let takeover = crate::Takeover {
        host: gone.host_id().expect("a host"),
        tasks: Vec::new(),
        foregrounds: vec![held],
        lock: lock.expect("a second handle"),
    };
    let next = Store::open_taking_over(&dir.0, Sync::Normal, takeover).expect("taken over");
    let taken: Vec<(u64, &str)> = next
        .taken_foregrounds()
        .iter()
        .map(|r| (r.id, r.label.as_str()))
        .collect();
    assert_eq!(taken, [(held, "held")]);
    next.close();
    gone.close();
}
