//! Waiters of every kind get the lock: one-key waiters that hear release messages, a waiter on
//! two keys, a client with wake-ups off (it polls) and a client whose nodes refuse `HELLO 3`
//! (RESP2 only), all contending for one resource over three model nodes, each holding it 5 ms.
//! Counts each kind's acquisitions and longest wait; the runs are the simulation's (`sim`),
//! with clients that play scripted roles, and are checked as any of its runs (mutual
//! exclusion, validity, the nodes' leftovers, the engines' audits) besides.
//!
//! A waiter must not starve because of how others wait: the release hands the key to the head
//! of its queue, so every kind of waiter queues.
//!
//! Readers and writers of one resource both get it too: three readers and two writers that
//! hear release messages and a reader that polls. Writers have preference (a waiting writer
//! stops new readers); readers queue with the writers and are handed the key in turn, so
//! neither kind starves, and readers still share it.
//!
//! And a semaphore's waiters of one permit and of two: its queue is one order on every node, so
//! each client of a kind gets about as many grants as the others, and a waiter of two permits
//! is topped up in turn rather than starved by waiters of one. Sixteen waiters of one permit on
//! four keep the permits as busy as a mutex's waiters keep its key, each served in turn.
//! At 1 ms holds, varying network delays idle the permits: concurrent releases reach the nodes
//! in different orders and hand their permits to two waiters crosswise.

mod sim;

use std::collections::BTreeMap;
use std::time::Duration;

use redlease_core::LockOptions;

use sim::node::{MS, Time};
use sim::scenario::Scenario;
use sim::script::{Role, Script};
use sim::world::run;

/// One-way network delay.
const DELAY: Time = MS / 5;
/// How long each client holds the lock.
const HOLD: Time = 5 * MS;
/// Simulated time per run.
const RUN: Time = 3_000 * MS;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// One key, wake-ups on.
    Listener,
    /// Two keys (`r0` and `r1`), wake-ups on.
    TwoKeys,
    /// One key, wake-ups off in its config.
    Poller,
    /// One key, over connections of its own to nodes that refuse `HELLO 3`.
    Resp2,
    /// Read locks of one key, wake-ups on.
    Reader,
    /// Read locks of one key, wake-ups off in its config.
    PollingReader,
    /// One permit of the semaphore `r0` of 4, wake-ups on.
    Permit,
    /// Two permits of the same semaphore, wake-ups on.
    TwoPermits,
}

impl Kind {
    /// The role of a client of this kind that first asks at `start`: it holds each grant
    /// `HOLD`, then asks again at once, waiting up to a minute each time.
    fn role(self, start: Time) -> Role {
        let mut options = LockOptions::new("r0", Duration::from_secs(10)).wait(Duration::from_secs(60));
        if self == Kind::TwoKeys {
            options = options.resources(["r1"]);
        }
        options.shared = matches!(self, Kind::Reader | Kind::PollingReader);
        if matches!(self, Kind::Permit | Kind::TwoPermits) {
            options = options.semaphore(4).permits(if self == Kind::TwoPermits { 2 } else { 1 });
        }
        let mut role = Role::new(start, options, Some(HOLD));
        role.wake = !matches!(self, Kind::Poller | Kind::PollingReader);
        role.resp2 = self == Kind::Resp2;
        role
    }
}

/// Run `kinds` over 8 seeds on 3 nodes; print and check each kind's acquisitions and longest
/// wait; return how often a reader was granted while another held the lock.
fn every_kind_served(kinds: &[Kind]) -> usize {
    served(kinds, 3, 8).0
}

