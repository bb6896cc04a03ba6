//! A node that is a Redis Cluster, scripted byte by byte: found at the handshake, its slot map
//! read, a link opened per master, every request routed by its key's slot in the key's cluster
//! form, and `MOVED`, `ASK`, `TRYAGAIN` and `CROSSSLOT` answers each handled within a bound.

mod rig;

use std::time::Duration;

use redlease_core::cluster::hash_slot;
use redlease_core::{AcquireError, Event, LockOptions, NodeId, Retry, Vote};
use rig::{Rig, commands};

/// The retry delay of the rig's locks.
const SLOW: Duration = Duration::from_secs(5);

/// A `HELLO 3` answer of a cluster node (as Redis 7 sends it, shortened).
const HELLO_CLUSTER: &[u8] = b"%4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n\
$4\r\nmode\r\n$7\r\ncluster\r\n$4\r\nrole\r\n$6\r\nmaster\r\n";

/// A `CLUSTER SHARDS` answer (RESP3, shortened): each range on a master at 127.0.0.1.
fn shards(ranges: &[(u16, u16, u16)]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", ranges.len());
    for (start, end, port) in ranges {
        out += &format!(
            "%2\r\n$5\r\nslots\r\n*2\r\n:{start}\r\n:{end}\r\n$5\r\nnodes\r\n*1\r\n%4\r\n$4\r\nport\r\n:{port}\r\n\
             $8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$6\r\nonline\r\n"
        );
    }
    out.into_bytes()
}

/// The rig's map: 0-8191 on the seed (port 7000), 8192-16383 on port 7100.
const HALVES: &[(u16, u16, u16)] = &[(0, 8191, 7000), (8192, 16383, 7100)];

/// `CLUSTER SLOTS` of the same map, as a server older than Redis 7 answers.
const SLOTS: &[u8] = b"*2\r\n*3\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$1\r\na\r\n\
*3\r\n:8192\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7100\r\n$1\r\nb\r\n";

/// The answers of a handshake as `sent` asks them, with `hello` for `HELLO`.
fn handshake_answers(sent: &[u8], hello: &[u8]) -> Vec<u8> {
    let mut reply = Vec::new();
    for cmd in commands(sent) {
        match cmd[0].to_ascii_uppercase().as_slice() {
            b"SCRIPT" => {
                let i = redlease_core::script_sources().iter().position(|s| s.as_bytes() == cmd[2]).unwrap();
                let sha = redlease_core::script_digests()[i];
                reply.extend_from_slice(format!("${}\r\n{sha}\r\n", sha.len()).as_bytes());
            }
            b"HELLO" => reply.extend_from_slice(hello),
            b"EVAL" => reply.extend_from_slice(b"$1\r\n2\r\n"),
            other => panic!("unexpected {}", String::from_utf8_lossy(other)),
        }
    }
    reply
}

/// One node with wake-ups on, connected, its handshake answered (`hello` for `HELLO`); and the
/// rig's start.
fn one_node(hello: &[u8]) -> (Rig, std::time::Instant) {
    let mut rig = Rig::unconnected(1, |c| c.wake = true);
    let t = rig.t0;
    rig.engine.handle_connected(t, NodeId(0));
    let sent = rig.sent(0);
    rig.reply(t, 0, &handshake_answers(&sent, hello));
    (rig, t)
}

