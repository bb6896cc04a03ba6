//! The checker: from the workers' logs and the store's final counters to the counts of a
//! phase.
//!
//! - A holder's **window** runs from `acquired` (when `lock_with` returned) to the earlier of
//!   its `valid_until` and the moment it called `release`. Two windows that intersect, of holds
//!   that exclude each other, are an **overlap**: two processes believed they held the lock at
//!   the same instant of the one monotonic clock. Holds of a mutex exclude each other; holds
//!   of a semaphore when they share a permit; holds of a reader-writer lock unless both read.
//! - **Peak holders**: the most holders whose windows were open at one instant (for a
//!   semaphore, the most permits); a semaphore's holders **beyond the limit** are the
//!   acquisitions that took the count above it.
//! - A reader reads the store when it has the lock and again at the end of its hold: a
//!   **change under a reader** is a hold whose two reads differ (a writer wrote meanwhile).
//! - A **late write** was sent after its writer's `valid_until`. It is **after a newer
//!   holder** when a holder that excludes it (of its permit, for a semaphore), acquired after
//!   its writer, had a read accepted by the store before it was sent: the store has seen a
//!   newer fence (or a reader's epoch) and must refuse it. A late write that no newer holder
//!   preceded at the store conflicts with no one's work (a stall of the whole machine makes
//!   such writes), and the store accepts it.
//! - **Lost updates**: fenced — accepted fenced writes minus the final fenced counter; plain —
//!   plain writes minus the final plain counter.
//! - **Fence-order errors**: holders ordered by `acquired`; one whose fence is not above every
//!   earlier holder's (for a semaphore, every earlier holder of each of its permits). For a
//!   reader-writer lock, a writer's fence must be above every earlier writer's and at least
//!   every earlier reader's epoch, and a reader's epoch at least every earlier writer's fence.
//! - **Availability**: the share of 200 ms intervals of the phase in which some holder's window
//!   was open.

use std::collections::BTreeMap;

use super::event::{Event, Fenced, LockKind, Record};

/// Availability is counted in intervals this long.
const INTERVAL_NS: u64 = 200_000_000;

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
    /// The fencing token (a reader's: the writer epoch it read under).
    pub fence: u64,
    /// Which lock.
    pub kind: LockKind,
    /// A semaphore's permits.
    pub permits: Vec<u16>,
    /// Writes of this hold sent after `until`.
    pub late: Vec<Late>,
    /// Reads of this hold.
    pub reads: Vec<StoreRead>,
}

/// A write sent after its writer's `valid_until`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Late {
    /// Sent.
    pub sent: u64,
    /// What the fenced store did.
    pub fenced: Fenced,
    /// The lost signal had fired when it was sent.
    pub lost: bool,
    /// `valid_until` had passed by the worker's own check when it was sent.
    pub expired: bool,
    /// A semaphore's permit.
    pub permit: Option<u16>,
}

/// A read of the store by a holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreRead {
    /// Answered.
    pub end: u64,
    /// The fence check accepted it.
    pub accepted: bool,
    /// The fenced counter (0 if refused).
    pub fenced: i64,
    /// The plain counter.
    pub plain: i64,
    /// A semaphore's permit.
    pub permit: Option<u16>,
}

impl Hold {
    /// The end of the window: the earlier of `valid_until` and the release call.
    pub fn end(&self) -> u64 {
        self.released.map_or(self.until, |r| r.min(self.until))
    }

    /// How many permits it counts for: those it holds for a semaphore, else 1.
    pub fn weight(&self) -> usize {
        self.permits.len().max(1)
    }

    /// Whether this hold and `other` may not be held at once.
    pub fn excludes(&self, other: &Hold) -> bool {
        if self.kind == LockKind::Semaphore || other.kind == LockKind::Semaphore {
            self.permits.iter().any(|s| other.permits.contains(s))
        } else {
            self.kind.excludes(other.kind)
        }
    }
}

