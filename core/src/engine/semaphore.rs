//! The engine's side of a semaphore: the permits a lock holds, and the grants it does not hold,
//! released at once on the nodes that made them (when the quorum settles, when a grant comes
//! late, when a node's replicas refuse it).

use std::time::Instant;

use super::Engine;
use super::cluster::{self, encode_all};
use crate::error::Vote;
use crate::event::{LockId, NodeId};
use crate::lock::{Permits, Phase};
use crate::wire::{OpAnswer, Pending, Request};

impl Engine {
    /// The permits of a semaphore that `lock` holds (numbers `0..limit`, ascending): known from
    /// its [`Event::Acquired`](crate::Event::Acquired) on, and readable after its final event until the id is reused.
    /// `None` for a mutex, an unknown id, or a semaphore not granted yet.
    ///
    /// Each permit is a lock key of its own: a store that a semaphore's holders write to keeps
    /// the highest fencing token it has seen *per permit*, and refuses a write with a lower
    /// token for the same permit (the token strictly increases across the holders of a
    /// permit).
    pub fn permits(&self, lock: LockId) -> Option<&[u16]> {
        let s = self.locks.last(lock)?;
        let held = s.permits.held();
        (s.permits.on() && !held.is_empty()).then_some(held)
    }

    /// The limit of the semaphore `lock` takes permits of; `None` for a mutex or an unknown id.
    /// Readable after the lock's final event until the id is reused.
    pub fn limit(&self, lock: LockId) -> Option<u32> {
        let s = self.locks.last(lock)?;
        s.permits.on().then_some(u32::from(s.permits.limit))
    }
}

impl Engine {
    /// A quorum of nodes granted the same permits of a semaphore: hold them (it no longer waits
    /// on the others), and release every other permit a node granted, on that node, at once. A
    /// node that refused a waiter has it queued: it leaves that queue at once (with any permit
    /// the node hands it meanwhile), or the node would hand the next free permit to a holder and
    /// keep it from the waiters until the reservation ran out.
    pub(super) fn settle_permits(&mut self, now: Instant, idx: u32) {
        self.unregister(idx);
        let q = self.quorum;
        let s = &mut self.locks[idx];
        s.permits.choose(q, &mut s.keys);
        for node in 0..self.links.len() {
            self.send_permit_cleanup(now, node, idx, false, Pending::Cleanup, |p| p.extras(node));
        }
        let lock = self.locks.id(idx);
        for node in std::mem::take(&mut self.locks[idx].permits.stray) {
            self.release_permits(now, NodeId(node), lock, |p| p.unheld());
        }
        let votes = self.locks[idx].round.tally.votes();
        let refused: Vec<usize> = (0..self.links.len()).filter(|&n| votes.get(n) == Some(&Vote::Refused)).collect();
        for node in refused {
            self.leave_queue(now, NodeId(node as u16), idx);
        }
    }

    /// Semaphore holder `idx` releases: a node that still owes the answer to its acquisition
    /// script may yet grant permits the lock does not hold, and the release names only those it holds.
    /// Release the others there too (after the acquisition on the connection, so whatever it
    /// took): the lock's record may be gone by the time that answer comes, with nothing left
    /// to trim it, and the permits would stay taken for a TTL.
    pub(super) fn release_owed(&mut self, now: Instant, idx: u32) {
        let lock = self.locks.id(idx);
        if !self.locks[idx].permits.on() {
            return;
        }
        for node in 0..self.links.len() {
            if self.links.owes_script_grant(node, lock) {
                self.release_permits(now, NodeId(node as u16), lock, |p| p.unheld());
            }
        }
    }

    /// A cleanup of semaphore `lock`'s earlier attempt on `node` was redirected after the
    /// acquisition went on: sent again as it was, it could delete what a later attempt took
    /// (the same token). Once the lock holds its permits, returns the cluster form of a cleanup
    /// of the others, to go on in its place; until then, notes the node for
    /// [`settle_permits`](Self::settle_permits). `None`: nothing to send (a mutex's release
    /// covers every key it took).
    pub(super) fn stray_permits(&mut self, node: NodeId, lock: LockId) -> Option<Box<[u8]>> {
        let s = &mut self.locks[lock.index];
        if !s.permits.on() {
            return None;
        }
        if !matches!(s.phase, Phase::Held(_) | Phase::Extending { .. } | Phase::Releasing { .. }) {
            if !s.permits.stray.contains(&node.0) {
                s.permits.stray.push(node.0);
            }
            return None;
        }
        let s = &self.locks[lock.index];
        let keys = s.permits.unheld();
        if keys.is_empty() {
            return None;
        }
        let call = s.permit_cleanup(false);
        let mut cmd = Vec::new();
        let (bytes, hash_slot) = encode_all(
            true,
            &mut cmd,
            Request { call, keys: keys.into_iter(), token: &s.token, names: s.names(b""), eval: true },
        )?;
        hash_slot.ok().map(|_| bytes.into())
    }

