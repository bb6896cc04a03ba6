//! The adapter's error type.

use std::io;
use std::time::Duration;

use redlease_core::{AcquireError, ConfigError, ExtendError, Misuse};

/// Everything that can go wrong in a call of this crate.
///
/// Outcomes of the protocol keep the core's typed errors ([`AcquireError`], [`ExtendError`]);
/// a release is not an error whatever its outcome: it returns a
/// [`ReleaseReport`](redlease_core::ReleaseReport).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work (bad URL, no nodes, ...).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An argument of the adapter itself cannot work (the [`Driver`](crate::Driver)'s base
    /// token); a bad [`Config`](crate::Config) fails as [`Error::Config`].
    #[error("bad setting {field}: {reason}")]
    Setting {
        /// The field, e.g. `base token`.
        field: &'static str,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The call was refused at once (zero TTL, empty resource, ...); nothing was sent.
    #[error(transparent)]
    Misuse(#[from] Misuse),
    /// The lock was not acquired.
    #[error(transparent)]
    Acquire(#[from] AcquireError),
    /// The extension did not succeed (nothing was deleted).
    #[error(transparent)]
    Extend(#[from] ExtendError),
    /// A `wait` bound passed without the lock.
    #[error("lock not acquired within the wait bound ({waited:?} waited){}", last.as_ref().map(|e| format!(": last attempt: {e}")).unwrap_or_default())]
    WaitTimeout {
        /// How long the call waited.
        waited: Duration,
        /// Why the last attempt failed.
        last: Option<AcquireError>,
    },
    /// The client's event loop failed (its `mio::Poll` returned an error); the client is unusable.
    #[error("the client's event loop is gone")]
    Closed,
    /// The operating system refused something (creating the poller, reading random bytes).
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}
