//! Deterministic simulation of leader elections: the simulation's world, faults and model nodes
//! (`sim`), where every acquisition is a campaign in one election (`ElectionOptions`: the lock
//! `redlease:elect:{e0}`, fenced, extended automatically, waiting for the leadership), each
//! candidate's token carrying its value, and leaders resign (release) after a while or vanish
//! (crash) in the calm phase. By `seed % 4`: standalone nodes, Sentinel-managed nodes that fail
//! over, nodes whose grants wait for a replica (`min_replicas`), Redis Cluster nodes whose
//! grants wait for one.
//!
//! Checked: never two leaders whose leadership overlaps on the clients' clock (mutual
//! exclusion), epochs (fencing tokens) strictly increasing from one leader to the next, the
//! validity never overstated, a vanished leader replaced (liveness), every engine back to idle
//! at the end; and an observer that reads every node as the run goes (on a Redis Cluster node,
//! the master of the election's slot, both ends while it migrates) names only candidates of
//! the run, never with an epoch above that leader's own, and reports each change of leader with
//! a larger epoch than the one before.
//!
//! To look at one run step by step:
//!
//! ```text
//! SIM_ELECTIONS=1 SIM_SEED=1234 SIM_PROFILE=safe cargo test -p redlease-core --test simulation trace_one_seed -- --ignored --nocapture
//! ```

mod sim;

use std::ops::Range;

use sim::ELECTIONS;
use sim::scenario::Profile;

/// Assert that no seed broke a rule, and that the runs elected, handed over and observed.
fn assert_safe(profile: Profile, seeds: Range<u64>) {
    let n = seeds.end - seeds.start;
    let stats = ELECTIONS.band(profile, seeds).stats;
    assert!(stats.acquired > 3 * n && stats.fenced == stats.acquired, "every leader has an epoch: {stats:?}");
    assert!(stats.released > n && stats.held_by_others > 0, "leaders resigned to waiting candidates: {stats:?}");
    assert!(
        stats.waits > 0 && stats.cluster_nodes > 0 && stats.sentinel_nodes > 0 && stats.failovers > 0 || n < 8,
        "replica, cluster and Sentinel-managed nodes, failovers: {stats:?}"
    );
    assert!(stats.observed > 10 * n && stats.leaders_observed > 2 * n, "observed: {stats:?}");
    assert!(stats.idle_checked >= n, "engines checked idle at the end of every run: {stats:?}");
}

#[test]
fn safe_elections_seeds_0_to_200() {
    assert_safe(Profile::Safe, 0..200);
}

#[test]
fn restarts_with_the_data_are_safe_for_elections() {
    assert_safe(Profile::RestartKeepData, 0..40);
}

#[test]
#[ignore = "long: 20,000 seeds; run with --ignored --release"]
fn safe_elections_20k_seeds() {
    assert_safe(Profile::Safe, 1_000_000..1_020_000);
}

/// The checker catches the unsafe setup: a node that restarts without its data forgets the
/// epochs (its fence counters) and the grant, and some seed shows two leaders or an epoch that
/// went back.
#[test]
fn restarts_without_the_data_break_elections() {
    let out = ELECTIONS.run_seeds(Profile::RestartEmpty, 0..200);
    assert!(!out.bad.is_empty(), "no seed broke a rule with nodes restarting empty");
}
