//! The engine's connection policy on simulated time: first connects, connect deadlines,
//! reconnect backoff (doubling, capped, starting over after a long-lived connection), and the
//! connect-failure reasons that reach the votes.

mod rig;

use std::time::{Duration, Instant};

use redlease_core::{AcquireError, Config, Engine, Event, LinkError, LinkState, LockOptions, NodeConfig, NodeId, Vote};
use rig::Rig;

const MIN: Duration = Duration::from_millis(50);
const MAX: Duration = Duration::from_millis(400);
const CONNECT: Duration = Duration::from_secs(1);
const N0: NodeId = NodeId(0);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A rig over `n` unconnected nodes with reconnect delays 50 ms .. 400 ms, without jitter so
/// that the schedule is exact (the jitter has its own test).
fn rig(n: usize) -> Rig {
    Rig::unconnected(n, |c| {
        c.reconnect_min = MIN;
        c.reconnect_max = MAX;
        c.reconnect_jitter = 0.0;
    })
}

fn retry_at(engine: &Engine, node: NodeId) -> Instant {
    match engine.link_state(node) {
        Some(LinkState::Down { retry_at: Some(t) }) => t,
        other => panic!("expected a scheduled reconnect, got {other:?}"),
    }
}

/// Let the reconnect time of `node` come, as a driver would: the timer fires at
/// `poll_timeout`, then `poll_connect` hands the node out. Returns that time.
fn next_attempt(engine: &mut Engine, node: NodeId) -> Instant {
    let at = retry_at(engine, node);
    assert_eq!(engine.poll_timeout(), Some(at), "the timer is armed for the reconnect");
    assert_eq!(engine.poll_connect(at - Duration::from_nanos(1)), None, "not before its time");
    engine.handle_timeout(at);
    assert_eq!(engine.link_state(node), Some(LinkState::Down { retry_at: None }), "due now");
    assert_eq!(engine.poll_timeout(), None, "a due link costs no timer");
    assert_eq!(engine.poll_connect(at), Some(node));
    assert_eq!(engine.link_state(node), Some(LinkState::Connecting { deadline: at + CONNECT }));
    at
}

/// Hand out node 0's first attempt at `t0` and refuse it and the next two; returns the time
/// of the fourth attempt, which is in flight.
fn refused_three_times(engine: &mut Engine, t0: Instant) -> Instant {
    assert_eq!(engine.poll_connect(t0), Some(N0));
    let mut now = t0;
    for _ in 0..3 {
        engine.handle_connect_failed(now, N0, "Connection refused");
        now = next_attempt(engine, N0);
    }
    now
}

fn acquire_once(engine: &mut Engine, now: Instant) {
    let options = LockOptions::new("r", Duration::from_secs(10)).attempts(1);
    engine.acquire(now, &options, b"tok").unwrap();
}

#[test]
fn every_node_is_due_for_a_first_connect_at_once() {
    let mut rig = rig(3);
    let t0 = rig.t0;
    assert_eq!(rig.engine.poll_timeout(), None);
    for i in 0..3 {
        assert_eq!(rig.engine.link_state(NodeId(i)), Some(LinkState::Down { retry_at: None }));
        assert_eq!(rig.engine.last_error(NodeId(i)), None);
    }
    let handed: Vec<NodeId> = std::iter::from_fn(|| rig.engine.poll_connect(t0)).collect();
    assert_eq!(handed, [NodeId(0), NodeId(1), NodeId(2)]);
    assert_eq!(rig.engine.link_state(NodeId(1)), Some(LinkState::Connecting { deadline: t0 + CONNECT }));
    assert_eq!(rig.engine.poll_timeout(), Some(t0 + CONNECT), "the connect deadline is a timer");
    assert!(!rig.engine.is_connected(NodeId(1)));
    rig.connect_at(t0 + ms(3), 1);
    assert_eq!(rig.engine.link_state(NodeId(1)), Some(LinkState::Up { since: t0 + ms(3) }));
    assert!(rig.engine.is_connected(NodeId(1)));
    assert_eq!(rig.engine.link_state(NodeId(7)), None, "unknown node");
}

