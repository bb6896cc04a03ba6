//! A semaphore's permits: the client's order of them, what each node granted in the current
//! round, and the permits the lock holds once a quorum granted them.
//!
//! A semaphore of limit L is L permits, each a mutex key over the same nodes: a permit is held
//! when a quorum granted it, so two holders of one permit would need two intersecting quorums
//! to grant it to two tokens at once, which no node does. Each node's script takes the first
//! free permits in the client's order (its rendezvous order, so uncontended clients rarely
//! pick the same one), and nodes may differ: the lock holds the permits when a quorum of nodes
//! granted the very same ones, and releases every other grant at once. (Permits held by
//! quorums of their own could not be extended: each node's extend script needs every permit
//! of the lock, as for a mutex of several resources, and no quorum would have them all.)

use super::Keys;
use crate::scripts::{QUEUE_PREFIX, SEM_PREFIX};

/// The permit state of a semaphore acquisition; `limit == 0` for a mutex.
#[derive(Debug, Default)]
pub(crate) struct Permits {
    /// The semaphore's name (before the key scheme).
    pub(crate) name: String,
    pub(crate) limit: u16,
    pub(crate) want: u16,
    /// The permit number at each position of the client's order.
    order: Vec<u16>,
    /// Every permit key, in the client's order.
    pub(crate) all: Keys,
    /// `{prefix}redlease:sem:{NAME}:limit`.
    pub(crate) limit_key: Vec<u8>,
    /// The semaphore's one waiter queue.
    pub(crate) queue: Vec<u8>,
    /// Per node, the positions (0-based, ascending) it granted in the current round.
    granted: Vec<Vec<u16>>,
    /// The positions held (after a quorum granted them), in the client's order.
    chosen: Vec<u16>,
    /// The permit numbers held, ascending.
    held: Vec<u16>,
    /// The current attempt takes the first permit in the client's order by `SET NX` (every
    /// node confirmed the limit on its connection before, and the attempt is a fresh token's
    /// first, for one permit, without fencing: the script would take that permit if free).
    pub(crate) fast: bool,
    /// The 1-based position the next attempt tries first (0: none): after an attempt whose
    /// nodes granted different permits, the one most of them granted.
    pub(crate) prefer: u16,
    /// Attempts in a row retried at once after such a split.
    pub(crate) splits: u8,
    /// Nodes where a cleanup of an earlier attempt was dropped (see
    /// `Engine::stray_permits`): their unheld permits are released once the lock settles.
    pub(crate) stray: Vec<u16>,
}

impl Permits {
    /// Whether this acquisition is a semaphore's.
    pub(crate) fn on(&self) -> bool {
        self.limit > 0
    }

    /// Set up a semaphore `name` (under `prefix`) of `limit` permits, taking `want` of them, in
    /// the order that `token` ranks them; `limit == 0`: a mutex.
    pub(crate) fn start(&mut self, prefix: &str, name: &str, limit: u32, want: u32, token: &[u8]) {
        self.limit = limit as u16;
        self.want = want as u16;
        // (A record reused from a semaphore's permit must not keep its shortcut.)
        self.fast = false;
        self.prefer = 0;
        self.splits = 0;
        self.stray.clear();
        self.name.clear();
        self.name.push_str(name);
        self.chosen.clear();
        self.held.clear();
        for g in &mut self.granted {
            g.clear();
        }
        if limit == 0 {
            return;
        }
        let seed = fnv(token);
        self.order.clear();
        self.order.extend(0..limit as u16);
        self.order.sort_by_key(|&k| std::cmp::Reverse(mix(seed ^ u64::from(k))));
        let base = format!("{prefix}{SEM_PREFIX}{{{name}}}");
        let names: Vec<String> = self.order.iter().map(|k| format!("{base}:{k}")).collect();
        self.all.set("", &names);
        self.limit_key.clear();
        self.limit_key.extend_from_slice(format!("{base}:limit").as_bytes());
        self.queue.clear();
        self.queue.extend_from_slice(format!("{QUEUE_PREFIX}{base}").as_bytes());
    }

    /// A new round over `n` nodes: nothing granted yet.
    pub(crate) fn reset_round(&mut self, n: usize) {
        // No permit is held during an attempt: a late grant of an earlier attempt is never
        // trimmed against an old choice (this attempt may re-enter and count that permit).
        self.chosen.clear();
        self.held.clear();
        self.granted.resize_with(n, Vec::new);
        for g in &mut self.granted {
            g.clear();
        }
    }

