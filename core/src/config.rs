//! Engine configuration ([`Config`], [`Retry`]) and its validation.

use std::time::{Duration, Instant};

use crate::error::ConfigError;
use crate::node::NodeConfig;
use crate::tls::TlsSettings;

mod env;

/// How a failed acquisition attempt is retried, and for how long.
///
/// Between attempts the engine waits a random delay drawn uniformly from
/// `[min_delay, max_delay]` (from the seeded generator of [`Config::seed`]), so that
/// contending clients fall out of step.
///
/// The default waits like a mutex, with a bound: attempts without a count limit for up to
/// [`wait`](Self::wait) = 10 s (a lock held longer fails with
/// [`AcquireError::WaitTimeout`](crate::AcquireError::WaitTimeout)), 20–200 ms apart (a
/// waiter woken by a release retries at once). [`Retry::new`] counts attempts instead, with no
/// time bound. Each acquisition's own [`LockOptions`](crate::LockOptions) `attempts` or `wait`
/// replace both (so `try_lock`, one attempt, never waits).
///
/// `#[non_exhaustive]`: build one with [`Retry::new`] or [`Retry::default`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retry {
    /// Attempts in all, including the first (at least 1; `u32::MAX`: no count limit).
    pub attempts: u32,
    /// Shortest delay between attempts.
    pub min_delay: Duration,
    /// Longest delay between attempts.
    pub max_delay: Duration,
    /// Give up once no retry can start within this time of the call (`None`: only
    /// `attempts` bounds it).
    pub wait: Option<Duration>,
}

impl Retry {
    /// `attempts` in all (the first included), `min_delay` to `max_delay` apart, with no time
    /// bound.
    pub fn new(attempts: u32, min_delay: Duration, max_delay: Duration) -> Self {
        Retry { attempts, min_delay, max_delay, wait: None }
    }

    /// Keep retrying, with no count limit, until `wait` has passed since the call, with the
    /// default delays (20–200 ms).
    pub fn for_up_to(wait: Duration) -> Self {
        Retry { wait: Some(wait), ..Retry::default() }
    }
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: u32::MAX,
            min_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(200),
            wait: Some(Duration::from_secs(10)),
        }
    }
}

/// Longest `connect_timeout`, `reconnect_max` and `liveness_timeout` accepted (so deadlines
/// never overflow).
const MAX_CONNECT_DELAY: Duration = Duration::from_secs(24 * 60 * 60);
/// Longest `node_timeout` and retry delay accepted.
const MAX_ROUND_DELAY: Duration = Duration::from_secs(60 * 60);

