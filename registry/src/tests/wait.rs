//! wait: settlement, timeout, abort, and what each leaves behind.

use super::*;
use crate::{CancellationToken, RegistryError, TaskStatus};

#[tokio::test]
async fn a_wait_resolves_with_the_terminal_snapshot_and_the_listener_already_sees_reported() {
    let (reg, _s) = registry();
    let (log, _c, _d) = watch_events(&reg);
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let waiter = {
        let reg = reg.clone();
        let id = id.clone();
        tokio::spawn(async move { reg.wait(id.as_str(), 5_000.0, None, None).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(reg.stats().pending_waiters, 1);
    p.settle(TaskOutcome::completed());
    let s = waiter.await.unwrap().unwrap();
    assert_eq!((s.status, s.reported), (TaskStatus::Completed, true));
    assert!(
        log.take()
            .contains(&"done:bash-1:completed:true".to_owned())
    );
    assert_eq!(reg.stats().pending_waiters, 0);
}

#[tokio::test]
async fn a_timed_out_wait_returns_the_live_snapshot_unreported_and_leaves_no_waiter() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let s = reg.wait(id.as_str(), 20.0, None, None).await.unwrap();
    assert_eq!((s.status, s.reported), (TaskStatus::Running, false));
    assert_eq!(reg.stats().pending_waiters, 0);
}

#[tokio::test]
async fn an_aborted_wait_rejects_leaves_no_waiter_and_the_task_keeps_running() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let token = CancellationToken::new();
    let t2 = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        t2.cancel();
    });
    let err = reg
        .wait(id.as_str(), 10_000.0, None, Some(&token))
        .await
        .unwrap_err();
    assert_eq!(err, RegistryError::WaitAborted);
    assert_eq!(reg.stats().pending_waiters, 0);
    assert_eq!(
        reg.get(id.as_str(), None).unwrap().status,
        TaskStatus::Running
    );
    assert!(p.cancels().is_empty());
}

#[tokio::test]
async fn a_pre_aborted_wait_rejects_only_the_wait() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let token = CancellationToken::new();
    token.cancel();
    assert_eq!(
        reg.wait(id.as_str(), 1_000.0, None, Some(&token)).await,
        Err(RegistryError::WaitAborted)
    );
    let s = reg.get(id.as_str(), None).unwrap();
    assert_eq!((s.status, s.reported), (TaskStatus::Running, false));
}

#[tokio::test]
async fn a_wait_on_a_settled_task_returns_at_once_reported_even_when_aborted() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    let token = CancellationToken::new();
    token.cancel();
    let s = reg
        .wait(id.as_str(), 1.0, None, Some(&token))
        .await
        .unwrap();
    assert_eq!((s.status, s.reported), (TaskStatus::Completed, true));
}

#[tokio::test]
async fn invalid_wait_timeouts_are_refused_even_for_settled_tasks() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    for (bad, shown) in [
        (0.0, "0"),
        (-5.0, "-5"),
        (f64::NAN, "null"),
        (f64::INFINITY, "null"),
    ] {
        let err = reg.wait(id.as_str(), bad, None, None).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "invalid wait timeout: expected a positive number of milliseconds, got {shown}"
            )
        );
    }
    assert!(!reg.get(id.as_str(), None).unwrap().reported);
}

#[tokio::test]
async fn an_abort_that_loses_the_race_to_settlement_still_delivers_the_terminal_snapshot() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let token = CancellationToken::new();
    let (reg2, token2, p2) = (reg.clone(), token.clone(), p.clone());
    // A listener that aborts the wait during settlement: the settlement counted the waiter first.
    let _l = reg.on_task_done(Arc::new(
        move |_: &crate::TaskSnapshot, _: Option<&Agent>| token2.cancel(),
    ));
    let waiter =
        tokio::spawn(async move { reg2.wait("bash-1", 5_000.0, None, Some(&token)).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    p2.settle(TaskOutcome::completed());
    let s = waiter.await.unwrap().unwrap();
    assert_eq!((s.status, s.reported), (TaskStatus::Completed, true));
    assert!(reg.get(id.as_str(), None).unwrap().reported);
}

#[tokio::test]
async fn an_abort_that_wins_the_race_leaves_the_notice_owed() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let token = CancellationToken::new();
    token.cancel();
    assert!(
        reg.wait(id.as_str(), 5_000.0, None, Some(&token))
            .await
            .is_err()
    );
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert!(!reg.get(id.as_str(), None).unwrap().reported);
}

#[tokio::test]
async fn a_dropped_wait_future_uncounts_its_waiter() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let r = tokio::time::timeout(
        Duration::from_millis(20),
        reg.wait(id.as_str(), 60_000.0, None, None),
    );
    assert!(r.await.is_err());
    assert_eq!(reg.stats().pending_waiters, 0);
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert!(!reg.get(id.as_str(), None).unwrap().reported);
}

#[tokio::test]
async fn a_finite_timeout_too_large_for_a_duration_waits_for_the_end_without_a_panic() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let wait = reg.wait(id.as_str(), 1e300, None, None);
    tokio::pin!(wait);
    // Polled once: the waiter is counted and its timeout set.
    assert!(
        tokio::time::timeout(Duration::from_millis(1), &mut wait)
            .await
            .is_err()
    );
    p.settle(TaskOutcome::completed());
    assert_eq!(wait.await.unwrap().status, TaskStatus::Completed);
}
