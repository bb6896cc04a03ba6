//! What waiters subscribe to: the wake channels every link that carries release messages
//! is subscribed to, brought in line ahead of the next request it sends.

use std::collections::BTreeSet;
use std::time::Instant;

use super::{Link, Links, MAX_CHANNELS};
use crate::event::WakeState;
use crate::resp;
use crate::wire::Pending;

impl Link {
    /// `HELLO` was answered: subscribe (when `wake` is on) to the `channels` waiters need, then
    /// send what was held behind it.
    pub(super) fn release_held(&mut self, now: Instant, channels: &BTreeSet<Vec<u8>>, generation: u64) {
        self.holding = false;
        if self.wake == WakeState::On {
            self.sync_subs(now, channels, generation);
        }
        self.out.append(&mut self.held);
        // Queued for sending now: round trips count from here.
        self.pending.extend(self.held_pending.drain(..).map(|(p, _)| (p, now)));
    }

    /// Bring this connection's subscriptions in line with `channels` (generation `generation`).
    pub(super) fn sync_subs(&mut self, now: Instant, channels: &BTreeSet<Vec<u8>>, generation: u64) {
        let gone: Vec<Vec<u8>> = self.subs.difference(channels).cloned().collect();
        for channel in gone {
            resp::command(&mut self.out, &[b"UNSUBSCRIBE", &channel]);
            self.pending.push_back((Pending::Unsubscribe, now));
            self.subs.remove(&channel);
        }
        for channel in channels {
            if !self.subs.contains(channel) {
                resp::command(&mut self.out, &[b"SUBSCRIBE", channel]);
                self.pending.push_back((Pending::Subscribe, now));
                self.subs.insert(channel.clone());
            }
        }
        self.subs_gen = generation;
    }
}

impl Links {
    /// Links whose release messages arrive now.
    pub(crate) fn waking(&self) -> usize {
        self.links.iter().filter(|l| l.wake == WakeState::On && l.is_up()).count()
    }

    /// Subscribe every link that carries release messages to `channel`: each link sends the
    /// `SUBSCRIBE` ahead of the next request it sends (on a link too far behind now, once it
    /// takes requests again). `false` if the cap of channels is reached (the waiters on it
    /// poll).
    pub(crate) fn subscribe(&mut self, channel: &[u8]) -> bool {
        if self.channels.contains(channel) {
            return true;
        }
        if self.channels.len() >= MAX_CHANNELS {
            return false;
        }
        self.channels.insert(channel.to_vec());
        self.subs_gen = self.subs_gen.wrapping_add(1);
        true
    }

    /// No waiter needs `channel` any more: each link unsubscribes ahead of its next request.
    pub(crate) fn unsubscribe(&mut self, channel: &[u8]) {
        if self.channels.remove(channel) {
            self.subs_gen = self.subs_gen.wrapping_add(1);
        }
    }
}
