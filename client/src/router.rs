//! The table that issues the callers' commands and routes the engine's events back to the
//! callers waiting on them: one per client, whatever runs it.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use redlease_core::{Engine, LockId, LockOptions, LostReason, Misuse, ReleaseReport};

use crate::Error;
use crate::lease::{Lease, LockState};
use crate::monitor::{Monitor, Op};
use crate::oneshot::Sender;
use tracing::Span;

mod election;
mod events;

pub(crate) use election::{LeaderReply, WakeReply};

/// Where the answer to an acquisition goes.
pub(crate) type AcquireReply = Sender<Result<Lease, Error>>;
/// Where the answer to an extension goes: the new deadline.
pub(crate) type ExtendReply = Sender<Result<Instant, Error>>;
/// Where the answer to a release goes.
pub(crate) type ReleaseReply = Sender<Result<ReleaseReport, Error>>;

/// An acquisition in flight and the caller waiting for it.
struct Acquiring {
    reply: AcquireReply,
    resources: Vec<String>,
    token: String,
    op: Op,
}

/// Who waits for a lock's release.
enum Release {
    /// Not being released.
    No,
    /// The caller of `release`.
    Waiting(ReleaseReply),
    /// Nobody: the guard was dropped (or the lock unwanted); forget it once released.
    Detached,
}

/// What the router knows of one lock.
struct Entry {
    acquire: Option<Acquiring>,
    /// A clone of the holder's [`Lease`] (its shared state: deadline, lost signal) once held.
    lease: Option<Lease>,
    /// When it was granted.
    held_since: Option<Instant>,
    extend: Option<(ExtendReply, Op)>,
    /// An abandoned extension was cancelled: its `ExtendFailed(Cancelled)` is for nobody.
    extend_cancelled: bool,
    release: Release,
    release_op: Option<Op>,
}

impl Entry {
    fn new(acquire: Option<Acquiring>) -> Self {
        Entry {
            acquire,
            lease: None,
            held_since: None,
            extend: None,
            extend_cancelled: false,
            release: Release::No,
            release_op: None,
        }
    }

    fn state(&self) -> Option<&LockState> {
        self.lease.as_ref().map(Lease::state)
    }

    fn resource(&self) -> &str {
        self.lease.as_ref().map_or("", Lease::resource)
    }
}

/// One client's table of locks: it issues the callers' commands and routes the engine's
/// events to the callers waiting on them, keeps each held lock's shared state (deadline, lost
/// signal) current, releases what nobody wants any more, fails everything cleanly when the
/// client stops, and reports what happens (`tracing` spans and events, and metrics with the
/// `metrics` feature; see the [`monitor`](crate::monitor) module for names and levels). Both
/// the async driver and the blocking mio client are thin shells over it; neither makes a
/// decision of its own.
#[derive(Default)]
pub struct Router {
    entries: HashMap<LockId, Entry>,
    /// `close` was called: new commands fail with [`Error::Closed`].
    closed: bool,
    monitor: Monitor,
    /// Observers' election reads in flight, and who waits for each.
    reads: HashMap<redlease_core::ReadId, LeaderReply>,
    /// Elections observers watch, by name.
    watches: HashMap<String, election::Watch>,
}

impl Router {
    /// An empty table.
    pub fn new() -> Self {
        Router::default()
    }

    /// Whether no lock is tracked any more.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.reads.is_empty()
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Start acquiring `options` with `token`; the outcome (a [`Lease`]) goes to `reply`, and
    /// onto `span` (made by the caller, [`spans::acquire`](crate::adapter::spans::acquire)).
    /// Returns the lock's id, unless the command was refused at once (the refusal is already
    /// in `reply`).
    pub fn acquire(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        options: LockOptions,
        token: String,
        reply: AcquireReply,
        span: Span,
    ) -> Option<LockId> {
        if self.closed {
            let _ = reply.send(Err(Error::Closed));
            return None;
        }
        match engine.acquire(now, &options, token.as_bytes()) {
            Ok(lock) => {
                let op = Op { span, started: now };
                let waiting = Acquiring { reply, resources: options.resources, token, op };
                self.entries.insert(lock, Entry::new(Some(waiting)));
                Some(lock)
            }
            Err(misuse) => {
                let _ = reply.send(Err(misuse.into()));
                None
            }
        }
    }

