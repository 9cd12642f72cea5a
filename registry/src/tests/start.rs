//! start: the fence, validation, owners, admission, ids.

use std::collections::HashSet;

use super::*;
use crate::{ConfigError, MAX_SAFE_INTEGER, RegistryError, SessionId, TaskStatus};

#[tokio::test]
async fn start_without_a_surface_hits_the_fence_and_never_runs() {
    let reg = Registry::new(RegistryConfig::new(), tokio::runtime::Handle::current());
    let p = Probe::new();
    let err = reg.start(p.final_task("bash", "x")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "background tasks unavailable: no control surface is attached (load the tasks plugin)"
    );
    assert_eq!(p.runs(), 0);
    assert_eq!(reg.stats().records, 0);
}

#[tokio::test]
async fn session_scoped_surface_serves_only_its_sessions() {
    let reg = Registry::new(RegistryConfig::new(), tokio::runtime::Handle::current());
    let scope = SurfaceScope::Sessions(HashSet::from([SessionId::new("a")]));
    let _surface = reg.attach_surface("scoped", scope);
    let a = agent(&reg, "agent-a", "a");
    let b = agent(&reg, "agent-b", "b");
    let p = Probe::new();
    assert!(reg.start(p.final_task("bash", "x").owner(a)).is_ok());
    assert_eq!(
        reg.start(p.final_task("bash", "x").owner(b)),
        Err(RegistryError::NoSurface)
    );
    assert_eq!(
        reg.start(p.final_task("bash", "x")),
        Err(RegistryError::NoSurface)
    );
    assert_eq!(p.runs(), 1);
}

#[tokio::test]
async fn global_surface_serves_every_owner_and_unowned_tasks() {
    let (reg, _s) = registry();
    let a = agent(&reg, "agent-a", "a");
    let p = Probe::new();
    assert!(reg.start(p.final_task("bash", "x").owner(a)).is_ok());
    assert!(reg.start(p.final_task("bash", "x")).is_ok());
}

#[tokio::test]
async fn empty_kind_empty_label_and_zero_output_limit_are_rejected_before_run() {
    let (reg, _s) = registry();
    let p = Probe::new();
    assert_eq!(
        reg.start(p.final_task("", "x")),
        Err(RegistryError::InvalidKind)
    );
    assert_eq!(
        reg.start(p.final_task("bash", "")),
        Err(RegistryError::InvalidLabel)
    );
    let err = reg
        .start(p.final_task("bash", "x").output_limit_bytes(0))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid outputLimitBytes: expected a positive safe integer, got 0"
    );
    let too_big = reg.start(
        p.final_task("bash", "x")
            .output_limit_bytes(MAX_SAFE_INTEGER + 1),
    );
    assert_eq!(
        too_big,
        Err(RegistryError::InvalidOutputLimit(MAX_SAFE_INTEGER + 1))
    );
    assert_eq!(p.runs(), 0);
    assert_eq!(reg.stats().records, 0);
}

#[test]
fn task_limit_config_rejects_zero_and_values_past_max_safe() {
    for bad in [0, MAX_SAFE_INTEGER + 1, u64::MAX] {
        assert_eq!(
            RegistryConfig::new().with_max_tasks_per_owner(bad),
            Err(ConfigError::TaskLimit(bad))
        );
    }
    assert_eq!(
        RegistryConfig::new().with_teardown_grace(Duration::ZERO),
        Err(ConfigError::TeardownGrace)
    );
}

#[test]
fn task_limit_config_accepts_max_safe() {
    let c = RegistryConfig::new()
        .with_max_tasks_per_owner(MAX_SAFE_INTEGER)
        .unwrap();
    assert_eq!(c.max_tasks_per_owner(), MAX_SAFE_INTEGER);
}

