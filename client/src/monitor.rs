//! What a client tells the world, written once for every adapter: `tracing` spans and events
//! for locks and links, and (with the `metrics` feature) counters, histograms and gauges
//! through the `metrics` facade.
//!
//! Everything has the target `redlease`: a subscriber filtered with `info,redlease=debug`
//! (`tracing_subscriber::fmt().with_env_filter("info,redlease=debug")`) shows every lock's
//! outcome with each node's vote.
//!
//! Spans: `redlease.acquire`, `redlease.extend`, `redlease.release` and `redlease.with_lock`
//! are made where the caller calls, so each is a child of the caller's span and lasts as long
//! as the caller waits; the outcome, the votes and the duration are recorded on it.
//! `redlease.auto_extend` (made when an automatic extension ends) has no caller: it is a root.
//!
//! Levels: nothing at INFO or above on the hot path of healthy nodes. Lock spans, lock
//! outcomes (`lock acquired`, `lock not acquired`, `lock extended`, `lock released`: DEBUG
//! events inside the operation's span) and routine link events are DEBUG. A node that starts
//! failing is reported once per change of its state — WARN when it is out of reach or speaks
//! garbage, ERROR when it refuses us for a configuration reason (which no retry fixes) — and
//! its recovery at INFO; the same failure again (every reconnect attempt) is DEBUG. A lost
//! lock is WARN (a root event: whichever thread notices the loss, it is news of its own).
//!
//! Metric names (all prefixed `redlease_`):
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `redlease_acquire_seconds` | histogram | `client`, `outcome`, `kind` | from the call to its outcome |
//! | `redlease_wait_seconds` | histogram | `client` | the same, for acquisitions that needed more than one attempt (time spent waiting for the lock) |
//! | `redlease_acquisitions_total` | counter | `client`, `outcome`, `kind` | `acquired`, `held`, `unreachable`, `misconfigured`, `too_slow`, `wait_timeout`, `fence_exhausted`, `cancelled`; `kind`: `mutex` (a lock or write lock), `read`, `semaphore` |
//! | `redlease_extensions_total` | counter | `client`, `outcome`, `auto` | `extended`, `lost`, `unconfirmed`, `expired`, `cancelled` |
//! | `redlease_releases_total` | counter | `client`, `outcome` | `released`, `not_held`, `unreachable` |
//! | `redlease_hold_seconds` | histogram | `client` | from the grant to the release |
//! | `redlease_lost_total` | counter | `client`, `reason` | `expired`, `refused`, `stopped` |
//! | `redlease_node_failures_total` | counter | `client`, `node`, `kind` | `unreachable`, `misconfigured`, `protocol` |
//! | `redlease_node_up` | gauge | `client`, `node` | 1 while the node takes part in rounds |
//! | `redlease_node_rtt_seconds` | gauge | `client`, `node` | the node's smoothed round trip |
//! | `redlease_fault_tolerance` | gauge | `client` | how many more nodes may fail before locking stops |
//!
//! `node` is the node's address without its password. `client` is the client's name,
//! [`Config::name`](redlease_core::Config::name) (default `client-<n>`, the process's `n`th
//! client): it keeps the series of several clients in one process apart, and is also the
//! `client` field of every span and event. When a client stops (closed, or its driver ended)
//! its gauges are set to 0 — `redlease_node_up` and `redlease_node_rtt_seconds` of each node,
//! and `redlease_fault_tolerance` — since the `metrics` facade cannot remove a series; they
//! stay at 0 until a client of the same name reports again.

mod labels;

use labels::*;
use std::fmt::Write as _;
#[cfg(feature = "metrics")]
use std::time::Duration;
use std::time::Instant;

use redlease_core::{
    AcquireError, Engine, ExtendError, Fault, LinkError, LockId, LostReason, NodeId, ReleaseOutcome, Vote, WakeState,
};
use tracing::Span;

use crate::spans;

/// How often the per-node gauges are refreshed at most, between link events.
#[cfg(feature = "metrics")]
const GAUGE_PERIOD: Duration = Duration::from_secs(1);

/// What was last reported of a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Reported {
    /// Nothing yet (it has not connected).
    #[default]
    Unknown,
    Up,
    /// Failing with this kind and reason.
    Failing(Fault, String),
}

/// A lock operation in flight, for its span.
#[derive(Debug)]
pub(crate) struct Op {
    pub(crate) span: Span,
    pub(crate) started: Instant,
}

/// The reporting state of one client.
#[derive(Debug, Default)]
pub(crate) struct Monitor {
    nodes: Vec<Reported>,
    /// Why waiters poll each node, as last reported (`None`: woken, or not known).
    polled: Vec<Option<String>>,
    #[cfg(feature = "metrics")]
    metrics: Metrics,
}

