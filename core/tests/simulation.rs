//! Deterministic simulation of many clients contending for locks over N model Redis nodes.
//!
//! Every run is drawn from a seed (see `sim::scenario`) and is fully reproducible. To look
//! at one run step by step:
//!
//! ```text
//! SIM_SEED=1234 SIM_PROFILE=safe cargo test -p redlease-core --test simulation trace_one_seed -- --ignored --nocapture
//! ```
//!
//! (With `SIM_SEMAPHORES=1`, the same seed's semaphore run of `semaphore_simulation.rs`; with
//! `SIM_CLUSTERS=1`, its run with Redis Cluster nodes of `cluster_simulation.rs`; with
//! `SIM_REPLICAS=1`, its run with nodes whose grants wait for a replica of
//! `replica_simulation.rs`; with `SIM_SENTINELS=1`, its run with Sentinel-managed nodes of
//! `sentinel_simulation.rs`.)

mod sim;

use std::ops::Range;
use std::time::Duration;

use redlease_core::{Event, LockOptions};

use sim::MUTEXES;
use sim::checker::{self, Hold, Violation};
use sim::node::{MS, Segment};
use sim::scenario::{Profile, Scenario};
use sim::world::{Stats, run};

/// Assert that no seed broke a rule, and that the runs really exercised the engine.
fn assert_safe(profile: Profile, seeds: Range<u64>) {
    let n = seeds.end - seeds.start;
    let stats = MUTEXES.band(profile, seeds).stats;
    // Not vacuous: locks were taken, contended, extended and lost along the way.
    assert!(stats.acquired > 5 * n, "too few acquisitions: {stats:?}");
    assert!(stats.held_by_others > 0 && stats.released > 0, "{stats:?}");
    // Waiters were woken by release messages, and some messages were lost on purpose; releases
    // nobody waited for published nothing.
    assert!(stats.published > 0 && stats.publish_dropped > 0 && stats.quiet_releases > 0, "{stats:?}");
}

#[test]
fn safe_setups_seeds_0_to_500() {
    assert_safe(Profile::Safe, 0..500);
}

#[test]
fn safe_setups_seeds_500_to_1000() {
    assert_safe(Profile::Safe, 500..1000);
}

#[test]
fn safe_setups_seeds_1000_to_1500() {
    assert_safe(Profile::Safe, 1000..1500);
}

#[test]
fn safe_setups_seeds_1500_to_2000() {
    assert_safe(Profile::Safe, 1500..2000);
}

#[test]
#[ignore = "long: 100,000 seeds; run with --ignored --release"]
fn safe_setups_100k_seeds() {
    assert_safe(Profile::Safe, 1_000_000..1_100_000);
}

/// Search a small seed range of an unsafe profile for runs the checker flags.
fn caught(profile: Profile, seeds: Range<u64>) -> Vec<(u64, Vec<Violation>)> {
    let bad = MUTEXES.run_seeds(profile, seeds).bad;
    if let Some((seed, v)) = bad.first() {
        println!("{profile:?}: e.g. seed {seed}: {}", v[0]);
    }
    bad
}

#[test]
fn clock_jump_beyond_drift_is_caught() {
    let bad = caught(Profile::ClockJump, 0..200);
    assert!(!bad.is_empty(), "a clock jump far beyond the drift margin was never flagged in 200 seeds");
    let safety =
        bad.iter().flat_map(|(_, v)| v).any(|v| matches!(v, Violation::Overlap { .. } | Violation::Overstated { .. }));
    assert!(safety, "only non-safety violations were flagged: {:?}", bad[0]);
}

#[test]
fn restart_without_persistence_is_caught() {
    let bad = caught(Profile::RestartEmpty, 0..200);
    assert!(!bad.is_empty(), "a node restarting empty was never flagged in 200 seeds");
}

#[test]
fn restart_with_appendfsync_always_is_safe() {
    // The very same crash schedules as `restart_without_persistence_is_caught`.
    let bad = MUTEXES.run_seeds(Profile::RestartKeepData, 0..200).bad;
    assert!(bad.is_empty(), "seed {}: {}", bad[0].0, bad[0].1[0]);
}

