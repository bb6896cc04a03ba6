//! Property tests: whatever bytes a server sends, the engine neither panics nor takes them
//! for a grant; and how valid replies are split never changes what the engine reports.

#[allow(dead_code)]
#[path = "sim/node.rs"]
mod node;
mod rig;

use std::time::{Duration, Instant};

use node::{Auth, Clock, MS, Node};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use redis_protocol::resp2::decode::decode;
use redis_protocol::resp2::types::OwnedFrame;
use redlease_core::{Config, Engine, Event, LockOptions, NodeConfig, NodeId};
use rig::Rig;

// ----- garbage in --------------------------------------------------------------------------

/// Pieces of server output: valid replies of every type, RESP3-only types, junk.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop_oneof![
            Just(b":1\r\n".to_vec()),
            Just(b":0\r\n".to_vec()),
            Just(b":7\r\n".to_vec()),
            Just(b":-1\r\n".to_vec()),
            Just(b"$-1\r\n".to_vec()),
            Just(b"*-1\r\n".to_vec()),
            Just(b"+OK\r\n".to_vec()),
            Just(b"-ERR boom\r\n".to_vec()),
            Just(b"-NOSCRIPT No matching script. Please use EVAL.\r\n".to_vec()),
            Just(b"$3\r\nabc\r\n".to_vec()),
            Just(b"*2\r\n:1\r\n:1\r\n".to_vec()),
            Just(b"%1\r\n:1\r\n:1\r\n".to_vec()),
            Just(b"_\r\n".to_vec()),
            Just(b":99999999999999999999999\r\n".to_vec()),
            Just(b"$-7\r\n".to_vec()),
        ],
        2 => push_frame(),
        1 => proptest::collection::vec(any::<u8>(), 0..16),
    ]
}

/// A release message as the nodes publish it: a valid RESP3 push frame.
const MESSAGE: &[u8] = b">3\r\n$7\r\nmessage\r\n$15\r\nredlease:wake:r\r\n$3\r\na:b\r\n";
/// A subscription's confirmation: valid too.
const SUBSCRIBED: &[u8] = b">3\r\n$9\r\nsubscribe\r\n$15\r\nredlease:wake:r\r\n:1\r\n";

/// `bytes` without the well-formed push frames at its front: the engine reads past them.
fn past_pushes(mut bytes: &[u8]) -> &[u8] {
    while let Some(rest) = bytes.strip_prefix(MESSAGE).or_else(|| bytes.strip_prefix(SUBSCRIBED)) {
        bytes = rest;
    }
    bytes
}

/// RESP3 push frames, valid and not: a release message, other kinds, and null, nested, empty,
/// truncated and huge ones.
fn push_frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(MESSAGE.to_vec()),
        Just(SUBSCRIBED.to_vec()),
        Just(b">3\r\n$7\r\nmessage\r\n$15\r\nredlease:wake:r\r\n$-1\r\n".to_vec()),
        Just(b">3\r\n$-1\r\n$-1\r\n$-1\r\n".to_vec()),
        Just(b">2\r\n$7\r\nmessage\r\n$-1\r\n".to_vec()),
        Just(b">3\r\n*2\r\n:1\r\n$-1\r\n>1\r\n_\r\n%1\r\n:1\r\n:2\r\n".to_vec()),
        Just(b">0\r\n".to_vec()),
        Just(b">-1\r\n".to_vec()),
        Just(b">3\r\n$7\r\nmessage\r\n$1".to_vec()),
        Just(b">4611686018427387903\r\n$1\r\na\r\n".to_vec()),
        Just(b">1\r\n$99999999999\r\nabc\r\n".to_vec()),
        Just(b">1\r\n".to_vec().repeat(200)),
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(|tail| [b">3\r\n".as_slice(), &tail].concat()),
    ]
}

fn server_output() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(piece(), 0..6).prop_map(|v| v.concat()),
        proptest::collection::vec(any::<u8>(), 0..128),
    ]
}

