//! The table of lock records: allocation and reuse, lookup by id, the count of active locks.

use std::ops::{Index, IndexMut};
use std::time::Instant;

use crate::error::Misuse;
use crate::event::LockId;
use crate::lock::{Phase, Record};

/// Every lock record; a record is reused after its lock's final event, so steady-state cycles do
/// not allocate.
#[derive(Debug, Default)]
pub(crate) struct Locks {
    records: Vec<Record>,
    free: Vec<u32>,
    active: usize,
}

impl Locks {
    /// Locks acquiring, held or releasing.
    pub(crate) fn active(&self) -> usize {
        self.active
    }

    /// Records allocated: in use or kept for reuse.
    pub(crate) fn capacity(&self) -> usize {
        self.records.len()
    }

    /// A record for a new lock (a free one, or a new one); it counts as active.
    pub(crate) fn take(&mut self, now: Instant) -> u32 {
        self.active += 1;
        self.free.pop().unwrap_or_else(|| {
            self.records.push(Record::new(now));
            (self.records.len() - 1) as u32
        })
    }

    /// Record `idx`'s lock is gone (its phase is already `Free`): the record can be reused.
    pub(crate) fn put_back(&mut self, idx: u32) {
        self.free.push(idx);
        self.active -= 1;
    }

    /// The live record of `lock`.
    pub(crate) fn get(&self, lock: LockId) -> Result<&Record, Misuse> {
        match self.records.get(lock.index as usize) {
            Some(s) if s.generation == lock.generation && !matches!(s.phase, Phase::Free | Phase::Draining { .. }) => {
                Ok(s)
            }
            _ => Err(Misuse::UnknownLock(lock)),
        }
    }

    /// The record of `lock`, in any phase, as long as it was not reused (its last round's votes
    /// stay readable after its final event).
    pub(crate) fn last(&self, lock: LockId) -> Option<&Record> {
        self.records.get(lock.index as usize).filter(|s| s.generation == lock.generation)
    }

    /// Every live lock (acquiring, held or releasing) with its id, in record order.
    pub(crate) fn live(&self) -> impl Iterator<Item = (LockId, &Record)> {
        (0..self.records.len() as u32)
            .map(|i| (self.id(i), &self.records[i as usize]))
            .filter(|(id, _)| self.get(*id).is_ok())
    }

    /// The id of the lock in record `idx`.
    pub(crate) fn id(&self, idx: u32) -> LockId {
        LockId { index: idx, generation: self.records[idx as usize].generation }
    }

    /// Whether `lock` is still in round `round` (a reply of an older round is ignored). A
    /// draining release still takes its round's replies, though its id is no longer live.
    pub(crate) fn in_round(&self, lock: LockId, round: u32) -> bool {
        self.records
            .get(lock.index as usize)
            .is_some_and(|s| s.generation == lock.generation && s.round.id == round && !matches!(s.phase, Phase::Free))
    }
}

impl Index<u32> for Locks {
    type Output = Record;

    fn index(&self, idx: u32) -> &Record {
        &self.records[idx as usize]
    }
}

impl IndexMut<u32> for Locks {
    fn index_mut(&mut self, idx: u32) -> &mut Record {
        &mut self.records[idx as usize]
    }
}
