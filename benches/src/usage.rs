//! CPU time: the client's (this process, every thread, `getrusage`) and the servers' (the
//! `redis-server` processes of the current measurement, every thread, from the first field
//! of `/proc/PID/task/TID/schedstat`: time on CPU in nanoseconds). Take a [`Usage`] right
//! before a measured window and [`Usage::since`] right after it.

use std::sync::Mutex;
use std::time::Duration;

/// The pids of the servers of the current measurement (set by the runner).
static SERVERS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Register the server processes of the measurement about to run (empty: none).
pub fn set_servers(pids: Vec<u32>) {
    *SERVERS.lock().unwrap_or_else(|p| p.into_inner()) = pids;
}

/// CPU time, so far or over a window (by default zero): this process's user plus system
/// time, and the servers' if every one of them could be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // Said above.
pub struct Usage {
    pub client: Duration,
    pub server: Option<Duration>,
}

impl Default for Usage {
    fn default() -> Self {
        Usage { client: Duration::ZERO, server: Some(Duration::ZERO) }
    }
}

impl Usage {
    /// The use so far (the servers' first: reading /proc is the harness's own work).
    pub fn now() -> Usage {
        Usage { server: server_time(), client: client_time() }
    }

    /// The use since `start`, a reading taken with [`Usage::now`].
    pub fn since(start: Usage) -> Usage {
        let client = client_time().saturating_sub(start.client);
        Usage { client, server: server_time().zip(start.server).map(|(now, then)| now.saturating_sub(then)) }
    }

    /// Per cycle, over `cycles` cycles: `(client, server)`.
    pub fn per(self, cycles: u64) -> (Option<Duration>, Option<Duration>) {
        let n = u32::try_from(cycles).unwrap_or(u32::MAX);
        if n == 0 { (None, None) } else { (Some(self.client / n), self.server.map(|s| s / n)) }
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;

    /// Both sums of two windows (a server figure only if both have one).
    fn add(self, other: Usage) -> Usage {
        Usage { client: self.client + other.client, server: self.server.zip(other.server).map(|(a, b)| a + b) }
    }
}

#[allow(unsafe_code)] // getrusage(2) through libc; see the SAFETY note.
fn client_time() -> Duration {
    // SAFETY: `rusage` is plain old data, so all-zero bytes are a valid value, and getrusage
    // only writes into the struct it is given; with RUSAGE_SELF and a valid pointer it cannot
    // fail (the zeroed struct would then read as no time).
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec.max(0) as u64, t.tv_usec.max(0) as u32 * 1_000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Each server's CPU time so far, in the order they were registered (`None` if one could not
/// be read).
pub fn each() -> Option<Vec<Duration>> {
    SERVERS.lock().unwrap_or_else(|p| p.into_inner()).clone().into_iter().map(cpu).collect()
}

fn server_time() -> Option<Duration> {
    each().filter(|each| !each.is_empty()).map(|each| each.into_iter().sum())
}

fn cpu(pid: u32) -> Option<Duration> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}
