//! The cloneable client and the lock builder.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use async_channel::{Receiver, Sender};
use redlease_core::Config;

use crate::driver::{Command, Driver, Request};
use crate::error::Error;
use crate::guard::{Guard, LostSignal};
use crate::runtime::Runtime;

/// A Redlock client for one set of nodes, generic over the async [`Runtime`] (each adapter
/// crate names its own: `redlease_tokio::Client`, `redlease_smol::Client`).
///
/// Cheap to clone; every clone talks to the same driver, so many tasks can have locks in
/// flight at once over one connection per node.
pub struct Client<R> {
    pub(crate) tx: Sender<Command>,
    _runtime: PhantomData<fn() -> R>,
}

impl<R> Clone for Client<R> {
    fn clone(&self) -> Self {
        Client { tx: self.tx.clone(), _runtime: PhantomData }
    }
}

impl<R> fmt::Debug for Client<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("closed", &self.tx.is_closed()).finish_non_exhaustive()
    }
}

impl<R: Runtime> Client<R> {
    /// Connect to the nodes at these `redis://[user:pass@]host:port[/db]` URLs, with defaults
    /// for everything else, and start the driver in the background.
    ///
    /// Returns once every node has connected or failed its first attempt: nodes that are
    /// down do not make this fail; they keep reconnecting with backoff and count as failed
    /// votes meanwhile.
    pub async fn connect<I, S>(urls: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::with_config(Config::from_urls(urls)?).await
    }

    /// Like [`connect`](Self::connect), with explicit settings: the core's [`Config`], which
    /// also holds the connection knobs (`connect_timeout`, `reconnect_min`, `reconnect_max`) —
    /// the engine applies them, the driver only opens the sockets it is told to.
    ///
    /// The config is checked first ([`Config::validate`]; a bad one fails as [`Error::Config`]).
    /// Its jitter seed is replaced by one from the OS random source unless it was changed
    /// from [`Config::new`]'s default, so that separate clients do not jitter in step.
    pub async fn with_config(config: Config) -> Result<Self, Error> {
        let (client, driver) = Self::with_driver(config).await?;
        R::spawn(driver).map_err(|_| Error::Closed)?;
        Ok(client)
    }

    /// Like [`with_config`](Self::with_config), but hand the driver to the caller instead of
    /// starting it: the client does nothing until the [`Driver`] future is polled (spawn it on
    /// your executor). It finishes once every client and guard is dropped and every release
    /// is done.
    pub async fn with_driver(config: Config) -> Result<(Self, Driver<R>), Error> {
        config.validate()?;
        let (tx, rx) = async_channel::unbounded();
        let driver = Driver::start(config, rx, tx.downgrade()).await?;
        Ok((Client { tx, _runtime: PhantomData }, driver))
    }
}

impl<R> Client<R> {
    /// Acquire `resource` for `ttl`, retrying per the config's retry schedule.
    pub async fn lock(&self, resource: &str, ttl: Duration) -> Result<Guard, Error> {
        self.lock_with(resource, ttl).acquire().await
    }

    /// Acquire `resource` for `ttl` with a single attempt.
    pub async fn try_lock(&self, resource: &str, ttl: Duration) -> Result<Guard, Error> {
        self.lock_with(resource, ttl).attempts(1).acquire().await
    }

    /// A builder for an acquisition with more options; `.await` it (or call
    /// [`acquire`](LockBuilder::acquire)).
    pub fn lock_with(&self, resource: &str, ttl: Duration) -> LockBuilder {
        LockBuilder {
            tx: self.tx.clone(),
            resources: vec![resource.to_owned()],
            ttl,
            fencing: false,
            attempts: None,
            wait: None,
            max_hold: None,
            auto_extend: false,
        }
    }

    /// Run `f` while holding `resource`: acquire (with retries), extend automatically about
    /// every `ttl / 3` while `f` runs, release afterwards, and return what `f` returned.
    ///
    /// `f` gets a [`LostSignal`] that fires if an extension is refused or the validity runs
    /// out; select on it to stop work that is no longer protected. The release's own outcome
    /// is not reported (a lost lock was already signalled).
    pub async fn with_lock<F, Fut, T>(&self, resource: &str, ttl: Duration, f: F) -> Result<T, Error>
    where
        F: FnOnce(LostSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.lock_with(resource, ttl).auto_extend(true).acquire().await?;
        let out = f(guard.lost()).await;
        // The work is done; how the release went does not change its result.
        let _ = guard.release().await;
        Ok(out)
    }
}

/// Options of one acquisition; built by [`Client::lock_with`], run by `.await` or
/// [`acquire`](Self::acquire).
#[must_use = "a LockBuilder does nothing until awaited"]
#[derive(Debug)]
pub struct LockBuilder {
    tx: Sender<Command>,
    resources: Vec<String>,
    ttl: Duration,
    fencing: bool,
    attempts: Option<u32>,
    wait: Option<Duration>,
    max_hold: Option<Duration>,
    auto_extend: bool,
}

impl LockBuilder {
    /// Also lock these resources, all together (all-or-nothing on each node).
    pub fn resources(mut self, extra: &[&str]) -> Self {
        self.resources.extend(extra.iter().map(|r| (*r).to_owned()));
        self
    }