#[test]
fn delayed_restart_is_safe() {
    // The same crashes, without the data, but the node stays down longer than any TTL.
    let bad = MUTEXES.run_seeds(Profile::DelayedRestart, 0..200).bad;
    assert!(bad.is_empty(), "seed {}: {}", bad[0].0, bad[0].1[0]);
}

/// A node that stalls while connected (SIGSTOP with the connection open, a black hole, a
/// half-open TCP connection) for many times the liveness bound, while clients keep locking:
/// the engines recycle its connections (`LinkError::Silent`) instead of queueing requests
/// for it without end, and nothing else changes (no safety violation).
#[test]
fn a_node_that_stalls_while_connected_is_recycled_and_memory_stays_bounded() {
    let (mut with, mut without) = (Stats::default(), Stats::default());
    let mut runs = 0;
    for seed in 0..200 {
        let mut sc = Scenario::generate(seed, Profile::Safe);
        if sc.nodes < 3 {
            continue;
        }
        runs += 1;
        // Node 0 stops answering from 2 ms until the calm phase, about ten liveness bounds.
        sc.faults = vec![(2 * MS, sim::scenario::Fault::PauseNode { node: 0, dur: sc.calm_at - 3 * MS })];
        sc.liveness = None;
        let base = run(&sc, false);
        assert!(base.violations.is_empty(), "seed {seed}: {}", base.violations[0]);
        without.add(&base.stats);
        sc.liveness = Some((sc.calm_at / 10).max(sc.node_timeout));
        let out = run(&sc, false);
        assert!(out.violations.is_empty(), "seed {seed}: {}", out.violations[0]);
        with.add(&out.stats);
    }
    println!("stalled node, {runs} runs: with a liveness bound {with:?}; without {without:?}");
    assert!(with.silent_links > runs, "the stalled node's connections were recycled: {with:?}");
    assert_eq!(without.silent_links, 0, "the default bound (500 ms) is longer than these runs");
    assert!(
        with.max_in_flight < without.max_in_flight,
        "recycling bounds the backlog: {} requests at most, {} without",
        with.max_in_flight,
        without.max_in_flight
    );
    assert!(with.acquired > 0 && with.released > 0, "locking went on meanwhile: {with:?}");
}

