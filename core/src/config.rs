//! Engine configuration, node addresses (`redis://` URLs) and validation.

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;

/// Where one Redis node lives and how to log in to it.
///
/// Parsed from `redis://[user:pass@]host:port[/db]` by [`NodeConfig::from_url`]. The engine
/// itself only uses the credentials and the database number (it emits `AUTH` and `SELECT`);
/// `host` and `port` are for the adapter that opens the socket.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// Host name or IP address.
    pub host: String,
    /// TCP port (6379 when the URL gives none).
    pub port: u16,
    /// ACL user name for `AUTH user pass` (`None`: `AUTH pass`, the `default` user).
    pub user: Option<String>,
    /// Password; `None` sends no `AUTH` at all.
    pub password: Option<String>,
    /// Logical database selected with `SELECT` (0 sends nothing).
    pub db: u32,
}

impl fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the password.
        f.debug_struct("NodeConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .finish()
    }
}

impl fmt::Display for NodeConfig {
    /// The node as a URL without its password, for messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "redis://")?;
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)?;
        } else {
            write!(f, "{}:{}", self.host, self.port)?;
        }
        if self.db != 0 {
            write!(f, "/{}", self.db)?;
        }
        Ok(())
    }
}

impl NodeConfig {
    /// A node at `host:port` with no credentials and database 0.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        NodeConfig { host: host.into(), port, user: None, password: None, db: 0 }
    }

    /// Parse `redis://[user:pass@]host[:port][/db]`.
    ///
    /// `redis://:pass@host` gives a password without a user. User and password may be
    /// percent-encoded. IPv6 hosts go in brackets: `redis://[::1]:6379`.
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        let bad = |reason: &str| ConfigError::BadUrl { url: redact(url), reason: reason.to_owned() };
        let rest = url
            .strip_prefix("redis://")
            .ok_or_else(|| bad("it must start with redis:// (TLS via rediss:// is not supported)"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (u, p) = match info.find(':') {
                    Some(i) => (&info[..i], Some(&info[i + 1..])),
                    None => (info, None),
                };
                let u = percent_decode(u).ok_or_else(|| bad("the user name has a bad %-escape"))?;
                let p = match p {
                    Some(p) => Some(percent_decode(p).ok_or_else(|| bad("the password has a bad %-escape"))?),
                    None => None,
                };
                match p {
                    // `redis://user@host`: a bare word is taken as the password (redis-rs does the same).
                    None => (None, Some(u).filter(|s| !s.is_empty())),
                    Some(p) => (Some(u).filter(|s| !s.is_empty()), Some(p)),
                }
            }
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let end = v6.find(']').ok_or_else(|| bad("an IPv6 host needs a closing ]"))?;
            let host = &v6[..end];
            let after = &v6[end + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(bad("unexpected text after the IPv6 host")),
            };
            (host, port)
        } else {
            match hostport.rfind(':') {
                Some(i) => (&hostport[..i], Some(&hostport[i + 1..])),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(bad("the host is missing (expected redis://host:port)"));
        }
        let port = match port {
            None => 6379,
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => return Err(bad("the port must be a number from 1 to 65535")),
                Ok(p) => p,
            },
        };
        let path = path.split(['?', '#']).next().unwrap_or("");
        let db = if path.is_empty() {
            0
        } else {
            path.parse::<u32>().map_err(|_| bad("the database after / must be a number, e.g. redis://host:6379/0"))?
        };
        Ok(NodeConfig { host: host.to_owned(), port, user, password, db })
    }
}

/// Hide the password of a URL for error messages.
fn redact(url: &str) -> String {
    let Some(rest) = url.strip_prefix("redis://") else {
        return url.to_owned();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => match rest[..at].find(':') {
            Some(colon) => format!("redis://{}:***{}", &rest[..colon], &rest[at..]),
            None => format!("redis://***{}", &rest[at..]),
        },
        None => url.to_owned(),
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let v = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// How a failed acquisition attempt is retried.
///
/// Between attempts the engine waits a random delay drawn uniformly from
/// `[min_delay, max_delay]` (from the seeded generator of [`Config::seed`]), so that
/// contending clients fall out of step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all, including the first (at least 1).
    pub attempts: u32,
    /// Shortest delay between attempts.
    pub min_delay: Duration,
    /// Longest delay between attempts.
    pub max_delay: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry { attempts: 3, min_delay: Duration::from_millis(20), max_delay: Duration::from_millis(200) }
    }
}

/// Longest `connect_timeout` and `reconnect_max` accepted (so deadlines never overflow).
const MAX_CONNECT_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

