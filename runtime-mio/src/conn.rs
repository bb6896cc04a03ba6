//! One node's socket under mio: non-blocking connect over the host's addresses, reads until
//! a short read or `WouldBlock`, writes until `WouldBlock`, and the write interest kept only
//! while output is pending.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Instant;

use mio::event::Event as MioEvent;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use redlease_core::{Engine, NodeId};

/// What the driver holds for one node.
pub(crate) enum Conn {
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

/// How a connect attempt stands after a readiness event.
pub(crate) enum Progress {
    /// Not finished (or a spurious event).
    Pending,
    Connected,
    /// Every address of the host failed; the last reason.
    Failed(String),
}

/// One node: its address and its socket.
pub(crate) struct Node {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) conn: Conn,
}

impl Node {
    pub(crate) fn new(host: String, port: u16) -> Self {
        Node { host, port, conn: Conn::Idle }
    }

    /// Begin the connect attempt the engine handed out: resolve the host, then connect to
    /// its addresses in turn. `Err` with the reason if none takes a connect.
    pub(crate) fn start(&mut self, registry: &Registry, token: Token) -> Result<(), String> {
        let addrs: Vec<SocketAddr> = match (self.host.as_str(), self.port).to_socket_addrs() {
            Ok(addrs) => addrs.collect(),
            Err(e) => return Err(format!("cannot resolve {}: {e}", self.host)),
        };
        if addrs.is_empty() {
            return Err(format!("{} resolves to no address", self.host));
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
            let started = TcpStream::connect(addr).and_then(|mut stream| {
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
            Ok(None) => match stream.peer_addr() {
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
        // A failure here only costs latency (or a late notice of a vanished peer); the
        // connection still works.
        let _ = redlease_client::sockets::configure_tcp(&stream);
        // Registered for READABLE | WRITABLE while connecting; `flush` drops WRITABLE once
        // the handshake is out.
        self.conn = Conn::Up { stream, writable: true, write_interest: true };
        Progress::Connected
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
    ) -> Option<String> {
        loop {
            let Conn::Up { stream, .. } = &mut self.conn else {
                return None;
            };
            match stream.read(buf) {
                Ok(0) => return Some("connection closed by the server".to_owned()),
                Ok(n) => {
                    engine.handle_data(now, node, &buf[..n]);
                    if !engine.is_connected(node) || (n < buf.len() && !to_end) {
                        // The engine failed the link (`poll_close` hands it out to be
                        // dropped), or the socket is drained.
                        return None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Some(format!("connection lost: {e}")),
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
    ) -> Option<String> {
        let Conn::Up { stream, writable, write_interest } = &mut self.conn else {
            return None;
        };
        if !*writable {
            return None;
        }
        let reregister = |stream: &mut TcpStream, interest| {
            registry.reregister(stream, token, interest).err().map(|e| format!("cannot re-register the socket: {e}"))
        };
        while let Some(bytes) = engine.poll_transmit(node) {
            match stream.write(bytes) {
                Ok(0) => return Some("the socket takes no more bytes".to_owned()),
                Ok(n) => engine.advance_transmit(node, n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    *writable = false;
                    if *write_interest {
                        return None;
                    }
                    *write_interest = true;
                    return reregister(stream, Interest::READABLE | Interest::WRITABLE);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Some(format!("write failed: {e}")),
            }
        }
        if *write_interest {
            // Everything went out: stop watching for writability.
            *write_interest = false;
            return reregister(stream, Interest::READABLE);
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
