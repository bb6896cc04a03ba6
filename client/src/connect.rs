//! When a connecting client may start serving, the same for every stack.

use redlease_core::{Engine, NodeId};

use crate::Error;

/// Whether a connecting client may start serving: a quorum of nodes is ready (connected,
/// handshake answered), or every node's connect attempt since `since` (each node's
/// [`Engine::connect_attempts`] when the client started) has ended, ready or failed. With
/// [`Config::require_all`](redlease_core::Config::require_all), only the latter: every node
/// is given its chance before [`require_all`] judges.
pub fn connect_settled(engine: &Engine, since: &[u64]) -> bool {
    let n = engine.config().nodes.len();
    let tried = (0..n).all(|i| engine.connect_attempts(node(i)) > since.get(i).copied().unwrap_or(0));
    if engine.config().require_all {
        return tried;
    }
    let ready = (0..n).filter(|&i| engine.is_ready(node(i))).count();
    ready >= engine.quorum() || tried
}

/// Once connecting has settled: with [`Config::require_all`](redlease_core::Config::require_all)
/// every node must be ready, else [`Error::Unhealthy`] with the health view naming each
/// node's state and last error.
pub fn require_all(engine: &Engine) -> Result<(), Error> {
    if !engine.config().require_all {
        return Ok(());
    }
    let health = engine.health();
    if health.all_ready() { Ok(()) } else { Err(Error::Unhealthy(Box::new(health))) }
}

fn node(i: usize) -> NodeId {
    // The engine refuses configs with more than u16::MAX nodes.
    NodeId(i as u16)
}
