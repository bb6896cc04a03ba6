//! Sentinel-managed masters as nodes, on real sentinels: a node finds its master through the
//! sentinels and confirms it with `ROLE`; bad input is a typed error naming the node.
//! (The cases every adapter runs on Sentinel-managed nodes are in the conformance suite.)

use std::time::Duration;

use redlease_core::Config;
use redlease_tests::SentinelNodes;

const TTL: Duration = Duration::from_secs(10);

fn config(urls: &[String]) -> Config {
    Config::from_urls(urls).unwrap().node_timeout(Duration::from_millis(500))
}

#[test]
fn a_sentinel_node_locks_on_the_master_the_sentinels_name() {
    let set = SentinelNodes::builder().nodes(1).replicas(1).start();
    let client = redlease_mio::Client::with_config(config(&set.urls())).unwrap();
    let guard = client.lock("job", TTL).unwrap();
    let health = client.health();
    let view = health.nodes[0].sentinel.as_ref().expect("the node is seen as Sentinel-managed");
    let primary = set.primary(0).addr().to_string();
    assert_eq!((&*view.service, view.master.as_deref(), view.switches), ("redlease-0", Some(&*primary), 0), "{health}");
    // A majority of the three sentinels named it: the third need not be asked.
    let named =
        view.sentinels.iter().filter(|v| v.said.as_ref().is_some_and(|s| s.as_deref() == Ok(&*primary))).count();
    assert!(named >= 2, "{health}");
    assert!(
        health.to_string().contains(&format!("Sentinel-managed service \"redlease-0\": master {primary}")),
        "{health}"
    );
    let mut primary = set.primary(0).conn().unwrap();
    assert!(primary.get("job").unwrap().is_some(), "the lock is on the primary");
    guard.release().unwrap();
}

/// The error a client made of `url` alone fails with.
fn refused(url: &str) -> String {
    let config = config(&[url.to_owned()]).connect_timeout(Duration::from_millis(500));
    match redlease_mio::Client::with_config(config) {
        Ok(_) => panic!("{url}: a client was made"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_sentinel_setups_are_typed_errors_that_name_the_node() {
    let set = SentinelNodes::builder().nodes(1).replicas(1).start();
    let sentinels: Vec<String> = set.sentinels().iter().map(|s| s.addr().to_string()).collect();
    let list = sentinels.join(",");
    let unknown = refused(&format!("redis+sentinel://{list}/no-such-service"));
    assert!(unknown.contains("no sentinel names a master") && unknown.contains("knows no service named"), "{unknown}");
    assert!(unknown.contains(&format!("redis+sentinel://{list}/no-such-service")), "{unknown}");
    let data = set.primary(0).addr();
    let not_sentinel = refused(&format!("redis+sentinel://{data}/redlease-0"));
    assert!(not_sentinel.contains("answers as a data node, not a sentinel"), "{not_sentinel}");
    let not_data = refused(&format!("redis://{}", sentinels[0]));
    assert!(not_data.contains("a sentinel, not a data node"), "{not_data}");
    let none = refused("redis+sentinel://127.0.0.1:1,127.0.0.1:2/redlease-0");
    assert!(none.contains("no sentinel answered") && none.contains("sentinel 127.0.0.1:2: connect failed"), "{none}");
}
