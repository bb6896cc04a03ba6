//! Deterministic simulation with Sentinel-managed nodes: the simulation's world, faults and
//! model nodes (`sim`), where some Redlock nodes (at least one, possibly all) are a primary with
//! one or two replicas and three sentinels (`sim::sentinel`, `sim::node::replication`). Each
//! client's engine asks the sentinels for the master, confirms it with `ROLE` and follows
//! `+switch-master`, connecting as a driver does (`poll_connect`); meanwhile the primaries fail
//! over: a replica is promoted with what it had copied (the replicas lag), the sentinels learn
//! it one by one (they disagree meanwhile), and the old primary comes back as a replica.
//!
//! Checked, over mutexes, semaphores and reader-writer locks (by `seed % 3`): every rule of the
//! other simulations (mutual exclusion, the limit, readers against writers, validity never
//! overstated, fencing order, a vanished holder's lock coming back, the engines idle at the
//! end). With grants that wait for a replica (`min_replicas`, `WAIT`) a failover loses no
//! grant; without, the checker catches the grants a failover lost.
//!
//! To look at one run step by step:
//!
//! ```text
//! SIM_SENTINELS=1 SIM_SEED=1234 SIM_PROFILE=safe cargo test -p redlease-core --test simulation trace_one_seed -- --ignored --nocapture
//! ```
//!
//! (With `SIM_UNREPLICATED=1` too, the unsafe run: grants that do not wait for a replica.)

mod sim;

use std::ops::Range;

use sim::scenario::{Profile, Scenario};
use sim::{SENTINELS, UNREPLICATED};

/// Assert that no seed broke a rule, and that the runs really went through Sentinel-managed
/// nodes: locks of every kind taken, failovers made and followed, grants waiting for replicas.
fn assert_safe(profile: Profile, seeds: Range<u64>) {
    let n = seeds.end - seeds.start;
    let stats = SENTINELS.band(profile, seeds).stats;
    assert!(stats.acquired > 3 * n && stats.released > 0 && stats.held_by_others > 0, "{stats:?}");
    assert!(stats.sem_holds > 0 && stats.reads > 0 && stats.fenced > 0, "every kind of lock: {stats:?}");
    assert!(stats.sentinel_nodes >= n, "every run has a Sentinel-managed node: {stats:?}");
    assert!(stats.failovers > n / 2 && stats.switches > n / 2, "failovers made and followed: {stats:?}");
    assert!(stats.waits > 10 * n && stats.waits_short > 0, "grants waited for replicas: {stats:?}");
    assert!(stats.idle_checked >= 2 * n, "engines checked idle at the end: {stats:?}");
}

#[test]
fn safe_sentinels_seeds_0_to_150() {
    assert_safe(Profile::Safe, 0..150);
}

#[test]
fn safe_sentinels_seeds_150_to_300() {
    assert_safe(Profile::Safe, 150..300);
}

#[test]
#[ignore = "long: 20,000 seeds; run with --ignored --release"]
fn safe_sentinels_20k_seeds() {
    assert_safe(Profile::Safe, 1_000_000..1_020_000);
}

/// Grants that do not wait for a replica: a failover promotes a replica that never had some
/// of them, which lets a second holder in or leaves a holder without its quorum; the checker
/// sees it.
#[test]
fn a_failover_that_loses_grants_is_caught() {
    let seeds = 0..60;
    let lossy = UNREPLICATED.run_seeds(Profile::Safe, seeds.clone()).bad;
    let caught = sim::caught(&lossy, &[]);
    assert!(caught.len() > 8, "lost grants were caught in only {} of {} seeds", caught.len(), seeds.end);
}

#[test]
fn sentinel_runs_are_reproducible() {
    for seed in [5, 61, 1003] {
        let a = sim::run_twice(&Scenario::sentinels(seed, Profile::Safe));
        assert!(a.trace.iter().any(|l| l.contains("get-master-addr-by-name")), "seed {seed}: the engines asked");
    }
}
