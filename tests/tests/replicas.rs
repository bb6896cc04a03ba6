//! Grants acknowledged by replicas, on real servers: nodes that are a primary with a replica,
//! and clients with `min_replicas(1, …)`. A grant is on the replica when the lock is reported
//! held; a replica that does not answer makes grants fail within the timeout; and a failover
//! (the primary killed, its replica promoted) keeps a lock taken with `min_replicas`, where
//! one taken without it can be lost.

use std::time::{Duration, Instant};

use redlease_client::{AcquireError, Error};
use redlease_core::{Config, Vote};
use redlease_tests::{Node, Servers};

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
    let servers = Servers::builder().nodes(3).replicas(1).start();
    // The blocking client and the tokio one: the core adds WAIT for both.
    let client = redlease_mio::Client::with_config(config(&servers.urls(), true)).unwrap();
    let health = client.health();
    assert!(health.nodes.iter().all(|n| n.min_replicas.is_some_and(|m| m.replicas == 1)), "{health}");
    assert!(health.to_string().contains("grants wait for 1 replica(s), 50ms"), "{health}");
    let mut guard = client.lock("replicated", TTL).unwrap();
    // No waiting: each grant counted only once its replica had it, and a quorum counted.
    let on_replicas = |key: &str, token: &str| {
        (0..3).filter(|&i| get(&servers.replicas(i)[0], key).as_deref() == Some(token)).count()
    };
    assert!(on_replicas("replicated", guard.token()) >= 2, "the replicas of a quorum have it");
    guard.extend(TTL).unwrap();
    guard.release().unwrap();

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = redlease_tokio::Client::with_config(config(&servers.urls(), true)).await.unwrap();
        let guard = client.lock("replicated-tokio", TTL).await.unwrap();
        assert!(on_replicas("replicated-tokio", guard.token()) >= 2, "the replicas of a quorum have it");
        guard.release().await.unwrap();
        client.close().await;
    });
    servers.assert_no_leaks();
}

#[test]
fn a_replica_that_does_not_answer_fails_grants_within_the_timeout() {
    let servers = Servers::builder().nodes(1).replicas(1).start();
    let client = redlease_mio::Client::with_config(config(&servers.urls(), true)).unwrap();
    let replica = &servers.replicas(0)[0];
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
    while get(servers.node(0), "stalled").is_some() && Instant::now() < deadline {
        client.run_for(Duration::from_millis(10)).unwrap();
    }
    assert_eq!(get(servers.node(0), "stalled"), None, "the failed grant was released");
    servers.assert_no_leaks();
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
    let servers = Servers::builder().nodes(1).replicas(1).start();
    let replica = &servers.replicas(0)[0];
    let first = redlease_mio::Client::with_config(config(&servers.urls(), false)).unwrap();
    replica.pause();
    servers.node(0).conn().and_then(|mut c| c.checked(&["CLIENT", "KILL", "TYPE", "replica"])).unwrap();
    let held = first.lock("job", TTL).unwrap();
    servers.node(0).kill();
    replica.resume();
    promote(replica);
    let second = redlease_mio::Client::connect([replica.url()]).unwrap();
    let again = second.try_lock("job", TTL).expect("the promoted replica never had the lock: it is granted again");
    assert_ne!(again.token(), held.token());
    drop((again, held));

    // With: kept.
    let servers = Servers::builder().nodes(1).replicas(1).start();
    let replica = &servers.replicas(0)[0];
    let first = redlease_mio::Client::with_config(config(&servers.urls(), true)).unwrap();
    let held = first.lock("job", TTL).unwrap();
    servers.node(0).kill();
    promote(replica);
    let second = redlease_mio::Client::connect([replica.url()]).unwrap();
    match second.try_lock("job", TTL) {
        Err(e) if e.is_held() => {}
        other => panic!("the lock survived the failover, yet: {:?}", other.map(|g| g.token().to_owned())),
    }
    assert_eq!(get(replica, "job").as_deref(), Some(held.token()));
    drop(held);
}

