//! The noise method: two clients on one cluster taking turns of a few dozen cycles.
//!
//! Measured one after the other, two clients' p50s differ by the machine's drift between
//! their windows as well as by what they cost. Taking turns of a few milliseconds puts both
//! under the same spells of noise, so the ratio of their figures measures the clients. Each
//! turn's first cycle is run but not recorded: it pays for waking a client that sat idle
//! through the other's turn. Each side locks a key of its own.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::plan::Plan;
use crate::subject::Seq;
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
    side: Option<Side>,
    begun: usize,
    recording: bool,
    seq: Seq,
    usage: Option<Usage>,
    window: Option<Usage>,
}

impl Recorder {
    /// One side of a pair, with the plan's counts.
    pub fn paired(plan: &Plan, side: Side) -> Recorder {
        Recorder::new(plan.seq.warmup, plan.seq.cycles, plan.seq.turn, Some(side))
    }

    /// `warmup` then `cycles` cycles in turns of `turn` (at least 2), alone or as `side`.
    pub fn new(warmup: usize, cycles: usize, turn: usize, side: Option<Side>) -> Recorder {
        let (seq, usage, window) = (Seq::default(), None, None);
        Recorder {
            warmup,
            total: warmup + cycles,
            turn: turn.max(2),
            side,
            begun: 0,
            recording: false,
            seq,
            usage,
            window,
        }
    }

    /// The key to lock.
    pub fn key(&self) -> &'static str {
        if self.side.as_ref().is_some_and(|s| s.me == 1) { "bench:seq:1" } else { "bench:seq:0" }
    }

    /// The index of the cycle under way, for error messages.
    pub fn index(&self) -> usize {
        self.begun.saturating_sub(1)
    }

    fn more(&self) -> bool {
        self.begun < self.total
    }

    /// Before a cycle: `false` when every cycle is done.
    pub fn begin(&mut self) -> bool {
        if !self.more() {
            return false;
        }
        let first_of_turn = self.begun % self.turn == 0;
        if let Some(side) = self.side.as_ref().filter(|_| first_of_turn) {
            side.wait();
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
            self.close_window();
            if let Some(side) = &self.side {
                side.pass(false);
            }
        }
    }

    fn close_window(&mut self) {
        if let Some(start) = self.window.take() {
            let used = Usage::since(start);
            self.usage = Some(self.usage.map_or(used, |u| u + used));
        }
    }

    /// The figures of the recorded cycles.
    pub fn finish(mut self) -> Seq {
        self.close_window();
        let mut seq = std::mem::take(&mut self.seq);
        seq.usage = self.usage.unwrap_or_default();
        seq
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(side) = &self.side {
            side.pass(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mut rec: Recorder, log: &Mutex<Vec<&'static str>>) -> Seq {
        while rec.begin() {
            log.lock().unwrap().push(rec.key());
            rec.end(Duration::from_micros(10), Duration::from_micros(5));
        }
        rec.finish()
    }

    /// Two sides take turns, each turn's first cycle unrecorded, and neither waits for a
    /// side that has left.
    #[test]
    fn a_pair_takes_turns() {
        let (a, b) = Side::pair();
        let log = Mutex::new(Vec::new());
        let (sa, sb) = std::thread::scope(|s| {
            let ha = s.spawn(|| run(Recorder::new(4, 12, 4, Some(a)), &log));
            let hb = s.spawn(|| run(Recorder::new(4, 12, 4, Some(b)), &log));
            (ha.join().unwrap(), hb.join().unwrap())
        });
        let expected: Vec<_> = (0..8).flat_map(|t| [["bench:seq:0", "bench:seq:1"][t % 2]; 4]).collect();
        assert_eq!(log.into_inner().unwrap(), expected);
        assert_eq!((sa.cycle.len(), sb.cycle.len()), (9, 9), "3 recorded turns of 4, less their first cycles");
        assert_eq!(crate::stats::dur(sa.cycle.p50()), "15 µs");

        let (a, b) = Side::pair();
        drop(Recorder::new(0, 6, 2, Some(a)));
        assert_eq!(run(Recorder::new(0, 6, 2, Some(b)), &Mutex::default()).cycle.len(), 3);
    }
}
