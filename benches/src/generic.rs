//! Subjects made of a runtime, a client and its lockers ([`Target`], [`Locker`]), and every
//! scenario written once for them ([`Generic`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::exec::Exec;
use crate::plan::{Plan, Scenario, Shape};
use crate::subject::{Handoff, Info, Level, Load, Seq, Subject};
use crate::turns::Recorder;
use crate::usage::Usage;

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
    /// What its lockers lock.
    fn shape(&self) -> Shape {
        Shape::Mutex
    }
    /// Its own lockers scenario (`None`: the generic one, a task per locker).
    fn lockers(&self, _urls: &[String], _plan: &Plan, _lockers: usize) -> Option<Result<Load, String>> {
        None
    }
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
    /// The semaphore slot it holds (a mutex is slot 0).
    fn slot(held: &Self::Held) -> u16 {
        let _ = held;
        0
    }
}

/// A [`Subject`] for any [`Target`].
#[derive(Debug)]
pub struct Generic<T> {
    info: Info,
    target: T,
}

impl<T: Target> Generic<T> {
    /// A subject called `name`, paired with `partner`, that takes part in `scenarios`.
    pub fn new(name: &'static str, partner: &'static str, scenarios: &'static [Scenario], target: T) -> Self {
        Generic { info: Info { name, partner, scenarios, shape: target.shape() }, target }
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
        if let Some(load) = self.target.lockers(urls, plan, lockers) {
            return load;
        }
        let exec = self.target.exec()?;
        exec.block_on(async {
            let client = self.target.connect(&exec, urls).await?;
            let state = Arc::new(Shared::default());
            let mut tasks = Vec::with_capacity(lockers);
            for i in 0..lockers {
                let (mut locker, state) = (self.target.locker(&client)?, Arc::clone(&state));
                tasks.push(exec.spawn(async move { own_key(&mut locker, i, &state).await }));
            }
            exec.sleep(plan.load.warmup).await;
            let (at, start) = (Instant::now(), Usage::now());
            state.recording.store(true, Relaxed);
            exec.sleep(plan.load.length).await;
            state.recording.store(false, Relaxed);
            let mut load = Load { elapsed: at.elapsed(), usage: Usage::since(start), ..Load::default() };
            state.stop.store(true, Relaxed);
            for task in tasks {
                load.merge(task.await);
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
                let (max, cap) = plan.stall;
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
            let log = Arc::new(Shared::default());
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
            let to = Instant::now();
            log.stop.store(true, Relaxed);
            for task in tasks {
                task.await;
            }
            let mut turns = std::mem::take(&mut *log.turns.lock().expect("not poisoned"));
            // Each grant's handoff counts from the release call of the slot's previous holder
            // (a mutex is one slot): the latest release of any slot may have freed another.
            turns.sort_by_key(|t| t.1);
            let (mut freed, holders) = (HashMap::new(), self.info.shape.holders());
            let mut out = Handoff { elapsed: to - from, holders, ..Handoff::default() };
            for &(called, granted, released, slot) in &turns {
                let before = freed.insert(slot, released);
                if granted >= from && granted < to {
                    out.grants += 1;
                    out.wait.record(granted - called);
                    if let Some(before) = before {
                        out.handoff.record(granted.saturating_duration_since(before));
                    }
                }
            }
            Ok(out)
        })
    }
}

/// What the tasks of a timed window share with the thread that times it: whether to stop,
/// whether the window is open, and the handoff contenders' turns (called, granted, released,
/// the slot held).
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    recording: AtomicBool,
    turns: Mutex<Vec<(Instant, Instant, Instant, u16)>>,
}

/// Lock and unlock the key of locker `i` until told to stop; the cycles that ended while
/// the window was open.
async fn own_key<L: Locker>(locker: &mut L, i: usize, state: &Shared) -> Load {
    let (key, mut load) = (format!("bench:own:{i}"), Load::default());
    while !state.stop.load(Relaxed) {
        let t0 = Instant::now();
        let outcome = match locker.lock(&key).await {
            Ok(held) => locker.unlock(held).await,
            Err(e) => Err(e),
        };
        if state.recording.load(Relaxed) {
            load.count(outcome.map(|()| t0.elapsed()));
        }
    }
    load
}

/// Acquisitions of fresh keys, each released without waiting, until `max` or `cap`.
async fn stall_level<L: Locker>(locker: &mut L, level: usize, max: usize, cap: Duration) -> Level {
    let (start, mut out) = (Instant::now(), Level::default());
    for j in 0..max {
        if start.elapsed() >= cap {
            break;
        }
        let t0 = Instant::now();
        match locker.lock(&format!("bench:stall:{level}:{j}")).await {
            Ok(held) => {
                out.acquire.record(t0.elapsed());
                locker.unlock_detached(held);
            }
            Err(_) => out.errors += 1,
        }
    }
    out
}

async fn contend<L: Locker, E: Exec>(locker: &mut L, exec: &E, hold: Duration, log: &Shared) {
    // A failed call takes no turn: a subject whose calls fail shows no handoff at all.
    while !log.stop.load(Relaxed) {
        let called = Instant::now();
        let Ok(held) = locker.lock_wait("bench:hot").await else { continue };
        let (granted, slot) = (Instant::now(), L::slot(&held));
        exec.sleep(hold).await;
        let released = Instant::now();
        if locker.unlock(held).await.is_ok() {
            log.turns.lock().expect("not poisoned").push((called, granted, released, slot));
        }
    }
}
