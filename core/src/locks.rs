//! The table of lock slots: allocation and reuse, lookup by id, the count of active locks.

use std::ops::{Index, IndexMut};
use std::time::Instant;

use crate::error::Misuse;
use crate::event::LockId;
use crate::lock::{Phase, Slot};

/// Every lock slot; a slot is reused after its lock's final event, so steady-state cycles do
/// not allocate.
#[derive(Debug, Default)]
pub(crate) struct Locks {
    slots: Vec<Slot>,
    free: Vec<u32>,
    active: usize,
}

impl Locks {
    /// Locks acquiring, held or releasing.
    pub(crate) fn active(&self) -> usize {
        self.active
    }

    /// Slots allocated: in use or kept for reuse.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// A slot for a new lock (a free one, or a new one); it counts as active.
    pub(crate) fn take(&mut self, now: Instant) -> u32 {
        self.active += 1;
        self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::new(now));
            (self.slots.len() - 1) as u32
        })
    }

    /// Slot `idx`'s lock is gone (its phase is already `Free`): the slot can be reused.
    pub(crate) fn put_back(&mut self, idx: u32) {
        self.free.push(idx);
        self.active -= 1;
    }

    /// The live slot of `lock`.
    pub(crate) fn get(&self, lock: LockId) -> Result<&Slot, Misuse> {
        match self.slots.get(lock.slot as usize) {
            Some(s) if s.generation == lock.generation && !matches!(s.phase, Phase::Free | Phase::Draining { .. }) => {
                Ok(s)
            }
            _ => Err(Misuse::UnknownLock(lock)),
        }
    }

    /// The slot of `lock`, in any phase, as long as it was not reused (its last round's votes
    /// stay readable after its final event).
    pub(crate) fn last(&self, lock: LockId) -> Option<&Slot> {
        self.slots.get(lock.slot as usize).filter(|s| s.generation == lock.generation)
    }

    /// Every live lock (acquiring, held or releasing) with its id, in slot order.
    pub(crate) fn live(&self) -> impl Iterator<Item = (LockId, &Slot)> {
        (0..self.slots.len() as u32)
            .map(|i| (self.id(i), &self.slots[i as usize]))
            .filter(|(id, _)| self.get(*id).is_ok())
    }

    /// The id of the lock in slot `idx`.
    pub(crate) fn id(&self, idx: u32) -> LockId {
        LockId { slot: idx, generation: self.slots[idx as usize].generation }
    }

    /// Whether `lock` is still in round `round` (a reply of an older round is ignored). A
    /// draining release still takes its round's replies, though its id is no longer live.
    pub(crate) fn in_round(&self, lock: LockId, round: u32) -> bool {
        self.slots
            .get(lock.slot as usize)
            .is_some_and(|s| s.generation == lock.generation && s.round.id == round && !matches!(s.phase, Phase::Free))
    }
}

impl Index<u32> for Locks {
    type Output = Slot;

    fn index(&self, idx: u32) -> &Slot {
        &self.slots[idx as usize]
    }
}

impl IndexMut<u32> for Locks {
    fn index_mut(&mut self, idx: u32) -> &mut Slot {
        &mut self.slots[idx as usize]
    }
}
