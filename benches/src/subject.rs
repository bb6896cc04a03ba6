//! What every subject (adapter, floor, peer) offers the runner, and what it measures.

use std::time::Duration;

use crate::plan::{HandoffPlan, LoadPlan, Scenario, SeqPlan, StallPlan};
use crate::stats::{Dist, Spread};

/// What a subject is, for the tables and the ratios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A redlease adapter: the targets apply to it.
    Adapter,
    /// A hand-written client with no library in between: the reference.
    Floor,
    /// Another Redlock crate from crates.io.
    Peer,
}

/// How a subject waits for I/O; an adapter is compared with the floor of its style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Futures on an async runtime.
    Async,
    /// Blocking calls or a hand-rolled event loop (mio).
    Blocking,
}

/// Settings every measurement shares.
#[derive(Clone, Copy, Debug)]
pub struct Common {
    /// TTL of every lock.
    pub ttl: Duration,
}

/// One client under test.
///
/// Each method connects to `urls` (a fresh cluster started for this measurement), runs the
/// measurement and tears its client down. An `Err` is a one-line reason (the runner reports
/// it and goes on); a scenario the subject does not take part in is never called (see
/// [`Subject::supports`]). Shared between threads: the paired measurement runs two
/// subjects' sequential loops at once.
pub trait Subject: Sync {
    /// Short name for tables and `--only` (e.g. `tokio-mt`).
    fn name(&self) -> &str;
    /// One line saying what it is and how it is run.
    fn about(&self) -> String;
    /// Adapter, floor or peer.
    fn role(&self) -> Role;
    /// Async or blocking.
    fn style(&self) -> Style;
    /// How the nodes of its clusters listen (default: plain TCP): a TLS subject gets
    /// `rediss://` URLs.
    fn listen(&self) -> redlease_cluster::Listen {
        redlease_cluster::Listen::Tcp
    }
    /// Whether it takes part in `scenario` (a floor that reads every reply cannot take a
    /// stalled node, for instance).
    fn supports(&self, scenario: Scenario) -> bool;
    /// Lock+unlock cycles on one key.
    fn sequential(&self, urls: &[String], common: Common, plan: SeqPlan) -> Result<Sequential, String>;
    /// `lockers` concurrent lockers, each on its own key, for the plan's window.
    fn throughput(&self, urls: &[String], common: Common, plan: LoadPlan, lockers: usize)
    -> Result<Throughput, String>;
    /// Acquire latency per level of `plan.levels`: before measuring a level the subject calls
    /// `stall(paused)`, which pauses nodes until `paused` of them are stopped. Each lock is
    /// released in the background (without waiting for it) on a key of its own, so that only
    /// the acquisitions are timed.
    fn stalled(
        &self,
        urls: &[String],
        common: Common,
        plan: &StallPlan,
        stall: &mut dyn FnMut(usize),
    ) -> Result<Vec<StallLevel>, String>;
    /// `lockers` lockers on one key, each retrying until it gets it, then releasing it.
    fn contention(&self, urls: &[String], common: Common, plan: LoadPlan, lockers: usize)
    -> Result<Contention, String>;

    /// `contenders` clients of their own on one key, each acquiring it (waiting as long as it
    /// takes), holding it for `plan.hold`, releasing it, and again. Only the subjects that
    /// list [`Scenario::Handoff`] are asked.
    fn handoff(
        &self,
        urls: &[String],
        common: Common,
        plan: &HandoffPlan,
        contenders: usize,
    ) -> Result<Handoff, String> {
        let _ = (urls, common, plan, contenders);
        Err(format!("{} does not take part in the handoff scenario", self.name()))
    }
}

/// The outcome of [`Subject::handoff`].
#[derive(Clone, Debug, Default)]
pub struct Handoff {
    /// Contenders.
    pub contenders: usize,
    /// From a holder's release call to the next holder's grant.
    pub handoff: Dist,
    /// From a contender's lock call to its grant, every acquisition in the window.
    pub wait: Dist,
    /// Acquisitions granted in the window.
    pub acquisitions: u64,
    /// The window's actual length.
    pub elapsed: Duration,
    /// Lock calls that gave up (or failed otherwise) in the window.
    pub gave_up: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// One contender's acquisitions of a free key, each after an idle gap as long as the hold
    /// (measured with the first contender count only): what one round costs when the
    /// machine has just been idle, as it has at a handoff.
    pub idle_acquire: Dist,
}

impl Handoff {
    /// Acquisitions per second.
    pub fn rate(&self) -> f64 {
        self.acquisitions as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The longest wait over the median wait: how unevenly waiting is shared out.
    pub fn fairness(&self) -> Option<f64> {
        let (max, p50) = (self.wait.quantile(1.0)?, self.wait.p50()?);
        Some(max.as_secs_f64() / p50.as_secs_f64().max(1e-9))
    }
}

/// A measurement taken in rounds and pooled into one (see
/// [`Plan::rounds`](crate::plan::Plan::rounds)).
pub trait Pooled {
    /// Add the figures of another round of the same measurement.
    fn pool(&mut self, other: Self);
    /// The figure that per-round ratios compare: the cycle p50 in seconds (sequential) or
    /// the cycles per second (throughput).
    fn headline(&self) -> Option<f64>;
}

/// Both present: their sum; either missing: missing.
fn sum(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    Some(a? + b?)
}

/// The outcome of [`Subject::sequential`].
#[derive(Clone, Debug, Default)]
pub struct Sequential {
    /// Whole lock+unlock cycles.
    pub cycle: Dist,
    /// Acquisitions alone.
    pub acquire: Dist,
    /// Releases alone.
    pub release: Dist,
    /// The `redis-server` processes' CPU time over the recorded cycles, if readable.
    pub server_cpu: Option<Duration>,
    /// The client process's CPU time and thread sleeps over the recorded cycles.
    pub client: crate::cpu::ClientUse,
    /// Recorded cycles.
    pub cycles: u64,
}

impl Sequential {
    /// Client CPU time per recorded cycle.
    pub fn client_cpu_per_cycle(&self) -> Option<Duration> {
        (self.cycles > 0).then(|| self.client.cpu / u32::try_from(self.cycles).unwrap_or(u32::MAX))
    }

