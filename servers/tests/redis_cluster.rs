//! `RedisCluster` against real `redis-server --cluster-enabled yes` processes (they must be
//! installed, as for every test of the workspace): forming clusters of 1, 2 and 3 masters with
//! and without replicas, slot migrations (with their keys, and the `-ASK` window of a
//! two-phase one), failovers, and stopping every process on drop.

use std::time::{Duration, Instant};

use redlease_core::cluster::SLOTS;
use redlease_servers::{ClusterModeNode, Node, RedisCluster, RedisConn, Reply, key_slot};

/// The number of hash slots, as slots are numbered.
const SLOT_COUNT: u16 = SLOTS as u16;

/// Per `CLUSTER SLOTS` range: first and last slot, the master's port, the replicas' ports.
type Ranges = Vec<(u16, u16, u16, Vec<u16>)>;

/// `CLUSTER SLOTS` on `node`, sorted, parsed here independently of the crate.
fn slots(node: &Node) -> Ranges {
    let Reply::Array(Some(ranges)) = node.conn().unwrap().cmd(&["CLUSTER", "SLOTS"]).unwrap() else { panic!() };
    let int = |r: &Reply| match r {
        Reply::Int(n) => u16::try_from(*n).unwrap(),
        other => panic!("{other:?}"),
    };
    let port = |r: &Reply| match r {
        Reply::Array(Some(parts)) => int(&parts[1]),
        other => panic!("{other:?}"),
    };
    let mut out: Ranges = ranges
        .iter()
        .map(|r| match r {
            Reply::Array(Some(p)) => (int(&p[0]), int(&p[1]), port(&p[2]), p[3..].iter().map(port).collect()),
            other => panic!("{other:?}"),
        })
        .collect();
    out.sort();
    out
}

/// Assert that every node of `cluster` sees every slot served, split evenly between the
/// masters in order, each with its replicas.
fn assert_even_coverage(cluster: &RedisCluster) {
    let masters = cluster.masters();
    let m = masters.len();
    let expected: Ranges = (0..m)
        .map(|i| {
            let mut replicas: Vec<u16> = cluster.replicas_of(i).iter().map(|r| r.port()).collect();
            replicas.sort();
            let (first, last) = ((i * 16384 / m) as u16, ((i + 1) * 16384 / m - 1) as u16);
            (first, last, masters[i].port(), replicas)
        })
        .collect();
    for node in cluster.nodes() {
        let mut seen = slots(node);
        seen.iter_mut().for_each(|r| r.3.sort());
        assert_eq!(seen, expected, "node {}'s CLUSTER SLOTS", node.index());
        let info = node.conn().unwrap().cmd(&["CLUSTER", "INFO"]).unwrap().as_text().unwrap();
        assert!(info.contains("cluster_state:ok") && info.contains("cluster_slots_assigned:16384"), "{info}");
    }
}

/// The port of the master serving `slot` as `node` says.
fn owner_port(node: &Node, slot: u16) -> u16 {
    slots(node).into_iter().find(|r| r.0 <= slot && slot <= r.1).map(|r| r.2).expect("slot served")
}

/// Whether `pid` is a running process (a zombie does not count).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
}

/// A key whose slot is `slot` (a hash tag found by search).
fn key_in(slot: u16) -> String {
    (0..).map(|i| format!("{{t{i}}}:k")).find(|k| key_slot(k) == slot).unwrap()
}

