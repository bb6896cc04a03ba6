//! A held lock as its holder sees it: the [`Lease`] (resources, token, fencing token, the
//! deadline kept current by extensions) and the [`LostSignal`]. Both stacks' guards are a
//! `Lease` plus a way to reach their driver; the scoped `with_lock` hands the work a `Lease`.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use event_listener::{Event, Listener};
use redlease_core::{LockId, LostReason};

use crate::Error;

/// What the driver and the holder of a lock share: the current deadline and the lost state.
///
/// The lost state follows the clock as well as the driver: once the deadline has passed (and
/// the lock was not released), the lock is lost ([`LostReason::Expired`]) for whoever asks,
/// whether or not the driver has run since. The engine's own rule is the same (an extension
/// confirmed after the deadline comes too late). An extension confirmed in the last instant
/// before the deadline may reach the lease after a reader judged it lost: the lease then stays
/// lost, which is the safe side.
#[derive(Debug)]
pub(crate) struct LockState {
    valid_until: Mutex<Instant>,
    lost: OnceLock<LostReason>,
    /// Released by its holder: the deadline no longer means anything.
    released: AtomicBool,
    event: Event,
}

impl LockState {
    pub(crate) fn new(valid_until: Instant) -> Self {
        LockState {
            valid_until: Mutex::new(valid_until),
            lost: OnceLock::new(),
            released: AtomicBool::new(false),
            event: Event::new(),
        }
    }

    /// Why the lock is lost, if it is: what the driver reported, or the clock (the deadline
    /// passed and the lock was not released), which marks it lost at once.
    pub(crate) fn reason(&self) -> Option<LostReason> {
        if let Some(r) = self.lost.get() {
            return Some(r.clone());
        }
        // The deadline first, then the released flag: `mark_released` sets the flag before it
        // moves the deadline, so a reader that sees the moved deadline sees the flag too.
        let deadline = *self.deadline();
        if Instant::now() >= deadline && !self.released.load(Ordering::Acquire) {
            self.mark_lost(LostReason::Expired);
        }
        self.lost.get().cloned()
    }

    /// When the clock will say lost, unless an extension moves it: the deadline, or `None`
    /// once released.
    fn expiry(&self) -> Option<Instant> {
        (!self.released.load(Ordering::Acquire)).then(|| *self.deadline())
    }

    /// Its holder released it: not lost, and valid no more.
    pub(crate) fn mark_released(&self, now: Instant) {
        self.released.store(true, Ordering::Release);
        self.set_valid_until(now);
    }

    fn deadline(&self) -> MutexGuard<'_, Instant> {
        // Only a plain value is stored under the lock: a panic cannot leave it inconsistent.
        self.valid_until.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_valid_until(&self, valid_until: Instant) {
        *self.deadline() = valid_until;
    }

    /// Mark the lock lost and wake every waiter. Only the first reason counts.
    pub(crate) fn mark_lost(&self, reason: LostReason) {
        if self.lost.set(reason).is_ok() {
            self.event.notify(usize::MAX);
        }
    }
}

/// A blocking client's event loop, for waiters that must drive it themselves (nobody else
/// does between calls). The async clients have none: their driver runs on its own.
pub trait Pump: Send + Sync {
    /// Drive the loop until `done()` holds or `deadline` passes (`None`: no deadline).
    fn pump(&self, deadline: Option<Instant>, done: &mut dyn FnMut() -> bool) -> Result<(), Error>;
}

/// The holder's view of a lock: what it locks, its token, its fencing token and how long it
/// is valid. Cheap to clone; the scoped `with_lock` of every client hands one to the work, and
/// every guard dereferences to one.
///
/// Act on the protected resource only while the lease is neither lost nor past its deadline,
/// and hand the store its fencing token so that it can refuse a holder that has been
/// overtaken (a paused process can outlive its lock; only the store can tell):
///
/// ```
/// # use redlease_client::Lease;
/// /// A store that keeps the highest fencing token it has seen and refuses older ones.
/// struct Store {
///     highest: u64,
///     rows: Vec<String>,
/// }
///
/// fn write(lease: &Lease, store: &mut Store, row: &str) -> Result<(), &'static str> {
///     if lease.is_lost() || lease.remaining().is_zero() {
///         return Err("the lock is gone: stop");
///     }
///     let fence = lease.fence().ok_or("lock with .fencing(true)")?;
///     if fence < store.highest {
///         return Err("a newer holder has written: stop");
///     }
///     store.highest = fence;
///     store.rows.push(row.to_owned());
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct Lease {
    held: Arc<Held>,
    pump: Option<Arc<dyn Pump>>,
}

struct Held {
    lock: LockId,
    resources: Vec<String>,
    token: String,
    fence: Option<u64>,
    permits: Vec<u16>,
    state: Arc<LockState>,
}

