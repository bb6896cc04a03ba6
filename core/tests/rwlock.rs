//! Scripted read locks: the wire form of the read scripts (their source on a connection's
//! first use, the digest after), a fresh reader's first attempt by a plain `SET NX` and the
//! script that follows its refusal, a reader's fencing token without a fence round, downgrade,
//! and the shapes refused.

mod rig;

use std::time::Duration;

use redlease_core::{AcquireError, Event, ExtendError, LockOptions, LostReason, Misuse, ReleaseOutcome};
use rig::Rig;

const TTL: Duration = Duration::from_secs(10);

fn read() -> LockOptions {
    LockOptions::new("doc", TTL).shared(true).attempts(1)
}

/// The command name and key arguments of the first command each node was sent.
fn first_command(rig: &mut Rig) -> Vec<Vec<Vec<u8>>> {
    rig.sent_commands().into_iter().map(|cmds| cmds.into_iter().next().expect("a command")).collect()
}

#[test]
fn a_read_lock_sends_its_source_once_per_connection_then_its_digest() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &read(), b"r1").unwrap();
    for cmd in first_command(&mut rig) {
        assert_eq!(cmd[0], b"EVAL", "a connection's first read lock carries the script");
        // Three keys: the lock key, its readers, its queue; the token, the TTL, the wait mode
        // (not waiting), the queue's TTL and the reservation (unused without a queue).
        let args =
            [&b"3"[..], b"doc", b"redlease:readers:doc", b"redlease:queue:doc", b"r1", b"10000", b"0", b"0", b"0"];
        assert_eq!(&cmd[2..], args);
    }
    for i in 0..3 {
        rig.reply(rig.t0, i, b":1\r\n");
    }
    assert!(matches!(rig.events().as_slice(), [Event::Acquired { fence: None, .. }]));
    assert!(rig.engine.is_shared(lock));
    rig.engine.release(rig.t0, lock).unwrap();
    for cmd in first_command(&mut rig) {
        assert_eq!(cmd[0], b"EVAL", "the read release's first use carries its source");
        assert_eq!(&cmd[3..6], [&b"doc"[..], b"redlease:readers:doc", b"redlease:queue:doc"]);
    }
    for i in 0..3 {
        rig.reply(rig.t0, i, b":1\r\n");
    }
    assert!(matches!(rig.events().as_slice(), [Event::Released { .. }]));
    // The next reader on the same connections: digests.
    rig.engine.acquire(rig.t0, &read(), b"r2").unwrap();
    for cmd in first_command(&mut rig) {
        assert_eq!(cmd[0], b"EVALSHA");
    }
}

