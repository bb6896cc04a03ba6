//! The health view: where every node stands, and how many more nodes may fail before locking
//! stops. Computed from the engine's links and figures ([`Engine::health`](crate::Engine::health)),
//! so every client shows the same.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Fault;
use crate::event::{LockId, LockState, NodeId, WakeState};
use crate::footprint::Footprint;
use crate::node::MinReplicas;
use crate::stats::NodeStats;

/// Where one node's connection stands, as the health view sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeState {
    /// Connected and past its handshake: it takes part in every round.
    Ready,
    /// Connected, its handshake still in flight.
    Handshaking,
    /// A connect attempt is in flight.
    Connecting,
    /// Not connected; the next connect attempt is due at `retry_at` (`None`: now).
    Down {
        /// When the next attempt starts.
        retry_at: Option<Instant>,
    },
}

/// One node in the health view.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeHealth {
    /// The node.
    pub node: NodeId,
    /// Its address, `redis://[user@]host:port[/db]` (never the password).
    pub addr: Arc<str>,
    /// Where its connection stands.
    pub state: NodeState,
    /// Why its last connect attempt or connection failed, until a handshake completes again.
    pub last_error: Option<String>,
    /// The kind of that failure.
    pub fault: Option<Fault>,
    /// Its figures: round trips, replies, timeouts, failures by kind, connections.
    pub stats: NodeStats,
    /// Whether its connection wakes waiters on release, or they poll it (and why): see
    /// [`Config::wake`](crate::Config::wake).
    pub wake: WakeState,
    /// The replicas its grants wait for ([`NodeConfig::min_replicas`](crate::NodeConfig::min_replicas)).
    pub min_replicas: Option<MinReplicas>,
    /// The replicas the node reported online at its last check (`ROLE`, with `min_replicas`;
    /// `None` before the first): fewer than `min_replicas` asks makes it misconfigured, and
    /// its `last_error` names both numbers.
    pub replicas_online: Option<u32>,
    /// When the node is a Redis Cluster: its masters, the slots they cover and the redirects
    /// followed. (Its `state` is its own link's, which reads the slot map.)
    pub cluster: Option<ClusterHealth>,
    /// When the node is Sentinel-managed: its service, the master in use, what each sentinel
    /// said last and the last switch. (Its `state` is its link's: to a sentinel while it asks,
    /// to the master once it votes.)
    pub sentinel: Option<SentinelHealth>,
}

/// A Sentinel-managed node, in the health view.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SentinelHealth {
    /// The service the sentinels watch.
    pub service: Arc<str>,
    /// The master in use, `host:port` (`None` before the sentinels named one).
    pub master: Option<String>,
    /// Whether the node's link is asking the sentinels now (connected or connecting to one).
    pub asking: bool,
    /// Each sentinel, with what it said last.
    pub sentinels: Vec<SentinelView>,
    /// Times the master in use changed (a failover followed).
    pub switches: u64,
    /// The last change of master: from, to (`host:port`), and when.
    pub last_switch: Option<(String, String, Instant)>,
}

/// What one sentinel of a Sentinel-managed node said last.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SentinelView {
    /// The sentinel, `host:port`.
    pub addr: String,
    /// The master it named (`Ok`, `host:port`), or why it named none (`Err`); `None` before
    /// it was asked.
    pub said: Option<Result<String, String>>,
    /// When it said it.
    pub at: Option<Instant>,
}

/// A node that is a Redis Cluster, in the health view.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterHealth {
    /// The masters that serve its slots, as its last map (and redirects since) say.
    pub masters: Vec<MasterHealth>,
    /// Slots with a known master, of 16384.
    pub covered: usize,
    /// Whether a whole slot map has been read.
    pub known: bool,
    /// `MOVED` and `ASK` redirects followed.
    pub redirects: u64,
}

/// One master of a cluster node.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MasterHealth {
    /// The link to it (an id from [`Engine::node_count`](crate::Engine::node_count) up, or
    /// the node's own when it points there).
    pub link: NodeId,
    /// Its address, `redis://host:port` (never the password).
    pub addr: Arc<str>,
    /// Where the link stands.
    pub state: NodeState,
    /// The slots it serves.
    pub slots: usize,
    /// Why the link last failed, until it is back.
    pub last_error: Option<String>,
}

