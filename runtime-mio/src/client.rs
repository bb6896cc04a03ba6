//! The blocking client: a [`Driver`] on its own `mio::Poll`, shared by any number of threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token, Waker};
use redlease_core::{
    AcquireError, AcquireRequest, Config, Event, ExtendError, LockId, LostReason, NodeId, ReleaseReport,
};

use crate::driver::{Driver, NodeStatus};
use crate::guard::{Guard, LostSignal};
use crate::{Error, new_token};

/// Token of the driver's first socket in the client's own poll.
const NODES: Token = Token(0);
/// Token of the waker that interrupts a thread blocked in `poll`.
const WAKE: Token = Token(usize::MAX);

/// A blocking Redlock client on its own `mio::Poll`.
///
/// `Client` is `Clone + Send + Sync`: clones share one connection per node, so any number
/// of threads can lock through one client. There is no background thread: a thread that
/// waits for an outcome drives the event loop itself while it waits (one thread polls at a
/// time; the others sleep until an outcome or the poll is theirs). Between calls nobody
/// drives the loop — see [auto-extension](#auto-extension).
///
/// Each separate `Client` has its own connections (one per node); sharing one is cheaper.
///
/// # Auto-extension
///
/// The core extends a lock about every `ttl / 3` when asked to
/// ([`LockBuilder::auto_extend`]), but only while someone drives the loop. Pick one:
///
/// - **No threads**: keep calling [`Client::run_for`] / [`Client::run_until`] (or any
///   blocking call) from your own loop, at least every `ttl / 3`.
/// - **A helper thread while you work**: [`Client::with_lock`] runs your closure on your
///   thread while a helper thread drives the loop, and releases afterwards.
/// - **A helper thread for good**: [`Client::spawn_keepalive`] drives the loop until the
///   returned [`KeepAlive`] is dropped.
///
/// In every case a lost lock (refused extension, validity run out) fires the guard's
/// [`LostSignal`].
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use redlease_mio::Client;
///
/// let client = Client::connect(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"])?;
/// let guard = client.lock("orders:42", Duration::from_secs(10))?;
/// println!("held until {:?} with token {}", guard.valid_until(), guard.token());
/// let report = guard.release()?;
/// println!("released: {:?}", report.outcome);
/// # Ok::<(), redlease_mio::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("Client").field("driver", &st.driver).field("broken", &st.broken).finish()
    }
}

/// What the threads of one client share.
///
/// Wake-ups are targeted: a thread waiting for a lock's outcome sleeps on a condition
/// variable of its own, signalled only when an event for that lock arrives; a thread waiting
/// for anything else (`run_until`, a keep-alive, a lost signal) is signalled after every
/// round of the loop; and a thread that stops driving the loop hands it to one sleeper.
pub(crate) struct Shared {
    state: Mutex<State>,
    waker: Waker,
}

/// The poll and its event buffer: held by the one thread that is polling.
struct Poller {
    poll: Poll,
    events: Events,
}

pub(crate) struct State {
    /// `None` while a thread is blocked in `poll`.
    poller: Option<Poller>,
    pub(crate) driver: Driver,
    pub(crate) locks: HashMap<LockId, Entry>,
    /// The poll failed for good.
    broken: bool,
    /// The threads inside [`Shared::wait`].
    waiters: Vec<Waiter>,
    next_waiter: u64,
    /// The waker was woken since the polling thread last took the lock: the commands issued
    /// meanwhile go out with the next poll's flush, no need to wake it again.
    woken: bool,
}

/// A thread inside [`Shared::wait`].
struct Waiter {
    id: u64,
    signal: Arc<Condvar>,
    /// It waits for one lock's outcome (signalled through that lock's entry), not for
    /// rounds of the loop.
    keyed: bool,
}

/// What the client knows of one lock, filled in from the driver's events.
pub(crate) struct Entry {
    pub(crate) acquired: Option<Result<Acquired, AcquireError>>,
    pub(crate) extend: ExtendSlot,
    pub(crate) released: Option<ReleaseReport>,
    pub(crate) valid_until: Option<Instant>,
    pub(crate) lost: Arc<OnceLock<LostReason>>,
    /// The guard is gone: forget the lock when its release ends.
    pub(crate) detached: bool,
    /// The thread waiting for this lock's outcome, signalled when an event for it arrives.
    waiter: Option<Arc<Condvar>>,
}

/// A successful acquisition.
pub(crate) struct Acquired {
    pub(crate) valid_until: Instant,
    pub(crate) fence: Option<u64>,
}

