//! A held lock: [`Guard`].

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{Error, Lease, ReleaseReport, oneshot, spans};
use tracing::Instrument;

use super::command::{Command, Sender};

/// A held lock: its [`Lease`] (`fence`, `valid_until`, `remaining`, `lost`, … through
/// `Deref`) plus the way to its driver; the same type for every async runtime
/// (`redlease::tokio::Guard`, `redlease::smol::Guard`).
///
/// Dropping it releases the lock in the background; [`release`](Self::release) does the same
/// and reports what the nodes said. The lock is only safe to rely on until
/// [`valid_until`](Lease::valid_until) (the caller's monotonic clock) and while
/// [`lost`](Lease::lost) has not fired.
///
/// ```no_run
/// # use redlease::{Error, ReleaseOutcome};
/// use std::time::Duration;
/// # async fn example(client: redlease::tokio::Client) -> Result<(), Error> {
/// let mut guard = client.lock("orders:42", Duration::from_secs(10)).await?;
/// let until = guard.extend(Duration::from_secs(10)).await?;
/// println!("extended until {until:?}");
/// let report = guard.release().await?;
/// assert_eq!(report.outcome, ReleaseOutcome::Released);
/// # Ok(()) }
/// ```
pub struct Guard {
    lease: Lease,
    tx: Sender,
    /// The client's name, for the spans made here.
    client: Arc<str>,
    released: bool,
}

impl Guard {
    pub(crate) fn new(lease: Lease, tx: Sender, client: Arc<str>) -> Self {
        Guard { lease, tx, client, released: false }
    }

    /// The holder's view of the lock (also reached through `Deref`).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Extend the lock to `ttl` from now on every node; returns the new deadline.
    ///
    /// Succeeds iff a quorum extended it in time. A failed extension never deletes the lock
    /// ([`ExtendError`](crate::ExtendError) says whether it is gone or still valid until the
    /// old deadline at best).
    pub async fn extend(&mut self, ttl: Duration) -> Result<Instant, Error> {
        let span = spans::extend(&self.client, self.lease.resource());
        let (reply, mut rx) = oneshot::channel();
        let lock = self.lease.id();
        self.tx.send(Command::Extend { lock, ttl, reply, span: span.clone() }).map_err(|_| Error::Closed)?;
        async move { rx.recv().await.map_err(|_| Error::Closed)? }.instrument(span).await
    }

    /// Turn this write lock into a read lock, atomically on each node, for its TTL from now;
    /// returns the read lock's deadline. Writers still wait; other readers may join at once —
    /// from the call on, the lock is no longer exclusive: stop writing before calling it.
    ///
    /// A downgrade that no quorum confirmed loses the lock (its lost signal fires): some nodes
    /// may hold it as a reader and others as a writer. Refused ([`Misuse`](crate::Misuse)) for
    /// a read lock, a semaphore or several resources.
    pub async fn downgrade(&mut self) -> Result<Instant, Error> {
        let span = spans::downgrade(&self.client, self.lease.resource());
        let (reply, mut rx) = oneshot::channel();
        let lock = self.lease.id();
        self.tx.send(Command::Downgrade { lock, reply, span: span.clone() }).map_err(|_| Error::Closed)?;
        async move { rx.recv().await.map_err(|_| Error::Closed)? }.instrument(span).await
    }

    /// Release the lock on every node and report what they said: released, not held (expired
    /// or taken over) or unreachable ([`ReleaseOutcome`](crate::ReleaseOutcome)). Nothing of
    /// another holder is ever deleted.
    #[doc(alias = "unlock")]
    pub async fn release(mut self) -> Result<ReleaseReport, Error> {
        self.released = true;
        let span = spans::release(&self.client, self.lease.resource());
        let (reply, mut rx) = oneshot::channel();
        let lock = self.lease.id();
        self.tx.send(Command::Release { lock, reply: Some(reply), span: span.clone() }).map_err(|_| Error::Closed)?;
        async move { rx.recv().await.map_err(|_| Error::Closed)? }.instrument(span).await
    }

    /// Turn automatic extension (about every `ttl / 3`, by the driver) on or off.
    pub fn set_auto_extend(&self, on: bool) {
        // Only fails when the driver is gone, and then there is nothing left to extend.
        let _ = self.tx.send(Command::AutoExtend { lock: self.lease.id(), on });
    }
}

impl Deref for Guard {
    type Target = Lease;

    fn deref(&self) -> &Lease {
        &self.lease
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.released {
            // Fire and forget: the driver completes the release even after every client is gone.
            let span = spans::release(&self.client, self.lease.resource());
            let _ = self.tx.send(Command::Release { lock: self.lease.id(), reply: None, span });
        }
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard").field("lease", &self.lease).finish_non_exhaustive()
    }
}
