#![doc = include_str!("../README.md")]

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use async_io::Async;
use futures_lite::{AsyncWrite, Stream};

pub use redlease_async::{
    AcquireError, Config, ConfigError, Error, ExtendError, Fault, Guard, Health, Lease, LockId, LockOptions,
    LostReason, LostSignal, Misuse, NodeConfig, NodeHealth, NodeId, NodeState, NodeStats, Pem, ReleaseOutcome,
    ReleaseReport, Retry, TlsSettings, Transport, Vote,
};

/// The Redlock client on `async-io`. See [`redlease_async::Client`] for its methods.
pub type Client = redlease_async::Client<AsyncIo>;

/// The driver future of a [`Client`] made with [`Client::with_driver`]: spawn it on your executor.
pub type Driver = redlease_async::Driver<AsyncIo>;

/// The `async-io` [`Runtime`](redlease_async::Runtime): `Async<TcpStream>` sockets,
/// `async_io::Timer`, and a thread of its own for [`Client::connect`]'s driver.
#[derive(Debug)]
pub struct AsyncIo;

impl redlease_async::Runtime for AsyncIo {
    type Socket = Socket;
    type Timer = Timer;

    fn connect(host: &str, port: u16) -> redlease_async::BoxFuture<io::Result<Socket>> {
        let host = host.to_owned();
        Box::pin(async move {
            let mut last = None;
            for addr in resolve(&host, port).await? {
                match Async::<TcpStream>::connect(addr).await {
                    Ok(stream) => {
                        redlease_client::sockets::configure_tcp(stream.get_ref())?;
                        return Ok(Socket { stream: Conn::Tcp(stream), drained: false });
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))))
        })
    }

    #[cfg(unix)]
    fn connect_unix(path: &std::path::Path) -> redlease_async::BoxFuture<io::Result<Socket>> {
        let path = path.to_owned();
        Box::pin(async move {
            let stream = Async::<std::os::unix::net::UnixStream>::connect(path).await?;
            Ok(Socket { stream: Conn::Unix(stream), drained: false })
        })
    }

    fn timer(deadline: Instant) -> Timer {
        Timer(async_io::Timer::at(deadline))
    }

    fn spawn(future: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        std::thread::Builder::new().name("redlease-driver".into()).spawn(move || async_io::block_on(future))?;
        Ok(())
    }
}

/// Resolve `host`, off the executor: an IP address at once, a name on a short-lived thread
/// (the system resolver blocks).
async fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let (tx, rx) = async_channel::bounded(1);
    let name = host.to_owned();
    std::thread::Builder::new().name("redlease-resolve".into()).spawn(move || {
        let _ = tx.try_send((name.as_str(), port).to_socket_addrs().map(Vec::from_iter));
    })?;
    rx.recv().await.map_err(|_| io::Error::other(format!("resolving {host} failed")))?
}

/// An `Async<TcpStream>` (or `Async<UnixStream>`) as the driver's
/// [`Socket`](redlease_async::Socket).
///
/// A read that returns less than the buffer has emptied the socket: the next read waits for
/// readiness first instead of asking the kernel (which would only say `WouldBlock`), saving
/// a system call per batch of replies. Data that arrives meanwhile is reported by the
/// reactor, which re-arms its interest when the waker is registered.
#[derive(Debug)]
pub struct Socket {
    stream: Conn,
    /// The last read emptied the socket: wait for a readiness event before reading again.
    drained: bool,
}

#[derive(Debug)]
enum Conn {
    Tcp(Async<TcpStream>),
    #[cfg(unix)]
    Unix(Async<std::os::unix::net::UnixStream>),
}

#[cfg(unix)]
impl std::os::fd::AsFd for Socket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match &self.stream {
            Conn::Tcp(s) => s.get_ref().as_fd(),
            Conn::Unix(s) => s.get_ref().as_fd(),
        }
    }
}

impl redlease_async::Socket for Socket {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        loop {
            if self.drained {
                let ready = match &self.stream {
                    Conn::Tcp(s) => s.poll_readable(cx),
                    #[cfg(unix)]
                    Conn::Unix(s) => s.poll_readable(cx),
                };
                match ready {
                    Poll::Ready(Ok(())) => self.drained = false,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            let read = match &self.stream {
                Conn::Tcp(s) => io::Read::read(&mut s.get_ref(), buf),
                #[cfg(unix)]
                Conn::Unix(s) => io::Read::read(&mut s.get_ref(), buf),
            };
            match read {
                Ok(n) => {
                    self.drained = n < buf.len();
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.drained = true,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match &mut self.stream {
            Conn::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(unix)]
            Conn::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }
}

/// An `async_io::Timer` as the driver's [`Timer`](redlease_async::Timer).
#[derive(Debug)]
pub struct Timer(async_io::Timer);

impl redlease_async::Timer for Timer {
    fn reset(&mut self, deadline: Instant) {
        self.0.set_at(deadline);
    }

    fn poll_fire(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // A one-shot timer yields one item, then `None` until it is set again.
        match Pin::new(&mut self.0).poll_next(cx) {
            Poll::Ready(Some(_)) => Poll::Ready(()),
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}
