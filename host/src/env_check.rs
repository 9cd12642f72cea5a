//! `taskhost env-check`: which of this environment's variables `serve` would withhold from its
//! tasks, and why (names only, never values).

use std::process::ExitCode;

/// Prints one line per variable a task would not get, with the rule that withholds it, under the
/// `[env]` policy of the config at `config`.
///
/// # Errors
/// `(2, why)` for a config that cannot be read.
pub fn run(config: Option<&std::path::Path>) -> Result<ExitCode, (u8, String)> {
    let config = match config {
        Some(path) => crate::config::Config::load(path).map_err(|e| (2, e.to_string()))?,
        None => crate::config::Config::default(),
    };
    let policy = config.env.policy();
    let (env, withheld) = policy.apply_reporting(std::env::vars_os());
    for (name, why) in &withheld {
        crate::outln!("withheld {name}: {why}");
    }
    let passed: std::collections::HashSet<_> = env.iter().map(|(k, _)| k.clone()).collect();
    let mut others: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| !passed.contains(k))
        .map(|k| k.to_string_lossy().into_owned())
        .filter(|k| !withheld.iter().any(|(w, _)| w == k))
        .collect();
    others.sort();
    for name in others {
        crate::outln!("withheld {name}: by the [env] settings (inherit, exclude or include_only)");
    }
    crate::outln!(
        "{} variable(s) reach every task; `set` and the fixed ones included",
        env.len()
    );
    Ok(ExitCode::SUCCESS)
}
