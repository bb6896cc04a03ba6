//! One `redis-server` process: started in its own temporary directory, paused, resumed, killed
//! and restarted, and how clients reach it.

use std::ffi::OsString;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Child;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::conf::{self, RedisConf, TlsHandle};
use crate::conn::RedisConn;
use crate::placement::{Listen, Placement};
use crate::process;
use crate::tempdir::TempDir;

/// How long a starting server may take to answer `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// One `redis-server` process of a [`Servers`](crate::Servers) or a
/// [`RedisCluster`](crate::RedisCluster), in its own temp dir, on a fixed port.
///
/// Methods take `&self` (the process handle sits behind a mutex), so a set of servers can be
/// shared with the tasks of a test through an `Arc`.
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
    /// A Redis Cluster node (`cluster-enabled yes`).
    cluster: bool,
    /// The TLS port, for TLS nodes.
    tls_port: u16,
    tls: Option<TlsHandle>,
    /// Holds `redis.conf`, `redis.log`, the `data/` directory and the Unix socket.
    dir: TempDir,
    state: Mutex<Proc>,
}

/// The process, once started, and whether it is stopped by SIGSTOP.
#[derive(Debug)]
struct Proc {
    child: Option<Child>,
    paused: bool,
}

impl Node {
    /// Start node `index` and wait until it answers `PING`: at its placement if it has one,
    /// else on free loopback ports. A `cluster` node (`cluster-enabled yes`) gets a port whose
    /// port + 10000, its cluster bus, is free too.
    pub(crate) fn start(
        index: usize,
        placement: Option<Placement>,
        persist: bool,
        acl: Option<(String, String)>,
        listen: Listen,
        cluster: bool,
        tls: Option<TlsHandle>,
    ) -> Result<Node, String> {
        let dir = TempDir::new("redlease-node").map_err(|e| format!("node {index}: cannot create a temp dir: {e}"))?;
        std::fs::create_dir(conf::data_dir(dir.path())).map_err(|e| format!("node {index}: mkdir data: {e}"))?;
        let mut node = Node {
            index,
            ip: Ipv4Addr::LOCALHOST.into(),
            port: 0,
            prefix: Vec::new(),
            env: Vec::new(),
            persist,
            acl,
            listen,
            cluster,
            tls_port: 0,
            tls,
            dir,
            state: Mutex::new(Proc { child: None, paused: false }),
        };
        // The port clients reach: the placement's (a TLS node's TLS port; its plain port, for
        // inspection, is then a free one), or free ports.
        let fixed = placement.map(|Placement { ip, port, prefix, env }| {
            (node.ip, node.prefix, node.env) = (ip, prefix, env);
            port
        });
        // A port the OS called free may be taken by someone else before redis binds it: retry.
        let mut last = String::new();
        for _ in 0..10 {
            (node.port, node.tls_port) = match fixed {
                Some(port) if listen.is_tls() => (process::free_port(), port),
                Some(port) => (port, 0),
                None if cluster => (process::free_cluster_port().map_err(|e| format!("node {index}: {e}"))?, 0),
                None => (process::free_port(), 0),
            };
            if fixed.is_none() && listen.is_tls() {
                node.tls_port = process::free_port();
            }
            match node.spawn_and_wait() {
                Ok(()) => {
                    #[cfg(feature = "tls")]
                    if let Some(tls) = &node.tls {
                        crate::tls::register(node.tls_port, tls);
                    }
                    return Ok(node);
                }
                // Only a port chosen here is worth another try.
                Err(e) if e.contains("Address already in use") && (fixed.is_none() || listen.is_tls()) => last = e,
                Err(e) if fixed.is_some() => {
                    return Err(format!("node {index} on {}: redis-server did not start: {e}", node.client_addr()));
                }
                Err(e) => return Err(format!("node {index}: redis-server did not start: {e}")),
            }
        }
        match fixed {
            Some(_) => Err(format!("node {index} on {}: redis-server did not start: {last}", node.client_addr())),
            None => Err(format!("node {index}: redis-server did not start: {last}")),
        }
    }

