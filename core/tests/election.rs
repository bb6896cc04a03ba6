//! Leader election in the engine: an observer's read of every node (`Engine::read_leader`),
//! fed replies byte by byte and whole, with nodes that fail, time out or answer garbage; and a
//! campaign's lock (`ElectionOptions`) as the engine sends it.

mod rig;

use std::time::Duration;

use redlease_core::{ElectionOptions, Event, Leader, Misuse, ReadId};
use rig::{Rig, commands};

/// The read's `counter value` reply as a bulk string.
fn bulk(s: &[u8]) -> Vec<u8> {
    [format!("${}\r\n", s.len()).as_bytes(), s, b"\r\n"].concat()
}

fn read_event(rig: &mut Rig) -> (ReadId, Option<Leader>) {
    let events = rig.events();
    match events.as_slice() {
        [Event::LeaderRead { read, leader }] => (*read, leader.clone()),
        other => panic!("expected one LeaderRead, got {other:?}"),
    }
}

#[test]
fn a_read_names_the_leader_a_quorum_holds_with_its_epoch() {
    let mut rig = Rig::new(3);
    let now = rig.at(1);
    let read = rig.engine.read_leader(now, "jobs").unwrap();
    let sent = rig.sent_commands();
    for node in &sent {
        let [cmd] = node.as_slice() else { panic!("{sent:?}") };
        assert_eq!(cmd[0], b"EVAL");
        assert_eq!(cmd[2..], [&b"2"[..], b"redlease:elect:{jobs}", b"redlease:fence:redlease:elect:{jobs}"]);
    }
    let token = ElectionOptions::new("jobs", "10.0.0.1").token(&[7; 20]);
    let marked = [token.as_slice(), b":"].concat();
    // One node byte by byte, one whole (the key marked as waited for), one with another token.
    for b in bulk(&[b"5 ", token.as_slice()].concat()) {
        rig.reply(now, 0, &[b]);
    }
    assert!(rig.events().is_empty(), "decided before every node answered");
    rig.reply(now, 1, &bulk(&[b"5 ", marked.as_slice()].concat()));
    assert!(rig.events().is_empty());
    rig.reply(now, 2, &bulk(b"4 0102.aa"));
    let (id, leader) = read_event(&mut rig);
    assert_eq!(id, read);
    let leader = leader.expect("two of three hold it");
    assert_eq!((leader.value.as_slice(), leader.epoch), (&b"10.0.0.1"[..], 5));
    assert_eq!(rig.engine.poll_timeout(), None, "nothing left to time");
}

#[test]
fn nodes_that_fail_or_stay_silent_count_as_no_answer() {
    let mut rig = Rig::new(3);
    let now = rig.at(1);
    rig.engine.read_leader(now, "jobs").unwrap();
    rig.sent_commands();
    let token = ElectionOptions::new("jobs", "a").token(&[1; 20]);
    rig.reply(now, 0, &bulk(&[b"3 ", token.as_slice()].concat()));
    rig.reply(now, 1, b"-ERR something\r\n");
    // Node 2 stays silent: the read is decided at the node timeout, without a leader.
    let deadline = rig.engine.poll_timeout().expect("a deadline");
    assert!(deadline <= now + Duration::from_millis(50));
    rig.engine.handle_timeout(deadline);
    assert_eq!(read_event(&mut rig).1, None);
    // Its late answer is ignored.
    rig.reply(deadline, 2, &bulk(b"3 "));
    assert!(rig.events().is_empty());
}

#[test]
fn reads_with_no_leader_and_bad_names() {
    let mut rig = Rig::new(1);
    let now = rig.at(1);
    rig.engine.read_leader(now, "jobs").unwrap();
    rig.sent_commands();
    rig.reply(now, 0, &bulk(b"0 "));
    assert_eq!(read_event(&mut rig).1, None);
    for name in ["", "a{b}"] {
        assert!(matches!(rig.engine.read_leader(now, name), Err(Misuse::Election { field: "name", .. })));
    }
    assert!(rig.sent_commands().iter().all(Vec::is_empty));
}

#[test]
fn a_campaign_is_a_fenced_wait_for_the_election_key() {
    let mut rig = Rig::new(3);
    let now = rig.at(1);
    let options = ElectionOptions::new("jobs", "a").ttl(Duration::from_secs(2));
    let token = options.token(&[9; 20]);
    rig.engine.acquire(now, &options.lock_options().unwrap(), &token).unwrap();
    for node in rig.sent_commands() {
        let cmd = &node[0];
        assert!(cmd.iter().any(|a| a == b"redlease:elect:{jobs}"), "{:?}", commands(&cmd.concat()));
        assert!(cmd.iter().any(|a| a == b"redlease:fence:redlease:elect:{jobs}"), "fencing reads the counter");
        assert!(cmd.contains(&token), "the token carries the value");
    }
}

#[test]
fn a_watched_election_reports_its_release_messages() {
    let mut rig = Rig::with(1, |c| c.wake = true);
    let now = rig.at(1);
    rig.engine.watch_leader(now, "jobs", true).unwrap();
    rig.engine.watch_leader(now, "jobs", true).unwrap();
    let sent = rig.sent_commands();
    assert_eq!(sent[0], [vec![b"SUBSCRIBE".to_vec(), b"redlease:wake:redlease:elect:{jobs}".to_vec()]]);
    rig.reply(now, 0, b">3\r\n$9\r\nsubscribe\r\n$35\r\nredlease:wake:redlease:elect:{jobs}\r\n:1\r\n");
    rig.reply(now, 0, b">3\r\n$7\r\nmessage\r\n$35\r\nredlease:wake:redlease:elect:{jobs}\r\n$5\r\nab:cd\r\n");
    assert_eq!(rig.events(), [Event::LeaderWake { name: "jobs".into() }]);
    assert!(!rig.engine.footprint().is_idle());
    // Counted: the second `false` unsubscribes.
    rig.engine.watch_leader(now, "jobs", false).unwrap();
    assert!(rig.sent_commands()[0].is_empty());
    rig.engine.watch_leader(now, "jobs", false).unwrap();
    assert_eq!(rig.sent_commands()[0][0][0], b"UNSUBSCRIBE");
}
