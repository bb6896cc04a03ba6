//! `status` and `scan` over nodes that are Redis Clusters, on real servers: a Redlock of three
//! clusters whose locks `redlease run` holds, and one cluster among standalone nodes. Each
//! cluster is one node's view: a key is read on the master serving its slot, in its cluster
//! form (`{orders:42}`, a tagged name as it is), and shown by the name the user gave.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{holder, nodes, redlease, run, stderr, stdout, wait_until};
use redlease_servers::{RedisCluster, RedisConn, Servers, TempDir, key_slot};

/// `n` Redis Clusters of 3 masters without replicas, started at once.
fn clusters(n: usize) -> Vec<RedisCluster> {
    let starts: Vec<_> =
        (0..n).map(|_| std::thread::spawn(|| RedisCluster::builder().masters(3).replicas(0).start())).collect();
    starts.into_iter().map(|s| s.join().unwrap()).collect()
}

/// A connection to the master of `cluster` that serves `key` (as stored).
fn master_conn(cluster: &RedisCluster, key: &str) -> RedisConn {
    cluster.master(cluster.master_of_key(key)).conn().unwrap()
}

/// `127.0.0.1:PORT` of the master of `cluster` that serves `key` (as stored).
fn master_addr(cluster: &RedisCluster, key: &str) -> String {
    cluster.master(cluster.master_of_key(key)).addr().to_string()
}

/// Names `{prefix}N` whose cluster forms (`{prefix}N}`) land one on each master of `cluster`.
fn one_per_master(cluster: &RedisCluster, prefix: &str) -> Vec<String> {
    let mut names: Vec<Option<String>> = vec![None; 3];
    for i in 0.. {
        let name = format!("{prefix}{i}");
        let m = cluster.master_of_key(&format!("{{{name}}}"));
        names[m].get_or_insert(name);
        if names.iter().all(Option::is_some) {
            return names.into_iter().flatten().collect();
        }
    }
    unreachable!()
}

/// `redlease run` holding `key` (10 s TTL) until `dir/stop` exists; it writes
/// `dir/held-MARK` once its command runs (under the lock).
fn held(urls: &str, dir: &Path, mark: usize, key: &str, flags: &[&str]) -> Child {
    let flags: Vec<&str> = ["-t", "10s"].into_iter().chain(flags.iter().copied()).collect();
    holder(urls, key, &flags, dir, &format!("held-{mark}"))
}

/// The number N in `... on N of 3 nodes ...`.
fn on_nodes(line: &str) -> usize {
    let (_, rest) = line.split_once(" on ").unwrap_or_else(|| panic!("no count in {line:?}"));
    rest.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no count in {line:?}"))
}

