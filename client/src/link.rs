//! One node's connection as every driver holds it, written once for the async driver and the
//! mio stack: **connect → TLS → handshake → up → lost**.
//!
//! - *Connect*: the engine decides when ([`Engine::poll_connect`]); the adapter opens the socket
//!   its own way (a future, a non-blocking connect) and reports it with
//!   [`Links::connected`] or [`Links::connect_failed`].
//! - *TLS*: a `rediss://` node's connection first runs its TLS handshake through the
//!   [`Layer`]; the engine still counts the link as connecting, and hears of it only when the
//!   handshake is done.
//! - *Handshake and up*: from [`Engine::handle_connected`] on, the engine's own handshake
//!   (HELLO, AUTH, SCRIPT LOAD) and every command go through [`Links::flush`], and replies
//!   through [`Links::read`].
//! - *Lost*: end of stream, a socket error, a failed TLS session, or the engine failing the
//!   link ([`Engine::poll_close`], in [`Links::sync`]). The engine is told once, with one of
//!   the reasons defined here, and the socket goes back to the adapter to close.
//!
//! The readiness rule is the adapter's: its [`SocketIo`] reads and writes without blocking and
//! answers [`io::ErrorKind::WouldBlock`] when the socket is not ready, having registered for
//! readiness as its I/O style needs (an async waker, a mio interest).

use std::fmt;
use std::io;
use std::time::Instant;

use redlease_core::{Engine, NodeId};

use crate::layer_error::LayerError;
use crate::sockets::{AsSocket, configure_tcp, reset_on_close};
use crate::transport::{Layer, NodeTransport, Target};

/// Why a connection ended, as the engine records it (the engine adds the context: `connection
/// lost: …`, `connect failed: …`). Each text is written here once.
mod reason {
    pub(super) const EOF: &str = "closed by the server";
    pub(super) const EOF_IN_TLS: &str = "the server closed the connection during the TLS handshake";
    pub(super) const ZERO_WRITE: &str = "the socket takes no more bytes";

    pub(super) fn read(e: &std::io::Error) -> String {
        e.to_string()
    }

    pub(super) fn write(e: &std::io::Error) -> String {
        format!("write failed: {e}")
    }
}

/// Bytes read from a socket per call.
const READ_BUF: usize = 16 * 1024;

/// A driver's non-blocking reads and writes on its socket type `S`.
pub trait SocketIo<S> {
    /// Read into `buf`: `Ok(0)` is the end of the stream, `WouldBlock` means nothing more now.
    fn read(&mut self, socket: &mut S, buf: &mut [u8]) -> io::Result<usize>;
    /// Write some of `buf`: how many bytes the socket took, `WouldBlock` if none now.
    fn write(&mut self, socket: &mut S, buf: &[u8]) -> io::Result<usize>;
}

/// Where one node's connection stands.
pub enum Conn<C, S> {
    /// No socket: the engine has not handed out the next connect attempt yet.
    Down,
    /// A connect attempt in flight, in the adapter's own form.
    Connecting(C),
    /// Connected, in the TLS handshake: the engine still counts the link as connecting (its
    /// connect timeout bounds the handshake).
    Tls(S, Layer),
    /// Connected and past TLS: the engine's link.
    Up(S, Layer),
}

impl<C, S> Conn<C, S> {
    /// The socket, once connected.
    pub fn socket_mut(&mut self) -> Option<&mut S> {
        match self {
            Conn::Tls(s, _) | Conn::Up(s, _) => Some(s),
            _ => None,
        }
    }

    /// The socket, once connected, taken out.
    fn into_socket(self) -> Option<S> {
        match self {
            Conn::Tls(s, _) | Conn::Up(s, _) => Some(s),
            _ => None,
        }
    }
}

/// How a [`Links::read`] ended.
#[must_use]
#[derive(Debug)]
pub enum Read<S> {
    /// The socket has nothing more now (or the engine failed the link: [`Links::sync`] closes
    /// it).
    Drained,
    /// The read budget is used up with bytes perhaps still waiting: read again soon.
    More,
    /// The connection ended; the engine has been told why. Close the socket.
    Lost(S),
}

