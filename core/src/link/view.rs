//! What the health view shows of each link.

use std::sync::Arc;

use super::Links;
use crate::event::{LinkState, NodeId};
use crate::health::{NodeHealth, NodeState};

impl Links {
    /// Every node's health.
    pub(crate) fn health(&self) -> Vec<NodeHealth> {
        self.links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let handshaking = l.is_handshaking();
                let state = match l.state {
                    LinkState::Up { .. } if handshaking => NodeState::Handshaking,
                    LinkState::Up { .. } => NodeState::Ready,
                    LinkState::Connecting { .. } => NodeState::Connecting,
                    LinkState::Down { retry_at } => NodeState::Down { retry_at },
                };
                NodeHealth {
                    node: NodeId(i as u16),
                    addr: Arc::clone(&self.addrs[i]),
                    state,
                    last_error: l.last_error.as_ref().map(|(_, e)| e.clone()),
                    fault: l.last_error.as_ref().map(|(f, _)| *f),
                    stats: l.stats.clone(),
                    wake: l.wake.clone(),
                    min_replicas: l.min_replicas,
                }
            })
            .collect()
    }
}
