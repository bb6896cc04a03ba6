//! The options of one acquisition: [`LockOptions`], declared once for the engine and every
//! client.

use std::time::Duration;

use crate::error::Misuse;
use crate::quorum::{drift, whole_ms};

/// The longest re-entrant lock owner accepted, in bytes.
const MAX_OWNER: usize = 256;

/// Longest TTL accepted (about 34 years), far inside Redis' millisecond range.
const MAX_TTL_MS: u128 = 1 << 40;

/// The largest semaphore limit: every attempt's script reads each permit once.
pub const MAX_PERMITS: u32 = 1024;

/// What to lock and how: the argument of every client's `lock_with` and scoped `with_lock`
/// (and of `Engine::acquire` for a driver of one's own).
///
/// Start from [`LockOptions::new`] and chain the builder methods; the fields are public to
/// read. New options are added as new builder methods, so this is not a breaking change.
///
/// ```
/// use std::time::Duration;
/// # use redlease_core::LockOptions;
///
/// let options = LockOptions::new("orders:42", Duration::from_secs(10))
///     .resources(["orders:43"])
///     .fencing(true)
///     .wait(Duration::from_secs(5));
/// assert_eq!(options.resources, ["orders:42", "orders:43"]);
/// assert_eq!(options.attempts, None); // unlimited within the wait bound
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockOptions {
    /// The keys to lock together, all or nothing on each node; the first is the one given to
    /// [`new`](Self::new). None may be empty.
    pub resources: Vec<String>,
    /// Time to live of the keys on the nodes, in whole milliseconds (a fraction is dropped,
    /// and the validity is computed from what is sent).
    pub ttl: Duration,
    /// Also produce a fencing token (one extra round trip).
    pub fencing: bool,
    /// Attempts in all, the first included; `None`: the config's
    /// [`Retry::attempts`](crate::Retry::attempts), or unlimited within [`wait`](Self::wait)
    /// when a wait bound is given.
    pub attempts: Option<u32>,
    /// Give up once no retry can start within this time of the call; the acquisition then
    /// fails with [`AcquireError::WaitTimeout`](crate::AcquireError::WaitTimeout).
    /// `Duration::MAX` waits without a bound ([`wait_forever`](Self::wait_forever)); `None`
    /// (with `attempts` `None` too): the config's [`Retry`](crate::Retry), by default up to
    /// 10 s.
    pub wait: Option<Duration>,
    /// Never extend the lock (by hand or automatically) past this long after it was acquired.
    pub max_hold: Option<Duration>,
    /// Extend the lock automatically about every `ttl / 3` while it is held.
    pub auto_extend: bool,
    /// A semaphore of this many permits (see [`semaphore`](Self::semaphore)); `None`: a mutex.
    pub limit: Option<u32>,
    /// How many of the semaphore's permits to take at once, all or nothing (1 for a mutex).
    pub permits: u32,
    /// A read lock (see [`shared`](Self::shared)); `false`: a write lock, the mutex.
    pub shared: bool,
    /// The owner a re-entrant lock is held by (see [`reentrant`](Self::reentrant)); `None`:
    /// not re-entrant.
    pub owner: Option<String>,
}

impl LockOptions {
    /// Lock `resource` for `ttl`, with the defaults for everything else: the config's
    /// [`Retry`](crate::Retry) (by default: retry for up to 10 s, then fail with
    /// [`AcquireError::WaitTimeout`](crate::AcquireError::WaitTimeout)), no fencing, no cap on
    /// the hold, no automatic extension. [`wait`](Self::wait), [`wait_forever`](Self::wait_forever),
    /// [`attempts`](Self::attempts) and [`try_once`](Self::try_once) replace the config's
    /// retry bounds.
    pub fn new(resource: impl Into<String>, ttl: Duration) -> Self {
        LockOptions {
            resources: vec![resource.into()],
            ttl,
            fencing: false,
            attempts: None,
            wait: None,
            max_hold: None,
            auto_extend: false,
            limit: None,
            permits: 1,
            shared: false,
            owner: None,
        }
    }

