//! The embeddable driver: N non-blocking sockets around one [`Engine`], for a caller's mio loop.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use mio::event::Event as MioEvent;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use redlease_core::{AcquireRequest, Config, Engine, Event, LockId, LockInfo, Misuse, NodeId};

use crate::Error;
use crate::config::{ClientConfig, random_seed};

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
/// - Poll with a timeout no later than [`poll_timeout`](Self::poll_timeout), and call
///   [`handle_timeout`](Self::handle_timeout) when it has passed; extra calls are harmless, so
///   the simplest loop calls it after every poll.
/// - Drain [`poll_event`](Self::poll_event) after each of the above and after commands.
/// - Every call takes `now`, which MUST NOT go backwards.
///
/// Commands ([`acquire`](Self::acquire), [`extend`](Self::extend), [`release`](Self::release),
/// [`cancel`](Self::cancel)) go to the engine and their bytes are written at once (until the
/// socket says `WouldBlock`; the rest goes out when it turns writable).
///
/// Sockets: edge-triggered readiness is honoured (reads and writes run until `WouldBlock`),
/// spurious events are harmless, a read of 0 bytes is EOF. A lost node is reported to the
/// engine (its operations count it as failed at once) and reconnected with exponential backoff
/// from `reconnect_min` to `reconnect_max`; an [`Event::LinkFailed`] (e.g. a wrong password)
/// also closes the socket and reconnects. `TCP_NODELAY` is set on every socket. Host names
/// are resolved with the system resolver at each connect round, which may block: give IP
/// addresses to keep the loop strictly non-blocking.
///
/// See the [crate docs](crate) for a complete run loop.
pub struct Driver {
    engine: Engine,
    connect_timeout: Duration,
    reconnect_min: Duration,
    reconnect_max: Duration,
    base: usize,
    nodes: Vec<Node>,
    registry: Option<Registry>,
    events: VecDeque<Event>,
    buf: Vec<u8>,
    /// A socket was closed since the flag was cleared (its engine events need flushing).
    closed_any: bool,
}

/// Where a node's connection stands; see [`Driver::node_status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkState {
    /// Not registered with a poll (before [`Driver::register`] or after
    /// [`Driver::deregister`]).
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
    /// Why the last connection attempt or connection failed, if it did (cleared on connect;
    /// handshake failures such as a wrong password arrive as [`Event::LinkFailed`] and are
    /// kept here too).
    pub last_error: Option<String>,
}

struct Node {
    host: String,
    port: u16,
    conn: Conn,
    /// Delay before the next reconnect attempt.
    delay: Duration,
    up_since: Option<Instant>,
    /// The first connect attempt has finished (connected or failed).
    tried: bool,
    last_error: Option<String>,
    /// Resolved addresses of the current connect round, and the one being tried.
    addrs: Vec<SocketAddr>,
    addr_pos: usize,
}

