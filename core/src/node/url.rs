//! The pieces of the node URLs: credentials, the Unix-socket form, query options, and the
//! redaction that keeps passwords out of error messages.

use std::time::Duration;

use super::NodeConfig;

/// `user:pass` (percent-encoded) as user and password; a bare word is the password
/// (`redis://pass@host`, as redis-rs reads it).
pub(super) fn credentials(userinfo: Option<&str>) -> Result<(Option<String>, Option<String>), String> {
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
pub(super) fn parse_unix(rest: &str) -> Result<NodeConfig, String> {
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
    let (user, password) = credentials(userinfo)?;
    options(query, NodeConfig { user, password, ..NodeConfig::unix(path) })
}

/// The query options a node URL takes.
const KNOWN: [&str; 11] = [
    "db",
    "user",
    "username",
    "pass",
    "password",
    "protocol",
    "min_replicas",
    "replicas_timeout",
    "replicas_fsync",
    "sentinel_username",
    "sentinel_password",
];

/// Whether `key` is an option that holds a password.
fn is_secret(key: &str) -> bool {
    matches!(key, "pass" | "password" | "sentinel_password")
}

/// Apply a URL's query options to `node`: `db`, `user` (or `username`), `pass` (or
/// `password`), and `protocol` (`resp3` or `resp2`, accepted as redis-rs writes them; redlease
/// asks for RESP3 with `HELLO 3` and keeps RESP2 where a node refuses it). Any other option is
/// refused by name, so that a setting redlease would not apply is never silently dropped.
pub(super) fn options(query: &str, mut node: NodeConfig) -> Result<NodeConfig, String> {
    let (mut replicas_timeout, mut replicas_fsync) = (None, None);
    let secret = query.split('&').any(|p| is_secret(p.split_once('=').map_or(p, |(k, _)| k)));
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value).ok_or_else(|| {
            // With a password in the query, an unknown key may be a piece of it: not named.
            if secret && !KNOWN.contains(&key) {
                "a value has a bad %-escape".to_owned()
            } else {
                format!("the value of {key} has a bad %-escape")
            }
        })?;
        match key {
            "db" => node.db = value.parse().map_err(|_| "db must be a number, e.g. ?db=0".to_owned())?,
            "user" | "username" => node.user = Some(value).filter(|s| !s.is_empty()),
            "pass" | "password" => node.password = Some(value),
            "sentinel_username" | "sentinel_password" => {
                let Some(sentinel) = node.sentinel.as_mut() else {
                    return Err(format!("{key} is an option of redis+sentinel:// URLs (the sentinels' login)"));
                };
                if key == "sentinel_username" {
                    sentinel.user = Some(value).filter(|s| !s.is_empty());
                } else {
                    sentinel.password = Some(value);
                }
            }
            "min_replicas" => {
                let n: u32 =
                    value.parse().map_err(|_| "min_replicas must be a number, e.g. ?min_replicas=1".to_owned())?;
                let timeout = node.min_replicas.map_or(DEFAULT_REPLICAS_TIMEOUT, |m| m.timeout);
                node = node.min_replicas(n, timeout);
            }
            "replicas_timeout" => {
                let ms: u64 = value
                    .parse()
                    .ok()
                    .filter(|&ms| ms > 0)
                    .ok_or_else(|| "replicas_timeout must be a number of milliseconds above 0".to_owned())?;
                replicas_timeout = Some(Duration::from_millis(ms));
            }
            "replicas_fsync" => {
                replicas_fsync = Some(match value.as_str() {
                    "1" | "true" | "yes" => true,
                    "0" | "false" | "no" => false,
                    _ => return Err("replicas_fsync must be 1 or 0".to_owned()),
                });
            }
            "protocol" if value.eq_ignore_ascii_case("resp3") || value.eq_ignore_ascii_case("resp2") => {}
            "protocol" => return Err(format!("unknown protocol {value:?}: resp3 or resp2")),
            _ => {
                // The key is shown only when it cannot be the tail of a password holding a
                // raw `&` (no password option in the query, and it has a value).
                let named = if secret || !pair.contains('=') {
                    "an unknown option".to_owned()
                } else {
                    format!("unknown option {key:?}")
                };
                return Err(format!(
                    "{named}: the options are db, user, password, min_replicas, replicas_timeout, replicas_fsync, \
                     protocol (resp3 or resp2), and on redis+sentinel:// URLs sentinel_username and \
                     sentinel_password; write & in a value as %26"
                ));
            }
        }
    }
    if let Some(timeout) = replicas_timeout {
        let m = node.min_replicas.as_mut().ok_or("replicas_timeout needs min_replicas (e.g. ?min_replicas=1)")?;
        m.timeout = timeout;
    }
    if let Some(fsync) = replicas_fsync {
        let m = node.min_replicas.as_mut().ok_or("replicas_fsync needs min_replicas (e.g. ?min_replicas=1)")?;
        m.fsync = fsync;
    }
    Ok(node)
}

/// The `replicas_timeout` of a URL that gives `min_replicas` alone.
const DEFAULT_REPLICAS_TIMEOUT: Duration = Duration::from_millis(20);