/// Settings of a client: the nodes, the algorithm's parameters and how connections to the
/// nodes are made and remade.
///
/// Build one with [`Config::new`] (or [`Config::from_urls`]), adjust it with the builder
/// methods (named after the fields, which are public to read and adjust), and hand it to a
/// client's `with_config` (or, driving the sans-IO core yourself, to `Engine::new`), which
/// validates it once.
/// `#[non_exhaustive]`: a new setting is not a breaking change.
///
/// ```
/// use std::time::Duration;
/// # use redlease_core::{Config, Retry};
///
/// let config = Config::from_urls(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"])?
///     .node_timeout(Duration::from_millis(20))
///     .retry(Retry::new(5, Duration::from_millis(10), Duration::from_millis(100)));
/// assert_eq!(config.validate(), Ok(()));
/// # Ok::<(), redlease_core::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The independent Redis masters; the quorum is `nodes.len() / 2 + 1`.
    pub nodes: Vec<NodeConfig>,
    /// How long one round (acquire, extend, release, fence write-back) waits for a node
    /// before counting it as failed. Keep it small next to the TTL (default 50 ms).
    pub node_timeout: Duration,
    /// Clock drift allowance as a fraction of the TTL; the drift margin is
    /// `ttl × drift_factor + 2 ms` (default 0.01).
    pub drift_factor: f64,
    /// Retry schedule of an acquisition: by default it keeps trying for up to 10 s
    /// ([`Retry`]); a [`LockOptions`](crate::LockOptions) bound replaces it.
    pub retry: Retry,
    /// Seed of the jitter generator (retry delays, reconnect jitter). `None` (the default):
    /// a client draws one from the OS random source, so that two clients never jitter in
    /// step (the sans-IO `Engine` alone, which takes no OS randomness, uses a fixed seed).
    /// Tests fix it.
    pub seed: Option<u64>,
    /// Name sent with `CLIENT SETNAME` on connect (`None`: not sent). A refusal is ignored.
    pub client_name: Option<String>,
    /// The client's name in what it reports: the `client` field of its `tracing` spans and
    /// events and the `client` label of its metrics, which keeps the series of several clients
    /// in one process apart. `None` (the default): the client takes `client-<n>`, `n`
    /// counting the clients made in this process from 1. Read by the clients; the engine does
    /// not use it. Name a long-lived client so that its series keep their label across
    /// restarts.
    pub name: Option<String>,
    /// Prefix of the fencing counter keys: the counter of resource `R` is `{fence_prefix}R`.
    pub fence_prefix: String,
    /// Prepended to every resource name on the nodes, for programs that share one Redis
    /// (default empty): resource `R` is the key `{key_prefix}R`, and its fence counter, waiter
    /// queue and wake channel are named after that key. Clients that lock the same resources
    /// must use the same prefix.
    pub key_prefix: String,
    /// How long one connect attempt to a node (TCP, TLS and the handshake's answers) may take
    /// before it is abandoned (default 1 s).
    pub connect_timeout: Duration,
    /// First delay before reconnecting a node whose connection or connect attempt failed
    /// (default 50 ms). It doubles with every failure, up to `reconnect_max`, and starts over
    /// after a connection that stayed up for at least `reconnect_max`. Each delay is shortened
    /// by a random part of up to `reconnect_jitter`.
    pub reconnect_min: Duration,
    /// Longest delay between connect attempts to one node (default 2 s).
    pub reconnect_max: Duration,
    /// Fraction of each reconnect delay that is random (default 0.5: a delay `d` becomes one
    /// drawn uniformly from `[d/2, d]`), so that the clients of a restarted node do not all
    /// come back in the same instant. 0 makes the schedule exact.
    pub reconnect_jitter: f64,
    /// How long the oldest unanswered request on a connection may wait before the node counts
    /// as silent (paused, behind a black hole, half-open) and its connection is failed and
    /// reconnected with backoff. `None` (the default): 10 × `node_timeout`, at least 500 ms.
    /// The handshake of a new connection gets `connect_timeout` instead.
    pub liveness_timeout: Option<Duration>,
    /// Whether a client's connect must see every node ready (default `false`: a quorum is
    /// enough, and the rest join as they come). With `true`, connect waits for every node's
    /// first attempt to end and fails with the health view if any node is down or refuses us.
    /// Read by the clients; the engine does not use it.
    pub require_all: bool,
    /// Wake waiters when a lock is released (default on). A waiter subscribes to the
    /// resource's wake channel on every node (RESP3 push messages on the one connection per
    /// node, `HELLO 3`, Redis 6 or later) before the attempt it then waits behind, which on
    /// one resource also joins the key's queue of waiters; the release script hands the key
    /// to the next waiter and publishes on the channel. The waiter a quorum of nodes named
    /// retries at once instead of after its jittered delay, which stays as the fallback
    /// (without a queue, the longest waiter that heard a quorum retries after
    /// [`wake_stagger`](Self::wake_stagger)). Nodes that refuse `HELLO 3` or the channel are
    /// polled (the health view says which, [`NodeHealth::wake`](crate::NodeHealth::wake)).
    pub wake: bool,
    /// Longest random delay before a woken waiter retries (default 1 ms), halved for every
    /// wake-up it has already lost to another client: waiters of different clients do not
    /// all retry in the same instant, and one that has waited longest retries soonest.
    /// Within one engine only the waiter that has waited longest is woken.
    pub wake_stagger: Duration,
    /// The wall clock at one instant of the monotonic clock the engine is given, as
    /// `(instant, time since the UNIX epoch then)`: a semaphore's waiters queue on every node in
    /// the order of their tickets, the wall-clock time of each one's first refusal, so clients of
    /// one process (which share one reading) and of machines whose clocks agree are served in
    /// the order they came. `None` (the default): a client takes one reading per process; the
    /// sans-IO `Engine` alone counts from the first instant it is given (its waiters are then
    /// in order among themselves).
    pub wall_clock: Option<(Instant, Duration)>,
    /// TLS settings of the `rediss://` nodes that have none of their own
    /// ([`NodeConfig::tls`](crate::NodeConfig::tls)). Default: verify against the Web PKI
    /// roots and the URL's host.
    pub tls: TlsSettings,
}

