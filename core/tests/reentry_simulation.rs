//! Deterministic simulation of re-entrant locks: the simulation's world, faults and model
//! nodes (`sim`), where clients from the third on share an owner in pairs (two engines, as a
//! nested `redlease run` is another process) and take most of their locks re-entrant, among
//! clients that take plain locks of the same names; on standalone nodes, on nodes whose grants
//! wait for a replica, on Redis Cluster nodes, and on Sentinel-managed nodes that fail over.
//!
//! Checked: holds of one owner may overlap each other, never another owner's or a plain
//! lock's; every hold is backed by a quorum of nodes whose key holds its owner while it is
//! held; fencing tokens increase from one owner to the next (a re-entry shares its owner's);
//! after a release every node answered, no node keeps the hold among the key's holds; at the
//! end nothing is left (no key, no holds: the count is back to zero), no key or holds went
//! without a TTL, and every engine is idle; a vanished holder's lock comes back.
//!
//! To look at one run step by step:
//!
//! ```text
//! SIM_REENTRY=1 SIM_SEED=1234 SIM_PROFILE=safe cargo test -p redlease-core --test simulation trace_one_seed -- --ignored --nocapture
//! ```

mod sim;

use std::ops::Range;

use sim::scenario::Profile;
use sim::{Kind, REENTRANT, REENTRANT_CLUSTERS, REENTRANT_REPLICAS, REENTRANT_SENTINELS};

/// Assert that no seed of `kind` broke a rule, and that the runs really re-entered.
fn assert_safe(kind: &Kind, profile: Profile, seeds: Range<u64>) {
    let n = seeds.end - seeds.start;
    let stats = kind.band(profile, seeds).stats;
    assert!(stats.acquired > 3 * n && stats.held_by_others > 0 && stats.released > 0, "{stats:?}");
    assert!(stats.reentrant_holds > n, "re-entrant holds: {stats:?}");
    assert!(stats.reentries > n / 4, "holds of one owner overlapped: {stats:?}");
    assert!(stats.releases_checked > n && stats.idle_checked >= 2 * n, "{stats:?}");
    if profile == Profile::Safe {
        assert!(stats.fenced > 0 && stats.extended > 0 && stats.published > 0, "{stats:?}");
    }
}

#[test]
fn safe_reentry_seeds_0_to_150() {
    assert_safe(&REENTRANT, Profile::Safe, 0..150);
}

#[test]
fn safe_reentry_with_replicas_seeds_0_to_40() {
    assert_safe(&REENTRANT_REPLICAS, Profile::Safe, 0..40);
}

#[test]
fn safe_reentry_on_clusters_seeds_0_to_40() {
    assert_safe(&REENTRANT_CLUSTERS, Profile::Safe, 0..40);
}

#[test]
fn safe_reentry_on_sentinels_seeds_0_to_40() {
    assert_safe(&REENTRANT_SENTINELS, Profile::Safe, 0..40);
}

#[test]
fn restarts_with_the_data_are_safe_for_reentry() {
    assert_safe(&REENTRANT, Profile::RestartKeepData, 0..40);
}

/// The unsafe setups are caught with re-entrant locks too.
#[test]
fn unsafe_setups_are_caught_with_reentry() {
    for profile in [Profile::RestartEmpty, Profile::ClockJump] {
        let bad = REENTRANT.run_seeds(profile, 0..60).bad.len();
        assert!(bad > 0, "{profile:?}: the checker caught nothing in 60 seeds");
    }
}

#[test]
#[ignore = "long: 100,000 seeds, and 20,000 each with replicas, on clusters and on sentinels; run with --ignored --release"]
fn safe_reentry_100k_seeds() {
    assert_safe(&REENTRANT, Profile::Safe, 1_000_000..1_100_000);
    assert_safe(&REENTRANT_REPLICAS, Profile::Safe, 1_000_000..1_020_000);
    assert_safe(&REENTRANT_CLUSTERS, Profile::Safe, 1_000_000..1_020_000);
    assert_safe(&REENTRANT_SENTINELS, Profile::Safe, 1_000_000..1_020_000);
}
