//! A Redis Cluster as a node, on real servers: a local cluster of masters with replicas is one
//! Redlock node, found from one seed URL. Locks spread over every master, a lock of several
//! resources needs one hash tag, and a failover keeps a lock only when grants wait for the
//! replica. (The cases every adapter runs on cluster nodes are in the conformance suite.)

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

/// One cluster of 3 masters with a replica each as the node, a lock on a master other than
/// the seed. With that master's replica cut off, the lock is granted without `min_replicas`;
/// the master dies, the replica takes over without the key, and a second client gets the
/// same lock: lost. With `min_replicas=1` the grant waited for the replica, and after the same
/// failover the lock is still held; with the replica paused, such a grant fails in time.
#[test]
fn a_cluster_failover_loses_a_lock_unless_grants_wait_for_the_replica() {
    // A resource served by master 1 (the seed, master 0, stays up).
    let on_master_1 = |cluster: &RedisCluster| {
        (0..).map(|i| format!("job:{i}")).find(|r| cluster.master_of_key(&format!("{{{r}}}")) == 1).unwrap()
    };
    let connect = |url: String| redlease_mio::Client::with_config(config(&[url])).unwrap();

    // Without: lost.
    let cluster = RedisCluster::builder().masters(3).replicas(1).start();
    let (seed, r) = (cluster.seed_url(), on_master_1(&cluster));
    let first = connect(seed.clone());
    let replica = cluster.replicas_of(1)[0];
    replica.pause();
    cluster.master(1).conn().and_then(|mut c| c.checked(&["CLIENT", "KILL", "TYPE", "replica"])).unwrap();
    let held = first.lock(&r, TTL).unwrap();
    cluster.kill_master(1);
    replica.resume();
    cluster.fail_over(1);
    let second = connect(seed);
    let again = second.try_lock(&r, TTL).expect("the promoted replica never had the lock: granted again");
    assert_ne!(again.token(), held.token());
    drop((again, held));

    // With: kept.
    let cluster = RedisCluster::builder().masters(3).replicas(1).start();
    let (seed, r) = (cluster.seed_url(), on_master_1(&cluster));
    let waiting = format!("{seed}?min_replicas=1&replicas_timeout=100");
    let first = connect(waiting.clone());
    let held = first.lock(&r, TTL).unwrap();
    cluster.kill_master(1);
    let promoted = cluster.fail_over(1);
    let second = connect(seed);
    match second.try_lock(&r, TTL) {
        Err(e) if e.is_held() => {}
        other => panic!("the lock survived the failover, yet: {:?}", other.map(|g| g.token().to_owned())),
    }
    let value = promoted.conn().and_then(|mut c| c.get(&format!("{{{r}}}"))).unwrap();
    assert_eq!(value.as_deref(), Some(held.token()));
    drop(held);

    // A paused replica: the grant fails within the timeouts, as unreplicated.
    let r2 = (0..).map(|i| format!("other:{i}")).find(|r| cluster.master_of_key(&format!("{{{r}}}")) == 0).unwrap();
    cluster.replicas_of(0)[0].pause();
    let started = std::time::Instant::now();
    match first.try_lock(&r2, TTL) {
        Err(Error::Acquire(AcquireError::Unreachable { votes, .. })) => {
            assert!(matches!(votes[0], Vote::Unreplicated { acked: 0, wanted: 1 }), "{votes:?}");
        }
        other => panic!("a grant its replica does not have: {:?}", other.map(|g| g.token().to_owned())),
    }
    assert!(started.elapsed() < Duration::from_secs(2), "failed in time, took {:?}", started.elapsed());
    cluster.replicas_of(0)[0].resume();
}
