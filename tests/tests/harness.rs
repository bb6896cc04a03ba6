//! Tests of the harness itself: real redis-server processes, pause/resume, kill/restart with and
//! without persistence, ACL users, the leak check, cleanup on drop and on panic, and the fault
//! proxy's modes seen through a raw TCP client.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use redlease_tests::{Mode, Proxy, RedisConn, Reply, Servers};

fn alive(pid: u32) -> bool {
    // A reaped child leaves no /proc entry; a zombie would show state Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

#[test]
fn starts_independent_nodes() {
    let servers = Servers::start(3);
    assert_eq!(servers.len(), 3);
    let ports: Vec<u16> = servers.nodes().iter().map(|n| n.port()).collect();
    assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2], "{ports:?}");
    for (i, url) in servers.urls().iter().enumerate() {
        assert_eq!(url, &format!("redis://127.0.0.1:{}", ports[i]));
    }
    // Independent masters: a key written on one node is not on the others.
    let mut c0 = servers.node(0).conn().unwrap();
    assert!(c0.ping().unwrap());
    c0.set_px("k", "v", Duration::from_secs(60)).unwrap();
    assert_eq!(c0.get("k").unwrap().as_deref(), Some("v"));
    let pttl = c0.pttl("k").unwrap();
    assert!(pttl > 0 && pttl <= 60_000, "{pttl}");
    assert_eq!(servers.node(1).conn().unwrap().get("k").unwrap(), None);
    assert_eq!(c0.pttl("missing").unwrap(), -2);
    // The RESP client handles arrays (SCAN) and errors.
    assert_eq!(c0.keys("*").unwrap(), vec!["k".to_owned()]);
    assert!(matches!(c0.cmd(&["NOSUCHCOMMAND"]).unwrap(), Reply::Error(e) if e.contains("unknown command")));
    assert!(c0.checked(&["NOSUCHCOMMAND"]).is_err());
    assert_eq!(c0.dbsize().unwrap(), 1);
    // Without persistence nothing is configured to be written.
    let reply = c0.cmd(&["CONFIG", "GET", "appendonly"]).unwrap();
    assert_eq!(
        reply,
        Reply::Array(Some(vec![Reply::Bulk(Some(b"appendonly".to_vec())), Reply::Bulk(Some(b"no".to_vec()))]))
    );
    servers.assert_no_leaks();
}

#[test]
fn pause_and_resume() {
    let servers = Servers::start(1);
    let node = servers.node(0);
    let mut conn = node.conn().unwrap();
    node.pause();
    assert!(node.is_paused() && node.is_running());
    conn.set_timeout(Duration::from_millis(300)).unwrap();
    let err = conn.ping().unwrap_err();
    assert!(is_timeout(&err), "a paused node must not answer: {err}");
    node.resume();
    assert!(!node.is_paused());
    // The PING sent while paused is answered now; then the connection works as before.
    conn.set_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(conn.receive().unwrap(), Reply::Simple("PONG".into()));
    assert!(conn.ping().unwrap());
}

#[test]
fn kill_and_restart_with_appendfsync_always_keeps_data() {
    let servers = Servers::builder().nodes(1).persist(true).start();
    let node = servers.node(0);
    let port = node.port();
    let mut conn = node.conn().unwrap();
    let reply = conn.cmd(&["CONFIG", "GET", "appendfsync"]).unwrap();
    assert_eq!(
        reply,
        Reply::Array(Some(vec![Reply::Bulk(Some(b"appendfsync".to_vec())), Reply::Bulk(Some(b"always".to_vec()))]))
    );
    conn.set_px("kept", "1", Duration::from_secs(600)).unwrap();
    let old_pid = node.pid().unwrap();
    node.kill();
    assert!(!node.is_running() && node.pid().is_none());
    assert!(!alive(old_pid), "SIGKILL and reap");
    assert!(conn.ping().is_err(), "the old connection is gone");
    node.restart(true);
    assert_eq!(node.port(), port, "same port after a restart");
    let mut conn = node.conn().unwrap();
    assert_eq!(conn.get("kept").unwrap().as_deref(), Some("1"), "acknowledged write survives kill -9");
    assert!(conn.pttl("kept").unwrap() > 0, "with its TTL");
    // restart(false) drops the files.
    node.restart(false);
    assert_eq!(node.conn().unwrap().get("kept").unwrap(), None);
}

