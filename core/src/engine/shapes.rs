//! The engine's side of the lock shapes beyond the mutex: a semaphore's slots (which it
//! holds, the grants it does not hold released at once) and a read lock (a write lock's
//! downgrade, and what a downgrade no quorum confirmed leaves behind).

use std::time::Instant;

use super::Engine;
use super::cluster::{self, encode_all};
use crate::error::Vote;
use crate::error::{ExtendError, LostReason, Misuse};
use crate::event::{Event, LockId, NodeId};
use crate::lock::{Permits, Phase};
use crate::options::ttl_to_send;
use crate::wire::{self, OpAnswer, Pending};

impl Engine {
    /// The slots of a semaphore that `lock` holds (numbers `0..limit`, ascending): known from
    /// its [`Event::Acquired`] on, and readable after its final event until the id is reused.
    /// `None` for a mutex, an unknown id, or a semaphore not granted yet.
    ///
    /// Each slot is a lock key of its own: a store that a semaphore's holders write to keeps
    /// the highest fencing token it has seen *per slot*, and refuses a write with a lower
    /// token for the same slot (the token strictly increases across the holders of a slot).
    pub fn permits(&self, lock: LockId) -> Option<&[u16]> {
        let s = self.locks.last(lock)?;
        let slots = s.permits.slots();
        (s.permits.on() && !slots.is_empty()).then_some(slots)
    }

    /// The limit of the semaphore `lock` takes permits of; `None` for a mutex or an unknown id.
    /// Readable after the lock's final event until the id is reused.
    pub fn limit(&self, lock: LockId) -> Option<u32> {
        let s = self.locks.last(lock)?;
        s.permits.on().then_some(u32::from(s.permits.limit))
    }

    /// Turn a held write lock (a plain lock of one resource) into a read lock, atomically on
    /// each node, with its acquire TTL from now: it then shares the resource with other
    /// readers ([`LockOptions::shared`](crate::LockOptions::shared)), and writers waiting for it are told.
    ///
    /// **From the call on, the lock is no longer exclusive**: a node that has applied the
    /// downgrade admits readers before the others have, so stop writing before calling it.
    ///
    /// The outcome arrives as [`Event::Extended`] (the read lock's deadline) or
    /// [`Event::ExtendFailed`]; a downgrade that no quorum confirmed loses the lock
    /// ([`Event::Lost`]): some nodes may hold it as a reader and others as a writer. Misuse for
    /// a read lock, a semaphore or a lock of several resources.
    pub fn downgrade(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        let s = self.locks.get(lock)?;
        if s.shared || s.permits.on() || s.keys.len() != 1 {
            let reason = "only a write lock of one resource downgrades";
            return Err(Misuse::Permits {
                limit: s.permits.on().then_some(u32::from(s.permits.limit)),
                permits: 1,
                reason,
            });
        }
        let ttl = ttl_to_send(s.ttl, self.config.drift_factor)?;
        let idx = lock.slot;
        let hold = match &self.locks[idx].phase {
            // An automatic extension in flight is overtaken: the downgrade extends too, and goes
            // out behind it on every connection.
            Phase::Held(hold) | Phase::Extending { hold, manual: false, downgrade: false, .. } => *hold,
            Phase::Extending { .. } | Phase::Releasing { .. } => return Err(Misuse::Busy(lock)),
            _ => return Err(Misuse::NotAcquired(lock)),
        };
        if self.extend_fails(now, lock, &hold) {
            return Ok(());
        }
        self.start_extend_as(now, idx, ttl, true, true);
        self.arm(idx);
        Ok(())
    }

    /// Whether `lock` is a read lock (taken with [`LockOptions::shared`](crate::LockOptions::shared), or downgraded and
    /// confirmed; a downgrade in flight already makes it non-exclusive, see
    /// [`downgrade`](Self::downgrade)).
    pub fn is_shared(&self, lock: LockId) -> bool {
        self.locks.last(lock).is_some_and(|s| s.shared)
    }
}

impl Engine {
    /// A quorum of nodes granted the same slots of a semaphore: hold them (it no longer waits
    /// on the others), and release every other slot a node granted, on that node, at once. A
    /// node that refused a waiter has it queued: it leaves that queue at once (with any slot
    /// the node hands it meanwhile), or the node would hand the next free slot to a holder and
    /// keep it from the waiters until the reservation ran out.
    pub(super) fn settle_permits(&mut self, now: Instant, idx: u32) {
        self.unregister(idx);
        let q = self.quorum;
        let s = &mut self.locks[idx];
        s.permits.choose(q, &mut s.keys);
        let s = &self.locks[idx];
        let call = wire::Call::Release { leave: false, reserve_ms: s.reserve_ms, want: s.permits.want.max(1) };
        let names = s.names(b"");
        let mut cmd = std::mem::take(&mut self.scratch);
        for node in 0..self.links.len() {
            let extras = s.permits.extras(node);
            if extras.is_empty() {
                continue;
            }
            cmd.clear();
            let form = encode_all(self.links.any_cluster(), &mut cmd, call, extras.into_iter(), &s.token, names, true);
            let _ = self.links.send(now, node, cluster::cmd(&cmd, &form), Pending::Cleanup);
        }
        self.scratch = cmd;
        let votes = self.locks[idx].round.tally.votes();
        let refused: Vec<usize> = (0..self.links.len()).filter(|&n| votes.get(n) == Some(&Vote::Refused)).collect();
        for node in refused {
            self.leave_queue(now, NodeId(node as u16), idx);
        }
    }

