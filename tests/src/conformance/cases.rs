//! The cases. Each is one function generic over the [`Subject`]; it starts its own servers and
//! ends with the leak check.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlease_core::{
    AcquireError, ConfigError, ExtendError, Fault, Health, Misuse, NodeState, ReleaseOutcome, ReleaseReport, Retry,
    Vote,
};

use super::{Failure, FailureKind, HolderLog, LockSpec, Options, Subject};
use crate::{Mode, Proxy, Reply, Servers};

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Unwrap an adapter result, naming the adapter and the step.
pub(super) fn ok<S: Subject, T>(r: Result<T, Failure>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("[{}] {what}: {e}", S::NAME))
}

/// Expect an error, naming the adapter and the step.
pub(super) fn err<S: Subject, T>(r: Result<T, Failure>, what: &str) -> Failure {
    match r {
        Ok(_) => panic!("[{}] {what}: succeeded, but an error was expected", S::NAME),
        Err(e) => e,
    }
}

/// Connect to nodes that are all up, and wait until the client's health view shows every one
/// of them ready. `connect` itself returns once a quorum is ready; the cases look at every
/// node's keys, queues and subscriptions, which a node gets only from a link that is up.
pub(super) async fn connect<S: Subject>(urls: Vec<String>, options: Options) -> S::Client {
    let client = connect_partial::<S>(urls, options).await;
    all_ready::<S>(&client).await;
    client
}

/// Wait until `client` is connected to every node and past the handshakes
/// ([`crate::all_ready`]); panics, naming the adapter, with the view if that takes 10 s.
pub(super) async fn all_ready<S: Subject>(client: &S::Client) -> Health {
    let named = |r: Result<Health, Failure>| r.map_err(|e| format!("[{}] {e}", S::NAME));
    crate::all_ready(|| async { named(S::health(client).await) }, S::sleep).await
}

/// Connect to nodes some of which may be down or silent.
pub(super) async fn connect_partial<S: Subject>(urls: Vec<String>, options: Options) -> S::Client {
    let started = Instant::now();
    let client = ok::<S, _>(S::connect(urls, options).await, "connect");
    // Liveness only: connecting must not wait for TCP timeouts of nodes that are down.
    assert!(started.elapsed() < Duration::from_secs(5), "[{}] connect took {:?}", S::NAME, started.elapsed());
    client
}

pub(super) async fn lock<S: Subject>(client: &S::Client, spec: LockSpec) -> S::Guard {
    let what = format!("lock {:?}", spec.resource);
    ok::<S, _>(S::lock(client, spec).await, &what)
}

pub(super) async fn release<S: Subject>(guard: S::Guard) -> ReleaseReport {
    ok::<S, _>(S::release(guard).await, "release")
}

/// Poll `check` every 10 ms until it holds; panic after `timeout`.
pub(super) async fn eventually<S: Subject>(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "[{}] not within {timeout:?}: {what}", S::NAME);
        S::sleep(ms(10)).await;
    }
}

/// `(value, PTTL)` of `key` on each live node (`None` for a node that is down or paused).
pub(super) fn values(servers: &Servers, key: &str) -> Vec<Option<(Option<String>, i64)>> {
    servers
        .nodes()
        .iter()
        .map(|n| {
            if !n.is_running() || n.is_paused() {
                return None;
            }
            let mut c = n.conn().unwrap_or_else(|e| panic!("node {}: connect: {e}", n.index()));
            let v = c.get(key).unwrap_or_else(|e| panic!("node {}: GET: {e}", n.index()));
            let pttl = c.pttl(key).unwrap_or_else(|e| panic!("node {}: PTTL: {e}", n.index()));
            Some((v, pttl))
        })
        .collect()
}

/// Nodes where `key` holds `token` (marked as waited for, `token:`, or not).
fn holding(servers: &Servers, key: &str, token: &str) -> usize {
    let is_ours = |v: &str| redlease_core::holder_of(v).0 == token;
    values(servers, key).into_iter().flatten().filter(|(v, _)| v.as_deref().is_some_and(is_ours)).count()
}

/// How many `PUBLISH` calls each node has run (scripts' included), from `INFO commandstats`.
fn publishes(servers: &Servers) -> Vec<u64> {
    servers
        .nodes()
        .iter()
        .map(|n| {
            let info = match n.conn().and_then(|mut c| c.cmd(&["INFO", "commandstats"])) {
                Ok(Reply::Bulk(Some(info))) => String::from_utf8_lossy(&info).into_owned(),
                other => panic!("node {}: INFO commandstats: {other:?}", n.index()),
            };
            info.lines()
                .find_map(|l| l.strip_prefix("cmdstat_publish:calls="))
                .map_or(0, |rest| rest.split(',').next().and_then(|c| c.parse().ok()).unwrap_or(0))
        })
        .collect()
}

/// Nodes where `key` exists.
fn present(servers: &Servers, key: &str) -> usize {
    values(servers, key).into_iter().flatten().filter(|(v, _)| v.is_some()).count()
}

/// A proxy in front of every node, and the URLs that go through them.
fn proxied(servers: &Servers) -> (Vec<Proxy>, Vec<String>) {
    let proxies: Vec<Proxy> = servers.addrs().into_iter().map(Proxy::start).collect();
    let urls = proxies.iter().map(|p| servers.url_of(p.addr())).collect();
    (proxies, urls)
}

fn is_held(f: &Failure) -> bool {
    matches!(f.kind, FailureKind::Acquire(AcquireError::Held { .. }))
}

/// An acquire error in which some node was down, timed out or answered an error.
fn has_failed_votes(f: &Failure) -> bool {
    match &f.kind {
        FailureKind::Acquire(
            AcquireError::Held { votes, .. }
            | AcquireError::Unreachable { votes, .. }
            | AcquireError::Misconfigured { votes, .. },
        ) => votes.iter().any(Vote::is_failure),
        _ => false,
    }
}

/// A fast retry schedule for cases with heavy contention, and a node timeout so generous that
/// a healthy node never misses it, even while many tests load the machine.
pub(super) fn contention_options() -> Options {
    Options { node_timeout: Duration::from_secs(1), retry: Retry::new(3, ms(1), ms(10)), ..Options::default() }
}

/// Guard basics: the token, the validity deadline, the keys on the nodes, extend, release.
pub fn basics<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let ttl = Duration::from_secs(10);
        let before = Instant::now();
        let mut guard = lock::<S>(&client, LockSpec::new("basics", ttl)).await;
        let token = S::token(&guard);
        assert!(
            token.len() == 40 && token.bytes().all(|b| b.is_ascii_hexdigit()),
            "[{}] token must be 40 hex chars (20 random bytes): {token:?}",
            S::NAME
        );
        let valid = S::valid_until(&guard);
        assert!(valid > Instant::now(), "[{}] a fresh lock must be valid", S::NAME);
        assert!(valid < before + ttl, "[{}] validity must be below start + ttl (drift margin)", S::NAME);
        assert_eq!(S::fence(&guard), None, "[{}] no fencing token unless asked for", S::NAME);
        assert!(!S::is_lost(&S::lost(&guard)));
        eventually::<S>(Duration::from_secs(2), "every node holds the token with a TTL ≤ ttl", || {
            values(&servers, "basics")
                .into_iter()
                .all(|v| matches!(v, Some((Some(t), p)) if t == token && p > 0 && p <= 10_000))
        })
        .await;

        S::sleep(ms(20)).await;
        let extended = ok::<S, _>(S::extend(&mut guard, Duration::from_secs(30)).await, "extend");
        assert!(extended > valid, "[{}] extend to 30s must move the deadline later", S::NAME);
        assert_eq!(S::valid_until(&guard), extended, "[{}] valid_until() must follow extend", S::NAME);
        eventually::<S>(Duration::from_secs(2), "every node has the extended TTL", || {
            values(&servers, "basics")
                .into_iter()
                .all(|v| matches!(v, Some((Some(t), p)) if t == token && p > 10_000 && p <= 30_000))
        })
        .await;

        let report = release::<S>(guard).await;
        assert_eq!(report.outcome, ReleaseOutcome::Released, "[{}] {report:?}", S::NAME);
        assert!(report.deleted >= 2, "[{}] a quorum must have deleted: {report:?}", S::NAME);
        eventually::<S>(Duration::from_secs(2), "release deletes the key on every node", || {
            present(&servers, "basics") == 0
        })
        .await;

        // A new acquisition gets a new token.
        let again = lock::<S>(&client, LockSpec::new("basics", ttl)).await;
        assert_ne!(S::token(&again), token, "[{}] tokens must be unique per acquisition", S::NAME);
        assert_eq!(release::<S>(again).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// 16 tasks × 30 cycles of read-modify-write on a shared value under the lock: no lost update,
/// and no two holder intervals overlap.
pub fn mutual_exclusion<S: Subject>() {
    const TASKS: usize = 16;
    const CYCLES: usize = 30;
    let servers = Servers::start(5);
    let log = Arc::new(HolderLog::new());
    let counter = Arc::new(AtomicU64::new(0));
    S::block_on(async {
        let client = connect::<S>(servers.urls(), contention_options()).await;
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let (client, log, counter) = (client.clone(), log.clone(), counter.clone());
            tasks.push(S::spawn(async move {
                for c in 0..CYCLES {
                    let spec = LockSpec::new("counter", Duration::from_secs(5)).wait(Duration::from_secs(60));
                    let guard = lock::<S>(&client, spec).await;
                    let acquired = Instant::now();
                    // A deliberately non-atomic read-modify-write with a suspension point in
                    // the middle: any overlap of holders loses an update.
                    let v = counter.load(Ordering::SeqCst);
                    S::sleep(Duration::from_micros(300)).await;
                    counter.store(v + 1, Ordering::SeqCst);
                    let valid = S::valid_until(&guard);
                    let released_at = Instant::now();
                    let report = release::<S>(guard).await;
                    assert_eq!(report.outcome, ReleaseOutcome::Released, "[{}] task {t}: {report:?}", S::NAME);
                    log.record("counter", &format!("task {t} cycle {c}"), acquired, valid, released_at, None);
                }
            }));
        }
        for task in tasks {
            task.await;
        }
    });
    assert_eq!(counter.load(Ordering::SeqCst), (TASKS * CYCLES) as u64, "[{}] lost updates", S::NAME);
    assert_eq!(log.len(), TASKS * CYCLES);
    log.assert_no_overlap();
    servers.assert_no_leaks();
}

