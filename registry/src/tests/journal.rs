//! A registry with a journal: numbers come from the journal, a failed start is abandoned, and
//! listeners hear of a settlement only once the journal wrote it.

use std::sync::{Arc, Mutex};

use super::*;
use crate::{Journal, JournalStart, TaskSnapshot};

/// A journal the test holds: it numbers from 41, keeps every call, and keeps each settlement's
/// `then` until the test releases it.
#[derive(Default)]
struct HeldJournal {
    calls: Mutex<Vec<String>>,
    held: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    next: Mutex<u64>,
}

impl HeldJournal {
    fn release(&self) {
        let held: Vec<_> = std::mem::take(&mut *self.held.lock().unwrap());
        for then in held {
            then();
        }
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Journal for HeldJournal {
    fn begin(&self, start: &JournalStart<'_>) -> Result<u64, String> {
        let mut next = self.next.lock().unwrap();
        *next = (*next).max(40) + 1;
        self.calls
            .lock()
            .unwrap()
            .push(format!("begin {} {}", start.kind, *next));
        Ok(*next)
    }
    fn started(&self, id: &str) {
        self.calls.lock().unwrap().push(format!("started {id}"));
    }
    fn abandon(&self, kind: &str, number: u64) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("abandon {kind}-{number}"));
    }
    fn stopping(&self, id: &str) {
        self.calls.lock().unwrap().push(format!("stopping {id}"));
    }
    fn settled(&self, snapshot: &TaskSnapshot, then: Box<dyn FnOnce() + Send>) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("settled {} {}", snapshot.id, snapshot.status));
        self.held.lock().unwrap().push(then);
    }
}

/// A registry with a [`HeldJournal`] and one global surface attached.
fn journaled() -> (Arc<HeldJournal>, Registry, crate::Registration) {
    let journal = Arc::new(HeldJournal::default());
    let reg = Registry::with_journal(
        RegistryConfig::new(),
        tokio::runtime::Handle::current(),
        journal.clone(),
    );
    let surface = reg.attach_surface("test", SurfaceScope::Global);
    (journal, reg, surface)
}

#[tokio::test]
async fn a_journal_numbers_tasks_abandons_failed_starts_and_gates_the_notices() {
    let (journal, reg, _surface) = journaled();
    let (log, _changed, _done) = watch_events(&reg);
    let p = Probe::new();
    let id = reg.start(p.final_task("bash", "true")).expect("started");
    assert_eq!(id.as_str(), "bash-41");
    let failing = TaskStart::new("bash", "fails", || Err(ProducerError("no".into())));
    assert!(reg.start(failing).is_err());
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert!(
        !log.take().iter().any(|e| e.starts_with("done:")),
        "a listener heard of a settlement the journal had not written"
    );
    journal.release();
    assert!(
        log.take()
            .contains(&"done:bash-41:completed:false".to_owned())
    );
    assert_eq!(
        journal.calls(),
        [
            "begin bash 41",
            "started bash-41",
            "begin bash 42",
            "abandon bash-42",
            "settled bash-41 completed"
        ]
    );
}

#[tokio::test]
async fn a_starter_is_told_the_id_the_journal_numbered_before_it_runs() {
    let (journal, reg, _surface) = journaled();
    let p = Probe::new();
    let told = Arc::new(Mutex::new(None));
    let (probe, seen) = (p.clone(), told.clone());
    let start = TaskStart::with_id("bash", "named", move |id| {
        *seen.lock().unwrap() = Some(id.map(|id| id.as_str().to_owned()));
        Ok(probe.hooks().0)
    });
    let id = reg.start(start).expect("started");
    assert_eq!(
        *told.lock().unwrap(),
        Some(Some(id.as_str().to_owned())),
        "the starter ran knowing the id the start returned"
    );
    assert_eq!(
        journal.calls()[0],
        format!("begin bash {}", &id.as_str()[5..])
    );
    p.settle(TaskOutcome::completed());
}

#[tokio::test]
async fn a_task_taken_over_is_not_journaled_as_begun_or_started_again() {
    let (journal, reg, _surface) = journaled();
    let p = Probe::new();
    let id = reg
        .start(p.final_task("bash", "sleep").take_over(7))
        .expect("taken over");
    assert_eq!(id.as_str(), "bash-7");
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    assert_eq!(journal.calls(), ["settled bash-7 completed"]);
}

#[tokio::test]
async fn without_a_journal_a_starter_is_told_no_id() {
    let (reg, _registration) = registry();
    let p = Probe::new();
    let told = Arc::new(Mutex::new(None));
    let (probe, seen) = (p.clone(), told.clone());
    let start = TaskStart::with_id("bash", "unnumbered", move |id| {
        *seen.lock().unwrap() = Some(id.is_some());
        Ok(probe.hooks().0)
    });
    reg.start(start).expect("started");
    assert_eq!(*told.lock().unwrap(), Some(false));
    p.settle(TaskOutcome::completed());
}
