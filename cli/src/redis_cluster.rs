//! `redlease servers --cluster-mode`: local Redis Clusters in the foreground, one seed URL
//! each (a Redis Cluster is one Redlock node; a client finds its other nodes from the seed).

use redlease_core::cluster::SLOTS;
use redlease_servers::RedisCluster;

use crate::Usage;
use crate::inspect::StopOnDrop;
use crate::out::outln;

/// What `--cluster-mode` starts: `clusters` Redis Clusters of `masters` masters with
/// `replicas` replicas each, from port `port` on if given.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub(crate) clusters: usize,
    pub(crate) masters: usize,
    pub(crate) replicas: usize,
    pub(crate) port: Option<u16>,
    pub(crate) persist: bool,
}

/// Start the clusters (at once, each on its own thread) in the foreground until Ctrl-C.
pub(crate) async fn start(shape: Shape) -> Result<u8, Usage> {
    let Shape { clusters, masters, replicas, port, persist } = shape;
    if clusters == 0 {
        return Err(Usage("--nodes 0: at least one Redis Cluster is needed (Redlock wants 1, 3 or 5)".into()));
    }
    if masters == 0 {
        return Err(Usage("--masters 0: a Redis Cluster needs at least one master".into()));
    }
    let per_cluster = replicas
        .checked_add(1)
        .and_then(|r| r.checked_mul(masters))
        .filter(|n| n.checked_mul(clusters).is_some())
        .ok_or_else(|| {
            Usage(format!(
                "{clusters} cluster(s) of {masters} master(s) with {replicas} replica(s) each: too many nodes"
            ))
        })?;
    let mut starts = Vec::with_capacity(clusters);
    for k in 0..clusters {
        let mut builder = RedisCluster::builder().masters(masters).replicas(replicas).persist(persist);
        if let Some(p) = port {
            let base = usize::from(p) + k * per_cluster;
            let base = u16::try_from(base).map_err(|_| {
                Usage(format!(
                    "--port {p}: {clusters} cluster(s) of {per_cluster} nodes from there run past port 65535"
                ))
            })?;
            builder = builder.base_port(base);
        }
        starts.push(tokio::task::spawn_blocking(move || builder.try_start()));
    }
    // Wait for every start, so that the clusters that did come up are stopped on an error.
    let mut running = Vec::with_capacity(clusters);
    let mut failed = None;
    for start in starts {
        match start.await {
            Ok(Ok(cluster)) => running.push(cluster),
            Ok(Err(e)) => failed = failed.or(Some(e)),
            Err(e) => failed = failed.or(Some(format!("starting a Redis Cluster failed: {e}"))),
        }
    }
    if let Some(e) = failed {
        return Err(Usage(e));
    }
    for (k, cluster) in running.iter().enumerate() {
        outln!("cluster {k}: {} (Redis Cluster: {masters} master(s), {replicas} replica(s) each)", cluster.seed_url());
        for (i, master) in cluster.masters().into_iter().enumerate() {
            // The slots are split evenly between the masters, in order.
            let (first, last) = (i * SLOTS / masters, (i + 1) * SLOTS / masters - 1);
            outln!("  master {i}: {} slots {first}-{last} (pid {})", master.url(), master.pid().unwrap_or(0));
            for r in cluster.replicas_of(i) {
                outln!("    replica: {} (pid {})", r.url(), r.pid().unwrap_or(0));
            }
        }
    }
    let seeds: Vec<String> = running.iter().map(RedisCluster::seed_url).collect();
    outln!("export REDLEASE_NODES={}", seeds.join(","));
    outln!(
        "{clusters} Redis Cluster(s) of {masters} master(s){} running{}; press Ctrl-C to stop them.",
        if replicas > 0 { format!(", each with {replicas} replica(s),") } else { String::new() },
        if persist { " with appendfsync always" } else { "" }
    );
    // Runs until the caller's SIGINT/SIGTERM handler ends this future; dropping the future
    // drops the clusters, which stops every node.
    let what = format!("{clusters} Redis Cluster(s), {} node(s)", clusters * per_cluster);
    let _clusters = StopOnDrop(running, what);
    std::future::pending::<()>().await;
    Ok(0)
}
