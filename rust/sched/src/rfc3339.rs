//! RFC 3339 timestamps (`metav1.Time` as the API writes it) to Unix nanoseconds.
//!
//! Accepted: `YYYY-MM-DDTHH:MM:SS`, optional fraction (`.` then 1-9 digits), then `Z` or a
//! `±HH:MM` offset; `t`/space for `T` and `z` for `Z` as RFC 3339 allows. Anything else is None,
//! which preemption reads as "no start time" (upstream uses the current time then).

fn digits(s: &[u8], from: usize, n: usize) -> Option<i64> {
    let part = s.get(from..from + n)?;
    part.iter().try_fold(0i64, |acc, &b| b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0')))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The timestamp as nanoseconds since the Unix epoch.
pub fn parse_nanos(text: &str) -> Option<i64> {
    let s = text.as_bytes();
    let (y, mo, d) = (digits(s, 0, 4)?, digits(s, 5, 2)?, digits(s, 8, 2)?);
    let (h, mi, sec) = (digits(s, 11, 2)?, digits(s, 14, 2)?, digits(s, 17, 2)?);
    let seps_ok = s[4] == b'-' && s[7] == b'-' && matches!(s[10], b'T' | b't' | b' ') && s[13] == b':' && s[16] == b':';
    if !seps_ok || !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if s.get(i) == Some(&b'.') {
        let start = i + 1;
        let mut end = start;
        while end < s.len() && s[end].is_ascii_digit() {
            end += 1;
        }
        if end == start || end - start > 9 {
            return None;
        }
        nanos = digits(s, start, end - start)? * 10i64.pow((9 - (end - start)) as u32);
        i = end;
    }
    let offset = match s.get(i..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let secs = digits(s, i + 1, 2)? * 3600 + digits(s, i + 4, 2)? * 60;
            if *sign == b'+' {
                secs
            } else {
                -secs
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_api_writes() {
        assert_eq!(parse_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_nanos("2024-01-01T00:00:00Z"), Some(1_704_067_200_000_000_000));
        assert_eq!(parse_nanos("2024-01-01T00:00:01.5Z"), Some(1_704_067_201_500_000_000));
        assert_eq!(parse_nanos("2024-01-01T02:00:00+02:00"), Some(1_704_067_200_000_000_000));
        assert_eq!(parse_nanos("2023-12-31T23:00:00-01:00"), Some(1_704_067_200_000_000_000));
        assert_eq!(parse_nanos("2000-02-29T12:00:00Z"), Some(951_825_600_000_000_000));
    }

    #[test]
    fn rejects_the_rest() {
        for bad in ["", "2024-01-01", "2024-01-01T00:00:00", "2024-13-01T00:00:00Z", "2024-01-01T00:00:00.Z",
                    "2024-01-01T00:00:00+0200", "yesterday", "2024-01-01T00:00:00Zjunk"] {
            assert_eq!(parse_nanos(bad), None, "{bad}");
        }
    }
}
