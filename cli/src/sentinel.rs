//! `redlease servers --sentinel` (`redlease cluster --sentinel`): local Sentinel-managed nodes
//! in the foreground, each a primary with replicas, watched by one group of sentinels, and one
//! `redis+sentinel://` URL per node (with `--tls`, `rediss+sentinel://`: TLS to the sentinels
//! and to the data nodes).

use std::time::Duration;

use redlease_servers::SentinelNodes;

use crate::Usage;
use crate::inspect::{StopOnDrop, ports_fit, start_blocking};
use crate::out::outln;

/// What `--sentinel` starts: `nodes` primaries with `replicas` replicas each, watched by
/// `sentinels` sentinels, from port `port` on if given.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub(crate) nodes: usize,
    pub(crate) replicas: usize,
    pub(crate) sentinels: usize,
    pub(crate) port: Option<u16>,
    pub(crate) persist: bool,
    pub(crate) tls: bool,
}

/// How long the local sentinels wait before they call a primary down.
const DOWN_AFTER: Duration = Duration::from_secs(1);

/// Start the nodes and the sentinels in the foreground until Ctrl-C.
pub(crate) async fn start(shape: Shape) -> Result<u8, Usage> {
    let Shape { nodes, replicas, sentinels, port, persist, tls } = shape;
    if nodes == 0 {
        return Err(Usage("--nodes 0: at least one node is needed (Redlock wants 3 or 5)".into()));
    }
    if replicas == 0 {
        return Err(Usage("--replicas 0 with --sentinel: a failover promotes a replica, give at least 1".into()));
    }
    if sentinels == 0 {
        return Err(Usage("--sentinels 0: at least one sentinel is needed (3 or 5 for a quorum)".into()));
    }
    ports_fit(port, nodes.saturating_mul(replicas + 1).saturating_add(sentinels))?;
    let mut builder = SentinelNodes::builder()
        .nodes(nodes)
        .replicas(replicas)
        .sentinels(sentinels)
        .persist(persist)
        .tls(tls)
        .down_after(DOWN_AFTER);
    if let Some(p) = port {
        builder = builder.base_port(p);
    }
    let set = start_blocking(move || builder.try_start()).await?;
    for s in set.sentinels() {
        outln!("sentinel {}: {} (pid {})", s.index(), s.client_addr(), s.pid().unwrap_or(0));
    }
    for i in 0..set.len() {
        outln!("node {i}: {} (service {}, quorum {})", set.url(i), set.service(i), sentinels / 2 + 1);
        for (j, data) in set.data_nodes(i).iter().enumerate() {
            let role = if j == 0 { "primary" } else { "replica" };
            outln!("  {role}: {} (pid {})", data.url(), data.pid().unwrap_or(0));
        }
    }
    // Grants count once a replica has them: a failover cannot lose them.
    let urls: Vec<String> = set.urls().iter().map(|u| format!("{u}?min_replicas=1")).collect();
    outln!("export REDLEASE_NODES={}", urls.join(","));
    #[cfg(feature = "tls")]
    if let Some(files) = set.tls() {
        crate::inspect::print_tls_files(files);
    }
    outln!(
        "{nodes} Sentinel-managed node(s) running, each with {replicas} replica(s), watched by {sentinels} sentinel(s) \
         (down-after-milliseconds {}){}; press Ctrl-C to stop them.",
        DOWN_AFTER.as_millis(),
        if persist { " with appendfsync always" } else { "" }
    );
    let what = format!("{} Sentinel-managed node(s) and {sentinels} sentinel(s)", set.len());
    let _nodes = StopOnDrop(set, what);
    std::future::pending::<()>().await;
    Ok(0)
}
