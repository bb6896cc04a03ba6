//! The blocking client: a [`Driver`] on its own `mio::Poll`, shared by any number of threads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token, Waker};
use redlease_client::adapter::{Pump, oneshot, spans};
use redlease_client::{Error, Lease, new_token};
use redlease_core::{Config, Health, LockOptions};

use crate::driver::Driver;
use crate::guard::Guard;
use crate::shared::{Poller, Shared, State, Then};

/// Token of the driver's first socket in the client's own poll.
const NODES: Token = Token(0);
/// Token of the waker that interrupts a thread blocked in `poll`.
const WAKE: Token = Token(usize::MAX);

/// A blocking Redlock client on its own `mio::Poll`.
///
/// `Client` is `Clone + Send + Sync`: clones share one connection per node, so any number
/// of threads can lock through one client. A thread that waits for an outcome drives the
/// event loop itself while it waits (one thread polls at a time; the others sleep until an
/// outcome or the poll is theirs).
///
/// Each separate `Client` has its own connections (one per node); sharing one is cheaper.
///
/// Its API is the async clients' (`redlease::tokio::Client`, `redlease::smol::Client`),
/// blocking: the same methods, options, outcomes and errors. What a call promises is written
/// once, on the types every client shares: how long an acquisition waits ([`LockOptions`]),
/// what a held lock promises ([`Lease`](crate::Lease)), how an extension or a release ended
/// ([`ExtendError`](crate::ExtendError), [`ReleaseOutcome`](crate::ReleaseOutcome)) and why
/// a call failed ([`Error`]); each method below says what blocking adds.
///
/// # Auto-extension
///
/// A lock taken with [`LockOptions::auto_extend`] (or switched on with
/// [`Guard::set_auto_extend`], and every lock of [`Client::with_lock`]) is extended about every
/// `ttl / 3` by a thread the client starts for it: it drives the loop while any such lock is
/// held and ends when the last one is released or dropped. The caller's thread may be busy,
/// blocked or asleep meanwhile.
///
/// Without auto-extension nobody drives the loop between calls, and that is fine: a lock
/// whose deadline passes is lost by the clock ([`Lease::is_lost`](crate::Lease::is_lost) is
/// true, reason `Expired`) whether or not the loop ran. [`Client::run_for`] /
/// [`Client::run_until`] drive it from your own loop, and [`Client::spawn_keepalive`] on a
/// thread of its own (for the releases of dropped guards and lost signals without calls).
///
/// # Example
///
/// ```no_run
/// # mod redlease { pub use redlease_mio as mio; }
/// use std::time::Duration;
/// use redlease::mio::Client;
///
/// let client = Client::connect(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"])?;
/// let guard = client.lock("orders:42", Duration::from_secs(10))?;
/// println!("held until {:?} with token {}", guard.valid_until(), guard.token());
/// let report = guard.release()?;
/// println!("released: {:?}", report.outcome);
/// # Ok::<(), redlease_mio::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("Client").field("driver", &st.driver).field("closed", &st.closed).finish()
    }
}