/// The holds in the log, in the order they were acquired.
pub fn holds(records: &[Record]) -> Vec<Hold> {
    let mut open: BTreeMap<usize, Hold> = BTreeMap::new();
    let mut done = Vec::new();
    for r in records {
        match &r.event {
            Event::Acquired { t, fence, until, kind, permits, .. } => {
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
                    kind: *kind,
                    permits: permits.clone(),
                    late: Vec::new(),
                    reads: Vec::new(),
                };
                open.insert(r.worker, hold);
            }
            Event::Read { end, accepted, fenced, plain, permit, .. } => {
                if let Some(h) = open.get_mut(&r.worker) {
                    let read =
                        StoreRead { end: *end, accepted: *accepted, fenced: *fenced, plain: *plain, permit: *permit };
                    h.reads.push(read);
                }
            }
            Event::Write { t, fenced, lost, expired, permit, .. } => {
                if let Some(h) = open.get_mut(&r.worker) {
                    if *t > h.until {
                        h.late.push(Late {
                            sent: *t,
                            fenced: *fenced,
                            lost: *lost,
                            expired: *expired,
                            permit: *permit,
                        });
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

/// Whether `late`, a late write of `h`, came after a newer holder at the store: a hold of
/// `holds` that excludes `h`, acquired after it, had a read accepted (of the late write's permit)
/// before the write was sent.
pub fn after_newer_holder(holds: &[Hold], h: &Hold, late: &Late) -> bool {
    holds.iter().any(|n| {
        n.worker != h.worker
            && n.acquired > h.acquired
            && h.excludes(n)
            && n.reads
                .iter()
                .any(|r| r.accepted && r.end < late.sent && (late.permit.is_none() || r.permit == late.permit))
    })
}

/// Pairs of holds that exclude each other and whose windows intersect, as indexes into `holds`
/// (which is sorted by `acquired`).
pub fn overlapping_pairs(holds: &[Hold]) -> Vec<(usize, usize)> {
    intersecting_pairs(holds, |a, b| a.excludes(b))
}

/// Pairs of readers whose windows intersect: the readers did share the lock.
pub fn shared_pairs(holds: &[Hold]) -> usize {
    intersecting_pairs(holds, |a, b| a.kind == LockKind::Read && b.kind == LockKind::Read).len()
}

/// The most permits held at one instant (holders, but for a semaphore), and the acquisitions
/// that took that count above `limit` (if given).
pub fn peak(holds: &[Hold], limit: Option<usize>) -> (usize, usize) {
    // Ends sort before starts at the same instant: a window is half-open.
    let mut steps: Vec<(u64, bool, usize)> = Vec::new();
    for h in holds.iter().filter(|h| h.acquired < h.end()) {
        steps.push((h.acquired, true, h.weight()));
        steps.push((h.end(), false, h.weight()));
    }
    steps.sort();
    let (mut now, mut most, mut beyond) = (0usize, 0, 0);
    for (_, start, w) in steps {
        if start {
            now += w;
            most = most.max(now);
            if limit.is_some_and(|l| now > l) {
                beyond += 1;
            }
        } else {
            now -= w;
        }
    }
    (most, beyond)
}

fn intersecting_pairs(holds: &[Hold], pair: impl Fn(&Hold, &Hold) -> bool) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for (i, a) in holds.iter().enumerate() {
        for (j, b) in holds.iter().enumerate().skip(i + 1) {
            if b.acquired >= a.end() {
                // Sorted by start: later holds start later still, but an earlier-ending one
                // may be followed by one that starts before a longer one ends, so go on.
                continue;
            }
            if b.worker != a.worker && b.acquired < b.end() && pair(a, b) {
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

/// The store's counters at the end of a phase (summed over a semaphore's permits).
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
    /// Pairs of overlapping windows of holds that exclude each other.
    pub overlaps: usize,
    /// The most holders at one instant (for a semaphore, permits).
    pub peak: usize,
    /// A semaphore's acquisitions that took the permits held above its limit.
    pub beyond_limit: usize,
    /// Pairs of readers whose windows intersected.
    pub shared: usize,
    /// Readers whose two accepted reads of the fenced counter differed.
    pub changed_fenced: usize,
    /// Readers whose two reads of the plain counter differed.
    pub changed_plain: usize,
    /// Writes sent after their writer's `valid_until`.
    pub late_writes: usize,
    /// Of those, the ones sent after a newer holder had read the store.
    pub late_after_newer: usize,
    /// Of those, the ones the fenced store accepted.
    pub late_after_newer_accepted: usize,
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
    /// Share of 200 ms intervals in which some holder's window was open.
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

/// Count everything for the log of one phase that ran from `span.0` to `span.1`; `limit` is a
/// semaphore's.
pub fn check(
    records: &[Record],
    span: (u64, u64),
    finals: Finals,
    keys_without_ttl: usize,
    limit: Option<usize>,
) -> Report {
    let holds = holds(records);
    let mut report = Report { acquisitions: holds.len(), keys_without_ttl, ..Report::default() };
    for h in &holds {
        *report.by_client.entry(h.client.clone()).or_default() += 1;
        report.late_writes += h.late.len();
        report.late_accepted += h.late.iter().filter(|l| l.fenced == Fenced::Accepted).count();
        for late in h.late.iter().filter(|l| after_newer_holder(&holds, h, l)) {
            report.late_after_newer += 1;
            report.late_after_newer_accepted += usize::from(late.fenced == Fenced::Accepted);
        }
        if let [a, .., b] = &h.reads[..] {
            if h.kind == LockKind::Read {
                report.changed_plain += usize::from(a.plain != b.plain);
                report.changed_fenced += usize::from(a.accepted && b.accepted && a.fenced != b.fenced);
            }
        }
    }
    report.overlaps = overlapping_pairs(&holds).len();
    report.shared = shared_pairs(&holds);
    (report.peak, report.beyond_limit) = peak(&holds, limit);

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

    report.fence_order_errors = fence_order_errors(&holds);

    let (from, to) = span;
    let intervals = (to.saturating_sub(from)).div_ceil(INTERVAL_NS).max(1);
    let mut open = vec![false; intervals as usize];
    for h in &holds {
        let (a, b) = (h.acquired.max(from), h.end().min(to));
        if a >= b {
            continue;
        }
        let first = (a - from) / INTERVAL_NS;
        let last = ((b - from - 1) / INTERVAL_NS).min(intervals - 1);
        for interval in &mut open[first as usize..=last as usize] {
            *interval = true;
        }
    }
    report.availability = open.iter().filter(|o| **o).count() as f64 / intervals as f64;
    report
}

/// Holds (sorted by `acquired`) whose fencing token is out of order; see the module docs.
pub fn fence_order_errors(holds: &[Hold]) -> usize {
    let mut errors = 0;
    // The highest fence so far: of everyone (a mutex), per permit (a semaphore), of writers and
    // of readers (a reader-writer lock).
    let mut highest: Option<u64> = None;
    let mut per_permit: BTreeMap<u16, u64> = BTreeMap::new();
    let (mut writer, mut reader): (Option<u64>, Option<u64>) = (None, None);
    for h in holds {
        let bad = match h.kind {
            LockKind::Mutex => {
                let bad = highest.is_some_and(|m| h.fence <= m);
                highest = highest.max(Some(h.fence));
                bad
            }
            LockKind::Semaphore => {
                let bad = h.permits.iter().any(|s| per_permit.get(s).is_some_and(|&m| h.fence <= m));
                for &s in &h.permits {
                    let m = per_permit.entry(s).or_insert(h.fence);
                    *m = (*m).max(h.fence);
                }
                bad
            }
            LockKind::Write => {
                let bad = writer.is_some_and(|m| h.fence <= m) || reader.is_some_and(|m| h.fence < m);
                writer = writer.max(Some(h.fence));
                bad
            }
            LockKind::Read => {
                let bad = writer.is_some_and(|m| h.fence < m);
                reader = reader.max(Some(h.fence));
                bad
            }
        };
        errors += usize::from(bad);
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn rec(worker: usize, event: Event) -> Record {
        Record { worker, client: if worker % 2 == 0 { "tokio" } else { "mio" }.into(), event }
    }

    /// `worker` acquired at `at` ms, valid for 990 ms.
    fn acquired(worker: usize, at: u64, fence: u64, kind: LockKind, permits: &[u16]) -> Record {
        let t = at * MS;
        rec(
            worker,
            Event::Acquired {
                start: t - MS,
                t,
                fence,
                until: t + 990 * MS,
                token: "t".into(),
                kind,
                permits: permits.to_vec(),
            },
        )
    }

    /// `worker` held from `from` to `to` ms (released).
    fn held(worker: usize, (from, to): (u64, u64), fence: u64, kind: LockKind, permits: &[u16]) -> Vec<Record> {
        let released = Event::Released { t: to * MS, end: to * MS + 1, outcome: "released".into(), lost: false };
        vec![acquired(worker, from, fence, kind, permits), rec(worker, released)]
    }

    /// One clean cycle of `worker` from `at` (ms): acquire, read, write, release after 20 ms.
    fn cycle(worker: usize, at: u64, fence: u64, counter: i64) -> Vec<Record> {
        let t = at * MS;
        vec![
            rec(
                worker,
                Event::Acquired {
                    start: t - MS,
                    t,
                    fence,
                    until: t + 990 * MS,
                    token: "t".into(),
                    kind: LockKind::Mutex,
                    permits: vec![],
                },
            ),
            rec(
                worker,
                Event::Read {
                    t: t + MS,
                    end: t + 2 * MS,
                    fence,
                    accepted: true,
                    fenced: counter,
                    plain: counter,
                    permit: None,
                },
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
                    permit: None,
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
        let report = check(&log, (0, 1000 * MS), Finals { fenced: 10, plain: 10 }, 0, None);
        assert_eq!(report.acquisitions, 10);
        assert_eq!((report.overlaps, report.late_writes, report.lost_fenced, report.lost_plain), (0, 0, 0, 0));
        assert_eq!((report.fence_order_errors, report.refused, report.untyped_errors), (0, 0, 0));
        assert_eq!(report.errors.get("wait:held"), Some(&1));
        // Windows lie within 100..345 ms of 0..1000: intervals 0 and 1 of five are open.
        assert!((report.availability - 0.4).abs() < 1e-9, "{}", report.availability);
    }

    #[test]
    fn the_checker_catches_overlaps_lost_updates_order_errors_and_late_writes() {
        // Worker 0 holds from 100 ms (fence 5) and writes at 1500 ms, after its validity
        // (1090 ms); worker 1 acquires at 300 ms while 0's window is open, with a smaller
        // fence (a restarted node forgot the counters).
        let mut log = vec![
            rec(
                0,
                Event::Acquired {
                    start: 99 * MS,
                    t: 100 * MS,
                    fence: 5,
                    until: 1090 * MS,
                    token: "t".into(),
                    kind: LockKind::Mutex,
                    permits: vec![],
                },
            ),
            rec(
                0,
                Event::Read { t: 101 * MS, end: 102 * MS, fence: 5, accepted: true, fenced: 0, plain: 0, permit: None },
            ),
            rec(
                1,
                Event::Acquired {
                    start: 299 * MS,
                    t: 300 * MS,
                    fence: 2,
                    until: 1290 * MS,
                    token: "t".into(),
                    kind: LockKind::Mutex,
                    permits: vec![],
                },
            ),
            rec(
                1,
                Event::Read {
                    t: 301 * MS,
                    end: 302 * MS,
                    fence: 2,
                    accepted: false,
                    fenced: 0,
                    plain: 0,
                    permit: None,
                },
            ),
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
                    permit: None,
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
                    permit: None,
                },
            ),
            rec(0, Event::Released { t: 1510 * MS, end: 1511 * MS, outcome: "not_held".into(), lost: true }),
        ];
        log.push(rec(2, Event::AcquireFailed { start: 0, t: MS, kind: "closed".into() }));
        // The fenced counter took one write: 1. The plain one took two writes of 1: one
        // update lost.
        let report = check(&log, (0, 2000 * MS), Finals { fenced: 1, plain: 1 }, 1, None);
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
        let late = Late { sent: 1500 * MS, fenced: Fenced::Accepted, lost: true, expired: true, permit: None };
        assert_eq!(holds[0].late, vec![late]);
        // Worker 1's read was refused: no newer holder had been seen by the store.
        assert_eq!((report.late_after_newer, report.late_after_newer_accepted), (0, 0));
        assert_eq!(holds[0].end(), 1090 * MS);
    }

    #[test]
    fn lost_updates_are_writes_the_final_counter_does_not_show() {
        let mut log = cycle(0, 100, 1, 0);
        log.extend(cycle(1, 200, 2, 0)); // read 0 again: its write of 1 overwrote the first
        let report = check(&log, (0, 300 * MS), Finals { fenced: 1, plain: 1 }, 0, None);
        assert_eq!((report.lost_fenced, report.lost_plain), (1, 1));
        assert_eq!(report.overlaps, 0);
    }

    #[test]
    fn a_window_ends_at_the_release_call_or_the_validity_whichever_is_first() {
        // Worker 0 never releases (its window ends at valid_until, 1090 ms); worker 1 takes
        // over at 1100 ms: no overlap. Worker 2 acquires at 1000 ms: overlap with 0.
        let log = vec![
            acquired(0, 100, 1, LockKind::Mutex, &[]),
            acquired(1, 1100, 2, LockKind::Mutex, &[]),
            rec(1, Event::Released { t: 1200 * MS, end: 1201 * MS, outcome: "released".into(), lost: false }),
        ];
        assert_eq!(overlaps(&log), 0);
        let mut log = log;
        log.push(acquired(2, 1000, 3, LockKind::Mutex, &[]));
        assert_eq!(overlaps(&log), 2, "2 overlaps 0 (until 1090) and 1 (until its release at 1200)");
        assert!(is_typed("wait:unreachable") && is_typed("held") && !is_typed("closed") && !is_typed("wait:other"));
    }

    #[test]
    fn a_semaphore_counts_permits_shared_and_holders_beyond_its_limit() {
        // Limit 2: 0 on permit 0 and 1 on permit 1 at once (fine), then 2 on permit 0 (after 0 left)
        // with 3 on permits 0 and 1 beside it: a permit shared twice, and 3 permits beyond 2.
        let mut log = held(0, (100, 200), 1, LockKind::Semaphore, &[0]);
        log.extend(held(1, (150, 400), 1, LockKind::Semaphore, &[1]));
        log.extend(held(2, (250, 300), 2, LockKind::Semaphore, &[0]));
        let clean = holds(&log);
        assert_eq!(
            (overlapping_pairs(&clean).len(), peak(&clean, Some(2)), fence_order_errors(&clean)),
            (0, (2, 0), 0)
        );
        log.extend(held(3, (260, 270), 2, LockKind::Semaphore, &[0, 1]));
        let report = check(&log, (0, 500 * MS), Finals::default(), 0, Some(2));
        assert_eq!((report.overlaps, report.peak, report.beyond_limit), (2, 4, 1), "{report:?}");
        assert_eq!(report.fence_order_errors, 1, "3's fence 2 is not above 2's on permit 0");
        // A holder beyond the limit is found even when the permits are distinct.
        let mut log = held(0, (100, 200), 1, LockKind::Semaphore, &[0]);
        log.extend(held(1, (110, 200), 1, LockKind::Semaphore, &[1]));
        log.extend(held(2, (120, 200), 1, LockKind::Semaphore, &[2]));
        let report = check(&log, (0, 500 * MS), Finals::default(), 0, Some(2));
        assert_eq!((report.overlaps, report.peak, report.beyond_limit), (0, 3, 1));
    }

    #[test]
    fn readers_share_writers_do_not_and_a_change_under_a_reader_counts() {
        let read = |w: usize, fenced: i64, plain: i64| {
            rec(w, Event::Read { t: 0, end: 0, fence: 0, accepted: true, fenced, plain, permit: None })
        };
        // Writer 0 (fence 4), then readers 1 and 2 together (epoch 4), then writer 3 (fence 5).
        let mut log = held(0, (100, 200), 4, LockKind::Write, &[]);
        log.extend(held(1, (210, 300), 4, LockKind::Read, &[]));
        log.insert(log.len() - 1, read(1, 7, 7));
        log.insert(log.len() - 1, read(1, 7, 7));
        log.extend(held(2, (220, 310), 4, LockKind::Read, &[]));
        log.extend(held(3, (320, 400), 5, LockKind::Write, &[]));
        let report = check(&log, (0, 500 * MS), Finals::default(), 0, None);
        assert_eq!((report.overlaps, report.shared, report.peak, report.fence_order_errors), (0, 1, 2, 0));
        assert_eq!((report.changed_fenced, report.changed_plain), (0, 0));
        // Writer 4 beside reader 2, with a stale fence; reader 5 sees the plain counter change
        // and reads under an epoch older than writer 3's.
        log.extend(held(4, (300, 305), 5, LockKind::Write, &[]));
        log.extend(held(5, (500, 600), 4, LockKind::Read, &[]));
        log.insert(log.len() - 1, read(5, 8, 8));
        log.insert(log.len() - 1, read(5, 8, 9));
        let report = check(&log, (0, 700 * MS), Finals::default(), 0, None);
        assert_eq!((report.overlaps, report.shared, report.fence_order_errors), (1, 1, 2), "{report:?}");
        assert_eq!((report.changed_fenced, report.changed_plain), (0, 1));
    }

    #[test]
    fn a_late_write_is_after_a_newer_holder_once_that_holder_read_its_permit() {
        let read = |w: usize, end: u64, permit: Option<u16>| {
            rec(
                w,
                Event::Read { t: end * MS - MS, end: end * MS, fence: 0, accepted: true, fenced: 0, plain: 0, permit },
            )
        };
        let write = |w: usize, t: u64, fenced: Fenced, permit: Option<u16>| {
            rec(
                w,
                Event::Write {
                    t: t * MS,
                    end: t * MS + MS,
                    fence: 0,
                    fenced,
                    plain: 0,
                    lost: true,
                    expired: true,
                    permit,
                },
            )
        };
        // Semaphore holder 0 (permit 0) writes late at 1500 ms; holder 1 took permit 1 and read it
        // at 1200 ms: nobody newer had read permit 0, and the store accepted the write.
        let mut log = vec![acquired(0, 100, 1, LockKind::Semaphore, &[0]), read(0, 101, Some(0))];
        log.extend([acquired(1, 1100, 1, LockKind::Semaphore, &[1]), read(1, 1200, Some(1))]);
        log.push(write(0, 1500, Fenced::Accepted, Some(0)));
        let report = check(&log, (0, 2000 * MS), Finals::default(), 0, Some(3));
        assert_eq!((report.late_writes, report.late_after_newer, report.late_after_newer_accepted), (1, 0, 0));
        // Holder 2 took permit 0 and read it at 1300 ms: the late write came after it, and a
        // store that accepted it failed.
        log.insert(4, acquired(2, 1250, 2, LockKind::Semaphore, &[0]));
        log.insert(5, read(2, 1300, Some(0)));
        let report = check(&log, (0, 2000 * MS), Finals::default(), 0, Some(3));
        assert_eq!((report.late_writes, report.late_after_newer, report.late_after_newer_accepted), (1, 1, 1));
        // A writer's late write after a reader's read (a reader excludes it).
        let mut log = vec![acquired(0, 100, 3, LockKind::Write, &[]), read(0, 101, None)];
        log.extend([acquired(1, 1100, 3, LockKind::Read, &[]), read(1, 1200, None)]);
        log.push(write(0, 1500, Fenced::Rejected, None));
        let report = check(&log, (0, 2000 * MS), Finals::default(), 0, None);
        assert_eq!((report.late_writes, report.late_after_newer, report.late_after_newer_accepted), (1, 1, 0));
    }
}
