//! A node that is a primary with replicas watched by Redis Sentinel: the sentinels, the
//! service they watch, how to log in to them ([`SentinelConfig`]), the
//! `redis+sentinel://` URL they are written as, and the node lists in which such a URL's hosts
//! are separated by commas too ([`split_node_list`]).

use std::fmt;

use super::url::{credentials, host_port, options};
use super::{NodeConfig, Transport};

/// The port of a sentinel whose URL gives none.
pub const SENTINEL_PORT: u16 = 26379;

/// Most sentinels one node lists.
pub const MAX_SENTINELS: usize = 64;

/// The sentinels that watch a node's primary, and the name of the service they watch it as.
///
/// A node with one ([`NodeConfig::sentinel`]) is one vote: the vote of the master the
/// sentinels name (`SENTINEL get-master-addr-by-name`), confirmed by `ROLE` before it counts,
/// and followed when the sentinels switch to another. The data node is reached with the node's
/// transport (TLS for `rediss+sentinel://`), credentials, database and `min_replicas`; the
/// sentinels with the same transport and their own credentials when they are given.
///
/// `#[non_exhaustive]`: build one with [`SentinelConfig::new`] (or a `redis+sentinel://`
/// URL); the fields are public to read and adjust.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SentinelConfig {
    /// The service (master) name the sentinels watch, as in `sentinel monitor NAME ...`.
    pub service: String,
    /// The sentinels' hosts and ports, asked in turn.
    pub sentinels: Vec<(String, u16)>,
    /// ACL user for `AUTH` on the sentinels (`None`: the node's [`user`](NodeConfig::user)
    /// when no sentinel password is given either, else the `default` user).
    pub user: Option<String>,
    /// Password for the sentinels (`None`: the node's own credentials are used on them too).
    pub password: Option<String>,
}

impl fmt::Debug for SentinelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the password.
        f.debug_struct("SentinelConfig")
            .field("service", &self.service)
            .field("sentinels", &self.sentinels)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

impl SentinelConfig {
    /// The sentinels at `sentinels` (host, port), watching the master named `service`; they
    /// are logged in to as the data nodes are.
    pub fn new(sentinels: impl IntoIterator<Item = (String, u16)>, service: impl Into<String>) -> Self {
        SentinelConfig {
            service: service.into(),
            sentinels: sentinels.into_iter().collect(),
            user: None,
            password: None,
        }
    }

    /// Log in to the sentinels as this ACL user (give [`password`](Self::password) too).
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Log in to the sentinels with this password, instead of the data nodes' credentials.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// The user and password `AUTH` sends to a sentinel of `node` (no password: no `AUTH`).
    pub(crate) fn auth<'a>(&'a self, node: &'a NodeConfig) -> (Option<&'a str>, Option<&'a str>) {
        match (&self.user, &self.password) {
            (None, None) => (node.user.as_deref(), node.password.as_deref()),
            (user, password) => (user.as_deref(), password.as_deref()),
        }
    }
}

