//! The deterministic simulation of the engine: model Redis nodes (standalone, the masters of a
//! Redis Cluster, or the servers of a Sentinel-managed node), a seeded network and scheduler, contending clients, and a safety
//! checker over what the clients believed.
//!
//! Besides the world, this module holds what every simulation test binary runs it with: the
//! kinds of run ([`Kind`]: what a seed makes, and the variables that select it for a replay),
//! a band of seeds run as one test ([`Kind::band`]), the command that replays a seed, and the
//! replay itself ([`replay_from_env`], behind `trace_one_seed` in `simulation.rs`).

// Each test binary uses a part of the harness (the seed bands, the scripted clients).
#![allow(dead_code)]

pub(crate) mod checker;
pub(crate) mod cluster;
pub(crate) mod node;
pub(crate) mod rng;
pub(crate) mod scenario;
pub(crate) mod script;
pub(crate) mod sentinel;
pub(crate) mod world;

use std::ops::Range;
use std::time::Instant;

use checker::Violation;
use scenario::{Profile, Scenario};
use world::{Outcome, Stats, run};

/// What many seeds of one kind of scenario gave: the summed stats, the runs that checked
/// liveness, and the seeds that broke a rule.
pub(crate) struct Seeds {
    pub(crate) stats: Stats,
    pub(crate) liveness: u64,
    pub(crate) bad: Vec<(u64, Vec<Violation>)>,
}

/// A kind of run: what it is called, the variables (each set to `1`) that select it for
/// `trace_one_seed`, and how a seed makes one.
pub(crate) struct Kind {
    pub(crate) name: &'static str,
    pub(crate) env: &'static [&'static str],
    pub(crate) make: fn(u64, Profile) -> Scenario,
}

/// Mutexes (`simulation.rs`).
pub(crate) const MUTEXES: Kind = Kind { name: "", env: &[], make: Scenario::generate };

/// Semaphores (`semaphore_simulation.rs`).
pub(crate) const SEMAPHORES: Kind = Kind { name: " semaphores", env: &["SIM_SEMAPHORES"], make: Scenario::semaphores };

/// Read and write locks (`rwlock_simulation.rs`).
pub(crate) const RWLOCKS: Kind = Kind { name: " rwlocks", env: &["SIM_RWLOCKS"], make: Scenario::rwlocks };

/// Re-entrant mutexes, two engines per owner, among plain ones (`reentry_simulation.rs`).
pub(crate) const REENTRANT: Kind = Kind { name: " re-entrant", env: &["SIM_REENTRY"], make: Scenario::reentrant };

/// [`REENTRANT`] over nodes whose grants wait for a replica (`reentry_simulation.rs`).
pub(crate) const REENTRANT_REPLICAS: Kind =
    Kind { name: " re-entrant, replicas", env: &["SIM_REENTRY", "SIM_REPLICAS"], make: Scenario::reentrant_replicated };

/// [`REENTRANT`] over Redis Cluster nodes (`reentry_simulation.rs`).
pub(crate) const REENTRANT_CLUSTERS: Kind =
    Kind { name: " re-entrant, clusters", env: &["SIM_REENTRY", "SIM_CLUSTERS"], make: Scenario::reentrant_clusters };

/// [`REENTRANT`] over Sentinel-managed nodes that fail over (`reentry_simulation.rs`).
pub(crate) const REENTRANT_SENTINELS: Kind = Kind {
    name: " re-entrant, sentinels",
    env: &["SIM_REENTRY", "SIM_SENTINELS"],
    make: Scenario::reentrant_sentinels,
};

/// Mutexes, semaphores and reader-writer locks over nodes whose grants wait for a replica
/// (`replica_simulation.rs`).
pub(crate) const REPLICAS: Kind = Kind { name: " replicas", env: &["SIM_REPLICAS"], make: Scenario::replicated };

/// Mutexes, semaphores and reader-writer locks over Redis Cluster nodes
/// (`cluster_simulation.rs`).
pub(crate) const CLUSTERS: Kind = Kind { name: " clusters", env: &["SIM_CLUSTERS"], make: Scenario::clusters };

/// The runs of [`CLUSTERS`], but a migration drops the slot's keys instead of moving them
/// (UNSAFE).
pub(crate) const LOSSY: Kind =
    Kind { name: " clusters, lossy migrations", env: &["SIM_CLUSTERS", "SIM_LOSSY"], make: Scenario::lossy_clusters };

/// Mutexes, semaphores and reader-writer locks over Sentinel-managed nodes that fail over,
/// whose grants wait for a replica (`sentinel_simulation.rs`).
pub(crate) const SENTINELS: Kind = Kind { name: " sentinels", env: &["SIM_SENTINELS"], make: Scenario::sentinels };

