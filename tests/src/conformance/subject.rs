//! The adapter-facing side of the suite: what each adapter's thin wrapper implements.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use redlease_client::Error;
use redlease_core::{
    AcquireError, Config, ConfigError, ExtendError, Health, LockOptions, Misuse, ReleaseReport, Retry,
};

/// A boxed, `Send` future: the currency of [`Subject`], so the trait works for tokio, smol,
/// async-std and a blocking client wrapped in threads alike.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The work run by [`Subject::with_lock`]: it gets the lost-lock signal.
pub type Work<L, T> = Box<dyn FnOnce(L) -> BoxFuture<'static, T> + Send>;

/// Client settings the suite asks for; the wrapper maps them onto its adapter's config.
#[derive(Clone, Debug)]
pub struct Options {
    /// Per-node timeout of every round (core `Config::node_timeout`).
    pub node_timeout: Duration,
    /// Retry schedule of `lock` (core `Config::retry`).
    pub retry: Retry,
    /// Per TCP connect attempt.
    pub connect_timeout: Duration,
    /// Reconnect backoff start.
    pub reconnect_min: Duration,
    /// Reconnect backoff cap.
    pub reconnect_max: Duration,
    /// Connect fails unless every node is ready (core `Config::require_all`).
    pub require_all: bool,
}

impl Default for Options {
    /// Test-friendly values: 250 ms node timeout (far below any TCP timeout, yet generous
    /// enough that a loaded 2-core test machine never misses it on loopback), 3 attempts
    /// 5–50 ms apart, fast reconnects.
    fn default() -> Self {
        Options {
            node_timeout: Duration::from_millis(250),
            retry: Retry::new(3, Duration::from_millis(5), Duration::from_millis(50)),
            connect_timeout: Duration::from_millis(500),
            reconnect_min: Duration::from_millis(10),
            reconnect_max: Duration::from_millis(200),
            require_all: false,
        }
    }
}

impl Options {
    /// The core `Config` for these node URLs with these settings (every adapter takes it).
    pub fn config(&self, urls: &[String]) -> Result<Config, Failure> {
        let mut config = Config::from_urls(urls).map_err(failure)?;
        // TLS nodes of the harness: trust the CA that signed their certificates.
        for node in &mut config.nodes {
            if node.transport == redlease_core::Transport::Tls {
                if let Some(files) = redlease_servers::tls_files_for(node.port) {
                    node.tls = Some(redlease_core::TlsSettings::new().ca_file(&files.ca));
                }
            }
        }
        Ok(config
            .node_timeout(self.node_timeout)
            .retry(self.retry)
            .connect_timeout(self.connect_timeout)
            .reconnect(self.reconnect_min, self.reconnect_max)
            .require_all(self.require_all))
    }
}

/// One lock request: maps onto the adapters' `lock_with(LockOptions)`.
#[derive(Clone, Debug)]
pub struct LockSpec {
    /// The resource (key) to lock.
    pub resource: String,
    /// Time to live of the keys.
    pub ttl: Duration,
    /// Ask for a fencing token (`.fencing(true)`).
    pub fencing: bool,
    /// Attempts in all (`.attempts(n)`); `None`: the client's retry config (or unlimited within
    /// `wait`).
    pub attempts: Option<u32>,
    /// Overall wait bound (`.wait(d)`): retry until it passes, then fail with `WaitTimeout`.
    pub wait: Option<Duration>,
    /// More resources locked together with `resource` (`.resources(..)`).
    pub also: Vec<String>,
    /// A semaphore: `(limit, permits)` (`.semaphore(limit).permits(permits)`).
    pub semaphore: Option<(u32, u32)>,
    /// A read lock (`.shared(true)`).
    pub shared: bool,
    /// A re-entrant lock of this owner (`.reentrant(owner)`).
    pub owner: Option<String>,
}

impl LockSpec {
    /// `lock(resource, ttl)`: the client's retry schedule.
    pub fn new(resource: &str, ttl: Duration) -> LockSpec {
        LockSpec {
            resource: resource.to_owned(),
            ttl,
            fencing: false,
            attempts: None,
            wait: None,
            also: Vec::new(),
            semaphore: None,
            shared: false,
            owner: None,
        }
    }

