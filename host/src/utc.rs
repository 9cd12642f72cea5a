//! Times as people and protocols read them: UTC, from milliseconds since the Unix epoch, with no
//! time zone database (the host never shows local time).

/// A UTC date and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utc {
    /// The year.
    pub year: i64,
    /// 1 to 12.
    pub month: i64,
    /// 1 to 31.
    pub day: i64,
    /// 0 to 23.
    pub hour: u64,
    /// 0 to 59.
    pub minute: u64,
    /// 0 to 59.
    pub second: u64,
    /// 0 to 999.
    pub milli: u64,
}

impl Utc {
    /// The time `ms` milliseconds after 1970-01-01T00:00:00Z.
    pub fn from_ms(ms: u64) -> Self {
        let (days, rest) = ((ms / 86_400_000) as i64, ms % 86_400_000);
        // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        Self {
            year: yoe + era * 400 + i64::from(month <= 2),
            month,
            day,
            hour: rest / 3_600_000,
            minute: rest / 60_000 % 60,
            second: rest / 1_000 % 60,
            milli: rest % 1_000,
        }
    }

    /// `YYYY-MM-DD HH:MM:SS`, as the command line shows it.
    pub fn clock(&self) -> String {
        let full = self.rfc3339();
        format!("{} {}", &full[..10], &full[11..19])
    }

    /// RFC 3339 with milliseconds (`2026-12-05T11:59:59.999Z`), as protocols carry it.
    pub fn rfc3339(&self) -> String {
        let Self {
            year,
            month,
            day,
            hour,
            minute,
            second,
            milli,
        } = *self;
        format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
    }
}

#[cfg(test)]
mod tests {
    use super::Utc;

    #[test]
    fn times_are_utc_dates_in_both_forms() {
        assert_eq!(Utc::from_ms(0).clock(), "1970-01-01 00:00:00");
        assert_eq!(
            Utc::from_ms(1_764_900_000_000).clock(),
            "2025-12-05 02:00:00"
        );
        assert_eq!(Utc::from_ms(0).rfc3339(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Utc::from_ms(951_782_400_123).rfc3339(),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            Utc::from_ms(1_796_471_999_999).rfc3339(),
            "2026-12-05T11:59:59.999Z"
        );
    }
}
