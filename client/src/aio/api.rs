//! The public face of an async adapter, written once: [`async_api!`](crate::async_api) defines
//! the adapter's own `Client`, `Guard` and `Driver`, so that each adapter crate documents
//! every method on its own pages, with examples in its own paths.

/// Define an async adapter's `Client`, `Guard` and `Driver` over the runtime `$runtime`; the
/// doc tests import from `$krate` (the adapter crate's name, e.g. `"redlease_tokio"`), which
/// must re-export [`crate::api`]. For adapter authors only.
#[doc(hidden)]
#[macro_export]
macro_rules! async_api {
    ($runtime:ty, $krate:literal) => {
        /// A Redlock client for one set of nodes.
        ///
        /// Cheap to clone: every clone talks to the same driver, so many tasks can have locks
        /// in flight at once over one connection per node. Call [`close`](Client::close)
        /// before the program ends: it releases what is still held and waits for the nodes'
        /// answers. A program that returns from `main` without it still sends the releases of
        /// what it holds, without waiting for the answers.
        ///
        /// ```no_run
        #[doc = concat!("# use ", $krate, "::{Client, Error};")]
        /// use std::time::Duration;
        /// # async fn example() -> Result<(), Error> {
        /// let nodes = ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"];
        /// let client = Client::connect(nodes).await?;
        /// let guard = client.lock("orders:42", Duration::from_secs(10)).await?;
        /// println!("held until {:?} with token {}", guard.valid_until(), guard.token());
        /// guard.release().await?;
        /// client.close().await;
        /// # Ok(()) }
        /// ```
        #[derive(Clone)]
        pub struct Client($crate::adapter::aio::Client<$runtime>);

        impl Client {
            /// Connect to the nodes at these URLs (`redis://[user[:pass]@]host:port[/db]`,
            /// `rediss://…` for TLS, `redis+unix:///path[?db=N]`), with defaults for
            /// everything else, and start the driver in the background.
            ///
            /// Returns as soon as a quorum of nodes is connected: nodes beyond the quorum that
            /// are down or silent keep connecting in the background with backoff and count as
            /// failed votes meanwhile. Fails with [`Error::Unhealthy`] (the health view: each
            /// node's state and last error) when no quorum is ready once every node's first
            /// attempt has ended — refused, a wrong password, or the connect timeout.
            pub async fn connect<I, S>(urls: I) -> Result<Self, Error>
            where
                I: IntoIterator<Item = S>,
                S: AsRef<str>,
            {
                $crate::adapter::aio::Client::connect(urls).await.map(Client)
            }

            /// Like [`connect`](Self::connect), with explicit settings ([`Config`]: nodes,
            /// timeouts, retries, TLS, reconnect backoff).
            ///
            /// The config is checked first (a bad one fails as [`Error::Config`], naming the
            /// field). Without a seed, it gets one from the OS random source, so that separate
            /// clients do not retry in step.
            ///
            /// ```no_run
            #[doc = concat!("# use ", $krate, "::{Client, Config, Error};")]
            /// use std::time::Duration;
            /// # async fn example() -> Result<(), Error> {
            /// let config = Config::from_urls(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])?
            ///     .node_timeout(Duration::from_millis(100));
            /// let client = Client::with_config(config).await?;
            /// # Ok(()) }
            /// ```
            pub async fn with_config(config: Config) -> Result<Self, Error> {
                $crate::adapter::aio::Client::with_config(config).await.map(Client)
            }

            /// Like [`with_config`](Self::with_config), but hand the driver to the caller
            /// instead of starting it: the client does nothing until the [`Driver`] future is
            /// polled (spawn it on your executor).
            pub async fn with_driver(config: Config) -> Result<(Self, Driver), Error> {
                let (client, driver) = $crate::adapter::aio::Client::with_driver(config).await?;
                Ok((Client(client), Driver(driver)))
            }

            /// Acquire `resource` for `ttl`, waiting while someone else holds it, like a
            /// mutex — but bounded: by default it keeps trying for up to 10 s (woken at once
            /// by the holder's release), then fails with
            /// [`AcquireError::WaitTimeout`]. The bound and the delays are the config's
            /// [`Retry`] ([`Config::retry`]); [`lock_with`](Self::lock_with) sets them per
            /// call ([`LockOptions::wait_forever`] waits without a bound). A misconfiguration
            /// (a wrong password on a majority) fails at once.
            pub async fn lock(&self, resource: &str, ttl: std::time::Duration) -> Result<Guard, Error> {
                self.0.lock(resource, ttl).await.map(Guard)
            }

            /// Acquire `resource` for `ttl` with a single attempt: held by someone else, it
            /// fails at once with [`AcquireError::Held`].
            pub async fn try_lock(&self, resource: &str, ttl: std::time::Duration) -> Result<Guard, Error> {
                self.0.try_lock(resource, ttl).await.map(Guard)
            }

            /// Acquire with options: more resources, fencing, attempts, a wait bound, a hold
            /// cap, automatic extension ([`LockOptions`]). It waits for the lock within the
            /// config's [`Retry`] (by default 10 s) unless the options bound it:
            /// [`LockOptions::wait_forever`] never gives up, [`LockOptions::try_once`] makes
            /// one attempt.
            ///
            /// If this future is dropped before it finishes, the acquisition is cancelled, and
            /// a lock it got meanwhile is released.
            ///
            /// ```no_run
            #[doc = concat!("# use ", $krate, "::{Client, Error, LockOptions};")]
            /// use std::time::Duration;
            /// # async fn example(client: Client) -> Result<(), Error> {
            /// let options = LockOptions::new("orders:42", Duration::from_secs(5))
            ///     .fencing(true)
            ///     .wait(Duration::from_secs(2));
            /// let guard = client.lock_with(options).await?;
            /// println!("fencing token {:?}", guard.fence());
            /// # Ok(()) }
            /// ```
            pub async fn lock_with(&self, options: LockOptions) -> Result<Guard, Error> {
                self.0.lock_with(options).await.map(Guard)
            }

            /// Run `f` while holding a lock: acquire with `options` (automatic extension
            /// turned on), run `f`, release afterwards, and return what `f` returned.
            ///
            /// `f` gets the [`Lease`]: its fencing token for the store it writes to, its
            /// deadline, and the lost signal, which fires if an extension is refused or the
            /// validity runs out (select on `lease.lost().wait()` to stop work that is no
            /// longer protected). The release's own outcome is not reported. It waits for the
            /// lock as [`lock_with`](Self::lock_with) does: `options.try_once()` is the form
            /// that runs `f` only if the lock is free now, `options.wait_forever()` the one
            /// that waits as long as it takes.
            ///
            /// ```no_run
            #[doc = concat!("# use ", $krate, "::{Client, Error, LockOptions};")]
            /// use std::time::Duration;
            /// # async fn example(client: Client) -> Result<(), Error> {
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
                Fut: std::future::Future<Output = T>,
            {
                self.0.with_lock(options, f).await
            }

            /// The nodes' health as the driver sees it now: each node's state, last error,
            /// round trips and failures, and how many more nodes may fail before locking stops
            /// ([`Health::fault_tolerance`]). Its `Display` is a table, one line per node.
            ///
            /// [`Error::Closed`] once the client is closed or its driver has stopped.
            ///
            /// ```no_run
            #[doc = concat!("# use ", $krate, "::{Client, Error};")]
            /// # async fn example(client: Client) -> Result<(), Error> {
            /// let health = client.health().await?;
            /// println!("{health}");
            /// if health.fault_tolerance() == 0 {
            ///     eprintln!("one more node down and locking stops");
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn health(&self) -> Result<Health, Error> {
                self.0.health().await
            }

            /// Close the client, for every clone: refuse new calls ([`Error::Closed`]), cancel
            /// the acquisitions in flight, release every lock still held (its guard's lost
            /// signal fires, [`LostReason::Stopped`]), and return once those releases are done
            /// (each bounded by the node timeout) and the connections closed.
            pub async fn close(&self) {
                self.0.close().await
            }
        }

        impl std::fmt::Debug for Client {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        /// A held lock: its [`Lease`] (`fence`, `valid_until`, `remaining`, `lost`, … through
        /// `Deref`) plus the way to its driver.
        ///
        /// Dropping it releases the lock in the background; [`release`](Guard::release) does
        /// the same and reports what the nodes said. The lock is only safe to rely on until
        /// [`valid_until`](Lease::valid_until) (the monotonic clock) and while
        /// [`lost`](Lease::lost) has not fired.
        ///
        /// ```no_run
        #[doc = concat!("# use ", $krate, "::{Client, Error, ReleaseOutcome};")]
        /// use std::time::Duration;
        /// # async fn example(client: Client) -> Result<(), Error> {
        /// let mut guard = client.lock("orders:42", Duration::from_secs(10)).await?;
        /// let until = guard.extend(Duration::from_secs(10)).await?;
        /// println!("extended until {until:?}");
        /// let report = guard.release().await?;
        /// assert_eq!(report.outcome, ReleaseOutcome::Released);
        /// # Ok(()) }
        /// ```
        pub struct Guard($crate::adapter::aio::Guard);

        impl Guard {
            /// The holder's view of the lock (also reached through `Deref`).
            pub fn lease(&self) -> &Lease {
                self.0.lease()
            }

            /// Extend the lock to `ttl` from now on every node; returns the new deadline.
            ///
            /// Succeeds iff a quorum extended it in time. A failed extension never deletes the
            /// lock: [`ExtendError::Lost`] means it is gone, [`ExtendError::Unconfirmed`] that it
            /// is still valid until the old deadline at best.
            pub async fn extend(&mut self, ttl: std::time::Duration) -> Result<std::time::Instant, Error> {
                self.0.extend(ttl).await
            }

            /// Turn this write lock into a read lock
            /// ([`LockOptions::shared`](redlease_core::LockOptions::shared)), atomically on each
            /// node, for its TTL from now; returns the read lock's deadline. Writers still wait;
            /// other readers may join at once: from the call on, the lock is no longer
            /// exclusive, so stop writing before calling it. A downgrade that no quorum
            /// confirmed loses the lock (its lost signal fires). Refused
            /// ([`Misuse`](redlease_core::Misuse)) for a read lock, a semaphore or several
            /// resources.
            pub async fn downgrade(&mut self) -> Result<std::time::Instant, Error> {
                self.0.downgrade().await
            }

            /// Release the lock on every node and report what they said:
            /// [`Released`](ReleaseOutcome::Released), [`NotHeld`](ReleaseOutcome::NotHeld) (it
            /// had expired or been taken over; nothing of another holder was deleted) or
            /// [`Unreachable`](ReleaseOutcome::Unreachable) (keys left behind expire with their
            /// TTL).
            #[doc(alias = "unlock")]
            pub async fn release(self) -> Result<ReleaseReport, Error> {
                self.0.release().await
            }

            /// Turn automatic extension (about every `ttl / 3`, by the driver) on or off.
            pub fn set_auto_extend(&self, on: bool) {
                self.0.set_auto_extend(on)
            }
        }

        impl std::ops::Deref for Guard {
            type Target = Lease;

            fn deref(&self) -> &Lease {
                self.0.lease()
            }
        }

        impl std::fmt::Debug for Guard {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        /// The future that does all the I/O of one [`Client`] and its clones, for callers who
        /// run it themselves ([`Client::with_driver`]).
        ///
        /// It finishes once every client and guard is dropped and every release they started
        /// is done, or once [`Client::close`] is done. Dropped earlier (with its runtime, when
        /// a program returns from `main` without `close()`), it sends the releases of every
        /// lock still held in one non-blocking pass, and marks those locks lost
        /// ([`LostReason::Stopped`]); a key whose release its socket did not take at once
        /// expires with its TTL.
        #[must_use = "the client does nothing unless the driver runs"]
        pub struct Driver($crate::adapter::aio::Driver<$runtime>);

        impl std::future::Future for Driver {
            type Output = ();

            fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
                std::pin::Pin::new(&mut self.get_mut().0).poll(cx)
            }
        }

        impl std::fmt::Debug for Driver {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}
