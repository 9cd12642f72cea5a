//! Many threads at once: starts, reads, kills and waits racing settlement. Every task settles once,
//! every listener fires once per task, every byte is read once, and no waiter is left behind.

use std::collections::HashMap;

use super::*;
use crate::{CancellationToken, TaskSnapshot};

/// A small deterministic generator, so a failing interleaving can be replayed by seed.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_starts_reads_kills_and_waits_settle_every_task_once_with_complete_output() {
    let config = RegistryConfig::new()
        .with_max_tasks_per_owner(crate::MAX_SAFE_INTEGER)
        .unwrap();
    let (reg, _s) = registry_with(config);
    let agents: Vec<Agent> = (0..4)
        .map(|i| agent(&reg, &format!("a{i}"), &format!("s{i}")))
        .collect();
    let done_counts: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let mut guards = Vec::new();
    for _ in 0..2 {
        let counts = done_counts.clone();
        guards.push(
            reg.on_task_done(Arc::new(move |s: &TaskSnapshot, _: Option<&Agent>| {
                assert!(s.status.is_terminal());
                *counts.lock().unwrap().entry(s.id.to_string()).or_default() += 1;
            })),
        );
    }

    const DRIVERS: u64 = 8;
    const PER_DRIVER: u64 = 25;
    const CHUNKS: u64 = 20;
    let mut drivers = Vec::new();
    for d in 0..DRIVERS {
        let reg = reg.clone();
        let agents = agents.clone();
        drivers.push(tokio::spawn(async move {
            let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (d + 1));
            let mut checks = Vec::new();
            for _ in 0..PER_DRIVER {
                let owner = agents[rng.next(agents.len() as u64) as usize].clone();
                let p = Probe::new();
                p.on_cancel(OnCancel::Hang);
                let id = reg
                    .start(p.stream_task("bash", "race").owner(owner.clone()))
                    .unwrap();
                let expected: String = (0..CHUNKS).map(|c| format!("{id}:{c};")).collect();
                let pusher = {
                    let (p, id) = (p.clone(), id.clone());
                    let pause = rng.next(3);
                    tokio::spawn(async move {
                        for c in 0..CHUNKS {
                            p.push(&format!("{id}:{c};"));
                            if c % 5 == pause {
                                tokio::task::yield_now().await;
                            }
                        }
                        p.settle(TaskOutcome::completed());
                    })
                };
                let reader = {
                    let (reg, id, owner) = (reg.clone(), id.clone(), owner.clone());
                    tokio::spawn(async move {
                        let mut got = String::new();
                        loop {
                            let r = reg.read(id.as_str(), Some(&owner)).unwrap();
                            got.push_str(&r.text);
                            if r.snapshot.status.is_terminal() {
                                return got;
                            }
                            tokio::task::yield_now().await;
                        }
                    })
                };
                let killer = {
                    let (reg, id, owner) = (reg.clone(), id.clone(), owner.clone());
                    let delay = rng.next(4);
                    tokio::spawn(async move {
                        for _ in 0..delay {
                            tokio::task::yield_now().await;
                        }
                        reg.kill(id.as_str(), Some(&owner), Some("race")).unwrap();
                    })
                };
                let waiters: Vec<_> = (0..3)
                    .map(|w| {
                        let (reg, id, owner) = (reg.clone(), id.clone(), owner.clone());
                        let token = CancellationToken::new();
                        if w == 2 {
                            token.cancel();
                        }
                        let timeout = [1.0, 2_000.0, 2_000.0][w];
                        tokio::spawn(async move {
                            let _ = reg
                                .wait(id.as_str(), timeout, Some(&owner), Some(&token))
                                .await;
                        })
                    })
                    .collect();
                checks.push((id, expected, pusher, reader, killer, waiters));
            }
            for (id, expected, pusher, reader, killer, waiters) in checks {
                pusher.await.unwrap();
                killer.await.unwrap();
                for w in waiters {
                    w.await.unwrap();
                }
                assert_eq!(reader.await.unwrap(), expected, "output of {id}");
            }
        }));
    }
    for d in drivers {
        d.await.unwrap();
    }
    settle_pass().await;
    let counts = done_counts.lock().unwrap().clone();
    assert_eq!(counts.len() as u64, DRIVERS * PER_DRIVER);
    assert!(
        counts.values().all(|&n| n == 2),
        "each of two listeners fired once per task"
    );
    let stats = reg.stats();
    assert_eq!((stats.live, stats.pending_waiters), (0, 0));
    for a in &agents {
        assert!(
            reg.list(Some(a))
                .iter()
                .all(|s| s.status.is_terminal() && s.check_coherent().is_ok())
        );
    }
}

#[test]
fn starts_from_many_os_threads_respect_the_limit_exactly() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let reg = Registry::new(
        RegistryConfig::new().with_max_tasks_per_owner(7).unwrap(),
        rt.handle().clone(),
    );
    let _s = reg.attach_surface("t", SurfaceScope::Global);
    let a = Agent::new("a", "s");
    reg.register_agent(&a);
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let (reg, a) = (reg.clone(), a.clone());
            std::thread::spawn(move || {
                (0..10)
                    .filter(|_| {
                        reg.start(Probe::new().final_task("bash", "x").owner(a.clone()))
                            .is_ok()
                    })
                    .count()
            })
        })
        .collect();
    let accepted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(accepted, 7);
    assert_eq!(reg.stats().live, 7);
    let ids: Vec<_> = reg
        .list(Some(&a))
        .into_iter()
        .map(|s| s.id.to_string())
        .collect();
    let expected: Vec<_> = (1..=7).map(|n| format!("bash-{n}")).collect();
    assert_eq!(ids, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposing_owners_while_their_tasks_settle_settles_each_task_once() {
    let (reg, _s) = registry();
    let count = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let c2 = count.clone();
    let _l = reg.on_task_done(Arc::new(move |s: &TaskSnapshot, _: Option<&Agent>| {
        *c2.lock().unwrap().entry(s.id.to_string()).or_default() += 1;
    }));
    let mut jobs = Vec::new();
    for i in 0..40 {
        let a = agent(&reg, &format!("a{i}"), &format!("s{i}"));
        let probes: Vec<Probe> = (0..5).map(|_| Probe::new()).collect();
        for p in &probes {
            reg.start(p.final_task("bash", "x").owner(a.clone()))
                .unwrap();
        }
        let reg = reg.clone();
        jobs.push(tokio::spawn(async move {
            let settler = tokio::spawn(async move {
                for p in probes {
                    p.settle(TaskOutcome::completed());
                    tokio::task::yield_now().await;
                }
            });
            reg.dispose_agent(&a).await;
            settler.await.unwrap();
        }));
    }
    for j in jobs {
        j.await.unwrap();
    }
    let count = count.lock().unwrap();
    assert_eq!(count.len(), 200);
    assert!(count.values().all(|&n| n == 1));
    assert_eq!(
        reg.stats(),
        crate::RegistryStats {
            done_listeners: 1,
            ..Default::default()
        }
    );
}
