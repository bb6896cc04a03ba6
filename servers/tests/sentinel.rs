//! Sentinel-managed nodes on real processes: the sentinels name each primary, a failover
//! (forced, or by kill -9) moves it to a replica that every sentinel then names, and the old
//! primary comes back as a replica.

use std::time::Duration;

use redlease_servers::SentinelNodes;

#[test]
fn sentinels_name_the_primary_and_follow_failovers() {
    let set = SentinelNodes::builder().nodes(1).replicas(2).down_after(Duration::from_millis(500)).start();
    assert_eq!(set.len(), 1);
    let url = set.url(0);
    assert!(url.starts_with("redis+sentinel://127.0.0.1:") && url.ends_with("/redlease-0"), "{url}");
    assert_eq!(url.matches(',').count(), 2, "{url}");
    let first = set.primary(0).addr();
    assert_eq!(first, set.data_nodes(0)[0].addr());

    let second = set.failover(0);
    assert_ne!(second, first);
    assert_eq!(set.primary(0).addr(), second);

    let (killed, third) = set.kill_primary(0);
    assert_eq!(killed.addr(), second);
    assert!(third != second && !killed.is_running());
    set.restart_as_replica(0, killed);
    set.wait_for_replicas(0);
    set.assert_no_leaks();
}
