//! Bounded, panic-free and honest at the edges: silent nodes, absurd durations, busy loops,
//! fence keys, late extensions and releases, the 2^53 limit of fence counters. Every test
//! drives one engine on simulated time.

mod rig;

use std::time::Duration;

use redlease_core::{
    AcquireError, Config, ConfigError, Engine, Event, ExtendError, LinkError, LinkState, LockOptions, LostReason,
    Misuse, NodeConfig, NodeId, ReleaseOutcome, Retry, Vote,
};
use rig::{Rig, commands};

const TTL: Duration = Duration::from_secs(10);

/// The grant of a one-key acquire without fencing (its first attempt is `SET NX PX`).
const GRANT: &[u8] = b"+OK\r\n";

fn once(resource: &str) -> LockOptions {
    LockOptions::new(resource, TTL).attempts(1)
}

/// Acquire `r` at `t0` and grant it on every node.
fn held(rig: &mut Rig, options: &LockOptions) -> redlease_core::LockId {
    let lock = rig.engine.acquire(rig.t0, options, b"tok").unwrap();
    rig.sent_commands();
    for i in 0..rig.n {
        rig.reply(rig.t0, i, GRANT);
    }
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, .. }] if *l == lock => lock,
        other => panic!("{other:?}"),
    }
}

// ----- 1. silent links, bounded queues -------------------------------------------------------

