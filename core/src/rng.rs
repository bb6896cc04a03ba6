//! The seeded jitter generator (SplitMix64): deterministic, no OS randomness.

use std::time::Duration;

/// A tiny, fast, seeded pseudo-random generator.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A duration drawn uniformly from `[lo, hi]` (nanosecond resolution).
    pub(crate) fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_nanos().min(u64::MAX as u128) as u64;
        if span == 0 {
            return lo;
        }
        // `span + 1` would overflow for the widest span: then every draw is in range.
        let draw = match span.checked_add(1) {
            Some(n) => self.next_u64() % n,
            None => self.next_u64(),
        };
        lo.saturating_add(Duration::from_nanos(draw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_range_and_varies() {
        let mut r = Rng::new(7);
        let (lo, hi) = (Duration::from_millis(20), Duration::from_millis(200));
        let draws: Vec<_> = (0..1000).map(|_| r.between(lo, hi)).collect();
        assert!(draws.iter().all(|d| (lo..=hi).contains(d)));
        let distinct: std::collections::HashSet<_> = draws.iter().collect();
        assert!(distinct.len() > 900);
        assert_eq!(Rng::new(7).next_u64(), Rng::new(7).next_u64());
        assert_eq!(r.between(lo, lo), lo);
        // The widest spans do not overflow.
        for _ in 0..100 {
            let d = r.between(Duration::ZERO, Duration::MAX);
            assert!(d <= Duration::MAX);
            assert!(r.between(Duration::MAX, Duration::MAX) == Duration::MAX);
            assert!(r.between(Duration::from_secs(1), Duration::MAX) >= Duration::from_secs(1));
        }
    }
}
