//! The conformance suite against `redlease-smol` under smol's executor.

mod smol_subject;

use std::future::Future;
use std::time::Duration;

use redlease_smol::Driver;
use redlease_tests::conformance::BoxFuture;
use smol_subject::{Executor, SmolSubject, spawn_catching};

/// smol: `smol::block_on`, `smol::spawn` (global executor), `smol::Timer`.
struct Smol;

impl Executor for Smol {
    const NAME: &'static str = "smol";

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

    fn spawn_driver(driver: Driver) {
        smol::spawn(driver).detach();
    }
}

redlease_tests::conformance_tests!(SmolSubject<Smol>);
