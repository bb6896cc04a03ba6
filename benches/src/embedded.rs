//! redlease-mio's embeddable [`Driver`] in a hand-written mio loop: the "mio embedded"
//! subject. Lockers are small state machines inside that one loop, as in a host program
//! (a game server, a proxy) that keeps its locks in its own event loop.

use std::collections::{HashMap, HashSet};
use std::io;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};
use redlease_mio::{Driver, Event, LockId, LockOptions, ReleaseOutcome, new_token};

use crate::load::{LoadState, Window, keys};
use crate::plan::{CONTENDED_WAIT, LoadPlan, Scenario, SeqPlan, StallPlan};
use crate::seq::SeqRecorder;
use crate::stats::Samples;
use crate::subject::{Common, Contention, Role, Sequential, StallLevel, Style, Subject, Throughput};

/// Bound on connecting before a measurement.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The embedded mio driver as a subject.
#[derive(Debug)]
pub struct Embedded;

impl Subject for Embedded {
    fn name(&self) -> &str {
        "mio-embedded"
    }

    fn about(&self) -> String {
        "redlease-mio's Driver in a hand-written mio loop; lockers are state machines in that one thread".into()
    }

    fn role(&self) -> Role {
        Role::Adapter
    }

    fn style(&self) -> Style {
        Style::Blocking
    }

    fn supports(&self, scenario: Scenario) -> bool {
        scenario != Scenario::Handoff
    }

    fn sequential(&self, urls: &[String], common: Common, plan: SeqPlan) -> Result<Sequential, String> {
        let mut host = Host::connect(urls, common.ttl)?;
        let mut ctl = Seq { rec: SeqRecorder::new(plan), error: None };
        host.run(1, None, false, &mut ctl)?;
        match ctl.error {
            Some(e) => Err(e),
            None => Ok(ctl.rec.finish()),
        }
    }

    fn throughput(
        &self,
        urls: &[String],
        common: Common,
        plan: LoadPlan,
        lockers: usize,
    ) -> Result<Throughput, String> {
        let mut host = Host::connect(urls, common.ttl)?;
        let mut ctl = Load::new(lockers, plan, false);
        host.run(lockers, None, false, &mut ctl)?;
        let closed = ctl.state.close(ctl.window.take().ok_or("the window never opened")?);
        Ok(Throughput {
            lockers,
            cycles: closed.per_locker.iter().sum(),
            elapsed: closed.elapsed,
            cpu: closed.cpu,
            server_cpu: closed.server_cpu,
            latency: ctl.latency.into_dist(),
            errors: closed.errors,
            first_error: ctl.first_error,
        })
    }

    fn stalled(
        &self,
        urls: &[String],
        common: Common,
        plan: &StallPlan,
        stall: &mut dyn FnMut(usize),
    ) -> Result<Vec<StallLevel>, String> {
        let mut host = Host::connect(urls, common.ttl)?;
        let mut warm = Seq { rec: SeqRecorder::new(SeqPlan::alone(plan.warmup, 0)), error: None };
        if plan.warmup > 0 {
            host.run(1, None, false, &mut warm)?;
        }
        if let Some(e) = warm.error {
            return Err(e);
        }
        let mut levels = Vec::with_capacity(plan.levels.len());
        for &paused in &plan.levels {
            stall(paused);
            let mut ctl = Stall {
                paused,
                started: Instant::now(),
                max: plan.max_samples,
                cap: plan.cap,
                attempts: 0,
                acquire: Samples::with_capacity(plan.max_samples),
                level: StallLevel { paused, ..StallLevel::default() },
            };
            host.run(1, None, true, &mut ctl)?;
            ctl.level.acquire = ctl.acquire.into_dist();
            levels.push(ctl.level);
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
        let mut host = Host::connect(urls, common.ttl)?;
        let mut ctl = Load::new(lockers, plan, true);
        host.run(lockers, Some(CONTENDED_WAIT), false, &mut ctl)?;
        let closed = ctl.state.close(ctl.window.take().ok_or("the window never opened")?);
        Ok(Contention {
            per_locker: closed.per_locker,
            elapsed: closed.elapsed,
            errors: closed.errors,
            first_error: ctl.first_error,
        })
    }
}

/// What a scenario decides while the loop runs.
trait Control {
    /// The key locker `i` acquires next.
    fn key(&mut self, i: usize) -> String;
    /// Locker `i` acquired (`acquire`) and, unless releases are detached, released
    /// (`release`).
    fn done(&mut self, i: usize, acquire: Duration, release: Option<Duration>);
    /// Locker `i` failed.
    fn failed(&mut self, i: usize, error: String);
    /// Called after every turn of the loop: whether to go on. It may open or close a window.
    fn go_on(&mut self, now: Instant) -> bool;
    /// The next instant `go_on` wants to be asked at, if it is timed.
    fn deadline(&self) -> Option<Instant>;
}

/// Where one locker stands.
#[derive(Debug, Clone, Copy)]
struct Slot {
    lock: LockId,
    started: Instant,
    acquired: Option<Instant>,
}

/// The host program: a `Poll`, its events, and the driver registered in it.
struct Host {
    poll: Poll,
    events: Events,
    driver: Driver,
    ttl: Duration,
}

impl Host {
    fn connect(urls: &[String], ttl: Duration) -> Result<Host, String> {
        let config = crate::nodes::config(urls)?;
        let mut driver = Driver::new(config, Token(0)).map_err(|e| e.to_string())?;
        let poll = Poll::new().map_err(|e| e.to_string())?;
        driver.register(poll.registry(), Instant::now()).map_err(|e| e.to_string())?;
        let mut host = Host { poll, events: Events::with_capacity(256), driver, ttl };
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        while !host.driver.all_nodes_tried() {
            if host.turn(Some(deadline))? >= deadline {
                return Err("the nodes did not connect within 10 s".into());
            }
        }
        Ok(host)
    }

