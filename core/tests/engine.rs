//! Scripted scenarios of one engine against hand-written replies: each Redlock rule, the
//! typed outcomes, the handshake and the garbage handling.

mod rig;

use std::time::Duration;

use redlease_core::quorum::drift;
use redlease_core::{
    AcquireError, Config, ConfigError, Engine, Event, ExtendError, LinkError, LockId, LockOptions, LockState,
    LostReason, Misuse, NodeConfig, NodeId, ReleaseOutcome, Retry, Vote,
};
use rig::Rig;

const TTL: Duration = Duration::from_secs(10);

/// The grant of a one-key acquire without fencing (its first attempt is `SET NX PX`).
const GRANT: &[u8] = b"+OK\r\n";

/// Its refusal: the key is taken (nil).
const REFUSE: &[u8] = b"$-1\r\n";

/// One attempt at `keys` for [`TTL`].
fn req(keys: &[&str]) -> LockOptions {
    let mut r = LockOptions::new("", TTL).attempts(1);
    r.resources = keys.iter().map(|k| k.to_string()).collect();
    r
}

/// Acquire `r` at `t0` and grant it on every node.
fn held(rig: &mut Rig) -> LockId {
    let lock = rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
    rig.sent_commands();
    for i in 0..rig.n {
        rig.reply(rig.t0, i, GRANT);
    }
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, .. }] if *l == lock => lock,
        other => panic!("{other:?}"),
    }
}

#[test]
fn unconfirmed_shorter_extension_lowers_the_deadline() {
    // The nodes may have applied the shorter PEXPIRE even though no reply came back: the
    // old, longer deadline would then be overstated.
    let mut rig = Rig::new(3);
    let lock = held(&mut rig);
    let start = rig.at(1_000);
    let short = Duration::from_secs(2);
    rig.engine.extend(start, lock, Some(short)).unwrap();
    rig.sent_commands();
    rig.engine.handle_timeout(rig.at(1_050));
    // The holder is told of the shorter deadline as soon as the extension is sent.
    let shortened = match rig.events().as_slice() {
        [
            Event::Shortened { lock: l, valid_until },
            Event::ExtendFailed { error: ExtendError::Unconfirmed { extended: 0, .. }, .. },
        ] if *l == lock => *valid_until,
        other => panic!("{other:?}"),
    };
    let valid = rig.engine.lock_info(lock).unwrap().valid_until.unwrap();
    assert_eq!(valid, shortened);
    assert!(valid <= start + short - drift(short, 0.01), "deadline {:?} after the shorter TTL", valid - rig.t0);
}

#[test]
fn ttl_is_counted_in_the_whole_milliseconds_sent() {
    // `PX` takes whole milliseconds; the validity must not count the fraction that was cut off.
    let mut rig = Rig::new(1);
    let ttl = Duration::from_micros(1_000_900);
    let mut r = req(&["r"]);
    r.ttl = ttl;
    let lock = rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
    let cmds = rig.sent_commands();
    assert_eq!(cmds[0][0][5], b"1000", "PX argument");
    rig.reply(rig.t0, 0, GRANT);
    let sent_ttl = Duration::from_millis(1000);
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, valid_until, .. }] if *l == lock => {
            assert_eq!(*valid_until, rig.t0 + sent_ttl - drift(sent_ttl, 0.01));
        }
        other => panic!("{other:?}"),
    }
    // The same for an extension.
    rig.engine.extend(rig.at(10), lock, Some(Duration::from_micros(2_000_700))).unwrap();
    let cmds = rig.sent_commands();
    assert_eq!(cmds[0][0].last().unwrap(), b"2000", "PEXPIRE argument");
    rig.reply(rig.at(11), 0, b":1\r\n");
    let two = Duration::from_secs(2);
    match rig.events().as_slice() {
        [Event::Extended { valid_until, .. }] => assert_eq!(*valid_until, rig.at(10) + two - drift(two, 0.01)),
        other => panic!("{other:?}"),
    }
}

// ----- acquire: quorum, early decisions, validity ------------------------------------------

