//! The semaphore's cases: the limit holds under contention, m permits are all or nothing, a
//! permit is a key like a mutex key (token, TTL, extend, release, lost), the limit is
//! recorded and a mismatch refused, fencing per permit, and a release wakes a waiter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlease_core::{AcquireError, ExtendError, LockShape, LockState, ReleaseOutcome, Retry};

use super::cases::{connect, eventually, lock, ms, ok, queue_lengths, release, values};
use super::{FailureKind, LockSpec, Options, Subject};
use crate::{Reply, Servers};

/// The key of permit `k` of semaphore `name`.
fn permit_key(name: &str, k: u16) -> String {
    format!("redlease:sem:{{{name}}}:{k}")
}

/// Nodes on which permit `k` of `name` holds `token` (marked or not) with a TTL.
fn holding(servers: &Servers, name: &str, k: u16, token: &str) -> usize {
    let marked = format!("{token}:");
    values(servers, &permit_key(name, k))
        .into_iter()
        .flatten()
        .filter(|(v, pttl)| (v.as_deref() == Some(token) || v.as_deref() == Some(&*marked)) && *pttl > 0)
        .count()
}

/// Permit keys of `name` present on any node.
fn permits_present(servers: &Servers, name: &str, limit: u16) -> usize {
    (0..limit)
        .map(|k| values(servers, &permit_key(name, k)).into_iter().flatten().filter(|(v, _)| v.is_some()).count())
        .sum()
}

/// 8 tasks × 6 cycles on a semaphore of 3: never more than 3 holders, never two on one permit,
/// and 3 at once is reached.
pub fn semaphore_limit<S: Subject>() {
    const TASKS: usize = 8;
    const CYCLES: usize = 6;
    const LIMIT: u32 = 3;
    let servers = Servers::start(3);
    let active = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..LIMIT).map(|_| AtomicBool::new(false)).collect());
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let (client, active, most, busy) = (client.clone(), active.clone(), most.clone(), busy.clone());
            tasks.push(S::spawn(async move {
                for i in 0..CYCLES {
                    let spec = LockSpec::new("workers", Duration::from_secs(10))
                        .semaphore(LIMIT, 1)
                        .wait(Duration::from_secs(60));
                    let guard = lock::<S>(&client, spec).await;
                    let permits = S::permits(&guard);
                    assert!(permits.len() == 1 && u32::from(permits[0]) < LIMIT, "[{}] permits {permits:?}", S::NAME);
                    let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= LIMIT, "[{}] task {t} #{i}: {now} holders of a semaphore of {LIMIT}", S::NAME);
                    let was = busy[permits[0] as usize].swap(true, Ordering::SeqCst);
                    assert!(!was, "[{}] task {t} #{i}: permit {} held twice", S::NAME, permits[0]);
                    S::sleep(ms(40)).await;
                    busy[permits[0] as usize].store(false, Ordering::SeqCst);
                    active.fetch_sub(1, Ordering::SeqCst);
                    let report = release::<S>(guard).await;
                    assert_eq!(report.outcome, ReleaseOutcome::Released, "[{}] task {t} #{i}: {report:?}", S::NAME);
                }
            }));
        }
        for task in tasks {
            task.await;
        }
        eventually::<S>(Duration::from_secs(3), "every permit free at the end", || {
            permits_present(&servers, "workers", 3) == 0
        })
        .await;
    });
    assert_eq!(most.load(Ordering::SeqCst), LIMIT, "[{}] 8 contenders never filled the 3 permits", S::NAME);
    servers.assert_no_leaks();
}

