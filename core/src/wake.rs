//! Wake-on-release: which acquisitions wait on which wake channel.
//!
//! A waiting acquisition is registered under the wake channel of each of its resources
//! ([`WAKE_PREFIX`](crate::scripts::WAKE_PREFIX) + name); the links subscribe to a channel
//! while it has a waiter. The engine decides who a release message wakes.

use std::collections::BTreeMap;

/// Lock records by wake channel, in the order they started waiting.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    channels: BTreeMap<Vec<u8>, Vec<u32>>,
}

impl Waiters {
    /// Register record `idx` under `channel`; `true` if the channel had no waiter before.
    pub(crate) fn add(&mut self, channel: &[u8], idx: u32) -> bool {
        match self.channels.get_mut(channel) {
            Some(waiting) => {
                if !waiting.contains(&idx) {
                    waiting.push(idx);
                }
                false
            }
            None => {
                self.channels.insert(channel.to_vec(), vec![idx]);
                true
            }
        }
    }

    /// Unregister record `idx` from `channel`; `true` if the channel has no waiter left.
    pub(crate) fn remove(&mut self, channel: &[u8], idx: u32) -> bool {
        let Some(waiting) = self.channels.get_mut(channel) else {
            return false;
        };
        waiting.retain(|&i| i != idx);
        if waiting.is_empty() {
            self.channels.remove(channel);
            return true;
        }
        false
    }

    /// Registrations: one per waiting record and channel.
    pub(crate) fn count(&self) -> usize {
        self.channels.values().map(Vec::len).sum()
    }

    /// The records waiting on `channel`, oldest registration first.
    pub(crate) fn on(&self, channel: &[u8]) -> &[u32] {
        self.channels.get(channel).map_or(&[], Vec::as_slice)
    }
}

/// The wake channel of `resource`.
pub(crate) fn channel(out: &mut Vec<u8>, resource: &[u8]) {
    out.clear();
    out.extend_from_slice(crate::scripts::WAKE_PREFIX.as_bytes());
    out.extend_from_slice(resource);
}
