//! When a connecting client may start serving, the same for every stack.

use redlease_core::{Engine, NodeId};

use crate::Error;

/// Whether a connecting client may start serving: a quorum of nodes is ready (connected,
/// handshake answered), or every node's connect attempt since `since` (each node's
/// [`Engine::connect_attempts`] when the client started) has ended, ready or failed. With
/// [`Config::require_all`](redlease_core::Config::require_all), only the latter: every node
/// is given its chance before [`connected`] judges.
pub fn connect_settled(engine: &Engine, since: &[u64]) -> bool {
    let n = engine.config().nodes.len();
    let tried = (0..n).all(|i| {
        engine.connect_attempts(node(i)) > since.get(i).copied().unwrap_or(0) && !engine.masters_connecting(node(i))
    });
    if engine.config().require_all {
        return tried;
    }
    let ready = (0..n).filter(|&i| engine.is_ready(node(i))).count();
    ready >= engine.quorum() || tried
}

/// Once connecting has settled: whether the client can serve. A quorum of nodes must be
/// ready (with [`Config::require_all`](redlease_core::Config::require_all), every node), else
/// [`Error::Unhealthy`] with the health view naming each node's state and last error: a
/// client that could not lock anything is refused at once rather than handed out to fail
/// every call.
pub fn connected(engine: &Engine) -> Result<(), Error> {
    let health = engine.health();
    let enough = if engine.config().require_all { health.all_ready() } else { health.can_lock() };
    if enough { Ok(()) } else { Err(Error::Unhealthy(Box::new(health))) }
}

fn node(i: usize) -> NodeId {
    // The engine refuses configs with more than u16::MAX nodes.
    NodeId(i as u16)
}