/// `tasks` tasks, each taking the fenced lock `counter` (TTL `ttl`, waiting up to 60 s) `cycles`
/// times for a deliberately non-atomic read-modify-write of `counter` with a suspension of
/// `hold` in the middle (any overlap of holders loses an update); every hold goes to `log`.
pub(super) async fn fenced_counter<S: Subject>(
    client: &S::Client,
    (log, counter): (&Arc<HolderLog>, &Arc<AtomicU64>),
    tasks: usize,
    cycles: usize,
    ttl: Duration,
    hold: Duration,
) {
    let mut running = Vec::new();
    for t in 0..tasks {
        let (client, log, counter) = (client.clone(), log.clone(), counter.clone());
        running.push(S::spawn(async move {
            for c in 0..cycles {
                let spec = LockSpec::new("counter", ttl).fencing().wait(Duration::from_secs(60));
                let guard = lock::<S>(&client, spec).await;
                let acquired = Instant::now();
                let v = counter.load(Ordering::SeqCst);
                S::sleep(hold).await;
                counter.store(v + 1, Ordering::SeqCst);
                let (valid, fence) = (S::valid_until(&guard), S::fence(&guard));
                let released_at = Instant::now();
                release::<S>(guard).await;
                log.record("counter", &format!("task {t} cycle {c}"), acquired, valid, released_at, fence);
            }
        }));
    }
    for task in running {
        task.await;
    }
}

