//! What the scenarios need from a runtime, and the four they run on. On an async runtime
//! ([`Tokio`], [`Smol`], [`AsyncStd`]) each locker is a task, as in an application; a blocking
//! client runs on [`Threads`], each locker a thread driving one future whose calls block
//! inside (they never return `Pending`: the future is a plain loop of blocking calls).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A boxed `Send` future.
pub type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What the scenarios need from a runtime.
pub trait Exec: Clone + Send + Sync + 'static {
    /// Run `fut` to completion on this thread.
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> T;
    /// Start `fut` as a task (or a thread); the returned future yields its output.
    fn spawn<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> BoxFut<T>;
    /// Start `fut` and let it run on its own (a driver).
    fn detach(&self, fut: impl Future<Output = ()> + Send + 'static) {
        drop(self.spawn(fut));
    }
    /// A timer (by default async-io's, which any executor can wait on).
    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(async move {
            smol::Timer::after(d).await;
        })
    }
}

/// A tokio runtime: multi-thread (a worker per core) or current-thread.
#[derive(Clone, Debug)]
pub struct Tokio(Arc<tokio::runtime::Runtime>);

impl Tokio {
    /// A new runtime.
    pub fn new(multi_thread: bool) -> Result<Tokio, String> {
        use tokio::runtime::Builder;
        let mut b = if multi_thread { Builder::new_multi_thread() } else { Builder::new_current_thread() };
        b.enable_all().build().map(|rt| Tokio(Arc::new(rt))).map_err(|e| format!("tokio runtime: {e}"))
    }
}

impl Exec for Tokio {
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> T {
        self.0.block_on(fut)
    }

    fn spawn<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> BoxFut<T> {
        let task = self.0.spawn(fut);
        Box::pin(async move { task.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())) })
    }

    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// A `smol::Executor` run by the thread in `block_on`.
#[derive(Clone, Debug, Default)]
pub struct Smol(Arc<smol::Executor<'static>>);

impl Exec for Smol {
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> T {
        smol::block_on(self.0.run(fut))
    }

    fn spawn<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> BoxFut<T> {
        Box::pin(self.0.spawn(fut))
    }

    fn detach(&self, fut: impl Future<Output = ()> + Send + 'static) {
        self.0.spawn(fut).detach();
    }
}

/// async-std's global executor.
#[derive(Clone, Copy, Debug)]
pub struct AsyncStd;

impl Exec for AsyncStd {
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> T {
        async_std::task::block_on(fut)
    }

    fn spawn<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> BoxFut<T> {
        Box::pin(async_std::task::spawn(fut))
    }
}

/// An OS thread per task, for blocking clients.
#[derive(Clone, Copy, Debug)]
pub struct Threads;

impl Exec for Threads {
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> T {
        futures_lite::future::block_on(fut)
    }

    fn spawn<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> BoxFut<T> {
        let thread = std::thread::spawn(move || futures_lite::future::block_on(fut));
        Box::pin(async move { thread.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) })
    }
}
