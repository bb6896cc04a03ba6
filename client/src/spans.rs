//! The spans of the operations a caller waits for, made on the caller's side: each is a child
//! of the caller's current span (an `http_request` span, say), and the router records the
//! outcome, the votes and the duration on it and emits the operation's events inside it.
//!
//! Every span is DEBUG, target `redlease`, and carries the client's name (`client`, see
//! [`client`]). An adapter makes the span, hands it to the
//! [`Router`](crate::adapter::Router) with the command, and keeps it entered (or instruments
//! its future with it) while the caller waits, so that the span lasts as long as the wait.

use redlease_core::{Config, LockOptions};
use tracing::Span;
use tracing::field::Empty;

/// The client's name in its spans, events and metric labels: the config's
/// [`name`](Config::name), which the clients always set ([`seeded`](crate::adapter::seeded)).
pub fn client(config: &Config) -> &str {
    config.name.as_deref().unwrap_or("")
}

/// The span of an acquisition of `options`' resources (`redlease.acquire`) by `client`: for a
/// semaphore, its `limit` and the `permits` asked for (a mutex: limit 0, 1 permit), and the
/// permits `held` (their numbers, once granted); `shared` for a read lock.
pub fn acquire(client: &str, options: &LockOptions) -> Span {
    let resource = options.resources.first().map_or("", String::as_str);
    tracing::debug_span!(
        target: "redlease",
        "redlease.acquire",
        client,
        resource,
        more_resources = options.resources.len().saturating_sub(1),
        fencing = options.fencing,
        limit = options.limit.unwrap_or(0),
        permits = options.permits,
        shared = options.shared,
        held = Empty,
        attempts = Empty,
        outcome = Empty,
        votes = Empty,
        duration_ms = Empty,
    )
}

/// The span of an operation on a held lock: its name (a callsite needs it as a literal), the
/// client and the resource, and the fields the router records.
macro_rules! held_span {
    ($name:literal, $client:expr, $resource:expr) => {
        tracing::debug_span!(
            target: "redlease",
            $name,
            client = $client,
            resource = $resource,
            outcome = Empty,
            votes = Empty,
            duration_ms = Empty,
        )
    };
}

/// The span of an extension of `client`'s lock on `resource` (`redlease.extend`).
pub fn extend(client: &str, resource: &str) -> Span {
    held_span!("redlease.extend", client, resource)
}

/// The span of a downgrade of `client`'s write lock on `resource` to a read lock
/// (`redlease.downgrade`).
pub fn downgrade(client: &str, resource: &str) -> Span {
    held_span!("redlease.downgrade", client, resource)
}

/// The span of a release of `client`'s lock on `resource` (`redlease.release`), also for the
/// release of a dropped guard.
pub fn release(client: &str, resource: &str) -> Span {
    held_span!("redlease.release", client, resource)
}

/// The span of a scoped `with_lock` call (`redlease.with_lock`): the parent of its
/// acquisition, of the caller's work and of the release.
pub fn with_lock(client: &str, options: &LockOptions) -> Span {
    let resource = options.resources.first().map_or("", String::as_str);
    tracing::debug_span!(target: "redlease", "redlease.with_lock", client, resource)
}
