//! Leader election on the async client: [`Client::campaign`] and the [`Leadership`] it
//! returns.

use std::fmt;
use std::ops::Deref;

use redlease_core::ElectionOptions;
use tracing::Instrument;

use crate::{Error, Lease, ReleaseReport, random, spans};

use super::client::Client;
use super::guard::Guard;
use super::runtime::Runtime;

impl<R: Runtime> Client<R> {
    /// Campaign in an election and return once this candidate leads: wait in line for the
    /// election's lock (woken when the leader ahead resigns or its leadership expires), then
    /// hold it, fenced and extended automatically (about every `ttl / 3`) until
    /// [`resign`](Leadership::resign), a drop, or a loss ([`lost`](Lease::lost) fires).
    ///
    /// The [`epoch`](Leadership::epoch) is the leadership's fencing token: it strictly
    /// increases from one leader to the next. A bad name or value is refused at once
    /// ([`Misuse::Election`](crate::Misuse::Election), naming the field); with
    /// [`ElectionOptions::wait`] the campaign fails with
    /// [`AcquireError::WaitTimeout`](crate::AcquireError::WaitTimeout) once the wait ran out.
    ///
    /// ```no_run
    /// # use redlease::{ElectionOptions, Error};
    /// use std::time::Duration;
    /// # async fn example(client: redlease::tokio::Client) -> Result<(), Error> {
    /// let options = ElectionOptions::new("scheduler", "10.0.0.7:8080").ttl(Duration::from_secs(5));
    /// let leadership = client.campaign(options).await?;
    /// println!("leading in epoch {}", leadership.epoch());
    /// tokio::select! {
    ///     reason = leadership.lost().wait() => eprintln!("leadership lost: {reason:?}"),
    ///     _ = tokio::time::sleep(Duration::from_secs(60)) => { leadership.resign().await?; }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn campaign(&self, options: ElectionOptions) -> Result<Leadership, Error> {
        let lock = options.lock_options()?;
        let token = random::campaign_token(&options)?;
        let span = spans::acquire(&self.name, &lock);
        let guard = self.acquire_as(lock, token, span.clone()).instrument(span).await?;
        let epoch = guard.fence().unwrap_or_default();
        Ok(Leadership { guard, value: options.value, epoch })
    }
}

/// This candidate's leadership in an election ([`Client::campaign`]): its epoch, its value,
/// and the lock behind it ([`Lease`] through `Deref`: `lost()`, `valid_until()`, …).
///
/// Dropping it resigns in the background; [`resign`](Self::resign) does the same and reports
/// what the nodes said. Leadership is only safe to act on while [`lost`](Lease::lost) has not
/// fired; a store that checks the [`epoch`](Self::epoch) refuses the writes of a leader that
/// outlived its leadership (paused, partitioned).
pub struct Leadership {
    guard: Guard,
    value: Vec<u8>,
    epoch: u64,
}

impl Leadership {
    /// The epoch: this leadership's fencing token, larger than every earlier leader's.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// This candidate's value, as observers see it.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The lock behind the leadership (also reached through `Deref`).
    pub fn lease(&self) -> &Lease {
        self.guard.lease()
    }

    /// Step down: release the election's lock, which hands it at once to the next candidate
    /// in line, and report what the nodes said.
    pub async fn resign(self) -> Result<ReleaseReport, Error> {
        self.guard.release().await
    }
}

impl Deref for Leadership {
    type Target = Lease;

    fn deref(&self) -> &Lease {
        self.guard.lease()
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("epoch", &self.epoch)
            .field("lease", self.guard.lease())
            .finish_non_exhaustive()
    }
}