/// The engine's round-trip figures match the simulated network: every sample lies between
/// twice the smallest and twice the largest one-way delay (the model nodes answer at once),
/// so the smoothed value and the recent maximum do too.
#[test]
fn round_trip_figures_match_the_simulated_delays() {
    let mut checked = 0;
    for seed in 0..100 {
        let mut sc = Scenario::generate(seed, Profile::Safe);
        if sc.slow_per_mille > 0 {
            continue;
        }
        sc.faults.clear();
        let out = run(&sc, false);
        let (lo, hi) = (Duration::from_nanos(2 * sc.delay.0), Duration::from_nanos(2 * sc.delay.1));
        for stats in out.node_stats.iter().flatten().flatten() {
            let (Some(rtt), Some(max)) = (stats.rtt(), stats.rtt_max()) else { continue };
            assert!(lo <= rtt && rtt <= hi, "seed {seed}: smoothed rtt {rtt:?} outside [{lo:?}, {hi:?}]");
            assert!(rtt <= max && max <= hi, "seed {seed}: max {max:?} (smoothed {rtt:?}, bound {hi:?})");
            assert!(stats.replies > 0);
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked} (client, node) figures checked");
}

#[test]
fn runs_are_reproducible() {
    for seed in [3, 77, 1001] {
        let a = sim::run_twice(&Scenario::generate(seed, Profile::Safe));
        assert!(a.trace.len() > 100, "seed {seed}: a run should be more than a handful of steps");
    }
}

#[test]
#[ignore = "debugging aid: SIM_SEED=<n> SIM_PROFILE=<profile> prints one run step by step"]
fn trace_one_seed() {
    // SIM_SEMAPHORES=1: the run of `semaphore_simulation.rs` (every lock a semaphore's);
    // SIM_RWLOCKS=1: the run of `rwlock_simulation.rs` (read and write locks); SIM_REPLICAS=1:
    // the run of `replica_simulation.rs` (grants wait for a replica); SIM_CLUSTERS=1: the run
    // of `cluster_simulation.rs` (Redis Cluster nodes), with SIM_LOSSY=1 its unsafe variant (a
    // migration drops the slot's keys); SIM_SENTINELS=1: the run of `sentinel_simulation.rs`
    // (Sentinel-managed nodes that fail over), with SIM_UNREPLICATED=1 its unsafe variant
    // (grants that do not wait for a replica). See `sim::replay_from_env`.
    let sc = sim::replay_from_env();
    println!("{sc:#?}");
    let out = run(&sc, true);
    for line in &out.trace {
        println!("{line}");
    }
    for h in &out.holds {
        println!("hold {h}");
    }
    for v in &out.violations {
        println!("VIOLATION {v}");
    }
}

// ----- the checker itself can fail ---------------------------------------------------------

fn hold(client: usize, token: &str, start: u64, end: u64, fence: Option<u64>) -> Hold {
    Hold {
        client,
        token: token.into(),
        resources: vec![b"r".to_vec()],
        start: start * MS,
        end: end * MS,
        fence,
        semaphore: None,
        shared: false,
    }
}

fn seg(token: &str, from: u64, to: u64) -> Segment {
    Segment { db: 0, key: b"r".to_vec(), token: token.into(), from: from * MS, to: to * MS }
}

#[test]
fn checker_accepts_disjoint_covered_holds() {
    let holds = [hold(0, "a", 1, 5, Some(1)), hold(1, "b", 5, 9, Some(2))];
    let n0 = [seg("a", 0, 6), seg("b", 5, 10)];
    let n1 = [seg("a", 1, 7), seg("b", 4, 10)];
    let n2: [Segment; 0] = [];
    let v = checker::check(&holds, &[&n0, &n1, &n2], &[0, 0, 0], 2);
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn checker_flags_overlap_overstatement_and_fence_order() {
    let holds = [hold(0, "a", 1, 6, Some(5)), hold(1, "b", 5, 9, Some(5))];
    // Node 0 let "a" go at 4 ms: from then on only one node holds it.
    let n0 = [seg("a", 0, 4), seg("b", 4, 10)];
    let n1 = [seg("a", 0, 7)];
    let n2 = [seg("b", 4, 10)];
    let v = checker::check(&holds, &[&n0, &n1, &n2], &[0, 0, 0], 2);
    let text: Vec<String> = v.iter().map(ToString::to_string).collect();
    assert!(v.iter().any(|v| matches!(v, Violation::Overlap { .. })), "{text:?}");
    assert!(v.iter().any(|v| matches!(v, Violation::FenceOrder { .. })), "{text:?}");
    assert!(
        v.iter().any(|v| matches!(v, Violation::Overstated { hold, from, .. } if hold.client == 0 && *from == 4 * MS)),
        "{text:?}"
    );
}

#[test]
fn checker_counts_keys_in_the_right_database_only() {
    let holds = [hold(0, "a", 1, 5, None)];
    let n0 = [Segment { db: 1, ..seg("a", 0, 6) }];
    let n1 = [seg("a", 0, 6)];
    let v = checker::check(&holds, &[&n0, &n1], &[0, 0], 2);
    assert!(matches!(v.as_slice(), [Violation::Overstated { nodes: 1, .. }]), "{v:?}");
}

// ----- scripted runs over the model nodes ---------------------------------------------------

mod scripted {
    use std::time::{Duration, Instant};

    use redlease_core::{Config, Engine, Event, LockOptions, NodeConfig, NodeId};

    use super::sim::node::{Clock, MS, Node, Time};

    /// Engines and model nodes wired by hand: every byte moves only when the test says so.
    pub(super) struct Wires {
        pub(super) t0: Instant,
        pub(super) nodes: Vec<Node>,
        pub(super) engines: Vec<Engine>,
        /// Connection id of (engine, node).
        conn: Vec<Vec<usize>>,
        next_conn: usize,
    }

    impl Wires {
        pub(super) fn new(engines: usize, nodes: usize) -> Self {
            let prefix = Config::new(Vec::new()).fence_prefix;
            let mut w = Wires {
                t0: Instant::now(),
                nodes: (0..nodes).map(|_| Node::new(Clock::new(0, 0), None, prefix.as_bytes(), false)).collect(),
                engines: (0..engines)
                    .map(|i| {
                        let mut c = Config::new((0..nodes).map(|n| NodeConfig::new("m", 7000 + n as u16)).collect());
                        c.client_name = None;
                        c.seed = Some(i as u64);
                        Engine::new(c).unwrap()
                    })
                    .collect(),
                conn: vec![vec![0; nodes]; engines],
                next_conn: 0,
            };
            for e in 0..engines {
                for n in 0..nodes {
                    w.connect(0, e, n);
                }
            }
            w
        }

        pub(super) fn at(&self, ms: u64) -> Instant {
            self.t0 + Duration::from_millis(ms)
        }

        /// Open a (new) connection from engine `e` to node `n` and run the handshake.
        pub(super) fn connect(&mut self, ms: u64, e: usize, n: usize) {
            self.next_conn += 1;
            self.conn[e][n] = self.next_conn;
            self.nodes[n].accept(self.next_conn);
            let now = self.at(ms);
            self.engines[e].handle_connected(now, NodeId(n as u16));
            let out = self.take(e, n);
            self.deliver(ms, e, n, &out);
        }

        /// Break the connection between `e` and `n`; whatever was unsent is lost.
        pub(super) fn break_link(&mut self, ms: u64, e: usize, n: usize) {
            self.take(e, n);
            self.nodes[n].close(self.conn[e][n]);
            let now = self.at(ms);
            self.engines[e].handle_disconnected(now, NodeId(n as u16), "closed");
        }

        /// What engine `e` wants to send to node `n`, taken off its buffer.
        pub(super) fn take(&mut self, e: usize, n: usize) -> Vec<u8> {
            let id = NodeId(n as u16);
            let mut out = Vec::new();
            while let Some(b) = self.engines[e].poll_transmit(id) {
                out.extend_from_slice(b);
                let len = b.len();
                self.engines[e].advance_transmit(id, len);
            }
            out
        }

        /// Node `n` executes `bytes` from engine `e` at `ms`; the reply goes straight back.
        pub(super) fn deliver(&mut self, ms: u64, e: usize, n: usize, bytes: &[u8]) {
            let reply = self.nodes[n].receive(ms as Time * MS, self.conn[e][n], bytes);
            let now = self.at(ms);
            self.engines[e].handle_data(now, NodeId(n as u16), &reply);
        }

        /// Take and deliver engine `e`'s output to each node in `to`.
        pub(super) fn flush(&mut self, ms: u64, e: usize, to: &[usize]) {
            for &n in to {
                let out = self.take(e, n);
                self.deliver(ms, e, n, &out);
            }
        }

        /// The locks' events (link events are not what this replay is about).
        pub(super) fn events(&mut self, e: usize) -> Vec<Event> {
            std::iter::from_fn(|| self.engines[e].poll_event()).filter(|ev| ev.lock().is_some()).collect()
        }

        pub(super) fn acquire_fenced(&mut self, ms: u64, e: usize, token: &[u8]) -> redlease_core::LockId {
            let options = LockOptions::new("r", Duration::from_secs(10)).fencing(true).attempts(1);
            let now = self.at(ms);
            self.engines[e].acquire(now, &options, token).unwrap()
        }
    }
}

/// A later holder must get a larger fencing token even when the previous holder's
/// write-back reached only a quorum, and the later holder's grants straddle the earlier
/// holder's whole tenure (one grant before it, one after).
#[test]
fn fence_tokens_increase_when_a_write_back_misses_a_node() {
    let mut w = scripted::Wires::new(2, 3);
    let (h1, h2) = (0, 1);
    // History: node 0's counter is well ahead of the others.
    w.nodes[0].put(0, 0, b"redlease:fence:r", b"10");

    // H2 starts first; only its request to node 2 gets through for now.
    let l2 = w.acquire_fenced(1, h2, b"h2");
    let h2_to_node1 = w.take(h2, 1);
    let _h2_to_node0 = w.take(h2, 0); // stuck in the network for good
    w.flush(1, h2, &[2]);

    // H1 gets nodes 0 and 1 (node 2 is H2's). Its fence write-back reaches nodes 0 and 2;
    // the connection to node 1 breaks and loses it.
    let l1 = w.acquire_fenced(2, h1, b"h1");
    w.flush(2, h1, &[0, 1, 2]);
    w.break_link(3, h1, 1);
    w.flush(3, h1, &[0, 2]);
    let f1 = match w.events(h1).as_slice() {
        [Event::Acquired { lock, fence: Some(f), .. }] if *lock == l1 => *f,
        other => panic!("H1 should hold the lock: {other:?}"),
    };

    // H1 works, reconnects to node 1 and releases everywhere.
    w.connect(4, h1, 1);
    let now = w.at(5);
    w.engines[h1].release(now, l1).unwrap();
    w.flush(5, h1, &[0, 1, 2]);
    assert!(matches!(w.events(h1).as_slice(), [Event::Released { .. }]));

    // Only now does H2's request reach node 1: H2 has its quorum (nodes 1 and 2). Node 0
    // never answers (its connection is stuck behind the lost request): it times out.
    w.deliver(6, h2, 1, &h2_to_node1);
    w.flush(6, h2, &[1, 2]);
    let later = w.at(60);
    w.engines[h2].handle_timeout(later);
    w.flush(60, h2, &[1, 2]);
    match w.events(h2).as_slice() {
        [Event::Acquired { lock, fence: Some(f2), .. }] if *lock == l2 => {
            assert!(*f2 > f1, "H2 holds after H1 but got fencing token {f2} <= H1's {f1}");
        }
        other => panic!("H2 should hold the lock: {other:?}"),
    }
}

/// The cheap first attempt (`SET NX PX`) cannot re-enter our own leftover: the attempt fails,
/// the cleanup release deletes the leftover where it arrives, and the retry re-enters by
/// script where the cleanup was lost with a broken connection. Re-entry never blocks a retry.
#[test]
fn a_leftover_of_our_own_token_does_not_block_the_retry() {
    let mut w = scripted::Wires::new(1, 3);
    w.nodes[0].put(0, 0, b"r", b"tok");
    w.nodes[1].put(0, 0, b"r", b"tok");
    let options = LockOptions::new("r", Duration::from_secs(10)).attempts(3);
    let now = w.at(1);
    let lock = w.engines[0].acquire(now, &options, b"tok").unwrap();
    // Nodes 0 and 1 answer nil (taken), node 2 +OK: no quorum, the attempt fails.
    w.flush(1, 0, &[0, 1, 2]);
    // The cleanup to node 0 is lost with its connection; nodes 1 and 2 delete our keys.
    w.break_link(2, 0, 0);
    w.flush(2, 0, &[1, 2]);
    w.connect(3, 0, 0);
    let mut acquired = None;
    for _ in 0..20 {
        let Some(next) = w.engines[0].poll_timeout() else { break };
        let ms = (next - w.t0).as_millis() as u64;
        w.engines[0].handle_timeout(next);
        w.flush(ms, 0, &[0, 1, 2]);
        if let Some(e) = w.events(0).into_iter().find(|e| !matches!(e, Event::LinkFailed { .. })) {
            acquired = Some(e);
            break;
        }
    }
    match acquired {
        Some(Event::Acquired { lock: l, attempts: 2, .. }) if l == lock => {}
        other => panic!("the retry should hold the lock on all three nodes: {other:?}"),
    }
}