/// A caller waiting for the outcome of its `extend`.
pub(crate) enum ExtendSlot {
    Idle,
    Waiting,
    Done(Result<Instant, ExtendError>),
}

impl Entry {
    fn new() -> Self {
        Entry {
            acquired: None,
            extend: ExtendSlot::Idle,
            released: None,
            valid_until: None,
            lost: Arc::new(OnceLock::new()),
            detached: false,
            waiter: None,
        }
    }
}

impl State {
    /// Route the driver's events to the locks they concern, and signal the threads waiting
    /// for those locks.
    fn dispatch(&mut self) {
        while let Some(ev) = self.driver.poll_event() {
            if let Some(cv) = lock_of(&ev).and_then(|l| self.locks.get(&l)).and_then(|e| e.waiter.as_ref()) {
                cv.notify_one();
            }
            match ev {
                Event::Acquired { lock, valid_until, fence, .. } => {
                    if let Some(e) = self.locks.get_mut(&lock) {
                        e.valid_until = Some(valid_until);
                        e.acquired = Some(Ok(Acquired { valid_until, fence }));
                    }
                }
                Event::AcquireFailed { lock, error } => {
                    if let Some(e) = self.locks.get_mut(&lock) {
                        e.acquired = Some(Err(error));
                    }
                }
                Event::Extended { lock, valid_until } => {
                    if let Some(e) = self.locks.get_mut(&lock) {
                        e.valid_until = Some(valid_until);
                        if matches!(e.extend, ExtendSlot::Waiting) {
                            e.extend = ExtendSlot::Done(Ok(valid_until));
                        }
                    }
                }
                Event::ExtendFailed { lock, error } => {
                    if let Some(e) = self.locks.get_mut(&lock) {
                        if matches!(e.extend, ExtendSlot::Waiting) {
                            e.extend = ExtendSlot::Done(Err(error));
                        }
                    }
                }
                Event::Lost { lock, reason } => {
                    if let Some(e) = self.locks.get_mut(&lock) {
                        let _ = e.lost.set(reason);
                    }
                }
                Event::Released { lock, report } => {
                    if self.locks.get(&lock).is_some_and(|e| e.detached) {
                        self.locks.remove(&lock);
                    } else if let Some(e) = self.locks.get_mut(&lock) {
                        e.released = Some(report);
                    }
                }
                // The driver already closed the socket and keeps the message in `node_status`.
                Event::LinkFailed { .. } => {}
                _ => {}
            }
        }
    }

    /// Feed one poll's readiness events and the clock to the driver.
    fn process(&mut self, events: &Events, now: Instant) {
        for ev in events.iter() {
            // The waker's events are not the driver's; they only ended the poll.
            self.driver.handle_event(now, ev);
        }
        self.driver.handle_timeout(now);
        self.dispatch();
    }
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// After a command: route its immediate events, and interrupt a thread blocked in
    /// `poll` (once per poll) so that it writes the command out and re-reads the driver's
    /// timeout. With nobody polling, the command goes out when the caller drives the loop.
    pub(crate) fn after_command(&self, st: &mut State) {
        st.dispatch();
        if st.poller.is_none() && !st.woken {
            // If the wake fails, the poller still wakes at its old timeout or next event.
            st.woken = self.waker.wake().is_ok();
        }
    }

    /// Signal the waiters that wait for rounds of the loop (all of them if the poll broke).
    fn signal_round(st: &State) {
        for w in st.waiters.iter().filter(|w| !w.keyed || st.broken) {
            w.signal.notify_one();
        }
    }

    /// Block until `check` yields a value, driving the loop whenever no other thread does.
    /// With `lock`, `check` depends only on that lock's outcome (the thread sleeps until an
    /// event for it arrives); without, on anything (it wakes after every round).
    pub(crate) fn wait_for<'a, T>(
        &'a self,
        st: MutexGuard<'a, State>,
        lock: Option<LockId>,
        check: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<T, Error> {
        self.wait(st, None, lock, check)?.ok_or(Error::Closed)
    }

