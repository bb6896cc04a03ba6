//! The embeddable driver: N non-blocking sockets around one [`Engine`], for a caller's mio loop.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use mio::event::Event as MioEvent;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use redlease_core::LinkState as Link;
use redlease_core::{AcquireRequest, Config, Engine, Event, LockId, LockInfo, Misuse, NodeId};

use crate::Error;
use crate::random::random_seed;

/// Size of the read buffer shared by all sockets.
const READ_CHUNK: usize = 16 * 1024;

/// The Redlock driver for a caller-owned [`mio::Poll`].
///
/// It owns one non-blocking TCP socket per node and the sans-IO [`Engine`]; the host loop
/// owns the `Poll`, calls the inputs and drains the outputs. The driver makes no protocol
/// decisions: quorum, retries, validity and the extension schedule are the engine's.
///
/// # Contract
///
/// - Node `i` uses the token `base + i` (see [`Driver::token_of`]); the host MUST NOT use
///   those tokens for its own sources.
/// - [`register`](Self::register) once; it starts the non-blocking connects.
/// - Hand every event of the poll to [`handle_event`](Self::handle_event) (it returns `false`
///   for events that are not the driver's, so the host can dispatch those itself).
/// - Call [`poll_timeout`](Self::poll_timeout) right before every poll (it MUST be called
///   before the host blocks: it also writes out what is queued), and poll with a timeout no
///   later than what it returns. Call [`handle_timeout`](Self::handle_timeout) when that has
///   passed; extra calls are harmless, so the simplest loop calls it after every poll.
/// - Drain [`poll_event`](Self::poll_event) after each of the above and after commands.
/// - Every call takes `now`, which MUST NOT go backwards.
///
/// Commands ([`acquire`](Self::acquire), [`extend`](Self::extend), [`release`](Self::release),
/// [`cancel`](Self::cancel), [`set_auto_extend`](Self::set_auto_extend)) only queue their
/// requests in the engine; so do the engine's own reactions to replies and timers. The bytes
/// go out in [`poll_timeout`](Self::poll_timeout) and at the end of
/// [`handle_timeout`](Self::handle_timeout): every command of one turn of the host loop
/// costs one write per node in all (until the socket says `WouldBlock`; the rest goes out
/// when it turns writable).
///
/// Sockets: edge-triggered readiness is honoured (reads and writes run until `WouldBlock`),
/// spurious events are harmless, a read of 0 bytes is EOF. A lost node is reported to the
/// engine (its operations count it as failed at once). When to connect is the engine's
/// decision: the driver starts a non-blocking connect whenever [`Engine::poll_connect`] hands
/// out a node (all of them at [`register`](Self::register), then after the engine's reconnect
/// backoff, `reconnect_min` doubling up to `reconnect_max`), and closes what it holds on an
/// [`Event::LinkFailed`] (e.g. a wrong password, or an attempt past `connect_timeout`).
/// `TCP_NODELAY` is set on every socket. Host names are resolved with the system resolver at
/// each connect attempt (its addresses are tried in turn within the attempt), which may
/// block: give IP addresses to keep the loop strictly non-blocking.
///
/// See the [crate docs](crate) for a complete run loop.
pub struct Driver {
    engine: Engine,
    base: usize,
    nodes: Vec<Node>,
    registry: Option<Registry>,
    events: VecDeque<Event>,
    buf: Vec<u8>,
    /// A socket was closed since the flag was cleared (its engine events need flushing).
    closed_any: bool,
    /// Requests may be queued in the engine that were not written yet.
    unflushed: bool,
    /// The latest `now` of any input: the clock for writes made from `poll_timeout`.
    last_now: Option<Instant>,
}

/// Where a node's connection stands; see [`Driver::node_status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkState {
    /// Not registered with a poll (before [`Driver::register`] or after
    /// [`Driver::deregister`]), or no attempt scheduled.
    Idle,
    /// Waiting to reconnect at this instant.
    Waiting {
        /// When the next connect attempt starts.
        retry_at: Instant,
    },
    /// A non-blocking connect is in progress.
    Connecting,
    /// Connected (the engine's handshake may still be in flight).
    Connected,
}

