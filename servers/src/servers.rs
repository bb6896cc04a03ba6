//! The set of standalone nodes: [`ServersBuilder`] starts N independent `redis-server`
//! processes on free loopback ports, each in its own temp dir; [`Servers`] holds them and stops
//! them on drop.

use std::net::SocketAddr;

use redlease_core::{FORMAT_KEY, SEMAPHORE_PREFIX};

use crate::conf::TlsHandle;
use crate::node::{Node, make_url};
use crate::placement::{Listen, Placement, default_listen};
use crate::process;

/// The prefix of fencing counter keys (the core's default); they are allowed to have no TTL.
pub const FENCE_PREFIX: &str = "redlease:fence:";

/// Whether `key` is a lock key: not a fencing counter, the lock format key or a semaphore's
/// limit record, which are meant to live without a TTL.
pub(crate) fn is_lock_key(key: &str) -> bool {
    let record = key == FORMAT_KEY || (key.starts_with(SEMAPHORE_PREFIX) && key.ends_with("}:limit"));
    !key.starts_with(FENCE_PREFIX) && !record
}

/// Every key of `nodes` with its PTTL, as `(index, key, PTTL)`, each node under the index it
/// comes with. Panics if a node does not answer.
pub(crate) fn keys_with_ttl<'a>(nodes: impl Iterator<Item = (usize, &'a Node)>) -> Vec<(usize, String, i64)> {
    let mut out = Vec::new();
    for (i, node) in nodes {
        let n = node.index();
        let mut conn = node.conn().unwrap_or_else(|e| panic!("node {n}: connect: {e}"));
        for key in conn.keys("*").unwrap_or_else(|e| panic!("node {n}: SCAN: {e}")) {
            let pttl = conn.pttl(&key).unwrap_or_else(|e| panic!("node {n}: PTTL: {e}"));
            out.push((i, key, pttl));
        }
    }
    out
}

/// Panic listing the lock keys of `keys` (`(index, key, PTTL)`, the index a `whose`) that
/// have no TTL.
pub(crate) fn assert_ttls(keys: Vec<(usize, String, i64)>, whose: &str) {
    let leaks: Vec<_> = keys.into_iter().filter(|(_, _, pttl)| *pttl == -1).collect();
    assert!(leaks.is_empty(), "lock keys left without a TTL ({whose}, key, pttl): {leaks:?}");
}

/// Settings of a [`Servers`]; start with [`Servers::builder`].
#[derive(Clone, Debug)]
pub struct ServersBuilder {
    nodes: usize,
    persist: bool,
    acl: Option<(String, String)>,
    base_port: Option<u16>,
    placements: Option<Vec<Placement>>,
    listen: Listen,
    replicas: usize,
}

impl ServersBuilder {
    /// Give every node this many replicas (default 0): `redis-server` processes on loopback
    /// that replicate it (`REPLICAOF`), started after it and ready once their link to it is up.
    /// Over TCP only. They are on free ports, or, with [`base_port`](Self::base_port), on the
    /// ports after the nodes': node `i`'s replica `j` on `base + nodes + i × replicas + j`.
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n;
        self
    }

    /// How clients reach the nodes (default: TCP, or what [`with_listen`](crate::with_listen) set).
    pub fn listen(mut self, listen: Listen) -> Self {
        self.listen = listen;
        self
    }

    /// Put node `i` on port `base + i` instead of free ports chosen by the OS (a TLS node's
    /// TLS port; its replicas follow, see [`replicas`](Self::replicas)).
    pub fn base_port(mut self, base: u16) -> Self {
        self.base_port = Some(base);
        self
    }

    /// Number of independent nodes (default 3).
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    /// One node per placement, each on its own address and started its own way (e.g. each
    /// in a network namespace); replaces [`nodes`](Self::nodes) and
    /// [`base_port`](Self::base_port).
    pub fn placements(mut self, placements: Vec<Placement>) -> Self {
        self.nodes = placements.len();
        self.placements = Some(placements);
        self
    }

    /// Run every node with `appendonly yes` + `appendfsync always` (default: no persistence at
    /// all, `save ""` and `appendonly no`).
    pub fn persist(mut self, on: bool) -> Self {
        self.persist = on;
        self
    }

    /// Create the ACL user `user` with `password` and every permission, and turn the `default`
    /// user off, so that only this user can log in. Neither may contain whitespace.
    pub fn acl_user(mut self, user: &str, password: &str) -> Self {
        assert!(
            !user.is_empty() && !user.contains(char::is_whitespace) && !password.contains(char::is_whitespace),
            "acl_user: user and password must be non-empty words without whitespace"
        );
        self.acl = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// Start the nodes and wait until each answers `PING`.
    ///
    /// # Panics
    ///
    /// If `redis-server` is missing (one line saying how to install it) or a node does not come
    /// up (with the tail of its log).
    pub fn start(self) -> Servers {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`start`](Self::start), but a missing `redis-server` or a node that does not come
    /// up is an error message instead of a panic (for the `redlease` command). Nodes already
    /// started are stopped again.
    pub fn try_start(self) -> Result<Servers, String> {
        if self.nodes == 0 {
            return Err("a set of servers needs at least one node".to_owned());
        }
        process::installed()?;
        let tls = crate::conf::tls_files(self.listen.is_tls())?;
        let mut nodes = Vec::with_capacity(self.nodes);
        for index in 0..self.nodes {
            let placement = match &self.placements {
                Some(p) => Some(p[index].clone()),
                None => Placement::local(self.base_port, index)?,
            };
            nodes.push(Node::start(index, placement, self.persist, self.acl.clone(), self.listen, false, tls.clone())?);
        }
        if self.replicas > 0 && self.listen != Listen::Tcp {
            return Err("replicas are started over TCP only: use Listen::Tcp with replicas".to_owned());
        }
        let mut replicas = Vec::with_capacity(self.nodes);
        for (i, primary) in nodes.iter().enumerate() {
            let mut of = Vec::with_capacity(self.replicas);
            for j in 0..self.replicas {
                let placement = Placement::local(self.base_port, self.nodes + i * self.replicas + j)?;
                let replica =
                    Node::start(primary.index(), placement, self.persist, self.acl.clone(), Listen::Tcp, false, None)?;
                replica.replicate(primary)?;
                of.push(replica);
            }
            replicas.push(of);
        }
        Ok(Servers { nodes, replicas, acl: self.acl, tls })
    }
}

