//! The smol adapter against real `redis-server` processes: what the shared conformance suite
//! (run under smol and async-std in `tests/`) does not cover — the driver future's life cycle,
//! the own-thread driver with no executor at all, and host names.

use std::time::{Duration, Instant};

use futures_lite::future;
use redlease_smol::{Client, Config, ReleaseOutcome};
use redlease_tests::Servers;

const TTL: Duration = Duration::from_secs(10);

/// smol's timer as a function.
async fn sleep(d: Duration) {
    smol::Timer::after(d).await;
}

/// Wait (5 s at most, sleeping with `sleep`) until no lock key is left on any node.
async fn every_key_deleted<F: std::future::Future>(servers: &Servers, sleep: impl Fn(Duration) -> F) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !servers.lock_keys().is_empty() {
        assert!(Instant::now() < deadline, "keys left after 5 s: {:?}", servers.lock_keys());
        sleep(Duration::from_millis(10)).await;
    }
}

/// The driver future finishes once every client and guard is gone, after flushing the
/// release that a dropped guard asked for.
#[test]
fn driver_future_ends_after_the_last_handle() {
    let servers = Servers::start(3);
    smol::block_on(async {
        let (client, driver) = Client::with_driver(Config::from_urls(servers.urls()).unwrap()).await.unwrap();
        let driver = smol::spawn(driver);
        // `with_driver` returns at the quorum; a lock taken while the third link is still
        // connecting is granted by two nodes and never written to the third. Wait for all three.
        redlease_tests::all_ready(|| client.health(), sleep).await;
        let guard = client.lock("dropped", TTL).await.expect("lock");
        // The lock is granted at the quorum; the third node's write may still be on its way.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while servers.lock_keys().len() < 3 && std::time::Instant::now() < deadline {
            smol::Timer::after(Duration::from_millis(10)).await;
        }
        assert_eq!(servers.lock_keys().len(), 3, "every node got the lock");
        drop(client);
        drop(guard);
        let ended = future::or(
            async {
                driver.await;
                true
            },
            async {
                smol::Timer::after(Duration::from_secs(5)).await;
                false
            },
        )
        .await;
        assert!(ended, "the driver ends within 5 s");
        // The release was written before the driver ended; the nodes apply it a moment later
        // (within 5 s: the keys' own TTL is 10 s).
        every_key_deleted(&servers, sleep).await;
    });
}

/// `Client::connect` runs the driver on a thread of its own, so it works with no executor at
/// all (here `futures_lite::future::block_on`), and resolves host names off the caller's thread.
#[test]
fn own_thread_driver_needs_no_executor_and_resolves_names() {
    let servers = Servers::start(3);
    let urls: Vec<String> = servers.nodes().iter().map(|n| format!("redis://localhost:{}", n.port())).collect();
    future::block_on(async {
        let client = Client::connect(&urls).await.expect("connect");
        let mut guard = client.lock("threaded", TTL).await.expect("lock via localhost");
        let before = guard.valid_until();
        let after = guard.extend(TTL * 2).await.expect("extend");
        assert!(after > before && after == guard.valid_until());
        assert_eq!(guard.release().await.unwrap().outcome, ReleaseOutcome::Released);
        // Released at a quorum: the last node's delete may still be on its way.
        every_key_deleted(&servers, sleep).await;
    });
}

/// Many async-std tasks share one client whose driver runs on async-std's executor.
#[test]
fn many_tasks_share_one_client_on_async_std() {
    let servers = Servers::start(3);
    async_std::task::block_on(async {
        let (client, driver) = Client::with_driver(Config::from_urls(servers.urls()).unwrap()).await.unwrap();
        async_std::task::spawn(driver);
        let started = Instant::now();
        let tasks: Vec<_> = (0..32)
            .map(|i| {
                let client = client.clone();
                async_std::task::spawn(async move {
                    let guard = client.lock(&format!("task:{i}"), TTL).await.expect("lock");
                    guard.release().await.expect("release").outcome
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await, ReleaseOutcome::Released);
        }
        assert!(started.elapsed() < Duration::from_secs(5), "32 lock cycles took {:?}", started.elapsed());
        // Each release returned at a quorum: the last node's delete may still be on its way.
        every_key_deleted(&servers, async_std::task::sleep).await;
    });
}
