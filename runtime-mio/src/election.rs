//! Leader election on the blocking client: [`Client::campaign`] and the [`Leadership`] it
//! returns.

use std::fmt;
use std::ops::Deref;
use std::time::{Duration, Instant};

use redlease_client::adapter::{campaign_token, oneshot};
use redlease_client::{ElectionOptions, Error, Lease, ReleaseReport};
use redlease_core::{Leader, LeaderChange, Observer};

use crate::shared::Then;
use crate::{Client, Guard};

/// How often an observer reads the nodes without a release message.
const POLL: Duration = Duration::from_secs(1);

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

    /// Who leads the election `name` now: the leader a quorum of the nodes hold, with its
    /// value and epoch, or `None` (no leader, a handover under way, too few nodes answered).
    /// One read of every node, in parallel, each bounded by the node timeout; it writes
    /// nothing.
    ///
    /// During a handover, for about one round trip before the new leader's campaign returns,
    /// the epoch can still be its predecessor's; [`observe`](Self::observe) never reports
    /// that state.
    pub fn leader(&self, name: &str) -> Result<Option<Leader>, Error> {
        let (reply, rx) = oneshot::channel();
        let mut st = self.shared.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        self.shared.command(&mut st, Then::Wait, |router, engine, now| router.read_leader(engine, now, name, reply));
        self.shared.wait_reply(st, None, &rx)?
    }

    /// Follow the election `name`: an [`Observation`], an iterator of every change of leader
    /// ([`LeaderChange::Elected`] with strictly increasing epochs, or
    /// [`LeaderChange::Vacant`]), blocking in `next` until the next change. It reads the nodes
    /// again as soon as a release of the election's lock is announced (a resign that hands
    /// over), and otherwise every second ([`poll_every`](Observation::poll_every)), which
    /// finds leaders whose predecessor expired.
    pub fn observe(&self, name: &str) -> Result<Observation, Error> {
        ElectionOptions::new(name, Vec::new()).check()?;
        let mut st = self.shared.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        self.shared.command(&mut st, Then::Return, |router, engine, now| router.watch(engine, now, name, true));
        drop(st);
        Ok(Observation { client: self.clone(), name: name.to_owned(), observer: Observer::new(), poll: POLL })
    }
}

/// The changes of leader of one election, from [`Client::observe`]: an iterator of
/// `Result<LeaderChange, Error>` (it ends after an error), or call [`next_change`](Self::next_change).
/// Dropping it stops watching.
pub struct Observation {
    client: Client,
    name: String,
    observer: Observer,
    poll: Duration,
}

impl Observation {
    /// Read the nodes every `period` when no release message comes (default 1 s).
    pub fn poll_every(mut self, period: Duration) -> Self {
        self.poll = period.max(Duration::from_millis(1));
        self
    }

    /// The leader last reported.
    pub fn current(&self) -> Option<&Leader> {
        self.observer.current()
    }

    /// Block until the leader changes, and say how.
    pub fn next_change(&mut self) -> Result<LeaderChange, Error> {
        loop {
            let seen = self.client.shared.lock().router.wake_seq(&self.name);
            let read = self.client.leader(&self.name)?;
            if let Some(change) = self.observer.update(read) {
                return Ok(change);
            }
            let delay = self.observer.next_read(self.poll);
            let st = self.client.shared.lock();
            let name = &self.name;
            self.client
                .shared
                .wait_until(st, Instant::now() + delay, |st| (st.router.wake_seq(name) != seen).then_some(()))?;
        }
    }
}

impl Iterator for Observation {
    type Item = Result<LeaderChange, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_change())
    }
}

impl Drop for Observation {
    fn drop(&mut self) {
        let mut st = self.client.shared.lock();
        let name = &self.name;
        self.client.shared.command(&mut st, Then::Return, |router, engine, now| router.watch(engine, now, name, false));
    }
}

impl fmt::Debug for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observation").field("current", &self.current()).finish_non_exhaustive()
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
