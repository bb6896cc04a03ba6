//! The operating-system side of a node: finding and starting `redis-server`, signalling the
//! process, watching its state, and picking free ports.

use std::ffi::OsString;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The one line printed when `redis-server` cannot be found.
const NOT_FOUND: &str = "redis-server not found: install it with 'apt-get install redis-server' (Debian/Ubuntu)";

/// One clear line if `redis-server` cannot be run.
pub(crate) fn installed() -> Result<(), String> {
    match Command::new("redis-server").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(NOT_FOUND.to_owned()),
        Err(e) => Err(format!("redis-server cannot be run ({e}): install it with 'apt-get install redis-server'")),
    }
}

/// The version of the `redis-server` on `PATH` (`redis-server --version`: `... v=7.0.15 ...`) as
/// (major, minor), asked once; `None` if it cannot be run or read.
pub(crate) fn server_version() -> Option<(u32, u32)> {
    static VERSION: std::sync::OnceLock<Option<(u32, u32)>> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let out = Command::new("redis-server").arg("--version").stdin(Stdio::null()).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
        let mut parts = version.split('.').map(str::parse::<u32>);
        Some((parts.next()?.ok()?, parts.next()?.ok()?))
    })
}

/// Start `redis-server CONF`, through `prefix` if there is one (`PREFIX... redis-server CONF`),
/// with `env` added to its environment and its standard streams closed.
pub(crate) fn spawn(prefix: &[OsString], env: &[(OsString, OsString)], conf: &Path) -> Result<Child, String> {
    let mut command = match prefix.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg("redis-server");
            c
        }
        None => Command::new("redis-server"),
    };
    command
        .arg(conf)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| match (e.kind(), prefix.first()) {
            (io::ErrorKind::NotFound, None) => NOT_FOUND.to_owned(),
            (_, Some(program)) => format!("cannot run {}: {e}", program.to_string_lossy()),
            _ => e.to_string(),
        })
}

/// Start `redis-server CONF --sentinel` with its standard streams closed.
pub(crate) fn spawn_sentinel(conf: &Path) -> Result<Child, String> {
    Command::new("redis-server")
        .arg(conf)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| if e.kind() == io::ErrorKind::NotFound { NOT_FOUND.to_owned() } else { e.to_string() })
}

/// A port the OS considers free right now on 127.0.0.1.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

/// A port the OS considers free right now on 127.0.0.1 whose port + 10000 (a Redis Cluster
/// node's cluster bus) is free too.
pub(crate) fn free_cluster_port() -> Result<u16, String> {
    for _ in 0..1000 {
        let port = free_port();
        if port <= u16::MAX - 10_000 && TcpListener::bind((Ipv4Addr::LOCALHOST, port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err("no free port P on 127.0.0.1 with P + 10000 free too (the cluster bus) in 1000 tries".to_owned())
}

/// Send `sig` to a process this harness started.
#[allow(unsafe_code)]
pub(crate) fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: kill(2) has no memory-safety preconditions; `pid` is a child we spawned and have
    // not reaped yet (the caller holds its `Child`), so it cannot name another process.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Wait (up to 2 s) until `/proc/PID/stat` shows a state accepted by `ok`. Without `/proc`
/// (not Linux), return at once: signals to a child are delivered promptly anyway.
pub(crate) fn wait_for_state(pid: u32, ok: impl Fn(char) -> bool) {
    let path = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let Ok(stat) = std::fs::read_to_string(&path) else { return };
        // Format: "pid (comm) S ..." — comm may contain spaces, so look after the last ')'.
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        match state {
            Some(s) if ok(s) => return,
            Some(_) => std::thread::sleep(Duration::from_millis(1)),
            None => return,
        }
    }
}