    /// Block until `check` yields a value or `deadline` passes (`Ok(None)`), driving the loop
    /// whenever no other thread does. Drives at least one round if the poll is free. `lock`
    /// as in [`wait_for`](Self::wait_for).
    pub(crate) fn wait<'a, T>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        deadline: Option<Instant>,
        lock: Option<LockId>,
        mut check: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<Option<T>, Error> {
        let signal = Arc::new(Condvar::new());
        let id = st.next_waiter;
        st.next_waiter += 1;
        let keyed = match lock.and_then(|l| st.locks.get_mut(&l)) {
            Some(e) => {
                e.waiter = Some(Arc::clone(&signal));
                true
            }
            None => false,
        };
        st.waiters.push(Waiter { id, signal: Arc::clone(&signal), keyed });
        let mut drove = false;
        let result = loop {
            if let Some(t) = check(&mut st) {
                break Ok(Some(t));
            }
            if st.broken {
                break Err(Error::Closed);
            }
            let now = Instant::now();
            let expired = deadline.is_some_and(|d| now >= d);
            if expired && (drove || st.poller.is_none()) {
                break Ok(None);
            }
            if let Some(poller) = st.poller.take() {
                st = self.drive(st, poller, deadline);
                drove = true;
                continue;
            }
            st = match deadline {
                Some(d) => signal.wait_timeout(st, d - now).unwrap_or_else(PoisonError::into_inner).0,
                None => signal.wait(st).unwrap_or_else(PoisonError::into_inner),
            };
        };
        if let Some(pos) = st.waiters.iter().position(|w| w.id == id) {
            st.waiters.swap_remove(pos);
        }
        if let Some(e) = lock.and_then(|l| st.locks.get_mut(&l)) {
            e.waiter = None;
        }
        // Nobody drives the loop now: hand it to one of the sleepers.
        if st.poller.is_some() {
            if let Some(w) = st.waiters.first() {
                w.signal.notify_one();
            }
        }
        result
    }

    /// One round of the loop: poll (with the lock released) until the driver's timeout,
    /// `deadline` or an event, then feed the driver and hand the poll back.
    fn drive<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        mut p: Poller,
        deadline: Option<Instant>,
    ) -> MutexGuard<'a, State> {
        // Also writes out every command queued since the last poll, whichever thread issued it.
        let next = match (st.driver.poll_timeout(), deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let now = Instant::now();
        drop(st);
        let result = p.poll.poll(&mut p.events, next.map(|t| t.saturating_duration_since(now)));
        let mut st = self.lock();
        st.woken = false;
        match result {
            Ok(()) => st.process(&p.events, Instant::now()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => st.broken = true,
        }
        st.poller = Some(p);
        Self::signal_round(&st);
        st
    }

    /// Stop waiters of a keep-alive: wake every sleeper and the poller.
    fn wake_all(&self) {
        let st = self.lock();
        for w in &st.waiters {
            w.signal.notify_one();
        }
        let _ = self.waker.wake();
    }
}

impl Drop for Shared {
    /// Last handle gone: give releases from dropped guards a moment to finish (bounded by the
    /// node timeout), then close the sockets.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let Some(mut p) = st.poller.take() else {
            return;
        };
        let deadline = Instant::now() + st.driver.engine().config().node_timeout + Duration::from_millis(100);
        while !st.broken && st.locks.values().any(|e| e.detached) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let next = st.driver.poll_timeout().map_or(deadline, |t| t.min(deadline));
            match p.poll.poll(&mut p.events, Some(next.saturating_duration_since(now))) {
                Ok(()) => st.process(&p.events, Instant::now()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        st.driver.deregister(Instant::now());
    }
}

