//! docs/operations.md recommends a `redis.conf` and an ACL user: a real redis-server accepts
//! them, reports the settings back, and redlease locks (with fencing) as that user, who is
//! refused everything else. So the guide cannot drift into settings that do not work.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redlease_tests::{RedisConn, Reply, TempDir};

fn guide() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    std::fs::read_to_string(root.join("docs/operations.md")).expect("docs/operations.md")
}

/// The lines of the first code block after the line `heading`.
fn block_after(text: &str, heading: &str) -> Vec<String> {
    let rest = &text[text.find(heading).unwrap_or_else(|| panic!("no {heading:?} in the guide"))..];
    let open = rest.find("\n```").expect("a code block");
    let body = &rest[open + 4..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("\n```").expect("a closing fence")].lines().map(str::to_owned).collect()
}

/// A redis-server with `lines` added to a config on a free loopback port; killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    _dir: TempDir,
}

impl Server {
    fn start(lines: &[String]) -> Server {
        let dir = TempDir::new("redlease-ops-doc").unwrap();
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port();
        let conf = dir.path().join("redis.conf");
        let mut f = std::fs::File::create(&conf).unwrap();
        writeln!(f, "bind 127.0.0.1\nport {port}\ndir {}", dir.path().display()).unwrap();
        for line in lines {
            writeln!(f, "{line}").unwrap();
        }
        drop(f);
        let child = Command::new("redis-server")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (scripts/ensure-redis.sh installs it)");
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let started = Instant::now();
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "redis-server did not start with {lines:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { child, addr, _dir: dir }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(reply: Reply) -> Vec<String> {
    match reply {
        Reply::Array(Some(items)) => items.iter().filter_map(Reply::as_text).collect(),
        r => r.as_text().into_iter().collect(),
    }
}

#[test]
fn the_recommended_redis_conf_is_accepted_and_in_force() {
    let lines = block_after(&guide(), "### `redis.conf`");
    assert!(lines.iter().any(|l| l == "appendfsync always"), "{lines:?}");
    let server = Server::start(&lines);
    let mut conn = RedisConn::connect(server.addr, None).unwrap();
    for (key, want) in [("appendonly", "yes"), ("appendfsync", "always"), ("maxmemory-policy", "noeviction")] {
        assert_eq!(text(conn.checked(&["CONFIG", "GET", key]).unwrap()), [key, want]);
    }
    let persistence = conn.checked(&["INFO", "persistence"]).unwrap().as_text().unwrap();
    assert!(persistence.contains("aof_enabled:1"), "{persistence}");
    let replication = conn.checked(&["INFO", "replication"]).unwrap().as_text().unwrap();
    assert!(replication.contains("role:master"), "{replication}");
}

#[test]
fn the_recommended_acl_user_can_lock_with_fencing_and_nothing_more() {
    let guide = guide();
    let acl = block_after(&guide, "**A user with only what redlease needs.**");
    assert_eq!(acl.len(), 2, "expected the `user default off` and `user redlease ...` lines: {acl:?}");
    let server = Server::start(&acl);
    let url = format!("redis://redlease:change-me@{}", server.addr);

    let client = redlease_mio::Client::connect([url.as_str()]).unwrap();
    let options = redlease_mio::LockOptions::new("ops:doc", Duration::from_secs(10)).fencing(true);
    let mut guard = client.lock_with(options).unwrap();
    assert_eq!(guard.fence(), Some(1));
    guard.extend(Duration::from_secs(10)).unwrap();
    // A second client waits behind the first: its subscription to the wake channel is
    // allowed, so it is woken rather than polling.
    let waiter = redlease_mio::Client::connect([url.as_str()]).unwrap();
    let waiting = std::thread::spawn(move || {
        let options = redlease_mio::LockOptions::new("ops:doc", Duration::from_secs(10)).wait(Duration::from_secs(10));
        let got = waiter.lock_with(options).map(|g| g.release().is_ok());
        let polled = waiter.health().nodes[0].polled_because().map(str::to_owned);
        (got, polled)
    });
    std::thread::sleep(Duration::from_millis(200));
    // The user may keep the waiter queue: the waiter is in it (and the queue has a TTL).
    let mut admin = RedisConn::connect(server.addr, Some(("redlease", "change-me"))).unwrap();
    assert!(admin.pttl("redlease:queue:ops:doc").unwrap() > 0, "the waiter queued");
    let report = guard.release().unwrap();
    assert_eq!(report.outcome, redlease_mio::ReleaseOutcome::Released);
    let (got, polled) = waiting.join().unwrap();
    assert!(matches!(got, Ok(true)), "the waiter got the lock");
    assert_eq!(polled, None, "the guide's user may subscribe to the wake channels");

    // A semaphore's permit, and a read lock that a writer then waits for, as that user.
    let options = redlease_mio::LockOptions::new("ops:sem", Duration::from_secs(10)).semaphore(2).fencing(true);
    let permit = client.lock_with(options).unwrap();
    assert_eq!(permit.permits().len(), 1);
    permit.release().unwrap();
    let read = redlease_mio::LockOptions::new("ops:doc", Duration::from_secs(10)).shared(true);
    let reader = client.lock_with(read).unwrap();
    let writer = redlease_mio::Client::connect([url.as_str()]).unwrap();
    let writing = std::thread::spawn(move || {
        let options = redlease_mio::LockOptions::new("ops:doc", Duration::from_secs(10)).wait(Duration::from_secs(10));
        writer.lock_with(options).map(|g| g.release().is_ok())
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(reader.release().unwrap().outcome, redlease_mio::ReleaseOutcome::Released);
    assert!(matches!(writing.join().unwrap(), Ok(true)), "the writer got the lock after the reader");

    // Two holds of one owner of a re-entrant lock (what `redlease run` takes), fenced.
    let owned = redlease_mio::LockOptions::new("ops:nested", Duration::from_secs(10)).reentrant("ops").fencing(true);
    let outer = client.lock_with(owned.clone()).unwrap();
    let inner = client.lock_with(owned.try_once()).unwrap();
    assert_eq!(inner.fence(), outer.fence());
    inner.release().unwrap();
    assert_eq!(outer.release().unwrap().outcome, redlease_mio::ReleaseOutcome::Released);

    let mut conn = RedisConn::connect(server.addr, Some(("redlease", "change-me"))).unwrap();
    assert_eq!(conn.pttl("ops:nested").unwrap(), -2);
    assert_eq!(conn.pttl("redlease:holds:ops:nested").unwrap(), -2, "no hold left");
    assert_eq!(conn.pttl("ops:doc").unwrap(), -2);
    assert_eq!(conn.pttl("redlease:readers:ops:doc").unwrap(), -2, "no reader left");
    assert_eq!(conn.pttl("redlease:queue:ops:doc").unwrap(), -2, "nobody left queued");
    assert_eq!(conn.get("redlease:fence:ops:doc").unwrap().as_deref(), Some("1"));
    assert!(conn.keys("*").is_ok(), "redlease scan needs SCAN");
    for refused in [&["FLUSHALL"][..], &["CONFIG", "GET", "appendfsync"], &["KEYS", "*"]] {
        match conn.cmd(refused).unwrap() {
            Reply::Error(e) => assert!(e.starts_with("NOPERM"), "{refused:?}: {e}"),
            r => panic!("{refused:?} was allowed: {r:?}"),
        }
    }
    assert!(RedisConn::connect(server.addr, None).unwrap().ping().is_err(), "the default user is still on");
}

/// The guide says an ACL without the list commands still locks and still wakes waiters, only
/// without their order: the queue commands are `pcall`s. The guide's user without them: a
/// waiter whose fallback retry is 5 s still gets the lock within 2 s of the release (a release
/// message woke it), and no queue was written.
#[test]
fn an_acl_user_without_the_list_commands_still_locks_and_wakes_waiters() {
    let acl: Vec<String> = block_after(&guide(), "**A user with only what redlease needs.**")
        .into_iter()
        .map(|l| l.replace(" +lpos +rpush +lpush +lrem +lindex +lpop", ""))
        .collect();
    assert!(acl.iter().all(|l| !l.contains("+lpos")), "the list commands are in the guide's line as expected: {acl:?}");
    let server = Server::start(&acl);
    let url = format!("redis://redlease:change-me@{}", server.addr);
    let holder = redlease_mio::Client::connect([url.as_str()]).unwrap();
    let guard = holder.lock("ops:nolists", Duration::from_secs(30)).unwrap();
    let slow = redlease_mio::Retry::new(3, Duration::from_secs(5), Duration::from_secs(5));
    let waiter =
        redlease_mio::Client::with_config(redlease_mio::Config::from_urls([url.as_str()]).unwrap().retry(slow))
            .unwrap();
    let waiting = std::thread::spawn(move || {
        let options =
            redlease_mio::LockOptions::new("ops:nolists", Duration::from_secs(10)).wait(Duration::from_secs(20));
        waiter.lock_with(options).map(|g| g.release().is_ok())
    });
    std::thread::sleep(Duration::from_millis(300));
    let released = Instant::now();
    assert_eq!(guard.release().unwrap().outcome, redlease_mio::ReleaseOutcome::Released);
    assert!(matches!(waiting.join().unwrap(), Ok(true)), "the waiter got the lock");
    let took = released.elapsed();
    assert!(took < Duration::from_secs(2), "the waiter took {took:?}: its 5 s fallback, not a wake-up");
    let mut conn = RedisConn::connect(server.addr, Some(("redlease", "change-me"))).unwrap();
    assert_eq!(conn.pttl("redlease:queue:ops:nolists").unwrap(), -2, "no queue without the list commands");
    assert_eq!(conn.pttl("ops:nolists").unwrap(), -2);
}

/// The guide's ACL user, set on every node of a Redis Cluster given as a node, locks with
/// fencing, reads the slot map, and wakes waiters through sharded pub/sub.
#[test]
fn the_recommended_acl_user_locks_on_a_cluster_node() {
    let acl = block_after(&guide(), "**A user with only what redlease needs.**");
    let rules: Vec<&str> = acl
        .iter()
        .find_map(|l| l.strip_prefix("user redlease "))
        .expect("the guide's user line")
        .split_whitespace()
        .collect();
    let cluster = redlease_tests::RedisCluster::builder().masters(3).replicas(0).start();
    for node in cluster.nodes() {
        let mut args = vec!["ACL", "SETUSER", "redlease"];
        args.extend(&rules);
        node.conn().and_then(|mut c| c.checked(&args)).unwrap();
    }
    let url = cluster.seed_url().replace("redis://", "redis://redlease:change-me@");
    let client = redlease_mio::Client::connect([url.as_str()]).unwrap();
    assert!(client.health().nodes[0].cluster.as_ref().is_some_and(|c| c.covered == 16384), "{}", client.health());
    for i in 0..8 {
        let options = redlease_mio::LockOptions::new(format!("ops:cluster:{i}"), Duration::from_secs(10)).fencing(true);
        client.lock_with(options).unwrap().release().unwrap();
    }
    // A waiter is woken through the sharded channel, not polled.
    let guard = client.lock("ops:cluster:0", Duration::from_secs(10)).unwrap();
    let waiter = redlease_mio::Client::connect([url.as_str()]).unwrap();
    let waiting = std::thread::spawn(move || {
        let options =
            redlease_mio::LockOptions::new("ops:cluster:0", Duration::from_secs(10)).wait(Duration::from_secs(10));
        let got = waiter.lock_with(options).map(|g| g.release().is_ok());
        (got, waiter.health().nodes[0].polled_because().map(str::to_owned))
    });
    std::thread::sleep(Duration::from_millis(200));
    guard.release().unwrap();
    let (got, polled) = waiting.join().unwrap();
    assert!(matches!(got, Ok(true)), "the waiter got the lock");
    assert_eq!(polled, None, "the guide's user may use the sharded wake channels");
    cluster.assert_no_leaks();
}
