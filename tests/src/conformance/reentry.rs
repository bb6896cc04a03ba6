//! The re-entrant lock's case: holds of one owner, from two clients (two processes, as a
//! nested `redlease run` is), counted on the nodes; the last release frees the lock; the key's
//! TTL and its loss are shared; the fencing token is the first hold's.

use std::time::Duration;

use redlease_core::{ExtendError, Misuse, ReleaseOutcome};

use super::cases::{connect, eventually, lock, ms, ok, release, values};
use super::{Failure, FailureKind, LockSpec, Options, Subject};
use crate::{Reply, Servers};

fn held(f: &Failure) -> bool {
    matches!(&f.kind, FailureKind::Acquire(redlease_core::AcquireError::Held { .. }))
}

/// `(holds, PTTL)` of the key's holds (`redlease:holds:KEY`, the `:fence` field aside) on
/// each node.
fn holds(servers: &Servers, key: &str) -> Vec<(i64, i64)> {
    let name = format!("redlease:holds:{key}");
    servers
        .nodes()
        .iter()
        .map(|n| {
            let mut c = n.conn().expect("a connection to a node");
            let int = |r: Reply| match r {
                Reply::Int(i) => i,
                other => panic!("node {}: {other:?}", n.index()),
            };
            let len = int(c.checked(&["HLEN", name.as_str()]).expect("HLEN"));
            let fence = int(c.checked(&["HEXISTS", name.as_str(), ":fence"]).expect("HEXISTS"));
            (len - fence, c.pttl(&name).expect("PTTL"))
        })
        .collect()
}

/// Nodes whose key holds `owner` with a TTL, beside `n` holds with one.
fn counted_on(servers: &Servers, key: &str, owner: &str, n: i64) -> usize {
    // (`owner:` once a waiter marked it.)
    let ours = |v: &str| redlease_core::holder_of(v).0 == owner;
    let keys = values(servers, key).into_iter().map(|v| matches!(v, Some((Some(v), p)) if ours(&v) && p > 0));
    keys.zip(holds(servers, key)).filter(|&(key, (len, pttl))| key && len == n && pttl > 0).count()
}

/// Every node's key holds `owner` with a TTL, beside `n` holds with one.
fn counted(servers: &Servers, key: &str, owner: &str, n: i64) -> bool {
    counted_on(servers, key, owner, n) == servers.len()
}

