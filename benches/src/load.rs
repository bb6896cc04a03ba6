//! State shared by concurrent lockers and the thread that times the window.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cpu::process_cpu_time;
use crate::server;
use crate::stats::Samples;
use crate::subject::Handoff;

/// Flags and per-locker counters of one timed measurement.
#[derive(Debug)]
pub(crate) struct LoadState {
    /// Lockers stop after their current cycle.
    pub(crate) stop: AtomicBool,
    /// The window is open: record latencies and count errors.
    pub(crate) recording: AtomicBool,
    /// Completed cycles (or acquisitions) per locker, since the start.
    pub(crate) done: Vec<AtomicU64>,
    /// Failures while the window was open.
    pub(crate) errors: AtomicU64,
}

impl LoadState {
    pub(crate) fn new(lockers: usize) -> Self {
        LoadState {
            stop: AtomicBool::new(false),
            recording: AtomicBool::new(false),
            done: (0..lockers).map(|_| AtomicU64::new(0)).collect(),
            errors: AtomicU64::new(0),
        }
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub(crate) fn recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    /// One cycle of locker `i` completed.
    pub(crate) fn completed(&self, i: usize) {
        self.done[i].fetch_add(1, Ordering::Relaxed);
    }

    /// One failure; counted only while the window is open.
    pub(crate) fn failed(&self) {
        if self.recording() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn counts(&self) -> Vec<u64> {
        self.done.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    /// Open the window: take the counters, the clock and the CPU time, start recording.
    pub(crate) fn open(&self) -> Window {
        let window =
            Window { counts: self.counts(), cpu: process_cpu_time(), server: server::Mark::now(), at: Instant::now() };
        self.recording.store(true, Ordering::Relaxed);
        window
    }

    /// Close the window and tell the lockers to stop.
    pub(crate) fn close(&self, window: Window) -> Closed {
        let at = Instant::now();
        let cpu = process_cpu_time();
        let server_cpu = window.server.since();
        let counts = self.counts();
        self.recording.store(false, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
        Closed {
            per_locker: counts.iter().zip(&window.counts).map(|(b, a)| b - a).collect(),
            elapsed: at - window.at,
            cpu: cpu.saturating_sub(window.cpu),
            server_cpu,
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

/// The counters when the window opened.
#[derive(Debug)]
pub(crate) struct Window {
    counts: Vec<u64>,
    cpu: Duration,
    server: server::Mark,
    at: Instant,
}

/// What happened inside the window.
#[derive(Debug)]
pub(crate) struct Closed {
    pub(crate) per_locker: Vec<u64>,
    pub(crate) elapsed: Duration,
    pub(crate) cpu: Duration,
    pub(crate) server_cpu: Option<Duration>,
    pub(crate) errors: u64,
}

/// One acquisition of the handoff scenario: when it was asked for, granted, and released.
#[derive(Clone, Copy, Debug)]
struct Turn {
    called: Instant,
    granted: Instant,
    released: Instant,
}

/// What the handoff contenders share, whatever runs them: their turns, failures, and the
/// stop flag.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    stop: AtomicBool,
    turns: Mutex<Vec<Turn>>,
    failed: Mutex<Vec<(Instant, String)>>,
}

impl Turns {
    /// Contenders stop after their current turn.
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Tell the contenders to stop.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// One turn: asked for at `called`, granted at `granted`, released from `released` on.
    pub(crate) fn turn(&self, called: Instant, granted: Instant, released: Instant) {
        self.turns.lock().expect("not poisoned").push(Turn { called, granted, released });
    }

    /// A lock or release call failed now.
    pub(crate) fn failed(&self, error: String) {
        self.failed.lock().expect("not poisoned").push((Instant::now(), error));
    }

    /// The figures of the turns granted in `[from, to)`: each grant's handoff is measured from
    /// the release call of the turn granted before it. `idle`: the idle acquisitions measured
    /// beside them.
    pub(crate) fn summary(&self, contenders: usize, from: Instant, to: Instant, idle: Samples) -> Handoff {
        let mut list: Vec<Turn> = self.turns.lock().expect("not poisoned").clone();
        list.sort_by_key(|t| t.granted);
        let (mut handoff, mut wait) = (Samples::default(), Samples::default());
        let mut acquisitions = 0;
        for (i, t) in list.iter().enumerate() {
            if t.granted < from || t.granted >= to {
                continue;
            }
            acquisitions += 1;
            wait.push(t.granted - t.called);
            if let Some(prev) = i.checked_sub(1).map(|p| list[p]) {
                handoff.push(t.granted.saturating_duration_since(prev.released));
            }
        }
        let failed = self.failed.lock().expect("not poisoned");
        let in_window: Vec<&(Instant, String)> = failed.iter().filter(|(at, _)| *at >= from && *at < to).collect();
        Handoff {
            contenders,
            handoff: handoff.into_dist(),
            wait: wait.into_dist(),
            acquisitions,
            elapsed: to - from,
            gave_up: in_window.len() as u64,
            first_error: in_window.first().map(|(_, e)| e.clone()),
            idle_acquire: idle.into_dist(),
        }
    }
}

/// Keys of the scenarios (every measurement runs on a fresh cluster).
pub(crate) mod keys {
    /// The one key of the sequential scenario.
    pub(crate) const SEQUENTIAL: &str = "bench:seq";
    /// The second side of a paired sequential measurement.
    pub(crate) const SEQUENTIAL_OTHER: &str = "bench:seq:other";
    /// The one key every contender wants.
    pub(crate) const CONTENDED: &str = "bench:hot";
    /// The key of the acquisitions after an idle gap (handoff scenario).
    pub(crate) const IDLE: &str = "bench:idle";

    /// Locker `i`'s own key under load.
    pub(crate) fn own(i: usize) -> String {
        format!("bench:tp:{i}")
    }

    /// A fresh key per acquisition of the stalled scenario.
    pub(crate) fn stalled(paused: usize, j: usize) -> String {
        format!("bench:stall:{paused}:{j}")
    }

    /// A fresh key per warm-up acquisition of the stalled scenario.
    pub(crate) fn warmup(j: usize) -> String {
        format!("bench:warm:{j}")
    }
}
