//! What the engine has seen of each node: round trips, replies, timeouts, failures by kind,
//! connections. Updated on every reply and failure from the `now` the caller passes; no
//! allocation.

use std::time::{Duration, Instant};

use crate::error::Fault;

/// How long one window of the recent-maximum round trip lasts; the maximum covers the current
/// and the previous window (10 to 20 s).
const RTT_WINDOW: Duration = Duration::from_secs(10);

/// Figures of one node, as the health view shows them ([`NodeHealth::stats`](crate::NodeHealth::stats)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// Replies received.
    pub replies: u64,
    /// Replies read only after the node timeout had passed since their request was queued
    /// (e.g. by a blocking client whose loop nobody drove meanwhile). They are not round-trip
    /// samples: [`rtt`](Self::rtt) and [`rtt_max`](Self::rtt_max) leave them out.
    pub late: u64,
    /// Votes that timed out: no answer within the node timeout.
    pub timeouts: u64,
    /// Failures while out of reach: refused or timed-out connects, lost or silent connections.
    pub unreachable: u64,
    /// Refusals for a configuration reason (a wrong password, database or ACL, a key of
    /// another type), as error replies or refused handshakes.
    pub misconfigured: u64,
    /// Answers our requests cannot produce (garbage, unexpected types, other error replies).
    pub protocol: u64,
    /// Connections that completed their handshake (the first one and every reconnect).
    pub connects: u64,
    /// Connections that were up and then lost or failed.
    pub disconnects: u64,
    /// Round-trip samples taken: the replies read on time.
    samples: u64,
    /// Smoothed round trip in nanoseconds, 0 before the first sample.
    srtt_ns: u64,
    /// When the current window of the recent maximum ends.
    window_end: Option<Instant>,
    window_max_ns: u64,
    previous_max_ns: u64,
}

impl NodeStats {
    /// The smoothed round trip of the node's replies: an exponentially weighted average, each
    /// sample counting 1/8 (as TCP's smoothed RTT). Measured from when a request was queued,
    /// which a driver that writes promptly makes the send time. Only replies read within the
    /// node timeout count (see [`late`](Self::late)). `None` before the first.
    pub fn rtt(&self) -> Option<Duration> {
        (self.samples > 0).then(|| Duration::from_nanos(self.srtt_ns))
    }

    /// The longest round trip of the last 10 to 20 seconds (of the replies read on time;
    /// `None` before the first).
    pub fn rtt_max(&self) -> Option<Duration> {
        (self.samples > 0).then(|| Duration::from_nanos(self.window_max_ns.max(self.previous_max_ns)))
    }

    /// Reconnections: connections after the first.
    pub fn reconnects(&self) -> u64 {
        self.connects.saturating_sub(1)
    }

    /// Failures of every kind.
    pub fn failures(&self) -> u64 {
        self.unreachable + self.misconfigured + self.protocol
    }

    /// A reply was read at `now`, `rtt` after its request was queued; a round trip longer
    /// than `on_time` (the node timeout) is counted as late, not sampled. Integer arithmetic
    /// and one instant comparison: this runs for every reply.
    pub(crate) fn reply(&mut self, now: Instant, rtt: Duration, on_time: Duration) {
        self.replies += 1;
        if rtt > on_time {
            self.late += 1;
            return;
        }
        // u64 arithmetic (no u128 `as_nanos`): saturates after 584 years.
        let ns = rtt.as_secs().saturating_mul(1_000_000_000).saturating_add(u64::from(rtt.subsec_nanos()));
        self.srtt_ns = if self.samples == 0 { ns } else { self.srtt_ns - self.srtt_ns / 8 + ns / 8 };
        self.samples += 1;
        match self.window_end {
            Some(end) if now < end => {}
            Some(end) => {
                // A new window; the old one's peak still counts for one more window, unless
                // more than a whole window passed without a reply.
                self.previous_max_ns = if now < end + RTT_WINDOW { self.window_max_ns } else { 0 };
                self.window_max_ns = 0;
                self.window_end = Some(now + RTT_WINDOW);
            }
            None => self.window_end = Some(now + RTT_WINDOW),
        }
        self.window_max_ns = self.window_max_ns.max(ns);
    }

    pub(crate) fn fault(&mut self, fault: Fault) {
        match fault {
            Fault::Unreachable => self.unreachable += 1,
            Fault::Misconfigured => self.misconfigured += 1,
            Fault::Protocol => self.protocol += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smoothed_rtt_follows_samples_and_the_max_forgets_old_windows() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut s = NodeStats::default();
        assert_eq!((s.rtt(), s.rtt_max()), (None, None));
        let on_time = Duration::from_secs(1);
        // A reply read long after its node timeout is late, not a round trip.
        s.reply(t0, ms(3_500), on_time);
        assert_eq!((s.rtt(), s.rtt_max(), s.replies, s.late), (None, None, 1, 1));
        s.reply(t0, ms(8), on_time);
        assert_eq!((s.rtt(), s.rtt_max()), (Some(ms(8)), Some(ms(8))));
        s.reply(t0, ms(16), on_time);
        assert_eq!(s.rtt(), Some(ms(9)));
        assert_eq!(s.rtt_max(), Some(ms(16)));
        // A window later the old peak still counts; two windows later it is gone.
        s.reply(t0 + RTT_WINDOW, ms(1), on_time);
        assert_eq!(s.rtt_max(), Some(ms(16)));
        s.reply(t0 + 2 * RTT_WINDOW, ms(2), on_time);
        assert_eq!(s.rtt_max(), Some(ms(2)));
        // After a silence of more than a window, only the new samples count.
        s.reply(t0 + 5 * RTT_WINDOW, ms(3), on_time);
        assert_eq!(s.rtt_max(), Some(ms(3)));
        assert_eq!((s.replies, s.late), (6, 1));
        s.fault(Fault::Misconfigured);
        s.fault(Fault::Unreachable);
        assert_eq!((s.misconfigured, s.unreachable, s.failures()), (1, 1, 2));
    }
}
