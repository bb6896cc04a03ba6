//! What the nodes said about a key, taken together, and how the tables say a node's answer.

use super::fault::{Fault, FaultKind};
use crate::EXIT_UNAVAILABLE;

/// What the nodes said about a key (or a semaphore's permit), taken together.
pub(super) struct Verdict<'a> {
    pub(super) nodes: usize,
    pub(super) quorum: usize,
    pub(super) reachable: usize,
    /// The token held on the most nodes, and on how many.
    pub(super) best: Option<(usize, &'a str)>,
    /// That token, when a quorum of nodes holds it.
    pub(super) held_by: Option<&'a str>,
    /// How many more nodes may fail before no quorum is left.
    pub(super) tolerance: usize,
}

impl<'a> Verdict<'a> {
    /// The verdict over `nodes` nodes, `reachable` of which answered, and the tokens those hold.
    pub(super) fn of_holders(nodes: usize, reachable: usize, mut holders: Vec<&'a str>) -> Self {
        let quorum = nodes / 2 + 1;
        holders.sort_unstable();
        let best = holders.chunk_by(|a, b| a == b).map(|c| (c.len(), c[0])).max();
        let held_by = best.filter(|(count, _)| *count >= quorum).map(|(_, token)| token);
        let tolerance = reachable.saturating_sub(quorum);
        Verdict { nodes, quorum, reachable, best, held_by, tolerance }
    }

    /// Whether a quorum holds the key (`held`), cannot hold it whatever the nodes that did not
    /// answer say (`not_held`), or too few nodes answered to tell (`unknown`).
    pub(super) fn state(&self) -> &'static str {
        let agreeing = self.best.map_or(0, |(count, _)| count);
        if self.held_by.is_some() {
            "held"
        } else if agreeing + (self.nodes - self.reachable) < self.quorum {
            "not_held"
        } else {
            "unknown"
        }
    }

    /// 0 when a quorum of nodes answered, [`EXIT_UNAVAILABLE`] otherwise.
    pub(super) fn code(&self) -> u8 {
        if self.reachable >= self.quorum { 0 } else { EXIT_UNAVAILABLE }
    }
}

/// A node that did not answer, as its line in the tables says it.
pub(super) fn unanswered(error: &Fault) -> String {
    if error.kind() == FaultKind::Misconfigured {
        format!("MISCONFIGURED  ({error})")
    } else {
        format!("unreachable  ({error})")
    }
}

/// A key's PTTL as the tables say it: `-1` is a key without a TTL, `-2` one that expired
/// between the reads.
pub(super) fn pttl_text(pttl: i64) -> String {
    match pttl {
        -1 => "NO TTL (leak)".to_owned(),
        ..0 => "expired".to_owned(),
        _ => format!("pttl {pttl}ms"),
    }
}
