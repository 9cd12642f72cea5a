//! The TOML config: registry settings and the plugins to load, each with its own table.
//!
//! ```toml
//! [tasks]
//! max_concurrent_tasks_per_owner = 10
//! teardown_grace_ms = 10000
//!
//! [env]
//! inherit = "all"
//! exclude = ["AWS_*"]
//!
//! [[plugin]]
//! path = "target/debug/libtaskhost_plugin_bash.so"
//! [plugin.config]
//! grace_ms = 3000
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use taskhost_registry::RegistryConfig;

use crate::process::env::{EnvPolicy, Inherit};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Registry settings.
    #[serde(default)]
    pub tasks: TasksSection,
    /// Plugins to load, in order.
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<PluginEntry>,
    /// The environment policy of every child process.
    #[serde(default)]
    pub env: EnvSection,
    /// Host settings.
    #[serde(default)]
    pub host: HostSection,
    /// The durable state.
    #[serde(default)]
    pub state: StateSection,
    /// The HTTP listeners (`serve --listen http://HOST:PORT`).
    #[serde(default)]
    pub http: crate::http::HttpSection,
    /// The policies principals are bound to (`[policy.NAME]`, see [`crate::policy`]);
    /// `[policy.default]` bounds every owner that names no other.
    #[serde(default)]
    pub policy: std::collections::BTreeMap<String, crate::policy::PolicyTable>,
}

/// `[state]`: the host's durable state.
///
/// ```toml
/// [state]
/// dir = "/var/lib/me/taskhost"   # task records and kept output (also `serve --state DIR`);
///                                # default $XDG_STATE_HOME/taskhost, else ~/.local/state/taskhost
/// durable = true                 # false keeps task records in memory only (also `serve --no-state`)
/// sync = "normal"                # or "full": fsync the database at every commit
/// keep_days = 30                 # settled tasks' output older than this expires
/// keep_bytes = 1073741824        # kept output beyond this expires, oldest first
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    /// The state directory (default [`default_state_dir`]).
    pub dir: Option<PathBuf>,
    /// False keeps task records in memory only.
    pub durable: Option<bool>,
    /// How hard a commit holds.
    #[serde(default)]
    pub sync: taskhost_store::Sync,
    /// Days a settled task's output is kept (default 30).
    pub keep_days: Option<u64>,
    /// Bytes of kept output, at most (default 1 GiB).
    pub keep_bytes: Option<u64>,
}

/// The default state directory: `$XDG_STATE_HOME/taskhost`, else `~/.local/state/taskhost`; `None`
/// when neither variable is set.
pub fn default_state_dir() -> Option<PathBuf> {
    match std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join("taskhost")),
        None => std::env::var_os("HOME")
            .filter(|d| !d.is_empty())
            .map(|home| PathBuf::from(home).join(".local/state/taskhost")),
    }
}

impl StateSection {
    /// The retention these settings ask for, defaults filled in.
    pub fn retention(&self) -> taskhost_store::Retention {
        let default = taskhost_store::Retention::default();
        taskhost_store::Retention {
            keep_days: self.keep_days.unwrap_or(default.keep_days),
            keep_bytes: self.keep_bytes.unwrap_or(default.keep_bytes),
        }
    }
}

/// `[host]`: where plugins come from besides `[[plugin]]`.
///
/// ```toml
/// [host]
/// plugin_dir = "plugins"       # every *.so in it is loaded; one that appears loads, one removed unloads
/// owner_grace_ms = 60000       # a `taskhost connect` owner whose connection was lost may come back this long
/// handover_grace_ms = 60000    # a --listen host's running tasks wait this long for the next host
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSection {
    /// A plugin directory (relative to the config file).
    pub plugin_dir: Option<PathBuf>,
    /// How long an owner whose connection was lost without a goodbye is kept for it to come back.
    pub owner_grace_ms: Option<u64>,
    /// How long a `--listen` host's running tasks wait for a successor once it is gone.
    pub handover_grace_ms: Option<u64>,
}

/// `[env]`: what every child process inherits (see [`crate::process::env`]).
///
/// ```toml
/// [env]
/// inherit = "core"             # "all" (default), "core" or "none"
/// exclude = ["AWS_*"]          # more name patterns to remove (case-insensitive globs)
/// include_only = []            # when set, only matching names are inherited
/// ignore_default_excludes = false
/// [env.set]
/// CI = "1"
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSection {
    /// `all`, `core` or `none`.
    #[serde(default)]
    pub inherit: InheritSetting,
    /// Keep the variables the default excludes would remove.
    #[serde(default)]
    pub ignore_default_excludes: bool,
    /// Name patterns to remove.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// When not empty: only names matching one of these are inherited.
    #[serde(default)]
    pub include_only: Vec<String>,
    /// Variables set for every child, last.
    #[serde(default)]
    pub set: std::collections::BTreeMap<String, String>,
}

/// `[env] inherit`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum InheritSetting {
    /// Every variable of the host.
    #[default]
    All,
    /// The core variables (`HOME`, `PATH`, `USER`, locale, ...).
    Core,
    /// None.
    None,
}