/// The runs of [`SENTINELS`], but grants do not wait for a replica (UNSAFE).
pub(crate) const UNREPLICATED: Kind = Kind {
    name: " sentinels, unreplicated grants",
    env: &["SIM_SENTINELS", "SIM_UNREPLICATED"],
    make: Scenario::unreplicated_sentinels,
};

/// Campaigns in one election over standalone, replica-acknowledged, Redis Cluster and
/// Sentinel-managed nodes, with an observer (`election_simulation.rs`).
pub(crate) const ELECTIONS: Kind = Kind { name: " elections", env: &["SIM_ELECTIONS"], make: Scenario::elections };

/// Every kind, in the order a replay picks the first whose variables are all set.
const KINDS: [&Kind; 13] = [
    &ELECTIONS,
    &SEMAPHORES,
    &RWLOCKS,
    &REENTRANT_REPLICAS,
    &REENTRANT_CLUSTERS,
    &REENTRANT_SENTINELS,
    &REENTRANT,
    &REPLICAS,
    &LOSSY,
    &CLUSTERS,
    &UNREPLICATED,
    &SENTINELS,
    &MUTEXES,
];

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

    /// Run a band of seeds of `profile` as one test: panic naming the first seed that broke a
    /// rule with the command that replays it, or if fewer than nine runs in ten checked that a
    /// vanished holder's lock came back (the runs say what they gave; the caller checks that
    /// they exercised what it simulates).
    pub(crate) fn band(&self, profile: Profile, seeds: Range<u64>) -> Seeds {
        let n = seeds.end - seeds.start;
        let out = self.run_seeds(profile, seeds);
        if let Some((seed, violations)) = out.bad.first() {
            let list: Vec<String> = violations.iter().take(5).map(|v| format!("  - {v}")).collect();
            panic!(
                "{} of {n} seeds broke a rule; first: seed {seed} ({profile:?}):\n{}\nreplay: {}",
                out.bad.len(),
                list.join("\n"),
                self.replay(*seed, profile),
            );
        }
        assert!(out.liveness * 10 > n * 9, "liveness checked in {} of {n} runs", out.liveness);
        out
    }

    /// The command that replays `seed` of `profile` step by step.
    pub(crate) fn replay(&self, seed: u64, profile: Profile) -> String {
        let vars: String = self.env.iter().map(|v| format!("{v}=1 ")).collect();
        format!(
            "{vars}SIM_SEED={seed} SIM_PROFILE={profile:?} cargo test -p redlease-core --test simulation trace_one_seed \
             -- --ignored --nocapture"
        )
    }
}

/// The seeds of `bad` (each with its violations) that broke mutual exclusion, the limit or the
/// validity (an unsafe setup caught), leaving out those of `clean` (the same seeds broken in a
/// safe setup too): each with the first such violation.
pub(crate) fn caught(bad: &[(u64, Vec<Violation>)], clean: &[(u64, Vec<Violation>)]) -> Vec<(u64, String)> {
    let unsafe_run = |v: &Violation| {
        matches!(v, Violation::Overlap { .. } | Violation::Overstated { .. } | Violation::OverLimit { .. })
    };
    let caught: Vec<(u64, String)> = bad
        .iter()
        .filter(|(seed, _)| !clean.iter().any(|(s, _)| s == seed))
        .filter_map(|(seed, v)| v.iter().find(|v| unsafe_run(v)).map(|v| (*seed, v.to_string())))
        .collect();
    if let Some((seed, v)) = caught.first() {
        println!("{} runs caught, e.g. seed {seed}: {v}", caught.len());
    }
    caught
}

/// Run `sc` twice with a trace, panic at the first step where the runs differ, and return
/// the first run.
pub(crate) fn run_twice(sc: &Scenario) -> Outcome {
    let (a, b) = (run(sc, true), run(sc, true));
    if let Some(i) = (0..a.trace.len().max(b.trace.len())).find(|&i| a.trace.get(i) != b.trace.get(i)) {
        panic!("seed {}: runs differ at step {i}:\n{:?}\n{:?}", sc.seed, a.trace.get(i), b.trace.get(i));
    }
    a
}

/// The run the environment names, for `trace_one_seed`: `SIM_SEED` (default 0),
/// `SIM_PROFILE` (a [`Profile`]'s name in any case, default `safe`), and the variables of its
/// [`Kind`] (none: a mutex run).
pub(crate) fn replay_from_env() -> Scenario {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let seed = var("SIM_SEED").parse().unwrap_or(0);
    let profile = match var("SIM_PROFILE").to_ascii_lowercase().as_str() {
        "clockjump" => Profile::ClockJump,
        "restartempty" => Profile::RestartEmpty,
        "restartkeepdata" => Profile::RestartKeepData,
        "delayedrestart" => Profile::DelayedRestart,
        _ => Profile::Safe,
    };
    let kind = KINDS.into_iter().find(|k| k.env.iter().all(|v| var(v) == "1")).unwrap_or(&MUTEXES);
    (kind.make)(seed, profile)
}
