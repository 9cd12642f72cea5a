//! Owner disposal, service disposal and the bounded teardown.

use super::*;
use crate::{RegistryError, TaskStatus};

#[tokio::test]
async fn owner_disposal_cancels_awaits_and_drops_the_owners_tasks() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "s");
    let p = Probe::new();
    let id = reg
        .start(p.stream_task("bash", "x").owner(a.clone()))
        .unwrap();
    reg.dispose_agent(&a).await;
    assert_eq!(p.cancels(), vec![Some("owner disposed".to_owned())]);
    assert_eq!(
        reg.get(id.as_str(), Some(&a)),
        Err(RegistryError::UnknownTask(id.to_string()))
    );
    assert_eq!(
        reg.stats(),
        crate::RegistryStats {
            done_listeners: 0,
            ..Default::default()
        }
    );
    assert!(reg.registered_agent("a").is_none());
}

#[tokio::test]
async fn a_task_cancelled_by_teardown_is_delivered_once_reported() {
    let (reg, _s) = registry();
    let (log, _c, _d) = watch_events(&reg);
    let a = agent(&reg, "a", "s");
    let p = Probe::new();
    reg.start(p.final_task("bash", "x").owner(a.clone()))
        .unwrap();
    reg.dispose_agent(&a).await;
    let events = log.take();
    assert_eq!(
        events,
        [
            "changed:s",
            "changed:s",
            "changed:s",
            "done:bash-1:killed:true",
            "changed:s"
        ],
        "register, stopping, settle, done, removal"
    );
}

#[tokio::test]
async fn one_cleanup_bucket_per_owner_however_many_tasks() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "s");
    for _ in 0..3 {
        reg.start(Probe::new().final_task("bash", "x").owner(a.clone()))
            .unwrap();
    }
    assert_eq!(reg.stats().owners, 1);
    reg.dispose_agent(&a).await;
    assert_eq!(reg.stats().owners, 0);
}

#[tokio::test]
async fn disposing_the_old_owner_does_not_touch_its_replacements_tasks() {
    let (reg, _s) = registry();
    let old = agent(&reg, "a", "s");
    let p_old = Probe::new();
    reg.start(p_old.final_task("bash", "old").owner(old.clone()))
        .unwrap();
    let new = agent(&reg, "a", "s");
    let p_new = Probe::new();
    let id = reg
        .start(p_new.final_task("bash", "new").owner(new.clone()))
        .unwrap();
    reg.dispose_agent(&old).await;
    assert!(p_new.cancels().is_empty());
    assert_eq!(
        reg.get(id.as_str(), Some(&new)).unwrap().status,
        TaskStatus::Running
    );
    assert!(reg.registered_agent("a").unwrap().same_instance(&new));
}

#[tokio::test]
async fn a_throwing_teardown_cancel_force_fails_once_and_ignores_the_late_outcome() {
    let (reg, _s) = registry();
    let (log, _c, _d) = watch_events(&reg);
    let a = agent(&reg, "a", "s");
    let p = Probe::new();
    p.on_cancel(OnCancel::Fail("EPERM".into()));
    reg.start(p.final_task("bash", "x").owner(a.clone()))
        .unwrap();
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let _l = reg.on_task_done(Arc::new(
        move |s: &crate::TaskSnapshot, _: Option<&Agent>| *seen2.lock().unwrap() = Some(s.clone()),
    ));
    reg.dispose_agent(&a).await;
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    let s = seen.lock().unwrap().clone().unwrap();
    assert_eq!(s.status, TaskStatus::Failed);
    assert_eq!(
        s.detail.as_deref(),
        Some("cancel threw during teardown; work may be orphaned: EPERM")
    );
    let dones = log
        .take()
        .into_iter()
        .filter(|e| e.starts_with("done:"))
        .count();
    assert_eq!(dones, 1);
    assert_eq!(reg.stats().records, 0);
}

#[tokio::test]
async fn a_producer_that_never_settles_after_cancel_is_force_failed_after_the_grace() {
    let grace = Duration::from_millis(50);
    let config = RegistryConfig::new().with_teardown_grace(grace).unwrap();
    let (reg, _s) = registry_with(config);
    let a = agent(&reg, "a", "s");
    let p = Probe::new();
    p.on_cancel(OnCancel::Hang);
    reg.start(p.final_task("bash", "x").owner(a.clone()))
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let _l = reg.on_task_done(Arc::new(
        move |s: &crate::TaskSnapshot, _: Option<&Agent>| seen2.lock().unwrap().push(s.clone()),
    ));
    tokio::time::timeout(Duration::from_secs(5), reg.dispose_agent(&a))
        .await
        .expect("teardown is bounded");
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].status, TaskStatus::Failed);
    assert_eq!(
        seen[0].detail.as_deref(),
        Some("did not stop within 50 ms of cancel; work may be orphaned")
    );
    assert_eq!(reg.stats().live, 0);
}

