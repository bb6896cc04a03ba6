//! `redlease run` as cron runs it: how fast it fails when the nodes are down or refuse us, what
//! it says on stderr (`-q`, `--verbose`), and the wait bounds cron lines use.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{nodes, redlease, run, stderr, wait_until};
use redlease_servers::Servers;

#[test]
fn wait_bounds_take_forever_and_days() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    for wait in ["inf", "forever", "1d", "0.5d", "0"] {
        let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-w", wait, "true"]));
        assert_eq!(out.status.code(), Some(0), "-w {wait}: {}", stderr(&out));
    }
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-t", "1d", "-g", "1d", "true"]));
    assert_eq!(out.status.code(), Some(0), "-t 1d: {}", stderr(&out));
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-w", "soon", "true"]));
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("forever"), "{}", stderr(&out));
    // Without a bound it waits out a holder, however many attempts that takes.
    let mut holder =
        redlease().args(["run", "-k", "job", "-N", &urls, "--", "sleep", "2"]).stdin(Stdio::null()).spawn().unwrap();
    wait_until(Duration::from_secs(10), || servers.node(0).conn().unwrap().get("job").unwrap().is_some());
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-w", "forever", "true"]));
    assert_eq!(out.status.code(), Some(0), "-w forever: {}", stderr(&out));
    assert_eq!(holder.wait().unwrap().code(), Some(0));
    servers.assert_no_leaks();
}

const SECRET: &str = "cr0nS3cret";

fn down_urls() -> &'static str {
    "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3"
}