    /// Sleep until a socket is ready, the driver's next deadline or `until`; hand the
    /// events and the timeout to the driver. Returns the time after the wake-up.
    fn turn(&mut self, until: Option<Instant>) -> Result<Instant, String> {
        let now = Instant::now();
        self.driver.flush(now);
        let next = self.driver.poll_timeout().into_iter().chain(until).min();
        let timeout = next.map(|t| t.saturating_duration_since(now));
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        let now = Instant::now();
        for event in self.events.iter() {
            self.driver.handle_event(now, event);
        }
        self.driver.handle_timeout(now);
        Ok(now)
    }

    fn start(&mut self, key: &str, wait: Option<Duration>) -> Result<Slot, String> {
        let token = new_token().map_err(|e| e.to_string())?;
        let mut options = LockOptions::new(key, self.ttl);
        options.wait = wait;
        let started = Instant::now();
        let lock =
            self.driver.acquire(started, &options, token.as_bytes()).map_err(|e| format!("acquire refused: {e}"))?;
        Ok(Slot { lock, started, acquired: None })
    }

    /// Run `lockers` lockers until `ctl` says stop. Each acquires `ctl.key(i)` (retrying
    /// within `wait`, if given), then releases it; with `detach`, it starts its next
    /// acquisition as soon as it has released without waiting for the release's outcome.
    fn run(
        &mut self,
        lockers: usize,
        wait: Option<Duration>,
        detach: bool,
        ctl: &mut dyn Control,
    ) -> Result<(), String> {
        let mut slots: Vec<Option<Slot>> = vec![None; lockers];
        let mut by_lock: HashMap<LockId, usize> = HashMap::with_capacity(lockers);
        let mut detached: HashSet<LockId> = HashSet::new();
        let mut go_on = ctl.go_on(Instant::now());
        for (i, slot) in slots.iter_mut().enumerate().take(if go_on { lockers } else { 0 }) {
            let s = self.start(&ctl.key(i), wait)?;
            by_lock.insert(s.lock, i);
            *slot = Some(s);
        }
        while go_on {
            let now = self.turn(ctl.deadline())?;
            while let Some(event) = self.driver.poll_event() {
                let finished = match event {
                    Event::Acquired { lock, .. } => {
                        let Some(&i) = by_lock.get(&lock) else { continue };
                        let Some(slot) = slots[i].as_mut() else { continue };
                        slot.acquired = Some(now);
                        self.driver.release(now, lock).map_err(|e| format!("release refused: {e}"))?;
                        if !detach {
                            continue;
                        }
                        by_lock.remove(&lock);
                        detached.insert(lock);
                        ctl.done(i, now - slot.started, None);
                        i
                    }
                    Event::AcquireFailed { lock, error } => {
                        let Some(i) = by_lock.remove(&lock) else { continue };
                        ctl.failed(i, error.to_string());
                        i
                    }
                    Event::Released { lock, report } => {
                        if detached.remove(&lock) {
                            continue;
                        }
                        let Some(i) = by_lock.remove(&lock) else { continue };
                        let Some(slot) = slots[i] else { continue };
                        let acquired = slot.acquired.unwrap_or(now);
                        if report.outcome == ReleaseOutcome::Released {
                            ctl.done(i, acquired - slot.started, Some(now - acquired));
                        } else {
                            ctl.failed(i, format!("release: {report:?}"));
                        }
                        i
                    }
                    _ => continue,
                };
                slots[finished] = None;
                go_on = ctl.go_on(now);
                if go_on {
                    let s = self.start(&ctl.key(finished), wait)?;
                    by_lock.insert(s.lock, finished);
                    slots[finished] = Some(s);
                }
            }
            go_on = go_on && ctl.go_on(now);
        }
        // Abandon what is still being acquired (a later run must not find it held); what is
        // being released finishes in the background.
        let now = Instant::now();
        for slot in slots.into_iter().flatten() {
            if slot.acquired.is_none() {
                let _ = self.driver.cancel(now, slot.lock);
            }
        }
        Ok(())
    }
}

/// Sequential cycles, as the recorder counts and records them.
struct Seq {
    rec: SeqRecorder,
    error: Option<String>,
}

impl Control for Seq {
    fn key(&mut self, _: usize) -> String {
        self.rec.begin();
        self.rec.key().to_owned()
    }