impl Lease {
    pub(crate) fn new(
        lock: LockId,
        resources: Vec<String>,
        token: String,
        fence: Option<u64>,
        state: Arc<LockState>,
    ) -> Self {
        Lease { held: Arc::new(Held { lock, resources, token, fence, permits: Vec::new(), state }), pump: None }
    }

    /// The same lease, holding these permits of a semaphore.
    pub(crate) fn holding(mut self, permits: &[u16]) -> Self {
        if let Some(held) = Arc::get_mut(&mut self.held) {
            held.permits = permits.to_vec();
        }
        self
    }

    /// The state shared with the router.
    pub(crate) fn state(&self) -> &LockState {
        &self.held.state
    }

    /// The same lease, whose [`LostSignal`] drives `pump` while it waits (for a blocking
    /// client, whose loop nobody else may be driving). For the mio adapter; not part of the
    /// supported API.
    #[doc(hidden)]
    pub fn with_pump(mut self, pump: Arc<dyn Pump>) -> Self {
        self.pump = Some(pump);
        self
    }

    /// The engine's id of this lock.
    pub fn id(&self) -> LockId {
        self.held.lock
    }

    /// The (first) resource this lock protects.
    pub fn resource(&self) -> &str {
        &self.held.resources[0]
    }

    /// Every resource this lock protects, the first one first.
    pub fn resources(&self) -> &[String] {
        &self.held.resources
    }

    /// The lock's unique token: 40 hex characters from 20 bytes of the OS random source, the
    /// value stored on the nodes.
    pub fn token(&self) -> &str {
        &self.held.token
    }

    /// The fencing token, when the lock was taken with
    /// [`LockOptions::fencing`](redlease_core::LockOptions::fencing). It strictly increases
    /// across successful acquisitions of the resource: hand it to the store you protect.
    pub fn fence(&self) -> Option<u64> {
        self.held.fence
    }

    /// The semaphore permits this lease holds (numbers from 0 to the limit − 1, ascending), when
    /// it was taken with [`LockOptions::semaphore`](redlease_core::LockOptions::semaphore);
    /// empty for a mutex. With fencing, [`fence`](Self::fence) strictly increases across the
    /// holders of each permit: a protected store keeps the highest token it has seen per permit.
    pub fn permits(&self) -> &[u16] {
        &self.held.permits
    }

    /// The lock is valid until this instant of the monotonic clock (moved on by every
    /// successful extension, automatic ones included). Never later than `start + ttl − drift`
    /// of the last successful acquire or extend. Stop relying on the lock before it.
    pub fn valid_until(&self) -> Instant {
        *self.held.state.deadline()
    }

    /// Time left until [`valid_until`](Self::valid_until) (zero once it passed).
    pub fn remaining(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// Whether the lock is lost: an extension was refused, the client stopped, or its
    /// validity ran out — judged by the clock, whether or not the client's loop has run since.
    pub fn is_lost(&self) -> bool {
        self.held.state.reason().is_some()
    }

    /// The signal that fires when this lock is lost.
    pub fn lost(&self) -> LostSignal {
        LostSignal { state: Arc::clone(&self.held.state), pump: self.pump.clone() }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("lock", &self.held.lock)
            .field("resources", &self.held.resources)
            .field("fence", &self.held.fence)
            .field("valid_until", &self.valid_until())
            .field("lost", &self.held.state.reason())
            .finish_non_exhaustive()
    }
}

/// Fires when a held lock is lost: an extension was refused by a majority, the validity ran
/// out without a successful extension (judged by the clock too: `is_lost` and `reason` say so
/// once the deadline has passed, even if no I/O ran since), or the client stopped (nobody extends it any more:
/// [`LostReason::Stopped`]). A lock released normally is not "lost": the signal then never
/// fires.
///
/// Cloneable; every clone sees the same signal, which stays lost once fired. Await it with
/// [`wait`](Self::wait) (e.g. in a `select!` against the work it protects), block on it with
/// [`wait_timeout`](Self::wait_timeout), or poll [`is_lost`](Self::is_lost).
#[derive(Clone)]
pub struct LostSignal {
    state: Arc<LockState>,
    pump: Option<Arc<dyn Pump>>,
}

impl LostSignal {
    /// Whether the lock is lost (by the clock too, as [`Lease::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.state.reason().is_some()
    }

    /// Why the lock was lost, if it was ([`LostReason::Expired`] once its deadline passed).
    pub fn reason(&self) -> Option<LostReason> {
        self.state.reason()
    }

    /// Wait until the lock is lost (at once if it already is). The future owns what it needs,
    /// so `lease.lost().wait()` can be awaited directly, e.g. in a `select!` against the work.
    /// For the async clients, whose driver runs on its own; a blocking client's loop must be
    /// driven meanwhile (its `with_lock` and `spawn_keepalive` do), or use
    /// [`wait_timeout`](Self::wait_timeout).
    pub fn wait(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let state = Arc::clone(&self.state);
        async move {
            loop {
                if let Some(r) = state.reason() {
                    return r;
                }
                let listener = state.event.listen();
                // Re-check after registering, so that a loss in between is not missed.
                if let Some(r) = state.reason() {
                    return r;
                }
                listener.await;
            }
        }
    }

