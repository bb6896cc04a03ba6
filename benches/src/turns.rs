//! The noise method (`docs/benchmarks.md`): two clients on the same servers taking turns of a few
//! dozen cycles, so that both live through the same spells of noise; each side locks a key of
//! its own, and each turn's first cycle (which wakes a client idle through the other's turn)
//! is run but not recorded.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::plan;
use crate::stats::Hist;
use crate::usage::Usage;

/// What the two sides of a pair share: whose turn it is, and which sides have left.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<(usize, [bool; 2])>,
    changed: Condvar,
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
    shared: Arc<Shared>,
    /// Which side it is: 0 goes first.
    me: usize,
    begun: usize,
    recording: bool,
    seq: Seq,
    window: Option<Usage>,
}

impl Recorder {
    /// The two sides of a new pair, with the plan's counts (turns of at least 2 cycles).
    pub fn pair(plan: plan::Seq) -> (Recorder, Recorder) {
        let (warmup, total, turn, shared) = (plan.warmup, plan.warmup + plan.cycles, plan.turn.max(2), Arc::default());
        let side = |me| {
            let (seq, shared) = (Seq::default(), Arc::clone(&shared));
            Recorder { warmup, total, turn, shared, me, begun: 0, recording: false, seq, window: None }
        };
        (side(0), side(1))
    }

    /// The key to lock: each side has its own.
    pub fn key(&self) -> &'static str {
        ["bench:seq:0", "bench:seq:1"][self.me]
    }

    /// Before a cycle: `false` when every cycle is done.
    pub fn begin(&mut self) -> bool {
        if self.begun == self.total {
            return false;
        }
        let first_of_turn = self.begun % self.turn == 0;
        let mut state = self.state();
        while first_of_turn && state.0 != self.me && !state.1[1 - self.me] {
            state = self.shared.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        drop(state);
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
            self.pass(false);
        }
    }

    fn state(&self) -> MutexGuard<'_, (usize, [bool; 2])> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hand the turn to the other side; with `leave`, for good.
    fn pass(&self, leave: bool) {
        let mut state = self.state();
        state.0 = 1 - self.me;
        state.1[self.me] |= leave;
        drop(state);
        self.shared.changed.notify_all();
    }

    /// The figures of the recorded cycles.
    pub fn finish(mut self) -> Seq {
        std::mem::take(&mut self.seq)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.pass(true);
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
        let (a, b) = Recorder::pair(plan::Seq { rounds: 1, warmup: 4, cycles: 12, turn: 4 });
        let (ca, cb) = std::thread::scope(|s| {
            let other = s.spawn(|| run(b));
            (run(a), other.join().unwrap())
        });
        let expected: Vec<_> = (0..8).flat_map(|t| [["bench:seq:0", "bench:seq:1"][t % 2]; 4]).collect();
        assert_eq!(std::mem::take(&mut *log.lock().unwrap()), expected);
        assert_eq!((ca.count(), cb.count(), crate::stats::dur(ca.p50())), (9, 9, "15 µs".into()), "3 turns of 3");
        let (a, b) = Recorder::pair(plan::Seq { rounds: 1, warmup: 0, cycles: 6, turn: 2 });
        drop(a);
        assert_eq!(run(b).count(), 3);
    }
}
