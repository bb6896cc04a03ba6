//! The one error type of every client.

use std::io;

use redlease_core::{AcquireError, ConfigError, ExtendError, Health, Misuse, NodeState};

/// Why a client call failed; the same in every adapter.
///
/// Outcomes of the protocol keep the core's typed errors ([`AcquireError`], with
/// [`AcquireError::WaitTimeout`] when a wait bound ran out, and [`ExtendError`]); a release is
/// not an error whatever its outcome: it returns a
/// [`ReleaseReport`](redlease_core::ReleaseReport).
///
/// Each variant says what to do about it: retry later ([`AcquireError::Held`]), page an
/// operator ([`AcquireError::Misconfigured`], [`Error::Config`]), or fix the call
/// ([`Error::Misuse`]). Messages name nodes by index and address, never by password. The
/// questions asked most have helpers that look through a wait timeout to the last attempt:
/// [`is_held`](Error::is_held), [`is_unreachable`](Error::is_unreachable),
/// [`is_misconfigured`](Error::is_misconfigured).
///
/// ```
/// # use redlease_client::Error;
/// fn describe<T>(result: &Result<T, Error>) -> &'static str {
///     match result {
///         Ok(_) => "held",
///         Err(e) if e.is_held() => "someone else holds it: try later",
///         Err(e) if e.is_unreachable() => "too few nodes answered",
///         Err(e) if e.is_misconfigured() => "fix the setup",
///         Err(Error::Closed) => "the client is closed",
///         Err(_) => "failed",
///     }
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The node list or the settings cannot work (bad URL, no nodes, a zero timeout, ...).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The call was refused before anything was sent (zero TTL, empty resource, ...).
    #[error(transparent)]
    Misuse(#[from] Misuse),
    /// The lock was not acquired: held by someone else, nodes unreachable, too slow, the wait
    /// bound ran out, cancelled.
    #[error(transparent)]
    Acquire(#[from] AcquireError),
    /// The extension failed: lost, not confirmed by a quorum, or already expired. Nothing was
    /// deleted.
    #[error(transparent)]
    Extend(#[from] ExtendError),
    /// An argument of an adapter itself cannot work (the mio driver's base token).
    #[error("bad setting {field}: {reason}")]
    Setting {
        /// The argument, e.g. `base token`.
        field: &'static str,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The operating system refused something: the random source (lock tokens, seeds), a
    /// poller, a thread.
    #[error("the operating system refused: {0}")]
    Io(#[from] io::Error),
    /// The async runtime cannot be used from where the client was made (tokio: no runtime
    /// on this thread); the message says what to do.
    #[error("{0}")]
    Runtime(String),
    /// Too few nodes became ready while connecting: no quorum (or, with
    /// [`Config::require_all`](redlease_core::Config::require_all), not every node) once each
    /// node's first attempt ended. The health view says which and why;
    /// [`Health::misconfigured`] tells a setup to fix from nodes out of reach.
    #[error("too few nodes are ready to start (a quorum of {}, or all of them with require_all): {}", .0.quorum, unready(.0))]
    Unhealthy(Box<Health>),
    /// The client is closed: its `close()` was called, its driver stopped (the runtime shut
    /// down, the driver future was dropped) or its event loop failed.
    #[error("the redlease client is closed: close() was called, or its driver or event loop stopped")]
    Closed,
}

impl Error {
    /// The acquisition's own outcome: the error itself, or the last attempt's when a wait
    /// bound ran out.
    fn acquire(&self) -> Option<&AcquireError> {
        match self {
            Error::Acquire(AcquireError::WaitTimeout { last, .. }) => Some(last),
            Error::Acquire(e) => Some(e),
            _ => None,
        }
    }

    /// Someone else holds the lock (at once, or still when the wait ran out): try later.
    pub fn is_held(&self) -> bool {
        matches!(self.acquire(), Some(AcquireError::Held { .. }))
    }

    /// Too few nodes could be reached: down, silent, or not connected yet (an acquisition,
    /// or `connect` without a quorum for reasons other than the setup).
    pub fn is_unreachable(&self) -> bool {
        match self {
            Error::Unhealthy(_) => !self.is_misconfigured(),
            e => matches!(e.acquire(), Some(AcquireError::Unreachable { .. })),
        }
    }

    /// The setup is wrong and retrying will not mend it: a bad config or URL, or nodes
    /// refusing us for a configuration reason (a wrong password or database, an ACL, a key of
    /// another type).
    pub fn is_misconfigured(&self) -> bool {
        match self {
            Error::Config(_) => true,
            // Refused by nodes that alone leave no quorum (or, with a quorum ready, by the
            // nodes `require_all` wanted too); nodes merely out of reach may come back.
            Error::Unhealthy(health) => {
                health.misconfigured_beyond_quorum() || (health.can_lock() && health.misconfigured())
            }
            e => matches!(e.acquire(), Some(AcquireError::Misconfigured { .. })),
        }
    }

    /// The wait bound ran out ([`AcquireError::WaitTimeout`]); [`is_held`](Self::is_held) and
    /// the others still say why the last attempt failed.
    pub fn is_wait_timeout(&self) -> bool {
        matches!(self, Error::Acquire(AcquireError::WaitTimeout { .. }))
    }
}

/// The nodes that are not ready, with their state and last error: `node #0
/// (redis://alice@10.0.0.1:6379): down: AUTH failed: WRONGPASS ...`.
fn unready(health: &Health) -> String {
    let mut parts = Vec::new();
    for n in health.nodes.iter().filter(|n| !n.is_ready()) {
        let state = match n.state {
            NodeState::Handshaking => "handshaking",
            NodeState::Connecting => "connecting",
            _ if n.is_misconfigured() => "misconfigured",
            _ => "down",
        };
        match &n.last_error {
            Some(e) => parts.push(format!("{} ({}): {state}: {e}", n.node, n.addr)),
            None => parts.push(format!("{} ({}): {state}", n.node, n.addr)),
        }
    }
    format!("{} of {} ready; {}", health.usable(), health.nodes.len(), parts.join("; "))
}
