//! Grants acknowledged by replicas: a node with
//! [`min_replicas`](crate::NodeConfig::min_replicas) answers each grant, then its `WAIT`; the
//! grant is held back until the `WAIT` says enough replicas have it.

use std::time::Instant;

use super::Engine;
use crate::error::{LinkError, Vote};
use crate::event::{LockId, NodeId};
use crate::lock::Phase;
use crate::wire::{Op, OpAnswer};

impl Engine {
    /// Keep `node`'s `answer` to `op` of `lock`'s round `round` until its `WAIT` answers;
    /// `Err` gives it back when that round is over (a late reply, handled as such).
    pub(super) fn hold_back(
        &mut self,
        node: NodeId,
        op: Op,
        lock: LockId,
        round: u32,
        answer: OpAnswer,
    ) -> Result<(), OpAnswer> {
        if !self.locks.in_round(lock, round) {
            return Err(answer);
        }
        match self.locks[lock.index].round.awaiting.get_mut(node.index()) {
            Some(held) => {
                *held = Some((round, op, answer));
                Ok(())
            }
            None => Err(answer),
        }
    }

    /// The `WAIT` after a held-back grant of `node`: the grant counts if enough replicas have
    /// it, else the node's vote fails (and the attempt's cleanup covers its grant).
    pub(super) fn on_replicas(
        &mut self,
        now: Instant,
        node: NodeId,
        lock: LockId,
        round: u32,
        acked: Result<i64, String>,
    ) -> Result<(), LinkError> {
        let Some(idx) = self.locks.last(lock).map(|_| lock.index) else { return Ok(()) };
        let held =
            self.locks[idx].round.awaiting.get_mut(node.index()).filter(|h| h.as_ref().is_some_and(|h| h.0 == round));
        let (Some(Some((_, op, answer))), Some(want)) = (held.map(Option::take), self.links.min_replicas(node)) else {
            return Ok(());
        };
        if !self.locks.in_round(lock, round) {
            // The round was decided without this node: its grant is a late reply (a
            // semaphore's extra permits are trimmed), whatever the replicas say.
            return self.cast(now, node, op, lock, round, answer);
        }
        let vote = match acked {
            Ok(n) if n >= i64::from(want.replicas) => return self.cast(now, node, op, lock, round, answer),
            Ok(n) => Vote::Unreplicated { acked: u32::try_from(n.max(0)).unwrap_or(0), wanted: want.replicas },
            Err(e) => {
                let wait = if want.fsync { "WAITAOF" } else { "WAIT" };
                Vote::Error(format!("{wait} for {} replicas failed: {e}", want.replicas))
            }
        };
        if let Some(fault) = vote.fault() {
            self.links.count_fault(node, fault);
        }
        if let OpAnswer::Permits { positions, .. } = &answer {
            // The permits it took do not count: give them back there (the attempt's own
            // cleanup would miss them if other nodes win the round).
            self.release_positions(now, node, lock, positions);
        }
        self.vote(now, lock.index, node.index(), vote);
        Ok(())
    }
}

impl Engine {
    /// Lock `idx` starts a new round (its fence round, an extension, a release; `fencing`:
    /// the fence round) while nodes' semaphore grants of the round that got it still wait for
    /// their `WAIT`: the new round forgets them, so the permits each such node granted and the
    /// lock does not hold are released there now, whatever its replicas say. (After a failed
    /// attempt the attempt's cleanup covers them.)
    pub(super) fn trim_awaiting(&mut self, now: Instant, idx: u32, fencing: bool) {
        let s = &self.locks[idx];
        if !s.permits.on() || !(fencing || matches!(s.phase, Phase::Held(_) | Phase::Extending { .. })) {
            return;
        }
        let lock = self.locks.id(idx);
        let waiting: Vec<(usize, Vec<u16>)> = s
            .round
            .awaiting
            .iter()
            .enumerate()
            .filter_map(|(node, a)| match a {
                Some((_, _, OpAnswer::Permits { positions, .. })) => Some((node, positions.clone())),
                _ => None,
            })
            .collect();
        for (node, positions) in waiting {
            self.trim_late(now, NodeId(node as u16), lock, &positions);
        }
    }
}

/// Whether `answer` to `op` may be a grant, which a node with
/// [`min_replicas`](crate::NodeConfig::min_replicas) holds back until its `WAIT` answers (a
/// fence write-back's counter is a grant or not by the proposal: held back either way).
pub(super) fn may_grant(op: Op, answer: &OpAnswer) -> bool {
    match answer {
        OpAnswer::Permits { .. } => true,
        // A re-entry's acquire answers `-fence` where the owner's fencing token is recorded.
        OpAnswer::Int(v) => *v > 0 || (op == Op::Acquire && *v < 0) || (op == Op::Fence && *v >= 0),
        OpAnswer::Held(_) | OpAnswer::NoScript | OpAnswer::Error(_) => false,
    }
}
