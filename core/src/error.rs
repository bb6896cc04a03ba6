//! Errors: misuse returned at once by commands, and outcomes carried by events.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{LockId, NodeId};

/// A configuration that cannot work; returned by [`Engine::new`](crate::Engine::new) and the URL parser.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The node list is empty.
    #[error("no nodes configured: give at least one redis://host:port URL (Redlock wants 3 or 5 independent masters)")]
    NoNodes,
    /// More nodes than the engine can address.
    #[error("{0} nodes configured; at most 65535 are supported")]
    TooManyNodes(usize),
    /// A node URL could not be parsed.
    #[error("bad node URL {url:?}: {reason}")]
    BadUrl {
        /// The URL, with its password hidden.
        url: String,
        /// What is wrong and how to write it.
        reason: String,
    },
    /// A node's TLS settings cannot be used (a file that cannot be read, no certificate in
    /// it, a bad key), or it is a `rediss://` node and the client was built without TLS.
    #[error("TLS for node {node}: {reason}")]
    Tls {
        /// The node, as a URL without its password.
        node: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A Unix-socket node on a platform without Unix sockets.
    #[error("node {node}: Unix sockets are not available on this platform")]
    UnixUnsupported {
        /// The node.
        node: String,
    },
    /// `node_timeout` is zero.
    #[error("node_timeout is zero: set it to a small fraction of the TTL, e.g. 50ms for a 10s TTL")]
    ZeroNodeTimeout,
    /// `drift_factor` is outside `[0, 0.5)`.
    #[error("drift_factor {0} is out of range: use a value in [0, 0.5), typically 0.01")]
    BadDriftFactor(f64),
    /// `retry.attempts` is zero.
    #[error("retry.attempts is zero: it counts the first attempt, so use at least 1")]
    ZeroAttempts,
    /// `retry.min_delay > retry.max_delay`.
    #[error("retry.min_delay {min:?} is above retry.max_delay {max:?}: swap them")]
    BadRetryDelays {
        /// The configured minimum.
        min: Duration,
        /// The configured maximum.
        max: Duration,
    },
    /// `connect_timeout` is zero.
    #[error("connect_timeout is zero: give a TCP connect attempt some time, e.g. 1s")]
    ZeroConnectTimeout,
    /// `reconnect_min` is zero.
    #[error("reconnect_min is zero, which would reconnect in a busy loop: use e.g. 50ms")]
    ZeroReconnectMin,
    /// `reconnect_min > reconnect_max`.
    #[error("reconnect_min {min:?} is above reconnect_max {max:?}: swap them")]
    BadReconnectDelays {
        /// The configured minimum.
        min: Duration,
        /// The configured maximum.
        max: Duration,
    },
    /// `reconnect_jitter` is outside `[0, 1]` (or not a number).
    #[error("reconnect_jitter {0} is out of range: use a fraction in [0, 1], typically 0.5 (0 turns jitter off)")]
    BadReconnectJitter(f64),
    /// A delay is longer than its field allows (so that no deadline can overflow).
    #[error("{field} {value:?} is too long: use at most {limit}")]
    DelayTooLong {
        /// The field.
        field: &'static str,
        /// The configured value.
        value: Duration,
        /// The longest accepted, and what is typical.
        limit: &'static str,
    },
    /// `retry.max_delay` is zero: retries would run in a busy loop.
    #[error("retry.max_delay is zero, which would retry in a busy loop: use e.g. 200ms (and min_delay 20ms)")]
    ZeroRetryDelay,
    /// `liveness_timeout` is shorter than `node_timeout`.
    #[error(
        "liveness_timeout {liveness:?} is shorter than node_timeout {node_timeout:?}: a connection would be dropped \
         while a round still waits for it; use at least the node timeout (default: 10 × node_timeout, at least 500ms)"
    )]
    LivenessTooShort {
        /// The configured liveness timeout.
        liveness: Duration,
        /// The node timeout it must not undercut.
        node_timeout: Duration,
    },
    /// `fence_prefix` is empty: a resource's fence counter would be the lock key itself.
    #[error("fence_prefix is empty: fence counters would collide with lock keys; use e.g. \"redlease:fence:\"")]
    EmptyFencePrefix,
}

