//! Semaphores: the wire form of an attempt and what the engine makes of hand-written replies
//! (scripted, through the rig); why a semaphore is a key per permit and not a count (the
//! AB/BC/AC schedule, against a counting model and against the engine in the simulation's
//! world); and how waiters for permits fare (a starvation measurement in the simulation's
//! world). The simulated runs are the simulation's (`sim`), with clients that play scripted
//! roles, and are checked as any of its runs besides.

mod rig;
mod sim;

use std::time::Duration;

use redlease_core::{
    AcquireError, Event, LockId, LockOptions, LockShape, LockState, Misuse, ReleaseOutcome, Retry, Vote,
};
use rig::Rig;
use sim::node::{MS, Time};
use sim::scenario::Scenario;
use sim::script::{Role, Script};
use sim::world::{Outcome, run};

const TTL: Duration = Duration::from_secs(10);

/// The semaphore's waiter queue and recorded limit, for the name `api`.
const QUEUE: &[u8] = b"redlease:queue:redlease:sem:{api}";
const LIMIT_KEY: &[u8] = b"redlease:sem:{api}:limit";

/// A node's answer when the script is not in its cache (the handshake does not load it).
const NOSCRIPT: &[u8] = b"-NOSCRIPT No matching script. Please use EVAL.\r\n";

/// A node's refusal: fewer than the permits wanted are free there.
const REFUSE: &[u8] = b":0\r\n";

/// One attempt at `permits` of the semaphore `api` of `limit`.
fn sem(limit: u32, permits: u32) -> LockOptions {
    LockOptions::new("api", TTL).semaphore(limit).permits(permits).attempts(1)
}

/// The key of permit `k` of `api`.
fn permit_key(k: u16) -> Vec<u8> {
    format!("redlease:sem:{{api}}:{k}").into_bytes()
}

/// A node's grant: its fencing proposal and the 1-based positions (in the call's KEYS) of the
/// permits it took.
fn grant(proposal: u64, positions: &[u16]) -> Vec<u8> {
    let list: Vec<String> = positions.iter().map(ToString::to_string).collect();
    let text = format!("{proposal} {}", list.join(" "));
    format!("${}\r\n{text}\r\n", text.len()).into_bytes()
}

/// The permit numbers a semaphore call names, in its order (the client's order).
fn order(cmd: &[Vec<u8>], limit: usize) -> Vec<u16> {
    cmd[3..3 + limit]
        .iter()
        .map(|k| {
            let k = std::str::from_utf8(k).unwrap();
            assert!(k.starts_with("redlease:sem:{api}:"), "{k}");
            k.rsplit(':').next().unwrap().parse().unwrap()
        })
        .collect()
}

/// Whether `cmd` runs the script `(source, sha)`, by `EVALSHA` or by `EVAL`.
fn runs(cmd: &[Vec<u8>], (source, sha): (&str, &str)) -> bool {
    (cmd[0] == b"EVALSHA" && cmd[1] == sha.as_bytes()) || (cmd[0] == b"EVAL" && cmd[1] == source.as_bytes())
}

/// The semaphore's release script.
fn is_release(cmd: &[Vec<u8>]) -> bool {
    runs(cmd, redlease_core::semaphore_release_script())
}

/// The permits a release names (its KEYS are the permits, then the semaphore's queue), and the
/// queue.
fn release_keys(cmd: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let n: usize = std::str::from_utf8(&cmd[2]).unwrap().parse().unwrap();
    let keys = &cmd[3..3 + n];
    (keys[..n - 1].to_vec(), keys[n - 1..].to_vec())
}

/// Acquire with `options` and `token` at `t0`; every node answers the first call with
/// `NOSCRIPT` (as after a `SCRIPT FLUSH`), and the attempt is resent with the source. Returns the lock and the client's
/// order of the permits.
fn start(rig: &mut Rig, options: &LockOptions, token: &[u8]) -> (LockId, Vec<u16>) {
    let lock = rig.engine.acquire(rig.t0, options, token).unwrap();
    let limit = options.limit.unwrap() as usize;
    let first = rig.sent_commands();
    for (i, cmds) in first.iter().enumerate() {
        assert_eq!(cmds.len(), 1, "node {i}: one script call per attempt");
        assert!(runs(&cmds[0], redlease_core::semaphore_script()), "node {i}: {:?}", cmds[0][0]);
        rig.reply(rig.t0, i, NOSCRIPT);
    }
    let resent = rig.sent_commands();
    for (i, cmds) in resent.iter().enumerate() {
        assert_eq!(cmds.len(), 1, "node {i}");
        assert_eq!(cmds[0][0], b"EVAL", "node {i}: resent with the source");
        assert_eq!(cmds[0][2..], first[i][0][2..], "node {i}: the same keys and arguments");
    }
    (lock, order(&resent[0][0], limit))
}

/// Answer the cleanups the engine sent (they are not waited for, but their replies come
/// first on each connection).
fn answer_cleanups(rig: &mut Rig) {
    for (i, cmds) in rig.sent_commands().iter().enumerate() {
        for c in cmds {
            assert!(is_release(c), "node {i}: {:?}", String::from_utf8_lossy(&c[0]));
            rig.reply(rig.t0, i, b":0\r\n");
        }
    }
}

/// Drain the events of the locks.
fn events(rig: &mut Rig) -> Vec<Event> {
    rig.events().into_iter().filter(|e| e.lock().is_some()).collect()
}

#[test]
fn an_attempt_is_one_script_call_naming_every_permit_the_limit_and_the_queue() {
    let mut rig = Rig::new(3);
    for (fencing, numkeys) in [(false, 6), (true, 10)] {
        rig.engine.acquire(rig.t0, &sem(4, 2).fencing(fencing), b"tok").unwrap();
        let cmds = rig.sent_commands();
        let cmd = &cmds[0][0];
        for c in &cmds {
            assert_eq!(c, &cmds[0], "the same call to every node");
        }
        // The handshake does not load the script: a connection's first call carries its
        // source, the next ones its digest.
        let (source, sha) = redlease_core::semaphore_script();
        let first = (cmd[0].as_slice(), cmd[1].as_slice());
        if fencing {
            assert_eq!(first, (&b"EVALSHA"[..], sha.as_bytes()));
        } else {
            assert_eq!(first, (&b"EVAL"[..], source.as_bytes()));
        }
        assert_eq!(cmd[2], numkeys.to_string().as_bytes());
        // KEYS: the four permits in the client's order (a permutation), the limit, the queue,
        // then with fencing the permits' fence counters in the same order.
        let permits = order(cmd, 4);
        let mut sorted = permits.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 2, 3]);
        assert_eq!(cmd[7], LIMIT_KEY);
        assert_eq!(cmd[8], QUEUE);
        if fencing {
            for (i, &k) in permits.iter().enumerate() {
                assert_eq!(cmd[9 + i], [b"redlease:fence:".as_slice(), &permit_key(k)].concat());
            }
        }
        // ARGV: token, TTL ms, limit, permits, wait mode (a first attempt does not queue),
        // queue TTL, reservation, ticket and preferred position (unused).
        let argv: Vec<&[u8]> = cmd[3 + numkeys..].iter().map(Vec::as_slice).collect();
        assert_eq!(argv, [&b"tok"[..], b"10000", b"4", b"2", b"0", b"0", b"0", b"0", b"0"]);
        // The client's order comes from the token: the same token, the same order.
        rig.engine.acquire(rig.t0, &sem(4, 2).fencing(fencing), b"tok").unwrap();
        assert_eq!(order(&rig.sent_commands()[1][0], 4), permits);
    }
}

