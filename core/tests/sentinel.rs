//! A Sentinel-managed node's link, driven by hand on simulated time: it asks its sentinels in
//! turn until a majority names a master, connects there and confirms it with `ROLE` before it
//! is ready; a replica, disagreeing sentinels and a switch announced on the watch link each
//! fail it with a message that says why, and send it back to the sentinels.

mod rig;

use std::time::Instant;

use redlease_core::{Config, Engine, Event, LinkError, NodeConfig, NodeId};
use rig::{ROLE_ONE_REPLICA, commands, handshake_reply};

const SENTINELS: [(&str, u16); 3] = [("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.3", 26379)];
const NODE: NodeId = NodeId(0);
/// The node's watch link: the first link after the nodes' own.
const WATCH: NodeId = NodeId(1);

fn engine() -> Engine {
    let node = NodeConfig::sentinel(SENTINELS.iter().map(|(h, p)| (h.to_string(), *p)), "svc");
    let mut config = Config::new(vec![node]);
    config.client_name = None;
    config.wake = false;
    config.reconnect_jitter = 0.0;
    Engine::new(config).expect("a valid config")
}

/// Everything the engine wants to send on `link`, drained.
fn sent(engine: &mut Engine, link: NodeId) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(b) = engine.poll_transmit(link) {
        out.extend_from_slice(b);
        let len = b.len();
        engine.advance_transmit(link, len);
    }
    out
}

/// Feed `bytes` one at a time.
fn feed(engine: &mut Engine, now: Instant, link: NodeId, bytes: &[u8]) {
    for b in bytes {
        engine.handle_data(now, link, std::slice::from_ref(b));
    }
}

/// The answer to `SENTINEL get-master-addr-by-name`: `host:port`.
fn named(host: &str, port: u16) -> Vec<u8> {
    let port = port.to_string();
    format!("*2\r\n${}\r\n{host}\r\n${}\r\n{port}\r\n", host.len(), port.len()).into_bytes()
}

/// Hand out the node's next connect attempt (the watch link's too, which is left alone), and
/// say where it goes.
fn next_attempt(engine: &mut Engine, now: Instant) -> (String, u16) {
    engine.handle_timeout(now);
    while let Some(link) = engine.poll_connect(now) {
        if link == NODE {
            let (owner, host, port) = engine.link_endpoint(NODE).expect("the node's link goes where it is told");
            assert_eq!(owner, NODE);
            return (host.to_owned(), port);
        }
    }
    panic!("no connect attempt of the node is due");
}

/// Connect the node's link to a sentinel and answer its question with `answer`.
fn ask(engine: &mut Engine, now: Instant, answer: &[u8]) {
    engine.handle_connected(now, NODE);
    let asked = commands(&sent(engine, NODE));
    assert_eq!(asked, [[&b"SENTINEL"[..], b"get-master-addr-by-name", b"svc"]]);
    feed(engine, now, NODE, answer);
}

/// The link failures among the events.
fn failures(engine: &mut Engine) -> Vec<LinkError> {
    std::iter::from_fn(|| engine.poll_event())
        .filter_map(|e| match e {
            Event::LinkFailed { error } => Some(error),
            _ => None,
        })
        .collect()
}

/// Discover the master `10.0.9.9:6379` (two sentinels agree) and connect to it, ready.
fn discovered(engine: &mut Engine, now: Instant) {
    assert_eq!(next_attempt(engine, now), ("10.0.0.1".to_owned(), 26379));
    ask(engine, now, &named("10.0.9.9", 6379));
    assert_eq!(engine.poll_close(), Some(NODE), "the sentinel's connection is closed");
    assert!(!engine.is_connected(NODE));
    assert_eq!(next_attempt(engine, now), ("10.0.0.2".to_owned(), 26379));
    ask(engine, now, &named("10.0.9.9", 6379));
    assert_eq!(engine.poll_close(), Some(NODE));
    // Two of three agree: the third is not asked.
    assert_eq!(next_attempt(engine, now), ("10.0.9.9".to_owned(), 6379));
    engine.handle_connected(now, NODE);
    let handshake = sent(engine, NODE);
    assert_eq!(commands(&handshake)[0], [b"ROLE".to_vec()], "ROLE before anything else");
    feed(engine, now, NODE, &handshake_reply(&handshake, ROLE_ONE_REPLICA));
    assert!(engine.is_ready(NODE));
    assert!(failures(engine).is_empty());
}

#[test]
fn the_link_asks_the_sentinels_then_votes_with_the_master_they_name() {
    let (mut engine, now) = (engine(), Instant::now());
    discovered(&mut engine, now);
    let health = engine.health();
    let view = health.nodes[0].sentinel.as_ref().expect("a Sentinel-managed node");
    assert_eq!((view.master.as_deref(), view.asking, view.switches), (Some("10.0.9.9:6379"), false, 0));
    let said: Vec<_> = view.sentinels.iter().map(|s| s.said.clone()).collect();
    assert_eq!(said, [Some(Ok("10.0.9.9:6379".to_owned())), Some(Ok("10.0.9.9:6379".to_owned())), None]);
}

