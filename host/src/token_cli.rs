//! `taskhost token create|list|revoke`: the principals of a state directory, whose bearer tokens
//! name the owner of an HTTP client's tasks. A token is printed once, when it is made (the last line
//! of `create`'s output, for scripts); the database keeps its SHA-256 only.

use std::path::PathBuf;

/// What `taskhost token` was asked.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Makes a principal and prints its token (once).
    Create {
        /// The principal's name: letters, digits, '.', '_', '-'.
        name: String,
        /// People's views (the `web` plugin) show this token every owner's tasks, to read and
        /// kill; its MCP clients still see only its own.
        #[arg(long)]
        all_owners: bool,
        /// The policy (`[policy.POLICY]` of the host's config) every task of this principal runs
        /// under; without it, `[policy.default]` if the config has one.
        #[arg(long, value_name = "POLICY")]
        policy: Option<String>,
        /// The host's config: a `--policy` it does not define is refused now (without it, a host
        /// whose config lacks the policy refuses this principal's commands).
        #[arg(long, value_name = "FILE", requires = "policy")]
        config: Option<PathBuf>,
    },
    /// Prints the principals (never their tokens).
    List {
        /// One JSON object per principal and line.
        #[arg(long)]
        json: bool,
    },
    /// Revokes a principal: its token names nobody from now on.
    Revoke {
        /// The principal's name.
        name: String,
    },
}

/// Runs `taskhost token` on the state directory `state` (the default one when `None`); the text to
/// print.
///
/// # Errors
/// `(2, why)` for a refused state directory, a name that is taken, malformed or unknown; `(1, why)`
/// when the database fails.
pub fn run(state: Option<PathBuf>, command: &TokenCommand) -> Result<String, (u8, String)> {
    let (dir, store) = match command {
        TokenCommand::Create { .. } => {
            let (dir, store) = crate::tasks_cli::open_to_change(state)?;
            (dir, Some(store))
        }
        _ => crate::tasks_cli::open_to_read(state)?,
    };
    let Some(store) = store else {
        return match command {
            TokenCommand::Revoke { name } => Err((2, format!("no principal named {name}"))),
            TokenCommand::List { json: true } => Ok(String::new()),
            _ => Ok(format!("(no principals in {})", dir.display())),
        };
    };
    let refused = |e: taskhost_store::StoreError| match e {
        taskhost_store::StoreError::Principal(why) => (2, why),
        other => (1, other.to_string()),
    };
    match command {
        TokenCommand::Create {
            name,
            all_owners,
            policy,
            config,
        } => create(
            &store,
            &dir,
            name,
            *all_owners,
            (policy.as_deref(), config.as_deref()),
        )
        .map_err(|e| match e {
            Refusal::Config(why) => why,
            Refusal::Store(e) => refused(e),
        }),
        TokenCommand::Revoke { name } => {
            let owner = store.revoke_principal(name).map_err(refused)?;
            Ok(format!(
                "principal {name} ({owner}) revoked: its token names nobody from now on"
            ))
        }
        TokenCommand::List { json } => list(&store, &dir, *json).map_err(refused),
    }
}

/// Refuses a `--policy` the config at `config` does not define (exit 2).
fn configured(policy: &str, config: &std::path::Path) -> Result<(), (u8, String)> {
    let loaded = crate::config::Config::load(config).map_err(|e| (2, e.to_string()))?;
    if loaded.policy.contains_key(policy) {
        return Ok(());
    }
    let known: Vec<&str> = loaded.policy.keys().map(String::as_str).collect();
    Err((
        2,
        format!(
            "{} has no [policy.{policy}] (its policies: {}); no principal was made",
            config.display(),
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ),
    ))
}

/// Why `token create` made no principal.
enum Refusal {
    /// The `--config` check.
    Config((u8, String)),
    /// The store's.
    Store(taskhost_store::StoreError),
}

/// `token create NAME [--all-owners] [--policy POLICY [--config FILE]]`.
fn create(
    store: &taskhost_store::Store,
    dir: &std::path::Path,
    name: &str,
    all_owners: bool,
    (policy, config): (Option<&str>, Option<&std::path::Path>),
) -> Result<String, Refusal> {
    if let (Some(policy), Some(config)) = (policy, config) {
        configured(policy, config).map_err(Refusal::Config)?;
    }
    let grants = taskhost_store::PrincipalGrants {
        sees_all: all_owners,
        policy: policy.map(str::to_owned),
    };
    let token = store
        .create_principal_with(name, &grants)
        .map_err(Refusal::Store)?;
    let bound = policy.map_or_else(String::new, |p| {
        let checked = if config.is_some() {
            ""
        } else {
            " (not checked against a config: a host without it refuses its commands)"
        };
        format!(", bound to policy {p}{checked}")
    });
    Ok(format!(
        "principal {name} made in {}{bound}; its token, shown this once (the state keeps only its hash):\n{}",
        dir.display(),
        token.reveal()
    ))
}

/// `token list [--json]`.
fn list(
    store: &taskhost_store::Store,
    dir: &std::path::Path,
    json: bool,
) -> Result<String, taskhost_store::StoreError> {
    let principals = store.principals()?;
    if json {
        let lines: Vec<String> = principals
            .iter()
            .filter_map(|p| serde_json::to_string(p).ok())
            .collect();
        return Ok(lines.join("\n"));
    }
    if principals.is_empty() {
        return Ok(format!("(no principals in {})", dir.display()));
    }
    let width = principals
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let mut out = format!(
        "{:<width$}  {:<12}  {:<12}  {:<19}  revoked\n",
        "name", "owner", "policy", "made"
    );
    for p in &principals {
        let revoked = p
            .revoked_at_ms
            .map_or_else(|| "-".to_owned(), crate::tasks_cli::clock);
        let views = if p.sees_all {
            "  (its views show every owner's tasks)"
        } else {
            ""
        };
        out.push_str(&format!(
            "{:<width$}  {:<12}  {:<12}  {:<19}  {revoked}{views}\n",
            p.name,
            p.owner,
            p.policy.as_deref().unwrap_or("-"),
            crate::tasks_cli::clock(p.created_at_ms)
        ));
    }
    Ok(out.trim_end().to_owned())
}
