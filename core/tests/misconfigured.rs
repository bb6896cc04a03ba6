//! Nodes that can never serve, on simulated time: a TLS certificate that does not verify, and a URL whose scheme does not match the port (`redis://` on a TLS port,
//! `rediss://` on a plain one). Each is a misconfiguration or a hint naming the cause, never a
//! grant and never a bare "unreachable".

mod rig;

use std::time::Duration;

use redlease_core::{Event, Fault, NodeId};
use rig::Rig;

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

/// A node that wants a password, and a URL without one: the first command of the handshake is
/// refused with `NOAUTH`, which the error says as what it is, with what to do.
#[test]
fn a_missing_password_says_authentication_is_required() {
    let mut rig = Rig::unconnected(1, |_| {});
    rig.engine.handle_connected(rig.t0, NodeId(0));
    rig.sent(0);
    rig.reply(rig.t0, 0, b"-NOAUTH Authentication required.\r\n");
    let error = match rig.events().as_slice() {
        [Event::LinkFailed { error }] => error.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(error.fault(), Fault::Misconfigured);
    assert_eq!(
        error.to_string(),
        "node #0 (redis://127.0.0.1:7000): authentication required: the node wants a password; give one in its \
         URL, redis://[user:]password@host:port (NOAUTH Authentication required.)"
    );
}
