//! `redlease run` up to the lock: connect, wait for a usable quorum of nodes (at most
//! `--wait-nodes`), then take the lock (at most `--wait`), giving up at once on a
//! misconfiguration and on a signal.

use std::time::Duration;

use redlease_tokio::{AcquireError, Client, Config, ConfigError, Error, Guard, LockOptions, Misuse};
use tokio::time::Instant;

use crate::duration::{Bound, show};
use crate::permits::{Named, Semaphore, permit_list, wrong_limit};
use crate::ready::{self, Unusable};
use crate::say::{note, step, warn};
use crate::signals::{Early, Signals, signal_name};
use crate::{EXIT_CONFIG, EXIT_OSERR, EXIT_UNAVAILABLE, Usage};

/// How long to wait before connecting again when the client gave up on the nodes.
const RECONNECT: Duration = Duration::from_millis(100);

/// Connect to the nodes and wait until a quorum of them is usable: at most `wait_nodes` (`None`:
/// the connect timeout), at once if a misconfiguration leaves no quorum possible, or until a
/// signal.
pub(crate) async fn connect(
    config: Config,
    wait_nodes: Option<Bound>,
    signals: &mut Signals,
    conflict_exit_code: u8,
) -> Result<Client, Early> {
    let start = Instant::now();
    let deadline = match wait_nodes {
        None => Some(start + config.connect_timeout),
        Some(Bound::For(d)) => Some(start + d),
        Some(Bound::Forever) => None,
    };
    tokio::select! {
        connected = connect_until(config, deadline, conflict_exit_code) => connected,
        sig = signals.recv() => {
            note(&format!("got {} while connecting: giving up", signal_name(sig)));
            Err(Early::Exit(128 + sig as u8))
        }
    }
}

/// [`connect`] without the signals.
async fn connect_until(config: Config, deadline: Option<Instant>, conflict_exit_code: u8) -> Result<Client, Early> {
    let give_up = |unusable: Unusable| {
        warn(&format!("cannot lock: {}", unusable.message));
        Early::Exit(unusable.code)
    };
    loop {
        match Client::with_config(config.clone()).await {
            Ok(client) => {
                return match ready::quorum(&client, deadline).await {
                    Ok(health) => {
                        ready::connected(&health);
                        Ok(client)
                    }
                    Err(unusable) => Err(give_up(unusable)),
                };
            }
            Err(Error::Config(e @ ConfigError::KeyPrefixReserved { .. })) => {
                return Err(Usage(format!("--key-prefix: {e}")).into());
            }
            Err(Error::Config(e)) => return Err(Usage(format!("--nodes: {e}")).into()),
            // A client that gives up on the nodes itself: connect again while the nodes may
            // still come within `deadline`.
            Err(Error::Unhealthy(health)) => {
                let unusable = ready::unusable(&health);
                if unusable.code == EXIT_CONFIG || deadline.is_some_and(|d| Instant::now() + RECONNECT >= d) {
                    return Err(give_up(unusable));
                }
                tokio::time::sleep(RECONNECT).await;
            }
            Err(e) => {
                warn(&format!("cannot connect to the nodes: {e}"));
                return Err(Early::Exit(exit_code_of(&e, conflict_exit_code)));
            }
        }
    }
}

/// What `run` asks for: a key (or a semaphore's permits), for how long, waiting how long.
pub(crate) struct Ask<'a> {
    pub(crate) key: &'a str,
    /// `Config::key_prefix`, to name a semaphore's limit key in messages.
    pub(crate) key_prefix: &'a str,
    /// `--permits` (and `--take`); `None`: a mutex.
    pub(crate) semaphore: Option<Semaphore>,
    /// `--shared`: a read lock of the key; `false`: its write lock (the mutex).
    pub(crate) shared: bool,
    /// The owner of a re-entrant write lock ([`crate::reentry`]); `None`: a plain lock.
    pub(crate) owner: Option<&'a str>,
    pub(crate) ttl: Duration,
    /// How long to wait for the lock; `None`: one attempt only (`--nonblock`).
    pub(crate) wait: Option<Bound>,
}

