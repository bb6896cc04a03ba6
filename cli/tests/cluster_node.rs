//! `status` and `scan` given a Redis Cluster as a node: they read it as one node, on its
//! masters (logging in to each as to the node), and refuse as misconfigured only what a
//! cluster cannot do: a database other than 0, a key that cannot get a hash tag.

mod common;

use common::{nodes, redlease, run, stderr, stdout};
use redlease_servers::{ClusterModeNode, RedisCluster, Servers, key_slot};

#[test]
fn status_and_scan_read_a_redis_cluster_node() {
    let node = ClusterModeNode::start();
    let servers = Servers::start(2);
    let urls = format!("{},{}", node.url(), nodes(&servers));
    let out = run(redlease().args(["status", "--key", "k", "--nodes", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let first = text.lines().next().unwrap_or_default();
    let served = format!("free  (Redis Cluster: slot {} on master {}, one of 1)", key_slot("{k}"), node.addr());
    assert!(first.starts_with("node 0 ") && first.ends_with(&served), "{served} in {text}");
    assert!(text.contains("3 of 3 nodes reachable"), "{text}");
    let out = run(redlease().args(["scan", "--nodes", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("node 0 is a Redis Cluster, its 1 master(s) scanned"), "{}", stdout(&out));

    // A key prefix is part of the key the cluster form tags.
    node.conn().unwrap().set("{app:x}", "token1").unwrap();
    let text = stdout(&run(redlease().args(["status", "--key", "x", "--key-prefix", "app:", "--nodes", &urls])));
    assert!(text.lines().next().unwrap_or_default().contains("held by token1  NO TTL (leak)"), "{text}");
    let out = run(redlease().args(["scan", "--key-prefix", "app:", "--nodes", &urls]));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let line = format!("node 0 {}: app:x has no TTL (stored as {{app:x}} on master {})", node.url(), node.addr());
    assert!(stdout(&out).lines().any(|l| l == line), "{line} in {}", stdout(&out));

    // What a cluster cannot do is misconfigured, on that node alone.
    let out = run(redlease().args(["status", "--key", "}x", "--nodes", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.contains("MISCONFIGURED") && first.contains("starts with '}' and has no hash tag"), "{text}");
    assert!(text.contains("2 of 3 nodes reachable"), "{text}");
    let urls = format!("{}/1,{}", node.url(), nodes(&servers));
    let out = run(redlease().args(["status", "--key", "k", "--nodes", &urls, "--json"]));
    let json = stdout(&out);
    assert!(json.contains("\"fault\":\"misconfigured\",\"error\":\"the node is a Redis Cluster, whose only database is 0: drop /1 from its URL"), "{json}");

    for sub in ["status", "scan"] {
        let help = stdout(&run(redlease().args([sub, "--help"])));
        assert!(help.contains("A node that is a Redis Cluster"), "{sub}: {help}");
    }
}

/// A cluster whose nodes want a password: every master is logged in to with the URL's, and a
/// wrong one is misconfigured, never shown.
#[test]
fn the_masters_of_a_cluster_node_are_reached_with_its_credentials() {
    let cluster = RedisCluster::builder().masters(2).replicas(0).acl_user("alice", "s3cret").start();
    // One key on each master.
    let keys = ["a", "b", "c", "d", "e", "f"];
    let on = |k: &str| cluster.master_of_key(&format!("{{{k}}}"));
    let (k0, k1) = (keys.iter().find(|k| on(k) == 0).unwrap(), keys.iter().find(|k| on(k) == 1).unwrap());
    for k in [k0, k1] {
        let stored = format!("{{{k}}}");
        cluster.master(on(k)).conn().unwrap().set(&stored, "token1").unwrap();
    }
    let seed = cluster.seed_url();
    assert!(seed.contains("alice:s3cret@"), "{seed}");
    for k in [k0, k1] {
        let out = run(redlease().args(["status", "--key", k, "--nodes", &seed]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("held by token1") && text.contains("NO TTL (leak)"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }
    let out = run(redlease().args(["scan", "--nodes", &seed]));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    for k in [k0, k1] {
        assert!(text.contains(&format!(": {k} has no TTL (stored as {{{k}}} on master ")), "{text}");
    }
    let wrong = seed.replace("s3cret", "wrong-one");
    let out = run(redlease().args(["status", "--key", k0, "--nodes", &wrong]));
    let text = stdout(&out);
    assert!(text.lines().next().unwrap_or_default().contains("MISCONFIGURED"), "{text}");
    assert!(!text.contains("wrong-one") && !text.contains("s3cret"), "{text}");
}
