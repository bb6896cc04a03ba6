//! One node's address, transport and credentials ([`NodeConfig`]), and the `redis://`,
//! `rediss://` and `redis+unix://` URLs they are written as.

use std::fmt;
use std::path::PathBuf;

use crate::error::ConfigError;
use crate::tls::TlsSettings;

mod sentinel;
mod url;

pub(crate) use sentinel::hostport;
pub use sentinel::{MAX_SENTINELS, SENTINEL_PORT, SentinelConfig, split_node_list};
use url::{credentials, host_port, options, parse_unix, redact};

/// How the client reaches a node.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// Plain TCP to `host:port` (`redis://`).
    Tcp,
    /// TLS over TCP to `host:port` (`rediss://`), verified as the node's or the config's
    /// [`TlsSettings`] say. Needs the `tls` feature of the client crate.
    Tls,
    /// A Unix domain socket at this path (`redis+unix:///path`, `unix:///path`); `host` and
    /// `port` are not used.
    Unix(PathBuf),
}

/// Where one Redis node lives and how to log in to it.
///
/// Parsed from `redis://[user:pass@]host:port[/db]`, `rediss://…` (TLS) or
/// `redis+unix:///path[?db=N]` by [`NodeConfig::from_url`]. The engine itself only uses the
/// credentials and the database number (it emits `AUTH` and `SELECT`); `host`, `port`,
/// `transport` and `tls` are for the adapter that opens the connection.
///
/// `#[non_exhaustive]`: build one with [`NodeConfig::new`] or [`NodeConfig::from_url`] and the
/// builder methods; the fields are public to read and adjust.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// TCP, TLS or a Unix socket.
    pub transport: Transport,
    /// TLS settings of this node (`None`: the config's [`Config::tls`](crate::Config::tls)).
    pub tls: Option<TlsSettings>,
    /// Count this node's grants and extensions only once its replicas have them
    /// ([`NodeConfig::min_replicas`]); `None`: as soon as the node answers.
    pub min_replicas: Option<MinReplicas>,
    /// The sentinels that name this node's master (`None`: the node is at `host:port`); see
    /// [`SentinelConfig`]. `host` and `port` are then its first sentinel's.
    pub sentinel: Option<SentinelConfig>,
}

/// How often a ready connection to a node with [`NodeConfig::min_replicas`] asks the node
/// (`ROLE`) how many replicas it has online, as its handshake does first: a primary with fewer
/// than its grants wait for is not used ([`LinkError::Replicas`](crate::LinkError::Replicas))
/// until a reconnect finds them.
pub const REPLICAS_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Replicas that must acknowledge a node's grant before it counts: `WAIT replicas timeout`
/// after the write, on the same connection (`WAITAOF 0 replicas timeout` with `fsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinReplicas {
    /// How many replicas (at least 1).
    pub replicas: u32,
    /// How long the node waits for them; must be below
    /// [`Config::node_timeout`](crate::Config::node_timeout), which bounds the whole vote.
    pub timeout: std::time::Duration,
    /// The replicas must have written the grant to their append-only file, not only received
    /// it (`WAITAOF`, Redis 7.2; replicas with `appendonly yes`).
    pub fsync: bool,
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
            .field("transport", &self.transport)
            .field("tls", &self.tls)
            .field("min_replicas", &self.min_replicas)
            .field("sentinel", &self.sentinel)
            .finish()
    }
}

