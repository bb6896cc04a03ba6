//! The labels of the metrics and the outcomes of the spans: what each outcome is called.

use redlease_core::{AcquireError, ExtendError, LostReason, ReleaseOutcome};
#[cfg(feature = "metrics")]
use redlease_core::{Engine, LockId};

/// The `kind` label of an acquisition's metrics: `mutex`, `semaphore` or `read`.
#[cfg(feature = "metrics")]
pub(super) fn kind(engine: &Engine, lock: LockId) -> &'static str {
    if engine.limit(lock).is_some() {
        "semaphore"
    } else if engine.is_shared(lock) {
        "read"
    } else {
        "mutex"
    }
}

pub(crate) fn acquire_outcome(error: &AcquireError) -> &'static str {
    match error {
        AcquireError::Held { .. } => "held",
        AcquireError::Unreachable { .. } => "unreachable",
        AcquireError::Misconfigured { .. } => "misconfigured",
        AcquireError::TooSlow { .. } => "too_slow",
        AcquireError::WaitTimeout { .. } => "wait_timeout",
        AcquireError::FenceExhausted { .. } => "fence_exhausted",
        AcquireError::Cancelled => "cancelled",
        _ => "other",
    }
}

pub(super) fn extend_outcome(error: &ExtendError) -> &'static str {
    match error {
        ExtendError::Lost { .. } => "lost",
        ExtendError::Unconfirmed { .. } => "unconfirmed",
        ExtendError::Expired => "expired",
        ExtendError::Cancelled => "cancelled",
        _ => "other",
    }
}

pub(super) fn release_outcome(outcome: ReleaseOutcome) -> &'static str {
    match outcome {
        ReleaseOutcome::Released => "released",
        ReleaseOutcome::NotHeld => "not_held",
        ReleaseOutcome::Unreachable => "unreachable",
        _ => "other",
    }
}

pub(super) fn lost_reason(reason: &LostReason) -> &'static str {
    match reason {
        LostReason::Expired => "expired",
        LostReason::Refused => "refused",
        LostReason::Stopped => "stopped",
        _ => "other",
    }
}
