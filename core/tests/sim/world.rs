//! The world of one run: the model nodes, the clients (each with its own `Engine`), the
//! seeded network and the scheduler, all on one simulated global clock.
//!
//! The network keeps TCP's promises and nothing more: bytes on one connection arrive in
//! order, split anywhere; different connections are independent, so messages to different
//! nodes (and from different clients) reorder freely. A lost message breaks its connection
//! (both ends see it, the client a little later); everything still in flight on it is gone.
//! Paused nodes keep their input until they resume; crashed nodes lose their connections.
//!
//! A node that is a Redis Cluster is several model nodes ("servers"), one per master (see
//! [`cluster`](super::cluster)); a fault of the node hits all of them. In runs with clusters
//! the world drives connections as the client drivers do, through `poll_connect` and
//! `poll_close` (links to masters come and go with the slot maps), follows every request
//! through the redirects it meets (no chain may exceed [`MAX_CHAIN`]), and checks that no
//! release of an acquisition's token takes what the round that got the lock was granted.
//!
//! A node that is Sentinel-managed is a primary, its replicas and three sentinels (see
//! [`sentinel`](super::sentinel)); a fault of the node hits its primary. The replicas copy the
//! primary's keys at the replication lag, and at once when a `WAIT` counts them; a failover
//! promotes one with what it has, and the sentinels learn it one by one, each announcing it on
//! `+switch-master`. Its engines find the master through the sentinels (the world drives
//! connections as for clusters), and a release a failover may have undone is not checked.
//!
//! The clients draw their every move from the seed, or play the roles of a
//! [`Script`](super::script::Script): what they ask for and when, how long they hold.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use redlease_core::cluster::hash_slot;
use redlease_core::{
    AcquireError, Config, Engine, Event, ExtendError, Fault as NodeFault, LinkError, LockId, LockOptions, Misuse,
    NodeConfig, NodeId, ReleaseOutcome,
};
use redlease_core::{ElectionOptions, LeaderChange, NodeElection, Observer, leader_of};

use super::checker::{self, Hold, Semaphore, Violation, ms};
use super::cluster::Cluster;
use super::node::shard::{self, HOST, Stale};
use super::node::{MS, Node, Segment, Time, reader_spans};
use super::rng::Rng;
use super::scenario::{Fault, Scenario, US};
use super::sentinel::{self, Managed};

/// Names of the resources (lock keys).
pub(crate) const NAMES: [&[u8]; 3] = [b"r0", b"r1", ELECTION_KEY];

/// The lock key of the election `e0` (election runs campaign in it), and its index in
/// [`NAMES`].
pub(crate) const ELECTION_KEY: &[u8] = b"redlease:elect:{e0}";
const ELECTION: usize = 2;

macro_rules! trace {
    ($w:expr, $($arg:tt)*) => {
        if $w.trace.is_some() {
            let line = format!($($arg)*);
            $w.trace_line(line);
        }
    };
}

/// Redirects the engine follows for one request to a Redis Cluster node (its `MAX_HOPS`: "a
/// round follows at most 5 redirects per node"). A longer chain is reported as a violation.
pub(crate) const MAX_CHAIN: u64 = 5;

/// Timeouts an engine may handle at one instant before its timer counts as stuck.
const MAX_SPINS: u32 = 1_000;

/// A request as the world recognizes it when it is sent again after a redirect: the command
/// (`SET`, or the script's index), its keys and its arguments (`EVALSHA` and `EVAL` of one
/// script are one request).
type Req = (usize, Vec<Vec<u8>>, Vec<Vec<u8>>);

/// What happens at a time. A server is a model node: a standalone node, or a master of a
/// cluster node. A link is one of a client's engine links (a node's own link has the node's
/// index); `ConnectFailed` is the failure of a connect attempt the engine asked for. A
/// cluster node's migration moves one key (`MoveKey`) and ends (`EndMigration`); a master
/// learns who owns a slot now (`Gossip`).
#[derive(Debug)]
enum Ev {
    ToNode {
        conn: usize,
        bytes: Vec<u8>,
    },
    ToClient {
        conn: usize,
        bytes: Vec<u8>,
    },
    Timer {
        client: usize,
        at: Time,
    },
    Connect {
        client: usize,
        link: usize,
    },
    ConnectFailed {
        client: usize,
        link: usize,
    },
    Established {
        conn: usize,
    },
    Disconnected {
        conn: usize,
    },
    Wake {
        client: usize,
        seq: u64,
    },
    Fault(Fault),
    ResumeNode {
        server: usize,
    },
    RestartNode {
        server: usize,
    },
    Heal {
        server: usize,
    },
    ResumeClient {
        client: usize,
    },
    Calm,
    /// The workload stops (at the end less the drain time; stale once the end moved).
    Stop,
    /// A release no node failed was decided a drain time ago: nothing of `token` is left,
    /// unless a link of its client failed since its acquisition began (`failures` was the
    /// count then), or a node answered `NOSCRIPT` or `TRYAGAIN` since (`noscripts` was the
    /// count then: a release or cleanup refused so is not always sent again), on any node
    /// not paused now (its release has not run yet).
    CheckGone {
        client: usize,
        token: Vec<u8>,
        failures: u64,
        noscripts: u64,
        /// A check soon after a release every node answered, before any TTL the lock's
        /// requests set can run out (a leftover shows before it expires): skipped if a fault
        /// began or a pause ended since `calm_since` (a cleanup may be held up).
        calm_since: Option<Time>,
    },
    /// A semaphore waiter was granted a round trip or two ago: no node keeps a permit it does
    /// not hold reserved for it (handed to it as the next waiter), unless its client vanished
    /// or a link of it failed, a node answered `NOSCRIPT` or `TRYAGAIN`, a fault began or a
    /// pause ended since (a paused node is not looked at).
    CheckHanded {
        client: usize,
        token: Vec<u8>,
        held: Vec<Vec<u8>>,
        failures: u64,
        noscripts: u64,
        calm_since: Time,
    },
    Vanish {
        client: usize,
    },
    MoveKey {
        node: usize,
    },
    EndMigration {
        node: usize,
        gossip: Time,
        pingpong: Option<Time>,
    },
    Gossip {
        server: usize,
        slot: u16,
    },
    /// A Sentinel-managed node's replicas copy its primary's keys.
    Replicate {
        node: usize,
    },
    /// A sentinel learns that failover `epoch` of its service made `to` the master.
    Learn {
        server: usize,
        epoch: u64,
        to: u16,
    },
}

#[derive(Clone, Copy, Debug)]
struct Conn {
    client: usize,
    /// The server it reaches, and the client's link it is.
    node: usize,
    link: usize,
    alive: bool,
    /// Latest scheduled delivery per direction (0: to the node, 1: to the client).
    last: [Time; 2],
}

#[derive(Debug)]
enum Work {
    Idle,
    /// `permits`: how many permits of the semaphore `resources[0]` it asked for (`None`: a
    /// mutex of `resources`).
    Acquiring {
        lock: LockId,
        /// Its record in the run's acquisitions.
        acquisition: usize,
        resources: Vec<usize>,
        token: Vec<u8>,
        fencing: bool,
        permits: Option<u32>,
        /// A read lock.
        shared: bool,
    },
    Holding {
        lock: LockId,
        hold: usize,
        extend: Option<(Time, Duration)>,
        release_at: Time,
        /// When a write lock is to be downgraded, and whether its downgrade is in flight.
        downgrade_at: Option<Time>,
        downgrading: bool,
    },
    Releasing {
        lock: LockId,
    },
    Gone,
}

struct Client {
    engine: Option<Engine>,
    /// The connection of each link.
    conn: Vec<Option<usize>>,
    /// Runs with clusters, per link: the bytes written on its connection that do not make a
    /// whole command yet, the commands awaiting their replies (a request with the redirects
    /// that led to it), and the reply bytes that do not make a whole reply yet.
    tx: Vec<Vec<u8>>,
    sent: Vec<VecDeque<Option<Sent>>>,
    rx: Vec<Vec<u8>>,
    /// Requests the replies being read redirected (with their node, the redirects so far and
    /// their round), until the engine sends them again in the same step (a request of a new
    /// round, a retry, starts a chain of its own).
    redirected: Vec<(usize, Req, u64, Option<Time>)>,
    /// The lock of each token this client acquired with.
    locks: BTreeMap<Vec<u8>, LockId>,
    /// Links this client's engine saw fail, and that count when each token's acquisition
    /// started: a cleanup can miss a node only through a failed link.
    link_failures: u64,
    failures_at: BTreeMap<Vec<u8>, (u64, u64)>,
    /// The link whose `HELLO` reply is being read: what the engine held behind it goes out
    /// now, encoded in a round that may be over.
    hello: Option<usize>,
    timer: Option<Time>,
    /// Timeouts handled at one instant in a row: an engine whose timer does not move on once
    /// it handled its timeout would spin a real adapter's loop.
    spins: (Time, u32),
    /// The engine broke one of its own rules (see `Engine::audit`): reported once.
    audit_failed: bool,
    paused: bool,
    deferred: Vec<Ev>,
    work: Work,
    wake_seq: u64,
    issued: u32,
}

/// Counts of what happened in a run.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stats {
    pub(crate) acquired: u64,
    pub(crate) fenced: u64,
    pub(crate) held_by_others: u64,
    pub(crate) unreachable: u64,
    pub(crate) too_slow: u64,
    pub(crate) cancelled: u64,
    pub(crate) released: u64,
    pub(crate) not_held: u64,
    pub(crate) release_unreachable: u64,
    pub(crate) extended: u64,
    pub(crate) extend_failed: u64,
    pub(crate) lost: u64,
    pub(crate) broken_links: u64,
    /// Connections the engines failed as silent (a stalled node) and recycled.
    pub(crate) silent_links: u64,
    /// The most requests any engine had in flight on one connection.
    pub(crate) max_in_flight: usize,
    pub(crate) noscript: u64,
    pub(crate) events: u64,
    /// Release messages sent to subscribers, and dropped on purpose.
    pub(crate) published: u64,
    pub(crate) publish_dropped: u64,
    /// Of those: sharded release messages (a cluster master's `smessage`), and sharded
    /// subscriptions a master ended unasked on losing a slot (`sunsubscribe`).
    pub(crate) shard_messages: u64,
    pub(crate) shard_unsubscribed: u64,
    /// Keys deleted by releases nobody waited for, which published nothing.
    pub(crate) quiet_releases: u64,
    pub(crate) liveness_checked: bool,
    /// Semaphore holds, the permits they held, and those that held more than one at once.
    pub(crate) sem_holds: u64,
    pub(crate) permits: u64,
    pub(crate) multi_permit_holds: u64,
    /// Semaphores whose holds reached their limit at some instant (all permits taken at once).
    pub(crate) at_limit: u64,
    /// Semaphores in play (each resource name of a semaphore run that was held).
    pub(crate) semaphores: u64,
    /// Read locks and write locks of a reader-writer run granted, downgrades asked for and
    /// confirmed, and pairs of read holds of one resource that overlapped.
    pub(crate) reads: u64,
    pub(crate) writes: u64,
    pub(crate) downgrades_asked: u64,
    pub(crate) downgrades: u64,
    /// Downgrades that did not make the lock a read lock (refused, unconfirmed, too late).
    pub(crate) downgrades_failed: u64,
    pub(crate) reader_overlaps: u64,
    /// Re-entry runs: holds granted to an owner, and pairs of holds of one owner that
    /// overlapped (a re-entry).
    pub(crate) reentrant_holds: u64,
    pub(crate) reentries: u64,
    /// Runs with Redis Cluster nodes: the cluster nodes, slot migrations finished and the keys
    /// they moved; what the masters answered: `MOVED`, `ASK`, the stale `MOVED`s injected,
    /// `TRYAGAIN`, requests served after `ASKING`, `CLUSTER SLOTS`; the requests the engines
    /// sent again after a redirect; and the longest chain of redirects one request followed.
    pub(crate) cluster_nodes: u64,
    pub(crate) migrations: u64,
    pub(crate) keys_migrated: u64,
    pub(crate) moved: u64,
    pub(crate) ask: u64,
    pub(crate) stale_redirects: u64,
    pub(crate) tryagain: u64,
    pub(crate) asking_served: u64,
    pub(crate) map_reads: u64,
    pub(crate) slots_reads: u64,
    pub(crate) followed: u64,
    pub(crate) max_chain: u64,
    /// Runs with Sentinel-managed nodes: the nodes, their failovers, and the switches the
    /// engines followed (as their health views count them at the end).
    pub(crate) sentinel_nodes: u64,
    pub(crate) failovers: u64,
    pub(crate) switches: u64,
    /// Runs with nodes whose grants wait for a replica: the `WAIT`s answered, and of them too
    /// few replicas, refused, lost with their connection, late.
    pub(crate) waits: u64,
    pub(crate) waits_short: u64,
    pub(crate) waits_refused: u64,
    pub(crate) waits_lost: u64,
    pub(crate) waits_late: u64,
    /// Engines checked idle at the end of a run (every lock released, every reply read), and
    /// what the nodes still held then beyond their persistent keys.
    pub(crate) idle_checked: u64,
    pub(crate) leftovers: u64,
    /// Releases every node answered, after which no node held anything of the token.
    pub(crate) releases_checked: u64,
    /// Semaphore grants after which no node kept a permit reserved for the holder that it does
    /// not hold.
    pub(crate) handoffs_checked: u64,
    /// Election runs: the observer's reads that named a leader, and the changes of leader it
    /// reported.
    pub(crate) observed: u64,
    pub(crate) leaders_observed: u64,
}

