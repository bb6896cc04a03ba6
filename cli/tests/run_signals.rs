//! `redlease run` never lets its command outlive the lock: signals sent to redlease reach the
//! command, the lock is held until it exits, SIGKILL follows after --grace, and a redlease
//! killed outright takes the command with it. Real processes, real redis-server nodes.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{alive, nodes, redlease, signal, wait_until};
use redlease_servers::{Servers, TempDir};

/// Start `redlease run` on `key` with `extra` options and `script` as the command (`sh -c`).
fn start(servers: &Servers, key: &str, extra: &[&str], script: &str) -> Child {
    redlease()
        .args(["run", "-k", key, "-N", &nodes(servers)])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start redlease run")
}

fn read_pid(file: &Path) -> u32 {
    wait_until(Duration::from_secs(15), || std::fs::read_to_string(file).is_ok_and(|s| s.ends_with('\n')));
    std::fs::read_to_string(file).unwrap().trim().parse().expect("a pid")
}

/// Nodes holding `key` with the same token, at least a quorum of them.
fn held_by_a_quorum(servers: &Servers, key: &str) -> bool {
    let tokens: Vec<Option<String>> = servers.nodes().iter().map(|n| n.conn().unwrap().get(key).unwrap()).collect();
    let first = tokens.iter().flatten().next();
    first.is_some_and(|t| tokens.iter().flatten().filter(|x| *x == t).count() > servers.len() / 2)
}

#[test]
fn sigterm_is_passed_on_and_the_lock_is_held_until_the_command_exits() {
    let servers = Servers::start(3);
    let dir = TempDir::new("redlease-cli-term").unwrap();
    let d = dir.path().display();
    // On SIGTERM the command notes it, then takes its time: until the test says go.
    let script = format!(
        "trap 'echo TERM > {d}/got; while [ ! -e {d}/go ]; do sleep 0.05; done; exit 5' TERM; \
         echo $$ > {d}/pid; while :; do sleep 0.05; done"
    );
    let child = start(&servers, "graceful", &["-t", "2", "-g", "60"], &script);
    read_pid(&dir.path().join("pid"));
    signal(child.id(), libc::SIGTERM);
    wait_until(Duration::from_secs(10), || dir.path().join("got").exists());
    // Longer than the TTL after the signal: redlease still extends the lock while the command
    // winds down.
    std::thread::sleep(Duration::from_secs(3));
    assert!(held_by_a_quorum(&servers, "graceful"), "the lock was not held while the command was stopping");
    std::fs::write(dir.path().join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "redlease exits with the command's status: {stderr}");
    assert!(stderr.contains("got SIGTERM: passed it on to the command"), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.path().join("got")).unwrap().trim(), "TERM");
    servers.assert_no_leaks();
}

#[test]
fn sigint_and_sighup_are_passed_on_and_the_status_follows_the_command() {
    let servers = Servers::start(3);
    let dir = TempDir::new("redlease-cli-signals").unwrap();
    let d = dir.path().display();
    // (signal, the command, the exit status redlease must end with)
    let cases: &[(i32, String, i32)] = &[
        // The command handles it and exits on its own terms.
        (
            libc::SIGINT,
            format!("trap 'echo INT > {d}/got; exit 10' INT; echo $$ > {d}/pid; while :; do sleep 0.05; done"),
            10,
        ),
        (
            libc::SIGHUP,
            format!("trap 'echo HUP > {d}/got; exit 11' HUP; echo $$ > {d}/pid; while :; do sleep 0.05; done"),
            11,
        ),
        // The command dies of it: 128 + the signal, as a shell reports it.
        (libc::SIGTERM, format!("echo $$ > {d}/pid; exec sleep 30"), 128 + libc::SIGTERM),
        (libc::SIGHUP, format!("echo $$ > {d}/pid; exec sleep 30"), 128 + libc::SIGHUP),
    ];
    for (sig, script, want) in cases {
        let _ = std::fs::remove_file(dir.path().join("pid"));
        let _ = std::fs::remove_file(dir.path().join("got"));
        let started = Instant::now();
        let child = start(&servers, "signals", &["-g", "60"], script);
        read_pid(&dir.path().join("pid"));
        signal(child.id(), *sig);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*want), "signal {sig}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(20), "signal {sig}: took {:?}", started.elapsed());
        if *want < 128 {
            let got = std::fs::read_to_string(dir.path().join("got")).unwrap();
            assert_eq!(got.trim(), if *sig == libc::SIGINT { "INT" } else { "HUP" });
        }
        servers.assert_no_leaks();
    }
}

#[test]
fn a_command_that_ignores_the_signal_is_killed_after_the_grace_period() {
    let servers = Servers::start(3);
    let dir = TempDir::new("redlease-cli-stubborn").unwrap();
    let d = dir.path().display();
    // SIGTERM stays ignored across exec: only SIGKILL ends it.
    let child =
        start(&servers, "stubborn", &["-g", "500ms"], &format!("trap '' TERM; echo $$ > {d}/pid; exec sleep 30"));
    let pid = read_pid(&dir.path().join("pid"));
    let started = Instant::now();
    signal(child.id(), libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGKILL), "{stderr}");
    assert!(stderr.contains("did not exit within --grace 500ms: SIGKILL"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    assert!(!alive(pid), "the command still runs");
    servers.assert_no_leaks();
}

#[test]
fn a_signal_while_waiting_for_the_lock_ends_redlease_without_running_the_command() {
    let servers = Servers::start(3);
    let dir = TempDir::new("redlease-cli-waiting").unwrap();
    let d = dir.path().display();
    let holder =
        start(&servers, "queue", &[], &format!("echo $$ > {d}/pid; while [ ! -e {d}/go ]; do sleep 0.05; done"));
    read_pid(&dir.path().join("pid"));
    for (sig, want) in [(libc::SIGTERM, 143), (libc::SIGINT, 130), (libc::SIGHUP, 129)] {
        let waiter = start(&servers, "queue", &["-w", "60"], &format!("touch {d}/ran"));
        // Connecting or already waiting: either way it gives up at once.
        std::thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        signal(waiter.id(), sig);
        let out = waiter.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(want), "signal {sig}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(10), "signal {sig}: took {:?}", started.elapsed());
        assert!(stderr.contains("giving up"), "{stderr}");
    }
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(holder.wait_with_output().unwrap().status.code(), Some(0));
    assert!(!dir.path().join("ran").exists(), "a waiter ran its command without the lock");
    servers.assert_no_leaks();
}

#[cfg(target_os = "linux")]
#[test]
fn the_command_dies_with_redlease_even_by_sigkill() {
    let servers = Servers::start(3);
    let dir = TempDir::new("redlease-cli-orphan").unwrap();
    let d = dir.path().display();
    let mut child = start(&servers, "orphan", &[], &format!("echo $$ > {d}/pid; exec sleep 30"));
    let pid = read_pid(&dir.path().join("pid"));
    assert!(alive(pid));
    signal(child.id(), libc::SIGKILL);
    let _ = child.wait();
    // The kernel sends the parent-death signal (SIGKILL) as redlease dies.
    wait_until(Duration::from_secs(10), || !alive(pid));
}