/// Three nodes: node 0 a cluster of two masters (its own link, and link 3 to port 7100), the
/// others standalone; all ready.
fn rig() -> Rig {
    let mut rig = Rig::unconnected(3, |c| {
        c.wake = true;
        // Only a release message retries a waiter sooner than this.
        c.retry = Retry::new(100, SLOW, SLOW);
    });
    rig.connect(1);
    rig.connect(2);
    let t = rig.t0;
    rig.engine.handle_connected(t, NodeId(0));
    let sent = rig.sent(0);
    rig.reply(t, 0, &handshake_answers(&sent, HELLO_CLUSTER));
    let asked = commands(&rig.sent(0));
    assert_eq!(asked, vec![vec![b"CLUSTER".to_vec(), b"SHARDS".to_vec()]], "the map is read once a cluster shows");
    assert!(!rig.engine.is_ready(NodeId(0)), "not ready before its map");
    for byte in shards(HALVES).chunks(7) {
        rig.reply(t, 0, byte);
    }
    assert_eq!(rig.engine.link_count(), 4);
    assert_eq!(rig.engine.link_endpoint(NodeId(3)), Some((NodeId(0), "127.0.0.1", 7100)));
    assert_eq!(rig.engine.poll_connect(t), Some(NodeId(3)));
    rig.engine.handle_connected(t, NodeId(3));
    let sent = rig.sent(3);
    let asked = commands(&sent);
    assert_eq!(asked[0], [b"HELLO".to_vec(), b"3".to_vec()], "a master's link carries release messages");
    assert!(asked[1..].iter().all(|c| c[0] == b"SCRIPT"), "then the scripts are loaded");
    rig.reply(t, 3, &handshake_answers(&sent, HELLO_CLUSTER));
    assert!(rig.engine.is_ready(NodeId(0)));
    let health = rig.engine.health();
    let c = health.nodes[0].cluster.as_ref().unwrap();
    assert_eq!((c.masters.len(), c.covered, c.known), (2, 16384, true), "{health}");
    rig.events();
    rig
}

/// A resource whose cluster form `{name}` is served by the link `want` (0: the seed, 3).
fn resource_on(want: usize) -> String {
    (0..).map(|i| format!("r{i}")).find(|r| (hash_slot(format!("{{{r}}}").as_bytes()) < 8192) == (want == 0)).unwrap()
}

fn outcome(rig: &mut Rig) -> Option<Result<(), AcquireError>> {
    rig.events().into_iter().find_map(|e| match e {
        Event::Acquired { .. } => Some(Ok(())),
        Event::AcquireFailed { error, .. } => Some(Err(error)),
        _ => None,
    })
}

#[test]
fn requests_go_to_the_slots_master_in_the_keys_cluster_form() {
    let mut rig = rig();
    let t = rig.t0;
    for link in [0, 3] {
        let r = resource_on(link);
        rig.engine.acquire(t, &LockOptions::new(r.as_str(), Duration::from_secs(10)).attempts(1), b"me").unwrap();
        let other = 3 - link;
        assert!(rig.sent(other).is_empty(), "nothing for the other master");
        let cmd = &commands(&rig.sent(link))[0];
        assert_eq!((cmd[0].as_slice(), cmd[1].clone()), (b"SET".as_slice(), format!("{{{r}}}").into_bytes()));
        for n in [1, 2] {
            assert_eq!(commands(&rig.sent(n))[0][1], r.as_bytes(), "standalone nodes take the key as it is");
            rig.reply(t, n, b"+OK\r\n");
        }
        rig.reply(t, link, b"+OK\r\n");
        assert_eq!(outcome(&mut rig).map(|o| o.is_ok()), Some(true));
    }
}