    /// Also lock these resources, all together (all-or-nothing on each node).
    pub fn resources<I, S>(mut self, more: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.resources.extend(more.into_iter().map(|s| s.as_ref().to_owned()));
        self
    }

    /// Ask for a fencing token; costs one extra round trip.
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// Attempts in all, the first included (0 counts as 1).
    pub fn attempts(mut self, n: u32) -> Self {
        self.attempts = Some(n);
        self
    }

    /// Make one attempt and never wait: held by someone else, the acquisition fails at once
    /// with [`AcquireError::Held`](crate::AcquireError::Held). What every client's `try_lock`
    /// does, for `lock_with` and the scoped `with_lock` (`.attempts(1)`, without a wait).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlease_core::LockOptions;
    /// let options = LockOptions::new("reports:daily", Duration::from_secs(30)).try_once();
    /// assert_eq!((options.attempts, options.wait), (Some(1), None));
    /// ```
    pub fn try_once(mut self) -> Self {
        self.attempts = Some(1);
        self.wait = None;
        self
    }

    /// Wait as long as it takes: retry without a count or time bound (a waiter is woken at
    /// once by the holder's release) until the lock is acquired, the nodes refuse us as
    /// misconfigured, or the caller drops the acquisition (`.wait(Duration::MAX)`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlease_core::LockOptions;
    /// let options = LockOptions::new("migrations", Duration::from_secs(30)).wait_forever();
    /// assert_eq!((options.attempts, options.wait), (None, Some(Duration::MAX)));
    /// ```
    pub fn wait_forever(mut self) -> Self {
        self.attempts = None;
        self.wait = Some(Duration::MAX);
        self
    }

    /// Keep retrying (with the config's random delays) until this much time has passed since
    /// the call; then fail with [`AcquireError::WaitTimeout`](crate::AcquireError::WaitTimeout),
    /// which carries the last attempt's outcome. If [`attempts`](Self::attempts) also bounds
    /// it and runs out first, the error is the last attempt's own. `Duration::MAX` is no
    /// bound at all ([`wait_forever`](Self::wait_forever)).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Never extend the lock past this long after it was acquired.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// Extend the lock automatically about every `ttl / 3` while it is held; a refused or
    /// late extension marks it lost.
    pub fn auto_extend(mut self, on: bool) -> Self {
        self.auto_extend = on;
        self
    }

