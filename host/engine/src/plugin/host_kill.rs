//! A kill through a generation's host handle: the registry's, noted with who asked and why for
//! people's views (a task's details).

use taskhost_abi::abi_stable::std_types::{RErr, ROk, RResult, RStr};
use taskhost_abi::{FfiKill, HostError};
use taskhost_registry::KillOutcome;

use super::convert;
use super::host_api::GenHost;
use super::host_error::host_error;
use crate::services::task_facts::Kill;

impl GenHost {
    pub(super) fn kill(
        &self,
        caller: RStr<'_>,
        id: &str,
        reason: Option<&str>,
    ) -> RResult<FfiKill, HostError> {
        let by = caller.as_str().to_owned();
        let caller = self.caller(caller);
        let services = self.services();
        let (requested, snapshot) = match services.registry.kill(id, caller.as_ref(), reason) {
            Ok(KillOutcome::Requested(s)) => (true, s),
            Ok(KillOutcome::AlreadyFinished(s)) => (false, s),
            Err(e) => return RErr(host_error(&e)),
        };
        if requested {
            let reason = reason.map(str::to_owned);
            services.facts.killed(id, Kill { by, reason });
        }
        ROk(FfiKill {
            requested,
            snapshot: convert::snapshot(&snapshot),
        })
    }
}
