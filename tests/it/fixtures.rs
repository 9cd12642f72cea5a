//! Shared fixtures: locating the built plugins, a host per test, private plugin files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use taskhost::{LoadOptions, ServiceOptions, Taskhost};
use taskhost_registry::RegistryConfig;
pub use taskhost_tests::Scratch;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The cargo target profile directory holding the built cdylibs (this binary is in its `deps/`).
pub fn artifacts() -> PathBuf {
    taskhost_tests::profile_dir()
}

/// A built plugin by crate file stem, e.g. `taskhost_test_probe`.
pub fn built(stem: &str) -> PathBuf {
    let p = artifacts().join(format!("lib{stem}.so"));
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (scripts/test does)",
        p.display()
    );
    p
}

/// A fresh private directory (mode 0700) for one test, removed when dropped.
pub fn scratch(name: &str) -> Scratch {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Scratch::new("taskhost-it", &format!("{name}-{n}"))
}

/// Runs `cmd` in a process group of its own and collects its output, failing the test (after killing
/// the whole group) when it has not ended within `limit`: a hang is a failure, never a stuck suite.
pub fn output_within(cmd: &mut std::process::Command, limit: Duration) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let child = cmd
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let pgid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("collect the output"),
        Err(_) => {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("{cmd:?} did not end within {limit:?}");
        }
    }
}

pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Copies a built plugin into `dir` under a unique stem, so `/proc/self/maps` tells this test's
/// generations apart from other tests' in the same process.
pub fn plugin_copy(stem: &str, dir: &Path, unique: &str) -> PathBuf {
    let target = dir.join(format!("lib{unique}.so"));
    std::fs::copy(built(stem), &target).expect("copy plugin");
    set_mode(&target, 0o755);
    target
}

/// The bytes of the built plugin `stem` as a rebuild would make them: the same code under another
/// build id (the linker's hash of its output, which the host uses to tell builds apart), numbered `n`.
pub fn rebuilt_bytes(stem: &str, n: u32) -> Vec<u8> {
    taskhost_tests::with_build_id(std::fs::read(built(stem)).expect("read plugin"), n)
}

/// A host on its own runtime.
pub struct Fixture {
    pub rt: tokio::runtime::Runtime,
    pub host: Arc<Taskhost>,
    /// Dropped last: the host's files are in it.
    pub dir: Scratch,
}

impl Fixture {
    pub fn new(name: &str) -> Self {
        Self::with_config(name, RegistryConfig::new())
    }

    pub fn with_config(name: &str, config: RegistryConfig) -> Self {
        Self::build(name, config, false)
    }

