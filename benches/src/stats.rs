//! Latency samples, percentiles and the spread of counts.

use std::time::Duration;

/// Latencies taken by one measurement, in nanoseconds, in the order they were taken.
#[derive(Clone, Debug, Default)]
pub struct Samples(Vec<u64>);

impl Samples {
    /// Room for `n` samples without reallocating (allocation stays out of timed loops).
    pub fn with_capacity(n: usize) -> Self {
        Samples(Vec::with_capacity(n))
    }

    /// Add one latency.
    pub fn push(&mut self, d: Duration) {
        self.0.push(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Move every sample of `other` into `self`.
    pub fn append(&mut self, mut other: Samples) {
        self.0.append(&mut other.0);
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No samples at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sort them into a distribution.
    pub fn into_dist(mut self) -> Dist {
        self.0.sort_unstable();
        Dist { sorted: self.0 }
    }
}

/// A sorted set of latencies: percentiles, and points for a distribution chart.
#[derive(Clone, Debug, Default)]
pub struct Dist {
    sorted: Vec<u64>,
}

impl Dist {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// No samples at all.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// The `q` quantile (0 ≤ q ≤ 1) by nearest rank, or `None` without samples.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.sorted.len();
        if n == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
        Some(Duration::from_nanos(self.sorted[rank.clamp(1, n) - 1]))
    }

    /// p50, p90, p99 and max, or `None` without samples.
    pub fn summary(&self) -> Option<Summary> {
        Some(Summary {
            count: self.sorted.len(),
            p50: self.quantile(0.50)?,
            p90: self.quantile(0.90)?,
            p99: self.quantile(0.99)?,
            max: Duration::from_nanos(*self.sorted.last()?),
        })
    }

    /// The median, or `None` without samples.
    pub fn p50(&self) -> Option<Duration> {
        self.quantile(0.5)
    }

    /// Add every sample of `other` (the rounds of one measurement pooled into one
    /// distribution).
    pub fn merge(&mut self, other: Dist) {
        self.sorted.extend(other.sorted);
        self.sorted.sort_unstable();
    }

    /// Up to `max` points `(fraction of samples at or below, latency)`, evenly spread over
    /// the ranks, always with the first and the last sample: the empirical CDF for a chart.
    pub fn cdf(&self, max: usize) -> Vec<(f64, Duration)> {
        let n = self.sorted.len();
        if n == 0 || max < 2 {
            return Vec::new();
        }
        let steps = max.min(n);
        (0..steps)
            .map(|k| {
                let i = if steps == 1 { 0 } else { k * (n - 1) / (steps - 1) };
                ((i + 1) as f64 / n as f64, Duration::from_nanos(self.sorted[i]))
            })
            .collect()
    }
}

/// The usual percentiles of a [`Dist`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Median.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest sample.
    pub max: Duration,
}

/// How evenly a count is shared out, e.g. acquisitions per locker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Smallest count.
    pub min: u64,
    /// Median count.
    pub median: u64,
    /// Largest count.
    pub max: u64,
    /// Standard deviation over the mean (0 = perfectly even).
    pub cv: f64,
}

impl Spread {
    /// The spread of `counts`, or `None` if there are none.
    pub fn of(counts: &[u64]) -> Option<Spread> {
        if counts.is_empty() {
            return None;
        }
        let mut sorted = counts.to_vec();
        sorted.sort_unstable();
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<u64>() as f64 / n;
        let var = sorted.iter().map(|&c| (c as f64 - mean).powi(2)).sum::<f64>() / n;
        Some(Spread {
            min: sorted[0],
            median: sorted[sorted.len() / 2],
            max: sorted[sorted.len() - 1],
            cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
        })
    }
}

/// A latency for a table: `412 µs`, `2.51 ms`, `25.1 ms`, `501 ms`, `12.3 s`.
pub fn fmt_latency(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 10_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else if us < 100_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else if us < 10_000_000.0 {
        format!("{:.0} ms", us / 1e3)
    } else {
        format!("{:.1} s", us / 1e6)
    }
}

/// A rate for a table: `812`, `9.41 k`, `23.9 k`.
pub fn fmt_rate(per_sec: f64) -> String {
    if per_sec < 1_000.0 {
        format!("{per_sec:.0}")
    } else if per_sec < 10_000.0 {
        format!("{:.2} k", per_sec / 1e3)
    } else {
        format!("{:.1} k", per_sec / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(values_us: &[u64]) -> Dist {
        let mut s = Samples::default();
        for &v in values_us {
            s.push(Duration::from_micros(v));
        }
        s.into_dist()
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let d = dist(&(1..=100).rev().collect::<Vec<_>>());
        let s = d.summary().unwrap();
        assert_eq!(s.count, 100);
        assert_eq!(s.p50, Duration::from_micros(50));
        assert_eq!(s.p90, Duration::from_micros(90));
        assert_eq!(s.p99, Duration::from_micros(99));
        assert_eq!(s.max, Duration::from_micros(100));
        assert_eq!(dist(&[7]).summary().unwrap().p99, Duration::from_micros(7));
        assert!(dist(&[]).summary().is_none());
    }

    #[test]
    fn merged_rounds_are_one_distribution() {
        let mut d = dist(&[5, 1, 9]);
        d.merge(dist(&[4, 2]));
        d.merge(Dist::default());
        assert_eq!(d.len(), 5);
        assert_eq!(d.p50(), Some(Duration::from_micros(4)));
        assert_eq!(d.summary().unwrap().max, Duration::from_micros(9));
        assert_eq!(d.cdf(2)[0], (0.2, Duration::from_micros(1)));
    }

    #[test]
    fn the_cdf_spans_first_to_last_sample() {
        let d = dist(&[5, 1, 3, 2, 4]);
        let cdf = d.cdf(3);
        assert_eq!(cdf.len(), 3);
        assert_eq!(cdf[0], (0.2, Duration::from_micros(1)));
        assert_eq!(cdf[2], (1.0, Duration::from_micros(5)));
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn spread_of_counts() {
        let s = Spread::of(&[10, 10, 10, 10]).unwrap();
        assert_eq!((s.min, s.median, s.max), (10, 10, 10));
        assert_eq!(s.cv, 0.0);
        let s = Spread::of(&[0, 20]).unwrap();
        assert_eq!((s.min, s.max), (0, 20));
        assert!((s.cv - 1.0).abs() < 1e-9);
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_latency(Duration::from_micros(412)), "412 µs");
        assert_eq!(fmt_latency(Duration::from_micros(200)), "200 µs");
        assert_eq!(fmt_latency(Duration::from_millis(5)), "5.00 ms");
        assert_eq!(fmt_latency(Duration::from_micros(2512)), "2.51 ms");
        assert_eq!(fmt_latency(Duration::from_millis(501)), "501 ms");
        assert_eq!(fmt_rate(812.2), "812");
        assert_eq!(fmt_rate(23_912.0), "23.9 k");
    }
}
