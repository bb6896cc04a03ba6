//! The conformance suite against `redlease-tokio`, on a multi-thread tokio runtime (the
//! top-level tests) and on a current-thread runtime (module `current_thread`), since the adapter
//! promises both work.

mod async_subject;

use std::future::Future;
use std::time::Duration;

use async_subject::{AsyncSubject, Executor, spawn_catching};
use redlease_tests::conformance::BoxFuture;

async_subject::adapter!(TokioApi, redlease_tokio);
use redlease_tokio::{Client, Config, Error};

/// tokio; `MULTI` picks the runtime flavour: 2 worker threads, or everything (the driver
/// included) on the test's own thread.
struct TokioRt<const MULTI: bool>;

impl<const MULTI: bool> Executor for TokioRt<MULTI> {
    const NAME: &'static str = if MULTI { "tokio" } else { "tokio-current-thread" };
    type Adapter = TokioApi;

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
        // Spawned at once (not when the handle is first awaited), like the other executors.
        spawn_catching(fut, |f| {
            let handle = tokio::spawn(f);
            async move { handle.await.expect("a test task was cancelled") }
        })
    }

    fn sleep(d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }

    /// The adapter's own entry point, which spawns the driver with `tokio::spawn`.
    fn start(config: Config) -> BoxFuture<'static, Result<Client, Error>> {
        Box::pin(Client::with_config(config))
    }
}

redlease_tests::conformance_tests!(AsyncSubject<TokioRt<true>>);
redlease_tests::conformance_tests!(AsyncSubject<TokioRt<true>>, clusters);
redlease_tests::conformance_tests!(AsyncSubject<TokioRt<true>>, sentinels);
redlease_tests::conformance_tests!(AsyncSubject<TokioRt<true>>, elections);

/// The same cases on a current-thread runtime.
mod current_thread {
    use super::*;

    redlease_tests::conformance_tests!(AsyncSubject<TokioRt<false>>);
}

/// The whole suite with every node reached over TLS (`rediss://`, a generated CA).
mod tls {
    use super::*;

    redlease_tests::conformance_tests!(AsyncSubject<TokioRt<true>>, listen = redlease_tests::Listen::Tls);
}

/// The whole suite with every node reached over its Unix socket (`redis+unix://`).
mod unix {
    use super::*;

    redlease_tests::conformance_tests!(AsyncSubject<TokioRt<true>>, listen = redlease_tests::Listen::Unix);
}
