//! The part of a generation's host handle that is neither the registry nor MCP: a plugin's log
//! records, under its name and generation, and its workers, on its generation's threads.

use taskhost_abi::{Level, WorkerBox};

use super::host_api::GenHost;

impl GenHost {
    pub(super) fn write_log(&self, level: Level, target: &str, message: &str) {
        let (plugin, generation) = match self.generation.upgrade() {
            Some(g) => (g.plugin.clone(), g.number),
            None => ("?".to_owned(), 0),
        };
        match level {
            Level::Error => tracing::error!(%plugin, generation, target, "{message}"),
            Level::Warn => tracing::warn!(%plugin, generation, target, "{message}"),
            Level::Info => tracing::info!(%plugin, generation, target, "{message}"),
            Level::Debug => tracing::debug!(%plugin, generation, target, "{message}"),
            Level::Trace => tracing::trace!(%plugin, generation, target, "{message}"),
        }
    }

    pub(super) fn run_worker(&self, worker: WorkerBox) {
        let Some(generation) = self.generation.upgrade() else {
            return;
        };
        let keep = generation.clone();
        let submitted = generation.executor.submit(move || {
            let mut worker = worker;
            worker.run();
            drop(worker);
            drop(keep);
        });
        if !submitted {
            tracing::error!(plugin = %generation.plugin, generation = generation.number, "cannot start a plugin worker");
        }
    }
}
