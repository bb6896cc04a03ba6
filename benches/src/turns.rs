//! The noise method: two clients on one cluster taking turns of a few dozen cycles.
//!
//! Measured one after the other, two clients' p50s differ by the machine's drift between
//! their windows as well as by what they cost. Taking turns of a few milliseconds puts both
//! under the same spells of noise, so the ratio of their figures measures the clients. Each
//! turn's first cycle is run but not recorded: it pays for waking a client that sat idle
//! through the other's turn. Each side locks a key of its own.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::plan;
use crate::stats::Hist;
use crate::usage::Usage;

#[derive(Debug, Default)]
struct Shared {
    /// Whose turn it is, and which sides have left.
    state: Mutex<(usize, [bool; 2])>,
    changed: Condvar,
}

/// One side of a pair taking turns; side 0 goes first.
#[derive(Debug)]
pub struct Side {
    shared: Arc<Shared>,
    me: usize,
}

impl Side {
    /// The two sides of a new pair.
    pub fn pair() -> (Side, Side) {
        let shared = Arc::new(Shared::default());
        (Side { shared: Arc::clone(&shared), me: 0 }, Side { shared, me: 1 })
    }

    fn state(&self) -> MutexGuard<'_, (usize, [bool; 2])> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Block until it is this side's turn, or the other side has left.
    fn wait(&self) {
        let mut state = self.state();
        while state.0 != self.me && !state.1[1 - self.me] {
            state = self.shared.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Hand the turn to the other side; with `leave`, for good.
    fn pass(&self, leave: bool) {
        let mut state = self.state();
        state.0 = 1 - self.me;
        state.1[self.me] |= leave;
        drop(state);
        self.shared.changed.notify_all();
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
        self.usage = self.usage + other.usage;
        self.cycle.add(&other.cycle);
        self.acquire.add(&other.acquire);
        self.release.add(&other.release);
    }
}

/// What a subject's sequential loop calls around each cycle: [`begin`](Self::begin) before
/// it (waits for the turn, opens the CPU window), [`end`](Self::end) after it (records, and
/// at a turn's end closes the window and passes the turn), [`finish`](Self::finish) for the
/// figures. Dropped, finished or not, it leaves the pair, so the other side never waits for
/// a turn that will not come.
#[derive(Debug)]
pub struct Recorder {
    warmup: usize,
    total: usize,
    turn: usize,
    side: Side,
    begun: usize,
    recording: bool,
    seq: Seq,
    window: Option<Usage>,
}

impl Recorder {
    /// One side of a pair, with the plan's counts (turns of at least 2 cycles).
    pub fn new(plan: plan::Seq, side: Side) -> Recorder {
        let (warmup, total, turn) = (plan.warmup, plan.warmup + plan.cycles, plan.turn.max(2));
        Recorder { warmup, total, turn, side, begun: 0, recording: false, seq: Seq::default(), window: None }
    }

    /// The key to lock: each side has its own.
    pub fn key(&self) -> &'static str {
        ["bench:seq:0", "bench:seq:1"][self.side.me]
    }

    /// The index of the cycle under way, for error messages.
    pub fn index(&self) -> usize {
        self.begun.saturating_sub(1)
    }

    /// Before a cycle: `false` when every cycle is done.
    pub fn begin(&mut self) -> bool {
        if self.begun == self.total {
            return false;
        }
        let first_of_turn = self.begun % self.turn == 0;
        if first_of_turn {
            self.side.wait();
        }
        self.recording = self.begun >= self.warmup && !first_of_turn;
        if self.recording && self.window.is_none() {
            self.window = Some(Usage::now());
        }
        self.begun += 1;
        true
    }

    /// After a cycle that took `acquire` then `release`.
    pub fn end(&mut self, acquire: Duration, release: Duration) {
        if self.recording {
            self.seq.cycle.record(acquire + release);
            self.seq.acquire.record(acquire);
            self.seq.release.record(release);
        }
        if self.begun % self.turn == 0 || self.begun == self.total {
            if let Some(start) = self.window.take() {
                self.seq.usage = self.seq.usage + Usage::since(start);
            }
            self.side.pass(false);
        }
    }

    /// The figures of the recorded cycles.
    pub fn finish(mut self) -> Seq {
        std::mem::take(&mut self.seq)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.side.pass(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sides take turns, each turn's first cycle unrecorded; a side that left is not
    /// waited for.
    #[test]
    fn a_pair_takes_turns() {
        let log = Mutex::new(Vec::new());
        let run = |mut rec: Recorder| {
            while rec.begin() {
                log.lock().unwrap().push(rec.key());
                rec.end(Duration::from_micros(10), Duration::from_micros(5));
            }
            rec.finish().cycle
        };
        let (a, b) = Side::pair();
        let (ca, cb) = std::thread::scope(|s| {
            let other = s.spawn(|| run(Recorder::new(plan::Seq { rounds: 1, warmup: 4, cycles: 12, turn: 4 }, b)));
            (run(Recorder::new(plan::Seq { rounds: 1, warmup: 4, cycles: 12, turn: 4 }, a)), other.join().unwrap())
        });
        let expected: Vec<_> = (0..8).flat_map(|t| [["bench:seq:0", "bench:seq:1"][t % 2]; 4]).collect();
        assert_eq!(std::mem::take(&mut *log.lock().unwrap()), expected);
        assert_eq!((ca.len(), cb.len(), crate::stats::dur(ca.p50())), (9, 9, "15 µs".into()), "3 turns of 3");
        let (a, b) = Side::pair();
        let seq = plan::Seq { rounds: 1, warmup: 0, cycles: 6, turn: 2 };
        drop(Recorder::new(seq, a));
        assert_eq!(run(Recorder::new(seq, b)).len(), 3);
    }
}