/// A command that cannot be carried out as asked; returned at once, nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Misuse {
    /// The TTL is zero.
    #[error("ttl is zero: give the lock a time to live, e.g. 10s")]
    ZeroTtl,
    /// The TTL does not exceed the clock-drift margin, so no validity could remain.
    #[error("ttl {ttl:?} is not above the clock-drift margin {drift:?} (ttl × drift_factor + 2ms): use a longer ttl")]
    TtlTooShort {
        /// The TTL asked for.
        ttl: Duration,
        /// The drift margin it must exceed.
        drift: Duration,
    },
    /// The TTL does not fit Redis' millisecond expiry.
    #[error("ttl {0:?} is too long for a Redis expiry: use at most a few years")]
    TtlTooLong(Duration),
    /// No resource, or an empty resource name.
    #[error("empty resource name: every lock needs at least one non-empty key")]
    EmptyResource,
    /// The token is empty.
    #[error("empty token: use a unique random value per acquisition (e.g. 20 random bytes, hex)")]
    EmptyToken,
    /// The token contains `:`, which marks a lock key as waited for and separates the tokens
    /// of a release message.
    #[error("token contains ':': use a unique random value per acquisition (e.g. 20 random bytes, hex)")]
    ColonInToken,
    /// The lock id is not known (never issued, or released and forgotten).
    #[error("unknown lock id {0:?}: it was never issued or its lock was already released")]
    UnknownLock(LockId),
    /// Another operation on this lock is still in flight.
    #[error("lock {0:?} is busy with another operation: wait for its event first")]
    Busy(LockId),
    /// The lock is not held yet (still acquiring): use `cancel` instead.
    #[error("lock {0:?} is still being acquired: use cancel() to abandon it")]
    NotAcquired(LockId),
    /// The lock is already held (or being released): use `release` instead of `cancel`.
    #[error("lock {0:?} is not being acquired or extended: use release() to give it up")]
    NothingToCancel(LockId),
    /// An extension would go past the lock's `max_hold` cap.
    #[error("lock {0:?} reached its max_hold cap: it cannot be extended further")]
    CapReached(LockId),
    /// A resource name starts with the config's `fence_prefix`: it would collide with the
    /// fence counter of another resource.
    #[error("resource {resource:?} starts with the fence counter prefix {prefix:?}: pick another name")]
    ResourceInFenceSpace {
        /// The resource.
        resource: String,
        /// The config's `fence_prefix`.
        prefix: String,
    },
}

/// A problem on one node's connection or connect attempt, carried by
/// [`Event::LinkFailed`](crate::Event::LinkFailed).
///
/// The engine has already taken the link down and scheduled the next connect attempt
/// (see [`Engine::poll_connect`](crate::Engine::poll_connect)); where the driver still holds
/// the connection or attempt, [`Engine::poll_close`](crate::Engine::poll_close) hands the node
/// out for it to drop. The text names the node once, by index and address
/// (never the password): `node #0 (redis://127.0.0.1:7000): AUTH failed: WRONGPASS ...`;
/// [`reason`](Self::reason) is the same without the node, as that node's votes carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkError {
    /// The bytes from the node are not valid RESP.
    Malformed {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// What the parser said.
        detail: String,
    },
    /// A reply of a type the request cannot produce (e.g. a string where a number belongs).
    Unexpected {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// The request being answered.
        request: &'static str,
        /// A short rendering of the reply.
        reply: String,
    },
    /// A reply arrived while no request was pending.
    Unsolicited {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// A short rendering of the reply.
        reply: String,
    },
    /// A step of the connection handshake was refused (wrong password, unknown database...).
    Handshake {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// `AUTH`, `SELECT` or `SCRIPT LOAD`.
        step: &'static str,
        /// The server's error text.
        message: String,
    },
    /// The connection is up but the node did not answer its oldest request in time (it is
    /// paused, behind a black hole, or half-open): within
    /// [`Config::liveness_timeout`](crate::Config::liveness_timeout), or within the connect
    /// timeout for the handshake.
    Silent {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// How long the oldest request had waited.
        waited: Duration,
        /// The unanswered request was part of the handshake.
        handshake: bool,
    },
    /// The driver reported a connect attempt failed
    /// ([`Engine::handle_connect_failed`](crate::Engine::handle_connect_failed)).
    ConnectFailed {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// Why, as the driver said (e.g. `Connection refused (os error 111)`).
        reason: String,
    },
    /// The driver reported the connection lost
    /// ([`Engine::handle_disconnected`](crate::Engine::handle_disconnected)): end of stream, a
    /// socket error.
    Lost {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// Why, as the driver said.
        reason: String,
    },
    /// A connect attempt handed out by [`Engine::poll_connect`](crate::Engine::poll_connect)
    /// did not connect within [`Config::connect_timeout`](crate::Config::connect_timeout).
    ConnectTimeout {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// The connect timeout that passed.
        after: Duration,
    },
}

impl LinkError {
    /// The node whose connection failed.
    pub fn node(&self) -> NodeId {
        match self {
            LinkError::Malformed { node, .. }
            | LinkError::Unexpected { node, .. }
            | LinkError::Unsolicited { node, .. }
            | LinkError::Handshake { node, .. }
            | LinkError::Silent { node, .. }
            | LinkError::ConnectFailed { node, .. }
            | LinkError::Lost { node, .. }
            | LinkError::ConnectTimeout { node, .. } => *node,
        }
    }

    /// The node's address as a URL without its password, e.g. `redis://127.0.0.1:7000`.
    pub fn addr(&self) -> &str {
        match self {
            LinkError::Malformed { addr, .. }
            | LinkError::Unexpected { addr, .. }
            | LinkError::Unsolicited { addr, .. }
            | LinkError::Handshake { addr, .. }
            | LinkError::Silent { addr, .. }
            | LinkError::ConnectFailed { addr, .. }
            | LinkError::Lost { addr, .. }
            | LinkError::ConnectTimeout { addr, .. } => addr,
        }
    }

