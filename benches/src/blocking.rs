//! Blocking subjects: every scenario written once for any [`BlockingLocker`], with one OS
//! thread per locker.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::load::{LoadState, Turns, keys};
use crate::plan::{HandoffPlan, LoadPlan, Scenario, SeqPlan, StallPlan};
use crate::seq::SeqRecorder;
use crate::stats::Samples;
use crate::subject::{Common, Contention, Handoff, Role, Sequential, StallLevel, Style, Subject, Throughput};

/// How to set up one blocking subject.
pub trait BlockingTarget: Send + Sync + 'static {
    /// The connected client, handing out lockers.
    type Factory: BlockingFactory;
    /// Connect to `urls`.
    fn connect(&self, urls: &[String], ttl: Duration) -> Result<Self::Factory, String>;
}

/// A connected client that hands out lockers.
pub trait BlockingFactory: Send + Sync + 'static {
    /// The locker.
    type Locker: BlockingLocker;
    /// One more locker (a clone of a shared client, or one with connections of its own).
    fn locker(&self) -> Result<Self::Locker, String>;
}

/// One thread's handle on the subject's locks.
pub trait BlockingLocker: Send + 'static {
    /// A held lock.
    type Held: Send + 'static;
    /// Acquire `key` as the library's plain lock call does (its own retries included).
    fn acquire(&mut self, key: &str) -> Result<Self::Held, String>;
    /// Acquire `key`, retrying (with the library's jitter) until it is ours.
    fn acquire_wait(&mut self, key: &str) -> Result<Self::Held, String>;
    /// Release and wait for the outcome (an error if the lock was not released).
    fn release(&mut self, held: Self::Held) -> Result<(), String>;
    /// Release without waiting for it, if the library can; otherwise release and wait.
    fn release_detached(&mut self, held: Self::Held);
}

/// A blocking subject: a [`Subject`] for any [`BlockingTarget`].
#[derive(Debug)]
pub struct Blocking<T> {
    name: &'static str,
    role: Role,
    about: String,
    scenarios: &'static [Scenario],
    target: T,
}

impl<T: BlockingTarget> Blocking<T> {
    /// A subject called `name` that takes part in `scenarios`.
    pub fn new(
        name: &'static str,
        role: Role,
        about: impl Into<String>,
        scenarios: &'static [Scenario],
        target: T,
    ) -> Self {
        Blocking { name, role, about: about.into(), scenarios, target }
    }
}

