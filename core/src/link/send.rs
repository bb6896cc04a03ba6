//! Requests queued on the links: on a node's own link, or on the link of the master that
//! serves the request's slot when the node is a Redis Cluster; and the cleanups kept to be
//! sent again after a redirect.

use std::time::Instant;

use super::{Cmd, Links};
use crate::error::Vote;
use crate::event::WakeState;
use crate::wire::Pending;

impl Links {
    /// Queue `cmd` at `now` for every node, on the link that serves it (see
    /// [`send`](Self::send)), expecting the reply `pending`; `down` is told the vote of every
    /// node that cannot take it (down, too far behind, no master for the slot).
    pub(crate) fn broadcast(
        &mut self,
        now: Instant,
        cmd: Cmd<'_>,
        pending: Pending,
        mut down: impl FnMut(usize, Vote),
    ) {
        for node in 0..self.nodes {
            if let Err(vote) = self.send(now, node, cmd, pending) {
                down(node, vote);
            }
        }
    }

    /// Queue one request at `now` for `node`: as is on its own link, or in its cluster form on
    /// the link of the slot's master when the node is a Redis Cluster. `Err`: the node's vote
    /// when it cannot take it.
    pub(crate) fn send(&mut self, now: Instant, node: usize, cmd: Cmd<'_>, pending: Pending) -> Result<(), Vote> {
        let (link, bytes) = if self.is_cluster(node) {
            match cmd.cluster {
                Some((bytes, Ok(slot))) => (self.route(node, slot)?, bytes),
                Some((_, Err(why))) => return Err(Vote::Misconfigured(why.to_owned())),
                None => return Err(Vote::Error("a request without its cluster form".to_owned())),
            }
        } else {
            (node, cmd.plain)
        };
        if link != node {
            // A cluster node's release messages come over its own link, which may carry no
            // request for a while: its subscriptions go out now.
            self.sync_subs_of(now, node);
        }
        let pending = match pending {
            Pending::Cleanup if self.is_cluster(node) => self.keep_copy(bytes, 0),
            other => other,
        };
        self.send_on(now, link, pending, |out| out.extend_from_slice(bytes))
    }

    /// Bring link `link`'s subscriptions in line with the channels waiters need, if it
    /// carries release messages and is behind.
    fn sync_subs_of(&mut self, now: Instant, link: usize) {
        if let Some(l) = self.links.get_mut(link) {
            if l.subs_gen != self.subs_gen && l.wake == WakeState::On && !l.holding && l.takes_requests() {
                l.sync_subs(now, &self.channels, self.subs_gen);
            }
        }
    }

    /// Queue one request at `now` on link `link`, if it takes requests: `encode` writes it to
    /// the output buffer. `Err`: the link's vote when it does not.
    pub(crate) fn send_on(
        &mut self,
        now: Instant,
        link: usize,
        pending: Pending,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), Vote> {
        match self.links.get_mut(link) {
            Some(l) if l.takes_requests() => {
                self.sync_subs_of(now, link);
                self.links[link].push(now, pending, encode);
                Ok(())
            }
            Some(l) => {
                let vote = l.down_vote();
                if let Pending::Resend { copy } = pending {
                    self.copies.remove(&copy);
                }
                Err(vote)
            }
            None => Err(Vote::Down),
        }
    }

    /// Keep `bytes` for a redirect (a cleanup to a cluster node), having followed `hops`.
    fn keep_copy(&mut self, bytes: &[u8], hops: u8) -> Pending {
        self.next_copy = self.next_copy.wrapping_add(1);
        self.copies.insert(self.next_copy, (bytes.into(), hops));
        Pending::Resend { copy: self.next_copy }
    }

    /// A kept request whose reply came (`None`: none is kept under that number), with the
    /// redirects it followed.
    pub(crate) fn take_copy(&mut self, copy: u32) -> Option<(Box<[u8]>, u8)> {
        self.copies.remove(&copy)
    }

    /// Queue a kept request again, on `link`, having followed `hops` redirects.
    pub(crate) fn resend_copy(&mut self, now: Instant, link: usize, bytes: &[u8], hops: u8) {
        let pending = self.keep_copy(bytes, hops);
        let _ = self.send_on(now, link, pending, |out| out.extend_from_slice(bytes));
    }
}
