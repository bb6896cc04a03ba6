//! The client's error type.

use std::fmt;
use std::time::Duration;

use redlease_core::{AcquireError, ConfigError, ExtendError, Misuse};

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The node list or the engine settings are unusable (bad URL, no nodes, ...).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The call was refused before anything was sent (zero TTL, empty resource, ...).
    #[error(transparent)]
    Misuse(#[from] Misuse),
    /// The lock was not acquired: held by someone else, nodes unreachable, too slow, cancelled.
    #[error(transparent)]
    Acquire(#[from] AcquireError),
    /// The extension failed: lost, not confirmed by a quorum, or already expired.
    #[error(transparent)]
    Extend(#[from] ExtendError),
    /// The wait bound given with [`LockBuilder::wait`](crate::LockBuilder::wait) passed
    /// without the lock.
    #[error("gave up after waiting {waited:?} for the lock{}", Last(last))]
    WaitTimeout {
        /// Time from the call to giving up.
        waited: Duration,
        /// The outcome of the last attempt, if one was made.
        last: Option<AcquireError>,
    },
    /// The OS random source failed, so no lock token could be made.
    #[error("the OS random source failed: {0}")]
    Random(String),
    /// The driver is gone (the runtime shut down, the driver future was dropped, or it could
    /// not be started).
    #[error("the redlease driver is gone: its runtime shut down or its future was dropped")]
    Closed,
}

struct Last<'a>(&'a Option<AcquireError>);

impl fmt::Display for Last<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(e) => write!(f, " (last attempt: {e})"),
            None => Ok(()),
        }
    }
}