#[tokio::test]
async fn default_limit_is_ten_and_the_eleventh_start_never_runs() {
    let (reg, _s) = registry();
    let a = agent(&reg, "a", "s");
    let p = Probe::new();
    for _ in 0..10 {
        reg.start(p.final_task("bash", "x").owner(a.clone()))
            .unwrap();
    }
    let err = reg.start(p.final_task("bash", "x").owner(a)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "background task limit reached for this owner (limit: 10); use task_kill to stop an unneeded task, wait for it to finish, then retry"
    );
    assert_eq!(p.runs(), 10);
}

#[tokio::test]
async fn a_rejected_start_uses_no_id_and_the_next_start_after_settle_gets_the_next_number() {
    let (reg, _s) = registry_with(RegistryConfig::new().with_max_tasks_per_owner(1).unwrap());
    let first = Probe::new();
    assert_eq!(
        reg.start(first.final_task("bash", "x")).unwrap().as_str(),
        "bash-1"
    );
    let second = Probe::new();
    assert_eq!(
        reg.start(second.final_task("bash", "x")),
        Err(RegistryError::LimitReached(1))
    );
    assert_eq!(second.runs(), 0);
    first.settle(TaskOutcome::completed());
    settle_pass().await;
    assert_eq!(
        reg.start(second.final_task("bash", "x")).unwrap().as_str(),
        "bash-2"
    );
}

#[tokio::test]
async fn a_failing_starter_registers_nothing_and_burns_no_id() {
    let (reg, _s) = registry();
    let err = reg
        .start(TaskStart::new("bash", "x", || Err("spawn failed".into())))
        .unwrap_err();
    assert_eq!(err.to_string(), "spawn failed");
    let panicking = TaskStart::new("bash", "x", || panic!("boom"));
    assert_eq!(
        reg.start(panicking).unwrap_err().to_string(),
        "task starter panicked: boom"
    );
    assert_eq!(reg.stats().records, 0);
    assert_eq!(reg.stats().live, 0);
    assert_eq!(
        reg.start(Probe::new().final_task("bash", "x"))
            .unwrap()
            .as_str(),
        "bash-1"
    );
}

#[tokio::test]
async fn a_stopping_task_keeps_its_slot_until_it_settles() {
    let (reg, _s) = registry_with(RegistryConfig::new().with_max_tasks_per_owner(1).unwrap());
    let p = Probe::new();
    p.on_cancel(OnCancel::Hang);
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    reg.kill(id.as_str(), None, None).unwrap();
    assert_eq!(
        reg.get(id.as_str(), None).unwrap().status,
        TaskStatus::Stopping
    );
    assert_eq!(
        reg.start(Probe::new().final_task("bash", "y")),
        Err(RegistryError::LimitReached(1))
    );
    p.settle(TaskOutcome::killed());
    settle_pass().await;
    assert!(reg.start(Probe::new().final_task("bash", "y")).is_ok());
}

#[tokio::test]
async fn completed_killed_and_failed_each_free_the_slot() {
    for outcome in [
        TaskOutcome::completed(),
        TaskOutcome::killed(),
        TaskOutcome::failed("x"),
    ] {
        let (reg, _s) = registry_with(RegistryConfig::new().with_max_tasks_per_owner(1).unwrap());
        let p = Probe::new();
        reg.start(p.final_task("bash", "x")).unwrap();
        p.settle(outcome);
        settle_pass().await;
        assert!(reg.start(Probe::new().final_task("bash", "y")).is_ok());
    }
}

