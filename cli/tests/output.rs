//! What the commands print when there is little to say or nobody to read it: `status` with too
//! few nodes to tell, output into a pipe whose reader is gone, an `-E` out of range.

mod common;

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{nodes, redlease, run, stderr, stdout};
use redlease_servers::Servers;

const DOWN: &str = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3";

#[test]
fn status_with_too_few_nodes_answering_says_unknown() {
    let out = run(redlease().args(["status", "-k", "job", "-N", DOWN]));
    assert_eq!(out.status.code(), Some(69));
    let text = stdout(&out);
    assert!(text.contains("job: unknown: 0 of 3 nodes answered"), "{text}");
    assert!(!text.contains("free"), "{text}");
    let json = stdout(&run(redlease().args(["status", "-k", "job", "-N", DOWN, "--json"])));
    assert!(
        json.contains("\"state\":\"unknown\",\"held\":null,\"shape\":null,\"holder\":null,\"holders\":[]"),
        "{json}"
    );

    // Every node answers, none holds the key: not held. Then one node of three answers: the
    // other two could hold it.
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let json = stdout(&run(redlease().args(["status", "-k", "job", "-N", &urls, "--json"])));
    assert!(json.contains("\"state\":\"not_held\",\"held\":false"), "{json}");
    let text = stdout(&run(redlease().args(["status", "-k", "job", "-N", &urls])));
    assert!(text.contains("job: free on every reachable node"), "{text}");
    servers.node(1).kill();
    servers.node(2).kill();
    let json = stdout(&run(redlease().args(["status", "-k", "job", "-N", &urls, "--json"])));
    assert!(json.contains("\"reachable\":1,") && json.contains("\"state\":\"unknown\",\"held\":null"), "{json}");
}

/// Run redlease with stdout the write end of a pipe whose read end is already closed.
#[allow(unsafe_code)]
fn into_closed_pipe(args: &[&str]) -> Output {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills `fds` with two new descriptors, which we then own.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors are ours and owned once each.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    redlease().args(args).stdin(Stdio::null()).stdout(write).output().expect("run redlease")
}

fn assert_quiet_end(what: &str, out: &Output) {
    assert_ne!(out.status.code(), Some(101), "{what}: panicked: {}", stderr(out));
    assert_eq!(out.status.code(), Some(141), "{what}: {}", stderr(out));
    assert_eq!(stderr(out), "", "{what} said something on stderr");
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    servers.node(0).conn().unwrap().set("orphan", "x").unwrap();
    for args in [
        &["completions", "fish"][..],
        &["completions", "bash"],
        &["scan", "-N", &urls],
        &["scan", "-N", &urls, "--json"],
        &["scan", "-N", DOWN],
        &["status", "-k", "job", "-N", &urls],
        &["status", "-k", "job", "-N", DOWN, "--json"],
    ] {
        assert_quiet_end(&format!("{args:?}"), &into_closed_pipe(args));
    }
    // `servers` stops its nodes first.
    let started = Instant::now();
    assert_quiet_end("servers", &into_closed_pipe(&["servers", "--nodes", "1"]));
    assert!(started.elapsed() < Duration::from_secs(20), "servers ran on: {:?}", started.elapsed());
    // Help goes to stdout too.
    let out = into_closed_pipe(&["run", "--help"]);
    assert_ne!(out.status.code(), Some(101), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn a_reader_that_stops_after_the_first_bytes_is_no_error() {
    for args in [&["completions", "fish"][..], &["completions", "zsh"]] {
        let mut child = redlease().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut first = [0u8; 16];
        child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        // 0 if everything fit in the pipe before the reader left, else 141; never a panic.
        assert!(matches!(out.status.code(), Some(0 | 141)), "{args:?}: {:?} {}", out.status, stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

#[test]
fn conflict_exit_code_names_its_range() {
    for bad in ["256", "x", "1000"] {
        let out = run(redlease().args(["run", "-k", "k", "-N", "redis://127.0.0.1:1", "-E", bad, "true"]));
        assert_eq!(out.status.code(), Some(64), "-E {bad}");
        assert!(stderr(&out).contains("a number from 0 to 255"), "-E {bad}: {}", stderr(&out));
    }
}
