//! Tasks registered `queued`: live until their producer begins them, killable meanwhile, and
//! their detail is a note only while they wait.

use super::*;
use crate::{KillOutcome, TaskStatus};

#[tokio::test]
async fn a_queued_task_is_live_with_its_note_until_it_begins_running() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "s");
    let p = Probe::new();
    let id = reg
        .start(p.final_task("bash", "x").owner(a.clone()).queued())
        .unwrap();
    let snap = reg.get(id.as_str(), Some(&a)).unwrap();
    assert_eq!(
        (snap.status, snap.status.is_live()),
        (TaskStatus::Queued, true)
    );
    reg.set_queued_notes([(id.clone(), "2 ahead of it".to_owned())]);
    assert_eq!(
        reg.get(id.as_str(), Some(&a)).unwrap().detail.as_deref(),
        Some("2 ahead of it")
    );
    assert!(reg.begin_running(id.as_str()));
    let snap = reg.get(id.as_str(), Some(&a)).unwrap();
    assert_eq!((snap.status, snap.detail), (TaskStatus::Running, None));
    assert!(!reg.begin_running(id.as_str()), "it runs already");
    reg.set_queued_notes([(id.clone(), "stale".to_owned())]);
    assert_eq!(reg.get(id.as_str(), Some(&a)).unwrap().detail, None);
}

#[tokio::test]
async fn a_killed_queued_task_stops_and_never_begins() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x").queued()).unwrap();
    let killed = reg.kill(id.as_str(), None, None).unwrap();
    assert!(matches!(killed, KillOutcome::Requested(_)), "{killed:?}");
    let ended = reg.ended(id.as_str()).await.unwrap();
    assert_eq!(ended.status, TaskStatus::Killed);
    assert!(!reg.begin_running(id.as_str()));
}

#[tokio::test]
async fn waiting_for_a_tasks_end_leaves_its_notice_owed() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    p.settle(TaskOutcome::completed());
    let ended = reg.ended(id.as_str()).await.unwrap();
    assert_eq!(
        (ended.status, ended.reported),
        (TaskStatus::Completed, false)
    );
    assert!(!reg.get(id.as_str(), None).unwrap().reported);
    assert!(reg.ended("bash-99").await.is_none());
}
