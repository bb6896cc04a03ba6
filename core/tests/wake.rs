//! Wake-on-release in the engine, on a manual clock: the subscription goes out before the
//! attempt it waits behind, a quorum of release messages cuts the retry delay short, and what
//! must not wake a waiter does not.

mod rig;

use std::time::Duration;

use redlease_core::{Event, LockOptions, NodeId, Retry, WakeState};
use rig::Rig;

const SLOW: Duration = Duration::from_secs(5);

/// Three nodes with wake-ups on and a retry delay of 5 s: only a wake-up retries sooner.
fn rig() -> Rig {
    Rig::with(3, |c| {
        c.wake = true;
        c.retry = Retry::new(100, SLOW, SLOW);
    })
}

fn names(cmds: &[Vec<Vec<u8>>]) -> Vec<String> {
    cmds.iter().map(|c| String::from_utf8_lossy(&c[0]).into_owned()).collect()
}

fn message(channel: &str, token: &str) -> Vec<u8> {
    format!(">3\r\n$7\r\nmessage\r\n${}\r\n{channel}\r\n${}\r\n{token}\r\n", channel.len(), token.len()).into_bytes()
}

/// Acquire `r` and have every node refuse twice: the waiter is subscribed and waiting.
fn waiting(rig: &mut Rig) {
    rig.engine.acquire(rig.t0, &LockOptions::new("r", Duration::from_secs(10)), b"me").unwrap();
    for (i, cmds) in rig.sent_commands().iter().enumerate() {
        // The first attempt is the cheap `SET NX PX` (one unfenced resource).
        assert_eq!(names(cmds), ["SET"], "node {i}: the first attempt alone");
    }
    for i in 0..3 {
        rig.reply(rig.t0, i, b"$-1\r\n");
    }
    for (i, cmds) in rig.sent_commands().iter().enumerate() {
        // The cleanup release, then subscribed before the attempt it waits behind, on the
        // same connection.
        assert_eq!(names(cmds), ["EVAL", "SUBSCRIBE", "EVALSHA"], "node {i}");
        assert_eq!(cmds[1][1], b"redlease:wake:r");
        // EVALSHA sha 2 r redlease:queue:r me ttl 1, queue mode 1: a refusal joins r's queue at
        // the back.
        assert_eq!(cmds[2][4], b"redlease:queue:r", "node {i}: the queue is one of the script's keys");
        assert_eq!(cmds[2][8], b"1", "node {i}: the attempt joins the queue");
    }
    for i in 0..3 {
        rig.reply(rig.t0, i, b":0\r\n>3\r\n$9\r\nsubscribe\r\n$15\r\nredlease:wake:r\r\n:1\r\n:0\r\n");
    }
    // Nodes 0 and 1 refused the script, which took nothing there: no cleanup. Node 2 had
    // not answered when their refusals decided the round, so it is cleaned up.
    let cmds = rig.sent_commands();
    assert!(cmds[0].is_empty() && cmds[1].is_empty(), "{:?}", names(&cmds[0]));
    assert_eq!(names(&cmds[2]), ["EVAL"], "the second cleanup, where the vote was pending");
    rig.reply(rig.t0, 2, b":0\r\n");
    assert!(rig.events().is_empty());
    assert!(rig.engine.poll_timeout().unwrap() >= rig.t0 + SLOW, "only the fallback is armed");
}

