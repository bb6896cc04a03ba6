//! The conformance [`Subject`] for the async adapters (`redlease-tokio`, `redlease-smol`), which
//! offer the same API: one wrapper, generic over the adapter ([`Adapter`], implemented for each
//! by [`adapter!`]) and the executor that runs it, serves `conformance_tokio.rs`,
//! `conformance_smol.rs` and `conformance_async_std.rs`.
//!
//! The driver runs on the executor under test, so every executor really drives the sockets.

use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;
use std::panic::{AssertUnwindSafe, resume_unwind};
use std::time::{Duration, Instant};

use futures_lite::FutureExt;
use redlease_client::{Config, ElectionOptions, Error, Health, Leader, Lease, LockOptions, LostSignal, ReleaseReport};
use redlease_tests::conformance::{BoxFuture, Elections, Failure, LockSpec, Options, Sink, Subject, Work, failure};

/// An async adapter's `Client` and `Guard`, as the subject drives them.
pub(crate) trait Adapter: 'static {
    type Client: Clone + Send + Sync + 'static;
    type Guard: Deref<Target = Lease> + Send + Sync + 'static;
    fn lock_with(client: &Self::Client, options: LockOptions) -> BoxFuture<'static, Result<Self::Guard, Error>>;
    fn with_lock<T: Send + 'static>(
        client: &Self::Client,
        options: LockOptions,
        work: Work<LostSignal, T>,
    ) -> BoxFuture<'static, Result<T, Error>>;
    fn health(client: &Self::Client) -> BoxFuture<'static, Result<Health, Error>>;
    fn close(client: &Self::Client) -> BoxFuture<'static, ()>;
    fn set_auto_extend(guard: &Self::Guard, on: bool);
    fn extend(guard: &mut Self::Guard, ttl: Duration) -> BoxFuture<'_, Result<Instant, Error>>;
    fn downgrade(guard: &mut Self::Guard) -> BoxFuture<'_, Result<Instant, Error>>;
    fn release(guard: Self::Guard) -> BoxFuture<'static, Result<ReleaseReport, Error>>;
    type Leadership: Deref<Target = Lease> + Send + Sync + 'static;
    fn campaign(client: &Self::Client, options: ElectionOptions)
    -> BoxFuture<'static, Result<Self::Leadership, Error>>;
    fn epoch(leadership: &Self::Leadership) -> u64;
    fn resign(leadership: Self::Leadership) -> BoxFuture<'static, Result<ReleaseReport, Error>>;
    fn leader(client: &Self::Client, name: &str) -> BoxFuture<'static, Result<Option<Leader>, Error>>;
    fn observe(
        client: &Self::Client,
        name: &str,
        poll: Duration,
        changes: usize,
        sink: Sink,
    ) -> BoxFuture<'static, Result<(), Error>>;
}

