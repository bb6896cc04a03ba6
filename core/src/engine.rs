//! The engine: an orchestrator over the links, the lock records, the waiters and the timer
//! table. This file is its public API (getters, inputs, commands, outputs); the lock state
//! machine and the records' timers are in [`round`], wake-on-release in [`wake`], and what the
//! links bring in (replies, failures) in [`links`]; the per-node getters are in [`nodes`].

mod audit;
mod cluster;
mod election;
mod links;
mod nodes;
mod reentry;
mod replicas;
mod round;
mod rwlock;
mod semaphore;
mod wake;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::{AcquireError, ConfigError, ExtendError, LinkError, Misuse, Vote};
use crate::event::{Event, LinkState, LockId, LockInfo, NodeId};
use crate::footprint::Footprint;
use crate::health::Health;
use crate::link::Links;
use crate::lock::{Hold, Phase, min_opt};
use crate::locks::Locks;
use crate::options::{LockOptions, ttl_to_send};
use crate::quorum::quorum;
use crate::rng::Rng;
use crate::timer::TimerTable;
use crate::wake::Waiters;
use crate::wire::Op;

/// The jitter seed of a config without one (the engine takes no OS randomness; the client
/// layer draws a seed from the OS).
const FIXED_SEED: u64 = 0x5eed_0f4e_d10c;

/// The Redlock engine for one set of N nodes. See the [crate docs](crate) for the run loop.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    quorum: usize,
    links: Links,
    locks: Locks,
    timers: TimerTable,
    events: VecDeque<Event>,
    rng: Rng,
    /// Reused buffer for a round's command, encoded once and copied to every link.
    scratch: Vec<u8>,
    /// Acquisitions waiting for a release, by wake channel.
    waiters: Waiters,
    /// An attempt is being started from a failed one: a next attempt that fails as it is
    /// sent (every node's vote failing at once) waits for the timer instead of recursing.
    retrying: bool,
    /// The wall clock that waiters' tickets count on: [`Config::wall_clock`], or from the first
    /// instant a ticket was asked for.
    wall_clock: Option<(Instant, Duration)>,
    /// Observers' reads of elections in flight.
    reads: election::Reads,
}