#[test]
fn a_master_that_answers_role_as_a_replica_sends_the_link_back_to_the_sentinels() {
    let (mut engine, now) = (engine(), Instant::now());
    for _ in 0..2 {
        next_attempt(&mut engine, now);
        ask(&mut engine, now, &named("10.0.9.9", 6379));
        assert_eq!(engine.poll_close(), Some(NODE));
    }
    assert_eq!(next_attempt(&mut engine, now), ("10.0.9.9".to_owned(), 6379));
    engine.handle_connected(now, NODE);
    let replica = b"*5\r\n$5\r\nslave\r\n$8\r\n10.0.9.8\r\n:6379\r\n$9\r\nconnected\r\n:42\r\n";
    feed(&mut engine, now, NODE, replica);
    let failed = failures(&mut engine);
    assert_eq!(failed.len(), 1, "{failed:?}");
    let text = failed[0].to_string();
    assert!(text.contains("answers ROLE as a replica") && text.contains("10.0.9.9:6379"), "{text}");
    assert!(!engine.is_ready(NODE));
    // The next attempt asks the sentinels again, after the backoff.
    let later = now + std::time::Duration::from_secs(5);
    assert_eq!(next_attempt(&mut engine, later).1, 26379);
}

#[test]
fn sentinels_that_disagree_or_do_not_know_the_service_are_a_failure_naming_each() {
    let (mut engine, now) = (engine(), Instant::now());
    for (i, port) in [6379, 6380, 6381].into_iter().enumerate() {
        assert_eq!(next_attempt(&mut engine, now), (SENTINELS[i].0.to_owned(), 26379));
        ask(&mut engine, now, &named("10.0.9.9", port));
    }
    let failed = failures(&mut engine);
    let text = failed.last().map(ToString::to_string).unwrap_or_default();
    assert!(text.contains("disagree") && text.contains("sentinel 10.0.0.3:26379: names 10.0.9.9:6381"), "{text}");
    assert_eq!(engine.health().nodes[0].fault, Some(redlease_core::Fault::Unreachable));

    let (mut engine, now) = (self::engine(), Instant::now());
    for _ in 0..3 {
        next_attempt(&mut engine, now);
        ask(&mut engine, now, b"*-1\r\n");
    }
    let text = failures(&mut engine).last().map(ToString::to_string).unwrap_or_default();
    assert!(text.contains("no sentinel names a master") && text.contains("knows no service named \"svc\""), "{text}");
    assert_eq!(engine.health().nodes[0].fault, Some(redlease_core::Fault::Misconfigured));
}

#[test]
fn a_switch_announced_on_the_watch_link_fails_the_link_to_the_old_master() {
    let (mut engine, now) = (engine(), Instant::now());
    discovered(&mut engine, now);
    assert_eq!(engine.link_endpoint(WATCH), Some((NODE, "10.0.0.1", 26379)));
    engine.handle_connected(now, WATCH);
    assert_eq!(commands(&sent(&mut engine, WATCH)), [[&b"SUBSCRIBE"[..], b"+switch-master"]]);
    feed(&mut engine, now, WATCH, b"*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n");
    // Another service's switch is none of the node's business.
    let other = b"other 10.0.8.1 6379 10.0.8.2 6379";
    let message = |data: &[u8]| {
        let mut m = b"*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n".to_vec();
        m.extend_from_slice(format!("${}\r\n", data.len()).as_bytes());
        m.extend_from_slice(data);
        m.extend_from_slice(b"\r\n");
        m
    };
    feed(&mut engine, now, WATCH, &message(other));
    assert!(engine.is_ready(NODE) && failures(&mut engine).is_empty());
    feed(&mut engine, now, WATCH, &message(b"svc 10.0.9.9 6379 10.0.9.8 6379"));
    let failed = failures(&mut engine);
    let text = failed.first().map(ToString::to_string).unwrap_or_default();
    assert!(text.contains("switched service \"svc\" from 10.0.9.9:6379 to 10.0.9.8:6379"), "{text}");
    assert!(!engine.is_connected(NODE) && engine.is_connected(WATCH));
    let health = engine.health();
    let view = health.nodes[0].sentinel.as_ref().unwrap();
    assert_eq!((view.master.as_deref(), view.switches), (Some("10.0.9.8:6379"), 1));
    assert_eq!(
        view.last_switch.as_ref().map(|(f, t, _)| (f.as_str(), t.as_str())),
        Some(("10.0.9.9:6379", "10.0.9.8:6379"))
    );
}

#[test]
fn a_switch_heard_while_the_link_asks_a_sentinel_leaves_that_connection_asking() {
    let (mut engine, now) = (engine(), Instant::now());
    discovered(&mut engine, now);
    engine.handle_connected(now, WATCH);
    sent(&mut engine, WATCH);
    feed(&mut engine, now, WATCH, b"*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n");
    engine.handle_disconnected(now, NODE, "closed");
    failures(&mut engine);
    let later = now + std::time::Duration::from_secs(5);
    assert_eq!(next_attempt(&mut engine, later).1, 26379, "a reconnect asks the sentinels");
    // The switch arrives while that connection to a sentinel is being made.
    let data = b"svc 10.0.9.9 6379 10.0.9.8 6379";
    let mut message = b"*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$31\r\n".to_vec();
    message.extend_from_slice(data);
    message.extend_from_slice(b"\r\n");
    feed(&mut engine, later, WATCH, &message);
    ask(&mut engine, later, &named("10.0.9.8", 6379));
    assert_eq!(engine.health().nodes[0].sentinel.as_ref().unwrap().master.as_deref(), Some("10.0.9.8:6379"));
}