enum Conn {
    Idle,
    Waiting {
        at: Instant,
    },
    Connecting {
        stream: TcpStream,
        deadline: Instant,
    },
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
    /// Validates the config. If `config.core.seed` is the core's default, it is replaced by a
    /// random seed. No socket is opened until [`register`](Self::register).
    pub fn new(config: ClientConfig, base: Token) -> Result<Self, Error> {
        config.validate()?;
        let ClientConfig { mut core, connect_timeout, reconnect_min, reconnect_max } = config;
        if core.seed == Config::new(Vec::new()).seed {
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
            .map(|c| Node {
                host: c.host.clone(),
                port: c.port,
                conn: Conn::Idle,
                delay: reconnect_min,
                up_since: None,
                tried: false,
                last_error: None,
                addrs: Vec::new(),
                addr_pos: 0,
            })
            .collect();
        Ok(Driver {
            engine: Engine::new(core)?,
            connect_timeout,
            reconnect_min,
            reconnect_max,
            base: base.0,
            nodes,
            registry: None,
            events: VecDeque::new(),
            buf: vec![0; READ_CHUNK],
            closed_any: false,
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
        let state = match n.conn {
            Conn::Idle => LinkState::Idle,
            Conn::Waiting { at } => LinkState::Waiting { retry_at: at },
            Conn::Connecting { .. } => LinkState::Connecting,
            Conn::Up { .. } => LinkState::Connected,
        };
        Some(NodeStatus { state, last_error: n.last_error.clone() })
    }

    /// Whether every node has finished its first connect attempt since
    /// [`register`](Self::register), by connecting or by failing.
    pub fn all_nodes_tried(&self) -> bool {
        self.registry.is_some() && self.nodes.iter().all(|n| n.tried)
    }

    // ----- lifecycle -----------------------------------------------------------------------

    /// Start: keep a handle on `registry` and begin a non-blocking connect to every node.
    ///
    /// Calling it again first deregisters everything (as [`deregister`](Self::deregister)).
    pub fn register(&mut self, registry: &Registry, now: Instant) -> io::Result<()> {
        if self.registry.is_some() {
            self.deregister(now);
        }
        self.registry = Some(registry.try_clone()?);
        for i in 0..self.nodes.len() {
            let node = &mut self.nodes[i];
            node.tried = false;
            node.delay = self.reconnect_min;
            node.addrs.clear();
            node.addr_pos = 0;
            self.start_connect(now, i);
        }
        self.settle(now);
        Ok(())
    }

    /// Stop: close and deregister every socket and stop reconnecting. Operations in flight
    /// count the nodes as down (their outcomes arrive from [`poll_event`](Self::poll_event)).
    pub fn deregister(&mut self, now: Instant) {
        for i in 0..self.nodes.len() {
            self.close(now, i, None, false);
        }
        self.registry = None;
        self.settle(now);
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
            Conn::Idle | Conn::Waiting { .. } => {}
        }
        self.settle(now);
        true
    }

    /// Time passed: run the engine's timers (node timeouts, retries, expiry, auto-extension),
    /// connect timeouts and reconnect backoff. Extra calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
        for i in 0..self.nodes.len() {
            match self.nodes[i].conn {
                Conn::Waiting { at } if at <= now => self.start_connect(now, i),
                Conn::Connecting { deadline, .. } if deadline <= now => {
                    let why = format!("connect timed out after {:?}", self.connect_timeout);
                    self.attempt_failed(now, i, why);
                }
                _ => {}
            }
        }
        self.settle(now);
    }

    // ----- commands ------------------------------------------------------------------------

    /// Start acquiring a lock ([`Engine::acquire`]); the outcome arrives as
    /// [`Event::Acquired`] or [`Event::AcquireFailed`]. Use [`new_token`](crate::new_token)
    /// for the request's token.
    pub fn acquire(&mut self, now: Instant, req: &AcquireRequest<'_>) -> Result<LockId, Misuse> {
        let r = self.engine.acquire(now, req);
        self.settle(now);
        r
    }

    /// Extend a held lock to `ttl` (`None`: its acquire TTL) ([`Engine::extend`]); the outcome
    /// arrives as [`Event::Extended`] or [`Event::ExtendFailed`].
    pub fn extend(&mut self, now: Instant, lock: LockId, ttl: Option<Duration>) -> Result<(), Misuse> {
        let r = self.engine.extend(now, lock, ttl);
        self.settle(now);
        r
    }

    /// Release a held lock on every node ([`Engine::release`]); the outcome arrives as
    /// [`Event::Released`].
    pub fn release(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        let r = self.engine.release(now, lock);
        self.settle(now);
        r
    }

    /// Abandon an acquisition or an extension in flight ([`Engine::cancel`]).
    pub fn cancel(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        let r = self.engine.cancel(now, lock);
        self.settle(now);
        r
    }

    /// Turn automatic extension of a lock on or off ([`Engine::set_auto_extend`]).
    pub fn set_auto_extend(&mut self, now: Instant, lock: LockId, on: bool) -> Result<(), Misuse> {
        let r = self.engine.set_auto_extend(now, lock, on);
        self.settle(now);
        r
    }

    // ----- outputs -------------------------------------------------------------------------

    /// When [`handle_timeout`](Self::handle_timeout) must next be called, if ever: the
    /// earliest of the engine's timer, connect timeouts and reconnect backoffs.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        let mut next = self.engine.poll_timeout();
        for n in &self.nodes {
            let t = match n.conn {
                Conn::Waiting { at } => at,
                Conn::Connecting { deadline, .. } => deadline,
                _ => continue,
            };
            next = Some(next.map_or(t, |x| x.min(t)));
        }
        next
    }

    /// The next event: lock outcomes, and [`Event::LinkFailed`] for the host to log (the
    /// driver has already closed that socket and scheduled a reconnect).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ----- internals -----------------------------------------------------------------------