/// `host:port`, an IPv6 host in brackets.
pub(crate) fn hostport(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

impl NodeConfig {
    /// A node whose master the sentinels at `sentinels` name as `service` (plain TCP, no
    /// credentials, database 0); see [`SentinelConfig`].
    pub fn sentinel(sentinels: impl IntoIterator<Item = (String, u16)>, service: impl Into<String>) -> Self {
        let sentinel = SentinelConfig::new(sentinels, service);
        let (host, port) = sentinel.sentinels.first().cloned().unwrap_or_else(|| (String::new(), SENTINEL_PORT));
        NodeConfig { sentinel: Some(sentinel), ..NodeConfig::new(host, port) }
    }

    /// Whether the node is a Sentinel-managed primary.
    pub fn is_sentinel(&self) -> bool {
        self.sentinel.is_some()
    }
}

/// Write a Sentinel-managed node as its URL, without passwords.
pub(super) fn display(f: &mut fmt::Formatter<'_>, node: &NodeConfig, sentinel: &SentinelConfig) -> fmt::Result {
    let scheme = if node.transport == Transport::Tls { "rediss+sentinel://" } else { "redis+sentinel://" };
    write!(f, "{scheme}")?;
    if let Some(user) = &node.user {
        write!(f, "{user}@")?;
    }
    let hosts: Vec<String> = sentinel.sentinels.iter().map(|(h, p)| hostport(h, *p)).collect();
    write!(f, "{}/{}", hosts.join(","), sentinel.service)?;
    if node.db != 0 {
        write!(f, "/{}", node.db)?;
    }
    if let Some(user) = &sentinel.user {
        write!(f, "?sentinel_username={user}")?;
    }
    Ok(())
}

/// What follows `redis+sentinel://` (or `rediss+sentinel://`, `transport` TLS):
/// `[user:pass@]host[:port][,host[:port]…]/service[/db][?options]`.
pub(super) fn parse(rest: &str, transport: Transport) -> Result<NodeConfig, String> {
    let after_at = rest.rfind('@').map_or(0, |i| i + 1);
    let (rest, query) = match rest[after_at..].find('?') {
        Some(i) => (&rest[..after_at + i], &rest[after_at + i + 1..]),
        None => (rest, ""),
    };
    let userinfo = (after_at > 0).then(|| &rest[..after_at - 1]);
    let (hosts, path) = match rest[after_at..].find('/') {
        Some(i) => (&rest[after_at..after_at + i], &rest[after_at + i + 1..]),
        None => (&rest[after_at..], ""),
    };
    let (user, password) = credentials(userinfo)?;
    let mut sentinels = Vec::new();
    for item in hosts.split(',').map(str::trim) {
        if item.is_empty() {
            return Err("an empty sentinel address in the host list (two commas, or one at the end)".to_owned());
        }
        let (host, port) = host_port(item, SENTINEL_PORT)?;
        sentinels.push((host.to_owned(), port));
    }
    if sentinels.len() > MAX_SENTINELS {
        return Err(format!("more than {MAX_SENTINELS} sentinels"));
    }
    let (service, db) = match path.split_once('/') {
        Some((service, db)) => (service, db),
        None => (path, ""),
    };
    if service.is_empty() {
        return Err("the service name is missing: redis+sentinel://host:26379[,host:port...]/SERVICE[/db], \
                    SERVICE as in the sentinels' `sentinel monitor SERVICE ...`"
            .to_owned());
    }
    let service = super::url::percent_decode(service).ok_or("the service name has a bad %-escape")?;
    let db = match db.strip_suffix('/').unwrap_or(db) {
        "" => 0,
        db => db.parse::<u32>().map_err(|_| {
            "the database after the service name must be a number, e.g. redis+sentinel://host:26379/mymaster/0"
                .to_owned()
        })?,
    };
    let mut node = NodeConfig::sentinel(sentinels, service);
    node.transport = transport;
    node.user = user;
    node.password = password;
    node.db = db;
    options(query, node)
}

/// Split a comma-separated node list (`REDLEASE_NODES`, `--nodes`) into node URLs: an item
/// without a `scheme://` continues the host list of the `redis+sentinel://` (or
/// `rediss+sentinel://`) URL before it, until an item of that list gives the service
/// (`/name`). Empty items are skipped; other items are returned as they are, to be parsed
/// (and refused, when they are not URLs) one by one.
///
/// ```
/// # use redlease_core::split_node_list;
/// let urls = split_node_list("redis+sentinel://a:26379,b:26379/locks,redis://c:6379");
/// assert_eq!(urls, ["redis+sentinel://a:26379,b:26379/locks", "redis://c:6379"]);
/// ```
pub fn split_node_list(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Whether the last URL is a sentinel URL whose host list is still open.
    let mut open = false;
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let (true, Some(last)) = (open && !item.contains("://"), out.last_mut()) {
            last.push(',');
            last.push_str(item);
            open = !item.contains('/');
            continue;
        }
        open = (item.starts_with("redis+sentinel://") || item.starts_with("rediss+sentinel://"))
            && !item
                .split_once("://")
                .is_some_and(|(_, rest)| rest.rsplit('@').next().is_some_and(|h| h.contains('/')));
        out.push(item.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sentinel_urls() {
        let n = NodeConfig::from_url(
            "redis+sentinel://alice:s%40cret@10.0.0.1,10.0.0.2:26380,[::1]/locks/2?min_replicas=1",
        )
        .unwrap();
        let s = n.sentinel.as_ref().unwrap();
        assert_eq!(s.service, "locks");
        assert_eq!(
            s.sentinels,
            [("10.0.0.1".to_owned(), 26379), ("10.0.0.2".to_owned(), 26380), ("::1".to_owned(), 26379)]
        );
        assert_eq!((n.user.as_deref(), n.password.as_deref(), n.db), (Some("alice"), Some("s@cret"), 2));
        assert_eq!(n.min_replicas.map(|m| m.replicas), Some(1));
        assert_eq!(n.transport, Transport::Tcp);
        assert_eq!(s.auth(&n), (Some("alice"), Some("s@cret")));
        assert_eq!(n.to_string(), "redis+sentinel://alice@10.0.0.1:26379,10.0.0.2:26380,[::1]:26379/locks/2");
        assert!(!format!("{n:?}").contains("cret"));

        let n = NodeConfig::from_url(
            "rediss+sentinel://:data%20pw@s1:1,s2:2/svc?sentinel_username=watch&sentinel_password=sent%26pw",
        )
        .unwrap();
        let s = n.sentinel.as_ref().unwrap();
        assert_eq!(n.transport, Transport::Tls);
        assert_eq!((s.user.as_deref(), s.password.as_deref()), (Some("watch"), Some("sent&pw")));
        assert_eq!(s.auth(&n), (Some("watch"), Some("sent&pw")));
        assert_eq!(n.password.as_deref(), Some("data pw"));
        let shown = format!("{n} {n:?}");
        assert!(!shown.contains("sent&pw") && !shown.contains("data pw"), "{shown}");
        assert_eq!(n.to_string(), "rediss+sentinel://s1:1,s2:2/svc?sentinel_username=watch");
        // Displayed URLs parse back to the same node (without their passwords).
        let back = NodeConfig::from_url(&n.to_string()).unwrap();
        assert_eq!((back.sentinel.as_ref().unwrap().user.as_deref(), back.db), (Some("watch"), 0));
    }

    #[test]
    fn refuses_bad_sentinel_urls_by_name() {
        for (url, needle) in [
            ("redis+sentinel://h:26379", "the service name is missing"),
            ("redis+sentinel://h:26379/", "the service name is missing"),
            ("redis+sentinel://h:26379,/svc", "an empty sentinel address"),
            ("redis+sentinel://h:x/svc", "port"),
            ("redis+sentinel://:1/svc", "host"),
            ("redis+sentinel://h/svc/x", "the database after the service name"),
            ("redis+sentinel://h/svc?sentinel_port=1", "unknown option \"sentinel_port\""),
            ("redis://h:1?sentinel_password=pw", "redis+sentinel://"),
            ("redis+sentinel://h/svc#x", "fragment"),
        ] {
            let err = NodeConfig::from_url(url).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
        }
        for url in [
            "redis+sentinel://u:topsecret@h:x/svc",
            "redis+sentinel://h/svc?sentinel_password=topsecret&x=1",
            "rediss+sentinel://u:topsecret@h,/svc",
            "redis+sentinel://u:topsecret@h:1",
        ] {
            let err = NodeConfig::from_url(url).unwrap_err();
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(!text.contains("secret"), "{url}: {text}");
            }
        }
    }

    #[test]
    fn node_lists_keep_sentinel_host_lists_together() {
        assert_eq!(
            split_node_list(" redis+sentinel://a,b:2, c/svc?db=1 ,redis://x:1,,rediss+sentinel://u:p,w@d/s2,e:1"),
            ["redis+sentinel://a,b:2,c/svc?db=1", "redis://x:1", "rediss+sentinel://u:p,w@d/s2", "e:1"]
        );
        assert_eq!(split_node_list("redis://a:1,redis://b:2"), ["redis://a:1", "redis://b:2"]);
        // A host list that never names its service is still one item, refused as a whole.
        let urls = split_node_list("redis+sentinel://a,b");
        assert_eq!(urls, ["redis+sentinel://a,b"]);
        let err = NodeConfig::from_url(&urls[0]).unwrap_err().to_string();
        assert!(err.contains("the service name is missing"), "{err}");
        let config = crate::Config::from_urls(split_node_list("redis+sentinel://a,b/s,redis+sentinel://c/s")).unwrap();
        assert_eq!(config.nodes.len(), 2);
    }
}
