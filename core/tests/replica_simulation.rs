//! Deterministic simulation of nodes whose grants count once a replica has them
//! (`min_replicas`): the simulation's world, faults and model nodes (`sim`), where some nodes
//! (at least one) follow every grant with `WAIT`, which answers late, with too few replicas,
//! with an error, or not at all (the connection breaks first). Run over mutexes, semaphores and
//! reader-writer locks (by `seed % 3`), on standalone nodes, and on Redis Cluster nodes (one
//! seed in four: the cluster run of the seed, its masters' grants waiting for a replica).
//!
//! Checked: every rule of the other simulations (mutual exclusion, the limit, readers against
//! writers, validity never overstated, fencing order, a vanished holder's lock coming back),
//! and at the end of every run, once the workload stopped and the engines finished what they
//! were doing, each engine is back to idle: no lock, no request pending, no cleanup kept for a
//! redirect, no waiter, no subscription (see `Engine::footprint`). A grant forgotten while it
//! waited for `WAIT`, a vote left pending after its link went down, a reader left behind by a
//! downgrade: each shows here as a broken engine rule (`Engine::audit`, after every input), a
//! key found where none may be after a release, or an engine that does not return to idle.
//! (A grant whose `WAIT` reported too few replicas is not one of its round's grants:
//! releasing it at once is not a release of what the round got.)
//!
//! To look at one run step by step:
//!
//! ```text
//! SIM_REPLICAS=1 SIM_SEED=1234 SIM_PROFILE=safe cargo test -p redlease-core --test simulation trace_one_seed -- --ignored --nocapture
//! ```

mod sim;

use std::ops::Range;

use sim::REPLICAS;
use sim::scenario::Profile;

/// Assert that no seed broke a rule, and that the runs really went through `WAIT`: grants
/// waited for replicas, and `WAIT` answered in every way (late, too few, refused, lost).
fn assert_safe(profile: Profile, seeds: Range<u64>) {
    let n = seeds.end - seeds.start;
    let stats = REPLICAS.band(profile, seeds).stats;
    assert!(stats.acquired > 3 * n && stats.released > 0 && stats.held_by_others > 0, "{stats:?}");
    assert!(stats.sem_holds > 0 && stats.reads > 0 && stats.downgrades > 0, "every kind of lock: {stats:?}");
    assert!(stats.waits > 10 * n, "grants waited for replicas: {stats:?}");
    assert!(stats.waits_short > 0 && stats.waits_refused > 0 && stats.waits_late > 0, "{stats:?}");
    assert!(profile != Profile::Safe || stats.waits_lost > 0, "WAIT lost with its connection: {stats:?}");
    assert!(stats.cluster_nodes > 0 || n < 8, "some runs on Redis Cluster nodes: {stats:?}");
    assert!(stats.idle_checked >= 2 * n, "engines checked idle at the end: {stats:?}");
}

#[test]
fn safe_replicas_seeds_0_to_300() {
    assert_safe(Profile::Safe, 0..300);
}

#[test]
fn safe_replicas_seeds_300_to_600() {
    assert_safe(Profile::Safe, 300..600);
}

#[test]
#[ignore = "long: 20,000 seeds; run with --ignored --release"]
fn safe_replicas_20k_seeds() {
    assert_safe(Profile::Safe, 1_000_000..1_020_000);
}

#[test]
fn restarts_with_the_data_or_after_the_ttl_are_safe_with_replicas() {
    assert_safe(Profile::RestartKeepData, 0..60);
}
