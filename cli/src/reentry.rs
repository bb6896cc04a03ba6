//! Re-entry of `redlease run` under a `redlease run` of the same key on the same nodes.
//!
//! Every run of a key's write lock takes it re-entrant, as an owner of its own, and tells its
//! command who that is: `REDLEASE_OWNER` (the owner), `REDLEASE_SCOPE` (which lock: the key with
//! its prefix, and a digest of the nodes' URLs without their passwords) and `REDLEASE_OWNER_PID`
//! (the run's own pid). A run started under it (by the command, at any depth) whose key, prefix
//! and nodes give the same scope takes the lock as that owner: it holds at once while the outer
//! run holds, with the outer run's fencing token, instead of waiting for itself.
//!
//! The nested run watches two things: its own hold, as every run does (a lock taken from the
//! owner refuses its extension: it is lost), and the outer run's process. Once that is gone,
//! the nested run stops its command and releases its hold as if the lock were lost: the outer
//! run's hold is no longer extended, and the nested one must not keep the key alive past it.
//!
//! `--no-reentry` turns both off: the run takes a plain lock and exports nothing, and a run
//! under it waits as it would anywhere. A read lock (`-s`) or a semaphore (`--permits`) has no
//! re-entry: it takes its lock as usual, and its command does not see the variables either.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tokio::process::Command;

use crate::say::{note, step};

/// The owner of the enclosing run.
const OWNER: &str = "REDLEASE_OWNER";
/// Which lock the enclosing run holds as that owner.
const SCOPE: &str = "REDLEASE_SCOPE";
/// The enclosing run's pid.
const PID: &str = "REDLEASE_OWNER_PID";

/// How often a nested run looks whether the enclosing run is still there.
const WATCH: Duration = Duration::from_millis(200);

/// How a run takes its lock: as which owner, and under which enclosing run.
#[derive(Debug)]
pub(crate) struct Reentry {
    /// The owner the run holds the lock as (`None`: a plain lock).
    pub(crate) owner: Option<String>,
    /// The enclosing run's pid, when the run re-enters its lock.
    pub(crate) outer: Option<u32>,
    /// The lock's scope, exported to the command with the owner.
    scope: String,
}

impl Reentry {
    /// Decide for a run of `key` (under `key_prefix`) on `nodes`: re-entrant unless `off`
    /// (`--no-reentry`) or the lock is not a write lock (`mutex` false); as the enclosing run's
    /// owner when the environment names this scope, else as an owner of its own.
    pub(crate) fn plan(
        off: bool,
        mutex: bool,
        key: &str,
        key_prefix: &str,
        nodes: &[redlease_core::NodeConfig],
    ) -> Self {
        let scope = scope(key, key_prefix, nodes);
        if off || !mutex {
            return Reentry { owner: None, outer: None, scope };
        }
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        let enclosing = match (var(OWNER), var(SCOPE), var(PID)) {
            // (A pid that is gone: variables a run left behind, or brought from another machine.)
            (Some(owner), Some(s), Some(pid)) if s == scope => {
                pid.parse().ok().filter(|&p| alive(p)).map(|p| (owner, p))
            }
            _ => None,
        };
        match enclosing {
            Some((owner, pid)) if usable(&owner) => {
                step(&format!("re-entering the lock of the enclosing run (pid {pid})"));
                Reentry { owner: Some(owner), outer: Some(pid), scope }
            }
            Some(_) => {
                note(&format!("{OWNER} is not an owner redlease made: taking the lock as a run of its own"));
                Reentry { owner: Some(fresh()), outer: None, scope }
            }
            None => Reentry { owner: Some(fresh()), outer: None, scope },
        }
    }

    /// Tell the command which lock it runs under, for a nested run to re-enter; or, without
    /// re-entry, clear what an enclosing run told us.
    pub(crate) fn export(&self, command: &mut Command) {
        match &self.owner {
            Some(owner) => {
                command.env(OWNER, owner).env(SCOPE, &self.scope).env(PID, std::process::id().to_string());
            }
            None => {
                command.env_remove(OWNER).env_remove(SCOPE).env_remove(PID);
            }
        }
    }
}

/// Which lock a run takes: the key with its prefix, on nodes named by their URLs without
/// passwords, in any order, as a 64-bit FNV-1a digest in hex.
fn scope(key: &str, key_prefix: &str, nodes: &[redlease_core::NodeConfig]) -> String {
    let mut urls: Vec<String> = nodes.iter().map(ToString::to_string).collect();
    urls.sort();
    urls.dedup();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in urls.join(",").bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{key_prefix}{key}@{h:016x}")
}

/// An owner no other run has, which looks like a token (as `status` shows it): 20 bytes from
/// the OS random source in hex; without one (the acquisition then fails for the same reason),
/// from the process's randomly seeded hasher.
fn fresh() -> String {
    redlease_tokio::new_token().unwrap_or_else(|_| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        format!("{:016x}{:016x}{:08x}", hasher.finish(), hasher.finish().rotate_left(17), std::process::id())
    })
}

/// An owner from the environment that the lock accepts: 1 to 256 bytes, no `:`.
fn usable(owner: &str) -> bool {
    !owner.is_empty() && owner.len() <= 256 && !owner.contains(':')
}

/// Resolve once the process `pid` is gone (`None`: never).
pub(crate) async fn outer_gone(pid: Option<u32>) {
    let Some(pid) = pid else { return std::future::pending().await };
    while alive(pid) {
        tokio::time::sleep(WATCH).await;
    }
}

/// Whether process `pid` still runs: it exists and, on Linux, is not a zombie.
#[allow(unsafe_code)]
fn alive(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        return stat.rsplit_once(')').is_none_or(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']));
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: kill(2) with signal 0 sends nothing: it only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
