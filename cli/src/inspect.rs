//! `redlease cluster`, `redlease status` and `redlease scan`.

use std::time::{Duration, Instant};

use redlease_client::adapter::NodeTransport;
use redlease_cluster::{Cluster, FENCE_PREFIX, RedisConn};
use redlease_core::{NodeConfig, TlsSettings};

use crate::connect::{nodes_of, open};
use crate::out::outln;
use crate::{EXIT_UNAVAILABLE, Usage};

/// Start `n` local nodes in the foreground until Ctrl-C.
pub(crate) async fn cluster(n: usize, port: Option<u16>, persist: bool, tls: bool) -> Result<u8, Usage> {
    if n == 0 {
        return Err(Usage("--nodes 0: a cluster needs at least one node (Redlock wants 3 or 5)".into()));
    }
    if let Some(p) = port {
        if p as usize + n > 65536 {
            return Err(Usage(format!("--port {p}: {n} nodes from there run past port 65535")));
        }
    }
    let mut builder = Cluster::builder().nodes(n).persist(persist);
    if tls {
        builder = builder.listen(redlease_cluster::Listen::Tls);
    }
    if let Some(p) = port {
        builder = builder.base_port(p);
    }
    let cluster = tokio::task::spawn_blocking(move || builder.try_start())
        .await
        .map_err(|e| Usage(format!("starting the nodes failed: {e}")))?
        .map_err(Usage)?;
    for node in cluster.nodes() {
        outln!("node {}: {} (pid {})", node.index(), node.url(), node.pid().unwrap_or(0));
    }
    outln!("export REDLEASE_NODES={}", cluster.urls().join(","));
    #[cfg(feature = "tls")]
    if let Some(files) = cluster.tls() {
        outln!("export REDLEASE_TLS_CA={}", files.ca.display());
        outln!(
            "# client certificate, for nodes that require one: REDLEASE_TLS_CERT={} REDLEASE_TLS_KEY={}",
            files.client_cert.display(),
            files.client_key.display()
        );
    }
    outln!(
        "{} node(s) running{}; press Ctrl-C to stop them.",
        n,
        if persist { " with appendfsync always" } else { "" }
    );
    // Runs until the caller's SIGINT/SIGTERM handler ends this future; dropping the future
    // drops the cluster, which stops every node.
    let _nodes = StopOnDrop(cluster);
    std::future::pending::<()>().await;
    Ok(0)
}

/// Owns the running nodes; stops them, and says so, when dropped.
struct StopOnDrop(Cluster);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        outln!("stopping {} node(s).", self.0.len());
    }
}

/// What one node said about a key.
struct NodeState {
    /// The holder's token.
    holder: Option<String>,
    /// A waiter was refused by this holder: the key's value is the token followed by `:`.
    waited_for: bool,
    pttl: i64,
    fence: Option<String>,
    /// The round trip of a `PING` on the open connection.
    rtt: Duration,
}

/// What a Redis Cluster node given as a node is told (the clients refuse it the same way).
const CLUSTER_NODE: &str = "the node is a Redis Cluster node (INFO says cluster_enabled:1): redlease needs standalone \
                            masters (or replicas' primaries); give one standalone Redis per node";

/// Open a connection to `node` and refuse it if it is a Redis Cluster node, whose keys live on
/// other nodes too (a node whose ACL refuses `INFO` is taken as standalone).
fn open_standalone(node: &NodeConfig, how: &NodeTransport) -> Result<RedisConn, String> {
    let mut c = open(node, how)?;
    let info = c.cmd(&["INFO", "cluster"]).ok().and_then(|r| r.as_text()).unwrap_or_default();
    if info.lines().any(|l| l.trim() == "cluster_enabled:1") {
        return Err(CLUSTER_NODE.to_owned());
    }
    Ok(c)
}

