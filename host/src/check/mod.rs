//! `taskhost check PLUGIN.so`: the reload regression check for any plugin file.
//!
//! The plugin is loaded into a fresh host (with a control surface attached, so background starts
//! work), the given tool calls run between `N` reloads, then the session closes (its tasks cancelled
//! and awaited) and every generation is retired. Reported: each load's time, and at the end the
//! generations still mapped, and threads and descriptors before and after. It passes only when
//! nothing is left; when something is, it says why, as far as it can tell: threads still alive that
//! the plugin started, thread-local destructors, `STB_GNU_UNIQUE` symbols, `DF_1_NODELETE`, plugin
//! objects the host still holds.

mod hazards;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use hazards::{Hazards, hazards};
use serde_json::Value;
use taskhost_registry::{RegistryConfig, SurfaceScope};

use crate::plugin::GenerationState;
use crate::plugin::mapped::mapped_generations;
use crate::rundir::RunDir;
use crate::{LoadOptions, ServiceOptions, Taskhost};

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckArgs {
    /// The plugin file.
    pub plugin: PathBuf,
    /// How many reloads (each a new generation of the same file).
    pub reloads: u32,
    /// Tool calls (name, JSON arguments) run before the first reload and after each.
    pub calls: Vec<(String, Value)>,
    /// Skip the trust check.
    pub allow_untrusted: bool,
}

/// The check's findings: lines to print, and whether nothing was left.
#[derive(Debug)]
pub struct Report {
    /// What happened, one line each.
    pub lines: Vec<String>,
    /// True when every generation was unmapped and no thread or descriptor was left.
    pub clean: bool,
}

/// Threads of this process by id, with their names.
fn threads() -> BTreeSet<(u32, String)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return BTreeSet::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(t.path().join("comm")).ok()?;
            Some((tid, name.trim().to_owned()))
        })
        .collect()
}

fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// The host's own long-lived threads: the runtime's (its blocking pool idles out after seconds), and
/// the one started on first use to wait for plugins' own threads to end (`own_threads.rs`; a thread's
/// name is cut to 15 bytes).
fn runtime_thread(name: &str) -> bool {
    name.starts_with("tokio-") || name == "taskhost-thread"
}

/// Runs the check on `runtime` (whose worker threads count as the baseline).
///
/// # Errors
/// Why the check could not run: no private directory, or the first load failed.
pub fn run(runtime: &tokio::runtime::Runtime, args: &CheckArgs) -> Result<Report, String> {
    let run_dir = RunDir::create().map_err(|e| e.to_string())?;
    let (threads_before, fds_before) = (threads(), descriptors());
    let host = fresh_host(runtime, &run_dir, args);
    let surface = host
        .registry()
        .attach_surface("check", SurfaceScope::Global);
    host.sessions().open("check");
    let mut lines = reloads(runtime, &host, args)?;
    let serving = mapped_generations(&run_dir.generations()).len();
    runtime.block_on(host.close_session("check"));
    // A retiring generation is unloaded off the swap path; one still listed after a while is held.
    let held = settle(Duration::from_secs(2), || retiring(&host));
    drop(surface);
    runtime.block_on(host.shutdown());
    drop(host);
    let mapped = settle(Duration::from_secs(5), || {
        mapped_generations(&run_dir.generations())
    });
    let left_threads = settle(Duration::from_secs(3), || {
        threads()
            .difference(&threads_before)
            .filter(|(_, name)| !runtime_thread(name))
            .cloned()
            .collect::<Vec<_>>()
    });
    let fds_after = descriptors();
    lines.push(format!(
        "after {} reloads: {serving} generation(s) mapped while serving, {} after unloading",
        args.reloads,
        mapped.len()
    ));
    lines.push(format!(
        "threads: {} before, {} after (not counting the runtime's); descriptors: {fds_before} before, {fds_after} after",
        threads_before.iter().filter(|(_, n)| !runtime_thread(n)).count(),
        threads().iter().filter(|(_, n)| !runtime_thread(n)).count(),
    ));
    let clean = mapped.is_empty() && left_threads.is_empty() && fds_after <= fds_before;
    if !clean {
        lines.extend(diagnose(&args.plugin, &mapped, &left_threads, &held));
    }
    lines.push(if clean {
        "ok: every generation unloaded, nothing left".to_owned()
    } else {
        "FAILED: something of the plugin was left".to_owned()
    });
    Ok(Report { lines, clean })
}

