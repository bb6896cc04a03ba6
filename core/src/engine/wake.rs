//! Wake-on-release: acquisitions that wait register on their resources' wake channels, and
//! the release messages the nodes publish decide which waiter retries, and when.

use std::time::{Duration, Instant};

use super::Engine;
use crate::event::{Event, NodeId};
use crate::lock::Phase;
use crate::wake;

impl Engine {
    /// Register record `idx` as a waiter on its resources' wake channels (subscribing the links
    /// to new ones). `false`: wake-ups are off, or no node delivers them now.
    pub(super) fn register(&mut self, idx: u32) -> bool {
        if !self.config.wake || self.links.waking() == 0 {
            return false;
        }
        let mut any = false;
        for (ch, shard) in self.channels(idx) {
            let new = self.waiters.add(&ch, idx);
            if !self.links.subscribe(&ch, shard) {
                // Too many channels: waiters on this resource poll.
                if new {
                    self.waiters.remove(&ch, idx);
                }
                continue;
            }
            any = true;
        }
        self.locks[idx].waiting = any;
        any
    }

    /// The wake channels of record `idx`'s resources: each key's (a semaphore's one, whatever
    /// its limit), which standalone nodes announce on, and on a Redis Cluster node the sharded
    /// one its cluster form's release announces on (`true`; the same channel when the key has
    /// a hash tag).
    fn channels(&self, idx: u32) -> Vec<(Vec<u8>, bool)> {
        let mut out = Vec::new();
        let s = &self.locks[idx];
        let base = [s.permits.base()];
        let names: Vec<&[u8]> = if s.permits.on() { base.to_vec() } else { s.keys.iter().collect() };
        for key in names {
            let mut ch = Vec::new();
            wake::channel(&mut ch, key);
            out.push((ch, false));
            let mut tagged = Vec::new();
            if self.links.any_cluster() && crate::cluster::cluster_key(&mut tagged, key).is_ok() {
                let mut ch = Vec::new();
                wake::channel(&mut ch, &tagged);
                out.push((ch, true));
            }
        }
        out
    }

    /// Record `idx` no longer waits: unregister it, unsubscribing channels nobody waits on.
    pub(super) fn unregister(&mut self, idx: u32) {
        if !std::mem::take(&mut self.locks[idx].waiting) {
            return;
        }
        for (ch, _) in self.channels(idx) {
            if self.waiters.remove(&ch, idx) && !self.reads.watches(&ch) {
                self.links.unsubscribe(&ch);
            }
        }
    }

    /// How many nodes' release messages wake a waiter: a quorum, or every node that delivers
    /// them if fewer do.
    fn wake_threshold(&self) -> usize {
        self.quorum.min(self.links.waking()).max(1)
    }

    /// What waiter `idx` does about the release messages heard since its current attempt.
    ///
    /// - Named the next waiter by a quorum of nodes (it headed their queues): retry at once.
    /// - Too few messages, or any node named another waiter: sleep on (that waiter goes first;
    ///   the jittered fallback covers it if it is gone). A waiter named by fewer than a quorum
    ///   while other nodes name someone else would only fail, and its failed attempt would
    ///   hand the keys reserved for it to the next waiters there, each named by too few
    ///   nodes again: over five nodes, where queues disagree most, that storm kept a
    ///   semaphore's permits mostly idle.
    /// - Otherwise (no queue, or named by some nodes and no other waiter named): retry after a
    ///   random stagger, if it has waited longest among this engine's waiters on its
    ///   resources, so one release does not set off a herd and waiters here are served in
    ///   order of arrival.
    pub(super) fn verdict(&self, idx: u32) -> Verdict {
        let s = &self.locks[idx];
        let threshold = self.wake_threshold();
        let heard = s.heard_count();
        if heard.named_us >= threshold {
            return Verdict::Now;
        }
        if heard.released < threshold || heard.named_other > 0 {
            return Verdict::Sleep;
        }
        let mine = (s.tries.called, idx);
        let longest = self
            .channels(idx)
            .iter()
            .filter(|(_, shard)| !shard)
            .all(|(ch, _)| self.waiters.on(ch).iter().all(|&o| o == idx || (self.locks[o].tries.called, o) > mine));
        if longest { Verdict::Stagger } else { Verdict::Sleep }
    }

    /// A waiter's ticket at `now`: µs since the UNIX epoch on [`Config::wall_clock`] (or since
    /// the first ticket, without one), at most 2^53 (what a score holds exactly).
    ///
    /// [`Config::wall_clock`]: crate::Config::wall_clock
    pub(super) fn ticket(&mut self, now: Instant) -> u64 {
        let (at, since_epoch) = *self.wall_clock.get_or_insert((now, Duration::ZERO));
        let us = (since_epoch + now.saturating_duration_since(at)).as_micros();
        us.min(1 << 53) as u64
    }

    /// The delay before a woken waiter retries: random up to `wake_stagger`, halved for every
    /// wake-up it has lost, so the longest waiter across clients tends to go first.
    pub(super) fn stagger(&mut self, idx: u32) -> Duration {
        let lost = self.locks[idx].wakes.min(20);
        self.locks[idx].wakes += 1;
        self.rng.between(Duration::ZERO, self.config.wake_stagger) / (1u32 << lost)
    }

    /// A release message from `node` on `channel`: the releasing holder's token, `:`, and the
    /// waiter the node named next (empty when its queue was empty; servers that only announce
    /// send the token alone).
    ///
    /// Every waiter on `channel` hears it ([`Record::hear`] says when it counts). A waiter named
    /// by a quorum retries at once; otherwise the longest waiter that heard a quorum retries
    /// after its stagger ([`verdict`](Self::verdict)).
    ///
    /// [`Record::hear`]: crate::lock::Record::hear
    pub(super) fn on_message(&mut self, now: Instant, node: NodeId, channel: &[u8], data: &[u8]) {
        let (releaser, next) = match data.iter().position(|&b| b == b':') {
            Some(at) => (&data[..at], &data[at + 1..]),
            None => (data, &data[data.len()..]),
        };
        if let Some(name) = self.reads.watched(channel) {
            self.events.push_back(Event::LeaderWake { name: name.to_owned() });
        }
        let waiting = self.waiters.on(channel).to_vec();
        for &idx in &waiting {
            self.locks[idx].hear(node.index(), releaser, next);
        }
        let mut staggered = false;
        for &idx in &waiting {
            let Phase::RetryWait { at } = self.locks[idx].phase else { continue };
            match self.verdict(idx) {
                Verdict::Now => {
                    self.start_attempt(now, idx);
                    self.arm(idx);
                }
                Verdict::Stagger if !staggered => {
                    staggered = true;
                    let soon = now + self.stagger(idx);
                    if soon < at {
                        self.locks[idx].phase = Phase::RetryWait { at: soon };
                        self.arm(idx);
                    }
                }
                Verdict::Stagger | Verdict::Sleep => {}
            }
        }
    }
}

/// What a waiter does about the release messages it heard ([`Engine::verdict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Retry at once: a quorum named it next.
    Now,
    /// Retry after a random stagger.
    Stagger,
    /// Keep the fallback delay.
    Sleep,
}
