//! Grants acknowledged by replicas: a node with `min_replicas` follows every grant, extension
//! and fencing write-back with `WAIT`, and its vote counts only once enough replicas have the
//! write. Every test drives one engine on simulated time.

mod rig;

use std::time::Duration;

use redlease_core::{
    AcquireError, ConfigError, Event, LinkError, LockOptions, NodeConfig, NodeId, REPLICAS_CHECK, ReleaseOutcome, Vote,
};
use rig::{ROLE_NO_REPLICA, ROLE_ONE_REPLICA, Rig, handshake_reply};

const TTL: Duration = Duration::from_secs(10);
const GRANT: &[u8] = b"+OK\r\n";
const TAKEN: &[u8] = b"$-1\r\n";

/// Three nodes; node 0 asks for one replica within 20 ms.
fn rig() -> Rig {
    Rig::with(3, |c| c.nodes[0] = c.nodes[0].clone().min_replicas(1, Duration::from_millis(20)))
}

fn is_wait(cmd: &[Vec<u8>]) -> bool {
    cmd.len() == 3 && cmd[0] == b"WAIT" && cmd[1] == b"1" && cmd[2] == b"20"
}

#[test]
fn a_grant_counts_once_the_replica_has_it() {
    let mut rig = rig();
    let lock = rig.engine.acquire(rig.t0, &LockOptions::new("r", TTL).attempts(1), b"tok").unwrap();
    let sent = rig.sent_commands();
    // Node 0's SET is followed by WAIT on the same connection; the others get the SET alone.
    assert_eq!(sent[0].len(), 2, "{:?}", sent[0]);
    assert!(sent[0][0][0] == b"SET" && is_wait(&sent[0][1]), "{:?}", sent[0]);
    assert!(sent[1].len() == 1 && sent[2].len() == 1);
    // Node 0 granted, its replica not heard yet; node 1 refuses: not decided.
    rig.reply(rig.t0, 0, GRANT);
    rig.reply(rig.t0, 1, TAKEN);
    assert!(rig.events().is_empty(), "node 0's grant waits for its replica");
    assert_eq!(rig.engine.round(lock).unwrap().1[0], Vote::Pending);
    rig.reply(rig.t0, 2, GRANT);
    assert!(rig.events().is_empty(), "one grant of three is no quorum");
    // The replica has it: node 0's grant counts, and the lock is held.
    rig.reply(rig.at(1), 0, b":1\r\n");
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    // Extending waits for the replica too; releasing does not.
    rig.engine.extend(rig.at(2), lock, Some(TTL)).unwrap();
    let sent = rig.sent_commands();
    assert!(sent[0].len() == 2 && is_wait(&sent[0][1]), "{:?}", sent[0]);
    for i in 0..3 {
        rig.reply(rig.at(2), i, b":1\r\n");
    }
    rig.reply(rig.at(2), 0, b":1\r\n");
    assert!(matches!(rig.events().as_slice(), [Event::Extended { .. }]));
    rig.engine.release(rig.at(3), lock).unwrap();
    let sent = rig.sent_commands();
    assert_eq!(sent[0].len(), 1, "no WAIT after a release: {:?}", sent[0]);
    for i in 0..3 {
        rig.reply(rig.at(3), i, b":1\r\n");
    }
    assert!(
        matches!(rig.events().as_slice(), [Event::Released { report, .. }] if report.outcome == ReleaseOutcome::Released)
    );
}

