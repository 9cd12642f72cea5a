//! The `slurm` tool's arguments.

use taskhost_abi::prelude::{Deserialize, JsonSchema};

/// The `slurm` tool's arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "taskhost_abi::serde")]
#[schemars(crate = "taskhost_abi::schemars")]
pub(crate) struct SlurmArgs {
    /// The command to run on the cluster (a bash batch script's body).
    pub(crate) command: String,
    /// What the job does, in a few words (its task label).
    pub(crate) description: Option<String>,
    /// The partition (queue) to submit to.
    pub(crate) partition: Option<String>,
    /// Time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS.
    pub(crate) time_limit: Option<String>,
    /// CPUs per task.
    pub(crate) cpus: Option<u32>,
    /// GPUs (as --gres=gpu:N).
    pub(crate) gpus: Option<u32>,
    /// Nodes.
    pub(crate) nodes: Option<u32>,
    /// Memory per node, e.g. 512M or 4G.
    pub(crate) memory: Option<String>,
    /// Working directory of the job (on the cluster's storage).
    pub(crate) workdir: Option<String>,
    /// Return a task id at once instead of waiting for the job to end (collect with task_output,
    /// cancel with task_kill).
    pub(crate) run_in_background: Option<bool>,
}
