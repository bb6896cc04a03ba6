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
fn a_sentinel_node_locks_on_the_master_the_sentinels_name_and_follows_a_switch() {
    let set = SentinelNodes::builder().nodes(1).replicas(1).down_after(Duration::from_millis(500)).start();
    let client = redlease_mio::Client::with_config(config(&set.urls())).unwrap();
    let guard = client.lock("job", TTL).unwrap();
    let health = client.health();
    let view = health.nodes[0].sentinel.as_ref().expect("the node is seen as Sentinel-managed");
    let primary = set.primary(0).addr().to_string();
    let primary_addr = primary.clone();
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
    // Its watch link listens to the first sentinel's switches.
    let clients = set.sentinels()[0].conn().unwrap().checked(&["CLIENT", "LIST"]).unwrap().as_text().unwrap();
    assert!(clients.lines().any(|l| l.contains(" sub=1 ")), "{clients}");

    // A switch of master is followed, and the locks go to the new one.
    let new = set.failover(0);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let health = client.health();
        let view = health.nodes[0].sentinel.as_ref().unwrap();
        if health.nodes[0].is_ready() && view.master.as_deref() == Some(&*new.to_string()) {
            assert_eq!(view.switches, 1, "{health}");
            assert_eq!(
                view.last_switch.as_ref().map(|(from, to, _)| (from.clone(), to.clone())),
                Some((primary_addr.clone(), new.to_string()))
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the switch was not followed:\n{health}");
        client.run_for(Duration::from_millis(20)).unwrap();
    }
    let guard = client.lock("job", TTL).unwrap();
    let on_new = set.data_nodes(0).iter().find(|n| n.addr() == new).unwrap().conn().unwrap().get("job").unwrap();
    assert_eq!(on_new.as_deref(), Some(guard.token()));
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

/// Wait (up to 15 s) until `client`'s view of node 0 uses `master` and the node is ready.
fn wait_for_master(client: &redlease_mio::Client, master: std::net::SocketAddr) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let health = client.health();
        let s = health.nodes[0].sentinel.as_ref().expect("a Sentinel-managed node");
        if health.nodes[0].is_ready() && !s.asking && s.master.as_deref() == Some(&*master.to_string()) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the client never moved to {master}:\n{health}");
        // (The blocking client does its I/O while it is called.)
        client.run_for(Duration::from_millis(20)).unwrap();
    }
}

#[test]
fn a_lock_held_through_a_kill_9_of_the_primary_stays_held_with_min_replicas() {
    let set = SentinelNodes::builder().nodes(1).replicas(2).down_after(Duration::from_millis(500)).start();
    let url = format!("{}?min_replicas=1&replicas_timeout=100", set.url(0));
    let client = redlease_mio::Client::with_config(config(std::slice::from_ref(&url))).unwrap();
    let before = client.lock_with(redlease_core::LockOptions::new("fenced", TTL).fencing(true)).unwrap();
    let first_fence = before.fence().expect("a fencing token");
    before.release().unwrap();
    let mut held = client.lock("job", Duration::from_secs(60)).unwrap();
    let token = held.token().to_owned();

    let (killed, new) = set.kill_primary(0);
    let on_new = || {
        let node = set.data_nodes(0).iter().find(|n| n.addr() == new).unwrap();
        node.conn().unwrap().get("job").unwrap()
    };
    assert_eq!(on_new(), Some(token.clone()), "the grant waited for a replica, which is the new primary");
    wait_for_master(&client, new);
    let other = redlease_mio::Client::with_config(config(std::slice::from_ref(&url))).unwrap();
    assert!(other.try_lock("job", TTL).is_err(), "a second client got a lock held across a kill -9 failover");
    held.extend(Duration::from_secs(120)).expect("the extension reaches the new primary");
    let node = set.data_nodes(0).iter().find(|n| n.addr() == new).unwrap();
    assert!(node.conn().unwrap().pttl("job").unwrap() > 60_000, "the extension is on the new primary");
    held.release().expect("the release reaches the new primary");
    assert_eq!(on_new(), None);

    // Fencing tokens keep increasing across the failover.
    let after = other.lock_with(redlease_core::LockOptions::new("fenced", TTL).fencing(true)).unwrap();
    assert!(after.fence().expect("a fencing token") > first_fence, "{:?} after {first_fence}", after.fence());
    after.release().unwrap();
    assert!(!killed.is_running());
    set.assert_no_leaks();
}