    fn done(&mut self, _: usize, acquire: Duration, release: Option<Duration>) {
        self.rec.end(acquire, release.unwrap_or_default());
    }

    fn failed(&mut self, _: usize, error: String) {
        self.error.get_or_insert(format!("cycle {}: {error}", self.rec.index()));
    }

    fn go_on(&mut self, _: Instant) -> bool {
        self.error.is_none() && self.rec.more()
    }

    fn deadline(&self) -> Option<Instant> {
        None
    }
}

/// Timed load: a warm-up, then the window; own keys (throughput) or one key (contention).
struct Load {
    state: LoadState,
    plan: LoadPlan,
    contended: bool,
    started: Instant,
    window: Option<Window>,
    window_end: Option<Instant>,
    latency: Samples,
    first_error: Option<String>,
}

impl Load {
    fn new(lockers: usize, plan: LoadPlan, contended: bool) -> Self {
        Load {
            state: LoadState::new(lockers),
            plan,
            contended,
            started: Instant::now(),
            window: None,
            window_end: None,
            latency: Samples::with_capacity(1 << 16),
            first_error: None,
        }
    }
}

impl Control for Load {
    fn key(&mut self, i: usize) -> String {
        if self.contended { keys::CONTENDED.to_owned() } else { keys::own(i) }
    }

    fn done(&mut self, i: usize, acquire: Duration, release: Option<Duration>) {
        self.state.completed(i);
        if self.state.recording() {
            self.latency.push(acquire + release.unwrap_or_default());
        }
    }

    fn failed(&mut self, _: usize, error: String) {
        self.state.failed();
        self.first_error.get_or_insert(error);
    }

    fn go_on(&mut self, now: Instant) -> bool {
        match self.window_end {
            None if now >= self.started + self.plan.warmup => {
                self.window = Some(self.state.open());
                self.window_end = Some(Instant::now() + self.plan.window);
                true
            }
            Some(end) => now < end,
            None => true,
        }
    }

    fn deadline(&self) -> Option<Instant> {
        Some(self.window_end.unwrap_or(self.started + self.plan.warmup))
    }
}

/// One level of the stalled scenario: fresh keys, releases detached.
struct Stall {
    paused: usize,
    started: Instant,
    max: usize,
    cap: Duration,
    attempts: usize,
    acquire: Samples,
    level: StallLevel,
}

impl Control for Stall {
    fn key(&mut self, _: usize) -> String {
        self.attempts += 1;
        keys::stalled(self.paused, self.attempts - 1)
    }

    fn done(&mut self, _: usize, acquire: Duration, _: Option<Duration>) {
        self.acquire.push(acquire);
    }

    fn failed(&mut self, _: usize, error: String) {
        self.level.errors += 1;
        self.level.first_error.get_or_insert(error);
    }

    fn go_on(&mut self, now: Instant) -> bool {
        self.acquire.len() + (self.level.errors as usize) < self.max && now < self.started + self.cap
    }

    fn deadline(&self) -> Option<Instant> {
        Some(self.started + self.cap)
    }
}
