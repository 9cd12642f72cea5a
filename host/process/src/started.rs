//! When a process started, as the kernel says (`/proc/PID/stat`'s start time, in clock ticks since
//! boot, against `/proc/uptime`): a command taken over from a host that is gone shows as started
//! when it began, not when its successor made it a task.

use std::time::{SystemTime, UNIX_EPOCH};

/// Clock ticks per second of `/proc` times (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
fn ticks_per_second() -> Option<u64> {
    let n = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    u64::try_from(n).ok().filter(|&n| n > 0)
}

/// When process `pid` started, in ms since the epoch (to the kernel's tick, 10 ms); `None` when it
/// is gone or `/proc` cannot say.
pub fn started_at_ms(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's name in parentheses (which may hold spaces): state is field 3, start
    // time field 22.
    let rest = stat.rsplit_once(')')?.1;
    let ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let uptime_s: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    let now_ms = u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()?
            .as_millis(),
    )
    .ok()?;
    let age_ms = (uptime_s * 1000.0) as u64;
    let began_ms = ticks.checked_mul(1000)? / ticks_per_second()?;
    now_ms.checked_sub(age_ms.checked_sub(began_ms)?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_started_before_now_and_not_long_ago() {
        let now = u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap();
        let pid = i32::try_from(std::process::id()).unwrap();
        let started = super::started_at_ms(pid).expect("a start time");
        assert!(
            started <= now + 20 && started + 600_000 > now,
            "{started} vs {now}"
        );
        assert_eq!(super::started_at_ms(i32::MAX), None);
    }
}
