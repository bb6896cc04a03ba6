//! `redlease status` on a semaphore: the limit each node recorded, who holds each permit on
//! each node, and which permits a quorum holds (each permit is a mutex of its own).

use std::time::Duration;

use redlease_core::{MAX_PERMITS, NodeConfig};
use redlease_servers::FENCE_PREFIX;

use super::fault::Fault;
use super::link::Open;
use super::verdict::{Verdict, pttl_text, unanswered};
use super::{json, ms, short};
use crate::out::outln;
use crate::permits::{limit_key, permit_key};

/// One permit on one node.
struct Permit {
    /// The holder's token.
    holder: Option<String>,
    /// A waiter was refused by this holder (the value carries the `:` mark).
    waited_for: bool,
    pttl: i64,
    /// The permit's fencing counter.
    fence: Option<u64>,
}

/// What one node records of the semaphore.
struct OnNode {
    /// The limit recorded, as the node has it (`None`: none yet).
    limit: Option<String>,
    /// Permits `0..width`.
    permits: Vec<Permit>,
    rtt: Duration,
}

impl OnNode {
    /// The permit numbers this node has a holder for.
    fn held(&self) -> Vec<usize> {
        self.permits.iter().enumerate().filter(|(_, s)| s.holder.is_some()).map(|(k, _)| k).collect()
    }
}

/// A semaphore as the nodes record it.
pub(super) struct Occupancy {
    name: String,
    /// The limit most nodes recorded (the largest of equally common ones).
    limit: u32,
    /// Permits read on each node: up to the largest limit any node recorded.
    width: u32,
    nodes: Vec<Result<OnNode, Fault>>,
}

/// Read the semaphore `name` on every node that answered; `None` when no node records a limit
/// for it (no semaphore of that name was used on these nodes). On a Redis Cluster node, the
/// master serving the hash slot of its name's tag answers (the limit key is stored as it is).
pub(super) fn read(conns: &mut [Result<Open, Fault>], key_prefix: &str, name: &str) -> Option<Occupancy> {
    let limit_key = limit_key(key_prefix, name);
    let limits: Vec<Result<Option<String>, Fault>> = conns
        .iter_mut()
        .map(|c| {
            let open = c.as_mut().map_err(|e| e.clone())?;
            open.on(&limit_key, |c| c.get(&limit_key))
        })
        .collect();
    let mut recorded: Vec<u32> =
        limits.iter().filter_map(|l| l.as_ref().ok()?.as_deref()?.parse().ok()).filter(|&l| l > 0).collect();
    let width = recorded.iter().copied().max()?.min(MAX_PERMITS);
    recorded.sort_unstable();
    let limit = recorded.chunk_by(|a, b| a == b).map(|c| (c.len(), c[0])).max()?.1;
    let nodes = conns
        .iter_mut()
        .zip(limits)
        .map(|(c, limit)| {
            let open = c.as_mut().map_err(|e| e.clone())?;
            let permits = read_permits(open, key_prefix, name, width)?;
            Ok(OnNode { limit: limit?, permits, rtt: open.rtt_of(&limit_key) })
        })
        .collect();
    Some(Occupancy { name: name.to_owned(), limit, width, nodes })
}

/// Permits `0..width` on one node: holder, PTTL (of the held ones) and fencing counter (each
/// permit key in the form the node stores it).
fn read_permits(open: &mut Open, key_prefix: &str, name: &str, width: u32) -> Result<Vec<Permit>, Fault> {
    let keys: Vec<String> =
        (0..width).map(|k| open.stored(&permit_key(key_prefix, name, k))).collect::<Result<_, _>>()?;
    let fence_keys: Vec<String> = keys.iter().map(|k| format!("{FENCE_PREFIX}{k}")).collect();
    let values = open.mget(&keys)?;
    let fences = open.mget(&fence_keys)?;
    let mut permits = Vec::with_capacity(keys.len());
    for ((key, value), fence) in keys.iter().zip(values).zip(fences) {
        let (holder, waited_for) = match value.as_deref().map(redlease_core::holder_of) {
            Some((token, waited_for)) => (Some(token.to_owned()), waited_for),
            None => (None, false),
        };
        let pttl = if holder.is_some() { open.on(key, |c| c.pttl(key))? } else { -2 };
        permits.push(Permit { holder, waited_for, pttl, fence: fence.and_then(|f| f.parse().ok()) });
    }
    Ok(permits)
}

