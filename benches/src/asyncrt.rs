//! Async subjects: an executor abstraction, and every scenario written once for any
//! [`AsyncLocker`] on any [`Exec`].
//!
//! Lockers run as tasks spawned on the subject's runtime (as in an application), and the
//! orchestration (timing the window, pausing nodes) runs in the runtime's `block_on`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::load::{LoadState, Turns, keys};
use crate::plan::{HandoffPlan, LoadPlan, Scenario, SeqPlan, StallPlan};
use crate::seq::SeqRecorder;
use crate::stats::Samples;
use crate::subject::{Common, Contention, Handoff, Role, Sequential, StallLevel, Style, Subject, Throughput};

/// A boxed `Send` future.
pub type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The few things the scenarios need from an async runtime.
pub trait Exec: Clone + Send + Sync + 'static {
    /// Run `fut` to completion on this thread, with the runtime's tasks making progress.
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> T;
    /// Start `fut` as a task; the returned future yields its output.
    ///
    /// # Panics
    ///
    /// The returned future panics if the task panicked (the runner reports it).
    fn spawn<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> BoxFut<T>;
    /// The runtime's timer.
    fn sleep(&self, d: Duration) -> BoxFut<()>;
}

/// A tokio runtime, multi-thread (one worker per core) or current-thread.
#[derive(Clone, Debug)]
pub struct TokioExec(Arc<tokio::runtime::Runtime>);

impl TokioExec {
    /// A multi-thread runtime with the default worker count (one per core).
    pub fn multi_thread() -> Result<Self, String> {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build();
        rt.map(|rt| TokioExec(Arc::new(rt))).map_err(|e| format!("tokio runtime: {e}"))
    }

    /// A current-thread runtime: everything runs on the thread in `block_on`.
    pub fn current_thread() -> Result<Self, String> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        rt.map(|rt| TokioExec(Arc::new(rt))).map_err(|e| format!("tokio runtime: {e}"))
    }
}

impl Exec for TokioExec {
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> T {
        self.0.block_on(fut)
    }

    fn spawn<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> BoxFut<T> {
        let handle = self.0.spawn(fut);
        Box::pin(async move {
            match handle.await {
                Ok(v) => v,
                Err(e) => panic!("a benchmark task failed: {e}"),
            }
        })
    }

    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// A `smol::Executor` run by the thread in `block_on` (single-threaded).
#[derive(Clone, Debug, Default)]
pub struct SmolExec(Arc<smol::Executor<'static>>);

impl SmolExec {
    /// A new executor.
    pub fn new() -> Self {
        SmolExec::default()
    }

    /// Start `fut` and let it run on its own (for a driver).
    pub fn detach(&self, fut: impl Future<Output = ()> + Send + 'static) {
        self.0.spawn(fut).detach();
    }
}

impl Exec for SmolExec {
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> T {
        smol::block_on(self.0.run(fut))
    }

    fn spawn<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> BoxFut<T> {
        Box::pin(self.0.spawn(fut))
    }

    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(async move {
            async_io::Timer::after(d).await;
        })
    }
}

/// async-std's global executor (multi-thread).
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncStdExec;

impl Exec for AsyncStdExec {
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

/// How to set up one async subject: its runtime and its connected client.
pub trait AsyncTarget: Send + Sync + 'static {
    /// The runtime.
    type Exec: Exec;
    /// The connected client, handing out lockers.
    type Factory: LockerFactory;
    /// A fresh runtime for one measurement.
    fn exec(&self) -> Result<Self::Exec, String>;
    /// Connect to `urls` (runs inside `exec.block_on`).
    fn connect(
        &self,
        exec: &Self::Exec,
        urls: &[String],
        ttl: Duration,
    ) -> impl Future<Output = Result<Self::Factory, String>>;
}

/// A connected client that hands out lockers (clones of a shared client, or lockers with
/// connections of their own).
pub trait LockerFactory: Send + Sync + 'static {
    /// The locker.
    type Locker: AsyncLocker;
    /// One more locker.
    fn locker(&self) -> impl Future<Output = Result<Self::Locker, String>>;
}

/// One task's handle on the subject's locks.
pub trait AsyncLocker: Send + 'static {
    /// A held lock.
    type Held: Send + 'static;
    /// Acquire `key` as the library's plain lock call does (its own retries included).
    fn acquire(&mut self, key: &str) -> impl Future<Output = Result<Self::Held, String>> + Send;
    /// Acquire `key`, retrying (with the library's jitter) until it is ours.
    fn acquire_wait(&mut self, key: &str) -> impl Future<Output = Result<Self::Held, String>> + Send;
    /// Release and wait for the outcome (an error if the lock was not released).
    fn release(&mut self, held: Self::Held) -> impl Future<Output = Result<(), String>> + Send;
    /// Release without waiting for it.
    fn release_detached(&mut self, held: Self::Held);
}

/// An async subject: a [`Subject`] for any [`AsyncTarget`].
#[derive(Debug)]
pub struct Async<T> {
    name: &'static str,
    role: Role,
    about: String,
    scenarios: &'static [Scenario],
    target: T,
}