impl Client {
    /// Connect to the nodes at these URLs ([`Config::from_urls`]), with defaults for
    /// everything else.
    ///
    /// Blocks until a quorum of nodes is ready (the others join as they come:
    /// [`Config::require_all`]). Fails on a bad URL, when the OS refuses a poller, and with
    /// [`Error::Unhealthy`] when no quorum is ready once every node's first attempt has ended.
    pub fn connect<I, S>(urls: I) -> Result<Client, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Client::with_config(Config::from_urls(urls)?)
    }

    /// Like [`connect`](Self::connect), with explicit settings ([`Config`]: checked first,
    /// seeded from the OS unless it has a seed, as in [`Driver::new`]).
    pub fn with_config(config: Config) -> Result<Client, Error> {
        let mut driver = Driver::new(config, NODES)?;
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKE)?;
        driver.register(poll.registry(), Instant::now())?;
        let poller = Poller { poll, events: Events::with_capacity(64) };
        let shared = Arc::new(Shared::new(State::new(poller, driver), waker));
        let st = shared.lock();
        shared.wait_for(st, |st| st.driver.ready().then_some(()))?;
        shared.lock().driver.connected()?;
        Ok(Client { shared })
    }

    /// Acquire `resource` for `ttl` with the defaults of [`LockOptions::new`]: blocks while
    /// someone else holds it, within the config's [`Retry`](crate::Retry) (by default up to
    /// 10 s); [`lock_with`](Self::lock_with) sets the wait per call.
    pub fn lock(&self, resource: &str, ttl: Duration) -> Result<Guard, Error> {
        self.lock_with(LockOptions::new(resource, ttl))
    }

    /// Acquire `resource` for `ttl` in a single attempt ([`LockOptions::try_once`]).
    pub fn try_lock(&self, resource: &str, ttl: Duration) -> Result<Guard, Error> {
        self.lock_with(LockOptions::new(resource, ttl).attempts(1))
    }

    /// Acquire with options ([`LockOptions`]: more resources, fencing, a semaphore or a read
    /// lock, automatic extension, and how long to wait). Blocks until the lock is held or the
    /// acquisition has failed.
    ///
    /// Its span, `redlease.acquire`, is a child of the caller's span, entered while it waits.
    pub fn lock_with(&self, options: LockOptions) -> Result<Guard, Error> {
        self.lock_as(options, new_token()?)
    }

    /// Acquire with `token` (a campaign's, which carries its value).
    pub(crate) fn lock_as(&self, options: LockOptions, token: String) -> Result<Guard, Error> {
        let span = spans::acquire(&self.shared.name, &options);
        let _entered = span.enter();
        let (reply, rx) = oneshot::channel();
        let shared = &self.shared;
        let auto = options.auto_extend;
        let mut st = shared.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        let lock = shared.command(&mut st, Then::Wait, |router, engine, now| {
            router.acquire(engine, now, options, token, reply, span.clone())
        });
        let lease = shared.wait_reply(st, lock, &rx)??;
        let pump: Arc<dyn Pump> = Arc::clone(shared) as Arc<dyn Pump>;
        let guard = Guard::new(lease.with_pump(pump), Arc::clone(shared));
        if auto {
            // Without its thread the lock would not be extended: release it and say why.
            guard.count_auto()?;
        }
        Ok(guard)
    }

    /// Run `f` on this thread while holding a lock: acquire with `options` as
    /// [`lock_with`](Self::lock_with) does, with automatic extension turned on (the client's
    /// extension thread keeps it extended while `f` runs), release afterwards, and return what
    /// `f` returned; a failure to acquire is reported, the release's outcome is not.
    ///
    /// `f` gets the [`Lease`]: check `lease.is_lost()` before acting on the protected
    /// resource.
    ///
    /// All of it runs in a `redlease.with_lock` span, a child of the caller's span: the
    /// acquisition, `f`'s work and the release are its children.
    pub fn with_lock<F, T>(&self, options: LockOptions, f: F) -> Result<T, Error>
    where
        F: FnOnce(Lease) -> T,
    {
        let span = spans::with_lock(&self.shared.name, &options);
        let _entered = span.enter();
        // Auto-extended: the client's extension thread drives the loop while `f` runs.
        let guard = self.lock_with(options.auto_extend(true))?;
        let out = f(guard.lease().clone());
        // The work is done; whatever the release says changes nothing for the caller.
        let _ = guard.release();
        Ok(out)
    }

    /// Close the client, for every clone: new calls fail with [`Error::Closed`], the
    /// acquisitions in flight are cancelled, every lock still held is released and lost ([`LostReason::Stopped`](crate::LostReason::Stopped)).
    /// Returns once those releases are done (each bounded by the node timeout) and the
    /// connections closed.
    pub fn close(&self) {
        let mut st = self.shared.lock();
        if st.closed {
            return;
        }
        let now = self.shared.command(&mut st, Then::Wait, |router, engine, now| {
            router.close(engine, now);
            now
        });
        let deadline = now + Shared::release_bound(&st);
        let st = self.wait_idle(st, deadline);
        Self::shut(st);
        // Whoever still waits or polls (a keep-alive, `run_until`) sees the client closed.
        self.shared.wake_all();
    }

    /// Drive the loop until the engine has no active lock or `deadline` passes.
    fn wait_idle<'a>(&'a self, st: MutexGuard<'a, State>, deadline: Instant) -> MutexGuard<'a, State> {
        let idle = |st: &mut State| (st.driver.engine().active_locks() == 0).then_some(());
        // Only fails if the poll broke, and then there is nothing left to wait for.
        let _ = self.shared.wait_until(st, deadline, idle);
        self.shared.lock()
    }

    fn shut(mut st: MutexGuard<'_, State>) {
        st.closed = true;
        st.router.stop();
        st.driver.deregister(Instant::now());
    }

    /// Drive the event loop on this thread until `deadline` (or let another thread that is
    /// driving it do so): reads replies, runs timers, performs auto-extensions, delivers
    /// lost-lock signals. Use it to keep locks extended without threads.
    pub fn run_until(&self, deadline: Instant) -> Result<(), Error> {
        let st = self.shared.lock();
        self.shared.wait_until(st, deadline, |_| None::<()>)?;
        Ok(())
    }

    /// [`run_until`](Self::run_until) `now + duration`. `Duration::ZERO` processes whatever
    /// is ready without blocking.
    pub fn run_for(&self, duration: Duration) -> Result<(), Error> {
        self.run_until(Instant::now() + duration)
    }

    /// Start a helper thread that drives the event loop (auto-extensions, lost signals,
    /// releases of dropped guards) until the returned handle is dropped.
    pub fn spawn_keepalive(&self) -> Result<KeepAlive, Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::clone(&self.shared);
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("redlease-mio-keepalive".into()).spawn(move || {
            let st = shared.lock();
            // Ends when stopped, or when the client closes (then every caller sees `Closed`).
            let _ = shared.wait_for(st, |_| flag.load(Ordering::Acquire).then_some(()));
        })?;
        Ok(KeepAlive { shared: Arc::clone(&self.shared), stop, thread: Some(thread) })
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.shared.lock().driver.node_count()
    }

    /// The nodes' health now ([`Health`]: each node's state and last error, and how many more
    /// nodes may fail before locking stops).
    pub fn health(&self) -> Health {
        self.shared.lock().driver.health()
    }
}

