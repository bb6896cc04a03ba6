//! One node's socket under mio: non-blocking connect over the host's addresses (or to a Unix
//! socket), the TLS handshake if the node is `rediss://`, reads until a short read or
//! `WouldBlock`, writes until `WouldBlock`, and the write interest kept only while output is
//! pending. Bytes pass through the client layer's [`Layer`] (plain or TLS).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Instant;

use mio::event::{Event as MioEvent, Source};
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use redlease_client::transport::{Layer, NodeTransport, Target};
use redlease_core::{Engine, NodeId};

/// A TCP or Unix stream.
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(mio::net::UnixStream),
}

impl Stream {
    fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            Stream::Tcp(s) => s.take_error(),
            #[cfg(unix)]
            Stream::Unix(s) => s.take_error(),
        }
    }

    /// `Ok` once connected; `NotConnected` while the connect is in progress.
    fn connected(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.peer_addr().map(drop),
            #[cfg(unix)]
            Stream::Unix(s) => s.peer_addr().map(drop),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Source for Stream {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(registry, token, interests),
            #[cfg(unix)]
            Stream::Unix(s) => s.register(registry, token, interests),
        }
    }

    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(registry, token, interests),
            #[cfg(unix)]
            Stream::Unix(s) => s.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(registry),
            #[cfg(unix)]
            Stream::Unix(s) => s.deregister(registry),
        }
    }
}

#[cfg(unix)]
impl std::os::fd::AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

/// Why a connection ended.
pub(crate) enum Closed {
    /// An established connection failed: the engine's `handle_disconnected`.
    Lost(String),
    /// It failed before the engine heard of it (in the TLS handshake): a failed connect
    /// attempt, the engine's `handle_connect_failed`.
    ConnectFailed(String),
}

/// What the driver holds for one node.
pub(crate) enum Conn {
    /// No socket: waiting for the engine to hand out the next attempt.
    Idle,
    /// A non-blocking connect to `addrs[pos]`; if it fails, the next address of the host is
    /// tried within the same attempt.
    Connecting { stream: Stream, addrs: Vec<SocketAddr>, pos: usize },
    Up {
        stream: Stream,
        /// Plain, or the TLS session.
        layer: Layer,
        /// In the TLS handshake: the engine does not know of the connection yet.
        handshaking: bool,
        /// The socket took everything so far (false after a `WouldBlock`, until a writable event).
        writable: bool,
        /// `WRITABLE` is in the registered interest (only while output is pending).
        write_interest: bool,
    },
}

/// How a connect attempt stands after a readiness event.
pub(crate) enum Progress {
    /// Not finished (or a spurious event).
    Pending,
    Connected,
    /// Connected, and the TLS handshake started (the engine hears of the connection when it
    /// is done).
    Handshaking,
    /// Every address of the host failed; the last reason.
    Failed(String),
}

/// One node: how to reach it, and its socket.
pub(crate) struct Node {
    pub(crate) transport: NodeTransport,
    pub(crate) conn: Conn,
    /// Plaintext out of a TLS session, on its way to the engine.
    plain: Vec<u8>,
}

impl Node {
    pub(crate) fn new(transport: NodeTransport) -> Self {
        Node { transport, conn: Conn::Idle, plain: Vec::new() }
    }

    /// Begin the connect attempt the engine handed out: resolve the host, then connect to
    /// its addresses in turn (or to the Unix socket). `Err` with the reason if none takes a
    /// connect.
    pub(crate) fn start(&mut self, registry: &Registry, token: Token) -> Result<(), String> {
        let (host, port) = match &self.transport.target {
            Target::Tcp { host, port } => (host.clone(), *port),
            #[cfg(unix)]
            Target::Unix(path) => {
                let mut stream =
                    Stream::Unix(mio::net::UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?);
                registry
                    .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                    .map_err(|e| format!("cannot register the socket: {e}"))?;
                self.conn = Conn::Connecting { stream, addrs: Vec::new(), pos: 0 };
                return Ok(());
            }
            #[cfg(not(unix))]
            Target::Unix(path) => return Err(format!("{}: no Unix sockets on this platform", path.display())),
        };
        let addrs: Vec<SocketAddr> = match (host.as_str(), port).to_socket_addrs() {
            Ok(addrs) => addrs.collect(),
            Err(e) => return Err(format!("cannot resolve {host}: {e}")),
        };
        if addrs.is_empty() {
            return Err(format!("{host} resolves to no address"));
        }
        self.try_addrs(registry, token, addrs, 0, String::new())
    }

