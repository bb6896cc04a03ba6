//! `redlease cluster`, `redlease status` and `redlease scan`.

use std::net::{SocketAddr, ToSocketAddrs};

use redlease_cluster::{Cluster, RedisConn};
use redlease_core::NodeConfig;

use crate::{Usage, node_urls};

/// Keys under this prefix are fencing counters: they are meant to live without a TTL.
const FENCE_PREFIX: &str = "redlease:fence:";

/// Start `n` local nodes in the foreground until Ctrl-C.
pub(crate) async fn cluster(n: usize, port: Option<u16>, persist: bool) -> Result<u8, Usage> {
    if n == 0 {
        return Err(Usage("--nodes 0: a cluster needs at least one node (Redlock wants 3 or 5)".into()));
    }
    if let Some(p) = port {
        if p as usize + n > 65536 {
            return Err(Usage(format!("--port {p}: {n} nodes from there run past port 65535")));
        }
    }
    let mut builder = Cluster::builder().nodes(n).persist(persist);
    if let Some(p) = port {
        builder = builder.base_port(p);
    }
    let cluster = tokio::task::spawn_blocking(move || builder.try_start())
        .await
        .map_err(|e| Usage(format!("starting the nodes failed: {e}")))?
        .map_err(Usage)?;
    for node in cluster.nodes() {
        println!("node {}: {} (pid {})", node.index(), node.url(), node.pid().unwrap_or(0));
    }
    println!("export REDLEASE_NODES={}", cluster.urls().join(","));
    println!(
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
        println!("stopping {} node(s).", self.0.len());
    }
}

fn resolve(node: &NodeConfig) -> Result<SocketAddr, String> {
    (node.host.as_str(), node.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", node.host))?
        .next()
        .ok_or_else(|| format!("{} resolves to no address", node.host))
}

fn open(node: &NodeConfig) -> Result<RedisConn, String> {
    let addr = resolve(node)?;
    let user = node.user.as_deref().unwrap_or("default");
    let auth = node.password.as_deref().map(|p| (user, p));
    let mut conn = RedisConn::connect(addr, auth).map_err(|e| e.to_string())?;
    if node.db != 0 {
        conn.ok(&["SELECT", &node.db.to_string()]).map_err(|e| e.to_string())?;
    }
    Ok(conn)
}

/// Per node: reachable, holder token (shortened), PTTL.
pub(crate) fn status(key: &str, nodes: Option<&str>) -> Result<u8, Usage> {
    let nodes = node_urls(nodes)?;
    let mut holders = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let line = match open(node).and_then(|mut c| {
            let holder = c.get(key).map_err(|e| e.to_string())?;
            let pttl = c.pttl(key).map_err(|e| e.to_string())?;
            Ok((holder, pttl))
        }) {
            Err(e) => format!("unreachable  ({e})"),
            Ok((None, _)) => "reachable    free".to_owned(),
            Ok((Some(token), pttl)) => {
                holders.push(token.clone());
                let ttl = if pttl >= 0 { format!("pttl {pttl}ms") } else { "NO TTL (leak)".to_owned() };
                format!("reachable    held by {}  {ttl}", short(&token))
            }
        };
        println!("node {i} {node}  {line}");
    }
    let quorum = nodes.len() / 2 + 1;
    holders.sort();
    let best = holders.chunk_by(|a, b| a == b).map(|c| (c.len(), &c[0])).max();
    match best {
        Some((count, token)) if count >= quorum => {
            println!("{key}: held by {} on {count} of {} nodes (quorum {quorum})", short(token), nodes.len())
        }
        Some((count, _)) => println!("{key}: no quorum holds it (at most {count} of {} nodes agree)", nodes.len()),
        None => println!("{key}: free on every reachable node"),
    }
    Ok(0)
}

fn short(token: &str) -> String {
    if token.len() > 12 { format!("{}…", &token[..12]) } else { token.to_owned() }
}

/// Keys without a TTL on any node; exit 1 if there are any.
pub(crate) fn scan(nodes: Option<&str>, pattern: &str) -> Result<u8, Usage> {
    let nodes = node_urls(nodes)?;
    let mut leaks = 0usize;
    let mut unreachable = 0usize;
    for (i, node) in nodes.iter().enumerate() {
        let found = open(node).and_then(|mut c| {
            let keys = c.keys(pattern).map_err(|e| e.to_string())?;
            let mut no_ttl = Vec::new();
            for k in keys.into_iter().filter(|k| !k.starts_with(FENCE_PREFIX)) {
                if c.pttl(&k).map_err(|e| e.to_string())? == -1 {
                    no_ttl.push(k);
                }
            }
            Ok(no_ttl)
        });
        match found {
            Err(e) => {
                unreachable += 1;
                println!("node {i} {node}: unreachable ({e})");
            }
            Ok(keys) => {
                for k in &keys {
                    println!("node {i} {node}: {k} has no TTL");
                }
                leaks += keys.len();
            }
        }
    }
    if leaks > 0 {
        println!("{leaks} key(s) without a TTL matching {pattern:?}");
        return Ok(1);
    }
    println!(
        "no keys without a TTL matching {pattern:?} on {} reachable node(s){}",
        nodes.len() - unreachable,
        if unreachable > 0 { format!(" ({unreachable} unreachable)") } else { String::new() }
    );
    Ok(if unreachable > 0 { 2 } else { 0 })
}
