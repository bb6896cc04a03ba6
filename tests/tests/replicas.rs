//! Grants acknowledged by replicas, on real servers: nodes that are a primary with a replica,
//! and clients with `min_replicas(1, …)`. A grant is on the replica when the lock is reported
//! held; a replica that does not answer makes grants fail within the timeout; and a failover
//! (the primary killed, its replica promoted) keeps a lock taken with `min_replicas`, where
//! one taken without it can be lost.

use std::time::{Duration, Instant};

use redlease_client::{AcquireError, Error};
use redlease_core::{Config, Vote};
use redlease_tests::{Cluster, Node};

const TTL: Duration = Duration::from_secs(10);

/// A config for `urls`; with `replicas`, every node's grants wait for one replica (50 ms).
fn config(urls: &[String], replicas: bool) -> Config {
    let mut c = Config::from_urls(urls).unwrap().node_timeout(Duration::from_millis(200));
    if replicas {
        c.nodes = c.nodes.into_iter().map(|n| n.min_replicas(1, Duration::from_millis(50))).collect();
    }
    c
}

fn get(node: &Node, key: &str) -> Option<String> {
    node.conn().and_then(|mut c| c.get(key)).unwrap_or_else(|e| panic!("GET {key}: {e}"))
}

/// The node that was a replica, made a primary (as a failover does).
fn promote(replica: &Node) {
    replica.conn().and_then(|mut c| c.checked(&["REPLICAOF", "NO", "ONE"])).expect("REPLICAOF NO ONE");
}

#[test]
fn when_a_lock_is_held_its_keys_are_on_the_replicas() {
    let cluster = Cluster::builder().nodes(3).replicas(1).start();
    // The blocking client and the tokio one: the core adds WAIT for both.
    let client = redlease_mio::Client::with_config(config(&cluster.urls(), true)).unwrap();
    let health = client.health();
    assert!(health.nodes.iter().all(|n| n.min_replicas.is_some_and(|m| m.replicas == 1)), "{health}");
    assert!(health.to_string().contains("grants wait for 1 replica(s), 50ms"), "{health}");
    let mut guard = client.lock("replicated", TTL).unwrap();
    // No waiting: each grant counted only once its replica had it, and a quorum counted.
    let on_replicas = |key: &str, token: &str| {
        (0..3).filter(|&i| get(&cluster.replicas(i)[0], key).as_deref() == Some(token)).count()
    };
    assert!(on_replicas("replicated", guard.token()) >= 2, "the replicas of a quorum have it");
    guard.extend(TTL).unwrap();
    guard.release().unwrap();

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = redlease_tokio::Client::with_config(config(&cluster.urls(), true)).await.unwrap();
        let guard = client.lock("replicated-tokio", TTL).await.unwrap();
        assert!(on_replicas("replicated-tokio", guard.token()) >= 2, "the replicas of a quorum have it");
        guard.release().await.unwrap();
        client.close().await;
    });
    cluster.assert_no_leaks();
}

#[test]
fn a_replica_that_does_not_answer_fails_grants_within_the_timeout() {
    let cluster = Cluster::builder().nodes(1).replicas(1).start();
    let client = redlease_mio::Client::with_config(config(&cluster.urls(), true)).unwrap();
    let replica = &cluster.replicas(0)[0];
    replica.pause();
    let started = Instant::now();
    match client.try_lock("stalled", TTL) {
        Err(Error::Acquire(AcquireError::Unreachable { votes, .. })) => {
            assert_eq!(votes[0], Vote::Unreplicated { acked: 0, wanted: 1 });
        }
        other => panic!("a grant its replica does not have: {:?}", other.map(|g| g.token().to_owned())),
    }
    assert!(started.elapsed() < Duration::from_secs(1), "failed within the timeouts, took {:?}", started.elapsed());
    // The primary's grant was cleaned up; nothing is left without a TTL.
    let deadline = Instant::now() + Duration::from_secs(3);
    while get(cluster.node(0), "stalled").is_some() && Instant::now() < deadline {
        client.run_for(Duration::from_millis(10)).unwrap();
    }
    assert_eq!(get(cluster.node(0), "stalled"), None, "the failed grant was released");
    cluster.assert_no_leaks();
    replica.resume();
    client.lock("stalled", TTL).unwrap().release().unwrap();
}

/// One node, a primary with a replica. With the replica cut off (paused, its link closed by
/// the primary), a lock is granted without `min_replicas`; the primary dies and the replica,
/// promoted, never had the key: a second client takes the same lock. With `min_replicas`
/// the grant waited for the replica, and after the same failover the lock is still held.
#[test]
fn a_failover_loses_a_lock_unless_grants_wait_for_the_replica() {
    // Without: lost.
    let cluster = Cluster::builder().nodes(1).replicas(1).start();
    let replica = &cluster.replicas(0)[0];
    let first = redlease_mio::Client::with_config(config(&cluster.urls(), false)).unwrap();
    replica.pause();
    cluster.node(0).conn().and_then(|mut c| c.checked(&["CLIENT", "KILL", "TYPE", "replica"])).unwrap();
    let held = first.lock("job", TTL).unwrap();
    cluster.node(0).kill();
    replica.resume();
    promote(replica);
    let second = redlease_mio::Client::connect([replica.url()]).unwrap();
    let again = second.try_lock("job", TTL).expect("the promoted replica never had the lock: it is granted again");
    assert_ne!(again.token(), held.token());
    drop((again, held));

    // With: kept.
    let cluster = Cluster::builder().nodes(1).replicas(1).start();
    let replica = &cluster.replicas(0)[0];
    let first = redlease_mio::Client::with_config(config(&cluster.urls(), true)).unwrap();
    let held = first.lock("job", TTL).unwrap();
    cluster.node(0).kill();
    promote(replica);
    let second = redlease_mio::Client::connect([replica.url()]).unwrap();
    match second.try_lock("job", TTL) {
        Err(e) if e.is_held() => {}
        other => panic!("the lock survived the failover, yet: {:?}", other.map(|g| g.token().to_owned())),
    }
    assert_eq!(get(replica, "job").as_deref(), Some(held.token()));
    drop(held);
}
