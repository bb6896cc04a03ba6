//! Nodes that can never serve, on simulated time: a Redis Cluster node given as a node (its
//! `HELLO` says `mode cluster`, or it answers `MOVED` / `CROSSSLOT`), a TLS certificate that
//! does not verify, and a URL whose scheme does not match the port (`redis://` on a TLS port,
//! `rediss://` on a plain one). Each is a misconfiguration or a hint naming the cause, never a
//! grant and never a bare "unreachable".

mod rig;

use std::time::Duration;

use redlease_core::{AcquireError, Event, Fault, LinkError, LockOptions, NodeId, Vote};
use rig::Rig;

const CLUSTER: &str = "is a Redis Cluster node";

/// A `HELLO 3` answer of a cluster node (as Redis 7 sends it, shortened).
const HELLO_CLUSTER: &[u8] = b"%4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n\
$4\r\nmode\r\n$7\r\ncluster\r\n$4\r\nrole\r\n$6\r\nmaster\r\n";

fn options() -> LockOptions {
    LockOptions::new("r", Duration::from_secs(10)).attempts(1)
}

/// The acquisition's outcome, once decided.
fn failure(rig: &mut Rig) -> AcquireError {
    let events = rig.events();
    assert!(!events.iter().any(|e| matches!(e, Event::Acquired { .. })), "no grant: {events:?}");
    events
        .into_iter()
        .find_map(|e| match e {
            Event::AcquireFailed { error, .. } => Some(error),
            _ => None,
        })
        .expect("the acquisition failed")
}

#[test]
fn a_node_whose_hello_says_cluster_is_refused_as_misconfigured() {
    let mut rig = Rig::unconnected(3, |c| c.wake = true);
    rig.connect(2);
    for node in 0..2 {
        rig.engine.handle_connected(rig.t0, NodeId(node));
        rig.sent(node as usize);
        let mut answer = b"$1\r\n2\r\n".to_vec(); // the lock format check
        answer.extend_from_slice(HELLO_CLUSTER);
        if node == 0 {
            rig.reply(rig.t0, 0, &answer);
        } else {
            for byte in answer.chunks(1) {
                rig.reply(rig.t0, 1, byte);
            }
        }
    }
    let events = rig.events();
    for node in 0..2u16 {
        let error = events
            .iter()
            .find_map(|e| match e {
                Event::LinkFailed { error } if error.node() == NodeId(node) => Some(error),
                _ => None,
            })
            .expect("the link failed");
        assert!(matches!(error, LinkError::ClusterNode { .. }), "{error:?}");
        assert_eq!(error.fault(), Fault::Misconfigured);
        let text = error.to_string();
        assert!(text.contains(CLUSTER) && text.contains("HELLO says mode cluster"), "{text}");
        assert!(text.contains("give one standalone Redis per node"), "{text}");
    }
    let health = rig.engine.health();
    assert!(health.misconfigured() && health.nodes[0].is_misconfigured() && health.nodes[1].is_misconfigured());
    assert!(health.to_string().lines().next().unwrap().contains("MISCONFIGURED"), "{health}");

    // The healthy node alone is no quorum: the acquisition fails at once, as misconfigured.
    rig.engine.acquire(rig.t0, &options(), b"me").unwrap();
    assert!(rig.sent(0).is_empty() && rig.sent(1).is_empty(), "nothing goes to a refused node");
    rig.sent(2);
    rig.reply(rig.t0, 2, b"+OK\r\n");
    match failure(&mut rig) {
        AcquireError::Misconfigured { votes, .. } => {
            for v in &votes[..2] {
                assert!(matches!(v, Vote::Misconfigured(e) if e.contains(CLUSTER)), "{v:?}");
            }
        }
        other => panic!("{other:?}"),
    }

    // The reconnect meets the same answer: still misconfigured.
    let retry = rig.engine.poll_timeout().unwrap();
    rig.engine.handle_timeout(retry);
    while let Some(node) = rig.engine.poll_connect(retry) {
        rig.engine.handle_connected(retry, node);
        rig.sent(node.index());
        rig.reply(retry, node.index(), b"$1\r\n2\r\n");
        rig.reply(retry, node.index(), HELLO_CLUSTER);
    }
    assert!(rig.engine.health().nodes[0].is_misconfigured());
}

#[test]
fn a_moved_or_crossslot_answer_is_a_misconfigured_vote_and_fails_the_link() {
    let mut rig = Rig::new(3);
    rig.engine.acquire(rig.t0, &options(), b"me").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 2, b"+OK\r\n");
    rig.reply(rig.t0, 0, b"-MOVED 11414 127.0.0.1:7001\r\n");
    rig.reply(rig.t0, 1, b"-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    let events = rig.events();
    assert!(!events.iter().any(|e| matches!(e, Event::Acquired { .. })), "no grant: {events:?}");
    let failed = events
        .iter()
        .find_map(|e| match e {
            Event::AcquireFailed { error, .. } => Some(error.clone()),
            _ => None,
        })
        .expect("the acquisition failed");
    match failed {
        AcquireError::Misconfigured { votes, .. } => {
            assert!(matches!(&votes[0], Vote::Misconfigured(e) if e.contains(CLUSTER) && e.contains("MOVED 11414")));
            assert!(matches!(&votes[1], Vote::Misconfigured(e) if e.contains(CLUSTER) && e.contains("CROSSSLOT")));
            assert_eq!(votes[2], Vote::Granted);
        }
        other => panic!("not unreachable but misconfigured: {other:?}"),
    }
    // The nodes are refused until they reconnect: the health view says why.
    let health = rig.engine.health();
    for n in &health.nodes[..2] {
        assert!(n.is_misconfigured(), "{health}");
        assert!(n.last_error.as_deref().is_some_and(|e| e.contains(CLUSTER)), "{health}");
    }
    assert!(health.nodes[2].is_ready());
    assert_eq!(redlease_core::Fault::of_server_error("CLUSTERDOWN The cluster is down"), Fault::Misconfigured);
    assert_eq!(redlease_core::Fault::of_server_error("ASK 3999 127.0.0.1:7002"), Fault::Misconfigured);
}

