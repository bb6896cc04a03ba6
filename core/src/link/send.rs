//! Requests queued on the links: on a node's own link, or on the link of the master that
//! serves the request's slot when the node is a Redis Cluster; and the cleanups kept to be
//! sent again after a redirect.

use std::time::Instant;

use super::{Cmd, Copy, Links};
use crate::error::Vote;
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
        let pending = match pending {
            Pending::Cleanup if self.is_cluster(node) => {
                self.keep_copy(Copy { bytes: bytes.into(), hops: 0, attempt_of: None })
            }
            Pending::AttemptCleanup { lock } if self.is_cluster(node) => {
                self.keep_copy(Copy { bytes: bytes.into(), hops: 0, attempt_of: Some(lock) })
            }
            Pending::AttemptCleanup { .. } => Pending::Cleanup,
            other => other,
        };
        self.send_on(now, link, pending, |out| out.extend_from_slice(bytes))
    }

    /// Queue a redirected request on `link` like [`send_on`](Self::send_on), behind `ASKING`
    /// when `ask` (an `ASK` redirect: the flag holds for the next command only, so both go
    /// through the same queue, or neither).
    pub(crate) fn send_asking(
        &mut self,
        now: Instant,
        link: usize,
        ask: bool,
        pending: Pending,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), Vote> {
        if ask && self.links.get(link).is_some_and(super::Link::takes_requests) {
            self.links[link].push(now, Pending::Asking, |out| crate::resp::command(out, &[b"ASKING"]));
        }
        self.send_on(now, link, pending, encode)
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
                self.sync_subs(now, link);
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
    fn keep_copy(&mut self, copy: Copy) -> Pending {
        self.next_copy = self.next_copy.wrapping_add(1);
        self.copies.insert(self.next_copy, copy);
        Pending::Resend { copy: self.next_copy }
    }

    /// A kept request whose reply came (`None`: none is kept under that number).
    pub(crate) fn take_copy(&mut self, copy: u32) -> Option<Copy> {
        self.copies.remove(&copy)
    }

    /// Queue a kept request again, on `link` (behind `ASKING` with `ask`), one redirect
    /// further.
    pub(crate) fn resend_copy(&mut self, now: Instant, link: usize, mut copy: Copy, ask: bool) {
        copy.hops += 1;
        let bytes = copy.bytes.clone();
        let pending = self.keep_copy(copy);
        let _ = self.send_asking(now, link, ask, pending, |out| out.extend_from_slice(&bytes));
    }
}