/// A host of its own for the check, its generations and spill files in `run_dir`.
fn fresh_host(runtime: &tokio::runtime::Runtime, run_dir: &RunDir, args: &CheckArgs) -> Taskhost {
    Taskhost::new(
        RegistryConfig::new(),
        runtime.handle().clone(),
        LoadOptions {
            allow_untrusted: args.allow_untrusted,
            ..LoadOptions::new(run_dir.generations())
        },
        ServiceOptions {
            spill_dir: Some(run_dir.spills()),
            ..ServiceOptions::default()
        },
    )
}

/// The generations of `host` that are not serving (retired, not yet unloaded), one line each.
fn retiring(host: &Taskhost) -> Vec<String> {
    host.plugins()
        .info()
        .iter()
        .flat_map(|p| p.generations.iter())
        .filter(|g| g.state != GenerationState::Active)
        .map(|g| {
            format!(
                "generation {} ({}, {} live tasks)",
                g.generation, g.state, g.live_tasks
            )
        })
        .collect()
}

/// Loads the plugin, runs the calls, then reloads and runs them again `args.reloads` times; one line
/// per load.
fn reloads(
    runtime: &tokio::runtime::Runtime,
    host: &Taskhost,
    args: &CheckArgs,
) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let started = Instant::now();
    host.plugins()
        .load(&args.plugin, None, false)
        .map_err(|e| e.to_string())?;
    lines.push(format!(
        "generation 1 loaded in {:.2} ms",
        ms(started.elapsed())
    ));
    calls(runtime, host, &args.calls, &mut lines);
    for r in 1..=args.reloads {
        let started = Instant::now();
        match host.plugins().load(&args.plugin, None, false) {
            Ok(g) => lines.push(format!(
                "reload {r}: generation {} serving in {:.2} ms",
                g.map_or(0, |g| g.number()),
                ms(started.elapsed())
            )),
            Err(e) => lines.push(format!("reload {r}: failed: {e}")),
        }
        calls(runtime, host, &args.calls, &mut lines);
    }
    Ok(lines)
}

/// Runs each call once, noting the ones that answered an error.
fn calls(
    runtime: &tokio::runtime::Runtime,
    host: &Taskhost,
    calls: &[(String, Value)],
    lines: &mut Vec<String>,
) {
    for (tool, arguments) in calls {
        match runtime.block_on(host.plugins().call_tool(tool, "check", arguments)) {
            Ok(out) if out.is_error => lines.push(format!("  call {tool}: {}", out.text)),
            Ok(_) => {}
            Err(e) => lines.push(format!("  call {tool}: {e}")),
        }
    }
}

/// Polls `f` until it is empty or `timeout` passes; returns its last value.
fn settle<T>(timeout: Duration, mut f: impl FnMut() -> Vec<T>) -> Vec<T> {
    let deadline = Instant::now() + timeout;
    loop {
        let v = f();
        if v.is_empty() || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Why something was left, as far as the file and the process tell.
fn diagnose(
    plugin: &Path,
    mapped: &[PathBuf],
    threads: &[(u32, String)],
    held: &[String],
) -> Vec<String> {
    let mut why = Vec::new();
    for (tid, name) in threads {
        why.push(format!(
            "why: thread {name:?} (tid {tid}), started while the plugin was loaded, is still alive: a thread the plugin spawned itself (plugin code must run on Host::spawn_worker threads, which the host joins before unloading)"
        ));
    }
    for h in held {
        why.push(format!(
            "why: plugin objects are still held by the host: {h}"
        ));
    }
    match std::fs::read(plugin)
        .map_err(|e| e.to_string())
        .and_then(|b| hazards(&b))
    {
        Ok(h) => {
            if h.nodelete {
                why.push("why: the library is linked with -z nodelete (DT_FLAGS_1 has DF_1_NODELETE): glibc never unloads it".to_owned());
            }
            if let Some(first) = h.unique_symbols.first() {
                why.push(format!(
                    "why: the library defines {} STB_GNU_UNIQUE symbol(s) (first: {first}): glibc never unloads a library that does",
                    h.unique_symbols.len()
                ));
            }
            if h.tls_destructors && !mapped.is_empty() && !threads.is_empty() {
                why.push("why: the library registers thread-local destructors (it imports __cxa_thread_atexit_impl): glibc keeps it mapped while a thread that ran one of them is alive".to_owned());
            }
        }
        Err(e) => why.push(format!("why: cannot read the file's ELF tables: {e}")),
    }
    if why.is_empty() {
        why.push("why: unknown (no thread, hazard or held object found)".to_owned());
    }
    why
}