#[test]
fn a_quorum_of_release_messages_retries_at_once_and_the_grant_unsubscribes_before_its_next_command() {
    let mut rig = rig();
    for i in 0..3 {
        assert_eq!(rig.engine.wake_state(NodeId(i)), Some(&WakeState::On));
    }
    waiting(&mut rig);
    let t = rig.at(100);
    rig.reply(t, 0, &message("redlease:wake:r", "other"));
    assert!(rig.engine.poll_timeout().unwrap() >= rig.t0 + SLOW, "one node of three is no quorum");
    rig.reply(t, 2, &message("redlease:wake:r", "other"));
    let due = rig.engine.poll_timeout().unwrap();
    assert!(due <= t + Duration::from_millis(1), "woken: retries within the stagger, not after 5 s");
    rig.engine.handle_timeout(due);
    for cmds in rig.sent_commands() {
        assert_eq!(names(&cmds), ["EVALSHA"]);
    }
    for i in 0..3 {
        rig.reply(due, i, b":1\r\n");
    }
    let [Event::Acquired { lock, attempts: 3, .. }] = rig.events()[..] else { panic!("granted at the third attempt") };
    for cmds in rig.sent_commands() {
        assert_eq!(names(&cmds), ["UNSUBSCRIBE"], "no waiter left on r: unsubscribed at once");
    }
    assert!(rig.engine.footprint().subscriptions == 0, "{}", rig.engine.footprint());
    rig.engine.release(due, lock).unwrap();
    for cmds in rig.sent_commands() {
        assert_eq!(names(&cmds), ["EVALSHA"]);
    }
}

/// Acquire `r`, have every node refuse the cheap attempt, then answer the queued attempt with
/// `queued` from each node, and any cleanup with `:0`.
fn refused_with(rig: &mut Rig, queued: [&str; 3]) {
    rig.engine.acquire(rig.t0, &LockOptions::new("r", Duration::from_secs(10)), b"me").unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, b"$-1\r\n");
    }
    rig.sent_commands();
    for (i, refusal) in queued.iter().enumerate() {
        // The cleanup's answer, the subscription's, the attempt's.
        let reply = format!(":0\r\n>3\r\n$9\r\nsubscribe\r\n$15\r\nredlease:wake:r\r\n:1\r\n{refusal}\r\n");
        rig.reply(rig.t0, i, reply.as_bytes());
    }
    // Node 2's answer came after the two that decided the round: its grant-or-not is cleaned
    // up.
    let cmds = rig.sent_commands();
    for (i, cmds) in cmds.iter().enumerate() {
        for _ in cmds {
            rig.reply(rig.t0, i, b":0\r\n");
        }
    }
    assert!(rig.events().is_empty());
}

#[test]
fn a_waiter_retries_once_the_keys_that_refused_it_expired_on_a_quorum() {
    // The holder's key has 0.7 s, 0.9 s and 3 s left: a quorum is free after 0.9 s (plus a
    // millisecond and a stagger), not after the 5 s retry delay. Nobody announces an expiry: a
    // holder that crashed is replaced within its TTL.
    let mut rig = rig();
    refused_with(&mut rig, ["+HELD 700", "+HELD 900", "+HELD 3000"]);
    let due = rig.engine.poll_timeout().unwrap();
    let after = due - rig.t0;
    assert!(after >= Duration::from_millis(901) && after <= Duration::from_millis(902), "retries after {after:?}");
    rig.engine.handle_timeout(due);
    for cmds in rig.sent_commands() {
        assert_eq!(names(&cmds), ["EVALSHA"], "the next attempt");
    }

    // Keys without a TTL (or an older server's plain refusal) on a quorum: the retry delay.
    let mut unknown = self::rig();
    refused_with(&mut unknown, ["+HELD 700", "+HELD", ":0"]);
    assert!(unknown.engine.poll_timeout().unwrap() >= unknown.t0 + SLOW, "only the fallback is armed");
}

#[test]
fn own_cleanups_other_channels_and_messages_before_the_reply_do_not_wake() {
    let mut rig = rig();
    waiting(&mut rig);
    let t = rig.at(100);
    // Our own cleanup release, and a release of another resource.
    for i in 0..3 {
        rig.reply(t, i, &message("redlease:wake:r", "me"));
        rig.reply(t, i, &message("redlease:wake:q", "other"));
    }
    assert!(rig.engine.poll_timeout().unwrap() >= rig.t0 + SLOW);
    // The fallback attempt: a release message that arrives before a node's reply announced a
    // release the attempt itself saw; it does not count.
    rig.engine.handle_timeout(rig.t0 + SLOW);
    rig.sent_commands();
    let t = rig.t0 + SLOW;
    for i in 0..3 {
        rig.reply(t, i, &message("redlease:wake:r", "other"));
        rig.reply(t, i, b":0\r\n");
    }
    let cmds = rig.sent_commands();
    assert_eq!(names(&cmds[2]), ["EVAL"], "only node 2, which had not answered when the round was decided");
    rig.reply(t, 2, b":0\r\n"); // its cleanup
    assert!(rig.engine.poll_timeout().unwrap() >= t + SLOW, "the messages predate the refusals");
}