/// N independent `redis-server` processes (no replication between them; each may have
/// replicas of its own, [`ServersBuilder::replicas`]), stopped on drop.
///
/// ```no_run
/// use redlease_servers::Servers;
///
/// let servers = Servers::builder().nodes(5).persist(true).start();
/// let urls = servers.urls(); // redis://127.0.0.1:PORT, one per node
/// servers.node(0).pause(); // SIGSTOP
/// servers.node(0).resume(); // SIGCONT
/// servers.node(1).restart(true); // kill -9, start again on the same port with its files
/// # let _ = urls;
/// ```
#[derive(Debug)]
pub struct Servers {
    nodes: Vec<Node>,
    /// Each node's replicas.
    replicas: Vec<Vec<Node>>,
    acl: Option<(String, String)>,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    tls: Option<TlsHandle>,
}

impl Servers {
    /// Start `n` nodes without persistence and without ACL users.
    pub fn start(n: usize) -> Servers {
        Servers::builder().nodes(n).start()
    }

    /// A builder with the defaults: 3 nodes, no persistence, no ACL user.
    pub fn builder() -> ServersBuilder {
        ServersBuilder {
            nodes: 3,
            persist: false,
            acl: None,
            base_port: None,
            placements: None,
            listen: default_listen(),
            replicas: 0,
        }
    }

    /// The CA and certificates of TLS servers ([`Listen::Tls`]).
    #[cfg(feature = "tls")]
    pub fn tls(&self) -> Option<&crate::tls::TlsFiles> {
        self.tls.as_deref()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Node `i`.
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// The replicas of node `i` (none unless [`ServersBuilder::replicas`] asked for them).
    pub fn replicas(&self, i: usize) -> &[Node] {
        self.replicas.get(i).map_or(&[], Vec::as_slice)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a set of servers has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The ACL user and password, if the servers have one.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.acl.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// The node addresses.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(Node::addr).collect()
    }

    /// One URL per node (with the ACL user if any), as the servers listen:
    /// `redis://[user:pass@]127.0.0.1:PORT`, `rediss://…` or `redis+unix://[user:pass@]/…`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// A URL for `addr` (e.g. the test harness's fault proxy in front of a node) with this
    /// set's credentials.
    pub fn url_of(&self, addr: SocketAddr) -> String {
        make_url(addr, self.credentials())
    }

    /// `FLUSHALL` on every running, unpaused node.
    pub fn flushall(&self) {
        for node in self.live_nodes() {
            node.conn()
                .and_then(|mut c| c.flushall())
                .unwrap_or_else(|e| panic!("node {}: FLUSHALL: {e}", node.index()));
        }
    }

    /// `SCRIPT FLUSH` on every running, unpaused node.
    pub fn script_flush_all(&self) {
        for node in self.live_nodes() {
            node.script_flush();
        }
    }

    fn live_nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.is_running() && !n.is_paused())
    }

    /// The keys on every running, unpaused node, as `(node index, key, PTTL)`.
    pub fn all_keys(&self) -> Vec<(usize, String, i64)> {
        keys_with_ttl(self.live_nodes().map(|n| (n.index(), n)))
    }

    /// The lock keys (everything but fencing counters and the lock format key) on every
    /// running, unpaused node, as `(node index, key, PTTL)`.
    pub fn lock_keys(&self) -> Vec<(usize, String, i64)> {
        self.all_keys().into_iter().filter(|(_, k, _)| is_lock_key(k)).collect()
    }

    /// Assert that no lock key is left without a TTL on any running, unpaused node. Fencing
    /// counters (prefix `redlease:fence:`), the lock format key and the limits semaphores
    /// record (`redlease:sem:{NAME}:limit`) are meant to live forever and are skipped.
    ///
    /// # Panics
    ///
    /// Listing every key without a TTL.
    pub fn assert_no_leaks(&self) {
        assert_ttls(self.lock_keys(), "node");
    }
}
