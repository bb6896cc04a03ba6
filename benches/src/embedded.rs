//! mio-embedded: redlease-mio's `Driver` in a hand-written mio loop, as a host program (a
//! game server, a proxy) keeps its locks in its own event loop.
//!
//! With one locker (sequential, stalled) the host is a [`Locker`]: each call starts its
//! command and turns the loop until the driver reports its outcome. With many (lockers),
//! they are state machines in that one loop, each releasing its lock as soon as it is granted.

use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};
use redlease_core::{Event, LockId};
use redlease_mio::{Driver, LockOptions, new_token};

use crate::exec::Threads;
use crate::plan::{Plan, Shape, TTL, own_key};
use crate::subject::{Load, Locker, Target, config, released};
use crate::usage::Usage;

/// The embedded driver as a [`Target`]: the host as the one locker of the generic scenarios.
#[derive(Debug)]
pub struct Embed;

impl Target for Embed {
    type Exec = Threads;
    type Locker = Host;

    fn exec(&self) -> Result<Threads, String> {
        Ok(Threads)
    }

    async fn connect(&self, _: &Threads, urls: &[String]) -> Result<Host, String> {
        Host::connect(urls)
    }

    fn lockers(&self, urls: &[String], plan: &Plan, lockers: usize) -> Option<Result<Load, String>> {
        Some(host_lockers(urls, plan, lockers))
    }
}

/// The lockers scenario as state machines in the host's one loop.
fn host_lockers(urls: &[String], plan: &Plan, lockers: usize) -> Result<Load, String> {
    let (mut host, keys): (_, Vec<_>) = (Host::connect(urls)?, (0..lockers).map(|i| own_key(i, lockers)).collect());
    // Per lock under way: its locker and when it was asked for.
    let mut live: HashMap<LockId, (usize, Instant)> = HashMap::new();
    for (i, key) in keys.iter().enumerate() {
        live.insert(host.start(key)?, (i, Instant::now()));
    }
    let (opens, mut window, mut load) = (Instant::now() + plan.load.warmup, None, Load::default());
    loop {
        let now = host.turn(Some(window.map_or(opens, |(at, _)| at + plan.load.length)))?;
        match window {
            None if now >= opens => window = Some((now, Usage::now())),
            Some((at, start)) if now >= at + plan.load.length => {
                return Ok(Load { elapsed: now - at, usage: Usage::since(start), ..load });
            }
            _ => {}
        }
        while let Some(event) = host.driver.poll_event() {
            let (lock, outcome) = match event {
                Event::Acquired { lock, .. } => {
                    host.driver.release(now, lock).map_err(|e| format!("release refused: {e}"))?;
                    continue;
                }
                Event::AcquireFailed { lock, error } => (lock, Err(error.to_string())),
                Event::Released { lock, report } => (lock, released(report.outcome)),
                _ => continue,
            };
            let Some((i, asked)) = live.remove(&lock) else { continue };
            if window.is_some() {
                load.count(outcome.map(|()| now - asked));
            }
            live.insert(host.start(&keys[i])?, (i, Instant::now()));
        }
    }
}

/// The host program: its `Poll` and the driver registered in it.
#[derive(Debug)]
pub struct Host {
    poll: Poll,
    events: Events,
    driver: Driver,
}

impl Host {
    /// Register a driver and turn the loop until every node has been tried, then require a
    /// quorum ready (the driver's own readiness).
    fn connect(urls: &[String]) -> Result<Host, String> {
        let mut driver = Driver::new(config(urls, Shape::Mutex)?, Token(0)).map_err(|e| e.to_string())?;
        let poll = Poll::new().map_err(|e| e.to_string())?;
        driver.register(poll.registry(), Instant::now()).map_err(|e| e.to_string())?;
        let (mut host, deadline) =
            (Host { poll, events: Events::with_capacity(256), driver }, Instant::now() + Duration::from_secs(10));
        while !host.driver.all_nodes_tried() {
            if host.turn(Some(deadline))? >= deadline {
                return Err("nodes not connected after 10 s".into());
            }
        }
        host.driver.connected().map(|()| host).map_err(|e| e.to_string())
    }

    /// Flush, sleep until a socket is ready, the driver's deadline or `until`, and hand the
    /// events and the time to the driver; the time after the wake-up.
    fn turn(&mut self, until: Option<Instant>) -> Result<Instant, String> {
        let now = Instant::now();
        self.driver.flush(now);
        let next = self.driver.poll_timeout().into_iter().chain(until).min();
        match self.poll.poll(&mut self.events, next.map(|t| t.saturating_duration_since(now))) {
            Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(format!("poll: {e}")),
            _ => {}
        }
        let now = Instant::now();
        for event in self.events.iter() {
            self.driver.handle_event(now, event);
        }
        self.driver.handle_timeout(now);
        Ok(now)
    }

    fn start(&mut self, key: &str) -> Result<LockId, String> {
        let token = new_token().map_err(|e| e.to_string())?;
        self.driver.acquire(Instant::now(), &LockOptions::new(key, TTL), token.as_bytes()).map_err(|e| e.to_string())
    }

    /// Turn the loop until the driver reports `lock`'s outcome (events of other locks, such
    /// as detached releases, are passed over).
    fn outcome(&mut self, lock: LockId) -> Result<Event, String> {
        loop {
            self.turn(None)?;
            while let Some(event) = self.driver.poll_event() {
                if event.lock() == Some(lock)
                    && matches!(event, Event::Acquired { .. } | Event::AcquireFailed { .. } | Event::Released { .. })
                {
                    return Ok(event);
                }
            }
        }
    }
}

impl Locker for Host {
    type Held = LockId;

    async fn lock(&mut self, key: &str) -> Result<LockId, String> {
        let lock = self.start(key)?;
        match self.outcome(lock)? {
            Event::Acquired { .. } => Ok(lock),
            other => Err(format!("{other:?}")),
        }
    }

    async fn unlock(&mut self, lock: LockId) -> Result<(), String> {
        self.driver.release(Instant::now(), lock).map_err(|e| e.to_string())?;
        match self.outcome(lock)? {
            Event::Released { report, .. } => released(report.outcome),
            other => Err(format!("{other:?}")),
        }
    }

    fn unlock_detached(&mut self, lock: LockId) {
        // Written at the next turn of the loop; its outcome is passed over.
        let _ = self.driver.release(Instant::now(), lock);
    }
}
