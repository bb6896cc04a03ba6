//! Sentinel-managed nodes as Redlock nodes: the servers of each (a primary, its replicas and
//! three sentinels, model nodes with the roles of [`replication`](super::node::replication)),
//! where they listen, and which of them is the primary now.
//!
//! Data server 0 of a node is the model node of the same index as the Redlock node (its first
//! primary); the replicas and the sentinels are model nodes after the Redlock nodes'. The
//! engines know the node by its sentinels and its service only.

use super::node::replication::{HOST, Keyspace, Watch};
use super::node::{Auth, Clock, Node};
use super::scenario::SentinelPlan;

/// Sentinels per node.
pub(crate) const SENTINELS: usize = 3;

/// The port data server `j` of node `node` listens on.
pub(crate) fn data_port(node: usize, j: usize) -> u16 {
    8000 + 100 * j as u16 + node as u16
}

/// The port sentinel `k` of node `node` listens on.
pub(crate) fn sentinel_port(node: usize, k: usize) -> u16 {
    26000 + 100 * k as u16 + node as u16
}

/// The service the sentinels of node `node` watch it as.
pub(crate) fn service(node: usize) -> String {
    format!("svc-{node}")
}

/// The sentinels of node `node`, as an engine's config names them.
pub(crate) fn addrs(node: usize) -> impl Iterator<Item = (String, u16)> {
    (0..SENTINELS).map(move |k| (HOST.to_owned(), sentinel_port(node, k)))
}

/// One Redlock node that is Sentinel-managed.
#[derive(Debug)]
pub(crate) struct Managed {
    /// The model node of each data server, and which of them is the primary now.
    pub(crate) data: Vec<usize>,
    pub(crate) primary: usize,
    /// What each replica has of the primary's keyspace (`None`: the primary's own, or a replica
    /// that has not synced since it joined).
    pub(crate) copies: Vec<Option<Keyspace>>,
    /// The model node of each sentinel.
    pub(crate) sentinels: Vec<usize>,
    pub(crate) plan: SentinelPlan,
    pub(crate) failovers: u64,
}

impl Managed {
    /// Node `node` planned as `plan`, its servers after the first being model nodes `next..`:
    /// the node, and the model nodes to add (the replicas, then the sentinels).
    pub(crate) fn new(
        node: usize,
        plan: &SentinelPlan,
        next: usize,
        clock: &Clock,
        auth: &Option<Auth>,
        fence_prefix: &[u8],
    ) -> (Self, Vec<Node>) {
        let mut added = Vec::new();
        for _ in 0..plan.replicas {
            // The servers of a node share its clock: replicated expiry times are absolute.
            let mut replica = Node::new(clock.clone(), auth.clone(), fence_prefix, false);
            replica.replica_of = Some(data_port(node, 0));
            added.push(replica);
        }
        for _ in 0..SENTINELS {
            let mut sentinel = Node::new(clock.clone(), auth.clone(), fence_prefix, true);
            sentinel.sentinel = Some(Watch { service: service(node), master: data_port(node, 0), epoch: 0 });
            added.push(sentinel);
        }
        let data = std::iter::once(node).chain(next..next + plan.replicas).collect();
        let sentinels = (next + plan.replicas..next + plan.replicas + SENTINELS).collect();
        let copies = (0..=plan.replicas).map(|j| (j > 0).then(Keyspace::default)).collect();
        (Managed { data, primary: 0, copies, sentinels, plan: plan.clone(), failovers: 0 }, added)
    }

    /// The model node of the primary now.
    pub(crate) fn primary_server(&self) -> usize {
        self.data[self.primary]
    }

    /// The model node listening on `port` of node `node`, if any.
    pub(crate) fn server_at(&self, node: usize, port: u16) -> Option<usize> {
        let data = (0..self.data.len()).find(|&j| data_port(node, j) == port).map(|j| self.data[j]);
        data.or_else(|| (0..SENTINELS).find(|&k| sentinel_port(node, k) == port).map(|k| self.sentinels[k]))
    }
}