impl Occupancy {
    /// The verdict on permit `k`, as on a mutex key.
    fn verdict(&self, k: usize) -> Verdict<'_> {
        let reachable = self.nodes.iter().filter(|n| n.is_ok()).count();
        let holders = self.nodes.iter().filter_map(|n| n.as_ref().ok()?.permits.get(k)?.holder.as_deref()).collect();
        Verdict::of_holders(self.nodes.len(), reachable, holders)
    }

    /// The permits some node has a holder for, ascending.
    fn used(&self) -> Vec<usize> {
        (0..self.width as usize)
            .filter(|&k| self.nodes.iter().any(|n| n.as_ref().is_ok_and(|n| n.permits[k].holder.is_some())))
            .collect()
    }

    /// Of the limit's permits: those a quorum holds, and how many cannot be told (too few nodes
    /// answered); the others are free.
    fn counts(&self) -> (Vec<usize>, usize) {
        let states: Vec<(usize, &str)> = (0..self.limit as usize).map(|k| (k, self.verdict(k).state())).collect();
        let held = states.iter().filter(|(_, s)| *s == "held").map(|(k, _)| *k).collect();
        (held, states.iter().filter(|(_, s)| *s == "unknown").count())
    }

    /// The tokens that hold a permit on a quorum of nodes (ascending, each once), and how many
    /// permits cannot be told.
    pub(super) fn holders(&self) -> (Vec<&str>, usize) {
        let (held, unknown) = self.counts();
        let mut tokens: Vec<&str> = held.into_iter().filter_map(|k| self.verdict(k).held_by).collect();
        tokens.sort_unstable();
        tokens.dedup();
        (tokens, unknown)
    }

    /// Permit `k` on the nodes whose holder is `token`: the `(node, permit)` pairs.
    fn holding<'s>(&'s self, k: usize, token: &'s str) -> impl Iterator<Item = (usize, &'s Permit)> + 's {
        self.nodes.iter().enumerate().filter_map(move |(i, n)| {
            let permit = n.as_ref().ok()?.permits.get(k)?;
            (permit.holder.as_deref() == Some(token)).then_some((i, permit))
        })
    }

    /// The distinct limits the nodes recorded, each with the nodes that have it, when they
    /// differ.
    fn disagreement(&self) -> Option<Vec<(&str, Vec<usize>)>> {
        let mut by_limit: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, limit) in
            self.nodes.iter().enumerate().filter_map(|(i, n)| Some((i, n.as_ref().ok()?.limit.as_deref()?)))
        {
            match by_limit.iter_mut().find(|(l, _)| *l == limit) {
                Some((_, nodes)) => nodes.push(i),
                None => by_limit.push((limit, vec![i])),
            }
        }
        (by_limit.len() > 1).then_some(by_limit)
    }
}

/// `status` on a semaphore: a line per node (its limit and the permits it has holders for), a
/// line per permit that some node holds, then the occupancy.
pub(super) fn print_text(sem: &Occupancy, nodes: &[NodeConfig]) {
    for (i, (node, on)) in nodes.iter().zip(&sem.nodes).enumerate() {
        let line = match on {
            Err(e) => unanswered(e),
            Ok(on) => {
                let limit =
                    on.limit.as_deref().map_or_else(|| "no limit recorded".to_owned(), |l| format!("limit {l}"));
                let held = match on.held().as_slice() {
                    [] => "holds no permit".to_owned(),
                    held => format!("holds {}", permits(held)),
                };
                format!("reachable    rtt {} ms  {limit}  {held}", ms(on.rtt))
            }
        };
        outln!("node {i} {node}  {line}");
    }
    for k in sem.used() {
        outln!("  permit {k}  {}", permit_line(sem, k));
    }
    let (held, unknown) = sem.counts();
    let free = sem.limit as usize - held.len() - unknown;
    let which = if held.is_empty() { String::new() } else { format!(" ({})", permits(&held)) };
    let unknown = if unknown > 0 { format!(", {unknown} unknown (too few nodes answered)") } else { String::new() };
    outln!("{}: semaphore of {} permits: {} held{which}, {free} free{unknown}", sem.name, sem.limit, held.len());
    if let Some(limits) = sem.disagreement() {
        let each: Vec<String> = limits.iter().map(|(l, nodes)| format!("{l} on node(s) {}", list(nodes))).collect();
        outln!(
            "limits differ across nodes ({}): a run is refused (exit 78) by the nodes whose limit is not its --permits",
            each.join("; ")
        );
    }
}