#[test]
fn restart_without_persistence_loses_data() {
    let servers = Servers::start(1);
    let node = servers.node(0);
    node.conn().unwrap().set_px("gone", "1", Duration::from_secs(600)).unwrap();
    // Also from a paused state: SIGKILL ends a stopped process.
    node.pause();
    node.restart(true);
    assert!(!node.is_paused());
    assert_eq!(node.conn().unwrap().get("gone").unwrap(), None);
    assert_eq!(node.conn().unwrap().dbsize().unwrap(), 0);
}

#[test]
fn script_flush_forgets_scripts() {
    let servers = Servers::start(2);
    let mut conn = servers.node(1).conn().unwrap();
    let sha = conn.checked(&["SCRIPT", "LOAD", "return 1"]).unwrap().as_text().unwrap();
    assert_eq!(conn.checked(&["EVALSHA", &sha, "0"]).unwrap(), Reply::Int(1));
    servers.script_flush_all();
    assert!(matches!(conn.cmd(&["EVALSHA", &sha, "0"]).unwrap(), Reply::Error(e) if e.starts_with("NOSCRIPT")));
}

#[test]
fn acl_user_is_the_only_login() {
    let servers = Servers::builder().nodes(2).acl_user("alice", "s3cret").start();
    assert_eq!(servers.credentials(), Some(("alice", "s3cret")));
    let node = servers.node(0);
    assert_eq!(node.url(), format!("redis://alice:s3cret@127.0.0.1:{}", node.port()));
    assert!(node.conn().unwrap().ping().unwrap());
    let mut anonymous = RedisConn::connect(node.addr(), None).unwrap();
    assert!(matches!(anonymous.cmd(&["PING"]).unwrap(), Reply::Error(e) if e.starts_with("NOAUTH")));
    let err = RedisConn::connect(node.addr(), Some(("alice", "wrong"))).unwrap_err();
    assert!(err.to_string().contains("WRONGPASS"), "{err}");
    // The harness's own helpers log in by themselves.
    servers.flushall();
    servers.assert_no_leaks();
}

#[test]
fn leak_check_flags_keys_without_ttl_only() {
    let servers = Servers::start(2);
    let mut conn = servers.node(1).conn().unwrap();
    conn.set_px("lock:a", "token", Duration::from_secs(60)).unwrap();
    conn.set("redlease:fence:a", "7").unwrap();
    servers.assert_no_leaks();
    assert_eq!(servers.lock_keys().len(), 1);
    assert_eq!(servers.all_keys().len(), 2);
    conn.set("lock:b", "token").unwrap();
    let panic = std::panic::catch_unwind(|| servers.assert_no_leaks()).unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("lock:b") && !msg.contains("lock:a"), "{msg}");
}

#[test]
fn drop_stops_every_process() {
    let servers = Servers::start(3);
    servers.node(1).pause();
    let pids: Vec<u32> = servers.nodes().iter().map(|n| n.pid().unwrap()).collect();
    let dirs_exist = pids.iter().all(|p| alive(*p));
    assert!(dirs_exist);
    drop(servers);
    for pid in pids {
        assert!(!alive(pid), "redis-server {pid} still running after drop");
    }
}

#[test]
fn panicking_test_still_stops_its_processes() {
    let (tx, rx) = std::sync::mpsc::channel();
    let result = std::thread::spawn(move || {
        let servers = Servers::start(2);
        tx.send(servers.nodes().iter().map(|n| n.pid().unwrap()).collect::<Vec<_>>()).unwrap();
        panic!("a test failing while its servers run");
    })
    .join();
    assert!(result.is_err());
    let pids = rx.recv().unwrap();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(!alive(pid), "redis-server {pid} survived the panic");
    }
}

/// Run by `missing_redis_server_is_one_clear_line` in a child process whose PATH has no
/// redis-server; does nothing when run directly.
#[test]
#[ignore = "helper: run by missing_redis_server_is_one_clear_line"]
fn probe_missing_redis_server() {
    if std::env::var_os("REDLEASE_PROBE_MISSING").is_some() {
        let _ = Servers::start(1);
    }
}

#[test]
fn missing_redis_server_is_one_clear_line() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "probe_missing_redis_server", "--ignored", "--nocapture", "--test-threads=1"])
        .env("PATH", "/nonexistent")
        .env("REDLEASE_PROBE_MISSING", "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = "redis-server not found: install it with 'apt-get install redis-server' (Debian/Ubuntu)";
    assert!(stderr.lines().any(|l| l == expected), "stderr:\n{stderr}");
}

