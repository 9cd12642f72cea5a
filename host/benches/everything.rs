//! Starts with everything on, for `scripts/bench` (issue 47, item 4; release builds, in process,
//! through the real bash and tasks plugins): 1,000 background `sleep` starts on a host with the
//! durable store, the keeper holding every task for a handover, and a bounded policy, against
//! 1,000 bare `std::process::Command` spawns of the same command measured right before it. Each
//! layer is measured the same way on its own: the store alone (no keeper), the keeper alone, the
//! bounds (with the keeper, whose wrapper they need), and the store with the keeper holding for a
//! handover. `TASKHOST_EVERYTHING_STARTS=N` changes the 1,000; `TASKHOST_EVERYTHING_ROWS=TEXT`
//! runs only the rows whose name holds `TEXT`.

mod common;

use std::path::Path;
use std::sync::Arc;

use taskhost::process::bounds::Bounds;
use taskhost::process::keeper::HoldSetup;
use taskhost_store::{Store, Sync};

/// What a host of one row runs with.
#[derive(Clone, Copy)]
struct Layers {
    store: bool,
    keeper: bool,
    bounds: bool,
    handover: bool,
}

const ROWS: [(&str, Layers); 6] = [
    ("none", Layers::NONE),
    (
        "store alone",
        Layers {
            store: true,
            ..Layers::NONE
        },
    ),
    (
        "keeper alone",
        Layers {
            keeper: true,
            ..Layers::NONE
        },
    ),
    (
        "bounds (with the keeper they need)",
        Layers {
            keeper: true,
            bounds: true,
            ..Layers::NONE
        },
    ),
    (
        "store + keeper holding for a handover",
        Layers {
            store: true,
            keeper: true,
            handover: true,
            ..Layers::NONE
        },
    ),
    (
        "all: store, handover, bounds",
        Layers {
            store: true,
            keeper: true,
            bounds: true,
            handover: true,
        },
    ),
];

impl Layers {
    const NONE: Self = Self {
        store: false,
        keeper: false,
        bounds: false,
        handover: false,
    };
}

/// A private directory at `dir`.
fn private(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
        .expect("a private directory");
}

/// The host of one row, its files under `dir`.
fn host(rt: &tokio::runtime::Runtime, dir: &Path, layers: Layers, n: usize) -> taskhost::Taskhost {
    private(dir);
    let state = layers
        .store
        .then(|| Arc::new(Store::open(&dir.join("state"), Sync::Normal).expect("store")));
    let policies = layers.bounds.then(|| {
        let work = dir.join("work");
        std::fs::create_dir_all(&work).expect("work");
        let bounds = Bounds {
            policy: "everything".into(),
            write: vec![work],
            hide: vec![dir.join("gen")],
            pids_max: Some(16),
            filesystem: true,
            ..Default::default()
        };
        let all = [("default".to_owned(), bounds)].into();
        Arc::new(taskhost::policy::Policies::new(all, state.clone()))
    });
    let config = taskhost_registry::RegistryConfig::new()
        .with_max_tasks_per_owner(n as u64 + 10)
        .expect("config");
    let options = taskhost::LoadOptions {
        allow_untrusted: true,
        ..taskhost::LoadOptions::new(dir.join("gen"))
    };
    let services = taskhost::ServiceOptions {
        keeper: layers
            .keeper
            .then(|| common::profile_dir().join("taskhost")),
        state: state.clone(),
        policies,
        ..taskhost::ServiceOptions::default()
    };
    let host = taskhost::Taskhost::new(config, rt.handle().clone(), options, services);
    if layers.handover
        && let Some(state) = &state
    {
        hold_for_handover(&host, state, dir);
    }
    common::with_bash(host)
}

/// Tells `host`'s keeper to hold every task for a successor, as `serve --listen` does.
fn hold_for_handover(host: &taskhost::Taskhost, state: &Store, dir: &Path) {
    let listener = std::os::unix::net::UnixListener::bind(dir.join("handover.sock"))
        .expect("the handover socket");
    let setup = HoldSetup {
        grace_ms: 60_000,
        host: state.host_id().expect("a host row"),
        listener: listener.into(),
        lock: state
            .lock_fd()
            .expect("the host's lock")
            .try_clone_to_owned()
            .expect("a second handle of the lock"),
        listens: Vec::new(),
    };
    host.services().processes.enable_handover(setup);
    assert!(host.services().processes.hands_over(), "the keeper holds");
}

/// Seconds to start `n` background sleeps on a host with `layers`, its files under `dir`.
fn starts(dir: &Path, layers: Layers, n: usize) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let host = host(&rt, dir, layers, n);
    let seconds = common::background_sleeps(&rt, &host, n);
    rt.block_on(host.shutdown());
    if let Some(state) = &host.services().state {
        state.close();
    }
    seconds
}

fn main() {
    let n: usize = std::env::var("TASKHOST_EVERYTHING_STARTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let dir = common::scratch("everything");
    let count = common::thousands(n);
    // `TASKHOST_EVERYTHING_ROWS=store` runs only the rows whose name holds it (for a profile).
    let only = std::env::var("TASKHOST_EVERYTHING_ROWS").unwrap_or_default();
    for (i, (name, layers)) in ROWS.iter().enumerate() {
        if !name.contains(only.as_str()) {
            continue;
        }
        let bare = common::bare_spawns(n);
        let ours = starts(&dir.join(i.to_string()), *layers, n);
        let target = if layers.bounds && layers.handover && layers.store {
            "<= 1.5"
        } else {
            ""
        };
        println!(
            "{{\"name\":\"everything on: {count} background starts, {name}\",\"unit\":\"ms\",\"value\":{:.0},\"baseline_name\":\"{count} std::process spawns of the same command, just before\",\"baseline\":{:.0},\"ratio\":{:.2},\"target\":\"{target}\"}}",
            ours * 1e3,
            bare * 1e3,
            ours / bare
        );
    }
}
