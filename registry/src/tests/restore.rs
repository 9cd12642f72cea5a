//! Settled tasks brought back from a journal: readable by their owner only, announced once when
//! their end was never told, and dropped with their owner.

use super::*;
use crate::{RegistryError, RestoredTask, TaskStatus};

fn lost(id: &str, told: bool) -> RestoredTask {
    RestoredTask {
        id: id.to_owned(),
        kind: "bash".to_owned(),
        label: "make".to_owned(),
        status: TaskStatus::Lost,
        detail: Some("the host stopped while it ran".to_owned()),
        started_at_ms: 1_000,
        finished_at_ms: 2_000,
        stream: true,
        output: "line 1\nline 2\n".to_owned(),
        told,
    }
}

#[tokio::test]
async fn a_restored_task_is_its_owners_to_read_once_and_is_announced_once() {
    let (reg, _surface) = registry();
    let (log, _c, _d) = watch_events(&reg);
    let owner = agent(&reg, "a", "session-7");
    let other = agent(&reg, "b", "session-8");
    reg.restore(&owner, lost("bash-41", false)).unwrap();
    reg.restore(&owner, lost("bash-40", true)).unwrap();
    assert_eq!(
        log.take(),
        [
            "changed:session-7",
            "done:bash-41:lost:false",
            "changed:session-7"
        ]
    );

    let listed: Vec<String> = reg
        .list(Some(&owner))
        .into_iter()
        .map(|s| s.id.to_string())
        .collect();
    assert_eq!(listed, ["bash-41", "bash-40"]);
    assert!(reg.list(Some(&other)).is_empty());
    assert!(matches!(
        reg.read("bash-41", Some(&other)),
        Err(RegistryError::ForeignTask(_))
    ));

    let first = reg.read("bash-41", Some(&owner)).unwrap();
    assert_eq!(first.text, "line 1\nline 2\n");
    assert_eq!(first.snapshot.status, TaskStatus::Lost);
    assert!(first.snapshot.reported);
    assert_eq!(reg.read("bash-41", Some(&owner)).unwrap().text, "");
    assert!(matches!(
        reg.kill("bash-40", Some(&owner), None),
        Ok(crate::KillOutcome::AlreadyFinished(_))
    ));

    // The next task of the kind is numbered past what came back.
    let p = Probe::new();
    let next = reg.start(p.stream_task("bash", "echo")).unwrap();
    assert_eq!(next.as_str(), "bash-42");

    reg.dispose_agent(&owner).await;
    assert!(matches!(
        reg.get("bash-41", Some(&owner)),
        Err(RegistryError::UnknownTask(_))
    ));
}

#[tokio::test]
async fn a_restore_refuses_live_malformed_and_held_tasks() {
    let (reg, _surface) = registry();
    let owner = agent(&reg, "a", "s");
    let mut running = lost("bash-1", false);
    running.status = TaskStatus::Running;
    assert!(matches!(
        reg.restore(&owner, running),
        Err(RegistryError::Restore(_))
    ));
    assert!(matches!(
        reg.restore(&owner, lost("slurm-1", false)),
        Err(RegistryError::Restore(_))
    ));
    reg.restore(&owner, lost("bash-1", false)).unwrap();
    assert!(matches!(
        reg.restore(&owner, lost("bash-1", false)),
        Err(RegistryError::Restore(_))
    ));
}
