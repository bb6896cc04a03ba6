//! What the threads of one blocking client share: the driver, the router, the poll, and the
//! waiting scheme in which the thread that waits drives the loop.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mio::{Events, Poll, Waker};
use redlease_client::Error;
use redlease_client::adapter::{Pump, Router, spans};
use redlease_core::{Engine, LockId};

use crate::driver::Driver;

/// The poll and its event buffer: held by the one thread that is polling.
pub(crate) struct Poller {
    pub(crate) poll: Poll,
    pub(crate) events: Events,
}

/// A thread inside [`Shared::wait`].
struct Waiter {
    id: u64,
    signal: Arc<Condvar>,
    /// It waits for this lock's outcome only (signalled when an event for it arrives), not
    /// for rounds of the loop.
    lock: Option<LockId>,
}

pub(crate) struct State {
    /// `None` while a thread is blocked in `poll`.
    pub(crate) poller: Option<Poller>,
    pub(crate) driver: Driver,
    pub(crate) router: Router,
    /// The client is closed (`close`), or its poll failed for good.
    pub(crate) closed: bool,
    /// Held locks whose guard asked for automatic extension.
    auto_locks: usize,
    /// Which keeper is the current one: a keeper whose generation is not the current one has
    /// been told to end (the last lock it served was uncounted), even if new locks came since.
    keeper_gen: u64,
    /// The current keeper (which drives the loop while `auto_locks > 0`), by its end signal:
    /// `None` when none runs, taken by whoever uncounts the last auto-extended lock.
    keeper_thread: Option<Keeper>,
    /// The threads inside [`Shared::wait`].
    waiters: Vec<Waiter>,
    next_waiter: u64,
    /// The waker was woken since the polling thread last took the lock: the commands issued
    /// meanwhile go out with the next poll's flush, no need to wake it again.
    woken: bool,
}

impl State {
    pub(crate) fn new(poller: Poller, driver: Driver) -> Self {
        State {
            poller: Some(poller),
            driver,
            router: Router::new(),
            closed: false,
            auto_locks: 0,
            keeper_gen: 0,
            keeper_thread: None,
            waiters: Vec::new(),
            next_waiter: 0,
            woken: false,
        }
    }

    /// Route the driver's events to the callers waiting on them, and signal the threads
    /// waiting for those locks.
    pub(crate) fn dispatch(&mut self, now: Instant) {
        while let Some(event) = self.driver.poll_event() {
            if let Some(lock) = event.lock() {
                for w in self.waiters.iter().filter(|w| w.lock == Some(lock)) {
                    w.signal.notify_one();
                }
            }
            // Link failures are in the driver's node status, where the client reports them.
            let _ = self.router.route(self.driver.engine_mut(), now, event);
        }
    }

    /// Feed one poll's readiness events and the clock to the driver.
    fn process(&mut self, events: &Events, now: Instant) {
        for ev in events.iter() {
            // The waker's events are not the driver's; they only ended the poll.
            self.driver.handle_event(now, ev);
        }
        self.driver.handle_timeout(now);
        self.dispatch(now);
    }
}

/// The end signal of a keeper thread (it sends once, when it has written out what was queued).
pub(crate) struct Keeper(std::sync::mpsc::Receiver<()>);

/// What the threads of one client share.
///
/// Wake-ups are targeted: a thread waiting for a lock's outcome sleeps on a condition
/// variable of its own, signalled only when an event for that lock arrives; a thread waiting
/// for anything else (`run_until`, a keep-alive, a lost signal) is signalled after every
/// round of the loop; and a thread that stops driving the loop hands it to one sleeper.
pub(crate) struct Shared {
    state: Mutex<State>,
    waker: Waker,
    /// The client's name (its config's), for the spans of the operations its callers wait for.
    pub(crate) name: Box<str>,
}

