//! N real `redis-server` processes on free loopback ports, each in its own temp dir.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::resp::RedisConn;
use crate::tempdir::TempDir;

/// The one line printed when `redis-server` cannot be found.
const NOT_FOUND: &str = "redis-server not found: install it with 'apt-get install redis-server' (Debian/Ubuntu)";

/// How long a starting server may take to answer `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The prefix of fencing counter keys (the core's default); they are allowed to have no TTL.
pub const FENCE_PREFIX: &str = "redlease:fence:";

/// Where and how one node runs, for [`ClusterBuilder::placements`]: the address it binds,
/// and optionally a command it is started through (e.g. `ip netns exec NAME`, which execs
/// `redis-server` in a network namespace, so the process id is still the server's) and extra
/// environment variables (e.g. `LD_PRELOAD`).
///
/// The default placement, used when none is given, is `127.0.0.1` on a free port, started
/// directly.
#[derive(Clone, Debug)]
pub struct Placement {
    ip: IpAddr,
    port: u16,
    prefix: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Placement {
    /// Bind `ip:port` (the address must exist where the server runs).
    pub fn new(ip: IpAddr, port: u16) -> Placement {
        Placement { ip, port, prefix: Vec::new(), env: Vec::new() }
    }

    /// Start the server as `PREFIX... redis-server redis.conf`; the prefix must exec the
    /// server (not fork it), so that pausing and killing reach the server itself.
    pub fn command_prefix<I, S>(mut self, prefix: I) -> Placement
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.prefix = prefix.into_iter().map(Into::into).collect();
        self
    }

    /// Set an environment variable for the server (and the prefix command).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Placement {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// How clients reach the nodes of a [`Cluster`] (what [`Cluster::urls`] gives). Every node
/// also keeps a plain TCP port for inspection ([`Node::conn`], [`Node::plain_url`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Listen {
    /// Plain TCP: `redis://127.0.0.1:PORT`.
    #[default]
    Tcp,
    /// TLS on a port of its own (`rediss://127.0.0.1:PORT`), with a generated CA
    /// ([`Cluster::tls`]); a client certificate is optional. Needs the `tls` feature.
    Tls,
    /// Like [`Tls`](Self::Tls), but the nodes require a client certificate (mutual TLS).
    TlsClientAuth,
    /// A Unix socket in the node's directory: `redis+unix:///…/redis.sock`.
    Unix,
}

impl Listen {
    fn is_tls(self) -> bool {
        matches!(self, Listen::Tls | Listen::TlsClientAuth)
    }
}

thread_local! {
    static DEFAULT_LISTEN: std::cell::Cell<Listen> = const { std::cell::Cell::new(Listen::Tcp) };
}

/// Run `f` with `listen` as the default of the clusters built on this thread
/// ([`Cluster::builder`], [`Cluster::start`]): how a test suite written against TCP runs
/// over TLS or Unix sockets unchanged.
pub fn with_listen<T>(listen: Listen, f: impl FnOnce() -> T) -> T {
    struct Restore(Listen);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEFAULT_LISTEN.with(|l| l.set(self.0));
        }
    }
    let _restore = Restore(DEFAULT_LISTEN.with(|l| l.replace(listen)));
    f()
}

/// Settings of a [`Cluster`]; start with [`Cluster::builder`].
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    nodes: usize,
    persist: bool,
    acl: Option<(String, String)>,
    base_port: Option<u16>,
    placements: Option<Vec<Placement>>,
    listen: Listen,
}

impl ClusterBuilder {
    /// How clients reach the nodes (default: TCP, or what [`with_listen`] set).
    pub fn listen(mut self, listen: Listen) -> Self {
        self.listen = listen;
        self
    }

    /// Put node `i` on port `base + i` instead of free ports chosen by the OS.
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
    pub fn start(self) -> Cluster {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`start`](Self::start), but a missing `redis-server` or a node that does not come
    /// up is an error message instead of a panic (for the `redlease` command). Nodes already
    /// started are stopped again.
    pub fn try_start(self) -> Result<Cluster, String> {
        if self.nodes == 0 {
            return Err("a cluster needs at least one node".to_owned());
        }
        installed()?;
        let tls = match self.listen.is_tls() {
            #[cfg(feature = "tls")]
            true => Some(std::sync::Arc::new(crate::tls::TlsFiles::generate()?)),
            #[cfg(not(feature = "tls"))]
            true => return Err("TLS nodes need the `tls` feature of redlease-cluster".to_owned()),
            false => None,
        };
        let mut nodes = Vec::with_capacity(self.nodes);
        for index in 0..self.nodes {
            let placement = match &self.placements {
                Some(p) => Some(p[index].clone()),
                None => {
                    let port = self.base_port.map(|b| b.checked_add(index as u16).ok_or("port past 65535".to_owned()));
                    port.transpose()?.map(|port| Placement::new(Ipv4Addr::LOCALHOST.into(), port))
                }
            };
            nodes.push(Node::start(index, placement, self.persist, self.acl.clone(), self.listen, tls.clone())?);
        }
        Ok(Cluster { nodes, acl: self.acl, tls })
    }
}

