//! The conformance [`Subject`] for the async adapters (`redlease-tokio`, `redlease-smol`), which
//! are both `redlease_async::Client<R>` for their runtime `R`: one wrapper, generic over the
//! executor that runs it, serves `conformance_tokio.rs`, `conformance_smol.rs` and
//! `conformance_async_std.rs`.
//!
//! The driver runs on the executor under test, so every executor really drives the sockets.

use std::future::Future;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, resume_unwind};
use std::time::{Duration, Instant};

use futures_lite::FutureExt;
use redlease_async::{Client, Config, Error, Guard, Health, LockOptions, LostSignal, ReleaseReport, Runtime};
use redlease_tests::conformance::{BoxFuture, Failure, LockSpec, Options, Subject, Work, failure};

/// The executor hooks of one runtime.
pub(crate) trait Executor: 'static {
    /// The runtime's name, for messages.
    const NAME: &'static str;
    /// The adapter's runtime (`redlease_tokio::Tokio`, `redlease_smol::AsyncIo`).
    type Runtime: Runtime;
    /// Run a future to completion on this thread.
    fn block_on<T>(fut: impl Future<Output = T>) -> T;
    /// Run a future as a task of its own; the handle yields its output.
    fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> BoxFuture<'static, T>;
    /// Sleep on the runtime's timer.
    fn sleep(d: Duration) -> BoxFuture<'static, ()>;
    /// Make a client whose driver runs on this executor.
    fn start(config: Config) -> BoxFuture<'static, Result<Client<Self::Runtime>, Error>>;
}

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
    type Client = Client<E::Runtime>;
    type Guard = Guard;
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

    fn connect(urls: Vec<String>, options: Options) -> BoxFuture<'static, Result<Client<E::Runtime>, Failure>> {
        Box::pin(async move { E::start(options.config(&urls)?).await.map_err(failure) })
    }

    fn lock(client: &Client<E::Runtime>, spec: LockSpec) -> BoxFuture<'static, Result<Guard, Failure>> {
        let client = client.clone();
        Box::pin(async move { client.lock_with(spec.options()).await.map_err(failure) })
    }

    fn with_lock<T: Send + 'static>(
        client: &Client<E::Runtime>,
        resource: &str,
        ttl: Duration,
        work: Work<LostSignal, T>,
    ) -> BoxFuture<'static, Result<T, Failure>> {
        let client = client.clone();
        let options = LockOptions::new(resource, ttl);
        Box::pin(async move { client.with_lock(options, |lease| work(lease.lost())).await.map_err(failure) })
    }

    fn health(client: &Client<E::Runtime>) -> BoxFuture<'static, Result<Health, Failure>> {
        let client = client.clone();
        Box::pin(async move { client.health().await.map_err(failure) })
    }

    fn close(client: &Client<E::Runtime>) -> BoxFuture<'static, ()> {
        let client = client.clone();
        Box::pin(async move { client.close().await })
    }

    fn token(guard: &Guard) -> String {
        guard.token().to_owned()
    }

    fn valid_until(guard: &Guard) -> Instant {
        guard.valid_until()
    }

    fn fence(guard: &Guard) -> Option<u64> {
        guard.fence()
    }

    fn lost(guard: &Guard) -> LostSignal {
        guard.lost()
    }

    fn set_auto_extend(guard: &Guard, on: bool) {
        guard.set_auto_extend(on);
    }

    fn extend(guard: &mut Guard, ttl: Duration) -> BoxFuture<'_, Result<Instant, Failure>> {
        Box::pin(async move { guard.extend(ttl).await.map_err(failure) })
    }

    fn release(guard: Guard) -> BoxFuture<'static, Result<ReleaseReport, Failure>> {
        Box::pin(async move { guard.release().await.map_err(failure) })
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
