//! The router's election reads: an observer's `leader()` issued to the engine, and its
//! outcome routed back.

use std::time::Instant;

use redlease_core::{Engine, Leader, ReadId};

use super::Router;
use crate::Error;
use crate::oneshot::Sender;

/// Where the answer to an election read goes: the leader, if a quorum of the nodes hold one.
pub(crate) type LeaderReply = Sender<Result<Option<Leader>, Error>>;
/// Told at the next release message of a watched election.
pub(crate) type WakeReply = Sender<()>;

/// A watched election: how many observers watch it, how many release messages were heard,
/// and who waits for the next.
#[derive(Default)]
pub(super) struct Watch {
    observers: usize,
    seq: u64,
    armed: Vec<WakeReply>,
}

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

    /// Start (`on`) or stop watching the election `name` for an observer.
    pub fn watch(&mut self, engine: &mut Engine, now: Instant, name: &str, on: bool) {
        if self.closed || engine.watch_leader(now, name, on).is_err() {
            return;
        }
        if on {
            self.watches.entry(name.to_owned()).or_default().observers += 1;
        } else if let Some(w) = self.watches.get_mut(name) {
            w.observers -= 1;
            if w.observers == 0 {
                self.watches.remove(name);
            }
        }
    }

    /// Tell `reply` at the next release message of the watched election `name` (dropped at
    /// once when it is not watched).
    pub fn arm_wake(&mut self, name: &str, reply: WakeReply) {
        if let Some(w) = self.watches.get_mut(name) {
            w.armed.push(reply);
        }
    }

    /// How many release messages of the watched election `name` were heard (0 when it is not
    /// watched).
    pub fn wake_seq(&self, name: &str) -> u64 {
        self.watches.get(name).map_or(0, |w| w.seq)
    }

    /// A release message of the election `name` was heard.
    pub(super) fn leader_woken(&mut self, name: &str) {
        if let Some(w) = self.watches.get_mut(name) {
            w.seq += 1;
            for reply in w.armed.drain(..) {
                let _ = reply.send(());
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
