//! A re-entrant lock's record: its owner, and what the granting nodes of an attempt said of
//! the owner's fencing token.
//!
//! The lock key holds the owner; each hold is its own token in the key's holds
//! ([`scripts::REENTRY`](crate::scripts::REENTRY)). Every step of a hold (join, extend, leave)
//! is idempotent on a node, so a resent or late request, or a cleanup sent to a node that never
//! saw the attempt, cannot skew what a node counts.

use std::time::Duration;

use super::Phase;
use crate::config::Retry;
use crate::wire::reentry::Step;
use crate::wire::{Call, Op};

/// What the current attempt's granting nodes said of the owner's recorded fencing token.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Recorded {
    /// Granting nodes that had one recorded.
    pub(crate) nodes: usize,
    /// The largest recorded.
    pub(crate) fence: u64,
}

impl Recorded {
    /// A node granted the hold and had `fence` recorded as the owner's token.
    pub(crate) fn add(&mut self, fence: u64) {
        self.nodes += 1;
        self.fence = self.fence.max(fence);
    }

    /// The owner's token, when a quorum `q` of granting nodes had one recorded.
    ///
    /// A token is recorded only once a quorum accepted it in a fence round, and only on a node
    /// where the owner holds the key with that hold among its holds: every record is a token of
    /// one of the owner's terms. A term's token is above every earlier holder's; and a node where
    /// the key was granted to the owner afresh (after another owner may have held it) has its
    /// holds, and so its record, wiped. So when every node of a quorum has a record, no other
    /// owner held the lock since the term of the largest one, which is the owner's token; when
    /// some node has none, the hold runs a fence round of its own, as a first hold does.
    pub(crate) fn token(&self, q: usize) -> Option<u64> {
        (self.nodes >= q && self.fence > 0).then_some(self.fence)
    }
}

impl super::Record {
    /// A re-entrant lock's call for `op` in the current phase (`None` if the phase has none).
    pub(crate) fn reentry_call(&self, op: Op, retry: Retry) -> Option<Call> {
        let ttl_ms = |ttl: Duration| ttl.as_millis().max(1) as u64;
        let step = match (op, &self.phase) {
            (Op::Acquire, _) => Step::Acquire {
                ttl_ms: ttl_ms(self.ttl),
                fencing: self.fencing,
                queue: self.queue,
                queue_ttl_ms: self.queue_ttl_ms(retry),
                reserve_ms: self.reserve_ms,
            },
            (Op::Extend, Phase::Extending { ttl, .. }) => Step::Extend { ttl_ms: ttl_ms(*ttl) },
            (Op::Release, _) => return Some(self.release_call(true, false, retry)),
            (Op::Fence, Phase::Fencing { proposal, recording: true, .. }) => Step::Record { token: *proposal },
            (Op::Fence, Phase::Fencing { proposal, .. }) => Step::Fence { proposal: *proposal },
            _ => return None,
        };
        Some(Call::Reentry(step))
    }
}