/// What [`every_kind_served`] does over `nodes` nodes and `seeds` seeds; also returns, per
/// client, its acquisitions in all runs and its longest wait.
fn served(kinds: &[Kind], nodes: usize, seeds: u64) -> (usize, Vec<(u32, Time)>) {
    // Per kind: acquisitions over the runs, the longest wait, the fewest in a run.
    let mut total: BTreeMap<String, (u32, Time, u32)> = BTreeMap::new();
    let mut shared = 0;
    let mut per_client = vec![(0, 0); kinds.len()];
    for seed in 0..seeds {
        // Each starts a little apart, after the handshakes.
        let roles = kinds.iter().enumerate().map(|(c, k)| k.role(10 * MS + c as Time * MS / 10)).collect();
        let out = run(&Scenario::scripted(seed, nodes, (DELAY, DELAY), Script { roles, stop_at: RUN }), false);
        let mut violations: Vec<String> = out.violations.iter().map(ToString::to_string).collect();
        violations.extend(out.failures().map(|(c, error)| format!("client {c} gave up: {error}")));
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
        shared += out.shared_grants();
        let mut tally: BTreeMap<String, (u32, Time)> = BTreeMap::new();
        for (c, kind) in kinds.iter().enumerate() {
            let t = tally.entry(format!("{kind:?}")).or_default();
            for (_, waited) in out.grants(c) {
                t.0 += 1;
                t.1 = t.1.max(waited);
                per_client[c].0 += 1;
                per_client[c].1 = per_client[c].1.max(waited);
            }
        }
        for (kind, (grants, longest)) in tally {
            let e = total.entry(kind).or_insert((0, 0, u32::MAX));
            e.0 += grants;
            e.1 = e.1.max(longest);
            e.2 = e.2.min(grants);
        }
    }
    // Six clients sharing 5 ms holds for 3 s: about 100 each if the lock goes round.
    for (kind, (grants, longest, fewest)) in &total {
        let per_client = kinds.iter().filter(|k| format!("{k:?}") == *kind).count() as u32;
        println!(
            "{kind}: {grants} acquisitions over {seeds} runs ({} per client and run on average, at least {fewest} in a run), longest wait {} ms",
            grants / seeds as u32 / per_client,
            longest / MS
        );
        assert!(*fewest >= 5 * per_client, "{kind}: only {fewest} acquisitions in a run: it starves");
        assert!(*longest < 1_000 * MS, "{kind}: waited {} ms", longest / MS);
    }
    (shared, per_client)
}

#[test]
fn every_kind_of_waiter_gets_the_lock() {
    every_kind_served(&[Kind::Listener, Kind::Listener, Kind::Listener, Kind::TwoKeys, Kind::Poller, Kind::Resp2]);
}

#[test]
fn readers_and_writers_both_get_the_lock() {
    let kinds = [Kind::Reader, Kind::Reader, Kind::Reader, Kind::Listener, Kind::Listener, Kind::PollingReader];
    let shared = every_kind_served(&kinds);
    println!("readers shared the lock in {shared} grants over 8 runs");
    assert!(shared > 0, "readers never shared the lock");
}

/// A semaphore of 4 permits over five nodes, wanted by eight clients of one permit and four of
/// two, each holding 5 ms: the queue is one order on every node, so a waiter of two permits is
/// topped up in turn instead of starving behind the others, and each client of a kind gets
/// about as many grants as the others, none waiting much longer than its turn.
#[test]
fn waiters_of_one_and_of_two_permits_are_served_in_turn() {
    let kinds = [[Kind::Permit; 8].as_slice(), &[Kind::TwoPermits; 4]].concat();
    let (_, per_client) = served(&kinds, 5, 8);
    for kind in [Kind::Permit, Kind::TwoPermits] {
        let of_kind: Vec<(u32, Time)> =
            kinds.iter().zip(&per_client).filter(|(k, _)| **k == kind).map(|(_, c)| *c).collect();
        let (least, most) = (of_kind.iter().map(|c| c.0).min().unwrap(), of_kind.iter().map(|c| c.0).max().unwrap());
        let longest = of_kind.iter().map(|c| c.1).max().unwrap();
        // A client's turn comes round every `RUN` over its acquisitions in a run.
        let turn = RUN * 8 / Time::from(least.max(1));
        println!(
            "{kind:?}: {least}–{most} acquisitions per client over 8 runs, a turn every {} ms or less, longest wait {} ms",
            turn / MS,
            longest / MS
        );
        // In turn: within a fifth of each other, and no wait much longer than a turn.
        assert!(most * 5 <= least * 6, "{kind:?}: {least}–{most} acquisitions per client");
        assert!(longest < 5 * turn, "{kind:?}: waited {} ms, a turn is {} ms", longest / MS, turn / MS);
    }
}