/// Take `resource` on node 0 through `url` while its primary holds the write back from every
/// replica (the replicas' links are cut, and the replicas paused so that they do not come
/// back), then kill the primary and let the sentinels promote a replica. The result of the
/// lock call, and the new primary.
fn lock_then_lose_the_primary(
    set: &SentinelNodes,
    url: &str,
    resource: &str,
) -> (Result<redlease_mio::Guard, redlease_mio::Error>, std::net::SocketAddr) {
    let client = redlease_mio::Client::with_config(config(&[url.to_owned()])).unwrap();
    let primary = set.primary(0);
    let replicas: Vec<_> = set.data_nodes(0).iter().filter(|n| n.addr() != primary.addr()).collect();
    for r in &replicas {
        r.pause();
    }
    primary.conn().unwrap().checked(&["CLIENT", "KILL", "TYPE", "replica"]).unwrap();
    let result = client.lock_with(redlease_core::LockOptions::new(resource, TTL).attempts(1));
    primary.kill();
    for r in &replicas {
        r.resume();
    }
    let new = set.failover_after_kill(0, primary.addr());
    set.restart_as_replica(0, primary);
    (result, new)
}

#[test]
fn without_min_replicas_a_failover_loses_a_grant_the_replica_never_had() {
    let set = SentinelNodes::builder().nodes(1).replicas(1).down_after(Duration::from_millis(500)).start();
    // Without min_replicas the grant counts as soon as the primary has it: the failover loses it.
    let (held, new) = lock_then_lose_the_primary(&set, &set.url(0), "unsafe");
    let held = held.expect("the primary granted it");
    let other = redlease_mio::Client::with_config(config(&[set.url(0)])).unwrap();
    wait_for_master(&other, new);
    let second = other.try_lock("unsafe", TTL).expect("the new primary never had the first grant");
    assert_ne!(second.token(), held.token(), "two holders of one lock: what a failover loses without min_replicas");
    second.release().unwrap();
    drop(held);

    // With min_replicas=1 the same grant never counts: the lock call fails instead.
    let url = format!("{}?min_replicas=1&replicas_timeout=100", set.url(0));
    let (refused, _) = lock_then_lose_the_primary(&set, &url, "safe");
    let Err(error) = refused else { panic!("a grant no replica has counted") };
    let error = error.to_string();
    assert!(error.contains("replica"), "{error}");
    set.assert_no_leaks();
}

#[test]
fn sentinels_with_their_own_acl_user_as_the_guide_gives_it() {
    let set = SentinelNodes::builder().nodes(1).replicas(1).start();
    for s in set.sentinels() {
        let rules = [
            "ACL",
            "SETUSER",
            "locks",
            "on",
            ">s3cret",
            "+auth",
            "+sentinel|get-master-addr-by-name",
            "+sentinel|master",
            "+subscribe",
            "&+switch-master",
        ];
        s.conn().unwrap().ok(&rules).unwrap();
    }
    let url = format!("{}?sentinel_username=locks&sentinel_password=s3cret", set.url(0));
    let client = redlease_mio::Client::with_config(config(std::slice::from_ref(&url))).unwrap();
    client.lock("acl", TTL).unwrap().release().unwrap();
    let wrong = refused(&url.replace("s3cret", "nope"));
    assert!(wrong.contains("WRONGPASS") && !wrong.contains("nope"), "{wrong}");
}

