//! What the engine has seen of each node: round trips, replies, timeouts, failures by kind,
//! connections. Updated on every reply and failure from the `now` the caller passes; no
//! allocation.

use std::time::{Duration, Instant};

use crate::error::Fault;

/// How long one window of the recent-maximum round trip lasts; the maximum covers the current
/// and the previous window (10 to 20 s).
const RTT_WINDOW: Duration = Duration::from_secs(10);

/// Figures of one node; see [`Engine::node_stats`](crate::Engine::node_stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// Smoothed round trip of its replies: an exponentially weighted average, each sample
    /// counting 1/8 (as TCP's smoothed RTT). Measured from when a request was queued, which
    /// a driver that writes promptly makes the send time.
    pub rtt: Option<Duration>,
    /// The longest round trip of the last 10 to 20 seconds.
    pub rtt_max: Option<Duration>,
    /// Replies received.
    pub replies: u64,
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
    window_start: Option<Instant>,
    window_max: Duration,
    previous_max: Duration,
}

impl NodeStats {
    /// Reconnections: connections after the first.
    pub fn reconnects(&self) -> u64 {
        self.connects.saturating_sub(1)
    }

    /// Failures of every kind.
    pub fn failures(&self) -> u64 {
        self.unreachable + self.misconfigured + self.protocol
    }

    pub(crate) fn reply(&mut self, now: Instant, rtt: Duration) {
        self.replies += 1;
        self.rtt = Some(match self.rtt {
            None => rtt,
            Some(s) => (s * 7 + rtt) / 8,
        });
        let start = *self.window_start.get_or_insert(now);
        if now.saturating_duration_since(start) >= RTT_WINDOW {
            self.previous_max = self.window_max;
            self.window_max = Duration::ZERO;
            self.window_start = Some(now);
        }
        self.window_max = self.window_max.max(rtt);
        self.rtt_max = Some(self.window_max.max(self.previous_max));
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
        s.reply(t0, ms(8));
        assert_eq!((s.rtt, s.rtt_max), (Some(ms(8)), Some(ms(8))));
        s.reply(t0, ms(16));
        assert_eq!(s.rtt, Some(ms(9)));
        assert_eq!(s.rtt_max, Some(ms(16)));
        // A window later the old peak still counts; two windows later it is gone.
        s.reply(t0 + RTT_WINDOW, ms(1));
        assert_eq!(s.rtt_max, Some(ms(16)));
        s.reply(t0 + 2 * RTT_WINDOW, ms(2));
        assert_eq!(s.rtt_max, Some(ms(2)));
        assert_eq!(s.replies, 4);
        s.fault(Fault::Misconfigured);
        s.fault(Fault::Unreachable);
        assert_eq!((s.misconfigured, s.unreachable, s.failures()), (1, 1, 2));
    }
}