/// A held lock refuses others with a typed `Held` (per-node votes); a wait bound ends in
/// `WaitTimeout`; a waiter gets the lock once it is released.
pub fn contention<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let a = connect::<S>(servers.urls(), Options::default()).await;
        let b = connect::<S>(servers.urls(), Options::default()).await;
        let ttl = Duration::from_secs(10);
        let guard = lock::<S>(&a, LockSpec::new("contended", ttl)).await;
        eventually::<S>(Duration::from_secs(2), "all nodes hold a's token", || {
            holding(&servers, "contended", &S::token(&guard)) == 3
        })
        .await;

        let e = err::<S, _>(S::lock(&b, LockSpec::new("contended", ttl).once()).await, "try_lock of a held lock");
        match &e.kind {
            FailureKind::Acquire(AcquireError::Held { votes, attempts }) => {
                assert_eq!(*attempts, 1, "[{}] try_lock makes one attempt: {e}", S::NAME);
                // The attempt may be decided as soon as a quorum refused; a third vote may
                // still be open then. Nobody may have granted.
                assert_eq!(votes.len(), 3, "[{}] one vote per node: {e}", S::NAME);
                let refused = votes.iter().filter(|v| **v == Vote::Refused).count();
                assert!(refused >= 2, "[{}] a quorum refused: {e}", S::NAME);
                assert!(!votes.contains(&Vote::Granted), "[{}] no node may grant a held lock: {e}", S::NAME);
            }
            _ => panic!("[{}] expected Acquire(Held), got {e}", S::NAME),
        }
        assert!(e.message.contains("held"), "[{}] message should say held: {}", S::NAME, e.message);

        let started = Instant::now();
        let e = err::<S, _>(S::lock(&b, LockSpec::new("contended", ttl).wait(ms(300))).await, "lock with wait(300ms)");
        assert!(started.elapsed() < Duration::from_secs(5), "[{}] wait(300ms) took {:?}", S::NAME, started.elapsed());
        match &e.kind {
            FailureKind::WaitTimeout { last: Some(AcquireError::Held { .. }), .. } => {}
            _ => panic!("[{}] expected WaitTimeout with last = Held, got {e}", S::NAME),
        }

        // A waiter with a generous bound gets the lock once the holder lets go.
        let waiter = {
            let b = b.clone();
            S::spawn(async move { S::lock(&b, LockSpec::new("contended", ttl).wait(Duration::from_secs(10))).await })
        };
        S::sleep(ms(200)).await;
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
        let second = ok::<S, _>(waiter.await, "waiter after the release");
        assert_eq!(release::<S>(second).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// `client` takes `resource` once it is free on every node, and holds it on every node when
/// this returns. A release and a lock each return at a quorum: the last node's delete or `SET`
/// may still be on its way. A delete that lands after the `SET NX` refuses it there; a waiter's
/// attempt that reaches that node before the `SET` is granted there instead of queued, and
/// waits for its next retry to queue.
async fn take_everywhere<S: Subject>(servers: &Servers, client: &S::Client, resource: &str, ttl: Duration) -> S::Guard {
    eventually::<S>(Duration::from_secs(5), "the resource free on every node before it is taken", || {
        values(servers, resource).iter().all(|v| matches!(v, Some((None, _))))
    })
    .await;
    let guard = lock::<S>(client, LockSpec::new(resource, ttl)).await;
    let token = S::token(&guard);
    eventually::<S>(Duration::from_secs(5), "the holder's key on every node", || {
        holding(servers, resource, &token) == servers.len()
    })
    .await;
    guard
}

/// `a` takes `spec`'s resource on every node; `b` waits for it (a task of its own) until it is
/// subscribed on every node and its attempt behind the subscription was refused: from then on
/// it sleeps its retry delay unless a release message wakes it.
async fn held_with_a_waiter<S: Subject>(
    servers: &Servers,
    a: &S::Client,
    b: &S::Client,
    spec: &LockSpec,
) -> (S::Guard, super::BoxFuture<'static, Result<S::Guard, Failure>>) {
    let guard = take_everywhere::<S>(servers, a, &spec.resource, spec.ttl).await;
    let waiter = {
        let (b, spec) = (b.clone(), spec.clone());
        S::spawn(async move { S::lock(&b, spec).await })
    };
    let channel = format!("redlease:wake:{}", spec.resource);
    eventually::<S>(Duration::from_secs(3), "the waiter subscribed on every node", || {
        subscribers(servers, &channel) == servers.len() as i64
    })
    .await;
    S::sleep(ms(100)).await;
    (guard, waiter)
}

/// Subscribers of `channel` on each node (`PUBSUB NUMSUB`), summed.
pub(super) fn subscribers(servers: &Servers, channel: &str) -> i64 {
    servers
        .nodes()
        .iter()
        .map(|n| {
            let mut c = n.conn().unwrap_or_else(|e| panic!("node {}: connect: {e}", n.index()));
            match c.cmd(&["PUBSUB", "NUMSUB", channel]) {
                Ok(Reply::Array(Some(items))) => match items.get(1) {
                    Some(Reply::Int(n)) => *n,
                    other => panic!("PUBSUB NUMSUB: {other:?}"),
                },
                other => panic!("PUBSUB NUMSUB: {other:?}"),
            }
        })
        .sum()
}

/// Wake-on-release. With a retry delay of 5 s, a waiter gets a released lock well within a
/// second: only the release message can explain that (without wake-ups it takes the 5 s). A
/// lock freed without a message (its keys deleted by hand, as when a crashed holder's keys
/// expire) still goes to the waiter, through the fallback retry. Subscriptions end with the
/// last waiter.
pub fn wake_on_release<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let a = connect::<S>(servers.urls(), Options::default()).await;
        let slow = Retry::new(3, Duration::from_secs(5), Duration::from_secs(5));
        let b = connect::<S>(servers.urls(), Options { retry: slow, ..Options::default() }).await;
        let ttl = Duration::from_secs(30);
        let channel = "redlease:wake:handoff";
        let spec = LockSpec::new("handoff", ttl).wait(Duration::from_secs(20));

        // Nobody waits: the release is a plain compare-and-delete and announces nothing.
        let before = publishes(&servers);
        let guard = take_everywhere::<S>(&servers, &a, "handoff", ttl).await;
        let token = S::token(&guard);
        let unmarked = values(&servers, "handoff").into_iter().flatten().filter(|(v, _)| v.as_deref() == Some(&*token));
        assert_eq!(unmarked.count(), 3, "[{}] nobody waited: no mark", S::NAME);
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
        // Released at a quorum: count the publishes once every node has run its release.
        eventually::<S>(Duration::from_secs(3), "the release run on every node", || present(&servers, "handoff") == 0)
            .await;
        assert_eq!(publishes(&servers), before, "[{}] an uncontended release published", S::NAME);

        for round in 0..3 {
            let (guard, waiter) = held_with_a_waiter::<S>(&servers, &a, &b, &spec).await;
            // The waiter's refused attempt marked the holder's key and left its expiry alone, on
            // a quorum of nodes at least: the holder's lock call returned at a quorum, and a node
            // that ran the waiter's first `SET NX` before the holder's has no key of the holder.
            let marked = format!("{}:", S::token(&guard));
            let quorum = servers.len() / 2 + 1;
            eventually::<S>(Duration::from_secs(3), "the holder's key marked on a quorum of nodes", || {
                let values = values(&servers, "handoff");
                values.iter().flatten().filter(|(v, _)| v.as_deref() == Some(&*marked)).count() >= quorum
            })
            .await;
            for (i, v) in values(&servers, "handoff").into_iter().enumerate() {
                let (value, pttl) = v.unwrap_or_else(|| panic!("node {i} is up"));
                let intact = value.is_none() || (pttl > 0 && pttl <= ttl.as_millis() as i64);
                assert!(intact, "[{}] round {round}, node {i}: PTTL {pttl}", S::NAME);
            }
            let released = Instant::now();
            assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
            let second = ok::<S, _>(waiter.await, "waiter after the release");
            let took = released.elapsed();
            assert!(
                took < Duration::from_secs(2),
                "[{}] round {round}: the handoff took {took:?}; the retry delay is 5 s, so no wake-up came",
                S::NAME
            );
            assert_eq!(release::<S>(second).await.outcome, ReleaseOutcome::Released);
        }
        eventually::<S>(Duration::from_secs(3), "no subscription left without a waiter", || {
            subscribers(&servers, channel) == 0
        })
        .await;

        // Freed without a message: the fallback retry still hands it over.
        let (guard, waiter) = held_with_a_waiter::<S>(&servers, &a, &b, &spec).await;
        let freed = Instant::now();
        for n in servers.nodes() {
            n.conn().and_then(|mut c| c.del("handoff")).unwrap_or_else(|e| panic!("node {}: DEL: {e}", n.index()));
        }
        let second = ok::<S, _>(waiter.await, "waiter after the keys were deleted");
        assert!(freed.elapsed() < Duration::from_secs(12), "[{}] fallback took {:?}", S::NAME, freed.elapsed());
        assert_eq!(release::<S>(second).await.outcome, ReleaseOutcome::Released);
        assert_ne!(release::<S>(guard).await.outcome, ReleaseOutcome::Released, "a's keys were deleted");

        // A waiter on several resources queues on each of them (a waiter of any kind queues, so
        // none starves) and is handed the key by its release just the same.
        let both = LockSpec::new("handoff", ttl).and("handoff:b").wait(Duration::from_secs(20));
        let (guard, waiter) = held_with_a_waiter::<S>(&servers, &a, &b, &both).await;
        assert_eq!(holding(&servers, "handoff", &S::token(&guard)), 3);
        eventually::<S>(Duration::from_secs(3), "the two-resource waiter in both queues on every node", || {
            queue_lengths(&servers, "redlease:queue:handoff") == [1, 1, 1]
                && queue_lengths(&servers, "redlease:queue:handoff:b") == [1, 1, 1]
        })
        .await;
        let released = Instant::now();
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
        let second = ok::<S, _>(waiter.await, "waiter on two resources after the release");
        let took = released.elapsed();
        assert!(took < Duration::from_secs(2), "[{}] two resources: the handoff took {took:?}", S::NAME);
        assert_eq!(release::<S>(second).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// How many waiters the queue `key` has on each node: `LLEN` of a lock key's queue, `ZCARD` of
/// a semaphore's (a sorted set).
pub(super) fn queue_lengths(servers: &Servers, key: &str) -> Vec<i64> {
    let count = if key.contains(redlease_core::SEMAPHORE_PREFIX) { "ZCARD" } else { "LLEN" };
    servers
        .nodes()
        .iter()
        .map(|n| match n.conn().and_then(|mut c| c.cmd(&[count, key])) {
            Ok(Reply::Int(len)) => len,
            other => panic!("node {}: {count} {key}: {other:?}", n.index()),
        })
        .collect()
}

/// Waiters are served in the order they queued, each woken by the release that names it: with
/// a 5 s retry delay for both, the first waiter gets the lock within 2 s of the release while
/// the second sleeps on (a release names one waiter, so there is no race between them), then
/// the second within 2 s of the first's release. The releasing client's own lock call right
/// after its release is refused (the key is reserved for the next waiter). The queue is empty
/// on every node afterwards.
pub fn waiters_in_order<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let slow = Retry::new(3, Duration::from_secs(5), Duration::from_secs(5));
        let holder = connect::<S>(servers.urls(), Options::default()).await;
        let first = connect::<S>(servers.urls(), Options { retry: slow, ..Options::default() }).await;
        let second = connect::<S>(servers.urls(), Options { retry: slow, ..Options::default() }).await;
        let (queue, n) = ("redlease:queue:fifo", servers.len() as i64);
        let spec = LockSpec::new("fifo", Duration::from_secs(30)).wait(Duration::from_secs(20));
        for round in 0..3 {
            let guard = take_everywhere::<S>(&servers, &holder, "fifo", Duration::from_secs(30)).await;
            let mut waiters = Vec::new();
            for (i, client) in [&first, &second].into_iter().enumerate() {
                let (client, spec) = (client.clone(), spec.clone());
                waiters.push(S::spawn(async move { S::lock(&client, spec).await }));
                // Its first attempt (sent at once on every link, all of them up) is refused
                // everywhere and queues it; a second attempt would be 5 s later.
                eventually::<S>(Duration::from_secs(3), "the waiter queued on every node", || {
                    queue_lengths(&servers, queue).iter().all(|&len| len == i as i64 + 1)
                })
                .await;
            }
            assert_eq!(subscribers(&servers, "redlease:wake:fifo"), 2 * n);
            let mut waiters = waiters.into_iter();
            let released = Instant::now();
            assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
            // The release handed the key to the first waiter: the releasing client's own next
            // lock call, sent at once, cannot barge in.
            match S::lock(&holder, LockSpec::new("fifo", Duration::from_secs(30)).once()).await {
                Err(e) => assert!(is_held(&e), "[{}] round {round}: the barging call: {e}", S::NAME),
                Ok(_) => panic!("[{}] round {round}: the releasing client barged in ahead of the queue", S::NAME),
            }
            let got = ok::<S, _>(waiters.next().unwrap().await, "the first waiter");
            let took = released.elapsed();
            assert!(took < Duration::from_secs(2), "[{}] round {round}: the first waiter took {took:?}", S::NAME);
            // Granted at a quorum: on the last node its grant, which takes it off the queue, may
            // still be on its way.
            eventually::<S>(Duration::from_secs(3), "the first waiter off every queue, the second still on", || {
                queue_lengths(&servers, queue) == vec![1; n as usize]
            })
            .await;
            let released = Instant::now();
            assert_eq!(release::<S>(got).await.outcome, ReleaseOutcome::Released);
            let got = ok::<S, _>(waiters.next().unwrap().await, "the second waiter");
            let took = released.elapsed();
            assert!(took < Duration::from_secs(2), "[{}] round {round}: the second waiter took {took:?}", S::NAME);
            assert_eq!(release::<S>(got).await.outcome, ReleaseOutcome::Released);
            eventually::<S>(Duration::from_secs(3), "nobody left queued on any node", || {
                queue_lengths(&servers, queue) == vec![0; n as usize]
            })
            .await;
        }
    });
    servers.assert_no_leaks();
}

/// Lock/release cycles that must each succeed; returns nothing, panics on the first failure.
async fn cycles<S: Subject>(client: &S::Client, resource: &str, n: usize, what: &str) {
    for i in 0..n {
        let started = Instant::now();
        let guard = lock::<S>(client, LockSpec::new(resource, Duration::from_secs(10))).await;
        let report = release::<S>(guard).await;
        assert_eq!(report.outcome, ReleaseOutcome::Released, "[{}] {what}, cycle {i}: {report:?}", S::NAME);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "[{}] {what}: a cycle took {:?}",
            S::NAME,
            started.elapsed()
        );
    }
}

