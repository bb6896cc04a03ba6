//! The engine's side of a reader-writer lock: a write lock's downgrade, and what a downgrade
//! that did not make the lock a read lock leaves behind.

use std::time::Instant;

use super::Engine;
use super::cluster::{self, encode_all};
use crate::error::{ExtendError, LostReason, Misuse};
use crate::event::{Event, LockId};
use crate::lock::Phase;
use crate::options::ttl_to_send;
use crate::wire::{self, Pending, Request};

impl Engine {
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
        let idx = lock.index;
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
        let form = encode_all(
            self.links.any_cluster(),
            &mut cmd,
            Request { call, keys: s.keys.iter(), token: &s.token, names: s.names(b""), eval: true },
        );
        for node in 0..self.links.len() {
            let _ = self.links.send(now, node, cluster::cmd(&cmd, &form), Pending::Cleanup);
        }
        self.scratch = cmd;
    }
}
