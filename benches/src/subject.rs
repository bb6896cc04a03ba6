//! What a subject offers the runner ([`Subject`]) and the figures each scenario returns. Every
//! subject is a [`Generic`]: a runtime and its lockers ([`Target`], [`Locker`]), with every
//! scenario written once for them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlease_core::{Config, ReleaseOutcome, Retry, TlsSettings, Transport};

use crate::exec::Exec;
use crate::plan::{Plan, Scenario, Shape, own_key};
use crate::stats::Hist;
use crate::turns::Recorder;
/// The figures of sequential cycles, kept by the turn recorder that takes them.
pub use crate::turns::Seq;
use crate::usage::{self, Usage};

/// Who a subject is: its name (in the tables and for `--only`), the subject it takes turns
/// with in the sequential scenario (the quorum floor of its I/O style, which names itself; for
/// a semaphore, the mutex of its adapter), the scenarios it takes part in, and what it locks.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)] // Said above.
pub struct Info {
    pub name: &'static str,
    pub partner: &'static str,
    pub scenarios: &'static [Scenario],
    pub shape: Shape,
}

/// One client under test. Each measurement connects to `urls` (the nodes
/// started for it) and tears its client down before it returns; an `Err` is a one-line
/// reason. The runner asks only for the scenarios the subject [`takes`](Subject::takes).
pub trait Subject: Sync {
    /// Who it is.
    fn info(&self) -> &Info;
    /// Its name.
    fn name(&self) -> &'static str {
        self.info().name
    }
    /// Whether it takes part in `scenario`.
    fn takes(&self, scenario: Scenario) -> bool {
        self.info().scenarios.contains(&scenario)
    }
    /// Sequential cycles on one key, as `rec` says (it takes the turns).
    fn sequential(&self, urls: &[String], rec: Recorder) -> Result<Seq, String>;
    /// `lockers` lockers, each on its own key, through the plan's window.
    fn lockers(&self, urls: &[String], plan: &Plan, lockers: usize) -> Result<Load, String>;
    /// Acquisitions of fresh keys (each released without waiting), first with every node
    /// up, then after calling `pause`, which stops one node: each level's acquisitions as the
    /// cycles of a [`Load`] (its window and CPU time unused).
    fn stalled(&self, urls: &[String], plan: &Plan, pause: &(dyn Fn() + Sync)) -> Result<[Load; 2], String>;
    /// `contenders` clients of their own on one key (a mutex or a semaphore), each acquiring
    /// it (waiting as long as it takes), holding it for the plan's hold, releasing it, and again.
    fn handoff(&self, urls: &[String], plan: &Plan, contenders: usize) -> Result<Handoff, String>;
}

/// The figures of a lockers window: the cycles completed in it, its length, their latency,
/// the CPU time used, the failed cycles, the first failure, and each server's CPU time in it
/// (of the generic lockers: the cluster scenario's).
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // Said above.
pub struct Load {
    pub cycles: u64,
    pub elapsed: Duration,
    pub latency: Hist,
    pub usage: Usage,
    pub errors: u64,
    pub first_error: Option<String>,
    pub servers: Vec<Duration>,
}