/// 2 of 5 nodes blackholed, then 2 of 5 killed (also while connecting): locks still work.
pub fn minority_down<S: Subject>() {
    let servers = Servers::start(5);
    let (proxies, urls) = proxied(&servers);
    S::block_on(async {
        let client = connect::<S>(urls.clone(), Options::default()).await;
        cycles::<S>(&client, "minority", 3, "all nodes up").await;

        proxies[0].set_mode(Mode::Blackhole);
        proxies[1].set_mode(Mode::Blackhole);
        cycles::<S>(&client, "minority", 5, "nodes 0 and 1 blackholed").await;
        proxies[0].set_mode(Mode::Pass);
        proxies[1].set_mode(Mode::Pass);

        servers.node(3).kill();
        servers.node(4).kill();
        cycles::<S>(&client, "minority", 5, "nodes 3 and 4 killed").await;

        // A client created while 2 nodes are down connects and works.
        let late = connect_partial::<S>(urls.clone(), Options::default()).await;
        cycles::<S>(&late, "minority", 3, "new client, nodes 3 and 4 killed").await;

        servers.node(3).restart(false);
        servers.node(4).restart(false);
    });
    servers.assert_no_leaks();
}

/// 3 of 5 nodes blackholed, reset or killed: a typed `Unreachable` within seconds (node timeout
/// × attempts, far below TCP timeouts); locks work again once healed.
pub fn majority_down<S: Subject>() {
    let servers = Servers::start(5);
    let (proxies, urls) = proxied(&servers);
    // 50 ms node timeout, 3 attempts 5–50 ms apart: the error is due after about 250 ms.
    let fast = Options { node_timeout: ms(50), ..Options::default() };
    S::block_on(async {
        let probe = connect::<S>(urls.clone(), fast).await;
        let client = connect::<S>(urls, Options::default()).await;
        cycles::<S>(&client, "majority", 2, "all nodes up").await;

        let unreachable = |what: &'static str| {
            let client = probe.clone();
            async move {
                let started = Instant::now();
                let e = err::<S, _>(S::lock(&client, LockSpec::new("majority", Duration::from_secs(10))).await, what);
                let took = started.elapsed();
                assert!(took < Duration::from_secs(2), "[{}] {what}: the error took {took:?}", S::NAME);
                match &e.kind {
                    FailureKind::Acquire(AcquireError::Unreachable { votes, attempts }) => {
                        assert_eq!(*attempts, 3, "[{}] {what}: {e}", S::NAME);
                        assert!(votes.iter().filter(|v| v.is_failure()).count() >= 3, "[{}] {what}: {e}", S::NAME);
                    }
                    _ => panic!("[{}] {what}: expected Acquire(Unreachable), got {e}", S::NAME),
                }
                assert!(e.message.contains("unreachable"), "[{}] {what}: message: {}", S::NAME, e.message);
            }
        };
        let heal = |what: &'static str| {
            let client = client.clone();
            async move {
                let spec = LockSpec::new("majority", Duration::from_secs(10)).wait(Duration::from_secs(10));
                let guard = ok::<S, _>(S::lock(&client, spec).await, what);
                assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released, "[{}] {what}", S::NAME);
            }
        };

        for mode in [Mode::Blackhole, Mode::Reset] {
            for p in &proxies[..3] {
                p.set_mode(mode);
            }
            unreachable(if mode == Mode::Blackhole { "3 of 5 blackholed" } else { "3 of 5 reset" }).await;
            for p in &proxies {
                p.set_mode(Mode::Pass);
            }
            heal("after healing the proxies").await;
        }

        for i in 0..3 {
            servers.node(i).kill();
        }
        unreachable("3 of 5 killed").await;
        for i in 0..3 {
            servers.node(i).restart(false);
        }
        heal("after restarting the killed nodes").await;
        cycles::<S>(&client, "majority", 2, "healed").await;
    });
    servers.assert_no_leaks();
}

/// One node paused with SIGSTOP (also before a client connects): lock and release complete
/// well within a second each (early quorum), never at a TCP timeout.
pub fn paused_node<S: Subject>() {
    let servers = Servers::start(5);
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        cycles::<S>(&client, "paused", 2, "all nodes up").await;

        servers.node(0).pause();
        for i in 0..5 {
            let started = Instant::now();
            let guard = lock::<S>(&client, LockSpec::new("paused", Duration::from_secs(10))).await;
            let took = started.elapsed();
            assert!(took < Duration::from_secs(1), "[{}] lock with a paused node took {took:?} (cycle {i})", S::NAME);
            let started = Instant::now();
            let report = release::<S>(guard).await;
            let took = started.elapsed();
            assert_eq!(report.outcome, ReleaseOutcome::Released, "[{}] {report:?}", S::NAME);
            assert!(took < Duration::from_secs(1), "[{}] release with a paused node took {took:?}", S::NAME);
        }

        // A client connecting while the node is paused: its TCP connect succeeds, its handshake
        // is never answered. Neither connecting nor locking may wait for it.
        let late = connect_partial::<S>(servers.urls(), Options::default()).await;
        let started = Instant::now();
        let guard = lock::<S>(&late, LockSpec::new("paused", Duration::from_secs(10))).await;
        assert!(started.elapsed() < Duration::from_secs(1), "[{}] took {:?}", S::NAME, started.elapsed());
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);

        servers.node(0).resume();
        cycles::<S>(&client, "paused", 2, "node resumed").await;
        cycles::<S>(&late, "paused", 2, "node resumed, late client").await;
        // The paused node ran its backlog (acquires and the releases behind them): nothing stays.
        eventually::<S>(Duration::from_secs(3), "no key left on the resumed node", || present(&servers, "paused") == 0)
            .await;
    });
    servers.assert_no_leaks();
}

/// Nodes killed with SIGKILL and restarted on the same port: the client reconnects by itself.
pub fn kill_restart<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        cycles::<S>(&client, "restart", 2, "all nodes up").await;
        let wait = |what: &'static str| {
            let client = client.clone();
            async move {
                let spec = LockSpec::new("restart", Duration::from_secs(10)).wait(Duration::from_secs(10));
                let guard = ok::<S, _>(S::lock(&client, spec).await, what);
                assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released, "[{}] {what}", S::NAME);
            }
        };

        // Nodes 0 and 1 crash and come back empty; then node 2 dies: a quorum now needs both
        // restarted nodes, so the lock proves the client reconnected to each of them.
        servers.node(0).kill();
        servers.node(1).kill();
        servers.node(0).restart(false);
        servers.node(1).restart(false);
        servers.node(2).kill();
        wait("nodes 0 and 1 restarted, node 2 down").await;

        // And the other way round: node 2 back, node 0 down.
        servers.node(2).restart(false);
        servers.node(0).kill();
        wait("node 2 restarted, node 0 down").await;
        servers.node(0).restart(false);
        cycles::<S>(&client, "restart", 3, "all nodes restarted").await;
    });
    servers.assert_no_leaks();
}

/// Crash recovery on real servers, both sides: with `appendfsync always`, a majority that is
/// killed and restarted still holds the lock keys, so nobody else gets the lock; without
/// persistence the restarted majority has forgotten them and a second client gets the lock
/// while the first still believes it holds it (the documented unsafe setup).
pub fn crash_recovery<S: Subject>() {
    for persist in [true, false] {
        let servers = Servers::builder().nodes(3).persist(persist).start();
        S::block_on(async {
            let a = connect::<S>(servers.urls(), Options::default()).await;
            let b = connect::<S>(servers.urls(), Options::default()).await;
            let ttl = Duration::from_secs(30);
            let guard = lock::<S>(&a, LockSpec::new("crash", ttl)).await;
            let token = S::token(&guard);
            eventually::<S>(Duration::from_secs(2), "all nodes hold the key", || {
                holding(&servers, "crash", &token) == 3
            })
            .await;
            servers.node(0).restart(true);
            servers.node(1).restart(true);
            let survivors = holding(&servers, "crash", &token);

            // b tries until its client is reconnected to the restarted nodes (no vote says a
            // node is down or silent), or until it gets the lock.
            let deadline = Instant::now() + Duration::from_secs(5);
            let outcome = loop {
                match S::lock(&b, LockSpec::new("crash", ttl).once()).await {
                    Err(e) if has_failed_votes(&e) && Instant::now() < deadline => S::sleep(ms(50)).await,
                    other => break other,
                }
            };
            if persist {
                assert_eq!(survivors, 3, "[{}] appendfsync always must keep the keys across kill -9", S::NAME);
                let e = match outcome {
                    Ok(_) => panic!("[{}] the lock was granted twice despite appendfsync always", S::NAME),
                    Err(e) => e,
                };
                assert!(is_held(&e), "[{}] expected Held after the restart, got {e}", S::NAME);
                // `a` saw the same kills as `b` and may still be reconnecting (over TLS, in the
                // handshake): wait for it, or its release would count nodes 0 and 1 as down.
                wait_reconnected::<S>(&a, deadline).await;
                assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
            } else {
                assert_eq!(survivors, 1, "[{}] without persistence the restarted nodes come back empty", S::NAME);
                let second = ok::<S, _>(outcome, "lock after the restart without persistence");
                assert!(
                    S::valid_until(&guard) > Instant::now(),
                    "[{}] the first holder still believes it holds the lock: the unsafe case",
                    S::NAME
                );
                assert_eq!(release::<S>(second).await.outcome, ReleaseOutcome::Released);
                // `a` may still be in its reconnect backoff (it saw the same kills as `b`): let it
                // reconnect first, or its release would count the restarted nodes as down.
                wait_reconnected::<S>(&a, deadline).await;
                let report = release::<S>(guard).await;
                assert_eq!(report.outcome, ReleaseOutcome::NotHeld, "[{}] {report:?}", S::NAME);
            }
        });
        servers.assert_no_leaks();
    }
}

