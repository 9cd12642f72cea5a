//! The part of a generation's host handle that serves people's views: a task's kept output tail,
//! and the host's status (plugins and health). The [`HostApi`](taskhost_abi::HostApi) methods call
//! these.

use taskhost_abi::abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};

use super::host_api::{GenHost, err};

impl GenHost {
    pub(super) fn kept_tail(
        &self,
        caller: RStr<'_>,
        id: RStr<'_>,
        max_bytes: u64,
    ) -> RResult<RString, RString> {
        let caller = self.caller(caller);
        let services = self.services();
        if let Err(e) = services.registry.get(id.as_str(), caller.as_ref()) {
            return RErr(err(e));
        }
        let Some(state) = &services.state else {
            return ROk(RString::new());
        };
        match state.task(id.as_str()) {
            Ok(Some(record)) => match taskhost_store::kept_tail(&record, max_bytes) {
                Ok(text) => ROk(text.into()),
                Err(e) => RErr(err(format!("task {id}'s kept output: {e}"))),
            },
            Ok(None) => ROk(RString::new()),
            Err(e) => RErr(err(e)),
        }
    }

    pub(super) fn status_json(&self) -> RString {
        let source = self.shared.status.read().clone();
        source
            .map_or_else(|| "{}".to_owned(), |s| s().to_string())
            .into()
    }
}