#[test]
fn locks_stay_exclusive_with_increasing_fences_while_primaries_are_killed_under_traffic() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let set = SentinelNodes::builder().nodes(3).replicas(2).down_after(Duration::from_millis(500)).start();
    let urls: Vec<String> = set.urls().iter().map(|u| format!("{u}?min_replicas=1&replicas_timeout=100")).collect();
    let log = Arc::new(redlease_tests::conformance::HolderLog::new());
    let (counter, cycles, stop) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let client = redlease_mio::Client::with_config(config(&urls)).unwrap();
            let (log, counter, cycles, stop) = (log.clone(), counter.clone(), cycles.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = 0;
                while !stop.load(Ordering::SeqCst) {
                    let options =
                        redlease_core::LockOptions::new("counter", TTL).fencing(true).wait(Duration::from_secs(30));
                    let guard = client.lock_with(options).expect("the lock, within 30 s of a failover");
                    let acquired = std::time::Instant::now();
                    let v = counter.load(Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(2));
                    counter.store(v + 1, Ordering::SeqCst);
                    let (valid, fence) = (guard.valid_until(), guard.fence());
                    let released_at = std::time::Instant::now();
                    guard.release().unwrap();
                    log.record("counter", &format!("worker {w} cycle {c}"), acquired, valid, released_at, fence);
                    cycles.fetch_add(1, Ordering::SeqCst);
                    c += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (killed0, _) = set.kill_primary(0);
    std::thread::sleep(Duration::from_millis(500));
    let (killed1, _) = set.kill_primary(1);
    let after = cycles.load(Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while cycles.load(Ordering::SeqCst) < after + 20 {
        assert!(std::time::Instant::now() < deadline, "no progress after the failovers");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.join().expect("a worker");
    }
    assert_eq!(counter.load(Ordering::SeqCst), cycles.load(Ordering::SeqCst), "lost updates");
    log.assert_no_overlap();
    log.assert_fences_increase();
    assert!(!killed0.is_running() && !killed1.is_running());
    set.assert_no_leaks();
}

/// `rediss+sentinel://`: TLS to the sentinels and to the data nodes. The tokio and the blocking
/// mio client lock through TLS sentinels at once, both follow a failover to the new primary's
/// TLS port, and lock there.
#[test]
fn rediss_sentinel_nodes_lock_over_tls_on_tokio_and_mio_and_follow_a_failover() {
    let set = SentinelNodes::builder().nodes(1).replicas(1).tls(true).down_after(Duration::from_millis(500)).start();
    let urls = set.urls();
    assert!(urls[0].starts_with("rediss+sentinel://"), "{urls:?}");
    let ca = redlease_core::TlsSettings::new().ca_file(&set.tls().expect("TLS sentinels").ca);
    let config = config(&urls).tls(ca);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let tokio_client = rt.block_on(redlease_tokio::Client::with_config(config.clone())).unwrap();
    let mio_client = redlease_mio::Client::with_config(config).unwrap();
    let primary = set.primary(0);
    let on_primary = |node: &redlease_tests::Node, key: &str| node.conn().unwrap().get(key).unwrap();
    // Both lock at once, each its own resource.
    let tokio_guard = std::thread::scope(|s| {
        let t = s.spawn(|| rt.block_on(tokio_client.lock("tls-tokio", TTL)).unwrap());
        let mio_guard = mio_client.lock("tls-mio", TTL).unwrap();
        assert_eq!(on_primary(primary, "tls-mio").as_deref(), Some(mio_guard.token()));
        mio_guard.release().unwrap();
        t.join().unwrap()
    });
    assert_eq!(on_primary(primary, "tls-tokio").as_deref(), Some(tokio_guard.token()));
    rt.block_on(tokio_guard.release()).unwrap();

    // A failover: both follow the sentinels to the new primary's TLS port.
    let new = set.failover(0);
    assert_ne!(new, primary.tls_addr());
    wait_for_master(&mio_client, new);
    let mio_guard = mio_client.lock("tls-mio", TTL).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let tokio_guard = loop {
        let health = rt.block_on(tokio_client.health()).unwrap();
        let s = health.nodes[0].sentinel.as_ref().unwrap();
        if health.nodes[0].is_ready() && s.master.as_deref() == Some(&*new.to_string()) {
            break rt.block_on(tokio_client.lock("tls-tokio", TTL)).unwrap();
        }
        assert!(std::time::Instant::now() < deadline, "the tokio client never moved to {new}:\n{health}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let new_primary = set.primary(0);
    assert_eq!(new_primary.tls_addr(), new);
    assert_eq!(on_primary(new_primary, "tls-mio").as_deref(), Some(mio_guard.token()));
    assert_eq!(on_primary(new_primary, "tls-tokio").as_deref(), Some(tokio_guard.token()));
    mio_guard.release().unwrap();
    rt.block_on(tokio_guard.release()).unwrap();
    rt.block_on(tokio_client.close());
    set.assert_no_leaks();
}