#[test]
fn a_node_that_refuses_hello_is_polled_and_says_why() {
    let mut rig = Rig::unconnected(1, |c| c.wake = true);
    rig.engine.handle_connected(rig.t0, NodeId(0));
    rig.sent(0);
    rig.reply(rig.t0, 0, b"$1\r\n2\r\n"); // the lock format check
    rig.reply(rig.t0, 0, b"-ERR unknown command 'HELLO'\r\n");
    match rig.engine.wake_state(NodeId(0)) {
        Some(WakeState::Polling { reason }) => assert!(reason.contains("unknown command"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // The rest of the handshake goes on: the node is usable, and waiters poll it.
    let sha = redlease_core::script_digests();
    for d in sha {
        rig.reply(rig.t0, 0, format!("${}\r\n{d}\r\n", d.len()).as_bytes());
    }
    // Without HELLO's mode, INFO says the node is no Redis Cluster.
    assert_eq!(names(&rig::commands(&rig.sent(0))), ["INFO"]);
    rig.reply(rig.t0, 0, b"$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n");
    assert!(rig.engine.is_ready(NodeId(0)));
    rig.engine.acquire(rig.t0, &LockOptions::new("r", Duration::from_secs(10)).attempts(3), b"me").unwrap();
    rig.sent(0);
    rig.reply(rig.t0, 0, b"$-1\r\n"); // SET NX refused
    let cmds = rig::commands(&rig.sent(0));
    assert_eq!(names(&cmds), ["EVAL"], "the cleanup alone: no SUBSCRIBE on a RESP2 connection, no immediate retry");
}

/// The arguments after the keys and token of each node's commands, as text.
fn tails(cmds: &[Vec<Vec<u8>>], skip: usize) -> Vec<Vec<String>> {
    cmds.iter()
        .map(|c| c.get(skip..).unwrap_or_default().iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect())
        .collect()
}

/// A release message that names the next waiter goes to that waiter at once: no stagger, no
/// timer. Refused anyway (a newcomer was faster), it rejoins the queue at the front.
#[test]
fn the_waiter_a_quorum_names_next_retries_at_once_and_keeps_its_place() {
    let mut rig = rig();
    waiting(&mut rig);
    let t = rig.at(100);
    rig.reply(t, 0, &message("redlease:wake:r", "other:me"));
    assert!(rig.sent_commands().iter().all(Vec::is_empty), "one node of three is no quorum");
    rig.reply(t, 1, &message("redlease:wake:r", "other:me"));
    let cmds = rig.sent_commands();
    for c in &cmds {
        assert_eq!(names(c), ["EVALSHA"], "named by a quorum: the attempt goes out from the message itself");
        // Named, it is off the head of those nodes' queues: refused, it rejoins at the front
        // (lock keys, wait mode, queue TTL, its reservation: it listens, so the shortest
        // fallback delay).
        assert_eq!(tails(c, 7)[0], ["1", "2", "20000", "5000"]);
    }
    // Refused everywhere (someone else was faster): a cleanup where the vote was still
    // pending when the round was decided (node 2; the refusals took nothing), then the
    // fallback delay; the next attempt goes to the front of the queue.
    for i in 0..3 {
        rig.reply(t, i, b":0\r\n");
    }
    let cleanups = rig.sent_commands();
    assert!(cleanups[0].is_empty() && cleanups[1].is_empty(), "{cleanups:?}");
    assert_eq!(names(&cleanups[2]), ["EVAL"], "{cleanups:?}");
    assert_eq!(cleanups[2][0][1], redlease_core::script_sources()[4].as_bytes(), "the one-key release");
    assert_eq!(tails(&cleanups[2], 3)[0], ["r", "redlease:queue:r", "me"], "a cleanup that stays in the queue");
    rig.reply(t, 2, b":0\r\n");
    assert!(rig.engine.poll_timeout().unwrap() >= t + SLOW, "named last time, but nobody named it now");
    rig.engine.handle_timeout(t + SLOW);
    for c in rig.sent_commands() {
        assert_eq!(tails(&c, 7)[0][1], "1", "back to keeping its place");
    }
}

/// Release messages that name another waiter leave this one asleep: the named one goes
/// first, and this one keeps its fallback.
#[test]
fn a_release_that_names_another_waiter_does_not_wake_this_one() {
    let mut rig = rig();
    waiting(&mut rig);
    let t = rig.at(100);
    for i in 0..3 {
        rig.reply(t, i, &message("redlease:wake:r", "other:third"));
    }
    assert!(rig.sent_commands().iter().all(Vec::is_empty));
    assert!(rig.engine.poll_timeout().unwrap() >= rig.t0 + SLOW, "only the fallback is armed");
}

/// An acquisition that gives up leaves the queues it joined; one that never joined sends the
/// plain cleanup. A granted lock that had queued leaves them again at its release (a node that
/// refused its last attempt still lists it).
#[test]
fn giving_up_and_releasing_leave_the_queues() {
    let mut r = Rig::with(3, |c| {
        c.wake = true;
        c.retry = Retry::new(3, SLOW, SLOW);
    });
    waiting(&mut r);
    r.engine.handle_timeout(r.t0 + SLOW);
    r.sent_commands();
    for i in 0..3 {
        r.reply(r.t0 + SLOW, i, b":0\r\n");
    }
    let cleanups = r.sent_commands();
    assert_eq!(
        tails(&cleanups[0], 3)[0],
        ["r", "redlease:queue:r", "me", "1", "5000"],
        "the last cleanup leaves the queue"
    );
    assert!(matches!(r.events().as_slice(), [Event::AcquireFailed { .. }]));

    let mut rig = rig();
    waiting(&mut rig);
    let t = rig.at(100);
    for i in 0..3 {
        rig.reply(t, i, &message("redlease:wake:r", "other:me"));
    }
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(t, i, b":1\r\n");
    }
    let [Event::Acquired { lock, .. }] = rig.events()[..] else { panic!("granted") };
    rig.engine.release(t, lock).unwrap();
    for c in rig.sent_commands().iter() {
        assert_eq!(names(c), ["UNSUBSCRIBE", "EVALSHA"]);
        assert_eq!(tails(&c[1..], 3)[0], ["r", "redlease:queue:r", "me", "1", "5000"], "the release leaves the queue");
    }
}

/// A lock of several keys waits like any other: its first attempt neither marks nor queues
/// (wait mode `0`, no queue keys); refused, it subscribes to both keys' channels and its next
/// attempt marks the keys that refuse it and joins both keys' queues (mode `1`, the queues in
/// `KEYS`), and its release leaves them.
#[test]
fn a_waiter_on_several_keys_queues_on_each() {
    let mut rig = rig();
    let both = LockOptions::new("a", Duration::from_secs(10)).resources(["b"]);
    rig.engine.acquire(rig.t0, &both, b"me").unwrap();
    for c in rig.sent_commands().iter() {
        assert_eq!(names(c), ["EVALSHA"]);
        assert_eq!(
            tails(c, 2)[0],
            ["2", "a", "b", "me", "10000", "2", "0", "0", "0"],
            "the first attempt: no wait mode"
        );
    }
    for i in 0..3 {
        rig.reply(rig.t0, i, b":0\r\n");
    }
    for (i, c) in rig.sent_commands().iter().enumerate() {
        // Nodes 0 and 1 decided the round; node 2, pending then, is cleaned up.
        let c = &c[usize::from(i == 2)..];
        assert_eq!(names(c), ["SUBSCRIBE", "SUBSCRIBE", "EVALSHA"], "node {i}");
        assert_eq!(
            tails(c, 2)[2],
            ["4", "a", "b", "redlease:queue:a", "redlease:queue:b", "me", "10000", "2", "1", "20000", "5000"],
            "node {i}: queues on both keys"
        );
    }
    let subscribed = |ch: &str| format!(">3\r\n$9\r\nsubscribe\r\n${}\r\n{ch}\r\n:1\r\n", ch.len()).into_bytes();
    for i in 0..3 {
        let mut bytes = if i == 2 { b":0\r\n".to_vec() } else { Vec::new() };
        bytes.extend(subscribed("redlease:wake:a"));
        bytes.extend(subscribed("redlease:wake:b"));
        bytes.extend_from_slice(b":1\r\n");
        rig.reply(rig.t0, i, &bytes);
    }
    let [Event::Acquired { lock, .. }] = rig.events()[..] else { panic!("granted") };
    rig.engine.release(rig.t0, lock).unwrap();
    for c in rig.sent_commands().iter() {
        assert_eq!(names(c), ["UNSUBSCRIBE", "UNSUBSCRIBE", "EVALSHA"]);
        assert_eq!(
            tails(&c[2..], 2)[0],
            ["4", "a", "b", "redlease:queue:a", "redlease:queue:b", "me", "1", "5000"],
            "the release leaves both queues"
        );
    }
}

/// A link that is too far behind when a waiter subscribes gets the `SUBSCRIBE` once it takes
/// requests again, ahead of the waiter's next attempt there (it was never sent before).
#[test]
fn a_subscription_skipped_on_a_backlogged_link_goes_out_when_it_catches_up() {
    let mut rig = rig();
    // 4,096 acquisitions of other resources that node 0 never answers: its backlog is full.
    let backlog = 4096;
    for k in 0..backlog {
        rig.engine
            .acquire(rig.t0, &LockOptions::new(format!("k{k}"), Duration::from_secs(10)).attempts(1), b"o")
            .unwrap();
    }
    for i in 1..3 {
        rig.reply(rig.t0, i, &b"+OK\r\n".repeat(backlog));
    }
    rig.events();
    rig.sent_commands();
    // A waiter on r, which nodes 1 and 2 refuse; node 0 votes down (its backlog is full).
    rig.engine.acquire(rig.t0, &LockOptions::new("r", Duration::from_secs(10)), b"me").unwrap();
    rig.sent_commands();
    for i in 1..3 {
        rig.reply(rig.t0, i, b"$-1\r\n");
    }
    rig.events();
    let cmds = rig.sent_commands();
    // Node 0 took no part: no SUBSCRIBE was sent there; the others subscribed.
    assert!(cmds[0].is_empty(), "{:?}", names(&cmds[0]));
    assert_eq!(names(&cmds[1]), ["EVAL", "SUBSCRIBE", "EVALSHA"]);
    for i in 1..3 {
        rig.reply(rig.t0, i, b":0\r\n>3\r\n$9\r\nsubscribe\r\n$15\r\nredlease:wake:r\r\n:1\r\n:0\r\n");
    }
    rig.events();
    rig.sent_commands();
    // Node 0 answers its backlog (the grants' releases were sent to it meanwhile and are
    // answered too), then the fallback attempt comes.
    let t = rig.at(50);
    rig.reply(t, 0, &b"+OK\r\n".repeat(backlog));
    rig.events();
    // It subscribes as soon as it caught up, ahead of the attempt it waits behind.
    let mut node0 = rig.sent_commands().swap_remove(0);
    rig.engine.handle_timeout(rig.t0 + SLOW);
    let cmds = rig.sent_commands();
    node0.extend(cmds[0].iter().cloned());
    let at = |name: &[u8]| node0.iter().position(|c| c[0] == name);
    let subscribe = at(b"SUBSCRIBE").expect("subscribed once it caught up");
    assert_eq!(node0[subscribe][1], b"redlease:wake:r");
    assert!(
        at(b"EVALSHA").is_none_or(|a| a > subscribe),
        "subscribed before any attempt it waits behind: {:?}",
        names(&node0)
    );
    let node1 = names(&cmds[1]);
    assert!(
        node1.iter().any(|n| n == "EVALSHA") && !node1.iter().any(|n| n == "SUBSCRIBE"),
        "node 1 was subscribed already: {node1:?}"
    );
}

/// After a reconnect, what is issued while the handshake's `HELLO` is unanswered waits for it:
/// the re-subscription goes out first, then the waiter's attempt, so that no release falls in
/// between unheard.
#[test]
fn after_a_reconnect_the_subscription_goes_out_before_the_waiters_next_attempt() {
    let mut rig = rig();
    waiting(&mut rig);
    let t = rig.at(10);
    rig.engine.handle_disconnected(t, NodeId(0), "reset by peer");
    let due = rig.engine.poll_timeout().unwrap();
    let back = rig.engine.poll_connect(due).or_else(|| {
        rig.engine.handle_timeout(due);
        rig.engine.poll_connect(due)
    });
    assert_eq!(back, Some(NodeId(0)));
    rig.engine.handle_connected(due, NodeId(0));
    let handshake = rig::commands(&rig.sent(0));
    assert_eq!(names(&handshake)[..2], ["EVAL", "HELLO"]);
    // Nodes 1 and 2 announce a release: the waiter retries while node 0's handshake is still
    // unanswered.
    for i in 1..3 {
        rig.reply(due, i, &message("redlease:wake:r", "other"));
    }
    let soon = rig.engine.poll_timeout().unwrap();
    assert!(soon < rig.t0 + SLOW, "woken by the messages");
    rig.engine.handle_timeout(soon);
    let others = rig.sent_commands();
    assert!(others[0].is_empty(), "held behind HELLO");
    assert_eq!(names(&others[1]), ["EVALSHA"], "the attempt went to the other nodes");
    // The format check's answer, then HELLO's: the subscription, then the attempt.
    rig.reply(soon, 0, b"$1\r\n2\r\n%1\r\n$5\r\nproto\r\n:3\r\n");
    let cmds = rig::commands(&rig.sent(0));
    assert_eq!(names(&cmds), ["SUBSCRIBE", "EVALSHA"]);
}

/// A resource in the waiter queues' space, or the format key, is refused at once; so is a
/// fence prefix that overlaps either.
#[test]
fn names_redlease_keeps_for_itself_are_refused() {
    let mut rig = rig();
    for name in ["redlease:queue:orders", "redlease:format"] {
        let err = rig.engine.acquire(rig.t0, &LockOptions::new(name, Duration::from_secs(1)), b"me").unwrap_err();
        assert!(matches!(err, redlease_core::Misuse::ReservedResource { .. }), "{name}: {err}");
        assert!(err.to_string().contains(name), "{err}");
    }
    for prefix in ["redlease:queue:", "redlease:", "redlease:queue:x:", "redlease:format"] {
        let config = redlease_core::Config::new(vec![redlease_core::NodeConfig::new("h", 1)]).fence_prefix(prefix);
        let err = redlease_core::Engine::new(config).unwrap_err();
        assert!(matches!(err, redlease_core::ConfigError::FencePrefixReserved { .. }), "{prefix}: {err}");
        assert!(err.to_string().contains("fence_prefix"), "{err}");
    }
}

/// A node whose locks are in another format fails the handshake as misconfigured, naming both
/// formats: clients of two formats never share a node unnoticed.
#[test]
fn a_node_in_another_lock_format_is_refused_as_misconfigured() {
    let mut rig = Rig::unconnected(1, |c| c.wake = true);
    rig.engine.handle_connected(rig.t0, NodeId(0));
    rig.sent(0);
    rig.reply(rig.t0, 0, b"$1\r\n3\r\n");
    let events = rig.events();
    let Some(Event::LinkFailed { error }) = events.first() else { panic!("{events:?}") };
    assert_eq!(error.fault(), redlease_core::Fault::Misconfigured, "{error}");
    let text = error.to_string();
    assert!(text.contains("format 3") && text.contains("format 2") && text.contains("redlease:format"), "{text}");
}