/// What the metrics need to remember.
#[cfg(feature = "metrics")]
#[derive(Debug, Default)]
struct Metrics {
    /// The `client` label (the config's name), once known.
    client: Option<metrics::SharedString>,
    /// The `node` label of each node, once its gauges were set.
    nodes: Vec<metrics::SharedString>,
    gauges_at: Option<Instant>,
    /// The client has stopped: its gauges were set to 0 and stay there.
    stopped: bool,
}

/// The votes, compactly: `#0 granted, #1 refused, #2 timed out`.
fn votes_text(votes: &[Vote]) -> String {
    let mut s = String::new();
    for (i, v) in votes.iter().enumerate() {
        let what = match v {
            Vote::Pending => "pending",
            Vote::Granted => "granted",
            Vote::Refused => "refused",
            Vote::Down => "down",
            Vote::TimedOut => "timed out",
            Vote::Error(_) => "error",
            Vote::Misconfigured(_) => "misconfigured",
            Vote::Unreplicated { .. } => "unreplicated",
            _ => "other",
        };
        let sep = if s.is_empty() { "" } else { ", " };
        let _ = write!(s, "{sep}#{i} {what}");
    }
    s
}

/// Record the outcome, votes and duration on `op`'s span (only formatted when someone listens).
fn close(op: &Op, engine: &Engine, lock: LockId, now: Instant, outcome: &str, attempts: Option<u32>) {
    if op.span.is_disabled() {
        return;
    }
    op.span.record("outcome", outcome);
    // In milliseconds to the microsecond: `duration_ms=0.234`, not a float's last digits.
    let micros = now.saturating_duration_since(op.started).as_micros();
    op.span.record("duration_ms", micros as f64 / 1e3);
    if let Some(a) = attempts {
        op.span.record("attempts", a);
    }
    if let Some((_, votes)) = engine.round(lock) {
        op.span.record("votes", votes_text(votes).as_str());
    }
}

impl Monitor {
    pub(crate) fn acquired(&mut self, engine: &Engine, lock: LockId, op: Op, now: Instant, attempts: u32) {
        #[cfg(feature = "metrics")]
        {
            let secs = now.saturating_duration_since(op.started).as_secs_f64();
            let client = self.client(engine);
            let kind = kind(engine, lock);
            metrics::histogram!("redlease_acquire_seconds", "client" => client.clone(), "outcome" => "acquired", "kind" => kind)
                .record(secs);
            metrics::counter!("redlease_acquisitions_total", "client" => client.clone(), "outcome" => "acquired", "kind" => kind)
                .increment(1);
            if attempts > 1 {
                metrics::histogram!("redlease_wait_seconds", "client" => client).record(secs);
            }
        }
        close(&op, engine, lock, now, "acquired", Some(attempts));
        if let Some(held) = engine.permits(lock).filter(|_| !op.span.is_disabled()) {
            op.span.record("held", format!("{held:?}").as_str());
        }
        tracing::debug!(target: "redlease", parent: &op.span, "lock acquired");
    }

    pub(crate) fn acquire_failed(&mut self, engine: &Engine, lock: LockId, op: Op, now: Instant, error: &AcquireError) {
        let outcome = acquire_outcome(error);
        #[cfg(feature = "metrics")]
        {
            let secs = now.saturating_duration_since(op.started).as_secs_f64();
            let client = self.client(engine);
            let kind = kind(engine, lock);
            metrics::histogram!("redlease_acquire_seconds", "client" => client.clone(), "outcome" => outcome, "kind" => kind)
                .record(secs);
            metrics::counter!("redlease_acquisitions_total", "client" => client.clone(), "outcome" => outcome, "kind" => kind)
                .increment(1);
            if attempts_of(error) > 1 {
                metrics::histogram!("redlease_wait_seconds", "client" => client).record(secs);
            }
        }
        close(&op, engine, lock, now, outcome, Some(attempts_of(error)));
        // (The outcome is on the span.)
        tracing::debug!(target: "redlease", parent: &op.span, "lock not acquired: {error}");
    }