#[tokio::test]
async fn admission_buckets_are_per_instance_and_unowned_tasks_share_one() {
    let (reg, _s) = registry_with(RegistryConfig::new().with_max_tasks_per_owner(1).unwrap());
    let p = Probe::new();
    let old = agent(&reg, "a", "s");
    reg.start(p.final_task("bash", "x").owner(old.clone()))
        .unwrap();
    let replacement = agent(&reg, "a", "s");
    assert!(
        reg.start(p.final_task("bash", "x").owner(replacement.clone()))
            .is_ok()
    );
    assert_eq!(
        reg.start(p.final_task("bash", "x").owner(replacement)),
        Err(RegistryError::LimitReached(1))
    );
    reg.start(p.final_task("bash", "x")).unwrap();
    assert_eq!(
        reg.start(p.final_task("bash", "x")),
        Err(RegistryError::LimitReached(1))
    );
    let err = reg.start(p.final_task("bash", "x").owner(old)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent \"a\" is not the registered agent instance (background task owner must be live)"
    );
}

#[tokio::test]
async fn id_counters_are_per_kind() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let ids: Vec<String> = ["bash", "bash", "subagent", "workflow"]
        .iter()
        .map(|k| reg.start(p.final_task(k, "x")).unwrap().to_string())
        .collect();
    assert_eq!(ids, ["bash-1", "bash-2", "subagent-1", "workflow-1"]);
}

#[tokio::test]
async fn an_unregistered_owner_fails_cleanly_then_works_once_registered() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let a = Agent::new("a", "s");
    assert_eq!(
        reg.start(p.final_task("bash", "x").owner(a.clone())),
        Err(RegistryError::StaleOwner("a".into()))
    );
    assert_eq!(p.runs(), 0);
    reg.register_agent(&a);
    reg.start(p.final_task("bash", "x").owner(a.clone()))
        .unwrap();
    reg.dispose_agent(&a).await;
    assert_eq!(p.cancels(), vec![Some("owner disposed".to_owned())]);
}

#[tokio::test]
async fn a_stale_owner_is_refused_but_its_session_still_sees_the_current_owners_tasks() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let old = agent(&reg, "a", "s");
    let current = agent(&reg, "a", "s");
    let id = reg.start(p.final_task("bash", "x").owner(current)).unwrap();
    assert!(
        reg.start(p.final_task("bash", "y").owner(old.clone()))
            .is_err()
    );
    assert_eq!(p.runs(), 1);
    let seen: Vec<_> = reg.list(Some(&old)).into_iter().map(|s| s.id).collect();
    assert_eq!(seen, vec![id]);
}

#[tokio::test]
async fn snapshots_are_coherent_and_the_check_rejects_incoherent_ones() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "x")).unwrap();
    let live = reg.get(id.as_str(), None).unwrap();
    assert_eq!(live.check_coherent(), Ok(()));
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    let done = reg.get(id.as_str(), None).unwrap();
    assert_eq!(done.check_coherent(), Ok(()));

    let mut bad = Vec::new();
    for id in ["bash", "bash-0", "bash-01", "-1", "other-1", "bash-x"] {
        bad.push(crate::TaskSnapshot {
            id: id.into(),
            ..live.clone()
        });
    }
    bad.push(crate::TaskSnapshot {
        finished_at_ms: None,
        ..done.clone()
    });
    bad.push(crate::TaskSnapshot {
        finished_at_ms: Some(1),
        ..live.clone()
    });
    bad.push(crate::TaskSnapshot {
        finished_at_ms: Some(done.started_at_ms - 1),
        ..done.clone()
    });
    for s in bad {
        assert!(s.check_coherent().is_err(), "{s:?} passed");
    }
}

#[tokio::test]
async fn work_begun_before_its_start_shows_as_started_then_and_never_later_than_now() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let before = crate::state::now_ms();
    let begun = reg
        .start(p.final_task("bash", "x").started_at(before - 5_000))
        .unwrap();
    let snap = reg.get(begun.as_str(), None).unwrap();
    assert_eq!(snap.started_at_ms, before - 5_000);
    let future = reg
        .start(p.final_task("bash", "y").started_at(u64::MAX))
        .unwrap();
    let snap = reg.get(future.as_str(), None).unwrap();
    assert!(snap.started_at_ms >= before && snap.started_at_ms <= crate::state::now_ms());
}
