//! The holder-interval checker: no two holders of a resource may overlap in time.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

/// One holder's interval on the test's monotonic clock.
#[derive(Clone, Debug)]
pub struct Hold {
    /// Who held it (a task name, a token...).
    pub holder: String,
    /// When the lock call returned the guard.
    pub from: Instant,
    /// `min(release started, validity deadline)`: the end of the time the holder may rely on.
    pub until: Instant,
    /// The fencing token, if any.
    pub fence: Option<u64>,
}

/// A shared log of holder intervals per resource; [`assert_no_overlap`](Self::assert_no_overlap)
/// checks mutual exclusion.
///
/// Every holder logs `acquired_at` (right after the guard arrived) and
/// `min(release_started_at, valid_until)`, all from `Instant::now()` in one process, i.e. on one
/// monotonic clock.
#[derive(Debug, Default)]
pub struct HolderLog {
    holds: Mutex<BTreeMap<String, Vec<Hold>>>,
}

impl HolderLog {
    /// An empty log.
    pub fn new() -> HolderLog {
        HolderLog::default()
    }

    /// Log one holder of `resource`: from `acquired_at` until `min(release_started_at,
    /// valid_until)`.
    pub fn record(
        &self,
        resource: &str,
        holder: &str,
        acquired_at: Instant,
        valid_until: Instant,
        release_started_at: Instant,
        fence: Option<u64>,
    ) {
        let hold =
            Hold { holder: holder.to_owned(), from: acquired_at, until: release_started_at.min(valid_until), fence };
        let mut holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
        holds.entry(resource.to_owned()).or_default().push(hold);
    }

    /// Holds logged for `resource`, in order of acquisition.
    pub fn holds(&self, resource: &str) -> Vec<Hold> {
        let holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
        let mut v = holds.get(resource).cloned().unwrap_or_default();
        v.sort_by_key(|h| h.from);
        v
    }

    /// Number of holds logged over all resources.
    pub fn len(&self) -> usize {
        self.holds.lock().unwrap_or_else(|e| e.into_inner()).values().map(Vec::len).sum()
    }

    /// Whether nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Assert that, per resource, every hold starts at or after the end of every earlier one.
    ///
    /// # Panics
    ///
    /// Naming the two overlapping holders and by how much they overlap.
    pub fn assert_no_overlap(&self) {
        let resources: Vec<String> = self.holds.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        for resource in resources {
            let holds = self.holds(&resource);
            let mut latest: Option<&Hold> = None;
            for h in &holds {
                assert!(h.from <= h.until, "{resource}: {} ended before it began: {h:?}", h.holder);
                if let Some(prev) = latest {
                    assert!(
                        h.from >= prev.until,
                        "{resource}: mutual exclusion violated: {} acquired {:?} before {} stopped holding \
                         ({prev:?} / {h:?})",
                        h.holder,
                        prev.until - h.from,
                        prev.holder,
                    );
                }
                if latest.is_none_or(|p| h.until > p.until) {
                    latest = Some(h);
                }
            }
        }
    }

    /// Assert that, per resource, fencing tokens strictly increase in order of acquisition (and
    /// that every hold has one).
    ///
    /// # Panics
    ///
    /// Naming the first pair out of order.
    pub fn assert_fences_increase(&self) {
        let resources: Vec<String> = self.holds.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        for resource in resources {
            let holds = self.holds(&resource);
            let mut last: Option<(u64, &Hold)> = None;
            for h in &holds {
                let fence = h.fence.unwrap_or_else(|| panic!("{resource}: {} got no fencing token", h.holder));
                if let Some((prev, prev_hold)) = last {
                    assert!(
                        fence > prev,
                        "{resource}: fencing token {fence} of {} does not exceed {prev} of the earlier holder {}",
                        h.holder,
                        prev_hold.holder
                    );
                }
                last = Some((fence, h));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn accepts_disjoint_and_touching_holds() {
        let log = HolderLog::new();
        let t = Instant::now();
        let ms = Duration::from_millis;
        log.record("r", "a", t, t + ms(100), t + ms(10), Some(1));
        log.record("r", "b", t + ms(10), t + ms(100), t + ms(20), Some(2));
        // Ended by its validity deadline, not by its (late) release.
        log.record("r", "c", t + ms(30), t + ms(40), t + ms(90), Some(5));
        log.record("r", "d", t + ms(40), t + ms(100), t + ms(50), Some(6));
        log.record("other", "e", t, t + ms(100), t + ms(100), Some(1));
        log.assert_no_overlap();
        log.assert_fences_increase();
        assert_eq!(log.len(), 5);
    }

    #[test]
    #[should_panic(expected = "mutual exclusion violated")]
    fn catches_an_overlap() {
        let log = HolderLog::new();
        let t = Instant::now();
        let ms = Duration::from_millis;
        log.record("r", "a", t, t + ms(100), t + ms(50), None);
        log.record("r", "b", t + ms(60), t + ms(100), t + ms(70), None);
        // Overlaps a (0..50), though not b, which came in between.
        log.record("r", "c", t + ms(5), t + ms(100), t + ms(6), None);
        log.assert_no_overlap();
    }

    #[test]
    #[should_panic(expected = "does not exceed")]
    fn catches_a_fence_going_backwards() {
        let log = HolderLog::new();
        let t = Instant::now();
        let ms = Duration::from_millis;
        log.record("r", "a", t, t + ms(100), t + ms(10), Some(7));
        log.record("r", "b", t + ms(20), t + ms(100), t + ms(30), Some(7));
        log.assert_fences_increase();
    }
}
