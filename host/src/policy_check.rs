//! `taskhost policy-check [--config FILE]`: what each configured policy enforces on this machine,
//! part by part, and by which mechanism; exit 2 when any part of any policy cannot be enforced here
//! (`serve` refuses to start then too).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::process::bounds::{self, Bounds, Mechanism};

/// The parts a policy may set, in the order they are shown.
const PARTS: &[&str] = &[
    "write",
    "hide",
    "private_tmp",
    "signals",
    "network",
    "memory_max",
    "pids_max",
    "cpu_max",
    "run_as",
];

/// Runs the check on the config at `config` (none: no policy) and prints the answer.
///
/// # Errors
/// `(2, why)` for a config that cannot be read or a policy that cannot be used here.
pub fn policy_check(file: Option<&Path>) -> Result<ExitCode, (u8, String)> {
    let config = match file {
        Some(path) => crate::config::Config::load(path).map_err(|e| (2, e.to_string()))?,
        None => crate::config::Config::default(),
    };
    let probed = bounds::probe();
    if config.policy.is_empty() {
        crate::outln!("no [policy.NAME] in the config: every task runs unbounded");
        crate::outln!("what this machine offers:");
        for m in &probed {
            crate::outln!("  {:<12}  {}", m.part, how(m));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let resolved = crate::policy::resolve(&config.policy, &host_paths(&config, file))
        .map_err(|e| (2, format!("{e}; the host would refuse to start")))?;
    let mut refused = 0;
    for (name, bounds) in &resolved {
        let verdict = bounds::check(bounds);
        crate::outln!("policy {name}:");
        for line in part_lines(bounds, &probed) {
            crate::outln!("  {line}");
        }
        match verdict {
            Ok(()) => crate::outln!("  => enforced here"),
            Err(e) => {
                refused += 1;
                crate::outln!("  => NOT ENFORCEABLE here: {e}");
            }
        }
    }
    if refused > 0 {
        return Err((
            2,
            format!("{refused} policy(ies) cannot be enforced here: `serve` refuses to start"),
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// The paths a host of this config would hide from every bounded task (its state directory, its
/// spill directory, the runtime directories' base): a host adds its own runtime directory.
fn host_paths(config: &crate::config::Config, file: Option<&Path>) -> crate::policy::HostPaths {
    let state = config
        .state
        .dir
        .clone()
        .or_else(crate::config::default_state_dir);
    // The base of every host's runtime directory when it is one of taskhost's own (a host hides its
    // own directory in any case; the temp dir itself is never hidden).
    let (base, _) = crate::rundir::RunDir::base();
    let runtime = base.ends_with("taskhost").then_some(base);
    let spill: Option<PathBuf> = config.tasks.spill_dir.clone();
    let dirs = crate::serve::default_plugins::dirs(config, &[]);
    crate::policy::HostPaths::new(state.into_iter().chain(spill).chain(runtime)).with_code(
        crate::serve::default_plugins::code((config, file), &[], &dirs),
    )
}

/// One line per part: what the policy asks and how this machine enforces it.
fn part_lines(bounds: &Bounds, probed: &[Mechanism]) -> Vec<String> {
    let mut lines: Vec<String> = PARTS
        .iter()
        .map(|part| {
            let asked = asked(bounds, part);
            let hows: Vec<String> = probed.iter().filter(|m| m.part == *part).map(how).collect();
            let how = if hows.is_empty() {
                "no mechanism known".to_owned()
            } else {
                hows.join("; ")
            };
            match asked {
                Some(asked) => format!("{part:<12}  {asked}: {how}"),
                None => format!("{part:<12}  not bounded"),
            }
        })
        .collect();
    lines.push(format!(
        "{:<12}  always: prctl(PR_SET_NO_NEW_PRIVS)",
        "no_new_privs"
    ));
    lines
}

/// What `bounds` asks of `part`, `None` when it leaves it unbounded.
fn asked(b: &Bounds, part: &str) -> Option<String> {
    let paths = |p: &[PathBuf]| {
        let shown: Vec<String> = p.iter().map(|p| p.display().to_string()).collect();
        shown.join(", ")
    };
    match part {
        "write" if b.filesystem => Some(format!("only [{}]", paths(&b.write))),
        "hide" => Some(format!(
            "[{}] and the host's runtime directory",
            paths(&b.hide)
        )),
        "private_tmp" if b.private_tmp => Some("each task's own, empty".to_owned()),
        "signals" => Some("no signal outside the task".to_owned()),
        "network" if !b.network => Some("none".to_owned()),
        "memory_max" => b.memory_max.map(size),
        "pids_max" => b.pids_max.map(|n| n.to_string()),
        "cpu_max" => b.cpu_max_millis.map(|m| format!("{m} millicores")),
        "run_as" => b
            .run_as
            .as_ref()
            .map(|u| format!("{} (uid {}, gid {})", u.name, u.uid, u.gid)),
        _ => None,
    }
}

/// Bytes in the largest binary unit that divides them.
fn size(bytes: u64) -> String {
    [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")]
        .iter()
        .find(|(shift, _)| bytes >= 1 << shift && bytes.is_multiple_of(1 << shift))
        .map_or_else(
            || format!("{bytes} bytes"),
            |(shift, unit)| format!("{} {unit}", bytes >> shift),
        )
}

fn how(m: &Mechanism) -> String {
    match &m.how {
        Ok(how) => format!("by {how}"),
        Err(why) => format!("CANNOT: {why}"),
    }
}