    /// Semaphore holder `idx` leaves the waiter queue of `node` (a node that refused its
    /// attempt, whose reply may come after the decision), passing on every permit it does not
    /// hold that the node handed it meanwhile.
    pub(super) fn leave_queue(&mut self, now: Instant, node: NodeId, idx: u32) {
        if self.locks[idx].queued() {
            self.send_permit_cleanup(now, node.index(), idx, true, Pending::Cleanup, Permits::unheld);
        }
    }

    /// A semaphore's node answered after its round was decided: a grant is trimmed to the
    /// permits the lock holds, and a refusal (which queued the holder there) leaves the queue.
    pub(super) fn late_permits(&mut self, now: Instant, node: NodeId, lock: LockId, answer: &OpAnswer) {
        match answer {
            OpAnswer::Permits { positions, .. } => self.trim_late(now, node, lock, positions),
            // (Settled: held, or in the fence round that follows the grant.)
            OpAnswer::Int(0) | OpAnswer::Held(_)
                if self.locks.get(lock).is_ok_and(|s| {
                    matches!(s.phase, Phase::Held(_) | Phase::Extending { .. } | Phase::Fencing { .. })
                }) =>
            {
                self.leave_queue(now, node, lock.index)
            }
            _ => {}
        }
    }

    /// A semaphore's node granted permits after its round was decided: release those the lock
    /// does not hold, on that node (the lock's release names only the permits it holds).
    pub(super) fn trim_late(&mut self, now: Instant, node: NodeId, lock: LockId, positions: &[u16]) {
        self.release_permits(now, node, lock, |p| p.late_extras(positions));
    }

    /// Release the permits at the 1-based `positions` of `lock`'s order on `node`.
    pub(super) fn release_positions(&mut self, now: Instant, node: NodeId, lock: LockId, positions: &[u16]) {
        self.release_permits(now, node, lock, |p| p.keys_at(positions));
    }

    /// Release, on `node`, the permit keys of semaphore `lock` that `pick` names (nothing for a
    /// mutex, or when it names none).
    fn release_permits(&mut self, now: Instant, node: NodeId, lock: LockId, pick: impl FnOnce(&Permits) -> Vec<&[u8]>) {
        let Some(s) = self.locks.last(lock).filter(|s| s.permits.on()) else { return };
        // While the acquisition goes on, its next attempt may take these very permits again
        // (the same token): a copy redirected on a cluster must not run after it, so it is
        // dropped once superseded (the acquisition's final cleanup or release covers it).
        let pending = if matches!(s.phase, Phase::Acquiring { .. } | Phase::Fencing { .. } | Phase::RetryWait { .. }) {
            Pending::AttemptCleanup { lock }
        } else {
            Pending::Cleanup
        };
        self.send_permit_cleanup(now, node.index(), lock.index, false, pending, pick);
    }

    /// Send `node` the cleanup release of the permit keys of record `idx` that `pick` names
    /// (leaving the queue with `leave`), as `pending`; nothing when it names none.
    fn send_permit_cleanup(
        &mut self,
        now: Instant,
        node: usize,
        idx: u32,
        leave: bool,
        pending: Pending,
        pick: impl FnOnce(&Permits) -> Vec<&[u8]>,
    ) {
        let s = &self.locks[idx];
        let keys = pick(&s.permits);
        if keys.is_empty() {
            return;
        }
        let mut cmd = std::mem::take(&mut self.scratch);
        cmd.clear();
        let request = Request {
            call: s.permit_cleanup(leave),
            keys: keys.into_iter(),
            token: &s.token,
            names: s.names(b""),
            eval: true,
        };
        let form = encode_all(self.links.any_cluster(), &mut cmd, request);
        let _ = self.links.send(now, node, cluster::cmd(&cmd, &form), pending);
        self.scratch = cmd;
    }
}
