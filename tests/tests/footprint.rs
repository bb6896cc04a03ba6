//! What a client retains stays bounded through a long contended run, and comes back to idle
//! once the work ends: on standalone nodes, on nodes whose grants wait for a replica, and on a
//! Redis Cluster node. For each shape a client of its own runs four tasks that wait for each
//! other for a few seconds: a mutex, permits of a semaphore of 3 (one or two at a time), and
//! read and write locks of one name (some write locks downgraded); then one client whose tasks
//! take each shape in turn. Meanwhile each client's footprint (`Health::footprint`) is sampled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redlease_core::{Config, Footprint, LockOptions};
use redlease_tests::{RedisCluster, Servers};

/// Tasks per client.
const TASKS: usize = 4;
const RUN: Duration = Duration::from_secs(3);
const TTL: Duration = Duration::from_secs(5);

/// The shapes, one client each; `Mixed`: every task takes each shape in turn, so lock records
/// are reused across shapes.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Mutex,
    Semaphore,
    ReadWrite,
    Mixed,
}

/// The largest of each figure over `samples`.
fn most(samples: &[Footprint]) -> Footprint {
    let mut m = Footprint::default();
    for s in samples {
        m.locks = m.locks.max(s.locks);
        m.lock_records = m.lock_records.max(s.lock_records);
        m.pending = m.pending.max(s.pending);
        m.unsent = m.unsent.max(s.unsent);
        m.kept = m.kept.max(s.kept);
        m.kept_bytes = m.kept_bytes.max(s.kept_bytes);
        m.waiters = m.waiters.max(s.waiters);
        m.channels = m.channels.max(s.channels);
        m.subscriptions = m.subscriptions.max(s.subscriptions);
        m.events = m.events.max(s.events);
    }
    m
}

/// One task's work until `stop`; returns the locks it took.
async fn work(client: redlease_tokio::Client, shape: Shape, task: usize, stop: Arc<AtomicBool>) -> u32 {
    let mut done = 0;
    while !stop.load(Ordering::SeqCst) {
        let this = match shape {
            Shape::Mixed => [Shape::Mutex, Shape::Semaphore, Shape::ReadWrite][(task + done as usize) % 3],
            other => other,
        };
        let options = match this {
            Shape::Semaphore => LockOptions::new("soak-pool", TTL).semaphore(3).permits(1 + (done % 2)),
            Shape::ReadWrite => LockOptions::new("soak-doc", TTL).shared(task % 2 == 0),
            _ => LockOptions::new("soak-mutex", TTL),
        };
        let mut guard = match client.lock_with(options.wait(Duration::from_secs(10))).await {
            Ok(guard) => guard,
            // The client's driver is gone (it would be a bug): stop rather than spin.
            Err(redlease_tokio::Error::Closed) => break,
            Err(_) => continue,
        };
        tokio::time::sleep(Duration::from_millis(2)).await;
        if matches!(this, Shape::ReadWrite) && task % 2 == 1 && done % 3 == 0 {
            let _ = guard.downgrade().await;
        }
        let _ = guard.release().await;
        done += 1;
    }
    done
}

/// Run the contended workload over `config`, a client per shape, and check each footprint:
/// bounded while it runs, idle after.
fn soak(config: Config, kind: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        for shape in [Shape::Mutex, Shape::Semaphore, Shape::ReadWrite, Shape::Mixed] {
            let client = redlease_tokio::Client::with_config(config.clone()).await.unwrap();
            redlease_tests::all_ready(|| client.health(), tokio::time::sleep).await;
            let stop = Arc::new(AtomicBool::new(false));
            let tasks: Vec<_> =
                (0..TASKS).map(|t| tokio::spawn(work(client.clone(), shape, t, stop.clone()))).collect();
            let started = Instant::now();
            let mut samples = Vec::new();
            while started.elapsed() < RUN {
                samples.push(client.health().await.unwrap().footprint);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            stop.store(true, Ordering::SeqCst);
            let mut cycles = 0;
            for t in tasks {
                cycles += t.await.unwrap();
            }
            let m = most(&samples);
            println!("{kind}, {shape:?}: {cycles} locks; the most retained at once: {m}");
            assert!(cycles > 20, "{kind}, {shape:?}: only {cycles} locks");
            // Bounded by the work in flight, not by how long it ran: a lock per task, and the
            // releases still reading their last replies (up to a node timeout), a few requests
            // each.
            assert!(m.locks <= 4 * TASKS && m.lock_records <= 4 * TASKS, "{kind}, {shape:?}: {m}");
            assert!(m.pending <= 32 * TASKS && m.kept <= 8 * TASKS && m.channels <= 8, "{kind}, {shape:?}: {m}");
            // Once the work ends: back to idle (the last replies may still be on their way).
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let fp = client.health().await.unwrap().footprint;
                if fp.is_idle() {
                    break;
                }
                assert!(Instant::now() < deadline, "{kind}, {shape:?}: not idle 5 s after the work ended: {fp}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            client.close().await;
        }
    });
}

#[test]
fn standalone_nodes_keep_the_footprint_bounded() {
    let servers = Servers::start(3);
    soak(Config::from_urls(servers.urls()).unwrap().node_timeout(Duration::from_millis(500)), "standalone");
    servers.assert_no_leaks();
}

#[test]
fn nodes_whose_grants_wait_for_a_replica_keep_the_footprint_bounded() {
    let servers = Servers::builder().nodes(3).replicas(1).start();
    let mut config = Config::from_urls(servers.urls()).unwrap().node_timeout(Duration::from_millis(500));
    config.nodes = config.nodes.into_iter().map(|n| n.min_replicas(1, Duration::from_millis(100))).collect();
    soak(config, "replicas");
}

#[test]
fn a_redis_cluster_node_keeps_the_footprint_bounded() {
    let cluster = RedisCluster::builder().masters(3).replicas(0).start();
    soak(Config::from_urls([cluster.seed_url()]).unwrap().node_timeout(Duration::from_millis(500)), "Redis Cluster");
}