    /// Move engine events out (closing links the engine failed) and flush every socket,
    /// until closing sockets produces nothing more.
    fn settle(&mut self, now: Instant) {
        loop {
            self.closed_any = false;
            while let Some(ev) = self.engine.poll_event() {
                if let Event::LinkFailed { error } = &ev {
                    let i = error.node().index();
                    if i < self.nodes.len() {
                        let why = error.to_string();
                        self.close(now, i, Some(why), true);
                    }
                }
                self.events.push_back(ev);
            }
            for i in 0..self.nodes.len() {
                self.flush(now, i);
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
        let failure = loop {
            let Some(bytes) = self.engine.poll_transmit(node) else {
                break None;
            };
            match stream.write(bytes) {
                Ok(0) => break Some("the socket accepted no bytes".to_owned()),
                Ok(n) => self.engine.advance_transmit(node, n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    *writable = false;
                    if !*write_interest {
                        *write_interest = true;
                        if let Some(reg) = &self.registry {
                            if let Err(e) = reg.reregister(stream, token, Interest::READABLE | Interest::WRITABLE) {
                                break Some(format!("cannot watch for writability: {e}"));
                            }
                        }
                    }
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Some(format!("write failed: {e}")),
            }
        };
        match failure {
            Some(why) => self.close(now, i, Some(why), true),
            None => {
                if *write_interest {
                    *write_interest = false;
                    if let Some(reg) = &self.registry {
                        if let Err(e) = reg.reregister(stream, token, Interest::READABLE) {
                            self.close(now, i, Some(format!("cannot re-register: {e}")), true);
                        }
                    }
                }
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
                    self.close(now, i, Some("connection closed by the server".to_owned()), true);
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
                Err(e) => {
                    self.close(now, i, Some(format!("read failed: {e}")), true);
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
            Ok(Some(e)) | Err(e) => return self.attempt_failed(now, i, format!("connect failed: {e}")),
            Ok(None) => {}
        }
        match stream.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                if event.is_error() || event.is_write_closed() {
                    self.attempt_failed(now, i, "connect failed: the connection was closed".to_owned());
                }
                // Otherwise not finished yet (or a spurious event): keep waiting.
                return;
            }
            Err(e) => return self.attempt_failed(now, i, format!("connect failed: {e}")),
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
        n.up_since = Some(now);
        n.tried = true;
        n.last_error = None;
        self.engine.handle_connected(now, NodeId(i as u16));
    }

    /// Begin a connect attempt to node `i` (resolving its host if a new round starts).
    fn start_connect(&mut self, now: Instant, i: usize) {
        let Some(registry) = &self.registry else {
            return;
        };
        let token = Token(self.base + i);
        let n = &mut self.nodes[i];
        if n.addr_pos >= n.addrs.len() {
            n.addr_pos = 0;
            match (n.host.as_str(), n.port).to_socket_addrs() {
                Ok(addrs) => n.addrs = addrs.collect(),
                Err(e) => {
                    n.addrs.clear();
                    let why = format!("cannot resolve {}: {e}", n.host);
                    return self.attempt_failed(now, i, why);
                }
            }
            if n.addrs.is_empty() {
                let why = format!("{} resolves to no address", n.host);
                return self.attempt_failed(now, i, why);
            }
        }
        let addr = n.addrs[n.addr_pos];
        let result = TcpStream::connect(addr).and_then(|mut stream| {
            registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
            Ok(stream)
        });
        match result {
            Ok(stream) => n.conn = Conn::Connecting { stream, deadline: now + self.connect_timeout },
            Err(e) => self.attempt_failed(now, i, format!("connect to {addr} failed: {e}")),
        }
    }

    /// A connect attempt failed: try the next address of the round at once, or back off.
    fn attempt_failed(&mut self, now: Instant, i: usize, why: String) {
        let n = &mut self.nodes[i];
        n.addr_pos += 1;
        if n.addr_pos < n.addrs.len() {
            let why = Some(why);
            self.close(now, i, why, false);
            self.nodes[i].conn = Conn::Waiting { at: now };
        } else {
            self.close(now, i, Some(why), true);
        }
    }

    /// Close node `i`'s socket, tell the engine, and schedule a reconnect if asked.
    fn close(&mut self, now: Instant, i: usize, why: Option<String>, reconnect: bool) {
        let n = &mut self.nodes[i];
        match std::mem::replace(&mut n.conn, Conn::Idle) {
            Conn::Connecting { mut stream, .. } | Conn::Up { mut stream, .. } => {
                if let Some(reg) = &self.registry {
                    // The socket is closed right after; a failure here changes nothing.
                    let _ = reg.deregister(&mut stream);
                }
            }
            Conn::Idle | Conn::Waiting { .. } => {}
        }
        if let Some(why) = why {
            n.last_error = Some(why);
        }
        if reconnect && self.registry.is_some() {
            // A connection that stayed up for a while starts the backoff over.
            if n.up_since.take().is_some_and(|since| now.saturating_duration_since(since) >= self.reconnect_max) {
                n.delay = self.reconnect_min;
            }
            n.tried = true;
            n.conn = Conn::Waiting { at: now + n.delay };
            n.delay = (n.delay * 2).min(self.reconnect_max);
            n.addr_pos = n.addrs.len();
        } else {
            n.up_since = None;
        }
        self.closed_any = true;
        self.engine.handle_disconnected(now, NodeId(i as u16));
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