/// Holds of one owner, from two clients: granted at once while the owner holds the lock,
/// counted on every node (the key holds the owner, its holds beside it, both with a TTL), the
/// first hold's fencing token; other owners and plain locks refused until the last hold is
/// released, a waiter then woken; any hold's extension lengthens the key for all and none
/// shortens it; a lock taken from the owner is lost to every hold; a semaphore refuses re-entry.
pub fn reentry<S: Subject>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let a = connect::<S>(servers.urls(), Options::default()).await;
        let b = connect::<S>(servers.urls(), Options::default()).await;
        let ttl = Duration::from_secs(10);
        let spec = |owner: &str| LockSpec::new("deploy", ttl).reentrant(owner).once();

        let mut outer = lock::<S>(&a, spec("job-1").fencing()).await;
        let fence = S::fence(&outer).unwrap_or_else(|| panic!("[{}] a fenced hold has a token", S::NAME));
        let mut inner = lock::<S>(&b, spec("job-1").fencing()).await;
        assert_eq!(S::fence(&inner), Some(fence), "[{}] a re-entry has the owner's token", S::NAME);
        assert_ne!(S::token(&inner), S::token(&outer), "[{}] each hold has its own token", S::NAME);
        let third = lock::<S>(&a, spec("job-1")).await;
        eventually::<S>(Duration::from_secs(3), "three holds of job-1 on every node", || {
            counted(&servers, "deploy", "job-1", 3)
        })
        .await;
        for other in [spec("job-2"), LockSpec::new("deploy", ttl).once()] {
            let e = S::lock(&b, other).await.err().unwrap_or_else(|| panic!("[{}] two owners at once", S::NAME));
            assert!(held(&e), "[{}] {e}", S::NAME);
        }

        // One key for all: an extension lengthens it, none shortens it.
        ok::<S, _>(S::extend(&mut inner, Duration::from_secs(30)).await, "extend the inner hold");
        ok::<S, _>(S::extend(&mut outer, Duration::from_secs(5)).await, "extend the outer hold");
        eventually::<S>(Duration::from_secs(3), "the key lives 30 s on every node", || {
            values(&servers, "deploy").into_iter().all(|v| matches!(v, Some((_, p)) if p > 20_000))
        })
        .await;

        // Inner releases leave the owner's lock held; the last one frees it, for a waiter.
        assert_eq!(release::<S>(third).await.outcome, ReleaseOutcome::Released);
        assert_eq!(release::<S>(inner).await.outcome, ReleaseOutcome::Released);
        eventually::<S>(Duration::from_secs(3), "one hold of job-1 left on every node", || {
            counted(&servers, "deploy", "job-1", 1)
        })
        .await;
        let waiter = {
            let b = b.clone();
            let spec = LockSpec::new("deploy", ttl).reentrant("job-2").wait(Duration::from_secs(10));
            S::spawn(async move { S::lock(&b, spec).await })
        };
        S::sleep(ms(300)).await;
        assert_eq!(release::<S>(outer).await.outcome, ReleaseOutcome::Released);
        let next = ok::<S, _>(waiter.await, "the waiter, once the last hold is released");
        // (A node the waiter's retry reached before the release did refused it: there the key
        // was handed to it after it was granted, and expires.)
        eventually::<S>(Duration::from_secs(3), "job-2 holds the key alone on a quorum", || {
            counted_on(&servers, "deploy", "job-2", 1) >= 2
        })
        .await;
        assert_eq!(release::<S>(next).await.outcome, ReleaseOutcome::Released);
        eventually::<S>(Duration::from_secs(3), "no key and no holds left", || {
            values(&servers, "deploy").iter().all(|v| matches!(v, Some((None, _))))
                && holds(&servers, "deploy").iter().all(|&(len, _)| len == 0)
        })
        .await;

        // Taken from the owner: every hold's extension is refused, and both are lost.
        let mut h1 = lock::<S>(&a, spec("job-3")).await;
        let mut h2 = lock::<S>(&b, spec("job-3")).await;
        eventually::<S>(Duration::from_secs(3), "two holds of job-3", || counted(&servers, "deploy", "job-3", 2)).await;
        for node in servers.nodes() {
            let mut c = node.conn().expect("a connection");
            c.checked(&["SET", "deploy", "thief", "PX", "10000"]).expect("SET");
            c.checked(&["DEL", "redlease:holds:deploy"]).expect("DEL");
        }
        for (hold, name) in [(&mut h1, "first"), (&mut h2, "second")] {
            let e = S::extend(hold, ttl).await.err().unwrap_or_else(|| panic!("[{}] {name}: extended", S::NAME));
            assert!(matches!(e.kind, FailureKind::Extend(ExtendError::Lost { .. })), "[{}] {name}: {e}", S::NAME);
            assert!(S::wait_lost(&S::lost(hold), Duration::from_secs(2)).await, "[{}] {name}: not lost", S::NAME);
        }
        assert_eq!(release::<S>(h1).await.outcome, ReleaseOutcome::NotHeld);
        assert_eq!(release::<S>(h2).await.outcome, ReleaseOutcome::NotHeld);
        let untouched = values(&servers, "deploy").into_iter().all(|v| matches!(v, Some((Some(v), _)) if v == "thief"));
        assert!(untouched, "[{}] the lost holds' releases touched the new holder's key", S::NAME);
        for node in servers.nodes() {
            node.conn().and_then(|mut c| c.del("deploy")).expect("DEL");
        }

        // A semaphore has no re-entry: refused at once, naming the option.
        let e = S::lock(&a, LockSpec::new("pool", ttl).semaphore(3, 1).reentrant("job-4")).await.err();
        let e = e.unwrap_or_else(|| panic!("[{}] a re-entrant semaphore", S::NAME));
        assert!(matches!(e.kind, FailureKind::Misuse(Misuse::Reentry { .. })), "[{}] {e}", S::NAME);
        assert!(e.message.contains("reentrant(owner)"), "[{}] {e}", S::NAME);
    });
    servers.assert_no_leaks();
}

/// Re-entry on nodes of another kind (Redis Cluster nodes, Sentinel-managed ones), through
/// `client`: two holds of one owner, the second at once with the first's fencing token, another
/// owner refused until both are released, then granted.
pub(super) async fn reentry_brief<S: Subject>(client: &S::Client, ttl: Duration) {
    let spec = |owner: &str| LockSpec::new("nested", ttl).reentrant(owner).once();
    let outer = lock::<S>(client, spec("job-1").fencing()).await;
    let inner = lock::<S>(client, spec("job-1").fencing()).await;
    assert!(S::fence(&outer).is_some(), "[{}] a fenced hold has a token", S::NAME);
    assert_eq!(S::fence(&inner), S::fence(&outer), "[{}] a re-entry has the owner's token", S::NAME);
    let e = S::lock(client, spec("job-2")).await.err();
    assert!(e.as_ref().is_some_and(held), "[{}] another owner beside job-1: {e:?}", S::NAME);
    assert_eq!(release::<S>(inner).await.outcome, ReleaseOutcome::Released);
    let e = S::lock(client, spec("job-2")).await.err();
    assert!(e.as_ref().is_some_and(held), "[{}] another owner while job-1 holds: {e:?}", S::NAME);
    assert_eq!(release::<S>(outer).await.outcome, ReleaseOutcome::Released);
    let next = lock::<S>(client, spec("job-2")).await;
    assert_eq!(release::<S>(next).await.outcome, ReleaseOutcome::Released);
}