    /// Extend `lock` to `ttl` from now; the new deadline goes to `reply`, the outcome onto
    /// `span` ([`spans::extend`](crate::adapter::spans::extend)).
    pub fn extend(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        lock: LockId,
        ttl: Duration,
        reply: ExtendReply,
        span: Span,
    ) {
        self.stretch(engine, now, lock, reply, span, |e| e.extend(now, lock, Some(ttl)));
    }

    /// Turn the write lock `lock` into a read lock ([`Engine::downgrade`]); its new deadline
    /// goes to `reply`, the outcome onto `span`
    /// ([`spans::downgrade`](crate::adapter::spans::downgrade)).
    pub fn downgrade(&mut self, engine: &mut Engine, now: Instant, lock: LockId, reply: ExtendReply, span: Span) {
        self.stretch(engine, now, lock, reply, span, |e| e.downgrade(now, lock));
    }

    /// An extension or a downgrade, which `start` asks the engine for.
    fn stretch(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        lock: LockId,
        reply: ExtendReply,
        span: Span,
        start: impl FnOnce(&mut Engine) -> Result<(), Misuse>,
    ) {
        if self.closed {
            let _ = reply.send(Err(Error::Closed));
            return;
        }
        // An extension whose caller went away (its future was dropped) must not leave the lock
        // busy: abandon it, and start the one asked for now.
        if let Some(entry) =
            self.entries.get_mut(&lock).filter(|e| e.extend.as_ref().is_some_and(|(r, _)| r.is_closed()))
        {
            entry.extend = None;
            entry.extend_cancelled = engine.cancel(now, lock).is_ok();
        }
        match (start(engine), self.entries.get_mut(&lock)) {
            (Ok(()), Some(entry)) => {
                entry.extend = Some((reply, Op { span, started: now }));
            }
            (Ok(()), None) => {
                let _ = reply.send(Err(Misuse::UnknownLock(lock).into()));
            }
            (Err(misuse), _) => {
                let _ = reply.send(Err(misuse.into()));
            }
        }
    }

    /// Release `lock`; the report goes to `reply`, or nowhere (`None`: the guard was dropped),
    /// the outcome onto `span` ([`spans::release`](crate::adapter::spans::release)).
    pub fn release(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        lock: LockId,
        reply: Option<ReleaseReply>,
        span: Span,
    ) {
        if self.closed {
            // `close` released it already.
            if let Some(reply) = reply {
                let _ = reply.send(Err(Error::Closed));
            }
            return;
        }
        match engine.release(now, lock) {
            Ok(()) => {
                let entry = self.entries.entry(lock).or_insert_with(|| Entry::new(None));
                entry.release = reply.map_or(Release::Detached, Release::Waiting);
                entry.release_op = Some(Op { span, started: now });
                // From now on the keys may be gone: a lease that outlives its guard (a clone
                // handed to other work) must not look valid any more.
                if let Some(state) = entry.state() {
                    state.mark_released(now);
                }
            }
            Err(misuse) => {
                if matches!(misuse, Misuse::UnknownLock(_)) {
                    self.entries.remove(&lock);
                }
                if let Some(reply) = reply {
                    let _ = reply.send(Err(misuse.into()));
                }
            }
        }
    }

    /// Turn automatic extension of `lock` on or off.
    pub fn set_auto_extend(&mut self, engine: &mut Engine, now: Instant, lock: LockId, on: bool) {
        // Only an unknown lock is refused, and then there is nothing to extend.
        let _ = engine.set_auto_extend(now, lock, on);
    }

    /// Cancel the acquisitions whose caller went away (dropped its receiver).
    pub fn sweep(&mut self, engine: &mut Engine, now: Instant) {
        let abandoned: Vec<LockId> = self
            .entries
            .iter()
            .filter(|(_, e)| e.acquire.as_ref().is_some_and(|a| a.reply.is_closed()))
            .map(|(lock, _)| *lock)
            .collect();
        for lock in abandoned {
            let _ = engine.cancel(now, lock);
        }
    }

