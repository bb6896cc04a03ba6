//! Scripted scenarios of one engine against hand-written replies: each Redlock rule of the
//! issue, the typed outcomes, the handshake and the garbage handling.

mod rig;

use std::time::Duration;

use redlease_core::quorum::drift;
use redlease_core::{AcquireRequest, Event, ExtendError, LockId, NodeId};
use rig::Rig;

const TTL: Duration = Duration::from_secs(10);

fn req<'a>(keys: &'a [&'a [u8]], token: &'a [u8]) -> AcquireRequest<'a> {
    let mut r = AcquireRequest::new(keys, token, TTL);
    r.attempts = Some(1);
    r
}

/// Acquire `r` at `t0` and grant it on every node.
fn held(rig: &mut Rig) -> LockId {
    let lock = rig.engine.acquire(rig.t0, &req(&[b"r"], b"tok")).unwrap();
    rig.sent_commands();
    for i in 0..rig.n {
        rig.reply(rig.t0, i, b":1\r\n");
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
    match rig.events().as_slice() {
        [Event::ExtendFailed { error: ExtendError::Unconfirmed { extended: 0, .. }, .. }] => {}
        other => panic!("{other:?}"),
    }
    let valid = rig.engine.lock_info(lock).unwrap().valid_until.unwrap();
    assert!(valid <= start + short - drift(short, 0.01), "deadline {:?} after the shorter TTL", valid - rig.t0);
}

#[test]
fn ttl_is_counted_in_the_whole_milliseconds_sent() {
    // `PX` takes whole milliseconds; the validity must not count the fraction that was cut off.
    let mut rig = Rig::new(1);
    let ttl = Duration::from_micros(1_000_900);
    let mut r = req(&[b"r"], b"tok");
    r.ttl = ttl;
    let lock = rig.engine.acquire(rig.t0, &r).unwrap();
    let cmds = rig.sent_commands();
    assert_eq!(cmds[0][0][5], b"1000", "PX argument");
    rig.reply(rig.t0, 0, b":1\r\n");
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
    let _ = NodeId(0);
}
