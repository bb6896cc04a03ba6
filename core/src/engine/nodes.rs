//! What the engine knows of each node's connection (and, for a node that is a Redis Cluster,
//! of the links to its masters): the getters drivers and health views read.

use crate::error::Fault;
use crate::event::{LinkState, NodeId, WakeState};
use crate::stats::NodeStats;

use super::Engine;

impl Engine {
    /// Whether the engine considers `node` connected (its handshake may still be running;
    /// requests queue behind it).
    pub fn is_connected(&self, node: NodeId) -> bool {
        self.links.is_up(node)
    }

    /// Whether `node` is connected and has answered its whole handshake (AUTH, SELECT, the
    /// script loads): its votes now depend only on the node.
    pub fn is_ready(&self, node: NodeId) -> bool {
        self.links.is_ready(node)
    }

    /// Where `node`'s connection stands (down until a time, connecting, up), or `None` for an
    /// unknown node.
    pub fn link_state(&self, node: NodeId) -> Option<LinkState> {
        self.links.state(node)
    }

    /// Why `node`'s last connect attempt or connection failed (e.g. `connect failed:
    /// Connection refused`, `AUTH failed: WRONGPASS ...`), as its votes report it while it is
    /// down; `None` once a connection has completed its handshake again.
    pub fn last_error(&self, node: NodeId) -> Option<&str> {
        self.links.last_error(node).map(|(_, text)| text)
    }

    /// What kind of failure [`last_error`](Self::last_error) is: the node is out of reach,
    /// refuses us for a configuration reason (a wrong password, database or ACL), or spoke
    /// garbage.
    pub fn last_fault(&self, node: NodeId) -> Option<Fault> {
        self.links.last_error(node).map(|(fault, _)| fault)
    }

    /// How many connect attempts to `node` have ended: by completing the handshake, or by
    /// failing (refused, timed out, abandoned, a handshake refused or cut short). A client that waits for "every node tried once" compares it
    /// with the count when it started.
    pub fn connect_attempts(&self, node: NodeId) -> u64 {
        self.links.attempts_ended(node)
    }

    /// What the engine has seen of `node`: round trips, replies, timeouts, failures by kind,
    /// connections; `None` for an unknown node. Kept up to date on every input, without
    /// allocating.
    pub fn node_stats(&self, node: NodeId) -> Option<&NodeStats> {
        self.links.stats(node)
    }

    /// Whether `node` wakes waiters on release (RESP3 push messages on its connection), or is
    /// polled, and why; `None` for an unknown node. See [`Config::wake`](crate::Config::wake).
    pub fn wake_state(&self, node: NodeId) -> Option<&WakeState> {
        self.links.wake_state(node)
    }

    /// Requests sent to `node` whose replies have not arrived yet.
    pub fn in_flight(&self, node: NodeId) -> usize {
        self.links.in_flight(node)
    }

    /// `node`'s address, `redis://[user@]host:port[/db]` (never the password).
    pub fn node_addr(&self, node: NodeId) -> Option<&str> {
        self.links.addr_of(node)
    }

    /// Number of links: the nodes' own (ids `0..node_count()`), then the links to the masters
    /// of nodes that are Redis Clusters, made as their slot maps name them. A driver keeps one
    /// connection per link: [`poll_connect`](Self::poll_connect) hands out these ids too, and
    /// [`link_endpoint`](Self::link_endpoint) says where they connect.
    pub fn link_count(&self) -> usize {
        self.links.count()
    }

    /// Where a link connects when its node's config does not say: a link beyond the nodes' own
    /// (the cluster node it belongs to, to reach as that node's config says: TLS, credentials;
    /// and the master's host and port), or a Sentinel-managed node's own link (the node, and
    /// the sentinel it asks now or the master they named). Ask it for every connect attempt
    /// [`poll_connect`](Self::poll_connect) hands out: a Sentinel-managed node's changes.
    /// `None` for a node's own link reached as its config says, or an unknown id.
    pub fn link_endpoint(&self, link: NodeId) -> Option<(NodeId, &str, u16)> {
        self.links.endpoint(link)
    }

    /// Whether `link` belongs to a Sentinel-managed node (its own link, or its watch link on
    /// a sentinel): where it connects changes, and with TLS the name verified is that host's.
    pub fn is_sentinel_link(&self, link: NodeId) -> bool {
        self.links.is_sentinel_link(link)
    }

    /// Whether `node` is a Redis Cluster whose links to its masters have not all ended a
    /// first connect attempt: a client that waits for "every node tried once" waits for these.
    pub fn masters_connecting(&self, node: NodeId) -> bool {
        self.links.masters_connecting(node.index())
    }
}
