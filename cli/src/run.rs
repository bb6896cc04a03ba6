//! `redlease run`: hold a lock while a command runs, and never let the command outlive it.
//!
//! - SIGTERM, SIGINT and SIGHUP sent to redlease are passed on to the command; the lock is
//!   extended until the command exits (SIGKILL once `--grace` has passed), then released, and
//!   redlease exits with the command's status.
//! - A lost lock: the command gets SIGTERM, then SIGKILL after `--grace`; exit 70.
//! - redlease itself dying, even by SIGKILL: on Linux the command gets SIGKILL from the kernel
//!   (its parent-death signal, set between fork and exec).

use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use redlease_tokio::{Config, LostReason, LostSignal, ReleaseOutcome, ReleaseReport};
use tokio::process::{Child, Command};

use crate::acquire::{self, Ask};
use crate::duration::{Bound, show};
use crate::permits::{Semaphore, permit_list};
use crate::reentry::{self, Reentry};
use crate::say::{note, step, warn};
use crate::signals::{Early, Signals, signal_name};
use crate::{EXIT_LOST, Usage, node_urls};

/// What `redlease run` was asked to do.
#[derive(Debug)]
pub(crate) struct RunArgs {
    pub(crate) key: String,
    pub(crate) nodes: Option<String>,
    /// For rediss:// nodes.
    pub(crate) tls: redlease_core::TlsSettings,
    /// `Config::key_prefix`: the lock key is this followed by `key`.
    pub(crate) key_prefix: String,
    pub(crate) ttl: Duration,
    /// How long to wait for the lock; `None`: one attempt only (`--nonblock`).
    pub(crate) wait: Option<Bound>,
    /// How long to wait for a quorum of nodes to be usable; `None`: the connect timeout.
    pub(crate) wait_nodes: Option<Bound>,
    pub(crate) conflict_exit_code: u8,
    pub(crate) grace: Duration,
    /// `--permits` (and `--take`): a semaphore's permits instead of the key's mutex.
    pub(crate) semaphore: Option<Semaphore>,
    /// `--shared`: a read lock of the key instead of its write lock (the mutex).
    pub(crate) shared: bool,
    /// Re-entry ([`crate::reentry`]); `false`: `--no-reentry`.
    pub(crate) reentry: bool,
    /// The program and its arguments.
    pub(crate) argv: Vec<String>,
}

/// Acquire the key, run the command under it with auto-extension, release; the exit code.
///
/// Must run on the thread that stays alive until the process exits (`main`'s `block_on`): the
/// kernel sends the parent-death signal when the *thread* that spawned the child ends.
pub(crate) async fn run(args: RunArgs) -> Result<u8, Usage> {
    match lock_and_run(args).await {
        Ok(code) | Err(Early::Exit(code)) => Ok(code),
        Err(Early::Usage(usage)) => Err(usage),
    }
}

