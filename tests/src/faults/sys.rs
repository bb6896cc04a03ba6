//! The few system calls the suite needs, and running commands with a clear error.

use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Send `sig` to process `pid` (one the suite started, or a server left in one of its own
/// namespaces by an earlier run).
#[allow(unsafe_code)]
pub fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: kill(2) has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Whether this process runs as root.
#[allow(unsafe_code)]
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() == 0 }
}

/// The state letter of `/proc/PID/stat` (`R`, `S`, `T`, ...), if the process exists.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Wait up to 2 s until `/proc/PID/stat` shows a state accepted by `ok`.
pub fn wait_for_state(pid: u32, ok: impl Fn(char) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match proc_state(pid) {
            Some(s) if ok(s) => return true,
            Some(_) => std::thread::sleep(Duration::from_millis(1)),
            None => return false,
        }
    }
    false
}

/// Run a command; its stderr (or how it failed to start) becomes the error.
pub fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program}: {e} (is it installed? see scripts/ensure-faults.sh)"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{program} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Whether `program` can be run (found on `PATH` or at its path).
pub fn has(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Turn SIGINT and SIGTERM into a flag ([`interrupted`]), so the suite can stop between steps
/// and clean up (namespaces, servers, workers) instead of dying with them in place.
#[allow(unsafe_code)]
pub fn catch_interrupts() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Whether SIGINT or SIGTERM arrived since [`catch_interrupts`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