    /// Node `node` granted the 1-based `positions` (as its script returns them). `Err` with a
    /// description when they cannot be an answer: out of range, repeated, or not `want` of
    /// them.
    pub(crate) fn record(&mut self, node: usize, positions: &[u16]) -> Result<(), String> {
        let bad = positions.len() != self.want as usize
            || positions.iter().any(|&p| p == 0 || p > self.limit)
            || (1..positions.len()).any(|i| positions[..i].contains(&positions[i]));
        if bad || node >= self.granted.len() {
            return Err(format!("positions {positions:?} of a semaphore of {} taking {}", self.limit, self.want));
        }
        let g = &mut self.granted[node];
        g.clear();
        g.extend(positions.iter().map(|&p| p - 1));
        g.sort_unstable();
        Ok(())
    }

    /// The most nodes that granted one and the same positions, and one of them (`None` when
    /// no node granted).
    fn agreement(&self) -> (usize, Option<usize>) {
        let mut best = (0, None);
        for (node, g) in self.granted.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
            let same = self.granted.iter().filter(|other| *other == g).count();
            if same > best.0 {
                best = (same, Some(node));
            }
        }
        best
    }

    /// After a round lost because its nodes granted different permits: the 1-based position
    /// most of them granted (the first in the client's order among equals), which the next
    /// attempt then tries first; `None` when no node granted.
    pub(crate) fn split(&self) -> Option<u16> {
        if !self.on() {
            return None;
        }
        let mut count = vec![0usize; usize::from(self.limit)];
        for &p in self.granted.iter().flatten() {
            if let Some(c) = count.get_mut(usize::from(p)) {
                *c += 1;
            }
        }
        let best = count.iter().enumerate().filter(|(_, c)| **c > 0).max_by_key(|(p, c)| (**c, std::cmp::Reverse(*p)));
        best.map(|(p, _)| p as u16 + 1)
    }

    /// Whether the round is won (a quorum `q` of nodes granted the very same permits), and
    /// whether it still can be with `open` nodes yet to answer.
    pub(crate) fn standing(&self, q: usize, open: usize) -> (bool, bool) {
        let (most, _) = self.agreement();
        (most >= q, most + open >= q)
    }

    /// Hold the positions that a quorum `q` of nodes granted, and return the keys to hold.
    pub(crate) fn choose(&mut self, q: usize, keys: &mut Keys) {
        self.chosen.clear();
        if let (most, Some(node)) = self.agreement() {
            if most >= q {
                self.chosen.extend_from_slice(&self.granted[node]);
            }
        }
        self.held.clear();
        self.held.extend(self.chosen.iter().map(|&p| self.order[p as usize]));
        self.held.sort_unstable();
        let all: Vec<&[u8]> = self.all.iter().collect();
        keys.set_bytes(self.chosen.iter().map(|&p| all[p as usize]));
    }

    /// The keys `node` granted that the lock does not hold: released at once.
    pub(crate) fn extras(&self, node: usize) -> Vec<&[u8]> {
        let Some(g) = self.granted.get(node) else { return Vec::new() };
        let all: Vec<&[u8]> = self.all.iter().collect();
        g.iter().filter(|p| !self.chosen.contains(p)).map(|&p| all[p as usize]).collect()
    }

    /// The keys of every permit the lock does not hold (once it holds some).
    pub(crate) fn unheld(&self) -> Vec<&[u8]> {
        if self.chosen.is_empty() {
            return Vec::new();
        }
        let all = self.all.iter().enumerate();
        all.filter(|(p, _)| !self.chosen.contains(&(*p as u16))).map(|(_, k)| k).collect()
    }

    /// The keys at the 1-based `positions` of a grant.
    pub(crate) fn keys_at(&self, positions: &[u16]) -> Vec<&[u8]> {
        let all: Vec<&[u8]> = self.all.iter().collect();
        positions.iter().filter_map(|&p| all.get(usize::from(p.checked_sub(1)?)).copied()).collect()
    }

    /// The keys of a late grant (the 1-based `positions` a node took after the round was
    /// decided) that the lock does not hold; empty if it holds none (its attempt failed, and
    /// the cleanup sent to the node covers them; or a later attempt is in flight, which may
    /// re-enter them).
    pub(crate) fn late_extras(&self, positions: &[u16]) -> Vec<&[u8]> {
        if self.chosen.is_empty() {
            return Vec::new();
        }
        let all: Vec<&[u8]> = self.all.iter().collect();
        let late = positions.iter().filter_map(|&p| p.checked_sub(1)).filter(|p| (*p as usize) < all.len());
        late.filter(|p| !self.chosen.contains(p)).map(|p| all[p as usize]).collect()
    }

    /// The name every key of the semaphore starts with, `{prefix}redlease:sem:{NAME}`: its wake
    /// channel is [`WAKE_PREFIX`](crate::scripts::WAKE_PREFIX) + this.
    pub(crate) fn base(&self) -> &[u8] {
        &self.queue[QUEUE_PREFIX.len().min(self.queue.len())..]
    }

    /// The permit numbers held, ascending (empty until a quorum granted them).
    pub(crate) fn held(&self) -> &[u16] {
        &self.held
    }
}