/// 8 workers contend for a semaphore of 3 over 5 nodes while one node is paused (SIGSTOP)
/// and another killed: never more than 3 holders, progress throughout, and once the nodes are
/// back nothing is left without a TTL.
pub fn semaphore_faults<S: Subject>() {
    const WORKERS: usize = 8;
    const LIMIT: u32 = 3;
    let servers = Servers::start(5);
    let active = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let mut workers = Vec::new();
        for w in 0..WORKERS {
            let (client, active, done, stop) = (client.clone(), active.clone(), done.clone(), stop.clone());
            workers.push(S::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let spec = LockSpec::new("faulty-pool", Duration::from_secs(2))
                        .semaphore(LIMIT, 1)
                        .wait(Duration::from_secs(30));
                    let guard = lock::<S>(&client, spec).await;
                    let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(now <= LIMIT, "[{}] worker {w}: {now} holders of a semaphore of {LIMIT}", S::NAME);
                    S::sleep(ms(10)).await;
                    active.fetch_sub(1, Ordering::SeqCst);
                    // A release may find a node down: the outcome is what a quorum said.
                    let _ = S::release(guard).await;
                    done.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        let progress = |what: &'static str| {
            let (done, before) = (done.clone(), done.load(Ordering::SeqCst));
            async move {
                eventually::<S>(Duration::from_secs(10), what, || done.load(Ordering::SeqCst) >= before + 20).await;
            }
        };
        progress("cycles with every node up").await;
        servers.node(0).pause();
        progress("cycles with node 0 paused").await;
        servers.node(1).kill();
        progress("cycles with node 0 paused and node 1 killed").await;
        servers.node(0).resume();
        servers.node(1).restart(false);
        progress("cycles with every node back").await;
        stop.store(true, Ordering::SeqCst);
        for w in workers {
            w.await;
        }
    });
    servers.assert_no_leaks();
}

/// A semaphore of 4: permits are keys with the holder's token and a TTL, the limit is
/// recorded on every node and another limit refused as misconfigured; 2 permits are taken
/// all or nothing; extend moves a permit's TTL; a permit taken away is lost at the next extend.
pub fn semaphore_permits<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let ttl = Duration::from_secs(10);
        let one = || LockSpec::new("pool", ttl).semaphore(4, 1);
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(lock::<S>(&client, one().once()).await);
        }
        let mut permits: Vec<u16> = held.iter().flat_map(S::permits).collect();
        permits.sort_unstable();
        permits.dedup();
        assert_eq!(permits.len(), 3, "[{}] three holders, three distinct permits: {permits:?}", S::NAME);
        // The client's health view shows what it holds: each permit's number, and its holder.
        let h = ok::<S, _>(S::health(&client).await, "health");
        for g in &held {
            let token = S::token(g);
            let line = h.locks.iter().find(|l| token.starts_with(&l.token_prefix));
            let line = line.unwrap_or_else(|| panic!("[{}] a held permit missing from the view:\n{h}", S::NAME));
            let shape = LockShape::Semaphore { limit: 4, permits: 1, held: S::permits(g).to_vec() };
            assert_eq!((&line.resources[..], &line.shape), (&["pool".to_owned()][..], &shape), "[{}]", S::NAME);
            assert!(line.state == LockState::Held && line.valid_until.is_some(), "[{}]\n{h}", S::NAME);
            assert!(h.to_string().contains(&format!("permits {} of 4", S::permits(g)[0])), "[{}]\n{h}", S::NAME);
            assert!(!h.to_string().contains(&token) && !format!("{h:?}").contains(&token), "[{}] a token", S::NAME);
        }
        for g in &held {
            let (k, token) = (S::permits(g)[0], S::token(g));
            assert!(holding(&servers, "pool", k, &token) >= 2, "[{}] permit {k} not held on a quorum", S::NAME);
        }
        eventually::<S>(Duration::from_secs(3), "the limit recorded on every node, without a TTL", || {
            values(&servers, "redlease:sem:{pool}:limit").iter().all(|v| matches!(v, Some((Some(l), -1)) if l == "4"))
        })
        .await;

        // One permit is free: two at once are refused, and take nothing.
        let refused = S::lock(&client, one().semaphore(4, 2).once()).await;
        match refused {
            Err(f) => assert!(matches!(f.kind, FailureKind::Acquire(AcquireError::Held { .. })), "[{}] {f}", S::NAME),
            Ok(_) => panic!("[{}] 2 permits granted with 1 free", S::NAME),
        }
        let tokens: Vec<String> = held.iter().map(S::token).collect();
        for k in 0..4 {
            for (v, _) in values(&servers, &permit_key("pool", k)).into_iter().flatten() {
                let token = v.as_deref().map(|v| v.trim_end_matches(':'));
                let ours = token.is_none_or(|t| tokens.iter().any(|h| h == t));
                assert!(ours, "[{}] permit {k}: {v:?} left by the refused attempt", S::NAME);
            }
        }
        let last = held.pop().unwrap_or_else(|| unreachable!());
        assert_eq!(release::<S>(last).await.outcome, ReleaseOutcome::Released);
        let two = lock::<S>(&client, one().semaphore(4, 2).wait(Duration::from_secs(5))).await;
        let pair = S::permits(&two);
        assert_eq!(pair.len(), 2, "[{}] {pair:?}", S::NAME);
        assert!(held.iter().all(|g| !pair.contains(&S::permits(g)[0])), "[{}] a held permit granted again", S::NAME);
        for &k in &pair {
            assert!(holding(&servers, "pool", k, &S::token(&two)) >= 2, "[{}] permit {k} of the pair", S::NAME);
        }

        // Another limit for the name is a misconfiguration, reported at once, naming the limits.
        let other = S::lock(&client, LockSpec::new("pool", ttl).semaphore(5, 1).wait(Duration::from_secs(30))).await;
        let started = Instant::now();
        match other {
            Err(f) => {
                let shown = f.message.contains("WRONGLIMIT") && f.message.contains('4') && f.message.contains('5');
                assert!(
                    matches!(f.kind, FailureKind::Acquire(AcquireError::Misconfigured { .. })) && shown,
                    "[{}] {f}",
                    S::NAME
                );
            }
            Ok(_) => panic!("[{}] a limit of 5 was granted where 4 is recorded", S::NAME),
        }
        assert!(started.elapsed() < Duration::from_secs(5), "[{}] a mismatch must not wait out its bound", S::NAME);

        // Extend moves the permit's TTL; a permit taken away from every node is lost.
        let mut first = held.remove(0);
        let k = S::permits(&first)[0];
        ok::<S, _>(S::extend(&mut first, Duration::from_secs(30)).await, "extend a permit");
        let longer =
            values(&servers, &permit_key("pool", k)).into_iter().flatten().filter(|(_, p)| *p > 10_000).count();
        assert!(longer >= 2, "[{}] the extended permit's TTL", S::NAME);
        let mut second = held.remove(0);
        let gone = S::permits(&second)[0];
        for node in servers.nodes() {
            node.conn().and_then(|mut c| c.del(&permit_key("pool", gone))).expect("DEL on a node");
        }
        match S::extend(&mut second, ttl).await {
            Err(f) => assert!(matches!(f.kind, FailureKind::Extend(ExtendError::Lost { .. })), "[{}] {f}", S::NAME),
            Ok(_) => panic!("[{}] a permit deleted on every node was extended", S::NAME),
        }
        assert!(S::wait_lost(&S::lost(&second), Duration::from_secs(2)).await, "[{}] the lost signal", S::NAME);
        assert_eq!(release::<S>(second).await.outcome, ReleaseOutcome::NotHeld);
        for g in [first, two] {
            assert_eq!(release::<S>(g).await.outcome, ReleaseOutcome::Released);
        }
        eventually::<S>(Duration::from_secs(3), "every permit free", || permits_present(&servers, "pool", 4) == 0)
            .await;
    });
    servers.assert_no_leaks();
}