impl Shared {
    pub(crate) fn new(state: State, waker: Waker) -> Self {
        let name = spans::client(state.driver.engine().config()).into();
        Shared { state: Mutex::new(state), waker, name }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Issue a command: `command` gets the router, the driver's engine and the time, then the
    /// command is written out ([`after_command`](Self::after_command)). Returns what `command`
    /// returned.
    pub(crate) fn command<T>(&self, st: &mut State, command: impl FnOnce(&mut Router, &mut Engine, Instant) -> T) -> T {
        let now = Instant::now();
        let State { driver, router, .. } = st;
        let out = command(router, driver.engine_mut(), now);
        self.after_command(st, now);
        out
    }

    /// After a command: route its immediate events, and get it written. A thread blocked in
    /// `poll` is interrupted (once per poll) so that it writes the command out and re-reads
    /// the driver's timeout; with nobody polling, it is written at once (a non-blocking
    /// write), so that e.g. the release of a dropped guard goes out even if nobody drives the
    /// loop afterwards (its reply is read the next time somebody does).
    pub(crate) fn after_command(&self, st: &mut State, now: Instant) {
        st.dispatch(now);
        if st.poller.is_some() {
            st.driver.flush(now);
            st.dispatch(now);
        } else if !st.woken {
            // If the wake fails, the poller still wakes at its old timeout or next event.
            st.woken = self.waker.wake().is_ok();
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
    /// as in [`wait_for`](Self::wait_for). `Err(Closed)` once the client is closed.
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
        st.waiters.push(Waiter { id, signal: Arc::clone(&signal), lock });
        let mut drove = false;
        let result = loop {
            if let Some(t) = check(&mut st) {
                break Ok(Some(t));
            }
            if st.closed {
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
        if st.poller.is_some() && !st.closed {
            // What the engine queued in reaction to the last round (a new connection's
            // handshake, an automatic extension) goes out now, not when someone next drives
            // the loop: the node's liveness is measured from when it was queued.
            let now = Instant::now();
            st.driver.flush(now);
            st.dispatch(now);
        }
        // Nobody drives the loop now: hand it to one of the sleepers.
        if st.poller.is_some() {
            if let Some(w) = st.waiters.first() {
                w.signal.notify_one();
            }
        }
        result
    }

    /// One round of the loop: write out what is queued, poll (with the lock released) until
    /// the driver's timeout, `deadline` or an event, then feed the driver and hand the poll
    /// back.
    fn drive<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        mut p: Poller,
        deadline: Option<Instant>,
    ) -> MutexGuard<'a, State> {
        let now = Instant::now();
        // Every command queued since the last poll, whichever thread issued it.
        st.driver.flush(now);
        st.dispatch(now);
        let next = match (st.driver.poll_timeout(), deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        drop(st);
        let result = p.poll.poll(&mut p.events, next.map(|t| t.saturating_duration_since(now)));
        let mut st = self.lock();
        st.woken = false;
        match result {
            Ok(()) => st.process(&p.events, Instant::now()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                st.closed = true;
                st.router.stop();
            }
        }
        st.poller = Some(p);
        // Signal the waiters that wait for rounds of the loop (all of them if it broke).
        for w in st.waiters.iter().filter(|w| w.lock.is_none() || st.closed) {
            w.signal.notify_one();
        }
        st
    }

    /// One more held lock wants automatic extension: start the keeper thread if none runs.
    /// It drives the loop (extensions, lost signals, releases) until no such lock is left or
    /// the client closes, so that auto-extension never depends on what the caller's threads
    /// are doing.
    pub(crate) fn auto_locked(self: &Arc<Self>, st: &mut State) -> Result<(), Error> {
        if st.keeper_thread.is_some() {
            st.auto_locks += 1;
            return Ok(());
        }
        // The thread waits for the state's lock, which the caller holds until it has counted.
        let shared = Arc::clone(self);
        let generation = st.keeper_gen.wrapping_add(1);
        let (ended, end) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new().name("redlease-mio-extend".into()).spawn(move || {
            let st = shared.lock();
            // Ends when told to (another generation is current), or when the client closes
            // (then every caller sees `Closed`); what is queued is written out first.
            let _ = shared.wait_for(st, None, |st| (st.keeper_gen != generation).then_some(()));
            let mut st = shared.lock();
            if st.keeper_gen == generation {
                st.keeper_thread = None;
            }
            drop(st);
            let _ = ended.send(());
        })?;
        st.keeper_gen = generation;
        st.keeper_thread = Some(Keeper(end));
        st.auto_locks += 1;
        Ok(())
    }

    /// One held lock no longer wants automatic extension (turned off, released or dropped).
    /// When it was the last, the keeper is told to end, and returned: the caller wakes it and
    /// waits for its end once the state's lock is let go ([`stop_keeper`](Self::stop_keeper)).
    /// The keeper writes out what is queued (a release) before it ends, so that a program
    /// whose `main` returns next leaves nothing unsent. A lock counted meanwhile starts a new
    /// keeper.
    pub(crate) fn auto_unlocked(st: &mut State) -> Option<Keeper> {
        st.auto_locks = st.auto_locks.saturating_sub(1);
        if st.auto_locks > 0 {
            return None;
        }
        st.keeper_gen = st.keeper_gen.wrapping_add(1);
        st.keeper_thread.take()
    }

    /// Wake the keeper and wait for it to end, at most the release bound (it ends at once once
    /// woken; if it cannot be woken, it ends at its next poll and nobody waits for it).
    pub(crate) fn stop_keeper(&self, keeper: Keeper) {
        self.wake_all();
        let bound = Shared::release_bound(&self.lock());
        let _ = keeper.0.recv_timeout(bound);
    }

    /// Stop waiters of a keep-alive: wake every sleeper and the poller.
    pub(crate) fn wake_all(&self) {
        let st = self.lock();
        for w in &st.waiters {
            w.signal.notify_one();
        }
        let _ = self.waker.wake();
    }

    /// Drive the loop by this thread alone (no other handle is left, or it is closing) until
    /// the engine has no active lock or `deadline` passes.
    pub(crate) fn settle(st: &mut State, deadline: Instant) {
        let Some(mut p) = st.poller.take() else {
            return;
        };
        while !st.closed && st.driver.engine().active_locks() > 0 {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st.driver.flush(now);
            st.dispatch(now);
            let next = st.driver.poll_timeout().map_or(deadline, |t| t.min(deadline));
            match p.poll.poll(&mut p.events, Some(next.saturating_duration_since(now))) {
                Ok(()) => st.process(&p.events, Instant::now()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        st.poller = Some(p);
    }

    /// How long releases may take when the client closes: a round is bounded by the node
    /// timeout.
    pub(crate) fn release_bound(st: &State) -> Duration {
        st.driver.engine().config().node_timeout + Duration::from_millis(100)
    }
}

impl Pump for Shared {
    fn pump(&self, deadline: Option<Instant>, done: &mut dyn FnMut() -> bool) -> Result<(), Error> {
        let st = self.lock();
        self.wait(st, deadline, None, |_| done().then_some(()))?;
        Ok(())
    }
}

impl Drop for Shared {
    /// Last handle gone: give releases from dropped guards a moment to finish (bounded by the
    /// node timeout), then close the sockets.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let deadline = Instant::now() + Shared::release_bound(st);
        Shared::settle(st, deadline);
        st.router.stop();
        st.driver.deregister(Instant::now());
    }
}
