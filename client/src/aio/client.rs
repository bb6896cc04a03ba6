//! The cloneable client.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::{Error, Lease, new_token, oneshot, seeded, spans};
use redlease_core::{Config, Health, LockOptions};
use tracing::{Instrument, Span};

use super::command::{self, Command, Sender};
use super::driver::Driver;
use super::guard::Guard;
use super::runtime::Runtime;

/// A Redlock client for one set of nodes, on the async runtime `R`.
///
/// Each async adapter names it for its runtime: `redlease::tokio::Client` is
/// `Client<TokioRuntime>`, `redlease::smol::Client` (smol, async-std) is
/// `Client<AsyncIoRuntime>`; the methods are these. The examples use tokio.
///
/// Cheap to clone: every clone talks to the same driver, so many tasks can have locks in
/// flight at once over one connection per node. Call [`close`](Client::close) before the
/// program ends.
///
/// ```no_run
/// # use redlease::Error;
/// use std::time::Duration;
/// use redlease::tokio::Client;
/// # async fn example() -> Result<(), Error> {
/// let nodes = ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"];
/// let client = Client::connect(nodes).await?;
/// let guard = client.lock("orders:42", Duration::from_secs(10)).await?;
/// println!("held until {:?} with token {}", guard.valid_until(), guard.token());
/// guard.release().await?;
/// client.close().await;
/// # Ok(()) }
/// ```
pub struct Client<R> {
    pub(super) tx: Sender,
    /// The config's name, for the spans made here.
    pub(super) name: Arc<str>,
    _runtime: PhantomData<fn() -> R>,
}

impl<R> Clone for Client<R> {
    fn clone(&self) -> Self {
        Client { tx: self.tx.clone(), name: Arc::clone(&self.name), _runtime: PhantomData }
    }
}

impl<R> fmt::Debug for Client<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("name", &self.name).field("closed", &self.tx.is_closed()).finish_non_exhaustive()
    }
}

impl<R: Runtime> Client<R> {
    /// Connect to the nodes at these URLs (`redis://[user[:pass]@]host:port[/db]`,
    /// `rediss://…` for TLS, `redis+unix:///path[?db=N]`: [`Config::from_urls`](crate::Config::from_urls)),
    /// with defaults for everything else, and start the driver in the background.
    ///
    /// Returns once a quorum of nodes is ready (the others join as they come:
    /// [`Config::require_all`](crate::Config::require_all)). Fails with [`Error::Unhealthy`]
    /// (the health view: each node's state and last error) when no quorum is ready once every
    /// node's first attempt has ended — refused, a wrong password, or the connect timeout.
    pub async fn connect<I, S>(urls: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::with_config(Config::from_urls(urls)?).await
    }

    /// Like [`connect`](#method.connect), with explicit settings ([`Config`](crate::Config):
    /// nodes, timeouts, retries, TLS, reconnect backoff; the engine applies the connection
    /// knobs, the driver only opens the sockets it is told to).
    ///
    /// The config is checked first (a bad one fails as [`Error::Config`], naming the field).
    /// Without a seed, it gets one from the OS random source, so that separate clients do not
    /// retry in step.
    ///
    /// ```no_run
    /// # use redlease::{Config, Error};
    /// use std::time::Duration;
    /// use redlease::tokio::Client;
    /// # async fn example() -> Result<(), Error> {
    /// let config = Config::from_urls(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])?
    ///     .node_timeout(Duration::from_millis(100));
    /// let client = Client::with_config(config).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_config(config: Config) -> Result<Self, Error> {
        let linger = config.node_timeout.saturating_mul(2) + Duration::from_millis(100);
        let (client, driver) = Self::with_driver(config).await?;
        if R::DRIVER_THREAD {
            driver.linger(linger);
        }
        R::spawn(driver)?;
        Ok(client)
    }

    /// Like [`with_config`](#method.with_config), but hand the driver to the caller instead of
    /// starting it: the client does nothing until the [`Driver`] future is polled (spawn it on
    /// your executor).
    pub async fn with_driver(config: Config) -> Result<(Self, Driver<R>), Error> {
        let config = seeded(config)?;
        R::available().map_err(Error::Runtime)?;
        let name = Arc::from(spans::client(&config));
        let (tx, rx) = command::queue();
        let driver = Driver::start(config, rx).await?;
        Ok((Client { tx, name, _runtime: PhantomData }, driver))
    }
}

