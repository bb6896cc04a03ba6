//! The outcomes events carry: each node's vote, and why an acquisition, an extension or a
//! release ended as it did.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Fault;

/// What one node said in one round.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Vote {
    /// No answer yet: the round was decided before this node answered.
    Pending,
    /// The node granted (or confirmed) the operation.
    Granted,
    /// The node refused: the key is held by another token (or, for extend, no longer ours).
    Refused,
    /// The node was not connected.
    Down,
    /// The node did not answer within the node timeout.
    TimedOut,
    /// The node answered with an error (text of the `-ERR` reply), or its link failed or is
    /// down after a failure (its link error's reason, e.g. `connect failed: Connection refused`).
    Error(String),
    /// The node refused us for a configuration reason ([`Fault::Misconfigured`]): a wrong
    /// password (`AUTH failed: WRONGPASS ...`), a database it does not have, an ACL
    /// (`NOPERM ...`), a key of another type (`WRONGTYPE ...`).
    Misconfigured(String),
    /// The node granted, but fewer of its replicas than
    /// [`min_replicas`](crate::NodeConfig::min_replicas) asks acknowledged the write within
    /// its timeout (`WAIT`): a failover could lose it, so it does not count.
    Unreplicated {
        /// Replicas that acknowledged it.
        acked: u32,
        /// Replicas asked for.
        wanted: u32,
    },
}

impl Vote {
    /// Whether this vote counts against the operation for lack of an answer (not a refusal).
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            Vote::Down | Vote::TimedOut | Vote::Error(_) | Vote::Misconfigured(_) | Vote::Unreplicated { .. }
        )
    }

    /// What kind of failure the vote is, if it is one.
    pub fn fault(&self) -> Option<Fault> {
        match self {
            Vote::Down | Vote::TimedOut | Vote::Unreplicated { .. } => Some(Fault::Unreachable),
            Vote::Error(_) => Some(Fault::Protocol),
            Vote::Misconfigured(_) => Some(Fault::Misconfigured),
            Vote::Pending | Vote::Granted | Vote::Refused => None,
        }
    }
}

/// The votes of one round, by node, with each node's address (never a password) for messages.
///
/// Dereferences to the slice of votes, indexed by [`NodeId`].
///
/// [`NodeId`]: crate::NodeId
#[derive(Clone, PartialEq, Eq)]
pub struct Votes {
    votes: Vec<Vote>,
    addrs: Arc<[Arc<str>]>,
}

impl Votes {
    pub(crate) fn new(votes: Vec<Vote>, addrs: Arc<[Arc<str>]>) -> Self {
        Votes { votes, addrs }
    }

    /// The address of node `i`, `redis://[user@]host:port[/db]`.
    pub fn addr(&self, i: usize) -> Option<&str> {
        self.addrs.get(i).map(|a| &**a)
    }

    /// The votes, by node.
    pub fn as_slice(&self) -> &[Vote] {
        &self.votes
    }
}

impl std::ops::Deref for Votes {
    type Target = [Vote];

    fn deref(&self) -> &[Vote] {
        &self.votes
    }
}

impl fmt::Debug for Votes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.votes).finish()
    }
}

/// Why an acquisition did not succeed (after all its attempts).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AcquireError {
    /// Enough nodes hold the resource for someone else that no quorum was possible.
    #[error("held by another client ({} of {} nodes refused) after {attempts} attempt(s)", count(votes, |v| *v == Vote::Refused), votes.len())]
    Held {
        /// Per-node votes of the last attempt, indexed by node.
        votes: Votes,
        /// Attempts made.
        attempts: u32,
    },
    /// Too many nodes were down, timed out or answered errors for a quorum.
    #[error("nodes unreachable ({} of {} failed: {}) after {attempts} attempt(s)", count(votes, Vote::is_failure), votes.len(), describe(votes))]
    Unreachable {
        /// Per-node votes of the last attempt, indexed by node.
        votes: Votes,
        /// Attempts made.
        attempts: u32,
    },
    /// No quorum, and nodes refused us for a configuration reason (a wrong password, a
    /// database or an ACL, a key of another type): retrying does not help, an operator must.
    #[error("nodes misconfigured ({} of {} failed: {}) after {attempts} attempt(s)", count(votes, Vote::is_failure), votes.len(), describe(votes))]
    Misconfigured {
        /// Per-node votes of the last attempt, indexed by node.
        votes: Votes,
        /// Attempts made.
        attempts: u32,
    },
    /// A quorum granted, but too late: no validity was left after the drift margin.
    #[error(
        "quorum reached too late: {elapsed:?} elapsed of a {ttl:?} ttl left no validity after {attempts} attempt(s)"
    )]
    TooSlow {
        /// Time from the start of the last attempt to the quorum.
        elapsed: Duration,
        /// The lock's TTL.
        ttl: Duration,
        /// Attempts made.
        attempts: u32,
    },
    /// The wait bound ([`LockOptions::wait`](crate::LockOptions::wait)) passed without the
    /// lock, while attempts were left.
    #[error("gave up after waiting {waited:?} for the lock (last attempt: {last})")]
    WaitTimeout {
        /// Time from the call to giving up.
        waited: Duration,
        /// Attempts made.
        attempts: u32,
        /// Why the last attempt failed.
        last: Box<AcquireError>,
    },
    /// A node's fence counter has reached 2^53 − 1, above which Lua (whose numbers are
    /// doubles) cannot count exactly: no larger fencing token can be handed out safely.
    #[error("fence counter {counter} is at the 2^53 limit of exact Lua numbers: no larger fencing token can be issued")]
    FenceExhausted {
        /// The largest counter seen.
        counter: u64,
    },
    /// The acquisition was cancelled by the caller.
    #[error("acquisition cancelled")]
    Cancelled,
}

