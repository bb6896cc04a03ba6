//! Sentinel-managed nodes: [`SentinelNodesBuilder`] starts, per node, a primary with replicas
//! (`redis-server` processes on free loopback ports), and a group of `redis-server
//! --sentinel` processes that watch every node's primary as a service of its own
//! (`redlease-0`, `redlease-1`, …); [`SentinelNodes`] holds them, drives failovers, and stops
//! every process on drop. With TLS ([`SentinelNodesBuilder::tls`]) the sentinels and the data
//! nodes listen on TLS ports too, replicate and watch each other over TLS, and name the TLS
//! ports: the URLs are `rediss+sentinel://`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Child;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::conf::TlsHandle;
use crate::conn::{RedisConn, Reply};
use crate::node::Node;
use crate::placement::Listen;
use crate::process;
use crate::servers::{assert_ttls, is_lock_key, keys_with_ttl};
use crate::tempdir::TempDir;

/// How long the sentinels may take to come up and know each other and every replica.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a failover may take to be agreed on by every sentinel (and the sentinels to make an
/// old primary a replica: they look at a replica's role every 10 s).
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// Settings of a [`SentinelNodes`]; start with [`SentinelNodes::builder`].
#[derive(Clone, Debug)]
pub struct SentinelNodesBuilder {
    nodes: usize,
    replicas: usize,
    sentinels: usize,
    down_after: Duration,
    failover_timeout: Duration,
    persist: bool,
    tls: bool,
    base_port: Option<u16>,
}

impl SentinelNodesBuilder {
    /// Number of Sentinel-managed nodes, each a primary with its replicas (default 3).
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    /// Replicas of each primary (default 1, at least 1: a failover promotes one).
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n;
        self
    }

    /// Sentinels watching every node (default 3); their quorum is a majority of them.
    pub fn sentinels(mut self, n: usize) -> Self {
        self.sentinels = n;
        self
    }

    /// How long a primary must be unreachable before the sentinels call it down
    /// (`sentinel down-after-milliseconds`, default 1 s; kept small so failovers are quick).
    pub fn down_after(mut self, d: Duration) -> Self {
        self.down_after = d;
        self
    }

    /// `sentinel failover-timeout` (default 3 s).
    pub fn failover_timeout(mut self, d: Duration) -> Self {
        self.failover_timeout = d;
        self
    }

    /// Run every data node with `appendonly yes` + `appendfsync always`.
    pub fn persist(mut self, on: bool) -> Self {
        self.persist = on;
        self
    }

    /// Listen with TLS too (a generated CA; `SentinelNodes::tls` gives its files): the
    /// sentinels and the data nodes on TLS ports, replication and the sentinels' own
    /// connections over TLS, and `rediss+sentinel://` URLs naming the sentinels' TLS ports.
    /// Needs the `tls` feature.
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Put the primaries on `base`, `base + 1`, …, then the replicas node by node, then the
    /// sentinels, instead of free ports chosen by the OS.
    pub fn base_port(mut self, base: u16) -> Self {
        self.base_port = Some(base);
        self
    }

    /// Start the nodes and the sentinels, and wait until every sentinel names every node's
    /// primary and knows its replicas and the other sentinels.
    ///
    /// # Panics
    ///
    /// If something does not come up (with the reason).
    pub fn start(self) -> SentinelNodes {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`start`](Self::start), with an error message instead of a panic; whatever was
    /// started is stopped again.
    pub fn try_start(self) -> Result<SentinelNodes, String> {
        if self.nodes == 0 || self.replicas == 0 || self.sentinels == 0 {
            return Err("Sentinel-managed nodes need at least one node, one replica each and one sentinel".to_owned());
        }
        process::installed()?;
        let tls = crate::conf::tls_files(self.tls)?;
        let listen = if tls.is_some() { Listen::Tls } else { Listen::Tcp };
        let port = |offset: usize| crate::Placement::local(self.base_port, offset);
        let mut data = Vec::with_capacity(self.nodes);
        for i in 0..self.nodes {
            let primary = Node::start(i, port(i)?, self.persist, None, listen, false, tls.clone())?;
            data.push(vec![primary]);
        }
        for (i, group) in data.iter_mut().enumerate() {
            for j in 0..self.replicas {
                let placement = port(self.nodes + i * self.replicas + j)?;
                let replica = Node::start(i, placement, self.persist, None, listen, false, tls.clone())?;
                if tls.is_some() {
                    // Replicas connect to the primary's TLS port, and announce their own.
                    let mut conn = replica.conn().map_err(|e| format!("node {i}: {e}"))?;
                    conn.checked(&["CONFIG", "SET", "tls-replication", "yes"]).map_err(|e| format!("node {i}: {e}"))?;
                }
                replica.replicate_over(&group[0], tls.is_some())?;
                group.push(replica);
            }
            for node in group.iter() {
                // A replica promoted later syncs its own replicas at once, too; with TLS, a
                // primary made a replica connects to the new one's TLS port.
                let mut conn = node.conn().map_err(|e| format!("node {i}: {e}"))?;
                conn.checked(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"])
                    .map_err(|e| format!("node {i}: {e}"))?;
                if tls.is_some() {
                    conn.checked(&["CONFIG", "SET", "tls-replication", "yes"]).map_err(|e| format!("node {i}: {e}"))?;
                }
            }
        }
        let services: Vec<String> = (0..self.nodes).map(|i| format!("redlease-{i}")).collect();
        let primaries: Vec<SocketAddr> = data.iter().map(|g| g[0].client_addr()).collect();
        let quorum = self.sentinels / 2 + 1;
        let mut sentinels = Vec::with_capacity(self.sentinels);
        for k in 0..self.sentinels {
            let fixed = port(self.nodes * (1 + self.replicas) + k)?.map(|p| p.port);
            let conf = SentinelConf {
                services: &services,
                primaries: &primaries,
                quorum,
                down_after: self.down_after,
                failover_timeout: self.failover_timeout,
                tls: tls.as_ref(),
            };
            sentinels.push(Sentinel::start(k, fixed, &conf)?);
        }
        let set = SentinelNodes { data, sentinels, services, tls };
        set.settle(self.replicas)?;
        Ok(set)
    }
}