/// Sixteen clients of one permit each on a semaphore of 4 over five nodes, holding 5 ms, as in
/// the runtimes benchmark's contended-semaphore scenario: on the model's network (no CPU cost)
/// the permits are handed on as a mutex's key is, so the permits are busy at least 0.8 of the
/// time, each client gets as many grants as the others (±10 %), and none waits longer than
/// 3 × K / L × hold.
#[test]
fn sixteen_waiters_keep_four_permits_busy() {
    const K: u64 = 16;
    const L: u64 = 4;
    let seeds = 2;
    let (_, per_client) = served(&[Kind::Permit; K as usize], 5, seeds);
    let grants: u64 = per_client.iter().map(|c| u64::from(c.0)).sum();
    let (least, most) = (per_client.iter().map(|c| c.0).min().unwrap(), per_client.iter().map(|c| c.0).max().unwrap());
    let longest = per_client.iter().map(|c| c.1).max().unwrap();
    let rate = grants as f64 / (seeds * RUN / HOLD * L) as f64;
    let wait = longest as f64 / (K * HOLD / L) as f64;
    println!("rate {rate:.2} of L / hold, {least}–{most} grants per client, longest wait {wait:.1} × K / L × hold");
    assert!(rate >= 0.8, "rate {rate:.2}");
    assert!(most * 10 <= least * 11, "{least}–{most} grants per client");
    assert!(wait <= 3.0, "longest wait {wait:.1} × K / L × hold");
}

/// What idles a contended semaphore's permits at short holds: sixteen clients of one permit on
/// four over five nodes, holding 1 ms, on a network whose delay is a constant 0.2 ms, then one
/// whose delay varies from 0.1 to 0.4 ms. Varying delays let two concurrent releases reach the
/// nodes in different orders and hand their permits to two waiters crosswise (neither holds one
/// permit on a quorum, both try again): the permits are busy a smaller share of the time. Both
/// runs are checked as any of the simulation's, and every client is served in both.
#[test]
fn crosswise_hand_offs_idle_the_permits_when_delays_vary() {
    let hold = MS;
    let run_for = 1_000 * MS;
    let busy = |delay: (Time, Time)| {
        let roles = (0..16)
            .map(|c| {
                let options =
                    LockOptions::new("r0", Duration::from_secs(10)).wait(Duration::from_secs(60)).semaphore(4);
                Role::new(10 * MS + c as Time * MS / 10, options, Some(hold))
            })
            .collect();
        let out = run(&Scenario::scripted(0, 5, delay, Script { roles, stop_at: run_for }), false);
        let violations: Vec<String> = out.violations.iter().map(ToString::to_string).collect();
        assert!(violations.is_empty(), "{violations:?}");
        let per_client: Vec<usize> = (0..16).map(|c| out.grants(c).count()).collect();
        assert!(per_client.iter().all(|&g| g > 0), "a client was never served: {per_client:?}");
        per_client.iter().sum::<usize>() as f64 / (run_for / hold * 4) as f64
    };
    let (steady, varying) = (busy((DELAY, DELAY)), busy((DELAY / 2, 2 * DELAY)));
    println!("permits busy {steady:.2} of the time with a constant delay, {varying:.2} with varying delays");
    assert!(varying < steady, "{varying:.2} against {steady:.2}");
}