#[test]
fn failed_connects_back_off_doubling_up_to_the_cap() {
    let mut rig = rig(1);
    let mut now = rig.t0;
    assert_eq!(rig.engine.poll_connect(now), Some(N0));
    let mut delays = Vec::new();
    for _ in 0..6 {
        rig.engine.handle_connect_failed(now, N0, "Connection refused");
        let at = retry_at(&rig.engine, N0);
        delays.push(at - now);
        now = next_attempt(&mut rig.engine, N0);
    }
    assert_eq!(delays, [ms(50), ms(100), ms(200), ms(400), ms(400), ms(400)]);
    assert_eq!(rig.engine.last_error(N0), Some("connect failed: Connection refused"));
    // Each failure is an event too, so that one place can log and count them.
    let events = rig.events();
    assert_eq!(events.len(), 6);
    assert!(events.iter().all(|e| matches!(e, Event::LinkFailed { error: LinkError::ConnectFailed { node: N0, .. } })));
}

#[test]
fn the_backoff_starts_over_after_a_connection_that_stayed_up_long_enough() {
    let mut rig = rig(1);
    let mut now = refused_three_times(&mut rig.engine, rig.t0);
    rig.events();
    // Three failures: the next delay would be 400 ms. A connection that lasts less than
    // reconnect_max does not reset it...
    rig.connect_at(now, 0);
    assert_eq!(rig.engine.last_error(N0), None, "the handshake completed");
    now += MAX - ms(1);
    rig.engine.handle_disconnected(now, N0, "closed");
    rig.events();
    assert_eq!(retry_at(&rig.engine, N0) - now, ms(400));
    now = next_attempt(&mut rig.engine, N0);
    // ...one that stays up for reconnect_max does.
    rig.connect_at(now, 0);
    now += MAX;
    rig.engine.handle_disconnected(now, N0, "closed");
    assert_eq!(retry_at(&rig.engine, N0) - now, MIN);
    assert_eq!(rig.engine.last_error(N0), Some("connection lost: closed"), "the driver's reason is kept");
    assert!(matches!(rig.events().as_slice(), [Event::LinkFailed { error: LinkError::Lost { node: N0, .. } }]));
    now = next_attempt(&mut rig.engine, N0);
    rig.engine.handle_connect_failed(now, N0, "Connection refused");
    assert_eq!(retry_at(&rig.engine, N0) - now, ms(100), "and doubles again from there");
}