    /// Client thread sleeps (voluntary context switches) per recorded cycle.
    pub fn sleeps_per_cycle(&self) -> Option<f64> {
        (self.cycles > 0).then(|| self.client.sleeps as f64 / self.cycles as f64)
    }

    /// Server CPU time per recorded cycle, summed over the nodes.
    pub fn server_cpu_per_cycle(&self) -> Option<Duration> {
        let cpu = self.server_cpu?;
        (self.cycles > 0).then(|| cpu / u32::try_from(self.cycles).unwrap_or(u32::MAX))
    }

    /// Client and server CPU time per recorded cycle together: what one cycle costs the
    /// machine when the client and the nodes share its cores.
    pub fn all_cpu_per_cycle(&self) -> Option<Duration> {
        sum(self.server_cpu_per_cycle(), self.client_cpu_per_cycle())
    }
}

impl Pooled for Sequential {
    fn pool(&mut self, other: Self) {
        self.cycle.merge(other.cycle);
        self.acquire.merge(other.acquire);
        self.release.merge(other.release);
        self.server_cpu = sum(self.server_cpu, other.server_cpu);
        self.client = self.client + other.client;
        self.cycles += other.cycles;
    }

    fn headline(&self) -> Option<f64> {
        self.cycle.p50().map(|d| d.as_secs_f64())
    }
}

/// A subject's and its floor's sequential figures, taken in turns on one cluster (the
/// paired scenario).
#[derive(Clone, Debug, Default)]
pub struct Paired {
    /// The floor it took turns with.
    pub floor_name: String,
    /// The subject's recorded cycles.
    pub subject: Sequential,
    /// The floor's, in the blocks between.
    pub floor: Sequential,
}

impl Paired {
    /// The subject's cycle p50 over the floor's.
    pub fn p50_ratio(&self) -> Option<f64> {
        Some(self.subject.cycle.p50()?.as_secs_f64() / self.floor.cycle.p50()?.as_secs_f64().max(1e-12))
    }
}

impl Pooled for Paired {
    fn pool(&mut self, other: Self) {
        self.subject.pool(other.subject);
        self.floor.pool(other.floor);
    }

    /// The round's own ratio of the p50s.
    fn headline(&self) -> Option<f64> {
        self.p50_ratio()
    }
}

/// The outcome of [`Subject::throughput`].
#[derive(Clone, Debug, Default)]
pub struct Throughput {
    /// Lockers.
    pub lockers: usize,
    /// Cycles completed in the window.
    pub cycles: u64,
    /// The window's actual length.
    pub elapsed: Duration,
    /// Process CPU time (user + system) in the window.
    pub cpu: Duration,
    /// The `redis-server` processes' CPU time in the window, if readable.
    pub server_cpu: Option<Duration>,
    /// Cycle latency of the cycles that ended in the window.
    pub latency: Dist,
    /// Failed cycles in the window (a lock not acquired, an error).
    pub errors: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
}

impl Throughput {
    /// Cycles per second.
    pub fn rate(&self) -> f64 {
        self.cycles as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Client CPU time per cycle, if any cycle completed.
    pub fn cpu_per_cycle(&self) -> Option<Duration> {
        (self.cycles > 0).then(|| self.cpu / u32::try_from(self.cycles).unwrap_or(u32::MAX))
    }

    /// Server CPU time per cycle (all nodes together), if measured and any cycle completed.
    pub fn server_cpu_per_cycle(&self) -> Option<Duration> {
        let cpu = self.server_cpu?;
        (self.cycles > 0).then(|| cpu / u32::try_from(self.cycles).unwrap_or(u32::MAX))
    }
}

impl Pooled for Throughput {
    fn pool(&mut self, other: Self) {
        self.cycles += other.cycles;
        self.elapsed += other.elapsed;
        self.cpu += other.cpu;
        self.server_cpu = sum(self.server_cpu, other.server_cpu);
        self.latency.merge(other.latency);
        self.errors += other.errors;
        self.first_error = self.first_error.take().or(other.first_error);
    }

    fn headline(&self) -> Option<f64> {
        (self.elapsed > Duration::ZERO).then(|| self.rate())
    }
}

/// One level of [`Subject::stalled`].
#[derive(Clone, Debug, Default)]
pub struct StallLevel {
    /// Paused nodes.
    pub paused: usize,
    /// Latency of the successful acquisitions.
    pub acquire: Dist,
    /// Acquisitions that failed.
    pub errors: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// Set when the subject was still blocked in one acquisition after this long (it has no
    /// timeout of its own): nothing could be measured at this level or after it.
    pub blocked: Option<Duration>,
}

/// The outcome of [`Subject::contention`].
#[derive(Clone, Debug, Default)]
pub struct Contention {
    /// Acquisitions per locker in the window.
    pub per_locker: Vec<u64>,
    /// The window's actual length.
    pub elapsed: Duration,
    /// Failed attempts reported to the caller in the window (not counting retries inside a
    /// library).
    pub errors: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
}

impl Contention {
    /// Acquisitions per second, all lockers together.
    pub fn rate(&self) -> f64 {
        self.per_locker.iter().sum::<u64>() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// How evenly the acquisitions were shared out.
    pub fn spread(&self) -> Option<Spread> {
        Spread::of(&self.per_locker)
    }
}
