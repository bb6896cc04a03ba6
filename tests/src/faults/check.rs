//! The checker: from the workers' logs and the store's final counters to the counts of a
//! phase.
//!
//! - A holder's **window** runs from `acquired` (when `lock_with` returned) to the earlier of
//!   its `valid_until` and the moment it called `release`. Two windows that intersect are an
//!   **overlap**: two processes believed they held the lock at the same instant of the one
//!   monotonic clock.
//! - A **late write** was sent after its writer's `valid_until`.
//! - **Lost updates**: fenced — accepted fenced writes minus the final fenced counter; plain —
//!   plain writes minus the final plain counter.
//! - **Fence-order errors**: holders ordered by `acquired`; one whose fence is not above every
//!   earlier holder's.
//! - **Availability**: the share of 200 ms slots of the phase in which some holder's window
//!   was open.

use std::collections::BTreeMap;

use super::event::{Event, Fenced, Record};

/// Availability is counted in slots this long.
const SLOT_NS: u64 = 200_000_000;

/// One holder's acquisition, from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The worker.
    pub worker: usize,
    /// Its client.
    pub client: String,
    /// `lock_with` returned.
    pub acquired: u64,
    /// `valid_until`.
    pub until: u64,
    /// `release` was called, if it was.
    pub released: Option<u64>,
    /// The fencing token.
    pub fence: u64,
    /// Writes of this hold sent after `until`: `(sent, fenced outcome, lost signal at the
    /// time, valid_until passed by the worker's own check)`.
    pub late: Vec<(u64, Fenced, bool, bool)>,
}

impl Hold {
    /// The end of the window: the earlier of `valid_until` and the release call.
    pub fn end(&self) -> u64 {
        self.released.map_or(self.until, |r| r.min(self.until))
    }
}

/// The holds in the log, in the order they were acquired.
pub fn holds(records: &[Record]) -> Vec<Hold> {
    let mut open: BTreeMap<usize, Hold> = BTreeMap::new();
    let mut done = Vec::new();
    for r in records {
        match &r.event {
            Event::Acquired { t, fence, until, .. } => {
                if let Some(h) = open.remove(&r.worker) {
                    done.push(h);
                }
                let hold = Hold {
                    worker: r.worker,
                    client: r.client.clone(),
                    acquired: *t,
                    until: *until,
                    released: None,
                    fence: *fence,
                    late: Vec::new(),
                };
                open.insert(r.worker, hold);
            }
            Event::Write { t, fenced, lost, expired, .. } => {
                if let Some(h) = open.get_mut(&r.worker) {
                    if *t > h.until {
                        h.late.push((*t, *fenced, *lost, *expired));
                    }
                }
            }
            Event::Released { t, .. } => {
                if let Some(mut h) = open.remove(&r.worker) {
                    h.released = Some(*t);
                    done.push(h);
                }
            }
            _ => {}
        }
    }
    done.extend(open.into_values());
    done.sort_by_key(|h| (h.acquired, h.worker));
    done
}

/// Pairs of holds whose windows intersect, as indexes into `holds` (which is sorted by
/// `acquired`).
pub fn overlapping_pairs(holds: &[Hold]) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for (i, a) in holds.iter().enumerate() {
        for (j, b) in holds.iter().enumerate().skip(i + 1) {
            if b.acquired >= a.end() {
                // Sorted by start: later holds start later still, but an earlier-ending one
                // may be followed by one that starts before a longer one ends, so go on.
                continue;
            }
            if b.worker != a.worker && b.acquired < b.end() {
                pairs.push((i, j));
            }
        }
    }
    pairs
}

/// Number of overlapping pairs of holder windows in the log.
pub fn overlaps(records: &[Record]) -> usize {
    overlapping_pairs(&holds(records)).len()
}

/// The store's counters at the end of a phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Finals {
    /// The fenced counter.
    pub fenced: i64,
    /// The plain counter.
    pub plain: i64,
}

/// The counts of one phase.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Successful acquisitions.
    pub acquisitions: usize,
    /// Acquisitions by client (`tokio`, `mio`).
    pub by_client: BTreeMap<String, usize>,
    /// Pairs of overlapping holder windows.
    pub overlaps: usize,
    /// Writes sent after their writer's `valid_until`.
    pub late_writes: usize,
    /// Of those, the ones the fenced store accepted.
    pub late_accepted: usize,
    /// Fenced writes the store accepted.
    pub fenced_writes: usize,
    /// Fenced operations the store refused (stale reads and stale writes).
    pub refused: usize,
    /// Plain (unchecked) writes.
    pub plain_writes: usize,
    /// Accepted fenced writes that the final fenced counter does not reflect.
    pub lost_fenced: i64,
    /// Plain writes that the final plain counter does not reflect.
    pub lost_plain: i64,
    /// Holders whose fence was not above every earlier holder's.
    pub fence_order_errors: usize,
    /// Lock keys found without a TTL on the nodes after the phase.
    pub keys_without_ttl: usize,
    /// Share of 200 ms slots in which some holder's window was open.
    pub availability: f64,
    /// Failed acquisitions by kind.
    pub errors: BTreeMap<String, usize>,
    /// Failed acquisitions that were not a typed outcome of the algorithm (held, unreachable,
    /// too slow, or a wait bound that ran out on one of these).
    pub untyped_errors: usize,
}