#[test]
fn moved_and_ask_are_followed_and_bounded() {
    let mut rig = rig();
    let t = rig.t0;
    let r = resource_on(0);
    let slot = hash_slot(format!("{{{r}}}").as_bytes());
    let options = LockOptions::new(r.as_str(), Duration::from_secs(10)).attempts(1);
    rig.engine.acquire(t, &options, b"me").unwrap();
    rig.sent(0);
    for n in [1, 2] {
        rig.sent(n);
    }
    // The slot moved to the other master: the request follows, and the map is read again.
    // (A map read again no sooner than 100 ms after the last.)
    let t = rig.at(200);
    rig.reply(t, 0, format!("-MOVED {slot} 127.0.0.1:7100\r\n").as_bytes());
    let resent = commands(&rig.sent(3));
    assert_eq!(resent[0][1], format!("{{{r}}}").into_bytes(), "{resent:?}");
    assert_eq!(commands(&rig.sent(0)), vec![vec![b"CLUSTER".to_vec(), b"SHARDS".to_vec()]]);
    rig.reply(t, 3, b"+OK\r\n");
    rig.reply(t, 1, b"+OK\r\n");
    assert_eq!(outcome(&mut rig).map(|o| o.is_ok()), Some(true));
    assert_eq!(rig.engine.health().nodes[0].cluster.as_ref().unwrap().redirects, 1);

    // ASK: this one request goes to the importing master, behind ASKING.
    let r2 = resource_on(3);
    let slot2 = hash_slot(format!("{{{r2}}}").as_bytes());
    rig.engine.acquire(t, &LockOptions::new(r2.as_str(), Duration::from_secs(10)).attempts(1), b"me2").unwrap();
    rig.sent(3);
    rig.reply(t, 3, format!("-ASK {slot2} 127.0.0.1:7000\r\n").as_bytes());
    let asked = commands(&rig.sent(0));
    assert_eq!(asked[0], vec![b"ASKING".to_vec()]);
    assert_eq!(asked[1][1], format!("{{{r2}}}").into_bytes());
}

#[test]
fn redirects_that_never_end_fail_the_vote_within_a_bound() {
    let mut rig = rig();
    let t = rig.t0;
    let r = resource_on(0);
    let key = format!("{{{r}}}");
    let slot = hash_slot(key.as_bytes());
    rig.engine.acquire(t, &LockOptions::new(r.as_str(), Duration::from_secs(10)).attempts(1), b"me").unwrap();
    let mut hops = 0;
    let mut link = 0;
    loop {
        let sent = commands(&rig.sent(link));
        if !sent.iter().any(|c| c.get(1) == Some(&key.clone().into_bytes())) {
            break;
        }
        let to = if link == 0 { 7100 } else { 7000 };
        rig.reply(t, link, format!("-MOVED {slot} 127.0.0.1:{to}\r\n").as_bytes());
        link = 3 - link;
        hops += 1;
        assert!(hops < 64, "the redirects never stopped");
    }
    assert!(hops > 1, "redirects are followed");
    rig.reply(t, 1, b"+OK\r\n");
    rig.reply(t, 2, b"+OK\r\n");
    rig.sent(1);
    rig.sent(2);
    assert_eq!(outcome(&mut rig).map(|o| o.is_ok()), Some(true), "the other nodes still grant it");
}

