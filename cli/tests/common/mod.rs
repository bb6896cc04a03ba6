//! Helpers shared by the CLI test files.

#![allow(dead_code, unreachable_pub)]

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use redlease_servers::Servers;

/// The redlease binary, with no REDLEASE_NODES from the environment, in a process group of its
/// own: a signal the test sends reaches it alone, and it never takes a Ctrl-C for the
/// terminal's (which it would not pass on) when the tests run in a terminal.
pub fn redlease() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_redlease"));
    c.env_remove("REDLEASE_NODES").process_group(0);
    c
}

pub fn nodes(servers: &Servers) -> String {
    servers.urls().join(",")
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().expect("run redlease")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "condition not met within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process runs: a zombie (dead, not reaped yet) does not count.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Send `sig` to a process this test started.
#[allow(unsafe_code)]
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a process this test started and has not reaped (or, for the
    // grandchild pid read from a file, checked alive just before).
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// `redlease run -k KEY -N URLS FLAGS`, whose command writes `dir/name` once it runs (under
/// the lock) and ends when `dir/stop` exists.
pub fn holder(urls: &str, key: &str, flags: &[&str], dir: &Path, name: &str) -> Child {
    let script = format!("touch {d}/{name}; while [ ! -e {d}/stop ]; do sleep 0.05; done", d = dir.display());
    redlease()
        .args(["run", "-k", key, "-N", urls])
        .args(flags)
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `redlease ARGS` started with its output piped (and no input), for a test that reads it as
/// it comes.
pub fn spawn_piped(args: &[&str]) -> Child {
    redlease().args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// The first of `n` consecutive ports free on 127.0.0.1 right now, for a `-p` flag: from
/// 10000–30000, below Linux's ephemeral range (32768 and up), so that no port the OS hands out
/// for `port 0` (the other tests' servers, outgoing connections) takes one meanwhile.
pub fn free_ports(n: u16) -> u16 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let seed = std::process::id() as u16 ^ now.subsec_nanos() as u16;
    for i in 0..1000u16 {
        let base = 10_000 + (seed.wrapping_add(i.wrapping_mul(97)) % 10_000) * 2;
        if (base..base + n).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return base;
        }
    }
    panic!("no {n} consecutive free ports on 127.0.0.1");
}