impl Config {
    /// A config for these nodes with the defaults for everything else.
    pub fn new(nodes: Vec<NodeConfig>) -> Self {
        Config {
            nodes,
            node_timeout: Duration::from_millis(50),
            drift_factor: 0.01,
            retry: Retry::default(),
            seed: None,
            client_name: Some("redlease".to_owned()),
            name: None,
            fence_prefix: "redlease:fence:".to_owned(),
            key_prefix: String::new(),
            connect_timeout: Duration::from_secs(1),
            reconnect_min: Duration::from_millis(50),
            reconnect_max: Duration::from_secs(2),
            reconnect_jitter: 0.5,
            liveness_timeout: None,
            require_all: false,
            wake: true,
            wake_stagger: Duration::from_millis(1),
            wall_clock: None,
            tls: TlsSettings::default(),
        }
    }

    /// A config from `redis://` URLs.
    pub fn from_urls<I, S>(urls: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let nodes = urls.into_iter().map(|u| NodeConfig::from_url(u.as_ref())).collect::<Result<Vec<_>, _>>()?;
        Ok(Config::new(nodes))
    }

    /// Set `node_timeout`.
    pub fn node_timeout(mut self, d: Duration) -> Self {
        self.node_timeout = d;
        self
    }

    /// Set `drift_factor`.
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// Set `retry`.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// TLS settings for the `rediss://` nodes without their own.
    pub fn tls(mut self, settings: TlsSettings) -> Self {
        self.tls = settings;
        self
    }

    /// The TLS settings that apply to node `i`: its own, else the config's.
    pub fn tls_of(&self, i: usize) -> &TlsSettings {
        self.nodes.get(i).and_then(|n| n.tls.as_ref()).unwrap_or(&self.tls)
    }

    /// Set [`require_all`](Self::require_all).
    pub fn require_all(mut self, on: bool) -> Self {
        self.require_all = on;
        self
    }

    /// Set [`wall_clock`](Self::wall_clock): at `at`, `since_epoch` had passed since the UNIX
    /// epoch.
    pub fn wall_clock(mut self, at: Instant, since_epoch: Duration) -> Self {
        self.wall_clock = Some((at, since_epoch));
        self
    }

    /// Set `seed`.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Set [`client_name`](Self::client_name) (`None`: send no `CLIENT SETNAME`).
    pub fn client_name(mut self, name: Option<String>) -> Self {
        self.client_name = name;
        self
    }

