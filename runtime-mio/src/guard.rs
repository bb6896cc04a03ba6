//! A held lock ([`Guard`]) and its lost-lock signal ([`LostSignal`]).

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use redlease_core::{LockId, LostReason, Misuse, ReleaseReport};

use crate::Error;
use crate::client::{Acquired, ExtendSlot, Shared};

/// A held lock. Dropping it without [`release`](Guard::release) releases it in the background
/// (the release is sent at once; its reply is read the next time the loop is driven).
///
/// A guard is `Send`: it can be moved to another thread, and outlives the [`Client`] handle
/// it came from (it keeps the connections open).
///
/// [`Client`]: crate::Client
pub struct Guard {
    shared: Arc<Shared>,
    lock: LockId,
    resources: Vec<String>,
    token: String,
    fence: Option<u64>,
    first_valid_until: Instant,
    lost: Arc<OnceLock<LostReason>>,
    released: bool,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("lock", &self.lock)
            .field("resources", &self.resources)
            .field("fence", &self.fence)
            .field("lost", &self.lost.get())
            .finish()
    }
}

impl Guard {
    pub(crate) fn new(
        shared: Arc<Shared>,
        lock: LockId,
        resources: Vec<String>,
        token: String,
        acquired: Acquired,
        lost: Arc<OnceLock<LostReason>>,
    ) -> Self {
        Guard {
            shared,
            lock,
            resources,
            token,
            fence: acquired.fence,
            first_valid_until: acquired.valid_until,
            lost,
            released: false,
        }
    }

    /// The (first) resource this lock holds.
    pub fn resource(&self) -> &str {
        &self.resources[0]
    }

    /// All resources this lock holds, the first one first.
    pub fn resources(&self) -> &[String] {
        &self.resources
    }

    /// The lock's token: 40 hex characters from 20 random bytes, the value stored on the nodes.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The lock is valid until this instant of the monotonic clock (moved on by every
    /// successful extension, automatic or not). Stop relying on the lock before it.
    pub fn valid_until(&self) -> Instant {
        let st = self.shared.lock();
        st.locks.get(&self.lock).and_then(|e| e.valid_until).unwrap_or(self.first_valid_until)
    }

    /// The fencing token, if it was asked for ([`LockBuilder::fencing`](crate::LockBuilder::fencing)).
    pub fn fence(&self) -> Option<u64> {
        self.fence
    }

    /// The engine's id of this lock.
    pub fn id(&self) -> LockId {
        self.lock
    }

    /// Whether the lock is known to be lost (an extension was refused or the validity ran out).
    pub fn is_lost(&self) -> bool {
        self.lost.get().is_some()
    }

    /// The signal that fires when the lock is lost.
    pub fn lost(&self) -> LostSignal {
        LostSignal { shared: Arc::clone(&self.shared), flag: Arc::clone(&self.lost) }
    }

    /// Extend the lock to `ttl` from now on every node; returns the new validity deadline.
    ///
    /// A failed extension deletes nothing: [`ExtendError::Lost`](redlease_core::ExtendError::Lost)
    /// means a majority no longer holds our token, `Unconfirmed` that too few nodes answered
    /// (the old deadline still stands), `Expired` that the validity had already run out.
    pub fn extend(&mut self, ttl: Duration) -> Result<Instant, Error> {
        let mut guard = self.shared.lock();
        let st = &mut *guard;
        let Some(entry) = st.locks.get_mut(&self.lock) else {
            return Err(Error::Misuse(Misuse::UnknownLock(self.lock)));
        };
        entry.extend = ExtendSlot::Waiting;
        if let Err(m) = st.driver.extend(Instant::now(), self.lock, Some(ttl)) {
            entry.extend = ExtendSlot::Idle;
            return Err(m.into());
        }
        self.shared.after_command(st);
        let lock = self.lock;
        let outcome = self.shared.wait_for(guard, Some(lock), |st| {
            let e = st.locks.get_mut(&lock)?;
            match std::mem::replace(&mut e.extend, ExtendSlot::Idle) {
                ExtendSlot::Done(r) => Some(r),
                other => {
                    e.extend = other;
                    None
                }
            }
        })?;
        Ok(outcome?)
    }

    /// Release the lock on every node and report what they said: `Released`, `NotHeld`
    /// (it had expired or been taken over; nothing of another holder was deleted) or
    /// `Unreachable` (too few answers; keys left behind expire with their TTL).
    pub fn release(mut self) -> Result<ReleaseReport, Error> {
        self.released = true;
        let lock = self.lock;
        let mut st = self.shared.lock();
        let result = st.driver.release(Instant::now(), lock);
        if let Err(m) = result {
            st.locks.remove(&lock);
            return Err(m.into());
        }
        self.shared.after_command(&mut st);
        let report = self.shared.wait_for(st, Some(lock), |st| st.locks.get_mut(&lock).and_then(|e| e.released.take()));
        self.shared.lock().locks.remove(&lock);
        report
    }

    /// Turn automatic extension (about every `ttl / 3`) on or off. It runs only while the
    /// loop is driven (see [auto-extension](crate::Client#auto-extension)).
    pub fn set_auto_extend(&self, on: bool) {
        let mut st = self.shared.lock();
        // The only possible misuse is an unknown lock, which a live guard never has.
        let _ = st.driver.set_auto_extend(Instant::now(), self.lock, on);
        self.shared.after_command(&mut st);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let mut st = self.shared.lock();
        match st.driver.release(Instant::now(), self.lock) {
            Ok(()) => {
                if let Some(e) = st.locks.get_mut(&self.lock) {
                    e.detached = true;
                }
            }
            Err(_) => {
                st.locks.remove(&self.lock);
            }
        }
        self.shared.after_command(&mut st);
    }
}

/// Fires when a held lock is lost: an automatic extension was refused by a majority, or the
/// validity ran out without a successful extension. Cloneable; any clone sees it.
///
/// Losses are detected while the client's loop is driven (see
/// [auto-extension](crate::Client#auto-extension)); [`wait`](Self::wait) and
/// [`wait_timeout`](Self::wait_timeout) drive it themselves when nobody else does.
#[derive(Clone)]
pub struct LostSignal {
    shared: Arc<Shared>,
    flag: Arc<OnceLock<LostReason>>,
}

impl fmt::Debug for LostSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LostSignal").field("lost", &self.flag.get()).finish()
    }
}

impl LostSignal {
    /// Whether the lock is known to be lost.
    pub fn is_lost(&self) -> bool {
        self.flag.get().is_some()
    }

    /// Why it was lost, if it was.
    pub fn reason(&self) -> Option<LostReason> {
        self.flag.get().cloned()
    }

    /// Block until the lock is lost. Never returns for a lock that is released without
    /// being lost first: prefer [`wait_timeout`](Self::wait_timeout) there.
    pub fn wait(&self) -> Result<LostReason, Error> {
        let st = self.shared.lock();
        self.shared.wait_for(st, None, |_| self.flag.get().cloned())
    }

    /// Block until the lock is lost (`Some(reason)`) or `timeout` passes (`None`).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Option<LostReason>, Error> {
        let st = self.shared.lock();
        self.shared.wait(st, Some(Instant::now() + timeout), None, |_| self.flag.get().cloned())
    }
}
