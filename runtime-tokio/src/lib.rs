#![doc = include_str!("../README.md")]

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub use redlease_async::{
    AcquireError, Config, ConfigError, Error, ExtendError, Fault, Guard, Health, Lease, LockId, LockOptions,
    LostReason, LostSignal, Misuse, NodeConfig, NodeHealth, NodeId, NodeState, NodeStats, Pem, ReleaseOutcome,
    ReleaseReport, Retry, TlsSettings, Transport, Vote,
};

/// The Redlock client on tokio. See [`redlease_async::Client`] for its methods.
pub type Client = redlease_async::Client<Tokio>;

/// The driver future of a [`Client`] made with `Client::with_driver`, for callers who
/// spawn it themselves.
pub type Driver = redlease_async::Driver<Tokio>;

/// The tokio [`Runtime`](redlease_async::Runtime): tokio sockets and timers, `tokio::spawn`.
#[derive(Debug)]
pub struct Tokio;

impl redlease_async::Runtime for Tokio {
    type Socket = Socket;
    type Timer = Timer;

    fn connect(host: &str, port: u16) -> redlease_async::BoxFuture<io::Result<Socket>> {
        let host = host.to_owned();
        Box::pin(async move {
            let stream = TcpStream::connect((host.as_str(), port)).await?;
            redlease_client::sockets::configure_tcp(&stream)?;
            Ok(Socket(Stream::Tcp(stream)))
        })
    }

    #[cfg(unix)]
    fn connect_unix(path: &std::path::Path) -> redlease_async::BoxFuture<io::Result<Socket>> {
        let path = path.to_owned();
        Box::pin(async move { Ok(Socket(Stream::Unix(tokio::net::UnixStream::connect(path).await?))) })
    }

    fn timer(deadline: Instant) -> Timer {
        Timer { sleep: Box::pin(tokio::time::sleep_until(deadline.into())), armed: true }
    }

    fn spawn(future: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        let handle = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        handle.spawn(future);
        Ok(())
    }
}

/// A tokio TCP or Unix stream as the driver's [`Socket`](redlease_async::Socket).
#[derive(Debug)]
pub struct Socket(Stream);

#[derive(Debug)]
enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

#[cfg(unix)]
impl std::os::fd::AsFd for Socket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match &self.0 {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

impl redlease_async::Socket for Socket {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut buf = ReadBuf::new(buf);
        let polled = match &mut self.0 {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, &mut buf),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_read(cx, &mut buf),
        };
        match polled {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        // A socket that tokio knows to be writable is written at once (`try_write` asks the
        // kernel only then, and forgets the readiness on `WouldBlock`); the readiness path,
        // which registers the waker, runs only when that fails.
        let tried = match &self.0 {
            Stream::Tcp(s) => s.try_write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.try_write(buf),
        };
        match tried {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            done => return Poll::Ready(done),
        }
        match &mut self.0 {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }
}

/// A tokio `Sleep` as the driver's [`Timer`](redlease_async::Timer).
#[derive(Debug)]
pub struct Timer {
    sleep: Pin<Box<tokio::time::Sleep>>,
    armed: bool,
}

impl redlease_async::Timer for Timer {
    fn reset(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline.into());
        self.armed = true;
    }

    fn poll_fire(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if !self.armed {
            return Poll::Pending;
        }
        let fired = self.sleep.as_mut().poll(cx);
        if fired.is_ready() {
            self.armed = false;
        }
        fired
    }
}
