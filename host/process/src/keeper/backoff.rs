//! How long the host waits before it starts a keeper again after deaths in a row.

use std::time::Duration;

/// Deaths in a row that are answered with an immediate restart.
const QUICK_RESTARTS: u32 = 3;
/// The first delay past the quick restarts; it doubles with each further death in a row.
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest delay before a keeper is started again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The delay before the next keeper after `deaths_in_a_row` quick deaths.
pub(super) fn backoff(deaths_in_a_row: u32) -> Duration {
    match deaths_in_a_row.checked_sub(QUICK_RESTARTS + 1) {
        None => Duration::ZERO,
        Some(doublings) => FIRST_BACKOFF
            .saturating_mul(1 << doublings.min(16))
            .min(MAX_BACKOFF),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_deaths_in_a_row_are_restarted_at_once_then_with_a_doubling_bounded_backoff() {
        assert_eq!(backoff(1), Duration::ZERO);
        assert_eq!(backoff(QUICK_RESTARTS), Duration::ZERO);
        assert_eq!(backoff(QUICK_RESTARTS + 1), FIRST_BACKOFF);
        assert_eq!(backoff(QUICK_RESTARTS + 2), FIRST_BACKOFF * 2);
        assert_eq!(backoff(QUICK_RESTARTS + 40), MAX_BACKOFF);
    }
}
