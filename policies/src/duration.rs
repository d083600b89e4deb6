//! Go-style durations (`"30s"`, `"1m"`, `"720h"`, `"1h30m"`, `"1.5h"`) and the
//! `"Never"` sentinel used by `expireAfter` and `consolidateAfter`.
//!
//! The grammar is Go's `time.ParseDuration`: an optional sign, then one or
//! more `<decimal><unit>` pairs with units `ns`, `us` (`µs`), `ms`, `s`, `m`,
//! `h`; a bare `"0"` is zero. Negative durations are rejected, as are values
//! beyond Go's limit of `i64::MAX` nanoseconds (about 292 years).
//!
//! [`parse_duration`] is exactly that grammar, for API fields (Karpenter and Go
//! accept nothing else there). [`parse_duration_with_days`] adds the units `d`
//! (24h) and `w` (7d) for the places people write long spans: scenario files
//! and `--since` flags (`"7d"`, `"1d12h"`, `"2w"`), as Prometheus does.

use std::time::Duration;

use crate::error::DurationError;

/// The sentinel that disables an expiry or a consolidation delay.
pub const NEVER: &str = "Never";

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Go's units, in nanoseconds.
const GO_UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", NANOS_PER_SEC),
    ("m", 60 * NANOS_PER_SEC),
    ("h", 3600 * NANOS_PER_SEC),
];

/// Fractional digits of one `<decimal><unit>` term that count; later ones are dropped.
const MAX_FRAC_DIGITS: usize = 20;

/// The units scenario files and `--since` add to Go's.
const DAY_UNITS: &[(&str, u128)] = &[
    ("d", 86_400 * NANOS_PER_SEC),
    ("w", 7 * 86_400 * NANOS_PER_SEC),
];

/// Parses a Go-style duration.
///
/// ```
/// use std::time::Duration;
/// use quartermaster_policies::duration::parse_duration;
/// assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
/// ```
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    parse_with_units(input, &[], "ns, us, ms, s, m, h")
}

/// Parses a Go-style duration that may also use `d` (24 hours) and `w` (7 days), in any
/// combination (`"7d"`, `"1d12h"`, `"2w3d"`, `"1.5d"`). The same limits apply.
///
/// ```
/// use std::time::Duration;
/// use quartermaster_policies::duration::parse_duration_with_days;
/// assert_eq!(parse_duration_with_days("1d12h").unwrap(), Duration::from_secs(36 * 3600));
/// assert_eq!(parse_duration_with_days("90m").unwrap(), Duration::from_secs(5400));
/// ```
pub fn parse_duration_with_days(input: &str) -> Result<Duration, DurationError> {
    parse_with_units(input, DAY_UNITS, "ns, us, ms, s, m, h, d, w")
}

/// The one parser: Go's grammar over the unit table `units` (`names` lists them for errors).
fn parse_with_units(
    input: &str,
    extra_units: &[(&str, u128)],
    names: &str,
) -> Result<Duration, DurationError> {
    let err = |reason: &str| DurationError::new(input, reason);
    let mut s = input;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty duration"));
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        // Whole part.
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &s[..int_len];
        s = &s[int_len..];
        // Fraction.
        let mut frac_part = "";
        if let Some(rest) = s.strip_prefix('.') {
            let frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &rest[..frac_len];
            s = &rest[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        // Unit.
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        if unit.is_empty() {
            return Err(DurationError::new(
                input,
                format!("missing unit (one of {names})"),
            ));
        }
        let Some(&(_, unit_nanos)) = GO_UNITS
            .iter()
            .chain(extra_units)
            .find(|(name, _)| *name == unit)
        else {
            return Err(DurationError::new(
                input,
                format!("unknown unit {unit:?} (expected one of {names})"),
            ));
        };
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| err("value is too large"))?
        };
        // Fractions are truncated to whole nanoseconds, as in Go. Digits past the 20th are
        // worth less than 10^-5 ns even of a week and are dropped (Go drops those past the
        // int64 range): 20 digits keep `frac * unit_nanos` well inside u128.
        let mut scale: u128 = 1;
        let mut frac: u128 = 0;
        for d in frac_part.bytes().take(MAX_FRAC_DIGITS) {
            frac = frac * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        let nanos = whole
            .checked_mul(unit_nanos)
            .and_then(|n| n.checked_add(frac * unit_nanos / scale))
            .ok_or_else(|| err("value is too large"))?;
        total = total
            .checked_add(nanos)
            .ok_or_else(|| err("value is too large"))?;
        if total > i64::MAX as u128 {
            return Err(err("value is too large"));
        }
    }
    if negative && total != 0 {
        return Err(err("negative durations are not allowed"));
    }
    let secs = (total / NANOS_PER_SEC) as u64;
    let nanos = (total % NANOS_PER_SEC) as u32;
    Ok(Duration::new(secs, nanos))
}

/// Parses a duration that may be `"Never"`, which gives `None`.
///
/// ```
/// use std::time::Duration;
/// use quartermaster_policies::duration::parse_nillable_duration;
/// assert_eq!(parse_nillable_duration("720h").unwrap(), Some(Duration::from_secs(720 * 3600)));
/// assert_eq!(parse_nillable_duration("Never").unwrap(), None);
/// ```
pub fn parse_nillable_duration(input: &str) -> Result<Option<Duration>, DurationError> {
    if input == NEVER {
        return Ok(None);
    }
    parse_duration(input).map(Some)
}

