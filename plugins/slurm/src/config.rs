//! The plugin's settings (its `[plugin.config]` table).

use std::path::PathBuf;

use taskhost_abi::prelude::{Deserialize, Host, NonEmpty, Positive};

use crate::script::{check_time_limit, quote};

/// The table as written.
#[derive(Deserialize, Default)]
#[serde(crate = "taskhost_abi::serde", default)]
struct Table {
    partition: Option<NonEmpty>,
    default_time_limit: Option<NonEmpty>,
    output_dir: Option<NonEmpty>,
    poll_ms: Option<Positive>,
    extra_args: Vec<String>,
    slurm_conf: Option<NonEmpty>,
}

/// The plugin's settings, checked.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// The partition when a call names none (the cluster's default when neither does).
    pub(crate) partition: Option<String>,
    /// The time limit when a call names none.
    pub(crate) default_time_limit: Option<String>,
    /// Where job scripts and output files go: storage both the host and the compute nodes reach.
    pub(crate) output_dir: PathBuf,
    /// How often the host polls a job's state.
    pub(crate) poll_ms: Positive,
    /// More `sbatch` arguments, for every job.
    pub(crate) extra_args: Vec<String>,
    /// The cluster's `slurm.conf`, when it is not where the Slurm commands look by default.
    pub(crate) slurm_conf: Option<String>,
}

impl Config {
    /// The plugin's config table, checked.
    pub(crate) fn read(host: &Host) -> Result<Self, String> {
        let table: Table = host.config()?;
        let text = |v: Option<NonEmpty>| v.map(|t| t.0);
        let default_time_limit = text(table.default_time_limit);
        if let Some(t) = &default_time_limit {
            check_time_limit(t).map_err(|e| format!("slurm: default_time_limit: {e}"))?;
        }
        let output_dir = match text(table.output_dir) {
            Some(d) => d.into(),
            None => std::env::var_os("HOME")
                .map_or_else(std::env::temp_dir, PathBuf::from)
                .join(".cache/taskhost/slurm"),
        };
        Ok(Self {
            partition: text(table.partition),
            default_time_limit,
            output_dir,
            poll_ms: table.poll_ms.unwrap_or(Positive(1000)),
            extra_args: table.extra_args,
            slurm_conf: text(table.slurm_conf),
        })
    }

    /// `command` with this config's Slurm environment (`SLURM_CONF`) in front.
    pub(crate) fn command(&self, command: &str) -> String {
        match &self.slurm_conf {
            Some(conf) => format!("export SLURM_CONF={}; {command}", quote(conf)),
            None => command.to_owned(),
        }
    }
}