/// How a [`Links::flush`] ended.
#[must_use]
#[derive(Debug)]
pub enum Flush<S> {
    /// Everything queued went out.
    Done,
    /// The socket took all it could (`WouldBlock`): write again once it is writable.
    Blocked,
    /// The connection ended; the engine has been told why. Close the socket.
    Lost(S),
}

/// When a read loop stops, besides `WouldBlock`, the end of the stream and the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadUntil {
    /// Only at `WouldBlock`: the readiness is re-armed only by a read that found nothing
    /// (tokio, async-io).
    WouldBlock,
    /// Also at a read that did not fill the buffer: a stream socket returns less only when its
    /// receive queue is empty, and edge-triggered readiness raises a new event for any later
    /// byte (mio), so the read that would only say `WouldBlock` is saved.
    ShortRead,
}

struct Node<C, S> {
    transport: NodeTransport,
    conn: Conn<C, S>,
}

/// Every node's connection, and the buffers they share.
pub struct Links<C, S> {
    nodes: Vec<Node<C, S>>,
    buf: Box<[u8]>,
    /// Plaintext out of a TLS session, on its way to the engine.
    plain: Vec<u8>,
}

impl<C, S: AsSocket> Links<C, S> {
    /// Every node down, reached as `transports` say (in config order).
    pub fn new(transports: Vec<NodeTransport>) -> Self {
        let nodes = transports.into_iter().map(|transport| Node { transport, conn: Conn::Down }).collect();
        Links { nodes, buf: vec![0; READ_BUF].into_boxed_slice(), plain: Vec::new() }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes (never, for a validated config).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Where `node`'s connection stands.
    pub fn conn(&self, node: usize) -> &Conn<C, S> {
        &self.nodes[node].conn
    }

    /// Where `node`'s connection stands, to move a connect attempt on.
    pub fn conn_mut(&mut self, node: usize) -> &mut Conn<C, S> {
        &mut self.nodes[node].conn
    }

    /// How `node` is reached.
    pub fn transport(&self, node: usize) -> &NodeTransport {
        &self.nodes[node].transport
    }

    /// Carry out the engine's link decisions: close what it failed (reset, so that nothing the
    /// old connection still carries runs on the server after the new one's commands), then
    /// start the connect attempts it asks for with `connect` (`Err`: the attempt failed at
    /// once, with the reason). `closed` gets every connection taken away. Returns whether
    /// anything changed.
    pub fn sync(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        mut connect: impl FnMut(usize, &NodeTransport) -> Result<C, String>,
        mut closed: impl FnMut(Conn<C, S>),
    ) -> bool {
        let mut changed = self.close_failed(engine, &mut closed);
        while let Some(node) = engine.poll_connect(now) {
            let i = node.index();
            self.grow(engine, i);
            if let (Some((_, host, port)), true) = (engine.link_endpoint(node), engine.is_sentinel_link(node)) {
                // A Sentinel-managed node's link goes to a sentinel, or to the master one named.
                self.nodes[i].transport.retarget(host, port);
            }
            closed(std::mem::replace(&mut self.nodes[i].conn, Conn::Down));
            match connect(i, &self.nodes[i].transport) {
                Ok(attempt) => self.nodes[i].conn = Conn::Connecting(attempt),
                Err(why) => engine.handle_connect_failed(now, node, &why),
            }
            changed = true;
        }
        changed
    }

    /// Make room for link `link`: the links a cluster node's slot map names come after the
    /// nodes', reached as their node is (TLS, credentials) at the master's host and port.
    fn grow(&mut self, engine: &Engine, link: usize) {
        while self.nodes.len() <= link {
            let id = node_id(self.nodes.len());
            let transport = match engine.link_endpoint(id) {
                Some((owner, host, port)) => {
                    let mut t = self.nodes[owner.index()].transport.clone();
                    t.target = Target::Tcp { host: host.to_owned(), port };
                    t
                }
                // Not reached: every link past the nodes' has an endpoint.
                None => self.nodes[0].transport.clone(),
            };
            self.nodes.push(Node { transport, conn: Conn::Down });
        }
    }

    /// The half of [`sync`](Self::sync) a driver that cannot connect now (not registered with
    /// a poll) still runs: close the connections the engine failed. Returns whether any.
    pub fn close_failed(&mut self, engine: &mut Engine, mut closed: impl FnMut(Conn<C, S>)) -> bool {
        let mut changed = false;
        while let Some(node) = engine.poll_close() {
            let conn = std::mem::replace(&mut self.nodes[node.index()].conn, Conn::Down);
            if let Conn::Tls(socket, _) | Conn::Up(socket, _) = &conn {
                reset_on_close(socket);
            }
            closed(conn);
            changed = true;
        }
        changed
    }

    /// `node`'s connect attempt produced `socket`: set a TCP stream's options
    /// ([`configure_tcp`]), then start its TLS handshake, or tell the engine it is connected. Returns the socket when it cannot be used (no TLS session could be
    /// made: the engine has been told why); close it.
    #[must_use]
    pub fn connected(&mut self, engine: &mut Engine, now: Instant, node: usize, socket: S) -> Option<S> {
        let n = &mut self.nodes[node];
        if let Target::Tcp { .. } = n.transport.target {
            // A failure here only costs latency (or a late notice of a vanished peer); the
            // connection still works.
            let _ = configure_tcp(&socket);
        }
        match n.transport.layer() {
            Ok(layer) if layer.is_handshaking() => {
                n.conn = Conn::Tls(socket, layer);
                engine.handle_tls_started(now, node_id(node));
            }
            Ok(layer) => {
                n.conn = Conn::Up(socket, layer);
                engine.handle_connected(now, node_id(node));
            }
            Err(why) => {
                n.conn = Conn::Down;
                engine.handle_connect_failed(now, node_id(node), &why);
                return Some(socket);
            }
        }
        None
    }

    /// `node`'s connect attempt failed for `why`.
    pub fn connect_failed(&mut self, engine: &mut Engine, now: Instant, node: usize, why: &str) {
        self.nodes[node].conn = Conn::Down;
        engine.handle_connect_failed(now, node_id(node), why);
    }

    /// Read `node`'s socket and feed the engine (through TLS if the node has it), at most
    /// `budget` reads. A TLS handshake that completes hands the connection to the engine.
    pub fn read(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        node: usize,
        io: &mut impl SocketIo<S>,
        until: ReadUntil,
        budget: usize,
    ) -> Read<S> {
        let id = node_id(node);
        for _ in 0..budget {
            let (socket, layer, tls) = match &mut self.nodes[node].conn {
                Conn::Tls(s, l) => (s, l, true),
                Conn::Up(s, l) => (s, l, false),
                _ => return Read::Drained,
            };
            let n = match io.read(socket, &mut self.buf) {
                Ok(0) => {
                    let why = if tls { reason::EOF_IN_TLS } else { reason::EOF };
                    return self.lose(engine, now, node, why.to_owned()).map_or(Read::Drained, Read::Lost);
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Read::Drained,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.lose(engine, now, node, reason::read(&e)).map_or(Read::Drained, Read::Lost),
            };
            let fed = layer.input(&self.buf[..n], &mut self.plain, |p| engine.handle_data(now, id, p));
            match fed {
                Ok(()) => {}
                Err(LayerError::Misconfigured(why)) if tls => {
                    // The attempt ends here; the engine records why as a misconfiguration.
                    engine.handle_tls_failed(now, id, &why);
                    let conn = std::mem::replace(&mut self.nodes[node].conn, Conn::Down);
                    return conn.into_socket().map_or(Read::Drained, Read::Lost);
                }
                Err(e) => return self.lose(engine, now, node, e.to_string()).map_or(Read::Drained, Read::Lost),
            }
            if tls && !layer.is_handshaking() {
                self.tls_done(engine, now, node);
            } else if !tls && !engine.is_connected(id) {
                // The engine failed the link; `sync` closes it.
                return Read::Drained;
            }
            if until == ReadUntil::ShortRead && n < self.buf.len() {
                return Read::Drained;
            }
        }
        Read::More
    }

    /// Write what is queued for `node` (the TLS handshake's records, or the engine's bytes,
    /// encrypted if the node has TLS) until done or the socket says `WouldBlock`.
    pub fn flush(&mut self, engine: &mut Engine, now: Instant, node: usize, io: &mut impl SocketIo<S>) -> Flush<S> {
        let id = node_id(node);
        loop {
            let (socket, layer, tls) = match &mut self.nodes[node].conn {
                Conn::Tls(s, l) => (s, l, true),
                Conn::Up(s, l) => (s, l, false),
                _ => return Flush::Done,
            };
            let Some((bytes, from)) = layer.next_write(engine, id, tls) else {
                if tls && !layer.is_handshaking() {
                    // The handshake ended with our last records: the engine's turn.
                    self.tls_done(engine, now, node);
                    continue;
                }
                return Flush::Done;
            };
            match io.write(socket, bytes) {
                Ok(0) => {
                    return self
                        .lose(engine, now, node, reason::ZERO_WRITE.to_owned())
                        .map_or(Flush::Done, Flush::Lost);
                }
                Ok(n) => layer.wrote(engine, id, from, n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Flush::Blocked,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.lose(engine, now, node, reason::write(&e)).map_or(Flush::Done, Flush::Lost),
            }
        }
    }

    /// Whether nothing is left to write to any node (the engine's bytes and TLS records).
    pub fn all_sent(&self, engine: &Engine) -> bool {
        self.nodes.iter().enumerate().all(|(i, n)| {
            let layer_done = match &n.conn {
                Conn::Up(_, layer) => !layer.has_pending(),
                _ => true,
            };
            layer_done && engine.poll_transmit(node_id(i)).is_none()
        })
    }

    /// Take every connection away (the driver stops), handing each to `closed`.
    pub fn close_all(&mut self, mut closed: impl FnMut(Conn<C, S>)) {
        for n in &mut self.nodes {
            closed(std::mem::replace(&mut n.conn, Conn::Down));
        }
    }

    /// The TLS handshake of `node` is done: the connection is the engine's now.
    fn tls_done(&mut self, engine: &mut Engine, now: Instant, node: usize) {
        let n = &mut self.nodes[node];
        if let Conn::Tls(socket, layer) = std::mem::replace(&mut n.conn, Conn::Down) {
            n.conn = Conn::Up(socket, layer);
            engine.handle_connected(now, node_id(node));
        }
    }

    /// `node`'s connection failed for `why`, as the adapter found (a socket it cannot
    /// re-register): tell the engine (a failed connect attempt while in TLS, a lost link once
    /// up) and give the socket back to close (`None` if it had none).
    pub fn fail(&mut self, engine: &mut Engine, now: Instant, node: usize, why: String) -> Option<S> {
        self.lose(engine, now, node, why)
    }

    /// `node`'s connection ended for `why`: tell the engine (a failed connect attempt while in
    /// TLS, a lost link once up) and give the socket back (`None` if it had none).
    fn lose(&mut self, engine: &mut Engine, now: Instant, node: usize, why: String) -> Option<S> {
        let conn = &mut self.nodes[node].conn;
        match std::mem::replace(conn, Conn::Down) {
            Conn::Tls(socket, _) => {
                engine.handle_connect_failed(now, node_id(node), &why);
                Some(socket)
            }
            Conn::Up(socket, _) => {
                engine.handle_disconnected(now, node_id(node), &why);
                Some(socket)
            }
            other => {
                *conn = other;
                None
            }
        }
    }
}

impl<C, S> fmt::Debug for Links<C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let states: Vec<&str> = self
            .nodes
            .iter()
            .map(|n| match n.conn {
                Conn::Down => "down",
                Conn::Connecting(_) => "connecting",
                Conn::Tls(..) => "tls",
                Conn::Up(..) => "up",
            })
            .collect();
        f.debug_struct("Links").field("nodes", &states).finish_non_exhaustive()
    }
}

/// The engine's id of the node at `index` in the config.
pub fn node_id(index: usize) -> NodeId {
    // The engine refuses configs with more than u16::MAX nodes.
    NodeId(index as u16)
}