impl<T: AsyncTarget> Async<T> {
    /// A subject called `name` that takes part in `scenarios`.
    pub fn new(
        name: &'static str,
        role: Role,
        about: impl Into<String>,
        scenarios: &'static [Scenario],
        target: T,
    ) -> Self {
        Async { name, role, about: about.into(), scenarios, target }
    }
}

impl<T: AsyncTarget> Subject for Async<T> {
    fn name(&self) -> &str {
        self.name
    }

    fn about(&self) -> String {
        self.about.clone()
    }

    fn role(&self) -> Role {
        self.role
    }

    fn style(&self) -> Style {
        Style::Async
    }

    fn supports(&self, scenario: Scenario) -> bool {
        self.scenarios.contains(&scenario)
    }

    fn sequential(&self, urls: &[String], common: Common, plan: SeqPlan) -> Result<Sequential, String> {
        let exec = self.target.exec()?;
        exec.block_on(async {
            let factory = self.target.connect(&exec, urls, common.ttl).await?;
            let mut locker = factory.locker().await?;
            exec.spawn(async move { sequential(&mut locker, plan).await }).await
        })
    }

    fn throughput(
        &self,
        urls: &[String],
        common: Common,
        plan: LoadPlan,
        lockers: usize,
    ) -> Result<Throughput, String> {
        let exec = self.target.exec()?;
        exec.block_on(async {
            let factory = self.target.connect(&exec, urls, common.ttl).await?;
            let state = Arc::new(LoadState::new(lockers));
            let mut tasks = Vec::with_capacity(lockers);
            for i in 0..lockers {
                let mut locker = factory.locker().await?;
                let state = Arc::clone(&state);
                tasks.push(exec.spawn(async move { own_key_loop(&mut locker, i, &state).await }));
            }
            exec.sleep(plan.warmup).await;
            let window = state.open();
            exec.sleep(plan.window).await;
            let closed = state.close(window);
            let mut latency = Samples::default();
            let mut first_error = None;
            for task in tasks {
                let (samples, error) = task.await;
                latency.append(samples);
                first_error = first_error.or(error);
            }
            Ok(Throughput {
                lockers,
                cycles: closed.per_locker.iter().sum(),
                elapsed: closed.elapsed,
                cpu: closed.cpu,
                server_cpu: closed.server_cpu,
                latency: latency.into_dist(),
                errors: closed.errors,
                first_error,
            })
        })
    }

    fn stalled(
        &self,
        urls: &[String],
        common: Common,
        plan: &StallPlan,
        stall: &mut dyn FnMut(usize),
    ) -> Result<Vec<StallLevel>, String> {
        let exec = self.target.exec()?;
        exec.block_on(async {
            let factory = self.target.connect(&exec, urls, common.ttl).await?;
            let mut locker = factory.locker().await?;
            let warmup = plan.warmup;
            locker = exec
                .spawn(async move {
                    for j in 0..warmup {
                        let held = locker.acquire(&keys::warmup(j)).await?;
                        locker.release(held).await?;
                    }
                    Ok::<_, String>(locker)
                })
                .await?;
            let mut levels = Vec::with_capacity(plan.levels.len());
            for &paused in &plan.levels {
                stall(paused);
                let (max, cap) = (plan.max_samples, plan.cap);
                let (back, level) = exec
                    .spawn(async move {
                        let level = stalled_level(&mut locker, paused, max, cap).await;
                        (locker, level)
                    })
                    .await;
                locker = back;
                levels.push(level);
            }
            Ok(levels)
        })
    }

    fn handoff(
        &self,
        urls: &[String],
        common: Common,
        plan: &HandoffPlan,
        contenders: usize,
    ) -> Result<Handoff, String> {
        // `contenders` clients of their own (a connect each), one task each.
        let exec = self.target.exec()?;
        let turns = Arc::new(Turns::default());
        let hold = plan.hold;
        let idle_cycles = plan.idle_acquires_at(contenders);
        let (from, to, idle) = exec.block_on(async {
            let mut tasks = Vec::with_capacity(contenders);
            let mut factories = Vec::with_capacity(contenders);
            let mut idle = Samples::default();
            for i in 0..contenders {
                let factory = self.target.connect(&exec, urls, common.ttl).await?;
                let mut locker = factory.locker().await?;
                factories.push(factory);
                if i == 0 && idle_cycles > 0 {
                    let e = exec.clone();
                    let (back, samples) = exec
                        .spawn(async move {
                            let samples = idle_acquires(&mut locker, &e, hold, idle_cycles).await;
                            (locker, samples)
                        })
                        .await;
                    locker = back;
                    idle = samples?;
                }
                let (turns, e) = (Arc::clone(&turns), exec.clone());
                tasks.push(exec.spawn(async move { handoff_loop(&mut locker, e, hold, &turns).await }));
            }
            exec.sleep(plan.load.warmup).await;
            let from = Instant::now();
            exec.sleep(plan.load.window).await;
            let to = Instant::now();
            turns.stop();
            for task in tasks {
                task.await;
            }
            drop(factories);
            Ok::<_, String>((from, to, idle))
        })?;
        Ok(turns.summary(contenders, from, to, idle))
    }

