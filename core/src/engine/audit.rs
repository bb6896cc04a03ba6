//! The engine's own consistency rules, checked on demand: what a simulation asks after every
//! step, so that a broken rule shows where it happens rather than as a slow round or a key
//! left behind much later.

use super::Engine;
use crate::error::Vote;
use crate::lock::Phase;

impl Engine {
    /// Check the engine's internal consistency; every rule broken, described (empty: none).
    ///
    /// - A round still open waits only for nodes it has a request out to: a vote left
    ///   pending with no request on the wire (its link lost, say) would hold the round until
    ///   the node timeout.
    /// - Every cleanup kept for a Redis Cluster redirect belongs to a request on the wire.
    ///
    /// Cheap enough for tests to call after every input; not meant for production paths.
    #[must_use]
    pub fn audit(&self) -> Vec<String> {
        let mut broken = Vec::new();
        for (lock, s) in self.locks.live() {
            let open = matches!(
                s.phase,
                Phase::Acquiring { .. } | Phase::Fencing { .. } | Phase::Extending { .. } | Phase::Releasing { .. }
            );
            if !open {
                continue;
            }
            for (node, vote) in s.round.tally.votes().iter().enumerate() {
                if *vote == Vote::Pending && !self.links.asks(node, lock, s.round.id) {
                    broken.push(format!(
                        "{lock:?} waits for node #{node} in round {} with no request out to it",
                        s.round.id
                    ));
                }
            }
        }
        let orphans = self.links.orphan_copies();
        if orphans > 0 {
            broken.push(format!("{orphans} cleanup copies kept for no request on the wire"));
        }
        broken
    }
}
