//! Deterministic simulation of semaphores: the simulation's world, faults and model nodes
//! (`sim`), with every lock a semaphore's (limits 1 to 4, some locks taking several permits,
//! some fenced, some waiting for wake-ups), checked for: at no instant more permits held than
//! the limit, each permit held by one holder at a time and by a quorum while it is held,
//! fencing tokens increasing per permit, no key left without a TTL, and the permits of a
//! vanished holder coming back.
//!
//! To look at one run step by step:
//!
//! ```text
//! SIM_SEMAPHORES=1 SIM_SEED=1234 SIM_PROFILE=safe cargo test -p redlease-core --test simulation trace_one_seed -- --ignored --nocapture
//! ```

mod sim;

use std::ops::Range;

use sim::SEMAPHORES;
use sim::checker::{self, Hold, Violation};
use sim::node::{MS, Segment};
use sim::scenario::{Profile, Scenario};

/// Assert that no seed broke a rule, and that the runs really exercised semaphores.
fn assert_safe(profile: Profile, seeds: Range<u64>) {
    let n = seeds.end - seeds.start;
    let stats = SEMAPHORES.band(profile, seeds).stats;
    // Not vacuous: permits were taken (several at once too), contended, fenced, extended,
    // handed over on release; semaphores were full at times; vanished holders' permits came
    // back (liveness is checked in the run itself).
    assert!(stats.sem_holds == stats.acquired && stats.sem_holds > 5 * n, "{stats:?}");
    assert!(stats.multi_permit_holds > 0 && stats.permits > stats.sem_holds, "{stats:?}");
    assert!(stats.held_by_others > 0 && stats.released > 0 && stats.extended > 0, "{stats:?}");
    assert!(stats.at_limit * 2 > stats.semaphores, "semaphores rarely filled up: {stats:?}");
    // (A connection's first semaphore call carries the script: `NOSCRIPT` comes from the
    // script flushes of the safe profile only.)
    assert!(stats.published > 0 && (stats.noscript > 0 || profile != Profile::Safe), "{stats:?}");
    if profile != Profile::DelayedRestart {
        assert!(stats.fenced > 0, "{stats:?}");
    }
}

#[test]
fn safe_semaphores_seeds_0_to_400() {
    assert_safe(Profile::Safe, 0..400);
}

#[test]
fn safe_semaphores_seeds_400_to_800() {
    assert_safe(Profile::Safe, 400..800);
}

#[test]
fn safe_semaphores_seeds_800_to_1200() {
    assert_safe(Profile::Safe, 800..1200);
}

#[test]
fn safe_semaphores_seeds_1200_to_1600() {
    assert_safe(Profile::Safe, 1200..1600);
}

#[test]
#[ignore = "long: 100,000 seeds; run with --ignored --release"]
fn safe_semaphores_100k_seeds() {
    assert_safe(Profile::Safe, 1_000_000..1_100_000);
}

#[test]
fn restarts_with_the_data_or_after_the_ttl_are_safe_for_semaphores() {
    assert_safe(Profile::RestartKeepData, 0..100);
    assert_safe(Profile::DelayedRestart, 0..100);
}

/// The unsafe setups are caught with semaphores too, and among what is caught are instants at
/// which more permits were held than the limit.
#[test]
fn unsafe_setups_are_caught_with_semaphores() {
    for profile in [Profile::RestartEmpty, Profile::ClockJump] {
        let bad = SEMAPHORES.run_seeds(profile, 0..100).bad;
        assert!(!bad.is_empty(), "{profile:?} was never flagged in 100 seeds");
        let over = bad.iter().flat_map(|(seed, v)| v.iter().map(move |v| (seed, v))).find_map(|(seed, v)| match v {
            Violation::OverLimit { .. } => Some((seed, v)),
            _ => None,
        });
        match over {
            Some((seed, v)) => println!("{profile:?}: e.g. seed {seed}: {v}"),
            None => panic!("{profile:?}: never more permits than the limit in {} flagged seeds", bad.len()),
        }
    }
}

#[test]
fn semaphore_runs_are_reproducible() {
    // Two seeds whose runs grant more than a handful of holds (any seed replays alike).
    for seed in [5, 57] {
        let a = sim::run_twice(&Scenario::semaphores(seed, Profile::Safe));
        assert!(a.holds.iter().all(|h| h.semaphore.is_some()), "seed {seed}: every lock is a semaphore's");
        assert!(a.holds.len() >= 5, "seed {seed}: {} holds", a.holds.len());
    }
}