/// Implement [`Adapter`] as `$name` for the adapter crate `$krate`.
macro_rules! adapter {
    ($name:ident, $krate:ident) => {
        pub(crate) struct $name;

        impl $crate::async_subject::Adapter for $name {
            type Client = $krate::Client;
            type Guard = $krate::Guard;

            fn lock_with(
                client: &$krate::Client,
                options: $krate::LockOptions,
            ) -> redlease_tests::conformance::BoxFuture<'static, Result<$krate::Guard, $krate::Error>> {
                let client = client.clone();
                Box::pin(async move { client.lock_with(options).await })
            }

            fn with_lock<T: Send + 'static>(
                client: &$krate::Client,
                options: $krate::LockOptions,
                work: redlease_tests::conformance::Work<$krate::LostSignal, T>,
            ) -> redlease_tests::conformance::BoxFuture<'static, Result<T, $krate::Error>> {
                let client = client.clone();
                Box::pin(async move { client.with_lock(options, |lease| work(lease.lost())).await })
            }

            fn health(
                client: &$krate::Client,
            ) -> redlease_tests::conformance::BoxFuture<'static, Result<$krate::Health, $krate::Error>> {
                let client = client.clone();
                Box::pin(async move { client.health().await })
            }

            fn close(client: &$krate::Client) -> redlease_tests::conformance::BoxFuture<'static, ()> {
                let client = client.clone();
                Box::pin(async move { client.close().await })
            }

            fn set_auto_extend(guard: &$krate::Guard, on: bool) {
                guard.set_auto_extend(on);
            }

            fn downgrade(
                guard: &mut $krate::Guard,
            ) -> redlease_tests::conformance::BoxFuture<'_, Result<std::time::Instant, $krate::Error>> {
                Box::pin(guard.downgrade())
            }

            fn extend(
                guard: &mut $krate::Guard,
                ttl: std::time::Duration,
            ) -> redlease_tests::conformance::BoxFuture<'_, Result<std::time::Instant, $krate::Error>> {
                Box::pin(guard.extend(ttl))
            }

            fn release(
                guard: $krate::Guard,
            ) -> redlease_tests::conformance::BoxFuture<'static, Result<$krate::ReleaseReport, $krate::Error>> {
                Box::pin(guard.release())
            }

            type Leadership = $krate::Leadership;

            fn campaign(
                client: &$krate::Client,
                options: $krate::ElectionOptions,
            ) -> redlease_tests::conformance::BoxFuture<'static, Result<$krate::Leadership, $krate::Error>> {
                let client = client.clone();
                Box::pin(async move { client.campaign(options).await })
            }

            fn epoch(leadership: &$krate::Leadership) -> u64 {
                leadership.epoch()
            }

            fn resign(
                leadership: $krate::Leadership,
            ) -> redlease_tests::conformance::BoxFuture<'static, Result<$krate::ReleaseReport, $krate::Error>> {
                Box::pin(leadership.resign())
            }

            fn leader(
                client: &$krate::Client,
                name: &str,
            ) -> redlease_tests::conformance::BoxFuture<'static, Result<Option<$krate::Leader>, $krate::Error>> {
                let (client, name) = (client.clone(), name.to_owned());
                Box::pin(async move { client.leader(&name).await })
            }

            fn observe(
                client: &$krate::Client,
                name: &str,
                poll: std::time::Duration,
                changes: usize,
                sink: redlease_tests::conformance::Sink,
            ) -> redlease_tests::conformance::BoxFuture<'static, Result<(), $krate::Error>> {
                let (client, name) = (client.clone(), name.to_owned());
                Box::pin(async move {
                    let mut observation = client.observe(&name)?.poll_every(poll);
                    for _ in 0..changes {
                        let change = observation.next().await?;
                        sink.lock().unwrap().push(change);
                    }
                    Ok(())
                })
            }
        }
    };
}
pub(crate) use adapter;

/// The executor hooks of one runtime.
pub(crate) trait Executor: 'static {
    /// The runtime's name, for messages.
    const NAME: &'static str;
    /// The adapter run on it.
    type Adapter: Adapter;
    /// Run a future to completion on this thread.
    fn block_on<T>(fut: impl Future<Output = T>) -> T;
    /// Run a future as a task of its own; the handle yields its output.
    fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> BoxFuture<'static, T>;
    /// Sleep on the runtime's timer.
    fn sleep(d: Duration) -> BoxFuture<'static, ()>;
    /// Make a client whose driver runs on this executor.
    fn start(config: Config) -> BoxFuture<'static, Result<Client<Self>, Error>>;
}

type Client<E> = <<E as Executor>::Adapter as Adapter>::Client;
type Guard<E> = <<E as Executor>::Adapter as Adapter>::Guard;

/// An async adapter under the executor `E`.
pub(crate) struct AsyncSubject<E>(PhantomData<E>);

