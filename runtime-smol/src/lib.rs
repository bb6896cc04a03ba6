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
/// A read that returns less than the buffer has emptied the socket: the next read registers
/// the waker with the reactor instead of asking the kernel (which would only say
/// `WouldBlock`), saving a system call per batch of replies. When the driver reads the socket
/// again ([`before_reads`](redlease_async::Socket::before_reads): its waker fired, or a
/// write went out), the first read asks the kernel. async-io's own readiness record is not
/// asked: it counts an event as new only if it comes from a later turn of the reactor than
/// the registration, so where another thread drives the reactor (async-std) a task that
/// waits for it can be woken again and again while the reply sits unread.
///
/// The driver also reads right after a write
/// ([`read_after_write`](redlease_async::Socket::read_after_write)): the reply is often there
/// by its next pass, and a read that finds nothing costs less than a round through async-io's
/// reactor, which re-arms its notifier and the socket with a system call each.
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

    fn read_after_write(&self) -> bool {
        true
    }

    fn before_reads(&mut self) {
        self.drained = false;
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};
    use std::time::Duration;

    use redlease_async::{Runtime, Socket as _};

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Wait up to 5 s for the waker to have been called more than `seen` times in all.
    fn woken_after(count: &Count, seen: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while count.0.load(Ordering::SeqCst) <= seen && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        count.0.load(Ordering::SeqCst) > seen
    }

    /// A read tried right after a write finds nothing, registers the waker, and the reply that
    /// comes later wakes the task, after which the driver's first read gets it. Real loopback
    /// sockets; async-io's reactor is driven by its own thread while this one sleeps, as under
    /// async-std: asking async-io's readiness record instead of the kernel after the wake-up
    /// can answer `Pending` with the reply already there (and the next wake-up again).
    #[test]
    fn a_read_after_a_write_that_finds_nothing_still_wakes_on_the_reply() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut socket = futures_lite::future::block_on(AsyncIo::connect("127.0.0.1", port)).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let mut buf = [0u8; 64];

        for round in 0..3 {
            let seen = count.0.load(Ordering::SeqCst);
            assert!(socket.poll_write(&mut cx, b"PING\r\n").is_ready());
            assert!(socket.read_after_write(), "the smol socket asks for a read after a write");
            // Nothing sent back yet: the read finds nothing and registers the waker.
            socket.before_reads();
            assert!(socket.poll_read(&mut cx, &mut buf).is_pending(), "round {round}");
            server.write_all(b"+PONG\r\n").unwrap();
            assert!(woken_after(&count, seen), "round {round}: the reply wakes the task within 5 s");
            // Woken, the driver reads: the first read asks the kernel and gets the reply.
            socket.before_reads();
            match socket.poll_read(&mut cx, &mut buf) {
                Poll::Ready(Ok(n)) => assert_eq!(&buf[..n], b"+PONG\r\n", "round {round}"),
                other => panic!("round {round}: the reply is there to read, got {other:?}"),
            }
            // Emptied: the next read waits for the reactor (no system call) until more comes.
            assert!(socket.poll_read(&mut cx, &mut buf).is_pending(), "round {round}");
        }
    }
}
