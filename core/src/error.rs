//! Errors: configs that cannot work and commands misused, returned at once; what failed on a
//! node's link ([`link`]); and the outcomes that events carry ([`outcome`]): votes, and why an
//! acquisition, extension or release ended as it did.

mod link;
mod outcome;

use std::time::Duration;

use crate::LockId;

pub(crate) use link::is_cluster_error;
pub use link::{Fault, LinkError};
pub use outcome::{AcquireError, ExtendError, LostReason, ReleaseOutcome, ReleaseReport, Vote, Votes};

/// A configuration that cannot work: returned by the URL parser, and when a client is made
/// with it (or `Engine::new`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The node list is empty.
    #[error("no nodes configured: give at least one redis://host:port URL (Redlock wants 3 or 5 independent masters)")]
    NoNodes,
    /// An environment variable read by [`Config::from_env`](crate::Config::from_env) is
    /// missing or unusable.
    #[error("{var}: {reason}")]
    Env {
        /// The variable, e.g. `REDLEASE_NODES`.
        var: &'static str,
        /// What is wrong with it (never its value, which may hold passwords).
        reason: String,
    },
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
    /// A Sentinel-managed node that cannot work as configured.
    #[error("node {node}: {reason}")]
    Sentinel {
        /// The node, as a URL without its passwords.
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
    /// A node's [`min_replicas`](crate::NodeConfig::min_replicas) timeout is zero (`WAIT`
    /// would block for good) or not below `node_timeout`, which bounds the whole vote (every
    /// grant would time out first).
    #[error(
        "node {node}: the min_replicas timeout {timeout:?} must be above zero and below node_timeout \
         {node_timeout:?}, which bounds the node's vote: e.g. ?replicas_timeout=20 with the default 50ms node_timeout"
    )]
    ReplicasTimeout {
        /// The node, as a URL without its password.
        node: String,
        /// Its `min_replicas` timeout.
        timeout: Duration,
        /// The config's node timeout.
        node_timeout: Duration,
    },
    /// `fence_prefix` is empty: a resource's fence counter would be the lock key itself.
    #[error("fence_prefix is empty: fence counters would collide with lock keys; use e.g. \"redlease:fence:\"")]
    EmptyFencePrefix,
    /// `key_prefix` puts every lock key among the fence counters or the names redlease keeps
    /// for itself.
    #[error(
        "key_prefix {prefix:?} puts every lock key among the fence counters or redlease's own names: use e.g. \"myapp:\""
    )]
    KeyPrefixReserved {
        /// The prefix.
        prefix: String,
    },
    /// `fence_prefix` overlaps a name redlease keeps for itself (the waiter queues, the lock
    /// format key): fence counters could collide with them.
    #[error(
        "fence_prefix {prefix:?} overlaps {reserved:?}, which redlease uses for itself: use e.g. \"redlease:fence:\""
    )]
    FencePrefixReserved {
        /// The prefix.
        prefix: String,
        /// The name it overlaps.
        reserved: &'static str,
    },
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
    /// A resource name is one redlease uses for itself: it starts with the waiter queues'
    /// prefix, or is the lock format key.
    #[error("resource {resource:?} is in a space redlease uses for itself ({reserved:?}): pick another name")]
    ReservedResource {
        /// The resource.
        resource: String,
        /// The reserved name or prefix.
        reserved: &'static str,
    },
    /// A semaphore's limit or permits are out of range or do not go together, or a read lock
    /// is asked of several resources or of a semaphore.
    #[error("lock shape (semaphore limit {limit:?}, permits {permits}): {reason}")]
    Permits {
        /// The limit asked for (`None`: not a semaphore).
        limit: Option<u32>,
        /// The permits asked for.
        permits: u32,
        /// What is wrong.
        reason: &'static str,
    },
    /// A re-entrant lock's owner is empty, too long or contains `:`, or re-entry is asked of
    /// a lock shape that has none (a semaphore, a read lock, several resources).
    #[error("reentrant(owner): {reason}")]
    Reentry {
        /// What is wrong.
        reason: &'static str,
    },
    /// An election's name or candidate value cannot be used ([`ElectionOptions`](crate::ElectionOptions)).
    #[error("election {field}: {reason}")]
    Election {
        /// The field: `name` or `value` (or `reads`: too many observers' reads in flight).
        field: &'static str,
        /// What is wrong and how to fix it.
        reason: &'static str,
    },
}
