//! The conformance suite against `redlease-tokio`, on a multi-thread tokio runtime (the
//! top-level tests) and on a current-thread runtime (module `current_thread`), since the adapter
//! promises both work.

use std::future::Future;
use std::time::{Duration, Instant};

use redlease_tests::conformance::{BoxFuture, Failure, FailureKind, LockSpec, Options, Subject, Work};
use redlease_tokio::{Client, Config, Error, Guard, LostSignal, ReleaseReport};

/// `redlease-tokio` seen through the suite's [`Subject`] trait; `MULTI` picks the runtime
/// flavour: 2 worker threads, or everything (the driver included) on the test's own thread.
struct TokioSubject<const MULTI: bool>;

fn failure(e: impl Into<Error>) -> Failure {
    let e = e.into();
    let message = e.to_string();
    let kind = match e {
        Error::Config(c) => FailureKind::Config(c),
        Error::Misuse(m) => FailureKind::Misuse(m),
        Error::Acquire(a) => FailureKind::Acquire(a),
        Error::Extend(x) => FailureKind::Extend(x),
        Error::WaitTimeout { waited, last } => FailureKind::WaitTimeout { waited, last },
        Error::Closed => FailureKind::Closed,
        other => FailureKind::Other(format!("{other:?}")),
    };
    Failure::new(kind, message)
}

impl<const MULTI: bool> Subject for TokioSubject<MULTI> {
    const NAME: &'static str = if MULTI { "tokio" } else { "tokio-current-thread" };
    type Client = Client;
    type Guard = Guard;
    type Lost = LostSignal;

    fn block_on<T>(fut: impl Future<Output = T>) -> T {
        let mut builder = if MULTI {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        } else {
            tokio::runtime::Builder::new_current_thread()
        };
        builder.enable_all().build().expect("a tokio runtime").block_on(fut)
    }

    fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> BoxFuture<'static, T> {
        let handle = tokio::spawn(fut);
        Box::pin(async move {
            match handle.await {
                Ok(v) => v,
                Err(e) => match e.try_into_panic() {
                    Ok(panic) => std::panic::resume_unwind(panic),
                    Err(e) => panic!("task failed: {e}"),
                },
            }
        })
    }

    fn sleep(d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }

    fn connect(urls: Vec<String>, options: Options) -> BoxFuture<'static, Result<Client, Failure>> {
        Box::pin(async move {
            let mut config = Config::from_urls(&urls).map_err(failure)?;
            config.node_timeout = options.node_timeout;
            config.retry = options.retry;
            config.connect_timeout = options.connect_timeout;
            config.reconnect_min = options.reconnect_min;
            config.reconnect_max = options.reconnect_max;
            Client::with_config(config).await.map_err(failure)
        })
    }

    fn lock(client: &Client, spec: LockSpec) -> BoxFuture<'static, Result<Guard, Failure>> {
        let mut builder = client.lock_with(&spec.resource, spec.ttl).fencing(spec.fencing);
        if let Some(n) = spec.attempts {
            builder = builder.attempts(n);
        }
        if let Some(wait) = spec.wait {
            builder = builder.wait(wait);
        }
        Box::pin(async move { builder.acquire().await.map_err(failure) })
    }

    fn with_lock<T: Send + 'static>(
        client: &Client,
        resource: &str,
        ttl: Duration,
        work: Work<LostSignal, T>,
    ) -> BoxFuture<'static, Result<T, Failure>> {
        let (client, resource) = (client.clone(), resource.to_owned());
        Box::pin(async move { client.with_lock(&resource, ttl, work).await.map_err(failure) })
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
        Box::pin(async move { tokio::time::timeout(timeout, lost.wait()).await.is_ok() })
    }
}

redlease_tests::conformance_tests!(TokioSubject<true>);

mod current_thread {
    redlease_tests::conformance_tests!(super::TokioSubject<false>);
}