fn node_state(node: &NodeConfig, how: &NodeTransport, key: &str) -> Result<NodeState, String> {
    let mut c = open_standalone(node, how)?;
    let started = Instant::now();
    c.cmd(&["PING"]).map_err(|e| e.to_string())?;
    let rtt = started.elapsed();
    let value = c.get(key).map_err(|e| e.to_string())?;
    let pttl = c.pttl(key).map_err(|e| e.to_string())?;
    let fence = c.get(&format!("{FENCE_PREFIX}{key}")).map_err(|e| e.to_string())?;
    let (holder, waited_for) = match value.as_deref().map(redlease_core::holder_of) {
        Some((token, waited_for)) => (Some(token.to_owned()), waited_for),
        None => (None, false),
    };
    Ok(NodeState { holder, waited_for, pttl, fence, rtt })
}

/// Why a node did not answer, as a kind: refused for a configuration reason (a wrong
/// password, user or database, a TLS certificate that does not verify, a Redis Cluster node:
/// an operator must act) or out of reach.
fn fault_of(error: &str) -> &'static str {
    let e = error.to_ascii_uppercase();
    let config = [
        "WRONGPASS",
        "NOAUTH",
        "NOPERM",
        "INVALID PASSWORD",
        "INVALID DB",
        "DB INDEX",
        "AUTH",
        "INVALID PEER CERTIFICATE",
        "DID NOT ANSWER TLS",
        "REDIS CLUSTER NODE",
    ];
    if config.iter().any(|c| e.contains(c)) { "misconfigured" } else { "unreachable" }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// Per node: reachable, holder token (shortened), PTTL, fencing counter; then the verdict.
/// Exit 0 when a quorum of nodes answered, [`EXIT_UNAVAILABLE`] otherwise.
pub(crate) fn status(key: &str, nodes: Option<&str>, tls: TlsSettings, json: bool) -> Result<u8, Usage> {
    let (nodes, transports): (Vec<NodeConfig>, Vec<NodeTransport>) = nodes_of(nodes, tls)?.into_iter().unzip();
    let states: Vec<Result<NodeState, String>> =
        nodes.iter().zip(&transports).map(|(n, how)| node_state(n, how, key)).collect();
    let verdict = Verdict::of(&states);
    if json {
        print_status_json(key, &nodes, &states, &verdict);
    } else {
        print_status_text(key, &nodes, &states, &verdict);
    }
    Ok(verdict.code())
}

/// What the nodes said about a key, taken together.
struct Verdict<'a> {
    nodes: usize,
    quorum: usize,
    reachable: usize,
    /// The token held on the most nodes, and on how many.
    best: Option<(usize, &'a str)>,
    /// That token, when a quorum of nodes holds it.
    held_by: Option<&'a str>,
    /// How many more nodes may fail before no quorum is left.
    tolerance: usize,
}

impl<'a> Verdict<'a> {
    fn of(states: &'a [Result<NodeState, String>]) -> Self {
        let quorum = states.len() / 2 + 1;
        let reachable = states.iter().filter(|s| s.is_ok()).count();
        let mut holders: Vec<&str> = states.iter().filter_map(|s| s.as_ref().ok()?.holder.as_deref()).collect();
        holders.sort();
        let best = holders.chunk_by(|a, b| a == b).map(|c| (c.len(), c[0])).max();
        let held_by = best.filter(|(count, _)| *count >= quorum).map(|(_, token)| token);
        let tolerance = reachable.saturating_sub(quorum);
        Verdict { nodes: states.len(), quorum, reachable, best, held_by, tolerance }
    }

    /// Whether a quorum holds the key (`held`), cannot hold it whatever the nodes that did not
    /// answer say (`not_held`), or too few nodes answered to tell (`unknown`).
    fn state(&self) -> &'static str {
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
    fn code(&self) -> u8 {
        if self.reachable >= self.quorum { 0 } else { EXIT_UNAVAILABLE }
    }
}

