//! The few things the client's driver needs from tokio: sockets, a timer, `tokio::spawn`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use redlease_client::aio;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The tokio runtime as the client's driver uses it: tokio sockets and timers, `tokio::spawn`.
#[derive(Debug)]
pub struct TokioRuntime;

impl aio::Runtime for TokioRuntime {
    type Socket = Socket;
    type Timer = Timer;

    fn available() -> Result<(), String> {
        tokio::runtime::Handle::try_current().map(drop).map_err(|_| {
            "no tokio runtime on this thread: make the tokio Client inside one (#[tokio::main], or \
             Runtime::block_on), built with its I/O and time drivers (enable_all)"
                .to_owned()
        })
    }

    fn connect(host: &str, port: u16) -> aio::BoxFuture<io::Result<Socket>> {
        let host = host.to_owned();
        Box::pin(async move { Ok(Socket(Stream::Tcp(TcpStream::connect((host.as_str(), port)).await?))) })
    }

    #[cfg(unix)]
    fn connect_unix(path: &std::path::Path) -> aio::BoxFuture<io::Result<Socket>> {
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

/// A tokio TCP or Unix stream as the driver's socket.
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

impl aio::Socket for Socket {
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
        // Written at once while tokio knows the socket writable (`try_write` forgets the
        // readiness on `WouldBlock`); the readiness path, which registers the waker, after that.
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

/// A tokio `Sleep` as the driver's timer.
#[derive(Debug)]
pub struct Timer {
    sleep: Pin<Box<tokio::time::Sleep>>,
    armed: bool,
}

impl aio::Timer for Timer {
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