/// Settings of one [`Engine`](crate::Engine): the nodes, the algorithm's parameters and the
/// reconnect policy the engine applies to its links.
///
/// Build one with [`Config::new`], adjust the public fields, and hand it to
/// [`Engine::new`](crate::Engine::new), which validates it once.
#[derive(Clone, Debug)]
pub struct Config {
    /// The independent Redis masters; the quorum is `nodes.len() / 2 + 1`.
    pub nodes: Vec<NodeConfig>,
    /// How long one round (acquire, extend, release, fence write-back) waits for a node
    /// before counting it as failed. Keep it small next to the TTL (default 50 ms).
    pub node_timeout: Duration,
    /// Clock drift allowance as a fraction of the TTL; the drift margin is
    /// `ttl × drift_factor + 2 ms` (default 0.01).
    pub drift_factor: f64,
    /// Retry schedule of [`Engine::acquire`](crate::Engine::acquire) (default 3 attempts).
    pub retry: Retry,
    /// Seed of the jitter generator. Adapters seed it from the OS; tests fix it.
    pub seed: u64,
    /// Name sent with `CLIENT SETNAME` on connect (`None`: not sent). A refusal is ignored.
    pub client_name: Option<String>,
    /// Prefix of the fencing counter keys: the counter of resource `R` is `{fence_prefix}R`.
    pub fence_prefix: String,
    /// How long one connect attempt handed out by
    /// [`Engine::poll_connect`](crate::Engine::poll_connect) may take before it is abandoned
    /// (default 1 s).
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
}

impl Config {
    /// The seed [`Config::new`] puts in [`Config::seed`]. Adapters replace a config still
    /// carrying it with a seed from the OS, so that two clients never jitter in step.
    pub const DEFAULT_SEED: u64 = 0x5eed_0f4e_d10c;

    /// A config for these nodes with the defaults for everything else.
    pub fn new(nodes: Vec<NodeConfig>) -> Self {
        Config {
            nodes,
            node_timeout: Duration::from_millis(50),
            drift_factor: 0.01,
            retry: Retry::default(),
            seed: Config::DEFAULT_SEED,
            client_name: Some("redlease".to_owned()),
            fence_prefix: "redlease:fence:".to_owned(),
            connect_timeout: Duration::from_secs(1),
            reconnect_min: Duration::from_millis(50),
            reconnect_max: Duration::from_secs(2),
            reconnect_jitter: 0.5,
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

    /// Check the settings; [`Engine::new`](crate::Engine::new) calls this.
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
        for (field, value) in [("connect_timeout", self.connect_timeout), ("reconnect_max", self.reconnect_max)] {
            if value > MAX_CONNECT_DELAY {
                return Err(ConfigError::DelayTooLong { field, value });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_url() {
        let n = NodeConfig::from_url("redis://alice:s%40cret@127.0.0.1:7000/3").unwrap();
        assert_eq!(n.host, "127.0.0.1");
        assert_eq!(n.port, 7000);
        assert_eq!(n.user.as_deref(), Some("alice"));
        assert_eq!(n.password.as_deref(), Some("s@cret"));
        assert_eq!(n.db, 3);
        assert_eq!(n.to_string(), "redis://alice@127.0.0.1:7000/3");
        assert!(!format!("{n:?}").contains("cret"));
    }

    #[test]
    fn parses_short_forms() {
        let n = NodeConfig::from_url("redis://localhost").unwrap();
        assert_eq!((n.host.as_str(), n.port, n.db), ("localhost", 6379, 0));
        let n = NodeConfig::from_url("redis://:pw@h:1").unwrap();
        assert_eq!((n.user, n.password.as_deref()), (None, Some("pw")));
        let n = NodeConfig::from_url("redis://[::1]:6380/").unwrap();
        assert_eq!((n.host.as_str(), n.port), ("::1", 6380));
    }

    #[test]
    fn rejects_bad_urls_with_reasons() {
        for (url, needle) in [
            ("http://h:1", "redis://"),
            ("redis://:1", "host"),
            ("redis://h:0", "port"),
            ("redis://h:99999", "port"),
            ("redis://h:x", "port"),
            ("redis://h:1/db", "database"),
            ("redis://[::1:1", "]"),
            ("redis://u:%zz@h", "%-escape"),
        ] {
            let err = NodeConfig::from_url(url).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
        }
        let err = NodeConfig::from_url("redis://u:topsecret@h:x").unwrap_err().to_string();
        assert!(!err.contains("topsecret"), "{err}");
    }

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