#[test]
fn a_connected_node_that_stops_answering_is_failed_after_the_liveness_bound() {
    let liveness = Duration::from_millis(400);
    let mut rig = Rig::with(3, |c| c.liveness_timeout = Some(liveness));
    rig.engine.acquire(rig.t0, &once("r"), b"tok").unwrap();
    rig.sent_commands();
    // Nodes 0 and 1 answer, node 2 never does.
    rig.reply(rig.at(1), 0, GRANT);
    rig.reply(rig.at(1), 1, GRANT);
    assert!(matches!(rig.events().as_slice(), [Event::Acquired { .. }]));
    assert_eq!(rig.engine.in_flight(NodeId(2)), 1);
    // Its oldest request is due for an answer `liveness` after it was queued, not before.
    rig.engine.handle_timeout(rig.t0 + liveness - Duration::from_nanos(1));
    assert!(rig.engine.is_connected(NodeId(2)));
    rig.engine.handle_timeout(rig.t0 + liveness);
    match rig.events().as_slice() {
        [Event::LinkFailed { error: e @ LinkError::Silent { node: NodeId(2), handshake: false, waited, .. } }] => {
            assert_eq!(*waited, liveness);
            assert!(e.to_string().contains("silent") && e.to_string().contains("127.0.0.1:7002"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    // The driver is told to drop the connection; the engine reconnects with backoff.
    assert_eq!(rig.engine.poll_close(), Some(NodeId(2)));
    assert_eq!(rig.engine.in_flight(NodeId(2)), 0);
    assert!(matches!(rig.engine.link_state(NodeId(2)), Some(LinkState::Down { retry_at: Some(_) })));
    assert_eq!(rig.engine.last_error(NodeId(2)), Some("silent: no answer to a request within 400ms"));
}

#[test]
fn a_handshake_that_is_never_answered_is_failed_after_the_connect_timeout() {
    let mut rig = Rig::unconnected(1, |c| c.connect_timeout = Duration::from_millis(300));
    assert_eq!(rig.engine.poll_connect(rig.t0), Some(NodeId(0)));
    rig.engine.handle_connected(rig.at(10), NodeId(0));
    rig.sent_commands();
    // The driver is asked to wake exactly at the handshake's deadline.
    assert_eq!(rig.engine.poll_timeout(), Some(rig.at(310)));
    rig.engine.handle_timeout(rig.at(309));
    assert!(rig.events().is_empty());
    rig.engine.handle_timeout(rig.at(310));
    match rig.events().as_slice() {
        [Event::LinkFailed { error: LinkError::Silent { handshake: true, waited, .. } }] => {
            assert_eq!(*waited, Duration::from_millis(300));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.engine.poll_close(), Some(NodeId(0)));
}

#[test]
fn a_silent_nodes_backlog_is_capped_and_it_counts_as_failed_beyond() {
    // The liveness bound is long (an hour): only the caps keep node 2's backlog bounded.
    let mut rig = Rig::with(3, |c| c.liveness_timeout = Some(Duration::from_secs(3600)));
    let mut backlogged = None;
    for i in 0..6_000u64 {
        let now = rig.at(i);
        let lock = rig.engine.acquire(now, &once("r"), b"tok").unwrap();
        rig.sent_commands();
        rig.reply(now, 0, GRANT);
        rig.reply(now, 1, GRANT);
        for ev in rig.events() {
            if let Event::Acquired { .. } = ev {
                rig.engine.release(now, lock).unwrap();
            }
        }
        rig.sent_commands();
        rig.reply(now, 0, b":1\r\n");
        rig.reply(now, 1, b":1\r\n");
        for ev in rig.events() {
            if let Event::Released { report, .. } = ev
                && report.failed > 0
            {
                backlogged.get_or_insert(i);
            }
        }
        assert!(rig.engine.in_flight(NodeId(2)) <= 4096, "cycle {i}: {}", rig.engine.in_flight(NodeId(2)));
    }
    let from = backlogged.expect("node 2 counted as failed once its backlog was full");
    assert!((2_000..=2_100).contains(&from), "full after about 4096 requests (2 per cycle): cycle {from}");
    // Its votes say why.
    rig.engine.acquire(rig.at(10_000), &once("s"), b"tok").unwrap();
    let sent = rig.sent_commands();
    assert!(sent[2].is_empty(), "nothing more is queued for node 2");
    rig.reply(rig.at(10_000), 0, b"$-1\r\n");
    rig.reply(rig.at(10_000), 1, b"$-1\r\n");
    match rig.events().as_slice() {
        [Event::AcquireFailed { error: AcquireError::Held { votes, .. }, .. }] => {
            assert!(matches!(&votes[2], Vote::Error(e) if e.contains("backlog full")), "{votes:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unsent_bytes_are_capped_too_but_one_large_command_always_goes_out() {
    let mut rig = Rig::with(3, |c| c.liveness_timeout = Some(Duration::from_secs(3600)));
    // A 5 MiB resource name: bigger than the cap, accepted on empty buffers.
    let big = "k".repeat(5 << 20);
    rig.engine.acquire(rig.t0, &once(&big), b"tok").unwrap();
    assert!(rig.engine.poll_transmit(NodeId(2)).is_some_and(|b| b.len() > 5 << 20));
    // Nodes 0 and 1 take their bytes and answer; node 2's socket takes nothing.
    rig.sent(0);
    rig.sent(1);
    rig.reply(rig.t0, 0, GRANT);
    rig.reply(rig.t0, 1, GRANT);
    assert!(matches!(rig.events().as_slice(), [Event::Acquired { .. }]));
    // The next command finds node 2's buffer over the cap: the node counts as failed.
    rig.engine.acquire(rig.t0, &once("small"), b"tok2").unwrap();
    rig.sent(0);
    rig.sent(1);
    rig.reply(rig.t0, 0, b"$-1\r\n");
    rig.reply(rig.t0, 1, b"$-1\r\n");
    match rig.events().as_slice() {
        [Event::AcquireFailed { error: AcquireError::Held { votes, .. }, .. }] => {
            assert!(matches!(&votes[2], Vote::Error(e) if e.contains("bytes unsent")), "{votes:?}");
        }
        other => panic!("{other:?}"),
    }
}

// ----- 2, 3. durations and busy loops ---------------------------------------------------------

#[test]
fn absurd_config_durations_are_refused_naming_the_field() {
    let base = Config::new(vec![NodeConfig::new("h", 1)]);
    let err = |c: Config| Engine::new(c).unwrap_err();
    for (field, config) in [
        ("node_timeout", base.clone().node_timeout(Duration::MAX)),
        ("retry.max_delay", base.clone().retry(Retry::new(3, Duration::ZERO, Duration::MAX))),
        ("connect_timeout", base.clone().connect_timeout(Duration::MAX)),
        ("liveness_timeout", base.clone().liveness_timeout(Duration::MAX)),
    ] {
        let e = err(config);
        assert!(matches!(e, ConfigError::DelayTooLong { .. }) && e.to_string().contains(field), "{field}: {e}");
    }
    let e = err(base.clone().retry(Retry::new(3, Duration::ZERO, Duration::ZERO)));
    assert_eq!(e, ConfigError::ZeroRetryDelay);
    assert!(e.to_string().contains("busy loop"), "{e}");
    let e = err(base.clone().node_timeout(Duration::from_secs(1)).liveness_timeout(Duration::from_millis(100)));
    assert!(matches!(e, ConfigError::LivenessTooShort { .. }), "{e}");
    let e = err(base.fence_prefix(""));
    assert_eq!(e, ConfigError::EmptyFencePrefix);
}

#[test]
fn absurd_request_durations_never_panic() {
    let mut rig = Rig::new(1);
    // A wait and a cap too long to add to any instant mean "no bound".
    let options = LockOptions::new("r", TTL).wait(Duration::MAX).max_hold(Duration::MAX).auto_extend(true);
    let lock = held(&mut rig, &options);
    let until = rig.engine.extend(rig.at(1), lock, Some(Duration::from_secs(20)));
    assert_eq!(until, Ok(()));
    rig.sent_commands();
    rig.reply(rig.at(2), 0, b":1\r\n");
    assert!(matches!(rig.events().as_slice(), [Event::Extended { .. }]));
    // A TTL beyond Redis' range is misuse, for an acquisition and for an extension.
    assert!(matches!(rig.engine.extend(rig.at(3), lock, Some(Duration::MAX)), Err(Misuse::TtlTooLong(_))));
    let e = rig.engine.acquire(rig.at(3), &LockOptions::new("s", Duration::MAX), b"tok").unwrap_err();
    assert!(matches!(e, Misuse::TtlTooLong(_)));
}

#[test]
fn one_timeout_call_does_bounded_work_even_with_near_zero_retry_delays() {
    // A majority down, a 1 ns retry delay and an unbounded wait: every attempt fails as it is
    // sent and the next is due at once. One call must still return, having done little.
    let mut rig = Rig::with(3, |c| c.retry = Retry::new(3, Duration::ZERO, Duration::from_nanos(1)));
    rig.engine.handle_disconnected(rig.t0, NodeId(1), "closed");
    rig.engine.handle_disconnected(rig.t0, NodeId(2), "closed");
    let options = LockOptions::new("r", TTL).wait(Duration::from_secs(3600));
    rig.engine.acquire(rig.t0, &options, b"tok").unwrap();
    let mut now = rig.t0;
    for _ in 0..100 {
        now += Duration::from_nanos(1);
        rig.engine.handle_timeout(now);
        let sent = commands(&rig.sent(0)).len();
        assert!(sent <= 2 * 20, "one call queued {sent} commands");
        rig.events();
    }
    assert_eq!(rig.engine.active_locks(), 1, "still trying, within its wait bound");
}

// ----- 4. fence keys ---------------------------------------------------------------------------

#[test]
fn a_resource_among_the_fence_counters_is_refused() {
    let mut rig = Rig::new(1);
    let e = rig.engine.acquire(rig.t0, &LockOptions::new("redlease:fence:orders", TTL), b"tok").unwrap_err();
    assert!(matches!(&e, Misuse::ResourceInFenceSpace { resource, .. } if resource == "redlease:fence:orders"));
    assert!(e.to_string().contains("pick another name"), "{e}");
    let options = LockOptions::new("orders", TTL).resources(["redlease:fence:x"]);
    assert!(matches!(rig.engine.acquire(rig.t0, &options, b"tok"), Err(Misuse::ResourceInFenceSpace { .. })));
}

// ----- 5. an extension that comes back too late --------------------------------------------------

#[test]
fn an_extension_whose_quorum_arrives_after_the_validity_is_refused() {
    let mut rig = Rig::with(3, |c| c.node_timeout = Duration::from_secs(60));
    let lock = held(&mut rig, &once("r"));
    let valid = rig.engine.lock_info(lock).unwrap().valid_until.unwrap();
    // The extension is sent just before the end; its replies come after it.
    rig.engine.extend(valid - Duration::from_millis(1), lock, None).unwrap();
    rig.sent_commands();
    rig.engine.handle_timeout(valid);
    assert!(matches!(rig.events().as_slice(), [Event::Lost { reason: LostReason::Expired, .. }]));
    for i in 0..3 {
        rig.reply(valid + Duration::from_millis(1), i, b":1\r\n");
    }
    // Never `Extended` after `Lost`: the events do not contradict each other.
    match rig.events().as_slice() {
        [Event::ExtendFailed { error: ExtendError::Expired, .. }] => {}
        other => panic!("{other:?}"),
    }
    assert!(rig.engine.lock_info(lock).unwrap().lost);
    // Also when the quorum beats the expiry timer to it.
    let mut rig = Rig::with(3, |c| c.node_timeout = Duration::from_secs(60));
    let lock = held(&mut rig, &once("r"));
    let valid = rig.engine.lock_info(lock).unwrap().valid_until.unwrap();
    rig.engine.extend(valid - Duration::from_millis(1), lock, None).unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(valid + Duration::from_millis(1), i, b":1\r\n");
    }
    match rig.events().as_slice() {
        [Event::Lost { reason: LostReason::Expired, .. }, Event::ExtendFailed { error: ExtendError::Expired, .. }] => {}
        other => panic!("{other:?}"),
    }
}

// ----- 6. a release that meets NOSCRIPT after its outcome ----------------------------------------

#[test]
fn a_release_that_meets_noscript_after_the_outcome_is_resent() {
    let mut rig = Rig::new(3);
    let lock = held(&mut rig, &once("r"));
    rig.engine.release(rig.at(1), lock).unwrap();
    rig.sent_commands();
    rig.reply(rig.at(2), 0, b":1\r\n");
    rig.reply(rig.at(2), 1, b":1\r\n");
    match rig.events().as_slice() {
        [Event::Released { report, .. }] => {
            assert_eq!(report.outcome, ReleaseOutcome::Released);
            assert_eq!((report.deleted, report.failed, report.pending), (2, 0, 1), "{report:?}");
        }
        other => panic!("{other:?}"),
    }
    // The id is free for the API at once...
    assert_eq!(rig.engine.lock_info(lock), None);
    assert_eq!(rig.engine.release(rig.at(2), lock), Err(Misuse::UnknownLock(lock)));
    // ...but node 2's late NOSCRIPT is still acted on: the release is resent with the source.
    rig.reply(rig.at(3), 2, b"-NOSCRIPT No matching script. Please use EVAL.\r\n");
    let sent = rig.sent_commands();
    assert_eq!(sent[2].len(), 1);
    assert_eq!(sent[2][0][0], b"EVAL");
    // EVAL source 2, the key and its queue, tok (the one-key release)
    assert_eq!(sent[2][0][4], b"redlease:queue:r");
    assert_eq!(sent[2][0][5], b"tok");
    rig.reply(rig.at(4), 2, b":1\r\n");
    assert!(rig.events().is_empty());
    assert_eq!(rig.engine.active_locks(), 0);
}

#[test]
fn a_draining_release_ends_at_its_deadline_when_a_node_never_answers() {
    let mut rig = Rig::new(3);
    let lock = held(&mut rig, &once("r"));
    rig.engine.release(rig.at(1), lock).unwrap();
    rig.sent_commands();
    rig.reply(rig.at(2), 0, b":1\r\n");
    rig.reply(rig.at(2), 1, b":1\r\n");
    rig.events();
    assert_eq!(rig.engine.active_locks(), 1, "waiting for node 2 until the round's deadline");
    rig.engine.handle_timeout(rig.at(51));
    assert_eq!(rig.engine.active_locks(), 0);
    // A new lock reuses the record; node 2's very late reply belongs to nobody.
    let next = rig.engine.acquire(rig.at(52), &once("s"), b"tok2").unwrap();
    rig.sent_commands();
    rig.reply(rig.at(53), 2, b"-NOSCRIPT late\r\n");
    assert!(rig.sent_commands()[2].is_empty());
    assert!(rig.engine.lock_info(next).is_some());
}

// ----- 7. fence counters near 2^53 ---------------------------------------------------------------

#[test]
fn fence_counters_at_the_limit_of_lua_numbers_fail_clearly() {
    const MAX: u64 = (1 << 53) - 1;
    // The granting nodes propose one more than their counter: 2^53 is beyond exact doubles.
    let mut rig = Rig::new(3);
    rig.engine.acquire(rig.t0, &once("r").fencing(true), b"tok").unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, format!(":{}\r\n", MAX + 1).as_bytes());
    }
    match rig.events().as_slice() {
        [Event::AcquireFailed { error: e @ AcquireError::FenceExhausted { counter: MAX }, .. }] => {
            assert!(e.to_string().contains("2^53"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    // In the fence round: a counter already at the limit leaves nothing to propose.
    let mut rig = Rig::new(3);
    rig.engine.acquire(rig.t0, &once("r").fencing(true), b"tok").unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, format!(":{MAX}\r\n").as_bytes());
    }
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, format!(":{MAX}\r\n").as_bytes());
    }
    assert!(matches!(
        rig.events().as_slice(),
        [Event::AcquireFailed { error: AcquireError::FenceExhausted { counter: MAX }, .. }]
    ));
    // Just below the limit still works.
    let mut rig = Rig::new(3);
    rig.engine.acquire(rig.t0, &once("r").fencing(true), b"tok").unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, format!(":{MAX}\r\n").as_bytes());
    }
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, format!(":{}\r\n", MAX - 1).as_bytes());
    }
    assert!(matches!(rig.events().as_slice(), [Event::Acquired { fence: Some(MAX), .. }]));
}

// ----- 11, 12. honest reports ---------------------------------------------------------------------

#[test]
fn a_refused_extension_reports_how_many_refused_also_when_asked_again() {
    let mut rig = Rig::new(3);
    let lock = held(&mut rig, &once("r"));
    rig.engine.extend(rig.at(1), lock, None).unwrap();
    rig.sent_commands();
    rig.reply(rig.at(2), 0, b":0\r\n");
    rig.reply(rig.at(2), 1, b":0\r\n");
    match rig.events().as_slice() {
        [Event::ExtendFailed { error: ExtendError::Lost { refused: 2, nodes: 3 }, .. }, Event::Lost { .. }] => {}
        other => panic!("{other:?}"),
    }
    rig.engine.extend(rig.at(3), lock, None).unwrap();
    match rig.events().as_slice() {
        [Event::ExtendFailed { error: ExtendError::Lost { refused: 2, nodes: 3 }, .. }] => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn refusals_for_a_configuration_reason_are_misconfigured_not_unreachable() {
    let mut rig = Rig::new(3);
    rig.engine.acquire(rig.t0, &once("r"), b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, b"-NOPERM this user has no permissions to run the 'evalsha' command\r\n");
    rig.reply(rig.t0, 1, b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    match rig.events().as_slice() {
        [Event::AcquireFailed { error: e @ AcquireError::Misconfigured { votes, .. }, .. }] => {
            assert!(matches!(&votes[0], Vote::Misconfigured(m) if m.starts_with("NOPERM")), "{votes:?}");
            assert!(e.to_string().starts_with("nodes misconfigured (2 of 3 failed"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}
