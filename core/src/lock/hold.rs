//! A held lock's life: the grant, extensions and what their rounds found, expiry, the
//! `max_hold` cap and automatic extension.

use std::time::{Duration, Instant};

use super::{Phase, Record};
use crate::error::Misuse;
use crate::event::LockId;
use crate::quorum::{drift, whole_ms};

/// A held lock's state, kept through extensions and the release.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hold {
    pub(crate) valid_until: Instant,
    pub(crate) fence: Option<u64>,
    /// Never extended past this (`max_hold` after the acquisition).
    pub(crate) cap: Option<Instant>,
    /// The next automatic extension.
    pub(crate) auto_at: Option<Instant>,
    /// Known lost: the validity ran out, or an extension was refused.
    pub(crate) lost: bool,
    /// Nodes that refused the extension that found the lock lost (0 if it expired).
    pub(crate) refused: usize,
}

impl Record {
    /// Turn automatic extension on or off; a held lock's next one is a third of its TTL away.
    pub(crate) fn set_auto_extend(&mut self, now: Instant, on: bool) {
        self.auto_extend = on;
        let ttl = self.ttl;
        if let Phase::Held(hold) = &mut self.phase {
            hold.auto_at = on.then(|| now + ttl / 3);
        }
    }

    /// The hold an extension asked for by the caller starts from; `None` if an automatic
    /// extension is in flight, which now counts as asked for (its outcome is the answer).
    /// Misuse in the phases without a hold to extend.
    pub(crate) fn extend_from(&mut self, lock: LockId) -> Result<Option<Hold>, Misuse> {
        match &mut self.phase {
            Phase::Held(hold) => Ok(Some(*hold)),
            Phase::Extending { manual, .. } if !*manual => {
                *manual = true;
                Ok(None)
            }
            Phase::Extending { .. } | Phase::Releasing { .. } => Err(Misuse::Busy(lock)),
            Phase::Acquiring { .. }
            | Phase::Fencing { .. }
            | Phase::RetryWait { .. }
            | Phase::Free
            | Phase::Draining { .. } => Err(Misuse::NotAcquired(lock)),
        }
    }

    /// The hold a release starts from, and whether the release abandons an extension the
    /// caller asked for. Misuse in the phases without a hold to release.
    pub(crate) fn release_from(&self, lock: LockId) -> Result<(Hold, bool), Misuse> {
        match &self.phase {
            Phase::Held(hold) => Ok((*hold, false)),
            Phase::Extending { hold, manual, .. } => Ok((*hold, *manual)),
            Phase::Releasing { .. } => Err(Misuse::Busy(lock)),
            Phase::Acquiring { .. }
            | Phase::Fencing { .. }
            | Phase::RetryWait { .. }
            | Phase::Free
            | Phase::Draining { .. } => Err(Misuse::NotAcquired(lock)),
        }
    }

    /// Held from now until `valid`, with `fence`; returns the attempts it took.
    pub(crate) fn grant(&mut self, valid: Instant, fence: Option<u64>) -> u32 {
        let start = self.round.start;
        let hold = Hold {
            valid_until: valid,
            fence,
            // A cap too long to add (e.g. `Duration::MAX`) means no cap.
            cap: self.max_hold.and_then(|h| start.checked_add(h)),
            auto_at: self.auto_extend.then(|| start + self.ttl / 3),
            lost: false,
            refused: 0,
        };
        self.enter(Phase::Held(hold));
        self.tries.made
    }

    /// Back to held after an extension round, its automatic retry soon if one is due.
    pub(crate) fn back_to_held(&mut self, now: Instant) {
        let Some(mut hold) = self.hold().copied() else {
            return;
        };
        if self.auto_extend && !hold.lost && hold.auto_at.is_none() {
            hold.auto_at = Some(now + self.ttl / 10);
        }
        self.enter(Phase::Held(hold));
    }

    /// The extension round succeeded: valid until `valid`, the next one a third of its TTL
    /// after it started.
    pub(crate) fn extended(&mut self, valid: Instant) {
        let Phase::Extending { mut hold, ttl, downgrade, .. } = self.phase else {
            return;
        };
        self.shared |= downgrade;
        hold.valid_until = valid;
        hold.auto_at = self.auto_extend.then(|| self.round.start + ttl / 3);
        self.enter(Phase::Held(hold));
    }

    /// A majority refused the extension: the lock is lost. Returns whether it already was.
    pub(crate) fn extension_refused(&mut self, now: Instant) -> bool {
        let already = self.hold().is_some_and(|h| h.lost);
        let refused = self.round.tally.no;
        if let Some(hold) = self.hold_mut() {
            hold.lost = true;
            hold.refused = refused;
        }
        self.back_to_held(now);
        already
    }

    /// The extension's quorum came after the validity ran out: the lock is lost (it expired).
    /// Returns whether it already was.
    pub(crate) fn extension_too_late(&mut self, now: Instant) -> bool {
        let already = self.hold().is_some_and(|h| h.lost);
        if let Some(hold) = self.hold_mut() {
            hold.lost = true;
            hold.auto_at = None;
        }
        self.back_to_held(now);
        already
    }

    /// Mark a held lock lost if its validity has run out at `now`. Returns whether it just did.
    pub(crate) fn expire(&mut self, now: Instant) -> bool {
        let hold = match &mut self.phase {
            Phase::Held(h) | Phase::Extending { hold: h, .. } => h,
            _ => return false,
        };
        if hold.lost || hold.valid_until > now {
            return false;
        }
        hold.lost = true;
        hold.auto_at = None;
        true
    }

    /// The TTL an extension to `ttl` may have at `now`: cut to the time left before the
    /// `max_hold` cap, `None` once that leaves nothing beyond the drift margin.
    pub(crate) fn capped(&self, now: Instant, ttl: Duration, drift_factor: f64) -> Option<Duration> {
        let Some(cap) = self.hold().and_then(|h| h.cap) else {
            return Some(ttl);
        };
        let room = whole_ms(cap.saturating_duration_since(now));
        (room > drift(room, drift_factor)).then(|| ttl.min(room))
    }
}
