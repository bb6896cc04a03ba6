//! A held lock ([`Guard`]) and the signal that tells its holder it is lost ([`LostSignal`]).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_channel::Sender;
use event_listener::Event;
use redlease_core::{LockId, LostReason, ReleaseReport};

use crate::driver::Command;
use crate::error::Error;

/// What the driver and the holder of a lock share: the current deadline and the lost state.
#[derive(Debug)]
pub(crate) struct LockShared {
    lost: AtomicBool,
    state: Mutex<SharedState>,
    event: Event,
}

#[derive(Debug)]
struct SharedState {
    valid_until: Instant,
    /// `Some(None)`: lost because the driver stopped.
    lost: Option<Option<LostReason>>,
}

impl LockShared {
    pub(crate) fn new(valid_until: Instant) -> Self {
        LockShared {
            lost: AtomicBool::new(false),
            state: Mutex::new(SharedState { valid_until, lost: None }),
            event: Event::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, SharedState> {
        // The lock is only held for plain field updates, which cannot leave it inconsistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_valid_until(&self, valid_until: Instant) {
        self.state().valid_until = valid_until;
    }

    /// Mark the lock lost (`None`: the driver stopped) and wake every waiter. Only the first
    /// call counts.
    pub(crate) fn mark_lost(&self, reason: Option<LostReason>) {
        {
            let mut s = self.state();
            if s.lost.is_some() {
                return;
            }
            s.lost = Some(reason);
        }
        self.lost.store(true, Ordering::Release);
        self.event.notify(usize::MAX);
    }
}

/// Fires when a held lock is lost: an extension was refused by a majority, the validity ran
/// out without a successful extension, or the driver stopped (so nobody extends it any more).
///
/// Cloneable; every clone sees the same signal. Await it with [`wait`](Self::wait) (e.g. in a
/// `select!` against the work it protects) or poll [`is_lost`](Self::is_lost). Once lost, it
/// stays lost. A lock released normally is not "lost": the signal then never fires.
#[derive(Clone)]
pub struct LostSignal(pub(crate) Arc<LockShared>);

impl LostSignal {
    /// Whether the lock is known to be lost.
    pub fn is_lost(&self) -> bool {
        self.0.lost.load(Ordering::Acquire)
    }

    /// Why the lock was lost: `None` while it is not, `Some(None)` when the driver stopped
    /// (the runtime shut down) and the lock can no longer be extended.
    pub fn reason(&self) -> Option<Option<LostReason>> {
        self.0.state().lost.clone()
    }

    /// Wait until the lock is lost (returns at once if it already is).
    pub async fn wait(&self) {
        loop {
            if self.is_lost() {
                return;
            }
            let listener = self.0.event.listen();
            // Re-check after registering, so a notification in between is not missed.
            if self.is_lost() {
                return;
            }
            listener.await;
        }
    }
}

impl fmt::Debug for LostSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LostSignal").field("lost", &self.reason()).finish()
    }
}

/// A held lock. Dropping it releases the lock in the background; [`release`](Self::release)
/// does the same and reports what the nodes said.
///
/// The lock is only safe to rely on until [`valid_until`](Self::valid_until) (the caller's
/// monotonic clock) and while [`lost`](Self::lost) has not fired.
pub struct Guard {
    pub(crate) tx: Sender<Command>,
    pub(crate) lock: LockId,
    pub(crate) resources: Vec<String>,
    pub(crate) token: String,
    pub(crate) fence: Option<u64>,
    pub(crate) shared: Arc<LockShared>,
    pub(crate) released: bool,
}

impl Guard {
    /// The (first) resource this lock protects.
    pub fn resource(&self) -> &str {
        &self.resources[0]
    }

    /// Every resource this lock protects, the first one first.
    pub fn resources(&self) -> &[String] {
        &self.resources
    }

    /// The lock's unique token: 40 hex characters from 20 bytes of the OS random source.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The lock is valid until this instant of the monotonic clock (updated by extensions,
    /// automatic ones included). Never later than `start + ttl − drift` of the last
    /// successful acquire or extend.
    pub fn valid_until(&self) -> Instant {
        self.shared.state().valid_until
    }

    /// Time left until [`valid_until`](Self::valid_until) (zero once it passed).
    pub fn remaining(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// The fencing token, when the lock was taken with [`LockBuilder::fencing`](crate::LockBuilder::fencing).
    /// It strictly increases across successful acquisitions of the resource.
    pub fn fence(&self) -> Option<u64> {
        self.fence
    }

    /// The signal that fires if this lock is lost.
    pub fn lost(&self) -> LostSignal {
        LostSignal(self.shared.clone())
    }

    /// Extend the lock to `ttl` from now on every node; returns the new deadline.
    ///
    /// Succeeds iff a quorum extended it in time. A failed extension never deletes the lock:
    /// [`ExtendError::Lost`](redlease_core::ExtendError::Lost) means it is gone,
    /// [`ExtendError::Unconfirmed`](redlease_core::ExtendError::Unconfirmed) that it is still
    /// valid until the old deadline at best.
    pub async fn extend(&mut self, ttl: Duration) -> Result<Instant, Error> {
        let (reply, rx) = async_channel::bounded(1);
        self.tx.try_send(Command::Extend { lock: self.lock, ttl, reply }).map_err(|_| Error::Closed)?;
        rx.recv().await.map_err(|_| Error::Closed)?
    }

    /// Release the lock on every node and report what they said:
    /// [`Released`](redlease_core::ReleaseOutcome::Released),
    /// [`NotHeld`](redlease_core::ReleaseOutcome::NotHeld) (it had expired or been taken over)
    /// or [`Unreachable`](redlease_core::ReleaseOutcome::Unreachable).
    pub async fn release(mut self) -> Result<ReleaseReport, Error> {
        self.released = true;
        let (reply, rx) = async_channel::bounded(1);
        self.tx.try_send(Command::Release { lock: self.lock, reply: Some(reply) }).map_err(|_| Error::Closed)?;
        rx.recv().await.map_err(|_| Error::Closed)?
    }

    /// Turn automatic extension (about every TTL/3, by the driver) on or off.
    pub fn set_auto_extend(&self, on: bool) {
        // Only fails when the driver is gone, and then there is nothing left to extend.
        let _ = self.tx.try_send(Command::AutoExtend { lock: self.lock, on });
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.released {
            // Fire and forget: the driver completes the release even after every client is gone.
            let _ = self.tx.try_send(Command::Release { lock: self.lock, reply: None });
        }
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("resources", &self.resources)
            .field("valid_until", &self.valid_until())
            .field("fence", &self.fence)
            .field("lost", &self.shared.lost.load(Ordering::Acquire))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::*;

    #[test]
    fn lost_signal_wakes_every_waiter_once_and_stays_lost() {
        let signal = LostSignal(Arc::new(LockShared::new(Instant::now())));
        assert!(!signal.is_lost() && signal.reason().is_none());
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let s = signal.clone();
                thread::spawn(move || futures_lite::future::block_on(s.wait()))
            })
            .collect();
        signal.0.mark_lost(Some(LostReason::Refused));
        signal.0.mark_lost(None); // only the first reason counts
        for w in waiters {
            w.join().unwrap();
        }
        assert!(signal.is_lost());
        assert_eq!(signal.reason(), Some(Some(LostReason::Refused)));
        futures_lite::future::block_on(signal.wait()); // at once
    }
}