    /// `try_lock`: exactly one attempt.
    pub fn once(mut self) -> LockSpec {
        self.attempts = Some(1);
        self
    }

    /// Retry until `wait` has passed.
    pub fn wait(mut self, wait: Duration) -> LockSpec {
        self.wait = Some(wait);
        self
    }

    /// Also lock `resource`, all together.
    pub fn and(mut self, resource: &str) -> LockSpec {
        self.also.push(resource.to_owned());
        self
    }

    /// Ask for a fencing token.
    pub fn fencing(mut self) -> LockSpec {
        self.fencing = true;
        self
    }

    /// A read lock.
    pub fn shared(mut self) -> LockSpec {
        self.shared = true;
        self
    }

    /// A re-entrant lock of `owner`.
    pub fn reentrant(mut self, owner: &str) -> LockSpec {
        self.owner = Some(owner.to_owned());
        self
    }

    /// Take `permits` of the semaphore of `limit` named by the resource.
    pub fn semaphore(mut self, limit: u32, permits: u32) -> LockSpec {
        self.semaphore = Some((limit, permits));
        self
    }

    /// The [`LockOptions`] every adapter's `lock_with` takes.
    pub fn options(&self) -> LockOptions {
        let mut options =
            LockOptions::new(self.resource.as_str(), self.ttl).resources(&self.also).fencing(self.fencing);
        if let Some(n) = self.attempts {
            options = options.attempts(n);
        }
        if let Some(wait) = self.wait {
            options = options.wait(wait);
        }
        if let Some((limit, permits)) = self.semaphore {
            options = options.semaphore(limit).permits(permits);
        }
        if let Some(owner) = &self.owner {
            options = options.reentrant(owner.as_str());
        }
        options.shared(self.shared)
    }
}

/// Map a client error (the same type in every adapter) onto the suite's shape.
pub fn failure(e: impl Into<Error>) -> Failure {
    let e = e.into();
    let message = e.to_string();
    let kind = match e {
        Error::Config(c) => FailureKind::Config(c),
        Error::Misuse(m) => FailureKind::Misuse(m),
        Error::Acquire(AcquireError::WaitTimeout { waited, last, .. }) => {
            FailureKind::WaitTimeout { waited, last: Some(*last) }
        }
        Error::Acquire(a) => FailureKind::Acquire(a),
        Error::Extend(x) => FailureKind::Extend(x),
        Error::Closed => FailureKind::Closed,
        Error::Unhealthy(health) => FailureKind::Unhealthy(health),
        other => FailureKind::Other(format!("{other:?}")),
    };
    Failure::new(kind, message)
}

/// What went wrong, in the adapter-independent shape of the API's `Error` enum.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FailureKind {
    /// `Error::Config`: bad URL, no nodes, ...
    Config(ConfigError),
    /// `Error::Misuse`: zero TTL, empty resource, ...
    Misuse(Misuse),
    /// `Error::Acquire`: held, unreachable, too slow, cancelled.
    Acquire(AcquireError),
    /// `Error::Extend`: lost, unconfirmed, expired.
    Extend(ExtendError),
    /// `Error::Acquire(AcquireError::WaitTimeout)`: the `.wait(d)` bound passed.
    WaitTimeout {
        /// How long it waited.
        waited: Duration,
        /// The last attempt's error.
        last: Option<AcquireError>,
    },
    /// `Error::Closed`: the driver is gone.
    Closed,
    /// `Error::Unhealthy`: too few nodes were ready when connecting (no quorum, or not all
    /// with `require_all`).
    Unhealthy(Box<Health>),
    /// Anything else the adapter reports (its `Debug`).
    Other(String),
}

/// An adapter error: its kind plus the adapter's own `Display` text (what a user would read).
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// The variant.
    pub kind: FailureKind,
    /// `error.to_string()` of the adapter's error.
    pub message: String,
}

impl Failure {
    /// Build from a kind and the adapter error's text.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure { kind, message: message.into() }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?})", self.message, self.kind)
    }
}

