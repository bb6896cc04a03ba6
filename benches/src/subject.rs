//! What a subject offers the runner, and the figures each scenario returns.

use std::time::Duration;

use crate::plan::{Plan, Scenario};
use crate::stats::Hist;
use crate::turns::Recorder;
use crate::usage::Usage;

/// Who a subject is: its name (in the tables and for `--only`), the quorum floor it takes
/// turns with in the sequential scenario (the floor of its I/O style; a floor names itself),
/// and the scenarios it takes part in.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)] // Said above.
pub struct Info {
    pub name: &'static str,
    pub floor: &'static str,
    pub scenarios: &'static [Scenario],
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
    fn sequential(&self, urls: &[String], rec: Recorder) -> Result<Seq, String> {
        let _ = (urls, rec);
        Err(format!("{} does not take part in this scenario", self.name()))
    }
    /// `lockers` lockers, each on its own key, through the plan's window.
    fn lockers(&self, urls: &[String], plan: &Plan, lockers: usize) -> Result<Load, String> {
        let _ = (urls, plan, lockers);
        Err(format!("{} does not take part in this scenario", self.name()))
    }
    /// Acquisitions of fresh keys (each released without waiting), first with every node
    /// up, then after calling `pause`, which stops one node.
    fn stalled(&self, urls: &[String], plan: &Plan, pause: &(dyn Fn() + Sync)) -> Result<[Level; 2], String> {
        let _ = (urls, plan, pause);
        Err(format!("{} does not take part in this scenario", self.name()))
    }
    /// `contenders` clients of their own on one key, each acquiring it (waiting as long as
    /// it takes), holding it for the plan's hold, releasing it, and again.
    fn handoff(&self, urls: &[String], plan: &Plan, contenders: usize) -> Result<Handoff, String> {
        let _ = (urls, plan, contenders);
        Err(format!("{} does not take part in this scenario", self.name()))
    }
}

/// The figures of sequential cycles: whole lock+unlock cycles, acquisitions alone, releases
/// alone, and the CPU time over the recorded cycles.
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // Said above.
pub struct Seq {
    pub cycle: Hist,
    pub acquire: Hist,
    pub release: Hist,
    pub usage: Usage,
}

impl Seq {
    /// Add another round's figures.
    pub fn add(&mut self, other: &Seq) {
        // A fresh `Seq` has no server figure: the first round's becomes the sum.
        self.usage = if self.cycle.is_empty() { other.usage } else { self.usage + other.usage };
        self.cycle.add(&other.cycle);
        self.acquire.add(&other.acquire);
        self.release.add(&other.release);
    }

    /// Client and server CPU time per recorded cycle.
    pub fn per_cycle(&self) -> (Option<Duration>, Option<Duration>) {
        self.usage.per(self.cycle.len())
    }
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
}

/// One level of the stalled scenario: the latency of the acquisitions, and the failed ones.
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // Said above.
pub struct Level {
    pub acquire: Hist,
    pub errors: u64,
}

/// The figures of the handoff scenario: handoffs (from a release call to the next grant),
/// waits (from a lock call to its grant), grants in the window, its length, and the lock or
/// release calls that failed in it.
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // Said above.
pub struct Handoff {
    pub handoff: Hist,
    pub wait: Hist,
    pub grants: u64,
    pub elapsed: Duration,
    pub failed: u64,
}
