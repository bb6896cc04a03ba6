//! `redlease servers`, `redlease status` and `redlease scan`, and what status and scan share:
//! connections to the nodes (standalone, or a whole Redis Cluster as one node), how a node's
//! failure is classed, and the shapes of the output.

mod fault;
pub(crate) mod json;
mod link;
mod readers;
mod redis_cluster;
mod scan;
mod semaphore;
mod sentinel;
mod status;
mod verdict;

use std::time::Duration;

use fault::Fault;
use link::{Open, open_node};
use redlease_client::adapter::NodeTransport;
use redlease_core::{NodeConfig, TlsSettings};
use redlease_servers::Servers;

use crate::Usage;
use crate::connect::nodes_of;
use crate::out::outln;

pub(crate) use scan::scan;
pub(crate) use status::status;

/// `--port P` for `processes` processes on P and the ports after it: an error if they run past
/// port 65535.
pub(crate) fn ports_fit(port: Option<u16>, processes: usize) -> Result<(), Usage> {
    match port {
        Some(p) if p as usize + processes > 65536 => {
            Err(Usage(format!("--port {p}: {processes} processes from there run past port 65535")))
        }
        _ => Ok(()),
    }
}

/// Start local servers with `start` (it blocks until they are up) off the async threads.
pub(crate) async fn start_blocking<T: Send + 'static>(
    start: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, Usage> {
    tokio::task::spawn_blocking(start)
        .await
        .map_err(|e| Usage(format!("starting the nodes failed: {e}")))?
        .map_err(Usage)
}

/// Print where the CA of local TLS nodes is (`REDLEASE_TLS_CA`), and a client certificate.
#[cfg(feature = "tls")]
pub(crate) fn print_tls_files(files: &redlease_servers::TlsFiles) {
    outln!("export REDLEASE_TLS_CA={}", files.ca.display());
    outln!(
        "# client certificate, for nodes that require one: REDLEASE_TLS_CERT={} REDLEASE_TLS_KEY={}",
        files.client_cert.display(),
        files.client_key.display()
    );
}

/// Start `n` local nodes in the foreground until Ctrl-C.
pub(crate) async fn servers(
    n: usize,
    port: Option<u16>,
    persist: bool,
    tls: bool,
    replicas: usize,
) -> Result<u8, Usage> {
    if n == 0 {
        return Err(Usage("--nodes 0: at least one node is needed (Redlock wants 3 or 5)".into()));
    }
    ports_fit(port, n.saturating_mul(replicas + 1))?;
    if tls && replicas > 0 {
        return Err(Usage("--replicas with --tls: replicas are started over plain TCP only".into()));
    }
    let mut builder = Servers::builder().nodes(n).persist(persist).replicas(replicas);
    if tls {
        builder = builder.listen(redlease_servers::Listen::Tls);
    }
    if let Some(p) = port {
        builder = builder.base_port(p);
    }
    let servers = start_blocking(move || builder.try_start()).await?;
    for node in servers.nodes() {
        outln!("node {}: {} (pid {})", node.index(), node.url(), node.pid().unwrap_or(0));
        for r in servers.replicas(node.index()) {
            outln!("  replica: {} (pid {})", r.url(), r.pid().unwrap_or(0));
        }
    }
    if replicas > 0 {
        // Grants count once a replica has them.
        let urls: Vec<String> = servers.urls().iter().map(|u| format!("{u}?min_replicas=1")).collect();
        outln!("export REDLEASE_NODES={}", urls.join(","));
    } else {
        outln!("export REDLEASE_NODES={}", servers.urls().join(","));
    }
    #[cfg(feature = "tls")]
    if let Some(files) = servers.tls() {
        print_tls_files(files);
    }
    outln!(
        "{} node(s) running{}{}; press Ctrl-C to stop them.",
        n,
        if replicas > 0 { format!(", each with {replicas} replica(s)") } else { String::new() },
        if persist { " with appendfsync always" } else { "" }
    );
    // Runs until the caller's SIGINT/SIGTERM handler ends this future; dropping the future
    // drops the servers, which stops every node.
    let what = format!("{} node(s)", servers.len());
    let _nodes = StopOnDrop(servers, what);
    std::future::pending::<()>().await;
    Ok(0)
}

/// Owns the running nodes (and says what they are); stops them, and says so, when dropped.
pub(crate) struct StopOnDrop<T>(pub(crate) T, pub(crate) String);

impl<T> Drop for StopOnDrop<T> {
    fn drop(&mut self) {
        outln!("stopping {}.", self.1);
    }
}

/// Per node, a connection, or why none could be made.
type Conns = Vec<Result<Open, Fault>>;

/// The nodes of `--nodes`, each with a connection (or why none could be made): a standalone
/// node's, or a Redis Cluster node's slot map and connections to its masters.
fn open_all(urls: Option<&str>, tls: TlsSettings) -> Result<(Vec<NodeConfig>, Conns), Usage> {
    let (nodes, transports): (Vec<NodeConfig>, Vec<NodeTransport>) = nodes_of(urls, tls)?.into_iter().unzip();
    let conns = nodes.iter().zip(&transports).map(|(node, how)| open_node(node, how)).collect();
    Ok((nodes, conns))
}

/// A duration in milliseconds, two decimals.
fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// A token as the tables show it: its first 12 characters.
fn short(token: &str) -> String {
    match token.char_indices().nth(12) {
        Some((end, _)) => format!("{}…", &token[..end]),
        None => token.to_owned(),
    }
}