#[test]
fn three_masters_with_a_replica_each_migrate_and_fail_over() {
    let started = Instant::now();
    let cluster = RedisCluster::builder().masters(3).replicas(1).start();
    eprintln!("3 masters + 3 replicas ready in {:?}", started.elapsed());
    assert_eq!((cluster.masters().len(), cluster.replicas().len(), cluster.nodes().len()), (3, 3, 6));
    assert_even_coverage(&cluster);
    assert_eq!(cluster.seed_url(), format!("redis://127.0.0.1:{}", cluster.master(0).port()));
    for node in cluster.nodes() {
        let info = node.conn().unwrap().cmd(&["INFO", "replication"]).unwrap().as_text().unwrap();
        let replica = cluster.replicas().iter().any(|r| r.index() == node.index());
        assert_eq!(info.contains("role:slave"), replica, "{info}");
        assert!(!replica || info.contains("master_link_status:up"), "{info}");
    }

    // Keys with a TTL on their masters, one without: the leak check sees it.
    let key = "{job}:lock";
    let slot = key_slot(key);
    let from = cluster.master_of_slot(slot);
    assert_eq!(cluster.master_of_key(key), from);
    let mut conn = cluster.master(from).conn().unwrap();
    conn.set_px(key, "token", Duration::from_secs(60)).unwrap();
    conn.set("{job}:counter", "7").unwrap();
    assert_eq!(cluster.keys_per_master()[from], vec!["{job}:counter".to_owned(), key.to_owned()]);
    let leaks: Vec<_> = cluster.lock_keys().into_iter().filter(|(_, _, pttl)| *pttl == -1).collect();
    assert_eq!(leaks, vec![(from, "{job}:counter".to_owned(), -1)]);
    conn.del("{job}:counter").unwrap();
    cluster.assert_no_leaks();

    // The slot moves with its key; every node says so.
    let to = (from + 1) % 3;
    cluster.migrate_slot(slot, to);
    assert_eq!(cluster.master_of_slot(slot), to);
    for node in cluster.nodes() {
        assert_eq!(owner_port(node, slot), cluster.master(to).port(), "node {}", node.index());
    }
    assert_eq!(cluster.master(to).conn().unwrap().get(key).unwrap().as_deref(), Some("token"));
    let moved = conn.cmd(&["GET", key]).unwrap();
    assert_eq!(moved, Reply::Error(format!("MOVED {slot} {}", cluster.master(to).addr())));
    let keys = cluster.all_keys_with_ttl();
    assert!(matches!(keys.as_slice(), [(i, k, ttl)] if *i == to && k == key && *ttl > 0), "{keys:?}");

    // A failover: the replica serves the shard, the old master replicates it.
    let (old, replica) = (cluster.master(to).index(), cluster.replicas_of(to)[0].index());
    let new = cluster.fail_over(to);
    assert_eq!(new.index(), replica);
    assert_eq!(cluster.master(to).index(), replica);
    assert_eq!(cluster.replicas_of(to)[0].index(), old);
    for node in cluster.nodes() {
        assert_eq!(owner_port(node, slot), new.port(), "node {}", node.index());
    }
    assert_eq!(new.conn().unwrap().get(key).unwrap().as_deref(), Some("token"));

    cluster.flushall();
    assert!(cluster.keys_per_master().iter().all(Vec::is_empty));
    let pids: Vec<u32> = cluster.nodes().iter().map(|n| n.pid().unwrap()).collect();
    drop(cluster);
    assert!(pids.iter().all(|&p| !alive(p)), "every process is stopped on drop");
}

#[test]
fn a_killed_master_is_failed_over_by_the_cluster() {
    let cluster = RedisCluster::builder().masters(3).replicas(1).start();
    let slot = cluster.slots_of(1)[0];
    let replica = cluster.replicas_of(1)[0].index();
    cluster.master(1).conn().unwrap().set(&key_in(slot), "v").unwrap();
    cluster.kill_master(1);
    let started = Instant::now();
    let new = cluster.await_failover(1);
    eprintln!("automatic failover in {:?}", started.elapsed());
    assert_eq!(new.index(), replica);
    assert_eq!(cluster.master_of_slot(slot), 1);
    assert_eq!(owner_port(cluster.master(0), slot), new.port());
}

#[test]
fn one_master_without_replicas_serves_every_slot() {
    let cluster = RedisCluster::builder().masters(1).replicas(0).start();
    assert_even_coverage(&cluster);
    assert_eq!(slots(cluster.master(0)), vec![(0, SLOT_COUNT - 1, cluster.master(0).port(), vec![])]);
    // The crate's slot function is the server's.
    let mut conn = cluster.master(0).conn().unwrap();
    for key in ["", "a", "foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "{}", "redlease:fence:{k}"] {
        let slot = conn.cmd(&["CLUSTER", "KEYSLOT", key]).unwrap();
        assert_eq!(slot, Reply::Int(i64::from(key_slot(key))), "{key:?}");
    }
    // The one-node cluster is such a cluster.
    let node = ClusterModeNode::start();
    let info = node.conn().unwrap().cmd(&["INFO", "cluster"]).unwrap().as_text().unwrap();
    assert!(info.contains("cluster_enabled:1"), "{info}");
    assert!(node.url().starts_with("redis://127.0.0.1:"));
}