/// A helper thread driving a [`Client`]'s event loop; made by [`Client::spawn_keepalive`].
/// Dropping it stops and joins the thread.
#[must_use = "dropping the KeepAlive stops the helper thread at once"]
pub struct KeepAlive {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for KeepAlive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeepAlive").field("running", &self.thread.is_some()).finish()
    }
}

impl KeepAlive {
    /// Stop the helper thread and wait for it to end (the same as dropping the handle).
    pub fn stop(self) {}
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.shared.wake_all();
        if let Some(t) = self.thread.take() {
            // The thread only waits and polls; it has nothing to report.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use redlease_core::ConfigError;

    use super::*;
    use crate::Driver;

    #[test]
    fn a_bad_config_or_base_token_fails_naming_the_field_before_any_socket() {
        let c = Config::from_urls(["redis://127.0.0.1:7000"]).unwrap();
        assert!(Driver::new(c.clone(), Token(0)).is_ok());
        let err = Driver::new(c.clone().reconnect(Duration::from_secs(5), Duration::from_secs(2)), Token(0));
        let err = err.unwrap_err().to_string();
        assert!(err.contains("reconnect_min") && err.contains("swap"), "{err}");
        let err = Driver::new(c.clone().reconnect(Duration::ZERO, Duration::from_secs(2)), Token(0));
        assert!(matches!(err, Err(Error::Config(ConfigError::ZeroReconnectMin))));
        let err = Client::with_config(c.clone().connect_timeout(Duration::ZERO)).unwrap_err();
        assert!(matches!(err, Error::Config(ConfigError::ZeroConnectTimeout)), "{err}");
        assert!(err.to_string().contains("connect_timeout"), "{err}");
        let err = Client::connect(["http://x"]).unwrap_err();
        assert!(matches!(err, Error::Config(_)) && err.to_string().contains("redis://"), "{err}");
        let err = Driver::new(Config::new(Vec::new()), Token(0)).unwrap_err().to_string();
        assert!(err.contains("no nodes"), "{err}");
        let err = Driver::new(c, Token(usize::MAX)).unwrap_err();
        assert!(matches!(err, Error::Setting { field: "base token", .. }), "{err}");
    }
}