#[test]
fn a_readers_fencing_token_is_the_writer_epoch_read_again_once_granted() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &read().fencing(true), b"r1").unwrap();
    for cmd in first_command(&mut rig) {
        // Four keys: the fence counter too.
        assert_eq!(
            &cmd[2..7],
            [&b"4"[..], b"doc", b"redlease:readers:doc", b"redlease:queue:doc", b"redlease:fence:doc"]
        );
    }
    // The nodes say one more than their counters: 7, 8 (the last writer's token), 8.
    for (i, r) in [b":7\r\n", b":9\r\n", b":9\r\n"].into_iter().enumerate() {
        rig.reply(rig.t0, i, r);
    }
    assert!(rig.events().is_empty(), "the counters are read again first");
    // A fence round that proposes 0: it raises no counter, and answers each node's.
    let sent = rig.sent_commands();
    for cmd in sent.iter().map(|c| c.last().expect("a command").clone()) {
        assert_eq!(cmd[0], b"EVALSHA");
        assert_eq!(&cmd[2..], [&b"1"[..], b"redlease:fence:doc", b"0"]);
    }
    // A writer came and went while the read round was open: a quorum holds its token 9 now.
    rig.reply(rig.t0, 0, b":8\r\n");
    assert!(rig.events().is_empty(), "one node of three is no quorum");
    rig.reply(rig.t0, 2, b":9\r\n");
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, fence: Some(9), .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_downgrade_turns_the_write_lock_into_a_read_lock_at_a_quorum() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &LockOptions::new("doc", TTL).attempts(1), b"w1").unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, b"+OK\r\n");
    }
    rig.events();
    assert!(!rig.engine.is_shared(lock));
    let at = rig.at(100);
    rig.engine.downgrade(at, lock).unwrap();
    for cmd in first_command(&mut rig) {
        assert_eq!(cmd[0], b"EVAL");
        assert_eq!(&cmd[2..], [&b"2"[..], b"doc", b"redlease:readers:doc", b"w1", b"10000"]);
    }
    rig.reply(at, 0, b":1\r\n");
    rig.reply(at, 1, b":1\r\n");
    match rig.events().as_slice() {
        [Event::Extended { lock: l, valid_until }] if *l == lock => assert!(*valid_until > at),
        other => panic!("{other:?}"),
    }
    assert!(rig.engine.is_shared(lock));
    assert!(rig.engine.downgrade(at, lock).is_err(), "a read lock does not downgrade");
    // Its extension and release are the read scripts'.
    rig.reply(at, 2, b":1\r\n");
    rig.engine.release(at, lock).unwrap();
    let sent = first_command(&mut rig);
    assert!(sent.iter().all(|c| c[4] == b"redlease:readers:doc"), "{sent:?}");
    for i in 0..3 {
        rig.reply(at, i, b":1\r\n");
    }
    match rig.events().as_slice() {
        [Event::Released { report, .. }] => assert_eq!(report.outcome, ReleaseOutcome::Released),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_downgrade_no_quorum_confirmed_loses_the_lock_and_leaves_the_readers() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &LockOptions::new("doc", TTL).attempts(1), b"w1").unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, b"+OK\r\n");
    }
    rig.events();
    rig.engine.downgrade(rig.t0, lock).unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, b":1\r\n");
    // The others never answer: the node timeout decides.
    rig.engine.handle_timeout(rig.at(300));
    let events = rig.events();
    assert!(
        events.iter().any(|e| matches!(e, Event::ExtendFailed { error: ExtendError::Unconfirmed { .. }, .. })),
        "{events:?}"
    );
    assert!(events.iter().any(|e| matches!(e, Event::Lost { reason: LostReason::Refused, .. })), "{events:?}");
    // Every node is told to drop the reader it may have become.
    for cmds in rig.sent_commands() {
        assert!(cmds.iter().any(|c| c.len() > 4 && c[4] == b"redlease:readers:doc"), "{cmds:?}");
    }
}

#[test]
fn read_locks_of_several_resources_or_of_a_semaphore_are_refused() {
    let mut rig = Rig::new(3);
    let several = read().resources(["other"]);
    assert!(matches!(rig.engine.acquire(rig.t0, &several, b"t"), Err(Misuse::Permits { .. })));
    let semaphore = read().semaphore(3);
    assert!(matches!(rig.engine.acquire(rig.t0, &semaphore, b"t"), Err(Misuse::Permits { .. })));
    let reserved = LockOptions::new("redlease:readers:doc", TTL);
    assert!(matches!(rig.engine.acquire(rig.t0, &reserved, b"t"), Err(Misuse::ReservedResource { .. })));
}

