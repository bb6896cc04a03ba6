//! One node's address, transport and credentials ([`NodeConfig`]), and the `redis://`,
//! `rediss://` and `redis+unix://` URLs they are written as.

use std::fmt;
use std::path::PathBuf;

use crate::error::ConfigError;
use crate::tls::TlsSettings;

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
            .finish()
    }
}

impl fmt::Display for NodeConfig {
    /// The node as a URL without its password, for messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
    /// A node at `host:port` with no credentials and database 0.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        NodeConfig { host: host.into(), port, user: None, password: None, db: 0, transport: Transport::Tcp, tls: None }
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

    /// Parse a node URL, as redis-rs writes them:
    ///
    /// - `redis://[user:pass@]host[:port][/db]`: plain TCP;
    /// - `rediss://[user:pass@]host[:port][/db]`: TLS (verified as [`TlsSettings`] say);
    /// - `redis+unix:///path/to/redis.sock[?db=N&user=U&pass=P]` (or `unix://…`): a Unix
    ///   socket; credentials may also come as `redis+unix://user:pass@/path`.
    ///
    /// `redis://:pass@host` gives a password without a user. User and password may be
    /// percent-encoded. IPv6 hosts go in brackets: `redis://[::1]:6379`.
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        let bad = |reason: &str| ConfigError::BadUrl { url: redact(url), reason: reason.to_owned() };
        if let Some(rest) = url.strip_prefix("redis+unix://").or_else(|| url.strip_prefix("unix://")) {
            return parse_unix(rest).map_err(|reason| bad(&reason));
        }
        let (rest, transport) = match (url.strip_prefix("redis://"), url.strip_prefix("rediss://")) {
            (Some(rest), _) => (rest, Transport::Tcp),
            (_, Some(rest)) => (rest, Transport::Tls),
            _ => {
                return Err(bad("it must start with redis:// (TCP), rediss:// (TLS) or redis+unix:// (a Unix socket)"));
            }
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
        Ok(NodeConfig { host: host.to_owned(), port, user, password, db, transport, tls: None })
    }
}

/// `user:pass` (percent-encoded) as user and password; a bare word is the password
/// (`redis://pass@host`, as redis-rs reads it).
fn credentials(userinfo: Option<&str>) -> Result<(Option<String>, Option<String>), String> {
    let Some(info) = userinfo else {
        return Ok((None, None));
    };
    let (u, p) = match info.find(':') {
        Some(i) => (&info[..i], Some(&info[i + 1..])),
        None => (info, None),
    };
    let u = percent_decode(u).ok_or("the user name has a bad %-escape")?;
    let p = match p {
        Some(p) => Some(percent_decode(p).ok_or("the password has a bad %-escape")?),
        None => None,
    };
    Ok(match p {
        None => (None, Some(u).filter(|s| !s.is_empty())),
        Some(p) => (Some(u).filter(|s| !s.is_empty()), Some(p)),
    })
}

/// What follows `redis+unix://`: `[user:pass@]/path[?db=N&user=U&pass=P]`.
fn parse_unix(rest: &str) -> Result<NodeConfig, String> {
    let (before, query) = match rest.find('?') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    let (userinfo, path) = match before.find('/') {
        Some(i) if before[..i].ends_with('@') => (Some(&before[..i - 1]), &before[i..]),
        Some(0) => (None, before),
        _ => return Err("the socket path must be absolute: redis+unix:///path/to/redis.sock".to_owned()),
    };
    let path = percent_decode(path).ok_or("the path has a bad %-escape")?;
    if path.len() < 2 {
        return Err("the socket path is missing: redis+unix:///path/to/redis.sock".to_owned());
    }
    let (mut user, mut password) = credentials(userinfo)?;
    let mut db = 0;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value).ok_or_else(|| format!("the value of {key} has a bad %-escape"))?;
        match key {
            "db" => db = value.parse().map_err(|_| "db must be a number, e.g. ?db=0".to_owned())?,
            "user" | "username" => user = Some(value).filter(|s| !s.is_empty()),
            "pass" | "password" => password = Some(value),
            // Redis-rs accepts protocol=resp3 and the like; nothing else changes a lock.
            _ => {}
        }
    }
    Ok(NodeConfig { user, password, db, ..NodeConfig::unix(path) })
}

