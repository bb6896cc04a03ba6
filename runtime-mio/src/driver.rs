//! The embeddable driver: N non-blocking sockets around one [`Engine`], for a caller's mio loop.

use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use mio::event::Event as MioEvent;
use mio::{Registry, Token};
use redlease_client::adapter::{Conn, Flush, Links, Read, ReadUntil, node_id, prepare, seeded};
use redlease_client::{Error, Health, LockId, LockOptions, Misuse, NodeId};
use redlease_core::{Config, Engine, Event, LockInfo, ReadId};

use crate::socket::{Dialed, Dialing, Direct, Socket};

/// The Redlock driver for a caller-owned [`mio::Poll`].
///
/// It owns one non-blocking TCP socket per node and the sans-IO [`Engine`]; the host loop
/// owns the `Poll`, calls the inputs and drains the outputs. The driver makes no protocol
/// decisions: quorum, retries, wait bounds, validity and the extension schedule are the
/// engine's.
///
/// # Contract
///
/// - Node `i` uses the token `base + i` (see [`Driver::token_of`]); the host MUST NOT use
///   those tokens for its own sources.
/// - [`register`](Self::register) once; it starts the non-blocking connects.
/// - Before every poll, call [`flush`](Self::flush) (it writes out every command queued since
///   the last one, one write per node) and poll with a timeout no later than
///   [`poll_timeout`](Self::poll_timeout).
/// - Hand every event of the poll to [`handle_event`](Self::handle_event) (it returns `false`
///   for events that are not the driver's, so the host can dispatch those itself), then call
///   [`handle_timeout`](Self::handle_timeout) (extra calls are harmless, so the simplest
///   loop calls it after every poll).
/// - Drain [`poll_event`](Self::poll_event) after each of the above and after commands.
/// - Every call takes `now`, which MUST NOT go backwards.
///
/// Commands ([`acquire`](Self::acquire), [`extend`](Self::extend), [`release`](Self::release),
/// [`cancel`](Self::cancel), [`set_auto_extend`](Self::set_auto_extend)) only queue their
/// requests in the engine; so do the engine's own reactions to replies and timers. The bytes
/// go out in [`flush`](Self::flush): every command of one turn of the host loop costs one
/// write per node in all (until the socket says `WouldBlock`; the rest goes out when it
/// turns writable and the host flushes again).
///
/// Sockets: edge-triggered readiness is honoured (writes run until `WouldBlock`, reads until
/// `WouldBlock` or a read that does not fill the buffer, i.e. a drained socket), spurious
/// events are harmless, a read of 0 bytes is EOF. A lost node is reported to the
/// engine (its operations count it as failed at once). When to connect and when to drop a
/// connection are the engine's decisions: the driver starts a non-blocking connect whenever
/// [`Engine::poll_connect`] hands out a node (all of them at [`register`](Self::register),
/// then after the engine's reconnect backoff), and drops the connections
/// [`Engine::poll_close`] names (a wrong password, garbage, an attempt past
/// `connect_timeout`). `TCP_NODELAY` is set on every socket. Host names are resolved with
/// the system resolver at each connect attempt (its addresses are tried in turn within the
/// attempt), which may block: give IP addresses to keep the loop strictly non-blocking.
///
/// A complete run loop: `runtime-mio/examples/embedded.rs` (and the crate docs of
/// `redlease-mio`).
pub struct Driver {
    engine: Engine,
    base: usize,
    links: Links<Dialing, Socket>,
    registry: Option<Registry>,
    /// Each node's ended connect attempts at the last `register`.
    attempts_at_register: Vec<u64>,
}

impl Driver {
    /// A driver for `config`'s nodes, whose sockets will use the tokens `base`, `base + 1`, ...
    ///
    /// `config` is the core's [`Config`]: nodes, the algorithm's parameters (node timeout,
    /// drift, retry, seed, ...) and the connect timeout and reconnect backoff, which the engine
    /// applies. It is validated first (a bad one fails as [`Error::Config`]). Without a seed,
    /// it gets one from the OS random source, so that separate drivers do not jitter in step.
    /// No socket is opened until [`register`](Self::register).
    pub fn new(config: Config, base: Token) -> Result<Self, Error> {
        let config = seeded(config)?;
        let n = config.nodes.len();
        if base.0.checked_add(n * (1 + redlease_core::cluster::MAX_MASTERS)).is_none() {
            let reason = format!("token {} leaves no room for {n} nodes' tokens: use a smaller base", base.0);
            return Err(Error::Setting { field: "base token", reason });
        }
        let links = Links::new(prepare(&config)?);
        Ok(Driver {
            engine: Engine::new(config)?,
            base: base.0,
            links,
            registry: None,
            attempts_at_register: vec![0; n],
        })
    }

