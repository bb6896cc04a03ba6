//! What a subject offers the runner, and the figures each scenario returns.

use std::time::Duration;

use crate::plan::{Plan, Scenario, Shape};
use crate::stats::Hist;
use crate::turns::Recorder;
/// The figures of sequential cycles, kept by the turn recorder that takes them.
pub use crate::turns::Seq;
use crate::usage::Usage;

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

/// One client under test. Each measurement connects to `urls` (the nodes of a cluster
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
    fn sequential(&self, _urls: &[String], _rec: Recorder) -> Result<Seq, String> {
        absent(self.name())
    }
    /// `lockers` lockers, each on its own key, through the plan's window.
    fn lockers(&self, _urls: &[String], _plan: &Plan, _lockers: usize) -> Result<Load, String> {
        absent(self.name())
    }
    /// Acquisitions of fresh keys (each released without waiting), first with every node
    /// up, then after calling `pause`, which stops one node.
    fn stalled(&self, _urls: &[String], _plan: &Plan, _pause: &(dyn Fn() + Sync)) -> Result<[Level; 2], String> {
        absent(self.name())
    }
    /// `contenders` clients of their own on one key (a mutex or a semaphore), each acquiring
    /// it (waiting as long as it takes), holding it for the plan's hold, releasing it, and again.
    fn handoff(&self, _urls: &[String], _plan: &Plan, _contenders: usize) -> Result<Handoff, String> {
        absent(self.name())
    }
}

/// The error of a measurement the subject does not take part in (the runner never asks).
fn absent<T>(name: &str) -> Result<T, String> {
    Err(format!("{name} does not take part in this scenario"))
}

/// The figures of a lockers window: the cycles completed in it, its length, their latency,
/// the CPU time used, the failed cycles and the first failure.
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // Said above.
pub struct Load {
    pub cycles: u64,
    pub elapsed: Duration,
    pub latency: Hist,
    pub usage: Usage,
    pub errors: u64,
    pub first_error: Option<String>,
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

/// One level of the stalled scenario: the latency of the acquisitions, and the failed ones.
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // Said above.
pub struct Level {
    pub acquire: Hist,
    pub errors: u64,
}

/// The figures of the handoff scenario: handoffs (from a slot's release call to its next
/// grant), waits (from a lock call to its grant), grants in the window, its length, and how
/// many could hold the lock at once.
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // Said above.
pub struct Handoff {
    pub handoff: Hist,
    pub wait: Hist,
    pub grants: u64,
    pub elapsed: Duration,
    pub holders: u32,
}