    /// Close the client: refuse new commands, cancel the acquisitions in flight, and release
    /// every held lock (its holder sees it lost, [`LostReason::Stopped`]). The shell keeps
    /// driving the engine until it has no active lock, then stops.
    pub fn close(&mut self, engine: &mut Engine, now: Instant) {
        self.closed = true;
        // Their callers see the client closed.
        self.reads.clear();
        self.watches.clear();
        for (lock, entry) in &mut self.entries {
            if let Some(a) = entry.acquire.take() {
                let _ = a.reply.send(Err(Error::Closed));
                let _ = engine.cancel(now, *lock);
                continue;
            }
            if let (Some(state), Release::No) = (entry.state(), &entry.release) {
                state.mark_lost(LostReason::Stopped);
                state.set_valid_until(now);
                if engine.release(now, *lock).is_ok() {
                    entry.release = Release::Detached;
                }
            }
        }
    }

    /// The client stops for good: every lock still held is lost (nobody extends it any more)
    /// and every caller still waiting sees the client closed.
    /// The gauges it set (with the `metrics` feature) read 0 from now on.
    pub fn stop(&mut self) {
        self.closed = true;
        self.monitor.stop();
        for (_, entry) in self.entries.drain() {
            if let Some(state) = entry.state() {
                state.mark_lost(LostReason::Stopped);
            }
            // Dropping the reply senders tells their receivers the answer will never come.
        }
    }
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router").field("locks", &self.entries.len()).field("closed", &self.closed).finish()
    }
}

#[cfg(test)]
mod tests {
    use redlease_core::{AcquireError, Config, NodeConfig, NodeId, ReleaseOutcome};

    use super::*;
    use crate::oneshot::{self, Dropped};

    /// A one-node engine, connected and past its handshake.
    fn engine(now: Instant) -> Engine {
        let mut engine = Engine::new(Config::new(vec![NodeConfig::new("h", 1)]).client_name(None)).unwrap();
        while let Some(node) = engine.poll_connect(now) {
            engine.handle_connected(now, node);
        }
        engine.handle_data(now, NodeId(0), b"$1\r\n2\r\n%1\r\n$5\r\nproto\r\n:3\r\n"); // format, HELLO 3
        for sha in redlease_core::script_digests() {
            engine.handle_data(now, NodeId(0), format!("${}\r\n{sha}\r\n", sha.len()).as_bytes());
        }
        engine
    }

    fn drain(router: &mut Router, engine: &mut Engine, now: Instant) {
        while let Some(ev) = engine.poll_event() {
            router.route(engine, now, ev);
        }
    }

    fn options() -> LockOptions {
        LockOptions::new("r", Duration::from_secs(10)).attempts(1)
    }

    #[test]
    fn a_grant_becomes_a_lease_and_its_release_a_report() {
        let now = Instant::now();
        let (mut engine, mut router) = (engine(now), Router::new());
        let (tx, rx) = oneshot::channel();
        router.acquire(&mut engine, now, options().resources(["s"]), "tok".into(), tx, Span::none());
        engine.handle_data(now, NodeId(0), b":1\r\n");
        drain(&mut router, &mut engine, now);
        let lease = rx.try_recv().unwrap().unwrap().unwrap();
        assert_eq!((lease.resources(), lease.token()), (&["r".to_owned(), "s".to_owned()][..], "tok"));
        let (tx, rx) = oneshot::channel();
        router.extend(&mut engine, now, lease.id(), Duration::from_secs(20), tx, Span::none());
        engine.handle_data(now, NodeId(0), b":1\r\n");
        drain(&mut router, &mut engine, now);
        let extended = rx.try_recv().unwrap().unwrap().unwrap();
        assert_eq!(lease.valid_until(), extended, "the holder sees the new deadline");
        // An extension to a shorter TTL lowers the holder's deadline as soon as it is sent.
        let (tx, _rx) = oneshot::channel();
        router.extend(&mut engine, now, lease.id(), Duration::from_secs(2), tx, Span::none());
        drain(&mut router, &mut engine, now);
        assert!(lease.valid_until() < extended && lease.valid_until() <= now + Duration::from_secs(2));
        engine.handle_data(now, NodeId(0), b":1\r\n");
        drain(&mut router, &mut engine, now);
        let (tx, rx) = oneshot::channel();
        router.release(&mut engine, now, lease.id(), Some(tx), Span::none());
        assert_eq!(lease.remaining(), Duration::ZERO, "a lease being released is no longer valid");
        engine.handle_data(now, NodeId(0), b":1\r\n");
        drain(&mut router, &mut engine, now);
        assert_eq!(rx.try_recv().unwrap().unwrap().unwrap().outcome, ReleaseOutcome::Released);
        assert!(router.is_empty() && !lease.is_lost());
    }