impl Stats {
    pub(crate) fn add(&mut self, o: &Stats) {
        self.acquired += o.acquired;
        self.reentrant_holds += o.reentrant_holds;
        self.reentries += o.reentries;
        self.fenced += o.fenced;
        self.held_by_others += o.held_by_others;
        self.unreachable += o.unreachable;
        self.too_slow += o.too_slow;
        self.cancelled += o.cancelled;
        self.released += o.released;
        self.not_held += o.not_held;
        self.release_unreachable += o.release_unreachable;
        self.extended += o.extended;
        self.extend_failed += o.extend_failed;
        self.lost += o.lost;
        self.broken_links += o.broken_links;
        self.silent_links += o.silent_links;
        self.max_in_flight = self.max_in_flight.max(o.max_in_flight);
        self.noscript += o.noscript;
        self.events += o.events;
        self.published += o.published;
        self.publish_dropped += o.publish_dropped;
        self.shard_messages += o.shard_messages;
        self.shard_unsubscribed += o.shard_unsubscribed;
        self.quiet_releases += o.quiet_releases;
        self.sem_holds += o.sem_holds;
        self.permits += o.permits;
        self.multi_permit_holds += o.multi_permit_holds;
        self.at_limit += o.at_limit;
        self.semaphores += o.semaphores;
        self.reads += o.reads;
        self.writes += o.writes;
        self.downgrades_asked += o.downgrades_asked;
        self.downgrades += o.downgrades;
        self.downgrades_failed += o.downgrades_failed;
        self.reader_overlaps += o.reader_overlaps;
        self.cluster_nodes += o.cluster_nodes;
        self.migrations += o.migrations;
        self.keys_migrated += o.keys_migrated;
        self.moved += o.moved;
        self.ask += o.ask;
        self.stale_redirects += o.stale_redirects;
        self.tryagain += o.tryagain;
        self.asking_served += o.asking_served;
        self.map_reads += o.map_reads;
        self.slots_reads += o.slots_reads;
        self.followed += o.followed;
        self.max_chain = self.max_chain.max(o.max_chain);
        self.sentinel_nodes += o.sentinel_nodes;
        self.failovers += o.failovers;
        self.switches += o.switches;
        self.waits += o.waits;
        self.waits_short += o.waits_short;
        self.waits_refused += o.waits_refused;
        self.waits_lost += o.waits_lost;
        self.waits_late += o.waits_late;
        self.idle_checked += o.idle_checked;
        self.leftovers += o.leftovers;
        self.releases_checked += o.releases_checked;
        self.handoffs_checked += o.handoffs_checked;
        self.observed += o.observed;
        self.leaders_observed += o.leaders_observed;
    }
}

/// One acquisition a client asked for: when, and how it ended: the hold it got (an index into
/// the run's holds) or the error it failed with (`None`: under way when the run ended).
pub(crate) struct Acquisition {
    pub(crate) client: usize,
    pub(crate) asked: Time,
    pub(crate) outcome: Option<Result<usize, AcquireError>>,
}

/// The result of one run.
pub(crate) struct Outcome {
    pub(crate) violations: Vec<Violation>,
    pub(crate) stats: Stats,
    pub(crate) holds: Vec<Hold>,
    pub(crate) acquisitions: Vec<Acquisition>,
    pub(crate) trace: Vec<String>,
    /// Each client engine's figures of each node at the end (`None` for a vanished client).
    pub(crate) node_stats: Vec<Option<Vec<redlease_core::NodeStats>>>,
}

/// Run `sc` to its end and check it. With `trace`, keep a line per step for debugging.
pub(crate) fn run(sc: &Scenario, trace: bool) -> Outcome {
    let mut w = World::new(sc.clone(), trace);
    w.start();
    while let Some(((t, _), ev)) = w.queue.pop_first() {
        if t > w.end {
            break;
        }
        w.now = t;
        w.stats.events += 1;
        w.dispatch(ev);
        if w.sc.election && w.stats.events % 8 == 0 {
            w.observe();
        }
    }
    w.finish()
}

/// A request on a link: what it is, the redirects it followed, and its round.
type Sent = (Req, u64, Option<Time>);

/// The holder that vanished.
struct Vanished {
    client: usize,
    at: Time,
    /// The resource names it asked for (a semaphore's name).
    resources: Vec<usize>,
    /// The keys it held (a semaphore's permits): another client's hold of them all shows that
    /// they came back.
    keys: Vec<Vec<u8>>,
}

struct World {
    sc: Scenario,
    rng: Rng,
    base: Instant,
    now: Time,
    end: Time,
    seq: u64,
    queue: BTreeMap<(Time, u64), Ev>,
    /// The servers: the nodes' own (node `n` is server `n`), then the other masters of the
    /// cluster nodes.
    nodes: Vec<Node>,
    /// The Redlock node of each server.
    node_of: Vec<usize>,
    /// Each node's cluster, if it is a Redis Cluster.
    clusters: Vec<Option<Cluster>>,
    /// Each node's servers, if it is Sentinel-managed.
    managed: Vec<Option<Managed>>,
    /// Connections are made when the engines ask (`poll_connect`, `poll_close`), as the client
    /// drivers do: in runs with cluster nodes, whose links to masters come with the slot maps.
    driven: bool,
    /// Partitioned servers: no connection gets through.
    cut: Vec<bool>,
    clients: Vec<Client>,
    conns: Vec<Conn>,
    holds: Vec<Hold>,
    /// The owner of each re-entrant acquisition, by its token: its holds are the owner's.
    owners: BTreeMap<Vec<u8>, Vec<u8>>,
    acquisitions: Vec<Acquisition>,
    /// The engine's current deadline of each hold (global time), and when the round that
    /// granted it started.
    claims: Vec<Time>,
    rounds: Vec<Time>,
    /// Runs with clusters: per connection, for each command written on it, the start of the
    /// round of the lock whose token it carries (for the releases check of `finish`).
    tags: Vec<Vec<Option<Time>>>,
    problems: Vec<(usize, String)>,
    calm: bool,
    vanish_armed: bool,
    /// When a fault last began, or a paused node or client last resumed.
    disturbed_at: Time,
    /// The workload has stopped: acquisitions are cancelled, holders release at once, nobody
    /// starts again; at the end every engine must be back to idle.
    stopping: bool,
    /// What the nodes held at the end beyond their persistent keys.
    leftover: Vec<Violation>,
    vanished: Option<Vanished>,
    stats: Stats,
    trace: Option<Vec<String>>,
    /// Election runs: the observer following the election.
    observer: Observer,
}

impl World {
    fn new(sc: Scenario, trace: bool) -> Self {
        let fence_prefix = Config::new(Vec::new()).fence_prefix;
        let mut nodes = sc
            .clocks
            .iter()
            .zip(&sc.resp2)
            .map(|(c, &resp2)| Node::new(c.clone(), sc.auth.clone(), fence_prefix.as_bytes(), resp2))
            .collect::<Vec<_>>();
        let mut node_of: Vec<usize> = (0..sc.nodes).collect();
        let mut clusters = Vec::new();
        for n in 0..sc.nodes {
            let Some(plan) = sc.clusters.get(n).and_then(Option::as_ref) else {
                clusters.push(None);
                continue;
            };
            let (cluster, shards) = Cluster::new(n, plan, nodes.len());
            for (m, shard) in shards.into_iter().enumerate() {
                if m > 0 {
                    // The masters of a cluster share its clock (see `Node::export`).
                    nodes.push(Node::new(sc.clocks[n].clone(), sc.auth.clone(), fence_prefix.as_bytes(), false));
                    node_of.push(n);
                }
                nodes[cluster.servers[m]].shard = Some(shard);
            }
            clusters.push(Some(cluster));
        }
        let mut managed = Vec::new();
        for n in 0..sc.nodes {
            let Some(plan) = sc.sentinels.get(n).and_then(Option::as_ref) else {
                managed.push(None);
                continue;
            };
            let (m, added) = Managed::new(n, plan, nodes.len(), &sc.clocks[n], &sc.auth, fence_prefix.as_bytes());
            node_of.extend(added.iter().map(|_| n));
            nodes.extend(added);
            nodes[n].in_sync = Some(0);
            managed.push(Some(m));
        }
        for (server, node) in nodes.iter_mut().enumerate() {
            let n = node_of[server];
            if let Some(Some(plan)) = sc.replicas.get(n) {
                node.replicas = Some((plan.clone(), sc.seed ^ 0x7A17 ^ (server as u64).wrapping_mul(0x9E37_79B9)));
            }
        }
        let driven = clusters.iter().any(Option::is_some) || managed.iter().any(Option::is_some);
        let base = Instant::now();
        let clients = (0..sc.clients)
            .map(|c| Client {
                engine: Some(engine_for(&sc, c, base)),
                conn: vec![None; sc.nodes],
                tx: vec![Vec::new(); sc.nodes],
                sent: vec![VecDeque::new(); sc.nodes],
                rx: vec![Vec::new(); sc.nodes],
                redirected: Vec::new(),
                locks: BTreeMap::new(),
                link_failures: 0,
                failures_at: BTreeMap::new(),
                hello: None,
                timer: None,
                spins: (0, 0),
                audit_failed: false,
                paused: false,
                deferred: Vec::new(),
                work: Work::Idle,
                wake_seq: 0,
                issued: 0,
            })
            .collect();
        World {
            rng: Rng::new(sc.seed.wrapping_add(0x51_u64 << 56)),
            base,
            now: 0,
            end: match &sc.script {
                Some(script) => script.stop_at + sc.wind_down(),
                None => sc.calm_at + sc.liveness_bound() + sc.wind_down(),
            },
            seq: 0,
            queue: BTreeMap::new(),
            cut: vec![false; nodes.len()],
            nodes,
            node_of,
            clusters,
            managed,
            driven,
            clients,
            conns: Vec::new(),
            holds: Vec::new(),
            owners: BTreeMap::new(),
            acquisitions: Vec::new(),
            claims: Vec::new(),
            rounds: Vec::new(),
            tags: Vec::new(),
            problems: Vec::new(),
            calm: false,
            vanish_armed: false,
            disturbed_at: 0,
            stopping: false,
            leftover: Vec::new(),
            vanished: None,
            stats: Stats::default(),
            trace: trace.then(Vec::new),
            observer: Observer::new(),
            sc,
        }
    }

    fn trace_line(&mut self, line: String) {
        let at = ms(self.now);
        if let Some(t) = &mut self.trace {
            t.push(format!("{at:>14} {line}"));
        }
    }

    fn instant(&self, t: Time) -> Instant {
        self.base + Duration::from_nanos(t)
    }

    fn time(&self, i: Instant) -> Time {
        i.saturating_duration_since(self.base).as_nanos() as Time
    }

    /// An event for the trace, with instants shown on the simulated clock.
    fn describe(&self, ev: &Event) -> String {
        match ev {
            Event::Acquired { lock, valid_until, fence, attempts } => format!(
                "Acquired {{ lock: {lock:?}, valid_until: {}, fence: {fence:?}, attempts: {attempts} }}",
                ms(self.time(*valid_until))
            ),
            Event::Extended { lock, valid_until } => {
                format!("Extended {{ lock: {lock:?}, valid_until: {} }}", ms(self.time(*valid_until)))
            }
            Event::Shortened { lock, valid_until } => {
                format!("Shortened {{ lock: {lock:?}, valid_until: {} }}", ms(self.time(*valid_until)))
            }
            other => format!("{other:?}"),
        }
    }

