//! Subjects whose lockers are futures, and every scenario written once for them.
//!
//! On an async runtime ([`Tokio`], [`Smol`], [`AsyncStd`]) each locker is a task, as in an
//! application. A blocking client runs on [`Threads`]: each locker is an OS thread that
//! drives one future whose calls block inside (they never return `Pending`, so the future is
//! a plain loop of blocking calls).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::plan::{Plan, STALL_WARM, Scenario};
use crate::stats::Hist;
use crate::subject::{Handoff, Info, Level, Load, Seq, Subject};
use crate::turns::Recorder;
use crate::usage::Usage;

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
    /// The runtime's timer.
    fn sleep(&self, d: Duration) -> BoxFut<()>;
}

/// A tokio runtime: multi-thread (a worker per core) or current-thread.
#[derive(Clone, Debug)]
pub struct Tokio(Arc<tokio::runtime::Runtime>);

impl Tokio {
    /// A new runtime.
    pub fn new(multi_thread: bool) -> Result<Tokio, String> {
        let mut builder = match multi_thread {
            true => tokio::runtime::Builder::new_multi_thread(),
            false => tokio::runtime::Builder::new_current_thread(),
        };
        builder.enable_all().build().map(|rt| Tokio(Arc::new(rt))).map_err(|e| format!("tokio runtime: {e}"))
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

    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(async move {
            smol::Timer::after(d).await;
        })
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

    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(async_std::task::sleep(d))
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

    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(async move { std::thread::sleep(d) })
    }
}

/// How to set up one subject: its runtime, its client, its lockers.
pub trait Target: Send + Sync + 'static {
    /// The runtime.
    type Exec: Exec;
    /// A connected client.
    type Client: Send + Sync + 'static;
    /// One locker.
    type Locker: Locker;
    /// A fresh runtime for one measurement.
    fn exec(&self) -> Result<Self::Exec, String>;
    /// Connect to `urls` (inside `exec.block_on`).
    fn connect(&self, exec: &Self::Exec, urls: &[String]) -> impl Future<Output = Result<Self::Client, String>>;
    /// One more locker (inside `exec.block_on`): a clone of the client, or connections of its own.
    fn locker(&self, client: &Self::Client) -> Result<Self::Locker, String>;
}

/// One locker's lock calls.
pub trait Locker: Send + 'static {
    /// A held lock.
    type Held: Send + 'static;
    /// Acquire `key` as the library's plain lock call does (its own retries included).
    fn lock(&mut self, key: &str) -> impl Future<Output = Result<Self::Held, String>> + Send;
    /// Release and wait for the outcome.
    fn unlock(&mut self, held: Self::Held) -> impl Future<Output = Result<(), String>> + Send;
    /// Acquire `key`, waiting (as the library waits) until it is ours.
    fn lock_wait(&mut self, key: &str) -> impl Future<Output = Result<Self::Held, String>> + Send {
        let _ = key;
        async { Err("this subject cannot wait for a lock".to_owned()) }
    }
    /// Release without waiting for the outcome (by default: drop it, as a guard releases).
    fn unlock_detached(&mut self, held: Self::Held) {
        drop(held);
    }
}

/// A [`Subject`] for any [`Target`].
#[derive(Debug)]
pub struct Generic<T> {
    info: Info,
    target: T,
}

impl<T: Target> Generic<T> {
    /// A subject called `name`, paired with `floor`, that takes part in `scenarios`.
    pub fn new(name: &'static str, floor: &'static str, scenarios: &'static [Scenario], target: T) -> Self {
        Generic { info: Info { name, floor, scenarios }, target }
    }
}

impl<T: Target> Subject for Generic<T> {
    fn info(&self) -> &Info {
        &self.info
    }

    fn sequential(&self, urls: &[String], mut rec: Recorder) -> Result<Seq, String> {
        let exec = self.target.exec()?;
        exec.block_on(async {
            let client = self.target.connect(&exec, urls).await?;
            let mut locker = self.target.locker(&client)?;
            let cycles = async move {
                while rec.begin() {
                    let t0 = Instant::now();
                    let held = locker.lock(rec.key()).await.map_err(|e| format!("cycle {}: lock: {e}", rec.index()))?;
                    let t1 = Instant::now();
                    locker.unlock(held).await.map_err(|e| format!("cycle {}: unlock: {e}", rec.index()))?;
                    rec.end(t1 - t0, t1.elapsed());
                }
                Ok(rec.finish())
            };
            exec.spawn(cycles).await
        })
    }

    fn lockers(&self, urls: &[String], plan: &Plan, lockers: usize) -> Result<Load, String> {
        let exec = self.target.exec()?;
        exec.block_on(async {
            let client = self.target.connect(&exec, urls).await?;
            let state = Arc::new(LoadState::default());
            let mut tasks = Vec::with_capacity(lockers);
            for i in 0..lockers {
                let (mut locker, state) = (self.target.locker(&client)?, Arc::clone(&state));
                tasks.push(exec.spawn(async move { own_key(&mut locker, i, &state).await }));
            }
            exec.sleep(plan.load.warmup).await;
            let (at, usage) = (Instant::now(), Usage::now());
            state.recording.store(true, Relaxed);
            exec.sleep(plan.load.length).await;
            let usage = Usage::since(usage);
            let (elapsed, cycles, errors) = (at.elapsed(), state.done.load(Relaxed), state.errors.load(Relaxed));
            state.stop.store(true, Relaxed);
            let mut load = Load { cycles, elapsed, usage, errors, ..Load::default() };
            for task in tasks {
                let (latency, error) = task.await;
                load.latency.add(&latency);
                load.first_error = load.first_error.or(error);
            }
            Ok(load)
        })
    }

