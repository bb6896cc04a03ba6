//! The conformance suite against `redlease-smol` under async-std's executor.

mod smol_subject;

use std::future::Future;
use std::time::Duration;

use redlease_smol::Driver;
use redlease_tests::conformance::BoxFuture;
use smol_subject::{Executor, SmolSubject, spawn_catching};

/// async-std: `task::block_on`, `task::spawn`, `task::sleep`.
struct AsyncStd;

impl Executor for AsyncStd {
    const NAME: &'static str = "async-std";

    fn block_on<T>(fut: impl Future<Output = T>) -> T {
        async_std::task::block_on(fut)
    }

    fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> BoxFuture<'static, T> {
        spawn_catching(fut, async_std::task::spawn)
    }

    fn sleep(d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async_std::task::sleep(d))
    }

    fn spawn_driver(driver: Driver) {
        // A dropped JoinHandle detaches the task; it keeps running.
        drop(async_std::task::spawn(driver));
    }
}

redlease_tests::conformance_tests!(SmolSubject<AsyncStd>);
