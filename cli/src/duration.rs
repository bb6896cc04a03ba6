//! Durations on the command line: bare numbers are seconds, as in flock(1) (`5`, `0.5`), and
//! `500ms`, `10s`, `2m`, `1h`, `1d` (decimals too: `1.5s`) are accepted. A wait bound may also
//! be `forever` (or `inf`): no bound.

use std::time::Duration;

/// Longest duration accepted (about 31 years), so that no deadline computed from it overflows.
const MAX_SECS: f64 = 1e9;

/// How long to wait for something: a duration, or without a bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// At most this long.
    For(Duration),
    /// As long as it takes.
    Forever,
}

/// Parse a wait bound: `forever`, `inf` or `infinity` for none, else a duration as [`parse`]
/// reads it.
pub(crate) fn parse_bound(s: &str) -> Result<Bound, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "forever" | "inf" | "infinity" => Ok(Bound::Forever),
        _ => parse(s).map(Bound::For).map_err(|e| format!("{e}; or forever (inf) for no bound")),
    }
}

/// Parse a duration: a number of seconds (`5`, `0.5`) or a number with a unit (`500ms`, `10s`,
/// `2m`, `1h`, `1d`, `1.5s`).
pub(crate) fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(format!("{s:?} is not a duration: use seconds (5, 0.5) or a unit (500ms, 10s, 2m)"));
    }
    let value: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration: bad number {num:?}"))?;
    let secs = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86400.0,
        other => {
            return Err(format!(
                "{s:?} has an unknown unit {other:?}: use ms, s, m, h or d (a bare number is seconds)"
            ));
        }
    };
    if !secs.is_finite() || secs > MAX_SECS {
        return Err(format!("{s:?} is too long (at most {MAX_SECS:.0} seconds)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Render a duration briefly for messages (`1.5s`, `250ms`).
pub(crate) fn show(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        let s = d.as_secs_f64();
        if s.fract() == 0.0 { format!("{s:.0}s") } else { format!("{s:.1}s") }
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_seconds() {
        assert_eq!(parse("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse(" 5 "), Ok(Duration::from_secs(5)));
    }

    #[test]
    fn parses_units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse("0.5d"), Ok(Duration::from_secs(43_200)));
    }

    #[test]
    fn bounds_are_durations_or_forever() {
        for s in ["forever", "inf", "INF", " infinity "] {
            assert_eq!(parse_bound(s), Ok(Bound::Forever), "{s}");
        }
        assert_eq!(parse_bound("30"), Ok(Bound::For(Duration::from_secs(30))));
        assert_eq!(parse_bound("0"), Ok(Bound::For(Duration::ZERO)));
        assert!(parse_bound("soon").unwrap_err().contains("forever"));
    }

    #[test]
    fn rejects_bad_input_with_reasons() {
        assert!(parse("10x").unwrap_err().contains("unknown unit"));
        assert!(parse("ms").unwrap_err().contains("not a duration"));
        assert!(parse("-1").unwrap_err().contains("not a duration"));
        assert!(parse("1.2.3s").unwrap_err().contains("bad number"));
        assert!(parse("99999999999").unwrap_err().contains("too long"));
        assert!(parse("").is_err());
    }

    #[test]
    fn shows_briefly() {
        assert_eq!(show(Duration::from_millis(250)), "250ms");
        assert_eq!(show(Duration::from_millis(1500)), "1.5s");
        assert_eq!(show(Duration::from_secs(10)), "10s");
    }
}
