//! Client CPU time from `getrusage(RUSAGE_SELF)`.
//!
//! The `redis-server` processes are separate processes, so this is the client's CPU time only
//! (every thread of the benchmark process: the subject's runtime, driver and lockers). Take it
//! right before and right after the measured window: the harness's own set-up stays out.

use std::time::Duration;

/// User plus system CPU time used so far by every thread of this process.
pub fn process_cpu_time() -> Duration {
    let usage = rusage();
    let tv = |t: libc::timeval| Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1_000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
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
}