/// `status --json`: one object, with one object per node.
fn print_status_json(key: &str, nodes: &[NodeConfig], states: &[Result<NodeState, String>], verdict: &Verdict<'_>) {
    let per_node: Vec<String> = nodes
        .iter()
        .zip(states)
        .enumerate()
        .map(|(i, (node, state))| {
            let head = format!("\"node\":{i},\"url\":{}", json::string(&node.to_string()));
            match state {
                Err(e) => format!(
                    "{{{head},\"reachable\":false,\"fault\":\"{}\",\"error\":{}}}",
                    fault_of(e),
                    json::string(e)
                ),
                Ok(s) => format!(
                    "{{{head},\"reachable\":true,\"holder\":{},\"waited_for\":{},\"pttl_ms\":{},\"fence\":{},\"rtt_ms\":{}}}",
                    json::opt_string(s.holder.as_deref()),
                    s.waited_for,
                    if s.holder.is_some() { s.pttl.to_string() } else { "null".into() },
                    s.fence.as_deref().and_then(|f| f.parse::<u64>().ok()).map_or("null".into(), |f| f.to_string()),
                    ms(s.rtt),
                ),
            }
        })
        .collect();
    let Verdict { quorum, reachable, tolerance, held_by, best, .. } = verdict;
    let state = verdict.state();
    outln!(
        "{{\"key\":{},\"quorum\":{quorum},\"reachable\":{reachable},\"fault_tolerance\":{tolerance},\"state\":\"{state}\",\"held\":{},\"holder\":{},\"holder_nodes\":{},\"nodes\":[{}]}}",
        json::string(key),
        if state == "unknown" { "null".to_owned() } else { held_by.is_some().to_string() },
        json::opt_string(*held_by),
        best.map_or(0, |(count, _)| count),
        per_node.join(",")
    );
}

/// `status`: a line per node, then who holds the key and how many nodes may still fail.
fn print_status_text(key: &str, nodes: &[NodeConfig], states: &[Result<NodeState, String>], verdict: &Verdict<'_>) {
    for (i, (node, state)) in nodes.iter().zip(states).enumerate() {
        let line = match state {
            Err(e) if fault_of(e) == "misconfigured" => format!("MISCONFIGURED  ({e})"),
            Err(e) => format!("unreachable  ({e})"),
            Ok(NodeState { holder: None, rtt, .. }) => format!("reachable    rtt {} ms  free", ms(*rtt)),
            Ok(NodeState { holder: Some(token), waited_for, pttl, rtt, .. }) => {
                let ttl = if *pttl >= 0 { format!("pttl {pttl}ms") } else { "NO TTL (leak)".to_owned() };
                let waited = if *waited_for { "  waited for" } else { "" };
                format!("reachable    rtt {} ms  held by {}  {ttl}{waited}", ms(*rtt), short(token))
            }
        };
        let fence = match state {
            Ok(NodeState { fence: Some(f), .. }) => format!("  fence {f}"),
            _ => String::new(),
        };
        outln!("node {i} {node}  {line}{fence}");
    }
    let Verdict { nodes, quorum, reachable, tolerance, .. } = verdict;
    match (verdict.best, verdict.held_by) {
        (Some((count, _)), Some(token)) => {
            outln!("{key}: held by {} on {count} of {nodes} nodes (quorum {quorum})", short(token))
        }
        _ if verdict.state() == "unknown" => {
            outln!("{key}: unknown: {reachable} of {nodes} nodes answered, too few to tell whether a quorum holds it")
        }
        (Some((count, _)), None) => outln!("{key}: no quorum holds it (at most {count} of {nodes} nodes agree)"),
        (None, _) => outln!("{key}: free on every reachable node"),
    }
    if verdict.code() != 0 {
        outln!("only {reachable} of {nodes} nodes answered: no quorum ({quorum}) is reachable");
    } else {
        outln!(
            "{reachable} of {nodes} nodes reachable, quorum {quorum}: {tolerance} more may fail before locking stops"
        );
    }
}

fn short(token: &str) -> String {
    if token.len() > 12 { format!("{}…", &token[..12]) } else { token.to_owned() }
}

