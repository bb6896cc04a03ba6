//! The router's election reads: an observer's `leader()` issued to the engine, and its
//! outcome routed back.

use std::time::Instant;

use redlease_core::{Engine, Leader, ReadId};

use super::Router;
use crate::Error;
use crate::oneshot::Sender;

/// Where the answer to an election read goes: the leader, if a quorum of the nodes hold one.
pub(crate) type LeaderReply = Sender<Result<Option<Leader>, Error>>;

impl Router {
    /// Read who leads the election `name` on every node; the answer goes to `reply` (at once
    /// when the read is refused: a bad name, or the client closed).
    pub fn read_leader(&mut self, engine: &mut Engine, now: Instant, name: &str, reply: LeaderReply) {
        if self.closed {
            let _ = reply.send(Err(Error::Closed));
            return;
        }
        match engine.read_leader(now, name) {
            Ok(read) => {
                self.reads.insert(read, reply);
            }
            Err(misuse) => {
                let _ = reply.send(Err(misuse.into()));
            }
        }
    }

    /// The engine decided `read`.
    pub(super) fn leader_read(&mut self, read: ReadId, leader: Option<Leader>) {
        if let Some(reply) = self.reads.remove(&read) {
            let _ = reply.send(Ok(leader));
        }
    }
}
