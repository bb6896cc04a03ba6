//! Client CPU time and thread sleeps from `getrusage(RUSAGE_SELF)`.
//!
//! The `redis-server` processes are separate processes, so this is the client's use only
//! (every thread of the benchmark process: the subject's runtime, driver and lockers). Take it
//! right before and right after the measured window: the harness's own set-up stays out.

use std::time::Duration;

/// User plus system CPU time used so far by every thread of this process.
pub fn process_cpu_time() -> Duration {
    ClientUse::now().cpu
}

fn tv(t: libc::timeval) -> Duration {
    Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1_000)
}

/// What the client process has used: CPU time, and how often one of its threads went to
/// sleep (voluntary context switches: a thread blocked in `epoll_wait`, a futex, a read).
/// Each sleep is a wake-up some other thread or the kernel must pay for later, so sleeps per
/// cycle count the hand-offs between threads a client makes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientUse {
    /// User plus system CPU time.
    pub cpu: Duration,
    /// Voluntary context switches.
    pub sleeps: u64,
}

impl ClientUse {
    /// The process's use so far.
    pub fn now() -> ClientUse {
        let usage = rusage();
        ClientUse { cpu: tv(usage.ru_utime) + tv(usage.ru_stime), sleeps: usage.ru_nvcsw.max(0) as u64 }
    }

    /// The use since `earlier`, a reading taken with [`ClientUse::now`].
    pub fn since(earlier: ClientUse) -> ClientUse {
        let now = ClientUse::now();
        ClientUse { cpu: now.cpu.saturating_sub(earlier.cpu), sleeps: now.sleeps.saturating_sub(earlier.sleeps) }
    }
}

impl std::ops::Add for ClientUse {
    type Output = ClientUse;

    /// Both sums of two windows.
    fn add(self, other: ClientUse) -> ClientUse {
        ClientUse { cpu: self.cpu + other.cpu, sleeps: self.sleeps + other.sleeps }
    }
}

#[allow(unsafe_code)]
fn rusage() -> libc::rusage {
    // SAFETY: `rusage` is plain old data, so all-zero bytes are a valid value, and
    // getrusage(2) only writes into the struct we pass; RUSAGE_SELF cannot fail with a
    // valid pointer (on error the zeroed struct is returned, i.e. no time).
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let before = process_cpu_time();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(process_cpu_time() > before);
    }

    #[test]
    fn a_sleep_is_counted() {
        let before = ClientUse::now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(ClientUse::since(before).sleeps >= 1);
    }
}