    /// Start a non-blocking connect to the first of `addrs[pos..]` that takes one; if none
    /// does, the attempt failed (with the last reason).
    fn try_addrs(
        &mut self,
        registry: &Registry,
        token: Token,
        addrs: Vec<SocketAddr>,
        mut pos: usize,
        mut why: String,
    ) -> Result<(), String> {
        while let Some(&addr) = addrs.get(pos) {
            let started = TcpStream::connect(addr).and_then(|stream| {
                let mut stream = Stream::Tcp(stream);
                registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
                Ok(stream)
            });
            match started {
                Ok(stream) => {
                    self.conn = Conn::Connecting { stream, addrs, pos };
                    return Ok(());
                }
                Err(e) => why = format!("{addr}: {e}"),
            }
            pos += 1;
        }
        Err(why)
    }

    /// A readiness event while connecting: check the connect the way mio documents, and
    /// move on to the host's next address if this one failed.
    pub(crate) fn connect_progress(&mut self, registry: &Registry, token: Token, event: &MioEvent) -> Progress {
        let Conn::Connecting { stream, .. } = &mut self.conn else {
            return Progress::Pending;
        };
        let failed = match stream.take_error() {
            Ok(Some(e)) | Err(e) => Some(e.to_string()),
            Ok(None) => match stream.connected() {
                Ok(_) => None,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    if !(event.is_error() || event.is_write_closed()) {
                        return Progress::Pending;
                    }
                    Some("the connection was closed".to_owned())
                }
                Err(e) => Some(e.to_string()),
            },
        };
        let Conn::Connecting { mut stream, addrs, pos } = std::mem::replace(&mut self.conn, Conn::Idle) else {
            return Progress::Pending;
        };
        if let Some(why) = failed {
            // The socket is closed right after; a failure to deregister changes nothing.
            let _ = registry.deregister(&mut stream);
            drop(stream);
            return match self.try_addrs(registry, token, addrs, pos + 1, why) {
                Ok(()) => Progress::Pending,
                Err(why) => Progress::Failed(why),
            };
        }
        if let Stream::Tcp(tcp) = &stream {
            // A failure here only costs latency (or a late notice of a vanished peer); the
            // connection still works.
            let _ = redlease_client::sockets::configure_tcp(tcp);
        }
        let layer = match self.transport.layer() {
            Ok(layer) => layer,
            Err(why) => {
                let _ = registry.deregister(&mut stream);
                return Progress::Failed(why);
            }
        };
        let handshaking = layer.is_handshaking();
        // Registered for READABLE | WRITABLE while connecting; `flush` drops WRITABLE once
        // the handshake is out.
        self.conn = Conn::Up { stream, layer, handshaking, writable: true, write_interest: true };
        if handshaking { Progress::Handshaking } else { Progress::Connected }
    }

    /// Read until the socket is drained, feeding the engine: until `WouldBlock`, or a read
    /// that did not fill `buf` (a stream socket returns less only when its receive queue is
    /// empty; with edge-triggered readiness any later byte raises a new event, so the read
    /// that would only say `WouldBlock` is saved — tokio does the same). With `to_end` (the
    /// event already reported the peer's FIN or an error) it reads on to the end of stream:
    /// a FIN that came with the last bytes raises no new event. Returns why the connection
    /// is lost (end of stream or an error), if it is; the caller then drops it.
    pub(crate) fn read(
        &mut self,
        buf: &mut [u8],
        engine: &mut Engine,
        now: Instant,
        node: NodeId,
        to_end: bool,
    ) -> Option<Closed> {
        loop {
            let Conn::Up { stream, layer, handshaking, .. } = &mut self.conn else {
                return None;
            };
            let lost = |why: String| if *handshaking { Closed::ConnectFailed(why) } else { Closed::Lost(why) };
            match stream.read(buf) {
                Ok(0) if *handshaking => {
                    return Some(lost("the server closed the connection during the TLS handshake".to_owned()));
                }
                Ok(0) => return Some(lost("connection closed by the server".to_owned())),
                Ok(n) => {
                    let fed = layer.input(&buf[..n], &mut self.plain, |p| engine.handle_data(now, node, p));
                    if let Err(why) = fed {
                        return Some(lost(why));
                    }
                    if *handshaking && !layer.is_handshaking() {
                        // The TLS handshake is done: now the engine hears of the connection
                        // (its own handshake goes out with the next flush).
                        *handshaking = false;
                        engine.handle_connected(now, node);
                    }
                    if !engine.is_connected(node) && !*handshaking {
                        // The engine failed the link (`poll_close` hands it out to be dropped).
                        return None;
                    }
                    if n < buf.len() && !to_end {
                        // The socket is drained.
                        return None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Some(lost(format!("connection lost: {e}"))),
            }
        }
    }

    /// A writable event: the socket takes bytes again.
    pub(crate) fn writable(&mut self) {
        if let Conn::Up { writable, .. } = &mut self.conn {
            *writable = true;
        }
    }

    /// Write what the engine has for this node until done or `WouldBlock`. Returns why the
    /// connection is unusable, if it is: the socket takes no bytes, fails, or cannot be
    /// re-registered (without a writable event the rest would never go out).
    pub(crate) fn flush(
        &mut self,
        registry: &Registry,
        token: Token,
        engine: &mut Engine,
        node: NodeId,
    ) -> Option<Closed> {
        let Conn::Up { stream, layer, handshaking, writable, write_interest } = &mut self.conn else {
            return None;
        };
        if !*writable {
            return None;
        }
        let lost = |why: String| if *handshaking { Closed::ConnectFailed(why) } else { Closed::Lost(why) };
        let reregister = |stream: &mut Stream, interest| {
            registry.reregister(stream, token, interest).err().map(|e| format!("cannot re-register the socket: {e}"))
        };
        while let Some((bytes, from)) = layer.next_write(engine, node, *handshaking) {
            match stream.write(bytes) {
                Ok(0) => return Some(lost("the socket takes no more bytes".to_owned())),
                Ok(n) => layer.wrote(engine, node, from, n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    *writable = false;
                    if *write_interest {
                        return None;
                    }
                    *write_interest = true;
                    return reregister(stream, Interest::READABLE | Interest::WRITABLE).map(lost);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Some(lost(format!("write failed: {e}"))),
            }
        }
        if *write_interest {
            // Everything went out: stop watching for writability.
            *write_interest = false;
            return reregister(stream, Interest::READABLE).map(lost);
        }
        None
    }

    /// Close and deregister whatever socket the node has; with `reset`, the close resets the
    /// connection (for one the engine failed: nothing it still carries runs on the server).
    pub(crate) fn drop_socket(&mut self, registry: Option<&Registry>, reset: bool) {
        if let Conn::Connecting { mut stream, .. } | Conn::Up { mut stream, .. } =
            std::mem::replace(&mut self.conn, Conn::Idle)
        {
            if reset {
                redlease_client::sockets::reset_on_close(&stream);
            }
            if let Some(reg) = registry {
                // The socket is closed right after; a failure here changes nothing.
                let _ = reg.deregister(&mut stream);
            }
        }
    }
}