    /// A fixture whose host keeps durable state (records and kept output) in `<dir>/state`, as the
    /// binary does by default.
    #[allow(
        dead_code,
        reason = "the soak's host; the integration tests run the binary for durable state"
    )]
    pub fn with_state(name: &str, config: RegistryConfig) -> Self {
        Self::build(name, config, true)
    }

    fn build(name: &str, config: RegistryConfig, durable: bool) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let dir = scratch(name);
        let state = durable.then(|| {
            Arc::new(
                taskhost_store::Store::open(&dir.join("state"), taskhost_store::Sync::Normal)
                    .expect("open the state"),
            )
        });
        let services = ServiceOptions {
            // The keeper runs in every fixture, so every test exercises it.
            keeper: Some(artifacts().join("taskhost")),
            state,
            ..ServiceOptions::default()
        };
        let host = Arc::new(Taskhost::new(
            config,
            rt.handle().clone(),
            LoadOptions::new(dir.join("gen")),
            services,
        ));
        Self { rt, host, dir }
    }

    /// Loads a private copy of the built plugin `stem` as `unique`.
    pub fn load(&self, stem: &str, unique: &str) -> PathBuf {
        let path = plugin_copy(stem, &self.dir, unique);
        self.host
            .plugins()
            .load(&path, None, false)
            .expect("load plugin");
        path
    }

    /// Loads the plugin file `path` expecting a refusal; returns the error's text.
    pub fn load_error(&self, path: &Path, config_json: Option<&str>) -> String {
        match self
            .host
            .plugins()
            .load(path, config_json.map(str::to_owned), false)
        {
            Ok(_) => panic!("{} loaded; a refusal was expected", path.display()),
            Err(e) => e.to_string(),
        }
    }

    /// Calls a tool; returns its text, `Error: ...` for error results.
    pub fn call(&self, tool: &str, session: &str, args: Value) -> String {
        let out = self
            .rt
            .block_on(self.host.plugins().call_tool(tool, session, &args));
        match out {
            Ok(o) => o.text,
            Err(e) => format!("call error: {e}"),
        }
    }

    /// Calls a tool that starts a task; the task it reports (never read from its text), or the
    /// answer's text when it started none.
    pub fn start(&self, tool: &str, session: &str, args: Value) -> Result<String, String> {
        let out = self
            .rt
            .block_on(self.host.plugins().call_tool(tool, session, &args));
        match out {
            Ok(o) => o.started.ok_or(o.text),
            Err(e) => Err(format!("call error: {e}")),
        }
    }

    pub fn start_probe(&self, session: &str, args: Value) -> String {
        self.start("probe_start", session, args)
            .unwrap_or_else(|text| panic!("not started: {text}"))
    }

    /// Reads until the task settles, returning all output and the final status line.
    pub fn drain(&self, session: &str, id: &str) -> (String, String) {
        let mut all = String::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = self.call("s_read", session, json!({"task_id": id}));
            let (body, status) = split_status(&text);
            all.push_str(body);
            if !status.starts_with("[status: running") && !status.starts_with("[status: stopping") {
                return (all, status.to_owned());
            }
            assert!(Instant::now() < deadline, "task {id} did not settle");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The parent of a live process.
pub fn parent_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let (_, rest) = stat.rsplit_once(')').expect("stat fields");
    rest.split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("ppid")
}

pub fn split_status(text: &str) -> (&str, &str) {
    match text.rfind("[status: ") {
        Some(i) => (&text[..i], &text[i..]),
        None => panic!("no status line in {text:?}"),
    }
}

/// The expected output of a probe task of `n` lines.
pub fn probe_lines(n: u64) -> String {
    (0..n).map(|i| format!("line {i}\n")).collect()
}

/// Generation files of `unique` loaded (mapped executable) in this process now; see
/// `taskhost::plugin::mapped` for why read-only maps do not count.
pub fn mapped_generations(unique: &str) -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    let mut names: Vec<String> = maps
        .lines()
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|p| p.contains('x')))
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains(&format!("lib{unique}.g")))
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

pub use taskhost_tests::eventually;

/// A FIFO at `path` and a thread that SIGKILLs `pid` the instant a task writes to it (`echo >
/// FIFO` as its first act): a task cannot signal its host or its keeper itself.
pub fn kill_on_write(path: &Path, pid: i32) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
    let path = path.to_owned();
    std::thread::spawn(move || {
        use std::io::Read;
        // Opening blocks until the writer opens it.
        let Ok(mut fifo) = std::fs::File::open(&path) else {
            return;
        };
        let mut byte = [0u8; 1];
        if fifo.read(&mut byte).is_ok_and(|n| n > 0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    });
}

/// The mount point of the cgroup v2 hierarchy (`v2`), else of the v1 hierarchy that has
/// `controller`, as this process's `/proc/self/mountinfo` says.
pub fn cgroup_mount(v2: bool, controller: &str) -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|m| {
        let (fields, fs) = m.split_once(" - ")?;
        let mut fs = fs.split_whitespace();
        let (kind, _, options) = (fs.next()?, fs.next()?, fs.next()?);
        let fits = match v2 {
            true => kind == "cgroup2",
            false => kind == "cgroup" && options.split(',').any(|o| o == controller),
        };
        fits.then(|| {
            fields
                .split_whitespace()
                .nth(4)
                .map(std::path::PathBuf::from)
        })?
    })
}
