//! A tiny local real-Redis helper for this crate's tests: `redis-server` on a free loopback
//! port in a temp dir, killed by pid on drop. (The workspace-wide harness lives in
//! `redlease-tests`; this keeps the adapter's own tests self-contained.)

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
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
        // A port found free may be taken by another test's server before ours binds it: ours
        // then exits, and the port answers for the other one. Start again elsewhere until the
        // server on the port is ours.
        for _ in 0..20 {
            r.spawn();
            if r.is_ours() {
                return r;
            }
            r.stop();
            r.port = free_port();
        }
        panic!("redis-server did not start on a port of its own");
    }

    /// Whether the server answering on the port is the process this started.
    fn is_ours(&mut self) -> bool {
        let Some(child) = self.child.as_mut() else { return false };
        let pid = child.id();
        let info = self.info_server();
        info.lines().any(|l| l.trim() == format!("process_id:{pid}"))
    }

    /// `INFO server`, whole (empty if it could not be read).
    fn info_server(&self) -> String {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else { return String::new() };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let mut out = Vec::new();
        if let Some(p) = &self.password {
            out.extend_from_slice(format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{p}\r\n", p.len()).as_bytes());
        }
        out.extend_from_slice(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n");
        if s.write_all(&out).is_err() {
            return String::new();
        }
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        while !text.contains("process_id:") || !text.ends_with("\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        text
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
