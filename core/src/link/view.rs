//! What the health view shows of each link.

use std::sync::Arc;

use super::Links;
use crate::event::NodeId;
use crate::health::{NodeHealth, NodeState};

impl Links {
    /// Every node's health.
    pub(crate) fn health(&self) -> Vec<NodeHealth> {
        self.links[..self.nodes]
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let mut state = super::cluster::link_state(l);
                if state == NodeState::Ready && !self.is_ready(NodeId(i as u16)) {
                    // A cluster node whose masters are not all connected yet.
                    state = NodeState::Handshaking;
                }
                NodeHealth {
                    node: NodeId(i as u16),
                    addr: Arc::clone(&self.addrs[i]),
                    state,
                    last_error: l.last_error.as_ref().map(|(_, e)| e.clone()),
                    fault: l.last_error.as_ref().map(|(f, _)| *f),
                    stats: l.stats.clone(),
                    wake: self.wake_state(NodeId(i as u16)).unwrap_or(&l.wake).clone(),
                    min_replicas: l.min_replicas,
                    replicas_online: l.replicas_online,
                    cluster: self.cluster_health(i),
                    sentinel: self.sentinel_health(i),
                }
            })
            .collect()
    }
}
