//! `redlease run`: hold a lock while a command runs.

use std::process::Stdio;
use std::time::Duration;

use redlease_tokio::{Client, Config, Error, LockOptions, LostReason};
use tokio::process::{Child, Command};

use crate::{EXIT_LOST, EXIT_NOT_ACQUIRED, Usage, duration::show, node_urls};

/// Acquire `key`, run `command` under it with auto-extension, release, and return the exit code.
pub(crate) async fn run(
    key: &str,
    nodes: Option<&str>,
    ttl: Duration,
    wait: Duration,
    grace: Duration,
    command: &[String],
) -> Result<u8, Usage> {
    if key.is_empty() {
        return Err(Usage("--key is empty: name the resource to lock".into()));
    }
    if ttl.is_zero() {
        return Err(Usage("--ttl is zero: give the lock a time to live, e.g. --ttl 10s".into()));
    }
    let nodes = node_urls(nodes)?;
    let client = Client::with_config(Config::new(nodes)).await.map_err(|e| match e {
        Error::Config(e) => Usage(format!("--nodes: {e}")),
        e => Usage(e.to_string()),
    })?;
    let guard = match client.lock_with(LockOptions::new(key, ttl).fencing(true).auto_extend(true).wait(wait)).await {
        Ok(g) => g,
        Err(Error::Misuse(e)) => return Err(Usage(format!("--ttl: {e}"))),
        Err(e) => {
            eprintln!("redlease: could not acquire {key:?} within {}: {e}", show(wait));
            return Ok(EXIT_NOT_ACQUIRED);
        }
    };
    let fence = guard.fence().unwrap_or_default();
    let mut child = match Command::new(&command[0])
        .args(&command[1..])
        .env("REDLEASE_KEY", key)
        .env("REDLEASE_FENCE", fence.to_string())
        .stdin(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("redlease: cannot run {:?}: {e}", command[0]);
            let _ = guard.release().await;
            return Ok(if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 });
        }
    };
    let lost = guard.lost();
    let status = tokio::select! {
        status = child.wait() => status,
        _ = lost.wait() => {
            let why = match lost.reason() {
                Some(LostReason::Stopped) | None => "the client stopped".to_owned(),
                Some(r) => format!("{r:?}").to_lowercase(),
            };
            eprintln!("redlease: lock on {key:?} lost ({why}) while the command ran: stopping it");
            stop(&mut child, grace).await;
            let _ = guard.release().await;
            return Ok(EXIT_LOST);
        }
    };
    let report = guard.release().await;
    if let Err(e) = &report {
        eprintln!("redlease: release of {key:?} failed: {e} (the keys expire with their TTL)");
    }
    match status {
        Ok(s) => Ok(exit_code(s)),
        Err(e) => {
            eprintln!("redlease: waiting for the command failed: {e}");
            Ok(1)
        }
    }
}

/// SIGTERM, then SIGKILL after `grace`.
async fn stop(child: &mut Child, grace: Duration) {
    if let Some(pid) = child.id() {
        terminate(pid);
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

#[allow(unsafe_code)]
fn terminate(pid: u32) {
    // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        _ => 1,
    }
}
