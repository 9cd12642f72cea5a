//! The signals that stop a serving host.

/// SIGTERM, SIGINT and SIGHUP: each asks the host to stop (SIGHUP to a host that hands over: to
/// hand its tasks to the binary on disk, see `upgrade.rs`).
pub(super) struct StopSignals([tokio::signal::unix::Signal; 3]);

impl StopSignals {
    pub(super) fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self([
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
            signal(SignalKind::hangup())?,
        ]))
    }

    /// The next of the three to arrive, as its number.
    pub(super) async fn first(&mut self) -> i32 {
        let [term, int, hup] = &mut self.0;
        tokio::select! {
            _ = term.recv() => libc::SIGTERM,
            _ = int.recv() => libc::SIGINT,
            _ = hup.recv() => libc::SIGHUP,
        }
    }
}
