//! What the threads of one blocking client share: the driver, the router, the poll, and the
//! waiting scheme in which the thread that waits drives the loop.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Waker};
use redlease_client::Error;
use redlease_client::adapter::{Pump, Router, oneshot, spans};
use redlease_core::{Engine, LockId};

use crate::driver::Driver;

/// The poll and its event buffer: held by the one thread that is polling.
pub(crate) struct Poller {
    pub(crate) poll: Poll,
    pub(crate) events: Events,
}

/// A thread inside [`Shared::wait`], asleep or about to be.
struct Waiter {
    id: u64,
    signal: Arc<Signal>,
    /// It waits for this lock's outcome only (signalled when an event for it arrives, and
    /// taken off the list then), not for rounds of the loop.
    lock: Option<LockId>,
}

/// How a sleeping thread is woken: a reason is recorded, then its thread is unparked. The
/// sleeper needs no lock to learn why it woke.
struct Signal {
    reasons: AtomicU8,
    thread: Thread,
}

impl Signal {
    /// An event for the lock it waits for was routed (its answer is in), and it was taken off
    /// the list of waiters.
    const ANSWERED: u8 = 1;
    /// Anything else: a round of the loop ended, the poll was handed over, the client closed.
    const WOKEN: u8 = 2;

    fn new() -> Self {
        Signal { reasons: AtomicU8::new(0), thread: std::thread::current() }
    }

    /// Record `reason` and wake the thread (a system call only if it is parked).
    fn raise(&self, reason: u8) {
        self.reasons.fetch_or(reason, Ordering::Release);
        self.thread.unpark();
    }

    /// Sleep (on the thread that made the signal) until a reason is raised or `deadline`
    /// passes; returns the reasons raised since the last call, `0` on timeout.
    fn sleep(&self, deadline: Option<Instant>) -> u8 {
        loop {
            let reasons = self.reasons.swap(0, Ordering::Acquire);
            if reasons != 0 {
                return reasons;
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => std::thread::park_timeout(left),
                    _ => return self.reasons.swap(0, Ordering::Acquire),
                },
            }
        }
    }
}

/// What a thread in [`Shared::wait`] waits for: `check` yields the value; it is given the
/// state, or `None` when the thread was woken for `lock`'s answer (then it checks without
/// the state's lock, and is given the state next if it has no value yet). Without `lock`, the
/// thread is woken after every round of the loop.
struct Until<C> {
    lock: Option<LockId>,
    check: C,
}

