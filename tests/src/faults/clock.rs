//! One clock for every process of a run: `CLOCK_MONOTONIC`, in nanoseconds.
//!
//! On Linux, Rust's [`Instant`] reads the same clock, but it cannot be written to a log; the
//! workers log [`mono_ns`] and convert their leases' deadlines with [`instant_ns`], so that the
//! orchestrator can compare times taken in different processes.

use std::time::Instant;

/// Now, on `CLOCK_MONOTONIC`, in nanoseconds (the same clock in every process of the machine).
#[allow(unsafe_code)]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one `timespec` into `ts`, which is valid and exclusively
    // borrowed for the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `at` on the clock of [`mono_ns`]: its distance from `Instant::now()`, applied to
/// `mono_ns()` read right after (both read `CLOCK_MONOTONIC`; the error is the few
/// nanoseconds between the two reads).
pub fn instant_ns(at: Instant) -> u64 {
    let (now, ns) = (Instant::now(), mono_ns());
    if at >= now { ns + (at - now).as_nanos() as u64 } else { ns.saturating_sub((now - at).as_nanos() as u64) }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn instants_and_the_monotonic_clock_agree() {
        let a = mono_ns();
        let later = instant_ns(Instant::now() + Duration::from_secs(1));
        let b = mono_ns();
        assert!(later >= a + 999_000_000 && later <= b + 1_001_000_000, "{a} {later} {b}");
        assert!(instant_ns(Instant::now()) >= a);
    }
}