    /// Make this node a replica of `primary` (`REPLICAOF`, with the primary's credentials)
    /// and wait until its link to the primary is up, the first sync is done, and it
    /// acknowledges the primary's writes (`WAIT`).
    pub(crate) fn replicate(&self, primary: &Node) -> Result<(), String> {
        self.replicate_over(primary, false)
    }

    /// [`replicate`](Self::replicate), over the TLS ports with `tls` (the replica has
    /// `tls-replication yes`: it connects to the primary's TLS port and announces its own).
    pub(crate) fn replicate_over(&self, primary: &Node, tls: bool) -> Result<(), String> {
        let fail = |e: std::io::Error| format!("replica of node {}: {e}", primary.index());
        // The primary would wait 5 s for more replicas before a diskless first sync.
        let mut to_primary = primary.conn().map_err(fail)?;
        to_primary.checked(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]).map_err(fail)?;
        let mut conn = self.conn().map_err(fail)?;
        if let Some((user, pass)) = primary.credentials() {
            conn.checked(&["CONFIG", "SET", "masteruser", user]).map_err(fail)?;
            conn.checked(&["CONFIG", "SET", "masterauth", pass]).map_err(fail)?;
        }
        let to = if tls { primary.tls_addr() } else { primary.addr() };
        let (host, port) = (to.ip().to_string(), to.port().to_string());
        conn.checked(&["REPLICAOF", host.as_str(), port.as_str()]).map_err(fail)?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let port = if tls { self.tls_port } else { self.port }.to_string();
        loop {
            let info = conn.checked(&["INFO", "replication"]).map_err(fail)?;
            let text = info.as_text().unwrap_or_default();
            // The primary counts the replica (for WAIT) once the replica's first ACK says it
            // has loaded the sync: online on both sides.
            let primary_info =
                to_primary.checked(&["INFO", "replication"]).map_err(fail)?.as_text().unwrap_or_default();
            let online = primary_info
                .lines()
                .any(|l| l.starts_with("slave") && l.contains(&format!("port={port},")) && l.contains("state=online"));
            // A replica that has just come online may take up to a second to answer the
            // primary's first `WAIT`: ready once a write of the primary's is acknowledged.
            if text.contains("master_link_status:up") && text.contains("master_sync_in_progress:0") && online {
                to_primary.checked(&["SET", "redlease-servers:probe", "1", "PX", "1000"]).map_err(fail)?;
                let acked = to_primary.checked(&["WAIT", "1", "100"]).map_err(fail)?;
                if matches!(acked, crate::Reply::Int(n) if n >= 1) {
                    to_primary.checked(&["DEL", "redlease-servers:probe"]).map_err(fail)?;
                    return Ok(());
                }
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("replica of node {}: its link did not come up in 10 s:\n{text}", primary.index()));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Index among the nodes started with it (a replica of a standalone node has its primary's).
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

    /// The node's URL as it listens ([`Listen`]): `redis://[user:pass@]HOST:PORT`,
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

    /// The address clients reach: the TLS port's for a TLS node, else the TCP port's.
    pub(crate) fn client_addr(&self) -> SocketAddr {
        if self.listen.is_tls() { self.tls_addr() } else { self.addr() }
    }

    /// The TLS port's address (TLS nodes only).
    pub fn tls_addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.tls_port))
    }

    /// The Unix socket's path (every node has one).
    pub(crate) fn socket_path(&self) -> PathBuf {
        conf::socket_path(self.dir.path())
    }

    /// `redis+unix://[user:pass@]/…/redis.sock`.
    pub(crate) fn unix_url(&self) -> String {
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
        process::signal(pid, libc::SIGSTOP).unwrap_or_else(|e| panic!("node {}: SIGSTOP: {e}", self.index));
        process::wait_for_state(pid, |s| s == 'T' || s == 't');
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
        process::signal(pid, libc::SIGCONT).unwrap_or_else(|e| panic!("node {}: SIGCONT: {e}", self.index));
        process::wait_for_state(pid, |s| s != 'T' && s != 't');
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
    /// [`persist(true)`](crate::ServersBuilder::persist) comes back with every acknowledged write;
    /// without persistence there is nothing on disk and the node comes back empty either way.
    /// Without `keep_data` the data directory is emptied first.
    ///
    /// # Panics
    ///
    /// If the server does not come back (with the tail of its log).
    pub fn restart(&self, keep_data: bool) {
        self.kill();
        if !keep_data {
            let data = conf::data_dir(self.dir.path());
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
    pub(crate) fn script_flush(&self) {
        self.conn()
            .and_then(|mut c| c.script_flush())
            .unwrap_or_else(|e| panic!("node {}: SCRIPT FLUSH: {e}", self.index));
    }

    /// The last `lines` lines of the server's log.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn log_path(&self) -> PathBuf {
        conf::log_path(self.dir.path())
    }

    fn proc(&self) -> MutexGuard<'_, Proc> {
        // A panic while holding the lock leaves a usable state behind: ignore poisoning.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What this node's `redis.conf` says.
    fn conf(&self) -> RedisConf<'_> {
        RedisConf {
            dir: self.dir.path(),
            ip: self.ip,
            port: self.port,
            persist: self.persist,
            tls: self.tls.as_ref().map(|tls| (self.tls_port, tls, self.listen == Listen::TlsClientAuth)),
            acl: self.acl.as_ref(),
            cluster: self.cluster,
        }
    }

    /// Start the process and wait until it answers `PING`. On failure the process is reaped and
    /// the error carries the tail of its log.
    fn spawn_and_wait(&self) -> Result<(), String> {
        let conf = self.conf().write().map_err(|e| format!("cannot write redis.conf: {e}"))?;
        let child = process::spawn(&self.prefix, &self.env, &conf)?;
        {
            let mut p = self.proc();
            p.child = Some(child);
            p.paused = false;
        }
        self.wait_for_ping()
    }

    /// Wait until the process just started answers `PING`; kill it if it has not within
    /// [`START_TIMEOUT`].
    fn wait_for_ping(&self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if !self.is_running() {
                return Err(format!("redis-server exited at start; log:\n{}", self.log_tail(10)));
            }
            if let Ok(mut conn) = self.conn() {
                if conn.ping().unwrap_or(false) && self.answers_as_ours(&mut conn) {
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

impl Node {
    /// Whether the server answering on this node's port is the process this node started:
    /// another harness starting at the same time may have bound the port first (ours then
    /// exits with "Address already in use", and the port is tried again), and a Redis
    /// Cluster node must never meet a node of another cluster. (Started through a prefix,
    /// such as `ip netns exec`, the pid may be the prefix's: not checked.)
    fn answers_as_ours(&self, conn: &mut RedisConn) -> bool {
        let Some(pid) = self.proc().child.as_ref().map(std::process::Child::id) else { return false };
        if !self.prefix.is_empty() {
            return true;
        }
        let info = conn.cmd(&["INFO", "server"]).ok().and_then(|r| r.as_text()).unwrap_or_default();
        info.lines().any(|l| l.trim() == format!("process_id:{pid}"))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        #[cfg(feature = "tls")]
        if self.tls.is_some() {
            crate::tls::unregister(self.tls_port);
        }
        // SIGKILL also ends a stopped process; then reap it so no zombie is left.
        self.kill();
    }
}

/// `redis://[user:pass@]ADDR`.
pub(crate) fn make_url(addr: SocketAddr, auth: Option<(&str, &str)>) -> String {
    match auth {
        Some((u, p)) => format!("redis://{u}:{p}@{addr}"),
        None => format!("redis://{addr}"),
    }
}