impl NodeHealth {
    /// Whether a node that is a Redis Cluster can vote for every slot: its map is read, covers
    /// every slot, and every master's link is ready. `true` for any other node.
    pub fn cluster_whole(&self) -> bool {
        self.cluster.as_ref().is_none_or(|c| {
            c.known && c.covered == crate::cluster::SLOTS && c.masters.iter().all(|m| m.state == NodeState::Ready)
        })
    }
}

impl NodeHealth {
    /// Whether the node takes part in rounds now.
    pub fn is_ready(&self) -> bool {
        self.state == NodeState::Ready
    }

    /// Whether the node refuses us for a configuration reason (a wrong password, database or
    /// ACL): it will not come back by itself.
    pub fn is_misconfigured(&self) -> bool {
        !self.is_ready() && self.fault == Some(Fault::Misconfigured)
    }

    /// Why waiters poll this ready node instead of being woken on release (it refused
    /// `HELLO 3` or `SUBSCRIBE`, or wake-ups are off); `None` if it wakes them or is not ready.
    pub fn polled_because(&self) -> Option<&str> {
        match &self.wake {
            WakeState::Polling { reason } if self.is_ready() => Some(reason),
            _ => None,
        }
    }
}

/// What a lock takes of its resources.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockShape {
    /// The resources alone: a mutex, which is also the write lock of a reader-writer lock.
    Exclusive,
    /// A read lock, shared with other readers ([`LockOptions::shared`](crate::LockOptions::shared)).
    Shared,
    /// Permits of a semaphore ([`LockOptions::semaphore`](crate::LockOptions::semaphore)).
    Semaphore {
        /// Its limit.
        limit: u32,
        /// How many permits the lock takes.
        permits: u32,
        /// The permits held, by number (`0..limit`), once a quorum granted them; empty while
        /// acquiring.
        held: Vec<u16>,
    },
}

/// One of the client's own locks in the health view: what it holds or waits for, and until
/// when. The nodes' view of every client's locks is `redlease status`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockHealth {
    /// The lock.
    pub lock: LockId,
    /// Its resources as the nodes name them (after [`Config::key_prefix`](crate::Config::key_prefix));
    /// a semaphore's name.
    pub resources: Vec<String>,
    /// Mutex or write lock, read lock, or permits.
    pub shape: LockShape,
    /// Acquiring (waiting included), held, extending or releasing.
    pub state: LockState,
    /// Valid until this instant of the caller's clock (once held).
    pub valid_until: Option<Instant>,
    /// Its fencing token (once held, when asked for).
    pub fence: Option<u64>,
    /// Known lost.
    pub lost: bool,
    /// The first 8 characters of its token: the holder as the nodes show it (`redlease
    /// status` prints the same), without the rest, which would let anyone release it.
    pub token_prefix: String,
}

/// The nodes as a client sees them: what every client's `health()` returns (and
/// `Engine::health`). Its `Display` is a table, one line per node, then the quorum's line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// Every node, by index.
    pub nodes: Vec<NodeHealth>,
    /// Nodes that must agree: N / 2 + 1.
    pub quorum: usize,
    /// The client's locks: acquiring (waiting included), held, extending or releasing.
    pub locks: Vec<LockHealth>,
    /// What the client's engine retains (see [`Footprint`]).
    pub footprint: Footprint,
}

impl Health {
    /// Nodes that take part in rounds now.
    pub fn usable(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_ready()).count()
    }

    /// Whether locking works now: at least a quorum of nodes is usable.
    pub fn can_lock(&self) -> bool {
        self.usable() >= self.quorum
    }

    /// How many more nodes may fail before locking stops (0 when one more failure would stop
    /// it, or it already has: see [`can_lock`](Self::can_lock)).
    pub fn fault_tolerance(&self) -> usize {
        self.usable().saturating_sub(self.quorum)
    }

    /// How many nodes may fail at most when all are usable: N − quorum.
    pub fn design_tolerance(&self) -> usize {
        self.nodes.len() - self.quorum
    }

    /// Whether some node refuses us for a configuration reason rather than being out of
    /// reach: an operator must act.
    pub fn misconfigured(&self) -> bool {
        self.nodes.iter().any(NodeHealth::is_misconfigured)
    }

    /// Whether the nodes that refuse us for a configuration reason are alone more than a
    /// quorum can spare: no quorum can be usable until an operator acts (retrying does not
    /// help), whatever the nodes out of reach do.
    pub fn misconfigured_beyond_quorum(&self) -> bool {
        let refusing = self.nodes.iter().filter(|n| n.is_misconfigured()).count();
        refusing > self.design_tolerance()
    }

    /// Whether every node is usable.
    pub fn all_ready(&self) -> bool {
        self.nodes.iter().all(NodeHealth::is_ready)
    }
}

