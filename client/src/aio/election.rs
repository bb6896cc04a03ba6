//! Leader election on the async client: [`Client::campaign`] and the [`Leadership`] it
//! returns.

use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_core::Stream;
use redlease_core::{ElectionOptions, Leader, LeaderChange, Observer};
use tracing::Instrument;

use crate::{Error, Lease, ReleaseReport, oneshot, random, spans};

use super::command::Command;
use super::runtime::Timer;

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
    /// while !leadership.is_lost() {
    ///     // One unit of work, written with `leadership.epoch()` as its fence.
    ///     # break;
    /// }
    /// leadership.resign().await?; // the next candidate in line leads at once
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

    /// Who leads the election `name` now: the leader a quorum of the nodes hold, with its
    /// value and epoch, or `None` (no leader, a handover under way, too few nodes answered).
    /// One read of every node, in parallel, each bounded by the node timeout; it writes
    /// nothing.
    ///
    /// During a handover, for about one round trip before the new leader's campaign returns,
    /// the epoch can still be its predecessor's; [`observe`](#method.observe) never reports
    /// that state.
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>, Error> {
        let (reply, mut rx) = oneshot::channel();
        self.tx.send(Command::ReadLeader { name: name.to_owned(), reply }).map_err(|_| Error::Closed)?;
        rx.recv().await.map_err(|_| Error::Closed)?
    }

    /// Follow the election `name`: an [`Observation`], a `Stream` of every change of
    /// leader ([`LeaderChange::Elected`] with strictly increasing epochs, or
    /// [`LeaderChange::Vacant`]). It reads the nodes again as soon as a release of the
    /// election's lock is announced (a resign that hands over), and otherwise every second
    /// (`poll_every`), which finds leaders whose predecessor
    /// expired.
    ///
    /// ```no_run
    /// # use redlease::{Error, LeaderChange};
    /// # async fn example(client: redlease::tokio::Client) -> Result<(), Error> {
    /// let mut changes = client.observe("scheduler")?;
    /// while let Ok(change) = changes.next().await {
    ///     if let LeaderChange::Elected(leader) = change {
    ///         println!("{} leads in epoch {}", String::from_utf8_lossy(&leader.value), leader.epoch);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn observe(&self, name: &str) -> Result<Observation<R>, Error> {
        ElectionOptions::new(name, Vec::new()).check()?;
        self.tx.send(Command::Watch { name: name.to_owned(), on: true }).map_err(|_| Error::Closed)?;
        let state = State { client: self.clone(), name: name.to_owned(), observer: Observer::new(), poll: POLL };
        Ok(Observation { name: name.to_owned(), client: self.clone(), state: Some(Box::new(state)), next: None })
    }
}

/// How often an observer reads the nodes without a release message.
const POLL: Duration = Duration::from_secs(1);

/// What an [`Observation`] keeps between changes.
struct State<R> {
    client: Client<R>,
    name: String,
    observer: Observer,
    poll: Duration,
}

impl<R: Runtime> State<R> {
    async fn next(&mut self) -> Result<LeaderChange, Error> {
        loop {
            let (wake, mut woken) = oneshot::channel();
            let armed = Command::ArmWake { name: self.name.clone(), reply: wake };
            self.client.tx.send(armed).map_err(|_| Error::Closed)?;
            let read = self.client.leader(&self.name).await?;
            if let Some(change) = self.observer.update(read) {
                return Ok(change);
            }
            let delay = self.observer.next_read(self.poll);
            let mut timer = R::timer(Instant::now() + delay);
            let mut wake = Box::pin(async move { woken.recv().await.is_ok() });
            let mut gone = false;
            std::future::poll_fn(|cx| {
                if !gone {
                    match wake.as_mut().poll(cx) {
                        Poll::Ready(true) => return Poll::Ready(()),
                        // Not watched (the client closing): the timer alone.
                        Poll::Ready(false) => gone = true,
                        Poll::Pending => {}
                    }
                }
                timer.poll_fire(cx)
            })
            .await;
        }
    }
}

/// The changes of leader of one election, from [`Client::observe`]: a `Stream` of
/// `Result<LeaderChange, Error>`, or call [`next`](Self::next). Dropping it stops watching.
pub struct Observation<R: Runtime> {
    /// The election, and the client, to stop watching on drop.
    name: String,
    client: Client<R>,
    state: Option<Box<State<R>>>,
    #[allow(clippy::type_complexity)]
    next: Option<Pin<Box<dyn Future<Output = (Box<State<R>>, Result<LeaderChange, Error>)> + Send>>>,
}

impl<R: Runtime> Observation<R> {
    /// Read the nodes every `period` when no release message comes (default 1 s).
    pub fn poll_every(mut self, period: Duration) -> Self {
        if let Some(s) = self.state.as_mut() {
            s.poll = period.max(Duration::from_millis(1));
        }
        self
    }

    /// The next change of leader.
    pub async fn next(&mut self) -> Result<LeaderChange, Error> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await.unwrap_or(Err(Error::Closed))
    }

    /// The leader last reported.
    pub fn current(&self) -> Option<&Leader> {
        self.state.as_ref().and_then(|s| s.observer.current())
    }
}

impl<R: Runtime> Stream for Observation<R> {
    type Item = Result<LeaderChange, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.next.is_none() {
            let Some(mut state) = self.state.take() else { return Poll::Ready(None) };
            self.next = Some(Box::pin(async move {
                let out = state.next().await;
                (state, out)
            }));
        }
        let Some(next) = self.next.as_mut() else { return Poll::Ready(None) };
        let (state, out) = std::task::ready!(next.as_mut().poll(cx));
        self.next = None;
        self.state = Some(state);
        Poll::Ready(Some(out))
    }
}

impl<R: Runtime> Drop for Observation<R> {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.name);
        let _ = self.client.tx.send(Command::Watch { name, on: false });
    }
}

impl<R: Runtime> fmt::Debug for Observation<R> {
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
