//! The cases on nodes that are Redis Clusters: a Redlock of three local clusters (3 masters
//! with a replica each) locks, fences, wakes waiters, counts permits and shares read locks,
//! with the locks spread over every master; and one cluster keeps its locks exclusive while
//! the slots of the locked resources migrate between masters under load (`MOVED`, `ASK` and
//! `TRYAGAIN` followed).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlease_core::{ReleaseOutcome, Retry};

use super::cases::{connect, contention_options, eventually, fenced_counter, lock, ms, ok, release};
use super::{HolderLog, LockSpec, Options, Subject};
use crate::{RedisCluster, Reply, key_slot};

/// `n` clusters of 3 masters with a replica each, started side by side.
fn clusters(n: usize) -> Vec<RedisCluster> {
    std::thread::scope(|s| {
        let started: Vec<_> =
            (0..n).map(|_| s.spawn(|| RedisCluster::builder().masters(3).replicas(1).start())).collect();
        started.into_iter().map(|h| h.join().expect("a cluster started")).collect()
    })
}

/// Whether someone listens on the sharded `channel` on `node` (`PUBSUB SHARDNUMSUB`).
fn listened(node: &crate::Node, channel: &str) -> bool {
    match node.conn().and_then(|mut c| c.cmd(&["PUBSUB", "SHARDNUMSUB", channel])) {
        Ok(Reply::Array(Some(items))) => matches!(items.get(1), Some(Reply::Int(n)) if *n > 0),
        other => panic!("PUBSUB SHARDNUMSUB {channel}: {other:?}"),
    }
}

