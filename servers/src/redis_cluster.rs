//! A local Redis Cluster: [`RedisCluster`] runs M masters with R replicas each
//! (`redis-server --cluster-enabled yes` on free loopback ports), for the tests and the
//! `redlease servers --cluster-mode` command; [`ClusterModeNode`] is the one-master cluster the
//! tests give redlease as a standalone node by mistake.

mod form;
mod reshard;
mod topology;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};

pub use reshard::Migration;
pub use topology::key_slot;

use crate::node::Node;
use redlease_core::cluster::SLOTS;

use crate::conn::RedisConn;
use crate::servers::{assert_ttls, is_lock_key, keys_with_ttl};

/// Settings of a [`RedisCluster`]; start with [`RedisCluster::builder`].
#[derive(Clone, Debug)]
pub struct RedisClusterBuilder {
    masters: usize,
    replicas: usize,
    persist: bool,
    acl: Option<(String, String)>,
    base_port: Option<u16>,
}

impl RedisClusterBuilder {
    /// Number of masters (default 3); the hash slots are split evenly between them, in order.
    pub fn masters(mut self, n: usize) -> Self {
        self.masters = n;
        self
    }

    /// Replicas of each master (default 1).
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n;
        self
    }

    /// Run every node with `appendonly yes` + `appendfsync always` (default: no persistence at
    /// all, `save ""` and `appendonly no`).
    pub fn persist(mut self, on: bool) -> Self {
        self.persist = on;
        self
    }

    /// Create the ACL user `user` with `password` and every permission, and turn the `default`
    /// user off, so that only this user can log in (replicas log in to their masters as it).
    /// Neither may be empty or contain whitespace ([`try_start`](Self::try_start) fails).
    pub fn acl_user(mut self, user: &str, password: &str) -> Self {
        self.acl = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// Require `password` of the `default` user (as `requirepass` does): the same as
    /// `acl_user("default", password)`.
    pub fn password(self, password: &str) -> Self {
        self.acl_user("default", password)
    }

    /// Put node `i` on port `base + i` (masters first, then the replicas of master 0, of
    /// master 1, ...) instead of free ports chosen by the OS; the cluster bus of each is on
    /// its port + 10000.
    pub fn base_port(mut self, base: u16) -> Self {
        self.base_port = Some(base);
        self
    }

    /// Start the nodes, form the cluster and wait until it is ready: every node says
    /// `cluster_state:ok`, every node's `CLUSTER SLOTS` shows every slot served by the
    /// expected master with its replicas, and every replica's link to its master is up.
    ///
    /// # Panics
    ///
    /// If `redis-server` is missing (one line saying how to install it), a node does not come
    /// up (with the tail of its log), or the cluster is not ready within 20 s (saying what was
    /// missing).
    pub fn start(self) -> RedisCluster {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`start`](Self::start), but failing with an error message instead of a panic. The
    /// nodes already started are stopped again.
    pub fn try_start(self) -> Result<RedisCluster, String> {
        form::form(self)
    }
}

/// A local Redis Cluster: M masters, each with R replicas, every node a `redis-server
/// --cluster-enabled yes` on a free `127.0.0.1` port (its cluster bus on port + 10000) in a
/// temporary directory of its own, without persistence unless asked. Every process it started
/// is killed (by its pid) and reaped when it is dropped.
///
/// Masters are numbered 0..M in the order of their hash slots at the start (master 0 serves
/// slots 0 to 16384/M - 1, and so on); "master `i`" is the node serving that shard now, which a
/// [`fail_over`](Self::fail_over) changes. Its [`Node`] handles pause, resume, kill and
/// restart processes as those of a [`Servers`](crate::Servers) do; a restarted node keeps its
/// identity in the cluster (its `nodes.conf`). Needs Redis 6 or later (on 6.0 and 6.1 a master
/// that gives its last slot away becomes a replica of the node that took it).
///
/// ```no_run
/// use redlease_servers::{RedisCluster, key_slot};
///
/// let cluster = RedisCluster::builder().masters(3).replicas(1).start();
/// let seed = cluster.seed_url(); // redis://127.0.0.1:PORT of master 0
/// let slot = key_slot("{job}");
/// let from = cluster.master_of_slot(slot);
/// cluster.migrate_slot(slot, (from + 1) % 3); // with its keys
/// cluster.fail_over(0); // master 0's replica takes over its slots
/// # let _ = seed;
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    /// Every node, in start order: the masters, then the replicas of master 0, of master 1...
    nodes: Vec<Node>,
    /// Each node's cluster node id.
    ids: Vec<String>,
    /// Which node serves each shard now, and which replicate it.
    shards: Mutex<Vec<Shard>>,
    acl: Option<(String, String)>,
}