/// Wait until `client` is connected to every node again (a probe lock gets no failed vote),
/// or `deadline` passes.
async fn wait_reconnected<S: Subject>(client: &S::Client, deadline: Instant) {
    let deadline = deadline.max(Instant::now() + Duration::from_secs(2));
    loop {
        match S::lock(client, LockSpec::new("reconnect-probe", Duration::from_secs(5)).once()).await {
            Ok(probe) => {
                let _ = S::release(probe).await;
                return;
            }
            Err(e) if has_failed_votes(&e) && Instant::now() < deadline => S::sleep(ms(50)).await,
            Err(_) => return,
        }
    }
}

/// A release after the TTL passed reports `NotHeld`, fires nothing wrong and leaves the next
/// holder's keys alone; the lost signal fires when the validity runs out.
pub fn release_after_expiry<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let a = connect::<S>(servers.urls(), Options::default()).await;
        let b = connect::<S>(servers.urls(), Options::default()).await;
        let first = lock::<S>(&a, LockSpec::new("expiring", ms(300))).await;
        let lost = S::lost(&first);
        assert!(
            S::wait_lost(&lost, Duration::from_secs(3)).await,
            "[{}] lost signal after the validity ran out",
            S::NAME
        );
        assert!(S::valid_until(&first) <= Instant::now());
        eventually::<S>(Duration::from_secs(2), "keys expire", || present(&servers, "expiring") == 0).await;

        let second = lock::<S>(&b, LockSpec::new("expiring", Duration::from_secs(10))).await;
        let token = S::token(&second);
        let report = release::<S>(first).await;
        assert_eq!(report.outcome, ReleaseOutcome::NotHeld, "[{}] late release: {report:?}", S::NAME);
        assert_eq!(report.deleted, 0, "[{}] late release deleted something: {report:?}", S::NAME);
        // The next holder's lock returned at a quorum; its last `SET` may land a moment later, and
        // nothing re-sets a key the late release would have deleted.
        eventually::<S>(Duration::from_secs(2), "the next holder's keys survive on every node", || {
            holding(&servers, "expiring", &token) == 3
        })
        .await;
        assert_eq!(release::<S>(second).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// An extend after the lock was lost reports `Lost` (or `Expired` once the validity ran out),
/// fires the lost signal and changes nothing on the nodes.
pub fn extend_after_loss<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let a = connect::<S>(servers.urls(), Options::default()).await;
        let b = connect::<S>(servers.urls(), Options::default()).await;
        let ttl = Duration::from_secs(10);

        // Taken away while still valid: the keys vanish behind a's back and b takes over.
        let mut first = lock::<S>(&a, LockSpec::new("taken", ttl)).await;
        let lost = S::lost(&first);
        eventually::<S>(Duration::from_secs(2), "all nodes hold a's key", || {
            holding(&servers, "taken", &S::token(&first)) == 3
        })
        .await;
        for node in servers.nodes() {
            node.conn().and_then(|mut c| c.del("taken")).expect("DEL");
        }
        let second = lock::<S>(&b, LockSpec::new("taken", ttl)).await;
        let token = S::token(&second);
        // Granted at a quorum; b's last SET may still be on its way, and the checks below read
        // every node.
        eventually::<S>(Duration::from_secs(3), "all nodes hold b's key", || holding(&servers, "taken", &token) == 3)
            .await;
        let e = err::<S, _>(S::extend(&mut first, Duration::from_secs(60)).await, "extend of a taken lock");
        match &e.kind {
            FailureKind::Extend(ExtendError::Lost { refused, .. }) => {
                assert!(*refused >= 2, "[{}] a majority refused: {e}", S::NAME)
            }
            _ => panic!("[{}] expected Extend(Lost), got {e}", S::NAME),
        }
        assert!(e.message.contains("lost"), "[{}] message: {}", S::NAME, e.message);
        assert!(S::wait_lost(&lost, Duration::from_secs(2)).await, "[{}] lost signal after a refused extend", S::NAME);
        let untouched = |key: &str, token: &str| {
            values(&servers, key)
                .into_iter()
                .all(|v| matches!(v, Some((Some(t), p)) if t == token && p > 0 && p <= 10_000))
        };
        assert!(untouched("taken", &token), "[{}] the failed extend touched b's keys", S::NAME);
        let report = release::<S>(first).await;
        assert_eq!(report.outcome, ReleaseOutcome::NotHeld, "[{}] {report:?}", S::NAME);
        assert!(untouched("taken", &token), "[{}] the release of a lost lock touched b's keys", S::NAME);
        assert_eq!(release::<S>(second).await.outcome, ReleaseOutcome::Released);

        // Expired: the validity ran out before the extend.
        let mut late = lock::<S>(&a, LockSpec::new("late", ms(300))).await;
        S::sleep(ms(600)).await;
        let next = lock::<S>(&b, LockSpec::new("late", ttl)).await;
        let token = S::token(&next);
        eventually::<S>(Duration::from_secs(3), "all nodes hold the next holder's key", || {
            holding(&servers, "late", &token) == 3
        })
        .await;
        let e = err::<S, _>(S::extend(&mut late, Duration::from_secs(60)).await, "extend of an expired lock");
        assert!(
            matches!(e.kind, FailureKind::Extend(ExtendError::Expired | ExtendError::Lost { .. })),
            "[{}] expected Extend(Expired) or Extend(Lost), got {e}",
            S::NAME
        );
        assert!(S::is_lost(&S::lost(&late)), "[{}] an expired lock must read as lost", S::NAME);
        assert!(untouched("late", &token), "[{}] the failed extend touched the next holder's keys", S::NAME);
        assert_eq!(release::<S>(late).await.outcome, ReleaseOutcome::NotHeld);
        assert_eq!(release::<S>(next).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// Auto-extension keeps a 1 s lock through 5 s of work under `with_lock` (others are refused
/// meanwhile, and it is released right after), and likewise through `set_auto_extend(true)`.
pub fn auto_extension<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let a = connect::<S>(servers.urls(), Options::default()).await;
        let b = connect::<S>(servers.urls(), Options::default()).await;
        let ttl = Duration::from_secs(1);
        let other = b.clone();
        let work = move |lost: S::Lost| -> super::BoxFuture<'static, u32> {
            Box::pin(async move {
                let started = Instant::now();
                let mut steps = 0;
                let mut refused = false;
                while started.elapsed() < Duration::from_secs(5) {
                    S::sleep(ms(100)).await;
                    steps += 1;
                    assert!(!S::is_lost(&lost), "[{}] lost after {:?} of work", S::NAME, started.elapsed());
                    if steps == 30 {
                        // 3 s in: three TTLs have passed, the lock must still be ours.
                        let r = S::lock(&other, LockSpec::new("auto", ttl).once()).await;
                        refused = matches!(&r, Err(e) if is_held(e));
                        assert!(refused, "[{}] another client got an auto-extended lock: {:?}", S::NAME, r.err());
                    }
                }
                assert!(refused);
                steps
            })
        };
        let steps = ok::<S, _>(S::with_lock(&a, "auto", ttl, Box::new(work)).await, "with_lock");
        assert!(steps >= 40, "[{}] the work ran {steps} steps", S::NAME);
        // Released at the end, not expired: the last extension left most of a second.
        assert!(present(&servers, "auto") <= 1, "[{}] with_lock left its keys behind", S::NAME);
        let after = lock::<S>(&b, LockSpec::new("auto", ttl).once()).await;
        assert_eq!(release::<S>(after).await.outcome, ReleaseOutcome::Released);

        // The guard form.
        let guard = lock::<S>(&a, LockSpec::new("auto-guard", ttl)).await;
        S::set_auto_extend(&guard, true);
        S::sleep(Duration::from_millis(2500)).await;
        assert!(!S::is_lost(&S::lost(&guard)), "[{}] auto-extended guard lost", S::NAME);
        assert!(S::valid_until(&guard) > Instant::now(), "[{}] auto-extended guard expired", S::NAME);
        assert!(holding(&servers, "auto-guard", &S::token(&guard)) >= 2);
        let e = err::<S, _>(S::lock(&b, LockSpec::new("auto-guard", ttl).once()).await, "try_lock of a held lock");
        assert!(is_held(&e), "[{}] expected Held, got {e}", S::NAME);
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// The lost-lock signal fires when a majority of nodes is taken away (SIGSTOP) during
/// `with_lock`.
pub fn lost_signal<S: Subject>() {
    let servers = Arc::new(Servers::start(5));
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let nodes = servers.clone();
        let work = move |lost: S::Lost| -> super::BoxFuture<'static, (bool, bool)> {
            Box::pin(async move {
                let before = S::is_lost(&lost);
                for i in 0..3 {
                    nodes.node(i).pause();
                }
                let fired = S::wait_lost(&lost, Duration::from_secs(5)).await;
                for i in 0..3 {
                    nodes.node(i).resume();
                }
                (before, fired && S::is_lost(&lost))
            })
        };
        let (before, fired) =
            ok::<S, _>(S::with_lock(&client, "lost", Duration::from_secs(1), Box::new(work)).await, "with_lock");
        assert!(!before, "[{}] lost before the nodes went away", S::NAME);
        assert!(fired, "[{}] the lost signal did not fire within 5 s of losing 3 of 5 nodes", S::NAME);
        cycles::<S>(&client, "lost", 2, "after resuming the nodes").await;
    });
    servers.assert_no_leaks();
}

