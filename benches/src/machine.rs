//! The machine, the versions and the date, for the report's header.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// Crates whose versions the report names (read from the workspace's `Cargo.lock`).
const CRATES: &[&str] = &["tokio", "smol", "async-std", "async-io", "mio", "rslock", "redlock", "redis"];

/// What the benchmark ran on.
#[derive(Clone, Debug)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Logical CPUs available to the process.
    pub cores: usize,
    /// Total memory.
    pub memory: String,
    /// Kernel release.
    pub kernel: String,
    /// `rustc --version`.
    pub rustc: String,
    /// `redis-server --version`.
    pub redis: String,
    /// redlease's own version.
    pub redlease: String,
    /// `(crate, versions)` from `Cargo.lock`.
    pub crates: Vec<(String, String)>,
}

impl Machine {
    /// Look around (files under `/proc`, two `--version` commands, `Cargo.lock`).
    pub fn describe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".to_owned());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or_else(|| "unknown".to_owned(), |kb| format!("{:.0} GiB", kb as f64 / 1024.0 / 1024.0));
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| std::env::consts::OS.to_owned(), |s| format!("Linux {}", s.trim()));
        let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock")).unwrap_or_default();
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory,
            kernel,
            rustc: version_of("rustc", &["--version"]),
            redis: version_of("redis-server", &["--version"]),
            redlease: env!("CARGO_PKG_VERSION").to_owned(),
            crates: CRATES.iter().map(|&c| (c.to_owned(), lock_versions(&lock, c).join(", "))).collect(),
        }
    }
}

fn version_of(program: &str, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => format!("{program}: unknown"),
    }
}

/// Every version of `name` in a `Cargo.lock`.
pub fn lock_versions(lock: &str, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            if let Some(v) = lines.next().and_then(|l| l.trim().strip_prefix("version = \"")) {
                out.push(v.trim_end_matches('"').to_owned());
            }
        }
    }
    out
}

/// The current UTC time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    utc(SystemTime::now())
}

/// `t` as `YYYY-MM-DD HH:MM UTC`.
pub fn utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// Days since 1970-01-01 to a (year, month, day) of the proleptic Gregorian calendar
/// (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01 00:00 UTC");
        assert_eq!(utc(UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661)), "2000-02-29 01:01 UTC");
        assert_eq!(utc(UNIX_EPOCH + Duration::from_secs(1_767_225_599)), "2025-12-31 23:59 UTC");
    }

    #[test]
    fn versions_from_a_lock_file() {
        let lock = "[[package]]\nname = \"redis\"\nversion = \"0.23.5\"\n\n[[package]]\nname = \"redis\"\nversion = \"1.8.1\"\n";
        assert_eq!(lock_versions(lock, "redis"), vec!["0.23.5", "1.8.1"]);
        assert!(lock_versions(lock, "tokio").is_empty());
    }
}
