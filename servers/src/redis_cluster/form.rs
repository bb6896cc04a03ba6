//! Forming a [`RedisCluster`] by hand (no `redis-cli --cluster create`, so that one or two
//! masters work the same as three): each master takes its share of the slots, node 0 meets
//! every other, replicas replicate their master; and the check that the nodes agree.

use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redlease_core::cluster::SLOTS;

use super::topology::{self, SETTLE_TIMEOUT, field, wait_for};
use super::{RedisCluster, RedisClusterBuilder, Shard};
use crate::node::Node;
use crate::placement::{Listen, Placement};
use crate::process;

/// Start the nodes of `b` and form the cluster; stopped again on failure.
pub(super) fn form(b: RedisClusterBuilder) -> Result<RedisCluster, String> {
    let RedisClusterBuilder { masters, replicas, persist, acl, base_port } = b;
    if masters == 0 {
        return Err("a Redis Cluster needs at least one master".to_owned());
    }
    if masters > SLOTS {
        return Err(format!("{masters} masters: a Redis Cluster has only {SLOTS} slots to share"));
    }
    if let Some((user, pass)) = &acl {
        if user.is_empty()
            || pass.is_empty()
            || user.contains(char::is_whitespace)
            || pass.contains(char::is_whitespace)
        {
            return Err("acl_user / password: user and password must be non-empty words without whitespace".to_owned());
        }
    }
    let total = replicas.checked_add(1).and_then(|r| r.checked_mul(masters)).ok_or("too many nodes")?;
    if let Some(base) = base_port {
        // The last node's cluster bus must fit too.
        if usize::from(base) + total - 1 + 10_000 > usize::from(u16::MAX) {
            return Err(format!(
                "port {base}: {total} nodes from there (and their cluster bus, +10000) run past 65535"
            ));
        }
    }
    process::installed()?;
    let started = Instant::now();
    let mut nodes = Vec::with_capacity(total);
    for index in 0..total {
        // The check above keeps base + index below 65535.
        let placement = base_port.map(|b| Placement::new(Ipv4Addr::LOCALHOST.into(), b + index as u16));
        nodes.push(Node::start(index, placement, persist, acl.clone(), Listen::Tcp, true, None)?);
    }
    let ids = nodes.iter().map(my_id).collect::<Result<Vec<_>, _>>()?;
    let shards = (0..masters)
        .map(|i| Shard { master: i, replicas: (0..replicas).map(|j| masters + i * replicas + j).collect() })
        .collect();
    let cluster = RedisCluster { nodes, ids, shards: Mutex::new(shards), acl };
    let timeout = SETTLE_TIMEOUT.saturating_sub(started.elapsed()).max(Duration::from_secs(5));
    cluster
        .join(masters, timeout)
        .map_err(|e| format!("the Redis Cluster of {masters} master(s) did not form: {e}"))?;
    Ok(cluster)
}

/// Slots `first..=last` of master `i` of `masters` when they are split evenly.
fn share(i: usize, masters: usize) -> (u16, u16) {
    let slots = SLOTS;
    // Below 16384 (i < masters <= 16384): the casts are lossless.
    ((i * slots / masters) as u16, ((i + 1) * slots / masters - 1) as u16)
}

/// `CLUSTER MYID` of `node`.
fn my_id(node: &Node) -> Result<String, String> {
    let fail = |e: std::io::Error| format!("node {}: CLUSTER MYID: {e}", node.index());
    let reply = node.conn().and_then(|mut c| c.checked(&["CLUSTER", "MYID"])).map_err(fail)?;
    reply.as_text().ok_or_else(|| format!("node {}: CLUSTER MYID: unexpected {reply:?}", node.index()))
}

/// Send `args` to `node`, which must answer `+OK`.
fn ok(node: &Node, args: &[&str]) -> Result<(), String> {
    node.conn().and_then(|mut c| c.ok(args)).map_err(|e| format!("node {}: {}: {e}", node.index(), args.join(" ")))
}