/// Spawn with `spawn`, re-raising the task's panic in whoever awaits the handle.
pub(crate) fn spawn_catching<T, H>(
    fut: impl Future<Output = T> + Send + 'static,
    spawn: impl FnOnce(BoxFuture<'static, std::thread::Result<T>>) -> H,
) -> BoxFuture<'static, T>
where
    T: Send + 'static,
    H: Future<Output = std::thread::Result<T>> + Send + 'static,
{
    let handle = spawn(Box::pin(AssertUnwindSafe(fut).catch_unwind()));
    Box::pin(async move { handle.await.unwrap_or_else(|panic| resume_unwind(panic)) })
}

impl<E: Executor> Subject for AsyncSubject<E> {
    const NAME: &'static str = E::NAME;
    type Client = Client<E>;
    type Guard = Guard<E>;
    type Lost = LostSignal;

    fn block_on<T>(fut: impl Future<Output = T>) -> T {
        E::block_on(fut)
    }

    fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> BoxFuture<'static, T> {
        E::spawn(fut)
    }

    fn sleep(d: Duration) -> BoxFuture<'static, ()> {
        E::sleep(d)
    }

    fn connect(urls: Vec<String>, options: Options) -> BoxFuture<'static, Result<Client<E>, Failure>> {
        Box::pin(async move { E::start(options.config(&urls)?).await.map_err(failure) })
    }

    fn lock(client: &Client<E>, spec: LockSpec) -> BoxFuture<'static, Result<Guard<E>, Failure>> {
        let locked = E::Adapter::lock_with(client, spec.options());
        Box::pin(async move { locked.await.map_err(failure) })
    }

    fn with_lock<T: Send + 'static>(
        client: &Client<E>,
        resource: &str,
        ttl: Duration,
        work: Work<LostSignal, T>,
    ) -> BoxFuture<'static, Result<T, Failure>> {
        let done = E::Adapter::with_lock(client, LockOptions::new(resource, ttl), work);
        Box::pin(async move { done.await.map_err(failure) })
    }

    fn health(client: &Client<E>) -> BoxFuture<'static, Result<Health, Failure>> {
        let health = E::Adapter::health(client);
        Box::pin(async move { health.await.map_err(failure) })
    }

    fn close(client: &Client<E>) -> BoxFuture<'static, ()> {
        E::Adapter::close(client)
    }

    fn token(guard: &Guard<E>) -> String {
        guard.token().to_owned()
    }

    fn valid_until(guard: &Guard<E>) -> Instant {
        guard.valid_until()
    }

    fn fence(guard: &Guard<E>) -> Option<u64> {
        guard.fence()
    }

    fn permits(guard: &Guard<E>) -> Vec<u16> {
        guard.permits().to_vec()
    }

    fn lost(guard: &Guard<E>) -> LostSignal {
        guard.lost()
    }

    fn set_auto_extend(guard: &Guard<E>, on: bool) {
        E::Adapter::set_auto_extend(guard, on);
    }

    fn extend(guard: &mut Guard<E>, ttl: Duration) -> BoxFuture<'_, Result<Instant, Failure>> {
        let extended = E::Adapter::extend(guard, ttl);
        Box::pin(async move { extended.await.map_err(failure) })
    }

    fn downgrade(guard: &mut Guard<E>) -> BoxFuture<'_, Result<Instant, Failure>> {
        let downgraded = E::Adapter::downgrade(guard);
        Box::pin(async move { downgraded.await.map_err(failure) })
    }

    fn release(guard: Guard<E>) -> BoxFuture<'static, Result<ReleaseReport, Failure>> {
        let released = E::Adapter::release(guard);
        Box::pin(async move { released.await.map_err(failure) })
    }

    fn is_lost(lost: &LostSignal) -> bool {
        lost.is_lost()
    }

    fn wait_lost(lost: &LostSignal, timeout: Duration) -> BoxFuture<'static, bool> {
        let lost = lost.clone();
        let fired = async move {
            lost.wait().await;
            true
        };
        let timed_out = async move {
            E::sleep(timeout).await;
            false
        };
        Box::pin(fired.or(timed_out))
    }
}

impl<E: Executor> Elections for AsyncSubject<E> {
    type Leadership = <E::Adapter as Adapter>::Leadership;

    fn campaign(client: &Client<E>, options: ElectionOptions) -> BoxFuture<'static, Result<Self::Leadership, Failure>> {
        let campaign = E::Adapter::campaign(client, options);
        Box::pin(async move { campaign.await.map_err(failure) })
    }

    fn epoch(leadership: &Self::Leadership) -> u64 {
        E::Adapter::epoch(leadership)
    }

    fn leadership_lost(leadership: &Self::Leadership) -> LostSignal {
        leadership.lost()
    }

    fn resign(leadership: Self::Leadership) -> BoxFuture<'static, Result<ReleaseReport, Failure>> {
        let resigned = E::Adapter::resign(leadership);
        Box::pin(async move { resigned.await.map_err(failure) })
    }

    fn leader(client: &Client<E>, name: &str) -> BoxFuture<'static, Result<Option<Leader>, Failure>> {
        let read = E::Adapter::leader(client, name);
        Box::pin(async move { read.await.map_err(failure) })
    }

    fn observe(
        client: &Client<E>,
        name: &str,
        poll: Duration,
        changes: usize,
        sink: Sink,
    ) -> BoxFuture<'static, Result<(), Failure>> {
        let observed = E::Adapter::observe(client, name, poll, changes, sink);
        Box::pin(async move { observed.await.map_err(failure) })
    }
}
