//! Tasks a keeper carries for a dead predecessor (the keeper's side): held for a successor as
//! its own are (`Request::Carry`), but not its children. Their leaders are the
//! host's children (its subreaper took them when the dead keeper went), so no wait of the keeper's
//! sees them end: a thread of their own watches each leader's `/proc` entry, reads the exit a
//! zombie shows there, and reports it as the reaper reports a child's. A leader reaped before the
//! watch saw it a zombie (by the host's image after an upgrade, or by init after a crash) ends
//! with an unknown exit.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use super::held::held;
use super::hold::Hold;
use crate::exit::Exit;
use crate::keeper::shared::Shared;
use crate::keeper::wire::Report;

/// How often the carried leaders are looked at.
const EVERY: Duration = Duration::from_millis(20);

/// Holds the task in group `pgid` as request `id` with `fds`, and watches its leader (the watch
/// thread starts with the first carried task).
pub(crate) fn carry(shared: &Arc<Shared>, id: u64, pgid: i32, hold: Hold, fds: Vec<OwnedFd>) {
    let mut st = shared.state.lock();
    st.next_id = st.next_id.max(id + 1);
    let dir = st.kept_dir.clone();
    let Some(held) = held(id, hold, fds, dir.as_ref()) else {
        return;
    };
    st.held.insert(pgid, held);
    st.ids.insert(pgid, id);
    let start = !st.watching;
    st.carried.push(pgid);
    if start {
        let watched = shared.clone();
        st.watching = std::thread::Builder::new()
            .name("carried".into())
            .spawn(move || watch(&watched))
            .is_ok();
    }
}

/// Reports each carried leader's exit once it has one, until none is left.
fn watch(shared: &Shared) {
    loop {
        {
            let mut st = shared.state.lock();
            let carried = std::mem::take(&mut st.carried);
            for pgid in carried {
                let Some(exit) = exit_of(pgid) else {
                    st.carried.push(pgid);
                    continue;
                };
                if let Some(held) = st.held.get_mut(&pgid) {
                    held.exit = Some(exit.clone());
                }
                if let Some(id) = st.ids.remove(&pgid) {
                    st.report(&Report::Exited { id, exit });
                }
            }
            if st.carried.is_empty() {
                st.watching = false;
                return;
            }
        }
        std::thread::sleep(EVERY);
    }
}

/// The exit of process `pid` once it has ended: what its zombie's `/proc/PID/stat` says (its 52nd
/// field, the status as `waitpid` gives it), unknown once it is gone.
fn exit_of(pid: i32) -> Option<Exit> {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Some(Exit::Unknown);
    };
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    if fields.first() != Some(&"Z") {
        return None;
    }
    // Fields from the third on: the exit code is the 52nd.
    let status = fields.get(49).and_then(|s| s.parse::<i32>().ok());
    Some(status.map_or(Exit::Unknown, decode))
}

/// A `waitpid` status as an exit.
fn decode(status: i32) -> Exit {
    match status & 0x7f {
        0 => Exit::Code((status >> 8) & 0xff),
        signal => Exit::Signal(signal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_status_decodes_to_its_code_or_its_signal() {
        assert_eq!(decode(3 << 8), Exit::Code(3));
        assert_eq!(decode(9), Exit::Signal(9));
    }

    #[test]
    fn a_process_that_is_gone_has_an_unknown_exit_and_a_live_one_none() {
        assert_eq!(exit_of(i32::MAX), Some(Exit::Unknown));
        assert_eq!(exit_of(std::process::id().cast_signed()), None);
    }
}
