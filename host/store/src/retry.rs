//! Writes a full disk refused, kept to be applied again once it has room.

use std::time::Duration;

use crate::ops::Op;

/// How often kept writes are tried again while no other write comes.
pub(crate) const RETRY_EVERY: Duration = Duration::from_secs(1);

/// The most writes kept: past it the oldest are given up, which the log says.
const KEEP_MAX: usize = 10_000;

/// The writes a full disk (`SQLITE_FULL`) refused that answer nobody (a settlement, a start that
/// began, a kill, output paths, external work), applied again ahead of the next batch; a write that
/// answers a caller is answered with the failure. Whether the database is failing now.
#[derive(Default)]
pub(crate) struct Retry {
    ops: Vec<Op>,
    failing: bool,
}

impl Retry {
    /// True while writes wait to be tried again.
    pub(crate) fn waiting(&self) -> bool {
        !self.ops.is_empty()
    }

    /// The kept writes, to go first in the next batch.
    pub(crate) fn take(&mut self) -> Vec<Op> {
        std::mem::take(&mut self.ops)
    }

    /// After a batch was committed (`Ok`) or failed: a full disk's refused writes are kept (each
    /// at most once, the kept ones being part of `batch`); the log says when failing starts and
    /// ends.
    pub(crate) fn after(&mut self, batch: &[Op], result: Result<(), &rusqlite::Error>) {
        match result {
            Ok(()) => {
                if self.failing {
                    tracing::warn!("the task database is written again");
                }
                self.failing = false;
            }
            Err(e) => {
                let full = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull);
                if !self.failing {
                    tracing::error!(
                        error = %e,
                        "a write of the task database failed{}",
                        if full { "; its records are written again once the disk has room" } else { "" }
                    );
                }
                self.failing = true;
                if full {
                    self.ops = batch.iter().filter_map(again).collect();
                    let over = self.ops.len().saturating_sub(KEEP_MAX);
                    if over > 0 {
                        tracing::error!(over, "task database writes given up: too many wait");
                        self.ops.drain(..over);
                    }
                }
            }
        }
    }
}

/// A copy of a write that answers nobody, to apply again.
fn again(op: &Op) -> Option<Op> {
    Some(match op {
        Op::Started { id } => Op::Started { id: id.clone() },
        Op::Told { id } => Op::Told { id: id.clone() },
        Op::Unheld { id } => Op::Unheld { id: id.clone() },
        Op::Stopping { id } => Op::Stopping { id: id.clone() },
        Op::ForegroundEnded { id } => Op::ForegroundEnded { id: *id },
        Op::External { id, record } => Op::External {
            id: id.clone(),
            record: record.clone(),
        },
        Op::Output { id, stdout, stderr } => Op::Output {
            id: id.clone(),
            stdout: stdout.clone(),
            stderr: stderr.clone(),
        },
        Op::Settled {
            id,
            status,
            detail,
            finished_at_ms,
            told,
            ..
        } => Op::Settled {
            id: id.clone(),
            status: status.clone(),
            detail: detail.clone(),
            finished_at_ms: *finished_at_ms,
            told: *told,
            // Its owner was told when the write first failed.
            then: Box::new(|| {}),
        },
        _ => return None,
    })
}
