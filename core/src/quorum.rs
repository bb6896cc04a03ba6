//! The arithmetic of Redlock: quorum size, drift margin, validity deadline.

use std::time::{Duration, Instant};

/// Nodes that must agree out of `n`: `n / 2 + 1`.
pub fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// The clock-drift margin for a TTL: `ttl × factor + 2 ms`.
pub fn drift(ttl: Duration, factor: f64) -> Duration {
    ttl.mul_f64(factor) + Duration::from_millis(2)
}

/// The instant until which a lock acquired (or extended) in a round started at `start` is
/// valid: `start + ttl − drift`. `None` when the drift margin swallows the whole TTL.
pub fn valid_until(start: Instant, ttl: Duration, factor: f64) -> Option<Instant> {
    ttl.checked_sub(drift(ttl, factor)).filter(|v| !v.is_zero()).map(|v| start + v)
}

/// Whether a round that started at `start` and reached its quorum at `now` leaves validity:
/// the deadline must lie strictly after `now`. Returns the deadline if so.
pub fn validity_left(start: Instant, now: Instant, ttl: Duration, factor: f64) -> Option<Instant> {
    valid_until(start, ttl, factor).filter(|&d| d > now)
}

/// The whole milliseconds of `d`: Redis expiries are in milliseconds, and the validity is
/// computed from what is sent.
pub(crate) fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis().min(u64::MAX as u128) as u64)
}

/// Whether `yes` votes out of `n` with `open` still unanswered can still reach the quorum.
pub fn quorum_possible(n: usize, yes: usize, open: usize) -> bool {
    yes + open >= quorum(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_for_one_to_nine() {
        let expect = [1, 2, 2, 3, 3, 4, 4, 5, 5];
        for n in 1..=9 {
            assert_eq!(quorum(n), expect[n - 1], "n = {n}");
            // Two quorums always intersect.
            assert!(2 * quorum(n) > n);
            // A minority failing never prevents a quorum.
            assert!(quorum_possible(n, 0, n - (n - quorum(n))));
            assert!(!quorum_possible(n, quorum(n) - 1, 0));
        }
    }

    #[test]
    fn drift_and_validity() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(10);
        assert_eq!(drift(ttl, 0.01), Duration::from_millis(102));
        assert_eq!(valid_until(t0, ttl, 0.01), Some(t0 + Duration::from_millis(9898)));
        // Elapsed equal to or beyond the validity gives nothing.
        let d = t0 + Duration::from_millis(9898);
        assert_eq!(validity_left(t0, d, ttl, 0.01), None);
        assert_eq!(validity_left(t0, t0 + ttl, ttl, 0.01), None);
        assert_eq!(validity_left(t0, d - Duration::from_nanos(1), ttl, 0.01), Some(d));
        // A TTL at or below the drift margin leaves none.
        assert_eq!(valid_until(t0, Duration::from_millis(2), 0.01), None);
        assert_eq!(valid_until(t0, Duration::from_millis(2), 0.0), None);
        assert!(valid_until(t0, Duration::from_millis(3), 0.0).is_some());
        // Zero drift factor still keeps the fixed 2 ms.
        assert_eq!(drift(ttl, 0.0), Duration::from_millis(2));
    }

    #[test]
    fn quorum_possible_at_the_edges() {
        for n in 1..=9 {
            let q = quorum(n);
            for yes in 0..=n {
                for open in 0..=(n - yes) {
                    assert_eq!(quorum_possible(n, yes, open), yes + open >= q, "n={n} yes={yes} open={open}");
                }
            }
            // Exactly n - q nodes may fail without losing the quorum, one more may not.
            assert!(quorum_possible(n, 0, q));
            assert!(!quorum_possible(n, 0, q - 1));
        }
    }

    #[test]
    fn ttl_near_the_drift_margin() {
        let t0 = Instant::now();
        let ns = Duration::from_nanos;
        for factor in [0.0, 0.01, 0.1, 0.49] {
            // The smallest TTL with any validity: drift(ttl) < ttl.
            let ttl = Duration::from_millis(3);
            let d = drift(ttl, factor);
            match valid_until(t0, ttl, factor) {
                Some(v) => {
                    assert!(d < ttl, "factor {factor}");
                    assert_eq!(v, t0 + (ttl - d));
                    // Validity ends at the deadline itself: at `v` nothing is left.
                    assert_eq!(validity_left(t0, v - ns(1), ttl, factor), Some(v));
                    assert_eq!(validity_left(t0, v, ttl, factor), None);
                }
                None => assert!(d >= ttl, "factor {factor}"),
            }
        }
        // One nanosecond above the margin still gives a (tiny) validity; at the margin none.
        let ttl = Duration::from_millis(2) + ns(1);
        assert_eq!(valid_until(t0, ttl, 0.0), Some(t0 + ns(1)));
        assert_eq!(valid_until(t0, Duration::from_millis(2), 0.0), None);
        assert_eq!(valid_until(t0, Duration::ZERO, 0.01), None);
    }

    #[test]
    fn elapsed_at_or_beyond_the_ttl_leaves_nothing() {
        let t0 = Instant::now();
        for ttl_ms in [3, 10, 100, 10_000, 3_600_000] {
            let ttl = Duration::from_millis(ttl_ms);
            for late in [ttl - drift(ttl, 0.01), ttl, ttl + Duration::from_nanos(1), 2 * ttl] {
                assert_eq!(validity_left(t0, t0 + late, ttl, 0.01), None, "ttl {ttl:?} elapsed {late:?}");
            }
            // Never a deadline past start + ttl − drift, whatever the elapsed time.
            let v = validity_left(t0, t0, ttl, 0.01).unwrap();
            assert_eq!(v, t0 + ttl - drift(ttl, 0.01));
            assert!(v < t0 + ttl);
        }
    }

    #[test]
    fn drift_is_proportional_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(1), 0.01), Duration::from_millis(12));
        assert_eq!(drift(Duration::from_millis(3), 0.49), Duration::from_micros(3_470));
        assert_eq!(drift(Duration::ZERO, 0.3), Duration::from_millis(2));
        assert_eq!(drift(Duration::from_secs(100 * 365 * 86_400), 0.0), Duration::from_millis(2));
    }
}