/// FNV-1a of the token: the seed of the client's permit order.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// SplitMix64's finalizer: a permit's rank for one token.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sem(limit: u32, want: u32, token: &[u8]) -> Permits {
        let mut p = Permits::default();
        p.start("", "api", limit, want, token);
        p.reset_round(3);
        p
    }

    #[test]
    fn every_key_shares_the_names_hash_tag_and_the_order_is_a_permutation() {
        let p = sem(4, 1, b"tok");
        let keys: Vec<String> = p.all.iter().map(|k| String::from_utf8(k.to_vec()).unwrap()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            ["redlease:sem:{api}:0", "redlease:sem:{api}:1", "redlease:sem:{api}:2", "redlease:sem:{api}:3"]
        );
        assert_eq!(p.limit_key, b"redlease:sem:{api}:limit");
        assert_eq!(p.queue, b"redlease:queue:redlease:sem:{api}");
        // Tokens rank the permits differently: over many tokens, each permit comes first sometimes.
        let mut first = [0; 4];
        for i in 0..400u32 {
            first[sem(4, 1, &i.to_le_bytes()).order[0] as usize] += 1;
        }
        assert!(first.iter().all(|&c| c > 50), "{first:?}");
    }

    #[test]
    fn a_permit_is_held_only_where_a_quorum_granted_it() {
        // Three nodes grant three different permits (the AB/BC/AC split): nothing is held.
        let mut p = sem(3, 1, b"t");
        p.record(0, &[1]).unwrap();
        p.record(1, &[2]).unwrap();
        assert_eq!(p.standing(2, 1), (false, true));
        p.record(2, &[3]).unwrap();
        assert_eq!(p.standing(2, 0), (false, false));
        // Two of three agree on a permit: it is held, the odd grant is an extra.
        let mut p = sem(3, 1, b"t");
        p.record(0, &[2]).unwrap();
        p.record(1, &[1]).unwrap();
        p.record(2, &[2]).unwrap();
        assert_eq!(p.standing(2, 0), (true, true));
        let mut keys = Keys::default();
        p.choose(2, &mut keys);
        assert_eq!(keys.len(), 1);
        assert_eq!(p.extras(1).len(), 1);
        assert!(p.extras(0).is_empty() && p.extras(2).is_empty());
        assert_eq!(p.held(), [p.order[1]]);
        // Two permits, each granted by two nodes of three, but no two nodes agree on
        // both: nothing is held (no quorum could extend them together).
        let mut p = sem(3, 2, b"t");
        p.record(0, &[1, 2]).unwrap();
        p.record(1, &[3, 1]).unwrap();
        p.record(2, &[2, 3]).unwrap();
        assert_eq!(p.standing(2, 0), (false, false));
        // Two that agree, whatever order their scripts named the permits in.
        let mut p = sem(3, 2, b"t");
        p.record(0, &[2, 1]).unwrap();
        p.record(1, &[1, 3]).unwrap();
        assert_eq!(p.standing(2, 1), (false, true));
        p.record(2, &[1, 2]).unwrap();
        assert_eq!(p.standing(2, 0), (true, true));
        p.choose(2, &mut keys);
        assert_eq!(keys.len(), 2);
        assert_eq!(p.extras(1).len(), 1);
    }

    #[test]
    fn a_split_names_the_position_most_nodes_granted_and_a_mutex_has_none() {
        let mut p = sem(3, 1, b"t");
        p.record(0, &[2]).unwrap();
        p.record(1, &[1]).unwrap();
        p.record(2, &[2]).unwrap();
        assert_eq!(p.split(), Some(2));
        // The record taken again for a mutex (limit 0), its last round's grants kept: none.
        p.start("", "m", 0, 1, b"u");
        assert_eq!(p.split(), None);
        p.limit = 2;
        p.granted = vec![vec![5]];
        assert_eq!(p.split(), None, "a position beyond the limit counts for nothing");
    }

    #[test]
    fn answers_that_cannot_be_grants_are_refused() {
        let mut p = sem(4, 2, b"t");
        for bad in [&[1][..], &[1, 1], &[0, 2], &[2, 5], &[1, 2, 3]] {
            assert!(p.record(0, bad).is_err(), "{bad:?}");
        }
        assert!(p.record(0, &[4, 1]).is_ok());
    }
}