impl Client {
    /// Connect to the nodes at these `redis://[user:pass@]host:port[/db]` URLs, with default
    /// settings.
    ///
    /// Returns once every node has connected or failed its first attempt: nodes that are
    /// down do not make it fail. They keep reconnecting with backoff, and count as failed
    /// votes in operations meanwhile. Fails on a bad URL or when the OS refuses a poller.
    pub fn connect<I, S>(urls: I) -> Result<Client, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Client::with_config(Config::from_urls(urls)?)
    }

    /// Connect with explicit settings, the core's [`Config`] (validated, seed from the OS
    /// unless changed, as in [`Driver::new`](crate::Driver::new)); see [`Client::connect`].
    pub fn with_config(config: Config) -> Result<Client, Error> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKE)?;
        let mut driver = Driver::new(config, NODES)?;
        driver.register(poll.registry(), Instant::now())?;
        let poller = Poller { poll, events: Events::with_capacity(64) };
        let state = State {
            poller: Some(poller),
            driver,
            locks: HashMap::new(),
            broken: false,
            waiters: Vec::new(),
            next_waiter: 0,
            woken: false,
        };
        let shared = Arc::new(Shared { state: Mutex::new(state), waker });
        let st = shared.lock();
        shared.wait_for(st, None, |st| st.driver.all_nodes_tried().then_some(()))?;
        Ok(Client { shared })
    }

    /// Acquire `resource` for `ttl`, retrying per the config's retry schedule.
    pub fn lock(&self, resource: &str, ttl: Duration) -> Result<Guard, Error> {
        self.lock_with(resource, ttl).acquire()
    }

    /// Acquire `resource` for `ttl` in a single attempt.
    pub fn try_lock(&self, resource: &str, ttl: Duration) -> Result<Guard, Error> {
        self.lock_with(resource, ttl).attempts(1).acquire()
    }

    /// A builder for an acquisition with options (more resources, fencing, attempts, a wait
    /// bound, a hold cap, auto-extension); finish with [`LockBuilder::acquire`] or
    /// [`LockBuilder::run`].
    pub fn lock_with(&self, resource: &str, ttl: Duration) -> LockBuilder<'_> {
        LockBuilder {
            client: self,
            resources: vec![resource.to_owned()],
            ttl,
            fencing: false,
            attempts: None,
            wait: None,
            max_hold: None,
            auto_extend: false,
        }
    }

    /// Scoped form: acquire `resource` (with retries), run `f` on this thread while a helper
    /// thread keeps the lock extended (about every `ttl / 3`), then release it.
    ///
    /// `f` gets the lock's [`LostSignal`]: check it (`is_lost`) before acting on the
    /// protected resource; it fires if an extension is refused or the validity runs out.
    /// The release's outcome is not reported (the work is done); a failure to acquire is.
    pub fn with_lock<F, T>(&self, resource: &str, ttl: Duration, f: F) -> Result<T, Error>
    where
        F: FnOnce(LostSignal) -> T,
    {
        self.lock_with(resource, ttl).run(f)
    }

    /// Drive the event loop on this thread until `deadline` (or let another thread that is
    /// driving it do so): reads replies, runs timers, performs auto-extensions, delivers
    /// lost-lock signals. Use it to keep locks extended without threads.
    pub fn run_until(&self, deadline: Instant) -> Result<(), Error> {
        let st = self.shared.lock();
        self.shared.wait(st, Some(deadline), None, |_| None::<()>)?;
        Ok(())
    }

    /// [`run_until`](Self::run_until) `now + duration`. `Duration::ZERO` processes whatever
    /// is ready without blocking.
    pub fn run_for(&self, duration: Duration) -> Result<(), Error> {
        self.run_until(Instant::now() + duration)
    }

    /// Start a helper thread that drives the event loop (auto-extensions, lost signals,
    /// releases of dropped guards) until the returned handle is dropped.
    pub fn spawn_keepalive(&self) -> Result<KeepAlive, Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::clone(&self.shared);
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("redlease-mio-keepalive".into()).spawn(move || {
            let st = shared.lock();
            // Ends when stopped, or when the poll fails (then every caller sees `Closed`).
            let _ = shared.wait_for(st, None, |_| flag.load(Ordering::Acquire).then_some(()));
        })?;
        Ok(KeepAlive { shared: Arc::clone(&self.shared), stop, thread: Some(thread) })
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.shared.lock().driver.node_count()
    }

    /// The state of `node`'s connection and its last error (e.g. a refused password), or
    /// `None` for an unknown node.
    pub fn node_status(&self, node: NodeId) -> Option<NodeStatus> {
        self.shared.lock().driver.node_status(node)
    }
}

/// Options of one acquisition; made by [`Client::lock_with`].
#[derive(Debug)]
#[must_use = "a LockBuilder does nothing until .acquire() or .run()"]
pub struct LockBuilder<'a> {
    client: &'a Client,
    resources: Vec<String>,
    ttl: Duration,
    fencing: bool,
    attempts: Option<u32>,
    wait: Option<Duration>,
    max_hold: Option<Duration>,
    auto_extend: bool,
}