/// One clear line if `redis-server` cannot be run.
fn installed() -> Result<(), String> {
    match Command::new("redis-server").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(NOT_FOUND.to_owned()),
        Err(e) => Err(format!("redis-server cannot be run ({e}): install it with 'apt-get install redis-server'")),
    }
}

/// N independent `redis-server` processes (no replication between them), stopped on drop.
///
/// ```no_run
/// use redlease_cluster::Cluster;
///
/// let cluster = Cluster::builder().nodes(5).persist(true).start();
/// let urls = cluster.urls(); // redis://127.0.0.1:PORT, one per node
/// cluster.node(0).pause(); // SIGSTOP
/// cluster.node(0).resume(); // SIGCONT
/// cluster.node(1).restart(true); // kill -9, start again on the same port with its files
/// # let _ = urls;
/// ```
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<Node>,
    acl: Option<(String, String)>,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    tls: Option<TlsHandle>,
}

#[cfg(feature = "tls")]
type TlsHandle = std::sync::Arc<crate::tls::TlsFiles>;

/// The TLS ports of the running TLS nodes of this process, with their certificates.
#[cfg(feature = "tls")]
static TLS_NODES: Mutex<Vec<(u16, TlsHandle)>> = Mutex::new(Vec::new());

/// The certificates of the TLS node of this process listening on `port`, if there is one: how
/// a test suite that only sees URLs finds the CA to trust.
#[cfg(feature = "tls")]
pub fn tls_files_for(port: u16) -> Option<TlsHandle> {
    let nodes = TLS_NODES.lock().unwrap_or_else(|e| e.into_inner());
    nodes.iter().find(|(p, _)| *p == port).map(|(_, t)| std::sync::Arc::clone(t))
}

/// Without the `tls` feature no node has certificates: a handle that cannot exist (not `Copy`,
/// so the code that clones the real handle reads the same in both builds).
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
enum TlsHandle {}

impl Cluster {
    /// Start `n` nodes without persistence and without ACL users.
    pub fn start(n: usize) -> Cluster {
        Cluster::builder().nodes(n).start()
    }

    /// A builder with the defaults: 3 nodes, no persistence, no ACL user.
    pub fn builder() -> ClusterBuilder {
        let listen = DEFAULT_LISTEN.with(|l| l.get());
        ClusterBuilder { nodes: 3, persist: false, acl: None, base_port: None, placements: None, listen }
    }

    /// The CA and certificates of a TLS cluster ([`Listen::Tls`]).
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

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a cluster has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The ACL user and password, if the cluster has one.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.acl.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// The node addresses.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(Node::addr).collect()
    }

    /// One URL per node (with the ACL user if any), as the cluster listens:
    /// `redis://[user:pass@]127.0.0.1:PORT`, `rediss://…` or `redis+unix://[user:pass@]/…`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// A URL for `addr` (e.g. the test harness's fault proxy in front of a node) with this
    /// cluster's credentials.
    pub fn url_of(&self, addr: SocketAddr) -> String {
        make_url(addr, self.credentials())
    }

    /// `FLUSHALL` on every running, unpaused node.
    pub fn flushall(&self) {
        for node in self.live_nodes() {
            node.conn().and_then(|mut c| c.flushall()).unwrap_or_else(|e| panic!("node {}: FLUSHALL: {e}", node.index));
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
        let mut out = Vec::new();
        for node in self.live_nodes() {
            let mut conn = node.conn().unwrap_or_else(|e| panic!("node {}: connect: {e}", node.index));
            for key in conn.keys("*").unwrap_or_else(|e| panic!("node {}: SCAN: {e}", node.index)) {
                let pttl = conn.pttl(&key).unwrap_or_else(|e| panic!("node {}: PTTL: {e}", node.index));
                out.push((node.index, key, pttl));
            }
        }
        out
    }

    /// The lock keys (everything but fencing counters) on every running, unpaused node, as
    /// `(node index, key, PTTL)`.
    pub fn lock_keys(&self) -> Vec<(usize, String, i64)> {
        self.all_keys().into_iter().filter(|(_, k, _)| !k.starts_with(FENCE_PREFIX)).collect()
    }

    /// Assert that no lock key is left without a TTL on any running, unpaused node. Fencing
    /// counters (prefix `redlease:fence:`) are meant to live forever and are skipped.
    ///
    /// # Panics
    ///
    /// Listing every key without a TTL.
    pub fn assert_no_leaks(&self) {
        let leaks: Vec<_> = self.lock_keys().into_iter().filter(|(_, _, pttl)| *pttl == -1).collect();
        assert!(leaks.is_empty(), "lock keys left without a TTL (node, key, pttl): {leaks:?}");
    }
}