/// Hide the password of a URL for error messages, whatever its scheme (`rediss://`,
/// `http://`, a typo such as `redis:/`, or none at all).
///
/// Everything between the scheme's `://` (or the start, without one) and the **last** `@`
/// is user information; what follows its first `:` is the password and becomes `***` (without
/// a `:`, the whole of it becomes `***`: `redis://pass@host` is a password). The last `@` is
/// used, and the authority is not cut at `/` first, because a badly written password may hold
/// either; hiding too much of a URL that has an `@` elsewhere is harmless.
pub(super) fn redact(url: &str) -> String {
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
    // What follows a password up to the next known option may be its tail (a raw `&` in it):
    // hidden too.
    let mut in_password = false;
    let pairs: Vec<String> = url[q + 1..]
        .split('&')
        .filter_map(|pair| {
            let key = pair.split_once('=').map_or(pair, |(k, _)| k);
            match key {
                _ if is_secret(key) => {
                    in_password = true;
                    Some(format!("{key}=***"))
                }
                _ if in_password && !KNOWN.contains(&key) => None,
                _ => {
                    in_password = false;
                    Some(pair.to_owned())
                }
            }
        })
        .collect();
    format!("{}?{}", &url[..q], pairs.join("&"))
}

/// `host[:port]` (an IPv6 host in brackets) as host and port, `default` without one.
pub(super) fn host_port(hostport: &str, default: u16) -> Result<(&str, u16), String> {
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let end = v6.find(']').ok_or("an IPv6 host needs a closing ]")?;
        let host = &v6[..end];
        let after = &v6[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err("unexpected text after the IPv6 host".to_owned()),
        };
        (host, port)
    } else {
        match hostport.rfind(':') {
            Some(i) => (&hostport[..i], Some(&hostport[i + 1..])),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("the host is missing (expected redis://host:port)".to_owned());
    }
    let port = match port {
        None => default,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err("the port must be a number from 1 to 65535".to_owned()),
            Ok(p) => p,
        },
    };
    Ok((host, port))
}

pub(super) fn percent_decode(s: &str) -> Option<String> {
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
    use crate::node::Transport;

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
    fn query_options_are_read_and_unknown_ones_refused_by_name() {
        let n = NodeConfig::from_url("redis://h:6380?protocol=resp3").unwrap();
        assert_eq!((n.host.as_str(), n.port, n.db), ("h", 6380, 0));
        let n = NodeConfig::from_url("rediss://u:p%3Fw@h:6380/2?protocol=RESP2").unwrap();
        assert_eq!((n.port, n.db, n.password.as_deref()), (6380, 2, Some("p?w")));
        let n = NodeConfig::from_url("redis://h?db=4&username=bob&password=s%40cret").unwrap();
        assert_eq!((n.port, n.db, n.user.as_deref(), n.password.as_deref()), (6379, 4, Some("bob"), Some("s@cret")));
        for (url, needle) in [
            ("redis://h:1?timeout=5", "unknown option \"timeout\""),
            ("redis://h:1/0?protocol=resp4", "resp3 or resp2"),
            ("redis+unix:///r.sock?tls=1", "unknown option \"tls\""),
            ("redis://h:1?db=x", "db must be a number"),
            // A fragment is refused by name, as an unknown option is.
            ("rediss://h:6380/#insecure", "the URL fragment \"#insecure\" is not an option redlease knows"),
            ("rediss://u:p#w@h:6380/2?protocol=RESP2#frag", "the URL fragment \"#frag\""),
            // A list given as one URL: said so, not "the port must be a number".
            ("redis://a:1,redis://b:2", "a list of URLs given as one"),
            ("rediss://u:pw@a:1,rediss://u:pw@b:2", "a list of URLs given as one"),
        ] {
            let err = NodeConfig::from_url(url).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
        }
        let err = NodeConfig::from_url("redis://h:1?password=topsecret&x=1").unwrap_err().to_string();
        assert!(!err.contains("topsecret"), "{err}");
        let err = NodeConfig::from_url("redis://h:1?password=top#secret").unwrap_err().to_string();
        assert!(!err.contains("secret") && err.contains("a URL fragment (#...)"), "{err}");
        let err = crate::Config::from_urls(["redis://a:1,redis://b:2"]).unwrap_err().to_string();
        assert!(err.contains("a list of URLs given as one"), "{err}");
        let err = NodeConfig::from_url("redis://u:topsecret@a:1,redis://u:topsecret@b:2").unwrap_err().to_string();
        assert!(!err.contains("topsecret"), "{err}");
        // A raw `&` in a password: its tail is not echoed as an option's name.
        for url in
            ["redis://h:1?password=top&secret", "unix:///s?pass=top&sec&ret&db=1", "redis://h:1?password=top&se=cret"]
        {
            let err = NodeConfig::from_url(url).unwrap_err().to_string();
            assert!(!err.contains("sec") && err.contains("%26"), "{url}: {err}");
        }
        let err = NodeConfig::from_url("redis://h:1?password=top&se=%zz").unwrap_err().to_string();
        assert!(!err.contains("the value of se") && err.contains("a value has a bad %-escape"), "{err}");
        let err = NodeConfig::from_url("redis://h:1?db=0&flag").unwrap_err().to_string();
        assert!(err.contains("an unknown option") && err.contains("%26"), "{err}");
        // An `@` in the query is not taken for the end of a password.
        let err = NodeConfig::from_url("redis://h:1?user=alice@corp.com").unwrap_err().to_string();
        assert!(err.contains("%40"), "{err}");
        let n = NodeConfig::from_url("redis://h:1?user=alice%40corp.com").unwrap();
        assert_eq!((n.host.as_str(), n.user.as_deref()), ("h", Some("alice@corp.com")));
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