/// Nodes that are each a primary with replicas, watched by a group of sentinels, stopped on
/// drop.
///
/// ```no_run
/// use redlease_servers::SentinelNodes;
///
/// let set = SentinelNodes::builder().nodes(3).replicas(1).start();
/// let urls = set.urls(); // redis+sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/redlease-0 ...
/// set.failover(0); // SENTINEL FAILOVER redlease-0, until every sentinel names the new primary
/// # let _ = urls;
/// ```
#[derive(Debug)]
pub struct SentinelNodes {
    /// Each node's data nodes: its first primary, then its replicas (which of them is the
    /// primary now is the sentinels' to say, [`SentinelNodes::primary`]).
    data: Vec<Vec<Node>>,
    sentinels: Vec<Sentinel>,
    services: Vec<String>,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    tls: Option<TlsHandle>,
}

impl SentinelNodes {
    /// A builder with the defaults: 3 nodes of 1 primary and 1 replica, 3 sentinels,
    /// `down-after-milliseconds` 1000, `failover-timeout` 3000, no persistence.
    pub fn builder() -> SentinelNodesBuilder {
        SentinelNodesBuilder {
            nodes: 3,
            replicas: 1,
            sentinels: 3,
            down_after: Duration::from_secs(1),
            failover_timeout: Duration::from_secs(3),
            persist: false,
            tls: false,
            base_port: None,
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Always false: a set has at least one node.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The service name of node `i` (`redlease-i`).
    pub fn service(&self, i: usize) -> &str {
        &self.services[i]
    }

    /// The sentinels.
    pub fn sentinels(&self) -> &[Sentinel] {
        &self.sentinels
    }

    /// The data nodes of node `i`: the primary it started with, then its replicas.
    pub fn data_nodes(&self, i: usize) -> &[Node] {
        &self.data[i]
    }

    /// The URL of node `i`: `redis+sentinel://127.0.0.1:P1,…/redlease-i`, or with TLS
    /// `rediss+sentinel://` and the sentinels' TLS ports.
    pub fn url(&self, i: usize) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(|s| s.client_addr().to_string()).collect();
        let scheme = if self.tls.is_some() { "rediss" } else { "redis" };
        format!("{scheme}+sentinel://{}/{}", hosts.join(","), self.services[i])
    }

    /// The CA and certificates of TLS sentinels and data nodes ([`SentinelNodesBuilder::tls`]).
    #[cfg(feature = "tls")]
    pub fn tls(&self) -> Option<&crate::tls::TlsFiles> {
        self.tls.as_deref()
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.url(i)).collect()
    }

