//! on_task_done, on_tasks_changed and surface attachments.

use super::*;
use crate::RegistryError;

#[tokio::test]
async fn a_panicking_listener_is_contained_and_the_next_still_gets_one_snapshot() {
    let (reg, _s) = registry();
    let _bad = reg.on_task_done(Arc::new(|_: &crate::TaskSnapshot, _: Option<&Agent>| {
        panic!("listener")
    }));
    let count = Arc::new(Mutex::new(0));
    let c2 = count.clone();
    let _good = reg.on_task_done(Arc::new(
        move |_: &crate::TaskSnapshot, _: Option<&Agent>| *c2.lock().unwrap() += 1,
    ));
    let p = Probe::new();
    reg.start(p.final_task("bash", "x")).unwrap();
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert_eq!(*count.lock().unwrap(), 1);
}

#[tokio::test]
async fn a_listener_unregisters_with_its_registration_idempotently() {
    let (reg, _s) = registry();
    let (log, mut changed, mut done) = watch_events(&reg);
    changed.dispose();
    done.dispose();
    done.dispose();
    let p = Probe::new();
    reg.start(p.final_task("bash", "x")).unwrap();
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert!(log.take().is_empty());
    assert_eq!(reg.stats().done_listeners, 0);
}

#[tokio::test]
async fn on_settle_tasks_changed_fires_before_task_done() {
    let (reg, _s) = registry();
    let (log, _c, _d) = watch_events(&reg);
    let p = Probe::new();
    reg.start(p.final_task("bash", "x")).unwrap();
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert_eq!(
        log.take(),
        [
            "changed:none",
            "changed:none",
            "done:bash-1:completed:false"
        ]
    );
}

#[tokio::test]
async fn tasks_changed_fires_on_register_stopping_and_settle_with_the_task_readable() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "s");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (reg2, seen2, a2) = (reg.clone(), seen.clone(), a.clone());
    let _l = reg.on_tasks_changed(Arc::new(move |_: Option<&Agent>| {
        let statuses: Vec<_> = reg2
            .list(Some(&a2))
            .into_iter()
            .map(|s| s.status.to_string())
            .collect();
        seen2.lock().unwrap().push(statuses.join(","));
    }));
    let p = Probe::new();
    p.on_cancel(OnCancel::Hang);
    let id = reg
        .start(p.final_task("bash", "x").owner(a.clone()))
        .unwrap();
    reg.kill(id.as_str(), Some(&a), None).unwrap();
    p.settle(TaskOutcome::killed());
    settle_pass().await;
    assert_eq!(*seen.lock().unwrap(), ["running", "stopping", "killed"]);
}

#[tokio::test]
async fn owner_removal_is_announced_once_and_not_for_an_owner_without_tasks() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "sa");
    let idle = agent(&reg, "b", "sb");
    let p = Probe::new();
    reg.start(p.final_task("bash", "x").owner(a.clone()))
        .unwrap();
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    let (log, _c, _d) = watch_events(&reg);
    reg.dispose_agent(&a).await;
    reg.dispose_agent(&idle).await;
    assert_eq!(log.take(), ["changed:sa"]);
}

#[tokio::test]
async fn a_panicking_change_listener_is_contained() {
    let (reg, _s) = registry();
    let _bad = reg.on_tasks_changed(Arc::new(|_: Option<&Agent>| panic!("changed")));
    let (log, _c, _d) = watch_events(&reg);
    reg.start(Probe::new().final_task("bash", "x")).unwrap();
    assert_eq!(log.take(), ["changed:none"]);
}

#[tokio::test]
async fn a_listener_registered_after_service_disposal_never_runs() {
    let (reg, _s) = registry();
    reg.dispose().await;
    let l = reg.on_task_done(Arc::new(|_: &crate::TaskSnapshot, _: Option<&Agent>| {}));
    assert!(!l.is_active());
}

#[tokio::test]
async fn surfaces_count_independently_and_the_last_detach_rearms_the_fence() {
    let reg = Registry::new(RegistryConfig::new(), tokio::runtime::Handle::current());
    let mut one = reg.attach_surface("tasks", SurfaceScope::Global);
    let mut two = reg.attach_surface("tasks", SurfaceScope::Global);
    assert_eq!(reg.surfaces(), ["tasks", "tasks"]);
    one.dispose();
    one.dispose();
    assert!(reg.start(Probe::new().final_task("bash", "x")).is_ok());
    two.dispose();
    assert_eq!(
        reg.start(Probe::new().final_task("bash", "x")),
        Err(RegistryError::NoSurface)
    );
    let _three = reg.attach_surface("custom", SurfaceScope::Global);
    assert!(reg.start(Probe::new().final_task("bash", "x")).is_ok());
}
