//! The engine's side of a re-entrant lock: recording the fencing token a quorum accepted for a
//! hold as its owner's, for the owner's later holds to take without a fence round.

use std::time::Instant;

use super::Engine;
use crate::lock::Phase;
use crate::wire::Op;

impl Engine {
    /// A re-entrant lock's fence round is won with `fence`, the lock valid until `valid`:
    /// record the token as the owner's on every node, and grant the lock once a quorum recorded
    /// it or no quorum can (a later hold that finds no record on a quorum runs a fence round of
    /// its own). `false` when there is no such round to run: the lock is granted now.
    ///
    /// Only a token a quorum accepted is recorded, and only on a node where the hold is among
    /// the owner's holds: a record always names a token above every earlier holder's and below
    /// every later one's (see `lock::reentry::Recorded::token`). The acquisition waits for the
    /// record so that a hold the owner takes next, from any process, finds it.
    pub(super) fn record_round(&mut self, now: Instant, idx: u32, fence: Option<u64>, valid: Instant) -> bool {
        let s = &self.locks[idx];
        let fenced = matches!(s.phase, Phase::Fencing { recording: false, .. });
        let (Some(token), false, true) = (fence, s.owner.is_empty(), fenced) else { return false };
        let (start, deadline) = (s.round.start, (now + self.config.node_timeout).min(valid));
        let phase = Phase::Fencing { deadline, proposal: token, seen: 0, valid, recording: true };
        self.begin_round(start, idx, phase);
        self.send_round(now, idx, Op::Fence);
        true
    }
}