impl LockBuilder<'_> {
    /// Lock these resources too, all-or-nothing.
    pub fn resources<S: AsRef<str>>(mut self, more: &[S]) -> Self {
        self.resources.extend(more.iter().map(|s| s.as_ref().to_owned()));
        self
    }

    /// Also produce a fencing token ([`Guard::fence`]); costs one extra round trip.
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// Attempts in all (default: the config's `retry.attempts`, or unlimited within a
    /// [`wait`](Self::wait) bound).
    pub fn attempts(mut self, n: u32) -> Self {
        self.attempts = Some(n);
        self
    }

    /// Keep retrying until this much time has passed; then fail with
    /// [`Error::WaitTimeout`].
    pub fn wait(mut self, bound: Duration) -> Self {
        self.wait = Some(bound);
        self
    }

    /// Never extend the lock past this long after it was acquired.
    pub fn max_hold(mut self, cap: Duration) -> Self {
        self.max_hold = Some(cap);
        self
    }

    /// Extend the lock automatically about every `ttl / 3` while someone drives the loop
    /// (see [auto-extension](Client#auto-extension)).
    pub fn auto_extend(mut self, on: bool) -> Self {
        self.auto_extend = on;
        self
    }

    /// Acquire, blocking until the lock is held or the acquisition has failed.
    pub fn acquire(self) -> Result<Guard, Error> {
        let token = new_token()?;
        let keys: Vec<&[u8]> = self.resources.iter().map(|r| r.as_bytes()).collect();
        let req = AcquireRequest {
            resources: &keys,
            token: token.as_bytes(),
            ttl: self.ttl,
            fencing: self.fencing,
            attempts: self.attempts,
            wait: self.wait,
            auto_extend: self.auto_extend,
            max_hold: self.max_hold,
        };
        let shared = &self.client.shared;
        let started = Instant::now();
        let mut st = shared.lock();
        if st.broken {
            return Err(Error::Closed);
        }
        let lock = st.driver.acquire(started, &req)?;
        st.locks.insert(lock, Entry::new());
        shared.after_command(&mut st);
        let outcome = shared.wait_for(st, Some(lock), |st| st.locks.get_mut(&lock).and_then(|e| e.acquired.take()))?;
        match outcome {
            Ok(acquired) => {
                let lost = match shared.lock().locks.get(&lock) {
                    Some(e) => Arc::clone(&e.lost),
                    None => Arc::new(OnceLock::new()),
                };
                Ok(Guard::new(Arc::clone(shared), lock, self.resources, token, acquired, lost))
            }
            Err(error) => {
                shared.lock().locks.remove(&lock);
                let gave_up_on_attempts = self.attempts.is_some_and(|n| attempts_of(&error).is_some_and(|a| a >= n));
                match self.wait {
                    Some(_) if !gave_up_on_attempts && !matches!(error, AcquireError::Cancelled) => {
                        Err(Error::WaitTimeout { waited: started.elapsed(), last: Some(error) })
                    }
                    _ => Err(Error::Acquire(error)),
                }
            }
        }
    }

    /// Scoped form: acquire, run `f` on this thread while a helper thread keeps the lock
    /// extended, then release; see [`Client::with_lock`]. Auto-extension is turned on.
    pub fn run<F, T>(self, f: F) -> Result<T, Error>
    where
        F: FnOnce(LostSignal) -> T,
    {
        let client = self.client;
        let guard = self.auto_extend(true).acquire()?;
        // Dropped (stopped and joined) before the release below, or while unwinding.
        let helper = client.spawn_keepalive()?;
        let out = f(guard.lost());
        drop(helper);
        // The work is done; whatever the release says changes nothing for the caller.
        let _ = guard.release();
        Ok(out)
    }
}

/// The lock an event is about, if any.
fn lock_of(ev: &Event) -> Option<LockId> {
    match ev {
        Event::Acquired { lock, .. }
        | Event::AcquireFailed { lock, .. }
        | Event::Extended { lock, .. }
        | Event::ExtendFailed { lock, .. }
        | Event::Lost { lock, .. }
        | Event::Released { lock, .. } => Some(*lock),
        _ => None,
    }
}

fn attempts_of(e: &AcquireError) -> Option<u32> {
    match e {
        AcquireError::Held { attempts, .. }
        | AcquireError::Unreachable { attempts, .. }
        | AcquireError::TooSlow { attempts, .. } => Some(*attempts),
        _ => None,
    }
}

/// A helper thread driving a [`Client`]'s event loop; made by [`Client::spawn_keepalive`].
/// Dropping it stops and joins the thread.
#[must_use = "dropping the KeepAlive stops the helper thread at once"]
pub struct KeepAlive {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for KeepAlive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeepAlive").field("running", &self.thread.is_some()).finish()
    }
}

impl KeepAlive {
    /// Stop the helper thread and wait for it to end (the same as dropping the handle).
    pub fn stop(self) {}
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.shared.wake_all();
        if let Some(t) = self.thread.take() {
            // The thread only waits and polls; it has nothing to report.
            let _ = t.join();
        }
    }
}