impl<R> Client<R> {
    /// Acquire `resource` for `ttl` with the defaults of
    /// [`LockOptions::new`](crate::LockOptions::new): waits while someone else holds it, within
    /// the config's [`Retry`](crate::Retry) (by default up to 10 s);
    /// [`lock_with`](#method.lock_with) sets the wait per call.
    pub async fn lock(&self, resource: &str, ttl: Duration) -> Result<Guard, Error> {
        self.lock_with(LockOptions::new(resource, ttl)).await
    }

    /// Acquire `resource` for `ttl` in a single attempt
    /// ([`LockOptions::try_once`](crate::LockOptions::try_once)).
    pub async fn try_lock(&self, resource: &str, ttl: Duration) -> Result<Guard, Error> {
        self.lock_with(LockOptions::new(resource, ttl).try_once()).await
    }

    /// Acquire with options ([`LockOptions`](crate::LockOptions): more resources, fencing, a
    /// semaphore or a read lock, automatic extension, and how long to wait).
    ///
    /// If this future is dropped before it finishes, the acquisition is cancelled, and a lock
    /// it got meanwhile is released. Its span, `redlease.acquire`, is a child of the caller's
    /// span and lasts as long as the caller waits.
    ///
    /// ```no_run
    /// # use redlease::{Error, LockOptions};
    /// use std::time::Duration;
    /// # async fn example(client: redlease::tokio::Client) -> Result<(), Error> {
    /// let options = LockOptions::new("orders:42", Duration::from_secs(5))
    ///     .fencing(true)
    ///     .wait(Duration::from_secs(2));
    /// let guard = client.lock_with(options).await?;
    /// println!("fencing token {:?}", guard.fence());
    /// # Ok(()) }
    /// ```
    pub async fn lock_with(&self, options: LockOptions) -> Result<Guard, Error> {
        let span = spans::acquire(&self.name, &options);
        self.acquire(options, span.clone()).instrument(span).await
    }

    async fn acquire(&self, options: LockOptions, span: Span) -> Result<Guard, Error> {
        self.acquire_as(options, new_token()?, span).await
    }

    /// Acquire with `token` (a campaign's, which carries its value).
    pub(super) async fn acquire_as(&self, options: LockOptions, token: String, span: Span) -> Result<Guard, Error> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Acquire { options, token, reply, span }).map_err(|_| Error::Closed)?;
        let mut waiting = Waiting { rx, tx: &self.tx, name: &self.name, done: false };
        let answer = waiting.rx.recv().await;
        waiting.done = true;
        let lease = answer.map_err(|_| Error::Closed)??;
        Ok(Guard::new(lease, self.tx.clone(), Arc::clone(&self.name)))
    }

    /// Run `f` while holding a lock: acquire with `options` as
    /// [`lock_with`](#method.lock_with) does, with automatic extension turned on (the driver
    /// keeps it extended while `f` runs), release afterwards, and return what `f` returned; a
    /// failure to acquire is reported, the release's outcome is not.
    ///
    /// `f` gets the [`Lease`]: select on `lease.lost().wait()` to stop work that is no longer
    /// protected.
    ///
    /// All of it runs in a `redlease.with_lock` span, a child of the caller's span: the
    /// acquisition, `f`'s work and the release are its children.
    ///
    /// ```no_run
    /// # use redlease::{Error, LockOptions};
    /// use std::time::Duration;
    /// # async fn example(client: redlease::tokio::Client) -> Result<(), Error> {
    /// let options = LockOptions::new("reports:daily", Duration::from_secs(30)).fencing(true);
    /// let written = client
    ///     .with_lock(options, |lease| async move {
    ///         // Hand `lease.fence()` to the store, which refuses older tokens.
    ///         lease.fence()
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<F, Fut, T>(&self, options: LockOptions, f: F) -> Result<T, Error>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let span = spans::with_lock(&self.name, &options);
        async move {
            let guard = self.lock_with(options.auto_extend(true)).await?;
            let out = f(guard.lease().clone()).await;
            // The work is done; how the release went does not change its result.
            let _ = guard.release().await;
            Ok(out)
        }
        .instrument(span)
        .await
    }

    /// The nodes' health now ([`Health`](crate::Health): each node's state and last error,
    /// and how many more nodes may fail before locking stops).
    ///
    /// [`Error::Closed`] once the client is closed or its driver has stopped.
    ///
    /// ```no_run
    /// # use redlease::Error;
    /// # async fn example(client: redlease::tokio::Client) -> Result<(), Error> {
    /// let health = client.health().await?;
    /// println!("{health}");
    /// if health.fault_tolerance() == 0 {
    ///     eprintln!("one more node down and locking stops");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn health(&self) -> Result<Health, Error> {
        let (reply, mut rx) = oneshot::channel();
        self.tx.send(Command::Health { reply }).map_err(|_| Error::Closed)?;
        rx.recv().await.map_err(|_| Error::Closed)
    }

    /// Close the client, for every clone: refuse new calls ([`Error::Closed`]), cancel the
    /// acquisitions in flight, release every lock still held (its guard's lost signal fires,
    /// [`LostReason::Stopped`](crate::LostReason::Stopped)), and return once those releases
    /// are done (each bounded by the node timeout) and the connections closed.
    ///
    /// Call it before the program ends. A program that returns from `main` without it still
    /// sends the releases of what it holds, without waiting for the answers.
    pub async fn close(&self) {
        let (done, mut rx) = oneshot::channel();
        if self.tx.send(Command::Close { done }).is_ok() {
            // Answered (or dropped) once the driver has finished.
            let _ = rx.recv().await;
        }
    }
}

