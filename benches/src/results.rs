//! What one run measured: every subject's figures per scenario, and the lookups the report
//! makes in them.

use std::time::{Duration, SystemTime};

use crate::plan::{Plan, Scenario};
use crate::subject::{Contention, Handoff, Paired, Role, Sequential, StallLevel, Style, Throughput};

/// One measurement's outcome.
#[derive(Clone, Debug)]
pub struct Entry<T> {
    /// The subject's name.
    pub subject: String,
    /// Lockers (throughput) or nodes (scaling); 0 elsewhere.
    pub point: usize,
    /// The figures, or why there are none.
    pub result: Result<T, String>,
    /// Each round's headline figure, in round order, for a measurement taken in rounds
    /// (sequential and throughput; see [`Plan::rounds`]): `None` for a round without one.
    /// Empty elsewhere.
    pub rounds: Vec<Option<f64>>,
}

/// A subject as the report describes it.
#[derive(Clone, Debug)]
pub struct SubjectInfo {
    /// Short name.
    pub name: String,
    /// One line on what it is.
    pub about: String,
    /// Adapter, floor or peer.
    pub role: Role,
    /// Async or blocking.
    pub style: Style,
    /// The scenarios it takes part in.
    pub scenarios: Vec<Scenario>,
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Results {
    /// What was planned.
    pub plan: Plan,
    /// The subjects that ran, in table order.
    pub subjects: Vec<SubjectInfo>,
    /// The scenarios that ran.
    pub scenarios: Vec<Scenario>,
    /// Sequential cycles on `plan.nodes` nodes.
    pub sequential: Vec<Entry<Sequential>>,
    /// Sequential cycles taken in turns with the floor; each round's figure is the ratio of
    /// the p50s in that round.
    pub paired: Vec<Entry<Paired>>,
    /// Throughput per locker count.
    pub throughput: Vec<Entry<Throughput>>,
    /// Sequential cycles per node count.
    pub scaling: Vec<Entry<Sequential>>,
    /// Acquire latency per number of paused nodes.
    pub stalled: Vec<Entry<Vec<StallLevel>>>,
    /// One key, many lockers.
    pub contention: Vec<Entry<Contention>>,
    /// Lock handoff per contender count.
    pub handoff: Vec<Entry<Handoff>>,
    /// When the run started.
    pub started: SystemTime,
    /// How long it took.
    pub elapsed: Duration,
}

impl Results {
    /// Measurements that produced no figures.
    pub fn failures(&self) -> Vec<String> {
        fn collect<T>(out: &mut Vec<String>, what: &str, list: &[Entry<T>]) {
            for e in list {
                if let Err(why) = &e.result {
                    out.push(format!("{} {what} {}: {why}", e.subject, e.point));
                }
            }
        }
        let mut out = Vec::new();
        collect(&mut out, "sequential", &self.sequential);
        collect(&mut out, "paired", &self.paired);
        collect(&mut out, "throughput", &self.throughput);
        collect(&mut out, "scaling", &self.scaling);
        collect(&mut out, "stalled", &self.stalled);
        collect(&mut out, "contention", &self.contention);
        collect(&mut out, "handoff", &self.handoff);
        out
    }

    /// The subject called `name`.
    pub fn subject(&self, name: &str) -> Option<&SubjectInfo> {
        self.subjects.iter().find(|s| s.name == name)
    }
}

/// The spread of `subject`'s per-round ratios to `base` at `point`: each round's headline
/// figure divided by `base`'s in the same round (both measured within seconds of each other),
/// as `(min, max)`, if any round has both.
pub fn round_ratios<T>(list: &[Entry<T>], subject: &str, base: &str, point: usize) -> Option<(f64, f64)> {
    let rounds =
        |name: &str| list.iter().find(|e| e.subject == name && e.point == point && e.result.is_ok()).map(|e| &e.rounds);
    let (a, b) = (rounds(subject)?, rounds(base)?);
    let ratios = a.iter().zip(b).map(|pair| match pair {
        (Some(x), Some(y)) if *y > 0.0 => Some(x / y),
        _ => None,
    });
    min_max(ratios)
}

/// The smallest and largest of the figures present, if any.
pub fn min_max(figures: impl IntoIterator<Item = Option<f64>>) -> Option<(f64, f64)> {
    figures.into_iter().flatten().fold(None, |acc, x| match acc {
        None => Some((x, x)),
        Some((lo, hi)) => Some((f64::min(lo, x), f64::max(hi, x))),
    })
}

/// The figures of `subject` at `point` in `list`, if it measured any.
pub fn find<'a, T>(list: &'a [Entry<T>], subject: &str, point: usize) -> Option<&'a T> {
    list.iter().find(|e| e.subject == subject && e.point == point).and_then(|e| e.result.as_ref().ok())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stats::Samples;
    use crate::subject::Pooled;

    fn seq(us: &[u64], cpu_us: u64) -> Sequential {
        let mut s = Samples::default();
        us.iter().for_each(|&v| s.push(Duration::from_micros(v)));
        Sequential {
            cycle: s.into_dist(),
            server_cpu: Some(Duration::from_micros(cpu_us)),
            cycles: us.len() as u64,
            ..Sequential::default()
        }
    }

    fn entry(subject: &str, rounds: Vec<Option<f64>>) -> Entry<Sequential> {
        Entry { subject: subject.into(), point: 0, result: Ok(Sequential::default()), rounds }
    }

    #[test]
    fn rounds_pool_into_one_measurement() {
        let mut a = seq(&[100, 300], 400);
        assert_eq!(a.headline(), Some(100e-6));
        a.pool(seq(&[200, 400, 500], 600));
        assert_eq!(a.cycles, 5);
        assert_eq!(a.cycle.p50(), Some(Duration::from_micros(300)));
        assert_eq!(a.server_cpu_per_cycle(), Some(Duration::from_micros(200)));
        let mut b = seq(&[1], 1);
        b.pool(Sequential { server_cpu: None, ..seq(&[2], 0) });
        assert_eq!(b.server_cpu, None, "a round without a reading spoils the sum");
    }

    #[test]
    fn round_ratios_pair_each_round_with_the_same_round_of_the_base() {
        let list = vec![
            entry("floor", vec![Some(2.0), Some(4.0), Some(1.0)]),
            entry("tokio", vec![Some(2.2), None, Some(0.9)]),
            Entry { result: Err("failed".into()), ..entry("smol", vec![Some(1.0)]) },
        ];
        let (lo, hi) = round_ratios(&list, "tokio", "floor", 0).unwrap();
        assert!((lo - 0.9).abs() < 1e-9 && (hi - 1.1).abs() < 1e-9, "{lo} {hi}");
        assert_eq!(round_ratios(&list, "smol", "floor", 0), None);
        assert_eq!(round_ratios(&list, "tokio", "floor", 16), None);
    }

    /// A paired round's figure is its own ratio of the p50s; pooled rounds pool both sides.
    #[test]
    fn a_paired_round_is_its_own_ratio() {
        let round = |me: &[u64], floor: &[u64]| Paired {
            floor_name: "floor".into(),
            subject: seq(me, 10),
            floor: seq(floor, 10),
        };
        let mut p = round(&[110, 110, 300], &[100, 100, 50]);
        assert!((p.headline().unwrap() - 1.1).abs() < 1e-9);
        p.pool(round(&[90], &[100]));
        assert_eq!((p.subject.cycles, p.floor.cycles), (4, 4));
        assert_eq!(min_max([Some(1.1), None, Some(0.9), Some(1.0)]), Some((0.9, 1.1)));
        assert_eq!(min_max([None]), None);
    }
}