    /// Block this thread until the lock is lost (`Some(reason)`) or `timeout` passes
    /// (`None`). A blocking client's signal drives the client's loop while it waits if no
    /// other thread does. `Err` only if that loop failed ([`Error::Closed`]).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Option<LostReason>, Error> {
        let deadline = Instant::now().checked_add(timeout);
        if let Some(pump) = &self.pump {
            pump.pump(deadline, &mut || self.is_lost())?;
            return Ok(self.reason());
        }
        loop {
            if let Some(r) = self.reason() {
                return Ok(Some(r));
            }
            let listener = self.state.event.listen();
            if let Some(r) = self.reason() {
                return Ok(Some(r));
            }
            // Wake at the lock's deadline too: past it, the clock says lost.
            let until = match (deadline, self.state.expiry()) {
                (Some(d), Some(e)) => Some(d.min(e)),
                (d, e) => d.or(e),
            };
            match until {
                Some(until) => {
                    let woken = listener.wait_deadline(until).is_some();
                    if !woken && deadline.is_some_and(|d| Instant::now() >= d) {
                        return Ok(self.reason());
                    }
                }
                None => listener.wait(),
            }
        }
    }
}

impl fmt::Debug for LostSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LostSignal").field("lost", &self.reason()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::*;

    fn lease_until(valid_until: Instant) -> Lease {
        Lease::new(
            crate::tests::some_lock(),
            vec!["r".into()],
            "t".into(),
            Some(5),
            Arc::new(LockState::new(valid_until)),
        )
    }

    fn lease() -> Lease {
        lease_until(Instant::now() + Duration::from_secs(600))
    }

    #[test]
    fn past_its_deadline_a_lease_is_lost_by_the_clock_with_no_driver_running() {
        let lease = lease_until(Instant::now() + Duration::from_millis(50));
        let signal = lease.lost();
        assert!(!lease.is_lost() && signal.reason().is_none());
        // Nobody reports anything: the deadline alone wakes the blocked waiter.
        let waiter = thread::spawn(move || signal.wait_timeout(Duration::from_secs(30)).unwrap());
        assert_eq!(waiter.join().unwrap(), Some(LostReason::Expired));
        assert!(lease.is_lost() && lease.remaining().is_zero());
        assert_eq!(crate::block_on(lease.lost().wait()), LostReason::Expired);
        // A later report does not change the first reason.
        lease.held.state.mark_lost(LostReason::Refused);
        assert_eq!(lease.lost().reason(), Some(LostReason::Expired));
    }

    #[test]
    fn a_released_lease_is_not_lost_once_its_deadline_passes() {
        let lease = lease();
        lease.held.state.mark_released(Instant::now());
        thread::sleep(Duration::from_millis(5));
        assert!(lease.remaining().is_zero());
        assert!(!lease.is_lost() && lease.lost().reason().is_none());
        assert_eq!(lease.lost().wait_timeout(Duration::from_millis(20)).unwrap(), None);
    }

    #[test]
    fn lost_signal_wakes_every_waiter_once_and_stays_lost() {
        let lease = lease();
        let signal = lease.lost();
        assert!(!signal.is_lost() && signal.reason().is_none());
        let waiters: Vec<_> = (0..3)
            .map(|i| {
                let s = signal.clone();
                thread::spawn(move || {
                    if i == 0 {
                        crate::block_on(s.wait())
                    } else {
                        s.wait_timeout(Duration::from_secs(30)).unwrap().unwrap()
                    }
                })
            })
            .collect();
        lease.held.state.mark_lost(LostReason::Refused);
        lease.held.state.mark_lost(LostReason::Stopped); // only the first reason counts
        for w in waiters {
            assert_eq!(w.join().unwrap(), LostReason::Refused);
        }
        assert!(lease.is_lost());
        assert_eq!(signal.reason(), Some(LostReason::Refused));
        assert_eq!(crate::block_on(signal.wait()), LostReason::Refused); // at once
    }

    #[test]
    fn a_timeout_without_loss_says_none() {
        let signal = lease().lost();
        assert_eq!(signal.wait_timeout(Duration::from_millis(20)).unwrap(), None);
    }

    #[test]
    fn deadline_moves_with_extensions() {
        let lease = lease();
        let later = Instant::now() + Duration::from_secs(60);
        lease.held.state.set_valid_until(later);
        assert_eq!(lease.valid_until(), later);
        assert!(lease.remaining() > Duration::from_secs(59));
        assert_eq!((lease.fence(), lease.resource(), lease.token()), (Some(5), "r", "t"));
    }
}
