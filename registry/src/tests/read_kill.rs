//! read, get, list and kill, and the isolation between sessions.

use super::*;
use crate::{KillOutcome, TaskStatus};

#[tokio::test]
async fn a_stream_read_consumes_and_the_terminal_read_carries_detail_and_reported() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.stream_task("bash", "x")).unwrap();
    p.push("first");
    let r = reg.read(id.as_str(), None).unwrap();
    assert_eq!((r.text.as_str(), r.snapshot.reported), ("first", false));
    assert_eq!(reg.read(id.as_str(), None).unwrap().text, "");
    p.push("rest");
    p.settle(TaskOutcome::completed().with_detail("exit code: 0"));
    settle_pass().await;
    let r = reg.read(id.as_str(), None).unwrap();
    assert_eq!(r.text, "rest");
    assert_eq!(r.snapshot.detail.as_deref(), Some("exit code: 0"));
    assert!(r.snapshot.reported);
    assert!(r.snapshot.finished_at_ms.is_some());
    assert_eq!(reg.read(id.as_str(), None).unwrap().text, "");
}

#[tokio::test]
async fn output_limit_appears_in_read_and_get() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg
        .start(p.stream_task("pty", "x").output_limit_bytes(64))
        .unwrap();
    assert_eq!(
        reg.get(id.as_str(), None).unwrap().output_limit_bytes,
        Some(64)
    );
    assert_eq!(
        reg.read(id.as_str(), None)
            .unwrap()
            .snapshot
            .output_limit_bytes,
        Some(64)
    );
}

#[tokio::test]
async fn a_final_output_task_reads_empty_while_live_then_its_output_idempotently() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("subagent", "x")).unwrap();
    assert_eq!(reg.read(id.as_str(), None).unwrap().text, "");
    p.settle(TaskOutcome::completed().with_output("the answer"));
    settle_pass().await;
    for _ in 0..2 {
        assert_eq!(reg.read(id.as_str(), None).unwrap().text, "the answer");
    }
}

#[tokio::test]
async fn a_settled_task_without_output_reads_empty_and_keeps_its_detail() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("subagent", "x")).unwrap();
    p.settle(TaskOutcome::failed("max-tokens"));
    settle_pass().await;
    let r = reg.read(id.as_str(), None).unwrap();
    assert_eq!(r.text, "");
    assert_eq!(r.snapshot.detail.as_deref(), Some("max-tokens"));
}

#[tokio::test]
async fn an_unknown_id_is_refused_by_every_call() {
    let (reg, _s) = registry();
    let msg = "unknown task bash-99";
    assert_eq!(reg.get("bash-99", None).unwrap_err().to_string(), msg);
    assert_eq!(reg.read("bash-99", None).unwrap_err().to_string(), msg);
    assert_eq!(
        reg.kill("bash-99", None, None).unwrap_err().to_string(),
        msg
    );
    assert_eq!(
        reg.wait("bash-99", 10.0, None, None)
            .await
            .unwrap_err()
            .to_string(),
        msg
    );
}

#[tokio::test]
async fn a_failing_completion_becomes_failed_with_the_error_as_detail() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    p.fail_done("Error: transport exploded");
    settle_pass().await;
    let s = reg.get(id.as_str(), None).unwrap();
    assert_eq!(s.status, TaskStatus::Failed);
    assert_eq!(s.detail.as_deref(), Some("Error: transport exploded"));
}

#[tokio::test]
async fn a_panicking_completion_becomes_failed() {
    let (reg, _s) = registry();
    let id = reg
        .start(TaskStart::new("bash", "x", || {
            Ok(TaskHooks::new(async { panic!("kaboom") }, |_| Ok(())))
        }))
        .unwrap();
    settle_pass().await;
    let s = reg.get(id.as_str(), None).unwrap();
    assert_eq!(s.status, TaskStatus::Failed);
    assert_eq!(
        s.detail.as_deref(),
        Some("task completion panicked: kaboom")
    );
}

#[tokio::test]
async fn a_live_kill_forwards_the_reason_and_marks_stopping_and_reported() {
    let (reg, _s) = registry();
    let (log, _c, _d) = watch_events(&reg);
    let p = Probe::new();
    p.on_cancel(OnCancel::Hang);
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let KillOutcome::Requested(s) = reg.kill(id.as_str(), None, Some("superseded")).unwrap() else {
        panic!("expected requested")
    };
    assert_eq!((s.status, s.reported), (TaskStatus::Stopping, true));
    assert_eq!(p.cancels(), vec![Some("superseded".to_owned())]);
    p.settle(TaskOutcome::killed());
    settle_pass().await;
    let events = log.take();
    assert_eq!(events.last().unwrap(), "done:bash-1:killed:true");
}