// ----- the checker's semaphore rules can fail ------------------------------------------------

/// A hold of the permits numbered `permits` of semaphore `s` of limit 2.
fn hold(client: usize, token: &str, permits: &[u32], start: u64, end: u64, fence: Option<u64>) -> Hold {
    Hold {
        client,
        token: token.into(),
        resources: permits.iter().map(|k| format!("redlease:sem:{{s}}:{k}").into_bytes()).collect(),
        start: start * MS,
        end: end * MS,
        fence,
        semaphore: Some((b"s".to_vec(), 2)),
        shared: false,
    }
}

/// `token` held permit `k` on a node from `from` to `to` ms.
fn seg(token: &str, k: u32, from: u64, to: u64) -> Segment {
    let key = format!("redlease:sem:{{s}}:{k}").into_bytes();
    Segment { db: 0, key, token: token.into(), from: from * MS, to: to * MS }
}

#[test]
fn checker_counts_permits_across_holds_whatever_permits_they_name() {
    // Three holders of one permit each of a limit of 2, at once from 3 to 4 ms. Their permits
    // differ (as with a per-node count granted on AB, BC and AC), so no permit overlaps.
    let holds = [hold(0, "a", &[0], 1, 4, None), hold(1, "b", &[1], 2, 6, None), hold(2, "c", &[2], 3, 8, None)];
    let v = checker::check(&holds, &[], &[], 0);
    let text: Vec<String> = v.iter().map(ToString::to_string).collect();
    assert!(!v.iter().any(|v| matches!(v, Violation::Overlap { .. })), "{text:?}");
    match v.as_slice() {
        [Violation::OverLimit { limit: 2, at, holds, .. }] => {
            assert_eq!(*at, 3 * MS);
            assert_eq!(holds.len(), 3, "{text:?}");
        }
        _ => panic!("{text:?}"),
    }
    // Two permits and one: too many; ends and starts that touch do not count together.
    let holds = [hold(0, "a", &[0, 1], 1, 4, None), hold(1, "b", &[2], 3, 6, None)];
    let v = checker::check(&holds, &[], &[], 0);
    assert!(matches!(v.as_slice(), [Violation::OverLimit { at, .. }] if *at == 3 * MS), "{v:?}");
    let holds = [hold(0, "a", &[0, 1], 1, 4, None), hold(1, "b", &[0], 4, 6, None), hold(2, "c", &[1], 5, 9, None)];
    let v = checker::check(&holds, &[], &[], 0);
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn checker_holds_each_permit_to_a_quorum_of_its_own_and_fences_per_permit() {
    // Permit 0 on nodes 0 and 1, permit 1 on nodes 1 and 2: each permit has a quorum, no node
    // has both. Fine for a semaphore (each permit is a mutex).
    let holds = [hold(0, "a", &[0, 1], 1, 5, Some(3))];
    let (n0, n1, n2) = ([seg("a", 0, 0, 6)], [seg("a", 0, 0, 6), seg("a", 1, 0, 6)], [seg("a", 1, 0, 6)]);
    let v = checker::check(&holds, &[&n0, &n1, &n2], &[0, 0, 0], 2);
    assert!(v.is_empty(), "{v:?}");
    // Permit 1 only on node 2: overstated.
    let n1 = [seg("a", 0, 0, 6)];
    let v = checker::check(&holds, &[&n0, &n1, &n2], &[0, 0, 0], 2);
    assert!(matches!(v.as_slice(), [Violation::Overstated { nodes: 1, .. }]), "{v:?}");
    // Fencing tokens increase per permit: a lower token on another permit is fine, on the same
    // permit it is not.
    let holds =
        [hold(0, "a", &[0], 1, 3, Some(5)), hold(1, "b", &[1], 4, 6, Some(2)), hold(2, "c", &[0], 4, 6, Some(4))];
    let v = checker::check(&holds, &[], &[], 0);
    match v.as_slice() {
        [Violation::FenceOrder { resource, first, second }] => {
            assert_eq!(resource, "redlease:sem:{s}:0");
            assert_eq!((first.fence, second.fence), (Some(5), Some(4)));
        }
        _ => panic!("{v:?}"),
    }
}
