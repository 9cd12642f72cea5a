//! Whether a successor has room for what a keeper would hand it: each held task comes with
//! descriptors (its output's read ends, its input), which the successor then holds. The keeper
//! checks the successor's open-file limit before it sends any, and refuses one that cannot hold
//! them ([`super::super::wire::Report::NoRoom`]), so it keeps the tasks whole for a successor that
//! can; without that check a successor at its limit would get the tasks with their descriptors
//! dropped by the kernel (`MSG_CTRUNC`) and the keeper would count them handed. A successor that
//! runs out anyway (its own descriptors were more than the keeper reckoned) says why ([`dropped`]).

/// What a successor is reckoned to hold besides the tasks' descriptors when its own cannot be
/// counted (a non-dumpable process of a host not run by root; a host holds about 20 then).
const SUCCESSOR_OWN: u64 = 64;

/// Why a successor has no room for a keeper's tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoRoom {
    /// The descriptors the tasks come with.
    pub descriptors: u64,
    /// The successor's open-file limit.
    pub limit: u64,
}

impl std::fmt::Display for NoRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the previous host's running tasks come with {} descriptors, more than this host's \
             open-file limit of {} holds: start it with a higher limit (`ulimit -n`, systemd's \
             `LimitNOFILE=`); until its grace ends the keeper holds the tasks for a successor that \
             can take them",
            self.descriptors, self.limit
        )
    }
}

/// Checks, in the keeper, that successor `pid` can hold `descriptors` more: `Err` when its
/// open-file limit surely cannot; `Ok` when it can or its limit cannot be read.
pub(crate) fn check(pid: i32, descriptors: u64) -> Result<(), NoRoom> {
    let Some(limit) = soft_limit(pid) else {
        return Ok(());
    };
    let own =
        std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(SUCCESSOR_OWN, |d| d.count() as u64);
    match own + descriptors <= limit {
        true => Ok(()),
        false => Err(NoRoom { descriptors, limit }),
    }
}

/// The soft open-file limit of process `pid` (`/proc/PID/limits` is readable by anyone).
fn soft_limit(pid: i32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    match soft {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    }
}

/// Descriptors that came with a message were dropped by the kernel (`MSG_CTRUNC`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Dropped(String);

/// The error of a read whose descriptors the kernel dropped: this process's limit, most likely.
pub(crate) fn dropped() -> std::io::Error {
    let limit = soft_limit(std::process::id() as i32).unwrap_or(u64::MAX);
    std::io::Error::other(Dropped(format!(
        "descriptors sent with a message were dropped: this process reached its open-file limit \
         of {limit}: start it with a higher limit (`ulimit -n`, systemd's `LimitNOFILE=`)"
    )))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_is_checked_against_its_own_limit() {
        let me = std::process::id() as i32;
        let limit = super::soft_limit(me).expect("this process's limit");
        assert_eq!(super::check(me, 1), Ok(()));
        assert_eq!(
            super::check(me, limit),
            Err(super::NoRoom {
                descriptors: limit,
                limit
            })
        );
    }

    #[test]
    fn a_refusal_names_the_counts_and_what_to_do() {
        let text = super::NoRoom {
            descriptors: 24_000,
            limit: 20_000,
        }
        .to_string();
        assert!(text.contains("with 24000 descriptors"), "{text}");
        assert!(text.contains("open-file limit of 20000"), "{text}");
        assert!(text.contains("LimitNOFILE="), "{text}");
    }
}
