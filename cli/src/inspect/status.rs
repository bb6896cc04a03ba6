//! `redlease status`: who holds a key on each node and whether a quorum does (a writer, or
//! readers: which ones, for how long), and the occupancy of the semaphore of the same name when
//! the nodes record one.

use std::time::Duration;

use redlease_core::{NodeConfig, TlsSettings};
use redlease_servers::FENCE_PREFIX;

use super::fault::Fault;
use super::link::{Open, Served};
use super::readers::{self, Reader};
use super::semaphore::{self, Occupancy};
use super::verdict::{Verdict, pttl_text, unanswered};
use super::{json, ms, open_all, short};
use crate::Usage;
use crate::out::outln;

/// What one node said about a key.
struct NodeState {
    /// The holder's token.
    holder: Option<String>,
    /// A waiter was refused by this holder: the key's value is the token followed by `:`.
    waited_for: bool,
    /// When readers hold the key: the live ones, the one expiring last first.
    readers: Option<Vec<Reader>>,
    pttl: i64,
    fence: Option<String>,
    /// The round trip of a `PING` on the connection that read the key.
    rtt: Duration,
    /// On a Redis Cluster node: the master that serves the key's slot.
    served: Option<Served>,
    /// On a Sentinel-managed node: what its sentinels said (text, JSON).
    sentinel: Option<(String, String)>,
}

/// What the node `open` says of `key`: on a Redis Cluster, the master serving the slot of its
/// cluster form says it, with the fence counter and readers named after that form.
fn node_state(open: &mut Open, key: &str) -> Result<NodeState, Fault> {
    let stored = open.stored(key)?;
    let value = open.on(&stored, |c| c.get(&stored))?;
    let pttl = open.on(&stored, |c| c.pttl(&stored))?;
    let fence_key = format!("{FENCE_PREFIX}{stored}");
    let fence = open.on(&fence_key, |c| c.get(&fence_key))?;
    let (mut holder, waited_for) = match value.as_deref().map(redlease_core::holder_of) {
        Some((token, waited_for)) => (Some(token.to_owned()), waited_for),
        None => (None, false),
    };
    let sole = holder.as_deref().and_then(redlease_core::sole_reader).map(str::to_owned);
    let readers = if let Some(token) = sole {
        // A reader alone: its time left is the key's; the nodes agree on "readers" whatever
        // their form.
        holder = Some(redlease_core::READERS_VALUE.to_owned());
        Some(vec![Reader { token, left_ms: pttl }])
    } else if readers::is_readers(holder.as_deref()) {
        let set = readers::set_of(&stored);
        Some(open.on(&set, |c| readers::read(c, &set))?)
    } else {
        None
    };
    let sentinel = open.sentinel.as_ref().map(|s| (s.text(), s.json()));
    let (rtt, served) = (open.rtt_of(&stored), open.served(&stored));
    Ok(NodeState { holder, waited_for, readers, pttl, fence, rtt, served, sentinel })
}

/// Per node: reachable, holder token (shortened) or readers, PTTL, fencing counter; then the
/// verdict; and the semaphore `name`'s permits when the nodes record a limit for it. Exit 0
/// when a quorum of nodes answered, [`EXIT_UNAVAILABLE`] otherwise.
pub(crate) fn status(
    key_prefix: &str,
    name: &str,
    nodes: Option<&str>,
    tls: TlsSettings,
    json: bool,
) -> Result<u8, Usage> {
    let key = format!("{key_prefix}{name}");
    let (nodes, mut conns) = open_all(nodes, tls)?;
    let states: Vec<Result<NodeState, Fault>> = conns
        .iter_mut()
        .map(|c| match c {
            Ok(open) => node_state(open, &key),
            Err(e) => Err(e.clone()),
        })
        .collect();
    let sem = semaphore::read(&mut conns, key_prefix, name);
    let verdict = verdict_of(&states);
    if json {
        print_status_json(&key, &nodes, &states, &verdict, sem.as_ref());
        return Ok(verdict.code());
    }
    // A name used as a semaphore only: its permits, without a table of its free mutex key.
    let mutex_used = states.iter().any(|s| s.as_ref().is_ok_and(|s| s.holder.is_some()));
    if sem.is_none() || mutex_used {
        print_status_text(&key, &nodes, &states, &verdict);
    }
    if let Some(sem) = &sem {
        semaphore::print_text(sem, &nodes);
    }
    print_reachable(&verdict);
    Ok(verdict.code())
}

