//! Latency distributions (an `hdrhistogram` of nanoseconds) and how figures are printed.

use std::time::Duration;

use hdrhistogram::Histogram;

/// A latency distribution: three significant digits over any range, mergeable.
#[derive(Clone, Debug)]
pub struct Hist(Histogram<u64>);

impl Default for Hist {
    fn default() -> Self {
        Hist(Histogram::new(3).expect("3 significant digits is a valid precision"))
    }
}

impl Hist {
    /// Record one sample (auto-resizing: it cannot fail).
    pub fn record(&mut self, d: Duration) {
        let _ = self.0.record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1));
    }

    /// Add another distribution's samples.
    pub fn add(&mut self, other: &Hist) {
        let _ = self.0.add(&other.0);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The value at quantile `q` (0 to 1; 1 is the largest sample), if there are samples.
    pub fn at(&self, q: f64) -> Option<Duration> {
        (!self.0.is_empty()).then(|| Duration::from_nanos(self.0.value_at_quantile(q)))
    }

    /// The median.
    pub fn p50(&self) -> Option<Duration> {
        self.at(0.5)
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Option<Duration> {
        self.at(0.99)
    }
}

/// `a ÷ b`, if both are there.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b.filter(|b| *b > 0.0)?)
}

/// Seconds of an optional duration, for [`ratio`].
pub fn secs(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}

/// A duration to about three digits (`4.2 µs`, `128 µs`, `1.22 ms`, `12.3 ms`, `3.40 s`).
pub fn dur(d: Option<Duration>) -> String {
    let Some(s) = secs(d) else { return "—".into() };
    let (v, unit, digits) = match s {
        s if s < 1e-5 => (s * 1e6, "µs", 1),
        s if s < 1e-3 => (s * 1e6, "µs", 0),
        s if s < 1.0 => (s * 1e3, "ms", usize::from(s < 0.1) + usize::from(s < 0.01)),
        s => (s, "s", 2),
    };
    format!("{v:.digits$} {unit}")
}

/// A ratio as `1.03×`; `—` if missing.
pub fn times(r: Option<f64>) -> String {
    r.map_or_else(|| "—".into(), |r| format!("{r:.2}×"))
}

/// A rate as `55.0 k`, `8.38 k` or `865`.
pub fn rate(per_sec: f64) -> String {
    match per_sec {
        r if r >= 1e4 => format!("{:.1} k", r / 1e3),
        r if r >= 1e3 => format!("{:.2} k", r / 1e3),
        r => format!("{r:.0}"),
    }
}