    /// An extension ended; `op` is `None` for an automatic one.
    pub(crate) fn extended(
        &mut self,
        engine: &Engine,
        lock: LockId,
        resource: &str,
        op: Option<Op>,
        now: Instant,
        error: Option<&ExtendError>,
    ) {
        let outcome = error.map_or("extended", extend_outcome);
        #[cfg(feature = "metrics")]
        {
            let auto = if op.is_none() { "true" } else { "false" };
            let client = self.client(engine);
            metrics::counter!("redlease_extensions_total", "client" => client, "outcome" => outcome, "auto" => auto)
                .increment(1);
        }
        let op = op.unwrap_or_else(|| {
            // An automatic extension has no caller, so no span was open: one is made at its
            // end, with how long its round took, as a root (not a child of whatever the
            // thread that drives the loop is doing).
            let span = tracing::debug_span!(
                target: "redlease",
                parent: None,
                "redlease.auto_extend",
                client = spans::client(engine.config()),
                resource,
                outcome = tracing::field::Empty,
                votes = tracing::field::Empty,
                duration_ms = tracing::field::Empty,
            );
            Op { span, started: engine.round(lock).map_or(now, |(start, _)| start) }
        });
        close(&op, engine, lock, now, outcome, None);
        match error {
            None => tracing::debug!(target: "redlease", parent: &op.span, "lock extended"),
            Some(error) => tracing::debug!(target: "redlease", parent: &op.span, "lock not extended: {error}"),
        }
    }

    pub(crate) fn released(
        &mut self,
        engine: &Engine,
        lock: LockId,
        op: Option<Op>,
        now: Instant,
        outcome: ReleaseOutcome,
        held_since: Option<Instant>,
    ) {
        let outcome = release_outcome(outcome);
        #[cfg(feature = "metrics")]
        {
            let client = self.client(engine);
            metrics::counter!("redlease_releases_total", "client" => client.clone(), "outcome" => outcome).increment(1);
            if let Some(since) = held_since {
                let secs = now.saturating_duration_since(since).as_secs_f64();
                metrics::histogram!("redlease_hold_seconds", "client" => client).record(secs);
            }
        }
        let _ = held_since;
        // Without a span (released by `close`, or a grant nobody wanted) nobody waits: the
        // holder, if any, was told by its lost signal and the WARN line.
        if let Some(op) = op {
            close(&op, engine, lock, now, outcome, None);
            tracing::debug!(target: "redlease", parent: &op.span, "lock released");
        }
    }

    pub(crate) fn lost(&mut self, engine: &Engine, resource: &str, reason: &LostReason) {
        #[cfg(feature = "metrics")]
        {
            let client = self.client(engine);
            metrics::counter!("redlease_lost_total", "client" => client, "reason" => lost_reason(reason)).increment(1);
        }
        let client = spans::client(engine.config());
        let reason = lost_reason(reason);
        // A root: the loss is news of its own, whichever caller's thread happens to notice it.
        tracing::warn!(target: "redlease", parent: None, client, resource, reason, "lock lost: stop relying on it");
    }

    /// `node` completed a handshake.
    pub(crate) fn link_up(&mut self, engine: &Engine, node: NodeId, now: Instant) {
        let (client, addr) = (spans::client(engine.config()), engine.node_addr(node).unwrap_or("?"));
        match self.swap(node, Reported::Up) {
            Reported::Failing(..) => tracing::info!(target: "redlease", client, node = %node, addr, "node recovered"),
            _ => tracing::debug!(target: "redlease", client, node = %node, addr, "node connected"),
        }
        self.wake_changed(engine, node);
        self.gauges(engine, now, true);
    }

    /// Whether waiters poll `node` changed, maybe: one line per change, not one per lock.
    pub(crate) fn wake_changed(&mut self, engine: &Engine, node: NodeId) {
        let (client, addr) = (spans::client(engine.config()), engine.node_addr(node).unwrap_or("?"));
        // (Not when the config turned wake-ups off: that is the user's choice, not news.)
        let polled = engine.wake_state(node).and_then(|w| match w {
            WakeState::Polling { reason } if engine.config().wake => Some(reason.as_str()),
            _ => None,
        });
        if self.polled.len() <= node.index() {
            self.polled.resize(node.index() + 1, None);
        }
        if self.polled[node.index()].as_deref() != polled {
            if let Some(reason) = polled {
                tracing::info!(target: "redlease", client, node = %node, addr, reason, "waiters poll this node: it does not announce releases");
            } else if self.polled[node.index()].is_some() {
                tracing::info!(target: "redlease", client, node = %node, addr, "waiters are woken by this node's releases again");
            }
            self.polled[node.index()] = polled.map(str::to_owned);
        }
    }