    /// Set [`key_prefix`](Self::key_prefix).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Set [`name`](Self::name), the client's name in its spans, events and metric labels.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Set `fence_prefix`.
    pub fn fence_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.fence_prefix = prefix.into();
        self
    }

    /// Set `connect_timeout`.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// Set `reconnect_min` and `reconnect_max`.
    pub fn reconnect(mut self, min: Duration, max: Duration) -> Self {
        self.reconnect_min = min;
        self.reconnect_max = max;
        self
    }

    /// Set `reconnect_jitter`.
    pub fn reconnect_jitter(mut self, fraction: f64) -> Self {
        self.reconnect_jitter = fraction;
        self
    }

    /// Set `liveness_timeout`.
    pub fn liveness_timeout(mut self, d: Duration) -> Self {
        self.liveness_timeout = Some(d);
        self
    }

    /// Set `wake`.
    pub fn wake(mut self, on: bool) -> Self {
        self.wake = on;
        self
    }

    /// Set `wake_stagger`.
    pub fn wake_stagger(mut self, d: Duration) -> Self {
        self.wake_stagger = d;
        self
    }

    /// The liveness bound in force: `liveness_timeout`, or its default (10 × `node_timeout`,
    /// at least 500 ms).
    pub fn liveness(&self) -> Duration {
        self.liveness_timeout.unwrap_or_else(|| self.node_timeout.saturating_mul(10).max(Duration::from_millis(500)))
    }

    /// Check the settings; every client (and `Engine::new`) calls this.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.nodes.is_empty() {
            return Err(ConfigError::NoNodes);
        }
        if self.nodes.len() > u16::MAX as usize {
            return Err(ConfigError::TooManyNodes(self.nodes.len()));
        }
        if self.node_timeout.is_zero() {
            return Err(ConfigError::ZeroNodeTimeout);
        }
        for node in &self.nodes {
            if let Some(sentinel) = &node.sentinel {
                let reason = if sentinel.sentinels.is_empty() {
                    Some("it lists no sentinel: give at least one host:port (three or more, for a quorum of them)")
                } else if sentinel.service.is_empty() {
                    Some("its service name is empty: give the name the sentinels monitor the master as")
                } else if matches!(node.transport, crate::Transport::Unix(_)) {
                    Some("sentinels are reached over TCP (or TLS), not a Unix socket")
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Err(ConfigError::Sentinel { node: node.to_string(), reason: reason.to_owned() });
                }
            }
            if let Some(m) = node.min_replicas.filter(|m| m.timeout.is_zero() || m.timeout >= self.node_timeout) {
                let node_timeout = self.node_timeout;
                return Err(ConfigError::ReplicasTimeout { node: node.to_string(), timeout: m.timeout, node_timeout });
            }
        }
        if !(0.0..0.5).contains(&self.drift_factor) || self.drift_factor.is_nan() {
            return Err(ConfigError::BadDriftFactor(self.drift_factor));
        }
        if self.retry.attempts == 0 {
            return Err(ConfigError::ZeroAttempts);
        }
        if self.retry.min_delay > self.retry.max_delay {
            return Err(ConfigError::BadRetryDelays { min: self.retry.min_delay, max: self.retry.max_delay });
        }
        if self.connect_timeout.is_zero() {
            return Err(ConfigError::ZeroConnectTimeout);
        }
        if self.reconnect_min.is_zero() {
            return Err(ConfigError::ZeroReconnectMin);
        }
        if self.reconnect_min > self.reconnect_max {
            return Err(ConfigError::BadReconnectDelays { min: self.reconnect_min, max: self.reconnect_max });
        }
        if !(0.0..=1.0).contains(&self.reconnect_jitter) {
            return Err(ConfigError::BadReconnectJitter(self.reconnect_jitter));
        }
        // Every duration is bounded, so that no deadline computed from one can overflow.
        let round = "an hour (typically node_timeout 50ms, retry delays 20-200ms)";
        let link = "a day (typically connect_timeout 1s, reconnect_max 2s, liveness_timeout 500ms)";
        for (field, value, max, limit) in [
            ("node_timeout", self.node_timeout, MAX_ROUND_DELAY, round),
            ("wake_stagger", self.wake_stagger, MAX_ROUND_DELAY, round),
            ("retry.max_delay", self.retry.max_delay, MAX_ROUND_DELAY, round),
            ("connect_timeout", self.connect_timeout, MAX_CONNECT_DELAY, link),
            ("reconnect_max", self.reconnect_max, MAX_CONNECT_DELAY, link),
            ("liveness_timeout", self.liveness(), MAX_CONNECT_DELAY, link),
        ] {
            if value > max {
                return Err(ConfigError::DelayTooLong { field, value, limit });
            }
        }
        if self.retry.max_delay.is_zero() {
            return Err(ConfigError::ZeroRetryDelay);
        }
        if self.liveness() < self.node_timeout {
            return Err(ConfigError::LivenessTooShort { liveness: self.liveness(), node_timeout: self.node_timeout });
        }
        if self.fence_prefix.is_empty() {
            return Err(ConfigError::EmptyFencePrefix);
        }
        // A fence counter `{prefix}R` must never be a queue (`redlease:queue:R'`), a readers'
        // set, a semaphore's key or the format key: neither name may start the other.
        use crate::scripts::{FORMAT_KEY, HOLDS_PREFIX, QUEUE_PREFIX, READERS_PREFIX, SEM_PREFIX};
        for reserved in [QUEUE_PREFIX, READERS_PREFIX, HOLDS_PREFIX, SEM_PREFIX, FORMAT_KEY] {
            if reserved.starts_with(&self.fence_prefix) || self.fence_prefix.starts_with(reserved) {
                let prefix = self.fence_prefix.clone();
                return Err(ConfigError::FencePrefixReserved { prefix, reserved });
            }
        }
        // Every key `{key_prefix}R` would be a fence counter, a queue, a readers' set, a
        // semaphore's key or the format key.
        for reserved in [self.fence_prefix.as_str(), QUEUE_PREFIX, READERS_PREFIX, HOLDS_PREFIX, SEM_PREFIX, FORMAT_KEY]
        {
            if !self.key_prefix.is_empty() && self.key_prefix.starts_with(reserved) {
                return Err(ConfigError::KeyPrefixReserved { prefix: self.key_prefix.clone() });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_config() {
        assert_eq!(Config::new(vec![]).validate(), Err(ConfigError::NoNodes));
        let mut c = Config::new(vec![NodeConfig::new("h", 1)]);
        c.node_timeout = Duration::ZERO;
        assert_eq!(c.validate(), Err(ConfigError::ZeroNodeTimeout));
        c.node_timeout = Duration::from_millis(1);
        c.drift_factor = 0.7;
        assert!(c.validate().is_err());
    }

    #[test]
    fn validates_connection_delays_naming_the_field() {
        let ok = Config::new(vec![NodeConfig::new("h", 1)]);
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(
            (ok.connect_timeout, ok.reconnect_min, ok.reconnect_max),
            (Duration::from_secs(1), Duration::from_millis(50), Duration::from_secs(2))
        );
        let check = |tweak: fn(&mut Config), field: &str, fix: &str| {
            let mut c = ok.clone();
            tweak(&mut c);
            let err = c.validate().unwrap_err().to_string();
            assert!(err.contains(field) && err.contains(fix), "{err}");
        };
        check(|c| c.connect_timeout = Duration::ZERO, "connect_timeout", "e.g. 1s");
        check(|c| c.reconnect_min = Duration::ZERO, "reconnect_min", "busy loop");
        check(|c| c.reconnect_min = Duration::from_secs(5), "reconnect_min", "swap them");
        check(|c| c.reconnect_max = Duration::from_secs(90_000), "reconnect_max", "at most a day");
        check(|c| c.connect_timeout = Duration::MAX, "connect_timeout", "at most a day");
        check(|c| c.reconnect_jitter = 1.5, "reconnect_jitter", "[0, 1]");
        check(|c| c.reconnect_jitter = f64::NAN, "reconnect_jitter", "0 turns jitter off");
        let mut c = ok.clone();
        c.reconnect_min = c.reconnect_max;
        assert_eq!(c.validate(), Ok(()), "a fixed delay is fine");
    }
}