    fn push(&mut self, at: Time, ev: Ev) {
        // A plan made before a pause may name a time that has passed: it happens now.
        let at = at.max(self.now);
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    fn problem(&mut self, client: usize, what: String) {
        trace!(self, "PROBLEM client {client}: {what}");
        self.problems.push((client, what));
    }

    fn start(&mut self) {
        trace!(self, "{:?} run, seed {}", self.sc.profile, self.sc.seed);
        for c in 0..self.sc.clients {
            if self.driven {
                self.drive_links(c);
            } else {
                for n in 0..self.sc.nodes {
                    let at = self.rng.range(0, 500 * US);
                    self.push(at, Ev::Connect { client: c, link: n });
                }
            }
            let at = match self.sc.role(c) {
                Some(role) => role.start,
                None => self.rng.range(0, 2 * MS),
            };
            self.schedule_wake(c, at);
        }
        for (t, f) in self.sc.faults.clone() {
            self.push(t, Ev::Fault(f));
        }
        for node in 0..self.sc.nodes {
            if let Some(m) = &self.managed[node] {
                let at = self.rng.range(m.plan.lag.0, m.plan.lag.1);
                self.push(at, Ev::Replicate { node });
            }
        }
        if self.sc.script.is_none() {
            self.push(self.sc.calm_at, Ev::Calm);
        }
        self.push(self.end - self.sc.wind_down(), Ev::Stop);
    }

    fn client_of(&self, ev: &Ev) -> Option<usize> {
        match ev {
            Ev::ToClient { conn, .. } | Ev::Established { conn } | Ev::Disconnected { conn } => {
                Some(self.conns[*conn].client)
            }
            Ev::Timer { client, .. }
            | Ev::Wake { client, .. }
            | Ev::Connect { client, .. }
            | Ev::ConnectFailed { client, .. } => Some(*client),
            _ => None,
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        if let Some(c) = self.client_of(&ev) {
            if matches!(self.clients[c].work, Work::Gone) {
                return;
            }
            if self.clients[c].paused {
                self.clients[c].deferred.push(ev);
                return;
            }
        }
        match ev {
            Ev::ToNode { conn, bytes } => {
                let Conn { node: n, client: c, alive, .. } = self.conns[conn];
                trace!(self, "c{c} -> n{n} #{conn} {:?}{}", show(&bytes), if alive { "" } else { " (dead link)" });
                if !alive || !self.nodes[n].up {
                    return;
                }
                if self.nodes[n].paused {
                    self.nodes[n].hold(conn, bytes);
                    return;
                }
                self.count_replicas(n);
                let reply = self.nodes[n].receive(self.now, conn, &bytes);
                self.sync_if_waited(n);
                match self.nodes[n].wait_fate.take() {
                    Some(Time::MAX) if !self.calm => {
                        trace!(self, "n{n}: the connection #{conn} breaks before WAIT answers");
                        self.break_conn(conn);
                    }
                    Some(late) if late != Time::MAX => {
                        // The replicas answer late: so does everything behind WAIT.
                        let c = &mut self.conns[conn];
                        c.last[1] = c.last[1].max(self.now + late);
                    }
                    _ => {}
                }
                self.reply(conn, reply);
                self.deliver_published(n);
                self.relay_bus(n);
            }
            Ev::ToClient { conn, bytes } => {
                let Conn { node: n, link, client: c, alive, .. } = self.conns[conn];
                trace!(self, "n{n} -> c{c} #{conn} {:?}{}", show(&bytes), if alive { "" } else { " (dead link)" });
                if !alive || self.clients[c].conn.get(link) != Some(&Some(conn)) {
                    return;
                }
                if self.driven {
                    self.read_replies(c, link, &bytes);
                }
                self.step(c, |e, now| e.handle_data(now, NodeId(link as u16), &bytes));
                self.clients[c].redirected.clear();
                self.clients[c].hello = None;
            }
            Ev::Timer { client: c, at } => {
                if self.clients[c].timer == Some(at) {
                    self.clients[c].timer = None;
                    let spins = &mut self.clients[c].spins;
                    *spins = if spins.0 == at { (at, spins.1 + 1) } else { (at, 1) };
                    if spins.1 > MAX_SPINS {
                        let health = self.clients[c].engine.as_ref().map(|e| format!("{:#?}", e.health()));
                        let what =
                            format!("the engine's timer stays at {} however often it is handled: {health:?}", ms(at));
                        self.problem(c, what);
                        // No more of this client: the run goes on without it.
                        self.clients[c].engine = None;
                        self.clients[c].work = Work::Gone;
                        return;
                    }
                    trace!(self, "c{c} timeout");
                    self.step(c, |e, now| e.handle_timeout(now));
                }
            }
            Ev::Connect { client: c, link } => {
                let server = self.server_for(c, link);
                let reaches = |n: usize| self.sc.role(c).is_none_or(|r| !r.unreachable.contains(&self.node_of[n]));
                let Some(n) = server.filter(|&n| self.nodes[n].up && !self.cut[n] && reaches(n)) else {
                    if self.driven {
                        let at = self.now + self.delay() + self.delay();
                        self.push(at, Ev::ConnectFailed { client: c, link });
                    } else {
                        self.reconnect_later(c, link);
                    }
                    return;
                };
                let conn = self.conns.len();
                self.conns.push(Conn { client: c, node: n, link, alive: true, last: [0; 2] });
                self.nodes[n].accept(conn);
                if self.sc.role(c).is_some_and(|r| r.resp2) {
                    self.nodes[n].refuse_hello(conn);
                }
                let rtt = self.delay() + self.delay();
                self.push(self.now + rtt, Ev::Established { conn });
            }
            Ev::ConnectFailed { client: c, link } => {
                trace!(self, "c{c} cannot connect link {link}");
                self.step(c, |e, now| e.handle_connect_failed(now, NodeId(link as u16), "connection refused"));
            }
            Ev::Established { conn } => {
                let Conn { client: c, node: n, link, alive, .. } = self.conns[conn];
                if !alive {
                    if self.driven {
                        self.step(c, |e, now| e.handle_connect_failed(now, NodeId(link as u16), "connection reset"));
                    } else {
                        self.reconnect_later(c, link);
                    }
                    return;
                }
                trace!(self, "c{c} connected to n{n} #{conn} (link {link})");
                self.grow(c, link);
                let cl = &mut self.clients[c];
                cl.conn[link] = Some(conn);
                cl.tx[link].clear();
                cl.rx[link].clear();
                cl.sent[link].clear();
                self.step(c, |e, now| e.handle_connected(now, NodeId(link as u16)));
            }
            Ev::Disconnected { conn } => {
                let Conn { client: c, node: n, link, .. } = self.conns[conn];
                if self.clients[c].conn.get(link) == Some(&Some(conn)) {
                    trace!(self, "c{c} lost n{n} #{conn} (link {link})");
                    self.clients[c].conn[link] = None;
                    self.step(c, |e, now| e.handle_disconnected(now, NodeId(link as u16), "closed"));
                    if !self.driven {
                        self.reconnect_later(c, link);
                    }
                }
            }
            Ev::Wake { client: c, seq } => {
                if self.clients[c].wake_seq == seq {
                    self.on_wake(c);
                }
            }
            Ev::Fault(f) => self.fault(f),
            Ev::ResumeNode { server } => {
                trace!(self, "n{server} resumes");
                self.disturbed_at = self.now;
                self.count_replicas(server);
                for (conn, reply) in self.nodes[server].resume(self.now) {
                    self.reply(conn, reply);
                }
                self.sync_if_waited(server);
                self.deliver_published(server);
                self.relay_bus(server);
            }
            Ev::RestartNode { server } => {
                trace!(self, "n{server} restarts");
                self.nodes[server].restart(self.now);
            }
            Ev::Heal { server } => {
                trace!(self, "n{server} reachable again");
                self.cut[server] = false;
            }
            Ev::ResumeClient { client } => {
                self.disturbed_at = self.now;
                trace!(self, "c{client} resumes");
                self.clients[client].paused = false;
                for ev in std::mem::take(&mut self.clients[client].deferred) {
                    self.dispatch(ev);
                }
            }
            Ev::Calm => {
                trace!(self, "calm phase: no more faults; client 0 will vanish while holding");
                self.calm = true;
                self.vanish_armed = true;
            }
            Ev::Stop if self.now + self.sc.wind_down() >= self.end && !self.stopping => {
                trace!(self, "the workload stops: acquisitions are cancelled, holders release");
                self.stopping = true;
                for c in 0..self.clients.len() {
                    self.schedule_wake(c, self.now);
                }
            }
            Ev::Stop => {}
            Ev::CheckGone { client, token, failures, noscripts, calm_since } => {
                if self.clients[client].link_failures != failures
                    || self.noscripts() != noscripts
                    || calm_since.is_some_and(|t| self.disturbed_at >= t)
                {
                    return;
                }
                self.stats.releases_checked += 1;
                for server in 0..self.nodes.len() {
                    if self.nodes[server].paused {
                        continue;
                    }
                    for key in self.nodes[server].holding(self.now, &token) {
                        let node = self.node_of[server];
                        let what = format!(
                            "the release of {} was decided (no node failed it), yet {} still holds it once its cleanups ran",
                            String::from_utf8_lossy(&token),
                            String::from_utf8_lossy(&key)
                        );
                        self.leftover.push(Violation::Node { node, what });
                    }
                }
            }
            Ev::CheckHanded { client, token, held, failures, noscripts, calm_since } => {
                // (A client that vanished sends no cleanup.)
                if self.clients[client].engine.is_none()
                    || self.clients[client].link_failures != failures
                    || self.noscripts() != noscripts
                    || self.disturbed_at >= calm_since
                {
                    return;
                }
                self.stats.handoffs_checked += 1;
                for server in 0..self.nodes.len() {
                    // (A paused node has yet to run the cleanups waiting for it.)
                    if self.nodes[server].paused {
                        continue;
                    }
                    for key in self.nodes[server].reserved(self.now, &token) {
                        if held.contains(&key) {
                            continue;
                        }
                        let node = self.node_of[server];
                        let what = format!(
                            "{} is still reserved for {}, which does not hold it, once its acquisition settled",
                            show(&key),
                            String::from_utf8_lossy(&token)
                        );
                        self.leftover.push(Violation::Node { node, what });
                    }
                }
            }
            Ev::Vanish { client } => self.vanish(client),
            Ev::MoveKey { node } => self.move_key(node),
            Ev::EndMigration { node, gossip, pingpong } => self.end_migration(node, gossip, pingpong),
            Ev::Replicate { node } => {
                self.replicate(node);
                let Some(m) = &self.managed[node] else { return };
                let at = self.now + self.rng.range(m.plan.lag.0, m.plan.lag.1);
                self.push(at, Ev::Replicate { node });
            }
            Ev::Learn { server, epoch, to } => {
                trace!(self, "sentinel n{server} learns that failover {epoch} made port {to} the master");
                self.nodes[server].learn_switch(epoch, to);
                for (conn, bytes) in std::mem::take(&mut self.nodes[server].outbox) {
                    self.send(conn, 1, bytes);
                }
            }
            Ev::Gossip { server, slot } => {
                let node = self.node_of[server];
                let Some(cl) = &self.clusters[node] else { return };
                // What the cluster settled by now (a later migration may have moved it again).
                let owner = cl.owner(slot);
                trace!(self, "n{server} learns that master {owner} of node {node} serves slot {slot}");
                self.nodes[server].set_slot_owner(slot, owner);
                self.deliver_published(server);
            }
        }
    }

    fn fault(&mut self, f: Fault) {
        trace!(self, "FAULT {f:?}");
        self.disturbed_at = self.now;
        match f {
            Fault::PauseNode { node, dur } => {
                for s in self.servers_of(node) {
                    if self.nodes[s].up && !self.nodes[s].paused {
                        self.nodes[s].paused = true;
                        self.push(self.now + dur, Ev::ResumeNode { server: s });
                    }
                }
            }
            Fault::Crash { node, keep, down } => {
                for s in self.servers_of(node) {
                    if self.nodes[s].up {
                        self.nodes[s].crash(self.now, keep);
                        self.break_node(s);
                        self.push(self.now + down, Ev::RestartNode { server: s });
                    }
                }
            }
            Fault::Partition { node, dur } => {
                for s in self.servers_of(node) {
                    self.cut[s] = true;
                    self.break_node(s);
                    self.push(self.now + dur, Ev::Heal { server: s });
                }
            }
            Fault::ClockJump { node, by } => {
                for s in self.servers_of(node) {
                    self.nodes[s].clock.jump(self.now, by as i64);
                }
            }
            Fault::ScriptFlush { node } => {
                for s in self.servers_of(node) {
                    self.nodes[s].flush_scripts();
                }
            }
            Fault::Migrate { node, slot, window, moves, gossip, pingpong } => {
                let Some(cl) = &self.clusters[node] else { return };
                let (from, masters) = (cl.owner(slot), cl.servers.len() as u64);
                let to = (from + 1 + self.rng.below(masters - 1) as usize) % masters as usize;
                let Some(cl) = &mut self.clusters[node] else { return };
                if !cl.start(&mut self.nodes, slot, to) {
                    trace!(self, "node {node}: a migration is under way; slot {slot} stays");
                    return;
                }
                trace!(self, "node {node} migrates slot {slot} from master {from} to {to}");
                for _ in 0..moves {
                    let at = self.now + self.rng.range(0, window);
                    self.push(at, Ev::MoveKey { node });
                }
                self.push(self.now + window, Ev::EndMigration { node, gossip, pingpong });
            }
            Fault::Stale { node, slot, dur } => {
                let Some(cl) = &self.clusters[node] else { return };
                let (owner, masters) = (cl.owner(slot), cl.servers.len() as u64);
                let to = (owner + 1 + self.rng.below(masters - 1) as usize) % masters as usize;
                let stale = Stale { slot, to, until: self.now + dur };
                trace!(self, "node {node}: master {owner} redirects slot {slot} to master {to} (stale)");
                if let Some(cl) = &self.clusters[node] {
                    cl.stale(&mut self.nodes, owner, stale);
                }
            }
            Fault::Failover { node, down } => self.failover(node, down),
            Fault::PauseClient { client, dur } => {
                let c = &mut self.clients[client];
                if !c.paused && !matches!(c.work, Work::Gone) {
                    c.paused = true;
                    self.push(self.now + dur, Ev::ResumeClient { client });
                }
            }
        }
    }

    // ----- the network ---------------------------------------------------------------------

    /// The `NOSCRIPT` and `TRYAGAIN` answers of every node so far: a cleanup refused so is
    /// not sent again (its grant is left to its TTL); and the failovers so far (a release the
    /// old primary ran may be missing on the new one: releases do not wait for replicas).
    fn noscripts(&self) -> u64 {
        let tryagain = |n: &Node| n.shard.as_ref().map_or(0, |s| s.stats.tryagain);
        let failovers: u64 = self.managed.iter().flatten().map(|m| m.failovers).sum();
        self.nodes.iter().map(|n| n.stats.noscript + tryagain(n)).sum::<u64>() + failovers
    }

    fn delay(&mut self) -> Time {
        if self.sc.slow_per_mille > 0 && self.rng.chance(self.sc.slow_per_mille) {
            self.rng.range(self.sc.delay.1, self.sc.slow)
        } else {
            self.rng.range(self.sc.delay.0, self.sc.delay.1)
        }
    }

    /// Put bytes on a connection (`dir` 0: to the node, 1: to the client), split at random.
    fn send(&mut self, conn: usize, dir: usize, bytes: Vec<u8>) {
        if !self.conns[conn].alive || bytes.is_empty() {
            return;
        }
        let mut cuts = vec![0, bytes.len()];
        if bytes.len() > 1 && self.rng.chance(300) {
            for _ in 0..1 + self.rng.below(2) {
                cuts.push(self.rng.range(1, bytes.len() as u64 - 1) as usize);
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        for w in cuts.windows(2) {
            if !self.calm && self.sc.drop_per_mille > 0 && self.rng.chance(self.sc.drop_per_mille) {
                trace!(self, "message on #{conn} lost: the connection breaks");
                self.break_conn(conn);
                return;
            }
            let piece = bytes[w[0]..w[1]].to_vec();
            let at = (self.now + self.delay()).max(self.conns[conn].last[dir]);
            self.conns[conn].last[dir] = at;
            let ev = if dir == 0 { Ev::ToNode { conn, bytes: piece } } else { Ev::ToClient { conn, bytes: piece } };
            self.push(at, ev);
        }
    }

    fn reply(&mut self, conn: usize, bytes: Vec<u8>) {
        self.send(conn, 1, bytes);
    }

    /// Send the release messages node `n` published to its subscribers: like any other bytes
    /// (delayed, split, a lost piece breaks the connection), and some are dropped outright.
    fn deliver_published(&mut self, n: usize) {
        for (conn, bytes) in std::mem::take(&mut self.nodes[n].outbox) {
            if self.sc.publish_loss_per_mille > 0 && self.rng.chance(self.sc.publish_loss_per_mille) {
                trace!(self, "n{n} -> #{conn}: release message dropped");
                self.stats.publish_dropped += 1;
                continue;
            }
            self.stats.published += 1;
            if bytes.starts_with(b">3\r\n$8\r\nsmessage") {
                self.stats.shard_messages += 1;
            } else if bytes.starts_with(b">3\r\n$12\r\nsunsubscribe") {
                self.stats.shard_unsubscribed += 1;
            }
            self.send(conn, 1, bytes);
        }
    }

    fn break_conn(&mut self, conn: usize) {
        if !self.conns[conn].alive {
            return;
        }
        self.conns[conn].alive = false;
        self.stats.broken_links += 1;
        let Conn { client, node, .. } = self.conns[conn];
        self.nodes[node].close(conn);
        if !matches!(self.clients[client].work, Work::Gone) {
            let notice = self.rng.range(100 * US, 2 * MS);
            self.push(self.now + notice, Ev::Disconnected { conn });
        }
    }

    /// Break every connection to server `node`.
    fn break_node(&mut self, node: usize) {
        for conn in 0..self.conns.len() {
            if self.conns[conn].node == node {
                self.break_conn(conn);
            }
        }
    }

    fn reconnect_later(&mut self, c: usize, n: usize) {
        let at = self.now + self.rng.range(200 * US, 3 * MS);
        self.push(at, Ev::Connect { client: c, link: n });
    }

    // ----- cluster nodes -------------------------------------------------------------------

    /// The servers of Redlock node `node` that its faults hit: itself, its cluster's masters,
    /// or its primary now.
    fn servers_of(&self, node: usize) -> Vec<usize> {
        match (&self.clusters[node], &self.managed[node]) {
            (Some(cl), _) => cl.servers.clone(),
            (_, Some(m)) => vec![m.primary_server()],
            _ => vec![node],
        }
    }

    /// The server client `c`'s link `link` connects to: a node's own, or the master of a
    /// cluster node at the address the engine gives (`None`: nothing listens there).
    fn server_for(&self, c: usize, link: usize) -> Option<usize> {
        let endpoint = self.clients[c].engine.as_ref()?.link_endpoint(NodeId(link as u16));
        if let Some((owner, host, port)) = endpoint {
            if let Some(m) = self.managed.get(owner.index()).and_then(Option::as_ref) {
                return m.server_at(owner.index(), port).filter(|_| host == HOST);
            }
        }
        if link < self.sc.nodes {
            return Some(link);
        }
        let (owner, host, port) = endpoint?;
        let node = owner.index();
        let cl = self.clusters.get(node)?.as_ref().filter(|_| host == HOST)?;
        cl.master_at(node, port).map(|m| cl.servers[m])
    }

    /// Make room for client `c`'s link `link` (links to masters come after the nodes').
    fn grow(&mut self, c: usize, link: usize) {
        let cl = &mut self.clients[c];
        while cl.conn.len() <= link {
            cl.conn.push(None);
            cl.tx.push(Vec::new());
            cl.sent.push(VecDeque::new());
            cl.rx.push(Vec::new());
        }
    }

    /// The release messages server `s` published for the rest of its cluster: to the other
    /// masters' subscribers (a paused master sends nothing: the message is lost).
    fn relay_bus(&mut self, s: usize) {
        let bus = std::mem::take(&mut self.nodes[s].bus);
        if bus.is_empty() {
            return;
        }
        let others: Vec<usize> = self.servers_of(self.node_of[s]).into_iter().filter(|&o| o != s).collect();
        for (channel, push) in &bus {
            for &o in &others {
                if self.nodes[o].up && !self.nodes[o].paused {
                    self.nodes[o].relay(channel, push);
                } else {
                    self.stats.publish_dropped += 1;
                }
            }
        }
        for o in others {
            self.deliver_published(o);
        }
    }

    /// Do what a client driver does with client `c`'s connections: drop those the engine
    /// failed, start those it asks for.
    fn drive_links(&mut self, c: usize) {
        let now = self.instant(self.now);
        while let Some(link) = self.clients[c].engine.as_mut().and_then(Engine::poll_close) {
            let link = link.index();
            self.grow(c, link);
            trace!(self, "c{c} closes link {link}");
            if let Some(conn) = self.clients[c].conn[link].take() {
                self.break_conn(conn);
            }
        }
        while let Some(link) = self.clients[c].engine.as_mut().and_then(|e| e.poll_connect(now)) {
            let link = link.index();
            self.grow(c, link);
            if let Some(conn) = self.clients[c].conn[link].take() {
                self.break_conn(conn);
            }
            let at = self.now + self.rng.range(0, 200 * US);
            self.push(at, Ev::Connect { client: c, link });
        }
    }

    /// A key of the slot node `node` migrates goes over, when both masters can (else a little
    /// later, while the migration lasts).
    fn move_key(&mut self, node: usize) {
        let Some(cl) = &mut self.clusters[node] else { return };
        let Some((slot, from, to)) = cl.migration else { return };
        let (src, dst) = (cl.servers[from], cl.servers[to]);
        if !self.able(src) || !self.able(dst) {
            self.push(self.now + 300 * US, Ev::MoveKey { node });
            return;
        }
        let lossy = self.sc.lossy_migration;
        let Some(cl) = &mut self.clusters[node] else { return };
        let n = cl.move_keys(&mut self.nodes, self.now, Some(&mut self.rng), lossy);
        trace!(self, "node {node}: {n} key(s) of slot {slot} moved from master {from} to {to}");
    }

    /// The migration of node `node` ends, when both masters can (else a little later): the
    /// rest of the keys move, the slot is the target's, the other masters learn it within
    /// `gossip`, and with `pingpong` the new owner points back at the old one for that long.
    fn end_migration(&mut self, node: usize, gossip: Time, pingpong: Option<Time>) {
        let Some(cl) = &self.clusters[node] else { return };
        let Some((_, from, to)) = cl.migration else { return };
        let (src, dst) = (cl.servers[from], cl.servers[to]);
        if !self.able(src) || !self.able(dst) {
            self.push(self.now + 300 * US, Ev::EndMigration { node, gossip, pingpong });
            return;
        }
        let lossy = self.sc.lossy_migration;
        let Some(cl) = &mut self.clusters[node] else { return };
        let Some((slot, from, to)) = cl.finish(&mut self.nodes, self.now, lossy) else { return };
        let others: Vec<usize> =
            cl.servers.iter().enumerate().filter(|&(m, _)| m != from && m != to).map(|(_, &s)| s).collect();
        self.deliver_published(src);
        trace!(self, "node {node}: slot {slot} is master {to}'s now (was {from}'s)");
        for server in others {
            let at = self.now + self.rng.range(0, gossip);
            self.push(at, Ev::Gossip { server, slot });
        }
        if let Some(dur) = pingpong {
            trace!(self, "node {node}: master {to} points slot {slot} back at master {from} (stale)");
            if let Some(cl) = &self.clusters[node] {
                cl.stale(&mut self.nodes, to, Stale { slot, to: from, until: self.now + dur });
            }
        }
    }

    // ----- Sentinel-managed nodes ----------------------------------------------------------

    /// The replicas of Sentinel-managed node `node` that its primary reaches now (up, running,
    /// not cut off), as indexes of its data servers; none while the primary cannot send. A sync
    /// (or a `WAIT`) gives each its keys at once.
    fn reachable(&self, node: usize) -> Vec<usize> {
        let Some(m) = &self.managed[node] else { return Vec::new() };
        let reaches = |s: usize| self.able(s) && !self.cut[s];
        if !self.able(m.primary_server()) {
            return Vec::new();
        }
        (0..m.data.len()).filter(|&j| j != m.primary && reaches(m.data[j])).collect()
    }

    /// Of those, the replicas that synced since they joined: the ones a failover may promote.
    fn online(&self, node: usize) -> Vec<usize> {
        let Some(m) = &self.managed[node] else { return Vec::new() };
        self.reachable(node).into_iter().filter(|&j| m.copies[j].is_some()).collect()
    }

    /// Before server `s` reads input: if it is a Sentinel-managed node's primary, tell it
    /// how many replicas it has online (for `ROLE` and `WAIT`).
    fn count_replicas(&mut self, s: usize) {
        let node = self.node_of[s];
        if self.managed[node].as_ref().is_some_and(|m| m.primary_server() == s) {
            self.nodes[s].in_sync = Some(self.reachable(node).len());
        }
    }

    /// After server `s` read input: a `WAIT` counted the replicas online, which have every
    /// write so far.
    fn sync_if_waited(&mut self, s: usize) {
        if std::mem::take(&mut self.nodes[s].synced) {
            self.replicate(self.node_of[s]);
        }
    }

    /// The replicas of node `node` that its primary reaches copy its keys now.
    fn replicate(&mut self, node: usize) {
        let online = self.reachable(node);
        let Some(m) = &mut self.managed[node] else { return };
        if online.is_empty() {
            return;
        }
        let keys = self.nodes[m.data[m.primary]].keyspace(self.now);
        for j in online {
            m.copies[j] = Some(keys.clone());
        }
    }

    /// Node `node`'s primary dies: a replica online is promoted with what it has, the old
    /// primary is cut off for `down` and comes back as a replica of the new one, and each
    /// sentinel learns of it within the plan's delay.
    fn failover(&mut self, node: usize, down: Time) {
        let online = self.online(node);
        let Some(m) = &self.managed[node] else { return };
        if online.is_empty() {
            trace!(self, "node {node}: no replica to promote; no failover");
            return;
        }
        let to = online[self.rng.below(online.len() as u64) as usize];
        let (from, learn) = (m.primary, m.plan.learn);
        let (old, new) = (m.data[from], m.data[to]);
        let port = sentinel::data_port(node, to);
        trace!(self, "node {node} fails over from n{old} to n{new} (port {port})");
        let Some(m) = &mut self.managed[node] else { return };
        let keys = m.copies[to].take().unwrap_or_default();
        // The old primary has nothing of the new one's until it syncs.
        m.copies[from] = None;
        m.primary = to;
        m.failovers += 1;
        let (sentinels, epoch) = (m.sentinels.clone(), m.failovers);
        let replicas: Vec<usize> = m.data.iter().copied().filter(|&s| s != new).collect();
        self.nodes[new].promote(self.now, keys);
        self.nodes[new].in_sync = Some(0);
        self.nodes[old].demote(self.now, port);
        self.nodes[old].in_sync = None;
        for s in replicas {
            self.nodes[s].replica_of = Some(port);
        }
        self.cut[old] = true;
        self.break_node(old);
        self.push(self.now + down, Ev::Heal { server: old });
        for server in sentinels {
            let at = self.now + self.rng.range(0, learn);
            self.push(at, Ev::Learn { server, epoch, to: port });
        }
    }

    /// Whether server `s` can take part in a migration (it is up and running).
    fn able(&self, s: usize) -> bool {
        self.nodes[s].up && !self.nodes[s].paused
    }

    /// Replies to client `c` on link `link` (runs with clusters): match each to the command it
    /// answers, and note the requests that were redirected, for [`sent`](Self::sent) to know
    /// them when the engine sends them again.
    fn read_replies(&mut self, c: usize, link: usize, bytes: &[u8]) {
        let node = self.node_of_link(c, link);
        let cl = &mut self.clients[c];
        cl.rx[link].extend_from_slice(bytes);
        let mut pos = 0;
        while let Some((kind, first, used)) = reply_frame(&cl.rx[link][pos..]) {
            pos += used;
            if kind == b'>' && first.eq_ignore_ascii_case(b"message") {
                continue;
            }
            // What the engine held until it knew the node's kind goes out after HELLO's answer,
            // or after INFO's when HELLO was refused.
            let refused = kind == b'-' && first.windows(7).any(|w| w == b"'HELLO'");
            if kind == b'%' || refused || (kind == b'$' && first.starts_with(b"# Cluster")) {
                cl.hello = Some(link);
            }
            let Some(front) = cl.sent[link].pop_front() else { continue };
            let redirect = kind == b'-' && (first.starts_with(b"MOVED ") || first.starts_with(b"ASK "));
            if let (true, Some((req, chain, round))) = (redirect, front) {
                cl.redirected.push((node, req, chain + 1, round));
            }
        }
        cl.rx[link].drain(..pos);
    }

    /// Commands client `c` wrote on link `link` (runs with clusters): each request is a new
    /// one, or one the engine sends again after a redirect, whose chain of redirects must stay
    /// within [`MAX_CHAIN`].
    fn sent(&mut self, c: usize, link: usize, bytes: &[u8]) {
        let node = self.node_of_link(c, link);
        self.clients[c].tx[link].extend_from_slice(bytes);
        let mut pos = 0;
        let mut commands = Vec::new();
        while let Some((args, used)) = command(&self.clients[c].tx[link][pos..]) {
            pos += used;
            commands.push(request(&args));
        }
        self.clients[c].tx[link].drain(..pos);
        let conn = self.clients[c].conn[link].expect("written on a connection");
        for req in commands {
            // (What `HELLO` held back was encoded earlier, in a round unknown here.)
            let held = self.clients[c].hello == Some(link);
            let tag = req.as_ref().filter(|_| !held).and_then(|r| self.round_of(c, r));
            if self.tags.len() <= conn {
                self.tags.resize(conn + 1, Vec::new());
            }
            self.tags[conn].push(tag);
            let entry = req.map(|req| {
                let cl = &mut self.clients[c];
                let again = cl.redirected.iter().position(|(n, r, _, round)| *n == node && *r == req && *round == tag);
                let chain = again.map_or(0, |i| cl.redirected.swap_remove(i).2);
                (req, chain, tag)
            });
            self.stats.followed += entry.as_ref().map_or(0, |e| u64::from(e.1 > 0));
            if let Some((req, chain, _)) = &entry {
                self.stats.max_chain = self.stats.max_chain.max(*chain);
                if *chain > MAX_CHAIN {
                    let what = String::from_utf8_lossy(&req.1.concat()).into_owned();
                    self.problem(
                        c,
                        format!("a request over {what:?} sent to node {node} after {chain} redirects in a row"),
                    );
                }
            }
            self.clients[c].sent[link].push_back(entry);
        }
    }

    /// When the current round of the lock whose token request `req` carries started (a
    /// grant's request carries it: `SET`'s value, a script's first argument).
    fn round_of(&self, c: usize, req: &Req) -> Option<Time> {
        // The token is the first argument, but for a re-entrant lock's (its mode and owner
        // come first).
        // (A sole reader's `SET` value is `:readers:token`.)
        let token = |a: &Vec<u8>| a.strip_prefix(super::node::SOLE_READER).map_or(a.clone(), <[u8]>::to_vec);
        let lock = req.2.iter().take(3).find_map(|a| self.clients[c].locks.get(&token(a))).copied()?;
        let (start, _) = self.clients[c].engine.as_ref()?.round(lock)?;
        Some(self.time(start))
    }

    /// The Redlock node client `c`'s link `link` belongs to.
    fn node_of_link(&self, c: usize, link: usize) -> usize {
        match self.clients[c].engine.as_ref().and_then(|e| e.link_endpoint(NodeId(link as u16))) {
            Some((owner, _, _)) => owner.index(),
            None => link,
        }
    }

    // ----- driving an engine ---------------------------------------------------------------

    /// Feed one input to client `c`'s engine, then do what a driver does: deliver events,
    /// flush transmits, re-arm the timer.
    fn step<R>(&mut self, c: usize, f: impl FnOnce(&mut Engine, Instant) -> R) -> Option<R> {
        let r = self.call(c, f);
        self.settle(c);
        // The engine's own rules hold after every input (reported once per client).
        let broken = self.clients[c].engine.as_ref().map(Engine::audit).unwrap_or_default();
        if let (Some(first), false) = (broken.first(), self.clients[c].audit_failed) {
            self.clients[c].audit_failed = true;
            let what = format!("engine audit: {first}");
            self.problem(c, what);
        }
        r
    }

    fn call<R>(&mut self, c: usize, f: impl FnOnce(&mut Engine, Instant) -> R) -> Option<R> {
        self.expire_hold(c);
        let now = self.instant(self.now);
        self.clients[c].engine.as_mut().map(|e| f(e, now))
    }

    fn settle(&mut self, c: usize) {
        while let Some(ev) = self.clients[c].engine.as_mut().and_then(Engine::poll_event) {
            trace!(self, "c{c} event {}", self.describe(&ev));
            self.on_event(c, ev);
        }
        self.refresh_hold(c);
        if self.driven {
            self.drive_links(c);
        }
        self.flush(c);
        self.rearm(c);
        if let Some(e) = self.clients[c].engine.as_ref() {
            let most = (0..e.link_count()).map(|n| e.in_flight(NodeId(n as u16))).max().unwrap_or(0);
            self.stats.max_in_flight = self.stats.max_in_flight.max(most);
        }
    }

    fn flush(&mut self, c: usize) {
        let links = self.clients[c].engine.as_ref().map_or(0, Engine::link_count);
        for n in 0..links {
            loop {
                let Some(e) = self.clients[c].engine.as_mut() else { return };
                let Some(bytes) = e.poll_transmit(NodeId(n as u16)) else { break };
                // Sometimes the "socket" takes only part of it.
                let take = if bytes.len() > 1 && self.rng.chance(100) {
                    self.rng.range(1, bytes.len() as u64 - 1) as usize
                } else {
                    bytes.len()
                };
                let bytes = bytes[..take].to_vec();
                e.advance_transmit(NodeId(n as u16), take);
                match self.clients[c].conn.get(n).copied().flatten() {
                    Some(conn) => {
                        if self.driven {
                            self.sent(c, n, &bytes);
                        }
                        self.send(conn, 0, bytes);
                    }
                    None => self.problem(c, format!("the engine wrote to node {n}, which is not connected")),
                }
            }
        }
    }

    fn rearm(&mut self, c: usize) {
        let Some(e) = self.clients[c].engine.as_mut() else { return };
        let next = e.poll_timeout();
        let next = next.map(|i| self.time(i).max(self.now));
        if next != self.clients[c].timer {
            self.clients[c].timer = next;
            if let Some(at) = next {
                self.push(at, Ev::Timer { client: c, at });
            }
        }
    }

    // ----- holds ---------------------------------------------------------------------------

    fn close_hold(&mut self, h: usize, at: Time) {
        if self.holds[h].end == Time::MAX {
            let end = at.min(self.claims[h]).max(self.holds[h].start);
            trace!(self, "hold {h} ends at {}", ms(end));
            self.holds[h].end = end;
        }
    }

    /// The holder stops relying on the lock once the engine's deadline has passed.
    fn expire_hold(&mut self, c: usize) {
        if let Work::Holding { hold, .. } = self.clients[c].work {
            if self.holds[hold].end == Time::MAX && self.now >= self.claims[hold] {
                let claim = self.claims[hold];
                self.close_hold(hold, claim);
            }
        }
    }

    /// Take the engine's current word on the lock: its deadline, and whether it is lost.
    fn refresh_hold(&mut self, c: usize) {
        let Work::Holding { lock, hold, .. } = self.clients[c].work else { return };
        if self.holds[hold].end != Time::MAX {
            return;
        }
        let info = self.clients[c].engine.as_ref().and_then(|e| e.lock_info(lock));
        let Some(info) = info else {
            self.problem(c, format!("lock_info({lock:?}) is None while the lock is held"));
            return;
        };
        match info.valid_until {
            Some(v) => self.claims[hold] = self.time(v),
            None => self.problem(c, format!("a held lock {lock:?} has no deadline")),
        }
        if info.lost || self.now >= self.claims[hold] {
            self.close_hold(hold, self.now);
        }
    }

    // ----- the workload --------------------------------------------------------------------

    fn schedule_wake(&mut self, c: usize, at: Time) {
        // Once the workload stops, whatever a client would do later it does now.
        let at = if self.stopping { at.min(self.now) } else { at };
        self.clients[c].wake_seq += 1;
        let seq = self.clients[c].wake_seq;
        self.push(at, Ev::Wake { client: c, seq });
    }

    fn think(&mut self) -> Time {
        self.now + self.rng.range(self.sc.think.0, self.sc.think.1)
    }

    fn on_wake(&mut self, c: usize) {
        if self.stopping {
            if let Work::Holding { downgrade_at, extend, .. } = &mut self.clients[c].work {
                (*downgrade_at, *extend) = (None, None);
            }
        }
        match self.clients[c].work {
            Work::Idle if self.stopping => {}
            Work::Idle => self.start_acquire(c),
            Work::Acquiring { lock, .. } => {
                trace!(self, "c{c} cancels {lock:?}");
                if let Some(Err(e)) = self.step(c, |e, now| e.cancel(now, lock)) {
                    self.problem(c, format!("cancel refused while acquiring: {e}"));
                }
            }
            Work::Holding { lock, downgrade_at: Some(at), release_at, extend, .. } if self.now >= at => {
                let extend_at = extend.map(|e| e.0);
                if let Work::Holding { downgrade_at, .. } = &mut self.clients[c].work {
                    *downgrade_at = None;
                }
                trace!(self, "c{c} downgrades {lock:?}");
                self.stats.downgrades_asked += 1;
                // The writer's exclusive hold ends when it asks to downgrade: each node lets
                // readers in as soon as it has applied the downgrade, which may be before the
                // quorum's confirmation reaches the client. Its hold as a reader begins at the
                // confirmation.
                if let Work::Holding { hold, .. } = self.clients[c].work {
                    self.expire_hold(c);
                    self.close_hold(hold, self.now);
                }
                match self.step(c, |e, now| e.downgrade(now, lock)) {
                    Some(Ok(())) => {
                        if let Work::Holding { downgrading, .. } = &mut self.clients[c].work {
                            *downgrading = true;
                        }
                    }
                    Some(Err(Misuse::Busy(_))) | None => {}
                    Some(Err(e)) => self.problem(c, format!("downgrade refused: {e}")),
                }
                self.schedule_wake(c, extend_at.map_or(release_at, |a| a.min(release_at)));
            }
            Work::Holding { lock, hold, extend: Some((at, ttl)), release_at, .. } if self.now >= at => {
                if let Work::Holding { extend, .. } = &mut self.clients[c].work {
                    *extend = None;
                }
                trace!(self, "c{c} extends {lock:?} by {ttl:?}");
                match self.step(c, |e, now| e.extend(now, lock, Some(ttl))) {
                    // (Busy: a downgrade is in flight.)
                    Some(Ok(())) | Some(Err(Misuse::CapReached(_) | Misuse::Busy(_))) | None => {}
                    Some(Err(e)) => self.problem(c, format!("extend of hold {hold} refused: {e}")),
                }
                self.schedule_wake(c, release_at);
            }
            Work::Holding { lock, hold, .. } => {
                self.expire_hold(c);
                self.close_hold(hold, self.now);
                trace!(self, "c{c} releases {lock:?}");
                match self.step(c, |e, now| e.release(now, lock)) {
                    Some(Ok(())) => {
                        // The Released event may already have come (all nodes down).
                        if matches!(self.clients[c].work, Work::Holding { .. }) {
                            self.clients[c].work = Work::Releasing { lock };
                        }
                    }
                    Some(Err(e)) => self.problem(c, format!("release refused: {e}")),
                    None => {}
                }
            }
            Work::Releasing { .. } | Work::Gone => {}
        }
    }

    /// A new acquisition: of one resource or two (a mutex), or in a semaphore run some permits
    /// of one semaphore. Once a holder vanished, every client asks for what it held: the same
    /// resources, or all the permits of its semaphore (a grant then shows that the vanished
    /// holder's permits came back). In a scripted run: what the client's role asks for.
    fn start_acquire(&mut self, c: usize) {
        if self.sc.script.is_some() {
            return self.start_scripted(c);
        }
        if self.sc.election {
            return self.start_campaign(c);
        }
        let resources: Vec<usize> = match &self.vanished {
            Some(v) => v.resources.clone(),
            None if self.sc.multi && self.rng.chance(300) => vec![0, 1],
            None => vec![self.rng.below(self.sc.resources as u64) as usize],
        };
        let limit = self.sc.limits.get(resources[0]).copied();
        let permits = limit.map(|limit| {
            if self.vanished.is_some() {
                limit
            } else if limit > 1 && self.rng.chance(self.sc.multi_permit_per_mille) {
                self.rng.range(2, u64::from(limit)) as u32
            } else {
                1
            }
        });
        self.clients[c].issued += 1;
        let token = format!("c{c}-{}", self.clients[c].issued).into_bytes();
        let ttl = Duration::from_millis(self.rng.range(self.sc.ttl_ms.0, self.sc.ttl_ms.1));
        let keys: Vec<&[u8]> = resources.iter().map(|&r| NAMES[r]).collect();
        let mut req = LockOptions::new("", ttl);
        req.resources = keys.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
        if let (Some(limit), Some(permits)) = (limit, permits) {
            req = req.semaphore(limit).permits(permits);
        }
        // Once a holder vanished, write locks show that its lock came back.
        let shared = self.vanished.is_none() && self.sc.read_per_mille > 0 && self.rng.chance(self.sc.read_per_mille);
        req = req.shared(shared);
        // Not from the calm phase on: a pair of one owner that keeps re-entering keeps the lock,
        // and the vanishing holder (client 0) must get it.
        if c >= 2 && !self.calm && self.sc.reentry_per_mille > 0 && self.rng.chance(self.sc.reentry_per_mille) {
            // Clients 2 and 3 share an owner; the others own theirs alone (a pair that keeps
            // re-entering keeps the lock: more pairs would starve the plain clients).
            let owner = format!("o{}", if c < 4 { 1 } else { c });
            self.owners.insert(token.clone(), owner.clone().into_bytes());
            req = req.reentrant(owner);
        }
        req.fencing = self.sc.fencing && self.rng.chance(700);
        req.auto_extend = self.sc.auto_extend && self.rng.chance(500);
        if req.auto_extend && self.rng.chance(300) {
            req.max_hold = Some(ttl * 2);
        }
        match self.rng.below(4) {
            0 => req.attempts = Some(1),
            1 => req.wait = Some(ttl),
            _ => {}
        }
        let what = match (limit, permits) {
            (Some(limit), Some(permits)) => format!("{permits} of {limit} permits of "),
            _ => String::new(),
        };
        trace!(
            self,
            "c{c} acquires {what}{}{:?} token {} ttl {ttl:?} fencing {}",
            if shared { "to read " } else { "" },
            show(&keys.concat()),
            show(&token),
            req.fencing
        );
        self.acquire(c, &req, resources, token, permits);
    }

    /// A campaign of client `c` in the election `e0`, with its value `c{c}`: waiting without a
    /// bound, or (one in three) for four TTLs.
    fn start_campaign(&mut self, c: usize) {
        self.clients[c].issued += 1;
        let ttl = Duration::from_millis(self.rng.range(self.sc.ttl_ms.0, self.sc.ttl_ms.1));
        let mut options = ElectionOptions::new("e0", format!("c{c}")).ttl(ttl);
        if self.rng.chance(333) {
            options = options.wait(ttl * 4);
        }
        let Ok(req) = options.lock_options() else { return self.problem(c, "election options refused".into()) };
        assert_eq!(req.resources, [String::from_utf8_lossy(ELECTION_KEY)]);
        let token = options.token(&self.clients[c].issued.to_be_bytes());
        trace!(self, "c{c} campaigns: token {} ttl {ttl:?}", show(&token));
        self.acquire(c, &req, vec![ELECTION], token, None);
    }

    /// What an observer reads of the election now (from every node that is up, reachable and
    /// not paused: the lock key and its fence counter), checked against the holds: a leader it
    /// names is a campaign of the run, and the epoch it shows is never above that leader's own
    /// once granted. The changes an [`Observer`] reports are counted.
    fn observe(&mut self) {
        let (now, db) = (self.now, self.sc.db);
        let slot = hash_slot(ELECTION_KEY);
        let views: Vec<Option<(Option<Vec<u8>>, u64)>> = (0..self.sc.nodes)
            .map(|n| {
                // A Sentinel-managed node is read on its primary of the moment; a Redis Cluster
                // node on the master that owns the election's slot, and while the slot
                // migrates, on both ends (its keys may be on either).
                let servers: Vec<usize> = match (&self.clusters[n], &self.managed[n]) {
                    (Some(c), _) => match c.migration {
                        Some((s, from, to)) if s == slot => vec![c.servers[from], c.servers[to]],
                        _ => vec![c.servers[c.owner(slot)]],
                    },
                    (None, Some(m)) => vec![m.primary_server()],
                    (None, None) => vec![n],
                };
                let mut view: Option<(Option<Vec<u8>>, u64)> = None;
                for s in servers {
                    let node = &mut self.nodes[s];
                    if !node.up || node.paused || self.cut[s] {
                        return None;
                    }
                    let (holder, counter) = node.election_view(now, db, ELECTION_KEY);
                    let v = view.get_or_insert((None, 0));
                    v.0 = v.0.take().or(holder);
                    v.1 = v.1.max(counter);
                }
                view
            })
            .collect();
        let reads: Vec<Option<NodeElection<'_>>> = views
            .iter()
            .map(|v| v.as_ref().map(|(h, counter)| NodeElection { holder: h.as_deref(), counter: *counter }))
            .collect();
        let read = leader_of(&reads, self.sc.nodes / 2 + 1);
        if let Some(l) = &read {
            self.stats.observed += 1;
            let known = self.clients.iter().any(|cl| cl.locks.contains_key(l.token.as_bytes()));
            if !known {
                self.problems.push((usize::MAX, format!("observer names {}, no campaign's token", l.token)));
            }
            let granted = self.holds.iter().find(|h| h.token == l.token.as_bytes() && h.start <= now && now < h.end);
            if let Some(h) = granted.filter(|h| h.fence.is_some_and(|f| l.epoch > f)) {
                let what = format!("observer shows epoch {} for {h}", l.epoch);
                self.problems.push((h.client, what));
            }
        }
        if let Some(LeaderChange::Elected(_)) = self.observer.update(read) {
            self.stats.leaders_observed += 1;
        }
    }

    /// A new acquisition of client `c`'s role, unless it asks once and has asked.
    fn start_scripted(&mut self, c: usize) {
        let again = self.sc.role(c).is_some_and(|r| r.again);
        let Some((req, resources, permits)) = self.sc.scripted_request(c) else { return };
        if self.clients[c].issued > 0 && !again {
            return;
        }
        self.clients[c].issued += 1;
        // The token names the seed too: a semaphore's permit order follows the token, so that
        // every seed draws its own.
        let token = format!("s{}-c{c}-{}", self.sc.seed, self.clients[c].issued).into_bytes();
        trace!(self, "c{c} acquires {req:?} token {}", show(&token));
        self.acquire(c, &req, resources, token, permits);
    }

    /// Client `c` asks its engine for `req` with `token` (`resources` and `permits` as
    /// [`Work::Acquiring`] keeps them).
    fn acquire(&mut self, c: usize, req: &LockOptions, resources: Vec<usize>, token: Vec<u8>, permits: Option<u32>) {
        let (fencing, shared) = (req.fencing, req.shared);
        match self.call(c, |e, now| e.acquire(now, req, &token)) {
            Some(Ok(lock)) => {
                self.clients[c].locks.insert(token.clone(), lock);
                let counts = (self.clients[c].link_failures, self.noscripts());
                self.clients[c].failures_at.insert(token.clone(), counts);
                let acquisition = self.acquisitions.len();
                self.acquisitions.push(Acquisition { client: c, asked: self.now, outcome: None });
                self.clients[c].work =
                    Work::Acquiring { lock, acquisition, resources, token, fencing, permits, shared };
                if self.sc.cancels && self.rng.chance(100) {
                    let at = self.now + self.rng.range(0, 3 * MS);
                    self.schedule_wake(c, at);
                }
            }
            Some(Err(e)) => self.problem(c, format!("acquire refused: {e}")),
            None => {}
        }
        self.settle(c);
    }

    /// What an `Acquired` lock holds: the resources' keys, or a semaphore's permit keys (from
    /// `Engine::permits`), with the semaphore's name and limit.
    fn held_keys(
        &mut self,
        c: usize,
        lock: LockId,
        resources: &[usize],
        permits: Option<u32>,
    ) -> (Vec<Vec<u8>>, Option<Semaphore>) {
        let held = self.clients[c].engine.as_ref().and_then(|e| e.permits(lock)).map(<[u16]>::to_vec);
        let Some(want) = permits else {
            if held.is_some() {
                self.problem(c, format!("a mutex {lock:?} names semaphore permits {held:?}"));
            }
            return (resources.iter().map(|&r| NAMES[r].to_vec()).collect(), None);
        };
        let (name, limit) = (NAMES[resources[0]], self.sc.limits[resources[0]]);
        let held = held.unwrap_or_default();
        let ascending = held.windows(2).all(|w| w[0] < w[1]);
        if held.len() != want as usize || !ascending || held.iter().any(|&k| u32::from(k) >= limit) {
            self.problem(c, format!("{lock:?} asked for {want} of {limit} permits and holds permits {held:?}"));
        }
        let keys = held
            .iter()
            .map(|k| format!("redlease:sem:{{{}}}:{k}", String::from_utf8_lossy(name)).into_bytes())
            .collect();
        (keys, Some((name.to_vec(), limit)))
    }

    fn on_event(&mut self, c: usize, ev: Event) {
        match ev {
            Event::Acquired { lock, valid_until, fence, .. } => {
                let (acquisition, resources, token, fencing, permits, shared) = match &self.clients[c].work {
                    Work::Acquiring { lock: l, acquisition, resources, token, fencing, permits, shared }
                        if *l == lock =>
                    {
                        (*acquisition, resources.clone(), token.clone(), *fencing, *permits, *shared)
                    }
                    _ => return self.problem(c, format!("Acquired for {lock:?}, which it was not acquiring")),
                };
                let (keys, semaphore) = self.held_keys(c, lock, &resources, permits);
                if semaphore.is_some() {
                    self.stats.sem_holds += 1;
                    self.stats.permits += keys.len() as u64;
                    self.stats.multi_permit_holds += u64::from(keys.len() > 1);
                    // The permits nodes handed this waiter beyond those it holds are passed on
                    // (or released) once its acquisition settled: none stays reserved for it.
                    if let Some(&(failures, noscripts)) = self.clients[c].failures_at.get(&token) {
                        let at = self.now + 4 * self.sc.delay.1.max(self.sc.slow) + MS;
                        let (token, held, calm_since) = (token.clone(), keys.clone(), self.now);
                        self.push(at, Ev::CheckHanded { client: c, token, held, failures, noscripts, calm_since });
                    }
                }
                if fence.is_some() != fencing {
                    self.problem(c, format!("fence {fence:?} but fencing asked: {fencing}"));
                }
                let claim = self.time(valid_until);
                if claim <= self.now {
                    self.problem(c, format!("Acquired with a deadline {} not after now", ms(claim)));
                }
                let hold = self.holds.len();
                self.acquisitions[acquisition].outcome = Some(Ok(hold));
                if let Some(v) = &self.vanished {
                    if c != v.client && v.keys.iter().all(|k| keys.contains(k)) {
                        // Liveness shown: the lock came back. Stop the workload and finish
                        // once the engines have drained.
                        let stop = self.now + 2 * MS;
                        if stop + self.sc.wind_down() < self.end {
                            self.end = stop + self.sc.wind_down();
                            self.push(stop, Ev::Stop);
                        }
                    }
                }
                // A re-entrant hold stands on its owner's key: the checker knows it by its owner.
                let token = self.owners.get(&token).cloned().unwrap_or(token);
                self.stats.reentrant_holds += u64::from(self.sc.reentry_per_mille > 0 && token.starts_with(b"o"));
                self.holds.push(Hold {
                    client: c,
                    token,
                    resources: keys,
                    start: self.now,
                    end: Time::MAX,
                    fence,
                    semaphore,
                    shared,
                });
                if self.sc.read_per_mille > 0 {
                    self.stats.reads += u64::from(shared);
                    self.stats.writes += u64::from(!shared);
                }
                let is_shared = self.clients[c].engine.as_ref().is_some_and(|e| e.is_shared(lock));
                if is_shared != shared {
                    self.problem(c, format!("{lock:?} is_shared {is_shared}, asked shared {shared}"));
                }
                self.claims.push(claim);
                let round = self.clients[c].engine.as_ref().and_then(|e| e.round(lock)).map(|r| r.0);
                self.rounds.push(round.map_or(self.now, |r| self.time(r)));
                self.stats.acquired += 1;
                self.stats.fenced += u64::from(fence.is_some());
                let valid = claim.saturating_sub(self.now).max(1);
                if let Some(role) = self.sc.role(c) {
                    // A role holds for as long as it says, and does nothing else meanwhile.
                    let release_at = role.hold.map_or(Time::MAX, |h| self.now + h);
                    self.clients[c].work =
                        Work::Holding { lock, hold, extend: None, release_at, downgrade_at: None, downgrading: false };
                    self.schedule_wake(c, release_at);
                    return;
                }
                if c == 0 && self.vanish_armed {
                    // This holder will vanish while it holds the lock.
                    self.vanish_armed = false;
                    let at = self.now + self.rng.range(0, valid);
                    self.push(at, Ev::Vanish { client: c });
                    self.clients[c].work = Work::Holding {
                        lock,
                        hold,
                        extend: None,
                        release_at: Time::MAX,
                        downgrade_at: None,
                        downgrading: false,
                    };
                    return;
                }
                let work = if self.rng.chance(150) {
                    self.rng.range(valid, 2 * valid)
                } else {
                    self.rng.range(100 * US, (valid * 3 / 4).max(100 * US))
                };
                let release_at = self.now + work;
                let extend = (self.sc.extends && self.rng.chance(400)).then(|| {
                    let at = self.now + self.rng.range(0, work);
                    let ttl = self.rng.range((self.sc.ttl_ms.0 / 2).max(5), 2 * self.sc.ttl_ms.1);
                    (at, Duration::from_millis(ttl))
                });
                let downgrade_at = (!shared
                    && self.sc.downgrade_per_mille > 0
                    && self.rng.chance(self.sc.downgrade_per_mille))
                .then(|| {
                    if self.rng.chance(300) {
                        // At the end of the lock's validity: the downgrade races expiry
                        // (refused where the key is gone, applied where it is not yet,
                        // confirmed too late).
                        claim.saturating_sub(self.rng.range(0, 4 * self.sc.delay.1.max(US))).max(self.now)
                    } else {
                        self.now + self.rng.range(0, work / 2)
                    }
                });
                let release_at = downgrade_at.map_or(release_at, |at| release_at.max(at + self.sc.node_timeout));
                self.clients[c].work =
                    Work::Holding { lock, hold, extend, release_at, downgrade_at, downgrading: false };
                let first = [extend.map(|e| e.0), downgrade_at, Some(release_at)].into_iter().flatten().min();
                self.schedule_wake(c, first.unwrap_or(release_at));
            }
            Event::AcquireFailed { lock, error } => {
                // A wait bound that ran out is counted by its last attempt's outcome.
                let last = match &error {
                    AcquireError::WaitTimeout { last, .. } => last.as_ref(),
                    other => other,
                };
                match last {
                    AcquireError::Held { .. } => self.stats.held_by_others += 1,
                    AcquireError::Unreachable { .. } => self.stats.unreachable += 1,
                    AcquireError::TooSlow { .. } => self.stats.too_slow += 1,
                    AcquireError::Cancelled => self.stats.cancelled += 1,
                    _ => {}
                }
                match self.clients[c].work {
                    Work::Acquiring { lock: l, acquisition, .. } if l == lock => {
                        self.acquisitions[acquisition].outcome = Some(Err(error.clone()));
                        self.clients[c].work = Work::Idle;
                        let at = self.think();
                        self.schedule_wake(c, at);
                    }
                    _ => self.problem(c, format!("AcquireFailed for {lock:?}, which it was not acquiring")),
                }
            }
            Event::Extended { lock, valid_until } => {
                self.stats.extended += 1;
                let Work::Holding { lock: l, hold, downgrading, .. } = self.clients[c].work else {
                    return self.problem(c, format!("Extended for {lock:?}, which it does not hold"));
                };
                if l != lock {
                    return self.problem(c, format!("Extended for {lock:?}, which it does not hold"));
                }
                let shared = self.clients[c].engine.as_ref().is_some_and(|e| e.is_shared(lock));
                if downgrading && shared {
                    // The downgrade is confirmed: a reader's hold begins (the writer's ended
                    // when it asked).
                    self.stats.downgrades += 1;
                    let reader = Hold { start: self.now, end: Time::MAX, shared: true, ..self.holds[hold].clone() };
                    let next = self.holds.len();
                    self.holds.push(reader);
                    self.claims.push(self.time(valid_until));
                    // (A downgrade takes nothing new: its reader's grant is the writer's.)
                    self.rounds.push(self.rounds[hold]);
                    trace!(self, "c{c} downgraded: hold {hold} ends, reader hold {next} begins");
                    if let Work::Holding { hold, downgrading, .. } = &mut self.clients[c].work {
                        *hold = next;
                        *downgrading = false;
                    }
                }
            }
            // The world reads the engine's deadline through `lock_info` (refresh_hold).
            Event::Shortened { .. } => {}
            Event::LinkUp { .. } | Event::WakeOff { .. } => {}
            Event::ExtendFailed { error, .. } => {
                let downgrading = matches!(self.clients[c].work, Work::Holding { downgrading: true, .. });
                if let Work::Holding { downgrading, .. } = &mut self.clients[c].work {
                    *downgrading = false;
                }
                if downgrading && error != ExtendError::Cancelled {
                    self.stats.downgrades_failed += 1;
                    trace!(self, "c{c}'s downgrade failed: {error:?}");
                }
                if error != ExtendError::Cancelled {
                    self.stats.extend_failed += 1;
                }
            }
            Event::Lost { reason, .. } => {
                self.stats.lost += 1;
                let downgrading = matches!(self.clients[c].work, Work::Holding { downgrading: true, .. });
                if let Work::Holding { downgrading, .. } = &mut self.clients[c].work {
                    *downgrading = false;
                }
                if downgrading {
                    self.stats.downgrades_failed += 1;
                    trace!(self, "c{c} lost its lock while downgrading it ({reason:?})");
                }
            }
            Event::Released { lock, report } => {
                let token = self.clients[c].locks.iter().find(|(_, l)| **l == lock).map(|(t, _)| t.clone());
                let counts = token.as_ref().and_then(|t| self.clients[c].failures_at.get(t).copied());
                if let (0, Some(token), Some((failures, noscripts))) = (report.failed, token, counts) {
                    if report.pending == 0 {
                        // Every node answered: what is left once the cleanups sent meanwhile
                        // (a late grant trimmed, readers left) had a round trip or two.
                        let at = self.now + 4 * self.sc.delay.1.max(self.sc.slow) + MS;
                        let calm_since = Some(self.now);
                        let (client, token) = (c, token.clone());
                        self.push(at, Ev::CheckGone { client, token, failures, noscripts, calm_since });
                    }
                    // No node failed the release (whatever it answered, or is still to answer:
                    // the release is on its way after every request of the lock), and no link
                    // failed while the lock lived (a cleanup that missed a node leaves its
                    // grant to its TTL): once the cleanups still on their way (a late grant
                    // trimmed) have run, no node holds anything of the token (a permit granted
                    // outside the quorum's or after the release was decided, a reader a
                    // downgrade left, one in flight when the release came).
                    // (A release still on its way may not land — a Redis Cluster node's
                    // redirects run out — and then its key lives out its TTL, up to twice the
                    // longest after an extension; a re-entrant hold's key lives on with the
                    // owner's other holds: it is checked once every node answered.)
                    let calm_since = None;
                    let clusters = self.sc.clusters.iter().any(Option::is_some);
                    let late = if report.pending > 0 && clusters { 2 * self.sc.ttl_ms.1 * MS } else { 0 };
                    if report.pending == 0 || !self.owners.contains_key(&token) {
                        self.push(
                            self.now + self.sc.drain() + late,
                            Ev::CheckGone { client: c, token, failures, noscripts, calm_since },
                        );
                    }
                }
                match report.outcome {
                    ReleaseOutcome::Released => self.stats.released += 1,
                    ReleaseOutcome::NotHeld => self.stats.not_held += 1,
                    ReleaseOutcome::Unreachable => self.stats.release_unreachable += 1,
                    _ => {}
                }
                match self.clients[c].work {
                    Work::Releasing { lock: l } | Work::Holding { lock: l, .. } if l == lock => {
                        self.clients[c].work = Work::Idle;
                        let at = self.think();
                        self.schedule_wake(c, at);
                    }
                    _ => self.problem(c, format!("Released for {lock:?}, which it was not releasing")),
                }
            }
            Event::LinkFailed { error } => {
                self.clients[c].link_failures += 1;
                // The model never sends garbage: a link failure means the engine mismatched
                // something, unless the node went silent (stalled longer than the liveness
                // bound), which the engine must recycle.
                match error {
                    LinkError::Silent { .. } => self.stats.silent_links += 1,
                    // The world broke the connection itself (crash, partition, drop).
                    LinkError::Lost { .. } | LinkError::ConnectFailed { .. } => {}
                    // A Sentinel-managed node that failed over: the sentinels switched, the
                    // master named is a replica now (or refuses writes), they disagree for a
                    // while, or the new primary has no replica online yet.
                    LinkError::Sentinel { fault: NodeFault::Unreachable, .. } | LinkError::Replicas { .. }
                        if self.managed[error.node().index()].is_some() => {}
                    _ => self.problem(c, format!("link failed: {error}")),
                }
                // (A world driven by `poll_close` drops the link the engine names there: the
                // error names the node, and a cluster node has several links.)
                let n = error.node().index();
                if let (false, Some(conn)) = (self.driven, self.clients[c].conn[n]) {
                    self.break_conn(conn);
                }
            }
            other => self.problem(c, format!("unknown event {other:?}")),
        }
    }

    fn vanish(&mut self, c: usize) {
        let Work::Holding { hold, .. } = self.clients[c].work else {
            return;
        };
        self.expire_hold(c);
        self.close_hold(hold, self.now);
        let h = &self.holds[hold];
        let resources: Vec<usize> = (0..NAMES.len())
            .filter(|&r| match &h.semaphore {
                Some((name, _)) => name == NAMES[r],
                None => h.resources.iter().any(|x| x == NAMES[r]),
            })
            .collect();
        let keys = h.resources.clone();
        trace!(self, "c{c} VANISHES holding {resources:?}: {:?}", keys.iter().map(|k| show(k)).collect::<Vec<_>>());
        self.vanished = Some(Vanished { client: c, at: self.now, resources, keys });
        self.end = self.now + self.sc.liveness_bound() + MS + self.sc.wind_down();
        self.push(self.end - self.sc.wind_down(), Ev::Stop);
        self.clients[c].engine = None;
        self.clients[c].work = Work::Gone;
        for conn in 0..self.conns.len() {
            if self.conns[conn].client == c && self.conns[conn].alive {
                self.conns[conn].alive = false;
                let n = self.conns[conn].node;
                self.nodes[n].close(conn);
            }
        }
    }

    fn finish(mut self) -> Outcome {
        self.now = self.end;
        // The workload stopped a drain time ago: every engine left is back to idle (its locks
        // released, their replies read, no waiter, no subscription, no kept cleanup).
        if self.stopping {
            for (c, client) in self.clients.iter().enumerate() {
                let Some(engine) = &client.engine else { continue };
                let fp = engine.footprint();
                self.stats.idle_checked += 1;
                if !fp.is_idle() {
                    self.problems.push((c, format!("the engine is not idle after the workload stopped: {fp}")));
                }
            }
            // And the nodes hold nothing but their persistent keys (fence counters, limits, the
            // format record), save what the vanished holder left, which lives out its TTL.
            // And what a cleanup may have missed lives out its TTL, as `CheckGone` allows: a
            // token whose client saw a link fail (or a node answer `NOSCRIPT`, `TRYAGAIN`, or
            // fail over) since its acquisition began.
            let vanished = self.vanished.as_ref().map(|v| format!("c{}-", v.client));
            let noscripts = self.noscripts();
            let missed = |held: &[u8]| {
                let held = held.strip_suffix(b":").unwrap_or(held);
                let client = held.strip_prefix(b"c").and_then(|t| t.split(|&b| b == b'-').next());
                let client = client.and_then(|c| std::str::from_utf8(c).ok()?.parse::<usize>().ok());
                let cl = client.and_then(|c| self.clients.get(c));
                cl.and_then(|cl| cl.failures_at.get(held))
                    .is_some_and(|&(failures, ns)| cl.is_some_and(|cl| cl.link_failures != failures) || noscripts != ns)
            };
            for server in 0..self.nodes.len() {
                let node = self.node_of[server];
                for (key, held) in self.nodes[server].leftovers(self.end) {
                    if vanished.as_ref().is_some_and(|v| held.starts_with(v.as_bytes())) || missed(&held) {
                        continue;
                    }
                    self.stats.leftovers += 1;
                    let what = format!(
                        "{} holds {} after the workload stopped and every lock was released",
                        String::from_utf8_lossy(&key),
                        String::from_utf8_lossy(&held)
                    );
                    self.leftover.push(Violation::Node { node, what });
                }
            }
        }
        for c in 0..self.clients.len() {
            self.expire_hold(c);
            if let Work::Holding { hold, .. } = self.clients[c].work {
                self.close_hold(hold, self.now);
            }
        }
        // What each Redlock node held: a cluster's masters together, its keys named as the
        // checker names them (see `shard::plain_key`).
        let mut histories: Vec<Vec<Segment>> = Vec::new();
        for node in 0..self.sc.nodes {
            if let Some(m) = &self.managed[node] {
                // Only a primary's keys are the node's: its data servers' spans together.
                let (mut history, mut members) = (Vec::new(), Vec::new());
                for &s in &m.data {
                    let n = &mut self.nodes[s];
                    n.close_spans(self.end);
                    history.extend(n.history.iter().cloned());
                    members.extend(n.take_memberships());
                }
                let readers = reader_spans(&history, members);
                history.extend(readers);
                histories.push(history);
                self.stats.sentinel_nodes += 1;
                self.stats.failovers += m.failovers;
                continue;
            }
            let Some(cl) = &self.clusters[node] else {
                let n = &mut self.nodes[node];
                n.finish(self.end);
                histories.push(n.history.clone());
                continue;
            };
            let (mut history, mut members) = (Vec::new(), Vec::new());
            for &s in &cl.servers {
                let n = &mut self.nodes[s];
                n.close_spans(self.end);
                let plain = |seg: Segment| Segment { key: shard::plain_key(&seg.key), ..seg };
                history.extend(n.history.iter().cloned().map(plain));
                members.extend(n.take_memberships().into_iter().map(plain));
                if let Some(sh) = &n.shard {
                    let st = &sh.stats;
                    self.stats.moved += st.moved;
                    self.stats.ask += st.ask;
                    self.stats.stale_redirects += st.stale;
                    self.stats.tryagain += st.tryagain;
                    self.stats.asking_served += st.asking;
                    self.stats.map_reads += st.map_reads;
                    self.stats.slots_reads += st.slots_reads;
                }
            }
            let readers = reader_spans(&history, members);
            history.extend(readers);
            histories.push(history);
            self.stats.cluster_nodes += 1;
            self.stats.migrations += cl.migrations;
            self.stats.keys_migrated += cl.keys_moved;
        }
        for n in &self.nodes {
            self.stats.noscript += n.stats.noscript;
            self.stats.quiet_releases += n.stats.quiet_releases;
            self.stats.waits += n.stats.waits;
            self.stats.waits_short += n.stats.waits_short;
            self.stats.waits_refused += n.stats.waits_refused;
            self.stats.waits_lost += n.stats.waits_lost;
            self.stats.waits_late += n.stats.waits_late;
        }
        for (r, &limit) in self.sc.limits.iter().enumerate() {
            let on_r: Vec<&Hold> =
                self.holds.iter().filter(|h| h.semaphore.as_ref().is_some_and(|s| s.0 == NAMES[r])).collect();
            if !on_r.is_empty() {
                self.stats.semaphores += 1;
                self.stats.at_limit += u64::from(checker::peak_permits(&on_r).0 >= u64::from(limit));
            }
        }
        for name in NAMES {
            let readers: Vec<&Hold> =
                self.holds.iter().filter(|h| h.shared && h.resources.iter().any(|r| r == name)).collect();
            self.stats.reader_overlaps += checker::reader_overlaps(&readers);
        }
        self.stats.reentries += checker::reentries(&self.holds);
        let histories: Vec<&[Segment]> = histories.iter().map(Vec::as_slice).collect();
        let dbs = vec![self.sc.db; self.sc.nodes];
        let quorum = self.sc.nodes / 2 + 1;
        let mut violations = checker::check(&self.holds, &histories, &dbs, quorum);
        for (i, n) in self.nodes.iter().enumerate() {
            let node = self.node_of[i];
            let master = self.clusters[node].as_ref().and_then(|cl| cl.servers.iter().position(|&s| s == i));
            for p in &n.problems {
                let what = master.map_or_else(|| p.clone(), |m| format!("master {m}: {p}"));
                violations.push(Violation::Node { node, what });
            }
            let plain = |key: &Vec<u8>| if master.is_some() { shard::plain_key(key) } else { key.clone() };
            for (at, seq, _, token, key) in &n.released {
                // A release of a lock key that ran after the round that got the lock was
                // granted it there, and before the holder asked to release (the world ends
                // the hold when it asks): all attempts of an acquisition share the token, so
                // it was sent for an earlier one, and took what the later one was granted.
                let key = plain(key);
                // (The last such grant: attempts retried at one instant share their start, and
                // a grant after the release is what the lock stands on.)
                let by_round = |round: Time| {
                    let grants = n.granted.iter().filter(|(_, _, (conn, i), t, k)| {
                        t == token
                            && plain(k) == key
                            && self.tags.get(*conn).and_then(|t| t.get(*i as usize)) == Some(&Some(round))
                    });
                    grants.map(|g| g.1).max().is_some_and(|gs| gs < *seq)
                };
                let hold = self.holds.iter().enumerate().find(|(i, h)| {
                    h.token == *token && h.resources.contains(&key) && *at < h.end && by_round(self.rounds[*i])
                });
                if let Some((_, h)) = hold {
                    violations.push(Violation::Engine {
                        client: h.client,
                        what: format!(
                            "a release of {} ran on node {node} at {}, after the round that got the lock ({h}) was \
                             granted there: sent for an earlier attempt, it took the key the lock stands on",
                            String::from_utf8_lossy(token),
                            ms(*at)
                        ),
                    });
                }
            }
        }
        for (c, p) in &self.problems {
            violations.push(Violation::Engine { client: *c, what: p.clone() });
        }
        violations.append(&mut self.leftover);
        if let Some(Vanished { client: vc, at: v, resources, keys }) = &self.vanished {
            self.stats.liveness_checked = true;
            let deadline = v + self.sc.liveness_bound();
            let next = self
                .holds
                .iter()
                .filter(|h| h.client != *vc && h.start >= *v && keys.iter().all(|r| h.resources.contains(r)))
                .map(|h| h.start)
                .min();
            if next.is_none_or(|t| t > deadline) {
                // Cluster nodes whose slot map an engine never read: they vote no lock at all.
                let mut unmapped = Vec::new();
                for (c, engine) in self.clients.iter().enumerate().filter_map(|(c, cl)| Some((c, cl.engine.as_ref()?)))
                {
                    for (n, node) in engine.health().nodes.iter().enumerate() {
                        if node.cluster.as_ref().is_some_and(|m| !m.known) {
                            unmapped.push(format!("client {c} never read the slot map of node {n}"));
                        }
                    }
                }
                violations.push(Violation::Liveness {
                    what: format!(
                        "client {vc} vanished at {} holding {:?}; nobody else held it by {} (next hold: {}){}",
                        ms(*v),
                        resources,
                        ms(deadline),
                        next.map_or("never".into(), ms),
                        if unmapped.is_empty() { String::new() } else { format!("; {}", unmapped.join(", ")) }
                    ),
                });
            }
        }
        for engine in self.clients.iter().filter_map(|c| c.engine.as_ref()) {
            let health = engine.health();
            self.stats.switches +=
                health.nodes.iter().filter_map(|n| n.sentinel.as_ref()).map(|s| s.switches).sum::<u64>();
        }
        let node_stats = self
            .clients
            .iter()
            .map(|c| {
                let e = c.engine.as_ref()?;
                Some((0..self.sc.nodes).filter_map(|n| e.node_stats(NodeId(n as u16)).cloned()).collect())
            })
            .collect();
        Outcome {
            violations,
            stats: self.stats,
            holds: self.holds,
            acquisitions: self.acquisitions,
            trace: self.trace.unwrap_or_default(),
            node_stats,
        }
    }
}

/// Client `c`'s engine; every client reads one wall clock, which starts at `base` (the
/// simulated clock's zero).
fn engine_for(sc: &Scenario, c: usize, base: Instant) -> Engine {
    let nodes = (0..sc.nodes)
        .map(|i| {
            let plan = sc.sentinels.get(i).and_then(Option::as_ref);
            let mut n = match plan {
                Some(_) => NodeConfig::sentinel(sentinel::addrs(i), sentinel::service(i)),
                None => NodeConfig::new("sim", 7000 + i as u16),
            };
            if let Some(a) = &sc.auth {
                n.user = a.user.clone();
                n.password = Some(a.password.clone());
            }
            n.db = sc.db;
            if sc.replicas.get(i).is_some_and(Option::is_some) || plan.is_some_and(|p| p.min_replicas) {
                n = n.min_replicas(1, Duration::from_millis(1));
            }
            n
        })
        .collect();
    let mut cfg = Config::new(nodes);
    cfg.node_timeout = Duration::from_nanos(sc.node_timeout);
    cfg.retry = sc.retry;
    cfg.seed = Some(sc.seed.wrapping_mul(0x9E37_79B9).wrapping_add(c as u64));
    cfg.client_name = sc.client_name.then(|| format!("sim-{c}"));
    cfg.wake = sc.role(c).map_or(sc.wake, |r| r.wake);
    cfg.wake_stagger = sc.wake_stagger;
    cfg.wall_clock = Some((base, Duration::ZERO));
    if sc.clusters.iter().any(Option::is_some) || sc.sentinels.iter().any(Option::is_some) {
        // The engine schedules reconnects (the world follows `poll_connect`): on the scale of
        // the run, like the world's own schedule, not the default 50 ms to 2 s.
        cfg.reconnect_min = Duration::from_micros(500);
        cfg.reconnect_max = Duration::from_millis(4);
    }
    if let Some(liveness) = sc.liveness {
        cfg.liveness_timeout = Some(Duration::from_nanos(liveness));
        cfg.connect_timeout = Duration::from_nanos(liveness);
    }
    Engine::new(cfg).expect("the simulation's configs are valid")
}

fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.chars().count() > 160 { format!("{}…", s.chars().take(160).collect::<String>()) } else { s.into_owned() }
}

/// The reply at the front of `buf`, if whole: its type byte, the first line's text (or a
/// push's kind), and its length.
fn reply_frame(buf: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    let kind = *buf.first()?;
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = &buf[1..end];
    let mut pos = end + 2;
    let first = match kind {
        b'$' | b'!' | b'=' => {
            let n: i64 = std::str::from_utf8(line).ok()?.parse().ok()?;
            if n < 0 {
                return Some((kind, Vec::new(), pos));
            }
            let body = buf.get(pos..pos + n as usize)?.to_vec();
            pos += n as usize + 2;
            if buf.len() < pos {
                return None;
            }
            body
        }
        b'*' | b'%' | b'~' | b'>' | b'|' => {
            let n: i64 = std::str::from_utf8(line).ok()?.parse().ok()?;
            let items = if matches!(kind, b'%' | b'|') { 2 * n.max(0) } else { n.max(0) };
            let mut first = Vec::new();
            for i in 0..items {
                let (_, text, used) = reply_frame(&buf[pos..])?;
                if i == 0 {
                    first = text;
                }
                pos += used;
            }
            first
        }
        _ => line.to_vec(),
    };
    Some((kind, first, pos))
}

/// The command at the front of `buf` (an array of bulk strings, as the engine writes them),
/// if whole: its arguments and its length.
fn command(buf: &[u8]) -> Option<(Vec<&[u8]>, usize)> {
    let line = |at: usize| -> Option<(usize, usize)> {
        let end = at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        let n = std::str::from_utf8(buf.get(at + 1..end)?).ok()?.parse().ok()?;
        Some((n, end + 2))
    };
    let (n, mut pos) = line(0).filter(|_| buf[0] == b'*')?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let (len, at) = line(pos).filter(|_| buf.get(pos) == Some(&b'$'))?;
        args.push(buf.get(at..at + len)?);
        pos = at + len + 2;
    }
    (buf.len() >= pos).then_some((args, pos))
}

/// The request a command is, if it is one: `SET`, or a script call, as [`Req`].
fn request(args: &[&[u8]]) -> Option<Req> {
    let owned = |from: usize, n: usize| args.iter().skip(from).take(n).map(|a| a.to_vec()).collect::<Vec<_>>();
    match args.first()?.to_ascii_uppercase().as_slice() {
        b"SET" => Some((usize::MAX, owned(1, 1), owned(2, usize::MAX))),
        b"EVAL" | b"EVALSHA" => {
            let script = super::node::script_index(args.get(1)?)?;
            let n: usize = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
            Some((script, owned(3, n), owned(3 + n, usize::MAX)))
        }
        _ => None,
    }
}