#[test]
fn a_certificate_that_does_not_verify_is_misconfigured() {
    let mut rig = Rig::unconnected(1, |c| c.nodes[0] = c.nodes[0].clone().use_tls(true));
    let t = rig.t0;
    assert_eq!(rig.engine.poll_connect(t), Some(NodeId(0)));
    rig.engine.handle_tls_started(t, NodeId(0));
    rig.engine.handle_tls_failed(t, NodeId(0), "invalid peer certificate: UnknownIssuer: trust its CA with ca_file");
    let error = match rig.events().as_slice() {
        [Event::LinkFailed { error }] => error.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(error.fault(), Fault::Misconfigured);
    assert_eq!(
        error.to_string(),
        "node #0 (rediss://127.0.0.1:7000): TLS handshake failed: invalid peer certificate: UnknownIssuer: trust \
         its CA with ca_file"
    );
    let health = rig.engine.health();
    assert!(health.misconfigured() && health.to_string().contains("MISCONFIGURED"), "{health}");
    // Unless connecting, it is ignored.
    rig.engine.handle_tls_failed(t, NodeId(0), "late");
    assert!(rig.events().is_empty());
}

#[test]
fn a_tls_handshake_left_unanswered_asks_whether_the_port_is_plain() {
    let mut rig = Rig::unconnected(2, |c| {
        c.connect_timeout = Duration::from_millis(500);
        for n in &mut c.nodes {
            *n = n.clone().use_tls(true);
        }
    });
    let t = rig.t0;
    assert_eq!(rig.engine.poll_connect(t), Some(NodeId(0)));
    assert_eq!(rig.engine.poll_connect(t), Some(NodeId(1)));
    // Node 0's socket connected and sent its client hello; node 1's never connected.
    rig.engine.handle_tls_started(t, NodeId(0));
    rig.engine.handle_timeout(rig.at(500));
    let health = rig.engine.health();
    let tls = health.nodes[0].last_error.clone().unwrap();
    assert_eq!(
        tls,
        "TLS handshake failed: no answer within 500ms: the server did not answer TLS: is it a plain port? (use \
         redis:// for it)"
    );
    assert_eq!(health.nodes[0].fault, Some(Fault::Unreachable));
    assert_eq!(health.nodes[1].last_error.as_deref(), Some("connect timed out after 500ms"));
    // The next attempt starts afresh: a timeout before its TLS handshake is a plain one.
    rig.engine.handle_timeout(rig.at(2000));
    assert_eq!(rig.engine.poll_connect(rig.at(2000)), Some(NodeId(0)));
    rig.engine.handle_timeout(rig.at(2500));
    assert_eq!(rig.engine.health().nodes[0].last_error.as_deref(), Some("connect timed out after 500ms"));
}

#[test]
fn a_plain_connection_dropped_before_any_reply_asks_whether_the_port_is_tls() {
    let mut rig = Rig::unconnected(2, |_| {});
    let t = rig.t0;
    // Dropped (a TLS server resets a plaintext client), and answered with a TLS alert record.
    for node in 0..2 {
        assert_eq!(rig.engine.poll_connect(t), Some(NodeId(node)));
        rig.engine.handle_connected(t, NodeId(node));
        rig.sent(node as usize);
    }
    rig.engine.handle_disconnected(t, NodeId(0), "Connection reset by peer (os error 104)");
    rig.reply(t, 1, b"\x15\x03\x01\x00\x02\x02\x46");
    let health = rig.engine.health();
    let lost = health.nodes[0].last_error.clone().unwrap();
    assert_eq!(
        lost,
        "connection lost: Connection reset by peer (os error 104), before any reply to the handshake: is this a TLS \
         port? (use rediss:// for it)"
    );
    assert!(!lost.contains("connection lost: connection lost"), "{lost}");
    let alert = health.nodes[1].last_error.clone().unwrap();
    assert!(
        alert.starts_with("malformed RESP from server: ")
            && alert.ends_with("is this a TLS port? (use rediss:// for it)"),
        "{alert}"
    );
    // Once the node has answered, a lost connection is only that.
    rig.events();
    rig.engine.handle_timeout(rig.at(5000));
    let node = rig.engine.poll_connect(rig.at(5000)).unwrap();
    rig.connect_at(rig.at(5000), node.index());
    rig.engine.handle_disconnected(rig.at(5000), node, "closed by the server");
    let again = rig.engine.health().nodes[node.index()].last_error.clone().unwrap();
    assert_eq!(again, "connection lost: closed by the server");
}
