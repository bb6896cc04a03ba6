//! `redlease demo`: locks at work on 5 local redis-server nodes, with node failures.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlease_core::AcquireError;
use redlease_servers::Servers;
use redlease_tokio::{Client, Config, Error, LockOptions};

use crate::Usage;
use crate::duration::show;
use crate::out::outln;

const RESOURCE: &str = "demo:printer";
const TTL: Duration = Duration::from_secs(5);

/// Shared tallies of the workers, checked at the end.
#[derive(Default)]
struct Tally {
    acquired: AtomicUsize,
    holders: AtomicUsize,
    overlaps: AtomicUsize,
    last_fence: AtomicU64,
    fence_regressions: AtomicUsize,
    failures: AtomicUsize,
}

/// Run the demo; returns the exit code.
pub(crate) async fn run(workers: usize, tls: bool) -> Result<u8, Usage> {
    if workers == 0 {
        return Err(Usage("--workers 0: the demo needs at least one worker".into()));
    }
    let t0 = Instant::now();
    let Some(servers) = start_servers(t0, tls).await? else {
        return Ok(1);
    };
    let client = connect(&servers).await?;
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> =
        (0..workers).map(|w| tokio::spawn(worker(w, client.clone(), tally.clone(), stop.clone(), t0))).collect();

    say(t0, &format!("act 1: {workers} workers contend for {RESOURCE:?} (ttl {}), all 5 nodes up", show(TTL)));
    tokio::time::sleep(Duration::from_secs(4)).await;

    say(t0, "act 2: kill -9 node 0 and SIGSTOP node 1 — 3 of 5 remain, a quorum: locking goes on");
    servers.node(0).kill();
    servers.node(1).pause();
    tokio::time::sleep(Duration::from_secs(5)).await;

    say(t0, "act 3: SIGSTOP node 2 as well — only 2 of 5 remain, no quorum: locks must fail, typed");
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        let _ = t.await;
    }
    servers.node(2).pause();
    if !fails_without_quorum(t0, &client).await {
        return Ok(1);
    }
    if !recovers(t0, &servers, &client).await? {
        return Ok(1);
    }

    say(t0, "cleaning up: stopping the 5 nodes");
    let leaks = servers.lock_keys().into_iter().filter(|(_, _, pttl)| *pttl < 0).count();
    drop(client);
    drop(servers);
    Ok(summary(t0, &tally, workers, leaks))
}

/// Print `msg` with the seconds since `t0`.
fn say(t0: Instant, msg: &str) {
    outln!("[{:>5.1}s] {msg}", t0.elapsed().as_secs_f64());
}

/// Start the 5 local nodes and list them; `None` (the reason printed) if they do not start.
async fn start_servers(t0: Instant, tls: bool) -> Result<Option<Servers>, Usage> {
    say(
        t0,
        &format!(
            "starting 5 redis-server nodes on free loopback ports (temporary dirs, no persistence{})...",
            if tls { ", TLS with a generated CA" } else { "" }
        ),
    );
    let listen = if tls { redlease_servers::Listen::Tls } else { redlease_servers::Listen::Tcp };
    let servers = tokio::task::spawn_blocking(move || Servers::builder().nodes(5).listen(listen).try_start())
        .await
        .map_err(|e| Usage(e.to_string()))?;
    let servers = match servers {
        Ok(c) => c,
        Err(e) => {
            crate::warn(&e);
            return Ok(None);
        }
    };
    for node in servers.nodes() {
        say(t0, &format!("  node {} at {}", node.index(), node.url()));
    }
    Ok(Some(servers))
}

/// A client of the nodes with a short per-node timeout (trusting its CA with TLS).
async fn connect(servers: &Servers) -> Result<Client, Usage> {
    let mut config = Config::from_urls(servers.urls()).map_err(|e| Usage(e.to_string()))?;
    config.node_timeout = Duration::from_millis(50);
    #[cfg(feature = "tls")]
    if let Some(files) = servers.tls() {
        config = config.tls(redlease_core::TlsSettings::new().ca_file(&files.ca));
    }
    Client::with_config(config).await.map_err(|e| Usage(e.to_string()))
}

/// Act 3: with 3 of 5 nodes down, one attempt must fail with a typed error; whether it did.
async fn fails_without_quorum(t0: Instant, client: &Client) -> bool {
    let started = Instant::now();
    match client.try_lock(RESOURCE, TTL).await {
        Ok(g) => {
            say(t0, "  UNEXPECTED: acquired without a quorum");
            let _ = g.release().await;
            false
        }
        Err(e) => {
            say(t0, &format!("  try_lock failed after {}: {e}", show(started.elapsed())));
            true
        }
    }
}