/// An [`Until`] for a check of the state, woken after every round of the loop.
fn check_state<T>(
    check: &mut impl FnMut(&mut State) -> Option<T>,
) -> Until<impl FnMut(Option<&mut State>) -> Option<T> + '_> {
    Until { lock: None, check: move |st: Option<&mut State>| st.and_then(&mut *check) }
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
    /// Waiters whose answer is in, taken off `waiters`: woken once the state's lock is let go
    /// (waking them under it would only have them wait for it).
    answered: Vec<Arc<Signal>>,
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
            answered: Vec::new(),
            next_waiter: 0,
            woken: false,
        }
    }

    /// Route the driver's events to the callers waiting on them, and take the threads waiting
    /// for those locks off the list, to be woken once the state's lock is let go
    /// ([`Shared::unlock`]; they take their answer without that lock).
    pub(crate) fn dispatch(&mut self, now: Instant) {
        while let Some(event) = self.driver.poll_event() {
            let lock = event.lock();
            // Link failures are in the driver's node status, where the client reports them.
            let _ = self.router.route(self.driver.engine_mut(), now, event);
            if lock.is_some() {
                let mut i = 0;
                while i < self.waiters.len() {
                    if self.waiters[i].lock == lock {
                        self.answered.push(self.waiters.swap_remove(i).signal);
                    } else {
                        i += 1;
                    }
                }
            }
        }
    }

    /// Wake the waiters whose answer is in now, under the state's lock (for those who let it
    /// go elsewhere than [`Shared::unlock`]).
    fn wake_answered(&mut self) {
        for signal in self.answered.drain(..) {
            signal.raise(Signal::ANSWERED);
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

/// What the caller of [`Shared::command`] does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Then {
    /// It waits for the command's answer, driving the loop if nobody else does.
    Wait,
    /// It goes on without waiting.
    Return,
}

/// The end signal of a keeper thread (it sends once, when it has written out what was queued).
pub(crate) struct Keeper(std::sync::mpsc::Receiver<()>);

/// What the threads of one client share.
///
/// Wake-ups are targeted: a thread waiting for a lock's outcome sleeps on a [`Signal`] of its
/// own, raised only when an event for that lock arrives (once the routing thread has let the
/// state's lock go), and takes its answer without that lock; a thread waiting for anything
/// else (`run_until`, a keep-alive, a lost signal) is woken after every round of the loop; and
/// only a thread that stops driving the loop hands it to one sleeper.
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

    /// Let go of the state's lock, then wake the waiters whose answer came meanwhile.
    fn unlock(mut st: MutexGuard<'_, State>) {
        let answered = std::mem::take(&mut st.answered);
        drop(st);
        for signal in answered {
            signal.raise(Signal::ANSWERED);
        }
    }

    /// Issue a command: `command` gets the router, the driver's engine and the time, then the
    /// command is routed and written out as `then` says. Returns what `command` returned.
    ///
    /// A thread blocked in `poll` is interrupted (once per poll) so that it writes the command
    /// out and re-reads the driver's timeout. With nobody polling, a caller that waits next
    /// ([`Then::Wait`]) writes it in the round it drives, with whatever else is queued; else
    /// it is written at once (a non-blocking write), so that e.g. the release of a dropped
    /// guard goes out even if nobody drives the loop afterwards (its reply is read the next
    /// time somebody does).
    pub(crate) fn command<T>(
        &self,
        st: &mut State,
        then: Then,
        command: impl FnOnce(&mut Router, &mut Engine, Instant) -> T,
    ) -> T {
        let now = Instant::now();
        let State { driver, router, .. } = st;
        let out = command(router, driver.engine_mut(), now);
        st.dispatch(now);
        if st.poller.is_some() {
            if then == Then::Return {
                st.driver.flush(now);
                st.dispatch(now);
            }
        } else if !st.woken {
            // If the wake fails, the poller still wakes at its old timeout or next event.
            st.woken = self.waker.wake().is_ok();
        }
        // The caller holds on to the lock: wake the answered now.
        st.wake_answered();
        out
    }

    /// Block until `check` yields a value, driving the loop whenever no other thread does;
    /// it is checked after every round of the loop. `Err(Closed)` once the client is closed.
    pub(crate) fn wait_for<'a, T>(
        &'a self,
        st: MutexGuard<'a, State>,
        mut check: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<T, Error> {
        self.wait(st, None, check_state(&mut check))?.ok_or(Error::Closed)
    }

    /// Block until the answer to a command for `lock` is in `reply`, driving the loop whenever
    /// no other thread does. The thread sleeps until an event for that lock arrives, and takes
    /// the answer without the state's lock (without a lock, it checks after every round).
    /// `Err(Closed)` once the client is closed (or the request was dropped unanswered, which
    /// only closing does).
    pub(crate) fn wait_reply<'a, T>(
        &'a self,
        st: MutexGuard<'a, State>,
        lock: Option<LockId>,
        reply: &oneshot::Receiver<T>,
    ) -> Result<T, Error> {
        let check = |_: Option<&mut State>| reply.try_recv();
        self.wait(st, None, Until { lock, check })?.ok_or(Error::Closed)?.map_err(|_| Error::Closed)
    }

    /// Block until `check` yields a value or `deadline` passes (`Ok(None)`), driving the loop
    /// whenever no other thread does; it is checked after every round of the loop. Drives at
    /// least one round if the poll is free. `Err(Closed)` once the client is closed.
    pub(crate) fn wait_until<'a, T>(
        &'a self,
        st: MutexGuard<'a, State>,
        deadline: Instant,
        mut check: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<Option<T>, Error> {
        self.wait(st, Some(deadline), check_state(&mut check))
    }

    /// The waiting loop: check; if the poll is free, drive a round; else sleep until woken
    /// (for `until.lock`: only by an event for that lock, or to take over the poll). Leaving,
    /// a thread that finds the poll free hands it to one sleeper.
    fn wait<'a, T>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        deadline: Option<Instant>,
        mut until: Until<impl FnMut(Option<&mut State>) -> Option<T>>,
    ) -> Result<Option<T>, Error> {
        let signal = Arc::new(Signal::new());
        let id = st.next_waiter;
        st.next_waiter += 1;
        let mut listed = false;
        let mut drove = false;
        let result = loop {
            if let Some(t) = (until.check)(Some(&mut st)) {
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
            if !listed {
                st.waiters.push(Waiter { id, signal: Arc::clone(&signal), lock: until.lock });
                listed = true;
            }
            Shared::unlock(st);
            let reasons = signal.sleep(deadline);
            if reasons & Signal::ANSWERED != 0 {
                // Taken off the list. Unless the poll was handed over too, the answer is all
                // there is to see: no need for the state's lock.
                listed = false;
                if reasons & Signal::WOKEN == 0 {
                    if let Some(t) = (until.check)(None) {
                        return Ok(Some(t));
                    }
                }
            }
            st = self.lock();
        };
        if listed {
            if let Some(pos) = st.waiters.iter().position(|w| w.id == id) {
                st.waiters.swap_remove(pos);
            }
        }
        if st.poller.is_some() && !st.closed {
            // What the engine queued in reaction to the last round (a new connection's
            // handshake, an automatic extension) goes out now, not when someone next drives
            // the loop: the node's liveness is measured from when it was queued.
            let now = Instant::now();
            st.driver.flush(now);
            st.dispatch(now);
        }
        // Nobody drives the loop now: hand it to one of the sleepers, once the state's lock is
        // let go (it takes that lock first thing).
        let next = st.poller.is_some().then(|| st.waiters.first().map(|w| Arc::clone(&w.signal))).flatten();
        Shared::unlock(st);
        if let Some(next) = next {
            next.raise(Signal::WOKEN);
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
        Shared::unlock(st);
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
        // Wake the waiters that wait for rounds of the loop (all of them if it broke).
        let closed = st.closed;
        for w in st.waiters.iter().filter(|w| w.lock.is_none() || closed) {
            w.signal.raise(Signal::WOKEN);
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
            let _ = shared.wait_for(st, |st| (st.keeper_gen != generation).then_some(()));
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
            w.signal.raise(Signal::WOKEN);
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
            st.wake_answered();
            let next = st.driver.poll_timeout().map_or(deadline, |t| t.min(deadline));
            match p.poll.poll(&mut p.events, Some(next.saturating_duration_since(now))) {
                Ok(()) => st.process(&p.events, Instant::now()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        st.wake_answered();
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
        let check = |_: Option<&mut State>| done().then_some(());
        self.wait(st, deadline, Until { lock: None, check })?;
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