/// Whether this byte stream, read as the answer to one acquire request, is a grant: its
/// first reply (after any `NOSCRIPT`, which makes the engine resend) is a positive integer,
/// or, to the cheap `SET NX PX` (`set`: one key, no fencing, first attempt), `+OK`.
fn is_grant(mut bytes: &[u8], set: bool) -> bool {
    bytes = past_pushes(bytes);
    if set && matches!(decode(bytes), Ok(Some((OwnedFrame::SimpleString(s), _))) if s == b"OK") {
        return true;
    }
    loop {
        if bytes.first() == Some(&b'*') {
            return false; // never a valid answer
        }
        match decode(bytes) {
            Ok(Some((OwnedFrame::Error(e), used))) if e.starts_with("NOSCRIPT") => bytes = past_pushes(&bytes[used..]),
            Ok(Some((OwnedFrame::Integer(v), _))) => return v > 0,
            _ => return false,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any bytes, split anywhere, interleaved across nodes: no panic, and `Acquired` only
    /// when a quorum of nodes really answered the acquire with a grant.
    #[test]
    fn arbitrary_server_bytes_never_panic_nor_grant(
        n in 1usize..=5,
        fencing in any::<bool>(),
        outputs in proptest::collection::vec(server_output(), 5),
        cuts in proptest::collection::vec(1usize..24, 1..16),
    ) {
        let mut rig = Rig::new(n);
        let options = LockOptions::new("r", Duration::from_secs(10)).attempts(1).fencing(fencing);
        let lock = rig.engine.acquire(rig.t0, &options, b"tok").unwrap();
        rig.sent_commands();
        // Feed every node's bytes in chunks, round robin, so nodes interleave.
        let mut pos = vec![0usize; n];
        let mut k = 0;
        while (0..n).any(|i| pos[i] < outputs[i].len()) {
            for i in 0..n {
                let len = cuts[k % cuts.len()];
                k += 1;
                let end = (pos[i] + len).min(outputs[i].len());
                rig.reply(rig.t0, i, &outputs[i][pos[i]..end]);
                pos[i] = end;
                // Answer fence rounds and cleanups from nowhere: drop what the engine sends.
                rig.sent(i);
            }
        }
        rig.engine.handle_timeout(rig.at(60_000));
        // One key: the first attempt is `SET NX PX` unless fencing is asked for.
        let grants = (0..n).filter(|&i| is_grant(&outputs[i], !fencing)).count();
        for e in rig.events() {
            if let Event::Acquired { lock: l, .. } = e {
                prop_assert_eq!(l, lock);
                let quorum = n / 2 + 1;
                prop_assert!(grants >= quorum, "acquired with {} real grants of {}", grants, n);
            }
        }
    }
}

// ----- splits do not matter ----------------------------------------------------------------

/// How replies are handed to the engine.
#[derive(Clone, Debug)]
enum Split {
    Whole,
    Bytes,
    Sizes(Vec<usize>),
}

/// Engines and model nodes; replies go back split as asked.
struct Pair {
    t0: Instant,
    engine: Engine,
    nodes: Vec<Node>,
    split: Split,
    k: usize,
}

impl Pair {
    fn new(t0: Instant, n: usize, auth: bool, db: u32, split: Split) -> Self {
        let creds = auth.then(|| Auth { user: Some("u".into()), password: "p".into() });
        let mut cfg = Config::new(
            (0..n)
                .map(|i| {
                    let mut c = NodeConfig::new("m", 7000 + i as u16);
                    c.user = creds.as_ref().and_then(|a| a.user.clone());
                    c.password = creds.as_ref().map(|a| a.password.clone());
                    c.db = db;
                    c
                })
                .collect(),
        );
        cfg.node_timeout = Duration::from_millis(50);
        let prefix = cfg.fence_prefix.clone();
        let mut p = Pair {
            t0,
            engine: Engine::new(cfg).unwrap(),
            nodes: (0..n).map(|_| Node::new(Clock::new(0, 0), creds.clone(), prefix.as_bytes(), false)).collect(),
            split,
            k: 0,
        };
        for i in 0..n {
            p.nodes[i].accept(i);
            p.engine.handle_connected(t0, NodeId(i as u16));
        }
        p.exchange(0);
        p
    }

    /// Move bytes both ways until the engine has nothing more to say.
    fn exchange(&mut self, ms: u64) {
        let now = self.t0 + Duration::from_millis(ms);
        loop {
            let mut moved = false;
            for i in 0..self.nodes.len() {
                let id = NodeId(i as u16);
                let mut out = Vec::new();
                while let Some(b) = self.engine.poll_transmit(id) {
                    out.extend_from_slice(b);
                    let len = b.len();
                    self.engine.advance_transmit(id, len);
                }
                if out.is_empty() {
                    continue;
                }
                moved = true;
                let reply = self.nodes[i].receive(ms * MS, i, &out);
                let mut pos = 0;
                while pos < reply.len() {
                    let len = match &self.split {
                        Split::Whole => reply.len(),
                        Split::Bytes => 1,
                        Split::Sizes(s) => s[self.k % s.len()],
                    };
                    self.k += 1;
                    let end = (pos + len).min(reply.len());
                    self.engine.handle_data(now, id, &reply[pos..end]);
                    pos = end;
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.engine.poll_event()).collect()
    }
}

/// What a run looks like, beyond how replies are split.
#[derive(Clone, Debug)]
struct Plan {
    n: usize,
    auth: bool,
    db: u32,
    /// Nodes where another client already holds `r`.
    taken: Vec<bool>,
    /// Nodes whose script cache is flushed after the handshake.
    flushed: Vec<bool>,
    /// A fencing counter already on some nodes.
    counters: Vec<u8>,
    two_keys: bool,
    fencing: bool,
    extend: bool,
}

fn plan() -> impl Strategy<Value = Plan> {
    (1usize..=5).prop_flat_map(|n| {
        (
            Just(n),
            any::<bool>(),
            0u32..3,
            proptest::collection::vec(proptest::bool::weighted(0.25), n),
            proptest::collection::vec(any::<bool>(), n),
            proptest::collection::vec(0u8..20, n),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(n, auth, db, taken, flushed, counters, two_keys, fencing, extend)| Plan {
                n,
                auth,
                db,
                taken,
                flushed,
                counters,
                two_keys,
                fencing,
                extend,
            })
    })
}

/// Acquire, maybe extend, release; the events in order.
fn run(t0: Instant, p: &Plan, split: Split) -> Vec<Event> {
    let mut pair = Pair::new(t0, p.n, p.auth, p.db, split);
    for i in 0..p.n {
        if p.taken[i] {
            pair.nodes[i].put(0, p.db, b"r", b"someone-else");
        }
        if p.counters[i] > 0 {
            pair.nodes[i].put(0, p.db, b"redlease:fence:r", p.counters[i].to_string().as_bytes());
        }
        if p.flushed[i] {
            pair.nodes[i].flush_scripts();
        }
    }
    let keys: &[&str] = if p.two_keys { &["s"] } else { &[] };
    let options =
        LockOptions::new("r", Duration::from_secs(10)).resources(keys.iter().copied()).fencing(p.fencing).attempts(1);
    let lock = pair.engine.acquire(t0 + Duration::from_millis(1), &options, b"tok").unwrap();
    pair.exchange(1);
    let mut events = pair.events();
    if events.iter().any(|e| matches!(e, Event::Acquired { .. })) {
        if p.extend {
            pair.engine.extend(t0 + Duration::from_millis(2), lock, Some(Duration::from_secs(5))).unwrap();
            pair.exchange(2);
        }
        pair.engine.release(t0 + Duration::from_millis(3), lock).unwrap();
        pair.exchange(3);
    }
    pair.engine.handle_timeout(t0 + Duration::from_millis(100));
    events.extend(pair.events());
    events
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Valid replies fed whole, one byte at a time, or split at arbitrary points give the
    /// same events.
    #[test]
    fn split_replies_give_the_same_events(p in plan(), sizes in proptest::collection::vec(1usize..9, 1..12)) {
        let t0 = Instant::now();
        let whole = run(t0, &p, Split::Whole);
        prop_assert!(!whole.is_empty());
        prop_assert!(!whole.iter().any(|e| matches!(e, Event::LinkFailed { .. })), "{:?}", whole);
        let bytes = run(t0, &p, Split::Bytes);
        prop_assert_eq!(&whole, &bytes);
        let split = run(t0, &p, Split::Sizes(sizes));
        prop_assert_eq!(&whole, &split);
    }
}

#[test]
fn the_split_property_covers_both_outcomes() {
    // A quick check that the plans above really reach grants and refusals.
    let t0 = Instant::now();
    let mut p = Plan {
        n: 3,
        auth: true,
        db: 2,
        taken: vec![false; 3],
        flushed: vec![true, false, false],
        counters: vec![4, 0, 9],
        two_keys: true,
        fencing: true,
        extend: true,
    };
    // The lock's events (the handshakes' LinkUp come first).
    let lock_events =
        |p: &Plan| -> Vec<Event> { run(t0, p, Split::Bytes).into_iter().filter(|e| e.lock().is_some()).collect() };
    let events = lock_events(&p);
    assert!(matches!(events[0], Event::Acquired { fence: Some(10), .. }), "{events:?}");
    assert!(events.iter().any(|e| matches!(e, Event::Extended { .. })), "{events:?}");
    assert!(events.iter().any(|e| matches!(e, Event::Released { .. })), "{events:?}");
    p.taken = vec![true, true, false];
    let events = lock_events(&p);
    assert!(matches!(events.as_slice(), [Event::AcquireFailed { .. }]), "{events:?}");
}

// ----- arbitrary configs, commands, inputs and time -------------------------------------------

/// A duration from the whole range that matters: zero, tiny, typical, huge, `MAX`.
fn any_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        (0u64..5_000).prop_map(Duration::from_nanos),
        (0u64..5_000).prop_map(Duration::from_millis),
        any::<u64>().prop_map(Duration::from_nanos),
        any::<u64>().prop_map(Duration::from_secs),
    ]
}

/// A config duration: mostly a workable one, sometimes anything at all.
fn config_duration(lo_ms: u64, hi_ms: u64) -> impl Strategy<Value = Duration> {
    prop_oneof![19 => (lo_ms..=hi_ms).prop_map(Duration::from_millis), 1 => any_duration()]
}

fn any_config() -> impl Strategy<Value = Config> {
    (
        1usize..=5,
        (config_duration(1, 100), config_duration(1, 2_000), config_duration(1, 50), config_duration(50, 3_000)),
        (prop_oneof![9 => 1u32..4, 1 => Just(0u32)], config_duration(0, 20), config_duration(1, 200)),
        (prop_oneof![12 => Just(0.01), 2 => Just(0.0), 2 => Just(0.49), 1 => any::<f64>()], 0.0f64..=1.0),
        prop_oneof![18 => Just("redlease:fence:".to_owned()), 1 => Just(String::new()), 1 => "[a-z:]{0,4}"],
        proptest::option::of(config_duration(100, 5_000)),
    )
        .prop_map(|(n, (nt, ct, rmin, rmax), (attempts, dmin, dmax), (drift, jitter), prefix, liveness)| {
            let nodes = (0..n).map(|i| NodeConfig::new("127.0.0.1", 7000 + i as u16)).collect();
            let mut c = Config::new(nodes).client_name(None);
            c.node_timeout = nt;
            c.connect_timeout = ct;
            c.reconnect_min = rmin;
            c.reconnect_max = rmax;
            c.retry = redlease_core::Retry::new(attempts, dmin, dmax);
            c.drift_factor = drift;
            c.reconnect_jitter = jitter;
            c.fence_prefix = prefix;
            c.liveness_timeout = liveness;
            c
        })
}

/// One step of a driver, a caller or the clock.
#[derive(Clone, Debug)]
enum Step {
    Acquire {
        resource: u8,
        ttl: Duration,
        fencing: bool,
        attempts: Option<u32>,
        wait: Option<Duration>,
        hold: Option<Duration>,
        auto: bool,
    },
    Extend {
        which: usize,
        ttl: Option<Duration>,
    },
    Release {
        which: usize,
    },
    Cancel {
        which: usize,
    },
    AutoExtend {
        which: usize,
        on: bool,
    },
    Advance(Duration),
    Connect {
        node: usize,
    },
    ConnectFailed {
        node: usize,
    },
    Disconnect {
        node: usize,
    },
    /// Write out a node's queued bytes (or not: the socket may be full).
    Flush {
        node: usize,
    },
    /// Bytes from a node: valid replies mostly, garbage sometimes.
    Reply {
        node: usize,
        bytes: Vec<u8>,
    },
}

fn any_step() -> impl Strategy<Value = Step> {
    let ttl = prop_oneof![3 => (3u64..30_000).prop_map(Duration::from_millis), 1 => any_duration()];
    prop_oneof![
        3 => (0u8..3, ttl, any::<bool>(), proptest::option::of(0u32..4), proptest::option::of(any_duration()),
              proptest::option::of(any_duration()), any::<bool>())
            .prop_map(|(resource, ttl, fencing, attempts, wait, hold, auto)| Step::Acquire { resource, ttl, fencing, attempts, wait, hold, auto }),
        1 => (0usize..8, proptest::option::of(any_duration())).prop_map(|(which, ttl)| Step::Extend { which, ttl }),
        2 => (0usize..8).prop_map(|which| Step::Release { which }),
        1 => (0usize..8).prop_map(|which| Step::Cancel { which }),
        1 => (0usize..8, any::<bool>()).prop_map(|(which, on)| Step::AutoExtend { which, on }),
        3 => prop_oneof![(0u64..2_000).prop_map(Duration::from_millis), any_duration()].prop_map(Step::Advance),
        1 => (0usize..5).prop_map(|node| Step::Connect { node }),
        1 => (0usize..5).prop_map(|node| Step::ConnectFailed { node }),
        1 => (0usize..5).prop_map(|node| Step::Disconnect { node }),
        3 => (0usize..5).prop_map(|node| Step::Flush { node }),
        4 => (0usize..5, server_output()).prop_map(|(node, bytes)| Step::Reply { node, bytes }),
    ]
}

/// Feed `steps` to an engine built from `config` and check it stays bounded; then wind every
/// lock down and check each ended with exactly one final event.
/// Returns how many locks the run issued (`None`: the config was refused).
fn drive(config: Config, steps: Vec<Step>) -> Result<Option<usize>, TestCaseError> {
    let Ok(mut engine) = Engine::new(config) else { return Ok(None) };
    let n = engine.node_count();
    let t0 = Instant::now();
    let mut now = t0;
    let mut locks = Vec::new();
    let mut finals: std::collections::HashMap<redlease_core::LockId, usize> = Default::default();
    let drain = |engine: &mut Engine, finals: &mut std::collections::HashMap<_, usize>| {
        while let Some(ev) = engine.poll_event() {
            if let Event::AcquireFailed { lock, .. } | Event::Released { lock, .. } = ev {
                *finals.entry(lock).or_insert(0) += 1;
            } else if let Some(lock) = ev.lock() {
                prop_assert_eq!(finals.get(&lock), None, "an event after the final one: {:?}", ev);
            }
        }
        while engine.poll_close().is_some() {}
        Ok(())
    };
    for step in steps {
        match step {
            Step::Acquire { resource, ttl, fencing, attempts, wait, hold, auto } => {
                let mut o = LockOptions::new(format!("r{resource}"), ttl).fencing(fencing).auto_extend(auto);
                o.attempts = attempts;
                o.wait = wait;
                o.max_hold = hold;
                if let Ok(lock) = engine.acquire(now, &o, b"tok") {
                    locks.push(lock);
                }
            }
            Step::Extend { which, ttl } => {
                if let Some(&l) = locks.get(which) {
                    let _ = engine.extend(now, l, ttl);
                }
            }
            Step::Release { which } => {
                if let Some(&l) = locks.get(which) {
                    let _ = engine.release(now, l);
                }
            }
            Step::Cancel { which } => {
                if let Some(&l) = locks.get(which) {
                    let _ = engine.cancel(now, l);
                }
            }
            Step::AutoExtend { which, on } => {
                if let Some(&l) = locks.get(which) {
                    let _ = engine.set_auto_extend(now, l, on);
                }
            }
            Step::Advance(d) => {
                if let Some(t) = now.checked_add(d) {
                    now = t;
                }
                engine.handle_timeout(now);
            }
            Step::Connect { node } => {
                while engine.poll_connect(now).is_some() {}
                engine.handle_connected(now, NodeId((node % n) as u16));
            }
            Step::ConnectFailed { node } => engine.handle_connect_failed(now, NodeId((node % n) as u16), "refused"),
            Step::Disconnect { node } => engine.handle_disconnected(now, NodeId((node % n) as u16), "closed"),
            Step::Flush { node } => {
                let id = NodeId((node % n) as u16);
                while let Some(b) = engine.poll_transmit(id) {
                    let len = b.len();
                    engine.advance_transmit(id, len);
                }
            }
            Step::Reply { node, bytes } => engine.handle_data(now, NodeId((node % n) as u16), &bytes),
        }
        drain(&mut engine, &mut finals)?;
        for i in 0..n {
            let id = NodeId(i as u16);
            prop_assert!(engine.in_flight(id) <= 4096, "node {} has {} requests in flight", i, engine.in_flight(id));
            let unsent = engine.poll_transmit(id).map_or(0, <[u8]>::len);
            prop_assert!(unsent <= (4 << 20) + 4096, "node {} holds {} unsent bytes", i, unsent);
        }
    }
    // Wind down: release what is held, cancel what is being acquired, let every timer run.
    for &l in &locks {
        let _ = engine.release(now, l);
        let _ = engine.cancel(now, l);
    }
    for _ in 0..10_000 {
        drain(&mut engine, &mut finals)?;
        if engine.active_locks() == 0 {
            break;
        }
        match engine.poll_timeout() {
            Some(t) => now = now.max(t),
            None => now += Duration::from_secs(1),
        }
        engine.handle_timeout(now);
        for &l in &locks {
            let _ = engine.release(now, l);
            let _ = engine.cancel(now, l);
        }
    }
    drain(&mut engine, &mut finals)?;
    prop_assert_eq!(engine.active_locks(), 0, "some lock never ended");
    for l in &locks {
        prop_assert_eq!(finals.get(l).copied(), Some(1), "lock {:?} ended {:?} times", l, finals.get(l));
    }
    Ok(Some(locks.len()))
}

/// The property below really exercises the engine: most configs are valid, most runs lock.
#[test]
fn arbitrary_runs_exercise_the_engine() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (any_config(), proptest::collection::vec(any_step(), 0..80));
    let (mut valid, mut locked) = (0, 0);
    for _ in 0..200 {
        let (config, steps) = strategy.new_tree(&mut runner).unwrap().current();
        let issued = drive(config, steps).unwrap();
        valid += usize::from(issued.is_some());
        locked += usize::from(issued.is_some_and(|n| n > 0));
    }
    assert!(valid >= 60 && locked >= 40, "{valid} valid configs, {locked} runs with locks, of 200");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary configs, and arbitrary sequences of commands, inputs and time steps: no
    /// panic, no link holding more than its caps, and every lock ends in exactly one final
    /// event.
    #[test]
    fn arbitrary_configs_and_steps_stay_bounded_and_every_lock_ends_once(
        config in any_config(),
        steps in proptest::collection::vec(any_step(), 0..80),
    ) {
        drive(config, steps)?;
    }
}