    fn stalled(&self, urls: &[String], plan: &Plan, pause: &(dyn Fn() + Sync)) -> Result<[Level; 2], String> {
        let exec = self.target.exec()?;
        exec.block_on(async {
            let client = self.target.connect(&exec, urls).await?;
            let mut locker = self.target.locker(&client)?;
            let mut levels: [Level; 2] = Default::default();
            for (i, level) in levels.iter_mut().enumerate() {
                if i == 1 {
                    pause();
                }
                let (max, cap) = (plan.stall.max, plan.stall.cap);
                let measured = exec.spawn(async move {
                    let level = stall_level(&mut locker, i, max, cap).await;
                    (locker, level)
                });
                (locker, *level) = measured.await;
            }
            Ok(levels)
        })
    }

    fn handoff(&self, urls: &[String], plan: &Plan, contenders: usize) -> Result<Handoff, String> {
        let exec = self.target.exec()?;
        exec.block_on(async {
            let log = Arc::new(TurnLog::default());
            let (mut clients, mut tasks) = (Vec::new(), Vec::new());
            for _ in 0..contenders {
                let client = self.target.connect(&exec, urls).await?;
                let (mut locker, log, e) = (self.target.locker(&client)?, Arc::clone(&log), exec.clone());
                let hold = plan.hold;
                tasks.push(exec.spawn(async move { contend(&mut locker, &e, hold, &log).await }));
                clients.push(client);
            }
            exec.sleep(plan.handoff.warmup).await;
            let from = Instant::now();
            log.recording.store(true, Relaxed);
            exec.sleep(plan.handoff.length).await;
            let (to, failed) = (Instant::now(), log.failed.load(Relaxed));
            log.stop.store(true, Relaxed);
            for task in tasks {
                task.await;
            }
            let mut turns = std::mem::take(&mut *log.turns.lock().expect("not poisoned"));
            // Each grant's handoff counts from the release call of the turn granted before it.
            turns.sort_by_key(|t| t.1);
            let mut out = Handoff { elapsed: to - from, failed, ..Handoff::default() };
            for (i, &(called, granted, _)) in turns.iter().enumerate().filter(|(_, t)| t.1 >= from && t.1 < to) {
                out.grants += 1;
                out.wait.record(granted - called);
                if let Some(before) = i.checked_sub(1).map(|b| turns[b]) {
                    out.handoff.record(granted.saturating_duration_since(before.2));
                }
            }
            Ok(out)
        })
    }
}

/// What the lockers of a window share with the thread that times it.
#[derive(Debug, Default)]
struct LoadState {
    stop: AtomicBool,
    recording: AtomicBool,
    done: AtomicU64,
    errors: AtomicU64,
}

/// Lock and unlock the key of locker `i` until told to stop; the latencies recorded in the
/// window, and the first failure.
async fn own_key<L: Locker>(locker: &mut L, i: usize, state: &LoadState) -> (Hist, Option<String>) {
    let key = format!("bench:own:{i}");
    let (mut latency, mut first_error) = (Hist::default(), None);
    while !state.stop.load(Relaxed) {
        let t0 = Instant::now();
        let outcome = match locker.lock(&key).await {
            Ok(held) => locker.unlock(held).await,
            Err(e) => Err(e),
        };
        if state.recording.load(Relaxed) && !state.stop.load(Relaxed) {
            match outcome {
                Ok(()) => {
                    state.done.fetch_add(1, Relaxed);
                    latency.record(t0.elapsed());
                }
                Err(e) => {
                    state.errors.fetch_add(1, Relaxed);
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    (latency, first_error)
}

/// Acquisitions of fresh keys, each released without waiting, until `max` or `cap`; at the
/// first level, a few more first warm the client up.
async fn stall_level<L: Locker>(locker: &mut L, level: usize, max: usize, cap: Duration) -> Level {
    let (start, mut out, warm) = (Instant::now(), Level::default(), if level == 0 { STALL_WARM } else { 0 });
    for j in 0..warm + max {
        if start.elapsed() >= cap {
            break;
        }
        let t0 = Instant::now();
        match locker.lock(&format!("bench:stall:{level}:{j}")).await {
            Ok(held) => {
                if j >= warm {
                    out.acquire.record(t0.elapsed());
                }
                locker.unlock_detached(held);
            }
            Err(_) => out.errors += 1,
        }
    }
    out
}

/// The handoff contenders' turns (called, granted, released) and failures in the window.
#[derive(Debug, Default)]
struct TurnLog {
    stop: AtomicBool,
    recording: AtomicBool,
    turns: Mutex<Vec<(Instant, Instant, Instant)>>,
    failed: AtomicU64,
}

async fn contend<L: Locker, E: Exec>(locker: &mut L, exec: &E, hold: Duration, log: &TurnLog) {
    let failed = || {
        if log.recording.load(Relaxed) {
            log.failed.fetch_add(1, Relaxed);
        }
    };
    while !log.stop.load(Relaxed) {
        let called = Instant::now();
        let Ok(held) = locker.lock_wait("bench:hot").await else {
            failed();
            continue;
        };
        let granted = Instant::now();
        exec.sleep(hold).await;
        let released = Instant::now();
        if locker.unlock(held).await.is_err() {
            failed();
        }
        log.turns.lock().expect("not poisoned").push((called, granted, released));
    }
}