/// A snapshot of one node's connection; see [`Driver::node_status`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    /// The connection's state.
    pub state: LinkState,
    /// Why the last connect attempt or connection failed, as the node's votes report it
    /// ([`Engine::last_error`]: a refused or timed-out connect, a refused handshake such as a
    /// wrong password); cleared once a connection completes its handshake. A connection that
    /// is simply lost (end of stream) leaves no reason.
    pub last_error: Option<String>,
}

struct Node {
    host: String,
    port: u16,
    conn: Conn,
    /// The first connect attempt has finished (connected or failed).
    tried: bool,
}

/// What the driver holds for one node.
enum Conn {
    /// No socket: waiting for the engine to hand out the next attempt.
    Idle,
    /// A non-blocking connect to `addrs[pos]`; if it fails, the next address of the host is
    /// tried within the same attempt.
    Connecting { stream: TcpStream, addrs: Vec<SocketAddr>, pos: usize },
    Up {
        stream: TcpStream,
        /// The socket took everything so far (false after a `WouldBlock`, until a writable event).
        writable: bool,
        /// `WRITABLE` is in the registered interest (only while output is pending).
        write_interest: bool,
    },
}

impl Driver {
    /// A driver for `config`'s nodes, whose sockets will use the tokens `base`, `base + 1`, ...
    ///
    /// `config` is the core's [`Config`]: nodes, the algorithm's parameters (node timeout,
    /// drift, retry, seed, ...) and the connect timeout and reconnect backoff, which the engine
    /// applies. It is validated first (a bad one fails as [`Error::Config`]). If `config.seed`
    /// is the core's default, it is replaced by a seed from the OS random source, so that
    /// separate drivers do not jitter in step. No socket is opened until
    /// [`register`](Self::register).
    pub fn new(config: Config, base: Token) -> Result<Self, Error> {
        config.validate()?;
        let mut core = config;
        if core.seed == Config::DEFAULT_SEED {
            core.seed = random_seed()?;
        }
        let n = core.nodes.len();
        if base.0.checked_add(n).is_none() {
            return Err(Error::Setting {
                field: "base token",
                reason: format!("token {} leaves no room for {n} node tokens: use a smaller base", base.0),
            });
        }
        let nodes = core
            .nodes
            .iter()
            .map(|c| Node { host: c.host.clone(), port: c.port, conn: Conn::Idle, tried: false })
            .collect();
        Ok(Driver {
            engine: Engine::new(core)?,
            base: base.0,
            nodes,
            registry: None,
            events: VecDeque::new(),
            buf: vec![0; READ_CHUNK],
            closed_any: false,
            unflushed: false,
            last_now: None,
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

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The token of `node`'s socket: `base + node`.
    pub fn token_of(&self, node: NodeId) -> Token {
        Token(self.base + node.index())
    }

    /// The node whose socket uses `token`, if it is one of the driver's.
    pub fn node_of(&self, token: Token) -> Option<NodeId> {
        let i = token.0.checked_sub(self.base)?;
        (i < self.nodes.len()).then_some(NodeId(i as u16))
    }

    /// A snapshot of `node`'s connection, or `None` for an unknown node.
    pub fn node_status(&self, node: NodeId) -> Option<NodeStatus> {
        let n = self.nodes.get(node.index())?;
        let state = match (&n.conn, self.engine.link_state(node)) {
            _ if self.registry.is_none() => LinkState::Idle,
            (Conn::Connecting { .. }, _) => LinkState::Connecting,
            (Conn::Up { .. }, _) => LinkState::Connected,
            (Conn::Idle, Some(Link::Down { retry_at: Some(at) })) => LinkState::Waiting { retry_at: at },
            (Conn::Idle, _) => LinkState::Idle,
        };
        Some(NodeStatus { state, last_error: self.engine.last_error(node).map(str::to_owned) })
    }

    /// Whether every node has finished its first connect attempt since
    /// [`register`](Self::register), by connecting or by failing.
    pub fn all_nodes_tried(&self) -> bool {
        self.registry.is_some() && self.nodes.iter().all(|n| n.tried)
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
        for i in 0..self.nodes.len() {
            self.nodes[i].tried = false;
            self.engine.reconnect_now(NodeId(i as u16));
        }
        self.settle(now, true);
        Ok(())
    }

    /// Stop: close and deregister every socket and stop reconnecting. Operations in flight
    /// count the nodes as down (their outcomes arrive from [`poll_event`](Self::poll_event)).
    pub fn deregister(&mut self, now: Instant) {
        for i in 0..self.nodes.len() {
            let node = NodeId(i as u16);
            self.drop_socket(i);
            self.engine.handle_disconnected(now, node);
            // Due at once but never handed out while unregistered: no timer, and `register`
            // starts over.
            self.engine.reconnect_now(node);
        }
        self.registry = None;
        self.settle(now, true);
    }

    // ----- inputs --------------------------------------------------------------------------

    /// Handle one readiness event. Returns `false` if it is not for one of the driver's
    /// tokens (the host handles it), `true` otherwise. Spurious events are harmless.
    pub fn handle_event(&mut self, now: Instant, event: &MioEvent) -> bool {
        let Some(node) = self.node_of(event.token()) else {
            return false;
        };
        let i = node.index();
        match &mut self.nodes[i].conn {
            Conn::Connecting { .. } => self.check_connect(now, i, event),
            Conn::Up { writable, .. } => {
                if event.is_writable() {
                    *writable = true;
                }
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.read(now, i);
                }
            }
            // A late event for a socket already closed.
            Conn::Idle => {}
        }
        // What the engine wrote in reaction goes out with the rest of the turn's output.
        self.settle(now, false);
        true
    }

    /// Time passed: run the engine's timers (node timeouts, retries, expiry, auto-extension,
    /// connect timeouts, reconnect backoff) and start the connects that are due. Extra calls
    /// are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
        self.settle(now, true);
    }

    // ----- commands ------------------------------------------------------------------------

    /// Start acquiring a lock ([`Engine::acquire`]); the outcome arrives as
    /// [`Event::Acquired`] or [`Event::AcquireFailed`]. Use [`new_token`](crate::new_token)
    /// for the request's token.
    pub fn acquire(&mut self, now: Instant, req: &AcquireRequest<'_>) -> Result<LockId, Misuse> {
        let r = self.engine.acquire(now, req);
        self.settle(now, false);
        r
    }

    /// Extend a held lock to `ttl` (`None`: its acquire TTL) ([`Engine::extend`]); the outcome
    /// arrives as [`Event::Extended`] or [`Event::ExtendFailed`].
    pub fn extend(&mut self, now: Instant, lock: LockId, ttl: Option<Duration>) -> Result<(), Misuse> {
        let r = self.engine.extend(now, lock, ttl);
        self.settle(now, false);
        r
    }

    /// Release a held lock on every node ([`Engine::release`]); the outcome arrives as
    /// [`Event::Released`].
    pub fn release(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        let r = self.engine.release(now, lock);
        self.settle(now, false);
        r
    }

    /// Abandon an acquisition or an extension in flight ([`Engine::cancel`]).
    pub fn cancel(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        let r = self.engine.cancel(now, lock);
        self.settle(now, false);
        r
    }

    /// Turn automatic extension of a lock on or off ([`Engine::set_auto_extend`]).
    pub fn set_auto_extend(&mut self, now: Instant, lock: LockId, on: bool) -> Result<(), Misuse> {
        let r = self.engine.set_auto_extend(now, lock, on);
        self.settle(now, false);
        r
    }

    // ----- outputs -------------------------------------------------------------------------

    /// Write out everything queued (one write per node for all the commands since the last
    /// flush), then say when [`handle_timeout`](Self::handle_timeout) must next be called, if
    /// ever: the engine's [`poll_timeout`](Engine::poll_timeout) (lock timers, connect
    /// timeouts, reconnect times).
    ///
    /// The host MUST call it before every poll: until then, commands are only queued.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        if let (true, Some(now)) = (self.unflushed, self.last_now) {
            self.settle(now, true);
        }
        self.engine.poll_timeout()
    }

    /// The next event: lock outcomes, and [`Event::LinkFailed`] for the host to log (the
    /// driver has already closed that socket or abandoned that connect attempt; the engine
    /// has scheduled the next one).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ----- internals -----------------------------------------------------------------------

    /// Start the connects the engine asks for and move engine events out (closing what is
    /// held for links the engine failed); with `flush`, write every socket's queued output,
    /// otherwise leave it for the next flush. Repeats until closing sockets produces nothing
    /// more.
    fn settle(&mut self, now: Instant, flush: bool) {
        self.last_now = Some(now);
        self.unflushed |= !flush;
        loop {
            self.closed_any = false;
            if self.registry.is_some() {
                while let Some(node) = self.engine.poll_connect(now) {
                    self.start_connect(now, node.index());
                }
            }
            while let Some(ev) = self.engine.poll_event() {
                if let Event::LinkFailed { error } = &ev {
                    // Unless a newer attempt has started since, the engine has the link down.
                    let i = error.node().index();
                    if i < self.nodes.len() && matches!(self.engine.link_state(error.node()), Some(Link::Down { .. })) {
                        self.drop_socket(i);
                    }
                }
                self.events.push_back(ev);
            }
            if flush {
                self.unflushed = false;
                for i in 0..self.nodes.len() {
                    self.flush(now, i);
                }
            }
            if !self.closed_any {
                break;
            }
        }
    }

    /// Write what the engine has for node `i` until done or `WouldBlock`.
    fn flush(&mut self, now: Instant, i: usize) {
        let node = NodeId(i as u16);
        let token = Token(self.base + i);
        let Conn::Up { stream, writable, write_interest } = &mut self.nodes[i].conn else {
            return;
        };
        if !*writable {
            return;
        }
        // Whether the connection is unusable: the socket takes no bytes, fails, or cannot be
        // re-registered (without a writable event the rest would never go out).
        let failed = loop {
            let Some(bytes) = self.engine.poll_transmit(node) else {
                break false;
            };
            match stream.write(bytes) {
                Ok(0) => break true,
                Ok(n) => self.engine.advance_transmit(node, n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    *writable = false;
                    if *write_interest {
                        return;
                    }
                    *write_interest = true;
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    break self.registry.as_ref().is_some_and(|reg| reg.reregister(stream, token, interest).is_err());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break true,
            }
        };
        if failed {
            return self.lost(now, i);
        }
        if *writable && *write_interest {
            // Everything went out: stop watching for writability.
            *write_interest = false;
            if self.registry.as_ref().is_some_and(|reg| reg.reregister(stream, token, Interest::READABLE).is_err()) {
                self.lost(now, i);
            }
        }
    }

    /// Read node `i`'s socket until `WouldBlock`, feeding the engine.
    fn read(&mut self, now: Instant, i: usize) {
        let node = NodeId(i as u16);
        loop {
            let Conn::Up { stream, .. } = &mut self.nodes[i].conn else {
                return;
            };
            match stream.read(&mut self.buf) {
                Ok(0) => {
                    self.lost(now, i);
                    return;
                }
                Ok(n) => {
                    self.engine.handle_data(now, node, &self.buf[..n]);
                    if !self.engine.is_connected(node) {
                        // The engine failed the link; its LinkFailed event closes the socket.
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.lost(now, i);
                    return;
                }
            }
        }
    }

    /// A non-blocking connect may have finished: check it the way mio documents.
    fn check_connect(&mut self, now: Instant, i: usize, event: &MioEvent) {
        let Conn::Connecting { stream, .. } = &mut self.nodes[i].conn else {
            return;
        };
        match stream.take_error() {
            Ok(Some(e)) | Err(e) => return self.attempt_failed(now, i, e.to_string()),
            Ok(None) => {}
        }
        match stream.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                if event.is_error() || event.is_write_closed() {
                    self.attempt_failed(now, i, "the connection was closed".to_owned());
                }
                // Otherwise not finished yet (or a spurious event): keep waiting.
                return;
            }
            Err(e) => return self.attempt_failed(now, i, e.to_string()),
        }
        let Conn::Connecting { stream, .. } = std::mem::replace(&mut self.nodes[i].conn, Conn::Idle) else {
            unreachable!("checked above");
        };
        // A failure here only costs latency; the connection still works.
        let _ = stream.set_nodelay(true);
        let n = &mut self.nodes[i];
        // Registered for READABLE | WRITABLE while connecting; `flush` drops WRITABLE once
        // the handshake is out.
        n.conn = Conn::Up { stream, writable: true, write_interest: true };
        n.tried = true;
        self.engine.handle_connected(now, NodeId(i as u16));
    }

    /// Begin the connect attempt the engine handed out for node `i`: resolve its host, then
    /// connect to its addresses in turn.
    fn start_connect(&mut self, now: Instant, i: usize) {
        let n = &self.nodes[i];
        match (n.host.as_str(), n.port).to_socket_addrs() {
            Ok(addrs) => {
                let addrs: Vec<SocketAddr> = addrs.collect();
                if addrs.is_empty() {
                    let why = format!("{} resolves to no address", n.host);
                    return self.connect_failed(now, i, &why);
                }
                self.try_addrs(now, i, addrs, 0, String::new());
            }
            Err(e) => {
                let why = format!("cannot resolve {}: {e}", n.host);
                self.connect_failed(now, i, &why);
            }
        }
    }

    /// Start a non-blocking connect to the first of `addrs[pos..]` that takes one; if none
    /// does, the attempt failed (with the last reason).
    fn try_addrs(&mut self, now: Instant, i: usize, addrs: Vec<SocketAddr>, mut pos: usize, mut why: String) {
        let Some(registry) = &self.registry else {
            return;
        };
        let token = Token(self.base + i);
        while let Some(&addr) = addrs.get(pos) {
            let started = TcpStream::connect(addr).and_then(|mut stream| {
                registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
                Ok(stream)
            });
            match started {
                Ok(stream) => {
                    self.nodes[i].conn = Conn::Connecting { stream, addrs, pos };
                    return;
                }
                Err(e) => why = format!("{addr}: {e}"),
            }
            pos += 1;
        }
        self.connect_failed(now, i, &why);
    }

    /// The connect to the current address failed: try the host's next address within the
    /// same attempt, or report the attempt failed.
    fn attempt_failed(&mut self, now: Instant, i: usize, why: String) {
        let Conn::Connecting { mut stream, addrs, pos } = std::mem::replace(&mut self.nodes[i].conn, Conn::Idle) else {
            return;
        };
        if let Some(reg) = &self.registry {
            // The socket is closed right after; a failure here changes nothing.
            let _ = reg.deregister(&mut stream);
        }
        drop(stream);
        self.try_addrs(now, i, addrs, pos + 1, why);
    }

    /// The engine's attempt for node `i` failed: it records `why` and schedules the next.
    fn connect_failed(&mut self, now: Instant, i: usize, why: &str) {
        self.nodes[i].tried = true;
        self.engine.handle_connect_failed(now, NodeId(i as u16), why);
    }

    /// Node `i`'s connection failed or closed: close it and tell the engine.
    fn lost(&mut self, now: Instant, i: usize) {
        self.drop_socket(i);
        self.engine.handle_disconnected(now, NodeId(i as u16));
    }

    /// Close and deregister whatever socket node `i` has.
    fn drop_socket(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        match std::mem::replace(&mut n.conn, Conn::Idle) {
            Conn::Connecting { mut stream, .. } | Conn::Up { mut stream, .. } => {
                if let Some(reg) = &self.registry {
                    // The socket is closed right after; a failure here changes nothing.
                    let _ = reg.deregister(&mut stream);
                }
                n.tried = true;
            }
            Conn::Idle => {}
        }
        self.closed_any = true;
    }
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<_> = (0..self.nodes.len())
            .map(|i| {
                let n = &self.nodes[i];
                let status = self.node_status(NodeId(i as u16)).map(|s| s.state);
                (format!("{}:{}", n.host, n.port), status)
            })
            .collect();
        f.debug_struct("Driver")
            .field("base_token", &self.base)
            .field("nodes", &nodes)
            .field("registered", &self.registry.is_some())
            .field("active_locks", &self.engine.active_locks())
            .field("queued_events", &self.events.len())
            .finish()
    }
}