    /// The primary the first sentinel that answers names for node `i` (with TLS, its TLS
    /// port); `None` if none does.
    pub fn primary_addr(&self, i: usize) -> Option<SocketAddr> {
        self.sentinels.iter().find_map(|s| s.master_addr(&self.services[i]).ok().flatten())
    }

    /// The data node of node `i` that the sentinels name as its primary.
    ///
    /// # Panics
    ///
    /// If no sentinel answers, or it names none of the node's data nodes.
    pub fn primary(&self, i: usize) -> &Node {
        let addr = self.primary_addr(i).unwrap_or_else(|| panic!("node {i}: no sentinel names its primary"));
        self.data[i]
            .iter()
            .find(|n| n.client_addr() == addr)
            .unwrap_or_else(|| panic!("node {i}: the primary {addr} is unknown"))
    }

    /// Fail node `i`'s primary over (`SENTINEL FAILOVER`, retried while the sentinels are not
    /// ready for it), and wait until every sentinel names the new primary and it answers
    /// `ROLE` as a master. Returns the new primary's address (as the sentinels name it).
    ///
    /// # Panics
    ///
    /// If that does not happen within 60 s.
    pub fn failover(&self, i: usize) -> SocketAddr {
        let old = self.primary(i).client_addr();
        let service = &self.services[i];
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        loop {
            let reply = self.sentinels.iter().find_map(|s| s.conn().ok()?.cmd(&["SENTINEL", "FAILOVER", service]).ok());
            match reply {
                Some(Reply::Simple(_)) => break,
                // INPROG, NOGOODSLAVE: the sentinels are not ready for it yet.
                other => assert!(Instant::now() < deadline, "node {i}: SENTINEL FAILOVER: {other:?}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.wait_for_new_primary(i, old)
    }

    /// Kill node `i`'s primary with SIGKILL, and wait until every sentinel names another data
    /// node as primary and it answers `ROLE` as a master. Returns the killed node (restart it
    /// with [`restart_as_replica`](Self::restart_as_replica), or with [`Node::restart`] and let
    /// the sentinels make it a replica of the new primary) and the new primary's address.
    ///
    /// # Panics
    ///
    /// If that does not happen within 60 s.
    pub fn kill_primary(&self, i: usize) -> (&Node, SocketAddr) {
        let old = self.primary(i);
        old.kill();
        let new = self.wait_for_new_primary(i, old.client_addr());
        (old, new)
    }

    /// After the primary `old` of node `i` was killed (or stopped) by the caller: wait until
    /// every sentinel names another data node as primary and it answers `ROLE` as a master;
    /// its address.
    ///
    /// # Panics
    ///
    /// If that does not happen within 60 s.
    pub fn failover_after_kill(&self, i: usize, old: SocketAddr) -> SocketAddr {
        self.wait_for_new_primary(i, old)
    }

    /// Wait until every sentinel names a primary of node `i` other than `old`, that answers
    /// `ROLE` as a master.
    fn wait_for_new_primary(&self, i: usize, old: SocketAddr) -> SocketAddr {
        let service = &self.services[i];
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        loop {
            let named: Vec<Option<SocketAddr>> =
                self.sentinels.iter().map(|s| s.master_addr(service).ok().flatten()).collect();
            if let Some(Some(new)) = named.first().copied() {
                let agreed = new != old && named.iter().all(|n| *n == Some(new));
                let master =
                    self.data[i].iter().find(|n| n.client_addr() == new).is_some_and(|n| role_of(n) == "master");
                if agreed && master {
                    return new;
                }
            }
            assert!(
                Instant::now() < deadline,
                "node {i}: no new primary agreed on within {FAILOVER_TIMEOUT:?}: {named:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Start `node`, a data node of node `i` that was killed, again (without its data) as a
    /// replica of the primary the sentinels name now, as the sentinels would make it in a
    /// while; returns once the primary counts it online.
    ///
    /// # Panics
    ///
    /// If it does not come back, or not as that replica.
    pub fn restart_as_replica(&self, i: usize, node: &Node) {
        node.restart(false);
        let primary = self.primary(i);
        // The sentinels may reconfigure it at the same time (and close our connection as they
        // do): the same REPLICAOF again is harmless.
        let mut last = String::new();
        for _ in 0..10 {
            match node.replicate(primary) {
                Ok(()) => return,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("node {i}: {last}");
    }

    /// Wait until every data node of node `i` that runs is the primary's replica with its
    /// link up (after a failover, the sentinels reconfigure the old primary).
    ///
    /// # Panics
    ///
    /// If that does not happen within 60 s.
    pub fn wait_for_replicas(&self, i: usize) {
        let primary = self.primary(i).client_addr();
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        for node in self.data[i].iter().filter(|n| n.client_addr() != primary && n.is_running()) {
            loop {
                let info = node
                    .conn()
                    .and_then(|mut c| c.checked(&["INFO", "replication"]))
                    .ok()
                    .and_then(|r| r.as_text())
                    .unwrap_or_default();
                let of_primary = info.contains(&format!("master_port:{}", primary.port()));
                // And the primary counts it online (for `ROLE` and `WAIT`).
                let primary_info = self.data[i]
                    .iter()
                    .find(|n| n.client_addr() == primary)
                    .and_then(|n| n.conn().and_then(|mut c| c.checked(&["INFO", "replication"])).ok())
                    .and_then(|r| r.as_text())
                    .unwrap_or_default();
                let port = format!("port={},", node.client_addr().port());
                let online = primary_info.lines().any(|l| l.contains(&port) && l.contains("state=online"));
                if of_primary && info.contains("master_link_status:up") && online {
                    break;
                }
                assert!(Instant::now() < deadline, "node {i}: {} did not become a replica of {primary}", node.addr());
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// The lock keys (as [`Servers::lock_keys`](crate::Servers::lock_keys)) on every node's
    /// primary, as `(node, key, PTTL)`.
    pub fn lock_keys(&self) -> Vec<(usize, String, i64)> {
        let primaries = (0..self.len()).map(|i| (i, self.primary(i)));
        keys_with_ttl(primaries).into_iter().filter(|(_, k, _)| is_lock_key(k)).collect()
    }

    /// Assert that no lock key is left without a TTL on any node's primary.
    ///
    /// # Panics
    ///
    /// Listing every key without a TTL.
    pub fn assert_no_leaks(&self) {
        assert_ttls(self.lock_keys(), "node");
    }

    /// Wait until every sentinel names every node's primary and knows its replicas and the
    /// other sentinels (sentinels find each other through the primaries, every 2 s).
    fn settle(&self, replicas: usize) -> Result<(), String> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        for s in &self.sentinels {
            for (i, service) in self.services.iter().enumerate() {
                loop {
                    let ready = s.knows(service, self.data[i][0].client_addr(), replicas, self.sentinels.len() - 1);
                    match ready {
                        Ok(true) => break,
                        _ if Instant::now() > deadline => {
                            return Err(format!(
                                "sentinel {}: does not know {service} whole within {SETTLE_TIMEOUT:?} ({ready:?}); \
                                 log:\n{}",
                                s.index,
                                s.log_tail(10)
                            ));
                        }
                        _ => std::thread::sleep(Duration::from_millis(50)),
                    }
                }
            }
        }
        Ok(())
    }
}

/// The role a data node answers `ROLE` with (`master`, `slave`), or empty if it does not.
fn role_of(node: &Node) -> String {
    match node.conn().and_then(|mut c| c.checked(&["ROLE"])) {
        Ok(Reply::Array(Some(parts))) => parts.first().and_then(Reply::as_text).unwrap_or_default(),
        _ => String::new(),
    }
}

/// What a sentinel's configuration file says.
struct SentinelConf<'a> {
    services: &'a [String],
    primaries: &'a [SocketAddr],
    quorum: usize,
    down_after: Duration,
    failover_timeout: Duration,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    tls: Option<&'a TlsHandle>,
}

/// One `redis-server --sentinel` process, in its own temp dir, on a fixed port (with TLS, a
/// TLS port too).
#[derive(Debug)]
pub struct Sentinel {
    index: usize,
    port: u16,
    /// The TLS port (0: none).
    tls_port: u16,
    dir: TempDir,
    child: Mutex<Option<Child>>,
}

impl Sentinel {
    /// Start sentinel `index` (on `port`, else a free one) watching what `conf` says, and wait
    /// until it answers `PING`.
    fn start(index: usize, fixed: Option<u16>, conf: &SentinelConf<'_>) -> Result<Sentinel, String> {
        let mut last = String::new();
        for _ in 0..10 {
            let dir = TempDir::new("redlease-sentinel").map_err(|e| format!("sentinel {index}: temp dir: {e}"))?;
            // With TLS, a fixed port is the TLS port (the one clients use), as for data nodes.
            let (port, tls_port) = match (fixed, conf.tls.is_some()) {
                (Some(p), true) => (process::free_port(), p),
                (Some(p), false) => (p, 0),
                (None, true) => (process::free_port(), process::free_port()),
                (None, false) => (process::free_port(), 0),
            };
            let sentinel = Sentinel { index, port, tls_port, dir, child: Mutex::new(None) };
            match sentinel.spawn_and_wait(conf) {
                Ok(()) => {
                    #[cfg(feature = "tls")]
                    if let Some(tls) = conf.tls {
                        crate::tls::register(tls_port, tls);
                    }
                    return Ok(sentinel);
                }
                // Only a port chosen here is worth another try.
                Err(e) if e.contains("Address already in use") && (fixed.is_none() || conf.tls.is_some()) => last = e,
                Err(e) => return Err(format!("sentinel {index} on port {port}: did not start: {e}")),
            }
        }
        Err(format!("sentinel {index}: did not start: {last}"))
    }

    /// Index among the sentinels.
    pub fn index(&self) -> usize {
        self.index
    }

    /// `127.0.0.1:PORT`: the plain port, which every sentinel has.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The address clients use: the TLS port's with TLS, else [`addr`](Self::addr).
    pub fn client_addr(&self) -> SocketAddr {
        match self.tls_port {
            0 => self.addr(),
            tls => SocketAddr::from((Ipv4Addr::LOCALHOST, tls)),
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.proc().as_ref().map(Child::id)
    }

    /// A fresh connection to the sentinel.
    pub fn conn(&self) -> std::io::Result<RedisConn> {
        RedisConn::connect(self.addr(), None)
    }

    /// `SENTINEL get-master-addr-by-name service`: the address it names (`None`: it knows no
    /// such service).
    pub fn master_addr(&self, service: &str) -> std::io::Result<Option<SocketAddr>> {
        let reply = self.conn()?.checked(&["SENTINEL", "get-master-addr-by-name", service])?;
        let Reply::Array(Some(parts)) = reply else { return Ok(None) };
        let text: Vec<String> = parts.iter().filter_map(Reply::as_text).collect();
        let addr = match text.as_slice() {
            [ip, port] => format!("{ip}:{port}").parse().ok(),
            _ => None,
        };
        Ok(addr)
    }

    /// Kill the process with SIGKILL and reap it.
    pub fn kill(&self) {
        if let Some(mut child) = self.proc().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether it names `primary` for `service`, with at least `replicas` replicas and `others`
    /// other sentinels known.
    fn knows(&self, service: &str, primary: SocketAddr, replicas: usize, others: usize) -> std::io::Result<bool> {
        if self.master_addr(service)? != Some(primary) {
            return Ok(false);
        }
        let mut conn = self.conn()?;
        let count = |reply: Reply| match reply {
            Reply::Array(Some(list)) => list.len(),
            _ => 0,
        };
        let known_replicas = count(conn.checked(&["SENTINEL", "replicas", service])?);
        let known_sentinels = count(conn.checked(&["SENTINEL", "sentinels", service])?);
        Ok(known_replicas >= replicas && known_sentinels >= others)
    }

    fn conf_path(&self) -> PathBuf {
        self.dir.path().join("sentinel.conf")
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn proc(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Write the configuration (the sentinel rewrites it as it learns), start the process and
    /// wait until it answers `PING` as this process.
    fn spawn_and_wait(&self, conf: &SentinelConf<'_>) -> Result<(), String> {
        use std::fmt::Write as _;
        let mut text = String::new();
        let _ = writeln!(text, "port {}", self.port);
        let _ = writeln!(text, "bind 127.0.0.1");
        let _ = writeln!(text, "daemonize no");
        let _ = writeln!(text, "dir {}", self.dir.path().display());
        let _ = writeln!(text, "logfile {}", self.dir.path().join("sentinel.log").display());
        #[cfg(feature = "tls")]
        if let Some(tls) = conf.tls {
            // The sentinel's connections to the data nodes and to the other sentinels are TLS.
            let _ = writeln!(text, "tls-port {}", self.tls_port);
            let _ = writeln!(text, "tls-cert-file {}", tls.server_cert.display());
            let _ = writeln!(text, "tls-key-file {}", tls.server_key.display());
            let _ = writeln!(text, "tls-ca-cert-file {}", tls.ca.display());
            let _ = writeln!(text, "tls-auth-clients no");
            let _ = writeln!(text, "tls-replication yes");
        }
        for (service, primary) in conf.services.iter().zip(conf.primaries) {
            let _ = writeln!(text, "sentinel monitor {service} {} {} {}", primary.ip(), primary.port(), conf.quorum);
            let _ = writeln!(text, "sentinel down-after-milliseconds {service} {}", conf.down_after.as_millis());
            let _ = writeln!(text, "sentinel failover-timeout {service} {}", conf.failover_timeout.as_millis());
            let _ = writeln!(text, "sentinel parallel-syncs {service} 1");
        }
        std::fs::write(self.conf_path(), text).map_err(|e| format!("cannot write sentinel.conf: {e}"))?;
        let child = process::spawn_sentinel(&self.conf_path())?;
        let pid = child.id();
        *self.proc() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let exited = self.proc().as_mut().map(Child::try_wait);
            if !matches!(exited, Some(Ok(None))) {
                self.kill();
                return Err(format!("redis-server --sentinel exited at start; log:\n{}", self.log_tail(10)));
            }
            if let Ok(mut conn) = self.conn() {
                let info = conn.cmd(&["INFO", "server"]).ok().and_then(|r| r.as_text()).unwrap_or_default();
                if info.lines().any(|l| l.trim() == format!("process_id:{pid}")) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!("no answer within 10 s; log:\n{}", self.log_tail(10)));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.kill();
        #[cfg(feature = "tls")]
        if self.tls_port != 0 {
            crate::tls::unregister(self.tls_port);
        }
    }
}
