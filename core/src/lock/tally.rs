//! The votes of a lock's round, by node, and the round they belong to.

use std::time::{Duration, Instant};

use crate::error::Vote;
use crate::wire::{Op, OpAnswer};

/// The votes of one round, by node.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    votes: Vec<Vote>,
    pub(crate) yes: usize,
    pub(crate) no: usize,
    pub(crate) failed: usize,
}

impl Tally {
    pub(super) fn reset(&mut self, n: usize) {
        self.votes.clear();
        self.votes.resize(n, Vote::Pending);
        self.yes = 0;
        self.no = 0;
        self.failed = 0;
    }

    /// Record `node`'s vote; `false` if it already voted in this round.
    #[inline]
    pub(crate) fn record(&mut self, node: usize, vote: Vote) -> bool {
        if self.votes[node] != Vote::Pending {
            return false;
        }
        match vote {
            Vote::Granted => self.yes += 1,
            Vote::Refused => self.no += 1,
            Vote::Pending => return false,
            _ => self.failed += 1,
        }
        self.votes[node] = vote;
        true
    }

    /// The node timeout passed: every node that has not answered timed out (`each` is told
    /// which).
    pub(crate) fn time_out(&mut self, mut each: impl FnMut(usize)) {
        for (i, v) in self.votes.iter_mut().enumerate().filter(|(_, v)| **v == Vote::Pending) {
            *v = Vote::TimedOut;
            self.failed += 1;
            each(i);
        }
    }

    pub(crate) fn open(&self) -> usize {
        self.votes.len() - self.yes - self.no - self.failed
    }

    pub(crate) fn votes(&self) -> &[Vote] {
        &self.votes
    }
}

/// The round in flight (or the last one): its identity, start and votes.
#[derive(Debug)]
pub(crate) struct Round {
    /// Bumped at every phase change; replies of older rounds are ignored.
    pub(crate) id: u32,
    pub(crate) start: Instant,
    pub(crate) tally: Tally,
    /// Per node, a grant held back until the node's replicas acknowledge it (`WAIT`), for
    /// nodes with [`min_replicas`](crate::NodeConfig::min_replicas), with its round's id (kept
    /// until the next round begins, so that a late one is still trimmed).
    pub(crate) awaiting: Vec<Option<(u32, Op, OpAnswer)>>,
    /// Per node, the cluster redirects this round's request followed.
    pub(crate) hops: Vec<u8>,
    /// Per node that refused an acquire, how long the key it is held by had left there (an
    /// acquire script's `HELD ms`).
    pub(crate) held: Vec<Option<Duration>>,
}

impl Round {
    /// A new round over `n` nodes: no votes, nothing held back.
    pub(super) fn reset(&mut self, n: usize) {
        self.tally.reset(n);
        self.awaiting.clear();
        self.awaiting.resize(n, None);
        self.hops.clear();
        self.hops.resize(n, 0);
        self.held.clear();
        self.held.resize(n, None);
    }

    /// How soon a quorum `q` of the nodes could grant what this acquire round was refused, by
    /// what they said: at once where they granted, once the holder's key expired where they
    /// said how long it had left. `None` when fewer than a quorum said either, or none said
    /// how long (the round was no refused acquire's), or a quorum granted (the round failed
    /// for another reason: a semaphore's nodes granted different permits, or it was too slow,
    /// and an expiry says nothing of when that ends).
    pub(crate) fn free_in(&self, q: usize) -> Option<Duration> {
        if q == 0 || self.tally.yes >= q || self.held.iter().all(Option::is_none) {
            return None;
        }
        let mut free: Vec<Duration> = (self.tally.votes.iter().zip(&self.held))
            .filter_map(|(vote, held)| if *vote == Vote::Granted { Some(Duration::ZERO) } else { *held })
            .collect();
        if free.len() < q {
            return None;
        }
        free.sort_unstable();
        Some(free[q - 1])
    }
}
