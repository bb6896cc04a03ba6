//! The few things the driver needs from an async runtime.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// A boxed, sendable future, as returned by [`Runtime::connect`].
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// An async runtime, reduced to what the [`Driver`](super::Driver) needs: open a TCP
/// connection, make a timer, and run a future in the background. Each adapter crate
/// implements it in about a hundred lines (compare quinn's `runtime` module).
pub trait Runtime: Send + Sync + Sized + 'static {
    /// A connected, non-blocking TCP stream.
    type Socket: Socket;
    /// A resettable one-shot timer.
    type Timer: Timer;

    /// Whether [`spawn`](Self::spawn) runs the driver on a thread of its own (smol), which a
    /// program returning from `main` would not wait for: the last client or guard dropped then
    /// waits for the driver to send what it still has (bounded by twice the node timeout). The
    /// default: no (tokio: a task of the caller's runtime, dropped with it).
    const DRIVER_THREAD: bool = false;

    /// Whether the runtime can be used from here, checked before anything connects: `Err`
    /// says what is missing (tokio: no runtime on this thread). The default: always.
    fn available() -> Result<(), String> {
        Ok(())
    }

    /// Resolve `host` and connect to `host:port`. The driver sets the stream's options
    /// (`TCP_NODELAY`, keepalive) itself.
    ///
    /// The attempt is bounded by the engine's `connect_timeout`: the driver drops the future
    /// when the engine gives the attempt up, so the future need not time out on its own.
    fn connect(host: &str, port: u16) -> BoxFuture<io::Result<Self::Socket>>;

    /// Connect to the Unix domain socket at `path` (`redis+unix://` nodes). The default says
    /// the runtime cannot; the tokio and smol adapters can, on Unix.
    fn connect_unix(path: &std::path::Path) -> BoxFuture<io::Result<Self::Socket>> {
        let path = path.display().to_string();
        Box::pin(async move {
            Err(io::Error::new(io::ErrorKind::Unsupported, format!("{path}: this runtime has no Unix sockets")))
        })
    }

    /// A timer that fires at `deadline`.
    fn timer(deadline: Instant) -> Self::Timer;

    /// Run `future` (the driver) in the background until it finishes.
    ///
    /// Called by [`Client::with_config`](super::Client::with_config) (tokio: `tokio::spawn`;
    /// the smol adapter: a thread of its own). An error means it could not be started.
    fn spawn(future: impl Future<Output = ()> + Send + 'static) -> io::Result<()>;
}

/// A connected stream (TCP or Unix), driven by readiness: each call either makes progress or
/// registers the task's waker and returns `Pending` (the usual `AsyncRead`/`AsyncWrite`
/// contract). Its options are reachable ([`AsSocket`](super::AsSocket)), so that the driver
/// can set them and close a connection the engine failed with a reset.
pub trait Socket: Send + Unpin + 'static + super::AsSocket {
    /// Read into `buf`; `Ok(0)` means end of stream.
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>;
    /// Write some of `buf`; returns how many bytes were taken.
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;
}

/// A one-shot timer that can be moved to a new deadline.
pub trait Timer: Send + Unpin + 'static {
    /// Fire at `deadline` instead (re-arms a timer that already fired).
    fn reset(&mut self, deadline: Instant);
    /// `Ready` once the deadline has passed (once per arming); otherwise registers the waker.
    fn poll_fire(&mut self, cx: &mut Context<'_>) -> Poll<()>;
}