#[test]
fn a_grant_its_replicas_do_not_have_is_a_failed_vote_and_is_cleaned_up() {
    let mut rig = rig();
    let lock = rig.engine.acquire(rig.t0, &LockOptions::new("r", TTL).attempts(1), b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, GRANT);
    rig.reply(rig.t0, 1, TAKEN);
    rig.reply(rig.t0, 2, GRANT);
    // WAIT ran out with no replica: node 0 casts a failed vote, and with node 1's refusal
    // no quorum is left.
    rig.reply(rig.at(20), 0, b":0\r\n");
    match rig.events().as_slice() {
        [Event::AcquireFailed { lock: l, error: AcquireError::Held { votes, .. } }] if *l == lock => {
            assert_eq!(votes[0], Vote::Unreplicated { acked: 0, wanted: 1 });
            assert!(votes[0].is_failure());
            let text = AcquireError::Unreachable { votes: votes.clone(), attempts: 1 }.to_string();
            assert!(text.contains("0 of 1 replicas"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // The cleanup releases what nodes 0 and 2 granted (node 0 still has the key).
    let sent = rig.sent_commands();
    assert!(!sent[0].is_empty() && !sent[2].is_empty(), "{sent:?}");
}

#[test]
fn a_refusal_counts_at_once_and_a_late_wait_is_ignored() {
    let mut rig = rig();
    let lock = rig.engine.acquire(rig.t0, &LockOptions::new("r", TTL).attempts(1), b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, TAKEN);
    assert_eq!(rig.engine.round(lock).unwrap().1[0], Vote::Refused, "a refusal waits for nothing");
    rig.reply(rig.t0, 0, b":1\r\n");
    rig.reply(rig.t0, 1, TAKEN);
    assert!(matches!(rig.events().as_slice(), [Event::AcquireFailed { error: AcquireError::Held { .. }, .. }]));
}

#[test]
fn a_wait_error_or_silence_fails_the_vote_within_the_node_timeout() {
    let mut rig = rig();
    let lock = rig.engine.acquire(rig.t0, &LockOptions::new("r", TTL).attempts(1), b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, GRANT);
    rig.reply(rig.t0, 0, b"-ERR WAIT cannot be used with replica instances\r\n");
    match &rig.engine.round(lock).unwrap().1[0] {
        Vote::Error(m) => assert!(m.contains("WAIT") && m.contains("replica instances"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A grant whose WAIT never answers times out with the node like any silent vote.
    let lock = rig.engine.acquire(rig.at(1), &LockOptions::new("s", TTL).attempts(1), b"tok2").unwrap();
    rig.sent_commands();
    rig.reply(rig.at(1), 0, GRANT);
    rig.reply(rig.at(1), 1, TAKEN);
    rig.reply(rig.at(1), 2, GRANT);
    rig.engine.handle_timeout(rig.at(60));
    let events = rig.events();
    assert!(
        events.iter().any(|e| matches!(e, Event::AcquireFailed { lock: l, .. } if *l == lock)),
        "decided by the node timeout: {events:?}"
    );
    assert_eq!(rig.engine.round(lock).unwrap().1[0], Vote::TimedOut);
}

#[test]
fn the_option_is_read_from_urls_and_checked_against_the_node_timeout() {
    let n = NodeConfig::from_url("redis://h:6379?min_replicas=2&replicas_timeout=15").unwrap();
    let m = n.min_replicas.unwrap();
    assert_eq!((m.replicas, m.timeout), (2, Duration::from_millis(15)));
    let n = NodeConfig::from_url("redis://h:6379?min_replicas=1").unwrap();
    assert_eq!(n.min_replicas.unwrap().timeout, Duration::from_millis(20), "the default timeout");
    assert_eq!(NodeConfig::from_url("redis://h:6379?min_replicas=0").unwrap().min_replicas, None);
    let n = NodeConfig::from_url("redis://h:6379?min_replicas=1&replicas_fsync=1").unwrap();
    assert!(n.min_replicas.unwrap().fsync);
    assert!(!NodeConfig::from_url("redis://h:6379?min_replicas=1").unwrap().min_replicas.unwrap().fsync);
    for bad in [
        "?replicas_timeout=10",
        "?min_replicas=x",
        "?min_replicas=1&replicas_timeout=0",
        "?replicas_fsync=1",
        "?min_replicas=1&replicas_fsync=maybe",
    ] {
        let e = NodeConfig::from_url(&format!("redis://h:6379{bad}")).unwrap_err().to_string();
        assert!(e.contains("replicas"), "{bad}: {e}");
    }
    let mut c = redlease_core::Config::new(vec![NodeConfig::new("h", 1).min_replicas(1, Duration::from_millis(50))]);
    match c.validate() {
        Err(ConfigError::ReplicasTimeout { node, .. }) => assert_eq!(node, "redis://h:1"),
        other => panic!("{other:?}"),
    }
    c.node_timeout = Duration::from_millis(100);
    assert_eq!(c.validate(), Ok(()));
    c.nodes[0] = NodeConfig::new("h", 1).min_replicas(1, Duration::ZERO);
    assert!(matches!(c.validate(), Err(ConfigError::ReplicasTimeout { .. })));
}

#[test]
fn a_semaphores_permits_on_a_node_its_replicas_lack_do_not_count_and_are_given_back() {
    let mut rig = rig();
    let options = LockOptions::new("pool", TTL).semaphore(3).attempts(1);
    let lock = rig.engine.acquire(rig.t0, &options, b"tok").unwrap();
    let sent = rig.sent_commands();
    assert!(sent[0].len() == 2 && is_wait(&sent[0][1]), "{:?}", sent[0]);
    // The connections have no script source yet: each node runs the one sent with EVAL.
    // Node 0 takes the client's second permit, nodes 1 and 2 its first.
    rig.reply(rig.t0, 0, b"$3\r\n1 2\r\n");
    rig.reply(rig.t0, 1, b"$3\r\n1 1\r\n");
    assert!(rig.events().is_empty());
    rig.reply(rig.t0, 0, b":0\r\n");
    // Node 0's permit does not count, and goes back on node 0 at once.
    let sent = rig.sent_commands();
    assert_eq!(sent[0].len(), 1, "{:?}", sent[0]);
    let release = &sent[0][0];
    assert!(release[0] == b"EVALSHA" || release[0] == b"EVAL");
    assert!(release.iter().any(|a| a.starts_with(b"redlease:sem:{pool}:")), "{release:?}");
    assert_eq!(rig.engine.round(lock).unwrap().1[0], Vote::Unreplicated { acked: 0, wanted: 1 });
    rig.reply(rig.t0, 2, b"$3\r\n1 1\r\n");
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.engine.permits(lock).map(<[u16]>::len), Some(1));
}

/// With `replicas_fsync`, a grant waits for `WAITAOF 0 1 20` (replicas that wrote it to their
/// append-only file); its answer is the local and the replica counts. A server without the
/// command fails the vote with its error, naming it.
#[test]
fn waitaof_counts_the_replicas_that_wrote_the_grant() {
    let mut rig = Rig::with(3, |c| {
        c.nodes[0] = c.nodes[0].clone().min_replicas(1, Duration::from_millis(20)).replicas_fsync(true)
    });
    let lock = rig.engine.acquire(rig.t0, &LockOptions::new("r", TTL).attempts(1), b"tok").unwrap();
    let sent = rig.sent_commands();
    assert_eq!(sent[0][1], [b"WAITAOF".to_vec(), b"0".to_vec(), b"1".to_vec(), b"20".to_vec()], "{:?}", sent[0]);
    rig.reply(rig.t0, 0, GRANT);
    rig.reply(rig.t0, 1, GRANT);
    assert!(rig.events().is_empty(), "node 0's grant waits for its replica's disk");
    // In pieces: the array's header alone is no answer yet.
    rig.reply(rig.t0, 0, b"*2\r\n:0\r\n");
    assert!(rig.events().is_empty());
    rig.reply(rig.t0, 0, b":1\r\n");
    assert!(matches!(rig.events().as_slice(), [Event::Acquired { lock: l, .. }] if *l == lock));

    // Node 0's vote on a grant of a new lock (attempt `at`) after its WAITAOF answers `answer`.
    let mut vote_after = |at: u64, answer: &[u8]| {
        let lock = rig
            .engine
            .acquire(rig.at(at), &LockOptions::new(format!("r{at}"), TTL).attempts(1), format!("t{at}").as_bytes())
            .unwrap();
        rig.sent_commands();
        rig.reply(rig.at(at), 0, GRANT);
        rig.reply(rig.at(at), 0, answer);
        rig.engine.round(lock).unwrap().1[0].clone()
    };
    // No replica wrote it: a failed vote as for WAIT.
    assert_eq!(vote_after(1, b"*2\r\n:0\r\n:0\r\n"), Vote::Unreplicated { acked: 0, wanted: 1 });
    // An answer of another shape is the node's error, not a count.
    match vote_after(2, b"*2\r\n:0\r\n$1\r\n1\r\n") {
        Vote::Error(m) => assert!(m.contains("WAITAOF: an unexpected reply"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A server older than Redis 7.2.
    match vote_after(3, b"-ERR unknown command 'WAITAOF', with args beginning with: '0' '1' '20' \r\n") {
        Vote::Error(m) => assert!(m.starts_with("WAITAOF for 1 replicas failed: ERR unknown command"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_link_lost_while_its_grant_waits_for_wait_fails_that_vote_at_once() {
    let mut rig = rig();
    let lock = rig.engine.acquire(rig.t0, &LockOptions::new("r", TTL).attempts(1), b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, GRANT);
    rig.reply(rig.t0, 1, GRANT);
    assert_eq!(rig.engine.round(lock).unwrap().1[0], Vote::Pending, "node 0's grant waits for its WAIT");
    // The connection drops before WAIT answers: the answer will never come.
    rig.engine.handle_disconnected(rig.at(1), redlease_core::NodeId(0), "connection reset");
    let vote = rig.engine.round(lock).unwrap().1[0].clone();
    assert!(vote.is_failure(), "a disconnected node's vote fails at once, not at the node timeout: {vote:?}");
    rig.reply(rig.at(1), 2, TAKEN);
    let events = rig.events();
    assert!(
        events.iter().any(|e| matches!(e, Event::AcquireFailed { lock: l, .. } if *l == lock)),
        "decided without waiting for the node timeout: {events:?}"
    );
}

/// The link failures among `events`: (node, min_replicas, online, is_replica) of each
/// [`LinkError::Replicas`]; panics on any other event but `LinkUp`.
fn replica_failures(events: &[Event]) -> Vec<(NodeId, u32, u32, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::LinkFailed { error: LinkError::Replicas { node, min_replicas, online, is_replica, .. } } => {
                Some((*node, *min_replicas, *online, *is_replica))
            }
            Event::LinkUp { .. } => None,
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Every node asks for a replica it does not have: `ROLE` in the handshake shows it, the
/// node is misconfigured in the health view (with both numbers), and a lock fails at once as
/// misconfigured, naming `min_replicas` and the count. The answer is fed whole and one byte
/// at a time.
#[test]
fn a_node_without_the_replicas_it_waits_for_is_not_used() {
    for bytewise in [false, true] {
        let mut rig = Rig::unconnected(3, |c| {
            for n in &mut c.nodes {
                *n = n.clone().min_replicas(1, Duration::from_millis(20));
            }
        });
        for i in 0..3 {
            rig.engine.handle_connected(rig.t0, NodeId(i as u16));
            let sent = rig.sent(i);
            assert!(rig::commands(&sent).iter().any(|c| c[0] == b"ROLE"), "the handshake asks ROLE");
            let reply = handshake_reply(
                &sent,
                if i == 2 {
                    b"*5\r\n$5\r\nslave\r\n$1\r\nh\r\n:1\r\n$9\r\nconnected\r\n:0\r\n"
                } else {
                    ROLE_NO_REPLICA
                },
            );
            if bytewise {
                for b in &reply {
                    rig.reply(rig.t0, i, std::slice::from_ref(b));
                }
            } else {
                rig.reply(rig.t0, i, &reply);
            }
        }
        let failures = replica_failures(&rig.events());
        assert_eq!(
            failures,
            [(NodeId(0), 1, 0, false), (NodeId(1), 1, 0, false), (NodeId(2), 1, 0, true)],
            "bytewise {bytewise}"
        );
        let health = rig.engine.health();
        assert_eq!(health.usable(), 0);
        assert!(!health.can_lock() && health.misconfigured_beyond_quorum());
        assert_eq!(health.nodes[0].replicas_online, Some(0));
        let table = health.to_string();
        let first = table.lines().next().unwrap();
        assert!(first.contains("MISCONFIGURED") && first.contains("grants wait for 1 replica(s)"), "{table}");
        assert!(
            first.contains("(0 online)") && first.contains("min_replicas=1, but the primary has 0 replica(s) online"),
            "{table}"
        );
        assert!(table.lines().nth(2).unwrap().contains("the node is a replica"), "{table}");
        assert!(table.contains("LOCKING STOPS"), "{table}");
        // A lock fails at once, as misconfigured, saying why.
        let lock = rig.engine.acquire(rig.at(1), &LockOptions::new("r", TTL), b"tok").unwrap();
        match rig.events().as_slice() {
            [Event::AcquireFailed { lock: l, error: e @ AcquireError::Misconfigured { attempts: 1, .. } }]
                if *l == lock =>
            {
                let text = e.to_string();
                assert!(text.contains("min_replicas=1") && text.contains("0 replica(s) online"), "{text}");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A ready node is asked `ROLE` again every [`REPLICAS_CHECK`]: while its replica is online
/// nothing changes; once the primary reports none, its link fails as misconfigured, and a
/// reconnect that finds the replica again makes it usable.
#[test]
fn the_replicas_are_counted_again_while_the_node_is_ready() {
    let mut rig = rig();
    let at = REPLICAS_CHECK.as_millis() as u64;
    assert!(rig.engine.poll_timeout().is_some_and(|t| t <= rig.at(at)), "a check is due");
    rig.engine.handle_timeout(rig.at(at));
    let sent = rig.sent_commands();
    assert_eq!(sent[0], [vec![b"ROLE".to_vec()]], "node 0 is asked again");
    assert!(sent[1].is_empty() && sent[2].is_empty(), "nodes without min_replicas are not");
    rig.reply(rig.at(at), 0, ROLE_ONE_REPLICA);
    assert!(rig.events().is_empty());
    assert!(rig.engine.health().all_ready());
    // The next check: the replica is gone.
    rig.engine.handle_timeout(rig.at(2 * at));
    assert_eq!(rig.sent_commands()[0], [vec![b"ROLE".to_vec()]]);
    rig.reply(rig.at(2 * at), 0, ROLE_NO_REPLICA);
    assert_eq!(replica_failures(&rig.events()), [(NodeId(0), 1, 0, false)]);
    let health = rig.engine.health();
    assert!(health.nodes[0].is_misconfigured() && health.usable() == 2, "{health}");
    // Reconnected with the replica back: usable again.
    rig.engine.handle_disconnected(rig.at(2 * at), NodeId(0), "closed");
    rig.events();
    rig.connect_at(rig.at(3 * at), 0);
    assert!(rig.engine.health().all_ready());
}