/// The nodes of one shard (indexes into [`RedisCluster::nodes`]).
#[derive(Clone, Debug)]
struct Shard {
    master: usize,
    replicas: Vec<usize>,
}

impl RedisCluster {
    /// A builder with the defaults: 3 masters with 1 replica each, no persistence, no password.
    pub fn builder() -> RedisClusterBuilder {
        RedisClusterBuilder { masters: 3, replicas: 1, persist: false, acl: None, base_port: None }
    }

    /// Every node, masters and replicas, in start order (the masters first, then the replicas
    /// of master 0, of master 1, ...); [`Node::index`] is the position here.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Master `i` (the node serving shard `i` now).
    ///
    /// # Panics
    ///
    /// If there is no master `i`.
    pub fn master(&self, i: usize) -> &Node {
        &self.nodes[self.shards()[i].master]
    }

    /// The masters, in shard order.
    pub fn masters(&self) -> Vec<&Node> {
        self.shards().iter().map(|s| &self.nodes[s.master]).collect()
    }

    /// Every replica, master 0's first.
    pub fn replicas(&self) -> Vec<&Node> {
        self.shards().iter().flat_map(|s| s.replicas.iter().map(|&r| &self.nodes[r])).collect()
    }

    /// The replicas of master `i`.
    ///
    /// # Panics
    ///
    /// If there is no master `i`.
    pub fn replicas_of(&self, i: usize) -> Vec<&Node> {
        self.shards()[i].replicas.iter().map(|&r| &self.nodes[r]).collect()
    }

    /// The ACL user and password, if the cluster has them.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.acl.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// `redis://[user:pass@]127.0.0.1:PORT` of master 0: where a client discovers the cluster.
    pub fn seed_url(&self) -> String {
        self.master(0).plain_url()
    }

    /// Which master serves `slot` (its shard index), as a running node's `CLUSTER SLOTS` says.
    ///
    /// # Panics
    ///
    /// If no running, unpaused node answers, no master serves `slot`, or `slot` is not below
    /// 16384.
    pub fn master_of_slot(&self, slot: u16) -> usize {
        assert!(usize::from(slot) < SLOTS, "slot {slot} is not below {SLOTS}");
        let owners = self.owners().unwrap_or_else(|e| panic!("redis cluster: CLUSTER SLOTS: {e}"));
        owners[usize::from(slot)]
            .and_then(|n| self.shard_of(n))
            .unwrap_or_else(|| panic!("redis cluster: no master serves slot {slot}"))
    }

    /// Which master serves `key` (its shard index): [`master_of_slot`](Self::master_of_slot)
    /// of [`key_slot`].
    ///
    /// # Panics
    ///
    /// If no running, unpaused node answers, or no master serves the key's slot.
    pub fn master_of_key(&self, key: &str) -> usize {
        self.master_of_slot(key_slot(key))
    }

    /// The slots master `i` serves, as a running node's `CLUSTER SLOTS` says.
    ///
    /// # Panics
    ///
    /// If no running, unpaused node answers.
    pub fn slots_of(&self, i: usize) -> Vec<u16> {
        let owners = self.owners().unwrap_or_else(|e| panic!("redis cluster: CLUSTER SLOTS: {e}"));
        let served = owners.iter().zip(0..).filter(|(owner, _)| owner.and_then(|n| self.shard_of(n)) == Some(i));
        served.map(|(_, slot)| slot).collect()
    }

    /// The keys of each master, in shard order (empty for a master that is not running or
    /// paused).
    ///
    /// # Panics
    ///
    /// If a running, unpaused master does not answer.
    pub fn keys_per_master(&self) -> Vec<Vec<String>> {
        self.masters()
            .into_iter()
            .map(|m| match self.is_live(m.index()) {
                true => {
                    m.conn().and_then(|mut c| c.keys("*")).unwrap_or_else(|e| panic!("node {}: SCAN: {e}", m.index()))
                }
                false => Vec::new(),
            })
            .collect()
    }