#[test]
fn a_connect_attempt_past_its_deadline_is_abandoned() {
    let mut rig = rig(2);
    let t0 = rig.t0;
    assert_eq!(rig.engine.poll_connect(t0), Some(NodeId(0)));
    assert_eq!(rig.engine.poll_connect(t0), Some(NodeId(1)));
    rig.connect_at(t0 + ms(1), 1);
    rig.engine.handle_timeout(t0 + CONNECT - ms(1));
    assert!(rig.events().is_empty());
    rig.engine.handle_timeout(t0 + CONNECT);
    match rig.events().as_slice() {
        [Event::LinkFailed { error: e @ LinkError::ConnectTimeout { node: NodeId(0), after, .. } }] => {
            assert_eq!(*after, CONNECT);
            assert_eq!(e.to_string(), "node #0 (redis://127.0.0.1:7000): connect timed out after 1s");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(retry_at(&rig.engine, N0), t0 + CONNECT + MIN);
    assert_eq!(rig.engine.last_error(N0), Some("connect timed out after 1s"));
    // A late report of the abandoned attempt changes nothing.
    rig.engine.handle_connect_failed(t0 + CONNECT + ms(1), N0, "Connection refused");
    assert_eq!(retry_at(&rig.engine, N0), t0 + CONNECT + MIN);
    assert_eq!(rig.engine.last_error(N0), Some("connect timed out after 1s"));
    // The next attempt times out too: the backoff doubles.
    let at = next_attempt(&mut rig.engine, N0);
    rig.engine.handle_timeout(at + CONNECT);
    assert_eq!(rig.events().len(), 1);
    assert_eq!(retry_at(&rig.engine, N0), at + CONNECT + 2 * MIN);
    // Node 1 connected in time and stays up.
    assert!(rig.engine.is_connected(NodeId(1)));
}

#[test]
fn a_failed_handshake_keeps_doubling_the_backoff() {
    let mut config = Config::new(vec![NodeConfig::from_url("redis://:wrong@127.0.0.1:7000").unwrap()]);
    config.client_name = None;
    config.reconnect_min = MIN;
    config.reconnect_max = MAX;
    config.reconnect_jitter = 0.0;
    let mut engine = Engine::new(config).unwrap();
    let mut now = Instant::now();
    assert_eq!(engine.poll_connect(now), Some(N0));
    let mut delays = Vec::new();
    for _ in 0..5 {
        engine.handle_connected(now, N0);
        now += ms(1);
        engine.handle_data(now, N0, b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
        match engine.poll_event() {
            Some(Event::LinkFailed { error: e @ LinkError::Handshake { node: N0, step: "AUTH", .. } }) => {
                let text = e.to_string();
                assert!(text.starts_with("node #0 (redis://127.0.0.1:7000): AUTH failed: WRONGPASS"), "{text}");
                assert!(!text.contains("wrong"), "no password in messages: {text}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!engine.is_connected(N0));
        delays.push(retry_at(&engine, N0) - now);
        now = next_attempt(&mut engine, N0);
    }
    assert_eq!(delays, [ms(50), ms(100), ms(200), ms(400), ms(400)]);
}

#[test]
fn votes_carry_the_connect_failure_reason_naming_each_node_once() {
    let mut rig = rig(3);
    let t0 = rig.t0;
    while rig.engine.poll_connect(t0).is_some() {}
    rig.connect_at(t0, 0);
    rig.engine.handle_connect_failed(t0, NodeId(1), "Connection refused (os error 111)");
    // Node 2's attempt is still in flight: it is not connected, and has no reason yet. With
    // two of three nodes down no quorum is possible: the attempt fails as it is sent.
    acquire_once(&mut rig.engine, t0);
    match rig.events().as_slice() {
        [
            Event::LinkFailed { error: LinkError::ConnectFailed { node: NodeId(1), .. } },
            Event::AcquireFailed { error: e @ AcquireError::Unreachable { votes, .. }, .. },
        ] => {
            assert_eq!(votes[0], Vote::Pending);
            assert_eq!(votes[1], Vote::Error("connect failed: Connection refused (os error 111)".into()));
            assert_eq!(votes[2], Vote::Down);
            let text = e.to_string();
            // Each failed node named once, by index and address (never a password).
            let expected = "node #1 (redis://127.0.0.1:7001): connect failed: Connection refused (os error 111); \
                            node #2 (redis://127.0.0.1:7002): down";
            assert!(text.contains(expected), "{text}");
            assert_eq!(text.matches("node #1").count(), 1, "{text}");
        }
        other => panic!("{other:?}"),
    }
    // A refused handshake is named once too.
    let mut config = Config::new(vec![NodeConfig::from_url("redis://:wrong@127.0.0.1:7000").unwrap()]);
    config.client_name = None;
    let mut engine = Engine::new(config).unwrap();
    engine.handle_connected(t0, N0);
    engine.handle_data(t0, N0, b"-WRONGPASS invalid username-password pair\r\n");
    assert!(matches!(engine.poll_event(), Some(Event::LinkFailed { .. })));
    acquire_once(&mut engine, t0);
    match engine.poll_event() {
        // A refused password is a configuration problem, not an unreachable node.
        Some(Event::AcquireFailed { error: e @ AcquireError::Misconfigured { .. }, .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("(1 of 1 failed: node #0 (redis://127.0.0.1:7000): AUTH failed: WRONGPASS invalid"),
                "{text}"
            );
            assert_eq!(text.matches('#').count(), 1, "{text}");
            assert!(!text.contains("wrong@") && !text.contains(":wrong"), "no password: {text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn reconnect_now_skips_the_backoff_and_starts_it_over() {
    let mut rig = rig(1);
    let now = refused_three_times(&mut rig.engine, rig.t0);
    rig.engine.handle_connect_failed(now, N0, "Connection refused");
    assert_eq!(retry_at(&rig.engine, N0) - now, MAX);
    rig.engine.reconnect_now(N0);
    assert_eq!(rig.engine.poll_timeout(), None);
    assert_eq!(rig.engine.poll_connect(now), Some(N0));
    // While connecting it does nothing.
    rig.engine.reconnect_now(N0);
    assert!(matches!(rig.engine.link_state(N0), Some(LinkState::Connecting { .. })));
    rig.engine.handle_connect_failed(now, N0, "Connection refused");
    assert_eq!(retry_at(&rig.engine, N0) - now, MIN, "the backoff started over");
}

#[test]
fn giving_up_a_connect_attempt_schedules_the_next_and_timers_combine() {
    let mut rig = rig(3);
    let t0 = rig.t0;
    while rig.engine.poll_connect(t0).is_some() {}
    rig.connect_at(t0, 0);
    rig.connect_at(t0, 2);
    // The driver drops node 1's attempt by itself: a failed attempt, with its reason.
    rig.engine.handle_disconnected(t0, NodeId(1), "given up");
    assert_eq!(retry_at(&rig.engine, NodeId(1)), t0 + MIN);
    assert_eq!(rig.engine.last_error(NodeId(1)), Some("connect failed: given up"));
    rig.events();
    // A lock's node timeout (50 ms from t0 + 10 ms) and the reconnect time (t0 + 50 ms):
    // poll_timeout gives the earlier.
    acquire_once(&mut rig.engine, t0 + ms(10));
    assert_eq!(rig.engine.poll_timeout(), Some(t0 + MIN));
    rig.engine.handle_timeout(t0 + MIN);
    assert_eq!(rig.engine.poll_timeout(), Some(t0 + ms(60)));
    assert_eq!(rig.engine.poll_connect(t0 + MIN), Some(NodeId(1)));
    assert_eq!(rig.engine.poll_timeout(), Some(t0 + ms(60)));
}

#[test]
fn reconnect_delays_are_jittered_within_the_lower_half() {
    // Default jitter 0.5: each delay is drawn from [backoff/2, backoff], and two engines with
    // different seeds do not reconnect in step.
    let delays = |seed: u64| {
        let mut rig = Rig::unconnected(1, |c| {
            c.reconnect_min = MIN;
            c.reconnect_max = MAX;
            c.seed = Some(seed);
        });
        let mut now = rig.t0;
        assert_eq!(rig.engine.poll_connect(now), Some(N0));
        let mut out = Vec::new();
        for _ in 0..6 {
            rig.engine.handle_connect_failed(now, N0, "Connection refused");
            out.push(retry_at(&rig.engine, N0) - now);
            now = next_attempt(&mut rig.engine, N0);
        }
        out
    };
    let a = delays(1);
    let backoff = [ms(50), ms(100), ms(200), ms(400), ms(400), ms(400)];
    for (d, b) in a.iter().zip(backoff) {
        assert!(*d >= b / 2 && *d <= b, "delay {d:?} outside [{:?}, {b:?}]", b / 2);
    }
    assert_eq!(a, delays(1), "deterministic for a seed");
    assert_ne!(a, delays(2), "different seeds, different schedules");
}

/// A node is ready once its handshake is answered, not when its socket connects; a connect
/// attempt ends at that point, or when it fails (here: the connection is lost mid-handshake).
#[test]
fn a_node_is_ready_and_its_attempt_ended_only_once_the_handshake_is_answered() {
    let mut rig = rig(2);
    let t0 = rig.t0;
    assert_eq!(rig.engine.poll_connect(t0), Some(N0));
    assert_eq!(rig.engine.poll_connect(t0), Some(NodeId(1)));
    // Node 0: connected, handshake unanswered.
    rig.engine.handle_connected(t0 + ms(1), N0);
    assert!(rig.engine.is_connected(N0));
    assert!(!rig.engine.is_ready(N0), "connected but not ready while the handshake runs");
    assert_eq!(rig.engine.connect_attempts(N0), 0, "the attempt has not ended");
    // Lost before the handshake was answered: the attempt ended, by failing.
    rig.engine.handle_disconnected(t0 + ms(2), N0, "connection reset by peer");
    assert!(!rig.engine.is_ready(N0));
    assert_eq!(rig.engine.connect_attempts(N0), 1);
    let events = rig.events();
    assert!(matches!(events.as_slice(), [Event::LinkFailed { error: LinkError::Lost { .. } }]), "{events:?}");
    // Node 1: connected and answered.
    rig.connect_at(t0 + ms(3), 1);
    assert!(rig.engine.is_ready(NodeId(1)));
    assert_eq!(rig.engine.connect_attempts(NodeId(1)), 1);
}