/// Permit `k`'s line: who holds it on how many nodes, its PTTL (the shortest among them), and
/// its waited-for mark and fencing counter.
fn permit_line(sem: &Occupancy, k: usize) -> String {
    let v = sem.verdict(k);
    let (nodes, quorum) = (v.nodes, v.quorum);
    match (v.best, v.held_by) {
        (_, Some(token)) => {
            let holding: Vec<&Permit> = sem.holding(k, token).map(|(_, s)| s).collect();
            let pttl = holding.iter().map(|s| s.pttl).min().unwrap_or(-2);
            let count = holding.len();
            let waited = if holding.iter().any(|s| s.waited_for) { "  waited for" } else { "" };
            let fence =
                holding.iter().filter_map(|s| s.fence).max().map_or_else(String::new, |f| format!("  fence {f}"));
            format!(
                "held by {} on {count} of {nodes} nodes (quorum {quorum})  {}{waited}{fence}",
                short(token),
                pttl_text(pttl)
            )
        }
        _ if v.state() == "unknown" => "unknown: too few nodes answered to tell whether a quorum holds it".to_owned(),
        (Some((count, token)), None) => {
            format!("not held: at most {count} of {nodes} nodes agree ({}), quorum {quorum}", short(token))
        }
        (None, None) => "free".to_owned(),
    }
}

/// Numbers as the tables list them: `0,2`.
fn list(numbers: &[usize]) -> String {
    numbers.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// Permit numbers in a sentence: `permit 2`, `permits 0,2`.
fn permits(numbers: &[usize]) -> String {
    if numbers.len() == 1 { format!("permit {}", numbers[0]) } else { format!("permits {}", list(numbers)) }
}

/// `status --json`'s `semaphore` object: the limit (most nodes') and each node's, the counts,
/// and each permit that some node holds: its state, its holder when a quorum agrees, and each
/// node that has a holder for it.
pub(super) fn json(sem: &Occupancy) -> String {
    let limits: Vec<String> = sem
        .nodes
        .iter()
        .map(|n| json::opt_number(n.as_ref().ok().and_then(|n| n.limit.as_deref()?.parse::<u32>().ok())))
        .collect();
    let permits: Vec<String> = sem
        .used()
        .into_iter()
        .map(|k| {
            let v = sem.verdict(k);
            let nodes: Vec<String> = sem
                .nodes
                .iter()
                .enumerate()
                .filter_map(|(i, n)| Some((i, n.as_ref().ok()?.permits.get(k)?)))
                .filter_map(|(i, s)| {
                    Some(format!(
                        "{{\"node\":{i},\"holder\":{},\"waited_for\":{},\"pttl_ms\":{},\"fence\":{}}}",
                        json::string(s.holder.as_deref()?),
                        s.waited_for,
                        s.pttl,
                        json::opt_number(s.fence)
                    ))
                })
                .collect();
            format!(
                "{{\"permit\":{k},\"state\":\"{}\",\"holder\":{},\"holder_nodes\":{},\"nodes\":[{}]}}",
                v.state(),
                json::opt_string(v.held_by),
                v.best.map_or(0, |(count, _)| count),
                nodes.join(",")
            )
        })
        .collect();
    let (held, unknown) = sem.counts();
    let free = sem.limit as usize - held.len() - unknown;
    format!(
        "{{\"name\":{},\"limit\":{},\"limits\":[{}],\"held\":{},\"free\":{free},\"unknown\":{unknown},\"permits\":[{}]}}",
        json::string(&sem.name),
        sem.limit,
        limits.join(","),
        held.len(),
        permits.join(",")
    )
}
