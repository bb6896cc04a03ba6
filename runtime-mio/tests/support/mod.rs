//! A tiny local real-Redis helper for this crate's tests: `redis-server` on a free loopback
//! port in a temp dir, killed by pid on drop. (The workspace-wide harness lives in
//! `redlease-tests`; this keeps the adapter's own tests self-contained.)

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct Redis {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    password: Option<String>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Redis {
    pub fn start() -> Redis {
        Redis::start_with(None)
    }

    pub fn start_with(password: Option<&str>) -> Redis {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "redlease-mio-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = Redis { port: free_port(), child: None, dir, password: password.map(str::to_owned) };
        r.spawn();
        r
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--dir"])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(p) = &self.password {
            cmd.args(["--requirepass", p]);
        }
        self.child = Some(cmd.spawn().expect("redis-server must be installed"));
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(start.elapsed() < Duration::from_secs(10), "redis-server did not start on {}", self.port);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kill the server (by pid) and wait for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same port (empty: no persistence).
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Run one command on a fresh connection; returns the reply's first line.
    pub fn cmd(&self, args: &[&str]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = Vec::new();
        let mut push = |args: &[&str]| {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
            }
        };
        if let Some(p) = &self.password {
            push(&["AUTH", p]);
        }
        push(args);
        s.write_all(&out).unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        if self.password.is_some() {
            r.read_line(&mut line).unwrap();
            line.clear();
        }
        r.read_line(&mut line).unwrap();
        if line.starts_with('$') && !line.starts_with("$-1") {
            line.clear();
            r.read_line(&mut line).unwrap();
        }
        line.trim_end().to_owned()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn servers(n: usize) -> Vec<Redis> {
    (0..n).map(|_| Redis::start()).collect()
}

pub fn urls(nodes: &[Redis]) -> Vec<String> {
    nodes.iter().map(Redis::url).collect()
}

/// Poll `f` until it holds, for at most `limit` (a liveness bound, not a timing assertion).
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

/// Drive `client`'s loop until its health view shows every node ready, for at most 10 s (a
/// liveness bound). `connect` returns once a quorum is ready; a test that looks at every node
/// waits for this first. (The workspace harness has the same wait as
/// `redlease_tests::all_ready`; this crate's tests stay self-contained.)
pub fn all_ready(client: &redlease_mio::Client) {
    let ready = eventually(Duration::from_secs(10), || {
        client.run_for(Duration::from_millis(10)).unwrap();
        client.health().all_ready()
    });
    assert!(ready, "not every node ready within 10 s:\n{}", client.health());
}