    /// Ask for a fencing token ([`Guard::fence`]); costs one extra round trip.
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// Attempts in all, the first included (0 counts as 1). Default: the config's
    /// `retry.attempts`, or unlimited within [`wait`](Self::wait) when a wait bound is given.
    pub fn attempts(mut self, n: u32) -> Self {
        self.attempts = Some(n);
        self
    }

    /// Keep retrying (with the config's random delays) until this much time has passed since
    /// the call; then fail with [`Error::WaitTimeout`], which carries the last attempt's outcome.
    /// If [`attempts`](Self::attempts) also bounds it and runs out first, the error is the
    /// plain [`Error::Acquire`].
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Never extend the lock (manually or automatically) past this long after it was acquired.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// Extend the lock automatically about every TTL/3 while the guard lives; a failure
    /// fires [`Guard::lost`].
    pub fn auto_extend(mut self, on: bool) -> Self {
        self.auto_extend = on;
        self
    }

    /// Acquire the lock.
    pub async fn acquire(self) -> Result<Guard, Error> {
        let token = new_token()?;
        let (reply, rx) = async_channel::bounded(1);
        let request = Request {
            resources: self.resources,
            token,
            ttl: self.ttl,
            fencing: self.fencing,
            attempts: self.attempts,
            wait: self.wait,
            max_hold: self.max_hold,
            auto_extend: self.auto_extend,
        };
        self.tx.try_send(Command::Acquire { request, reply }).map_err(|_| Error::Closed)?;
        // If this future is dropped before the answer, the driver cancels the acquisition.
        let mut waiting = Waiting { rx, tx: &self.tx, done: false };
        let out = waiting.rx.recv().await.map_err(|_| Error::Closed);
        waiting.done = true;
        out?
    }
}

impl IntoFuture for LockBuilder {
    type Output = Result<Guard, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.acquire())
    }
}

/// The caller's side of an acquisition in flight. Dropped before the answer (the caller
/// gave up), it closes the reply channel and asks the driver to cancel what nobody awaits.
struct Waiting<'a> {
    rx: Receiver<Result<Guard, Error>>,
    tx: &'a Sender<Command>,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Close first, so that the driver sees this reply channel closed when it sweeps.
            self.rx.close();
            let _ = self.tx.try_send(Command::Sweep);
        }
    }
}

/// 20 bytes from the OS random source, hex-encoded.
fn new_token() -> Result<String, Error> {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).map_err(|e| Error::Random(e.to_string()))?;
    Ok(redlease_core::token_hex(&bytes))
}

/// A jitter seed from the OS random source.
pub(crate) fn random_seed() -> Result<u64, Error> {
    getrandom::u64().map_err(|e| Error::Random(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::task::{Context, Poll};
    use std::time::Instant;

    use futures_lite::future::block_on;
    use redlease_core::ConfigError;

    use super::*;

    #[test]
    fn tokens_are_40_distinct_hex_chars() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{a}");
        assert_ne!(a, b);
    }

    /// A runtime the tests never reach: a config is checked before anything connects.
    struct Unreached;

    struct NoSocket;

    impl crate::Socket for NoSocket {
        fn poll_read(&mut self, _: &mut Context<'_>, _: &mut [u8]) -> Poll<io::Result<usize>> {
            unreachable!("no socket is opened for a bad config")
        }

        fn poll_write(&mut self, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
            unreachable!("no socket is opened for a bad config")
        }
    }

    struct NoTimer;

    impl crate::Timer for NoTimer {
        fn reset(&mut self, _: Instant) {}

        fn poll_fire(&mut self, _: &mut Context<'_>) -> Poll<()> {
            Poll::Pending
        }
    }

    impl Runtime for Unreached {
        type Socket = NoSocket;
        type Timer = NoTimer;

        fn connect(host: &str, port: u16) -> crate::BoxFuture<io::Result<NoSocket>> {
            panic!("connect to {host}:{port} for a bad config")
        }

        fn timer(_: Instant) -> NoTimer {
            NoTimer
        }

        fn spawn(_: Driver<Self>) -> io::Result<()> {
            panic!("a driver started for a bad config")
        }
    }

    fn setup_error(config: Config) -> Error {
        block_on(Client::<Unreached>::with_config(config)).expect_err("a bad config is refused")
    }

    #[test]
    fn a_bad_config_fails_as_a_config_error_naming_the_field_before_connecting() {
        let mut config = Config::from_urls(["redis://127.0.0.1:7000"]).unwrap();
        config.connect_timeout = Duration::ZERO;
        let err = setup_error(config.clone());
        assert!(matches!(err, Error::Config(ConfigError::ZeroConnectTimeout)), "{err}");
        assert!(err.to_string().contains("connect_timeout"), "{err}");
        config.connect_timeout = Duration::from_secs(1);
        config.reconnect_min = Duration::from_secs(5);
        let err = setup_error(config.clone());
        assert!(err.to_string().contains("reconnect_min") && err.to_string().contains("swap"), "{err}");
        config.reconnect_min = Duration::ZERO;
        assert!(matches!(setup_error(config), Error::Config(ConfigError::ZeroReconnectMin)));
        let err = block_on(Client::<Unreached>::connect(["http://127.0.0.1:7000"])).unwrap_err();
        assert!(matches!(err, Error::Config(_)) && err.to_string().contains("redis://"), "{err}");
        let err = block_on(Client::<Unreached>::with_driver(Config::new(Vec::new()))).unwrap_err();
        assert!(matches!(err, Error::Config(_)) && err.to_string().contains("no nodes"), "{err}");
    }
}