/// Whether a logged error kind is a typed outcome of the algorithm.
pub fn is_typed(kind: &str) -> bool {
    matches!(kind.strip_prefix("wait:").unwrap_or(kind), "held" | "unreachable" | "too_slow")
}

/// Count everything for the log of one phase that ran from `span.0` to `span.1`.
pub fn check(records: &[Record], span: (u64, u64), finals: Finals, keys_without_ttl: usize) -> Report {
    let holds = holds(records);
    let mut report = Report { acquisitions: holds.len(), keys_without_ttl, ..Report::default() };
    for h in &holds {
        *report.by_client.entry(h.client.clone()).or_default() += 1;
        report.late_writes += h.late.len();
        report.late_accepted += h.late.iter().filter(|l| l.1 == Fenced::Accepted).count();
    }
    report.overlaps = overlapping_pairs(&holds).len();

    for r in records {
        match &r.event {
            Event::Read { accepted: false, .. } => report.refused += 1,
            Event::Write { fenced, .. } => {
                report.plain_writes += 1;
                match fenced {
                    Fenced::Accepted => report.fenced_writes += 1,
                    Fenced::Rejected => report.refused += 1,
                    Fenced::Skipped => {}
                }
            }
            Event::AcquireFailed { kind, .. } => {
                *report.errors.entry(kind.clone()).or_default() += 1;
                if !is_typed(kind) {
                    report.untyped_errors += 1;
                }
            }
            _ => {}
        }
    }
    report.lost_fenced = report.fenced_writes as i64 - finals.fenced;
    report.lost_plain = report.plain_writes as i64 - finals.plain;

    let mut highest = None;
    for h in &holds {
        if highest.is_some_and(|m| h.fence <= m) {
            report.fence_order_errors += 1;
        }
        highest = highest.max(Some(h.fence));
    }

    let (from, to) = span;
    let slots = (to.saturating_sub(from)).div_ceil(SLOT_NS).max(1);
    let mut open = vec![false; slots as usize];
    for h in &holds {
        let (a, b) = (h.acquired.max(from), h.end().min(to));
        if a >= b {
            continue;
        }
        let first = (a - from) / SLOT_NS;
        let last = ((b - from - 1) / SLOT_NS).min(slots - 1);
        for slot in &mut open[first as usize..=last as usize] {
            *slot = true;
        }
    }
    report.availability = open.iter().filter(|o| **o).count() as f64 / slots as f64;
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn rec(worker: usize, event: Event) -> Record {
        Record { worker, client: if worker % 2 == 0 { "tokio" } else { "mio" }.into(), event }
    }

    /// One clean cycle of `worker` from `at` (ms): acquire, read, write, release after 20 ms.
    fn cycle(worker: usize, at: u64, fence: u64, counter: i64) -> Vec<Record> {
        let t = at * MS;
        vec![
            rec(worker, Event::Acquired { start: t - MS, t, fence, until: t + 990 * MS, token: "t".into() }),
            rec(
                worker,
                Event::Read { t: t + MS, end: t + 2 * MS, fence, accepted: true, fenced: counter, plain: counter },
            ),
            rec(
                worker,
                Event::Write {
                    t: t + 10 * MS,
                    end: t + 11 * MS,
                    fence,
                    fenced: Fenced::Accepted,
                    plain: counter + 1,
                    lost: false,
                    expired: false,
                },
            ),
            rec(worker, Event::Released { t: t + 20 * MS, end: t + 21 * MS, outcome: "released".into(), lost: false }),
        ]
    }

    #[test]
    fn a_clean_history_counts_nothing_wrong() {
        let mut log = Vec::new();
        for i in 0..10u64 {
            log.extend(cycle(i as usize % 3, 100 + i * 25, i + 1, i as i64));
        }
        log.push(rec(1, Event::AcquireFailed { start: 0, t: MS, kind: "wait:held".into() }));
        let report = check(&log, (0, 1000 * MS), Finals { fenced: 10, plain: 10 }, 0);
        assert_eq!(report.acquisitions, 10);
        assert_eq!((report.overlaps, report.late_writes, report.lost_fenced, report.lost_plain), (0, 0, 0, 0));
        assert_eq!((report.fence_order_errors, report.refused, report.untyped_errors), (0, 0, 0));
        assert_eq!(report.errors.get("wait:held"), Some(&1));
        // Windows lie within 100..345 ms of 0..1000: slots 0 and 1 of five are open.
        assert!((report.availability - 0.4).abs() < 1e-9, "{}", report.availability);
    }

    #[test]
    fn the_checker_catches_overlaps_lost_updates_order_errors_and_late_writes() {
        // Worker 0 holds from 100 ms (fence 5) and writes at 1500 ms, after its validity
        // (1090 ms); worker 1 acquires at 300 ms while 0's window is open, with a smaller
        // fence (a restarted node forgot the counters).
        let mut log = vec![
            rec(0, Event::Acquired { start: 99 * MS, t: 100 * MS, fence: 5, until: 1090 * MS, token: "t".into() }),
            rec(0, Event::Read { t: 101 * MS, end: 102 * MS, fence: 5, accepted: true, fenced: 0, plain: 0 }),
            rec(1, Event::Acquired { start: 299 * MS, t: 300 * MS, fence: 2, until: 1290 * MS, token: "t".into() }),
            rec(1, Event::Read { t: 301 * MS, end: 302 * MS, fence: 2, accepted: false, fenced: 0, plain: 0 }),
            rec(
                1,
                Event::Write {
                    t: 400 * MS,
                    end: 401 * MS,
                    fence: 2,
                    fenced: Fenced::Skipped,
                    plain: 1,
                    lost: false,
                    expired: false,
                },
            ),
            rec(1, Event::Released { t: 410 * MS, end: 411 * MS, outcome: "released".into(), lost: false }),
            rec(
                0,
                Event::Write {
                    t: 1500 * MS,
                    end: 1501 * MS,
                    fence: 5,
                    fenced: Fenced::Accepted,
                    plain: 1,
                    lost: true,
                    expired: true,
                },
            ),
            rec(0, Event::Released { t: 1510 * MS, end: 1511 * MS, outcome: "not_held".into(), lost: true }),
        ];
        log.push(rec(2, Event::AcquireFailed { start: 0, t: MS, kind: "closed".into() }));
        // The fenced counter took one write: 1. The plain one took two writes of 1: one
        // update lost.
        let report = check(&log, (0, 2000 * MS), Finals { fenced: 1, plain: 1 }, 1);
        assert_eq!(report.overlaps, 1);
        assert_eq!((report.late_writes, report.late_accepted), (1, 1));
        assert_eq!(report.fence_order_errors, 1);
        assert_eq!(report.refused, 1);
        assert_eq!(report.fenced_writes, 1);
        assert_eq!(report.plain_writes, 2);
        assert_eq!((report.lost_fenced, report.lost_plain), (0, 1));
        assert_eq!(report.untyped_errors, 1);
        assert_eq!(report.keys_without_ttl, 1);
        let holds = holds(&log);
        assert_eq!(holds[0].late, vec![(1500 * MS, Fenced::Accepted, true, true)]);
        assert_eq!(holds[0].end(), 1090 * MS);
    }

    #[test]
    fn lost_updates_are_writes_the_final_counter_does_not_show() {
        let mut log = cycle(0, 100, 1, 0);
        log.extend(cycle(1, 200, 2, 0)); // read 0 again: its write of 1 overwrote the first
        let report = check(&log, (0, 300 * MS), Finals { fenced: 1, plain: 1 }, 0);
        assert_eq!((report.lost_fenced, report.lost_plain), (1, 1));
        assert_eq!(report.overlaps, 0);
    }

    #[test]
    fn a_window_ends_at_the_release_call_or_the_validity_whichever_is_first() {
        // Worker 0 never releases (its window ends at valid_until, 1090 ms); worker 1 takes
        // over at 1100 ms: no overlap. Worker 2 acquires at 1000 ms: overlap with 0.
        let log = vec![
            rec(0, Event::Acquired { start: 0, t: 100 * MS, fence: 1, until: 1090 * MS, token: "t".into() }),
            rec(1, Event::Acquired { start: 0, t: 1100 * MS, fence: 2, until: 2090 * MS, token: "t".into() }),
            rec(1, Event::Released { t: 1200 * MS, end: 1201 * MS, outcome: "released".into(), lost: false }),
        ];
        assert_eq!(overlaps(&log), 0);
        let mut log = log;
        log.push(rec(2, Event::Acquired { start: 0, t: 1000 * MS, fence: 3, until: 1990 * MS, token: "t".into() }));
        assert_eq!(overlaps(&log), 2, "2 overlaps 0 (until 1090) and 1 (until its release at 1200)");
        assert!(is_typed("wait:unreachable") && is_typed("held") && !is_typed("closed") && !is_typed("wait:other"));
    }
}