/// 1,000 fenced acquisitions from 8 tasks while a partition rotates over the nodes (so the
/// granting quorums keep changing): the tokens strictly increase and no holders overlap.
pub fn fencing_monotonic<S: Subject>() {
    const TASKS: usize = 8;
    const EACH: usize = 125;
    let servers = Servers::start(5);
    let (proxies, urls) = proxied(&servers);
    let proxies = Arc::new(proxies);
    let log = Arc::new(HolderLog::new());
    S::block_on(async {
        let client = connect::<S>(urls, contention_options()).await;
        let stop = Arc::new(AtomicBool::new(false));
        let rotator = {
            let (proxies, stop) = (proxies.clone(), stop.clone());
            S::spawn(async move {
                let mut k = 0;
                while !stop.load(Ordering::SeqCst) {
                    let p = &proxies[k % proxies.len()];
                    p.set_mode(Mode::Blackhole);
                    S::sleep(ms(25)).await;
                    p.set_mode(Mode::Pass);
                    k += 1;
                }
                k
            })
        };
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let (client, log) = (client.clone(), log.clone());
            tasks.push(S::spawn(async move {
                for i in 0..EACH {
                    let spec = LockSpec::new("fenced", Duration::from_secs(5)).fencing().wait(Duration::from_secs(60));
                    let guard = lock::<S>(&client, spec).await;
                    let acquired = Instant::now();
                    let fence = S::fence(&guard);
                    let valid = S::valid_until(&guard);
                    let released_at = Instant::now();
                    let report = release::<S>(guard).await;
                    assert_eq!(report.outcome, ReleaseOutcome::Released, "[{}] task {t}: {report:?}", S::NAME);
                    log.record("fenced", &format!("task {t} #{i}"), acquired, valid, released_at, fence);
                }
            }));
        }
        for task in tasks {
            task.await;
        }
        stop.store(true, Ordering::SeqCst);
        let rotations = rotator.await;
        assert!(rotations >= 2, "[{}] the partition rotated only {rotations} times", S::NAME);
    });
    for p in proxies.iter() {
        p.set_mode(Mode::Pass);
    }
    assert_eq!(log.len(), TASKS * EACH);
    log.assert_no_overlap();
    log.assert_fences_increase();
    // The last token was written back to a quorum of counters.
    let last = log.holds("fenced").last().and_then(|h| h.fence).expect("a fence");
    let at_least = values(&servers, "redlease:fence:fenced")
        .into_iter()
        .flatten()
        .filter(|(v, pttl)| *pttl == -1 && v.as_deref().and_then(|v| v.parse::<u64>().ok()).is_some_and(|c| c >= last))
        .count();
    assert!(at_least >= 3, "[{}] only {at_least} fence counters reached the last token {last}", S::NAME);
    servers.assert_no_leaks();
}

/// `SCRIPT FLUSH` on every node mid-run: lock, extend and release keep working (the core falls
/// back from `EVALSHA` to `EVAL` on `NOSCRIPT`).
pub fn script_flush<S: Subject>() {
    let servers = Arc::new(Servers::start(3));
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let ttl = Duration::from_secs(10);
        // Step by step: a flush before each kind of operation.
        servers.script_flush_all();
        let mut guard = lock::<S>(&client, LockSpec::new("flush", ttl)).await;
        servers.script_flush_all();
        ok::<S, _>(S::extend(&mut guard, ttl).await, "extend after SCRIPT FLUSH");
        servers.script_flush_all();
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released, "[{}] release after flush", S::NAME);
        servers.script_flush_all();
        let guard = lock::<S>(&client, LockSpec::new("flush", ttl).fencing()).await;
        assert!(S::fence(&guard).is_some());
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);

        // Concurrently: 4 tasks cycling while the scripts are flushed every 10 ms. Each task
        // runs at least 25 cycles and keeps going until the flusher has flushed 3 times (or
        // 10 s have passed, which the check below reports), so the flushes land among the
        // cycles however fast the cycles are.
        const FLUSHES: u32 = 3;
        let deadline = Instant::now() + Duration::from_secs(10);
        let stop = Arc::new(AtomicBool::new(false));
        let flushed = Arc::new(AtomicU32::new(0));
        let flusher = {
            let (servers, stop, flushed) = (servers.clone(), stop.clone(), flushed.clone());
            S::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    servers.script_flush_all();
                    flushed.fetch_add(1, Ordering::SeqCst);
                    S::sleep(ms(10)).await;
                }
            })
        };
        let mut tasks = Vec::new();
        for t in 0..4 {
            let (client, flushed) = (client.clone(), flushed.clone());
            tasks.push(S::spawn(async move {
                let resource = format!("flush-{t}");
                let mut i = 0u32;
                while i < 25 || (flushed.load(Ordering::SeqCst) < FLUSHES && Instant::now() < deadline) {
                    let mut guard = lock::<S>(&client, LockSpec::new(&resource, ttl)).await;
                    ok::<S, _>(S::extend(&mut guard, ttl).await, &format!("task {t} cycle {i}: extend"));
                    let report = release::<S>(guard).await;
                    assert_eq!(report.outcome, ReleaseOutcome::Released, "[{}] task {t}: {report:?}", S::NAME);
                    i += 1;
                }
            }));
        }
        for task in tasks {
            task.await;
        }
        stop.store(true, Ordering::SeqCst);
        flusher.await;
        let flushes = flushed.load(Ordering::SeqCst);
        assert!(flushes >= FLUSHES, "[{}] only {flushes} flushes happened during the run", S::NAME);
    });
    servers.assert_no_leaks();
}

/// ACL user and password from the URL work; a wrong or missing password gives a clear error
/// that names the node (and never shows the password).
pub fn acl_auth<S: Subject>() {
    let servers = Servers::builder().nodes(3).acl_user("alice", "s3cret").start();
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        cycles::<S>(&client, "acl", 2, "with the ACL user").await;

        let bad_password = "not-the-password";
        let cases = [
            ("a wrong password", servers.addrs().iter().map(|a| format!("redis://alice:{bad_password}@{a}")).collect()),
            ("no password", servers.addrs().iter().map(|a| format!("redis://{a}")).collect::<Vec<_>>()),
        ];
        for (what, urls) in cases {
            let started = Instant::now();
            let e = match S::connect(urls, Options::default()).await {
                Err(e) => e,
                Ok(c) => err::<S, _>(S::lock(&c, LockSpec::new("acl", Duration::from_secs(10)).once()).await, what),
            };
            assert!(started.elapsed() < Duration::from_secs(5), "[{}] {what}: took {:?}", S::NAME, started.elapsed());
            let msg = e.message.to_lowercase();
            let names_reason = if what == "no password" {
                msg.contains("noauth") || msg.contains("auth")
            } else {
                msg.contains("wrongpass") || msg.contains("invalid username-password")
            };
            assert!(names_reason, "[{}] {what}: the error must say why: {e}", S::NAME);
            assert!(msg.contains("node"), "[{}] {what}: the error must name the node: {e}", S::NAME);
            assert!(!e.message.contains(bad_password), "[{}] {what}: the error shows the password: {e}", S::NAME);
        }
    });
    servers.assert_no_leaks();
}