/// The steps of [`run`]: connect, acquire, start the command, watch it and the lock, release.
async fn lock_and_run(args: RunArgs) -> Result<u8, Early> {
    let RunArgs {
        key,
        nodes,
        tls,
        key_prefix,
        ttl,
        wait,
        wait_nodes,
        conflict_exit_code,
        grace,
        semaphore,
        shared,
        reentry,
        argv,
    } = args;
    if key.is_empty() {
        return Err(Usage("--key is empty: name the resource to lock".into()).into());
    }
    if ttl.is_zero() {
        return Err(Usage("--ttl is zero: give the lock a time to live, e.g. --ttl 10s".into()).into());
    }
    let nodes = node_urls(nodes.as_deref())?;
    let reentry = Reentry::plan(!reentry, semaphore.is_none() && !shared, &key, &key_prefix, &nodes);
    // Installed before anything else, so that a signal while connecting or waiting for the
    // lock ends redlease cleanly (128 + the signal) instead of killing it with a half-taken lock.
    let mut signals = Signals::install()?;
    let config = Config::new(nodes).tls(tls).key_prefix(key_prefix.clone());
    let client = acquire::connect(config, wait_nodes, &mut signals, conflict_exit_code).await?;
    let owner = reentry.owner.as_deref();
    let ask = Ask { key: &key, key_prefix: &key_prefix, semaphore, shared, owner, ttl, wait };
    let guard = acquire::acquire(&client, &ask, conflict_exit_code, &mut signals).await?;
    // What the lock is, in messages: the key's read or write lock, or the permits held.
    let held = match guard.permits() {
        [] if shared => format!("a read lock on {key:?}"),
        [] => format!("the write lock on {key:?}"),
        [permit] => format!("permit {permit} of {key:?}"),
        held => format!("permits {} of {key:?}", permit_list(held)),
    };
    let mut child = match spawn(&argv, &key, guard.fence().unwrap_or_default(), guard.permits(), &reentry) {
        Ok(child) => child,
        Err(code) => {
            let _ = guard.release().await;
            return Ok(code);
        }
    };
    let Some(status) = supervise(&mut child, &guard.lost(), reentry.outer, &mut signals, &held, grace).await else {
        let _ = guard.release().await;
        return Ok(EXIT_LOST);
    };
    if let Ok(s) = &status {
        step(&format!("the command exited with status {}", status_code(*s)));
    }
    match guard.release().await {
        Ok(r) => step(&format!("release of {held}: {}", released(&r))),
        Err(e) => warn(&format!("release of {held} failed: {e} (the keys expire with their TTL)")),
    }
    match status {
        Ok(s) => Ok(status_code(s)),
        Err(e) => {
            warn(&format!("waiting for the command failed: {e}"));
            Ok(1)
        }
    }
}

/// A release's outcome, for `--verbose`.
fn released(r: &ReleaseReport) -> String {
    let what = match r.outcome {
        ReleaseOutcome::Released => "released",
        ReleaseOutcome::NotHeld => "no longer held (expired or taken)",
        _ => "not confirmed by a quorum (the keys expire with their TTL)",
    };
    let nodes = r.deleted + r.absent + r.failed + r.pending;
    format!("{what} ({} of {nodes} nodes deleted it)", r.deleted)
}

/// Start the command with `REDLEASE_KEY`, `REDLEASE_FENCE`, (a semaphore's) `REDLEASE_PERMIT`
/// and (a re-entrant lock's) the variables a nested run re-enters by set, and `REDLEASE_NODES`
/// only if it holds no password ([`hide_secret_nodes`]), to die with redlease. If it cannot be started, the exit code: 127 not
/// found, 126 not executable.
fn spawn(argv: &[String], key: &str, fence: u64, permits: &[u16], reentry: &Reentry) -> Result<Child, u8> {
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env("REDLEASE_KEY", key)
        .env("REDLEASE_FENCE", fence.to_string())
        .stdin(Stdio::inherit())
        .kill_on_drop(true);
    hide_secret_nodes(&mut command);
    let permit = if permits.is_empty() {
        // A mutex: no permit, whatever a semaphore's run around redlease set.
        command.env_remove("REDLEASE_PERMIT");
        String::new()
    } else {
        command.env("REDLEASE_PERMIT", permit_list(permits));
        format!(" REDLEASE_PERMIT={}", permit_list(permits))
    };
    reentry.export(&mut command);
    die_with_parent(&mut command);
    step(&format!("running {argv:?} with REDLEASE_FENCE={fence}{permit}"));
    command.spawn().map_err(|e| {
        warn(&format!("cannot run {:?}: {e}", argv[0]));
        if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 }
    })
}

/// Take `REDLEASE_NODES` out of the command's environment if a URL in it holds a password
/// (the command has no business with them; a nested run is then given its nodes by the
/// script), or if it does not parse. Without passwords it stays: a script under `run` or
/// `elect` may run `redlease` on the same nodes (a nested run re-enters the lock).
pub(crate) fn hide_secret_nodes(command: &mut Command) {
    let Ok(nodes) = std::env::var("REDLEASE_NODES") else { return };
    let secret = |n: &redlease_core::NodeConfig| {
        n.password.is_some() || n.sentinel.as_ref().is_some_and(|s| s.password.is_some())
    };
    if crate::node_urls(Some(&nodes)).map_or(true, |nodes| nodes.iter().any(secret)) {
        command.env_remove("REDLEASE_NODES");
    }
}

