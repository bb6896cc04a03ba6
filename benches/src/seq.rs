//! The sequential measurement's bookkeeping, shared by every subject's loop, with the turns of
//! the paired form (see [`crate::turns`]).

use std::time::Duration;

use crate::cpu::ClientUse;
use crate::load::keys;
use crate::plan::SeqPlan;
use crate::server::Mark;
use crate::stats::Samples;
use crate::subject::Sequential;
#[cfg(test)]
use crate::turns::Turn;

/// What a subject's sequential loop calls around each cycle: [`SeqRecorder::begin`] before
/// it (waits for the turn, opens the CPU window), [`SeqRecorder::end`] after it (records,
/// closes the window and passes the turn at a block's end), [`SeqRecorder::finish`] for the
/// figures. Paired, whoever runs the loop leaves the pair ([`crate::turns::Turn::leave`]) when
/// it returns, finished or not, so that the other side never waits for a turn that will not
/// come (the runner does).
#[derive(Debug)]
pub struct SeqRecorder {
    plan: SeqPlan,
    /// Cycles begun.
    begun: usize,
    /// Whether the cycle under way is recorded.
    recording: bool,
    cycle: Samples,
    acquire: Samples,
    release: Samples,
    server_cpu: Option<Duration>,
    client: ClientUse,
    /// The CPU readings when the current window opened.
    window: Option<(Mark, ClientUse)>,
}

impl SeqRecorder {
    /// A recorder for `plan`.
    pub fn new(plan: SeqPlan) -> SeqRecorder {
        let n = plan.cycles;
        SeqRecorder {
            plan,
            begun: 0,
            recording: false,
            cycle: Samples::with_capacity(n),
            acquire: Samples::with_capacity(n),
            release: Samples::with_capacity(n),
            server_cpu: Some(Duration::ZERO),
            client: ClientUse::default(),
            window: None,
        }
    }

    /// The key to lock: each side of a pair has its own, so that one side's late release
    /// on a slow node never meets the other side's acquire.
    pub fn key(&self) -> &'static str {
        match &self.plan.turn {
            Some(t) if t.side() == 1 => keys::SEQUENTIAL_OTHER,
            _ => keys::SEQUENTIAL,
        }
    }

    fn total(&self) -> usize {
        self.plan.warmup + self.plan.cycles
    }

    /// Whether cycles remain to be begun.
    pub fn more(&self) -> bool {
        self.begun < self.total()
    }

    /// The index of the cycle under way (counting the warm-up), for error messages.
    pub fn index(&self) -> usize {
        self.begun.saturating_sub(1)
    }

    /// Before a cycle: `false` when every cycle is done. Paired, a block's first cycle waits
    /// for this side's turn.
    pub fn begin(&mut self) -> bool {
        if !self.more() {
            return false;
        }
        let i = self.begun;
        let first_of_block = self.plan.turn.as_ref().is_some_and(|t| i % t.block() == 0);
        if let Some(turn) = self.plan.turn.as_ref().filter(|_| first_of_block) {
            turn.wait();
        }
        self.recording = i >= self.plan.warmup && !first_of_block;
        if self.recording && self.window.is_none() {
            self.window = Some((Mark::now(), ClientUse::now()));
        }
        self.begun += 1;
        true
    }

    /// After a cycle that took `acquire` then `release`.
    pub fn end(&mut self, acquire: Duration, release: Duration) {
        if self.recording {
            self.cycle.push(acquire + release);
            self.acquire.push(acquire);
            self.release.push(release);
        }
        let done = self.begun;
        let block_end = self.plan.turn.as_ref().is_some_and(|t| done % t.block() == 0);
        if block_end || done == self.total() {
            self.close_window();
            if let Some(turn) = &self.plan.turn {
                turn.pass();
            }
        }
    }

    fn close_window(&mut self) {
        if let Some((mark, client)) = self.window.take() {
            self.server_cpu = self.server_cpu.zip(mark.since()).map(|(a, b)| a + b);
            self.client = self.client + ClientUse::since(client);
        }
    }

    /// The figures of the recorded cycles.
    pub fn finish(mut self) -> Sequential {
        self.close_window();
        let cycles = self.cycle.len() as u64;
        Sequential {
            cycle: self.cycle.into_dist(),
            acquire: self.acquire.into_dist(),
            release: self.release.into_dist(),
            server_cpu: self.server_cpu,
            client: self.client,
            cycles,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn run(rec: &mut SeqRecorder, log: &Mutex<Vec<usize>>) {
        while rec.begin() {
            log.lock().unwrap().push(rec.plan.turn.as_ref().map_or(9, Turn::side));
            rec.end(Duration::from_micros(10), Duration::from_micros(5));
        }
    }

    #[test]
    fn alone_records_every_cycle_after_the_warmup() {
        let mut rec = SeqRecorder::new(SeqPlan::alone(3, 7));
        let log = Mutex::new(Vec::new());
        run(&mut rec, &log);
        assert_eq!(log.lock().unwrap().len(), 10);
        let seq = rec.finish();
        assert_eq!(seq.cycles, 7);
        assert_eq!(seq.cycle.p50(), Some(Duration::from_micros(15)));
    }

    /// Two sides take turns in blocks, each block's first cycle unrecorded, and neither waits
    /// for a side that has left.
    #[test]
    fn a_pair_takes_turns_in_blocks() {
        let (a, b) = Turn::pair(4);
        let base = SeqPlan::alone(4, 12);
        let log = Mutex::new(Vec::new());
        let (sa, sb) = std::thread::scope(|s| {
            let ha = s.spawn(|| {
                let mut rec = SeqRecorder::new(base.paired(a));
                run(&mut rec, &log);
                rec.finish()
            });
            let hb = s.spawn(|| {
                let mut rec = SeqRecorder::new(base.paired(b));
                assert_eq!(rec.key(), keys::SEQUENTIAL_OTHER);
                run(&mut rec, &log);
                rec.finish()
            });
            (ha.join().unwrap(), hb.join().unwrap())
        });
        let order = log.into_inner().unwrap();
        let expected: Vec<usize> = (0..8).flat_map(|block| [block % 2; 4]).collect();
        assert_eq!(order, expected, "blocks of 4, side 0 first");
        // 12 cycles after the warm-up = 3 blocks of 4, each losing its first cycle.
        assert_eq!((sa.cycles, sb.cycles), (9, 9));
    }

    #[test]
    fn a_side_that_leaves_does_not_block_the_other() {
        let (a, b) = Turn::pair(2);
        let base = SeqPlan::alone(0, 6);
        a.leave();
        let mut rec = SeqRecorder::new(base.paired(b));
        let log = Mutex::new(Vec::new());
        run(&mut rec, &log);
        assert_eq!(rec.finish().cycles, 3);
    }
}