// ----- the fault proxy -----------------------------------------------------------------------

fn raw(addr: std::net::SocketAddr, timeout: Duration) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s
}

fn read_pong(s: &mut TcpStream) -> io::Result<()> {
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf)?;
    assert_eq!(&buf, b"+PONG\r\n");
    Ok(())
}

#[test]
fn proxy_passes_and_delays() {
    let servers = Servers::start(1);
    let proxy = Proxy::start(servers.node(0).addr());
    assert_eq!(proxy.upstream(), servers.node(0).addr());
    assert_eq!(proxy.mode(), Mode::Pass);
    let mut conn = RedisConn::connect(proxy.addr(), None).unwrap();
    assert!(conn.ping().unwrap());
    conn.set("through", "proxy").unwrap();
    assert_eq!(servers.node(0).conn().unwrap().get("through").unwrap().as_deref(), Some("proxy"));

    // Delay holds each chunk back at least that long each way (a lower bound only).
    let delay = Duration::from_millis(100);
    proxy.set_mode(Mode::Delay(delay));
    let started = Instant::now();
    assert!(conn.ping().unwrap());
    assert!(started.elapsed() >= 2 * delay, "delayed both ways: {:?}", started.elapsed());
    // Pipelined commands keep their order.
    let mut s = raw(proxy.addr(), Duration::from_secs(5));
    s.write_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n").unwrap();
    let mut buf = [0u8; 14];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"+PONG\r\n$1\r\nx\r\n");
    proxy.set_mode(Mode::Pass);
    assert!(conn.ping().unwrap());
    assert!(proxy.accepted() >= 2);
    assert_eq!(proxy.active(), 2);
    servers.flushall();
}

#[test]
fn proxy_blackhole_holds_bytes_until_healed() {
    let servers = Servers::start(1);
    let proxy = Proxy::start(servers.node(0).addr());
    let mut open = raw(proxy.addr(), Duration::from_millis(300));
    open.write_all(b"PING\r\n").unwrap();
    read_pong(&mut open).unwrap();

    proxy.set_mode(Mode::Blackhole);
    open.write_all(b"PING\r\n").unwrap();
    let err = read_pong(&mut open).unwrap_err();
    assert!(is_timeout(&err), "{err}");
    // New connections are accepted, but not answered either.
    let mut fresh = raw(proxy.addr(), Duration::from_millis(300));
    fresh.write_all(b"PING\r\n").unwrap();
    assert!(is_timeout(&read_pong(&mut fresh).unwrap_err()));

    // Healed: what was sent during the partition is delivered, nothing is lost.
    proxy.set_mode(Mode::Pass);
    open.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    fresh.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    read_pong(&mut open).unwrap();
    read_pong(&mut fresh).unwrap();
}

#[test]
fn proxy_reset_kills_open_and_new_connections() {
    let servers = Servers::start(1);
    let proxy = Proxy::start(servers.node(0).addr());
    let mut open = raw(proxy.addr(), Duration::from_secs(5));
    open.write_all(b"PING\r\n").unwrap();
    read_pong(&mut open).unwrap();

    proxy.set_mode(Mode::Reset);
    let mut buf = [0u8; 1];
    match open.read(&mut buf) {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => panic!("expected a reset, read {n} bytes"),
    }
    // A new connection is accepted and reset at once.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut fresh = raw(proxy.addr(), Duration::from_secs(5));
    let _ = fresh.write_all(b"PING\r\n");
    let r = fresh.read(&mut buf);
    assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    assert!(Instant::now() < deadline);

    proxy.set_mode(Mode::Pass);
    let mut healed = raw(proxy.addr(), Duration::from_secs(5));
    healed.write_all(b"PING\r\n").unwrap();
    read_pong(&mut healed).unwrap();
}

#[test]
fn proxy_in_front_of_a_dead_node_fails_connections() {
    let servers = Servers::start(1);
    let proxy = Proxy::start(servers.node(0).addr());
    servers.node(0).kill();
    let mut s = raw(proxy.addr(), Duration::from_secs(5));
    let _ = s.write_all(b"PING\r\n");
    let mut buf = [0u8; 1];
    let r = s.read(&mut buf);
    assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    servers.node(0).restart(false);
    let mut s = raw(proxy.addr(), Duration::from_secs(5));
    s.write_all(b"PING\r\n").unwrap();
    read_pong(&mut s).unwrap();
}