impl fmt::Display for NodeConfig {
    /// The node as a URL without its password, for messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(sentinel) = &self.sentinel {
            return sentinel::display(f, self, sentinel);
        }
        if let Transport::Unix(path) = &self.transport {
            write!(f, "redis+unix://")?;
            if let Some(user) = &self.user {
                write!(f, "{user}@")?;
            }
            write!(f, "{}", path.display())?;
            if self.db != 0 {
                write!(f, "?db={}", self.db)?;
            }
            return Ok(());
        }
        write!(f, "{}", if self.transport == Transport::Tls { "rediss://" } else { "redis://" })?;
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
    /// The host and port a TCP or TLS node is reached at (`None` for a Unix socket), to know
    /// its own connection among the masters a Redis Cluster's map names.
    pub(crate) fn tcp_endpoint(&self) -> Option<(String, u16)> {
        (!matches!(self.transport, Transport::Unix(_))).then(|| (self.host.clone(), self.port))
    }

    /// A node at `host:port` with no credentials and database 0.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        NodeConfig {
            host: host.into(),
            port,
            user: None,
            password: None,
            db: 0,
            transport: Transport::Tcp,
            tls: None,
            min_replicas: None,
            sentinel: None,
        }
    }

    /// A node listening on the Unix socket at `path`, no credentials, database 0.
    pub fn unix(path: impl Into<PathBuf>) -> Self {
        NodeConfig { transport: Transport::Unix(path.into()), ..NodeConfig::new("localhost", 0) }
    }

    /// Connect over TLS (`true`) or plain TCP (`false`); a Unix socket stays one.
    pub fn use_tls(mut self, on: bool) -> Self {
        if !matches!(self.transport, Transport::Unix(_)) {
            self.transport = if on { Transport::Tls } else { Transport::Tcp };
        }
        self
    }

    /// TLS settings for this node alone (else the config's).
    pub fn tls(mut self, settings: TlsSettings) -> Self {
        self.tls = Some(settings);
        self
    }

    /// Log in as the ACL user `user` (give its password too).
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Log in with this password (`AUTH`).
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Select this logical database.
    pub fn db(mut self, db: u32) -> Self {
        self.db = db;
        self
    }

    /// Count this node's grants (and extensions, and fencing write-backs) only once `replicas`
    /// of its replicas acknowledge them: each such write is followed by `WAIT replicas
    /// timeout` on the same connection, and a node whose replicas fall short within `timeout`
    /// casts a failed vote (its grant is cleaned up like any failed attempt's). For a node
    /// that is one primary with replicas and automatic failover: a grant a failover could
    /// lose does not count. A node that reports fewer replicas online than `replicas`
    /// (`ROLE`, at the handshake and every [`REPLICAS_CHECK`]) is not used: the health view
    /// shows it misconfigured with both numbers, and a lock fails at once as misconfigured
    /// when such nodes leave no quorum. The ACL user needs `+role`. `replicas == 0` turns it
    /// off. In a URL: `?min_replicas=1&replicas_timeout=20` (milliseconds).
    pub fn min_replicas(mut self, replicas: u32, timeout: std::time::Duration) -> Self {
        self.min_replicas = (replicas > 0).then_some(MinReplicas { replicas, timeout, fsync: false });
        self
    }

    /// With [`min_replicas`](Self::min_replicas): count a grant only once those replicas
    /// have also written it to their append-only file (`WAITAOF 0 replicas timeout` instead
    /// of `WAIT`; Redis 7.2 or later, replicas with `appendonly yes`). A replica that restarts
    /// then still has it. A server without `WAITAOF` fails the node's votes with its error,
    /// which names the command. In a URL: `?min_replicas=1&replicas_fsync=1`. No effect
    /// without `min_replicas`.
    pub fn replicas_fsync(mut self, on: bool) -> Self {
        if let Some(m) = self.min_replicas.as_mut() {
            m.fsync = on;
        }
        self
    }

    /// Parse a node URL, as redis-rs writes them:
    ///
    /// - `redis://[user:pass@]host[:port][/db]`: plain TCP;
    /// - `rediss://[user:pass@]host[:port][/db]`: TLS (verified as [`TlsSettings`] say);
    /// - `redis+unix:///path/to/redis.sock[?db=N&user=U&pass=P]` (or `unix://…`): a Unix
    ///   socket; credentials may also come as `redis+unix://user:pass@/path`;
    /// - `redis+sentinel://[user:pass@]host[:port][,host[:port]…]/service[/db]`: the master
    ///   the sentinels at those addresses (port 26379 by default) name as `service`
    ///   ([`SentinelConfig`]); `rediss+sentinel://` reaches the sentinels and the data nodes
    ///   with TLS. The options `sentinel_username` and `sentinel_password` log in to the
    ///   sentinels where they take other credentials than the data nodes.
    ///
    /// Every form takes the query options `db`, `user` (`username`), `pass` (`password`),
    /// `min_replicas`, `replicas_timeout` (milliseconds, default 20: see
    /// [`min_replicas`](Self::min_replicas)), `replicas_fsync=1` (see
    /// [`replicas_fsync`](Self::replicas_fsync)) and `protocol=resp3|resp2` (no effect: redlease
    /// asks for RESP3 and falls back to RESP2 by itself), e.g.
    /// `redis://host:6379?min_replicas=1`; an unknown option, or a fragment (`#insecure`), is
    /// refused by name. One URL per node: a comma-separated list given as one is refused,
    /// saying so.
    ///
    /// `redis://:pass@host` gives a password without a user. User and password may be
    /// percent-encoded. IPv6 hosts go in brackets: `redis://[::1]:6379`.
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        let bad = |reason: &str| ConfigError::BadUrl { url: redact(url), reason: reason.to_owned() };
        if [",redis://", ",rediss://", ",redis+unix://", ",unix://", ",redis+sentinel://", ",rediss+sentinel://"]
            .iter()
            .any(|s| url.contains(s))
        {
            return Err(bad("this is a list of URLs given as one: give each URL on its own (a comma-separated \
                 list is what REDLEASE_NODES, --nodes and Config::from_env take)"));
        }
        if let Some(rest) = url.strip_prefix("redis+unix://").or_else(|| url.strip_prefix("unix://")) {
            return parse_unix(rest).map_err(|reason| bad(&reason));
        }
        let (rest, transport, sentinel) = if let Some(rest) = url.strip_prefix("redis://") {
            (rest, Transport::Tcp, false)
        } else if let Some(rest) = url.strip_prefix("rediss://") {
            (rest, Transport::Tls, false)
        } else if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            (rest, Transport::Tcp, true)
        } else if let Some(rest) = url.strip_prefix("rediss+sentinel://") {
            (rest, Transport::Tls, true)
        } else {
            return Err(bad("it must start with redis:// (TCP), rediss:// (TLS), redis+unix:// (a Unix socket), or \
                 redis+sentinel:// (rediss+sentinel:// with TLS) for a master named by Redis Sentinel"));
        };
        // The query starts at the first `?` after the user information. An `@` after a `?`
        // could end the user information or sit in the query: refused, rather than guessed.
        if let (Some(q), Some(at)) = (rest.find('?'), rest.rfind('@')) {
            if at > q {
                return Err(bad("an @ after a ?: write @ in the query as %40 (or ? in the password as %3F)"));
            }
        }
        let after_at = rest.rfind('@').map_or(0, |i| i + 1);
        if let Some(i) = rest[after_at..].find('#') {
            // Refused like an unknown option: a setting redlease would not apply (`#insecure`)
            // is never silently dropped. Named unless it may be the tail of a password in the
            // query.
            let (before, fragment) = (&rest[after_at..after_at + i], &rest[after_at + i + 1..]);
            let named = if before.contains("pass=") || before.contains("password=") {
                "a URL fragment (#...)".to_owned()
            } else {
                format!("the URL fragment {:?}", format!("#{fragment}"))
            };
            return Err(bad(&format!(
                "{named} is not an option redlease knows: options go in the query (?name=value, an unknown one \
                 is refused); write # in a value as %23"
            )));
        }
        if sentinel {
            return sentinel::parse(rest, transport).map_err(|reason| bad(&reason));
        }
        let (rest, query) = match rest[after_at..].find('?') {
            Some(i) => (&rest[..after_at + i], &rest[after_at + i + 1..]),
            None => (rest, ""),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let (user, password) = credentials(userinfo).map_err(|reason| bad(&reason))?;
        let (host, port) = host_port(hostport, 6379).map_err(|reason| bad(&reason))?;
        let db = if path.is_empty() {
            0
        } else {
            path.parse::<u32>().map_err(|_| bad("the database after / must be a number, e.g. redis://host:6379/0"))?
        };
        let node = NodeConfig { host: host.to_owned(), port, user, password, db, transport, ..NodeConfig::new("", 0) };
        options(query, node).map_err(|reason| bad(&reason))
    }
}
