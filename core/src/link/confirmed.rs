//! What a connection knows of the scripts and the semaphores beyond the handshake: which lazily
//! loaded scripts it was sent the source of, and which semaphore limits its node confirmed.

use super::{Links, MAX_LIMITS};
use crate::cluster::hash_slot;
use crate::event::NodeId;

impl Links {
    /// Whether a link that takes requests has not been sent the lazily loaded script `bit`
    /// yet ([`Call::lazy`](crate::wire::Call::lazy)): the next broadcast then carries its
    /// source, so that no node answers `NOSCRIPT` (whose resend would wait for a late node's
    /// reply to be read). Marks every such link as sent it.
    pub(crate) fn needs_source(&mut self, bit: u8) -> bool {
        let mut needs = false;
        for link in self.links.iter_mut().filter(|l| l.takes_requests()) {
            needs |= link.sourced & bit == 0;
            link.sourced |= bit;
        }
        needs
    }

    /// The server behind `link` confirmed on this connection that the semaphore of `limit_key`
    /// has `limit` permits (its script ran without `WRONGLIMIT`): a node's own link, or on a
    /// node that is a Redis Cluster, the link to the master that ran it.
    pub(crate) fn confirm_limit(&mut self, link: NodeId, limit_key: &[u8], limit: u16) {
        let Some(link) = self.links.get_mut(link.index()) else { return };
        if link.limits.len() < MAX_LIMITS && !link.limits.iter().any(|(k, _)| k == limit_key) {
            link.limits.push((limit_key.to_vec(), limit));
        }
    }

    /// Whether, on every node, the link a request for the semaphore of `limit_key` goes to
    /// confirmed `limit`, where that link takes requests (and at least one does): its first
    /// permit can then be taken by `SET NX`. On a node that is a Redis Cluster, that link is
    /// the one to the master serving the semaphore's slot (every key of a semaphore has its
    /// name as hash tag: the limit key's slot is theirs).
    pub(crate) fn limit_confirmed(&self, limit_key: &[u8], limit: u16) -> bool {
        let slot = hash_slot(limit_key);
        let mut up = (0..self.nodes)
            .filter_map(|node| self.route(node, slot).ok())
            .filter_map(|i| self.links.get(i))
            .filter(|l| l.takes_requests())
            .peekable();
        up.peek().is_some() && up.all(|l| l.limits.iter().any(|(k, n)| k == limit_key && *n == limit))
    }
}
