//! What the links bring to the locks: the replies read from a node acted on in order, and
//! the votes a link still owed when it goes down; and the inputs of a driver's TLS layer.

use std::time::Instant;

use super::Engine;
use super::election::vote_text;
use crate::error::{Fault, LinkError, Vote};
use crate::event::{Event, NodeId};
use crate::link::Next;
use crate::wire::{Pending, Step};

/// The inputs of a driver's TLS layer (the engine hears of the connection itself once the
/// TLS handshake is done).
impl Engine {
    /// The connection of the connect attempt to `node`, a `rediss://` node, is open and its
    /// TLS handshake has begun (the engine hears of the connection itself, with
    /// [`handle_connected`](Self::handle_connected), once the handshake is done). A connect
    /// timeout from here on is reported as a TLS handshake the server did not answer
    /// ([`LinkError::Tls`]): a plain port behind `rediss://`, or a server that stopped.
    /// Ignored unless the node is [`LinkState::Connecting`](crate::LinkState::Connecting).
    pub fn handle_tls_started(&mut self, now: Instant, node: NodeId) {
        let _ = now;
        self.links.tls_started(node);
    }

    /// The TLS handshake of the connect attempt to `node` failed in a way no retry fixes: the
    /// server's certificate did not verify (an unknown issuer, another name, expired), or the
    /// server answered something that is not TLS. `reason` says which and what to set; it is
    /// recorded as a misconfiguration ([`LinkError::Tls`], `TLS handshake failed: {reason}`),
    /// and the next attempt is scheduled after the reconnect backoff. Other TLS failures (the
    /// server closed the connection, sent an alert) go to
    /// [`handle_connect_failed`](Self::handle_connect_failed). Ignored unless the node is
    /// [`LinkState::Connecting`](crate::LinkState::Connecting).
    pub fn handle_tls_failed(&mut self, now: Instant, node: NodeId, reason: &str) {
        let error = |node, addr| LinkError::Tls { node, addr, reason: reason.to_owned(), fault: Fault::Misconfigured };
        if let Some(error) = self.links.connect_failed(now, node, error, &mut self.rng) {
            self.events.push_back(Event::LinkFailed { error });
        }
    }
}

impl Engine {
    /// Decode and act on the whole replies at the front of `buf`. Returns how many bytes
    /// they took, or `None` if the link failed (it is down and its input is void).
    pub(super) fn consume(&mut self, now: Instant, link: NodeId, buf: &[u8]) -> Option<usize> {
        let mut pos = 0;
        // Votes are the node's; a cluster node's replies come over the links to its masters.
        let node = self.links.owner(link);
        loop {
            match self.links.next_reply(now, link, &buf[pos..]) {
                Ok(Next::More) => return Some(pos),
                Ok(Next::Done(used)) => pos += used,
                Ok(Next::Ready(used)) => {
                    pos += used;
                    self.events.push_back(Event::LinkUp { node });
                }
                Ok(Next::WakeOff(used)) => {
                    pos += used;
                    self.events.push_back(Event::WakeOff { node });
                }
                Ok(Next::Message { used, channel, data }) => {
                    pos += used;
                    self.on_message(now, node, &channel, &data);
                }
                Ok(Next::Op { used, answer }) => {
                    pos += used;
                    if let Err(e) = self.on_answer(now, link, node, answer) {
                        self.fail_link(now, link, e);
                        return None;
                    }
                    if !self.links.is_up(link) {
                        return None;
                    }
                }
                Ok(Next::Redirect { used, pending, redirect }) => {
                    pos += used;
                    self.on_redirect(now, link, pending, redirect);
                }
                Ok(Next::Moved) => return None,
                Ok(Next::Switched { used, link: own, error }) => {
                    pos += used;
                    self.fail_link(now, own, error);
                }
                Ok(Next::Cluster { used, dropped }) => {
                    pos += used;
                    self.dropped(now, node, dropped);
                }
                Err(e) => {
                    self.fail_link(now, link, e);
                    return None;
                }
            }
        }
    }

    /// `node`'s connection is gone: the votes it owed in current rounds become `vote`.
    pub(super) fn take_down(&mut self, now: Instant, link: NodeId, vote: Vote) {
        let Some(pending) = self.links.take_down(now, link, &mut self.rng) else {
            return;
        };
        let node = self.links.owner(link);
        for (p, _) in pending {
            match p {
                Pending::Op { lock, round, .. } if self.locks.in_round(lock, round) => {
                    self.vote(now, lock.index, node.index(), vote.clone());
                }
                // A grant held back for its `WAIT`: the answer will never come, so the vote
                // fails now, not at the node timeout.
                Pending::Replicas { lock, round } if self.locks.in_round(lock, round) => {
                    self.vote(now, lock.index, node.index(), vote.clone());
                }
                Pending::Resend { copy } => drop(self.links.take_copy(copy)),
                Pending::Slots | Pending::Step(Step::Slots) => self.links.map_lost(link.index()),
                Pending::Read { read } => self.read_answered(now, node, read, Err(vote_text(&vote))),
                _ => {}
            }
        }
    }

    /// Requests to `node` that were never sent (encoded before it showed it is a Redis
    /// Cluster): a lock's vote there fails, and its next attempt goes out in the cluster form.
    fn dropped(&mut self, now: Instant, node: NodeId, dropped: Vec<Pending>) {
        let vote =
            || Vote::Error("the node turned out to be a Redis Cluster; not sent, tried again in its form".to_owned());
        for p in dropped {
            match p {
                Pending::Op { lock, round, .. } if self.locks.in_round(lock, round) => {
                    self.vote(now, lock.index, node.index(), vote());
                }
                Pending::Resend { copy } => drop(self.links.take_copy(copy)),
                Pending::Read { read } => self.read_answered(now, node, read, Err("not sent".to_owned())),
                _ => {}
            }
        }
    }

    /// The engine fails `error.node()`'s link: the driver is told to close it, the event is
    /// out, and the votes it owed become the error.
    pub(super) fn fail_link(&mut self, now: Instant, link: NodeId, error: LinkError) {
        let vote = match error.fault() {
            Fault::Misconfigured => Vote::Misconfigured(error.reason()),
            _ => Vote::Error(error.reason()),
        };
        self.links.failed(link, &error);
        self.events.push_back(Event::LinkFailed { error });
        self.take_down(now, link, vote);
    }
}
