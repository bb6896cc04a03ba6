//! The tokio adapter against real `redis-server` processes: what the shared conformance suite
//! (in `tests/`) does not cover — both tokio runtime flavours, the driver's life cycle, runtime
//! shutdown, and abandoned acquisitions.

use std::time::{Duration, Instant};

use redlease_tests::Servers;
use redlease_tokio::{Client, Config, Error, LockOptions, LostReason, ReleaseOutcome};
use tokio::runtime::{Builder, Runtime};

const TTL: Duration = Duration::from_secs(10);

fn runtime(multi_thread: bool) -> Runtime {
    let mut builder = if multi_thread { Builder::new_multi_thread() } else { Builder::new_current_thread() };
    builder.worker_threads(2).enable_all().build().expect("a tokio runtime")
}

/// Poll `check` every 10 ms until it holds; panic after `timeout`.
async fn eventually(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "not within {timeout:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Many tasks, one client, one connection per node: every lock is taken and released, on a
/// current-thread and on a multi-thread runtime.
#[test]
fn many_tasks_share_one_client_on_both_flavours() {
    let servers = Servers::start(3);
    for multi_thread in [false, true] {
        runtime(multi_thread).block_on(async {
            let client = Client::connect(servers.urls()).await.expect("connect");
            let tasks: Vec<_> = (0..32)
                .map(|i| {
                    let client = client.clone();
                    tokio::spawn(async move {
                        let guard = client.lock(&format!("task:{i}"), TTL).await.expect("lock");
                        assert_eq!(guard.token().len(), 40);
                        assert!(guard.valid_until() > Instant::now());
                        guard.release().await.expect("release").outcome
                    })
                })
                .collect();
            for task in tasks {
                assert_eq!(task.await.expect("task"), ReleaseOutcome::Released);
            }
            // Each release returned at a quorum: the last node's delete may still be on its way.
            eventually(Duration::from_secs(5), "every key deleted", || servers.lock_keys().is_empty()).await;
        });
    }
}

/// The driver finishes once every client and guard is gone, after flushing the release that
/// a dropped guard asked for.
#[test]
fn driver_ends_after_the_last_handle_and_finishes_releases() {
    let servers = Servers::start(3);
    runtime(true).block_on(async {
        let (client, driver) = Client::with_driver(Config::from_urls(servers.urls()).unwrap()).await.unwrap();
        let driver = tokio::spawn(driver);
        // `with_driver` returns at the quorum; a lock taken while the third link is still
        // connecting is granted by two nodes and never written to the third. Wait for all three.
        redlease_tests::all_ready(|| client.health(), tokio::time::sleep).await;
        let guard = client.lock("dropped", TTL).await.expect("lock");
        // The lock is granted at the quorum; the third node's write may still be on its way.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while servers.lock_keys().len() < 3 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(servers.lock_keys().len(), 3, "every node got the lock");
        drop(client);
        drop(guard);
        tokio::time::timeout(Duration::from_secs(5), driver)
            .await
            .expect("the driver ends within 5 s")
            .expect("the driver task does not panic");
        // The release was written before the driver ended; the nodes apply it a moment later
        // (within 5 s: the keys' own TTL is 10 s).
        eventually(Duration::from_secs(5), "the dropped guard's release flushed", || servers.lock_keys().is_empty())
            .await;
    });
}

/// Script calls (`EVALSHA` + `EVAL`) node `i` has served so far.
fn script_calls(servers: &Servers, i: usize) -> u64 {
    let mut conn = servers.node(i).conn().expect("connect to node");
    let info = conn.cmd(&["INFO", "commandstats"]).expect("INFO").as_text().unwrap_or_default();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum()
}

/// An acquisition whose future is dropped (here by a timeout) is cancelled: it stops retrying
/// at once and does not take the lock later, when the holder lets go.
#[test]
fn dropped_acquisition_is_cancelled() {
    let servers = Servers::start(3);
    runtime(true).block_on(async {
        let holder = Client::connect(servers.urls()).await.unwrap();
        let waiter = Client::connect(servers.urls()).await.unwrap();
        // Node 0's script calls tell whether the waiter still retries: it must reach node 0.
        for client in [&holder, &waiter] {
            redlease_tests::all_ready(|| client.health(), tokio::time::sleep).await;
        }
        let guard = holder.lock("contended", TTL).await.expect("lock");
        let attempt = waiter.lock_with(LockOptions::new("contended", TTL).wait(Duration::from_secs(30)));
        assert!(tokio::time::timeout(Duration::from_millis(300), attempt).await.is_err(), "still waiting");
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A waiter still retrying would run the acquire script every 20–200 ms.
        let before = script_calls(&servers, 0);
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(script_calls(&servers, 0), before, "the abandoned acquisition kept retrying");

        let token = guard.token().to_owned();
        assert_eq!(guard.release().await.unwrap().outcome, ReleaseOutcome::Released);
        // Released at a quorum: once the last node's delete is there too, nobody takes it later.
        eventually(Duration::from_secs(5), "the release on every node", || servers.lock_keys().is_empty()).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(servers.lock_keys().is_empty(), "the abandoned waiter took the lock: {:?}", servers.lock_keys());
        let again = waiter.try_lock("contended", TTL).await.expect("free again");
        assert_ne!(again.token(), token);
        again.release().await.unwrap();
    });
}

/// When the runtime shuts down, the driver goes with it: the holder's lost signal fires (nobody
/// extends the lock any more) and later calls report `Closed`.
#[test]
fn runtime_shutdown_fires_lost_and_closes() {
    let servers = Servers::start(3);
    let rt = runtime(true);
    let (mut guard, lost) = rt.block_on(async {
        let client = Client::connect(servers.urls()).await.unwrap();
        let guard =
            client.lock_with(LockOptions::new("orphan", Duration::from_secs(2)).auto_extend(true)).await.expect("lock");
        let lost = guard.lost();
        assert!(!lost.is_lost());
        (guard, lost)
    });
    drop(rt);
    assert!(lost.is_lost(), "the lost signal fires when the driver is dropped");
    assert_eq!(lost.reason(), Some(LostReason::Stopped));
    runtime(false).block_on(async {
        assert!(matches!(guard.extend(TTL).await, Err(Error::Closed)));
        lost.wait().await; // returns at once
        // Nobody releases it now: the key expires with its TTL.
        eventually(Duration::from_secs(5), "the orphaned key expires", || servers.lock_keys().is_empty()).await;
    });
    drop(guard);
}

/// `connect` returns promptly when a node is down; that node reconnects by itself once it is up.
#[test]
fn a_node_down_at_connect_time_joins_later() {
    let servers = Servers::start(3);
    servers.node(2).kill();
    runtime(true).block_on(async {
        let mut config = Config::from_urls(servers.urls()).unwrap();
        config.reconnect_max = Duration::from_millis(100);
        let started = Instant::now();
        let client = Client::with_config(config).await.expect("connect with a node down");
        assert!(started.elapsed() < Duration::from_secs(2), "connect took {:?}", started.elapsed());
        let guard = client.lock("partial", TTL).await.expect("2 of 3 nodes are a quorum");
        guard.release().await.unwrap();

        servers.node(2).restart(false);
        // Each lock goes to every connected node: node 2 holds it once it has reconnected.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let guard = client.lock("partial", TTL).await.expect("lock");
            let on_node_2 = servers.node(2).conn().and_then(|mut c| c.get("partial")).ok().flatten();
            let reached = on_node_2.as_deref() == Some(guard.token());
            guard.release().await.unwrap();
            if reached {
                break;
            }
            assert!(Instant::now() < deadline, "node 2 was not used again within 5 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// A cancelled `extend` future (its caller gave up, e.g. a timeout around it) leaves the guard
/// usable: the next `extend` is not refused as busy with the abandoned one.
#[test]
fn a_cancelled_extend_leaves_the_guard_usable() {
    let servers = Servers::start(3);
    // Current-thread: the driver cannot run while the extension is polled, so its answer
    // cannot be there after one poll (on a multi-thread runtime a loaded machine may stall this
    // thread between the send and the check long enough for the answer to arrive).
    runtime(false).block_on(async {
        let client = Client::connect(servers.urls()).await.unwrap();
        let mut guard = client.lock("cancel-extend", TTL).await.expect("lock");
        // Poll an extension once (its command goes out), then drop it before its answer.
        {
            let mut abandoned = std::pin::pin!(guard.extend(Duration::from_secs(20)));
            let first = std::future::poll_fn(|cx| std::task::Poll::Ready(abandoned.as_mut().poll(cx))).await;
            assert!(first.is_pending(), "no answer can be there yet");
        }
        let asked = Instant::now();
        let until = guard.extend(Duration::from_secs(30)).await.expect("the guard is not left busy");
        assert!(until > asked + Duration::from_secs(25), "the new extension's TTL applies");
        assert_eq!(guard.release().await.unwrap().outcome, ReleaseOutcome::Released);
    });
}

/// Made outside any tokio runtime (another executor, or none), the client says so instead of
/// panicking in tokio's reactor.
#[test]
fn connect_outside_a_tokio_runtime_is_an_error_not_a_panic() {
    let servers = Servers::start(1);
    let mut connect = std::pin::pin!(Client::connect(servers.urls()));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    // Refused at the first poll, before anything touches tokio.
    let std::task::Poll::Ready(result) = connect.as_mut().poll(&mut cx) else { panic!("pending outside a runtime") };
    let err = result.unwrap_err();
    assert!(matches!(err, Error::Runtime(_)), "{err:?}");
    assert!(err.to_string().contains("no tokio runtime"), "{err}");
    // It speaks of the client a facade user made, whichever crate path they wrote.
    assert!(!err.to_string().contains("redlease_tokio"), "{err}");
}