#[test]
fn a_refused_reader_is_held_and_a_waiting_one_marks_the_key_and_queues() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &read(), b"r1").unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, b":0\r\n");
    }
    match rig.events().as_slice() {
        [Event::AcquireFailed { lock: l, error: AcquireError::Held { .. } }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    // A reader that waits: its retries set the wait flag. Its first attempt is the plain
    // `SET NX`; refused, the script follows at once (not waiting yet: wait mode 0).
    let waiting = LockOptions::new("doc", TTL).shared(true).attempts(3);
    rig.engine.acquire(rig.t0, &waiting, b"r2").unwrap();
    rig.sent_commands();
    for i in 0..2 {
        rig.reply(rig.t0, i, b"$-1\r\n");
    }
    let script: Vec<_> = rig.sent_commands().into_iter().map(|c| c.into_iter().last().expect("a script")).collect();
    assert!(script.iter().all(|c| c[0] == b"EVALSHA" && c[c.len() - 3] == b"0"), "{script:?}");
    // Node 2 had not answered the first reader's attempt when it was decided, nor this one's:
    // each sent it a cleanup. Its replies: the first cleanup, the `SET NX`, this cleanup.
    for r in [&b":0\r\n"[..], b"$-1\r\n", b":0\r\n"] {
        rig.reply(rig.t0, 2, r);
    }
    for i in 0..3 {
        rig.reply(rig.t0, i, b":0\r\n");
    }
    rig.engine.handle_timeout(rig.at(400));
    let retry: Vec<_> = rig.sent_commands().into_iter().map(|c| c.into_iter().last().expect("a retry")).collect();
    // Wait mode 1 (mark and join the queue at the back), a queue TTL, a reservation.
    assert!(retry.iter().all(|c| c[c.len() - 3] == b"1" && c[c.len() - 1] != b"0"), "{retry:?}");
}

/// A write lock of `doc` over three nodes, held; the commands sent drained.
fn held_write_lock(rig: &mut Rig) -> redlease_core::LockId {
    let lock = rig.engine.acquire(rig.t0, &LockOptions::new("doc", TTL).attempts(1), b"w1").unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, b"+OK\r\n");
    }
    rig.events();
    lock
}

/// Whether `cmds` hold a read release of `doc` (its keys name the readers' key).
fn leaves_readers(cmds: &[Vec<Vec<u8>>]) -> bool {
    cmds.iter().any(|c| c.len() > 4 && c[4] == b"redlease:readers:doc")
}

#[test]
fn a_downgrade_refused_by_a_majority_or_confirmed_too_late_leaves_no_reader_behind() {
    // A majority refuses: node 0 applied it (it holds the lock as a reader now), the others
    // no longer had the key. The lock is lost, and node 0's reader entry is removed.
    let mut rig = Rig::new(3);
    let lock = held_write_lock(&mut rig);
    let at = rig.at(100);
    rig.engine.downgrade(at, lock).unwrap();
    rig.sent_commands();
    rig.reply(at, 0, b":1\r\n");
    rig.reply(at, 1, b":0\r\n");
    rig.reply(at, 2, b":0\r\n");
    let events = rig.events();
    assert!(events.iter().any(|e| matches!(e, Event::Lost { reason: LostReason::Refused, .. })), "{events:?}");
    assert!(!rig.engine.is_shared(lock));
    for (i, cmds) in rig.sent_commands().iter().enumerate() {
        assert!(leaves_readers(cmds), "node {i} is told to drop the reader it may have become: {cmds:?}");
    }

    // A quorum applies it, but only after the lock's validity ran out: too late, lost, and
    // every node drops the reader.
    let mut rig = Rig::new(3);
    let lock = held_write_lock(&mut rig);
    rig.engine.downgrade(rig.at(100), lock).unwrap();
    rig.sent_commands();
    let late = rig.at(11_000);
    for i in 0..3 {
        rig.reply(late, i, b":1\r\n");
    }
    let events = rig.events();
    assert!(events.iter().any(|e| matches!(e, Event::Lost { reason: LostReason::Expired, .. })), "{events:?}");
    assert!(!rig.engine.is_shared(lock));
    for (i, cmds) in rig.sent_commands().iter().enumerate() {
        assert!(leaves_readers(cmds), "node {i} is told to drop the reader: {cmds:?}");
    }
}

/// A read lock that may retry, without fencing.
fn waiting_read() -> LockOptions {
    LockOptions::new("doc", TTL).shared(true).attempts(3)
}

