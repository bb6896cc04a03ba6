//! Whether the nodes can grant a lock at all, for `redlease run`.
//!
//! Before the lock is asked for, a quorum of nodes must be usable: redlease waits for one at most
//! `--wait-nodes` (by default the connect timeout), not the lock's `--wait`. A node that refuses
//! us for a configuration reason (a wrong password or user, an ACL, a database it does not have)
//! will not come back by retrying: once such nodes leave fewer than a quorum that could ever be
//! usable, redlease gives up at once (and so does the client's wait for the lock).

use std::fmt::Write as _;
use std::time::Duration;

use redlease_tokio::{Client, Health, NodeState};
use tokio::time::Instant;

use crate::say::{step, warn};
use crate::{EXIT_CONFIG, EXIT_UNAVAILABLE};

/// How often the health view is read while waiting.
const POLL: Duration = Duration::from_millis(50);

/// No quorum is usable: the exit code and what to tell the user (nodes named by address,
/// never with a password).
#[derive(Debug)]
pub(crate) struct Unusable {
    /// [`EXIT_CONFIG`] when nodes refuse us for a configuration reason, else
    /// [`EXIT_UNAVAILABLE`].
    pub(crate) code: u8,
    /// Which nodes are not usable, and why.
    pub(crate) message: String,
}

/// Wait until a quorum of nodes is usable, until `deadline` at most (`None`: without a bound);
/// the health view then. Gives up at once when a misconfiguration leaves no quorum possible.
pub(crate) async fn quorum(client: &Client, deadline: Option<Instant>) -> Result<Health, Unusable> {
    loop {
        let health = client.health().await.map_err(|e| Unusable { code: EXIT_UNAVAILABLE, message: e.to_string() })?;
        if health.can_lock() {
            return Ok(health);
        }
        if health.misconfigured_beyond_quorum() || deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(unusable(&health));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Say which nodes the client is connected to (`--verbose`), and warn of nodes that refuse
/// us although a quorum is usable: locking works, but an operator must act.
pub(crate) fn connected(health: &Health) {
    let n = health.nodes.len();
    let (usable, quorum, tolerance) = (health.usable(), health.quorum, health.fault_tolerance());
    let unready = unready(health);
    let others = if unready.is_empty() { String::new() } else { format!("; not ready:{unready}") };
    step(&format!("connected: {usable} of {n} nodes ready (quorum {quorum}, {tolerance} more may fail){others}"));
    if health.misconfigured() {
        warn(&format!("nodes refuse us for a configuration reason; locking works with {usable} of {n}:{unready}"));
    }
}

/// Why no quorum is usable: the exit code, and each node that is not usable with its state and
/// last error.
pub(crate) fn unusable(health: &Health) -> Unusable {
    let misconfigured = health.misconfigured_beyond_quorum();
    let mut message = if misconfigured {
        "nodes misconfigured: nodes refuse us for a configuration reason (the password or user, an \
         ACL, the database, a certificate we do not trust), which retrying does not fix, and leave \
         no quorum"
            .to_owned()
    } else {
        "nodes unreachable: no quorum".to_owned()
    };
    let _ = write!(message, " ({} of {} nodes needed, {} usable):", health.quorum, health.nodes.len(), health.usable());
    message.push_str(&unready(health));
    Unusable { code: if misconfigured { EXIT_CONFIG } else { EXIT_UNAVAILABLE }, message }
}

/// Each node that is not usable, with its state and last error: ` node #0 redis://h:1: down
/// (connect failed: ...); node #1 ...`; empty when all are.
fn unready(health: &Health) -> String {
    let mut out = String::new();
    for n in &health.nodes {
        let state = match n.state {
            _ if n.is_misconfigured() => "MISCONFIGURED",
            NodeState::Ready => continue,
            NodeState::Handshaking => "handshaking",
            NodeState::Connecting => "connecting",
            _ => "down",
        };
        let sep = if out.is_empty() { "" } else { ";" };
        let _ = write!(out, "{sep} node {} {}: {state}", n.node, n.addr);
        if let Some(e) = &n.last_error {
            let _ = write!(out, " ({e})");
        }
    }
    out
}