fn count(votes: &[Vote], f: impl Fn(&Vote) -> bool) -> usize {
    votes.iter().filter(|v| f(v)).count()
}

/// The failed votes, each node named once by its index and address:
/// `node #1 (redis://127.0.0.1:7001): down; node #2 (...): AUTH failed: ...`.
fn describe(votes: &Votes) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for (i, v) in votes.iter().enumerate() {
        let unreplicated;
        let what = match v {
            Vote::Down => "down",
            Vote::TimedOut => "timed out",
            Vote::Error(e) | Vote::Misconfigured(e) => e,
            Vote::Unreplicated { acked, wanted } => {
                unreplicated = format!("granted, but {acked} of {wanted} replicas acknowledged it in time");
                &unreplicated
            }
            _ => continue,
        };
        let sep = if s.is_empty() { "" } else { "; " };
        match votes.addr(i) {
            Some(addr) => {
                let _ = write!(s, "{sep}node #{i} ({addr}): {what}");
            }
            None => {
                let _ = write!(s, "{sep}node #{i}: {what}");
            }
        }
    }
    s
}

/// Why an extension did not succeed. The lock's keys are never deleted by a failed extend.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtendError {
    /// A majority of nodes say the lock is no longer ours (expired or taken): it is lost.
    #[error("lock lost: {refused} of {nodes} nodes no longer hold our token")]
    Lost {
        /// Nodes that refused (in the extension that found the lock lost).
        refused: usize,
        /// Nodes in all.
        nodes: usize,
    },
    /// Not enough nodes confirmed in time; the lock may still be held until its old deadline.
    #[error("extension not confirmed: only {extended} of {nodes} nodes extended in time (quorum {quorum})")]
    Unconfirmed {
        /// Nodes that extended.
        extended: usize,
        /// Nodes in all.
        nodes: usize,
        /// Nodes needed.
        quorum: usize,
    },
    /// The lock's validity had already run out before the extension.
    #[error("lock already expired before the extension")]
    Expired,
    /// The extension was cancelled by the caller.
    #[error("extension cancelled")]
    Cancelled,
}

/// How a release ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseOutcome {
    /// A quorum of nodes deleted our keys.
    Released,
    /// A quorum answered, but fewer than a quorum still held our token: the lock had already
    /// expired or been taken over. Nothing of another holder was deleted.
    NotHeld,
    /// Too few nodes answered to tell; keys left behind expire with their TTL.
    Unreachable,
}

/// The typed report of a release: the outcome and the per-node counts behind it (they add up
/// to the number of nodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReleaseReport {
    /// The verdict.
    pub outcome: ReleaseOutcome,
    /// Nodes that deleted at least one of our keys.
    pub deleted: usize,
    /// Nodes that answered but held none of our keys.
    pub absent: usize,
    /// Nodes that were down, timed out or answered an error.
    pub failed: usize,
    /// Nodes that had not answered yet when the outcome was decided (their release is still
    /// sent and applied; a late `NOSCRIPT` is resent).
    pub pending: usize,
}

/// Why a held lock was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// The validity deadline passed without a successful extension.
    Expired,
    /// An extension was refused by a majority: the keys are gone or someone else holds them.
    Refused,
    /// Nobody drives the engine any more (the client was closed, its runtime shut down or
    /// its event loop failed), so nobody extends the lock. Reported by the clients; the
    /// engine itself never emits it.
    Stopped,
}
