//! What waiters subscribe to: the wake channels each link that carries release messages is
//! subscribed to, brought in line ahead of the next request it sends.
//!
//! A standalone node's link subscribes (`SUBSCRIBE`) to every channel a standalone node
//! announces on. On a Redis Cluster node, releases announce on sharded channels (`SPUBLISH`,
//! which stays within the slot's shard), so each link to one of its masters subscribes
//! (`SSUBSCRIBE`) to the channels of the slots that master serves, and follows the slot map:
//! when a slot moves, its channels move with it. A master that loses a slot unsubscribes its
//! clients itself (an `sunsubscribe` push nobody asked for).

use std::collections::BTreeSet;
use std::time::Instant;

use super::{Links, MAX_CHANNELS};
use crate::cluster::hash_slot;
use crate::event::WakeState;
use crate::resp;
use crate::wire::Pending;

/// Who listens for a wake channel's release messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Listen {
    /// Standalone nodes announce on it (`PUBLISH`).
    plain: bool,
    /// Cluster nodes announce on it (`SPUBLISH`): its slot.
    shard: Option<u16>,
}

impl Links {
    /// `HELLO` was answered on `link`: subscribe (when its wake state is on) to the channels
    /// waiters need, then send what was held behind it.
    pub(super) fn release_held(&mut self, now: Instant, link: usize) {
        self.links[link].holding = false;
        self.sync_subs(now, link);
        let l = &mut self.links[link];
        l.out.append(&mut l.held);
        // Queued for sending now: round trips count from here.
        l.pending.extend(l.held_pending.drain(..).map(|(p, _)| (p, now)));
    }

    /// Bring `link`'s subscriptions in line with the channels waiters need, if it carries
    /// release messages and is behind.
    pub(super) fn sync_subs(&mut self, now: Instant, link: usize) {
        let Some(l) = self.links.get(link) else { return };
        if l.subs_gen == self.subs_gen || l.wake != WakeState::On || l.holding || !l.takes_requests() {
            return;
        }
        let owner = l.owner as usize;
        let routes = self.routes.get(owner).and_then(Option::as_deref);
        let wanted: BTreeSet<&[u8]> = self
            .channels
            .iter()
            .filter(|(_, listen)| match (routes, listen.shard) {
                (Some(routes), Some(slot)) => routes.serves(slot, link),
                (Some(_), None) => false,
                (None, _) => listen.plain,
            })
            .map(|(ch, _)| ch.as_slice())
            .collect();
        let sharded = routes.is_some();
        let l = &mut self.links[link];
        let changed_kind = sharded != l.subs_sharded;
        let gone: Vec<Vec<u8>> =
            l.subs.iter().filter(|ch| changed_kind || !wanted.contains(ch.as_slice())).cloned().collect();
        let (unsubscribe, fence): (&[u8], bool) =
            if l.subs_sharded { (b"SUNSUBSCRIBE", !gone.is_empty()) } else { (b"UNSUBSCRIBE", false) };
        for channel in gone {
            resp::command(&mut l.out, &[unsubscribe, &channel]);
            l.pending.push_back((Pending::Unsubscribe { sharded: l.subs_sharded }, now));
            l.subs.remove(&channel);
        }
        if fence {
            resp::command(&mut l.out, &[b"PING"]);
            l.pending.push_back((Pending::Ping, now));
        }
        l.subs_sharded = sharded;
        let subscribe: &[u8] = if sharded { b"SSUBSCRIBE" } else { b"SUBSCRIBE" };
        for channel in wanted {
            if !l.subs.contains(channel) {
                resp::command(&mut l.out, &[subscribe, channel]);
                let shard = sharded.then(|| hash_slot(channel));
                l.pending.push_back((Pending::Subscribe { shard }, now));
                l.subs.insert(channel.to_vec());
            }
        }
        l.subs_gen = self.subs_gen;
    }

    /// Bring every link's subscriptions in line with the channels waiters need now, rather
    /// than ahead of its next request: a channel nobody waits on any more is unsubscribed even
    /// when no request follows (an engine whose last waiter left holds no subscription).
    pub(crate) fn sync_all(&mut self, now: Instant) {
        for link in 0..self.links.len() {
            self.sync_subs(now, link);
        }
    }

    /// The slot map of cluster node `node` changed: its links' sharded subscriptions follow
    /// it now (not at their next request: a waiter may send none for a while).
    pub(super) fn map_changed(&mut self, now: Instant, node: usize) {
        self.subs_gen = self.subs_gen.wrapping_add(1);
        for link in self.links_of(node).collect::<Vec<_>>() {
            self.sync_subs(now, link);
        }
    }

    /// A master unsubscribed `link` from `channel` unasked (it no longer serves the slot), or
    /// refused a subscription to one of `slot`'s channels for a while (`TRYAGAIN`,
    /// `CLUSTERDOWN`): forget those subscriptions; the next sync subscribes where the map
    /// says (a master that still claims the slot answers `MOVED`, which moves it).
    pub(super) fn shard_dropped(&mut self, now: Instant, link: usize, channel: Option<&[u8]>, slot: u16) {
        let Some(l) = self.links.get_mut(link) else { return };
        match channel {
            Some(channel) => {
                if !l.subs.remove(channel) {
                    // (The answer to our own `SUNSUBSCRIBE`.)
                    return;
                }
            }
            None => l.subs.retain(|ch| hash_slot(ch) != slot),
        }
        l.subs_gen = self.subs_gen.wrapping_sub(1);
        if channel.is_some() {
            self.sync_subs(now, link);
        }
    }

    /// Nodes whose release messages arrive now: a link of theirs carries them.
    pub(crate) fn waking(&self) -> usize {
        (0..self.nodes)
            .filter(|&node| self.links_of(node).any(|i| self.links[i].wake == WakeState::On && self.links[i].is_up()))
            .count()
    }

    /// `node`'s own link, then the links to its masters.
    pub(super) fn links_of(&self, node: usize) -> impl Iterator<Item = usize> + use<'_> {
        std::iter::once(node)
            .chain((self.nodes..self.links.len()).filter(move |&i| self.links[i].owner as usize == node))
    }

    /// Listen for release messages on `channel`: a standalone node's (`shard` false), or a
    /// cluster node's (sharded, `shard` true); both when both kinds announce on it. Each link
    /// that carries release messages subscribes ahead of the next request it sends. `false`
    /// if the cap of channels is reached (the waiters on it poll).
    pub(crate) fn subscribe(&mut self, channel: &[u8], shard: bool) -> bool {
        if !self.channels.contains_key(channel) && self.channels.len() >= MAX_CHANNELS {
            return false;
        }
        let listen = self.channels.entry(channel.to_vec()).or_default();
        let before = *listen;
        if shard {
            listen.shard = Some(hash_slot(channel));
        } else {
            listen.plain = true;
        }
        if *listen != before {
            self.subs_gen = self.subs_gen.wrapping_add(1);
        }
        true
    }

    /// No waiter needs `channel` any more: each link unsubscribes ahead of its next request.
    pub(crate) fn unsubscribe(&mut self, channel: &[u8]) {
        if self.channels.remove(channel).is_some() {
            self.subs_gen = self.subs_gen.wrapping_add(1);
        }
    }
}