impl RedisCluster {
    /// Give each of the first `masters` nodes its share of the slots, introduce the nodes to
    /// each other, make the replicas replicate, and wait until it is all settled.
    fn join(&self, masters: usize, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        // Distinct config epochs up front (as redis-cli does), instead of letting the nodes
        // resolve their collisions one bump at a time.
        for (i, node) in self.nodes.iter().enumerate() {
            ok(node, &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()])?;
        }
        for (i, node) in self.nodes[..masters].iter().enumerate() {
            let (first, last) = share(i, masters);
            let slots: Vec<String> = (first..=last).map(|s| s.to_string()).collect();
            let mut args = vec!["CLUSTER", "ADDSLOTS"];
            args.extend(slots.iter().map(String::as_str));
            ok(node, &args)?;
        }
        // Every node meets every other itself: quicker than waiting for gossip to spread.
        for (i, node) in self.nodes.iter().enumerate() {
            for other in &self.nodes[i + 1..] {
                ok(node, &["CLUSTER", "MEET", &other.addr().ip().to_string(), &other.port().to_string()])?;
            }
        }
        wait_for("every node to know every other", left(), || self.all_met())?;
        let shards = self.shards().clone();
        for shard in &shards {
            for &r in &shard.replicas {
                ok(&self.nodes[r], &["CLUSTER", "REPLICATE", &self.ids[shard.master]])?;
            }
        }
        let expected: Vec<Option<usize>> =
            (0..masters).flat_map(|i| (share(i, masters).0..=share(i, masters).1).map(move |_| Some(i))).collect();
        wait_for("the cluster to be ready", left(), || {
            self.settled(true, |owners| match owners == expected {
                true => Ok(()),
                false => Err("the slots are not served by the masters they were given to yet".to_owned()),
            })
        })
    }

    /// Whether every node knows every other over a connected cluster bus (`CLUSTER NODES`).
    fn all_met(&self) -> Result<(), String> {
        for node in &self.nodes {
            let text = node
                .conn()
                .and_then(|mut c| c.checked(&["CLUSTER", "NODES"]))
                .map_err(|e| format!("node {}: CLUSTER NODES: {e}", node.index()))?
                .as_text()
                .unwrap_or_default();
            let known = text.lines().filter(|l| !l.trim().is_empty()).count();
            let pending =
                text.lines().any(|l| l.contains("handshake") || l.contains("noaddr") || l.contains("disconnected"));
            if known != self.nodes.len() || pending || !self.ids.iter().all(|id| text.contains(id.as_str())) {
                return Err(format!("node {} knows {known} of {} nodes:\n{text}", node.index(), self.nodes.len()));
            }
        }
        Ok(())
    }

    /// Whether the running, unpaused nodes agree: the same master serves each slot on every
    /// node's `CLUSTER SLOTS` (and `expect` accepts that map, per slot the index of the node
    /// serving it), each master is listed with its running replicas, and every running replica
    /// of a running master replicates it, its link up and its first sync done. With `state_ok`,
    /// every node must also say `cluster_state:ok`.
    pub(super) fn settled(
        &self,
        state_ok: bool,
        expect: impl Fn(&[Option<usize>]) -> Result<(), String>,
    ) -> Result<(), String> {
        let shards = self.shards().clone();
        let mut agreed: Option<(usize, Vec<Option<usize>>)> = None;
        for node in self.nodes.iter().filter(|n| self.is_live(n.index())) {
            let n = node.index();
            let err = |e: String| format!("node {n}: {e}");
            let mut conn = node.conn().map_err(|e| err(e.to_string()))?;
            if state_ok {
                let info =
                    conn.checked(&["CLUSTER", "INFO"]).map_err(|e| err(e.to_string()))?.as_text().unwrap_or_default();
                if field(&info, "cluster_state") != Some("ok") {
                    return Err(format!(
                        "node {n} says cluster_state:{}",
                        field(&info, "cluster_state").unwrap_or("?")
                    ));
                }
            }
            let ranges = topology::cluster_slots(&mut conn).map_err(err)?;
            for range in &ranges {
                let listed: Vec<usize> = range.replicas.iter().filter_map(|r| self.index_of(&r.id)).collect();
                let master = self.index_of(&range.master.id);
                let Some(shard) = shards.iter().find(|s| Some(s.master) == master) else {
                    return Err(format!(
                        "node {n}: slots {}-{} served by {}, not a master",
                        range.start, range.end, range.master.id
                    ));
                };
                let missing = shard.replicas.iter().any(|r| self.is_live(*r) && !listed.contains(r));
                if missing || listed.iter().any(|r| !shard.replicas.contains(r)) {
                    return Err(format!(
                        "node {n}: slots {}-{} of node {} list replicas {listed:?}, not {:?}",
                        range.start, range.end, shard.master, shard.replicas
                    ));
                }
            }
            let owners = self.owners_on(&mut conn).map_err(err)?;
            match &agreed {
                None => {
                    expect(&owners).map_err(err)?;
                    agreed = Some((n, owners));
                }
                Some((first, theirs)) => {
                    if let Some(slot) = (0..owners.len()).find(|&s| owners[s] != theirs[s]) {
                        return Err(format!(
                            "slot {slot}: node {first} says node {:?} serves it, node {n} says {:?}",
                            theirs[slot], owners[slot]
                        ));
                    }
                }
            }
        }
        for shard in shards.iter().filter(|s| self.is_live(s.master)) {
            let port = self.nodes[shard.master].port().to_string();
            for &r in shard.replicas.iter().filter(|&&r| self.is_live(r)) {
                let info = topology::info(&self.nodes[r], "replication").map_err(|e| format!("node {r}: {e}"))?;
                let follows =
                    field(&info, "role") == Some("slave") && field(&info, "master_port") == Some(port.as_str());
                if !follows
                    || field(&info, "master_link_status") != Some("up")
                    || field(&info, "master_sync_in_progress") != Some("0")
                {
                    return Err(format!("replica {r} of node {} is not in sync yet:\n{info}", shard.master));
                }
            }
        }
        Ok(())
    }

    /// The index of the node with cluster node id `id`.
    pub(super) fn index_of(&self, id: &str) -> Option<usize> {
        self.ids.iter().position(|i| i == id)
    }
}
