//! The safety checker: holder intervals of the clients against the nodes' ground truth.
//!
//! A *hold* is the span of global time during which a client believed it held a lock: from
//! the `Acquired` event to the earlier of the release call and the engine's validity
//! deadline (as the engine reported it at each moment). The checker asserts:
//!
//! - **mutual exclusion**: two holds of the same resource never overlap (a semaphore's
//!   resources are the permits it holds: each permit is a mutex), unless both are holds of one
//!   owner of a re-entrant lock (their `token` is the owner: the lock key's value);
//! - **the limit**: at no instant do the holds of a semaphore have more permits than its
//!   limit, counted over the holds themselves whatever permits they name;
//! - **validity never overstated**: at every instant of a hold, a quorum of nodes really had
//!   all its keys under its token (from the nodes' ownership spans); for a semaphore, a quorum
//!   had each of its permits (each permit is a mutex of its own, its quorum not necessarily
//!   the other permits');
//! - **fencing**: fencing tokens strictly increase in holder order, per resource (per permit);
//!   the holds of one owner of a re-entrant lock count as one holder.
//!
//! Node-side rule breaks (a lock key without TTL, malformed requests) and engine oddities
//! are reported by the model and the world and end up in the same list.

use std::fmt;

use super::node::{MS, Segment, Time};

/// A semaphore: its name and its limit.
pub(crate) type Semaphore = (Vec<u8>, u32);

/// One holder interval `[start, end)` on the global clock.
#[derive(Clone, Debug)]
pub(crate) struct Hold {
    pub(crate) client: usize,
    pub(crate) token: Vec<u8>,
    pub(crate) resources: Vec<Vec<u8>>,
    pub(crate) start: Time,
    pub(crate) end: Time,
    pub(crate) fence: Option<u64>,
    /// A semaphore's hold: its name and limit; it holds one permit per resource (permit key).
    pub(crate) semaphore: Option<Semaphore>,
    /// A read lock's hold (of a read lock, or of a write lock once its downgrade was
    /// confirmed): it may overlap other readers, never a writer; its fencing token is the
    /// writer epoch, and its keys on the nodes are its membership of `redlease:readers:K`.
    pub(crate) shared: bool,
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "client {} token {} [{}, {})",
            self.client,
            String::from_utf8_lossy(&self.token),
            ms(self.start),
            ms(self.end)
        )?;
        if self.shared {
            write!(f, " (reader)")?;
        }
        if let Some(t) = self.fence {
            write!(f, " fence {t}")?;
        }
        Ok(())
    }
}

/// Render a time as milliseconds.
pub(crate) fn ms(t: Time) -> String {
    if t == Time::MAX { "∞".into() } else { format!("{}.{:06}ms", t / MS, t % MS) }
}

/// A broken rule.
#[derive(Clone, Debug)]
pub(crate) enum Violation {
    /// Two holds of one resource overlap.
    Overlap { resource: String, first: Hold, second: Hold },
    /// A hold claimed validity while fewer than a quorum of nodes held its keys.
    Overstated { hold: Hold, from: Time, to: Time, nodes: usize, quorum: usize },
    /// Fencing tokens did not increase from one holder to the next.
    FenceOrder { resource: String, first: Hold, second: Hold },
    /// More permits of a semaphore were held at once than its limit: the holds at `at`.
    OverLimit { semaphore: String, limit: u32, at: Time, holds: Vec<Hold> },
    /// A reader's fencing token (its writer epoch) is below the token of a writer whose
    /// hold ended before the reader was granted.
    Epoch { resource: String, writer: Hold, reader: Hold },
    /// A node saw something a correct engine never sends (or a key without TTL).
    Node { node: usize, what: String },
    /// The engine reported something it should not have.
    Engine { client: usize, what: String },
    /// Nobody got the lock back after its holder vanished.
    Liveness { what: String },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Overlap { resource, first, second } => {
                write!(f, "mutual exclusion broken on {resource:?}: {first} overlaps {second}")
            }
            Violation::Overstated { hold, from, to, nodes, quorum } => write!(
                f,
                "validity overstated: {hold} claimed the lock, but during [{}, {}) only {nodes} node(s) held it (quorum {quorum})",
                ms(*from),
                ms(*to)
            ),
            Violation::FenceOrder { resource, first, second } => {
                write!(f, "fencing tokens not increasing on {resource:?}: {first} then {second}")
            }
            Violation::OverLimit { semaphore, limit, at, holds } => {
                let permits: usize = holds.iter().map(|h| h.resources.len()).sum();
                let list: Vec<String> = holds.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "semaphore {semaphore:?} of {limit} permits had {permits} held at {}: {}",
                    ms(*at),
                    list.join("; ")
                )
            }
            Violation::Epoch { resource, writer, reader } => {
                write!(f, "reader's epoch below an earlier writer's token on {resource:?}: {writer} then {reader}")
            }
            Violation::Node { node, what } => write!(f, "node {node}: {what}"),
            Violation::Engine { client, what } => write!(f, "client {client}: {what}"),
            Violation::Liveness { what } => write!(f, "liveness: {what}"),
        }
    }
}