    #[test]
    fn an_extension_whose_caller_went_away_does_not_leave_the_lock_busy() {
        let now = Instant::now();
        let (mut engine, mut router) = (engine(now), Router::new());
        let (tx, rx) = oneshot::channel();
        router.acquire(&mut engine, now, options(), "tok".into(), tx, Span::none());
        engine.handle_data(now, NodeId(0), b"+OK\r\n"); // one resource: the first attempt is SET NX PX
        drain(&mut router, &mut engine, now);
        let lease = rx.try_recv().unwrap().unwrap().unwrap();
        // The first extension's caller gives up before the answer.
        let (tx, rx) = oneshot::channel();
        router.extend(&mut engine, now, lease.id(), Duration::from_secs(20), tx, Span::none());
        drop(rx);
        // The next one is not refused as busy: it replaces the abandoned one.
        let (tx, rx) = oneshot::channel();
        router.extend(&mut engine, now, lease.id(), Duration::from_secs(30), tx, Span::none());
        assert!(rx.try_recv().is_none(), "in flight, not refused");
        engine.handle_data(now, NodeId(0), b":1\r\n:1\r\n"); // the abandoned round's reply, then ours
        drain(&mut router, &mut engine, now);
        assert!(matches!(rx.try_recv(), Some(Ok(Ok(_)))));
    }

    #[test]
    fn a_grant_nobody_waits_for_is_released() {
        let now = Instant::now();
        let (mut engine, mut router) = (engine(now), Router::new());
        let (tx, rx) = oneshot::channel();
        router.acquire(&mut engine, now, options(), "tok".into(), tx, Span::none());
        drop(rx);
        engine.handle_data(now, NodeId(0), b"+OK\r\n");
        drain(&mut router, &mut engine, now);
        assert_eq!(engine.active_locks(), 1, "being released");
        engine.handle_data(now, NodeId(0), b":1\r\n");
        drain(&mut router, &mut engine, now);
        assert_eq!(engine.active_locks(), 0);
        assert!(router.is_empty());
    }

    #[test]
    fn failures_and_misuse_reach_the_caller_and_close_fails_the_rest() {
        let now = Instant::now();
        let (mut engine, mut router) = (engine(now), Router::new());
        let (tx, rx) = oneshot::channel();
        router.acquire(&mut engine, now, LockOptions::new("", Duration::from_secs(1)), "tok".into(), tx, Span::none());
        assert!(matches!(rx.try_recv(), Some(Ok(Err(Error::Misuse(Misuse::EmptyResource))))));
        let (tx, rx) = oneshot::channel();
        router.acquire(&mut engine, now, options(), "tok".into(), tx, Span::none());
        engine.handle_data(now, NodeId(0), b"$-1\r\n");
        drain(&mut router, &mut engine, now);
        assert!(matches!(rx.try_recv(), Some(Ok(Err(Error::Acquire(AcquireError::Held { .. }))))));
        // A held lock, then close: lost (Stopped) and released; new calls are refused.
        let (tx, rx) = oneshot::channel();
        router.acquire(&mut engine, now, options(), "tok2".into(), tx, Span::none());
        engine.handle_data(now, NodeId(0), b":1\r\n+OK\r\n"); // the cleanup's reply, then the grant
        drain(&mut router, &mut engine, now);
        let lease = rx.try_recv().unwrap().unwrap().unwrap();
        router.close(&mut engine, now);
        assert_eq!(lease.lost().reason(), Some(LostReason::Stopped));
        let (tx, rx) = oneshot::channel();
        router.acquire(&mut engine, now, options(), "tok3".into(), tx, Span::none());
        assert!(matches!(rx.try_recv(), Some(Ok(Err(Error::Closed)))));
        engine.handle_data(now, NodeId(0), b":1\r\n");
        drain(&mut router, &mut engine, now);
        assert_eq!(engine.active_locks(), 0);
        // Stop drops every waiting reply.
        let (tx, rx) = oneshot::channel::<Result<Lease, Error>>();
        let mut other = Router::new();
        let mut e2 = self::engine(now);
        other.acquire(&mut e2, now, options(), "t".into(), tx, Span::none());
        other.stop();
        assert!(matches!(rx.try_recv(), Some(Err(Dropped))));
    }
}