/// Formats a duration the way Go's `time.Duration.String` does
/// (`"1h30m0s"`, `"1.5s"`, `"250ms"`, `"0s"`).
pub fn format_duration(d: Duration) -> String {
    let total = d.as_nanos();
    if total == 0 {
        return "0s".to_owned();
    }
    if total < 1_000 {
        return format!("{total}ns");
    }
    if total < 1_000_000 {
        return format!("{}µs", fixed(total, 1_000));
    }
    if total < NANOS_PER_SEC {
        return format!("{}ms", fixed(total, 1_000_000));
    }
    let hours = total / (3600 * NANOS_PER_SEC);
    let rem = total % (3600 * NANOS_PER_SEC);
    let minutes = rem / (60 * NANOS_PER_SEC);
    let secs = fixed(rem % (60 * NANOS_PER_SEC), NANOS_PER_SEC);
    if hours > 0 {
        format!("{hours}h{minutes}m{secs}s")
    } else if minutes > 0 {
        format!("{minutes}m{secs}s")
    } else {
        format!("{secs}s")
    }
}

/// `value / unit` as a decimal with trailing zeros removed.
fn fixed(value: u128, unit: u128) -> String {
    let whole = value / unit;
    let frac = value % unit;
    if frac == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases: &[(&str, Duration)] = &[
            ("30s", Duration::from_secs(30)),
            ("1m", Duration::from_secs(60)),
            ("720h", Duration::from_secs(720 * 3600)),
            ("1h30m", Duration::from_secs(5400)),
            ("1h30m15s", Duration::from_secs(5415)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("+5s", Duration::from_secs(5)),
            ("1.5h", Duration::from_secs(5400)),
            (".5s", Duration::from_millis(500)),
            ("2.s", Duration::from_secs(2)),
            ("100ms", Duration::from_millis(100)),
            ("10us", Duration::from_micros(10)),
            ("10µs", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            ("1h1h", Duration::from_secs(7200)),
            ("2562047h", Duration::from_secs(2_562_047 * 3600)),
        ];
        for (input, want) in cases {
            assert_eq!(parse_duration(input).unwrap(), *want, "{input}");
        }
    }

    #[test]
    fn rejects_bad_durations() {
        for bad in [
            "", "1", "h", "10x", "1d", "-1s", "1h-30m", "1.2.3s", "Never", "never", "1 h", ".s",
            "3000000h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(
            parse_duration("5d").unwrap_err().to_string(),
            r#"invalid duration "5d": unknown unit "d" (expected one of ns, us, ms, s, m, h)"#
        );
    }

    #[test]
    fn long_fractions_do_not_overflow() {
        // Found by the property tests: 30 fractional digits times the unit overflowed u128.
        assert_eq!(
            parse_duration(".100000000000000000000000000h").unwrap(),
            Duration::from_secs(360)
        );
        assert_eq!(
            parse_duration("0.999999999999999999999999999999s").unwrap(),
            Duration::from_nanos(999_999_999)
        );
        assert_eq!(
            parse_duration_with_days("1.5000000000000000000000000000001w").unwrap(),
            Duration::from_secs(7 * 86_400 + 302_400)
        );
        // The whole part times the unit fits u128; adding the fraction does not.
        assert!(parse_duration("340282366920938463463374607431.999999999s").is_err());
    }

    #[test]
    fn days_and_weeks_only_where_asked_for() {
        let day = 86_400;
        let cases: &[(&str, u64)] = &[
            ("7d", 7 * day),
            ("1d12h", day + 12 * 3600),
            ("12h1d", day + 12 * 3600),
            ("2w", 14 * day),
            ("1w2d3h", 9 * day + 3 * 3600),
            ("1.5d", day + 12 * 3600),
            ("90m", 5400),
            ("0", 0),
        ];
        for (input, secs) in cases {
            assert_eq!(
                parse_duration_with_days(input).unwrap(),
                Duration::from_secs(*secs),
                "{input}"
            );
        }
        assert_eq!(
            parse_duration_with_days("500ms").unwrap(),
            Duration::from_millis(500)
        );
        for bad in ["", "7", "d", "-1d", "3y", "1 d", "106752d", "soon", "Never"] {
            assert!(
                parse_duration_with_days(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
        assert_eq!(
            parse_duration_with_days("3y").unwrap_err().to_string(),
            r#"invalid duration "3y": unknown unit "y" (expected one of ns, us, ms, s, m, h, d, w)"#
        );
        assert_eq!(
            parse_duration_with_days("7").unwrap_err().to_string(),
            r#"invalid duration "7": missing unit (one of ns, us, ms, s, m, h, d, w)"#
        );
        // API fields keep Go's grammar.
        assert!(parse_duration("7d").is_err());
        assert!(parse_duration("2w").is_err());
    }

    #[test]
    fn never_is_none() {
        assert_eq!(parse_nillable_duration("Never").unwrap(), None);
        assert_eq!(
            parse_nillable_duration("30s").unwrap(),
            Some(Duration::from_secs(30))
        );
        assert!(parse_nillable_duration("NEVER").is_err());
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_secs(5400), "1h30m0s"),
            (Duration::from_secs(720 * 3600), "720h0m0s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_nanos(1500), "1.5µs"),
            (Duration::from_nanos(12), "12ns"),
        ];
        for (d, want) in cases {
            assert_eq!(format_duration(*d), *want);
            assert_eq!(parse_duration(want).unwrap(), *d);
        }
    }
}
