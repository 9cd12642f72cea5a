//! Registry figures for `scripts/bench`: each against `tokio::spawn` + join of an empty future, measured
//! in the same run. Prints one line of JSON per figure on stdout.

use std::time::{Duration, Instant};

use taskhost_registry::{
    Agent, Registry, RegistryConfig, SurfaceScope, TaskHooks, TaskOutcome, TaskStart,
};

fn per_iter(total: Duration, n: u32) -> f64 {
    total.as_secs_f64() * 1e9 / f64::from(n)
}

async fn spawn_join(n: u32) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        tokio::spawn(async {}).await.expect("empty task");
    }
    t.elapsed()
}

async fn start_settle_read(reg: &Registry, owner: &Agent, n: u32) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        let spec = TaskStart::new("bench", "trivial", || {
            Ok(TaskHooks::new(
                async { Ok(TaskOutcome::completed()) },
                |_| Ok(()),
            ))
        })
        .owner(owner.clone());
        let id = reg.start(spec).expect("start");
        reg.wait(id.as_str(), 10_000.0, Some(owner), None)
            .await
            .expect("wait");
        reg.read(id.as_str(), Some(owner)).expect("read");
    }
    t.elapsed()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let config = RegistryConfig::new().with_max_tasks_per_owner(1 << 40).expect("config");
        let reg = Registry::new(config, tokio::runtime::Handle::current());
        let _surface = reg.attach_surface("bench", SurfaceScope::Global);
        // Pairs of rounds, baseline then ours, each round's tasks owned by a fresh session that is
        // disposed (untimed) after it, as a session's records go when it closes; the figure is the
        // median of the per-pair ratios, so a slow stretch of the VM weighs on both sides of a pair.
        let (rounds, n) = (15, 2_000);
        let warm = Agent::new("warm", "warm");
        reg.register_agent(&warm);
        spawn_join(1_000).await;
        start_settle_read(&reg, &warm, 1_000).await;
        reg.dispose_agent(&warm).await;
        let (mut bases, mut ourss, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..rounds {
            let owner = Agent::new(format!("round-{r}"), format!("round-{r}"));
            reg.register_agent(&owner);
            let base = per_iter(spawn_join(n).await, n);
            let ours = per_iter(start_settle_read(&reg, &owner, n).await, n);
            reg.dispose_agent(&owner).await;
            bases.push(base);
            ourss.push(ours);
            ratios.push(ours / base);
        }
        let (base, ours, ratio) = (median(bases), median(ourss), median(ratios));
        println!(
            "{{\"name\":\"registry start+settle+read (median of {rounds} pairs)\",\"unit\":\"ns/op\",\"value\":{ours:.0},\"baseline_name\":\"tokio spawn+join\",\"baseline\":{base:.0},\"ratio\":{ratio:.2},\"target_ratio\":3.0}}"
        );

        // list with 10,000 terminal records visible to the caller, and the same registry seen by a
        // caller who owns one task: list costs what the caller sees. A fresh registry, so the unowned
        // tasks above (visible to everyone) stay out of it.
        let config = RegistryConfig::new().with_max_tasks_per_owner(1 << 40).expect("config");
        let reg = Registry::new(config, tokio::runtime::Handle::current());
        let _surface = reg.attach_surface("bench", SurfaceScope::Global);
        let big = Agent::new("big", "big");
        let small = Agent::new("small", "small");
        reg.register_agent(&big);
        reg.register_agent(&small);
        for (owner, count) in [(&big, 10_000), (&small, 1)] {
            for _ in 0..count {
                let spec = TaskStart::new("bench", "done", || {
                    Ok(TaskHooks::new(async { Ok(TaskOutcome::completed()) }, |_| Ok(())))
                })
                .owner(owner.clone());
                let id = reg.start(spec).expect("start");
                reg.wait(id.as_str(), 10_000.0, Some(owner), None).await.expect("wait");
            }
        }
        let rounds = 200;
        let t = Instant::now();
        for _ in 0..rounds {
            assert!(reg.list(Some(&big)).len() >= 10_000);
        }
        let list_big = per_iter(t.elapsed(), rounds);
        let t = Instant::now();
        for _ in 0..rounds * 100 {
            assert!(!reg.list(Some(&small)).is_empty());
        }
        let list_small = per_iter(t.elapsed(), rounds * 100);
        println!(
            "{{\"name\":\"registry list, 10,000 visible terminal records\",\"unit\":\"ns/op\",\"value\":{list_big:.0},\"baseline_name\":\"tokio spawn+join\",\"baseline\":{base:.0},\"ratio\":{:.2}}}",
            list_big / base
        );
        println!(
            "{{\"name\":\"registry list, 1 visible among 10,000\",\"unit\":\"ns/op\",\"value\":{list_small:.0},\"baseline_name\":\"tokio spawn+join\",\"baseline\":{base:.0},\"ratio\":{:.2}}}",
            list_small / base
        );
    });
}
