//! Waiters of every kind get the lock: one-key waiters that hear release messages, a waiter on
//! two keys, a client with wake-ups off (it polls) and a client whose nodes refuse `HELLO 3`
//! (RESP2 only), all contending for one resource over three model nodes, each holding it 5 ms.
//! Counts each kind's acquisitions and longest wait, and checks mutual exclusion on the way.
//!
//! A waiter must not starve because of how others wait: the release hands the key to the head
//! of its queue, so every kind of waiter queues.
//!
//! Readers and writers of one resource both get it too: three readers and two writers that
//! hear release messages and a reader that polls. Writers have preference (a waiting writer
//! stops new readers); readers queue with the writers and are handed the key in turn, so
//! neither kind starves, and readers still share it.

#[allow(dead_code)]
#[path = "sim/node.rs"]
mod node;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use node::{Clock, MS, Node, Time};
use redlease_core::{Config, Engine, Event, LockId, LockOptions, NodeConfig, NodeId};

/// One-way network delay.
const DELAY: Time = MS / 5;
/// How long each client holds the lock.
const HOLD: Time = 5 * MS;
/// Simulated time per run.
const RUN: Time = 3_000 * MS;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// One key, wake-ups on.
    Listener,
    /// Two keys (`r0` and `r1`), wake-ups on.
    TwoKeys,
    /// One key, wake-ups off in its config.
    Poller,
    /// One key, over connections of its own to nodes that refuse `HELLO 3`.
    Resp2,
    /// Read locks of one key, wake-ups on.
    Reader,
    /// Read locks of one key, wake-ups off in its config.
    PollingReader,
}

impl Kind {
    fn reads(self) -> bool {
        matches!(self, Kind::Reader | Kind::PollingReader)
    }
}

enum Ev {
    ToNode { node: usize, conn: usize, bytes: Vec<u8> },
    ToClient { client: usize, node: usize, bytes: Vec<u8> },
    Timer { client: usize },
    Release { client: usize },
    Acquire { client: usize },
}

struct Client {
    kind: Kind,
    engine: Engine,
    lock: Option<LockId>,
    asked_at: Time,
    timer_at: Option<Time>,
    grants: u32,
    longest_wait: Time,
}

struct World {
    base: Instant,
    now: Time,
    seq: u64,
    queue: BTreeMap<(Time, u64), Ev>,
    /// The three nodes; they refuse `HELLO 3` on the RESP2 client's connections only.
    nodes: Vec<Node>,
    clients: Vec<Client>,
    /// The writer (a mutex holder) holding `r0` now, if any.
    writer: Option<usize>,
    /// The readers holding `r0` now.
    readers: BTreeSet<usize>,
    /// Grants to a reader while another reader held it.
    shared: u32,
    violations: Vec<String>,
}