/// A Redlock of three clusters: each node is seen as a cluster of 3 masters covering every
/// slot; 24 locks held at once are on every master of every cluster; 8 tasks keep a counter
/// under one lock with fencing tokens that increase; a waiter with a 5 s retry delay is woken
/// by the release within 2 s; a semaphore of 2 and a read lock behave as on standalone nodes.
pub fn cluster_locks<S: Subject>() {
    const TASKS: usize = 8;
    const CYCLES: usize = 10;
    let clusters = clusters(3);
    let urls: Vec<String> = clusters.iter().map(RedisCluster::seed_url).collect();
    let log = Arc::new(HolderLog::new());
    let counter = Arc::new(AtomicU64::new(0));
    let ttl = Duration::from_secs(10);
    S::block_on(async {
        let client = connect::<S>(urls.clone(), contention_options()).await;
        let health = ok::<S, _>(S::health(&client).await, "health");
        for n in &health.nodes {
            let c =
                n.cluster.as_ref().unwrap_or_else(|| panic!("[{}] {} is seen as a cluster: {health}", S::NAME, n.addr));
            assert_eq!((c.masters.len(), c.covered), (3, 16384), "[{}] {health}", S::NAME);
        }

        let mut held = Vec::new();
        for i in 0..24 {
            held.push(lock::<S>(&client, LockSpec::new(&format!("job:{i}"), ttl)).await);
        }
        // Each lock returned at a quorum of clusters: the last cluster's SETs may still be on
        // their way.
        let spread = || {
            clusters.iter().all(|c| c.keys_per_master().iter().all(|keys| keys.iter().any(|k| k.starts_with("{job:"))))
        };
        eventually::<S>(Duration::from_secs(3), "every master of every cluster holds some of the 24 locks", spread)
            .await;
        for g in held {
            assert_eq!(release::<S>(g).await.outcome, ReleaseOutcome::Released);
        }

        fenced_counter::<S>(&client, (&log, &counter), TASKS, CYCLES, ttl, Duration::from_micros(300)).await;

        // Wake-ups: the waiter retries only every 5 s, so the lock comes to it by the message.
        let slow =
            Options { retry: Retry::new(1000, Duration::from_secs(5), Duration::from_secs(5)), ..Options::default() };
        let waiting = connect::<S>(urls.clone(), slow).await;
        let first = lock::<S>(&client, LockSpec::new("woken", ttl)).await;
        let waiter = S::spawn(async move {
            let guard = lock::<S>(&waiting, LockSpec::new("woken", ttl).wait(Duration::from_secs(20))).await;
            (Instant::now(), release::<S>(guard).await)
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        // Sharded: on the master that serves the slot of `{woken}`, the key's cluster form.
        let on_slot = |c: &RedisCluster| listened(c.master(c.master_of_key("{woken}")), "redlease:wake:{woken}");
        while !clusters.iter().all(on_slot) {
            assert!(Instant::now() < deadline, "[{}] the waiter never subscribed on every cluster", S::NAME);
            S::sleep(ms(10)).await;
        }
        S::sleep(ms(100)).await;
        let released = Instant::now();
        release::<S>(first).await;
        let (got, _) = waiter.await;
        assert!(got - released < Duration::from_secs(2), "[{}] woken {:?} after the release", S::NAME, got - released);

        let sem = LockSpec::new("pool", ttl).semaphore(2, 1);
        let a = lock::<S>(&client, sem.clone()).await;
        let b = lock::<S>(&client, sem.clone()).await;
        assert!(S::lock(&client, sem.once()).await.is_err(), "[{}] a third permit of 2", S::NAME);
        release::<S>(a).await;
        release::<S>(b).await;
        let r1 = lock::<S>(&client, LockSpec::new("doc", ttl).shared()).await;
        let r2 = lock::<S>(&client, LockSpec::new("doc", ttl).shared()).await;
        assert!(
            S::lock(&client, LockSpec::new("doc", ttl).once()).await.is_err(),
            "[{}] a writer beside readers",
            S::NAME
        );
        release::<S>(r1).await;
        release::<S>(r2).await;
        S::close(&client).await;
    });
    assert_eq!(counter.load(Ordering::SeqCst), (TASKS * CYCLES) as u64, "[{}] lost updates", S::NAME);
    log.assert_no_overlap();
    log.assert_fences_increase();
    for c in &clusters {
        c.assert_no_leaks();
    }
}

/// One cluster of 3 masters as the only node: 8 tasks lock 4 resources and keep a counter
/// each, while the slots of those resources move from master to master in two phases (the
/// keys one by one in between, so that requests meet `ASK`, `MOVED` and `TRYAGAIN`). No
/// update is lost, no two holders overlap, redirects were followed, no key is left without a
/// TTL.
pub fn cluster_resharding<S: Subject>() {
    const TASKS: usize = 8;
    const RESOURCES: [&str; 4] = ["acct:0", "acct:1", "acct:2", "acct:3"];
    let cluster = RedisCluster::builder().masters(3).replicas(0).start();
    let log = Arc::new(HolderLog::new());
    let counters: Arc<Vec<AtomicU64>> = Arc::new(RESOURCES.iter().map(|_| AtomicU64::new(0)).collect());
    let cycles = Arc::new(AtomicUsize::new(0));
    let stop = AtomicBool::new(false);
    let (moves, redirects) = std::thread::scope(|s| {
        let mover = s.spawn(|| {
            let mut moves = 0;
            while !stop.load(Ordering::SeqCst) || moves < RESOURCES.len() {
                let r = RESOURCES[moves % RESOURCES.len()];
                let slot = key_slot(&format!("{{{r}}}"));
                let to = (cluster.master_of_slot(slot) + 1) % 3;
                let migration = cluster.begin_migration(slot, to);
                std::thread::sleep(ms(20));
                migration.move_keys();
                std::thread::sleep(ms(20));
                migration.finish();
                moves += 1;
            }
            moves
        });
        let redirects = S::block_on(async {
            let client = connect::<S>(vec![cluster.seed_url()], contention_options()).await;
            let until = Instant::now() + Duration::from_secs(3);
            let mut tasks = Vec::new();
            for t in 0..TASKS {
                let (client, log, counters, cycles) = (client.clone(), log.clone(), counters.clone(), cycles.clone());
                tasks.push(S::spawn(async move {
                    let mut c = 0;
                    while Instant::now() < until {
                        let i = (t + c) % RESOURCES.len();
                        let spec = LockSpec::new(RESOURCES[i], Duration::from_secs(5)).wait(Duration::from_secs(60));
                        let guard = lock::<S>(&client, spec).await;
                        let acquired = Instant::now();
                        let v = counters[i].load(Ordering::SeqCst);
                        S::sleep(Duration::from_micros(300)).await;
                        counters[i].store(v + 1, Ordering::SeqCst);
                        let valid = S::valid_until(&guard);
                        let released_at = Instant::now();
                        release::<S>(guard).await;
                        log.record(RESOURCES[i], &format!("task {t} cycle {c}"), acquired, valid, released_at, None);
                        cycles.fetch_add(1, Ordering::SeqCst);
                        c += 1;
                    }
                }));
            }
            for task in tasks {
                task.await;
            }
            let health = ok::<S, _>(S::health(&client).await, "health");
            S::close(&client).await;
            health.nodes[0].cluster.as_ref().map_or(0, |c| c.redirects)
        });
        stop.store(true, Ordering::SeqCst);
        (mover.join().expect("the slot mover"), redirects)
    });
    let total: u64 = counters.iter().map(|c| c.load(Ordering::SeqCst)).sum();
    assert_eq!(total, cycles.load(Ordering::SeqCst) as u64, "[{}] lost updates", S::NAME);
    assert!(moves >= RESOURCES.len(), "[{}] only {moves} slot moves", S::NAME);
    assert!(redirects > 0, "[{}] no redirect was followed over {moves} slot moves", S::NAME);
    log.assert_no_overlap();
    cluster.assert_no_leaks();
}
