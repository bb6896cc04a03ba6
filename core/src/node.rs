//! One node's address and credentials ([`NodeConfig`]), and the `redis://` URLs they are
//! written as.

use std::fmt;

use crate::error::ConfigError;

/// Where one Redis node lives and how to log in to it.
///
/// Parsed from `redis://[user:pass@]host:port[/db]` by [`NodeConfig::from_url`]. The engine
/// itself only uses the credentials and the database number (it emits `AUTH` and `SELECT`);
/// `host` and `port` are for the adapter that opens the socket.
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

/// Hide the password of a URL for error messages, whatever its scheme (`rediss://`,
/// `http://`, a typo such as `redis:/`, or none at all).
///
/// Everything between the scheme's `://` (or the start, without one) and the **last** `@`
/// is user information; what follows its first `:` is the password and becomes `***` (without
/// a `:`, the whole of it becomes `***`: `redis://pass@host` is a password). The last `@` is
/// used, and the authority is not cut at `/` first, because a badly written password may hold
/// either; hiding too much of a URL that has an `@` elsewhere is harmless.
fn redact(url: &str) -> String {
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
            "rediss://u:topsecret@h:6379",
            "http://u:topsecret@h:1",
            "unix://:topsecret@/tmp/redis.sock",
            "redis+unix://u:topsecret@/tmp/redis.sock",
            "redis:/u:topsecret@h:1",
            "u:topsecret@h:1",
            "topsecret@h:1",
            "rediss://topsecret@h",
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
    }
}
