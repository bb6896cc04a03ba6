//! Leader election on the blocking client: [`Client::campaign`] and the [`Leadership`] it
//! returns.

use std::fmt;
use std::ops::Deref;

use redlease_client::adapter::campaign_token;
use redlease_client::{ElectionOptions, Error, Lease, ReleaseReport};

use crate::{Client, Guard};

impl Client {
    /// Campaign in an election and return once this candidate leads: wait in line for the
    /// election's lock (woken when the leader ahead resigns or its leadership expires), then
    /// hold it, fenced and extended automatically by the client's extension thread (about
    /// every `ttl / 3`) until [`resign`](Leadership::resign), a drop, or a loss
    /// ([`lost`](Lease::lost) fires).
    ///
    /// The [`epoch`](Leadership::epoch) is the leadership's fencing token: it strictly
    /// increases from one leader to the next. A bad name or value is refused at once
    /// ([`Misuse::Election`](crate::Misuse::Election), naming the field); with
    /// [`ElectionOptions::wait`] the campaign fails with
    /// [`AcquireError::WaitTimeout`](crate::AcquireError::WaitTimeout) once the wait ran out.
    pub fn campaign(&self, options: ElectionOptions) -> Result<Leadership, Error> {
        let lock = options.lock_options()?;
        let guard = self.lock_as(lock, campaign_token(&options)?)?;
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
    pub fn resign(self) -> Result<ReleaseReport, Error> {
        self.guard.release()
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