/// Wait for the command to exit, passing signals on (SIGKILL once `grace` has passed after the
/// first) and watching the lock (`held` names it) and, in a nested run that re-entered its
/// lock, the enclosing run (`outer`). `None` when the lock was lost, or the enclosing run is
/// gone: the command got SIGTERM, then SIGKILL after `grace`, and has exited.
pub(crate) async fn supervise(
    child: &mut Child,
    lost: &LostSignal,
    outer: Option<u32>,
    signals: &mut Signals,
    held: &str,
    grace: Duration,
) -> Option<io::Result<ExitStatus>> {
    // Once a signal was passed on: when the command gets SIGKILL if it is still running
    // (`None` again once it got it).
    let mut stopping = false;
    let mut kill_at: Option<tokio::time::Instant> = None;
    loop {
        let deadline = kill_at;
        let kill_timer = async move {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            status = child.wait() => return Some(status),
            _ = lost.wait() => {
                let why = match lost.reason() {
                    Some(LostReason::Stopped) | None => "the client stopped".to_owned(),
                    Some(r) => format!("{r:?}").to_lowercase(),
                };
                warn(&format!("{held} lost ({why}) while the command ran: stopping it"));
                stop(child, grace).await;
                return None;
            }
            () = reentry::outer_gone(outer) => {
                let pid = outer.unwrap_or_default();
                warn(&format!("the enclosing run (pid {pid}) that holds {held} is gone: stopping the command"));
                stop(child, grace).await;
                return None;
            }
            sig = signals.recv() => {
                pass_on(child, sig);
                if !stopping {
                    stopping = true;
                    note(&format!(
                        "got {}: passed it on to the command; the lock is held until it exits (SIGKILL in {})",
                        signal_name(sig),
                        show(grace)
                    ));
                    kill_at = Some(tokio::time::Instant::now() + grace);
                }
            }
            () = kill_timer => {
                warn(&format!("the command did not exit within --grace {}: SIGKILL", show(grace)));
                let _ = child.start_kill();
                kill_at = None;
            }
        }
    }
}

/// Pass `sig` on to the command, unless it is a Ctrl-C that the terminal sent to the whole
/// foreground process group, the command included: passing it on would deliver it twice.
fn pass_on(child: &Child, sig: i32) {
    if sig == libc::SIGINT && terminal_sent_sigint() {
        return;
    }
    send(child, sig);
}

/// SIGTERM, then SIGKILL after `grace`.
async fn stop(child: &mut Child, grace: Duration) {
    send(child, libc::SIGTERM);
    if tokio::time::timeout(grace, child.wait()).await.is_ok() {
        return;
    }
    let _ = child.kill().await;
}

/// Send `sig` to the command, unless it has been reaped already.
#[allow(unsafe_code)]
fn send(child: &Child, sig: i32) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet (only
        // `child.wait()` reaps it, and it then has no id), so the pid cannot have been reused.
        unsafe {
            libc::kill(pid as libc::pid_t, sig);
        }
    }
}

/// Whether our process group is the foreground group of our controlling terminal: then a
/// SIGINT most likely came from Ctrl-C, which the terminal sends to the command too.
#[allow(unsafe_code)]
fn terminal_sent_sigint() -> bool {
    use std::os::fd::AsRawFd;
    let Ok(tty) = std::fs::File::open("/dev/tty") else {
        return false; // no controlling terminal
    };
    // SAFETY: tcgetpgrp(3) on a descriptor we own and keep open for the call; getpgrp(2)
    // cannot fail.
    unsafe {
        let foreground = libc::tcgetpgrp(tty.as_raw_fd());
        foreground > 0 && foreground == libc::getpgrp()
    }
}

/// Linux: the kernel sends the command SIGKILL if redlease dies (`PR_SET_PDEATHSIG`), so a
/// redlease killed with SIGKILL, whose lock then expires, cannot leave the command running.
/// Other systems have no such setting: there a SIGKILLed redlease leaves the command running.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) fn die_with_parent(command: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec. It calls only prctl(2) and
    // getppid(2), which are async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // redlease died between fork and prctl: the signal will never come.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_command: &mut Command) {}

/// The shell's convention: the exit code, or 128 + the signal that killed the command.
pub(crate) fn status_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        _ => 1,
    }
}
