//! Shell words and scripts: quoting, the checks of a call's Slurm values, and the state poll.

/// `value` as one single-quoted shell word.
pub(crate) fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// Checks a Slurm time limit: `minutes`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`.
///
/// # Errors
/// What is wrong with it.
pub(crate) fn check_time_limit(t: &str) -> Result<(), String> {
    let numbers = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let (days, clock) = match t.split_once('-') {
        Some((d, rest)) => (Some(d), rest),
        None => (None, t),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    let ok = days.is_none_or(numbers)
        && parts.iter().all(|p| numbers(p))
        && match days {
            Some(_) => (1..=3).contains(&parts.len()),
            None => (1..=3).contains(&parts.len()),
        };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid time_limit {}: expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
            quote(t)
        ))
    }
}

/// Checks a memory size: digits with an optional K, M, G or T.
pub(crate) fn check_memory(m: &str) -> Result<(), String> {
    let digits = m.trim_end_matches(['K', 'M', 'G', 'T', 'k', 'm', 'g', 't']);
    if !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && m.len() - digits.len() <= 1
    {
        Ok(())
    } else {
        Err(format!(
            "invalid memory {}: expected a size such as 512M or 4G",
            quote(m)
        ))
    }
}

pub(crate) fn positive(key: &str, n: Option<u32>) -> Result<Option<u32>, String> {
    match n {
        Some(0) => Err(format!("invalid {key}: expected a positive integer, got 0")),
        n => Ok(n),
    }
}

/// A bash script that prints job `id`'s state as the host's poll reads it: `running`, or
/// `completed exit code: N`, `killed CANCELLED`, `failed <STATE>, exit code: N[, signal: S]`. The
/// controller is asked first (`scontrol`); a job it no longer holds (past its `MinJobAge`, as when a
/// host comes back to a job after a long time) is looked up in the accounting (`sacct`). When
/// neither can answer it prints nothing (the host asks again).
pub(crate) fn state_script(id: &str) -> String {
    format!(
        r#"if info=$(scontrol show job {id} -o 2>/dev/null) && [ -n "$info" ]; then
  state=$(printf '%s' "$info" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  code=$(printf '%s' "$info" | grep -o ' ExitCode=[0-9]*:[0-9]*' | cut -d= -f2)
else
  line=$(sacct -j {id} -X -n -P -o State,ExitCode 2>/dev/null | head -n 1)
  [ -n "$line" ] || exit 0
  state=${{line%%|*}}; state=${{state%% *}}; code=${{line##*|}}
fi
status=${{code%%:*}}; signal=${{code##*:}}
case "$state" in
  COMPLETED) echo "completed exit code: $status" ;;
  CANCELLED) echo "killed CANCELLED" ;;
  FAILED|TIMEOUT|OUT_OF_MEMORY|NODE_FAIL|PREEMPTED|BOOT_FAIL|DEADLINE)
    if [ "$signal" != 0 ]; then echo "failed $state, exit code: $status, signal: $signal"
    else echo "failed $state, exit code: $status"; fi ;;
  *) echo running ;;
esac"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_in_slurms_forms_pass_and_others_are_named() {
        for ok in ["5", "10:00", "1:00:00", "2-0", "2-12:30", "1-00:00:00"] {
            assert_eq!(check_time_limit(ok), Ok(()), "{ok}");
        }
        for bad in ["", "ten", "1:2:3:4", "-5", "1-", "5m", "1;reboot"] {
            assert!(check_time_limit(bad).is_err(), "{bad}");
        }
    }

    /// Runs the state script of job 42 with `scontrol` and `sacct` stand-ins (bash bodies) first
    /// on the PATH; what it prints.
    fn state_with(scontrol: &str, sacct: &str) -> String {
        let dir = std::env::temp_dir().join(format!(
            "slurm-state-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).expect("made");
        for (name, body) in [("scontrol", scontrol), ("sacct", sacct)] {
            let path = dir.join(name);
            std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).expect("written");
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("executable");
        }
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &state_script("42")])
            .env("PATH", path)
            .output()
            .expect("bash ran");
        let _ = std::fs::remove_dir_all(&dir);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn a_job_the_controller_forgot_is_looked_up_in_the_accounting() {
        let forgot = "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1";
        assert_eq!(
            state_with(forgot, "echo 'FAILED|3:0'"),
            "failed FAILED, exit code: 3"
        );
        assert_eq!(
            state_with(forgot, "echo 'CANCELLED by 0|0:15'"),
            "killed CANCELLED"
        );
        assert_eq!(state_with(forgot, "exit 1"), "");
        assert_eq!(
            state_with(
                "echo 'JobId=42 JobState=COMPLETED Reason=None ExitCode=0:0'",
                "echo 'FAILED|9:0'"
            ),
            "completed exit code: 0"
        );
        assert_eq!(
            state_with("echo 'JobId=42 JobState=RUNNING ExitCode=0:0'", "exit 1"),
            "running"
        );
    }

    #[test]
    fn a_value_is_quoted_as_one_word() {
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn memory_sizes_are_digits_and_one_unit() {
        assert!(
            check_memory("512M").is_ok()
                && check_memory("4G").is_ok()
                && check_memory("100").is_ok()
        );
        assert!(
            check_memory("4GB").is_err()
                && check_memory("lots").is_err()
                && check_memory("").is_err()
        );
    }
}
