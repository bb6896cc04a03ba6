//! The deterministic simulation of the engine: model Redis nodes (standalone, or the masters
//! of a Redis Cluster), a seeded network and scheduler, contending clients, and a safety
//! checker over what the clients believed.

pub(crate) mod checker;
pub(crate) mod cluster;
pub(crate) mod node;
pub(crate) mod rng;
pub(crate) mod scenario;
pub(crate) mod world;

use std::ops::Range;
use std::time::Instant;

use checker::Violation;
use scenario::{Profile, Scenario};
use world::{Stats, run};

/// What many seeds of one kind of scenario gave: the summed stats, the runs that checked
/// liveness, and the seeds that broke a rule.
pub(crate) struct Seeds {
    pub(crate) stats: Stats,
    pub(crate) liveness: u64,
    pub(crate) bad: Vec<(u64, Vec<Violation>)>,
}

/// The scenarios one test binary runs: what they are called, the variable that selects them
/// for `trace_one_seed` (empty for the mutex's), and how a seed makes one.
pub(crate) struct Kind {
    pub(crate) name: &'static str,
    pub(crate) env: &'static str,
    pub(crate) make: fn(u64, Profile) -> Scenario,
}

impl Kind {
    /// Run `seeds` of `profile`, and print a line of what they gave.
    pub(crate) fn run_seeds(&self, profile: Profile, seeds: Range<u64>) -> Seeds {
        let mut out = Seeds { stats: Stats::default(), liveness: 0, bad: Vec::new() };
        let (started, n) = (Instant::now(), seeds.end - seeds.start);
        for seed in seeds {
            let run = run(&(self.make)(seed, profile), false);
            out.stats.add(&run.stats);
            out.liveness += u64::from(run.stats.liveness_checked);
            if !run.violations.is_empty() {
                out.bad.push((seed, run.violations));
            }
        }
        let (name, elapsed, bad, liveness, stats) =
            (self.name, started.elapsed(), out.bad.len(), out.liveness, &out.stats);
        println!(
            "{profile:?}{name}: {n} seeds in {elapsed:?}; {bad} violating; liveness checked in {liveness}; {stats:?}"
        );
        out
    }

    /// Run `seeds` of `profile`, and panic naming the first seed that broke a rule with the
    /// command that replays it.
    pub(crate) fn run_safe(&self, profile: Profile, seeds: Range<u64>) -> Seeds {
        let n = seeds.end - seeds.start;
        let out = self.run_seeds(profile, seeds);
        if let Some((seed, violations)) = out.bad.first() {
            let list: Vec<String> = violations.iter().take(5).map(|v| format!("  - {v}")).collect();
            panic!(
                "{} of {n} seeds broke a rule; first: seed {seed} ({profile:?}):\n{}\nreplay: {}SIM_SEED={seed} \
                 SIM_PROFILE={profile:?} cargo test -p redlease-core --test simulation trace_one_seed -- --ignored --nocapture",
                out.bad.len(),
                list.join("\n"),
                self.env,
            );
        }
        out
    }
}
