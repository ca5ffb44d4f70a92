//! RFC 3339 timestamps, both ways: formatting a Unix time for an envelope's `timestamp` or an
//! audit entry ([`rfc3339`], [`rfc3339_ms`], [`now_rfc3339`]), and parsing the `date-time`
//! syntax ACS requires ([`rfc3339_unix_ms`], [`is_rfc3339`]). Dates are proleptic Gregorian,
//! converted with Howard Hinnant's civil/days algorithms; times are UTC.

/// The clock an embedder installs where the standard library has none
/// (`wasm32-unknown-unknown`: the WebAssembly build installs `Date.now`).
static CLOCK: std::sync::OnceLock<fn() -> f64> = std::sync::OnceLock::new();

/// Installs the clock [`now_ms`] reads (Unix milliseconds); false if one already was.
pub fn set_clock(now_ms: fn() -> f64) -> bool {
    CLOCK.set(now_ms).is_ok()
}

/// Unix milliseconds now (0 if the clock is before 1970, or on a platform without a clock
/// where none was installed with [`set_clock`]).
pub fn now_ms() -> i64 {
    if let Some(clock) = CLOCK.get() {
        return clock() as i64;
    }
    if cfg!(target_arch = "wasm32") {
        return 0;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A point to measure elapsed time from: the monotonic clock, or [`now_ms`] where the
/// platform has none (WebAssembly).
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    instant: Option<std::time::Instant>,
    wall_ms: i64,
}

impl Stopwatch {
    /// Starts measuring now.
    pub fn start() -> Stopwatch {
        if cfg!(target_arch = "wasm32") {
            return Stopwatch {
                instant: None,
                wall_ms: now_ms(),
            };
        }
        Stopwatch {
            instant: Some(std::time::Instant::now()),
            wall_ms: 0,
        }
    }

    /// The time since [`Stopwatch::start`]; on WebAssembly, whole milliseconds of the
    /// installed clock (zero if none was installed or it went backwards).
    pub fn elapsed(&self) -> std::time::Duration {
        match self.instant {
            Some(i) => i.elapsed(),
            None => std::time::Duration::from_millis(
                u64::try_from(now_ms() - self.wall_ms).unwrap_or(0),
            ),
        }
    }

    /// Microseconds since [`Stopwatch::start`].
    pub fn elapsed_us(&self) -> u64 {
        u64::try_from(self.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

/// RFC 3339 (UTC, whole seconds) of now.
pub fn now_rfc3339() -> String {
    rfc3339(now_ms().div_euclid(1000))
}

/// RFC 3339 (UTC, milliseconds) of now.
pub fn now_rfc3339_ms() -> String {
    rfc3339_ms(now_ms())
}

/// RFC 3339 (UTC, whole seconds) of a Unix time in seconds: `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// RFC 3339 (UTC, milliseconds) of a Unix time in milliseconds: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339_ms(ms: i64) -> String {
    let base = rfc3339(ms.div_euclid(1000));
    format!("{}.{:03}Z", &base[..base.len() - 1], ms.rem_euclid(1000))
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses an RFC 3339 `date-time` (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, `T`/`Z` in either
/// case) into milliseconds since the Unix epoch. A leap second (`:60`) counts as the
/// following second. Returns `None` for anything else.
pub fn rfc3339_unix_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    // Two or four ASCII digits, read in place (every request's timestamp is read here).
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        b.get(range)?.iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't') {
        return None;
    }
    let year = i64::from(num(0..4)?);
    let month = num(5..7)?;
    let day = num(8..10)?;
    let hour = num(11..13)?;
    let minute = num(14..16)?;
    let second = num(17..19)?;
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut millis = 0u32;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 3 {
                millis = millis * 10 + u32::from(b[i] - b'0');
            }
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return None;
        }
        for _ in n..3 {
            millis *= 10;
        }
    }
    let offset_minutes: i64 = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let m = i64::from(oh * 60 + om);
            if *sign == b'-' {
                -m
            } else {
                m
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour) * 3600 + i64::from(minute) * 60 + i64::from(second)
        - offset_minutes * 60;
    Some(secs * 1000 + i64::from(millis))
}

/// RFC 3339 `date-time` syntax (see [`rfc3339_unix_ms`]).
pub fn is_rfc3339(s: &str) -> bool {
    rfc3339_unix_ms(s).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_789_812_000), "2026-09-19T10:00:00Z");
        assert_eq!(rfc3339(951_825_599), "2000-02-29T11:59:59Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339_ms(1_789_812_000_042), "2026-09-19T10:00:00.042Z");
        assert_eq!(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn round_trips() {
        for secs in [0, 59, 86_399, 951_825_599, 1_789_812_000, 4_102_444_800] {
            assert_eq!(rfc3339_unix_ms(&rfc3339(secs)), Some(secs * 1000));
        }
        let ms = 1_789_812_000_123;
        assert_eq!(rfc3339_unix_ms(&rfc3339_ms(ms)), Some(ms));
    }

    #[test]
    fn parses() {
        assert_eq!(rfc3339_unix_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_unix_ms("1970-01-01T01:00:00.5+01:00"), Some(500));
        assert_eq!(
            rfc3339_unix_ms("2026-09-19T10:00:00Z"),
            Some(1_789_812_000_000)
        );
        assert!(is_rfc3339("2024-02-29t23:59:60.123456z"));
        for bad in [
            "2023-02-29T00:00:00Z",
            "2026-09-19 10:00:00Z",
            "2026-09-19T10:00:00",
            "2026-09-19T10:00Z",
            "2026-13-01T00:00:00Z",
            "2026-09-19T24:00:00Z",
            "2026-09-19T10:00:00.Z",
            "2026-09-19T10:00:00+0100",
            "2026-09-19T10:00:00+01:00x",
            "+026-09-19T10:00:00Z",
            "2026-0a-19T10:00:00Z",
            "2026-09-19T1 :00:00Z",
            "2026-09-19T10:00:00+0a:00",
            "２026-09-19T10:00:00Z",
            "yesterday",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }
}
