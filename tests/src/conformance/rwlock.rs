//! The reader-writer lock's cases: readers share and exclude writers (a plain lock is the
//! write lock), a waiting writer stops new readers and gets the key when they leave, a crashed
//! reader holds writers off for its own TTL only, downgrade, the writer epoch under fencing,
//! a sole reader's plain `SET NX` and its conversion when a second reader joins, and mixed
//! readers and writers under contention.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use redlease_core::{AcquireError, LockHealth, LockShape, ReleaseOutcome, Retry};

use super::cases::{connect, eventually, lock, ms, ok, queue_lengths, release, values};
use super::{Failure, FailureKind, LockSpec, Options, Subject};
use crate::{Reply, Servers};

fn held(f: &Failure) -> bool {
    matches!(f.kind, FailureKind::Acquire(AcquireError::Held { .. }))
}

/// The elements of an array reply, as text.
fn texts(reply: Reply) -> Vec<String> {
    match reply {
        Reply::Array(Some(items)) => items.iter().filter_map(Reply::as_text).collect(),
        _ => Vec::new(),
    }
}

/// The readers' tokens on each node (its sorted set `redlease:readers:KEY`).
fn readers(servers: &Servers, key: &str) -> Vec<Vec<String>> {
    servers
        .nodes()
        .iter()
        .map(|n| {
            let mut c = n.conn().expect("a connection to a node");
            let set = format!("redlease:readers:{key}");
            let reply = c.checked(&["ZRANGE", set.as_str(), "0", "-1"]).expect("ZRANGE");
            texts(reply)
        })
        .collect()
}