impl std::error::Error for Failure {}

/// One adapter under test, seen through a thin wrapper in its test file.
///
/// Every case of the suite is written once, generic over `S: Subject`. The wrapper maps each
/// method onto the adapter's API (see `ADAPTER_API.md`) and provides the executor hooks.
/// All futures are boxed and `Send`; the ones taking `&Client` must not borrow it (clone it
/// into the future), so they are `'static` and can be spawned.
///
/// A blocking adapter implements the futures as blocking calls inside `Box::pin(async move {
/// ... })`, makes [`spawn`](Self::spawn) run each future on its own thread, and
/// [`sleep`](Self::sleep) a plain `thread::sleep`; the cases never run two of their own
/// futures concurrently on one task except through `spawn`.
pub trait Subject: 'static {
    /// The adapter's name, for messages.
    const NAME: &'static str;
    /// The cloneable client handle.
    type Client: Clone + Send + Sync + 'static;
    /// A held lock.
    type Guard: Send + 'static;
    /// The lost-lock signal.
    type Lost: Clone + Send + Sync + 'static;

    /// Run a case's top-level future to completion. The adapter's driver must keep running
    /// while this thread briefly blocks in harness calls (restart, pause).
    fn block_on<T>(fut: impl Future<Output = T>) -> T;
    /// Run `fut` concurrently; the returned future yields its output (and re-raises its panic).
    fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> BoxFuture<'static, T>;
    /// Sleep on the runtime's timer.
    fn sleep(d: Duration) -> BoxFuture<'static, ()>;

    /// `Client::with_config` for these URLs and options.
    fn connect(urls: Vec<String>, options: Options) -> BoxFuture<'static, Result<Self::Client, Failure>>;
    /// `client.lock_with(spec.options())`, awaited.
    fn lock(client: &Self::Client, spec: LockSpec) -> BoxFuture<'static, Result<Self::Guard, Failure>>;
    /// `client.with_lock(LockOptions::new(resource, ttl), ..)`: acquire, auto-extend, run
    /// `work` with the lease's lost signal, release.
    fn with_lock<T: Send + 'static>(
        client: &Self::Client,
        resource: &str,
        ttl: Duration,
        work: Work<Self::Lost, T>,
    ) -> BoxFuture<'static, Result<T, Failure>>;

    /// `client.health()`: the health view as the client sees it now.
    fn health(client: &Self::Client) -> BoxFuture<'static, Result<Health, Failure>>;

    /// `client.close()`: release what is held, stop the client for every clone.
    fn close(client: &Self::Client) -> BoxFuture<'static, ()>;

    /// `guard.token()`.
    fn token(guard: &Self::Guard) -> String;
    /// `guard.valid_until()`.
    fn valid_until(guard: &Self::Guard) -> Instant;
    /// `guard.fence()`.
    fn fence(guard: &Self::Guard) -> Option<u64>;
    /// `guard.permits()`: the semaphore's permits held.
    fn permits(guard: &Self::Guard) -> Vec<u16>;
    /// `guard.lost()`.
    fn lost(guard: &Self::Guard) -> Self::Lost;
    /// `guard.set_auto_extend(on)`.
    fn set_auto_extend(guard: &Self::Guard, on: bool);
    /// `guard.extend(ttl)`: the new validity deadline.
    fn extend(guard: &mut Self::Guard, ttl: Duration) -> BoxFuture<'_, Result<Instant, Failure>>;
    /// `guard.downgrade()`: the read lock's deadline.
    fn downgrade(guard: &mut Self::Guard) -> BoxFuture<'_, Result<Instant, Failure>>;
    /// `guard.release()`.
    fn release(guard: Self::Guard) -> BoxFuture<'static, Result<ReleaseReport, Failure>>;

    /// `lost.is_lost()`.
    fn is_lost(lost: &Self::Lost) -> bool;
    /// Wait up to `timeout` for the signal; whether it fired.
    fn wait_lost(lost: &Self::Lost, timeout: Duration) -> BoxFuture<'static, bool>;
}
