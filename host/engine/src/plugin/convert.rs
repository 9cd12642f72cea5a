//! Registry and service values to their FFI mirrors, and back.

use taskhost_abi::abi_stable::std_types::{RNone, ROption, RSome, RString};
use taskhost_abi::{ExternalResult, FfiOutcome, FfiRead, FfiSnapshot, FfiStatus, ProcessResult};
use taskhost_registry::{TaskOutcome, TaskRead, TaskSnapshot, TaskStatus, TerminalStatus};

use crate::process::{Exit, signal_name};
use crate::services::external::ExternalRun;
use crate::services::foreground::Foreground;

pub(crate) fn status(s: TaskStatus) -> FfiStatus {
    match s {
        TaskStatus::Running => FfiStatus::Running,
        TaskStatus::Stopping => FfiStatus::Stopping,
        TaskStatus::Completed => FfiStatus::Completed,
        TaskStatus::Killed => FfiStatus::Killed,
        TaskStatus::Failed => FfiStatus::Failed,
        TaskStatus::Lost => FfiStatus::Lost,
        TaskStatus::Queued => FfiStatus::Queued,
    }
}

fn opt(s: &Option<String>) -> ROption<RString> {
    s.as_deref().map(RString::from).into()
}

pub(crate) fn snapshot(s: &TaskSnapshot) -> FfiSnapshot {
    FfiSnapshot {
        id: s.id.as_str().into(),
        kind: s.kind.as_str().into(),
        label: s.label.as_str().into(),
        output_limit_bytes: s.output_limit_bytes.into(),
        owner_session: s
            .owner_session
            .as_ref()
            .map(|x| RString::from(x.as_str()))
            .into(),
        status: status(s.status),
        detail: opt(&s.detail),
        started_at_ms: s.started_at_ms,
        finished_at_ms: s.finished_at_ms.into(),
        reported: s.reported,
    }
}

/// A read (or a peek) as it crosses to the plugin.
pub(crate) fn read(r: TaskRead) -> FfiRead {
    FfiRead {
        text: r.text.into(),
        snapshot: snapshot(&r.snapshot),
    }
}

/// A plugin's outcome, copied into host memory. A status other than completed, killed or failed is a
/// contract violation and is recorded as `failed`.
pub(crate) fn outcome(o: &FfiOutcome) -> TaskOutcome {
    let copy = |x: &ROption<RString>| x.as_ref().into_option().map(|s| s.as_str().to_owned());
    let (status, detail) = match o.status {
        FfiStatus::Completed => (TerminalStatus::Completed, copy(&o.detail)),
        FfiStatus::Killed => (TerminalStatus::Killed, copy(&o.detail)),
        FfiStatus::Failed => (TerminalStatus::Failed, copy(&o.detail)),
        other => (
            TerminalStatus::Failed,
            Some(format!(
                "producer settled with status {} (a producer settles completed, killed or failed)",
                other.as_str()
            )),
        ),
    };
    TaskOutcome {
        status,
        detail,
        output: copy(&o.output),
    }
}

/// A host outcome as the plugin side sees it.
pub(crate) fn outcome_to_ffi(o: &TaskOutcome) -> FfiOutcome {
    let status = match o.status {
        TerminalStatus::Completed => FfiStatus::Completed,
        TerminalStatus::Killed => FfiStatus::Killed,
        TerminalStatus::Failed => FfiStatus::Failed,
    };
    FfiOutcome::new(status, o.detail.as_deref(), o.output.as_deref())
}

/// A foreground run's end, or why it did not start, as the plugin side sees it.
pub(crate) fn foreground(run: Result<Foreground, String>) -> ProcessResult {
    let run = match run {
        Ok(run) => run,
        Err(error) => {
            return ProcessResult {
                output: RString::new(),
                exit_code: RNone,
                signal: RNone,
                timed_out: false,
                error: RSome(error.into()),
                cancelled: false,
                promoted_task: RNone,
                restarted: false,
            };
        }
    };
    let (exit_code, signal) = match run.exit {
        Exit::Code(c) => (Some(c), None),
        Exit::Signal(s) => (None, Some(RString::from(signal_name(s)))),
        Exit::Unknown => (None, None),
    };
    ProcessResult {
        output: run.output.into(),
        exit_code: exit_code.into(),
        signal: signal.into(),
        timed_out: run.timed_out,
        error: RNone,
        cancelled: run.cancelled,
        promoted_task: run.promoted_task.map(RString::from).into(),
        restarted: run.restarted,
    }
}

/// A foreground external run's end, or why it did not start, as the plugin side sees it.
pub(crate) fn external(run: Result<ExternalRun, String>) -> ExternalResult {
    match run {
        Ok(run) => ExternalResult {
            error: RNone,
            external_id: run.id.into(),
            output: run.output.into(),
            outcome: run.outcome.as_ref().map(outcome_to_ffi).into(),
        },
        Err(error) => ExternalResult {
            error: RSome(error.into()),
            external_id: RString::new(),
            output: RString::new(),
            outcome: RNone,
        },
    }
}
