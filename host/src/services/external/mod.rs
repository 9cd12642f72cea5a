//! External tasks: work that runs elsewhere (a cluster's job), started, followed and stopped by the
//! host with the commands a plugin gave it. The host follows the work's output file as it grows and
//! polls its state on its own runtime, so no plugin code runs while the work does and a reload of the
//! plugin never touches it. A background task's hooks and a call's foreground run are the same
//! [`ExternalWork`]: entry points `Services::start_external` and `Services::run_external`
//! (`run.rs`).

mod commands;
mod follow;
mod run;
mod work;

pub use run::ExternalRun;
pub use work::{External, ExternalWork};