impl EnvSection {
    /// The policy this section describes.
    pub fn policy(&self) -> EnvPolicy {
        EnvPolicy {
            inherit: match self.inherit {
                InheritSetting::All => Inherit::All,
                InheritSetting::Core => Inherit::Core,
                InheritSetting::None => Inherit::None,
            },
            ignore_default_excludes: self.ignore_default_excludes,
            exclude: self.exclude.clone(),
            include_only: self.include_only.clone(),
            set: self
                .set
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// `[tasks]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksSection {
    /// Live tasks allowed per owner (default 10).
    pub max_concurrent_tasks_per_owner: Option<u64>,
    /// How long a teardown waits for a cancelled task (default 10000).
    pub teardown_grace_ms: Option<u64>,
    /// Process tasks the host runs at once (default: no limit); past it a start is queued (issue
    /// 44). Each policy's `max_running` bounds its principals' the same way.
    pub max_running: Option<u64>,
    /// Foreground commands one session may run at once (default 16); past it a call is refused.
    pub max_foreground_per_owner: Option<u64>,
    /// Where process output beyond the in-memory tail is spilled (default: beside the generation
    /// files, under `$XDG_RUNTIME_DIR` or the temp dir); relative to the config file's directory.
    pub spill_dir: Option<PathBuf>,
    /// Bytes all spill files of the host may hold together (default 4 GiB): past it the oldest
    /// settled tasks' files are trimmed to their head and end, then running tasks stop growing theirs
    /// (they keep their head and roll their latest output).
    pub spill_budget: Option<u64>,
}

/// One `[[plugin]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginEntry {
    /// The plugin file; relative paths are taken from the config file's directory.
    pub path: PathBuf,
    /// The plugin's own table, handed to it as JSON.
    #[serde(default)]
    pub config: Option<toml::Table>,
}

/// A config that could not be used; the message names the file and the key.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

impl Config {
    /// Reads and checks a config file.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file and, for a bad value, the key.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
        let mut config: Config = toml::from_str(&text).map_err(|e| {
            ConfigError(format!(
                "bad config {}: {}",
                path.display(),
                e.to_string().trim()
            ))
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        for p in &mut config.plugins {
            if p.path.is_relative() {
                p.path = base.join(&p.path);
            }
        }
        if let Some(dir) = config.tasks.spill_dir.as_mut()
            && dir.is_relative()
        {
            *dir = base.join(&*dir);
        }
        if let Some(dir) = config.host.plugin_dir.as_mut()
            && dir.is_relative()
        {
            *dir = base.join(&*dir);
        }
        for (name, table) in &mut config.policy {
            let named = |why: String| {
                ConfigError(format!(
                    "bad config {}: [policy.{name}] {why}",
                    path.display()
                ))
            };
            if !taskhost_store::valid_name(name) {
                return Err(named(
                    "a policy's name is 1 to 64 letters, digits, '.', '_' or '-'".into(),
                ));
            }
            table.settle(base).map_err(named)?;
        }
        config
            .registry()
            .map_err(|e| ConfigError(format!("bad config {}: [tasks] {e}", path.display())))?;
        if config.tasks.max_running == Some(0) {
            return Err(ConfigError(format!(
                "bad config {}: [tasks] max_running must be at least 1, got 0",
                path.display()
            )));
        }
        if config.tasks.max_foreground_per_owner == Some(0) {
            return Err(ConfigError(format!(
                "bad config {}: [tasks] max_foreground_per_owner must be at least 1, got 0",
                path.display()
            )));
        }
        Ok(config)
    }

    /// `[host] handover_grace_ms`, or its default (60 s).
    pub fn handover_grace_ms(&self) -> u64 {
        self.host.handover_grace_ms.unwrap_or(60_000)
    }

    /// `[host] owner_grace_ms`, or its default.
    pub fn owner_grace(&self) -> std::time::Duration {
        self.host.owner_grace_ms.map_or(
            crate::owners::DEFAULT_OWNER_GRACE,
            std::time::Duration::from_millis,
        )
    }

    /// `[tasks] max_foreground_per_owner`, or its default.
    pub fn max_foreground_per_owner(&self) -> usize {
        self.tasks
            .max_foreground_per_owner
            .map_or(crate::sessions::DEFAULT_MAX_FOREGROUND, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            })
    }

    /// The registry settings.
    ///
    /// # Errors
    /// The out-of-range key.
    pub fn registry(&self) -> Result<RegistryConfig, taskhost_registry::ConfigError> {
        let mut c = RegistryConfig::new();
        if let Some(n) = self.tasks.max_concurrent_tasks_per_owner {
            c = c.with_max_tasks_per_owner(n)?;
        }
        if let Some(ms) = self.tasks.teardown_grace_ms {
            c = c.with_teardown_grace(Duration::from_millis(ms))?;
        }
        Ok(c)
    }
}

impl PluginEntry {
    /// The plugin's table as JSON text (`{}` when none).
    pub fn config_json(&self) -> String {
        self.config.as_ref().map_or_else(
            || "{}".to_owned(),
            |t| serde_json::to_string(t).unwrap_or_else(|_| "{}".to_owned()),
        )
    }
}