/// `status --json`: one object, with one object per node, the semaphore of the name (`null`
/// when no node records one) and the key's readers (`null` when no node holds it for readers).
fn print_status_json(
    key: &str,
    nodes: &[NodeConfig],
    states: &[Result<NodeState, Fault>],
    verdict: &Verdict<'_>,
    sem: Option<&Occupancy>,
) {
    let per_node: Vec<String> = nodes
        .iter()
        .zip(states)
        .enumerate()
        .map(|(i, (node, state))| {
            let head = format!("\"node\":{i},\"url\":{}", json::string(&node.to_string()));
            match state {
                Err(e) => format!(
                    "{{{head},\"reachable\":false,\"fault\":\"{}\",\"error\":{}}}",
                    e.kind().as_str(),
                    json::string(e.text())
                ),
                Ok(s) => format!(
                    "{{{head},\"reachable\":true,\"holder\":{},\"shared\":{},\"waited_for\":{},\"pttl_ms\":{},\"fence\":{},\"rtt_ms\":{}{}}}",
                    // Readers are in `readers`; the key's value for them is no holder.
                    json::opt_string(s.holder.as_deref().filter(|_| s.readers.is_none())),
                    s.readers.is_some(),
                    s.waited_for,
                    json::opt_number(s.holder.as_ref().map(|_| s.pttl)),
                    json::opt_number(s.fence.as_deref().and_then(|f| f.parse::<u64>().ok())),
                    ms(s.rtt),
                    s.served.as_ref().map_or_else(String::new, |c| format!(",\"cluster\":{}", served_json(c)))
                        + &s.sentinel.as_ref().map_or_else(String::new, |(_, j)| format!(",\"sentinel\":{j}")),
                ),
            }
        })
        .collect();
    let Verdict { quorum, reachable, tolerance, best, .. } = verdict;
    let on = reading(states);
    let whole = Whole::of(verdict, &on, sem);
    let readers = if on.is_empty() { "null".to_owned() } else { readers::json(*quorum, &on) };
    let holders: Vec<String> = whole.holders.iter().map(|t| json::string(t)).collect();
    outln!(
        "{{\"key\":{},\"quorum\":{quorum},\"reachable\":{reachable},\"fault_tolerance\":{tolerance},\"state\":\"{}\",\"held\":{},\"shape\":{},\"holder\":{},\"holders\":[{}],\"holder_nodes\":{},\"nodes\":[{}],\"semaphore\":{},\"readers\":{readers}}}",
        json::string(key),
        whole.state,
        if whole.state == "unknown" { "null".to_owned() } else { (whole.state == "held").to_string() },
        json::opt_string(whole.shape),
        json::opt_string(whole.holder),
        holders.join(","),
        best.map_or(0, |(count, _)| count),
        per_node.join(","),
        sem.map_or_else(|| "null".to_owned(), semaphore::json),
    );
}

/// The name as a whole, for `status --json`'s top level: held by a writer (`exclusive`), by
/// readers (`shared`), or by permits of its semaphore (`semaphore`: at least one permit held on
/// a quorum), and by which tokens.
struct Whole<'a> {
    /// `held`, `not_held` or `unknown` (too few nodes answered to tell).
    state: &'static str,
    /// `exclusive`, `shared` or `semaphore`; `None` for a name no quorum holds that is no
    /// semaphore.
    shape: Option<&'static str>,
    /// The writer's token (`exclusive` only).
    holder: Option<&'a str>,
    /// Every token that holds it: the writer, the readers on a quorum, the permits' holders.
    holders: Vec<&'a str>,
}

impl<'a> Whole<'a> {
    fn of(verdict: &Verdict<'a>, on: &[readers::OnNode<'a>], sem: Option<&'a Occupancy>) -> Self {
        match verdict.held_by {
            Some(token) if readers::is_readers(Some(token)) => {
                let (holders, _) = readers::on_quorum(on.iter().map(|n| n.readers), verdict.quorum);
                return Whole { state: "held", shape: Some("shared"), holder: None, holders };
            }
            Some(token) => {
                return Whole { state: "held", shape: Some("exclusive"), holder: Some(token), holders: vec![token] };
            }
            None => {}
        }
        let Some(sem) = sem else {
            return Whole { state: verdict.state(), shape: None, holder: None, holders: Vec::new() };
        };
        let (holders, unknown) = sem.holders();
        let state = if !holders.is_empty() {
            "held"
        } else if unknown > 0 || verdict.state() == "unknown" {
            "unknown"
        } else {
            "not_held"
        };
        Whole { state, shape: Some("semaphore"), holder: None, holders }
    }
}