fn make_url(addr: SocketAddr, auth: Option<(&str, &str)>) -> String {
    match auth {
        Some((u, p)) => format!("redis://{u}:{p}@{addr}"),
        None => format!("redis://{addr}"),
    }
}

/// One `redis-server` process of a [`Cluster`], in its own temp dir, on a fixed port.
///
/// Methods take `&self` (the process handle sits behind a mutex), so a cluster can be shared
/// with the tasks of a test through an `Arc`.
#[derive(Debug)]
pub struct Node {
    index: usize,
    ip: IpAddr,
    port: u16,
    prefix: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    persist: bool,
    acl: Option<(String, String)>,
    listen: Listen,
    /// The TLS port, for TLS nodes.
    tls_port: u16,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    tls: Option<TlsHandle>,
    /// Holds `redis.conf`, `redis.log`, the `data/` directory and the Unix socket.
    dir: TempDir,
    state: Mutex<Proc>,
}

#[derive(Debug)]
struct Proc {
    child: Option<Child>,
    paused: bool,
}

impl Node {
    fn start(
        index: usize,
        placement: Option<Placement>,
        persist: bool,
        acl: Option<(String, String)>,
        listen: Listen,
        tls: Option<TlsHandle>,
    ) -> Result<Node, String> {
        let dir = TempDir::new("redlease-node").map_err(|e| format!("node {index}: cannot create a temp dir: {e}"))?;
        std::fs::create_dir(dir.path().join("data")).map_err(|e| format!("node {index}: mkdir data: {e}"))?;
        let mut node = Node {
            index,
            ip: Ipv4Addr::LOCALHOST.into(),
            port: 0,
            prefix: Vec::new(),
            env: Vec::new(),
            persist,
            acl,
            listen,
            tls_port: 0,
            tls,
            dir,
            state: Mutex::new(Proc { child: None, paused: false }),
        };
        if let Some(Placement { ip, port, prefix, env }) = placement {
            (node.ip, node.port, node.prefix, node.env) = (ip, port, prefix, env);
            return match node.spawn_and_wait() {
                Ok(()) => Ok(node),
                Err(e) => Err(format!("node {index} on {}: redis-server did not start: {e}", node.addr())),
            };
        }
        // A port the OS called free may be taken by someone else before redis binds it: retry.
        let mut last = String::new();
        for _ in 0..10 {
            node.port = free_port();
            if listen.is_tls() {
                node.tls_port = free_port();
            }
            match node.spawn_and_wait() {
                Ok(()) => {
                    #[cfg(feature = "tls")]
                    if let Some(tls) = &node.tls {
                        TLS_NODES
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((node.tls_port, std::sync::Arc::clone(tls)));
                    }
                    return Ok(node);
                }
                Err(e) if e.contains("Address already in use") => last = e,
                Err(e) => return Err(format!("node {index}: redis-server did not start: {e}")),
            }
        }
        Err(format!("node {index}: redis-server did not start: {last}"))
    }

    /// Index in the cluster.
    pub fn index(&self) -> usize {
        self.index
    }