impl Engine {
    /// Build an engine for `config.nodes`, validating the config. Every link starts down and
    /// due for its first connect attempt at once: [`poll_connect`](Self::poll_connect) hands
    /// them out (a caller that opens sockets by itself may call
    /// [`handle_connected`](Self::handle_connected) directly).
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Engine {
            quorum: quorum(config.nodes.len()),
            links: Links::new(&config),
            locks: Locks::default(),
            timers: TimerTable::default(),
            events: VecDeque::new(),
            rng: Rng::new(config.seed.unwrap_or(FIXED_SEED)),
            scratch: Vec::new(),
            waiters: Waiters::default(),
            retrying: false,
            wall_clock: config.wall_clock,
            reads: election::Reads::default(),
            config,
        })
    }

    // ----- getters -------------------------------------------------------------------------

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Number of nodes, N.
    pub fn node_count(&self) -> usize {
        self.links.len()
    }

    /// Nodes that must agree: N / 2 + 1.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// The health view: every node's state, round trips and last error, how many more nodes
    /// may fail before locking stops ([`Health::fault_tolerance`]), and the engine's own locks
    /// (what each holds or waits for: resources, read or write, a semaphore's permits; its state
    /// and deadline).
    pub fn health(&self) -> Health {
        let locks = self.locks.live().filter_map(|(id, s)| s.health(id)).collect();
        Health { nodes: self.links.health(), quorum: self.quorum, locks, footprint: self.footprint() }
    }

    /// What the engine retains now, counted: locks in use, requests awaiting replies, unsent
    /// bytes, cleanups kept for a redirect, waiters, wake channels, subscriptions and unpolled
    /// events. Every figure is bounded, and an engine whose locks are all released, whose
    /// replies are all read and whose events are all polled is back to
    /// [`Footprint::is_idle`]: a long-lived client can watch it stay flat.
    pub fn footprint(&self) -> Footprint {
        let mut fp = Footprint {
            locks: self.locks.active(),
            lock_records: self.locks.capacity(),
            waiters: self.waiters.count() + self.reads.watching() + self.reads.in_flight(),
            events: self.events.len(),
            ..Footprint::default()
        };
        self.links.footprint(&mut fp);
        fp
    }

    /// Number of locks the engine is tracking (acquiring, held or releasing).
    pub fn active_locks(&self) -> usize {
        self.locks.active()
    }

    /// A snapshot of a lock, or `None` for an unknown id.
    pub fn lock_info(&self, lock: LockId) -> Option<LockInfo> {
        self.locks.get(lock).ok()?.info()
    }

    /// The votes of `lock`'s current round (or its last one, after its final event, until the
    /// id is reused: read them right after the event), by node, and when that round started.
    /// For logs and traces; no allocation.
    pub fn round(&self, lock: LockId) -> Option<(Instant, &[Vote])> {
        let s = self.locks.last(lock)?;
        Some((s.round.start, s.round.tally.votes()))
    }

    // ----- inputs --------------------------------------------------------------------------

    /// A connection to `node` is open (normally the attempt [`poll_connect`](Self::poll_connect)
    /// handed out). The engine queues the handshake (AUTH, SELECT, HELLO 3, CLIENT SETNAME,
    /// SCRIPT LOAD, as configured); later commands are pipelined behind it.
    ///
    /// Calling it for a link the engine thinks is up first treats the old connection as lost.
    pub fn handle_connected(&mut self, now: Instant, node: NodeId) {
        if node.index() >= self.links.count() {
            return;
        }
        if self.links.is_up(node) {
            self.handle_disconnected(now, node, "replaced by a new connection");
        }
        self.links.connected(now, node);
    }

    /// The connect attempt to `node` that [`poll_connect`](Self::poll_connect) handed out
    /// failed (refused, unreachable, unresolvable host...). `reason` is recorded for the
    /// node's votes (`connect failed: {reason}`), and the next attempt is scheduled after the
    /// reconnect backoff. Ignored unless the node is [`LinkState::Connecting`].
    pub fn handle_connect_failed(&mut self, now: Instant, node: NodeId, reason: &str) {
        let error = |node, addr| LinkError::ConnectFailed { node, addr, reason: reason.to_owned() };
        if let Some(error) = self.links.connect_failed(now, node, error, &mut self.rng) {
            self.events.push_back(Event::LinkFailed { error });
        }
    }

    /// Bytes arrived from `node`, split anywhere. Complete replies are matched to requests
    /// in order; a partial reply waits for the rest.
    pub fn handle_data(&mut self, now: Instant, node: NodeId, data: &[u8]) {
        if !self.links.is_up(node) {
            return;
        }
        if !self.links.has_partial(node) {
            // The usual case: decode straight from the caller's bytes; keep only a partial tail.
            if let Some(used) = self.consume(now, node, data) {
                self.links.extend_partial(node, &data[used..]);
            }
        } else {
            let mut buf = self.links.take_partial(node);
            buf.extend_from_slice(data);
            if let Some(used) = self.consume(now, node, &buf) {
                buf.drain(..used);
                self.links.put_partial(node, buf);
            }
        }
        self.links.sync_all(now);
    }

    /// The connection to `node` is closed, for `reason` (end of stream, a socket error; or,
    /// while connecting, the attempt was given up). Requests in flight count as failed on that
    /// node ([`Event::LinkFailed`] with [`LinkError::Lost`] tells why), and the next connect
    /// attempt is scheduled after the reconnect backoff.
    ///
    /// [`LinkError::Lost`]: crate::LinkError::Lost
    pub fn handle_disconnected(&mut self, now: Instant, node: NodeId, reason: &str) {
        match self.links.state(node) {
            Some(LinkState::Up { .. }) => {
                let Some(error) = self.links.lost(node, reason) else { return };
                let vote = Vote::Error(error.reason());
                self.events.push_back(Event::LinkFailed { error });
                self.take_down(now, node, vote);
            }
            Some(LinkState::Connecting { .. }) => self.handle_connect_failed(now, node, reason),
            _ => {}
        }
    }

    /// Skip the backoff: make `node`'s next connect attempt due at once, and start its backoff
    /// over from [`Config::reconnect_min`]. Does nothing unless the node is
    /// [`LinkState::Down`]. For a driver that (re)starts its sockets; a link that is due
    /// but never handed to [`poll_connect`](Self::poll_connect) costs no timer.
    pub fn reconnect_now(&mut self, node: NodeId) {
        self.links.reconnect_now(node);
    }

    /// Time passed: run what is due (node timeouts, retries, expiry, automatic extension,
    /// connect deadlines, reconnect times). Extra calls are harmless.
    ///
    /// A connect attempt past its deadline is abandoned: [`Event::LinkFailed`] with
    /// [`LinkError::ConnectTimeout`], [`poll_close`](Self::poll_close) hands the node out for
    /// the driver to drop the attempt, and the next one is scheduled. A node whose reconnect
    /// time has come is due for [`poll_connect`](Self::poll_connect).
    ///
    /// A connection whose oldest request has gone unanswered for
    /// [`Config::liveness_timeout`] (its handshake: for `connect_timeout`) is failed like a
    /// lost one ([`LinkError::Silent`]) and reconnected.
    ///
    /// One call does a bounded amount of work: each lock's timer runs about once; what comes
    /// due again meanwhile (a retry with a zero delay) waits for the next call, which
    /// [`poll_timeout`](Self::poll_timeout) then asks for at once.
    ///
    /// [`LinkError::ConnectTimeout`]: crate::LinkError::ConnectTimeout
    /// [`LinkError::Silent`]: crate::LinkError::Silent
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.links.wake().is_some_and(|w| w <= now) {
            self.links.handle_timeout(now, &mut self.rng, &mut self.events);
            self.links.refresh_maps(now);
            let locks = &self.locks;
            for (link, copy) in self.links.resend_due(now, |lock| locks.get(lock).is_ok()) {
                self.resend_narrowed(now, link, copy, false);
            }
            self.links.check_replicas(now);
            for i in 0..self.links.count() {
                if let Some(error) = self.links.silent(NodeId(i as u16), now) {
                    self.fail_link(now, NodeId(i as u16), error);
                }
            }
        }
        self.reads_due(now);
        let mut budget = self.locks.active() + 16;
        while budget > 0 {
            let Some(idx) = self.timers.pop_due(now) else { break };
            self.on_record_timeout(now, idx);
            self.arm(idx);
            budget -= 1;
        }
        self.links.sync_all(now);
    }

    // ----- commands ------------------------------------------------------------------------

    /// Start acquiring `options.resources` with `token` (the caller's unique value for this
    /// acquisition, e.g. 20 random bytes hex-encoded; it may not contain `:`, see
    /// [`Misuse::ColonInToken`]): the first attempt goes to every connected node at once.
    ///
    /// The outcome arrives as [`Event::Acquired`] or [`Event::AcquireFailed`]. Nodes that are
    /// down count as failed at once.
    pub fn acquire(&mut self, now: Instant, options: &LockOptions, token: &[u8]) -> Result<LockId, Misuse> {
        let ttl = options.check(token, &self.config)?;
        let idx = self.locks.take(now);
        let s = &mut self.locks[idx];
        s.start(now, options, token, ttl, &self.config);
        let lock = LockId { index: idx, generation: s.generation };
        self.start_attempt(now, idx);
        self.arm(idx);
        Ok(lock)
    }

    /// Extend a held lock to `ttl` from now (`None`: its acquire TTL) on every node.
    ///
    /// The outcome arrives as [`Event::Extended`] or [`Event::ExtendFailed`]. A failed
    /// extension never deletes anything. When `ttl` leaves less validity than the lock has,
    /// the shorter deadline applies at once, whatever the outcome: a node may have applied
    /// the new expiry even if its answer never arrived. If an automatic extension is already
    /// in flight, its outcome is reported as the answer to this call.
    pub fn extend(&mut self, now: Instant, lock: LockId, ttl: Option<Duration>) -> Result<(), Misuse> {
        let s = self.locks.get(lock)?;
        let ttl = ttl_to_send(ttl.unwrap_or(s.ttl), self.config.drift_factor)?;
        let idx = lock.index;
        let Some(hold) = self.locks[idx].extend_from(lock)? else {
            return Ok(());
        };
        let ttl = self.locks[idx].capped(now, ttl, self.config.drift_factor).ok_or(Misuse::CapReached(lock))?;
        if self.extend_fails(now, lock, &hold) {
            return Ok(());
        }
        self.start_extend(now, idx, ttl, true);
        self.arm(idx);
        Ok(())
    }

    /// Release a held lock: the compare-and-delete script on every node.
    ///
    /// The outcome arrives as [`Event::Released`], after which the id is free. An extension
    /// in flight is abandoned (reported as [`ExtendError::Cancelled`] if it was asked for).
    pub fn release(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        let s = self.locks.get(lock)?;
        let (hold, abandoned) = s.release_from(lock)?;
        // A downgrade in flight may apply on any node before the release: leave the readers
        // there too (after the release on each connection, which deletes the key where the
        // downgrade did not apply).
        let downgrading = matches!(s.phase, Phase::Extending { downgrade: true, .. });
        if abandoned {
            self.events.push_back(Event::ExtendFailed { lock, error: ExtendError::Cancelled });
        }
        let idx = lock.index;
        let deadline = now + self.config.node_timeout;
        self.begin_round(now, idx, Phase::Releasing { hold, deadline });
        self.send_round(now, idx, Op::Release);
        self.release_owed(now, idx);
        if downgrading {
            self.leave_readers(now, idx);
        }
        self.arm(idx);
        Ok(())
    }

    /// Abandon an acquisition (it ends with [`AcquireError::Cancelled`], and whatever it
    /// took is released) or an extension in flight (it ends with [`ExtendError::Cancelled`]).
    pub fn cancel(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        let s = self.locks.get(lock)?;
        let idx = lock.index;
        match &s.phase {
            Phase::Acquiring { .. } | Phase::Fencing { .. } | Phase::RetryWait { .. } => {
                self.send_cleanup(now, idx, true);
                self.finish(idx, Event::AcquireFailed { lock, error: AcquireError::Cancelled });
                self.links.sync_all(now);
            }
            Phase::Extending { manual, .. } => {
                let manual = *manual;
                self.locks[idx].back_to_held(now);
                if manual {
                    self.events.push_back(Event::ExtendFailed { lock, error: ExtendError::Cancelled });
                }
                self.arm(idx);
            }
            Phase::Held(_) | Phase::Releasing { .. } | Phase::Free | Phase::Draining { .. } => {
                return Err(Misuse::NothingToCancel(lock));
            }
        }
        Ok(())
    }

    /// Turn automatic extension of a lock on or off.
    pub fn set_auto_extend(&mut self, now: Instant, lock: LockId, on: bool) -> Result<(), Misuse> {
        self.locks.get(lock)?;
        self.locks[lock.index].set_auto_extend(now, on);
        self.arm(lock.index);
        Ok(())
    }

    // ----- outputs -------------------------------------------------------------------------

    /// The bytes waiting to be written to `node`, if any. Write as many as the socket takes,
    /// then report how many with [`advance_transmit`](Self::advance_transmit).
    #[must_use]
    #[inline]
    pub fn poll_transmit(&self, node: NodeId) -> Option<&[u8]> {
        self.links.unsent(node)
    }

    /// `n` bytes of [`poll_transmit`](Self::poll_transmit) were written.
    #[inline]
    pub fn advance_transmit(&mut self, node: NodeId, n: usize) {
        self.links.advance(node, n);
    }

    /// A node whose connection or connect attempt the driver MUST drop now: the engine
    /// failed the link (garbage, a refused handshake) or gave up a connect attempt past its
    /// deadline. Drain it before [`poll_connect`](Self::poll_connect), after every input and
    /// timeout; the engine already counts the node as down, so no
    /// [`handle_disconnected`](Self::handle_disconnected) is needed.
    #[must_use]
    #[inline]
    pub fn poll_close(&mut self) -> Option<NodeId> {
        self.links.poll_close()
    }

    /// A node whose connect attempt is due, if any: a new engine's nodes at once, then each
    /// node whose connection or connect attempt failed once its reconnect backoff has passed.
    ///
    /// The link becomes [`LinkState::Connecting`] with a deadline of `now` +
    /// [`Config::connect_timeout`]. The caller MUST start a non-blocking connect to the node
    /// (dropping whatever it still held for it) and report the outcome with
    /// [`handle_connected`](Self::handle_connected) or
    /// [`handle_connect_failed`](Self::handle_connect_failed); if neither comes by the
    /// deadline, [`handle_timeout`](Self::handle_timeout) abandons the attempt. Call it until
    /// it returns `None`, after [`poll_close`](Self::poll_close).
    #[must_use]
    pub fn poll_connect(&mut self, now: Instant) -> Option<NodeId> {
        self.links.poll_connect(now)
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called, if ever: the
    /// earliest of the locks' timers, connect deadlines and reconnect times.
    #[must_use]
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        min_opt(min_opt(self.timers.next(), self.links.wake()), self.reads.deadline())
    }

    /// The next event, if any.
    #[must_use]
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// An extension (or downgrade) of `lock`, held as `hold`, that cannot go out: the lock
    /// expired or is known lost. Says so with [`Event::ExtendFailed`].
    fn extend_fails(&mut self, now: Instant, lock: LockId, hold: &Hold) -> bool {
        if !self.expire_if_due(now, lock.index) && !hold.lost {
            return false;
        }
        let error = if hold.valid_until <= now {
            ExtendError::Expired
        } else {
            ExtendError::Lost { refused: hold.refused, nodes: self.links.len() }
        };
        self.events.push_back(Event::ExtendFailed { lock, error });
        true
    }
}
