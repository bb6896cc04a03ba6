//! A held lock: [`Guard`].

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use redlease_client::adapter::{Router, oneshot, spans};
use redlease_client::{Error, Lease, LockId, ReleaseReport};
use redlease_core::Engine;

use crate::shared::{Keeper, Shared, State, Then};

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

    /// Extend the lock to `ttl` from now on every node; returns the new deadline.
    ///
    /// Succeeds iff a quorum extended it in time. A failed extension never deletes the lock
    /// ([`ExtendError`](crate::ExtendError) says whether it is gone or still valid until the
    /// old deadline at best).
    pub fn extend(&mut self, ttl: Duration) -> Result<Instant, Error> {
        let span = spans::extend(&self.shared.name, self.lease.resource());
        let _entered = span.enter();
        self.ask(false, |router, engine, now, lock, reply| router.extend(engine, now, lock, ttl, reply, span.clone()))
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
        self.ask(false, |router, engine, now, lock, reply| router.downgrade(engine, now, lock, reply, span.clone()))
    }

    /// Release the lock on every node and report what they said: released, not held (expired
    /// or taken over) or unreachable ([`ReleaseOutcome`](crate::ReleaseOutcome)). Nothing of
    /// another holder is ever deleted.
    #[doc(alias = "unlock")]
    pub fn release(mut self) -> Result<ReleaseReport, Error> {
        self.released = true;
        let span = spans::release(&self.shared.name, self.lease.resource());
        let _entered = span.enter();
        self.ask(true, |router, engine, now, lock, reply| router.release(engine, now, lock, Some(reply), span.clone()))
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
        drop(
            self.command(!on, Then::Return, |router, engine, now, lock| router.set_auto_extend(engine, now, lock, on)),
        );
    }

    /// Issue `command` for this lock (the router, the engine, the time, the lock) and get it
    /// written as [`Shared::command`] does for a caller that does `then`; with `uncount`, first
    /// stop counting the lock among the auto-extended ones.
    /// Returns the state, still locked; when this was the last auto-extended lock, only once
    /// the extension thread has ended (it writes the command out as it ends).
    fn command(
        &self,
        uncount: bool,
        then: Then,
        command: impl FnOnce(&mut Router, &mut Engine, Instant, LockId),
    ) -> MutexGuard<'_, State> {
        let mut st = self.shared.lock();
        let keeper = if uncount { self.uncount_auto(&mut st) } else { None };
        self.shared.command(&mut st, then, |router, engine, now| command(router, engine, now, self.lease.id()));
        if let Some(keeper) = keeper {
            drop(st);
            self.shared.stop_keeper(keeper);
            st = self.shared.lock();
        }
        st
    }

    /// [`command`](Self::command) with a reply, then wait for the answer (driving the loop
    /// whenever no other thread does).
    fn ask<T>(
        &self,
        uncount: bool,
        command: impl FnOnce(&mut Router, &mut Engine, Instant, LockId, oneshot::Sender<Result<T, Error>>),
    ) -> Result<T, Error> {
        let (reply, rx) = oneshot::channel();
        let st =
            self.command(uncount, Then::Wait, |router, engine, now, lock| command(router, engine, now, lock, reply));
        self.shared.wait_reply(st, Some(self.lease.id()), &rx)?
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
        let span = spans::release(&self.shared.name, self.lease.resource());
        drop(
            self.command(true, Then::Return, |router, engine, now, lock| router.release(engine, now, lock, None, span)),
        );
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard").field("lease", &self.lease).finish_non_exhaustive()
    }
}