/// Malformed URLs, an empty node list, a zero TTL and an empty resource are typed errors with
/// clear messages (never a panic, nothing sent).
pub fn config_errors<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let bad = |urls: Vec<String>| async move {
            match S::connect(urls.clone(), Options::default()).await {
                Ok(_) => panic!("[{}] connect({urls:?}) succeeded", S::NAME),
                Err(e) => e,
            }
        };
        let e = bad(vec!["http://127.0.0.1:6379".into()]).await;
        assert!(matches!(e.kind, FailureKind::Config(ConfigError::BadUrl { .. })), "[{}] {e}", S::NAME);
        assert!(e.message.contains("redis://"), "[{}] the message should show the expected form: {e}", S::NAME);
        let mut urls = servers.urls();
        urls.push("redis://127.0.0.1:notaport".into());
        let e = bad(urls).await;
        assert!(matches!(e.kind, FailureKind::Config(ConfigError::BadUrl { .. })), "[{}] {e}", S::NAME);
        assert!(e.message.contains("port") && e.message.contains("notaport"), "[{}] {e}", S::NAME);
        let e = bad(vec![]).await;
        assert!(matches!(e.kind, FailureKind::Config(ConfigError::NoNodes)), "[{}] {e}", S::NAME);
        assert!(e.message.contains("no nodes"), "[{}] {e}", S::NAME);

        let client = connect::<S>(servers.urls(), Options::default()).await;
        let e = err::<S, _>(S::lock(&client, LockSpec::new("cfg", Duration::ZERO)).await, "zero ttl");
        assert!(matches!(e.kind, FailureKind::Misuse(Misuse::ZeroTtl)), "[{}] {e}", S::NAME);
        assert!(e.message.contains("ttl"), "[{}] {e}", S::NAME);
        let e = err::<S, _>(S::lock(&client, LockSpec::new("", Duration::from_secs(10))).await, "empty resource");
        assert!(matches!(e.kind, FailureKind::Misuse(Misuse::EmptyResource)), "[{}] {e}", S::NAME);
        assert!(e.message.contains("resource"), "[{}] {e}", S::NAME);

        let mut guard = lock::<S>(&client, LockSpec::new("cfg", Duration::from_secs(10))).await;
        let e = err::<S, _>(S::extend(&mut guard, Duration::ZERO).await, "extend by zero");
        assert!(matches!(e.kind, FailureKind::Misuse(Misuse::ZeroTtl)), "[{}] {e}", S::NAME);
        // The guard is still usable after a refused command.
        ok::<S, _>(S::extend(&mut guard, Duration::from_secs(10)).await, "extend after a misuse");
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// `close()`: a guard dropped right before it and a guard still held are both released
/// before it returns (not left for their 30 s TTL), the held guard's lost signal fires (nobody
/// extends it any more), and every later call on any clone reports the client closed.
pub fn close_releases<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        let clone = client.clone();
        let ttl = Duration::from_secs(30);
        let held = lock::<S>(&client, LockSpec::new("close:held", ttl)).await;
        let lost = S::lost(&held);
        let dropped = lock::<S>(&client, LockSpec::new("close:dropped", ttl)).await;
        drop(dropped);
        S::close(&client).await;
        assert!(S::wait_lost(&lost, Duration::from_secs(2)).await, "[{}] the held lock is not reported lost", S::NAME);
        // The releases were sent before close returned; the nodes apply them at once.
        eventually::<S>(Duration::from_secs(2), "both keys are deleted everywhere", || {
            present(&servers, "close:held") == 0 && present(&servers, "close:dropped") == 0
        })
        .await;
        match S::lock(&clone, LockSpec::new("close:after", ttl)).await {
            Err(Failure { kind: FailureKind::Closed, .. }) => {}
            other => panic!("[{}] a lock after close: {:?}", S::NAME, other.map(|_| "a guard")),
        }
        drop(held);
    });
    servers.assert_no_leaks();
}

/// Dropping a guard releases its lock (also when the task holding it ends).
pub fn drop_releases<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let a = connect::<S>(servers.urls(), Options::default()).await;
        let b = connect::<S>(servers.urls(), Options::default()).await;
        let ttl = Duration::from_secs(30);
        let guard = lock::<S>(&a, LockSpec::new("dropped", ttl)).await;
        let token = S::token(&guard);
        eventually::<S>(Duration::from_secs(2), "all nodes hold the key", || holding(&servers, "dropped", &token) == 3)
            .await;
        drop(guard);
        // A 30 s TTL cannot explain the keys going away within 3 s: the drop released them.
        eventually::<S>(Duration::from_secs(3), "the dropped guard's keys are deleted", || {
            present(&servers, "dropped") == 0
        })
        .await;
        let next = lock::<S>(&b, LockSpec::new("dropped", ttl).once()).await;
        assert_eq!(release::<S>(next).await.outcome, ReleaseOutcome::Released);

        let task = {
            let a = a.clone();
            S::spawn(async move {
                let guard = lock::<S>(&a, LockSpec::new("dropped-in-task", ttl)).await;
                S::token(&guard)
            })
        };
        let _token = task.await;
        eventually::<S>(Duration::from_secs(3), "the task's guard is released when the task ends", || {
            present(&servers, "dropped-in-task") == 0
        })
        .await;
        let next = lock::<S>(&b, LockSpec::new("dropped-in-task", ttl).once()).await;
        assert_eq!(release::<S>(next).await.outcome, ReleaseOutcome::Released);
    });
    servers.assert_no_leaks();
}

/// A loopback address whose connects hang (the listener's accept queue is full, so the kernel
/// drops further SYNs): a node behind a partition, without leaving the machine. Keep the
/// returned listener and streams alive while the address should hang.
fn hanging_addr() -> (socket2::Socket, Vec<std::net::TcpStream>, std::net::SocketAddr) {
    use socket2::{Domain, Socket, Type};
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    listener.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("bind");
    listener.listen(0).expect("listen");
    let addr = listener.local_addr().expect("addr").as_socket().expect("an IP address");
    let mut filled = Vec::new();
    while let Ok(s) = std::net::TcpStream::connect_timeout(&addr, ms(200)) {
        filled.push(s);
        assert!(filled.len() < 64, "the accept queue never filled");
    }
    (listener, filled, addr)
}

/// With two of five nodes unreachable (their connects hang), `connect` is ready as soon as the
/// other three are connected — not after the 10 s connect timeout — locking works, and the
/// client goes away without waiting for the hanging nodes either.
pub fn ready_at_quorum<S: Subject>() {
    let servers = Servers::start(3);
    let (_l1, _f1, a1) = hanging_addr();
    let (_l2, _f2, a2) = hanging_addr();
    S::block_on(async {
        let mut urls = servers.urls();
        urls.push(format!("redis://{a1}"));
        urls.push(format!("redis://{a2}"));
        let options = Options { connect_timeout: Duration::from_secs(10), ..Options::default() };
        let started = Instant::now();
        let client = ok::<S, _>(S::connect(urls, options).await, "connect with two nodes hanging");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "[{}] connect waited {:?} for the hanging nodes",
            S::NAME,
            started.elapsed()
        );
        let guard = lock::<S>(&client, LockSpec::new("quorum", Duration::from_secs(10))).await;
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
        let started = Instant::now();
        S::close(&client).await;
        assert!(started.elapsed() < Duration::from_secs(3), "[{}] close waited {:?}", S::NAME, started.elapsed());
    });
    servers.assert_no_leaks();
}

/// Reports say what happened: a release decided at the quorum counts the nodes that had not
/// answered yet as pending, not failed; an acquisition that fails names each failed node by
/// address; refusals for a configuration reason are `Misconfigured`; a refused extension says
/// how many nodes refused.
pub fn honest_reports<S: Subject>() {
    let servers = Servers::builder().nodes(3).acl_user("alice", "s3cret").start();
    S::block_on(async {
        let client = connect::<S>(servers.urls(), Options::default()).await;
        for i in 0..10 {
            let guard = lock::<S>(&client, LockSpec::new(&format!("honest:{i}"), Duration::from_secs(10))).await;
            let r = release::<S>(guard).await;
            assert_eq!(r.outcome, ReleaseOutcome::Released, "[{}] {r:?}", S::NAME);
            assert_eq!(r.failed, 0, "[{}] a healthy node is not a failed one: {r:?}", S::NAME);
            assert_eq!(r.deleted + r.absent + r.failed + r.pending, 3, "[{}] {r:?}", S::NAME);
        }

        // A refused extension: another client's token on two nodes.
        let mut guard = lock::<S>(&client, LockSpec::new("honest:stolen", Duration::from_secs(10))).await;
        for i in 0..2 {
            servers.node(i).conn().unwrap().set("honest:stolen", "someone-else").unwrap();
        }
        match S::extend(&mut guard, Duration::from_secs(10)).await {
            Err(Failure { kind: FailureKind::Extend(ExtendError::Lost { refused, nodes: 3 }), .. }) => {
                assert!(refused >= 2, "[{}] {refused} refusals reported", S::NAME);
            }
            other => panic!("[{}] extend of a stolen lock: {:?}", S::NAME, other.map(|_| "extended")),
        }
        drop(guard);
        for i in 0..3 {
            servers.node(i).conn().unwrap().del("honest:stolen").unwrap();
        }

        // A wrong password on two of three nodes: misconfigured, each named by address.
        let (user, pass) = servers.credentials().unwrap();
        let urls: Vec<String> = servers
            .addrs()
            .iter()
            .enumerate()
            .map(|(i, a)| {
                if i < 2 { format!("redis://{user}:wrong-password@{a}") } else { format!("redis://{user}:{pass}@{a}") }
            })
            .collect();
        // No quorum can be reached: `connect` itself fails, with the health view.
        let e = err::<S, _>(S::connect(urls, Options::default()).await, "connect with wrong passwords");
        match &e.kind {
            FailureKind::Unhealthy(h) => assert!(h.misconfigured() && h.usable() == 1, "[{}] {h}", S::NAME),
            _ => panic!("[{}] connect with wrong passwords: {e}", S::NAME),
        }
        for a in &servers.addrs()[..2] {
            assert!(e.message.contains(&a.to_string()), "[{}] the message names {a}: {e}", S::NAME);
        }
        assert!(!e.message.contains("wrong-password"), "[{}] the message shows the password: {e}", S::NAME);

        // Two nodes down: unreachable, each named by address.
        servers.node(1).kill();
        servers.node(2).kill();
        let e =
            err::<S, _>(S::lock(&client, LockSpec::new("honest:down", Duration::from_secs(10)).once()).await, "lock");
        assert!(matches!(e.kind, FailureKind::Acquire(AcquireError::Unreachable { .. })), "[{}] {e}", S::NAME);
        // Named as the client reaches them (TCP or TLS address, or the Unix socket's path).
        for node in &servers.nodes()[1..] {
            let url = node.url();
            let after_creds = url.rsplit('@').next().unwrap_or(&url);
            let place = ["redis+unix://", "rediss://", "redis://"]
                .iter()
                .find_map(|s| after_creds.strip_prefix(s))
                .unwrap_or(after_creds);
            assert!(e.message.contains(place), "[{}] the message names {place}: {e}", S::NAME);
        }

        // A new client with no reachable quorum is refused by `connect` (with the health view),
        // not handed out to fail every call.
        let e = err::<S, _>(S::connect(servers.urls(), Options::default()).await, "connect with 2 of 3 down");
        match &e.kind {
            FailureKind::Unhealthy(h) => {
                assert!(!h.misconfigured() && h.usable() == 1 && !h.can_lock(), "[{}] {h}", S::NAME);
            }
            _ => panic!("[{}] connect with 2 of 3 down: {e}", S::NAME),
        }
    });
}

