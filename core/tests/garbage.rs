//! Hostile and malformed server bytes: a typed link error, never a crash, never a grant.

mod rig;

use std::time::Duration;

use redlease_core::{Event, LinkError, LockOptions, NodeId};
use rig::Rig;

/// A rig with one acquire in flight on every node.
fn pending_acquire(n: usize) -> Rig {
    let mut rig = Rig::new(n);
    let options = LockOptions::new("r", Duration::from_secs(10)).attempts(1);
    rig.engine.acquire(rig.t0, &options, b"tok").unwrap();
    rig.sent_commands();
    rig
}

fn link_failure(events: &[Event]) -> &LinkError {
    assert!(!events.iter().any(|e| matches!(e, Event::Acquired { .. })), "{events:?}");
    events
        .iter()
        .find_map(|e| if let Event::LinkFailed { error } = e { Some(error) } else { None })
        .unwrap_or_else(|| panic!("no link failure in {events:?}"))
}

#[test]
fn deeply_nested_array_is_a_link_error_not_a_stack_overflow() {
    let mut rig = pending_acquire(1);
    let bomb = b"*1\r\n".repeat(1_000_000);
    rig.reply(rig.t0, 0, &bomb);
    let events = rig.events();
    assert!(matches!(link_failure(&events), LinkError::Unexpected { node: NodeId(0), .. }), "{events:?}");
}

#[test]
fn huge_array_length_is_a_link_error_not_an_allocation() {
    let mut rig = pending_acquire(1);
    rig.reply(rig.t0, 0, b"*4611686018427387903\r\n:1\r\n");
    let events = rig.events();
    link_failure(&events);
}

#[test]
fn a_reply_without_end_is_cut_off() {
    let mut rig = pending_acquire(1);
    let mut endless = b"+".to_vec();
    endless.extend(std::iter::repeat_n(b'a', 100_000));
    for chunk in endless.chunks(1000) {
        rig.reply(rig.t0, 0, chunk);
    }
    let events = rig.events();
    let err = link_failure(&events);
    assert!(matches!(err, LinkError::Malformed { .. }) && err.to_string().contains("node #0"), "{err}");
    assert!(!rig.engine.is_connected(NodeId(0)));
}

#[test]
fn an_array_is_never_split_into_grants() {
    // A retry is pending behind the cleanup of a failed attempt. An array answering the
    // cleanup must not be read as separate replies (its `:1` would look like a grant).
    let mut rig = Rig::new(1);
    let options = LockOptions::new("r", Duration::from_secs(10)).attempts(2);
    let lock = rig.engine.acquire(rig.t0, &options, b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, b"$-1\r\n"); // SET NX refused: cleanup sent, retry scheduled
    let retry_at = rig.engine.poll_timeout().unwrap();
    rig.engine.handle_timeout(retry_at);
    let cmds = rig.sent_commands();
    assert_eq!(cmds[0].len(), 2, "cleanup then the second attempt");
    rig.reply(retry_at, 0, b"*1\r\n:1\r\n");
    let events = rig.events();
    link_failure(&events);
    assert!(!events.iter().any(|e| matches!(e, Event::Acquired { lock: l, .. } if *l == lock)));
}

#[test]
fn wrong_types_errors_and_unsolicited_replies_are_typed() {
    // A bulk string where a number belongs.
    let mut rig = pending_acquire(3);
    rig.reply(rig.t0, 0, b"$1\r\n1\r\n");
    let events = rig.events();
    match link_failure(&events) {
        e @ LinkError::Unexpected { node: NodeId(0), addr, request, reply } => {
            assert_eq!(&**addr, "redis://127.0.0.1:7000");
            assert!(e.to_string().starts_with("node #0 (redis://127.0.0.1:7000): unexpected reply"), "{e}");
            assert!(request.contains("acquire"), "{request}");
            assert!(reply.contains('1'), "{reply}");
        }
        other => panic!("{other:?}"),
    }
    // A server error is a failed vote, not a grant, and the link stays up.
    rig.reply(rig.t0, 1, b"-ERR something broke\r\n");
    assert!(rig.engine.is_connected(NodeId(1)));
    // A negative number is not a valid answer either.
    rig.reply(rig.t0, 2, b":-7\r\n");
    let events = rig.events();
    assert!(matches!(link_failure(&events), LinkError::Unexpected { node: NodeId(2), .. }));
    // The acquire has failed on every node: nothing was granted.
    // (it already ended when the quorum became impossible)

    // A reply with nothing pending.
    let mut rig = Rig::new(1);
    rig.reply(rig.t0, 0, b":1\r\n");
    let events = rig.events();
    assert!(matches!(link_failure(&events), LinkError::Unsolicited { node: NodeId(0), .. }), "{events:?}");

    // Bytes that are not RESP at all.
    let mut rig = pending_acquire(1);
    rig.reply(rig.t0, 0, b"HTTP/1.1 400 Bad Request\r\n");
    let events = rig.events();
    let err = link_failure(&events);
    assert!(matches!(err, LinkError::Malformed { node: NodeId(0), .. }), "{err}");
}

#[test]
fn a_push_frame_with_a_null_element_fails_the_link_without_a_panic() {
    for frame in [
        &b">3\r\n$7\r\nmessage\r\n$15\r\nredlease:wake:r\r\n$-1\r\n"[..],
        b">3\r\n$-1\r\n$-1\r\n$-1\r\n",
        b">2\r\n$7\r\nmessage\r\n$-1\r\n",
    ] {
        let mut rig = pending_acquire(1);
        rig.reply(rig.t0, 0, frame);
        let events = rig.events();
        let err = link_failure(&events);
        assert!(matches!(err, LinkError::Malformed { node: NodeId(0), .. }), "{err}");
        assert!(!rig.engine.is_connected(NodeId(0)));
    }
}