    /// `node`'s link failed; reported loudly only when its state changes.
    pub(crate) fn link_failed(&mut self, engine: &Engine, error: &LinkError, now: Instant) {
        let fault = error.fault();
        let reason = error.reason();
        let node = error.node();
        #[cfg(feature = "metrics")]
        {
            let kind = match fault {
                Fault::Unreachable => "unreachable",
                Fault::Misconfigured => "misconfigured",
                _ => "protocol",
            };
            let (client, node) = (self.client(engine), error.addr().to_owned());
            metrics::counter!("redlease_node_failures_total", "client" => client, "node" => node, "kind" => kind)
                .increment(1);
        }
        let was = self.swap(node, Reported::Failing(fault, reason));
        let repeated = matches!(&was, Reported::Failing(f, r) if *f == fault && *r == error.reason());
        let tolerance = engine.health().fault_tolerance();
        let client = spans::client(engine.config());
        if repeated {
            tracing::debug!(target: "redlease", client, node = %node, "{error} (again)");
        } else if fault == Fault::Misconfigured {
            tracing::error!(target: "redlease", client, node = %node, fault_tolerance = tolerance, "{error}: the node refuses us for a configuration reason; fix it (retrying does not help)");
        } else if was == Reported::Unknown
            && matches!(error, LinkError::ConnectFailed { .. } | LinkError::ConnectTimeout { .. })
        {
            // A node that never came up: say so once, loudly enough to see a typo in a URL.
            tracing::warn!(target: "redlease", client, node = %node, fault_tolerance = tolerance, "{error}");
        } else {
            tracing::warn!(target: "redlease", client, node = %node, fault_tolerance = tolerance, "{error}; reconnecting");
        }
        self.gauges(engine, now, true);
    }

    /// Refresh the per-node gauges, at most once per second unless `force`.
    pub(crate) fn gauges(&mut self, engine: &Engine, now: Instant, force: bool) {
        #[cfg(feature = "metrics")]
        {
            let m = &self.metrics;
            if m.stopped || (!force && m.gauges_at.is_some_and(|t| now.saturating_duration_since(t) < GAUGE_PERIOD)) {
                return;
            }
            self.metrics.gauges_at = Some(now);
            let client = self.client(engine);
            let health = engine.health();
            let labels = &mut self.metrics.nodes;
            for (i, n) in health.nodes.iter().enumerate() {
                if labels.len() <= i {
                    labels.push(metrics::SharedString::from_owned(n.addr.to_string()));
                }
                let node = labels[i].clone();
                let up = if n.is_ready() { 1.0 } else { 0.0 };
                metrics::gauge!("redlease_node_up", "client" => client.clone(), "node" => node.clone()).set(up);
                if let Some(rtt) = n.stats.rtt() {
                    let rtt = rtt.as_secs_f64();
                    metrics::gauge!("redlease_node_rtt_seconds", "client" => client.clone(), "node" => node).set(rtt);
                }
            }
            metrics::gauge!("redlease_fault_tolerance", "client" => client).set(health.fault_tolerance() as f64);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (engine, now, force);
    }

    /// The client has stopped: the gauges it set read 0 from now on (its nodes are not up for
    /// it, it has no round trips and no fault tolerance), so that they are not mistaken for a
    /// live client's. The `metrics` facade cannot remove a series.
    pub(crate) fn stop(&mut self) {
        #[cfg(feature = "metrics")]
        {
            let m = &mut self.metrics;
            if std::mem::replace(&mut m.stopped, true) {
                return;
            }
            let Some(client) = m.client.clone() else { return };
            for node in &m.nodes {
                metrics::gauge!("redlease_node_up", "client" => client.clone(), "node" => node.clone()).set(0.0);
                metrics::gauge!("redlease_node_rtt_seconds", "client" => client.clone(), "node" => node.clone())
                    .set(0.0);
            }
            metrics::gauge!("redlease_fault_tolerance", "client" => client).set(0.0);
        }
    }

    /// The `client` label: the config's name.
    #[cfg(feature = "metrics")]
    fn client(&mut self, engine: &Engine) -> metrics::SharedString {
        let name = || metrics::SharedString::from_shared(std::sync::Arc::from(spans::client(engine.config())));
        self.metrics.client.get_or_insert_with(name).clone()
    }

    fn swap(&mut self, node: NodeId, state: Reported) -> Reported {
        if self.nodes.len() <= node.index() {
            self.nodes.resize(node.index() + 1, Reported::Unknown);
        }
        std::mem::replace(&mut self.nodes[node.index()], state)
    }
}

fn attempts_of(error: &AcquireError) -> u32 {
    match error {
        AcquireError::Held { attempts, .. }
        | AcquireError::Unreachable { attempts, .. }
        | AcquireError::Misconfigured { attempts, .. }
        | AcquireError::TooSlow { attempts, .. }
        | AcquireError::WaitTimeout { attempts, .. } => *attempts,
        _ => 1,
    }
}