impl<T: BlockingTarget> Subject for Blocking<T> {
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
        Style::Blocking
    }

    fn supports(&self, scenario: Scenario) -> bool {
        self.scenarios.contains(&scenario)
    }

    fn sequential(&self, urls: &[String], common: Common, plan: SeqPlan) -> Result<Sequential, String> {
        let factory = self.target.connect(urls, common.ttl)?;
        let mut locker = factory.locker()?;
        let mut rec = SeqRecorder::new(plan);
        while rec.begin() {
            let t0 = Instant::now();
            let held = locker.acquire(rec.key()).map_err(|e| format!("cycle {}: acquire: {e}", rec.index()))?;
            let t1 = Instant::now();
            locker.release(held).map_err(|e| format!("cycle {}: release: {e}", rec.index()))?;
            let t2 = Instant::now();
            rec.end(t1 - t0, t2 - t1);
        }
        Ok(rec.finish())
    }

    fn throughput(
        &self,
        urls: &[String],
        common: Common,
        plan: LoadPlan,
        lockers: usize,
    ) -> Result<Throughput, String> {
        let factory = self.target.connect(urls, common.ttl)?;
        let state = LoadState::new(lockers);
        let mut all = Vec::with_capacity(lockers);
        for _ in 0..lockers {
            all.push(factory.locker()?);
        }
        std::thread::scope(|scope| {
            let mut threads = Vec::with_capacity(lockers);
            for (i, mut locker) in all.into_iter().enumerate() {
                let state = &state;
                let thread = std::thread::Builder::new()
                    .name(format!("locker-{i}"))
                    .spawn_scoped(scope, move || own_key_loop(&mut locker, i, state));
                match thread {
                    Ok(t) => threads.push(t),
                    Err(e) => {
                        state.stop.store(true, std::sync::atomic::Ordering::Relaxed);
                        return Err(format!("cannot start locker thread {i}: {e}"));
                    }
                }
            }
            std::thread::sleep(plan.warmup);
            let window = state.open();
            std::thread::sleep(plan.window);
            let closed = state.close(window);
            let mut latency = Samples::default();
            let mut first_error = None;
            for t in threads {
                let (samples, error) = t.join().map_err(|_| "a locker thread panicked".to_owned())?;
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
        let factory = self.target.connect(urls, common.ttl)?;
        let mut locker = factory.locker()?;
        for j in 0..plan.warmup {
            let held = locker.acquire(&keys::warmup(j))?;
            locker.release(held)?;
        }
        // Each level runs on a helper thread: a subject without a timeout of its own stays
        // stuck on a paused node, and is then reported as blocked and left behind (it ends
        // once the node resumes or is killed).
        let mut levels = Vec::with_capacity(plan.levels.len());
        let mut locker = Some(locker);
        let mut stuck = None;
        for &paused in &plan.levels {
            let Some(mut moved) = locker.take() else {
                levels.push(StallLevel { paused, blocked: stuck, ..StallLevel::default() });
                continue;
            };
            stall(paused);
            let (tx, rx) = mpsc::channel();
            let (max, cap) = (plan.max_samples, plan.cap);
            std::thread::Builder::new()
                .name("stalled-level".into())
                .spawn(move || {
                    let level = stalled_level(&mut moved, paused, max, cap);
                    let _ = tx.send((moved, level));
                })
                .map_err(|e| format!("cannot start a thread: {e}"))?;
            let waited = cap + plan.grace;
            match rx.recv_timeout(waited) {
                Ok((back, level)) => {
                    locker = Some(back);
                    levels.push(level);
                }
                Err(_) => {
                    stuck = Some(waited);
                    levels.push(StallLevel { paused, blocked: stuck, ..StallLevel::default() });
                }
            }
        }
        Ok(levels)
    }

    fn contention(
        &self,
        urls: &[String],
        common: Common,
        plan: LoadPlan,
        lockers: usize,
    ) -> Result<Contention, String> {
        let factory = self.target.connect(urls, common.ttl)?;
        let state = Arc::new(LoadState::new(lockers));
        let mut all = Vec::with_capacity(lockers);
        for _ in 0..lockers {
            all.push(factory.locker()?);
        }
        std::thread::scope(|scope| {
            let mut threads = Vec::with_capacity(lockers);
            for (i, mut locker) in all.into_iter().enumerate() {
                let state = &state;
                let thread = std::thread::Builder::new()
                    .name(format!("contender-{i}"))
                    .spawn_scoped(scope, move || contended_loop(&mut locker, i, state));
                match thread {
                    Ok(t) => threads.push(t),
                    Err(e) => {
                        state.stop.store(true, std::sync::atomic::Ordering::Relaxed);
                        return Err(format!("cannot start contender thread {i}: {e}"));
                    }
                }
            }
            std::thread::sleep(plan.warmup);
            let window = state.open();
            std::thread::sleep(plan.window);
            let closed = state.close(window);
            let mut first_error = None;
            for t in threads {
                first_error = first_error.or(t.join().map_err(|_| "a contender thread panicked".to_owned())?);
            }
            Ok(Contention {
                per_locker: closed.per_locker,
                elapsed: closed.elapsed,
                errors: closed.errors,
                first_error,
            })
        })
    }

    fn handoff(
        &self,
        urls: &[String],
        common: Common,
        plan: &HandoffPlan,
        contenders: usize,
    ) -> Result<Handoff, String> {
        // `contenders` clients of their own (a connect each), one OS thread each.
        let turns = Turns::default();
        let mut all = Vec::with_capacity(contenders);
        let mut factories = Vec::with_capacity(contenders);
        let mut idle = Samples::default();
        for i in 0..contenders {
            let factory = self.target.connect(urls, common.ttl)?;
            let mut locker = factory.locker()?;
            if i == 0 {
                idle = idle_acquires(&mut locker, plan.hold, plan.idle_acquires_at(contenders))?;
            }
            all.push(locker);
            factories.push(factory);
        }
        let (from, to) = std::thread::scope(|scope| {
            let mut threads = Vec::with_capacity(contenders);
            for (i, mut locker) in all.into_iter().enumerate() {
                let (turns, hold) = (&turns, plan.hold);
                let thread = std::thread::Builder::new()
                    .name(format!("handoff-{i}"))
                    .spawn_scoped(scope, move || handoff_loop(&mut locker, hold, turns));
                match thread {
                    Ok(t) => threads.push(t),
                    Err(e) => {
                        turns.stop();
                        return Err(format!("cannot start contender thread {i}: {e}"));
                    }
                }
            }
            std::thread::sleep(plan.load.warmup);
            let from = Instant::now();
            std::thread::sleep(plan.load.window);
            let to = Instant::now();
            turns.stop();
            for t in threads {
                t.join().map_err(|_| "a contender thread panicked".to_owned())?;
            }
            Ok((from, to))
        })?;
        drop(factories);
        Ok(turns.summary(contenders, from, to, idle))
    }
}

/// `cycles` acquisitions of a free key, each after `gap` of idling (and each released).
fn idle_acquires<L: BlockingLocker>(locker: &mut L, gap: Duration, cycles: usize) -> Result<Samples, String> {
    let mut samples = Samples::with_capacity(cycles);
    for i in 0..cycles {
        std::thread::sleep(gap);
        let t0 = Instant::now();
        let held = locker.acquire(keys::IDLE).map_err(|e| format!("idle acquire {i}: {e}"))?;
        samples.push(t0.elapsed());
        locker.release(held).map_err(|e| format!("idle release {i}: {e}"))?;
    }
    Ok(samples)
}

fn handoff_loop<L: BlockingLocker>(locker: &mut L, hold: Duration, turns: &Turns) {
    while !turns.stopped() {
        let called = Instant::now();
        match locker.acquire_wait(keys::CONTENDED) {
            Ok(held) => {
                let granted = Instant::now();
                std::thread::sleep(hold);
                let released = Instant::now();
                let outcome = locker.release(held);
                turns.turn(called, granted, released);
                if let Err(e) = outcome {
                    turns.failed(e);
                }
            }
            Err(e) => turns.failed(e),
        }
    }
}

fn own_key_loop<L: BlockingLocker>(locker: &mut L, i: usize, state: &LoadState) -> (Samples, Option<String>) {
    let key = keys::own(i);
    let mut latency = Samples::with_capacity(4096);
    let mut first_error = None;
    while !state.stopped() {
        let t0 = Instant::now();
        let outcome = locker.acquire(&key).and_then(|held| locker.release(held));
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

fn stalled_level<L: BlockingLocker>(locker: &mut L, paused: usize, max: usize, cap: Duration) -> StallLevel {
    let start = Instant::now();
    let mut acquire = Samples::with_capacity(max);
    let mut level = StallLevel { paused, ..StallLevel::default() };
    for j in 0..max {
        if start.elapsed() >= cap {
            break;
        }
        let key = keys::stalled(paused, j);
        let t0 = Instant::now();
        match locker.acquire(&key) {
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

fn contended_loop<L: BlockingLocker>(locker: &mut L, i: usize, state: &LoadState) -> Option<String> {
    let mut first_error = None;
    while !state.stopped() {
        let outcome = locker.acquire_wait(keys::CONTENDED).and_then(|held| {
            state.completed(i);
            locker.release(held)
        });
        if let Err(e) = outcome {
            state.failed();
            first_error.get_or_insert(e);
        }
    }
    first_error
}