    /// TCP port (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`, or the address of the node's [`Placement`].
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.port))
    }

    /// The node's URL as its cluster listens ([`Listen`]): `redis://[user:pass@]HOST:PORT`,
    /// `rediss://[user:pass@]127.0.0.1:TLS_PORT` or `redis+unix://[user:pass@]/…/redis.sock`.
    pub fn url(&self) -> String {
        match self.listen {
            Listen::Tcp => self.plain_url(),
            Listen::Tls | Listen::TlsClientAuth => self.tls_url(),
            Listen::Unix => self.unix_url(),
        }
    }

    /// `redis://[user:pass@]HOST:PORT`: the plain TCP port every node has.
    pub fn plain_url(&self) -> String {
        make_url(self.addr(), self.credentials())
    }

    /// `rediss://[user:pass@]127.0.0.1:TLS_PORT` (meaningful for TLS nodes only).
    pub fn tls_url(&self) -> String {
        format!("rediss{}", &make_url(self.tls_addr(), self.credentials())["redis".len()..])
    }

    /// The TLS port's address (TLS nodes only).
    pub fn tls_addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.tls_port))
    }

    /// The Unix socket's path (every node has one).
    pub fn socket_path(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// `redis+unix://[user:pass@]/…/redis.sock`.
    pub fn unix_url(&self) -> String {
        let creds = self.credentials().map(|(u, p)| format!("{u}:{p}@")).unwrap_or_default();
        format!("redis+unix://{creds}{}", self.socket_path().display())
    }

    fn credentials(&self) -> Option<(&str, &str)> {
        self.acl.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// The process id, while the process runs.
    pub fn pid(&self) -> Option<u32> {
        self.proc().child.as_ref().map(Child::id)
    }

    /// Whether the process runs (it may be paused).
    pub fn is_running(&self) -> bool {
        let mut p = self.proc();
        match p.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(_) => {
                // It exited on its own: reap it.
                p.child = None;
                p.paused = false;
                false
            }
            None => false,
        }
    }

    /// Whether the process is stopped by [`pause`](Self::pause).
    pub fn is_paused(&self) -> bool {
        self.proc().paused
    }

    /// A fresh authenticated connection for assertions.
    pub fn conn(&self) -> io::Result<RedisConn> {
        RedisConn::connect(self.addr(), self.credentials())
    }

    /// Stop the process with SIGSTOP: connections stay open, nothing is answered.
    ///
    /// Returns once the kernel reports the process stopped.
    ///
    /// # Panics
    ///
    /// If the node is not running.
    pub fn pause(&self) {
        let mut p = self.proc();
        let pid = p.child.as_ref().map(Child::id).unwrap_or_else(|| panic!("node {}: pause: not running", self.index));
        signal(pid, libc::SIGSTOP).unwrap_or_else(|e| panic!("node {}: SIGSTOP: {e}", self.index));
        wait_for_state(pid, |s| s == 'T' || s == 't');
        p.paused = true;
    }

    /// Continue a paused process with SIGCONT.
    ///
    /// # Panics
    ///
    /// If the node is not running.
    pub fn resume(&self) {
        let mut p = self.proc();
        let pid = p.child.as_ref().map(Child::id).unwrap_or_else(|| panic!("node {}: resume: not running", self.index));
        signal(pid, libc::SIGCONT).unwrap_or_else(|e| panic!("node {}: SIGCONT: {e}", self.index));
        wait_for_state(pid, |s| s != 'T' && s != 't');
        p.paused = false;
    }

    /// Kill the process with SIGKILL (a crash: nothing is flushed) and reap it. A node that is
    /// not running is left alone.
    pub fn kill(&self) {
        let mut p = self.proc();
        if let Some(mut child) = p.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        p.paused = false;
    }

    /// Kill the process (if running) and start it again on the same port.
    ///
    /// With `keep_data` the data directory is kept, so a node started with
    /// [`persist(true)`](ClusterBuilder::persist) comes back with every acknowledged write;
    /// without persistence there is nothing on disk and the node comes back empty either way.
    /// Without `keep_data` the data directory is emptied first.
    ///
    /// # Panics
    ///
    /// If the server does not come back (with the tail of its log).
    pub fn restart(&self, keep_data: bool) {
        self.kill();
        if !keep_data {
            let data = self.dir.path().join("data");
            let _ = std::fs::remove_dir_all(&data);
            std::fs::create_dir(&data).unwrap_or_else(|e| panic!("node {}: mkdir data: {e}", self.index));
        }
        self.spawn_and_wait().unwrap_or_else(|e| panic!("node {}: restart failed: {e}", self.index));
    }

    /// `SCRIPT FLUSH`: the server forgets every cached script.
    ///
    /// # Panics
    ///
    /// If the node cannot be reached.
    pub fn script_flush(&self) {
        self.conn()
            .and_then(|mut c| c.script_flush())
            .unwrap_or_else(|e| panic!("node {}: SCRIPT FLUSH: {e}", self.index));
    }

    /// The last `lines` lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    fn proc(&self) -> MutexGuard<'_, Proc> {
        // A panic while holding the lock leaves a usable state behind: ignore poisoning.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write_config(&self) -> io::Result<PathBuf> {
        let mut conf = String::new();
        let dir = self.dir.path();
        let _ = writeln!(conf, "port {}", self.port);
        let _ = writeln!(conf, "bind {}", self.ip);
        if !self.ip.is_loopback() {
            // Protected mode refuses clients from other addresses when no password is set; a
            // placement elsewhere (a private namespace) is meant to be reached that way.
            let _ = writeln!(conf, "protected-mode no");
        }
        let _ = writeln!(conf, "daemonize no");
        let _ = writeln!(conf, "dir {}", dir.join("data").display());
        let _ = writeln!(conf, "logfile {}", self.log_path().display());
        let _ = writeln!(conf, "save \"\"");
        if self.persist {
            let _ = writeln!(conf, "appendonly yes");
            let _ = writeln!(conf, "appendfsync always");
        } else {
            let _ = writeln!(conf, "appendonly no");
        }
        let _ = writeln!(conf, "unixsocket {}", self.socket_path().display());
        let _ = writeln!(conf, "unixsocketperm 700");
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let _ = writeln!(conf, "tls-port {}", self.tls_port);
            let _ = writeln!(conf, "tls-cert-file {}", tls.server_cert.display());
            let _ = writeln!(conf, "tls-key-file {}", tls.server_key.display());
            let _ = writeln!(conf, "tls-ca-cert-file {}", tls.ca.display());
            let auth = if self.listen == Listen::TlsClientAuth { "yes" } else { "optional" };
            let _ = writeln!(conf, "tls-auth-clients {auth}");
        }
        if let Some((user, pass)) = &self.acl {
            let _ = writeln!(conf, "user default off");
            let _ = writeln!(conf, "user {user} on >{pass} ~* &* +@all");
        }
        let path = dir.join("redis.conf");
        std::fs::write(&path, conf)?;
        Ok(path)
    }

    /// Start the process and wait until it answers `PING`. On failure the process is reaped and
    /// the error carries the tail of its log.
    fn spawn_and_wait(&self) -> Result<(), String> {
        let conf = self.write_config().map_err(|e| format!("cannot write redis.conf: {e}"))?;
        let mut command = match self.prefix.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg("redis-server");
                c
            }
            None => Command::new("redis-server"),
        };
        let child = command
            .arg(&conf)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| match (e.kind(), self.prefix.first()) {
                (io::ErrorKind::NotFound, None) => NOT_FOUND.to_owned(),
                (_, Some(program)) => format!("cannot run {}: {e}", program.to_string_lossy()),
                _ => e.to_string(),
            })?;
        {
            let mut p = self.proc();
            p.child = Some(child);
            p.paused = false;
        }
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if !self.is_running() {
                return Err(format!("redis-server exited at start; log:\n{}", self.log_tail(10)));
            }
            if let Ok(mut conn) = self.conn() {
                if conn.ping().unwrap_or(false) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!("no PING answer within {START_TIMEOUT:?}; log:\n{}", self.log_tail(10)));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        #[cfg(feature = "tls")]
        if self.tls.is_some() {
            TLS_NODES.lock().unwrap_or_else(|e| e.into_inner()).retain(|(p, _)| *p != self.tls_port);
        }
        // SIGKILL also ends a stopped process; then reap it so no zombie is left.
        self.kill();
    }
}

/// A port the OS considers free right now on 127.0.0.1.
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

/// Send `sig` to a process this harness started.
#[allow(unsafe_code)]
fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: kill(2) has no memory-safety preconditions; `pid` is a child we spawned and have
    // not reaped yet (the caller holds its `Child`), so it cannot name another process.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Wait (up to 2 s) until `/proc/PID/stat` shows a state accepted by `ok`. Without `/proc`
/// (not Linux), return at once: signals to a child are delivered promptly anyway.
fn wait_for_state(pid: u32, ok: impl Fn(char) -> bool) {
    let path = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let Ok(stat) = std::fs::read_to_string(&path) else { return };
        // Format: "pid (comm) S ..." — comm may contain spaces, so look after the last ')'.
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        match state {
            Some(s) if ok(s) => return,
            Some(_) => std::thread::sleep(Duration::from_millis(1)),
            None => return,
        }
    }
}