#[test]
fn tryagain_fails_the_vote_only() {
    let mut rig = rig();
    let t = rig.t0;
    let r = resource_on(0);
    rig.engine.acquire(t, &LockOptions::new(r.as_str(), Duration::from_secs(10)).attempts(1), b"me").unwrap();
    rig.sent(0);
    rig.reply(t, 0, b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
    rig.reply(t, 1, b"$-1\r\n");
    rig.reply(t, 2, b"$-1\r\n");
    match outcome(&mut rig) {
        Some(Err(AcquireError::Held { votes, .. } | AcquireError::Unreachable { votes, .. })) => {
            assert!(matches!(&votes[0], Vote::Error(e) if e.starts_with("TRYAGAIN")), "{votes:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(rig.engine.is_ready(NodeId(0)), "a TRYAGAIN does not fail the link");
}

#[test]
fn keys_in_two_slots_are_refused_and_one_tag_takes_them_together() {
    let mut rig = rig();
    let t = rig.t0;
    let split = LockOptions::new("a", Duration::from_secs(10)).resources(["b"]).attempts(1);
    rig.engine.acquire(t, &split, b"me2").unwrap();
    assert!(rig.sent(0).is_empty() && rig.sent(3).is_empty(), "nothing goes out for keys in two slots");
    for n in [1, 2] {
        rig.sent(n);
    }
    rig.reply(t, 1, b":1\r\n");
    rig.reply(t, 2, b":0\r\n");
    match outcome(&mut rig) {
        Some(Err(AcquireError::Held { votes, .. })) => {
            assert!(matches!(&votes[0], Vote::Misconfigured(e) if e.contains("hash tag")), "{votes:?}");
        }
        other => panic!("{other:?}"),
    }
    let tagged = LockOptions::new("{o}:a", Duration::from_secs(10)).resources(["{o}:b"]).attempts(1);
    rig.engine.acquire(t, &tagged, b"me3").unwrap();
    let link = if hash_slot(b"o") < 8192 { 0 } else { 3 };
    let sent = commands(&rig.sent(link));
    assert!(sent.iter().any(|c| c.iter().any(|a| a == b"{o}:a") && c.iter().any(|a| a == b"{o}:b")), "{sent:?}");
}

#[test]
fn the_map_is_read_again_every_ten_seconds_and_a_new_map_is_followed() {
    let mut rig = rig();
    let due = rig.engine.poll_timeout().expect("a map refresh is due some day");
    assert!(due <= rig.at(10_000), "the map is read again within 10 s");
    rig.engine.handle_timeout(rig.at(10_000));
    assert_eq!(commands(&rig.sent(0)), vec![vec![b"CLUSTER".to_vec(), b"SHARDS".to_vec()]]);
    // The new map gives every slot to the other master: requests follow it.
    rig.reply(rig.at(10_000), 0, &shards(&[(0, 16383, 7100)]));
    let c = rig.engine.health().nodes[0].cluster.clone().unwrap();
    assert_eq!((c.masters.len(), c.masters[0].slots), (1, 16384));
    let r = resource_on(0);
    rig.engine
        .acquire(rig.at(10_001), &LockOptions::new(r.as_str(), Duration::from_secs(10)).attempts(1), b"me")
        .unwrap();
    assert!(commands(&rig.sent(0)).is_empty());
    assert_eq!(commands(&rig.sent(3))[0][1], format!("{{{r}}}").into_bytes());
}

#[test]
fn a_node_that_refuses_hello_is_asked_info_and_serves_once_it_says_standalone() {
    let (mut rig, t) = one_node(b"-ERR unknown command 'HELLO'\r\n");
    rig.engine.acquire(t, &LockOptions::new("r", Duration::from_secs(10)).attempts(1), b"me").unwrap();
    let asked = commands(&rig.sent(0));
    assert_eq!(asked, vec![vec![b"INFO".to_vec(), b"cluster".to_vec()]], "the lock waits for INFO's answer");
    rig.reply(t, 0, b"$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n");
    let events = rig.events();
    assert!(
        events.iter().any(|e| matches!(e, Event::LinkUp { .. })),
        "{events:?} {} in flight {} {:?}",
        rig.engine.health(),
        rig.engine.in_flight(NodeId(0)),
        rig.engine.node_stats(NodeId(0))
    );
    let sent = commands(&rig.sent(0));
    assert_eq!(sent[0][..2], [b"SET".to_vec(), b"r".to_vec()], "{sent:?}");
}

/// The names of `cmds` with their first argument.
fn heads(cmds: &[Vec<Vec<u8>>]) -> Vec<String> {
    cmds.iter()
        .map(|c| {
            String::from_utf8_lossy(&[c[0].as_slice(), b" ", c.get(1).map_or(&[][..], |a| a)].concat()).into_owned()
        })
        .collect()
}

fn push(kind: &str, channel: &str, last: &str) -> Vec<u8> {
    let last = if kind.ends_with("message") { format!("${}\r\n{last}", last.len()) } else { format!(":{last}") };
    format!(">3\r\n${}\r\n{kind}\r\n${}\r\n{channel}\r\n{last}\r\n", kind.len(), channel.len()).into_bytes()
}

/// On a cluster node a waiter subscribes to the sharded channel of its key's cluster form, on
/// the master that serves the slot (standalone nodes: the plain channel); that master's
/// `smessage` wakes it; when the master drops the subscription (it lost the slot) and answers
/// the new one with `MOVED`, the subscription follows the slot; the release announces sharded.
#[test]
fn waiters_subscribe_where_the_slot_is_served_and_follow_it() {
    let mut rig = rig();
    let t = rig.t0;
    let r = resource_on(3);
    let (plain, sharded) = (format!("redlease:wake:{r}"), format!("redlease:wake:{{{r}}}"));
    let slot = hash_slot(sharded.as_bytes());
    rig.engine.acquire(t, &LockOptions::new(r.as_str(), Duration::from_secs(10)), b"me").unwrap();
    for link in [1, 2, 3] {
        assert_eq!(heads(&commands(&rig.sent(link)))[0].split_once(' ').unwrap().0, "SET");
    }
    for link in [1, 2, 3] {
        rig.reply(t, link, b"$-1\r\n");
    }
    // The cleanup of the failed attempt, the subscription, the next attempt.
    let on_master = heads(&commands(&rig.sent(3)));
    assert_eq!(on_master[1], format!("SSUBSCRIBE {sharded}"), "{on_master:?}");
    assert!(on_master[0].starts_with("EVAL ") && on_master[2].starts_with("EVALSHA"), "{on_master:?}");
    for link in [1, 2] {
        assert_eq!(heads(&commands(&rig.sent(link)))[1], format!("SUBSCRIBE {plain}"));
        rig.reply(t, link, &[b":0\r\n".as_slice(), &push("subscribe", &plain, "1"), b":0\r\n"].concat());
    }
    assert!(rig.sent(0).is_empty(), "the other master serves none of the waiter's slots");
    rig.reply(t, 3, &[b":0\r\n".as_slice(), &push("ssubscribe", &sharded, "1"), b":0\r\n"].concat());
    for link in [1, 2, 3] {
        // The cleanups of the second attempt where its vote was still pending.
        for _ in commands(&rig.sent(link)) {
            rig.reply(t, link, b":0\r\n");
        }
    }
    rig.events();
    assert!(rig.engine.poll_timeout().unwrap() >= t + SLOW, "waiting on the fallback only");

    // The master lost the slot: it ends the subscription unasked, and answers the new one
    // with MOVED, which moves the slot and the subscription to the other master.
    let t = rig.at(200);
    rig.reply(t, 3, &push("sunsubscribe", &sharded, "0"));
    assert_eq!(heads(&commands(&rig.sent(3))), [format!("SSUBSCRIBE {sharded}")]);
    rig.reply(t, 3, format!("-MOVED {slot} 127.0.0.1:7000\r\n").as_bytes());
    let on_seed = heads(&commands(&rig.sent(0)));
    assert!(on_seed.contains(&format!("SSUBSCRIBE {sharded}")), "{on_seed:?}");
    assert_eq!(heads(&commands(&rig.sent(3))), [format!("SUNSUBSCRIBE {sharded}"), "PING ".to_owned()]);
    // Its SUNSUBSCRIBE may be answered by MOVED or by the push: the PING ends it either way.
    rig.reply(t, 3, format!("-MOVED {slot} 127.0.0.1:7000\r\n+PONG\r\n").as_bytes());
    // The map now says so too: the seed serves 0 to the slot, the other master the rest.
    let map = shards(&[(0, slot, 7000), (slot + 1, 16383, 7100)]);
    for reply in on_seed
        .iter()
        .map(|c| if c.starts_with("SSUBSCRIBE") { push("ssubscribe", &sharded, "1") } else { map.clone() })
    {
        rig.reply(t, 0, &reply);
    }
    assert!(rig.engine.is_ready(NodeId(0)), "no link failed: {}", rig.engine.health());

    // Release messages from the new master and one standalone node: a quorum, so it retries.
    rig.reply(t, 0, &push("smessage", &sharded, "other:"));
    rig.reply(t, 1, &push("message", &plain, "other:"));
    let due = rig.engine.poll_timeout().unwrap();
    assert!(due <= t + Duration::from_millis(1), "woken, not after 5 s");
    rig.engine.handle_timeout(due);
    let attempt = commands(&rig.sent(0));
    assert!(attempt.iter().any(|c| c[0] == b"EVALSHA"), "the retry goes to the new master");
    rig.reply(due, 0, b":1\r\n");
    for link in [1, 2] {
        rig.sent(link);
        rig.reply(due, link, b":1\r\n");
    }
    let Some(Event::Acquired { lock, .. }) = rig.events().into_iter().find(|e| matches!(e, Event::Acquired { .. }))
    else {
        panic!("granted")
    };
    rig.engine.release(due, lock).unwrap();
    let release = commands(&rig.sent(0));
    let release = release.iter().find(|c| c[0] == b"EVALSHA").unwrap();
    assert_eq!(release.last().unwrap(), b"s", "a cluster node's release announces sharded");
    let standalone = commands(&rig.sent(1));
    assert_ne!(standalone.iter().find(|c| c[0] == b"EVALSHA").unwrap().last().unwrap(), b"s");
}

/// A server older than Redis 7 (or an ACL without it) refuses `CLUSTER SHARDS`: the map is read
/// with `CLUSTER SLOTS` instead, at the handshake and from then on.
#[test]
fn a_server_that_refuses_cluster_shards_is_read_with_cluster_slots() {
    let (mut rig, t) = one_node(HELLO_CLUSTER);
    assert_eq!(commands(&rig.sent(0)), [[b"CLUSTER".to_vec(), b"SHARDS".to_vec()]]);
    rig.reply(t, 0, b"-ERR unknown subcommand 'SHARDS'. Try CLUSTER HELP.\r\n");
    assert_eq!(commands(&rig.sent(0)), [[b"CLUSTER".to_vec(), b"SLOTS".to_vec()]]);
    rig.reply(t, 0, SLOTS);
    assert_eq!(rig.engine.link_endpoint(NodeId(1)), Some((NodeId(0), "127.0.0.1", 7100)));
    assert_eq!(rig.engine.poll_connect(t), Some(NodeId(1)));
    rig.engine.handle_connected(t, NodeId(1));
    let sent = rig.sent(1);
    rig.reply(t, 1, &handshake_answers(&sent, HELLO_CLUSTER));
    assert!(rig.engine.is_ready(NodeId(0)), "{}", rig.engine.health());
    rig.engine.handle_timeout(rig.at(10_000));
    assert_eq!(commands(&rig.sent(0)), [[b"CLUSTER".to_vec(), b"SLOTS".to_vec()]], "and from then on");
}

/// Answer every command the engine sent on `link` with `reply`, and return how many there were.
fn answer_all(rig: &mut Rig, link: usize, reply: &[u8]) -> usize {
    let n = commands(&rig.sent(link)).len();
    for _ in 0..n {
        rig.reply(rig.t0, link, reply);
    }
    n
}

#[test]
fn an_answered_cleanup_keeps_no_copy_and_the_engine_returns_to_idle() {
    let mut rig = rig();
    assert!(rig.engine.footprint().is_idle(), "{}", rig.engine.footprint());
    let r = resource_on(0);
    for round in 0..200 {
        let t = rig.t0;
        rig.engine.acquire(t, &LockOptions::new(r.as_str(), Duration::from_secs(10)).attempts(1), b"me").unwrap();
        // The cluster node grants, the others refuse: the attempt fails, and its cleanup goes
        // to every node (to the cluster node's master as a request kept for a redirect).
        assert_eq!(answer_all(&mut rig, 0, b"+OK\r\n"), 1);
        for n in [1, 2] {
            assert_eq!(answer_all(&mut rig, n, b"$-1\r\n"), 1);
        }
        assert!(matches!(outcome(&mut rig), Some(Err(_))), "round {round}");
        assert_eq!(rig.engine.footprint().kept, 1, "round {round}: the cleanup is kept until answered");
        assert_eq!(answer_all(&mut rig, 0, b":1\r\n"), 1, "round {round}");
        for n in [1, 2] {
            answer_all(&mut rig, n, b":0\r\n");
        }
        rig.events();
        let fp = rig.engine.footprint();
        assert!(fp.is_idle() && fp.kept_bytes == 0, "round {round}: {fp}");
    }
}

#[test]
fn a_map_that_does_not_read_is_read_again_with_the_timer_in_the_future() {
    let (mut rig, t) = one_node(HELLO_CLUSTER);
    assert_eq!(commands(&rig.sent(0)), [[b"CLUSTER".to_vec(), b"SHARDS".to_vec()]]);
    // An answer that is no map: the link fails, and the map is to be read again soon.
    rig.reply(t, 0, b"*1\r\n:5\r\n");
    assert!(rig.events().iter().any(|e| matches!(e, Event::LinkFailed { .. })));
    assert_eq!(rig.engine.poll_close(), Some(NodeId(0)));
    // Reconnected well after that refresh was due, the map is read again at the next one.
    let later = rig.at(5_000);
    rig.engine.handle_timeout(later);
    assert_eq!(rig.engine.poll_connect(later), Some(NodeId(0)));
    rig.engine.handle_connected(later, NodeId(0));
    let sent = rig.sent(0);
    rig.reply(later, 0, &handshake_answers(&sent, HELLO_CLUSTER));
    let now = rig.at(5_200);
    rig.engine.handle_timeout(now);
    assert_eq!(commands(&rig.sent(0)), [[b"CLUSTER".to_vec(), b"SHARDS".to_vec()]]);
    // While that read is out, the engine's timer is not in the past: a driver would handle
    // timeouts in a loop until the answer came.
    rig.engine.handle_timeout(now);
    let next = rig.engine.poll_timeout();
    assert!(next.is_none_or(|at| at > now), "the next timeout {next:?} is not after now {now:?}");
}

#[test]
fn a_cleanup_answered_tryagain_is_sent_again_shortly() {
    let mut rig = rig();
    let t = rig.t0;
    failed_attempt(&mut rig);
    let cleanup = commands(&rig.sent(0));
    assert_eq!(cleanup.len(), 1, "the cleanup");
    // Its slot is migrating: the master asks to try again.
    rig.reply(t, 0, b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
    assert!(commands(&rig.sent(0)).is_empty(), "not at once");
    assert_eq!(rig.engine.footprint().kept, 1, "kept to be sent again");
    let next = rig.engine.poll_timeout().expect("a timer for the resend");
    assert!(next > t && next <= rig.at(10), "{next:?}");
    rig.engine.handle_timeout(rig.at(10));
    assert_eq!(commands(&rig.sent(0)), cleanup, "the same cleanup, on the same master");
    rig.reply(rig.at(11), 0, b":1\r\n");
    for n in [1, 2] {
        answer_all(&mut rig, n, b":0\r\n");
    }
    rig.events();
    let fp = rig.engine.footprint();
    assert!(fp.is_idle(), "{fp}");
    assert!(rig.engine.audit().is_empty(), "{:?}", rig.engine.audit());
}

#[test]
fn a_cleanup_answered_tryagain_every_time_is_given_up_after_its_share_of_tries() {
    let mut rig = rig();
    let t = rig.t0;
    failed_attempt(&mut rig);
    assert_eq!(commands(&rig.sent(0)).len(), 1, "the cleanup");
    let (mut sends, mut now) = (1, t);
    loop {
        rig.reply(now, 0, b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
        now += Duration::from_secs(1);
        rig.engine.handle_timeout(now);
        if commands(&rig.sent(0)).is_empty() {
            break;
        }
        sends += 1;
        assert!(sends < 20, "the cleanup is sent again without end");
    }
    for n in [1, 2] {
        answer_all(&mut rig, n, b":0\r\n");
    }
    rig.events();
    assert_eq!(sends, 6, "once, then again as many times as a request follows redirects");
    assert!(rig.engine.footprint().is_idle(), "{}", rig.engine.footprint());
}

/// One attempt on a resource the cluster node (link 0) serves: the cluster node grants, the
/// others refuse, so the attempt fails and its cleanup goes to the cluster node's master
/// (kept for a redirect), unanswered.
fn failed_attempt(rig: &mut Rig) {
    let r = resource_on(0);
    let options = LockOptions::new(r.as_str(), Duration::from_secs(10)).attempts(1);
    rig.engine.acquire(rig.t0, &options, b"me").unwrap();
    assert_eq!(answer_all(rig, 0, b"+OK\r\n"), 1);
    for n in [1, 2] {
        assert_eq!(answer_all(rig, n, b"$-1\r\n"), 1);
    }
    assert!(matches!(outcome(rig), Some(Err(_))));
}

#[test]
fn once_its_master_confirmed_the_limit_a_semaphores_first_attempt_on_a_cluster_node_is_set_nx() {
    let mut rig = rig();
    let t = rig.t0;
    // A semaphore whose keys (hash tag: its name) the second master serves, over link 3.
    let name = resource_on(3);
    let options = || LockOptions::new(name.as_str(), Duration::from_secs(10)).semaphore(4).attempts(3);
    // The first acquisition runs the script, which confirms the limit on the links it ran on.
    let lock = rig.engine.acquire(t, &options(), b"tok1").unwrap();
    assert!(rig.sent(0).is_empty(), "nothing for the seed's master");
    for link in [3, 1, 2] {
        let cmds = commands(&rig.sent(link));
        assert!(cmds[0][0].starts_with(b"EVAL"), "link {link}: {cmds:?}");
        rig.reply(t, link, b"$3\r\n1 1\r\n");
    }
    assert_eq!(outcome(&mut rig).map(|o| o.is_ok()), Some(true));
    rig.engine.release(t, lock).unwrap();
    for link in [3, 1, 2] {
        rig.sent(link);
        rig.reply(t, link, b":1\r\n");
    }
    rig.events();
    // The next one: SET NX PX of its first permit, in its cluster form on the master's link.
    rig.engine.acquire(t, &options(), b"tok2").unwrap();
    let mut first = None;
    for link in [3, 1, 2] {
        let cmds = commands(&rig.sent(link));
        assert_eq!(cmds[0][0], b"SET", "link {link}: {cmds:?}");
        assert_eq!(&cmds[0][3..], [&b"NX"[..], b"PX", b"10000"]);
        assert_eq!(*first.get_or_insert(cmds[0][1].clone()), cmds[0][1], "the same permit everywhere");
        rig.reply(t, link, b"+OK\r\n");
    }
    assert_eq!(outcome(&mut rig).map(|o| o.is_ok()), Some(true));
    assert!(rig.sent(0).is_empty(), "nothing for the seed's master");
}

#[test]
fn a_readers_set_nx_redirected_goes_again_with_the_readers_value() {
    let mut rig = rig();
    let t = rig.at(200);
    let r = resource_on(0);
    let slot = hash_slot(format!("{{{r}}}").as_bytes());
    let read = LockOptions::new(r.as_str(), Duration::from_secs(10)).shared(true).attempts(3);
    rig.engine.acquire(t, &read, b"me").unwrap();
    let first = commands(&rig.sent(0));
    assert_eq!(first[0][..3], [b"SET".to_vec(), format!("{{{r}}}").into_bytes(), b":readers:me".to_vec()]);
    rig.reply(t, 0, format!("-MOVED {slot} 127.0.0.1:7100\r\n").as_bytes());
    let resent = commands(&rig.sent(3));
    assert_eq!(resent[0][..3], first[0][..3], "a reader's own value, not a writer's token");
}