/// Check the holds against the nodes' ownership spans. `dbs[n]` is the database the lock
/// keys live in on node `n`.
pub(crate) fn check(holds: &[Hold], nodes: &[&[Segment]], dbs: &[u32], quorum: usize) -> Vec<Violation> {
    let mut out = Vec::new();
    let held: Vec<&Hold> = holds.iter().filter(|h| h.end > h.start).collect();
    let mut resources: Vec<&Vec<u8>> = held.iter().flat_map(|h| h.resources.iter()).collect();
    resources.sort();
    resources.dedup();
    for r in resources {
        let name = String::from_utf8_lossy(r).into_owned();
        let mut all: Vec<&Hold> = held.iter().copied().filter(|h| h.resources.contains(r)).collect();
        all.sort_by_key(|h| (h.start, h.end));
        let (readers, on_r): (Vec<&Hold>, Vec<&Hold>) = all.into_iter().partition(|h| h.shared);
        out.extend(readers_and_writers(&name, &readers, &on_r));
        let mut latest: Option<&Hold> = None;
        for &h in &on_r {
            if let Some(prev) = latest {
                // Holds of one owner (re-entrant: the only holds that share a token) may overlap.
                if h.start < prev.end && h.token != prev.token {
                    out.push(Violation::Overlap { resource: name.clone(), first: prev.clone(), second: h.clone() });
                }
            }
            if latest.is_none_or(|p| h.end > p.end) {
                latest = Some(h);
            }
        }
        let fenced: Vec<&Hold> = on_r.iter().copied().filter(|h| h.fence.is_some()).collect();
        for (i, h) in fenced.iter().enumerate() {
            // Against every earlier holder (of another owner: the holds of one owner of a
            // re-entrant lock share its tokens, whichever of its holds got them).
            let earlier = fenced[..i].iter().rfind(|g| g.token != h.token && g.fence >= h.fence);
            if let Some(g) = earlier {
                out.push(Violation::FenceOrder { resource: name.clone(), first: (*g).clone(), second: (*h).clone() });
            }
        }
    }
    let mut semaphores: Vec<&Semaphore> = held.iter().filter_map(|h| h.semaphore.as_ref()).collect();
    semaphores.sort();
    semaphores.dedup();
    for sem in semaphores {
        let on_s: Vec<&Hold> = held.iter().copied().filter(|h| h.semaphore.as_ref() == Some(sem)).collect();
        out.extend(over_limit(sem, &on_s));
    }
    for h in held {
        if h.semaphore.is_none() {
            out.extend(overstated(h, nodes, dbs, quorum));
            continue;
        }
        for permit in &h.resources {
            let one = Hold { resources: vec![permit.clone()], ..h.clone() };
            out.extend(overstated(&one, nodes, dbs, quorum));
        }
    }
    out
}

/// The rules of a resource's readers (`readers`) against its writers (`writers`), both in
/// the order of their start: no reader overlaps a writer, and a reader's epoch is at least
/// the token of every writer whose hold ended before the reader's began.
fn readers_and_writers(name: &str, readers: &[&Hold], writers: &[&Hold]) -> Vec<Violation> {
    let mut out = Vec::new();
    for r in readers {
        for w in writers {
            if w.start < r.end && r.start < w.end {
                let (first, second) = if w.start <= r.start { (w, r) } else { (r, w) };
                out.push(Violation::Overlap {
                    resource: name.to_owned(),
                    first: (*first).clone(),
                    second: (*second).clone(),
                });
            } else if w.end <= r.start && r.fence.is_some() && w.fence.is_some() && r.fence < w.fence {
                out.push(Violation::Epoch { resource: name.to_owned(), writer: (*w).clone(), reader: (*r).clone() });
            }
        }
    }
    out
}

