//! A program that ends without `close()` leaves no lock behind: it returns from `main` after
//! dropping its guard, with the guard still alive, or through `?` — on tokio (multi-thread and
//! current-thread runtimes, the driver dropped with the runtime), on smol (its driver on a
//! thread of its own) and with the blocking mio client, with and without auto-extension (whose
//! thread drives the client's loop). Each runs as a process of its own (`src/bin/redlease-exit-worker.rs`).

use std::process::Command;
use std::time::{Duration, Instant};

use redlease_tests::Servers;

#[test]
fn a_program_that_exits_without_close_leaves_no_key_behind() {
    let servers = Servers::start(3);
    for runtime in ["tokio-mt", "tokio-ct", "smol", "mio", "mio-auto"] {
        for way in ["drop", "alive", "error"] {
            let key = format!("exit:{runtime}:{way}");
            let out = Command::new(env!("CARGO_BIN_EXE_redlease-exit-worker"))
                .args([runtime, way, &key])
                .args(servers.urls())
                .output()
                .expect("the worker runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stdout.trim(), "held", "[{runtime} {way}] {stderr}");
            assert_eq!(out.status.success(), way != "error", "[{runtime} {way}] {:?} {stderr}", out.status);
            // The releases went out before the process ended; give the nodes a moment to run them.
            let started = Instant::now();
            let left = loop {
                let left: Vec<i64> = servers
                    .nodes()
                    .iter()
                    .map(|n| n.conn().unwrap().pttl(&key).unwrap())
                    .filter(|pttl| *pttl != -2)
                    .collect();
                if left.is_empty() || started.elapsed() > Duration::from_secs(3) {
                    break left;
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            assert!(left.is_empty(), "[{runtime} {way}] the key is still on {} nodes, PTTL {left:?} ms", left.len());
        }
    }
}

/// Stopped with Ctrl-C (SIGINT): a tokio program that waits for it and then calls `close()`
/// (the README's first example, `redlease/examples/service.rs`) leaves no key behind; one
/// without a handler dies with its lock held until the TTL runs out.
#[test]
fn ctrl_c_then_close_releases_and_no_handler_leaves_the_lock_for_its_ttl() {
    use std::io::{BufRead, BufReader};
    let servers = Servers::start(3);
    for way in ["ctrl-c", "no-handler"] {
        let key = format!("exit:sigint:{way}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_redlease-exit-worker"))
            .args(["tokio-mt", way, &key])
            .args(servers.urls())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the worker runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "held", "[{way}]");
        #[allow(unsafe_code)]
        // SAFETY: kill(2) on the child this test started and has not reaped.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGINT);
        }
        let status = child.wait().unwrap();
        let on_nodes = || servers.nodes().iter().filter(|n| n.conn().unwrap().pttl(&key).unwrap() > 0).count();
        if way == "ctrl-c" {
            assert!(status.success(), "{status:?}");
            let started = Instant::now();
            while on_nodes() > 0 && started.elapsed() < Duration::from_secs(3) {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert_eq!(on_nodes(), 0, "[{way}] the lock was released");
        } else {
            assert!(!status.success(), "killed by the signal: {status:?}");
            assert!(on_nodes() >= 2, "[{way}] the lock stays until its TTL");
        }
    }
}