impl Load {
    /// Cycles per second.
    pub fn rate(&self) -> f64 {
        self.cycles as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Count a cycle that ended in the window: its latency, or why it failed.
    pub fn count(&mut self, outcome: Result<Duration, String>) {
        match outcome {
            Ok(took) => {
                self.cycles += 1;
                self.latency.record(took);
            }
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    /// Add another locker's counts.
    pub fn merge(&mut self, other: Load) {
        self.cycles += other.cycles;
        self.errors += other.errors;
        self.latency.add(&other.latency);
        self.first_error = self.first_error.take().or(other.first_error);
    }
}

/// The figures of the handoff scenario: handoffs (from a permit's release call to its next
/// grant), waits (from a lock call to its grant), grants in the window, its length, and how
/// many could hold the lock at once; how long the grants were held in all, each contender's
/// grants, and the grants of a permit to the contender that released it last while others
/// waited (re-takes).
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // Said above.
pub struct Handoff {
    pub handoff: Hist,
    pub wait: Hist,
    pub grants: u64,
    pub elapsed: Duration,
    pub holders: u32,
    pub held: Duration,
    pub per_contender: Vec<u64>,
    pub retakes: u64,
}

/// How to set up one subject: its runtime and its lockers.
pub trait Target: Send + Sync + 'static {
    /// The runtime.
    type Exec: Exec;
    /// One locker.
    type Locker: Locker;
    /// A fresh runtime for one measurement.
    fn exec(&self) -> Result<Self::Exec, String>;
    /// A locker with a client of its own, connected to `urls` (inside `exec.block_on`).
    fn connect(&self, exec: &Self::Exec, urls: &[String]) -> impl Future<Output = Result<Self::Locker, String>>;
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
pub trait Locker: Sized + Send + 'static {
    /// A held lock.
    type Held: Send + 'static;
    /// Acquire `key` as the library's plain lock call does (its own retries included).
    fn lock(&mut self, key: &str) -> impl Future<Output = Result<Self::Held, String>> + Send;
    /// Release and wait for the outcome.
    fn unlock(&mut self, held: Self::Held) -> impl Future<Output = Result<(), String>> + Send;
    /// Acquire `key`, waiting (as the library waits) until it is ours.
    fn lock_wait(&mut self, _key: &str) -> impl Future<Output = Result<Self::Held, String>> + Send {
        async { Err("this subject cannot wait for a lock".to_owned()) }
    }
    /// Release without waiting for the outcome (by default: drop it, as a guard releases).
    fn unlock_detached(&mut self, held: Self::Held) {
        drop(held);
    }
    /// Another locker on this one's client (for the generic lockers scenario).
    fn fork(&self) -> Result<Self, String> {
        Err("this subject's lockers share no client".to_owned())
    }
    /// The semaphore permit it holds (a mutex is permit 0).
    fn permit(_held: &Self::Held) -> u16 {
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
            let mut locker = self.target.connect(&exec, urls).await?;
            let cycles = async move {
                while rec.begin() {
                    let t0 = Instant::now();
                    let held = locker.lock(rec.key()).await.map_err(|e| format!("lock: {e}"))?;
                    let t1 = Instant::now();
                    locker.unlock(held).await.map_err(|e| format!("unlock: {e}"))?;
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
            let first = self.target.connect(&exec, urls).await?;
            let state = Arc::new(Shared::default());
            let mut tasks = Vec::with_capacity(lockers);
            for i in 0..lockers {
                let (mut locker, state) = (first.fork()?, Arc::clone(&state));
                let key = own_key(i, lockers);
                tasks.push(exec.spawn(async move { cycles(&mut locker, &key, &state).await }));
            }
            exec.sleep(plan.load.warmup).await;
            let (at, start, each) = (Instant::now(), Usage::now(), usage::each());
            state.recording.store(true, Relaxed);
            exec.sleep(plan.load.length).await;
            state.recording.store(false, Relaxed);
            let (elapsed, usage, servers) = (at.elapsed(), Usage::since(start), usage::each().zip(each));
            let servers = servers.map(|(now, then)| now.iter().zip(then).map(|(now, then)| *now - then).collect());
            let mut load = Load { elapsed, usage, servers: servers.unwrap_or_default(), ..Load::default() };
            state.stop.store(true, Relaxed);
            for task in tasks {
                load.merge(task.await);
            }
            Ok(load)
        })
    }

    fn stalled(&self, urls: &[String], plan: &Plan, pause: &(dyn Fn() + Sync)) -> Result<[Load; 2], String> {
        let exec = self.target.exec()?;
        exec.block_on(async {
            let mut locker = self.target.connect(&exec, urls).await?;
            let mut levels: [Load; 2] = Default::default();
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
            let mut tasks = Vec::new();
            for who in 0..contenders {
                let (mut locker, log, e) = (self.target.connect(&exec, urls).await?, Arc::clone(&log), exec.clone());
                let hold = plan.hold;
                tasks.push(exec.spawn(async move { contend(&mut locker, &e, hold, &log, who).await }));
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
            // Each grant's handoff counts from the release call of the permit's previous holder
            // (a mutex is one permit): the latest release of any permit may have freed another.
            turns.sort_by_key(|t| t.granted);
            let holders = if let Shape::Semaphore(limit) = self.info.shape { limit } else { 1 };
            let mut freed = HashMap::new();
            let per_contender = vec![0; contenders];
            let mut out = Handoff { elapsed: to - from, holders, per_contender, ..Handoff::default() };
            for &Turn { called, granted, released, permit, who } in &turns {
                let before = freed.insert(permit, (released, who));
                if granted >= from && granted < to {
                    out.grants += 1;
                    out.held += released - granted;
                    out.per_contender[who] += 1;
                    out.wait.record(granted - called);
                    if let Some((before, last)) = before {
                        out.handoff.record(granted.saturating_duration_since(before));
                        // With more contenders than permits, others always wait.
                        out.retakes += u64::from(last == who && contenders > holders as usize);
                    }
                }
            }
            Ok(out)
        })
    }
}

/// What the tasks of a timed window share with the thread that times it: whether to stop,
/// whether the window is open, and the handoff contenders' turns.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    recording: AtomicBool,
    turns: Mutex<Vec<Turn>>,
}

/// One grant of the handoff scenario: when its lock call was made, when it was granted and
/// released, the permit held (0 for a mutex) and which contender held it.
#[derive(Clone, Copy, Debug)]
struct Turn {
    called: Instant,
    granted: Instant,
    released: Instant,
    permit: u16,
    who: usize,
}

/// Lock and unlock `key` until told to stop; the cycles that ended while the window was open.
async fn cycles<L: Locker>(locker: &mut L, key: &str, state: &Shared) -> Load {
    let mut load = Load::default();
    while !state.stop.load(Relaxed) {
        let t0 = Instant::now();
        let outcome = match locker.lock(key).await {
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
async fn stall_level<L: Locker>(locker: &mut L, level: usize, max: usize, cap: Duration) -> Load {
    let (start, mut out) = (Instant::now(), Load::default());
    for j in 0..max {
        if start.elapsed() >= cap {
            break;
        }
        let t0 = Instant::now();
        let outcome = locker.lock(&format!("bench:stall:{level}:{j}")).await;
        let took = t0.elapsed();
        out.count(outcome.map(|held| locker.unlock_detached(held)).map(|()| took));
    }
    out
}

async fn contend<L: Locker, E: Exec>(locker: &mut L, exec: &E, hold: Duration, log: &Shared, who: usize) {
    // A failed call takes no turn: a subject whose calls fail shows no handoff at all.
    while !log.stop.load(Relaxed) {
        let called = Instant::now();
        let Ok(held) = locker.lock_wait("bench:hot").await else { continue };
        let (granted, permit) = (Instant::now(), L::permit(&held));
        exec.sleep(hold).await;
        let released = Instant::now();
        if locker.unlock(held).await.is_ok() {
            log.turns.lock().expect("not poisoned").push(Turn { called, granted, released, permit, who });
        }
    }
}

/// The config for `urls`, for a subject locking `shape`: the defaults, except 3 attempts
/// 20–200 ms apart instead of waiting up to 10 s (what the peers do); [`Shape::Replicated`]
/// nodes count a grant once one replica has it (within 20 ms, what `?min_replicas=1` gives);
/// the benchmark's TLS nodes are trusted through their CA.
pub fn config(urls: &[String], shape: Shape) -> Result<Config, String> {
    let retry = Retry::new(3, Duration::from_millis(20), Duration::from_millis(200));
    let mut config = Config::from_urls(urls).map_err(|e| e.to_string())?.retry(retry);
    if shape == Shape::Replicated {
        config.nodes = config.nodes.into_iter().map(|n| n.min_replicas(1, Duration::from_millis(20))).collect();
    }
    for node in config.nodes.iter_mut().filter(|n| n.transport == Transport::Tls) {
        let files =
            redlease_servers::tls_files_for(node.port).ok_or("a TLS node that no servers of this run started")?;
        node.tls = Some(TlsSettings::new().ca_file(&files.ca));
    }
    Ok(config)
}

/// A release report's outcome as the bench wants it.
pub(crate) fn released(outcome: ReleaseOutcome) -> Result<(), String> {
    match outcome {
        ReleaseOutcome::Released => Ok(()),
        other => Err(format!("not released: {other:?}")),
    }
}