/// Readers share; writers wait for them, have preference over new readers, and are woken by
/// the last reader; a writer excludes readers; downgrade lets readers in at once; a reader's
/// fencing token is the writer epoch.
pub fn rw_lock<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let slow = Retry::new(3, Duration::from_secs(5), Duration::from_secs(5));
        let waiter = connect::<S>(servers.urls(), Options { retry: slow, ..Options::default() }).await;
        let ttl = Duration::from_secs(10);
        let read = || LockSpec::new("catalog", ttl).shared();
        let write = || LockSpec::new("catalog", ttl);
        let reading = |l: &&LockHealth| l.shape == LockShape::Shared && l.resources == ["catalog"];

        let r1 = lock::<S>(&client, read().once()).await;
        let r2 = lock::<S>(&client, read().once()).await;
        eventually::<S>(Duration::from_secs(3), "both readers on every node, the key shared", || {
            let shared = values(&servers, "catalog")
                .iter()
                .all(|v| matches!(v, Some((Some(v), p)) if v == ":readers" && *p > 0));
            shared && readers(&servers, "catalog").iter().all(|r| r.len() == 2)
        })
        .await;
        // The client's health view shows both as read locks of the key.
        let h = ok::<S, _>(S::health(&client).await, "health");
        assert_eq!(h.locks.iter().filter(reading).count(), 2, "[{}] two read locks in the view:\n{h}", S::NAME);
        assert!(h.to_string().contains("catalog (read)  held"), "[{}]\n{h}", S::NAME);
        let refused = S::lock(&client, write().once())
            .await
            .err()
            .unwrap_or_else(|| panic!("[{}] a writer among readers", S::NAME));
        assert!(held(&refused), "[{}] {refused}", S::NAME);
        // A writer that waits, then gives up, takes its mark back: readers join again.
        let gave_up = S::lock(&client, write().wait(ms(300))).await.err();
        let gave_up = gave_up.unwrap_or_else(|| panic!("[{}] a writer among readers", S::NAME));
        assert!(matches!(gave_up.kind, FailureKind::WaitTimeout { .. }), "[{}] {gave_up}", S::NAME);
        let joined = lock::<S>(&client, read().once()).await;
        assert_eq!(release::<S>(joined).await.outcome, ReleaseOutcome::Released);

        // A waiting writer: from its first refusal on, no new reader joins.
        let writing = {
            let (waiter, spec) = (waiter.clone(), write().wait(Duration::from_secs(20)));
            S::spawn(async move { S::lock(&waiter, spec).await })
        };
        eventually::<S>(Duration::from_secs(3), "the writer's mark on a quorum", || {
            values(&servers, "catalog").iter().flatten().filter(|(v, _)| v.as_deref() == Some(":readers:")).count() >= 2
        })
        .await;
        let late = S::lock(&client, read().once())
            .await
            .err()
            .unwrap_or_else(|| panic!("[{}] a reader overtook a waiting writer", S::NAME));
        assert!(held(&late), "[{}] {late}", S::NAME);
        assert_eq!(release::<S>(r1).await.outcome, ReleaseOutcome::Released);
        let released = Instant::now();
        assert_eq!(release::<S>(r2).await.outcome, ReleaseOutcome::Released);
        let mut w = ok::<S, _>(writing.await, "the writer after the readers left");
        assert!(released.elapsed() < Duration::from_secs(2), "[{}] the last reader did not wake the writer", S::NAME);
        let refused = S::lock(&client, read().once())
            .await
            .err()
            .unwrap_or_else(|| panic!("[{}] a reader beside a writer", S::NAME));
        assert!(held(&refused), "[{}] {refused}", S::NAME);

        // Downgrade: the writer reads, a reader joins at once, a writer still waits.
        ok::<S, _>(S::downgrade(&mut w).await, "downgrade");
        let h = ok::<S, _>(S::health(&waiter).await, "health");
        assert_eq!(h.locks.iter().filter(reading).count(), 1, "[{}] downgraded, a read lock:\n{h}", S::NAME);
        let r3 = lock::<S>(&client, read().once()).await;
        let refused = S::lock(&client, write().once())
            .await
            .err()
            .unwrap_or_else(|| panic!("[{}] a writer beside readers", S::NAME));
        assert!(held(&refused), "[{}] {refused}", S::NAME);
        for g in [w, r3] {
            assert_eq!(release::<S>(g).await.outcome, ReleaseOutcome::Released);
        }
        eventually::<S>(Duration::from_secs(3), "nothing left of the lock", || {
            values(&servers, "catalog").iter().flatten().all(|(v, _)| v.is_none())
                && readers(&servers, "catalog").iter().all(Vec::is_empty)
        })
        .await;

        // Fencing: a reader's token is the epoch of the last writer.
        let fenced = lock::<S>(&client, write().fencing().once()).await;
        let epoch = S::fence(&fenced).unwrap_or_else(|| panic!("[{}] a fenced writer has a token", S::NAME));
        assert_eq!(release::<S>(fenced).await.outcome, ReleaseOutcome::Released);
        let reader = lock::<S>(&client, read().fencing().once()).await;
        assert_eq!(S::fence(&reader), Some(epoch), "[{}] the reader's epoch", S::NAME);
        assert_eq!(release::<S>(reader).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// A reader that may retry takes a free key for itself alone (`:readers:TOKEN`, no readers'
/// set) and extends it alone; a second reader turns it into `:readers` and the set of both,
/// the first scored by the key's expiry; a writer waiting behind a sole reader marks its
/// value, stops new readers and is handed the key when that reader leaves.
pub fn rw_sole_reader<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let slow = Retry::new(3, Duration::from_secs(5), Duration::from_secs(5));
        let waiter = connect::<S>(servers.urls(), Options { retry: slow, ..Options::default() }).await;
        let ttl = Duration::from_secs(10);
        let read = || LockSpec::new("shelf", ttl).shared().wait(Duration::from_secs(5));
        let servers = &servers;
        let each_value = |what: &dyn Fn(&str, i64) -> bool| {
            values(servers, "shelf").iter().all(|v| matches!(v, Some((Some(v), p)) if what(v, *p)))
        };

        let mut a = lock::<S>(&client, read()).await;
        let sole = format!(":readers:{}", S::token(&a));
        eventually::<S>(Duration::from_secs(3), "the first reader alone on every node, no set", || {
            each_value(&|v, p| v == sole && p > 0) && readers(servers, "shelf").iter().all(Vec::is_empty)
        })
        .await;
        ok::<S, _>(S::extend(&mut a, Duration::from_secs(20)).await, "a sole reader extends");
        eventually::<S>(Duration::from_secs(3), "the sole reader's key extended", || {
            each_value(&|v, p| v == sole && p > 10_000)
        })
        .await;

        let b = lock::<S>(&client, read()).await;
        let mut both = vec![S::token(&a), S::token(&b)];
        both.sort();
        eventually::<S>(Duration::from_secs(3), "both readers in the set, the key shared", || {
            let sets = readers(servers, "shelf");
            each_value(&|v, p| v == ":readers" && p > 10_000)
                && sets.into_iter().all(|mut r| {
                    r.sort();
                    r == both
                })
        })
        .await;
        // The first reader is scored by the key's expiry (20 s), the second by its TTL (10 s).
        for node in servers.nodes() {
            let mut c = node.conn().expect("a connection to a node");
            let set = "redlease:readers:shelf";
            let scored = texts(c.checked(&["ZRANGE", set, "0", "-1", "WITHSCORES"]).expect("ZRANGE"));
            let score = |t: &str| {
                let at = scored.iter().position(|m| m == t).expect("a member");
                scored[at + 1].parse::<f64>().expect("a score")
            };
            let gap = score(&S::token(&a)) - score(&S::token(&b));
            assert!((9_000.0..=10_100.0).contains(&gap), "[{}] the first reader's score: {scored:?}", S::NAME);
        }
        for g in [a, b] {
            assert_eq!(release::<S>(g).await.outcome, ReleaseOutcome::Released);
        }
        eventually::<S>(Duration::from_secs(3), "nothing left of the readers", || {
            values(servers, "shelf").iter().flatten().all(|(v, _)| v.is_none())
                && readers(servers, "shelf").iter().all(Vec::is_empty)
        })
        .await;

        // A writer behind a sole reader: it marks the value, no reader joins, and it is handed
        // the key when the reader leaves.
        let c = lock::<S>(&client, read()).await;
        let marked = format!(":readers:{}:", S::token(&c));
        let writing = {
            let (waiter, spec) = (waiter.clone(), LockSpec::new("shelf", ttl).wait(Duration::from_secs(20)));
            S::spawn(async move { S::lock(&waiter, spec).await })
        };
        eventually::<S>(Duration::from_secs(3), "the writer's mark on a quorum", || {
            values(servers, "shelf").iter().flatten().filter(|(v, _)| v.as_deref() == Some(marked.as_str())).count()
                >= 2
        })
        .await;
        for spec in [read().once(), read().wait(ms(300))] {
            let late = S::lock(&client, spec)
                .await
                .err()
                .unwrap_or_else(|| panic!("[{}] a reader overtook a writer waiting for a sole reader", S::NAME));
            assert!(held(&late) || matches!(late.kind, FailureKind::WaitTimeout { .. }), "[{}] {late}", S::NAME);
        }
        let released = Instant::now();
        assert_eq!(release::<S>(c).await.outcome, ReleaseOutcome::Released);
        let w = ok::<S, _>(writing.await, "the writer after the sole reader left");
        assert!(released.elapsed() < Duration::from_secs(2), "[{}] the sole reader did not hand the key on", S::NAME);
        assert_eq!(release::<S>(w).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// Readers and writers that wait are served in the order they queued: a reader waiting on a
/// writer goes before a writer that came after it (neither kind starves), each within 2 s of
/// the release before it (with a 5 s retry delay: the release handed the key on).
pub fn rw_fair_order<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let slow =
            || Options { retry: Retry::new(3, Duration::from_secs(5), Duration::from_secs(5)), ..Options::default() };
        let (reader_client, writer_client) =
            (connect::<S>(servers.urls(), slow()).await, connect::<S>(servers.urls(), slow()).await);
        let ttl = Duration::from_secs(10);
        let w1 = lock::<S>(&client, LockSpec::new("queue-order", ttl).once()).await;
        let servers = &servers;
        // Granted at a quorum: wait until every node has the writer's key, so that the reader's
        // first attempt is refused and queues everywhere.
        eventually::<S>(Duration::from_secs(3), "the first writer's key on every node", || {
            let token = S::token(&w1);
            values(servers, "queue-order")
                .iter()
                .all(|v| matches!(v, Some((Some(v), _)) if redlease_core::holder_of(v).0 == token))
        })
        .await;
        // Each waiter's first attempt is refused and queues it on every node: the reader first,
        // then the writer.
        let queued = |n: i64, what: &'static str| {
            eventually::<S>(Duration::from_secs(3), what, move || {
                queue_lengths(servers, "redlease:queue:queue-order").iter().all(|&len| len == n)
            })
        };
        let reading = {
            let spec = LockSpec::new("queue-order", ttl).shared().wait(Duration::from_secs(20));
            S::spawn(async move { (S::lock(&reader_client, spec).await, Instant::now()) })
        };
        queued(1, "the reader queued on every node").await;
        let writing = {
            let spec = LockSpec::new("queue-order", ttl).wait(Duration::from_secs(20));
            S::spawn(async move { (S::lock(&writer_client, spec).await, Instant::now()) })
        };
        queued(2, "the writer queued behind it on every node").await;
        let released = Instant::now();
        assert_eq!(release::<S>(w1).await.outcome, ReleaseOutcome::Released);
        let (r, read_at) = reading.await;
        let r = ok::<S, _>(r, "the queued reader");
        assert!(read_at - released < Duration::from_secs(2), "[{}] the reader was not handed the key", S::NAME);
        S::sleep(ms(300)).await;
        let released = Instant::now();
        assert_eq!(release::<S>(r).await.outcome, ReleaseOutcome::Released);
        let (w2, write_at) = writing.await;
        let w2 = ok::<S, _>(w2, "the writer queued after the reader");
        assert!(write_at > read_at, "[{}] the writer that queued later went first", S::NAME);
        assert!(write_at - released < Duration::from_secs(2), "[{}] the last reader did not hand the key on", S::NAME);
        assert_eq!(release::<S>(w2).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// A reader that crashed (its entry left on the nodes, with a 1 s TTL) holds writers off until
/// its own TTL, not for as long as another reader keeps renewing.
pub fn rw_crashed_reader<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        // The crashed reader: what its acquisition left on every node.
        for node in servers.nodes() {
            let mut c = node.conn().expect("a connection to a node");
            let time = c.checked(&["TIME"]).expect("TIME");
            let parts = texts(time);
            let now_ms = parts[0].parse::<u64>().expect("seconds") * 1000 + parts[1].parse::<u64>().expect("µs") / 1000;
            let score = (now_ms + 1_000).to_string();
            c.checked(&["ZADD", "redlease:readers:ledger", score.as_str(), "crashed"]).expect("ZADD");
            c.checked(&["PEXPIRE", "redlease:readers:ledger", "1000"]).expect("PEXPIRE");
            c.checked(&["SET", "ledger", ":readers", "PX", "1000"]).expect("SET");
        }
        let mut reader = lock::<S>(&client, LockSpec::new("ledger", Duration::from_secs(2)).shared().once()).await;
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(2_500) {
            ok::<S, _>(S::extend(&mut reader, Duration::from_secs(2)).await, "the live reader renews");
            S::sleep(ms(300)).await;
        }
        assert_eq!(release::<S>(reader).await.outcome, ReleaseOutcome::Released);
        // The crashed reader's second is long past: the key is free for a writer at once.
        let writer = lock::<S>(&client, LockSpec::new("ledger", Duration::from_secs(5)).once()).await;
        assert_eq!(release::<S>(writer).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// 8 tasks, each now reading and now writing one resource: never a writer with anyone else,
/// and readers do overlap.
pub fn rw_exclusion<S: Subject>() {
    const TASKS: u32 = 8;
    let servers = Servers::start(3);
    let (reading, writing, most) =
        (Arc::new(AtomicU32::new(0)), Arc::new(AtomicBool::new(false)), Arc::new(AtomicU32::new(0)));
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let (client, reading, writing, most) = (client.clone(), reading.clone(), writing.clone(), most.clone());
            tasks.push(S::spawn(async move {
                for i in 0..8u32 {
                    let write = (t + i) % 4 == 0;
                    let mut spec = LockSpec::new("mixed", Duration::from_secs(10)).wait(Duration::from_secs(60));
                    if !write {
                        spec = spec.shared();
                    }
                    let guard = lock::<S>(&client, spec).await;
                    if write {
                        assert!(!writing.swap(true, Ordering::SeqCst), "[{}] two writers", S::NAME);
                        assert_eq!(reading.load(Ordering::SeqCst), 0, "[{}] a writer among readers", S::NAME);
                        S::sleep(ms(20)).await;
                        writing.store(false, Ordering::SeqCst);
                    } else {
                        let now = reading.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        assert!(!writing.load(Ordering::SeqCst), "[{}] a reader beside a writer", S::NAME);
                        S::sleep(ms(20)).await;
                        reading.fetch_sub(1, Ordering::SeqCst);
                    }
                    assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
                }
            }));
        }
        for task in tasks {
            task.await;
        }
    });
    assert!(most.load(Ordering::SeqCst) >= 2, "[{}] readers never shared the lock", S::NAME);
    servers.assert_no_leaks();
}