    // ----- getters -------------------------------------------------------------------------

    /// The engine, for its getters ([`Engine::lock_info`], [`Engine::is_connected`], ...).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// A snapshot of a lock, or `None` for an unknown id.
    pub fn lock_info(&self, lock: LockId) -> Option<LockInfo> {
        self.engine.lock_info(lock)
    }

    /// The semaphore permits `lock` holds, from its [`Event::Acquired`] on; `None` for a mutex
    /// (see [`Engine::permits`]).
    pub fn permits(&self, lock: LockId) -> Option<&[u16]> {
        self.engine.permits(lock)
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.engine.node_count()
    }

    /// The token of `node`'s socket: `base + node`. A node that is a Redis Cluster opens more
    /// sockets, one per master, with the tokens after the nodes' (link ids
    /// after the nodes'): keep `base ..= base + nodes × 257` for the driver (1 + the core's
    /// `cluster::MAX_MASTERS`, 256, per node).
    pub fn token_of(&self, node: NodeId) -> Token {
        Token(self.base + node.index())
    }

    /// The node whose socket uses `token`, if it is one of the driver's.
    pub fn node_of(&self, token: Token) -> Option<NodeId> {
        let i = token.0.checked_sub(self.base)?;
        (i < self.links.len()).then_some(NodeId(i as u16))
    }

    /// The nodes' health: each node's state (ready, handshaking, connecting, down until
    /// when), its last error and kind, round trips, replies, timeouts, failures by kind and
    /// reconnects; and how many more nodes may fail before locking stops
    /// ([`Health::fault_tolerance`]). Its `Display` is a table, one line per node. While the
    /// driver is not registered, every node is down.
    pub fn health(&self) -> Health {
        self.engine.health()
    }

    /// Whether the driver is registered with a poll (between [`register`](Self::register)
    /// and [`deregister`](Self::deregister)).
    pub fn is_registered(&self) -> bool {
        self.registry.is_some()
    }

    /// Whether a quorum of nodes is ready (connected, handshake answered), or every node has
    /// finished a connect attempt since [`register`](Self::register), ready or failed: locking
    /// can start (a node still connecting would count as a failed vote). With
    /// [`Config::require_all`], only the latter. Then [`connected`](Self::connected) says
    /// whether enough nodes made it.
    pub fn ready(&self) -> bool {
        self.registry.is_some() && redlease_client::adapter::connect_settled(&self.engine, &self.attempts_at_register)
    }

    /// Whether every node has finished a connect attempt since [`register`](Self::register),
    /// by getting ready (handshake answered) or by failing.
    pub fn all_nodes_tried(&self) -> bool {
        self.registry.is_some()
            && (0..self.engine.node_count())
                .all(|i| self.engine.connect_attempts(node_id(i)) > self.attempts_at_register[i])
    }

    /// Once [`ready`](Self::ready): whether locking can start — a quorum of nodes is ready
    /// (every node, with [`Config::require_all`]) — else [`Error::Unhealthy`] with the health
    /// view naming each node's state and last error. The driver keeps reconnecting either way;
    /// the blocking client refuses to start without it.
    pub fn connected(&self) -> Result<(), Error> {
        redlease_client::adapter::connected(&self.engine)
    }

    // ----- lifecycle -----------------------------------------------------------------------

    /// Start: keep a handle on `registry` and begin a non-blocking connect to every node
    /// (the reconnect backoff starts over).
    ///
    /// Calling it again first deregisters everything (as [`deregister`](Self::deregister)).
    pub fn register(&mut self, registry: &Registry, now: Instant) -> io::Result<()> {
        if self.registry.is_some() {
            self.deregister(now);
        }
        self.registry = Some(registry.try_clone()?);
        for i in 0..self.links.len() {
            if let Some(at) = self.attempts_at_register.get_mut(i) {
                *at = self.engine.connect_attempts(node_id(i));
            }
            self.engine.reconnect_now(node_id(i));
        }
        self.sync_links(now);
        Ok(())
    }

