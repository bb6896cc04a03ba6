//! The few things the client's driver needs from `async-io`: sockets, a timer, and a thread
//! for the driver of [`Client::connect`](crate::Client::connect).

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use async_io::Async;
use futures_lite::{AsyncRead, AsyncWrite, Stream};
use redlease_client::aio;

/// The `async-io` runtime as the client's driver uses it: `Async<TcpStream>` sockets,
/// `async_io::Timer`, and a thread of its own for the driver of
/// [`Client::connect`](crate::Client::connect).
#[derive(Debug)]
pub struct AsyncIoRuntime;

impl aio::Runtime for AsyncIoRuntime {
    type Socket = Socket;
    type Timer = Timer;

    fn connect(host: &str, port: u16) -> aio::BoxFuture<io::Result<Socket>> {
        let host = host.to_owned();
        Box::pin(async move {
            let mut last = None;
            for addr in resolve(&host, port).await? {
                match Async::<TcpStream>::connect(addr).await {
                    Ok(stream) => return Ok(Socket { conn: Conn::Tcp(stream), reader: None, drained: false }),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))))
        })
    }

    #[cfg(unix)]
    fn connect_unix(path: &std::path::Path) -> aio::BoxFuture<io::Result<Socket>> {
        let path = path.to_owned();
        Box::pin(async move {
            let stream = Async::<std::os::unix::net::UnixStream>::connect(path).await?;
            Ok(Socket { conn: Conn::Unix(stream), reader: None, drained: false })
        })
    }

    const DRIVER_THREAD: bool = true;

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

/// An `Async<TcpStream>` (or `Async<UnixStream>`) as the driver's socket.
///
/// Two private shortcuts, each saving system calls per round trip: a read that returned less
/// than the buffer emptied the socket, so the next read waits for the reactor's readiness
/// instead of asking the kernel for a `WouldBlock`; and a write wakes the waker of the last
/// read that found nothing, so the driver reads the reply at its next pass instead of after a
/// round through async-io's reactor (on loopback the reply is often there by then).
#[derive(Debug)]
pub struct Socket {
    conn: Conn,
    reader: Option<Waker>,
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
        match &self.conn {
            Conn::Tcp(s) => s.get_ref().as_fd(),
            Conn::Unix(s) => s.get_ref().as_fd(),
        }
    }
}

impl aio::Socket for Socket {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        if self.drained {
            let ready = match &self.conn {
                Conn::Tcp(s) => s.poll_readable(cx),
                #[cfg(unix)]
                Conn::Unix(s) => s.poll_readable(cx),
            };
            if let Poll::Ready(Err(e)) = ready {
                return Poll::Ready(Err(e));
            }
            if ready.is_pending() {
                redlease_client::adapter::register_waker(&mut self.reader, cx.waker());
                return Poll::Pending;
            }
            self.drained = false;
        }
        let read = match &mut self.conn {
            Conn::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(unix)]
            Conn::Unix(s) => Pin::new(s).poll_read(cx, buf),
        };
        match &read {
            Poll::Ready(Ok(n)) => self.drained = *n < buf.len(),
            Poll::Pending => redlease_client::adapter::register_waker(&mut self.reader, cx.waker()),
            Poll::Ready(Err(_)) => {}
        }
        read
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let wrote = match &mut self.conn {
            Conn::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(unix)]
            Conn::Unix(s) => Pin::new(s).poll_write(cx, buf),
        };
        if let Poll::Ready(Ok(1..)) = &wrote {
            // A reply is coming: the next read asks the kernel.
            self.drained = false;
            if let Some(reader) = &self.reader {
                reader.wake_by_ref();
            }
        }
        wrote
    }
}

/// An `async_io::Timer` as the driver's timer.
#[derive(Debug)]
pub struct Timer(async_io::Timer);

impl aio::Timer for Timer {
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

    use redlease_client::aio::{Runtime, Socket as _};

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

    /// A read that finds nothing registers the waker, and the reply that comes later wakes the
    /// task, after which the next read gets it. Real loopback sockets; async-io's reactor is
    /// driven by its own thread while this one sleeps, as under async-std.
    #[test]
    fn a_read_that_finds_nothing_wakes_on_the_reply() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut socket = futures_lite::future::block_on(AsyncIoRuntime::connect("127.0.0.1", port)).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let mut buf = [0u8; 64];

        for round in 0..3 {
            let seen = count.0.load(Ordering::SeqCst);
            assert!(socket.poll_write(&mut cx, b"PING\r\n").is_ready());
            // Nothing sent back yet: the read finds nothing and registers the waker.
            assert!(socket.poll_read(&mut cx, &mut buf).is_pending(), "round {round}");
            server.write_all(b"+PONG\r\n").unwrap();
            assert!(woken_after(&count, seen), "round {round}: the reply wakes the task within 5 s");
            // Woken, the driver reads and gets the reply.
            match socket.poll_read(&mut cx, &mut buf) {
                Poll::Ready(Ok(n)) => assert_eq!(&buf[..n], b"+PONG\r\n", "round {round}"),
                other => panic!("round {round}: the reply is there to read, got {other:?}"),
            }
            // Emptied: the next read waits for the reactor until more comes.
            assert!(socket.poll_read(&mut cx, &mut buf).is_pending(), "round {round}");
        }
    }
}
