//! Deterministic simulation with Redis Cluster nodes: the simulation's world, faults and model
//! nodes (`sim`), where some Redlock nodes (at least one, possibly all) are Redis Clusters of
//! 2 or 3 masters (`sim::cluster`, `sim::node::shard`). Each client's engine finds them at the
//! handshake (`HELLO`'s mode, or a redirect), reads their slot maps and connects to their
//! masters as a driver does (`poll_connect`); meanwhile the clusters migrate the lock keys'
//! slots between masters (keys move one at a time with their TTL; the source answers `ASK` for
//! the keys it no longer has, the target serves them only after `ASKING`, multi-key requests
//! over a half-moved slot get `TRYAGAIN`), masters learn a slot's new owner late, and stale
//! redirects (a new owner pointing back at the old one) make requests bounce between masters.
//!
//! Checked, over mutexes, semaphores and reader-writer locks (by `seed % 3`): every rule of the
//! other simulations (mutual exclusion, the limit, readers against writers, validity never
//! overstated, fencing order, a vanished holder's lock coming back), and besides:
//!
//! - no request follows more than `MAX_CHAIN` redirects in a row (the engine's bound, "5 per
//!   node and round": a redirect loop never grows without bound);
//! - a cluster master never runs a lock's request over keys without their hash tag (`K` is not
//!   the `{K}` the other clients lock);
//! - no release of an acquisition's token takes what the round that got the lock was granted
//!   (a cleanup of an earlier attempt arriving late);
//! - the engine writes only to links that are connected;
//! - a cluster of servers older than Redis 7 (one in four) refuses `CLUSTER SHARDS` and
//!   sharded pub/sub: its map is read with `CLUSTER SLOTS`, its waiters poll;
//! - releases on a cluster master announce on sharded channels (`SPUBLISH`), and waiters
//!   subscribe to them (`SSUBSCRIBE`) on the master that serves the slot, following the slot
//!   when it moves (a master that loses one ends its subscriptions with `sunsubscribe`).
//!
//! To look at one run step by step:
//!
//! ```text
//! SIM_CLUSTERS=1 SIM_SEED=1234 SIM_PROFILE=safe cargo test -p redlease-core --test simulation trace_one_seed -- --ignored --nocapture
//! ```

mod sim;

use std::ops::Range;

use sim::checker::Violation;
use sim::scenario::{Profile, Scenario};
use sim::world::{MAX_CHAIN, run};
use sim::{CLUSTERS, LOSSY};

/// Assert that no seed broke a rule (a redirect chain beyond the bound is one), and that the
/// runs really went through clusters: locks of every kind taken, slots migrated with their
/// keys, every kind of redirect answered and followed, requests bounced more than once.
fn assert_safe(profile: Profile, seeds: Range<u64>) {
    let n = seeds.end - seeds.start;
    let stats = CLUSTERS.band(profile, seeds).stats;
    assert!(stats.acquired > 5 * n && stats.released > 0 && stats.held_by_others > 0, "{stats:?}");
    assert!(stats.sem_holds > 0 && stats.reads > 0 && stats.fenced > 0, "every kind of lock: {stats:?}");
    assert!(stats.cluster_nodes >= n, "every run has a cluster node: {stats:?}");
    assert!(stats.migrations > n && stats.keys_migrated > n, "slots migrated with their keys: {stats:?}");
    assert!(stats.moved > n && stats.ask > 0 && stats.tryagain > 0 && stats.stale_redirects > 0, "{stats:?}");
    assert!(stats.asking_served > 0, "requests were served after ASKING: {stats:?}");
    assert!(stats.followed > n && stats.map_reads > n, "redirects followed, maps read: {stats:?}");
    let shards = stats.map_reads - stats.slots_reads;
    assert!(shards > n && stats.slots_reads > 0, "maps read with CLUSTER SHARDS, and SLOTS where refused: {stats:?}");
    assert!(stats.max_chain >= 2, "requests bounced between masters: {stats:?}");
    assert!(stats.shard_messages > n, "waiters heard sharded release messages: {stats:?}");
    assert!(stats.shard_unsubscribed > 0, "masters that lost a slot ended its subscriptions: {stats:?}");
}

#[test]
fn safe_clusters_seeds_0_to_160() {
    assert_safe(Profile::Safe, 0..160);
}

#[test]
fn safe_clusters_seeds_160_to_320() {
    assert_safe(Profile::Safe, 160..320);
}

#[test]
#[ignore = "long: 20,000 seeds; run with --ignored --release"]
fn safe_clusters_20k_seeds() {
    assert_safe(Profile::Safe, 1_000_000..1_020_000);
}

