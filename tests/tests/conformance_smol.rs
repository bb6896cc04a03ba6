//! The conformance suite against `redlease-smol` under smol's executor.

mod async_subject;

use std::future::Future;
use std::time::Duration;

use async_subject::{AsyncSubject, Executor, spawn_catching};
use redlease_smol::{Client, Config, Error};
use redlease_tests::conformance::BoxFuture;

async_subject::adapter!(SmolApi, redlease_smol);

/// smol: `smol::block_on`, `smol::spawn` (global executor), `smol::Timer`.
struct Smol;

impl Executor for Smol {
    const NAME: &'static str = "smol";
    type Adapter = SmolApi;

    fn block_on<T>(fut: impl Future<Output = T>) -> T {
        smol::block_on(fut)
    }

    fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> BoxFuture<'static, T> {
        spawn_catching(fut, smol::spawn)
    }

    fn sleep(d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            smol::Timer::after(d).await;
        })
    }

    /// The driver runs on smol's executor, next to the tasks under test.
    fn start(config: Config) -> BoxFuture<'static, Result<Client, Error>> {
        Box::pin(async move {
            let (client, driver) = Client::with_driver(config).await?;
            smol::spawn(driver).detach();
            Ok(client)
        })
    }
}

redlease_tests::conformance_tests!(AsyncSubject<Smol>);
redlease_tests::conformance_tests!(AsyncSubject<Smol>, clusters);
redlease_tests::conformance_tests!(AsyncSubject<Smol>, sentinels);
redlease_tests::conformance_tests!(AsyncSubject<Smol>, elections);

/// The whole suite with every node reached over TLS (`rediss://`, a generated CA).
mod tls {
    use super::*;

    redlease_tests::conformance_tests!(AsyncSubject<Smol>, listen = redlease_tests::Listen::Tls);
}