#[test]
fn one_master_with_replicas_fails_over_to_each() {
    let cluster = RedisCluster::builder().masters(1).replicas(2).start();
    assert_even_coverage(&cluster);
    cluster.master(0).conn().unwrap().set("k", "v").unwrap();
    let first = cluster.fail_over_gracefully(0).index();
    assert_eq!(first, 1);
    assert_eq!(cluster.master(0).conn().unwrap().get("k").unwrap().as_deref(), Some("v"));
    // Paused, the master cannot take part: the takeover goes ahead without it.
    cluster.master(0).pause();
    let second = cluster.fail_over(0).index();
    assert_eq!(second, 2);
    let paused = &cluster.nodes()[first];
    paused.resume();
    // Back, it learns it lost the slots.
    let deadline = Instant::now() + Duration::from_secs(10);
    while owner_port(paused, 0) != cluster.master(0).port() {
        assert!(Instant::now() < deadline, "node {first} still serves the slots: {:?}", slots(paused));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_masters_migrate_slots_and_show_ask_while_migrating() {
    let cluster = RedisCluster::builder().masters(2).replicas(0).start();
    assert_even_coverage(&cluster);
    assert_eq!(cluster.slots_of(1), (8192..SLOT_COUNT).collect::<Vec<_>>());
    // Many slots at once, with keys in some.
    for slot in [0, 50, 99] {
        cluster.master(0).conn().unwrap().set(&key_in(slot), "x").unwrap();
    }
    cluster.migrate_slots(0..100, 1);
    assert_eq!(cluster.slots_of(1).len(), 8192 + 100);
    assert_eq!(cluster.keys_per_master()[1].len(), 3);

    // Two phases: a key moved answers -ASK on the source until the end, then -MOVED.
    let slot = 200;
    let a = key_in(slot);
    let b = a.replace(":k", ":other");
    assert_eq!(key_slot(&b), slot);
    let mut source = cluster.master(0).conn().unwrap();
    source.set(&a, "1").unwrap();
    source.set(&b, "2").unwrap();
    let migration = cluster.begin_migration(slot, 1);
    assert_eq!((migration.slot(), migration.source().index(), migration.target().index()), (slot, 0, 1));
    migration.move_key(&a);
    let target = cluster.master(1).addr();
    assert_eq!(source.cmd(&["GET", &a]).unwrap(), Reply::Error(format!("ASK {slot} {target}")));
    assert_eq!(source.get(&b).unwrap().as_deref(), Some("2"));
    let mut asking = RedisConn::connect(target, None).unwrap();
    asking.ok(&["ASKING"]).unwrap();
    assert_eq!(asking.get(&a).unwrap().as_deref(), Some("1"));
    assert_eq!(migration.move_keys(), 1);
    migration.finish();
    assert_eq!(cluster.master_of_slot(slot), 1);
    assert_eq!(source.cmd(&["GET", &b]).unwrap(), Reply::Error(format!("MOVED {slot} {target}")));
}

#[test]
fn a_cluster_with_an_acl_user_replicates_and_migrates() {
    let cluster = RedisCluster::builder().masters(2).replicas(1).acl_user("alice", "s3cret").start();
    assert_even_coverage(&cluster);
    assert_eq!(cluster.credentials(), Some(("alice", "s3cret")));
    assert!(cluster.seed_url().starts_with("redis://alice:s3cret@127.0.0.1:"));
    assert!(
        RedisConn::connect(cluster.master(0).addr(), None).unwrap().cmd(&["GET", "k"]).unwrap()
            == Reply::Error("NOAUTH Authentication required.".into())
    );
    let key = key_in(5);
    cluster.master(0).conn().unwrap().set(&key, "v").unwrap();
    cluster.migrate_slot(5, 1);
    assert_eq!(cluster.master(1).conn().unwrap().get(&key).unwrap().as_deref(), Some("v"));
    let with_password = RedisCluster::builder().masters(1).replicas(1).password("pw").start();
    assert!(with_password.seed_url().starts_with("redis://default:pw@"));
}

#[test]
fn bad_settings_are_errors() {
    let e = RedisCluster::builder().masters(0).try_start().unwrap_err();
    assert!(e.contains("at least one master"), "{e}");
    let e = RedisCluster::builder().acl_user("a b", "c").try_start().unwrap_err();
    assert!(e.contains("whitespace"), "{e}");
    let e = RedisCluster::builder().masters(3).replicas(1).base_port(55_531).try_start().unwrap_err();
    assert!(e.contains("65535"), "{e}");
}
