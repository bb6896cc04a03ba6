//! The conformance suite against `redlease-smol` under async-std's executor.

mod async_subject;

use std::future::Future;
use std::time::Duration;

use async_subject::{AsyncSubject, Executor, spawn_catching};
use redlease_smol::{Client, Config, Error};
use redlease_tests::conformance::BoxFuture;

async_subject::adapter!(SmolApi, redlease_smol);

/// async-std: `task::block_on`, `task::spawn`, `task::sleep`.
struct AsyncStd;

impl Executor for AsyncStd {
    const NAME: &'static str = "async-std";
    type Adapter = SmolApi;

    fn block_on<T>(fut: impl Future<Output = T>) -> T {
        async_std::task::block_on(fut)
    }

    fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> BoxFuture<'static, T> {
        spawn_catching(fut, async_std::task::spawn)
    }

    fn sleep(d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async_std::task::sleep(d))
    }

    /// The driver runs on async-std's executor, next to the tasks under test.
    fn start(config: Config) -> BoxFuture<'static, Result<Client, Error>> {
        Box::pin(async move {
            let (client, driver) = Client::with_driver(config).await?;
            // A dropped JoinHandle detaches the task; it keeps running.
            drop(async_std::task::spawn(driver));
            Ok(client)
        })
    }
}

redlease_tests::conformance_tests!(AsyncSubject<AsyncStd>);
redlease_tests::conformance_tests!(AsyncSubject<AsyncStd>, clusters);
redlease_tests::conformance_tests!(AsyncSubject<AsyncStd>, sentinels);
redlease_tests::conformance_tests!(AsyncSubject<AsyncStd>, elections);

/// The whole suite with every node reached over TLS (`rediss://`, a generated CA).
mod tls {
    use super::*;

    redlease_tests::conformance_tests!(AsyncSubject<AsyncStd>, listen = redlease_tests::Listen::Tls);
}