impl World {
    fn push(&mut self, at: Time, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    fn instant(&self, t: Time) -> Instant {
        self.base + Duration::from_nanos(t)
    }

    /// The connection id of `client` at `node`.
    fn conn(client: usize, node: usize) -> usize {
        client * 16 + node
    }

    /// After any call into a client's engine: send what it wrote, re-arm its timer, act on
    /// its events.
    fn settle(&mut self, c: usize) {
        for n in 0..3 {
            let id = NodeId(n as u16);
            let mut bytes = Vec::new();
            while let Some(b) = self.clients[c].engine.poll_transmit(id) {
                bytes.extend_from_slice(b);
                let len = b.len();
                self.clients[c].engine.advance_transmit(id, len);
            }
            if !bytes.is_empty() {
                self.push(self.now + DELAY, Ev::ToNode { node: n, conn: Self::conn(c, n), bytes });
            }
        }
        while let Some(ev) = self.clients[c].engine.poll_event() {
            self.on_event(c, ev);
        }
        if let Some(at) = self.clients[c].engine.poll_timeout() {
            let at = at.saturating_duration_since(self.base).as_nanos() as Time;
            if self.clients[c].timer_at != Some(at) {
                self.clients[c].timer_at = Some(at);
                self.push(at.max(self.now), Ev::Timer { client: c });
            }
        }
    }

    fn on_event(&mut self, c: usize, ev: Event) {
        match ev {
            Event::Acquired { lock, .. } if Some(lock) == self.clients[c].lock => {
                let reads = self.clients[c].kind.reads();
                if self.writer.is_some() || (!reads && !self.readers.is_empty()) {
                    let (w, r) = (self.writer, &self.readers);
                    self.violations
                        .push(format!("client {c} granted at {} beside writer {w:?}, readers {r:?}", self.now));
                }
                if reads {
                    self.shared += u32::from(!self.readers.is_empty());
                    self.readers.insert(c);
                } else {
                    self.writer = Some(c);
                }
                let client = &mut self.clients[c];
                client.grants += 1;
                client.longest_wait = client.longest_wait.max(self.now - client.asked_at);
                self.push(self.now + HOLD, Ev::Release { client: c });
            }
            Event::AcquireFailed { lock, error } if Some(lock) == self.clients[c].lock => {
                self.violations.push(format!("client {c} gave up: {error}"));
                self.clients[c].lock = None;
                self.push(self.now, Ev::Acquire { client: c });
            }
            Event::Released { lock, .. } if Some(lock) == self.clients[c].lock => {
                self.clients[c].lock = None;
                self.push(self.now, Ev::Acquire { client: c });
            }
            _ => {}
        }
    }

    fn acquire(&mut self, c: usize) {
        let resources: &[&str] = if self.clients[c].kind == Kind::TwoKeys { &["r0", "r1"] } else { &["r0"] };
        let mut options = LockOptions::new(resources[0], Duration::from_secs(10)).wait(Duration::from_secs(60));
        options.resources = resources.iter().map(|r| (*r).to_owned()).collect();
        options.shared = self.clients[c].kind.reads();
        let token = format!("c{c}-{}", self.clients[c].grants);
        let now = self.instant(self.now);
        let lock = self.clients[c].engine.acquire(now, &options, token.as_bytes()).expect("valid options");
        self.clients[c].lock = Some(lock);
        self.clients[c].asked_at = self.now;
        self.settle(c);
    }

    fn dispatch(&mut self, ev: Ev) {
        let now = self.instant(self.now);
        match ev {
            Ev::ToNode { node, conn, bytes } => {
                let reply = self.nodes[node].receive(self.now, conn, &bytes);
                let client = conn / 16;
                if !reply.is_empty() {
                    self.push(self.now + DELAY, Ev::ToClient { client, node, bytes: reply });
                }
                for (other, push) in std::mem::take(&mut self.nodes[node].outbox) {
                    self.push(self.now + DELAY, Ev::ToClient { client: other / 16, node, bytes: push });
                }
            }
            Ev::ToClient { client, node, bytes } => {
                self.clients[client].engine.handle_data(now, NodeId(node as u16), &bytes);
                self.settle(client);
            }
            Ev::Timer { client } => {
                if self.clients[client].timer_at.is_some_and(|t| t <= self.now) {
                    self.clients[client].timer_at = None;
                    self.clients[client].engine.handle_timeout(now);
                    self.settle(client);
                }
            }
            Ev::Release { client } => {
                if self.writer == Some(client) {
                    self.writer = None;
                }
                self.readers.remove(&client);
                let lock = self.clients[client].lock.expect("a holder has a lock");
                self.clients[client].engine.release(now, lock).expect("held");
                self.settle(client);
            }
            Ev::Acquire { client } => self.acquire(client),
        }
    }
}

/// The engine of a client of `kind`, every node connected and its handshake answered through
/// the model nodes.
fn engine(kind: Kind, seed: u64) -> Engine {
    let nodes = (0..3).map(|i| NodeConfig::new("sim", 7000 + i)).collect();
    let mut config = Config::new(nodes);
    config.client_name = None;
    config.seed = Some(seed);
    config.wake = !matches!(kind, Kind::Poller | Kind::PollingReader);
    Engine::new(config).expect("valid config")
}

struct Tally {
    grants: u32,
    longest_wait: Time,
}

/// One run of `kinds`: each kind's tally, how often readers shared, the violations.
fn run(seed: u64, kinds: &[Kind]) -> (BTreeMap<String, Tally>, u32, Vec<String>) {
    let mut nodes: Vec<Node> = (0..3).map(|_| Node::new(Clock::new(0, 0), None, b"redlease:fence:", false)).collect();
    let mut world = World {
        base: Instant::now(),
        now: 0,
        seq: 0,
        queue: BTreeMap::new(),
        nodes: Vec::new(),
        clients: Vec::new(),
        writer: None,
        readers: BTreeSet::new(),
        shared: 0,
        violations: Vec::new(),
    };
    for (c, &kind) in kinds.iter().enumerate() {
        let mut engine = engine(kind, seed * 31 + c as u64);
        // Connect at once; the handshake goes through the model nodes like anything else.
        let now = world.instant(0);
        while let Some(n) = engine.poll_connect(now) {
            let conn = World::conn(c, n.index());
            nodes[n.index()].accept(conn);
            if kind == Kind::Resp2 {
                nodes[n.index()].refuse_hello(conn);
            }
            engine.handle_connected(now, n);
        }
        world.clients.push(Client {
            kind,
            engine,
            lock: None,
            asked_at: 0,
            timer_at: None,
            grants: 0,
            longest_wait: 0,
        });
    }
    world.nodes = nodes;
    for c in 0..kinds.len() {
        world.settle(c);
        // Start a little apart, after the handshakes.
        world.push(10 * MS + c as Time * MS / 10, Ev::Acquire { client: c });
    }
    while let Some(((t, _), ev)) = world.queue.pop_first() {
        if t > RUN {
            break;
        }
        world.now = t;
        world.dispatch(ev);
    }
    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    for c in &world.clients {
        let t = tally.entry(format!("{:?}", c.kind)).or_insert(Tally { grants: 0, longest_wait: 0 });
        t.grants += c.grants;
        t.longest_wait = t.longest_wait.max(c.longest_wait);
    }
    (tally, world.shared, world.violations)
}

/// Run `kinds` over 8 seeds; print and check each kind's acquisitions and longest wait; return
/// how often readers shared the lock.
fn every_kind_served(kinds: &[Kind]) -> u32 {
    let mut total: BTreeMap<String, (u32, Time, u32)> = BTreeMap::new();
    let mut shared = 0;
    for seed in 0..8 {
        let (tally, overlaps, violations) = run(seed, kinds);
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
        shared += overlaps;
        for (kind, t) in tally {
            let e = total.entry(kind).or_insert((0, 0, u32::MAX));
            e.0 += t.grants;
            e.1 = e.1.max(t.longest_wait);
            e.2 = e.2.min(t.grants);
        }
    }
    // Six clients sharing 5 ms holds for 3 s: about 100 each if the lock goes round.
    for (kind, (grants, longest, fewest)) in &total {
        let per_client = kinds.iter().filter(|k| format!("{k:?}") == *kind).count() as u32;
        println!(
            "{kind}: {grants} acquisitions over 8 runs ({} per client and run on average, at least {fewest} in a run), longest wait {} ms",
            grants / 8 / per_client,
            longest / MS
        );
        assert!(*fewest >= 5 * per_client, "{kind}: only {fewest} acquisitions in a run: it starves");
        assert!(*longest < 1_000 * MS, "{kind}: waited {} ms", longest / MS);
    }
    shared
}

#[test]
fn every_kind_of_waiter_gets_the_lock() {
    every_kind_served(&[Kind::Listener, Kind::Listener, Kind::Listener, Kind::TwoKeys, Kind::Poller, Kind::Resp2]);
}

#[test]
fn readers_and_writers_both_get_the_lock() {
    let kinds = [Kind::Reader, Kind::Reader, Kind::Reader, Kind::Listener, Kind::Listener, Kind::PollingReader];
    let shared = every_kind_served(&kinds);
    println!("readers shared the lock in {shared} grants over 8 runs");
    assert!(shared > 0, "readers never shared the lock");
}