/// How many pairs of holds of one owner (re-entrant holds: they share the owner as token)
/// overlap on a resource.
pub(crate) fn reentries(holds: &[Hold]) -> u64 {
    let owned: Vec<&Hold> = holds.iter().filter(|h| h.end > h.start && h.token.starts_with(b"o")).collect();
    let mut n = 0;
    for (i, a) in owned.iter().enumerate() {
        for b in &owned[i + 1..] {
            n += u64::from(a.token == b.token && a.resources == b.resources && a.start < b.end && b.start < a.end);
        }
    }
    n
}

/// How many pairs of `holds` (readers of one resource) overlap.
pub(crate) fn reader_overlaps(holds: &[&Hold]) -> u64 {
    let mut n = 0;
    for (i, a) in holds.iter().enumerate() {
        for b in &holds[i + 1..] {
            n += u64::from(a.start < b.end && b.start < a.end && a.end > a.start && b.end > b.start);
        }
    }
    n
}

/// Whether `holds` (of semaphore `sem`: name, limit) ever have more permits at once than the
/// limit: the mutex's overlap rule with a count.
fn over_limit((name, limit): &Semaphore, holds: &[&Hold]) -> Option<Violation> {
    let (peak, at, live) = peak_permits(holds);
    (peak > u64::from(*limit)).then(|| Violation::OverLimit {
        semaphore: String::from_utf8_lossy(name).into_owned(),
        limit: *limit,
        at,
        holds: live.into_iter().cloned().collect(),
    })
}

/// The most permits `holds` have at once (each holds one per resource), the first instant
/// they do, and the holds then. Holds are `[start, end)`: one that ends when another starts
/// does not count with it.
pub(crate) fn peak_permits<'h>(holds: &[&'h Hold]) -> (u64, Time, Vec<&'h Hold>) {
    // (time, -permits at an end or +permits at a start, hold): ends sort before starts.
    let mut edges: Vec<(Time, i64, usize)> = Vec::new();
    for (i, h) in holds.iter().enumerate().filter(|(_, h)| h.end > h.start) {
        let permits = h.resources.len() as i64;
        edges.push((h.start, permits, i));
        edges.push((h.end, -permits, i));
    }
    edges.sort_unstable();
    let (mut count, mut peak) = (0, (0, 0, Vec::new()));
    let mut live: Vec<usize> = Vec::new();
    for (at, delta, i) in edges {
        count += delta;
        if delta < 0 {
            live.retain(|&l| l != i);
        } else {
            live.push(i);
            if count as u64 > peak.0 {
                peak = (count as u64, at, live.clone());
            }
        }
    }
    (peak.0, peak.1, peak.2.into_iter().map(|l| holds[l]).collect())
}

/// Whether, at some instant of `h`, fewer than `quorum` nodes held all its keys.
fn overstated(h: &Hold, nodes: &[&[Segment]], dbs: &[u32], quorum: usize) -> Option<Violation> {
    // A reader's keys on the nodes are its membership of each resource's readers. A writer's
    // are its lock keys, or its membership where its downgrade went through ahead of the
    // confirmation (still no other writer's, and the rule against readers is judged apart).
    let readers_of = |r: &Vec<u8>| [super::node::READERS_PREFIX, r].concat();
    let backs = |s: &Segment, r: &Vec<u8>| s.key == readers_of(r) || (!h.shared && s.key == *r);
    let ours = |n: usize, s: &&Segment| s.db == dbs[n] && s.token == h.token && h.resources.iter().any(|r| backs(s, r));
    let mut cuts = vec![h.start, h.end];
    for (n, segs) in nodes.iter().enumerate() {
        for s in segs.iter().filter(|s| ours(n, s)) {
            for t in [s.from, s.to] {
                if t > h.start && t < h.end {
                    cuts.push(t);
                }
            }
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    for w in cuts.windows(2) {
        let (from, to) = (w[0], w[1]);
        let count = nodes
            .iter()
            .enumerate()
            .filter(|(n, segs)| {
                h.resources
                    .iter()
                    .all(|r| segs.iter().any(|s| ours(*n, &s) && backs(s, r) && s.from <= from && s.to >= to))
            })
            .count();
        if count < quorum {
            return Some(Violation::Overstated { hold: h.clone(), from, to, nodes: count, quorum });
        }
    }
    None
}