#[test]
fn an_unfenced_read_lock_first_takes_a_free_key_for_its_token_alone_by_set_nx() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &waiting_read(), b"r1").unwrap();
    for cmd in first_command(&mut rig) {
        let set = [&b"SET"[..], b"doc", b":readers:r1", b"NX", b"PX", b"10000"];
        assert_eq!(cmd, set, "a sole reader's value, no script");
    }
    for i in 0..3 {
        rig.reply(rig.t0, i, b"+OK\r\n");
    }
    assert!(matches!(rig.events().as_slice(), [Event::Acquired { fence: None, .. }]));
    assert!(rig.engine.is_shared(lock));
    // Its release is the read release, whose first lines are a compare-and-delete of that value.
    rig.engine.release(rig.t0, lock).unwrap();
    for cmd in first_command(&mut rig) {
        assert_eq!(cmd[0], b"EVAL");
        assert_eq!(&cmd[3..], [&b"doc"[..], b"redlease:readers:doc", b"redlease:queue:doc", b"r1", b"0", b"0"]);
    }
    for i in 0..3 {
        rig.reply(rig.t0, i, b":1\r\n");
    }
    assert!(matches!(rig.events().as_slice(), [Event::Released { .. }]));
    // Fenced, or with no second attempt to follow (a try): the script from the first attempt.
    for options in [waiting_read().fencing(true), read()] {
        rig.engine.acquire(rig.t0, &options, b"r2").unwrap();
        let sent = first_command(&mut rig);
        assert!(sent.iter().all(|c| c[0] == b"EVALSHA" || c[0] == b"EVAL"), "{sent:?}");
        for i in 0..3 {
            rig.reply(rig.t0, i, b":1\r\n");
        }
        rig.events();
    }
}

#[test]
fn a_reader_refused_its_set_nx_joins_by_script_at_once_and_sends_no_cleanup() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &waiting_read(), b"r2").unwrap();
    rig.sent_commands();
    // Another reader holds the key: two nodes refuse the plain command, which decides it.
    for i in 0..2 {
        rig.reply(rig.t0, i, b"$-1\r\n");
    }
    assert!(rig.events().is_empty(), "the refusal says only that the key exists");
    let sent = rig.sent_commands();
    let args = [&b"3"[..], b"doc", b"redlease:readers:doc", b"redlease:queue:doc", b"r2", b"10000", b"0", b"0", b"0"];
    for (i, cmds) in sent.iter().enumerate().take(2) {
        // A fresh token's refused `SET NX` took nothing: the script alone, no read release.
        assert_eq!(cmds.len(), 1, "node {i}: {} commands", cmds.len());
        assert_eq!(&cmds[0][2..], args, "node {i}: the read acquire script, not waiting");
    }
    // The node that had not answered yet may have granted: it is cleaned up first.
    assert!(sent[2].len() == 2 && leaves_readers(&sent[2][..1]) && sent[2][1][2..] == args);
    rig.reply(rig.t0, 2, b"$-1\r\n");
    rig.reply(rig.t0, 2, b":0\r\n");
    for i in 0..3 {
        rig.reply(rig.t0, i, b":1\r\n");
    }
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }

    // Granted on one node only: the cleanup deletes that node's sole reader, on every node.
    let lock = rig.engine.acquire(rig.t0, &waiting_read(), b"r3").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, b"+OK\r\n");
    rig.reply(rig.t0, 1, b"$-1\r\n");
    rig.reply(rig.t0, 2, b"$-1\r\n");
    for (i, cmds) in rig.sent_commands().iter().enumerate() {
        let expected = if i == 0 { 2 } else { 1 };
        assert_eq!(cmds.len(), expected, "node {i}: {} commands", cmds.len());
        if i == 0 {
            assert!(leaves_readers(&cmds[..1]), "node 0: the read release first");
        }
        assert_eq!(cmds[expected - 1][2], b"3", "node {i}: then the read acquire script");
    }
    assert!(rig.events().is_empty());
    let _ = lock;
}