/// `replicas_fsync` asks for `WAITAOF` (Redis 7.2). Where the server has it, a grant counts
/// once the replica's append-only file has it; on an older server every vote fails with the
/// server's error, which names the command, the lock is refused as unreachable, and nothing is
/// left behind.
#[test]
fn replicas_fsync_waits_for_the_replicas_append_only_file_or_is_refused_by_name() {
    let servers = Servers::builder().nodes(3).replicas(1).start();
    let urls: Vec<String> =
        servers.urls().iter().map(|u| format!("{u}?min_replicas=1&replicas_timeout=50&replicas_fsync=1")).collect();
    let client = redlease_mio::Client::with_config(config(&urls, false)).unwrap();
    assert!(
        client.health().to_string().contains("grants wait for 1 replica(s) (on disk), 50ms"),
        "{}",
        client.health()
    );
    let info = servers.nodes()[0].conn().and_then(|mut c| c.cmd(&["INFO", "server"])).unwrap();
    let info = info.as_text().unwrap_or_default();
    let version: Vec<u32> = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("redis_version:"))
        .map(|v| v.split('.').filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default();
    if version.as_slice() >= [7, 2].as_slice() {
        for i in 0..3 {
            for node in [&servers.nodes()[i], &servers.replicas(i)[0]] {
                node.conn().and_then(|mut c| c.checked(&["CONFIG", "SET", "appendonly", "yes"])).unwrap();
            }
        }
        let guard = client.lock("on-disk", TTL).unwrap();
        assert!((0..3).filter(|&i| get(&servers.replicas(i)[0], "on-disk").is_some()).count() >= 2);
        guard.release().unwrap();
    } else {
        match client.try_lock("on-disk", TTL) {
            Err(Error::Acquire(AcquireError::Unreachable { votes, .. })) => {
                // Decided once a quorum could no longer grant it (a third vote may be pending).
                let named = votes.iter().filter(|v| matches!(v, Vote::Error(m) if m.contains("WAITAOF"))).count();
                assert!(
                    named >= 2 && votes.iter().all(|v| *v == Vote::Pending || matches!(v, Vote::Error(_))),
                    "{votes:?}"
                );
            }
            other => panic!("Redis {version:?} has no WAITAOF: {:?}", other.map(|g| g.token().to_owned())),
        }
    }
    servers.assert_no_leaks();
}

/// Nodes with fewer replicas online than their `min_replicas`, on real servers. Connecting
/// when two of three ask for more than they have fails as misconfigured, and the health view
/// says so with both numbers. Connected while the replicas were there, a client that loses two
/// of them sees it at its next check (`ROLE`), and a lock then fails at once as
/// misconfigured, naming `min_replicas` and the count.
#[test]
fn nodes_short_of_the_replicas_their_grants_wait_for_are_not_used() {
    let servers = Servers::builder().nodes(3).replicas(1).start();
    let mut short = config(&servers.urls(), true);
    for i in [1, 2] {
        short.nodes[i] = short.nodes[i].clone().min_replicas(2, Duration::from_millis(50));
    }
    match redlease_mio::Client::with_config(short).map(drop) {
        Err(e @ Error::Unhealthy(_)) => {
            assert!(e.is_misconfigured() && !e.is_unreachable(), "{e}");
            let Error::Unhealthy(health) = &e else { unreachable!() };
            assert!(health.nodes[1].is_misconfigured() && health.nodes[0].is_ready(), "{health}");
            assert_eq!(health.nodes[1].replicas_online, Some(1));
            let line = health.to_string().lines().nth(1).unwrap().to_owned();
            assert!(line.contains("MISCONFIGURED") && line.contains("grants wait for 2 replica(s)"), "{line}");
            assert!(line.contains("min_replicas=2, but the primary has 1 replica(s) online"), "{line}");
        }
        other => panic!("two nodes short of replicas: {:?}", other.err()),
    }

    let client = redlease_mio::Client::with_config(config(&servers.urls(), true).require_all(true)).unwrap();
    assert!(client.health().all_ready() && client.health().nodes[0].replicas_online == Some(1), "{}", client.health());
    servers.replicas(1)[0].kill();
    servers.replicas(2)[0].kill();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !client.health().misconfigured_beyond_quorum() {
        assert!(Instant::now() < deadline, "the lost replicas were not noticed: {}", client.health());
        client.run_for(Duration::from_millis(20)).unwrap();
    }
    let started = Instant::now();
    match client.lock("short", TTL) {
        Err(e @ Error::Acquire(AcquireError::Misconfigured { .. })) => {
            let text = e.to_string();
            assert!(text.contains("min_replicas=1, but the primary has 0 replica(s) online"), "{text}");
        }
        other => panic!("a lock over nodes without their replicas: {:?}", other.map(|g| g.token().to_owned())),
    }
    assert!(started.elapsed() < Duration::from_secs(1), "failed at once, took {:?}", started.elapsed());
    servers.assert_no_leaks();
}
