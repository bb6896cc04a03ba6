//! A held lock: [`Guard`].

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redlease_client::adapter::{oneshot, spans};
use redlease_client::{Error, Lease, ReleaseReport};

use crate::shared::{Keeper, Shared, State};

/// A held lock: its [`Lease`] (every getter: `fence`, `valid_until`, `lost`, ... through
/// `Deref`) plus the client it came from. Dropping it without [`release`](Guard::release)
/// releases it in the background (the release is sent at once; its reply is read the next
/// time the loop is driven).
///
/// A guard is `Send`: it can be moved to another thread, and outlives the
/// [`Client`](crate::Client) handle it came from (it keeps the connections open).
pub struct Guard {
    lease: Lease,
    shared: Arc<Shared>,
    released: bool,
    /// Counted among the client's auto-extended locks (its extension thread runs for it).
    auto: AtomicBool,
}

impl Guard {
    pub(crate) fn new(lease: Lease, shared: Arc<Shared>) -> Self {
        Guard { lease, shared, released: false, auto: AtomicBool::new(false) }
    }

    /// Count this lock among the auto-extended ones, starting the client's extension thread
    /// if none runs. Fails only if the thread cannot be started.
    pub(crate) fn count_auto(&self) -> Result<(), Error> {
        if self.auto.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let mut st = self.shared.lock();
        let counted = self.shared.auto_locked(&mut st);
        if counted.is_err() {
            self.auto.store(false, Ordering::Release);
        }
        counted
    }

    /// No longer count this lock among the auto-extended ones; the extension thread ends
    /// when none is left.
    /// Returns the extension thread to stop when this was the last auto-extended lock.
    fn uncount_auto(&self, st: &mut State) -> Option<Keeper> {
        if self.auto.swap(false, Ordering::AcqRel) { Shared::auto_unlocked(st) } else { None }
    }

    /// The holder's view of the lock (also reached through `Deref`).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Extend the lock to `ttl` from now on every node; returns the new validity deadline.
    ///
    /// A failed extension deletes nothing: [`ExtendError::Lost`](crate::ExtendError::Lost)
    /// means a majority no longer holds our token, `Unconfirmed` that too few nodes answered
    /// (the old deadline still stands), `Expired` that the validity had already run out.
    pub fn extend(&mut self, ttl: Duration) -> Result<Instant, Error> {
        let span = spans::extend(&self.shared.name, self.lease.resource());
        let _entered = span.enter();
        let (reply, rx) = oneshot::channel();
        let lock = self.lease.id();
        let mut st = self.shared.lock();
        let now = Instant::now();
        let State { driver, router, .. } = &mut *st;
        router.extend(driver.engine_mut(), now, lock, ttl, reply, span.clone());
        self.shared.after_command(&mut st, now);
        self.shared.wait_for(st, Some(lock), |_| rx.try_recv())?.map_err(|_| Error::Closed)?
    }

    /// Turn this write lock into a read lock, atomically on each node, for its TTL from now;
    /// returns the read lock's deadline. Writers still wait; other readers may join at once —
    /// from the call on, the lock is no longer exclusive: stop writing before calling it.
    ///
    /// A downgrade that no quorum confirmed loses the lock (its lost signal fires): some nodes
    /// may hold it as a reader and others as a writer. Refused ([`Misuse`](crate::Misuse)) for
    /// a read lock, a semaphore or several resources.
    pub fn downgrade(&mut self) -> Result<Instant, Error> {
        let span = spans::downgrade(&self.shared.name, self.lease.resource());
        let _entered = span.enter();
        let (reply, rx) = oneshot::channel();
        let lock = self.lease.id();
        let mut st = self.shared.lock();
        let now = Instant::now();
        let State { driver, router, .. } = &mut *st;
        router.downgrade(driver.engine_mut(), now, lock, reply, span.clone());
        self.shared.after_command(&mut st, now);
        self.shared.wait_for(st, Some(lock), |_| rx.try_recv())?.map_err(|_| Error::Closed)?
    }

    /// Release the lock on every node and report what they said: `Released`, `NotHeld`
    /// (it had expired or been taken over; nothing of another holder was deleted) or
    /// `Unreachable` (too few answers; keys left behind expire with their TTL).
    #[doc(alias = "unlock")]
    pub fn release(mut self) -> Result<ReleaseReport, Error> {
        self.released = true;
        let span = spans::release(&self.shared.name, self.lease.resource());
        let _entered = span.enter();
        let (reply, rx) = oneshot::channel();
        let lock = self.lease.id();
        let mut st = self.shared.lock();
        let keeper = self.uncount_auto(&mut st);
        let now = Instant::now();
        let State { driver, router, .. } = &mut *st;
        router.release(driver.engine_mut(), now, lock, Some(reply), span.clone());
        self.shared.after_command(&mut st, now);
        if let Some(keeper) = keeper {
            // The release is queued: the keeper writes it out as it ends.
            drop(st);
            self.shared.stop_keeper(keeper);
            st = self.shared.lock();
        }
        self.shared.wait_for(st, Some(lock), |_| rx.try_recv())?.map_err(|_| Error::Closed)?
    }

    /// Turn automatic extension (about every `ttl / 3`) on or off; the client's extension
    /// thread runs while any lock has it on (see
    /// [auto-extension](crate::Client#auto-extension)). Should the operating system refuse
    /// that thread, the lock is extended only while the loop is driven (any blocking call,
    /// [`Client::run_for`](crate::Client::run_for)); `lock_with` reports that refusal as an
    /// error instead.
    pub fn set_auto_extend(&self, on: bool) {
        if on {
            // Refused: see above.
            let _ = self.count_auto();
        }
        let mut st = self.shared.lock();
        let keeper = if on { None } else { self.uncount_auto(&mut st) };
        let now = Instant::now();
        let State { driver, router, .. } = &mut *st;
        router.set_auto_extend(driver.engine_mut(), now, self.lease.id(), on);
        self.shared.after_command(&mut st, now);
        drop(st);
        if let Some(keeper) = keeper {
            self.shared.stop_keeper(keeper);
        }
    }
}

impl Deref for Guard {
    type Target = Lease;

    fn deref(&self) -> &Lease {
        &self.lease
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let mut st = self.shared.lock();
        let keeper = self.uncount_auto(&mut st);
        let now = Instant::now();
        let State { driver, router, .. } = &mut *st;
        let span = spans::release(&self.shared.name, self.lease.resource());
        router.release(driver.engine_mut(), now, self.lease.id(), None, span);
        self.shared.after_command(&mut st, now);
        drop(st);
        if let Some(keeper) = keeper {
            self.shared.stop_keeper(keeper);
        }
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard").field("lease", &self.lease).finish_non_exhaustive()
    }
}
