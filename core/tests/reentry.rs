//! Re-entrant locks in one engine: what is refused at once, what goes on the wire, and how an
//! acquisition reads the nodes' answers (a re-entry that finds its owner's fencing token
//! recorded on a quorum takes it, with no fence round). The counting itself runs on model
//! nodes in `reentry_simulation.rs`, and on real servers in the conformance suite.

mod rig;

use std::time::Duration;

use redlease_core::{Event, LockOptions, Misuse};
use rig::Rig;

const TTL: Duration = Duration::from_secs(10);

fn owned(owner: &str) -> LockOptions {
    LockOptions::new("deploy", TTL).reentrant(owner).attempts(1)
}

#[test]
fn bad_owners_and_shapes_without_reentry_are_refused_naming_the_option() {
    let mut rig = Rig::new(3);
    let cases = [
        owned(""),
        owned("a:b"),
        owned(&"x".repeat(257)),
        owned("job").semaphore(3),
        owned("job").shared(true),
        owned("job").resources(["other"]),
    ];
    for options in cases {
        match rig.engine.acquire(rig.t0, &options, b"t") {
            Err(e @ Misuse::Reentry { .. }) => assert!(e.to_string().starts_with("reentrant(owner): "), "{e}"),
            other => panic!("{options:?}: {other:?}"),
        }
    }
    let reserved = LockOptions::new("redlease:holds:deploy", TTL);
    assert!(matches!(rig.engine.acquire(rig.t0, &reserved, b"t"), Err(Misuse::ReservedResource { .. })));
    assert!(rig.engine.acquire(rig.t0, &owned(&"x".repeat(256)), b"t").is_ok());
}

#[test]
fn a_reentrant_lock_sends_its_owner_and_hold_to_the_script_never_set_nx() {
    let mut rig = Rig::new(3);
    rig.engine.acquire(rig.t0, &owned("ci-42"), b"hold1").unwrap();
    for cmds in rig.sent_commands() {
        let [cmd] = cmds.as_slice() else { panic!("{cmds:?}") };
        // EVAL source (a connection's first call carries it), 4 keys, mode, owner, hold, TTL...
        assert_eq!(cmd[0], b"EVAL");
        assert_eq!(cmd[2], b"4");
        let keys: Vec<&[u8]> = cmd[3..7].iter().map(Vec::as_slice).collect();
        let expected: [&[u8]; 4] =
            [b"deploy", b"redlease:holds:deploy", b"redlease:queue:deploy", b"redlease:fence:deploy"];
        assert_eq!(keys, expected);
        assert_eq!(&cmd[7..11], [b"a".to_vec(), b"ci-42".to_vec(), b"hold1".to_vec(), b"10000".to_vec()]);
    }
}

#[test]
fn a_reentry_takes_the_owners_token_recorded_on_a_quorum_without_a_fence_round() {
    let mut rig = Rig::new(3);
    let lock = rig.engine.acquire(rig.t0, &owned("ci-42").fencing(true), b"hold2").unwrap();
    rig.sent_commands();
    // Two nodes re-enter with the owner's token 7 recorded, the third grants afresh.
    rig.reply(rig.t0, 0, b":-7\r\n");
    rig.reply(rig.t0, 1, b":-7\r\n");
    rig.reply(rig.t0, 2, b":9\r\n");
    match rig.events().as_slice() {
        [Event::Acquired { lock: l, fence: Some(7), .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    assert!(rig.sent_commands().iter().all(Vec::is_empty), "no fence round");
}

#[test]
fn a_reentry_without_a_recorded_token_on_a_quorum_runs_a_fence_round_above_it() {
    let mut rig = Rig::new(3);
    rig.engine.acquire(rig.t0, &owned("ci-42").fencing(true), b"hold2").unwrap();
    rig.sent_commands();
    // One node re-enters with token 7 recorded; two grant afresh (counters 4 and 5).
    rig.reply(rig.t0, 0, b":-7\r\n");
    rig.reply(rig.t0, 1, b":5\r\n");
    rig.reply(rig.t0, 2, b":6\r\n");
    assert!(rig.events().is_empty());
    for cmds in rig.sent_commands() {
        let [cmd] = cmds.as_slice() else { panic!("{cmds:?}") };
        // The fence step, proposing above every counter and the recorded token.
        assert_eq!((&cmd[7][..], &cmd[8][..], &cmd[10][..]), (&b"f"[..], &b"ci-42"[..], &b"8"[..]), "{cmd:?}");
    }
    // A quorum accepts it: only now is it recorded as the owner's, and once a quorum recorded
    // it (for the owner's next hold to find), the lock is held with it.
    rig.reply(rig.t0, 0, b":7\r\n");
    rig.reply(rig.t0, 1, b":6\r\n");
    assert!(rig.events().is_empty());
    for cmds in rig.sent_commands() {
        let [cmd] = cmds.as_slice() else { panic!("{cmds:?}") };
        assert_eq!((&cmd[7][..], &cmd[9][..], &cmd[10][..]), (&b"k"[..], &b"hold2"[..], &b"8"[..]), "{cmd:?}");
    }
    rig.reply(rig.t0, 2, b":5\r\n"); // the fence round's, late
    rig.reply(rig.t0, 2, b":1\r\n");
    assert!(rig.events().is_empty());
    rig.reply(rig.t0, 0, b":0\r\n");
    assert!(rig.events().is_empty());
    rig.reply(rig.t0, 1, b":1\r\n");
    assert!(matches!(rig.events().as_slice(), [Event::Acquired { fence: Some(8), .. }]));
}

#[test]
fn a_script_command_the_acl_refuses_is_a_misconfiguration() {
    use redlease_core::Fault;
    // Redis 7.0's words for a command a script runs and the user's ACL refuses (the hash
    // commands of a re-entrant lock, say); later servers answer NOPERM.
    let text =
        "ERR The user executing the script can't run this command or subcommand script: d1d2, on @user_script:12.";
    assert_eq!(Fault::of_server_error(text), Fault::Misconfigured);
    assert_eq!(
        Fault::of_server_error("NOPERM User redlease has no permissions to run the 'hset' command"),
        Fault::Misconfigured
    );
}
