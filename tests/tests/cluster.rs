//! A Redis Cluster as a node, on real servers: a local cluster of masters with replicas is one
//! Redlock node, found from one seed URL. Locks spread over every master, a lock of several
//! resources needs one hash tag, and a failover keeps a lock only when grants wait for the
//! replica. (The cases every adapter runs on cluster nodes are in the conformance suite.)

use std::time::{Duration, Instant};

use redlease_client::{AcquireError, Error};
use redlease_core::{Config, LockOptions, Retry, Vote, cluster::hash_slot};
use redlease_tests::{RedisCluster, Reply};

const TTL: Duration = Duration::from_secs(10);

fn config(urls: &[String]) -> Config {
    Config::from_urls(urls).unwrap().node_timeout(Duration::from_millis(500))
}

#[test]
fn a_cluster_node_spreads_locks_over_its_masters() {
    let cluster = RedisCluster::builder().masters(3).replicas(1).start();
    cluster.master(0).conn().and_then(|mut c| c.checked(&["CONFIG", "RESETSTAT"])).unwrap();
    let client = redlease_mio::Client::with_config(config(&[cluster.seed_url()])).unwrap();
    let health = client.health();
    let c = health.nodes[0].cluster.as_ref().expect("the node is seen as a cluster");
    assert_eq!((c.masters.len(), c.covered), (3, 16384), "{health}");
    assert!(health.to_string().contains("a Redis Cluster: 3 master(s), 16384 of 16384 slots covered"), "{health}");
    // Read with `CLUSTER SHARDS` (Redis 7), not the older `CLUSTER SLOTS`.
    let stats = match cluster.master(0).conn().and_then(|mut c| c.cmd(&["INFO", "commandstats"])) {
        Ok(Reply::Bulk(Some(text))) => String::from_utf8_lossy(&text).into_owned(),
        other => panic!("INFO commandstats: {other:?}"),
    };
    assert!(stats.contains("cmdstat_cluster|shards:") && !stats.contains("cmdstat_cluster|slots:"), "{stats}");

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

/// Subscribers of the sharded `channel` on `node` (`PUBSUB SHARDNUMSUB`).
fn shard_subscribers(node: &redlease_tests::Node, channel: &str) -> i64 {
    match node.conn().and_then(|mut c| c.cmd(&["PUBSUB", "SHARDNUMSUB", channel])) {
        Ok(Reply::Array(Some(items))) => match items.get(1) {
            Some(Reply::Int(n)) => *n,
            other => panic!("PUBSUB SHARDNUMSUB: {other:?}"),
        },
        other => panic!("PUBSUB SHARDNUMSUB: {other:?}"),
    }
}

/// Poll `done` every 10 ms for up to 5 s; panic with `what` if it never holds.
fn within_5s(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < until, "{what}: not within 5 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wake-ups on a cluster node are sharded: a waiter listens (`SSUBSCRIBE`) on the master that
/// serves its slot only, and the release announces there (`SPUBLISH`). When the slot moves to
/// another master while it waits, the old master ends the subscription and the waiter
/// subscribes on the new one: the release there still wakes it within 2 s, though it retries
/// only every 5 s.
#[test]
fn a_waiter_on_a_cluster_follows_its_slot_to_another_master() {
    let cluster = RedisCluster::builder().masters(3).replicas(0).start();
    let (key, channel) = ("{moving}", "redlease:wake:{moving}");
    let from = cluster.master_of_key(key);
    let to = (from + 1) % 3;
    let holder = redlease_mio::Client::with_config(config(&[cluster.seed_url()])).unwrap();
    let slow = config(&[cluster.seed_url()]).retry(Retry::new(1000, Duration::from_secs(5), Duration::from_secs(5)));
    let waiting = redlease_mio::Client::with_config(slow).unwrap();
    let guard = holder.lock("moving", TTL).unwrap();
    let waiter = std::thread::spawn(move || {
        let got = waiting.lock_with(LockOptions::new("moving", TTL).wait(Duration::from_secs(20)));
        (Instant::now(), got.map(|g| g.release()))
    });
    within_5s("the waiter subscribes on the slot's master", || shard_subscribers(cluster.master(from), channel) > 0);
    for m in (0..3).filter(|&m| m != from) {
        assert_eq!(shard_subscribers(cluster.master(m), channel), 0, "master {m} does not serve the slot");
    }
    cluster.migrate_slot(hash_slot(key.as_bytes()), to);
    within_5s("the subscription follows the slot", || {
        shard_subscribers(cluster.master(to), channel) > 0 && shard_subscribers(cluster.master(from), channel) == 0
    });
    let released = Instant::now();
    guard.release().unwrap();
    let (got, outcome) = waiter.join().unwrap();
    outcome.expect("the waiter got the lock").unwrap();
    assert!(got - released < Duration::from_secs(2), "woken {:?} after the release", got - released);
    cluster.assert_no_leaks();
}
