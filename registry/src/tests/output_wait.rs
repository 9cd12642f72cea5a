//! Waits on output: each look sees only what is new, a wait sleeps until more arrives, and each owner
//! has a bounded number of them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use super::{agent, registry};
use crate::{MAX_OUTPUT_WAITS, OutputWatch, RegistryError, TaskHooks, TaskOutcome, TaskStart};

/// Output written by the test, shared with every watch of it; the bytes each watch was handed are
/// counted.
#[derive(Default)]
struct Feed {
    text: Mutex<String>,
    handed: Mutex<usize>,
    arrived: Notify,
}

impl Feed {
    fn write(&self, s: &str) {
        self.text.lock().unwrap().push_str(s);
        self.arrived.notify_waiters();
    }
}

struct FeedWatch {
    feed: Arc<Feed>,
    position: usize,
}

impl OutputWatch for FeedWatch {
    fn fresh(&mut self) -> Vec<String> {
        let text = self.feed.text.lock().unwrap();
        let new = text[self.position..].to_owned();
        self.position = text.len();
        *self.feed.handed.lock().unwrap() += new.len();
        if new.is_empty() {
            Vec::new()
        } else {
            vec![new]
        }
    }

    fn changed(&mut self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(self.feed.arrived.notified())
    }
}

/// A live stream task fed by `feed`, settled when the sender fires.
fn fed_task(
    reg: &crate::Registry,
    owner: &crate::Agent,
    feed: &Arc<Feed>,
) -> (String, oneshot::Sender<()>) {
    let (tx, rx) = oneshot::channel::<()>();
    let watched = feed.clone();
    let id = reg
        .start(
            TaskStart::new("fed", "fed", move || {
                Ok(TaskHooks::new(
                    async move {
                        let _ = rx.await;
                        Ok(TaskOutcome::completed())
                    },
                    |_| Ok(()),
                )
                .with_reader(String::new)
                .with_output_watch(move || {
                    Box::new(FeedWatch {
                        feed: watched.clone(),
                        position: 0,
                    })
                }))
            })
            .owner(owner.clone()),
        )
        .expect("start");
    (id.to_string(), tx)
}

#[tokio::test(start_paused = true)]
async fn a_wait_on_output_looks_only_at_what_is_new_and_wakes_when_it_arrives() {
    let (reg, _surface) = registry();
    let a = agent(&reg, "a", "s");
    let feed = Arc::new(Feed::default());
    let (id, _settle) = fed_task(&reg, &a, &feed);
    feed.write(&"noise\n".repeat(10_000));
    let waiting = {
        let (reg, a, id) = (reg.clone(), a.clone(), id.clone());
        tokio::spawn(async move {
            reg.wait_for_output(&id, 20_000.0, Some(&a), None, |t| t.contains("ready"))
                .await
        })
    };
    // On this one-thread runtime, a yield lets the wait run until it sleeps: it has looked once
    // (all 60,000 bytes). Time passes (the runtime's clock, paused) and no timer makes it look again.
    tokio::task::yield_now().await;
    assert_eq!(*feed.handed.lock().unwrap(), 60_000);
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(*feed.handed.lock().unwrap(), 60_000);
    feed.write("ready\n");
    let snapshot = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken by the new output")
        .expect("joined")
        .expect("matched");
    assert!(snapshot.status.is_live());
    assert_eq!(
        *feed.handed.lock().unwrap(),
        60_006,
        "only the new line was looked at after"
    );
}

#[tokio::test]
async fn each_owner_has_a_bounded_number_of_waits_on_output() {
    let (reg, _surface) = registry();
    let a = agent(&reg, "a", "s");
    let b = agent(&reg, "b", "t");
    let feed = Arc::new(Feed::default());
    let (id, settle) = fed_task(&reg, &a, &feed);
    let waits: Vec<_> = (0..MAX_OUTPUT_WAITS)
        .map(|_| {
            let (reg, a, id) = (reg.clone(), a.clone(), id.clone());
            tokio::spawn(async move {
                reg.wait_for_output(&id, 20_000.0, Some(&a), None, |_| false)
                    .await
            })
        })
        .collect();
    // On this one-thread runtime, a yield lets every spawned wait run until it sleeps.
    tokio::task::yield_now().await;
    assert!(waits.iter().all(|w| !w.is_finished()), "every wait sleeps");
    assert_eq!(
        reg.wait_for_output(&id, 1.0, Some(&a), None, |_| false)
            .await,
        Err(RegistryError::TooManyOutputWaits(MAX_OUTPUT_WAITS))
    );
    // Another owner is not counted against this one.
    let (other, _other_settle) = fed_task(&reg, &b, &feed);
    assert!(
        reg.wait_for_output(&other, 1.0, Some(&b), None, |_| false)
            .await
            .is_ok()
    );
    let _ = settle.send(());
    for w in waits {
        let snapshot = w.await.expect("joined").expect("ended at the settlement");
        assert!(snapshot.status.is_terminal());
    }
    assert!(
        reg.wait_for_output(&id, 1.0, Some(&a), None, |_| false)
            .await
            .is_ok()
    );
}