/// A migration that drops the slot's keys (the new owner starts empty, as after a failover to
/// a replica that never had them) lets a second holder in, or leaves a holder without its
/// quorum: the checker sees it in runs that are clean when the keys move.
#[test]
fn a_migration_that_loses_the_keys_is_caught() {
    let seeds = 0..40;
    let clean = CLUSTERS.run_seeds(Profile::Safe, seeds.clone()).bad;
    let lossy = LOSSY.run_seeds(Profile::Safe, seeds.clone()).bad;
    let caught = sim::caught(&lossy, &clean);
    assert!(caught.len() > 2, "lossy migrations were caught in only {} of {} seeds", caught.len(), seeds.end);
}

#[test]
fn cluster_runs_are_reproducible() {
    for seed in [5, 61, 1003] {
        let a = sim::run_twice(&Scenario::clusters(seed, Profile::Safe));
        assert!(a.trace.iter().any(|l| l.contains("CLUSTER")), "seed {seed}: the engines read slot maps");
    }
}

// ----- what the simulation found in the core: each replayed on seeds that showed it ----------

/// Run `seeds` of the cluster simulation and panic at the first violation that `is` picks,
/// with the seed and the command that replays it.
fn never(what: &str, seeds: &[u64], is: impl Fn(&Violation) -> bool) {
    for &seed in seeds {
        let out = run(&Scenario::clusters(seed, Profile::Safe), false);
        let found: Vec<String> = out.violations.iter().filter(|v| is(v)).map(ToString::to_string).collect();
        assert!(
            found.is_empty(),
            "{what}: seed {seed}:\n  - {}\nreplay: {}",
            found.join("\n  - "),
            CLUSTERS.replay(seed, Profile::Safe)
        );
    }
}

fn says(v: &Violation, text: &str) -> bool {
    v.to_string().contains(text)
}

/// A request issued before the engine knows that a node is a Redis Cluster goes out with its
/// keys as they are (`r0`), and a master that owns their slot runs it (`{r0}` hashes to the
/// same slot): the node grants `r0` to one client and `{r0}` to another. Seed 12: a request
/// held behind the first `HELLO`, whose answer says cluster, is sent unchanged (mutual
/// exclusion breaks); seed 36: wake-ups off, so no `HELLO`, and the seed master owns the
/// format key's slot (nothing says cluster until a redirect); seed 11: a node that refuses
/// `HELLO 3` (RESP2).
#[test]
fn plain_keys_never_reach_a_cluster_master() {
    let plain = |v: &Violation| says(v, "without its hash tag") || matches!(v, Violation::Overlap { .. });
    never("a cluster master ran a request over a key without its tag", &[12, 36, 11], plain);
}

/// A cleanup (the release after a failed attempt) that a cluster redirects is sent again from
/// its copy, on another link, and can run after the next attempt of the same acquisition was
/// granted there: same token, so it deletes the key the lock now stands on. Seed 45 (a single
/// cluster node): the holder keeps claiming a lock no node has; seed 57: another client gets
/// it meanwhile.
#[test]
fn a_cleanup_never_takes_what_the_next_attempt_was_granted() {
    let late = |v: &Violation| {
        says(v, "sent for an earlier attempt") || matches!(v, Violation::Overlap { .. } | Violation::Overstated { .. })
    };
    never("a cleanup ran after the next attempt's grant", &[45, 57, 128], late);
}

/// An `ASK` toward a master whose link is down (or not connected yet) queues `ASKING` on that
/// link anyway (the request itself is refused as the link's vote): the driver is handed bytes
/// for a link that has no connection.
#[test]
fn asking_is_only_queued_on_a_connected_link() {
    never("the engine wrote ASKING to a link that is not connected", &[5, 15, 27], |v| says(v, "not connected"));
}

/// The engine counts redirects per round across all nodes (5 × the node count), not per node:
/// one cluster node whose masters bounce a request can take the whole budget (seeds 3, 32, 35:
/// 6 and more redirects of one request on one node).
#[test]
fn one_node_follows_at_most_five_redirects_per_request() {
    let many = |v: &Violation| says(v, "redirects in a row");
    never(&format!("a request followed more than {MAX_CHAIN} redirects on one node"), &[3, 32, 35], many);
}

/// The first `CLUSTER SLOTS` of a cluster node goes out on the node's own link when `HELLO`
/// (or a redirect) shows a cluster. If that connection is lost before the answer, nothing
/// reads the map again: a reconnect's `HELLO` is no news, no refresh is scheduled before a map
/// was read, and no request reaches the node to be redirected (each votes "the cluster's slot
/// map is not read yet"). The node is lost to that client for good: a vanished holder's lock
/// never comes back where the other nodes are too few (seeds 1000038, 1001052, 1002398).
#[test]
fn a_slot_map_read_lost_with_its_connection_is_read_again() {
    let never_read = |v: &Violation| matches!(v, Violation::Liveness { .. }) || says(v, "never read the slot map");
    never("a cluster node's slot map was never read", &[1_000_038, 1_001_052, 1_002_398], never_read);
}