#[test]
fn noscript_resends_the_attempt_with_the_source_and_its_grant_counts() {
    let mut rig = Rig::new(3);
    let (lock, order) = start(&mut rig, &sem(3, 1), b"tok");
    for i in 0..2 {
        rig.reply(rig.t0, i, &grant(1, &[1]));
    }
    match events(&mut rig).as_slice() {
        [Event::Acquired { lock: l, fence: None, attempts: 1, .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.engine.permits(lock), Some(&[order[0]][..]));
    // The source went out once per connection: the next attempt there is by EVALSHA again.
    rig.engine.acquire(rig.t0, &sem(3, 1), b"tok2").unwrap();
    for cmds in rig.sent_commands() {
        assert_eq!(cmds.last().unwrap()[0], b"EVALSHA");
    }
}

#[test]
fn a_quorum_on_one_permit_holds_it_and_permits_names_it() {
    let mut rig = Rig::new(5);
    let (lock, order) = start(&mut rig, &sem(3, 1), b"tok");
    // Nodes 0 and 1 grant the client's first permit, node 2 its second (the first is taken
    // there): no quorum (3 of 5) yet.
    rig.reply(rig.t0, 0, &grant(1, &[1]));
    rig.reply(rig.t0, 1, &grant(1, &[1]));
    rig.reply(rig.t0, 2, &grant(1, &[2]));
    assert!(events(&mut rig).is_empty());
    assert_eq!(rig.engine.permits(lock), None, "nothing held before the grant");
    let h = rig.engine.health();
    let acquiring = LockShape::Semaphore { limit: 3, permits: 1, held: Vec::new() };
    assert!(matches!(&h.locks[..], [l] if l.shape == acquiring && l.state == LockState::Acquiring), "{h}");
    rig.reply(rig.t0, 3, &grant(1, &[1]));
    match events(&mut rig).as_slice() {
        [Event::Acquired { lock: l, .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.engine.permits(lock), Some(&[order[0]][..]));
    // A mutex names no permits.
    let mutex = rig.engine.acquire(rig.t0, &LockOptions::new("m", TTL), b"mutex-token").unwrap();
    assert_eq!(rig.engine.permits(mutex), None);
    // The health view lists both: the semaphore's permit held, the mutex acquiring.
    let h = rig.engine.health();
    let held = LockShape::Semaphore { limit: 3, permits: 1, held: vec![order[0]] };
    match &h.locks[..] {
        [s, m] => {
            assert_eq!(
                (s.lock, &s.shape, s.state, &s.resources[..]),
                (lock, &held, LockState::Held, &["api".to_owned()][..])
            );
            assert!(s.valid_until.is_some() && s.token_prefix == "tok");
            assert_eq!((m.lock, &m.shape, m.state), (mutex, &LockShape::Exclusive, LockState::Acquiring));
            assert_eq!((&m.resources[..], &m.token_prefix[..]), (&["m".to_owned()][..], "mutex-to"));
        }
        other => panic!("{other:?}"),
    }
    let table = h.to_string();
    assert!(table.contains(&format!("api (permits {} of 3)  held  token tok…", order[0])), "{table}");
    assert!(table.contains("m (exclusive)  acquiring  token mutex-to…") && !table.contains("mutex-token"), "{table}");
}

#[test]
fn a_split_vote_fails_the_attempt_as_held_and_cleans_up_every_permit() {
    // The AB/BC/AC shape: each node grants a different permit, so no permit has a quorum.
    let mut rig = Rig::new(3);
    let (lock, _) = start(&mut rig, &sem(3, 1), b"tok");
    rig.reply(rig.t0, 0, &grant(1, &[1]));
    rig.reply(rig.t0, 1, &grant(1, &[2]));
    assert!(events(&mut rig).is_empty(), "node 2 could still make a quorum on either permit");
    rig.reply(rig.t0, 2, &grant(1, &[3]));
    match events(&mut rig).as_slice() {
        [Event::AcquireFailed { lock: l, error: AcquireError::Held { votes, attempts: 1 } }] if *l == lock => {
            assert!(votes.iter().all(|v| *v == Vote::Granted), "{votes:?}");
        }
        other => panic!("a split vote is held by others, not too slow: {other:?}"),
    }
    assert_eq!(rig.engine.permits(lock), None);
    // Each node took a permit: each gets the cleanup, which names every permit (the script
    // deletes those holding our token), each with the semaphore's one queue.
    for (i, cmds) in rig.sent_commands().iter().enumerate() {
        assert_eq!(cmds.len(), 1, "node {i}");
        assert!(is_release(&cmds[0]), "node {i}");
        let (keys, queues) = release_keys(&cmds[0]);
        let mut keys = keys.clone();
        keys.sort();
        assert_eq!(keys, (0..3).map(permit_key).collect::<Vec<_>>(), "node {i}");
        assert!(queues.iter().all(|q| q == QUEUE), "node {i}: {queues:?}");
    }
}

#[test]
fn grants_beyond_the_held_permits_are_released_on_the_nodes_that_made_them() {
    let mut rig = Rig::new(3);
    let (lock, order) = start(&mut rig, &sem(3, 1), b"tok");
    rig.reply(rig.t0, 0, &grant(1, &[2]));
    rig.reply(rig.t0, 1, &grant(1, &[1]));
    assert!(events(&mut rig).is_empty());
    rig.reply(rig.t0, 2, &grant(1, &[2]));
    match events(&mut rig).as_slice() {
        [Event::Acquired { lock: l, .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.engine.permits(lock), Some(&[order[1]][..]));
    // Node 1 granted the first permit, which is not held: released there, and only there.
    let cmds = rig.sent_commands();
    assert!(cmds[0].is_empty() && cmds[2].is_empty(), "{cmds:?}");
    assert_eq!(cmds[1].len(), 1);
    assert!(is_release(&cmds[1][0]));
    assert_eq!(release_keys(&cmds[1][0]), (vec![permit_key(order[0])], vec![QUEUE.to_vec()]));
    // ARGV: the token, a cleanup not leaving the queue, the reservation of its entry, its
    // ticket and queue TTL (none: it never waited).
    let none = b"0".to_vec();
    assert_eq!(cmds[1][0][5..], [b"tok".to_vec(), b"2".to_vec(), none.clone(), none.clone(), none]);
    // The held permit is what extensions name.
    rig.engine.extend(rig.at(1), lock, None).unwrap();
    for cmds in rig.sent_commands() {
        assert_eq!(cmds[0][2..4], [b"1".to_vec(), permit_key(order[1])]);
    }
}

#[test]
fn several_permits_are_held_all_together_or_not_at_all() {
    let ms = Duration::from_millis(1);
    let mut rig = Rig::with(3, |c| c.retry = redlease_core::Retry::new(2, ms, ms));
    let (lock, order) = start(&mut rig, &sem(3, 2).attempts(2), b"tok");
    // Node 0 took the first two permits, node 1 none (fewer than two were free), node 2 the
    // first and third: only the first permit has a quorum, and two are wanted.
    rig.reply(rig.t0, 0, &grant(1, &[1, 2]));
    rig.reply(rig.t0, 1, REFUSE);
    rig.reply(rig.t0, 2, &grant(1, &[1, 3]));
    assert!(events(&mut rig).is_empty(), "the first attempt failed; the second comes");
    assert_eq!(rig.engine.permits(lock), None);
    // The cleanup where permits were taken (node 1 took nothing).
    let cmds = rig.sent_commands();
    assert!(cmds[1].is_empty());
    for i in [0, 2] {
        assert_eq!(cmds[i].len(), 1, "node {i}");
        assert!(is_release(&cmds[i][0]));
        rig.reply(rig.t0, i, b":2\r\n");
    }
    rig.engine.handle_timeout(rig.at(1));
    for (i, c) in rig.sent_commands().iter().enumerate() {
        assert_eq!(c.len(), 1, "node {i}");
        assert!(runs(&c[0], redlease_core::semaphore_script()), "node {i}: the retry");
    }
    // Now two nodes agree on the first two permits.
    rig.reply(rig.at(1), 0, &grant(1, &[1, 2]));
    rig.reply(rig.at(1), 1, &grant(1, &[2, 1]));
    match events(&mut rig).as_slice() {
        [Event::Acquired { lock: l, attempts: 2, .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    let mut held = vec![order[0], order[1]];
    held.sort_unstable();
    assert_eq!(rig.engine.permits(lock), Some(held.as_slice()));
    // A late refusal queued the holder on node 2: it leaves that queue (releasing the permits
    // it does not hold, in case the node hands it one), so the node names a waiter next.
    rig.reply(rig.at(1), 2, REFUSE);
    let cmds = rig.sent_commands();
    assert!(cmds[0].is_empty() && cmds[1].is_empty(), "{cmds:?}");
    assert_eq!(cmds[2].len(), 1);
    assert!(is_release(&cmds[2][0]));
    let (keys, queues) = release_keys(&cmds[2][0]);
    assert_eq!(keys, [permit_key(order[2])], "only the permit it does not hold");
    assert_eq!(queues, [b"redlease:queue:redlease:sem:{api}".to_vec()]);
    assert_eq!(cmds[2][0][cmds[2][0].len() - 4], b"3", "it leaves the queue, a cleanup");
    rig.reply(rig.at(1), 2, b":0\r\n");
    // A grant of fewer (or more) positions than wanted is no answer the script gives.
    let (bad, _) = start(&mut rig, &sem(3, 2), b"tok2");
    rig.reply(rig.t0, 0, &grant(1, &[1]));
    assert!(matches!(rig.events().as_slice(), [Event::LinkFailed { .. }]), "garbage fails the link");
    assert_eq!(rig.engine.permits(bad), None);
}

/// Two permits granted by different quorums (one by nodes 0 and 1, the other by nodes 0
/// and 2) are not held: no quorum of nodes has both, so no extension could ever reach a
/// quorum (each node's extend script needs every permit), and the lock would be reported lost
/// although each permit is held. A quorum must grant the very same permits.
#[test]
fn permits_granted_by_different_quorums_are_not_held_together() {
    let mut rig = Rig::new(3);
    let (lock, _) = start(&mut rig, &sem(3, 2), b"tok");
    rig.reply(rig.t0, 0, &grant(1, &[1, 2]));
    rig.reply(rig.t0, 1, &grant(1, &[1, 3]));
    rig.reply(rig.t0, 2, &grant(1, &[2, 3]));
    match events(&mut rig).as_slice() {
        [Event::AcquireFailed { lock: l, error: AcquireError::Held { .. } }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    answer_cleanups(&mut rig);
    // When a quorum agrees, the lock holds those permits and extends on that quorum.
    let (lock, order) = start(&mut rig, &sem(3, 2), b"tok2");
    rig.reply(rig.t0, 0, &grant(1, &[1, 2]));
    rig.reply(rig.t0, 1, &grant(1, &[1, 3]));
    rig.reply(rig.t0, 2, &grant(1, &[2, 1]));
    match events(&mut rig).as_slice() {
        [Event::Acquired { lock: l, .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    let mut held = vec![order[0], order[1]];
    held.sort_unstable();
    assert_eq!(rig.engine.permits(lock), Some(held.as_slice()));
    let cmds = rig.sent_commands();
    // Node 1's third permit is released at once.
    assert_eq!(release_keys(&cmds[1][0]).0, vec![permit_key(order[2])]);
    rig.engine.extend(rig.at(1), lock, None).unwrap();
    rig.sent_commands();
    rig.reply(rig.at(2), 0, b":1\r\n");
    rig.reply(rig.at(2), 2, b":1\r\n");
    assert!(matches!(events(&mut rig).as_slice(), [Event::Extended { .. }]));
}

#[test]
fn a_wrong_limit_on_a_majority_fails_at_once_as_misconfigured_naming_the_nodes() {
    let ms = Duration::from_millis(1);
    let mut rig = Rig::with(3, |c| c.retry = redlease_core::Retry::new(10, ms, ms));
    let wrong = b"-WRONGLIMIT the semaphore has 2 permits on this node, the client asks for a limit of 3\r\n";
    let (lock, _) = start(&mut rig, &sem(3, 1).attempts(10), b"tok");
    rig.reply(rig.t0, 0, wrong);
    rig.reply(rig.t0, 1, wrong);
    match events(&mut rig).as_slice() {
        [Event::AcquireFailed { lock: l, error: e @ AcquireError::Misconfigured { votes, attempts: 1 } }]
            if *l == lock =>
        {
            assert!(matches!(&votes[0], Vote::Misconfigured(m) if m.starts_with("WRONGLIMIT")), "{votes:?}");
            assert!(matches!(&votes[1], Vote::Misconfigured(m) if m.starts_with("WRONGLIMIT")), "{votes:?}");
            let text = e.to_string();
            assert!(text.contains("node #0 (redis://127.0.0.1:7000)") && text.contains("node #1"), "{text}");
            assert!(text.contains("has 2 permits"), "{text}");
        }
        other => panic!("no retry can mend a wrong limit: {other:?}"),
    }
    rig.reply(rig.t0, 2, REFUSE); // late: ignored
    answer_cleanups(&mut rig);
    // On a minority, the others still decide.
    let (lock, order) = start(&mut rig, &sem(3, 1), b"tok2");
    rig.reply(rig.t0, 0, wrong);
    rig.reply(rig.t0, 1, &grant(1, &[1]));
    rig.reply(rig.t0, 2, &grant(1, &[1]));
    assert!(matches!(events(&mut rig).as_slice(), [Event::Acquired { lock: l, .. }] if *l == lock));
    assert_eq!(rig.engine.permits(lock), Some(&[order[0]][..]));
}

#[test]
fn the_release_names_the_permit_held_with_the_semaphores_queue_and_a_late_grant_is_trimmed() {
    for limit in [1u16, 4] {
        let mut rig = Rig::new(3);
        let (lock, order) = start(&mut rig, &sem(u32::from(limit), 1), b"tok");
        for i in 0..3 {
            rig.reply(rig.t0, i, &grant(1, &[1]));
        }
        assert!(matches!(events(&mut rig).as_slice(), [Event::Acquired { .. }]));
        rig.engine.release(rig.at(5), lock).unwrap();
        for (i, cmds) in rig.sent_commands().iter().enumerate() {
            assert_eq!(cmds.len(), 1, "node {i}");
            assert!(is_release(&cmds[0]), "node {i}");
            // The permit held, with the semaphore's queue.
            let (keys, queues) = release_keys(&cmds[0]);
            assert_eq!(keys, [permit_key(order[0])], "node {i}");
            assert_eq!(queues, [QUEUE.to_vec()], "node {i}");
        }
        for i in 0..3 {
            rig.reply(rig.at(6), i, b":1\r\n");
        }
        match events(&mut rig).as_slice() {
            [Event::Released { lock: l, report }] if *l == lock => assert_eq!(report.outcome, ReleaseOutcome::Released),
            other => panic!("{other:?}"),
        }
    }
    // Two nodes decide; the third grants another permit after the decision: that permit is
    // released on it at once.
    let mut rig = Rig::new(3);
    let (lock, order) = start(&mut rig, &sem(4, 1), b"tok");
    rig.reply(rig.t0, 0, &grant(1, &[1]));
    rig.reply(rig.t0, 1, &grant(1, &[1]));
    assert!(matches!(events(&mut rig).as_slice(), [Event::Acquired { lock: l, .. }] if *l == lock));
    assert!(rig.sent_commands().iter().all(Vec::is_empty));
    rig.reply(rig.t0, 2, &grant(1, &[2]));
    let sent = rig.sent_commands();
    assert!(sent[0].is_empty() && sent[1].is_empty(), "{sent:?}");
    assert_eq!(sent[2].len(), 1);
    assert!(is_release(&sent[2][0]));
    assert_eq!(release_keys(&sent[2][0]).0, [permit_key(order[1])]);
}

#[test]
fn fencing_gives_one_token_for_the_permits_held() {
    let mut rig = Rig::new(3);
    let (lock, order) = start(&mut rig, &sem(4, 2).fencing(true), b"tok");
    // Each node proposes one more than the largest counter of the permits it took.
    rig.reply(rig.t0, 0, &grant(8, &[1, 2]));
    rig.reply(rig.t0, 1, &grant(5, &[2, 1]));
    assert!(events(&mut rig).is_empty(), "the fence round comes first");
    let cmds = rig.sent_commands();
    let mut held = vec![order[0], order[1]];
    held.sort_unstable();
    for (i, c) in cmds.iter().enumerate() {
        let fence = c.last().unwrap();
        let (source, sha) = (redlease_core::script_sources()[3], redlease_core::script_digests()[3]);
        assert!(runs(fence, (source, sha)), "node {i}: the fence round");
        // The counters of the two permits held, and the largest proposal.
        let mut counters = fence[3..5].to_vec();
        counters.sort();
        let want: Vec<Vec<u8>> =
            held.iter().map(|&k| [b"redlease:fence:".as_slice(), &permit_key(k)].concat()).collect();
        assert_eq!(counters, want, "node {i}");
        assert_eq!(fence[5], b"8", "node {i}");
    }
    rig.reply(rig.t0, 2, REFUSE);
    rig.reply(rig.t0, 0, b":7\r\n");
    rig.reply(rig.t0, 1, b":4\r\n");
    match events(&mut rig).as_slice() {
        [Event::Acquired { lock: l, fence: Some(8), .. }] if *l == lock => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.engine.permits(lock), Some(held.as_slice()));
}

#[test]
fn bad_limits_and_permits_are_misuse() {
    let mut rig = Rig::new(3);
    let cases = [
        (LockOptions::new("api", TTL).semaphore(0), Some(0), 1),
        (LockOptions::new("api", TTL).semaphore(redlease_core::MAX_PERMITS + 1), Some(1025), 1),
        (LockOptions::new("api", TTL).semaphore(3).permits(0), Some(3), 0),
        (LockOptions::new("api", TTL).semaphore(3).permits(4), Some(3), 4),
        (LockOptions::new("api", TTL).semaphore(3).resources(["other"]), Some(3), 1),
        (LockOptions::new("api", TTL).permits(2), None, 2),
    ];
    for (options, limit, permits) in cases {
        match rig.engine.acquire(rig.t0, &options, b"tok") {
            Err(Misuse::Permits { limit: l, permits: p, .. }) => assert_eq!((l, p), (limit, permits)),
            other => panic!("{options:?}: {other:?}"),
        }
    }
    assert!(rig.sent_commands().iter().all(Vec::is_empty), "nothing was sent");
    // The limit's ends are fine.
    for limit in [1, redlease_core::MAX_PERMITS] {
        let options = LockOptions::new("api", TTL).semaphore(limit).permits(limit);
        assert!(rig.engine.acquire(rig.t0, &options, b"tok").is_ok(), "{limit}");
    }
}

#[test]
fn a_mutex_may_not_live_among_semaphore_keys() {
    let mut rig = Rig::with(3, |c| c.key_prefix = "app:".into());
    for name in ["redlease:sem:{api}:0", "redlease:sem:x"] {
        match rig.engine.acquire(rig.t0, &LockOptions::new(name, TTL), b"tok") {
            Err(Misuse::ReservedResource { resource, reserved: "redlease:sem:" }) => {
                assert_eq!(resource, format!("app:{name}"));
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // A semaphore's own keys are under the key prefix.
    rig.engine.acquire(rig.t0, &sem(2, 1), b"tok").unwrap();
    let cmd = &rig.sent_commands()[0][0];
    assert!(cmd[3].starts_with(b"app:redlease:sem:{api}:"), "{:?}", String::from_utf8_lossy(&cmd[3]));
    assert_eq!(cmd[5], b"app:redlease:sem:{api}:limit");
    assert_eq!(cmd[6], b"redlease:queue:app:redlease:sem:{api}");
}

// ----- why a key per permit: the AB/BC/AC schedule ----------------------------------------

/// Which nodes (A, B, C) each of the three clients reaches: X only A and B, Y only B and C, Z
/// only A and C. Every pair of them shares one node.
const REACH: [[bool; 3]; 3] = [[true, true, false], [false, true, true], [true, false, true]];

/// A semaphore counted per node, granted at a majority: each node grants while fewer than
/// `limit` clients hold it there; a client holds when a majority of the nodes granted it.
/// Returns how many clients hold at once when they come in `arrivals` order.
fn counting_holders(limit: usize, arrivals: &[usize]) -> usize {
    let mut count = [0; 3];
    let mut holders = 0;
    for &c in arrivals {
        let granted: Vec<usize> = (0..3).filter(|&n| REACH[c][n] && count[n] < limit).collect();
        for &n in &granted {
            count[n] += 1;
        }
        if granted.len() >= 2 {
            holders += 1;
        } else {
            // A client that misses its majority gives back what it got.
            for &n in &granted {
                count[n] -= 1;
            }
        }
    }
    holders
}

/// The engine under the AB/BC/AC schedule: three clients over three model nodes, each
/// reaching the two nodes of its row of `REACH` (its link to the third never comes up, so that
/// node votes no at once), messages taking no time. Client `c` asks for one permit of a
/// semaphore of 2 at `starts[c]` (up to three attempts, 1 to 2 ms apart) and holds what it
/// gets until the workload stops at 60 ms.
fn triangle(seed: u64, starts: [Time; 3]) -> Outcome {
    let roles = (0..3)
        .map(|c| {
            let options = LockOptions::new("r0", TTL).semaphore(2).attempts(3);
            let unreachable = (0..3).filter(|&n| !REACH[c][n]).collect();
            Role { again: false, unreachable, ..Role::new(starts[c], options, None) }
        })
        .collect();
    let mut sc = Scenario::scripted(seed, 3, (0, 0), Script { roles, stop_at: 60 * MS });
    let ms = Duration::from_millis(1);
    sc.retry = Retry::new(3, ms, 2 * ms);
    run(&sc, false)
}

#[test]
fn a_count_per_node_admits_three_holders_of_two_permits_and_a_key_per_permit_admits_two() {
    let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    // (a) Counted per node, granted at a majority: every arrival order admits all three,
    // L + 1 = 3 = N·L/Q holders of a semaphore of 2 (each node sees only two of them).
    for arrivals in orders {
        assert_eq!(counting_holders(2, &arrivals), 3, "{arrivals:?}");
    }
    // (b) The engine, a key per permit, in the simulation's world, under the same schedule:
    // never more than two, whatever permit orders the tokens draw and whatever order the
    // clients come in, retries included. Nobody releases: every grant is held at once with
    // every other.
    let mut most = [0; 3];
    for seed in 0..40u64 {
        for arrivals in orders {
            // One a millisecond, from 1 ms (the connections are up by then).
            let mut starts = [0; 3];
            for (step, &c) in arrivals.iter().enumerate() {
                starts[c] = (step as Time + 1) * MS;
            }
            let out = triangle(seed, starts);
            assert!(out.violations.is_empty(), "seed {seed}, {arrivals:?}: {}", out.violations[0]);
            for (c, nodes) in out.node_stats.iter().enumerate() {
                let connected: Vec<bool> = nodes.iter().flatten().map(|n| n.connects > 0).collect();
                assert_eq!(
                    connected, REACH[c],
                    "seed {seed}, {arrivals:?}: client {c} connected to its two nodes only"
                );
            }
            // What each client's one acquisition came to: the permit it holds, if any.
            let mut holders = Vec::new();
            for c in 0..3 {
                let ends: Vec<_> = out.acquisitions.iter().filter(|a| a.client == c).map(|a| &a.outcome).collect();
                match ends.as_slice() {
                    [Some(Ok(hold))] => holders.push(out.holds[*hold].resources[0].clone()),
                    [Some(Err(AcquireError::Held { .. }))] => {}
                    other => panic!("seed {seed}, {arrivals:?}, client {c}: {other:?}"),
                }
            }
            assert!(holders.len() <= 2, "seed {seed}, {arrivals:?}: {} holders of 2 permits", holders.len());
            let count = holders.len();
            holders.sort_unstable();
            holders.dedup();
            assert_eq!(holders.len(), count, "seed {seed}, {arrivals:?}: two holders of one permit");
            most[count] += 1;
        }
    }
    println!("holders at once over 240 trials (none, one, two): {most:?}");
    assert_eq!(most[0], 0, "the first comer always holds");
    assert!(most[2] > 0, "two holders at once happen: the limit is reached, not just kept");
}

// ----- waiters for permits: a starvation measurement -----------------------------------------

mod waiters {
    //! Clients contending for a semaphore in the simulation's world, each holding its permits
    //! 5 ms and asking again at once: waiters that hear release messages, ones that take every
    //! permit at once, and ones with wake-ups off (they poll). Each message takes 0.2 ms, or
    //! with jitter 0.2 to 1 ms (in order on each connection), so that nodes see requests in
    //! different orders.

    use std::time::Duration;

    use redlease_core::LockOptions;

    use super::sim::node::{MS, Time};
    use super::sim::scenario::Scenario;
    use super::sim::script::{Role, Script};

    /// One-way network delay (the least, with jitter).
    const DELAY: Time = MS / 5;
    /// How long each client holds its permits.
    const HOLD: Time = 5 * MS;
    /// Simulated time per run.
    pub(super) const RUN: Time = 2_000 * MS;

    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    pub(super) enum Kind {
        /// One permit, wake-ups on.
        One,
        /// Every permit at once, wake-ups on.
        All,
        /// One permit, wake-ups off.
        Poller,
    }

    /// The nodes, the semaphore's limit, and whether messages take varying times.
    #[derive(Clone, Copy, Debug)]
    pub(super) struct Setup {
        pub(super) nodes: usize,
        pub(super) limit: u32,
        pub(super) jitter: bool,
    }

    impl Kind {
        fn permits(self, limit: u32) -> u32 {
            if self == Kind::All { limit } else { 1 }
        }
    }

    /// What one client had in a run.
    pub(super) struct Tally {
        pub(super) grants: u32,
        pub(super) longest_wait: Time,
    }

    /// One run of `kinds` from `seed` in `setup`: each client's tally, the most permits held
    /// at once, and what broke a rule.
    pub(super) fn run(setup: Setup, seed: u64, kinds: &[Kind]) -> (Vec<Tally>, u32, Vec<String>) {
        let roles = kinds
            .iter()
            .enumerate()
            .map(|(c, &kind)| {
                let options = LockOptions::new("r0", Duration::from_secs(10))
                    .semaphore(setup.limit)
                    .permits(kind.permits(setup.limit))
                    .wait(Duration::from_secs(60));
                // Each starts a little apart, after the handshakes.
                let mut role = Role::new(10 * MS + c as Time * MS / 10, options, Some(HOLD));
                role.wake = kind != Kind::Poller;
                role
            })
            .collect();
        let delay = if setup.jitter { (DELAY, 5 * DELAY - 1) } else { (DELAY, DELAY) };
        let sc = Scenario::scripted(seed, setup.nodes, delay, Script { roles, stop_at: RUN });
        let out = super::run(&sc, false);
        let mut violations: Vec<String> = out.violations.iter().map(ToString::to_string).collect();
        violations.extend(out.failures().map(|(c, error)| format!("client {c} gave up: {error}")));
        let tally = (0..kinds.len())
            .map(|c| Tally {
                grants: out.grants(c).count() as u32,
                longest_wait: out.grants(c).map(|(_, waited)| waited).max().unwrap_or(0),
            })
            .collect();
        (tally, out.peak_permits() as u32, violations)
    }
}

#[test]
fn every_waiter_for_permits_gets_them() {
    use waiters::{Kind, RUN, Setup};
    const LIMIT: u32 = 2;
    // Requests reach the nodes in the same order: the measurement isolates how waiters of
    // each kind fare (the next test has nodes that disagree on the order).
    let setup = Setup { nodes: 3, limit: LIMIT, jitter: false };
    let kinds = [Kind::One, Kind::One, Kind::One, Kind::One, Kind::All, Kind::Poller];
    let runs = 8;
    // Per client: acquisitions over the runs, the fewest in a run, the longest wait.
    let mut total = vec![(0u32, u32::MAX, 0u64); kinds.len()];
    for seed in 0..runs {
        let (tally, peak, violations) = waiters::run(setup, seed, &kinds);
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
        assert_eq!(peak, LIMIT, "seed {seed}: the semaphore was used to its limit");
        for (t, x) in tally.iter().zip(&mut total) {
            x.0 += t.grants;
            x.1 = x.1.min(t.grants);
            x.2 = x.2.max(t.longest_wait);
        }
    }
    // Six clients sharing two permits, 5 ms holds, for 2 s each run: at most 2 × 2000 / 5 = 800
    // permits taken per run in all (the two-permit client takes two at a time).
    for (c, (&kind, &(grants, fewest, longest))) in kinds.iter().zip(&total).enumerate() {
        println!(
            "client {c} ({kind:?}, {} permit(s)): {grants} acquisitions over {runs} runs of {} s ({} per run on average, \
             at least {fewest}), longest wait {} ms",
            if kind == Kind::All { LIMIT } else { 1 },
            RUN / 1_000 / MS,
            grants / runs as u32,
            longest / MS
        );
    }
    for (c, (&kind, &(_, fewest, longest))) in kinds.iter().zip(&total).enumerate() {
        assert!(fewest >= 4, "client {c} ({kind:?}): only {fewest} acquisitions in a run: it starves");
        assert!(longest < RUN / 3, "client {c} ({kind:?}): waited {} ms", longest / MS);
    }
}

/// Sixteen one-permit waiters on a semaphore of 4 over five nodes that see requests in
/// different orders: the nodes' queues differ, so a release may name different waiters on
/// different nodes. The permits stay in use: at most 4 × 2000 / 5 = 1,600 grants per run of
/// 2 simulated seconds with 5 ms holds; 4 waiters (no contention) take about 880.
#[test]
fn sixteen_waiters_keep_four_permits_busy_over_five_nodes() {
    use waiters::{Kind, RUN, Setup};
    let setup = Setup { nodes: 5, limit: 4, jitter: true };
    let runs = 4;
    let (mut grants, mut fewest, mut longest) = (0, u32::MAX, 0);
    for seed in 0..runs {
        let (tally, peak, violations) = waiters::run(setup, seed, &[Kind::One; 16]);
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
        assert_eq!(peak, 4, "seed {seed}");
        grants += tally.iter().map(|t| t.grants).sum::<u32>();
        fewest = fewest.min(tally.iter().map(|t| t.grants).min().unwrap_or(0));
        longest = longest.max(tally.iter().map(|t| t.longest_wait).max().unwrap_or(0));
    }
    let per_run = grants / runs as u32;
    println!(
        "16 waiters on 4 permits over 5 nodes: {per_run} grants per run of {} s (at most 1600), fewest for a \
         client in a run: {fewest}, longest wait {} ms",
        RUN / 1_000 / MS,
        longest / MS
    );
    // A waiter named by a minority of nodes while others name another waiter must not retry at
    // once and hand its permits on with its failed attempt: such a storm keeps the permits
    // mostly idle (about 120 grants per run).
    assert!(per_run >= 400, "{per_run} grants per run: the permits sit idle between holders");
    assert!(fewest >= 4, "a waiter starves: {fewest} grants in a run");
}

/// Acquire a permit with `options` by the script (every node grants the first permit), which
/// confirms the limit on every connection, and release it.
fn confirm_limit(rig: &mut Rig, options: &LockOptions) {
    let (lock, _) = start(rig, options, b"tok1");
    for i in 0..3 {
        rig.reply(rig.t0, i, &grant(1, &[1]));
    }
    assert!(matches!(events(rig).as_slice(), [Event::Acquired { .. }]));
    rig.engine.release(rig.t0, lock).unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, b":1\r\n");
    }
    events(rig);
}

#[test]
fn once_every_node_confirmed_the_limit_a_first_attempt_is_set_nx_on_the_first_permit() {
    let mut rig = Rig::new(3);
    let waits = || LockOptions::new("api", TTL).semaphore(4).attempts(3);
    // The first acquisition runs the script, which confirms the limit on every connection.
    confirm_limit(&mut rig, &waits());
    // The next one: SET NX PX of its own first permit, no script.
    let lock = rig.engine.acquire(rig.t0, &waits(), b"tok2").unwrap();
    let sent = rig.sent_commands();
    let first = sent[0][0][1].clone();
    for cmds in &sent {
        assert_eq!(cmds[0][0], b"SET");
        assert_eq!(cmds[0][1], first, "the same permit on every node");
        assert_eq!(&cmds[0][3..], [&b"NX"[..], b"PX", b"10000"]);
    }
    // Taken on two nodes: the script tries the other permits at once (after a cleanup).
    rig.reply(rig.t0, 0, b"+OK\r\n");
    rig.reply(rig.t0, 1, b"$-1\r\n");
    rig.reply(rig.t0, 2, b"$-1\r\n");
    let retry = rig.sent_commands();
    for (i, cmds) in retry.iter().enumerate() {
        assert!(cmds.iter().any(|c| runs(c, redlease_core::semaphore_script())), "node {i}: {cmds:?}");
    }
    assert!(events(&mut rig).is_empty(), "no outcome yet");
    let _ = lock;
    // A single try never takes the shortcut: it must not fail while another permit is free.
    rig.engine.acquire(rig.t0, &waits().attempts(1), b"tok3").unwrap();
    for cmds in rig.sent_commands() {
        assert!(cmds.iter().any(|c| runs(c, redlease_core::semaphore_script())), "{cmds:?}");
    }
}

/// A permit taken by `SET NX` and released while a node still owes that `SET`'s answer: the
/// release names the permit held, which is all the `SET` could take there (it runs first on
/// the connection), so no node is sent a cleanup of the other permits.
#[test]
fn a_set_nx_permit_released_before_a_node_answered_sends_only_its_release() {
    let mut rig = Rig::new(3);
    let waits = || LockOptions::new("api", TTL).semaphore(4).attempts(3);
    confirm_limit(&mut rig, &waits());
    let lock = rig.engine.acquire(rig.t0, &waits(), b"tok2").unwrap();
    let first = rig.sent_commands()[0][0][1].clone();
    rig.reply(rig.t0, 0, b"+OK\r\n");
    rig.reply(rig.t0, 1, b"+OK\r\n");
    assert!(matches!(events(&mut rig).as_slice(), [Event::Acquired { lock: l, .. }] if *l == lock));
    // Node 2 has not answered its SET yet.
    rig.engine.release(rig.at(1), lock).unwrap();
    for (i, cmds) in rig.sent_commands().iter().enumerate() {
        assert_eq!(cmds.len(), 1, "node {i}: one release, no cleanup: {cmds:?}");
        assert!(is_release(&cmds[0]), "node {i}");
        assert_eq!(release_keys(&cmds[0]).0, std::slice::from_ref(&first), "node {i}");
    }
}

#[test]
fn a_grant_still_waiting_for_its_replicas_is_released_when_the_holder_releases_first() {
    // Node 2's grants count once a replica has them (`WAIT`).
    let mut rig =
        Rig::with(3, |c| c.nodes[2] = c.nodes[2].clone().min_replicas(1, std::time::Duration::from_millis(20)));
    let lock = rig.engine.acquire(rig.t0, &sem(4, 1), b"tok").unwrap();
    let sent = rig.sent_commands();
    let order = order(&sent[0][0], 4);
    assert!(sent[2].len() == 2 && sent[2][1][0] == b"WAIT", "{:?}", sent[2]);
    // Node 2 grants another permit first; its grant waits for its WAIT while the others decide.
    rig.reply(rig.t0, 2, &grant(1, &[2]));
    rig.reply(rig.t0, 0, &grant(1, &[1]));
    rig.reply(rig.t0, 1, &grant(1, &[1]));
    assert!(matches!(events(&mut rig).as_slice(), [Event::Acquired { lock: l, .. }] if *l == lock));
    assert!(rig.sent_commands().iter().all(Vec::is_empty), "nothing is trimmed before its WAIT answers");
    // The holder releases before node 2's WAIT answers.
    rig.engine.release(rig.at(1), lock).unwrap();
    let sent = rig.sent_commands();
    let released: Vec<Vec<u8>> = sent[2].iter().filter(|c| is_release(c)).flat_map(|c| release_keys(c).0).collect();
    assert!(
        released.contains(&permit_key(order[1])),
        "the permit node 2 granted and the lock does not hold is released there: {released:?}"
    );
    assert!(released.contains(&permit_key(order[0])), "and the permit held: {released:?}");
    // Its WAIT answers late: nothing more to do.
    rig.reply(rig.at(2), 2, b":1\r\n");
    assert!(rig.sent_commands().iter().all(Vec::is_empty));
}

#[test]
fn a_mutex_in_the_record_a_fast_semaphore_permit_left_is_a_mutex() {
    let mut rig = Rig::new(3);
    let waits = || LockOptions::new("api", TTL).semaphore(4).attempts(3);
    // The limit confirmed, then a permit taken by the one-`SET NX` first attempt and released.
    confirm_limit(&mut rig, &waits());
    let lock = rig.engine.acquire(rig.t0, &waits(), b"tok2").unwrap();
    assert!(rig.sent_commands().iter().all(|c| c[0][0] == b"SET"), "the fast first attempt");
    for i in 0..3 {
        rig.reply(rig.t0, i, b"+OK\r\n");
    }
    assert!(matches!(events(&mut rig).as_slice(), [Event::Acquired { .. }]));
    rig.engine.release(rig.t0, lock).unwrap();
    rig.sent_commands();
    for i in 0..3 {
        rig.reply(rig.t0, i, b":1\r\n");
    }
    events(&mut rig);
    // A mutex now reuses that lock record: its grants are a mutex's, not a semaphore's permits.
    let mutex = rig.engine.acquire(rig.t0, &LockOptions::new("job", TTL).attempts(1), b"tok3").unwrap();
    for cmds in rig.sent_commands() {
        assert_eq!(cmds[0][1], b"job");
    }
    for i in 0..3 {
        rig.reply(rig.t0, i, b"+OK\r\n");
    }
    let all = rig.events();
    assert!(all.iter().any(|e| matches!(e, Event::Acquired { lock, .. } if *lock == mutex)), "{all:?}");
    assert!(!all.iter().any(|e| matches!(e, Event::LinkFailed { .. })), "{all:?}");
}

// ----- permits handed to a waiter beyond what it takes -----------------------------------------

/// Engines wired by hand to one model node (the simulation's, which runs the semaphore's
/// scripts as they are written): every byte moves when the test says so, at `t0 + ms`.
struct Wired {
    t0: std::time::Instant,
    node: sim::node::Node,
    engines: Vec<redlease_core::Engine>,
}

impl Wired {
    /// `engines` engines (wake-ups off: their waiters poll) connected to one node at 0 ms.
    fn new(engines: usize) -> Self {
        use redlease_core::{Config, Engine, NodeConfig, NodeId};
        let prefix = Config::new(Vec::new()).fence_prefix;
        let mut w = Wired {
            t0: std::time::Instant::now(),
            node: sim::node::Node::new(sim::node::Clock::new(0, 0), None, prefix.as_bytes(), false),
            engines: (0..engines)
                .map(|i| {
                    let mut c = Config::new(vec![NodeConfig::new("m", 7000)]);
                    c.client_name = None;
                    c.wake = false;
                    c.seed = Some(i as u64);
                    Engine::new(c).unwrap()
                })
                .collect(),
        };
        for e in 0..engines {
            w.node.accept(e);
            w.engines[e].handle_connected(w.t0, NodeId(0));
            w.flush(0, e);
        }
        w
    }

    /// Engine `e`'s output goes to the node at `ms`, and the node's reply straight back.
    fn flush(&mut self, ms: u64, e: usize) {
        let id = redlease_core::NodeId(0);
        let mut out = Vec::new();
        while let Some(b) = self.engines[e].poll_transmit(id) {
            out.extend_from_slice(b);
            let len = b.len();
            self.engines[e].advance_transmit(id, len);
        }
        let reply = self.node.receive(ms as Time * MS, e, &out);
        self.engines[e].handle_data(self.t0 + Duration::from_millis(ms), id, &reply);
    }

    /// Engine `e`'s locks' events.
    fn events(&mut self, e: usize) -> Vec<Event> {
        std::iter::from_fn(|| self.engines[e].poll_event()).filter(|ev| ev.lock().is_some()).collect()
    }

    fn acquire(&mut self, ms: u64, e: usize, options: &LockOptions, token: &[u8]) -> LockId {
        let lock = self.engines[e].acquire(self.t0 + Duration::from_millis(ms), options, token).unwrap();
        self.flush(ms, e);
        lock
    }

    fn release(&mut self, ms: u64, e: usize, lock: LockId) {
        self.engines[e].release(self.t0 + Duration::from_millis(ms), lock).unwrap();
        self.flush(ms, e);
        assert!(matches!(self.events(e).as_slice(), [Event::Released { lock: l, .. }] if *l == lock));
    }

    /// Engine `e`'s next timer fires (its waiter's next attempt), and what it sends is answered;
    /// returns the time.
    fn retry(&mut self, e: usize) -> u64 {
        let at = self.engines[e].poll_timeout().expect("a waiter has a timer");
        let ms = at.duration_since(self.t0).as_millis() as u64 + 1;
        self.engines[e].handle_timeout(self.t0 + Duration::from_millis(ms));
        self.flush(ms, e);
        ms
    }
}

/// A waiter of two permits is handed one (a release of one), asks again and is refused (it
/// joins the queue again with the same entry, asking for two), then a release of two hands it
/// both: it finds three permits its own and takes two. The third, which its client never hears
/// of, is handed on by its grant, not left reserved for it until the reservation runs out (a
/// polling waiter's: the retry's longest delay plus the node timeout), keeping the next comer
/// out while a permit is free. (Simulation seed 1,057,289 of the semaphore runs.)
#[test]
fn a_waiter_handed_more_permits_than_it_wants_hands_the_rest_on_with_its_grant() {
    let mut w = Wired::new(2);
    let (holders, waiter) = (0, 1);
    let long = Duration::from_secs(60);
    let one = w.acquire(1, holders, &LockOptions::new("api", long).semaphore(3).attempts(1), b"one");
    let two = w.acquire(1, holders, &LockOptions::new("api", long).semaphore(3).permits(2).attempts(1), b"two");
    assert_eq!(w.events(holders).len(), 2, "the semaphore is full");
    let wants_two = LockOptions::new("api", TTL).semaphore(3).permits(2).wait(long);
    let lock = w.acquire(2, waiter, &wants_two, b"w");
    let ms = w.retry(waiter);
    assert!(w.events(waiter).is_empty(), "refused twice, it waits in the queue");
    // A release of one permit hands it to the waiter, which is refused again (one of two).
    w.release(ms + 1, holders, one);
    assert_eq!(w.node.reserved((ms + 1) * MS, b"w").len(), 1);
    let ms = w.retry(waiter);
    assert!(w.events(waiter).is_empty(), "one of two permits");
    // A release of two hands both to the head, which asks for two: it has three.
    w.release(ms + 1, holders, two);
    assert_eq!(w.node.reserved((ms + 1) * MS, b"w").len(), 3);
    let ms = w.retry(waiter);
    assert!(matches!(w.events(waiter).as_slice(), [Event::Acquired { lock: l, .. }] if *l == lock));
    let show = |keys: Vec<Vec<u8>>| {
        let mut keys: Vec<String> = keys.into_iter().map(|k| String::from_utf8(k).unwrap()).collect();
        keys.sort();
        keys
    };
    let held = show(w.engines[waiter].permits(lock).unwrap().iter().map(|&k| permit_key(k)).collect());
    assert_eq!(held.len(), 2);
    assert_eq!(show(w.node.holding(ms * MS, b"w")), held, "nothing else stays the waiter's");
    // The third permit is free at once.
    let next = w.acquire(ms, holders, &LockOptions::new("api", long).semaphore(3).attempts(1), b"next");
    assert!(matches!(w.events(holders).as_slice(), [Event::Acquired { lock: l, .. }] if *l == next));
    w.release(ms + 1, waiter, lock);
    assert!(w.node.holding((ms + 1) * MS, b"w").is_empty(), "the release takes the rest");
}
