//! read, get, list and kill, and the isolation between sessions.

use super::*;
use crate::{HookScope, KillOutcome, TaskStatus};

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
    let msg = format!("unknown task {id}");
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

/// A task whose cancel and reader call back into the registry for `target` (its own id unless
/// set otherwise), recording each answer.
struct CallBack {
    reg: Registry,
    target: Arc<Mutex<Option<String>>>,
    answers: Arc<Mutex<Vec<String>>>,
}

impl CallBack {
    fn new(reg: &Registry) -> Self {
        Self {
            reg: reg.clone(),
            target: Arc::default(),
            answers: Arc::default(),
        }
    }

    fn aim(&self, id: &str) {
        *self.target.lock().unwrap() = Some(id.to_owned());
    }

    fn answers(&self) -> Vec<String> {
        self.answers.lock().unwrap().clone()
    }

    /// The task; `on_thread` runs the cancel's call-back on a thread of its own carrying the scope.
    fn task(&self, on_thread: bool) -> TaskStart {
        let (reg, target, answers) = (self.reg.clone(), self.target.clone(), self.answers.clone());
        TaskStart::new("probe", "call back", move || {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let mut tx = Some(tx);
            let (r_reg, r_target, r_answers) = (reg.clone(), target.clone(), answers.clone());
            let cancel = move |_: Option<&str>| {
                let Some(id) = target.lock().unwrap().clone() else {
                    return Ok(());
                };
                let (reg, answers) = (reg.clone(), answers.clone());
                let call_back = move || {
                    let said = match reg.kill(&id, None, None) {
                        Ok(k) => format!("kill: {}", k.snapshot().status),
                        Err(e) => format!("kill: {e}"),
                    };
                    answers.lock().unwrap().push(said);
                };
                if on_thread {
                    let scope = HookScope::current();
                    std::thread::spawn(move || {
                        let _scope = scope.map(HookScope::enter);
                        call_back();
                    })
                    .join()
                    .unwrap();
                } else {
                    call_back();
                }
                if let Some(tx) = tx.take() {
                    let _ = tx.send(Ok(TaskOutcome::killed()));
                }
                Ok(())
            };
            let done = async move { rx.await.unwrap_or_else(|_| Ok(TaskOutcome::killed())) };
            Ok(TaskHooks::new(done, cancel).with_reader(move || {
                if let Some(id) = r_target.lock().unwrap().clone() {
                    let said = match r_reg.read(&id, None) {
                        Ok(r) => format!("read: {:?}", r.text),
                        Err(e) => format!("read: {e}"),
                    };
                    r_answers.lock().unwrap().push(said);
                }
                String::new()
            }))
        })
    }
}

#[tokio::test]
async fn a_cancel_or_reader_that_kills_or_reads_its_own_task_is_refused() {
    let (reg, _s) = registry();
    let cb = CallBack::new(&reg);
    let id = reg.start(cb.task(false)).unwrap();
    cb.aim(id.as_str());
    let refusal = format!("task {id} cannot be killed or read from its own cancel or reader");
    reg.read(id.as_str(), None).unwrap();
    assert_eq!(cb.answers(), [format!("read: {refusal}")]);
    let killed = reg.kill(id.as_str(), None, None).unwrap();
    assert!(matches!(killed, KillOutcome::Requested(_)));
    settle_pass().await;
    assert_eq!(
        reg.get(id.as_str(), None).unwrap().status,
        TaskStatus::Killed
    );
    assert_eq!(
        cb.answers()[1..],
        [format!("kill: {refusal}"), format!("read: {refusal}")],
        "the cancel's kill, then the reader at settlement"
    );
}

#[tokio::test]
async fn a_call_back_on_another_thread_carrying_the_hook_scope_is_refused_too() {
    let (reg, _s) = registry();
    let cb = CallBack::new(&reg);
    let id = reg.start(cb.task(true)).unwrap();
    cb.aim(id.as_str());
    reg.kill(id.as_str(), None, None).unwrap();
    assert_eq!(
        cb.answers()[0],
        format!("kill: task {id} cannot be killed or read from its own cancel or reader")
    );
    assert!(
        HookScope::current().is_none(),
        "the scope ended with the hook"
    );
}

#[tokio::test]
async fn a_cancel_may_kill_another_task() {
    let (reg, _s) = registry();
    let cb = CallBack::new(&reg);
    let p = Probe::new();
    let other = reg.start(p.stream_task("bash", "other")).unwrap();
    let id = reg.start(cb.task(false)).unwrap();
    cb.aim(other.as_str());
    reg.kill(id.as_str(), None, None).unwrap();
    assert_eq!(cb.answers(), ["kill: stopping"]);
}

#[tokio::test]
async fn not_held_names_the_ids_of_no_task_live_or_settled_in_their_order() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let live = reg.start(p.stream_task("bash", "x")).unwrap();
    let q = Probe::new();
    let settled = reg.start(q.stream_task("bash", "y")).unwrap();
    q.settle(TaskOutcome::completed());
    settle_pass().await;
    let asked = ["bash-900", live.as_str(), "bash-901", settled.as_str()];
    assert_eq!(reg.not_held(asked), vec!["bash-900", "bash-901"]);
    assert!(reg.not_held([]).is_empty());
}