/// Keys without a TTL on any node: exit 1 if there are any, else [`EXIT_UNAVAILABLE`] if a
/// node did not answer, else 0.
pub(crate) fn scan(nodes: Option<&str>, tls: TlsSettings, pattern: &str, json: bool) -> Result<u8, Usage> {
    let (nodes, transports): (Vec<NodeConfig>, Vec<NodeTransport>) = nodes_of(nodes, tls)?.into_iter().unzip();
    let found: Vec<Result<Vec<String>, String>> =
        nodes.iter().zip(&transports).map(|(node, how)| keys_without_ttl(node, how, pattern)).collect();
    let leaks: usize = found.iter().filter_map(|f| f.as_ref().ok()).map(Vec::len).sum();
    let unreachable = found.iter().filter(|f| f.is_err()).count();
    if json {
        print_scan_json(pattern, &nodes, &found, leaks, unreachable);
    } else {
        print_scan_text(pattern, &nodes, &found, leaks, unreachable);
    }
    Ok(if leaks > 0 {
        1
    } else if unreachable > 0 {
        EXIT_UNAVAILABLE
    } else {
        0
    })
}

/// The keys matching `pattern` on one node that have no TTL, fencing counters and the lock
/// format key left out.
fn keys_without_ttl(node: &NodeConfig, how: &NodeTransport, pattern: &str) -> Result<Vec<String>, String> {
    let mut c = open_standalone(node, how)?;
    let keys = c.keys(pattern).map_err(|e| e.to_string())?;
    let mut no_ttl = Vec::new();
    for k in keys.into_iter().filter(|k| !k.starts_with(FENCE_PREFIX) && k != redlease_core::FORMAT_KEY) {
        if c.pttl(&k).map_err(|e| e.to_string())? == -1 {
            no_ttl.push(k);
        }
    }
    Ok(no_ttl)
}

/// `scan --json`: one object, with one object per node.
fn print_scan_json(
    pattern: &str,
    nodes: &[NodeConfig],
    found: &[Result<Vec<String>, String>],
    leaks: usize,
    unreachable: usize,
) {
    let per_node: Vec<String> = nodes
        .iter()
        .zip(found)
        .enumerate()
        .map(|(i, (node, found))| {
            let head = format!("\"node\":{i},\"url\":{}", json::string(&node.to_string()));
            match found {
                Err(e) => format!("{{{head},\"reachable\":false,\"error\":{}}}", json::string(e)),
                Ok(keys) => {
                    let keys: Vec<String> = keys.iter().map(|k| json::string(k)).collect();
                    format!("{{{head},\"reachable\":true,\"keys_without_ttl\":[{}]}}", keys.join(","))
                }
            }
        })
        .collect();
    outln!(
        "{{\"pattern\":{},\"keys_without_ttl\":{leaks},\"unreachable\":{unreachable},\"nodes\":[{}]}}",
        json::string(pattern),
        per_node.join(",")
    );
}

/// `scan`: a line per key without a TTL or unreachable node, then the count.
fn print_scan_text(
    pattern: &str,
    nodes: &[NodeConfig],
    found: &[Result<Vec<String>, String>],
    leaks: usize,
    unreachable: usize,
) {
    for (i, (node, found)) in nodes.iter().zip(found).enumerate() {
        match found {
            Err(e) if fault_of(e) == "misconfigured" => outln!("node {i} {node}: MISCONFIGURED ({e})"),
            Err(e) => outln!("node {i} {node}: unreachable ({e})"),
            Ok(keys) => {
                for k in keys {
                    outln!("node {i} {node}: {k} has no TTL");
                }
            }
        }
    }
    if leaks > 0 {
        outln!("{leaks} key(s) without a TTL matching {pattern:?}");
    } else {
        outln!(
            "no keys without a TTL matching {pattern:?} on {} reachable node(s){}",
            nodes.len() - unreachable,
            if unreachable > 0 { format!(" ({unreachable} unreachable)") } else { String::new() }
        );
    }
}

/// Just enough JSON for `--json`: strings and their escapes.
mod json {
    use std::fmt::Write as _;

    /// `s` as a JSON string literal.
    pub(super) fn string(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// A JSON string, or `null`.
    pub(super) fn opt_string(s: Option<&str>) -> String {
        s.map_or_else(|| "null".to_owned(), string)
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn escapes() {
            assert_eq!(super::string("a\"b\\c\nd\u{1}é"), "\"a\\\"b\\\\c\\nd\\u0001é\"");
            assert_eq!(super::opt_string(None), "null");
        }
    }
}