    /// What went wrong, without naming the node: the text of the node's
    /// [`Vote::Error`] while it stays down.
    pub fn reason(&self) -> String {
        Reason(self).to_string()
    }

    /// What kind of failure it is: the node refused us for a configuration reason (a wrong
    /// password or user, a database it does not have, an ACL), it is out of reach, or it
    /// spoke something other than what our requests can produce.
    pub fn fault(&self) -> Fault {
        match self {
            LinkError::Handshake { step, message, .. } => {
                if *step == "AUTH" || *step == "SELECT" || Fault::of_server_error(message) == Fault::Misconfigured {
                    Fault::Misconfigured
                } else {
                    Fault::Protocol
                }
            }
            LinkError::Malformed { .. } | LinkError::Unexpected { .. } | LinkError::Unsolicited { .. } => {
                Fault::Protocol
            }
            LinkError::Silent { .. }
            | LinkError::ConnectFailed { .. }
            | LinkError::Lost { .. }
            | LinkError::ConnectTimeout { .. } => Fault::Unreachable,
        }
    }
}

/// What kind of trouble a node is in; see [`LinkError::fault`] and [`Vote::fault`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// Out of reach: down, refusing connections, timed out, silent.
    Unreachable,
    /// Refused for a configuration reason: a wrong password or user (`WRONGPASS`, `NOAUTH`),
    /// a database it does not have (`SELECT`), an ACL that forbids a command (`NOPERM`), a key
    /// of another type (`WRONGTYPE`). Retrying does not help; an operator must.
    Misconfigured,
    /// It answered something our requests cannot produce (garbage, a wrong type, an error).
    Protocol,
}

impl Fault {
    /// The kind of a server error reply (`-WRONGPASS ...`, `-NOPERM ...`, `-ERR ...`).
    pub fn of_server_error(text: &str) -> Fault {
        const CONFIG: [&str; 5] = ["WRONGPASS", "NOAUTH", "NOPERM", "WRONGTYPE", "ERR DB index"];
        if CONFIG.iter().any(|p| text.starts_with(p)) { Fault::Misconfigured } else { Fault::Protocol }
    }
}

/// The part of a [`LinkError`]'s text after the node.
struct Reason<'a>(&'a LinkError);

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            LinkError::Malformed { detail, .. } => write!(f, "malformed RESP from server: {detail}"),
            LinkError::Unexpected { request, reply, .. } => write!(f, "unexpected reply to {request}: {reply}"),
            LinkError::Unsolicited { reply, .. } => write!(f, "reply with no pending request: {reply}"),
            LinkError::Handshake { step, message, .. } => write!(f, "{step} failed: {message}"),
            LinkError::Silent { waited, handshake: true, .. } => {
                write!(f, "no answer to the connection handshake within {waited:?}")
            }
            LinkError::Silent { waited, handshake: false, .. } => {
                write!(f, "silent: no answer to a request within {waited:?}")
            }
            LinkError::ConnectFailed { reason, .. } => write!(f, "connect failed: {reason}"),
            LinkError::Lost { reason, .. } => write!(f, "connection lost: {reason}"),
            LinkError::ConnectTimeout { after, .. } => write!(f, "connect timed out after {after:?}"),
        }
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} ({}): {}", self.node(), self.addr(), Reason(self))
    }
}

impl std::error::Error for LinkError {}

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
    /// down after a failure ([`LinkError::reason`], e.g. `connect failed: Connection refused`).
    Error(String),
    /// The node refused us for a configuration reason ([`Fault::Misconfigured`]): a wrong
    /// password (`AUTH failed: WRONGPASS ...`), a database it does not have, an ACL
    /// (`NOPERM ...`), a key of another type (`WRONGTYPE ...`).
    Misconfigured(String),
}

impl Vote {
    /// Whether this vote counts against the operation for lack of an answer (not a refusal).
    pub fn is_failure(&self) -> bool {
        matches!(self, Vote::Down | Vote::TimedOut | Vote::Error(_) | Vote::Misconfigured(_))
    }

    /// What kind of failure the vote is, if it is one.
    pub fn fault(&self) -> Option<Fault> {
        match self {
            Vote::Down | Vote::TimedOut => Some(Fault::Unreachable),
            Vote::Error(_) => Some(Fault::Protocol),
            Vote::Misconfigured(_) => Some(Fault::Misconfigured),
            Vote::Pending | Vote::Granted | Vote::Refused => None,
        }
    }
}

/// The votes of one round, by node, with each node's address (never a password) for messages.
///
/// Dereferences to the slice of votes, indexed by [`NodeId`].
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
        let what = match v {
            Vote::Down => "down",
            Vote::TimedOut => "timed out",
            Vote::Error(e) | Vote::Misconfigured(e) => e,
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
