//! A one-master Redis Cluster node (`cluster-enabled yes`, every hash slot its own), for the
//! tests that give one to redlease by mistake: it must be refused as misconfigured.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::resp::RedisConn;
use crate::tempdir::TempDir;

/// A `redis-server --cluster-enabled yes` on a free loopback port, serving every slot, in a
/// temporary directory of its own; stopped (by its pid) on drop.
#[derive(Debug)]
pub struct ClusterModeNode {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl ClusterModeNode {
    /// Start it and wait until the cluster reports `cluster_state:ok`. Panics if it does not
    /// within 10 s.
    pub fn start() -> ClusterModeNode {
        let dir = TempDir::new("redlease-cluster-mode").expect("a temporary directory");
        // The cluster bus listens on port + 10000: pick a port that leaves room for it.
        let port = loop {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .expect("a free port")
                .local_addr()
                .expect("its port")
                .port();
            if port < 55_000 && TcpListener::bind((Ipv4Addr::LOCALHOST, port + 10_000)).is_ok() {
                break port;
            }
        };
        let d = dir.path().display().to_string();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--cluster-enabled", "yes"])
            .args(["--cluster-config-file", &format!("{d}/nodes.conf"), "--dir", &d])
            .args(["--save", "", "--appendonly", "no", "--logfile", &format!("{d}/redis.log")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server");
        let node = ClusterModeNode { child, port, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut conn = loop {
            if let Ok(mut c) = node.conn() {
                if c.ping().unwrap_or(false) {
                    break c;
                }
            }
            assert!(Instant::now() < deadline, "the cluster-mode node did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        conn.ok(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).expect("the node takes every slot");
        while !conn
            .cmd(&["CLUSTER", "INFO"])
            .expect("CLUSTER INFO")
            .as_text()
            .unwrap_or_default()
            .contains("cluster_state:ok")
        {
            assert!(Instant::now() < deadline, "the cluster did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        node
    }

    /// Its address on loopback.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr())
    }

    /// A fresh connection to it.
    pub fn conn(&self) -> std::io::Result<RedisConn> {
        RedisConn::connect(self.addr(), None)
    }
}

impl Drop for ClusterModeNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