/// For N = 1..9: grants one by one give `Acquired` exactly at the quorum; refusals one by
/// one give `AcquireFailed` exactly when the quorum became impossible.
#[test]
fn quorum_decides_early_for_one_to_nine_nodes() {
    for n in 1..=9usize {
        let q = n / 2 + 1;
        let mut rig = Rig::new(n);
        let lock = rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
        rig.sent_commands();
        for i in 0..n {
            rig.reply(rig.at(1), i, GRANT);
            let events = rig.events();
            if i + 1 < q {
                assert!(events.is_empty(), "n={n}: decided after {} grants: {events:?}", i + 1);
            } else if i + 1 == q {
                match events.as_slice() {
                    [Event::Acquired { lock: l, valid_until, attempts: 1, fence: None }] => {
                        assert_eq!(*l, lock);
                        assert_eq!(*valid_until, rig.t0 + TTL - drift(TTL, 0.01), "n={n}");
                    }
                    other => panic!("n={n}: {other:?}"),
                }
            } else {
                assert!(events.is_empty(), "n={n}: late grants are consumed silently: {events:?}");
            }
        }

        let mut rig = Rig::new(n);
        rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
        rig.sent_commands();
        let fatal = n - q + 1;
        for i in 0..n {
            rig.reply(rig.at(1), i, REFUSE);
            let events = rig.events();
            if i + 1 < fatal {
                assert!(events.is_empty(), "n={n}: decided after {} refusals", i + 1);
            } else if i + 1 == fatal {
                match events.as_slice() {
                    [Event::AcquireFailed { error: AcquireError::Held { votes, attempts: 1 }, .. }] => {
                        assert_eq!(votes.iter().filter(|v| **v == Vote::Refused).count(), fatal);
                        // The others had not answered yet: neither refusals nor failures.
                        assert_eq!(votes.iter().filter(|v| **v == Vote::Pending).count(), n - fatal, "{votes:?}");
                    }
                    other => panic!("n={n}: {other:?}"),
                }
                // Released on all N nodes, including those that have not answered.
                let cmds = rig.sent_commands();
                for (node, c) in cmds.iter().enumerate() {
                    assert!(is_release(&c[0]), "n={n}: node {node} got {:?}", c);
                }
            }
        }
    }
}

/// A release by either script: the general one (index 2) or the one-key release (index 4).
fn is_release(cmd: &[Vec<u8>]) -> bool {
    [2, 4].into_iter().any(|i| {
        let sha = redlease_core::script_digests()[i].as_bytes();
        let src = redlease_core::script_sources()[i].as_bytes();
        (cmd[0] == b"EVALSHA" && cmd[1] == sha) || (cmd[0] == b"EVAL" && cmd[1] == src)
    })
}

#[test]
fn acquire_goes_to_every_node_at_once_with_the_same_token() {
    let mut rig = Rig::new(5);
    let mut r = req(&["a", "b"]);
    r.fencing = true;
    rig.engine.acquire(rig.t0, &r, b"the-token").unwrap();
    let cmds = rig.sent_commands();
    let first = &cmds[0][0];
    for c in &cmds {
        assert_eq!(c.len(), 1);
        assert_eq!(&c[0], first, "same command to every node");
    }
    // EVALSHA sha 4 a b fence:a fence:b token ttl 2, no queue (a first attempt waits for
    // nobody yet, so no queue keys either), queue TTL and reservation unused
    let args: Vec<&[u8]> = first.iter().map(Vec::as_slice).collect();
    assert_eq!(args[0], b"EVALSHA");
    assert_eq!(
        &args[2..],
        &[
            b"4" as &[u8],
            b"a",
            b"b",
            b"redlease:fence:a",
            b"redlease:fence:b",
            b"the-token",
            b"10000",
            b"2",
            b"0",
            b"0",
            b"0"
        ]
    );
}

#[test]
fn a_grant_after_the_validity_is_too_slow_and_released_everywhere() {
    let mut rig = Rig::with(3, |c| c.node_timeout = Duration::from_secs(60));
    let ttl = Duration::from_millis(100);
    let mut r = req(&["r"]);
    r.ttl = ttl;
    rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
    rig.sent_commands();
    // The attempt's deadline is capped at its validity, however long the node timeout.
    let limit = rig.t0 + ttl - drift(ttl, 0.01);
    assert_eq!(rig.engine.poll_timeout(), Some(limit));
    rig.reply(rig.at(50), 0, GRANT);
    // The quorum arrives exactly at the validity deadline: nothing is left.
    rig.reply(limit, 1, GRANT);
    match rig.events().as_slice() {
        [Event::AcquireFailed { error: AcquireError::TooSlow { elapsed, ttl: t, attempts: 1 }, .. }] => {
            assert_eq!((*elapsed, *t), (limit - rig.t0, ttl));
        }
        other => panic!("{other:?}"),
    }
    assert!(rig.sent_commands().iter().all(|c| is_release(&c[0])));
}