/// Take the key's write or read lock (or the permits) with fencing and auto-extension (a
/// reader's token is the writer epoch it reads under): one attempt without `wait`
/// (`--nonblock`), else retried for up to `wait`. Gives up when a signal comes; the client
/// gives up at once when nodes refusing us for a configuration reason leave no quorum.
pub(crate) async fn acquire(
    client: &Client,
    ask: &Ask<'_>,
    conflict_exit_code: u8,
    signals: &mut Signals,
) -> Result<Guard, Early> {
    let Ask { key, key_prefix, semaphore, shared, owner, ttl, wait } = *ask;
    let named = Named { key, semaphore, shared };
    let mut options = LockOptions::new(key, ttl).fencing(true).auto_extend(true).shared(shared);
    if let Some(owner) = owner {
        options = options.reentrant(owner);
    }
    if let Some(Semaphore { limit, take }) = semaphore {
        options = options.semaphore(limit).permits(take);
    }
    let options = match wait {
        Some(Bound::For(wait)) => options.wait(wait),
        Some(Bound::Forever) => options.attempts(u32::MAX),
        None => options.attempts(1),
    };
    let acquired = tokio::select! {
        acquired = client.lock_with(options) => acquired,
        sig = signals.recv() => {
            note(&format!("got {} while waiting for {named}: giving up", signal_name(sig)));
            client.close().await;
            return Err(Early::Exit(128 + sig as u8));
        }
    };
    match acquired {
        Ok(g) => {
            step(&format!(
                "acquired {}; ttl {}, extended about every {}",
                acquired_what(ask, &g),
                show(ttl),
                show(ttl / 3)
            ));
            Ok(g)
        }
        Err(Error::Misuse(e)) => Err(Usage(misuse(&e)).into()),
        Err(e) => {
            let within = match wait {
                Some(Bound::For(w)) => format!("within {}", show(w)),
                Some(Bound::Forever) => "(waiting without a bound)".to_owned(),
                None => "at once (--nonblock)".to_owned(),
            };
            let limits = semaphore.and_then(|s| wrong_limit(&e, key_prefix, key, s.limit));
            let say = if e.is_held() { note } else { warn };
            match limits {
                Some(why) => say(&format!("could not acquire {named}: {why}")),
                None => say(&format!("could not acquire {named} {within}: {e}")),
            }
            Err(Early::Exit(exit_code_of(&e, conflict_exit_code)))
        }
    }
}

/// What `guard` holds and its fencing token, for `--verbose`: `the write lock on "k" with
/// fencing token 7`, `a read lock on "k" under writer epoch 7`, `permit 2 of "k" (limit 3) ...`.
fn acquired_what(ask: &Ask<'_>, guard: &Guard) -> String {
    let key = ask.key;
    let what = match (ask.semaphore, guard.permits()) {
        (Some(Semaphore { limit, .. }), [permit]) => format!("permit {permit} of {key:?} (limit {limit})"),
        (Some(Semaphore { limit, .. }), held) => format!("permits {} of {key:?} (limit {limit})", permit_list(held)),
        (None, _) if ask.shared => format!("a read lock on {key:?}"),
        (None, _) => format!("the write lock on {key:?}"),
    };
    match guard.fence() {
        Some(f) if ask.shared => format!("{what} under writer epoch {f} (the fencing token of its last writer)"),
        Some(f) => format!("{what} with fencing token {f}"),
        None => what,
    }
}

/// A lock request the library refused before sending it, naming the flag to change.
fn misuse(e: &Misuse) -> String {
    let flag = match e {
        Misuse::Permits { .. } => "--permits",
        Misuse::Reentry { .. } => "REDLEASE_OWNER",
        Misuse::EmptyResource | Misuse::ReservedResource { .. } | Misuse::ResourceInFenceSpace { .. } => "--key",
        _ => "--ttl",
    };
    format!("{flag}: {e}")
}

/// The exit code for a failed connect or acquisition: the conflict code when someone else
/// holds the lock, [`EXIT_CONFIG`] when nodes refuse us for a configuration reason,
/// [`EXIT_UNAVAILABLE`] when no quorum of nodes answered.
pub(crate) fn exit_code_of(e: &Error, conflict_exit_code: u8) -> u8 {
    fn acquire(e: &AcquireError, conflict: u8) -> u8 {
        match e {
            AcquireError::Held { .. } => conflict,
            AcquireError::Misconfigured { .. } => EXIT_CONFIG,
            AcquireError::WaitTimeout { last, .. } => acquire(last, conflict),
            // Unreachable, too slow for the TTL, and kinds added later.
            _ => EXIT_UNAVAILABLE,
        }
    }
    match e {
        Error::Acquire(a) => acquire(a, conflict_exit_code),
        Error::Unhealthy(_) if e.is_misconfigured() => EXIT_CONFIG,
        Error::Io(_) => EXIT_OSERR,
        _ => EXIT_UNAVAILABLE,
    }
}