#[tokio::test]
async fn killing_a_settled_task_answers_already_finished_without_consuming_output() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.stream_task("bash", "x")).unwrap();
    p.push("unread tail\n");
    p.settle(TaskOutcome::completed().with_detail("exit code: 0"));
    settle_pass().await;
    let out = reg.kill(id.as_str(), None, None).unwrap();
    assert!(matches!(out, KillOutcome::AlreadyFinished(ref s) if s.reported));
    assert!(p.cancels().is_empty());
    assert_eq!(reg.read(id.as_str(), None).unwrap().text, "unread tail\n");
}

#[tokio::test]
async fn a_failing_cancel_fails_the_kill_and_changes_nothing() {
    let (reg, _s) = registry();
    let (log, _c, _d) = watch_events(&reg);
    let p = Probe::new();
    p.on_cancel(OnCancel::Fail("cannot signal".into()));
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    assert_eq!(
        reg.kill(id.as_str(), None, None).unwrap_err().to_string(),
        "cannot signal"
    );
    let s = reg.get(id.as_str(), None).unwrap();
    assert_eq!((s.status, s.reported), (TaskStatus::Running, false));
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert_eq!(log.take().last().unwrap(), "done:bash-1:completed:false");
}

#[tokio::test]
async fn a_panicking_cancel_fails_the_kill_and_changes_nothing() {
    let (reg, _s) = registry();
    let p = Probe::new();
    p.on_cancel(OnCancel::Panic);
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let err = reg.kill(id.as_str(), None, None).unwrap_err();
    assert_eq!(err.to_string(), "cancel panicked: probe cancel panicked");
    assert_eq!(
        reg.get(id.as_str(), None).unwrap().status,
        TaskStatus::Running
    );
}

#[tokio::test]
async fn killing_a_stopping_task_cancels_again() {
    let (reg, _s) = registry();
    let p = Probe::new();
    p.on_cancel(OnCancel::Hang);
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    reg.kill(id.as_str(), None, None).unwrap();
    reg.kill(id.as_str(), None, None).unwrap();
    assert_eq!(p.cancels().len(), 2);
}

#[tokio::test]
async fn a_foreign_or_agentless_caller_is_refused_and_unowned_tasks_are_open() {
    let (reg, _s) = registry();
    let owner = agent(&reg, "a", "sa");
    let other = agent(&reg, "b", "sb");
    let p = Probe::new();
    let id = reg
        .start(p.final_task("bash", "x").owner(owner.clone()))
        .unwrap();
    let msg = format!("task {id} belongs to another session");
    for caller in [Some(&other), None] {
        assert_eq!(reg.get(id.as_str(), caller).unwrap_err().to_string(), msg);
        assert_eq!(reg.read(id.as_str(), caller).unwrap_err().to_string(), msg);
        assert_eq!(
            reg.kill(id.as_str(), caller, None).unwrap_err().to_string(),
            msg
        );
        assert_eq!(
            reg.wait(id.as_str(), 10.0, caller, None)
                .await
                .unwrap_err()
                .to_string(),
            msg
        );
    }
    assert!(p.cancels().is_empty());
    let open = reg.start(p.final_task("bash", "y")).unwrap();
    for caller in [Some(&other), Some(&owner), None] {
        assert!(reg.get(open.as_str(), caller).is_ok());
    }
}

#[tokio::test]
async fn list_returns_own_and_unowned_tasks_in_registration_order() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "sa");
    let b = agent(&reg, "b", "sb");
    let p = Probe::new();
    let ids: Vec<_> = [Some(&a), None, Some(&b), Some(&a), None]
        .into_iter()
        .map(|o| {
            let spec = p.final_task("bash", "x");
            reg.start(match o {
                Some(o) => spec.owner(o.clone()),
                None => spec,
            })
            .unwrap()
        })
        .collect();
    let seen = |c: Option<&Agent>| reg.list(c).into_iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(
        seen(Some(&a)),
        [
            ids[0].clone(),
            ids[1].clone(),
            ids[3].clone(),
            ids[4].clone()
        ]
    );
    assert_eq!(
        seen(Some(&b)),
        [ids[1].clone(), ids[2].clone(), ids[4].clone()]
    );
    assert_eq!(seen(None), [ids[1].clone(), ids[4].clone()]);
}

#[tokio::test]
async fn finished_tasks_stay_listed_until_their_owner_is_disposed() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "sa");
    let p = Probe::new();
    reg.start(p.final_task("bash", "x").owner(a.clone()))
        .unwrap();
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert_eq!(reg.list(Some(&a)).len(), 1);
    reg.dispose_agent(&a).await;
    assert!(reg.list(Some(&a)).is_empty());
    assert_eq!(reg.stats().records, 0);
}

#[tokio::test]
async fn get_is_non_consuming_and_does_not_mark_reported() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.stream_task("bash", "x")).unwrap();
    p.push("kept");
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert!(!reg.get(id.as_str(), None).unwrap().reported);
    assert_eq!(reg.read(id.as_str(), None).unwrap().text, "kept");
}
