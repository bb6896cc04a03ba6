//! # redlease-smol: a Redlock client for smol and async-std
//!
//! A thin adapter built on [`async_io`] (sockets, timers) and [`futures_lite`] only, with no
//! executor dependency, so the same crate runs under smol and under async-std (whose sockets
//! and timers are `async-io`'s). Everything but the sockets and the timer is shared with the
//! other async adapters ([`redlease_async`]); the protocol is [`redlease_core`]'s.
//!
//! ## Where the driver runs
//!
//! One driver future owns the sockets and the engine; every clone of the client talks to it.
//! Having no executor of its own, this crate offers two ways to run it:
//!
//! - [`Client::with_driver`] returns `(Client, Driver)`: spawn the [`Driver`] on your executor
//!   — `smol::spawn(driver).detach()` or `async_std::task::spawn(driver)` — and it shares the
//!   executor's threads with your tasks. This is the usual choice.
//! - [`Client::connect`] / [`Client::with_config`] run the driver on a thread of its own
//!   (named `redlease-driver`) under `async_io::block_on`: one line, works under any executor
//!   or none, at the cost of one thread per client.
//!
//! Either way the driver ends by itself once every client and guard is dropped and their
//! releases are done.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlease_smol::{Client, ClientConfig};
//!
//! # fn main() -> Result<(), redlease_smol::Error> {
//! smol::block_on(async {
//!     let urls = ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"];
//!     let (client, driver) = Client::with_driver(ClientConfig::from_urls(urls)?).await?;
//!     smol::spawn(driver).detach();
//!
//!     let guard = client.lock("orders:42", Duration::from_secs(10)).await?;
//!     println!("token {} valid until {:?}", guard.token(), guard.valid_until());
//!     guard.release().await?;
//!     Ok(())
//! })
//! # }
//! ```

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use async_io::Async;
use futures_lite::{AsyncRead, AsyncWrite, Stream};

pub use redlease_async::{
    AcquireError, ClientConfig, Config, ConfigError, Error, ExtendError, Guard, LockBuilder, LostReason, LostSignal,
    Misuse, NodeConfig, ReleaseOutcome, ReleaseReport, Retry, Vote,
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
                        stream.get_ref().set_nodelay(true)?;
                        return Ok(Socket(stream));
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))))
        })
    }

    fn timer(deadline: Instant) -> Timer {
        Timer(async_io::Timer::at(deadline))
    }

    fn spawn(driver: Driver) -> io::Result<()> {
        std::thread::Builder::new().name("redlease-driver".into()).spawn(move || async_io::block_on(driver))?;
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

/// An `Async<TcpStream>` as the driver's [`Socket`](redlease_async::Socket).
#[derive(Debug)]
pub struct Socket(Async<TcpStream>);

impl redlease_async::Socket for Socket {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
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