/// A link's state in the table.
fn word(state: NodeState) -> &'static str {
    match state {
        NodeState::Ready => "ready",
        NodeState::Handshaking => "handshaking",
        NodeState::Connecting => "connecting",
        NodeState::Down { .. } => "down",
    }
}

/// Milliseconds with one decimal, for the table.
fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

impl fmt::Display for Health {
    /// A table: one line per node (state, round trip, last error), then the cluster's line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for n in &self.nodes {
            // A node that refuses us says so whatever its reconnect attempt is doing.
            let state = if n.is_misconfigured() { "MISCONFIGURED" } else { word(n.state) };
            let rtt = match (n.stats.rtt(), n.stats.rtt_max()) {
                (Some(r), Some(m)) => format!("rtt {} (max {})", ms(r), ms(m)),
                _ => "rtt -".to_owned(),
            };
            write!(f, "{} {}  {state:<13} {rtt}", n.node, n.addr)?;
            if let Some(m) = n.min_replicas {
                let written = if m.fsync { " (on disk)" } else { "" };
                write!(f, "  grants wait for {} replica(s){written}, {:?}", m.replicas, m.timeout)?;
                if let Some(online) = n.replicas_online {
                    write!(f, " ({online} online)")?;
                }
            }
            if let Some(reason) = n.polled_because() {
                write!(f, "  waiters poll: {reason}")?;
            }
            if let Some(e) = &n.last_error {
                write!(f, "  last error: {e}")?;
            }
            writeln!(f)?;
            if let Some(s) = &n.sentinel {
                write!(f, "  Sentinel-managed service {:?}: master ", s.service)?;
                match &s.master {
                    Some(m) => write!(f, "{m}")?,
                    None => write!(f, "not named yet")?,
                }
                if s.asking {
                    write!(f, " (asking the sentinels)")?;
                }
                write!(f, ", {} switch(es) followed", s.switches)?;
                if let Some((from, to, _)) = &s.last_switch {
                    write!(f, ", last {from} -> {to}")?;
                }
                writeln!(f)?;
                for v in &s.sentinels {
                    match &v.said {
                        Some(Ok(m)) => writeln!(f, "    sentinel {}  names {m}", v.addr)?,
                        Some(Err(e)) => writeln!(f, "    sentinel {}  {e}", v.addr)?,
                        None => writeln!(f, "    sentinel {}  not asked yet", v.addr)?,
                    }
                }
            }
            if let Some(c) = &n.cluster {
                writeln!(
                    f,
                    "  a Redis Cluster: {} master(s), {} of {} slots covered, {} redirect(s) followed",
                    c.masters.len(),
                    c.covered,
                    crate::cluster::SLOTS,
                    c.redirects
                )?;
                for m in &c.masters {
                    write!(f, "    master {}  {:<11} {} slots", m.addr, word(m.state), m.slots)?;
                    if let Some(e) = &m.last_error {
                        write!(f, "  last error: {e}")?;
                    }
                    writeln!(f)?;
                }
            }
        }
        write!(
            f,
            "{} of {} nodes usable, quorum {}: {}",
            self.usable(),
            self.nodes.len(),
            self.quorum,
            if self.can_lock() {
                format!("locking works, {} more may fail", self.fault_tolerance())
            } else {
                "LOCKING STOPS: no quorum".to_owned()
            }
        )?;
        if self.misconfigured() {
            write!(f, " (a node refuses us for a configuration reason: fix it)")?;
        }
        for l in &self.locks {
            write!(f, "\n{}", l)?;
        }
        write!(f, "\nretained: {}", self.footprint)
    }
}

