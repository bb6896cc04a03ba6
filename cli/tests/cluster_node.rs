//! `status` and `scan` given a Redis Cluster node by mistake: they refuse it as misconfigured,
//! as the clients do, instead of reporting the key free on it.

mod common;

use std::net::{Ipv4Addr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{nodes, redlease, run, stdout};
use redlease_cluster::{Cluster, RedisConn, TempDir};

/// A one-master Redis Cluster (`cluster-enabled yes`, every slot its own), stopped on drop.
struct ClusterModeNode {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl ClusterModeNode {
    fn start() -> ClusterModeNode {
        let dir = TempDir::new("redlease-cli-cluster-mode").unwrap();
        // The cluster bus listens on port + 10000: pick a port that leaves room for it.
        let port = loop {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port();
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
            if let Ok(mut c) = RedisConn::connect((Ipv4Addr::LOCALHOST, port).into(), None) {
                if c.ping().unwrap_or(false) {
                    break c;
                }
            }
            assert!(Instant::now() < deadline, "the cluster-mode node did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        conn.ok(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).unwrap();
        node
    }
}

impl Drop for ClusterModeNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn status_and_scan_refuse_a_redis_cluster_node_as_misconfigured() {
    let node = ClusterModeNode::start();
    let cluster = Cluster::start(2);
    let urls = format!("redis://127.0.0.1:{},{}", node.port, nodes(&cluster));
    let out = run(redlease().args(["status", "--key", "k", "--nodes", &urls]));
    let text = stdout(&out);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.contains("MISCONFIGURED") && first.contains("is a Redis Cluster node"), "{text}");
    assert!(first.contains("give one standalone Redis per node"), "{text}");
    assert!(text.contains("2 of 3 nodes reachable"), "{text}");
    let out = run(redlease().args(["scan", "--nodes", &urls]));
    let text = stdout(&out);
    assert!(text.lines().next().unwrap_or_default().contains("MISCONFIGURED"), "{text}");
}