    /// Stop: close and deregister every socket and stop reconnecting. Operations in flight
    /// count the nodes as down (their outcomes arrive from [`poll_event`](Self::poll_event)).
    pub fn deregister(&mut self, now: Instant) {
        let registry = self.registry.as_ref();
        self.links.close_all(|conn| close(conn, registry));
        for i in 0..self.links.len() {
            self.engine.handle_disconnected(now, node_id(i), "deregistered");
            // Due at once but never handed out while unregistered: no timer, and `register`
            // starts over.
            self.engine.reconnect_now(node_id(i));
        }
        while self.engine.poll_close().is_some() {}
        self.registry = None;
    }

    // ----- inputs --------------------------------------------------------------------------

    /// Handle one readiness event. Returns `false` if it is not for one of the driver's
    /// tokens (the host handles it), `true` otherwise. Spurious events are harmless.
    pub fn handle_event(&mut self, now: Instant, event: &MioEvent) -> bool {
        let Some(node) = self.node_of(event.token()) else {
            return false;
        };
        let Some(registry) = &self.registry else {
            // A late event for a socket already closed.
            return true;
        };
        let (i, token) = (node.index(), event.token());
        match std::mem::replace(self.links.conn_mut(i), Conn::Down) {
            Conn::Connecting(dialing) => match dialing.progress(registry, token, event) {
                Dialed::Pending(dialing) => *self.links.conn_mut(i) = Conn::Connecting(dialing),
                Dialed::Connected(socket) => {
                    if let Some(socket) = self.links.connected(&mut self.engine, now, i, socket) {
                        socket.close(Some(registry));
                    }
                }
                Dialed::Failed(why) => self.links.connect_failed(&mut self.engine, now, i, &why),
            },
            mut conn @ (Conn::Tls(..) | Conn::Up(..)) => {
                if let (true, Some(socket)) = (event.is_writable(), conn.socket_mut()) {
                    socket.set_writable();
                }
                *self.links.conn_mut(i) = conn;
                // An event that reports the peer's FIN or an error is read on to the end of
                // the stream: a FIN that came with the last bytes raises no new event.
                let to_end = event.is_read_closed() || event.is_error();
                if event.is_readable() || to_end {
                    let until = if to_end { ReadUntil::WouldBlock } else { ReadUntil::ShortRead };
                    // Edge-triggered: no budget, the socket is read until it is drained.
                    if let Read::Lost(socket) =
                        self.links.read(&mut self.engine, now, i, &mut Direct, until, usize::MAX)
                    {
                        socket.close(Some(registry));
                    }
                }
            }
            Conn::Down => {}
        }
        self.sync_links(now);
        true
    }