/// 4 tasks × 10 fenced acquisitions of a semaphore of 2: per permit, the tokens strictly
/// increase from holder to holder.
pub fn semaphore_fencing<S: Subject>() {
    let servers = Servers::start(3);
    let seen: Arc<Mutex<HashMap<u16, Vec<u64>>>> = Arc::default();
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (client, seen) = (client.clone(), seen.clone());
            tasks.push(S::spawn(async move {
                for _ in 0..10 {
                    let spec = LockSpec::new("fenced-pool", Duration::from_secs(5))
                        .semaphore(2, 1)
                        .fencing()
                        .wait(Duration::from_secs(60));
                    let guard = lock::<S>(&client, spec).await;
                    let fence = S::fence(&guard).unwrap_or_else(|| panic!("[{}] no fencing token", S::NAME));
                    // Recorded while held: the holders of one permit take turns.
                    seen.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(S::permits(&guard)[0])
                        .or_default()
                        .push(fence);
                    S::sleep(ms(5)).await;
                    assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
                }
            }));
        }
        for task in tasks {
            task.await;
        }
    });
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(seen.values().map(Vec::len).sum::<usize>(), 40);
    for (permit, fences) in seen.iter() {
        assert!(fences.windows(2).all(|w| w[0] < w[1]), "[{}] permit {permit}: tokens {fences:?}", S::NAME);
    }
    servers.assert_no_leaks();
}