impl fmt::Display for LockHealth {
    /// One line: the lock, its resources and shape, its state, fencing token and holder.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            _ if self.lost => "LOST",
            LockState::Acquiring => "acquiring",
            LockState::Held => "held",
            LockState::Extending => "held, extending",
            LockState::Releasing => "releasing",
        };
        write!(f, "lock {}.{} {}", self.lock.index, self.lock.generation, self.resources.join(" + "))?;
        match &self.shape {
            LockShape::Exclusive => write!(f, " (exclusive)")?,
            LockShape::Shared => write!(f, " (read)")?,
            LockShape::Semaphore { limit, permits, held } if held.is_empty() => {
                write!(f, " ({permits} of {limit} permits)")?
            }
            LockShape::Semaphore { limit, held, .. } => {
                let held: Vec<String> = held.iter().map(u16::to_string).collect();
                write!(f, " (permits {} of {limit})", held.join(","))?
            }
        }
        write!(f, "  {state}")?;
        if let Some(fence) = self.fence {
            write!(f, "  fence {fence}")?;
        }
        write!(f, "  token {}…", self.token_prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: u16, state: NodeState, fault: Option<Fault>) -> NodeHealth {
        NodeHealth {
            node: NodeId(i),
            addr: format!("redis://alice@10.0.0.{i}:6379").into(),
            state,
            last_error: fault.map(|_| "AUTH failed: WRONGPASS".to_owned()),
            fault,
            stats: NodeStats::default(),
            wake: WakeState::On,
            min_replicas: None,
            replicas_online: None,
            cluster: None,
            sentinel: None,
        }
    }

    #[test]
    fn tolerance_counts_usable_nodes_against_the_quorum() {
        let down = NodeState::Down { retry_at: None };
        let mut h = Health {
            nodes: (0..5).map(|i| node(i, NodeState::Ready, None)).collect(),
            quorum: 3,
            locks: Vec::new(),
            footprint: Footprint::default(),
        };
        assert_eq!((h.usable(), h.fault_tolerance(), h.design_tolerance()), (5, 2, 2));
        assert!(h.all_ready() && h.can_lock() && !h.misconfigured());
        h.nodes[0] = node(0, NodeState::Handshaking, Some(Fault::Misconfigured));
        h.nodes[1] = node(1, down, Some(Fault::Unreachable));
        assert_eq!((h.usable(), h.fault_tolerance()), (3, 0));
        assert!(h.can_lock() && h.misconfigured() && !h.all_ready());
        // One refusal, one node down: out of reach may come back, so the quorum is not lost
        // for good; a third refusal would make it so.
        assert!(!h.misconfigured_beyond_quorum());
        let mut refused = h.clone();
        refused.nodes[1] = node(1, NodeState::Handshaking, Some(Fault::Misconfigured));
        refused.nodes[2] = node(2, NodeState::Handshaking, Some(Fault::Misconfigured));
        assert!(refused.misconfigured_beyond_quorum());
        // A node that refuses us is shown as such while it tries again; one out of reach is down.
        let table = h.to_string();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("MISCONFIGURED") && lines[1].contains("down"), "{table}");
        assert!(lines[5].starts_with("3 of 5 nodes usable, quorum 3: locking works, 0 more may fail"), "{table}");
        h.nodes[2] = node(2, NodeState::Connecting, None);
        assert_eq!(h.fault_tolerance(), 0);
        assert!(!h.can_lock() && h.to_string().contains("LOCKING STOPS"));
        // A ready node that refused wake-ups says so, and why; one that is down does not.
        h.nodes[3].wake = WakeState::Polling { reason: "HELLO 3 refused: ERR unknown command".to_owned() };
        h.nodes[1].wake = WakeState::Polling { reason: "never shown".to_owned() };
        let table = h.to_string();
        assert!(
            table.lines().nth(3).unwrap().ends_with("waiters poll: HELLO 3 refused: ERR unknown command"),
            "{table}"
        );
        assert!(!table.contains("never shown"), "{table}");
    }
}
