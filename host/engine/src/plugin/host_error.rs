//! The registry's refusals as a plugin gets them: each kind a [`HostErrorKind`], the message the
//! registry's own.

use taskhost_abi::abi_stable::std_types::{RErr, ROk, RResult};
use taskhost_abi::{HostError, HostErrorKind};
use taskhost_registry::RegistryError;

use crate::services::DeclareError;

/// `e` as a plugin gets it. An unknown task and another owner's are both `NotFound` with the same
/// message, so a plugin can no more tell them apart than the model can.
pub(super) fn host_error(e: &RegistryError) -> HostError {
    HostError::new(kind(e), e.to_string())
}

/// The kind of refusal `e` is.
fn kind(e: &RegistryError) -> HostErrorKind {
    use RegistryError as R;
    match e {
        R::UnknownTask(_) | R::ForeignTask(_) => HostErrorKind::NotFound,
        R::OwnHook(_) => HostErrorKind::Forbidden,
        R::InvalidKind
        | R::InvalidLabel
        | R::InvalidOutputLimit(_)
        | R::InvalidWaitTimeout(_)
        | R::InputTooLarge(_)
        | R::NotStream(_)
        | R::NotWatchable(_) => HostErrorKind::Invalid,
        R::LimitReached(_)
        | R::TooManyOutputWaits(_)
        | R::NoInput(_)
        | R::InputAfterEnd(_)
        | R::WaitAborted => HostErrorKind::Refused,
        R::NoSurface | R::StaleOwner(_) | R::Disposed => HostErrorKind::Unavailable,
        R::Producer(_) | R::Restore(_) | R::Journal(_) => HostErrorKind::Internal,
    }
}

/// An internal failure of the host's (a record it could not read), as a plugin gets it.
pub(super) fn internal(e: impl ToString) -> HostError {
    HostError::new(HostErrorKind::Internal, e.to_string())
}

/// A refused start as a plugin gets it.
pub(super) fn declare_error(e: &DeclareError) -> HostError {
    match e {
        DeclareError::Registry(r) => host_error(r),
        DeclareError::UnknownSession(_) => HostError::new(HostErrorKind::NotFound, e.to_string()),
        DeclareError::NoWork(_) => internal(e),
        DeclareError::Refused(_) => HostError::new(HostErrorKind::Invalid, e.to_string()),
    }
}

/// A start's answer as it crosses to the plugin.
pub(super) fn started<T, S: Into<T>>(result: Result<S, DeclareError>) -> RResult<T, HostError> {
    match result {
        Ok(v) => ROk(v.into()),
        Err(e) => RErr(declare_error(&e)),
    }
}