/// The waiter queue of the semaphore `wake-pool`.
const WAKE_POOL_QUEUE: &str = "redlease:queue:redlease:sem:{wake-pool}";

/// With a 5 s retry delay, a waiter on a full semaphore gets the permit within 2 s of a
/// release: the release message woke it.
pub fn semaphore_wake<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let holder = connect::<S>(servers.urls(), Options::default()).await;
        let slow = Retry::new(3, Duration::from_secs(5), Duration::from_secs(5));
        let waiter = connect::<S>(servers.urls(), Options { retry: slow, ..Options::default() }).await;
        let spec = LockSpec::new("wake-pool", Duration::from_secs(30)).semaphore(2, 1);
        let a = lock::<S>(&holder, spec.clone().once()).await;
        let b = lock::<S>(&holder, spec.clone().once()).await;
        // Granted at a quorum: wait until every node has both permits, or the waiter's first
        // attempt could get a permit on the last node and queue only at its retry, 5 s later.
        eventually::<S>(Duration::from_secs(3), "both permits on every node", || {
            [&a, &b].iter().all(|g| holding(&servers, "wake-pool", S::permits(g)[0], &S::token(g)) == servers.len())
        })
        .await;
        let waiting = {
            let (waiter, spec) = (waiter.clone(), spec.clone().wait(Duration::from_secs(20)));
            S::spawn(async move { S::lock(&waiter, spec).await })
        };
        // Its first attempt is refused, and it queues (behind its subscription) on every node.
        eventually::<S>(Duration::from_secs(3), "the waiter queued on every node", || {
            queue_lengths(&servers, WAKE_POOL_QUEUE).iter().all(|&len| len == 1)
        })
        .await;
        let freed = S::permits(&a)[0];
        let released = Instant::now();
        assert_eq!(release::<S>(a).await.outcome, ReleaseOutcome::Released);
        let got = ok::<S, _>(waiting.await, "the waiter after a release");
        let took = released.elapsed();
        assert!(took < Duration::from_secs(2), "[{}] the handoff took {took:?}: no wake-up came", S::NAME);
        assert_eq!(S::permits(&got), [freed], "[{}] the waiter got the freed permit", S::NAME);
        for g in [b, got] {
            assert_eq!(release::<S>(g).await.outcome, ReleaseOutcome::Released);
        }
        eventually::<S>(Duration::from_secs(3), "no queue left", || {
            servers.nodes().iter().all(|n| {
                let pttl = n.conn().and_then(|mut c| c.pttl(WAKE_POOL_QUEUE));
                pttl.expect("PTTL on a node") == -2
            })
        })
        .await;
    });
    servers.assert_no_leaks();
}

/// A holder of both permits of a semaphore of 2 releases them at once while two waiters of
/// one permit each queue (retrying only every 5 s): each freed permit goes to a waiter that
/// needs it, so both get theirs within 2 s of the release, each on its own permit.
pub fn semaphore_freed_permits<S: Subject>() {
    const QUEUE: &str = "redlease:queue:redlease:sem:{freed-pool}";
    let servers = Servers::start(3);
    S::block_on(async {
        let holder = connect::<S>(servers.urls(), Options::default()).await;
        let slow = Retry::new(3, Duration::from_secs(5), Duration::from_secs(5));
        let spec = LockSpec::new("freed-pool", Duration::from_secs(30)).semaphore(2, 1);
        let both = lock::<S>(&holder, spec.clone().semaphore(2, 2).once()).await;
        let mut waiting = Vec::new();
        for w in 0..2 {
            let waiter = connect::<S>(servers.urls(), Options { retry: slow, ..Options::default() }).await;
            let spec = spec.clone().wait(Duration::from_secs(20));
            waiting.push(S::spawn(async move { S::lock(&waiter, spec).await }));
            // Each is refused and queues on every node before the next comes.
            eventually::<S>(Duration::from_secs(5), "the waiter queued on every node", || {
                queue_lengths(&servers, QUEUE).iter().all(|&len| len == w as i64 + 1)
            })
            .await;
        }
        let released = Instant::now();
        assert_eq!(release::<S>(both).await.outcome, ReleaseOutcome::Released);
        let mut guards = Vec::new();
        for (w, waiting) in waiting.into_iter().enumerate() {
            let got = ok::<S, _>(waiting.await, "a waiter after the release");
            let took = released.elapsed();
            assert!(
                took < Duration::from_secs(2),
                "[{}] waiter {w} got its permit {took:?} after the release",
                S::NAME
            );
            guards.push(got);
        }
        let mut permits: Vec<u16> = guards.iter().flat_map(|g| S::permits(g)).collect();
        permits.sort_unstable();
        assert_eq!(permits, [0, 1], "[{}] one permit each", S::NAME);
        for g in guards {
            assert_eq!(release::<S>(g).await.outcome, ReleaseOutcome::Released);
        }
    });
    servers.assert_no_leaks();
}