/// The caller's side of an acquisition in flight. Dropped before the answer was taken (the
/// caller gave up), it stops the reply and tells the driver: the acquisition is cancelled,
/// or the lock it got is released.
struct Waiting<'a> {
    rx: oneshot::Receiver<Result<Lease, Error>>,
    tx: &'a Sender,
    name: &'a str,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let command = match self.rx.close() {
            Some(Ok(lease)) => {
                Command::Release { lock: lease.id(), reply: None, span: spans::release(self.name, lease.resource()) }
            }
            _ => Command::Sweep,
        };
        let _ = self.tx.send(command);
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::task::{Context, Poll};
    use std::time::Instant;

    use futures_lite::future::block_on;
    use redlease_core::ConfigError;

    use super::*;

    /// A runtime the tests never reach: a config is checked before anything connects.
    struct Unreached;

    /// Never made: a config is checked before anything connects.
    struct NoSocket(std::fs::File);

    #[cfg(unix)]
    impl std::os::fd::AsFd for NoSocket {
        fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
            self.0.as_fd()
        }
    }

    impl super::super::runtime::Socket for NoSocket {
        fn poll_read(&mut self, _: &mut Context<'_>, _: &mut [u8]) -> Poll<io::Result<usize>> {
            Poll::Ready(Err(io::Error::other("no socket is opened for a bad config")))
        }

        fn poll_write(&mut self, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
            Poll::Ready(Err(io::Error::other("no socket is opened for a bad config")))
        }
    }

    struct NoTimer;

    impl super::super::runtime::Timer for NoTimer {
        fn reset(&mut self, _: Instant) {}

        fn poll_fire(&mut self, _: &mut Context<'_>) -> Poll<()> {
            Poll::Pending
        }
    }

    impl Runtime for Unreached {
        type Socket = NoSocket;
        type Timer = NoTimer;

        fn connect(host: &str, port: u16) -> super::super::runtime::BoxFuture<io::Result<NoSocket>> {
            panic!("connect to {host}:{port} for a bad config")
        }

        fn timer(_: Instant) -> NoTimer {
            NoTimer
        }

        fn spawn(_: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
            panic!("a driver started for a bad config")
        }
    }

    fn setup_error(config: Config) -> Error {
        block_on(Client::<Unreached>::with_config(config)).expect_err("a bad config is refused")
    }

    #[test]
    fn a_bad_config_fails_as_a_config_error_naming_the_field_before_connecting() {
        let config = Config::from_urls(["redis://127.0.0.1:7000"]).unwrap();
        let err = setup_error(config.clone().connect_timeout(Duration::ZERO));
        assert!(matches!(err, Error::Config(ConfigError::ZeroConnectTimeout)), "{err}");
        assert!(err.to_string().contains("connect_timeout"), "{err}");
        let err = setup_error(config.clone().reconnect(Duration::from_secs(5), Duration::from_secs(2)));
        assert!(err.to_string().contains("reconnect_min") && err.to_string().contains("swap"), "{err}");
        let err = setup_error(config.reconnect(Duration::ZERO, Duration::from_secs(2)));
        assert!(matches!(err, Error::Config(ConfigError::ZeroReconnectMin)), "{err}");
        let err = block_on(Client::<Unreached>::connect(["http://127.0.0.1:7000"])).unwrap_err();
        assert!(matches!(err, Error::Config(_)) && err.to_string().contains("redis://"), "{err}");
        let err = block_on(Client::<Unreached>::with_driver(Config::new(Vec::new()))).unwrap_err();
        assert!(matches!(err, Error::Config(_)) && err.to_string().contains("no nodes"), "{err}");
    }
}