#[test]
fn nodes_down_fail_after_the_connect_timeout_not_the_lock_wait() {
    // No node answers: 69 within seconds, although -w asks to wait 30 s for the lock.
    for extra in [&["-w", "30"][..], &["-n"], &["-w", "forever"]] {
        let started = Instant::now();
        let out = run(redlease().args(["run", "-k", "job", "-N", down_urls()]).args(extra).arg("true"));
        assert_eq!(out.status.code(), Some(69), "{extra:?}: {}", stderr(&out));
        assert!(started.elapsed() < Duration::from_secs(10), "{extra:?}: took {:?}", started.elapsed());
        assert!(stderr(&out).contains("nodes unreachable"), "{}", stderr(&out));
        assert!(stderr(&out).contains("redis://127.0.0.1:2: down"), "names the nodes: {}", stderr(&out));
    }
    // One node of three answers: still no quorum, still not 30 s.
    let servers = Servers::start(3);
    servers.node(1).kill();
    servers.node(2).kill();
    let started = Instant::now();
    let out = run(redlease().args(["run", "-k", "job", "-N", &nodes(&servers), "-w", "30", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}

#[test]
fn wait_nodes_waits_for_the_servers_to_come_up() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    servers.node(1).kill();
    servers.node(2).kill();
    // A bounded wait for the nodes runs out, after that bound rather than at once.
    let started = Instant::now();
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "--wait-nodes", "2", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(started.elapsed() >= Duration::from_millis(1500), "gave up early: {:?}", started.elapsed());
    // Nodes that come back within --wait-nodes are waited for.
    let waiter = redlease()
        .args(["run", "-k", "job", "-N", &urls, "--wait-nodes", "forever", "-n", "true"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    servers.node(1).restart(false);
    servers.node(2).restart(false);
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_wrong_password_fails_at_once_naming_the_node_and_not_the_password() {
    let servers = Servers::builder().nodes(3).acl_user("alice", SECRET).start();
    let wrong = nodes(&servers).replace(SECRET, "not-the-password");
    for extra in [&["-w", "30"][..], &["-n"], &["--wait-nodes", "forever"]] {
        let started = Instant::now();
        let out = run(redlease().args(["run", "-k", "job", "-N", &wrong]).args(extra).arg("true"));
        assert_eq!(out.status.code(), Some(78), "{extra:?}: {}", stderr(&out));
        assert!(started.elapsed() < Duration::from_secs(5), "{extra:?}: took {:?}", started.elapsed());
        let err = stderr(&out);
        assert!(err.contains("misconfigured") && err.contains("WRONGPASS"), "{err}");
        assert!(err.contains("node #0 redis://"), "names the node: {err}");
        assert!(err.contains(&format!("@{}: MISCONFIGURED", servers.node(0).addr())), "names the node: {err}");
        assert!(!err.contains("not-the-password") && !err.contains(SECRET), "shows a password: {err}");
    }
}

#[test]
fn a_refusal_of_our_commands_while_waiting_ends_the_wait_at_once() {
    let servers = Servers::builder().nodes(3).acl_user("alice", SECRET).start();
    for node in servers.nodes() {
        node.conn().unwrap().ok(&["ACL", "SETUSER", "bob", "on", ">bobs-pw", "~*", "&*", "+@all"]).unwrap();
    }
    let mut holder = redlease()
        .args(["run", "-k", "job", "-N", &nodes(&servers), "--", "sleep", "30"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || servers.node(0).conn().unwrap().get("job").unwrap().is_some());
    let bob = nodes(&servers).replace(&format!("alice:{SECRET}"), "bob:bobs-pw");
    let waiter = redlease()
        .args(["run", "-k", "job", "-N", &bob, "-w", "60", "true"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let refused = Instant::now();
    for node in servers.nodes() {
        node.conn().unwrap().ok(&["ACL", "SETUSER", "bob", "-evalsha", "-eval"]).unwrap();
    }
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(refused.elapsed() < Duration::from_secs(10), "waited on: {:?}", refused.elapsed());
    assert!(stderr(&out).contains("misconfigured"), "{}", stderr(&out));
    common::signal(holder.id(), libc::SIGTERM);
    let _ = holder.wait();
}

#[test]
fn help_explains_the_wait_for_the_nodes_and_exit_78() {
    let long = common::stdout(&run(redlease().args(["run", "--help"])));
    assert!(long.contains("--wait-nodes") && long.contains("  78 "), "{long}");
    let short = common::stdout(&run(redlease().args(["run", "-h"])));
    assert!(short.contains("78 nodes misconfigured"), "{short}");
    let top = common::stdout(&run(redlease().arg("--help")));
    assert!(top.contains("78 nodes"), "{top}");
}

#[test]
fn quiet_says_nothing_when_the_lock_is_held_and_errors_still_print() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let mut holder =
        redlease().args(["run", "-k", "job", "-N", &urls, "--", "sleep", "5"]).stdin(Stdio::null()).spawn().unwrap();
    wait_until(Duration::from_secs(10), || servers.node(0).conn().unwrap().get("job").unwrap().is_some());
    for extra in [&["-n", "-q"][..], &["--quiet", "-w", "0.3"], &["-q", "-n", "-E", "0"]] {
        let out = run(redlease().args(["run", "-k", "job", "-N", &urls]).args(extra).arg("true"));
        let want = if extra.contains(&"-E") { 0 } else { 75 };
        assert_eq!(out.status.code(), Some(want), "{extra:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{extra:?} printed on stderr");
    }
    // Without -q the same outcome says so.
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-n", "true"]));
    assert!(stderr(&out).contains("held by another client"), "{}", stderr(&out));
    assert_eq!(holder.wait().unwrap().code(), Some(0));
    // Errors print with -q.
    let out = run(redlease().args(["run", "-k", "job", "-N", down_urls(), "-q", "-n", "true"]));
    assert_eq!(out.status.code(), Some(69));
    assert!(stderr(&out).contains("nodes unreachable"), "{}", stderr(&out));
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-q", "--verbose", "true"]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
}

#[test]
fn verbose_says_what_it_did() {
    let servers = Servers::start(3);
    let out =
        run(redlease().args(["run", "-k", "job", "-N", &nodes(&servers), "--verbose", "--", "sh", "-c", "exit 3"]));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    for step in [
        "connected: ",
        " of 3 nodes ready (quorum 2",
        "acquired the write lock on \"job\" with fencing token ",
        "running [\"sh\", \"-c\", \"exit 3\"]",
        "the command exited with status 3",
        "release of the write lock on \"job\": released (",
    ] {
        assert!(err.contains(step), "--verbose does not say {step:?}: {err}");
    }
    // Without it, a run that goes well says nothing.
    let out = run(redlease().args(["run", "-k", "job", "-N", &nodes(&servers), "true"]));
    assert_eq!((out.status.code(), stderr(&out).as_str()), (Some(0), ""));
}