/// Act 4: bring nodes back so that a quorum needs the restarted node 0, then lock and release
/// again (for up to 20 s); whether the lock was taken.
async fn recovers(t0: Instant, servers: &Servers, client: &Client) -> Result<bool, Usage> {
    say(t0, "act 4: resume nodes 1 and 2, restart node 0 (empty), then pause nodes 3 and 4:");
    say(t0, "       a quorum now needs the restarted node 0, so the client must have reconnected by itself");
    servers.node(1).resume();
    servers.node(2).resume();
    tokio::task::block_in_place(|| servers.node(0).restart(false));
    servers.node(3).pause();
    servers.node(4).pause();
    let started = Instant::now();
    let guard = loop {
        match client.lock_with(LockOptions::new(RESOURCE, TTL).fencing(true).wait(Duration::from_secs(2))).await {
            Ok(g) => break g,
            Err(e) if started.elapsed() < Duration::from_secs(20) => {
                say(t0, &format!("  not yet: {e}"));
            }
            Err(e) => {
                say(t0, &format!("  recovery failed: {e}"));
                return Ok(false);
            }
        }
    };
    say(
        t0,
        &format!(
            "  locked again after {}: fence {} valid for {}",
            show(started.elapsed()),
            guard.fence().unwrap_or(0),
            show(guard.remaining())
        ),
    );
    let report = guard.release().await.map_err(|e| Usage(e.to_string()))?;
    say(t0, &format!("  released: {:?} ({} nodes deleted our key)", report.outcome, report.deleted));
    servers.node(3).resume();
    servers.node(4).resume();
    Ok(true)
}

/// Print the summary; the exit code: 0 if the lock was taken, never by two workers at once,
/// with fencing tokens in order and no key left without a TTL.
fn summary(t0: Instant, tally: &Tally, workers: usize, leaks: usize) -> u8 {
    let acquired = tally.acquired.load(Ordering::SeqCst);
    let overlaps = tally.overlaps.load(Ordering::SeqCst);
    let regressions = tally.fence_regressions.load(Ordering::SeqCst);
    outln!();
    outln!("summary ({:.1}s):", t0.elapsed().as_secs_f64());
    outln!(
        "  {acquired} acquisitions by {workers} workers, {} failed attempts (contention)",
        tally.failures.load(Ordering::SeqCst)
    );
    outln!("  overlapping holders: {overlaps}; fencing tokens out of order: {regressions}");
    outln!("  with 2 of 5 nodes down the lock kept working; with 3 down it failed with a typed error");
    outln!("  the killed node was restarted and the client reconnected on its own (it was needed for the quorum)");
    outln!("  lock keys left without a TTL: {leaks}");
    if overlaps == 0 && regressions == 0 && leaks == 0 && acquired > 0 { 0 } else { 1 }
}

async fn worker(id: usize, client: Client, tally: Arc<Tally>, stop: Arc<AtomicBool>, t0: Instant) {
    while !stop.load(Ordering::SeqCst) {
        let asked = Instant::now();
        match client.lock_with(LockOptions::new(RESOURCE, TTL).fencing(true).wait(Duration::from_secs(3))).await {
            Ok(guard) => {
                if tally.holders.fetch_add(1, Ordering::SeqCst) != 0 {
                    tally.overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let fence = guard.fence().unwrap_or(0);
                if tally.last_fence.fetch_max(fence, Ordering::SeqCst) >= fence {
                    tally.fence_regressions.fetch_add(1, Ordering::SeqCst);
                }
                tally.acquired.fetch_add(1, Ordering::SeqCst);
                say(
                    t0,
                    &format!(
                        "  worker {id} holds {RESOURCE} · fence {fence} · validity left {} · waited {}",
                        show(guard.remaining()),
                        show(asked.elapsed())
                    ),
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
                tally.holders.fetch_sub(1, Ordering::SeqCst);
                if let Err(e) = guard.release().await {
                    say(t0, &format!("  worker {id}: release failed: {e}"));
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            Err(Error::Acquire(AcquireError::WaitTimeout { .. } | AcquireError::Held { .. })) => {
                tally.failures.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => {
                tally.failures.fetch_add(1, Ordering::SeqCst);
                say(t0, &format!("  worker {id}: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