    /// Time passed: run the engine's timers (node timeouts, retries, expiry, auto-extension,
    /// connect timeouts, reconnect backoff) and start the connects that are due. Extra calls
    /// are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
        self.sync_links(now);
    }

    // ----- commands ------------------------------------------------------------------------

    /// Start acquiring a lock ([`Engine::acquire`]); the outcome arrives as
    /// [`Event::Acquired`] or [`Event::AcquireFailed`]. Use [`new_token`](crate::new_token)
    /// for the token.
    pub fn acquire(&mut self, now: Instant, options: &LockOptions, token: &[u8]) -> Result<LockId, Misuse> {
        self.engine.acquire(now, options, token)
    }

    /// Extend a held lock to `ttl` (`None`: its acquire TTL) ([`Engine::extend`]); the outcome
    /// arrives as [`Event::Extended`] or [`Event::ExtendFailed`].
    pub fn extend(&mut self, now: Instant, lock: LockId, ttl: Option<Duration>) -> Result<(), Misuse> {
        self.engine.extend(now, lock, ttl)
    }

    /// Turn a held write lock into a read lock ([`Engine::downgrade`]); the outcome arrives
    /// as [`Event::Extended`] or [`Event::ExtendFailed`].
    pub fn downgrade(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        self.engine.downgrade(now, lock)
    }

    /// Release a held lock on every node ([`Engine::release`]); the outcome arrives as
    /// [`Event::Released`].
    pub fn release(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        self.engine.release(now, lock)
    }

    /// Abandon an acquisition or an extension in flight ([`Engine::cancel`]).
    pub fn cancel(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        self.engine.cancel(now, lock)
    }

    /// Turn automatic extension of a lock on or off ([`Engine::set_auto_extend`]).
    pub fn set_auto_extend(&mut self, now: Instant, lock: LockId, on: bool) -> Result<(), Misuse> {
        self.engine.set_auto_extend(now, lock, on)
    }

    /// Read who leads an election on every node ([`Engine::read_leader`]); the outcome arrives
    /// as [`Event::LeaderRead`]. A campaign is an [`acquire`](Self::acquire) of
    /// `ElectionOptions::lock_options` with `ElectionOptions::token`.
    pub fn read_leader(&mut self, now: Instant, name: &str) -> Result<ReadId, Misuse> {
        self.engine.read_leader(now, name)
    }

    /// Watch an election's release messages, or stop ([`Engine::watch_leader`]): each one
    /// arrives as [`Event::LeaderWake`].
    pub fn watch_leader(&mut self, now: Instant, name: &str, on: bool) -> Result<(), Misuse> {
        self.engine.watch_leader(now, name, on)
    }

    // ----- outputs -------------------------------------------------------------------------

    /// Write out everything queued since the last flush (one write per node for all the
    /// commands and reactions of the turn, as far as each socket takes it). The host MUST
    /// call it before every poll: until then, commands are only queued.
    pub fn flush(&mut self, now: Instant) {
        if let Some(registry) = &self.registry {
            for i in 0..self.links.len() {
                let blocked = match self.links.flush(&mut self.engine, now, i, &mut Direct) {
                    Flush::Done => false,
                    Flush::Blocked => true,
                    Flush::Lost(socket) => {
                        socket.close(Some(registry));
                        continue;
                    }
                };
                let Some(socket) = self.links.conn_mut(i).socket_mut() else { continue };
                if let Err(why) = socket.watch(registry, Token(self.base + i), blocked) {
                    if let Some(socket) = self.links.fail(&mut self.engine, now, i, why) {
                        socket.close(Some(registry));
                    }
                }
            }
        }
        self.sync_links(now);
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called, if ever: the
    /// earliest of the lock timers, connect timeouts and reconnect times.
    #[must_use]
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.engine.poll_timeout()
    }

    /// The next event: lock outcomes, and [`Event::LinkFailed`] for the host to log (the
    /// driver has already dropped that socket or connect attempt; the engine has scheduled
    /// the next one).
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.engine.poll_event()
    }

    // ----- internals -----------------------------------------------------------------------

    /// The engine, for the client's router.
    pub(crate) fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// Drop the connections the engine failed, then start the connects it asks for.
    fn sync_links(&mut self, now: Instant) {
        let registry = self.registry.as_ref();
        let Some(reg) = registry else {
            // Unregistered: attempts stay due until `register`.
            self.links.close_failed(&mut self.engine, |conn| close(conn, None));
            return;
        };
        let base = self.base;
        let connect = |i, t: &redlease_client::adapter::NodeTransport| Dialing::start(&t.target, reg, Token(base + i));
        self.links.sync(&mut self.engine, now, connect, |conn| close(conn, registry));
    }
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let health = self.engine.health();
        let nodes: Vec<_> = health.nodes.iter().map(|n| (&n.addr, n.state)).collect();
        f.debug_struct("Driver")
            .field("base_token", &self.base)
            .field("nodes", &nodes)
            .field("registered", &self.registry.is_some())
            .field("active_locks", &self.engine.active_locks())
            .finish()
    }
}

/// Close a connection or connect attempt the driver no longer holds.
fn close(conn: Conn<Dialing, Socket>, registry: Option<&Registry>) {
    match conn {
        Conn::Connecting(dialing) => dialing.close(registry),
        Conn::Tls(socket, _) | Conn::Up(socket, _) => socket.close(registry),
        Conn::Down => {}
    }
}
