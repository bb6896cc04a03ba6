//! One node's socket under mio: a non-blocking connect over the host's addresses (or to a Unix
//! socket), and the readiness bookkeeping of a connected socket (a "writable" flag, and the
//! write interest kept only while output is pending). Everything else about the connection
//! (TLS, the engine's handshake, losses and their reasons) is the client layer's state machine.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};

use mio::event::{Event as MioEvent, Source};
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use redlease_client::adapter::{SocketIo, Target};

/// A TCP or Unix stream.
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(mio::net::UnixStream),
}

macro_rules! each {
    ($stream:expr, $s:ident => $body:expr) => {
        match $stream {
            Stream::Tcp($s) => $body,
            #[cfg(unix)]
            Stream::Unix($s) => $body,
        }
    };
}

impl Stream {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        each!(self, s => s.register(registry, token, interests))
    }

    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        each!(self, s => s.reregister(registry, token, interests))
    }

    fn deregister(&mut self, registry: &Registry) {
        // The socket is closed right after; a failure here changes nothing.
        let _ = each!(self, s => s.deregister(registry));
    }
}

#[cfg(unix)]
impl std::os::fd::AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        each!(self, s => s.as_fd())
    }
}

/// A connect attempt in flight: a non-blocking connect to `addrs[pos]`; if it fails, the next
/// address of the host is tried within the same attempt.
pub(crate) struct Dialing {
    stream: Stream,
    addrs: Vec<SocketAddr>,
    pos: usize,
}

/// How a connect attempt stands after a readiness event.
pub(crate) enum Dialed {
    /// Not finished (or a spurious event), or moved on to the host's next address.
    Pending(Dialing),
    /// Connected.
    Connected(Socket),
    /// Every address of the host failed; the last reason.
    Failed(String),
}

impl Dialing {
    /// Begin the connect attempt the engine handed out: resolve the host, then connect to its
    /// addresses in turn (or to the Unix socket). `Err` with the reason if none takes a connect.
    pub(crate) fn start(target: &Target, registry: &Registry, token: Token) -> Result<Dialing, String> {
        let (host, port) = match target {
            Target::Tcp { host, port } => (host.as_str(), *port),
            #[cfg(unix)]
            Target::Unix(path) => {
                let stream = mio::net::UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
                let mut stream = Stream::Unix(stream);
                stream
                    .register(registry, token, Interest::READABLE | Interest::WRITABLE)
                    .map_err(|e| format!("cannot register the socket: {e}"))?;
                return Ok(Dialing { stream, addrs: Vec::new(), pos: 0 });
            }
            #[cfg(not(unix))]
            Target::Unix(path) => return Err(format!("{}: no Unix sockets on this platform", path.display())),
        };
        let addrs: Vec<SocketAddr> = match (host, port).to_socket_addrs() {
            Ok(addrs) => addrs.collect(),
            Err(e) => return Err(format!("cannot resolve {host}: {e}")),
        };
        if addrs.is_empty() {
            return Err(format!("{host} resolves to no address"));
        }
        Dialing::first(registry, token, addrs, 0, String::new())
    }

    /// A non-blocking connect to the first of `addrs[pos..]` that takes one; if none does, the
    /// attempt failed (with the last reason).
    fn first(
        registry: &Registry,
        token: Token,
        addrs: Vec<SocketAddr>,
        mut pos: usize,
        mut why: String,
    ) -> Result<Dialing, String> {
        while let Some(&addr) = addrs.get(pos) {
            let started = TcpStream::connect(addr).and_then(|stream| {
                let mut stream = Stream::Tcp(stream);
                stream.register(registry, token, Interest::READABLE | Interest::WRITABLE)?;
                Ok(stream)
            });
            match started {
                Ok(stream) => return Ok(Dialing { stream, addrs, pos }),
                Err(e) => why = format!("{addr}: {e}"),
            }
            pos += 1;
        }
        Err(why)
    }

    /// A readiness event while connecting: check the connect the way mio documents
    /// (`take_error`, then `peer_addr`), and move on to the host's next address if this one
    /// failed.
    pub(crate) fn progress(self, registry: &Registry, token: Token, event: &MioEvent) -> Dialed {
        let taken = each!(&self.stream, s => s.take_error());
        let failed = match taken {
            Ok(Some(e)) | Err(e) => Some(e.to_string()),
            Ok(None) => match each!(&self.stream, s => s.peer_addr().map(drop)) {
                Ok(()) => None,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    if !(event.is_error() || event.is_write_closed()) {
                        return Dialed::Pending(self);
                    }
                    Some("the connection was closed".to_owned())
                }
                Err(e) => Some(e.to_string()),
            },
        };
        let Dialing { mut stream, addrs, pos } = self;
        if let Some(why) = failed {
            stream.deregister(registry);
            return match Dialing::first(registry, token, addrs, pos + 1, why) {
                Ok(next) => Dialed::Pending(next),
                Err(why) => Dialed::Failed(why),
            };
        }
        // Registered for READABLE | WRITABLE while connecting; the first flush that empties
        // the output drops WRITABLE.
        Dialed::Connected(Socket { stream, writable: true, write_interest: true })
    }

    /// Close the attempt.
    pub(crate) fn close(mut self, registry: Option<&Registry>) {
        if let Some(registry) = registry {
            self.stream.deregister(registry);
        }
    }
}

/// A connected socket and its readiness.
pub(crate) struct Socket {
    stream: Stream,
    /// The socket took everything so far (false after a `WouldBlock`, until a writable event).
    writable: bool,
    /// `WRITABLE` is in the registered interest (only while output is pending).
    write_interest: bool,
}

#[cfg(unix)]
impl std::os::fd::AsFd for Socket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

impl Socket {
    /// A writable event: the socket takes bytes again.
    pub(crate) fn set_writable(&mut self) {
        self.writable = true;
    }

    /// After a flush: watch for writability only while output is pending (`blocked`), so that
    /// an idle connection raises no events. `Err`: the socket cannot be re-registered (without
    /// a writable event the rest would never go out).
    pub(crate) fn watch(&mut self, registry: &Registry, token: Token, blocked: bool) -> Result<(), String> {
        if self.write_interest == blocked {
            return Ok(());
        }
        self.write_interest = blocked;
        let interest = if blocked { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
        self.stream.reregister(registry, token, interest).map_err(|e| format!("cannot re-register the socket: {e}"))
    }

    /// Close the socket.
    pub(crate) fn close(mut self, registry: Option<&Registry>) {
        if let Some(registry) = registry {
            self.stream.deregister(registry);
        }
    }
}

/// Plain non-blocking reads and writes (mio's sockets are non-blocking already).
pub(crate) struct Direct;

impl SocketIo<Socket> for Direct {
    fn read(&mut self, socket: &mut Socket, buf: &mut [u8]) -> io::Result<usize> {
        each!(&mut socket.stream, s => s.read(buf))
    }

    fn write(&mut self, socket: &mut Socket, buf: &[u8]) -> io::Result<usize> {
        if !socket.writable {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let wrote = each!(&mut socket.stream, s => s.write(buf));
        if matches!(&wrote, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            socket.writable = false;
        }
        wrote
    }
}