    /// Make this a semaphore of `limit` permits named by the resource: at most `limit` holders
    /// at once, across every client that uses the name with the same limit. Each of the
    /// `limit` permits is a key held exactly like a mutex over the same nodes (same quorum,
    /// validity, extension, release, wake-up and fencing); the lock holds the permits that a
    /// quorum of nodes granted, the same permits on each (the guard's `permits()`). Its keys are
    /// `redlease:sem:{NAME}:…` (after the key prefix), apart from the mutex of the same name.
    ///
    /// The limit (1 to [`MAX_PERMITS`]) is recorded on each node on first use: a client that
    /// gives another limit for the name is refused as misconfigured (`WRONGLIMIT`).
    ///
    /// ```
    /// use std::time::Duration;
    /// # use redlease_core::LockOptions;
    ///
    /// // Two of the eight permits of "exports", all or nothing.
    /// let options = LockOptions::new("exports", Duration::from_secs(30)).semaphore(8).permits(2);
    /// assert_eq!((options.limit, options.permits), (Some(8), 2));
    /// ```
    pub fn semaphore(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Take `n` permits of the [`semaphore`](Self::semaphore) at once, all or nothing (1 to
    /// its limit; the default is 1).
    pub fn permits(mut self, n: u32) -> Self {
        self.permits = n;
        self
    }

    /// Make this a read lock of the resource: readers share it, and exclude every writer —
    /// the mutex of the same name (a plain lock is the write lock). Readers and writers use
    /// the same nodes and quorum (a majority each, so that every read quorum meets every write
    /// quorum, and any two write quorums meet).
    ///
    /// Each reader expires by its own TTL on each node's clock: a crashed reader holds writers
    /// off until its TTL only. Writers have preference: once a waiting writer was refused by the
    /// readers, no new reader joins until they have left, and the key passes to the writer. A
    /// read lock extends, releases, wakes up and is lost like a mutex; with
    /// [`fencing`](Self::fencing) its token is the writer epoch it reads under (the fencing
    /// token of the last writer, read from a quorum once granted: one more round trip). A held
    /// write lock turns into a read lock with the guard's `downgrade()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// # use redlease_core::LockOptions;
    ///
    /// let read = LockOptions::new("catalog", Duration::from_secs(10)).shared(true);
    /// let write = LockOptions::new("catalog", Duration::from_secs(10)); // excludes the readers
    /// assert!(read.shared && !write.shared);
    /// ```
    pub fn shared(mut self, on: bool) -> Self {
        self.shared = on;
        self
    }

    /// Make the lock re-entrant for `owner`, an identity the caller chooses (and may hand to
    /// another process, e.g. through the environment): while `owner` holds the lock, another
    /// acquisition by the same owner succeeds at once, as one more hold; the lock is free
    /// again once its last hold is released (or expired). Each hold has its own guard, token
    /// and validity; the fencing token is the one the owner's first hold got. Holds of other
    /// owners, and locks that are not re-entrant, are excluded as by any mutex.
    ///
    /// A re-entrant lock is a mutex of one resource: not a [`semaphore`](Self::semaphore) nor a
    /// [`shared`](Self::shared) read lock. The owner is 1 to 256 bytes without `:`. It is not a
    /// secret: anyone who knows it can take holds of the lock while the owner holds it.
    ///
    /// ```
    /// use std::time::Duration;
    /// # use redlease_core::LockOptions;
    ///
    /// let options = LockOptions::new("deploy", Duration::from_secs(30)).reentrant("ci-run-8812");
    /// assert_eq!(options.owner.as_deref(), Some("ci-run-8812"));
    /// ```
    pub fn reentrant(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Check the options and `token` for `Engine::acquire` under
    /// `config` (a resource's key, `{key_prefix}R`, may not live among the fence counters,
    /// under `fence_prefix`, nor among the names redlease keeps for itself); returns the TTL
    /// that will be sent.
    pub(crate) fn check(&self, token: &[u8], config: &crate::Config) -> Result<Duration, Misuse> {
        let ttl = ttl_to_send(self.ttl, config.drift_factor)?;
        if self.resources.is_empty() || self.resources.iter().any(|r| r.is_empty()) {
            return Err(Misuse::EmptyResource);
        }
        self.check_permits()?;
        self.check_reentry()?;
        use crate::scripts::{FORMAT_KEY, HOLDS_PREFIX, QUEUE_PREFIX, READERS_PREFIX, SEM_PREFIX};
        let prefix = config.key_prefix.as_str();
        for r in &self.resources {
            // `{prefix}{r}` starts with `reserved`, without building it.
            let starts = |reserved: &str| match reserved.strip_prefix(prefix) {
                Some(rest) => r.starts_with(rest),
                None => prefix.starts_with(reserved),
            };
            let key = || format!("{prefix}{r}");
            if starts(&config.fence_prefix) {
                return Err(Misuse::ResourceInFenceSpace { resource: key(), prefix: config.fence_prefix.clone() });
            }
            if starts(QUEUE_PREFIX) {
                return Err(Misuse::ReservedResource { resource: key(), reserved: QUEUE_PREFIX });
            }
            if starts(READERS_PREFIX) {
                return Err(Misuse::ReservedResource { resource: key(), reserved: READERS_PREFIX });
            }
            if starts(HOLDS_PREFIX) {
                return Err(Misuse::ReservedResource { resource: key(), reserved: HOLDS_PREFIX });
            }
            // A semaphore's keys are `{prefix}redlease:sem:{NAME}:...`: a mutex named so would
            // be one of its permits (and its key may not start so under another prefix either).
            if (r.starts_with(SEM_PREFIX) || starts(SEM_PREFIX)) && self.limit.is_none() {
                return Err(Misuse::ReservedResource { resource: key(), reserved: SEM_PREFIX });
            }
            if FORMAT_KEY.strip_prefix(prefix) == Some(r.as_str()) {
                return Err(Misuse::ReservedResource { resource: key(), reserved: FORMAT_KEY });
            }
        }
        if token.is_empty() {
            return Err(Misuse::EmptyToken);
        }
        if token.contains(&crate::scripts::WAITED) {
            return Err(Misuse::ColonInToken);
        }
        Ok(ttl)
    }
}

impl LockOptions {
    /// Check a re-entrant lock's options: an owner of 1 to [`MAX_OWNER`] bytes without `:`, on a
    /// mutex of one resource.
    fn check_reentry(&self) -> Result<(), Misuse> {
        let Some(owner) = &self.owner else { return Ok(()) };
        let reason = if owner.is_empty() {
            "the owner is empty: name who holds the lock, e.g. a job or host id"
        } else if owner.len() > MAX_OWNER {
            "the owner is longer than 256 bytes"
        } else if owner.as_bytes().contains(&crate::scripts::WAITED) {
            "the owner contains ':', which marks lock keys as waited for"
        } else if self.limit.is_some() {
            "a semaphore is not re-entrant: its holders are counted by permits"
        } else if self.shared {
            "a read lock is not re-entrant: readers share it already"
        } else if self.resources.len() != 1 {
            "a re-entrant lock is of one resource"
        } else {
            return Ok(());
        };
        Err(Misuse::Reentry { reason })
    }

    /// A semaphore names one resource, its limit is 1 to [`MAX_PERMITS`], and it takes 1 to
    /// its limit permits; a mutex takes one; a read lock is of one resource, not a semaphore.
    fn check_permits(&self) -> Result<(), Misuse> {
        let (permits, resources) = (self.permits, self.resources.len());
        let reason = match self.limit {
            _ if self.shared && resources != 1 => "a read lock is of one resource",
            Some(_) if self.shared => "a semaphore has no read locks: use .shared(true) on a lock without .semaphore",
            None if permits != 1 => "permits other than 1 need a semaphore: add .semaphore(limit)",
            None => return Ok(()),
            Some(0) => "a semaphore needs a limit of at least 1",
            Some(l) if l > MAX_PERMITS => "the limit is above MAX_PERMITS (1024)",
            Some(_) if resources != 1 => "a semaphore is named by one resource",
            Some(l) if permits == 0 || permits > l => "permits must be 1 to the semaphore's limit",
            Some(_) => return Ok(()),
        };
        Err(Misuse::Permits { limit: self.limit, permits, reason })
    }
}

/// Validate a TTL and return the whole milliseconds of it that Redis will be given
/// (`PX`/`PEXPIRE` take milliseconds; the validity is computed from what is sent).
pub(crate) fn ttl_to_send(ttl: Duration, drift_factor: f64) -> Result<Duration, Misuse> {
    if ttl.is_zero() {
        return Err(Misuse::ZeroTtl);
    }
    if ttl.as_millis() > MAX_TTL_MS {
        return Err(Misuse::TtlTooLong(ttl));
    }
    let whole = whole_ms(ttl);
    let d = drift(whole, drift_factor);
    if whole <= d {
        return Err(Misuse::TtlTooShort { ttl, drift: d });
    }
    Ok(whole)
}
