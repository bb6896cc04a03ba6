//! A Redis Cluster as a node, on real servers: a local cluster of masters with replicas is one
//! Redlock node, found from one seed URL. Locks spread over every master, a lock of several
//! resources needs one hash tag, and a Redlock of three clusters locks like one of three
//! standalone nodes.

use std::time::Duration;

use redlease_client::{AcquireError, Error};
use redlease_core::{Config, LockOptions, Vote, cluster::hash_slot};
use redlease_tests::RedisCluster;

const TTL: Duration = Duration::from_secs(10);

fn config(urls: &[String]) -> Config {
    Config::from_urls(urls).unwrap().node_timeout(Duration::from_millis(500))
}

#[test]
fn a_cluster_node_spreads_locks_over_its_masters() {
    let cluster = RedisCluster::builder().masters(3).replicas(1).start();
    let client = redlease_mio::Client::with_config(config(&[cluster.seed_url()])).unwrap();
    let health = client.health();
    let c = health.nodes[0].cluster.as_ref().expect("the node is seen as a cluster");
    assert_eq!((c.masters.len(), c.covered), (3, 16384), "{health}");
    assert!(health.to_string().contains("a Redis Cluster: 3 master(s), 16384 of 16384 slots covered"), "{health}");

    let guards: Vec<_> = (0..64).map(|i| client.lock(&format!("job:{i}"), TTL).unwrap()).collect();
    let per_master = cluster.keys_per_master();
    for (i, keys) in per_master.iter().enumerate() {
        assert!(!keys.is_empty(), "master {i} holds some of the 64 locks: {per_master:?}");
    }
    // Each lock is in its resource's slot, as `{name}`, on the master that owns it.
    for i in [0, 17, 63] {
        let key = format!("{{job:{i}}}");
        let master = cluster.master_of_slot(hash_slot(key.as_bytes()));
        assert!(per_master[master].contains(&key), "{key} on master {master}: {per_master:?}");
    }
    // The same resource is exclusive.
    match client.try_lock("job:5", TTL) {
        Err(Error::Acquire(AcquireError::Held { .. })) => {}
        other => panic!("job:5 is held: {:?}", other.map(|g| g.token().to_owned())),
    }
    for g in guards {
        g.release().unwrap();
    }
    assert!(cluster.lock_keys().is_empty(), "{:?}", cluster.lock_keys());

    // Several resources: one hash tag, one script; else a typed refusal naming the remedy.
    let both = LockOptions::new("{order:42}:a", TTL).resources(["{order:42}:b"]).attempts(1);
    client.lock_with(both.clone()).unwrap().release().unwrap();
    let split = LockOptions::new("a", TTL).resources(["b"]).attempts(1);
    match client.lock_with(split.clone()) {
        Err(Error::Acquire(AcquireError::Misconfigured { votes, .. })) => {
            assert!(matches!(&votes[0], Vote::Misconfigured(e) if e.contains("hash tag")), "{votes:?}");
        }
        other => panic!("keys in two slots: {:?}", other.map(|g| g.token().to_owned())),
    }
    cluster.assert_no_leaks();
}

#[test]
fn a_redlock_of_three_clusters_locks_fences_and_wakes_on_every_adapter() {
    let clusters: Vec<RedisCluster> = (0..3).map(|_| RedisCluster::builder().masters(3).replicas(1).start()).collect();
    let urls: Vec<String> = clusters.iter().map(RedisCluster::seed_url).collect();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = redlease_tokio::Client::with_config(config(&urls)).await.unwrap();
        let fenced = LockOptions::new("fenced", TTL).fencing(true);
        let first = client.lock_with(fenced.clone()).await.unwrap();
        let f1 = first.fence().unwrap();
        // A waiter is handed the lock on release.
        let waiter = {
            let client = client.clone();
            tokio::spawn(async move {
                let g =
                    client.lock_with(LockOptions::new("fenced", TTL).fencing(true).wait(Duration::from_secs(5))).await;
                g.map(|g| g.fence())
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        first.release().await.unwrap();
        let f2 = waiter.await.unwrap().unwrap().unwrap();
        assert!(f2 > f1, "fencing tokens increase: {f1} then {f2}");
        client.close().await;
    });
    let client = redlease_mio::Client::with_config(config(&urls)).unwrap();
    let sem = LockOptions::new("pool", TTL).semaphore(2);
    let a = client.lock_with(sem.clone()).unwrap();
    let b = client.lock_with(sem.clone()).unwrap();
    assert!(matches!(client.lock_with(sem.clone().attempts(1)), Err(Error::Acquire(_))));
    a.release().unwrap();
    b.release().unwrap();
    let r1 = client.lock_with(LockOptions::new("doc", TTL).shared(true)).unwrap();
    let r2 = client.lock_with(LockOptions::new("doc", TTL).shared(true)).unwrap();
    assert!(client.lock_with(LockOptions::new("doc", TTL).attempts(1)).is_err(), "no writer with readers");
    r1.release().unwrap();
    r2.release().unwrap();
    for c in &clusters {
        c.assert_no_leaks();
    }
}