    fn contention(
        &self,
        urls: &[String],
        common: Common,
        plan: LoadPlan,
        lockers: usize,
    ) -> Result<Contention, String> {
        let exec = self.target.exec()?;
        exec.block_on(async {
            let factory = self.target.connect(&exec, urls, common.ttl).await?;
            let state = Arc::new(LoadState::new(lockers));
            let mut tasks = Vec::with_capacity(lockers);
            for i in 0..lockers {
                let mut locker = factory.locker().await?;
                let state = Arc::clone(&state);
                tasks.push(exec.spawn(async move { contended_loop(&mut locker, i, &state).await }));
            }
            exec.sleep(plan.warmup).await;
            let window = state.open();
            exec.sleep(plan.window).await;
            let closed = state.close(window);
            let mut first_error = None;
            for task in tasks {
                first_error = first_error.or(task.await);
            }
            Ok(Contention {
                per_locker: closed.per_locker,
                elapsed: closed.elapsed,
                errors: closed.errors,
                first_error,
            })
        })
    }
}

/// `cycles` acquisitions of a free key, each after `gap` of idling (and each released).
async fn idle_acquires<L: AsyncLocker, E: Exec>(
    locker: &mut L,
    exec: &E,
    gap: Duration,
    cycles: usize,
) -> Result<Samples, String> {
    let mut samples = Samples::with_capacity(cycles);
    for i in 0..cycles {
        exec.sleep(gap).await;
        let t0 = Instant::now();
        let held = locker.acquire(keys::IDLE).await.map_err(|e| format!("idle acquire {i}: {e}"))?;
        samples.push(t0.elapsed());
        locker.release(held).await.map_err(|e| format!("idle release {i}: {e}"))?;
    }
    Ok(samples)
}

async fn handoff_loop<L: AsyncLocker, E: Exec>(locker: &mut L, exec: E, hold: Duration, turns: &Turns) {
    while !turns.stopped() {
        let called = Instant::now();
        match locker.acquire_wait(keys::CONTENDED).await {
            Ok(held) => {
                let granted = Instant::now();
                exec.sleep(hold).await;
                let released = Instant::now();
                let outcome = locker.release(held).await;
                turns.turn(called, granted, released);
                if let Err(e) = outcome {
                    turns.failed(e);
                }
            }
            Err(e) => turns.failed(e),
        }
    }
}

async fn sequential<L: AsyncLocker>(locker: &mut L, plan: SeqPlan) -> Result<Sequential, String> {
    let mut rec = SeqRecorder::new(plan);
    while rec.begin() {
        let t0 = Instant::now();
        let held = locker.acquire(rec.key()).await.map_err(|e| format!("cycle {}: acquire: {e}", rec.index()))?;
        let t1 = Instant::now();
        locker.release(held).await.map_err(|e| format!("cycle {}: release: {e}", rec.index()))?;
        let t2 = Instant::now();
        rec.end(t1 - t0, t2 - t1);
    }
    Ok(rec.finish())
}

async fn own_key_loop<L: AsyncLocker>(locker: &mut L, i: usize, state: &LoadState) -> (Samples, Option<String>) {
    let key = keys::own(i);
    let mut latency = Samples::with_capacity(4096);
    let mut first_error = None;
    while !state.stopped() {
        let t0 = Instant::now();
        let outcome = match locker.acquire(&key).await {
            Ok(held) => locker.release(held).await,
            Err(e) => Err(e),
        };
        let took = t0.elapsed();
        match outcome {
            Ok(()) => {
                state.completed(i);
                if state.recording() {
                    latency.push(took);
                }
            }
            Err(e) => {
                state.failed();
                first_error.get_or_insert(e);
            }
        }
    }
    (latency, first_error)
}

async fn stalled_level<L: AsyncLocker>(locker: &mut L, paused: usize, max: usize, cap: Duration) -> StallLevel {
    let start = Instant::now();
    let mut acquire = Samples::with_capacity(max);
    let mut level = StallLevel { paused, ..StallLevel::default() };
    for j in 0..max {
        if start.elapsed() >= cap {
            break;
        }
        let key = keys::stalled(paused, j);
        let t0 = Instant::now();
        match locker.acquire(&key).await {
            Ok(held) => {
                acquire.push(t0.elapsed());
                locker.release_detached(held);
            }
            Err(e) => {
                level.errors += 1;
                level.first_error.get_or_insert(e);
            }
        }
    }
    level.acquire = acquire.into_dist();
    level
}

async fn contended_loop<L: AsyncLocker>(locker: &mut L, i: usize, state: &LoadState) -> Option<String> {
    let mut first_error = None;
    while !state.stopped() {
        let outcome = match locker.acquire_wait(keys::CONTENDED).await {
            Ok(held) => {
                // Count the acquisition before the release, so that it falls in the window it happened in.
                state.completed(i);
                locker.release(held).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = outcome {
            state.failed();
            first_error.get_or_insert(e);
        }
    }
    first_error
}
