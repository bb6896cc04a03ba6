//! What an engine retains, counted: lock records, requests awaiting replies, unsent bytes,
//! cleanups kept for a redirect, waiters, wake channels and subscriptions, timers and events.
//! An idle engine (no lock in use, every reply read, every event polled) holds none of them
//! but the timers of its links' schedules, so a long-lived client can watch it stay flat.

use std::fmt;

/// The size of what an engine retains; see [`Engine::footprint`](crate::Engine::footprint).
///
/// Each figure is bounded: locks by the caller's concurrent locks, requests per link by
/// an in-flight cap, unsent bytes per link by a byte cap, wake channels by a channel cap.
/// After the caller's locks are released and their replies read, every figure but
/// [`lock_records`](Self::lock_records) is back to zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Footprint {
    /// Locks in use: acquiring, held, extending, releasing, or a release waiting for its
    /// last replies.
    pub locks: usize,
    /// Lock records allocated (in use or kept for reuse): the most locks ever in use at
    /// once.
    pub lock_records: usize,
    /// Requests sent or queued on the links whose replies have not been read.
    pub pending: usize,
    /// Bytes queued on the links and not yet taken by the driver.
    pub unsent: usize,
    /// Cleanups to Redis Cluster nodes kept to be sent again after a redirect.
    pub kept: usize,
    /// The bytes of those kept cleanups.
    pub kept_bytes: usize,
    /// Acquisitions registered as waiters on a wake channel, elections watched by observers
    /// and observers' reads in flight.
    pub waiters: usize,
    /// Wake channels that some waiter needs.
    pub channels: usize,
    /// Subscriptions the links hold, summed over links.
    pub subscriptions: usize,
    /// Events not yet polled.
    pub events: usize,
}

impl Footprint {
    /// Whether nothing is retained but lock records kept for reuse: what an engine with no
    /// lock in use, every reply read and every event polled holds.
    pub fn is_idle(&self) -> bool {
        let Footprint {
            locks,
            lock_records: _,
            pending,
            unsent,
            kept,
            kept_bytes,
            waiters,
            channels,
            subscriptions,
            events,
        } = *self;
        [locks, pending, unsent, kept, kept_bytes, waiters, channels, subscriptions, events].iter().all(|&n| n == 0)
    }
}

impl fmt::Display for Footprint {
    /// One line: every figure by name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} lock(s) in use of {} record(s), {} request(s) pending, {} byte(s) unsent, {} cleanup(s) kept \
             ({} bytes), {} waiter(s) on {} channel(s), {} subscription(s), {} event(s) unpolled",
            self.locks,
            self.lock_records,
            self.pending,
            self.unsent,
            self.kept,
            self.kept_bytes,
            self.waiters,
            self.channels,
            self.subscriptions,
            self.events
        )
    }
}