#[tokio::test]
async fn service_disposal_cancels_everything_awaits_and_never_fires_task_done() {
    let (reg, _s) = registry();
    let (log, _c, _d) = watch_events(&reg);
    let a = agent(&reg, "a", "s");
    let (p1, p2) = (Probe::new(), Probe::new());
    reg.start(p1.final_task("bash", "x").owner(a)).unwrap();
    reg.start(p2.final_task("bash", "y")).unwrap();
    log.take();
    reg.dispose().await;
    assert_eq!(
        p1.cancels(),
        vec![Some("tasks service disposed".to_owned())]
    );
    assert_eq!(
        p2.cancels(),
        vec![Some("tasks service disposed".to_owned())]
    );
    let events = log.take();
    assert!(events.iter().all(|e| !e.starts_with("done:")), "{events:?}");
    assert_eq!(reg.stats().records, 0);
    assert_eq!(
        reg.start(Probe::new().final_task("bash", "z")),
        Err(RegistryError::Disposed)
    );
}

#[tokio::test]
async fn service_disposal_force_fails_a_throwing_cancel_without_waiting() {
    let (reg, _s) = registry();
    let p = Probe::new();
    p.on_cancel(OnCancel::Fail("nope".into()));
    reg.start(p.final_task("bash", "x")).unwrap();
    tokio::time::timeout(Duration::from_secs(1), reg.dispose())
        .await
        .expect("no wait");
    assert_eq!(reg.stats().records, 0);
}

#[tokio::test]
async fn service_disposal_announces_stopping_settle_and_the_emptied_set_once_per_owner() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "sa");
    let (owned, unowned) = (Probe::new(), Probe::new());
    reg.start(owned.final_task("bash", "x").owner(a)).unwrap();
    reg.start(unowned.final_task("bash", "y")).unwrap();
    let (log, _c, _d) = watch_events(&reg);
    reg.dispose().await;
    let events = log.take();
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!(
        (count("changed:sa"), count("changed:none")),
        (3, 3),
        "{events:?}"
    );
    assert_eq!(events.len(), 6);
}

#[tokio::test]
async fn owner_disposal_waits_for_a_start_in_flight_and_cancels_it_too() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "s");
    let p = Probe::new();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let p2 = p.clone();
    let slow = TaskStart::new("bash", "slow", move || {
        entered_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        Ok(p2.hooks().0)
    })
    .owner(a.clone());
    let reg2 = reg.clone();
    let starter = std::thread::spawn(move || reg2.start(slow));
    entered_rx.recv().unwrap();
    let disposal = {
        let (reg, a) = (reg.clone(), a.clone());
        tokio::spawn(async move { reg.dispose_agent(&a).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        !disposal.is_finished(),
        "disposal waits for the start in flight"
    );
    go_tx.send(()).unwrap();
    starter.join().unwrap().unwrap();
    disposal.await.unwrap();
    assert_eq!(p.cancels(), vec![Some("owner disposed".to_owned())]);
    assert_eq!(reg.stats().records, 0);
}

#[tokio::test]
async fn an_overseer_sees_reads_and_kills_every_owners_tasks_and_an_owner_only_its_own() {
    let (reg, _s) = registry();
    let (a, b) = (agent(&reg, "a", "s-a"), agent(&reg, "b", "s-b"));
    let p = Probe::new();
    let of_a = reg
        .start(p.stream_task("bash", "a's").owner(a.clone()))
        .unwrap();
    let unowned = reg.start(p.stream_task("bash", "nobody's")).unwrap();
    let of_b = reg
        .start(p.stream_task("bash", "b's").owner(b.clone()))
        .unwrap();
    let ids = |caller: &Agent| -> Vec<String> {
        reg.list(Some(caller))
            .iter()
            .map(|t| t.id.to_string())
            .collect()
    };
    let all = vec![of_a.to_string(), unowned.to_string(), of_b.to_string()];
    let overseer = Agent::overseer("web-view");
    assert_eq!(ids(&overseer), all, "every owner's, in registration order");
    assert_eq!(ids(&a), vec![of_a.to_string(), unowned.to_string()]);
    assert_eq!(
        reg.get(of_b.as_str(), Some(&a)),
        Err(RegistryError::ForeignTask(of_b.clone()))
    );
    assert!(reg.get(of_b.as_str(), Some(&overseer)).is_ok());
    assert!(reg.kill(of_b.as_str(), Some(&overseer), None).is_ok());
    assert_eq!(p.cancels().len(), 1, "the overseer's kill reached b's task");
    assert!(
        reg.registered_agent("web-view").is_none(),
        "it owns nothing"
    );
}