#[test]
fn unreachable_nodes_are_reported_with_their_votes() {
    let mut rig = Rig::new(3);
    rig.engine.handle_disconnected(rig.t0, NodeId(1), "Connection reset by peer");
    assert!(matches!(rig.events().as_slice(), [Event::LinkFailed { error: LinkError::Lost { node: NodeId(1), .. } }]));
    rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.at(1), 0, b"-ERR out of memory\r\n");
    match rig.events().as_slice() {
        [Event::AcquireFailed { error: e @ AcquireError::Unreachable { votes, attempts: 1 }, .. }] => {
            assert_eq!(votes[0], Vote::Error("ERR out of memory".into()));
            assert_eq!(votes[1], Vote::Error("connection lost: Connection reset by peer".into()));
            assert_eq!(votes[2], Vote::Pending, "decided before node 2 answered");
            let text = e.to_string();
            assert!(text.contains("node #1 (redis://127.0.0.1:7001): connection lost: Connection reset"), "{text}");
            assert!(text.contains("node #0 (redis://127.0.0.1:7000): ERR out of memory"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // Node timeouts count as failures too.
    let mut rig = Rig::new(3);
    rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
    rig.reply(rig.at(1), 0, GRANT);
    rig.engine.handle_timeout(rig.at(49));
    assert!(rig.events().is_empty(), "the node timeout (50ms) has not passed");
    rig.engine.handle_timeout(rig.at(50));
    match rig.events().as_slice() {
        [Event::AcquireFailed { error: AcquireError::Unreachable { votes, .. }, .. }] => {
            assert_eq!(votes.as_slice(), &[Vote::Granted, Vote::TimedOut, Vote::TimedOut]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn down_nodes_that_rule_out_a_quorum_decide_at_once() {
    // 3 of 5 down: no quorum is possible, so the attempt fails when it is sent, without
    // waiting for the two live nodes; what they may grant is released right behind it.
    let mut rig = Rig::new(5);
    for i in 2..5 {
        rig.engine.handle_disconnected(rig.t0, NodeId(i), "closed");
    }
    assert_eq!(rig.events().len(), 3, "a link failure each");
    let lock = rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
    match rig.events().as_slice() {
        [Event::AcquireFailed { lock: l, error: AcquireError::Unreachable { votes, attempts: 1 } }] => {
            assert_eq!(*l, lock);
            let lost = Vote::Error("connection lost: closed".into());
            assert_eq!(votes.as_slice(), &[Vote::Pending, Vote::Pending, lost.clone(), lost.clone(), lost]);
        }
        other => panic!("{other:?}"),
    }
    let cmds = rig.sent_commands();
    for c in &cmds[..2] {
        assert_eq!(c.len(), 2, "the acquire, then its cleanup");
        assert!(is_release(&c[1]), "{c:?}");
    }
    assert_eq!(rig.engine.active_locks(), 0);

    // 2 of 5 down: a quorum is still possible, so the round waits for the live nodes.
    let mut rig = Rig::new(5);
    for i in 3..5 {
        rig.engine.handle_disconnected(rig.t0, NodeId(i), "closed");
    }
    assert_eq!(rig.events().len(), 2, "a link failure each");
    rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
    assert!(rig.events().is_empty());
    rig.sent_commands();
    rig.reply(rig.at(1), 0, GRANT);
    rig.reply(rig.at(1), 1, REFUSE);
    assert!(matches!(rig.events().as_slice(), [Event::AcquireFailed { error: AcquireError::Held { .. }, .. }]));

    // A release with a majority down is unreachable at once.
    let mut rig = Rig::new(3);
    let lock = held(&mut rig);
    rig.engine.handle_disconnected(rig.at(1), NodeId(1), "closed");
    rig.engine.handle_disconnected(rig.at(1), NodeId(2), "closed");
    rig.events();
    rig.engine.release(rig.at(2), lock).unwrap();
    match rig.events().as_slice() {
        [Event::Released { report, .. }] => {
            assert_eq!(report.outcome, ReleaseOutcome::Unreachable);
            assert_eq!((report.failed, report.pending), (2, 1), "{report:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn retries_wait_a_seeded_random_delay_and_release_in_between() {
    let delays = |seed: u64| {
        let mut rig = Rig::with(1, |c| {
            c.seed = Some(seed);
            c.retry = Retry::new(4, Duration::from_millis(10), Duration::from_millis(30));
        });
        let mut r = req(&["r"]);
        r.attempts = None;
        rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
        rig.sent_commands();
        let mut now = rig.t0;
        let mut out = Vec::new();
        for attempt in 1..=4 {
            // Only the cheap first attempt is cleaned up (its refusal cannot tell our own
            // leftover from another's key), and that cleanup is answered before the second
            // attempt; a refused script took nothing and gets no cleanup.
            let reply: &[u8] = match attempt {
                1 => REFUSE,
                2 => b":0\r\n:0\r\n",
                _ => b":0\r\n",
            };
            rig.reply(now, 0, reply);
            let cmds = rig.sent_commands();
            if attempt == 1 {
                assert!(is_release(&cmds[0][0]), "the cheap attempt is released first");
            } else if attempt == 4 {
                // Giving up, the waiter leaves the queue its refusals joined (leave = 1).
                assert!(is_release(&cmds[0][0]) && cmds[0][0][6] == b"1", "attempt 4: {:?}", cmds[0]);
            } else {
                assert!(cmds[0].is_empty(), "attempt {attempt}: nothing to clean up: {:?}", cmds[0]);
            }
            if attempt == 4 {
                break;
            }
            let next = rig.engine.poll_timeout().unwrap();
            let wait = next - now;
            assert!((Duration::from_millis(10)..=Duration::from_millis(30)).contains(&wait), "{wait:?}");
            out.push(wait);
            now = next;
            rig.engine.handle_timeout(now);
            assert_eq!(rig.sent_commands()[0].len(), 1, "the next attempt");
        }
        match rig.events().as_slice() {
            [Event::AcquireFailed { error: AcquireError::Held { attempts: 4, .. }, .. }] => {}
            other => panic!("{other:?}"),
        }
        out
    };
    assert_eq!(delays(1), delays(1), "the same seed gives the same schedule");
    assert_ne!(delays(1), delays(2), "another seed, another schedule");
}

#[test]
fn wait_bounds_the_retries() {
    let mut rig = Rig::with(1, |c| {
        c.retry = Retry::new(1, Duration::from_millis(10), Duration::from_millis(10));
    });
    let mut r = LockOptions::new("r", TTL);
    r.wait = Some(Duration::from_millis(35));
    rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
    let mut now = rig.t0;
    let mut attempt = 0;
    let events = loop {
        rig.sent_commands();
        // The cleanup of the cheap first attempt is answered before the second; refused
        // scripts took nothing and are not cleaned up.
        attempt += 1;
        rig.reply(
            now,
            0,
            if attempt == 1 {
                REFUSE
            } else if attempt == 2 {
                b":0\r\n:0\r\n"
            } else {
                b":0\r\n"
            },
        );
        let events = rig.events();
        match rig.engine.poll_timeout() {
            Some(t) if events.is_empty() => {
                now = t;
                rig.engine.handle_timeout(now);
            }
            _ => break events,
        }
    };
    match events.as_slice() {
        // The wait bound, not the attempts, ended it: a wait timeout carrying the last outcome.
        [Event::AcquireFailed { error: AcquireError::WaitTimeout { waited, attempts: 4, last }, .. }]
            if matches!(**last, AcquireError::Held { attempts: 4, .. }) && *waited == Duration::from_millis(30) => {}
        other => panic!("attempts at 0, 10, 20, 30 ms, then no retry fits in 35 ms: {other:?}"),
    }
}

// ----- fencing -----------------------------------------------------------------------------

#[test]
fn fencing_token_is_the_quorum_max_written_back_before_success() {
    let mut rig = Rig::new(3);
    let mut r = req(&["r"]);
    r.fencing = true;
    let lock = rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.at(1), 0, b":5\r\n");
    rig.reply(rig.at(1), 1, b":9\r\n");
    assert!(rig.events().is_empty(), "not before the fence round");
    let cmds = rig.sent_commands();
    for c in &cmds {
        assert_eq!(c[0].last().unwrap(), b"9", "the proposal goes to every node");
    }
    // Node 2's grant comes late: consumed, not waited for. Then the fence round: node 0 had
    // a larger counter and rejects; nodes 1 and 2 accept.
    rig.reply(rig.at(2), 2, b":1\r\n");
    rig.reply(rig.at(2), 0, b":12\r\n");
    rig.reply(rig.at(2), 1, b":8\r\n");
    assert!(rig.events().is_empty());
    rig.reply(rig.at(2), 2, b":3\r\n");
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, fence: Some(9), valid_until, .. }] => {
            assert_eq!(*l, lock);
            assert_eq!(*valid_until, rig.t0 + TTL - drift(TTL, 0.01), "the validity counts from the acquire's start");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.engine.lock_info(lock).unwrap().fence, Some(9));
}

#[test]
fn fencing_proposes_again_above_a_counter_that_got_there_first() {
    let mut rig = Rig::new(3);
    let mut r = req(&["r"]);
    r.fencing = true;
    rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.at(1), 0, b":3\r\n");
    rig.reply(rig.at(1), 1, b":3\r\n");
    rig.sent_commands();
    // Two nodes already have 11 (an earlier holder's token): the proposal 3 cannot hold.
    rig.reply(rig.at(2), 0, b":11\r\n");
    rig.reply(rig.at(2), 1, b":11\r\n");
    let cmds = rig.sent_commands();
    assert!(cmds.iter().all(|c| c.last().unwrap().last().unwrap() == b"12"), "{cmds:?}");
    // Node 2's answers to the acquire and to the first fence round are stale: ignored.
    rig.reply(rig.at(3), 2, b":1\r\n:0\r\n");
    rig.reply(rig.at(3), 0, b":11\r\n");
    rig.reply(rig.at(3), 1, b":11\r\n");
    match rig.events().as_slice() {
        [Event::Acquired { fence: Some(12), .. }] => {}
        other => panic!("{other:?}"),
    }
}

// ----- release -----------------------------------------------------------------------------

#[test]
fn release_outcomes_are_typed() {
    for (replies, expect) in [
        ([":1", ":1", ":0"], ReleaseOutcome::Released),
        ([":0", ":0", ":1"], ReleaseOutcome::NotHeld),
        ([":1", "-ERR x", "-ERR y"], ReleaseOutcome::Unreachable),
    ] {
        let mut rig = Rig::new(3);
        let lock = held(&mut rig);
        rig.engine.release(rig.at(5), lock).unwrap();
        let cmds = rig.sent_commands();
        assert!(cmds.iter().all(|c| c.len() == 1 && is_release(&c[0])), "on all N nodes");
        for (i, r) in replies.iter().enumerate() {
            rig.reply(rig.at(6), i, format!("{r}\r\n").as_bytes());
        }
        match rig.events().as_slice() {
            [Event::Released { lock: l, report }] if *l == lock => assert_eq!(report.outcome, expect, "{replies:?}"),
            other => panic!("{replies:?}: {other:?}"),
        }
        assert!(rig.engine.lock_info(lock).is_none(), "the id is free");
        assert_eq!(rig.engine.release(rig.at(7), lock), Err(Misuse::UnknownLock(lock)));
    }
}

// ----- extend ------------------------------------------------------------------------------

#[test]
fn extend_counts_from_its_own_start_and_never_deletes() {
    let mut rig = Rig::new(3);
    let lock = held(&mut rig);
    rig.engine.extend(rig.at(3_000), lock, None).unwrap();
    assert_eq!(rig.engine.lock_info(lock).unwrap().state, LockState::Extending);
    rig.sent_commands();
    rig.reply(rig.at(3_010), 0, b":1\r\n");
    rig.reply(rig.at(3_020), 1, b":1\r\n");
    match rig.events().as_slice() {
        [Event::Extended { lock: l, valid_until }] if *l == lock => {
            assert_eq!(*valid_until, rig.at(3_000) + TTL - drift(TTL, 0.01));
        }
        other => panic!("{other:?}"),
    }
    // Refused by a majority: lost, and nothing is deleted.
    rig.reply(rig.at(3_030), 2, b":1\r\n");
    rig.engine.extend(rig.at(4_000), lock, None).unwrap();
    rig.sent_commands();
    rig.reply(rig.at(4_001), 0, b":0\r\n");
    rig.reply(rig.at(4_001), 1, b":0\r\n");
    match rig.events().as_slice() {
        [
            Event::ExtendFailed { error: ExtendError::Lost { refused: 2, nodes: 3 }, .. },
            Event::Lost { reason: LostReason::Refused, .. },
        ] => {}
        other => panic!("{other:?}"),
    }
    rig.reply(rig.at(4_002), 2, b":1\r\n");
    rig.engine.handle_timeout(rig.at(60_000));
    assert!(rig.sent_commands().iter().all(Vec::is_empty), "a failed extend sends no delete");
    assert!(rig.engine.lock_info(lock).unwrap().lost);
}

#[test]
fn extend_is_capped_by_max_hold() {
    let mut rig = Rig::new(1);
    let mut r = req(&["r"]);
    r.max_hold = Some(Duration::from_secs(15));
    let lock = rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, GRANT);
    rig.events();
    // At 8 s only 7 s are left under the cap: the extension asks for 7 s, not 10.
    rig.engine.extend(rig.at(8_000), lock, None).unwrap();
    assert_eq!(rig.sent_commands()[0][0].last().unwrap(), b"7000");
    rig.reply(rig.at(8_001), 0, b":1\r\n");
    rig.events();
    assert_eq!(rig.engine.extend(rig.at(15_000), lock, None), Err(Misuse::CapReached(lock)));
}

#[test]
fn expiry_and_auto_extension_run_on_the_timer() {
    let mut rig = Rig::new(1);
    let mut r = req(&["r"]);
    r.auto_extend = true;
    let lock = rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, GRANT);
    rig.events();
    // About a third of the TTL in, the engine extends by itself.
    let third = rig.t0 + TTL / 3;
    assert_eq!(rig.engine.poll_timeout(), Some(third));
    rig.engine.handle_timeout(third);
    assert_eq!(rig.sent_commands()[0].len(), 1);
    // No answer: the automatic extension fails quietly (the silent node's connection is
    // recycled once its oldest request has waited the liveness bound), and the lock runs out.
    let valid = rig.engine.lock_info(lock).unwrap().valid_until.unwrap();
    let mut now = third;
    while let Some(t) = rig.engine.poll_timeout().filter(|&t| t <= valid) {
        now = t;
        rig.engine.handle_timeout(now);
        rig.sent_commands();
    }
    assert_eq!(now, valid);
    assert!(matches!(
        rig.events().as_slice(),
        [
            Event::LinkFailed { error: LinkError::Silent { handshake: false, .. } },
            Event::Lost { reason: LostReason::Expired, .. }
        ]
    ));
}

// ----- cancel, misuse ----------------------------------------------------------------------

#[test]
fn cancel_ends_an_acquisition_and_releases() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.at(1), 0, GRANT);
    rig.engine.cancel(rig.at(2), lock).unwrap();
    assert!(matches!(rig.events().as_slice(), [Event::AcquireFailed { error: AcquireError::Cancelled, .. }]));
    assert!(rig.sent_commands().iter().all(|c| is_release(&c[0])));
    // Late replies of the cancelled attempt change nothing.
    rig.reply(rig.at(3), 1, GRANT);
    rig.reply(rig.at(3), 2, GRANT);
    assert!(rig.events().is_empty());
    assert_eq!(rig.engine.cancel(rig.at(4), lock), Err(Misuse::UnknownLock(lock)));
}

#[test]
fn misuse_is_refused_at_once_with_a_fix() {
    let mut rig = Rig::new(3);
    let e = |r: &LockOptions, token: &[u8], rig: &mut Rig| rig.engine.acquire(rig.t0, r, token).unwrap_err();
    let mut r = req(&["r"]);
    r.ttl = Duration::ZERO;
    assert_eq!(e(&r, b"tok", &mut rig), Misuse::ZeroTtl);
    // TTL near the drift margin (ttl × 0.01 + 2 ms): 2 ms is not above it, 3 ms is.
    r.ttl = Duration::from_millis(2);
    let err = e(&r, b"tok", &mut rig);
    assert!(matches!(err, Misuse::TtlTooShort { .. }) && err.to_string().contains("longer ttl"), "{err}");
    r.ttl = Duration::from_micros(2_999);
    assert!(matches!(e(&r, b"tok", &mut rig), Misuse::TtlTooShort { .. }), "2.999 ms is sent as 2 ms");
    r.ttl = Duration::from_millis(3);
    let lock = rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
    rig.engine.cancel(rig.t0, lock).unwrap();
    r.ttl = Duration::from_secs(u64::MAX / 4);
    assert!(matches!(e(&r, b"tok", &mut rig), Misuse::TtlTooLong(_)));
    assert_eq!(e(&req(&[]), b"tok", &mut rig), Misuse::EmptyResource);
    assert_eq!(e(&req(&["a", ""]), b"tok", &mut rig), Misuse::EmptyResource);
    assert_eq!(e(&req(&["a"]), b"", &mut rig), Misuse::EmptyToken);
    // `:` marks a waited-for key's value and splits release messages.
    assert_eq!(e(&req(&["a"]), b"to:k", &mut rig), Misuse::ColonInToken);
    for m in [Misuse::ZeroTtl, Misuse::EmptyResource, Misuse::EmptyToken, Misuse::ColonInToken] {
        assert!(m.to_string().contains(':'), "says how to fix it: {m}");
    }
    // Unknown ids, and commands in the wrong phase.
    let lock = rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
    assert_eq!(rig.engine.release(rig.t0, lock), Err(Misuse::NotAcquired(lock)));
    assert_eq!(rig.engine.extend(rig.t0, lock, None), Err(Misuse::NotAcquired(lock)));
    let mut other = Rig::new(1);
    let stranger = held(&mut other);
    let _ = stranger;
    assert!(rig.engine.lock_info(lock).is_some());
    // N = 0 is a config error.
    let err = Engine::new(Config::new(Vec::new())).unwrap_err();
    assert_eq!(err, ConfigError::NoNodes);
    assert!(err.to_string().contains("redis://"), "{err}");
}

// ----- the link: handshake, NOSCRIPT, disconnects ------------------------------------------

#[test]
fn handshake_authenticates_selects_names_and_loads_scripts() {
    let mut config = Config::new(vec![NodeConfig::from_url("redis://alice:secret@127.0.0.1:7000/4").unwrap()]);
    config.client_name = Some("worker-7".into());
    let mut engine = Engine::new(config).unwrap();
    let t0 = std::time::Instant::now();
    engine.handle_connected(t0, NodeId(0));
    let sent = rig::commands(engine.poll_transmit(NodeId(0)).unwrap());
    let names: Vec<String> =
        sent.iter().map(|c| String::from_utf8_lossy(&c.concat()[..c[0].len()]).into_owned()).collect();
    assert_eq!(names, ["AUTH", "SELECT", "EVAL", "HELLO", "CLIENT", "SCRIPT", "SCRIPT", "SCRIPT", "SCRIPT", "SCRIPT"]);
    assert_eq!(sent[0], [b"AUTH".to_vec(), b"alice".to_vec(), b"secret".to_vec()]);
    assert_eq!(sent[1], [b"SELECT".to_vec(), b"4".to_vec()]);
    // The lock format check, in the selected database.
    assert_eq!(
        &sent[2][2..],
        [b"1".to_vec(), b"redlease:format".to_vec(), redlease_core::LOCK_FORMAT.as_bytes().to_vec()]
    );
    // After AUTH: a server that requires a password refuses HELLO before it.
    assert_eq!(sent[3], [b"HELLO".to_vec(), b"3".to_vec()]);
    assert_eq!(sent[4], [b"CLIENT".to_vec(), b"SETNAME".to_vec(), b"worker-7".to_vec()]);
    for (i, src) in redlease_core::script_sources().iter().enumerate() {
        assert_eq!(sent[5 + i][2], src.as_bytes());
    }
    // A wrong password: a typed error naming the node, and later votes carry it.
    engine.handle_data(t0, NodeId(0), b"-WRONGPASS invalid username-password pair\r\n");
    match engine.poll_event() {
        Some(Event::LinkFailed { error: e @ LinkError::Handshake { node: NodeId(0), step: "AUTH", .. } }) => {
            assert!(e.to_string().contains("WRONGPASS"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let mut r = req(&["r"]);
    r.attempts = Some(1);
    engine.acquire(t0, &r, b"tok").unwrap();
    match engine.poll_event() {
        // A refused password is a configuration problem, not an unreachable node.
        Some(Event::AcquireFailed { error: AcquireError::Misconfigured { votes, .. }, .. }) => {
            assert!(matches!(&votes[0], Vote::Misconfigured(m) if m.contains("WRONGPASS")), "{votes:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn noscript_falls_back_to_eval() {
    let mut rig = Rig::new(1);
    // Two keys: the acquire is a script (one key would take the cheap `SET NX PX`).
    let lock = rig.engine.acquire(rig.t0, &req(&["r", "s"]), b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.at(1), 0, b"-NOSCRIPT No matching script. Please use EVAL.\r\n");
    let cmds = rig.sent_commands();
    assert_eq!(cmds[0][0][0], b"EVAL");
    assert_eq!(cmds[0][0][1], redlease_core::script_sources()[0].as_bytes());
    rig.reply(rig.at(2), 0, b":1\r\n");
    assert!(matches!(rig.events().as_slice(), [Event::Acquired { lock: l, .. }] if *l == lock));
}

#[test]
fn a_dropped_connection_counts_as_down_and_replies_match_by_position() {
    let mut rig = Rig::new(3);
    // Two locks pipelined on the same links: replies come back in order.
    let a = rig.engine.acquire(rig.t0, &req(&["a"]), b"ta").unwrap();
    let b = rig.engine.acquire(rig.t0, &req(&["b"]), b"tb").unwrap();
    assert_eq!(rig.engine.in_flight(NodeId(0)), 2);
    rig.sent_commands();
    rig.reply(rig.at(1), 0, b"+OK\r\n$-1\r\n");
    rig.engine.handle_disconnected(rig.at(1), NodeId(1), "closed");
    rig.reply(rig.at(1), 2, b"+OK\r");
    rig.reply(rig.at(1), 2, b"\n$-1\r\n");
    let events = rig.events();
    assert!(events.iter().any(|e| matches!(e, Event::Acquired { lock, .. } if *lock == a)), "{events:?}");
    assert!(
        events.iter().any(|e| matches!(e,
            Event::AcquireFailed { lock, error: AcquireError::Held { votes, .. } } if *lock == b && votes[1] == Vote::Error("connection lost: closed".into()))),
        "{events:?}"
    );
    assert!(!rig.engine.is_connected(NodeId(1)));
    assert_eq!(rig.engine.active_locks(), 1);
}

fn is_acquire_script(cmd: &[Vec<u8>]) -> bool {
    let sha = redlease_core::script_digests()[0].as_bytes();
    let src = redlease_core::script_sources()[0].as_bytes();
    (cmd[0] == b"EVALSHA" && cmd[1] == sha) || (cmd[0] == b"EVAL" && cmd[1] == src)
}

#[test]
fn one_key_without_fencing_takes_the_cheap_set_nx_px_on_its_first_attempt() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &req(&["r"]), b"tok").unwrap();
    let cmds = rig.sent_commands();
    for c in &cmds {
        let args: Vec<&[u8]> = c[0].iter().map(Vec::as_slice).collect();
        assert_eq!(args, [b"SET" as &[u8], b"r", b"tok", b"NX", b"PX", b"10000"]);
    }
    // +OK sets the key, nil finds it taken: a quorum of +OK grants, with the full validity.
    rig.reply(rig.at(1), 0, b"+OK\r\n");
    rig.reply(rig.at(1), 1, b"$-1\r\n");
    rig.reply(rig.at(2), 2, b"+OK\r\n");
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, valid_until, attempts: 1, fence: None }] if *l == lock => {
            assert_eq!(*valid_until, rig.t0 + TTL - drift(TTL, 0.01));
        }
        other => panic!("{other:?}"),
    }
    // Several keys, or fencing, take the script.
    for (keys, fencing) in [(&["a", "b"][..], false), (&["a"][..], true)] {
        let mut r = req(keys);
        r.fencing = fencing;
        rig.engine.acquire(rig.at(3), &r, b"t2").unwrap();
        let cmds = rig.sent_commands();
        assert!(is_acquire_script(&cmds[0][0]), "{keys:?} fencing {fencing}: {:?}", cmds[0][0]);
    }
}

#[test]
fn a_failed_script_attempt_is_cleaned_up_only_where_it_may_have_taken_something() {
    // Two keys take the script: it grants our own token's keys (a re-entry) and checks every
    // key before it sets any, so a node that refused wrote nothing and needs no cleanup. The
    // node that granted, and one whose vote is still pending, do.
    let mut rig = Rig::new(5);
    rig.engine.acquire(rig.t0, &req(&["a", "b"]), b"tok").unwrap();
    let cmds = rig.sent_commands();
    assert!(is_acquire_script(&cmds[0][0]), "{:?}", cmds[0][0]);
    rig.reply(rig.at(1), 0, b":1\r\n");
    for i in 1..4 {
        rig.reply(rig.at(1), i, b":0\r\n");
    }
    assert!(matches!(rig.events().as_slice(), [Event::AcquireFailed { error: AcquireError::Held { .. }, .. }]));
    let cmds = rig.sent_commands();
    for (node, c) in cmds.iter().enumerate() {
        match node {
            0 | 4 => assert!(c.len() == 1 && is_release(&c[0]), "node {node} (granted / pending): {c:?}"),
            _ => assert!(c.is_empty(), "node {node} refused: nothing to clean up, got {c:?}"),
        }
    }
}

#[test]
fn a_leftover_of_our_own_token_never_blocks_the_retry() {
    // The cheap path cannot see that a taken key holds our own token (a leftover of an
    // earlier attempt with the same token): the attempt fails, the cleanup release deletes
    // the leftover (compare-and-delete on our token), and the retry re-enters by script.
    let mut rig = Rig::with(3, |c| {
        c.retry = Retry::new(3, Duration::from_millis(10), Duration::from_millis(10));
    });
    let mut r = req(&["r"]);
    r.attempts = None;
    let lock = rig.engine.acquire(rig.t0, &r, b"tok").unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.at(1), i, b"$-1\r\n");
    }
    let cmds = rig.sent_commands();
    for c in &cmds {
        assert!(is_release(&c[0]), "cleanup after the failed attempt: {:?}", c[0]);
        // EVAL source 2 key queue tok (the one-key release)
        assert_eq!(c[0][5], b"tok", "the cleanup deletes only our token's keys");
    }
    let next = rig.engine.poll_timeout().unwrap();
    rig.engine.handle_timeout(next);
    let cmds = rig.sent_commands();
    for c in &cmds {
        assert!(is_acquire_script(&c[0]), "the retry re-enters by script: {:?}", c[0]);
    }
    for i in 0..3 {
        // The cleanup's reply, then the script's grant (a re-entry sets the full TTL again).
        rig.reply(next, i, b":1\r\n:1\r\n");
    }
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, valid_until, attempts: 2, .. }] if *l == lock => {
            assert_eq!(*valid_until, next + TTL - drift(TTL, 0.01), "validity from the retry's start");
        }
        other => panic!("{other:?}"),
    }
}