/// A waiter re-enters a permit whose key already holds its own token on a node: the leftover
/// of an earlier grant whose cleanup never arrived, here written on node 0 over the holder's
/// key (as if node 0 had lost the holder's key and kept the waiter's). When the holder
/// releases, nodes 1 and 2 hand the permit to the waiter; its retry counts node 0's leftover as
/// its own, and the permit is held on every node with the full TTL.
pub fn semaphore_reentry<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let holder = connect::<S>(servers.urls(), Options::default()).await;
        let slow = Retry::new(3, Duration::from_secs(5), Duration::from_secs(5));
        let waiter = connect::<S>(servers.urls(), Options { retry: slow, ..Options::default() }).await;
        let spec = LockSpec::new("reentry-pool", Duration::from_secs(30)).semaphore(1, 1);
        let a = lock::<S>(&holder, spec.clone().once()).await;
        // Granted at a quorum: wait until every node has the holder's permit, so that the waiter
        // is refused and queued on every node (nodes 1 and 2 must hand the permit to it).
        eventually::<S>(Duration::from_secs(3), "the holder's permit on every node", || {
            holding(&servers, "reentry-pool", 0, &S::token(&a)) == 3
        })
        .await;
        let waiting = {
            let (waiter, spec) = (waiter.clone(), spec.clone().wait(Duration::from_secs(20)));
            S::spawn(async move { S::lock(&waiter, spec).await })
        };
        let queue = "redlease:queue:redlease:sem:{reentry-pool}";
        eventually::<S>(Duration::from_secs(3), "the waiter queued on every node", || {
            queue_lengths(&servers, queue).iter().all(|&len| len == 1)
        })
        .await;
        let mut token = None;
        eventually::<S>(Duration::from_secs(3), "the waiter queued on node 0", || {
            let mut c = servers.node(0).conn().expect("a connection to node 0");
            let entries = match c.checked(&["ZRANGE", queue, "0", "-1"]).expect("ZRANGE") {
                Reply::Array(Some(items)) => items.iter().filter_map(Reply::as_text).collect(),
                _ => Vec::new(),
            };
            token = entries.first().and_then(|e: &String| e.split(':').next().map(str::to_owned));
            token.is_some()
        })
        .await;
        let token = token.unwrap_or_default();
        let key = permit_key("reentry-pool", 0);
        let mut c = servers.node(0).conn().expect("a connection to node 0");
        c.checked(&["SET", key.as_str(), token.as_str(), "PX", "5000"]).expect("SET the leftover");

        assert_eq!(release::<S>(a).await.outcome, ReleaseOutcome::Released, "[{}] released on nodes 1 and 2", S::NAME);
        let got = ok::<S, _>(waiting.await, "the waiter after the release");
        assert_eq!(S::token(&got), token, "[{}] the leftover was the waiter's", S::NAME);
        assert_eq!(S::permits(&got), [0]);
        // Granted at a quorum: node 0's re-entry may still be on its way.
        eventually::<S>(
            Duration::from_secs(3),
            "held on every node, node 0's permit with the lock's TTL again",
            || {
                let pttl = c.pttl(&key).expect("PTTL");
                holding(&servers, "reentry-pool", 0, &token) == 3 && pttl > 20_000
            },
        )
        .await;
        assert_eq!(release::<S>(got).await.outcome, ReleaseOutcome::Released);
        eventually::<S>(Duration::from_secs(3), "the release cleared every node", || {
            permits_present(&servers, "reentry-pool", 1) == 0
        })
        .await;
    });
    servers.assert_no_leaks();
}
