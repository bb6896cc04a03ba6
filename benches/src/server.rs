//! Server CPU time: the sum of the `redis-server` processes' on-CPU time, from
//! `/proc/<pid>/task/<tid>/schedstat` (first field, nanoseconds), over every thread.
//!
//! The runner registers the pids of the fresh cluster before each measurement and clears
//! them after; a subject takes [`cpu_time`] right before and right after its window. Where
//! `/proc` cannot be read (not Linux, a process gone) the figure is `None`.

use std::sync::Mutex;
use std::time::Duration;

static PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Register the server processes of the current measurement (empty: none).
pub fn set_pids(pids: Vec<u32>) {
    *PIDS.lock().unwrap_or_else(|p| p.into_inner()) = pids;
}

/// The servers' CPU time so far, summed over their threads; `None` without registered
/// pids or when one cannot be read.
pub fn cpu_time() -> Option<Duration> {
    let pids = PIDS.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if pids.is_empty() {
        return None;
    }
    let mut total = 0u64;
    for pid in pids {
        total += process_ns(pid)?;
    }
    Some(Duration::from_nanos(total))
}

fn process_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// A server CPU reading taken when a window opens; [`Mark::since`] gives the time used since.
#[derive(Clone, Copy, Debug)]
pub struct Mark(Option<Duration>);

impl Mark {
    /// Read the servers' CPU time now.
    pub fn now() -> Mark {
        Mark(cpu_time())
    }

    /// The servers' CPU time used since this mark.
    pub fn since(self) -> Option<Duration> {
        Some(cpu_time()?.saturating_sub(self.0?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another process's CPU time, read as the servers' is, grows while it runs. (Not this
    /// test process: its sum drops whenever another test's thread exits between two reads.)
    #[test]
    fn a_busy_process_reads_and_grows() {
        let mut child =
            std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().expect("spawn a busy sh");
        let pid = child.id();
        let first = process_ns(pid).expect("schedstat of the child");
        let start = std::time::Instant::now();
        let mut grew = false;
        while !grew && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
            grew = process_ns(pid).is_some_and(|now| now > first);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(grew, "the busy child's CPU time did not grow in 5 s");
    }
}