/// A connection the engine fails (here: the "server" answers the handshake with garbage) is
/// closed with a reset, so that nothing it still carries runs on the server later.
pub fn failed_links_are_reset<S: Subject>() {
    use std::io::{ErrorKind, Read, Write};
    let servers = Servers::start(2);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let garbage = listener.local_addr().expect("addr");
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("the client connects");
        conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 4096];
        let _ = conn.read(&mut buf).expect("the handshake");
        conn.write_all(b"?this is not RESP\r\n").expect("write");
        loop {
            match conn.read(&mut buf) {
                Ok(0) => return "closed with a FIN".to_owned(),
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return "reset".to_owned(),
                Err(e) => return format!("read failed: {e}"),
            }
        }
    });
    S::block_on(async {
        let mut urls = servers.urls();
        urls.push(format!("redis://{garbage}"));
        let client = connect_partial::<S>(urls, Options::default()).await;
        // Two of three nodes are healthy: locking works meanwhile.
        let guard = lock::<S>(&client, LockSpec::new("reset", Duration::from_secs(10))).await;
        assert_eq!(release::<S>(guard).await.outcome, ReleaseOutcome::Released);
        // The driver must keep running meanwhile (it does the reset): wait without blocking it.
        eventually::<S>(Duration::from_secs(10), "the garbage server saw its connection end", || server.is_finished())
            .await;
        let seen = server.join().expect("the server thread");
        assert_eq!(seen, "reset", "[{}] the failed connection was not reset", S::NAME);
    });
    servers.assert_no_leaks();
}

/// Poll the client's health view until `done` holds (at most `limit`); the last view either way.
async fn health_until<S: Subject>(client: &S::Client, limit: Duration, done: impl Fn(&Health) -> bool) -> Health {
    let started = Instant::now();
    loop {
        let health = ok::<S, _>(S::health(client).await, "health");
        if done(&health) || started.elapsed() > limit {
            return health;
        }
        S::sleep(Duration::from_millis(20)).await;
    }
}

/// The health view names what is wrong and how much is left: of five nodes, one refuses our
/// password (misconfigured) and one is killed (unreachable); three are usable, a quorum of
/// three, so no more node may fail. Every node is shown by address, never with the
/// password; the usable ones have round-trip figures. Once the password is accepted and the
/// node restarted, every node is ready again and two may fail.
pub fn health_view<S: Subject>() {
    let servers = Servers::builder().nodes(5).acl_user("alice", "s3cret").start();
    let (user, pass) = servers.credentials().unwrap();
    let wrong = "not-the-password";
    let urls: Vec<String> = servers
        .addrs()
        .iter()
        .enumerate()
        .map(|(i, a)| if i == 0 { format!("redis://{user}:{wrong}@{a}") } else { format!("redis://{user}:{pass}@{a}") })
        .collect();
    S::block_on(async {
        // Asked to, connect refuses servers that are not all up, and says which node and why.
        let strict = Options { require_all: true, ..Options::default() };
        match S::connect(urls.clone(), strict).await {
            Err(Failure { kind: FailureKind::Unhealthy(h), message }) => {
                assert!(h.nodes[0].is_misconfigured() && h.usable() == 4, "[{}]\n{h}", S::NAME);
                let addr = servers.addrs()[0].to_string();
                assert!(message.contains(&addr) && message.contains("AUTH"), "[{}] {message}", S::NAME);
                assert!(!message.contains(wrong), "[{}] {message}", S::NAME);
            }
            other => panic!("[{}] require_all with a refused node: {:?}", S::NAME, other.map(|_| "connected")),
        }
        let client = ok::<S, _>(S::connect(urls, Options::default()).await, "connect");
        let refused = |h: &Health| h.nodes[0].is_misconfigured() && h.usable() == 4;
        let h = health_until::<S>(&client, Duration::from_secs(10), refused).await;
        assert!(refused(&h), "[{}] node 0 refuses the password, the others are ready:\n{h}", S::NAME);
        assert_eq!(h.fault_tolerance(), 1, "[{}] one failure less to spare:\n{h}", S::NAME);
        servers.node(1).kill();

        let degraded = |h: &Health| {
            h.nodes[0].is_misconfigured()
                && h.nodes[1].fault == Some(Fault::Unreachable)
                && !h.nodes[1].is_ready()
                && h.nodes[2..].iter().all(|n| n.is_ready())
        };
        // Node 1's loss is seen at the next round (or its reconnect): lock once to notice it.
        let _ = S::lock(&client, LockSpec::new("health", Duration::from_secs(10)).once()).await.map(drop);
        let h = health_until::<S>(&client, Duration::from_secs(10), degraded).await;
        assert!(degraded(&h), "[{}] one misconfigured and one unreachable node:\n{h}", S::NAME);
        assert_eq!((h.usable(), h.quorum), (3, 3), "[{}]\n{h}", S::NAME);
        assert_eq!(h.fault_tolerance(), 0, "[{}] no more node may fail:\n{h}", S::NAME);
        assert_eq!(h.design_tolerance(), 2, "[{}]\n{h}", S::NAME);
        assert!(h.can_lock() && h.misconfigured(), "[{}]\n{h}", S::NAME);
        let auth = h.nodes[0].last_error.as_deref().unwrap_or_default().to_lowercase();
        assert!(auth.contains("auth") || auth.contains("wrongpass"), "[{}] node 0 says why: {auth}", S::NAME);
        assert!(h.nodes[0].stats.misconfigured >= 1, "[{}] {:?}", S::NAME, h.nodes[0].stats);
        assert!(h.nodes[1].last_error.is_some(), "[{}] node 1 says why:\n{h}", S::NAME);
        let table = h.to_string();
        for (i, a) in servers.addrs().iter().enumerate() {
            assert!(h.nodes[i].addr.contains(&a.to_string()), "[{}] node {i} by address:\n{h}", S::NAME);
            assert!(table.contains(&a.to_string()), "[{}] the table names node {i}:\n{table}", S::NAME);
        }
        let debug = format!("{h:?}");
        for secret in [wrong, pass] {
            assert!(
                !table.contains(secret) && !debug.contains(secret),
                "[{}] a password in the view:\n{table}",
                S::NAME
            );
        }
        assert!(table.contains("MISCONFIGURED"), "[{}]\n{table}", S::NAME);
        // Locking goes on with three of five; the usable nodes have round-trip figures.
        let guard = lock::<S>(&client, LockSpec::new("health", Duration::from_secs(10))).await;
        release::<S>(guard).await;
        let h = ok::<S, _>(S::health(&client).await, "health");
        for n in &h.nodes[2..] {
            assert!(n.stats.rtt().is_some() && n.stats.rtt_max() >= n.stats.rtt(), "[{}] {n:?}", S::NAME);
            assert!(n.stats.replies > 0 && n.state == NodeState::Ready, "[{}] {n:?}", S::NAME);
        }

        // Fixed: node 0 now accepts that password, node 1 is back.
        let mut conn = servers.node(0).conn().expect("admin connection to node 0");
        conn.cmd(&["ACL", "SETUSER", user, &format!(">{wrong}")]).expect("ACL SETUSER");
        servers.node(1).restart(false);
        let _ = S::lock(&client, LockSpec::new("health", Duration::from_secs(10)).once()).await.map(drop);
        let h = health_until::<S>(&client, Duration::from_secs(15), Health::all_ready).await;
        assert!(h.all_ready(), "[{}] every node recovers:\n{h}", S::NAME);
        assert_eq!(h.fault_tolerance(), 2, "[{}]\n{h}", S::NAME);
        assert!(!h.misconfigured() && h.nodes.iter().all(|n| n.last_error.is_none()), "[{}]\n{h}", S::NAME);
        assert!(h.nodes[1].stats.reconnects() >= 1, "[{}] {:?}", S::NAME, h.nodes[1].stats);
        S::close(&client).await;
        let whole = Options { require_all: true, ..Options::default() };
        let strict = ok::<S, _>(S::connect(servers.urls(), whole).await, "require_all with every node up");
        S::close(&strict).await;
    });
    servers.assert_no_leaks();
}