    /// The keys on every running, unpaused master, as `(master index, key, PTTL)`.
    ///
    /// # Panics
    ///
    /// If such a master does not answer.
    pub fn all_keys_with_ttl(&self) -> Vec<(usize, String, i64)> {
        keys_with_ttl(self.masters().into_iter().enumerate().filter(|(_, m)| self.is_live(m.index())))
    }

    /// The lock keys (everything but fencing counters, the lock format key and semaphore
    /// limits) on every running, unpaused master, as `(master index, key, PTTL)`.
    ///
    /// # Panics
    ///
    /// If such a master does not answer.
    pub fn lock_keys(&self) -> Vec<(usize, String, i64)> {
        self.all_keys_with_ttl().into_iter().filter(|(_, k, _)| is_lock_key(k)).collect()
    }

    /// Assert that no lock key is left without a TTL on any running, unpaused master, as
    /// [`Servers::assert_no_leaks`](crate::Servers::assert_no_leaks) does.
    ///
    /// # Panics
    ///
    /// Listing every key without a TTL.
    pub fn assert_no_leaks(&self) {
        assert_ttls(self.lock_keys(), "master");
    }

    /// `FLUSHALL` on every running, unpaused master (their replicas follow).
    ///
    /// # Panics
    ///
    /// If such a master does not answer.
    pub fn flushall(&self) {
        for m in self.masters().into_iter().filter(|m| self.is_live(m.index())) {
            m.conn().and_then(|mut c| c.flushall()).unwrap_or_else(|e| panic!("node {}: FLUSHALL: {e}", m.index()));
        }
    }

    fn shards(&self) -> MutexGuard<'_, Vec<Shard>> {
        // A panic while holding the lock leaves a usable table behind: ignore poisoning.
        self.shards.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether node `n` runs and is not paused.
    fn is_live(&self, n: usize) -> bool {
        self.nodes[n].is_running() && !self.nodes[n].is_paused()
    }

    /// The shard node `n` belongs to (as master or replica).
    fn shard_of(&self, n: usize) -> Option<usize> {
        self.shards().iter().position(|s| s.master == n || s.replicas.contains(&n))
    }

    /// Per slot, the index of the node serving it, as `CLUSTER SLOTS` on `conn` says.
    fn owners_on(&self, conn: &mut RedisConn) -> Result<Vec<Option<usize>>, String> {
        let by_id: HashMap<&str, usize> = self.ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
        let ranges = topology::cluster_slots(conn)?;
        topology::owners(&ranges)
            .into_iter()
            .map(|id| id.map(|id| by_id.get(id).copied().ok_or_else(|| format!("unknown node id {id}"))).transpose())
            .collect()
    }

    /// [`owners_on`](Self::owners_on) the first running, unpaused node (masters first).
    fn owners(&self) -> Result<Vec<Option<usize>>, String> {
        let order: Vec<usize> = {
            let shards = self.shards();
            shards.iter().map(|s| s.master).chain(shards.iter().flat_map(|s| s.replicas.clone())).collect()
        };
        let mut last = "no node is running and unpaused".to_owned();
        for n in order.into_iter().filter(|&n| self.is_live(n)) {
            match self.nodes[n].conn().map_err(|e| e.to_string()).and_then(|mut c| self.owners_on(&mut c)) {
                Ok(owners) => return Ok(owners),
                Err(e) => last = format!("node {n}: {e}"),
            }
        }
        Err(last)
    }
}

/// A one-master Redis Cluster (`cluster-enabled yes`, every hash slot its own, no replica) on
/// a free loopback port, in a temporary directory of its own; stopped (by its pid) on drop.
/// For the tests that give one to redlease as a standalone node by mistake: it must be
/// refused as misconfigured.
#[derive(Debug)]
pub struct ClusterModeNode {
    cluster: RedisCluster,
}

impl ClusterModeNode {
    /// Start it and wait until the cluster reports `cluster_state:ok`.
    ///
    /// # Panics
    ///
    /// If it does not within 20 s (or `redis-server` is missing).
    pub fn start() -> ClusterModeNode {
        let cluster = RedisCluster::builder().masters(1).replicas(0).start();
        ClusterModeNode { cluster }
    }

    /// Its address on loopback.
    pub fn addr(&self) -> SocketAddr {
        self.cluster.master(0).addr()
    }

    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr())
    }

    /// A fresh connection to it.
    pub fn conn(&self) -> std::io::Result<RedisConn> {
        self.cluster.master(0).conn()
    }
}