    /// Semaphore holder `idx` leaves the waiter queue of `node` (a node that refused its
    /// attempt, whose reply may come after the decision), passing on every slot it does not
    /// hold that the node handed it meanwhile.
    pub(super) fn leave_queue(&mut self, now: Instant, node: NodeId, idx: u32) {
        let s = &self.locks[idx];
        let unheld = s.permits.unheld();
        if !s.queued() || unheld.is_empty() {
            return;
        }
        let call = wire::Call::Release { leave: true, reserve_ms: s.reserve_ms, want: s.permits.want.max(1) };
        let mut cmd = std::mem::take(&mut self.scratch);
        cmd.clear();
        let form =
            encode_all(self.links.any_cluster(), &mut cmd, call, unheld.into_iter(), &s.token, s.names(b""), true);
        let _ = self.links.send(now, node.index(), cluster::cmd(&cmd, &form), Pending::Cleanup);
        self.scratch = cmd;
    }

    /// A semaphore's node answered after its round was decided: a grant is trimmed to the
    /// slots the lock holds, and a refusal (which queued the holder there) leaves the queue.
    pub(super) fn late_permits(&mut self, now: Instant, node: NodeId, lock: LockId, answer: &OpAnswer) {
        match answer {
            OpAnswer::Slots { positions, .. } => self.trim_late(now, node, lock, positions),
            OpAnswer::Int(0)
                if self.locks.get(lock).is_ok_and(|s| matches!(s.phase, Phase::Held(_) | Phase::Extending { .. })) =>
            {
                self.leave_queue(now, node, lock.slot)
            }
            _ => {}
        }
    }

    /// A semaphore's node granted slots after its round was decided: release those the lock
    /// does not hold, on that node (the lock's release names only the slots it holds).
    pub(super) fn trim_late(&mut self, now: Instant, node: NodeId, lock: LockId, positions: &[u16]) {
        self.release_slots(now, node, lock, |p| p.late_extras(positions));
    }

    /// Release the slots at the 1-based `positions` of `lock`'s order on `node`.
    pub(super) fn release_positions(&mut self, now: Instant, node: NodeId, lock: LockId, positions: &[u16]) {
        self.release_slots(now, node, lock, |p| p.keys_at(positions));
    }

    /// Release, on `node`, the slot keys of semaphore `lock` that `pick` names (nothing for a
    /// mutex, or when it names none).
    fn release_slots(&mut self, now: Instant, node: NodeId, lock: LockId, pick: impl FnOnce(&Permits) -> Vec<&[u8]>) {
        let Some(s) = self.locks.last(lock).filter(|s| s.permits.on()) else { return };
        let keys = pick(&s.permits);
        if keys.is_empty() {
            return;
        }
        let call = wire::Call::Release { leave: false, reserve_ms: s.reserve_ms, want: s.permits.want.max(1) };
        let mut cmd = std::mem::take(&mut self.scratch);
        cmd.clear();
        let form = encode_all(self.links.any_cluster(), &mut cmd, call, keys.into_iter(), &s.token, s.names(b""), true);
        // While the acquisition goes on, its next attempt may take these very slots again
        // (the same token): a copy redirected on a cluster must not run after it, so it is
        // dropped once superseded (the acquisition's final cleanup or release covers it).
        let pending = if matches!(s.phase, Phase::Acquiring { .. } | Phase::Fencing { .. } | Phase::RetryWait { .. }) {
            Pending::AttemptCleanup { lock }
        } else {
            Pending::Cleanup
        };
        let _ = self.links.send(now, node.index(), cluster::cmd(&cmd, &form), pending);
        self.scratch = cmd;
    }

    /// A downgrade that no quorum confirmed: the lock is lost.
    pub(super) fn downgrade_failed(&mut self, now: Instant, idx: u32, manual: bool) {
        let lock = self.locks.id(idx);
        let s = &self.locks[idx];
        let error =
            ExtendError::Unconfirmed { extended: s.round.tally.yes, nodes: self.links.len(), quorum: self.quorum };
        let already = self.locks[idx].extension_refused(now);
        self.leave_readers(now, idx);
        if manual {
            self.events.push_back(Event::ExtendFailed { lock, error });
        }
        if !already {
            self.events.push_back(Event::Lost { lock, reason: LostReason::Refused });
        }
    }

    /// A downgrade that may have applied on some nodes did not make the lock a read lock
    /// (no quorum confirmed it, a majority refused it, or it was confirmed after the lock's
    /// validity ran out): leave the readers wherever it went through (the last reader there
    /// deletes the key); where it did not, the key is still the write lock's, and the lock's
    /// release deletes it.
    pub(super) fn leave_readers(&mut self, now: Instant, idx: u32) {
        let s = &self.locks[idx];
        let mut cmd = std::mem::take(&mut self.scratch);
        cmd.clear();
        let call = wire::Call::ReadRelease { leave: false, reserve_ms: 0 };
        let form = encode_all(self.links.any_cluster(), &mut cmd, call, s.keys.iter(), &s.token, s.names(b""), true);
        for node in 0..self.links.len() {
            let _ = self.links.send(now, node, cluster::cmd(&cmd, &form), Pending::Cleanup);
        }
        self.scratch = cmd;
    }
}