/// The nodes that hold the key for readers, with their readers.
fn reading(states: &[Result<NodeState, Fault>]) -> Vec<readers::OnNode<'_>> {
    let mut on = Vec::new();
    for (node, state) in states.iter().enumerate() {
        if let Ok(NodeState { readers: Some(readers), waited_for, .. }) = state {
            on.push(readers::OnNode { node, readers, writer_waits: *waited_for });
        }
    }
    on
}

/// `status`: a line per node (and one per reader it has), then who holds the key.
fn print_status_text(key: &str, nodes: &[NodeConfig], states: &[Result<NodeState, Fault>], verdict: &Verdict<'_>) {
    for (i, (node, state)) in nodes.iter().zip(states).enumerate() {
        let line = match state {
            Err(e) => unanswered(e),
            Ok(NodeState { holder: None, rtt, .. }) => format!("reachable    rtt {} ms  free", ms(*rtt)),
            Ok(NodeState { readers: Some(readers), waited_for, pttl, rtt, .. }) => {
                let waits = if *waited_for { "  a writer waits" } else { "" };
                let n = readers::count(readers.len());
                format!("reachable    rtt {} ms  read by {n}  {}{waits}", ms(*rtt), pttl_text(*pttl))
            }
            Ok(NodeState { holder: Some(token), waited_for, pttl, rtt, .. }) => {
                let waited = if *waited_for { "  waited for" } else { "" };
                format!("reachable    rtt {} ms  held by {}  {}{waited}", ms(*rtt), short(token), pttl_text(*pttl))
            }
        };
        let fence = match state {
            Ok(NodeState { fence: Some(f), .. }) => format!("  fence {f}"),
            _ => String::new(),
        };
        let served = match state {
            Ok(NodeState { served: Some(c), .. }) => format!("  ({})", served_text(c)),
            _ => String::new(),
        };
        outln!("node {i} {node}  {line}{fence}{served}");
        if let Ok(NodeState { sentinel: Some((text, _)), .. }) = state {
            outln!("  {text}");
        }
        for r in state.as_ref().ok().and_then(|s| s.readers.as_deref()).unwrap_or_default() {
            outln!("  reader {}  {}ms left", short(&r.token), r.left_ms);
        }
    }
    let Verdict { nodes, quorum, reachable, .. } = verdict;
    match (verdict.best, verdict.held_by) {
        (Some((count, _)), Some(token)) if readers::is_readers(Some(token)) => {
            outln!("{}", readers::summary(key, verdict, count, &reading(states)))
        }
        (Some((count, _)), Some(token)) => {
            outln!("{key}: held by {} on {count} of {nodes} nodes (quorum {quorum})", short(token))
        }
        _ if verdict.state() == "unknown" => {
            outln!("{key}: unknown: {reachable} of {nodes} nodes answered, too few to tell whether a quorum holds it")
        }
        (Some((count, _)), None) => outln!("{key}: no quorum holds it (at most {count} of {nodes} nodes agree)"),
        (None, _) => outln!("{key}: free on every reachable node"),
    }
}

/// Where a Redis Cluster node keeps a key, as the tables say it.
fn served_text(c: &Served) -> String {
    format!("Redis Cluster: slot {} on master {}, one of {}", c.slot, c.master, c.masters)
}

/// `status --json`'s `cluster` member of a Redis Cluster node (standalone nodes have none).
fn served_json(c: &Served) -> String {
    format!("{{\"master\":{},\"slot\":{},\"masters\":{}}}", json::string(&c.master), c.slot, c.masters)
}

/// The last line: how many nodes answered, and how many more may fail.
fn print_reachable(verdict: &Verdict<'_>) {
    let Verdict { nodes, quorum, reachable, tolerance, .. } = verdict;
    if verdict.code() != 0 {
        outln!("only {reachable} of {nodes} nodes answered: no quorum ({quorum}) is reachable");
    } else {
        outln!(
            "{reachable} of {nodes} nodes reachable, quorum {quorum}: {tolerance} more may fail before locking stops"
        );
    }
}

/// The verdict of the nodes' states.
fn verdict_of(states: &[Result<NodeState, Fault>]) -> Verdict<'_> {
    let reachable = states.iter().filter(|s| s.is_ok()).count();
    let holders = states.iter().filter_map(|s| s.as_ref().ok()?.holder.as_deref()).collect();
    Verdict::of_holders(states.len(), reachable, holders)
}