/// Hide the password of a URL for error messages, whatever its scheme (`rediss://`,
/// `http://`, a typo such as `redis:/`, or none at all).
///
/// Everything between the scheme's `://` (or the start, without one) and the **last** `@`
/// is user information; what follows its first `:` is the password and becomes `***` (without
/// a `:`, the whole of it becomes `***`: `redis://pass@host` is a password). The last `@` is
/// used, and the authority is not cut at `/` first, because a badly written password may hold
/// either; hiding too much of a URL that has an `@` elsewhere is harmless.
fn redact(url: &str) -> String {
    let url = &redact_query(url);
    let start = url.find("://").map_or(0, |i| i + 3);
    let Some(at) = url[start..].rfind('@').map(|i| start + i) else {
        return url.to_owned();
    };
    let userinfo = &url[start..at];
    match userinfo.find(':') {
        Some(colon) => format!("{}:***{}", &url[..start + colon], &url[at..]),
        None => format!("{}***{}", &url[..start], &url[at..]),
    }
}

/// Hide the value of `pass=` / `password=` in a URL's query (the Unix-socket form).
fn redact_query(url: &str) -> String {
    let Some(q) = url.find('?') else {
        return url.to_owned();
    };
    let pairs: Vec<String> = url[q + 1..]
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if k == "pass" || k == "password" => format!("{k}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{}?{}", &url[..q], pairs.join("&"))
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
    fn parses_tls_and_unix_urls() {
        let n = NodeConfig::from_url("rediss://alice:pw@cache.example.com:6380/2").unwrap();
        assert_eq!(
            (n.transport.clone(), n.host.as_str(), n.port, n.db),
            (Transport::Tls, "cache.example.com", 6380, 2)
        );
        assert_eq!(n.to_string(), "rediss://alice@cache.example.com:6380/2");
        for url in [
            "redis+unix:///run/redis/redis.sock?db=3&pass=s%40cret&user=bob",
            "unix://bob:s%40cret@/run/redis/redis.sock?db=3",
        ] {
            let n = NodeConfig::from_url(url).unwrap();
            assert_eq!(n.transport, Transport::Unix("/run/redis/redis.sock".into()), "{url}");
            assert_eq!((n.user.as_deref(), n.password.as_deref(), n.db), (Some("bob"), Some("s@cret"), 3), "{url}");
            assert_eq!(n.to_string(), "redis+unix://bob@/run/redis/redis.sock?db=3");
            assert!(!format!("{n:?}").contains("cret"));
        }
        let n = NodeConfig::from_url("redis+unix:///tmp/r.sock").unwrap();
        assert_eq!((n.user, n.password, n.db), (None, None, 0));
        for (url, needle) in [
            ("redis+unix://tmp/r.sock", "absolute"),
            ("unix://", "absolute"),
            ("redis+unix:///", "missing"),
            ("redis+unix:///r?db=x", "db"),
        ] {
            let err = NodeConfig::from_url(url).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
        }
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
    fn errors_never_show_a_password_whatever_the_scheme() {
        for url in [
            "rediss://u:topsecret@h:x",
            "http://u:topsecret@h:1",
            "unix://:topsecret@tmp/redis.sock",
            "redis+unix://u:topsecret@/",
            "redis+unix:///tmp/redis.sock?db=x&pass=topsecret",
            "redis:/u:topsecret@h:1",
            "u:topsecret@h:1",
            "topsecret@h:1",
            "rediss://topsecret@h:0",
            "redis://u:top/secret@h:1",
            "redis://u:top@secret@h:x",
            "redis://u:topsecret@h:1/x",
            "redis://u:topsecret@[::1:1",
        ] {
            let err = NodeConfig::from_url(url).unwrap_err();
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(!text.contains("secret"), "{url}: {text}");
                assert!(text.contains("***"), "{url}: the message should show where the password was: {text}");
            }
        }
        // The user name and the host stay, so the message still says which node is meant.
        assert_eq!(redact("rediss://alice:pw@h:6379/0"), "rediss://alice:***@h:6379/0");
        assert_eq!(redact("pw@h:1"), "***@h:1");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(redact("unix:///s?db=1&pass=pw"), "unix:///s?db=1&pass=***");
    }
}
