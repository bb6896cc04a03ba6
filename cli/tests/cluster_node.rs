//! `status` and `scan` given a Redis Cluster node by mistake: they refuse it as misconfigured,
//! as the clients do, instead of reporting the key free on it.

mod common;

use common::{nodes, redlease, run, stdout};
use redlease_cluster::{Cluster, ClusterModeNode};

#[test]
fn status_and_scan_refuse_a_redis_cluster_node_as_misconfigured() {
    let node = ClusterModeNode::start();
    let cluster = Cluster::start(2);
    let urls = format!("{},{}", node.url(), nodes(&cluster));
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