/// Three Redis Clusters are the Redlock's three nodes; `redlease run` holds two write locks
/// (one a tagged name) and reads of names spread over every master. `status` reads each
/// cluster on the master serving the key's slot and shows the holder and TTL under the name
/// given; `scan` walks every master, lists the shared keys by name, and the keys left without
/// a TTL on every master with the form they are stored in.
#[test]
fn a_redlock_of_three_redis_clusters_in_status_and_scan() {
    let clusters = clusters(3);
    let urls = clusters.iter().map(RedisCluster::seed_url).collect::<Vec<_>>().join(",");
    let dir = TempDir::new("redlease-cli-cluster-inspect").unwrap();
    let jobs = one_per_master(&clusters[0], "job:");
    let mut runs = vec![held(&urls, dir.path(), 0, "orders:42", &[]), held(&urls, dir.path(), 1, "{order:42}:a", &[])];
    for (i, job) in jobs.iter().enumerate() {
        runs.push(held(&urls, dir.path(), 2 + i, job, &["-s"]));
    }
    let marks = runs.len();
    wait_until(Duration::from_secs(20), || (0..marks).all(|m| dir.path().join(format!("held-{m}")).exists()));

    // status: one line per cluster, read on the master serving the slot of {orders:42}.
    let out = run(redlease().args(["status", "-k", "orders:42", "-N", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    let slot = key_slot("{orders:42}");
    let mut held = 0;
    for (i, cluster) in clusters.iter().enumerate() {
        let line = lines[i];
        let at = format!("(Redis Cluster: slot {slot} on master {}, one of 3)", master_addr(cluster, "{orders:42}"));
        assert!(line.starts_with(&format!("node {i} ")) && line.ends_with(&at), "{at} in {text}");
        if line.contains(" held by ") {
            held += 1;
            let pttl: i64 = line.split("pttl ").nth(1).and_then(|p| p.split("ms").next()?.parse().ok()).unwrap();
            assert!(pttl > 0 && pttl <= 10_000, "{text}");
            assert!(line.contains("fence "), "{text}");
        }
    }
    assert!(held >= 2, "a quorum of the clusters holds it: {text}");
    assert!(lines[3].starts_with("orders:42: held by ") && lines[3].ends_with("nodes (quorum 2)"), "{text}");
    assert_eq!(on_nodes(lines[3]), held, "{text}");
    assert!(!text.contains("{orders:42}"), "shown by the name given: {text}");
    assert_eq!(lines[4], "3 of 3 nodes reachable, quorum 2: 1 more may fail before locking stops", "{text}");

    // A tagged name keeps its tag: stored as it is, in the slot of `order:42`.
    let out = run(redlease().args(["status", "-k", "{order:42}:a", "-N", &urls, "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout(&out);
    assert!(json.starts_with("{\"key\":\"{order:42}:a\",\"quorum\":2,\"reachable\":3,"), "{json}");
    assert!(json.contains("\"state\":\"held\",\"held\":true,\"shape\":\"exclusive\",\"holder\":\""), "{json}");
    let slot = key_slot("{order:42}:a");
    assert_eq!(slot, key_slot("order:42"));
    for cluster in &clusters {
        let served = format!(
            "\"cluster\":{{\"master\":\"{}\",\"slot\":{slot},\"masters\":3}}",
            master_addr(cluster, "{order:42}:a")
        );
        assert!(json.contains(&served), "{served} in {json}");
    }
    let stored = clusters.iter().filter(|c| master_conn(c, "{order:42}:a").pttl("{order:42}:a").unwrap() > 0).count();
    assert!(stored >= 2, "stored as {{order:42}}:a on a quorum of the clusters");

    // scan: every master of every cluster; the reads are listed by name, on each node.
    let out = run(redlease().args(["scan", "-N", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    for job in &jobs {
        assert!(text.contains(&format!("{job:?} shared by 1 reader (node 0 has ")), "{job} in {text}");
    }
    let last = text.lines().last().unwrap();
    assert!(last.starts_with("no keys without a TTL matching \"*\" on 3 reachable node(s)"), "{text}");
    for i in 0..3 {
        assert!(last.contains(&format!("node {i} is a Redis Cluster, its 3 master(s) scanned")), "{text}");
    }

    // Keys left without a TTL on every master of cluster 1: listed by name, with their form.
    let leaks = one_per_master(&clusters[1], "leak:");
    for leak in &leaks {
        master_conn(&clusters[1], &format!("{{{leak}}}")).set(&format!("{{{leak}}}"), "x").unwrap();
    }
    master_conn(&clusters[1], "{order:42}:b").set("{order:42}:b", "x").unwrap();
    let out = run(redlease().args(["scan", "-N", &urls, "-p", "leak:*"]));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    let seed1 = clusters[1].seed_url();
    for leak in &leaks {
        let at = master_addr(&clusters[1], &format!("{{{leak}}}"));
        let line = format!("node 1 {seed1}: {leak} has no TTL (stored as {{{leak}}} on master {at})");
        assert!(text.lines().any(|l| l == line), "{line} in {text}");
    }
    assert!(text.contains("3 key(s) without a TTL matching \"leak:*\""), "{text}");
    let out = run(redlease().args(["scan", "-N", &urls, "-p", "{order:42}:*", "--json"]));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let json = stdout(&out);
    let at = master_addr(&clusters[1], "{order:42}:b");
    assert!(json.contains("\"keys_without_ttl\":1,"), "{json}");
    assert!(
        json.contains(&format!(
            "\"keys_without_ttl\":[\"{{order:42}}:b\"],\"cluster\":{{\"masters\":[\"{}\",\"{}\",\"{}\"],\"keys_without_ttl\":[{{\"key\":\"{{order:42}}:b\",\"stored\":\"{{order:42}}:b\",\"master\":\"{at}\"}}]}}",
            clusters[1].master(0).addr(),
            clusters[1].master(1).addr(),
            clusters[1].master(2).addr()
        )),
        "{json}"
    );
    for leak in &leaks {
        master_conn(&clusters[1], &format!("{{{leak}}}")).del(&format!("{{{leak}}}")).unwrap();
    }
    master_conn(&clusters[1], "{order:42}:b").del("{order:42}:b").unwrap();

    std::fs::write(dir.path().join("stop"), "").unwrap();
    for r in runs {
        let out = r.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let out = run(redlease().args(["status", "-k", "orders:42", "-N", &urls]));
    assert!(stdout(&out).contains("orders:42: free on every reachable node"), "{}", stdout(&out));
    for c in &clusters {
        c.assert_no_leaks();
    }
}

/// Now on the nodes' clock, in ms since the epoch (the servers run on this machine).
fn now_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()
}

/// One Redis Cluster among two standalone nodes, each holding the same lock, readers and
/// semaphore permit: the cluster in the cluster form of each key, the others as named. `status`
/// and `scan` find them on every node and agree on a quorum; a master that does not answer is
/// named, as the node's fault for the keys it serves.
#[test]
fn a_redis_cluster_node_compares_with_standalone_ones() {
    let cluster = clusters(1).remove(0);
    let standalone = Servers::start(2);
    let urls = format!("{},{}", cluster.seed_url(), nodes(&standalone));
    let token = "0123456789abcdef0123456789abcdef01234567";
    // A lock on a master other than the seed (the seed down is the node's URL down).
    let lock = one_per_master(&cluster, "report:").remove(2);
    let stored = format!("{{{lock}}}");
    let ttl = Duration::from_secs(60);
    let until = (now_ms() + 60_000).to_string();
    // Every key on each node, through `conn(key)`: the standalone node's, or the cluster's
    // master serving the key's slot (the lock and its counter share one, the readers' key and
    // set another, the semaphore's keys a third).
    let set_all = |conn: &dyn Fn(&str) -> RedisConn, lock: &str, cat: &str| {
        conn(lock).set_px(lock, token, ttl).unwrap();
        let fence = format!("redlease:fence:{lock}");
        conn(&fence).set(&fence, "7").unwrap();
        conn(cat).set_px(cat, ":readers", ttl).unwrap();
        let set = format!("redlease:readers:{cat}");
        conn(&set).checked(&["ZADD", &set, &until, "reader-1"]).unwrap();
        conn(&set).checked(&["PEXPIRE", &set, "60000"]).unwrap();
        conn("redlease:sem:{api}:limit").set("redlease:sem:{api}:limit", "2").unwrap();
        conn("redlease:sem:{api}:1").set_px("redlease:sem:{api}:1", token, ttl).unwrap();
    };
    for node in standalone.nodes() {
        set_all(&|_| node.conn().unwrap(), &lock, "cat");
    }
    set_all(&|key| master_conn(&cluster, key), &stored, "{cat}");

    let out = run(redlease().args(["status", "-k", &lock, "-N", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let at = master_addr(&cluster, &stored);
    let first = text.lines().next().unwrap();
    assert!(first.contains("held by 0123456789ab…") && first.contains("fence 7") && first.contains(&at), "{text}");
    assert!(text.contains(&format!("{lock}: held by 0123456789ab… on 3 of 3 nodes (quorum 2)")), "{text}");
    let text = stdout(&run(redlease().args(["status", "-k", "cat", "-N", &urls])));
    assert!(text.contains("cat: shared by 1 reader on 3 of 3 nodes (quorum 2)"), "{text}");
    let text = stdout(&run(redlease().args(["status", "-k", "api", "-N", &urls])));
    assert!(text.contains("api: semaphore of 2 permits: 1 held (permit 1), 1 free"), "{text}");
    assert!(text.contains("permit 1  held by 0123456789ab… on 3 of 3 nodes (quorum 2)"), "{text}");
    let out = run(redlease().args(["scan", "-N", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("\"cat\" shared by 1 reader (node 0 has 1, node 1 has 1, node 2 has 1)"), "{text}");
    assert!(
        text.contains(
            "semaphore \"api\" (limit 2): node 0 holds permit 1; node 1 holds permit 1; node 2 holds permit 1"
        ),
        "{text}"
    );
    assert!(!text.contains("{cat}") && !text.contains(&stored), "{text}");

    // The master serving the lock stops: the cluster node cannot say, and says which master.
    let m = cluster.master_of_key(&stored);
    cluster.master(m).kill();
    let out = run(redlease().args(["status", "-k", &lock, "-N", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let line = format!("unreachable  (master {at} of the Redis Cluster: ");
    assert!(text.lines().next().unwrap().contains(&line), "{line} in {text}");
    assert!(text.contains(&format!("{lock}: held by 0123456789ab… on 2 of 3 nodes (quorum 2)")), "{text}");
    let out = run(redlease().args(["scan", "-N", &urls, "--json"]));
    assert_eq!(out.status.code(), Some(69), "{}", stdout(&out));
    let json = stdout(&out);
    let node0 = format!("\"reachable\":false,\"error\":\"master {at} of the Redis Cluster: ");
    assert!(json.contains(&node0) && json.contains("\"fault\":\"unreachable\""), "{json}");
}

/// A slot that migrates while `status` and `scan` read: its keys are on the importing master
/// already, the old one answers `ASK` for them, and the new one `MOVED` back until the
/// migration ends. Both follow the redirects (behind `ASKING` for an `ASK`), as the clients
/// do, and read the held lock.
#[test]
fn status_and_scan_follow_a_slot_that_moves() {
    let cluster = RedisCluster::builder().masters(3).replicas(0).start();
    let url = cluster.seed_url();
    let dir = TempDir::new("redlease-cli-cluster-moving").unwrap();
    let run_ = held(&url, dir.path(), 0, "moving", &[]);
    wait_until(Duration::from_secs(20), || dir.path().join("held-0").exists());
    let slot = key_slot("{moving}");
    let to = (cluster.master_of_slot(slot) + 1) % 3;
    let migration = cluster.begin_migration(slot, to);
    assert!(migration.move_keys() > 0, "the lock key moved to the importing master");

    let out = run(redlease().args(["status", "-k", "moving", "-N", &url]));
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).lines().next().is_some_and(|l| l.contains(" held by ")), "{}", stdout(&out));
    let out = run(redlease().args(["scan", "-N", &url]));
    assert!(!stdout(&out).contains("run it again") && !stderr(&out).contains("run it again"), "{}", stdout(&out));
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));

    migration.finish();
    std::fs::write(dir.path().join("stop"), "").unwrap();
    let out = run_.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    cluster.assert_no_leaks();
}
