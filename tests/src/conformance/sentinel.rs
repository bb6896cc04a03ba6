//! The case on nodes that are Sentinel-managed: a Redlock of three nodes, each a primary with
//! a replica watched by three sentinels, whose grants wait for the replica (`min_replicas=1`).
//! Every node is seen through its sentinels; a fenced counter keeps exact under traffic while
//! one node fails over; a lock held across another node's failover stays held (a second
//! client is refused) and its extension and release reach the new primary.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlease_core::{Health, ReleaseOutcome};

use super::cases::{
    all_ready, connect, connect_partial, contention_options, eventually, fenced_counter, lock, ok, release,
};
use super::{HolderLog, LockSpec, Options, Subject};
use crate::SentinelNodes;

/// The nodes' URLs, with grants that wait for one replica.
fn urls(set: &SentinelNodes) -> Vec<String> {
    set.urls().iter().map(|u| format!("{u}?min_replicas=1&replicas_timeout=100")).collect()
}

/// The master `health` shows in use for node `i`.
fn master_in_use(health: &Health, i: usize) -> Option<String> {
    health.nodes[i].sentinel.as_ref().filter(|s| !s.asking).and_then(|s| s.master.clone())
}

/// A Redlock of three Sentinel-managed nodes: the health view shows each node's service,
/// master and sentinels; 8 tasks keep a counter under one fenced lock while node 0 fails over
/// (`SENTINEL FAILOVER`), with no lost update, no overlap and increasing tokens; a lock held
/// while node 1 fails over stays held (another client is refused), and once the client uses
/// the new primary its extension and release reach it.
pub fn sentinel_locks<S: Subject>() {
    const TASKS: usize = 8;
    const CYCLES: usize = 15;
    let set = Arc::new(SentinelNodes::builder().nodes(3).replicas(1).down_after(Duration::from_millis(500)).start());
    let urls = urls(&set);
    let log = Arc::new(HolderLog::new());
    let counter = Arc::new(AtomicU64::new(0));
    let ttl = Duration::from_secs(10);
    let options = Options { node_timeout: Duration::from_millis(400), ..contention_options() };
    S::block_on(async {
        let client = connect::<S>(urls.clone(), options.clone()).await;
        let health = ok::<S, _>(S::health(&client).await, "health");
        for (i, n) in health.nodes.iter().enumerate() {
            let s =
                n.sentinel.as_ref().unwrap_or_else(|| panic!("[{}] node {i} is Sentinel-managed: {health}", S::NAME));
            assert_eq!(&*s.service, set.service(i), "[{}] {health}", S::NAME);
            assert_eq!(s.sentinels.len(), 3, "[{}] {health}", S::NAME);
        }
        let shown = health.to_string();
        assert!(shown.contains("Sentinel-managed service \"redlease-0\": master 127.0.0.1:"), "[{}] {shown}", S::NAME);

        // Traffic on a fenced counter while node 0 fails over.
        let failover = {
            let set = Arc::clone(&set);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                set.failover(0)
            })
        };
        fenced_counter::<S>(&client, (&log, &counter), TASKS, CYCLES, ttl, Duration::from_millis(2)).await;
        let new0 = failover.join().expect("the failover of node 0");
        let health = ok::<S, _>(S::health(&client).await, "health");
        let deadline = Instant::now() + Duration::from_secs(45);
        let mut health = health;
        while master_in_use(&health, 0) != Some(new0.to_string()) {
            assert!(Instant::now() < deadline, "[{}] node 0 never moved to {new0}: {health}", S::NAME);
            S::sleep(Duration::from_millis(50)).await;
            health = ok::<S, _>(S::health(&client).await, "health");
        }
        let s0 = health.nodes[0].sentinel.as_ref().unwrap();
        assert!(s0.switches >= 1, "[{}] {health}", S::NAME);
        assert_eq!(s0.last_switch.as_ref().map(|(_, to, _)| to.clone()), Some(new0.to_string()), "[{}]", S::NAME);

        // A lock held across node 1's failover, taken once every node votes again (node 0's
        // new primary has its replica back), and on node 1's replica before the failover.
        set.wait_for_replicas(0);
        all_ready::<S>(&client).await;
        let held = lock::<S>(&client, LockSpec::new("across", Duration::from_secs(60))).await;
        let token = S::token(&held);
        let primary1 = set.primary(1).addr();
        let on_replica = || {
            let replica = set.data_nodes(1).iter().find(|n| n.addr() != primary1).and_then(|n| n.conn().ok());
            replica.and_then(|mut c| c.get("across").ok()).flatten().is_some()
        };
        eventually::<S>(Duration::from_secs(10), "node 1's replica has the grant", on_replica).await;
        let new1 = std::thread::spawn({
            let set = Arc::clone(&set);
            move || set.failover(1)
        })
        .join()
        .expect("the failover of node 1");
        let on_new = || {
            let conn = set.data_nodes(1).iter().find(|n| n.addr() == new1).and_then(|n| n.conn().ok());
            conn.and_then(|mut c| c.get("across").ok()).flatten()
        };
        assert_eq!(on_new(), Some(token.clone()), "[{}] the replica had the grant before it was promoted", S::NAME);
        let other = connect_partial::<S>(urls.clone(), options.clone()).await;
        assert!(
            S::lock(&other, LockSpec::new("across", ttl).once()).await.is_err(),
            "[{}] a second client got a lock held across a failover",
            S::NAME
        );
        S::close(&other).await;
        // The old primary back as the new one's replica: node 1's grants can count again.
        std::thread::spawn({
            let set = Arc::clone(&set);
            move || set.wait_for_replicas(1)
        })
        .join()
        .expect("node 1's old primary replicates the new one");
        let mut health = ok::<S, _>(S::health(&client).await, "health");
        let deadline = Instant::now() + Duration::from_secs(45);
        while master_in_use(&health, 1) != Some(new1.to_string()) || !health.nodes[1].is_ready() {
            assert!(Instant::now() < deadline, "[{}] node 1 never moved to {new1}: {health}", S::NAME);
            S::sleep(Duration::from_millis(50)).await;
            health = ok::<S, _>(S::health(&client).await, "health");
        }
        let mut held = held;
        ok::<S, _>(S::extend(&mut held, Duration::from_secs(120)).await, "extend across the failover");
        // (The extension returned at a quorum: node 1's may still be on its way.)
        let extended = || {
            let pttl = set.data_nodes(1).iter().find(|n| n.addr() == new1).map(|n| n.conn().unwrap().pttl("across"));
            pttl.is_some_and(|p| p.is_ok_and(|p| p > 60_000))
        };
        eventually::<S>(Duration::from_secs(10), "the extension reached the new primary", extended).await;
        assert_eq!(release::<S>(held).await.outcome, ReleaseOutcome::Released);
        eventually::<S>(Duration::from_secs(10), "the release reached the new primary", || on_new().is_none()).await;
        S::close(&client).await;
    });
    assert_eq!(counter.load(Ordering::SeqCst), (TASKS * CYCLES) as u64, "[{}] lost updates", S::NAME);
    log.assert_no_overlap();
    log.assert_fences_increase();
    set.assert_no_leaks();
}
