//! External tasks: work that runs elsewhere (a cluster's job), started, followed and stopped by the
//! host with the commands a plugin gave it. The host follows the work's output file as it grows and
//! polls its state on its own runtime, so no plugin code runs while the work does and a reload of the
//! plugin never touches it. A background task's hooks and a call's foreground run are the same
//! [`ExternalWork`]: entry points `Services::start_external` and `Services::run_external`
//! (`run.rs`).
//!
//! The contract (`ExternalRequest` in the ABI): `start_command` runs once the registry's checks
//! passed, inside `Registry::start`; its last stdout line is the work's id, which must be shell-safe,
//! and a failure registers nothing. `poll_command`'s first line is `running`, or
//! `completed|killed|failed <detail>`. `cancel_command` stops it; `output_path` is its output. `{id}`
//! in them is the id.
//!
//! Who owns what: the host owns the task (id, owner, admission, notices), the output file's read
//! position and the unread text (bounded, 1 MiB), the poll loop, the cancel call and settlement. The
//! controller (Slurm) owns the job: its queue, node, processes, state, exit code and output file on
//! shared storage. The plugin owns only its policy: the commands, the mapping of states to outcomes
//! (in its poll script), the tool.
//!
//! When the host dies the job keeps running: the controller owns it and the keeper ends only local
//! processes. With durable state the records say how the work is followed and where its owner's
//! reads stood; the next host of the state directory takes it over (`adopt.rs`) and settles it
//! with its real end. Without durable state nothing knows it, and `squeue -n slurm-N` finds it by
//! its task name.
//!
//! The same contract would drive Kubernetes Jobs: start `kubectl create -f job.yaml -o
//! jsonpath='{.metadata.name}'` (a Job with `backoffLimit: 0`); poll `kubectl get job NAME` for its
//! `Complete` or `Failed` condition (the exit code from the pod's terminated state); cancel
//! `kubectl delete job NAME --wait=false`; output a shared volume, or better an `output_command`
//! streamed by the host (`kubectl logs -f job/NAME`), the one change the contract would need.

mod adopt;
mod commands;
mod follow;
mod run;
mod work;

pub use run::ExternalRun;
pub use work::{External, ExternalWork};
