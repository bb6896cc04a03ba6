//! The locks' timer table: one wake-up time per lock record, and a heap to find the earliest.
//!
//! Entries are invalidated lazily: a record's wake-up may move later without touching the heap
//! (its live entry is re-queued at the new time when it surfaces), and moving it earlier
//! queues a new entry; superseded entries are skipped, and pruned when they pile up.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

#[derive(Clone, Copy, Debug, Default)]
struct Timer {
    /// When the record next needs `handle_timeout`.
    wake: Option<Instant>,
    /// The time of the record's live entry in the heap; never after `wake`. Entries of other
    /// times are stale.
    queued: Option<Instant>,
}

/// One timer per lock record.
#[derive(Debug, Default)]
pub(crate) struct TimerTable {
    timers: Vec<Timer>,
    heap: BinaryHeap<Reverse<(Instant, u32)>>,
    /// Records with a live entry.
    live: usize,
}

impl TimerTable {
    /// Set record `idx`'s wake-up (`None`: none). Queues a heap entry only if it is earlier
    /// than the record's live one.
    pub(crate) fn set(&mut self, idx: u32, wake: Option<Instant>) {
        let i = idx as usize;
        if i >= self.timers.len() {
            self.timers.resize(i + 1, Timer::default());
        }
        let t = &mut self.timers[i];
        t.wake = wake;
        let Some(w) = wake else { return };
        if t.queued.is_some_and(|q| q <= w) {
            return;
        }
        if t.queued.is_none() {
            self.live += 1;
        }
        t.queued = Some(w);
        self.heap.push(Reverse((w, idx)));
        // Superseded entries are dropped lazily; keep the heap from growing without bound.
        if self.heap.len() > 64 && self.heap.len() > 4 * self.live {
            let timers = &self.timers;
            self.heap.retain(|Reverse((w, i))| timers[*i as usize].queued == Some(*w));
        }
    }

    /// The earliest wake-up of any record (stale entries are dropped on the way).
    pub(crate) fn next(&mut self) -> Option<Instant> {
        while let Some(&Reverse((when, idx))) = self.heap.peek() {
            let t = &mut self.timers[idx as usize];
            if t.queued == Some(when) {
                match t.wake {
                    Some(w) if w == when => return Some(when),
                    // The wake-up moved later since this entry was queued.
                    Some(w) => {
                        t.queued = Some(w);
                        self.heap.pop();
                        self.heap.push(Reverse((w, idx)));
                        continue;
                    }
                    None => {
                        t.queued = None;
                        self.live -= 1;
                    }
                }
            }
            self.heap.pop();
        }
        None
    }

    /// A record whose wake-up is due at `now`, if any; its wake-up is cleared (the caller
    /// handles it, then sets the next one).
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<u32> {
        while let Some(&Reverse((when, idx))) = self.heap.peek() {
            if when > now {
                return None;
            }
            self.heap.pop();
            let t = &mut self.timers[idx as usize];
            if t.queued != Some(when) {
                continue;
            }
            t.queued = None;
            self.live -= 1;
            match t.wake {
                Some(w) if w <= now => {
                    t.wake = None;
                    return Some(idx);
                }
                // Moved later (or away): queue the live time again.
                wake => self.set(idx, wake),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn earliest_first_and_moves_are_honoured() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut t = TimerTable::default();
        t.set(0, Some(ms(30)));
        t.set(1, Some(ms(10)));
        t.set(2, Some(ms(20)));
        assert_eq!(t.next(), Some(ms(10)));
        t.set(1, Some(ms(40))); // later: the entry at 10 is re-queued when it surfaces
        t.set(2, None);
        assert_eq!(t.next(), Some(ms(30)));
        assert_eq!(t.pop_due(ms(29)), None);
        assert_eq!(t.pop_due(ms(35)), Some(0));
        assert_eq!(t.pop_due(ms(35)), None);
        t.set(0, Some(ms(5))); // earlier than anything
        assert_eq!(t.pop_due(ms(35)), Some(0));
        assert_eq!(t.next(), Some(ms(40)));
        assert_eq!(t.pop_due(ms(40)), Some(1));
        assert_eq!(t.next(), None);
    }

    #[test]
    fn stale_entries_do_not_pile_up() {
        let t0 = Instant::now();
        let mut t = TimerTable::default();
        for i in 0..10_000u64 {
            // Always earlier: every call queues a new entry.
            t.set(0, Some(t0 + Duration::from_secs(1_000_000 - i)));
        }
        assert!(t.heap.len() <= 64, "{}", t.heap.len());
    }
}
