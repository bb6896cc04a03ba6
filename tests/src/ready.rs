//! Waiting until a client is connected to every node.
//!
//! Every client's `connect` returns once a **quorum** of nodes is ready; the other links may
//! still be connecting or in their handshake. A lock taken then is granted by the quorum and
//! never reaches the other nodes (nor does a waiter queue or subscribe there) until a later
//! attempt. A test that looks at every node waits for what it needs first, through the public
//! health view: [`all_ready`].

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use redlease_core::{Health, NodeHealth};

/// How long [`all_ready`] waits: a liveness bound for loopback connects and handshakes on a
/// loaded machine, not a speed figure.
pub const READY_WITHIN: Duration = Duration::from_secs(10);

/// Whether the view shows every node ready: its link past its handshake, and for a node that
/// is a Redis Cluster its whole slot map read with every master's link ready.
pub fn every_node_ready(health: &Health) -> bool {
    health.all_ready() && health.nodes.iter().all(NodeHealth::cluster_whole)
}

/// Poll a client's health view (`health`, e.g. `|| client.health()`) every 10 ms, sleeping on
/// the caller's runtime (`sleep`), until [`every_node_ready`]; the view that says so.
///
/// # Panics
///
/// If `health` fails, or not every node is ready within [`READY_WITHIN`] (with the last view).
pub async fn all_ready<H, E, S>(mut health: impl FnMut() -> H, mut sleep: impl FnMut(Duration) -> S) -> Health
where
    H: Future<Output = Result<Health, E>>,
    E: fmt::Display,
    S: Future<Output = ()>,
{
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        let view = health().await.unwrap_or_else(|e| panic!("health: {e}"));
        if every_node_ready(&view) {
            return view;
        }
        assert!(Instant::now() < deadline, "not every node ready within {READY_WITHIN:?}:\n{view}");
        sleep(Duration::from_millis(10)).await;
    }
}
