//! Redis Clusters as Redlock nodes: the masters of each (model nodes with a
//! [`Shard`](super::node::Shard)), the slot map they start from, and what the world does to
//! them: slot migrations (a window in which the source answers `ASK` for the keys it no longer
//! has and the target serves them only after `ASKING`, multi-key requests over a half-moved
//! slot get `TRYAGAIN`; keys move one at a time with their TTL), gossip that reaches the other
//! masters late, and stale redirects.
//!
//! Master 0 of a cluster is its seed, the address the engines are configured with; it is the
//! model node of the same index as the Redlock node. The other masters are model nodes after
//! the Redlock nodes'.

use redlease_core::cluster::SLOTS;

use super::node::shard::{Shard, Stale};
use super::node::{Moved, Node, Time};
use super::rng::Rng;
use super::scenario::ClusterPlan;

/// The port master `master` of node `node` listens on (the seed's is the node's, 7000 + node).
pub(crate) fn port(node: usize, master: usize) -> u16 {
    7000 + 100 * master as u16 + node as u16
}

/// One Redlock node that is a Redis Cluster.
#[derive(Debug)]
pub(crate) struct Cluster {
    /// The model node of each master.
    pub(crate) servers: Vec<usize>,
    /// The map as the cluster settled it (what each master learns, some late): each slot's
    /// owner.
    owner: Vec<u8>,
    /// The slot migrating now: the slot, from and to which master.
    pub(crate) migration: Option<(u16, usize, usize)>,
    /// Migrations finished and keys they carried.
    pub(crate) migrations: u64,
    pub(crate) keys_moved: u64,
}

impl Cluster {
    /// The cluster of node `node` planned as `plan`, its masters after the seed being model
    /// nodes `next..`: the cluster, and each master's shard.
    pub(crate) fn new(node: usize, plan: &ClusterPlan, next: usize) -> (Self, Vec<Shard>) {
        let mut owner: Vec<u8> = (0..SLOTS).map(|s| (s * plan.masters / SLOTS) as u8).collect();
        for &(slot, m) in &plan.hot {
            owner[slot as usize] = m as u8;
        }
        let ports: Vec<u16> = (0..plan.masters).map(|m| port(node, m)).collect();
        let shards = (0..plan.masters).map(|m| Shard::new(m, ports.clone(), owner.clone(), plan.old)).collect();
        let servers = std::iter::once(node).chain(next..next + plan.masters - 1).collect();
        (Cluster { servers, owner, migration: None, migrations: 0, keys_moved: 0 }, shards)
    }

    /// The master `port` names, if any.
    pub(crate) fn master_at(&self, node: usize, port: u16) -> Option<usize> {
        (0..self.servers.len()).find(|&m| self::port(node, m) == port)
    }

    /// The master that owns `slot` (once every master knows).
    pub(crate) fn owner(&self, slot: u16) -> usize {
        self.owner[slot as usize] as usize
    }

    /// Start moving `slot` from its owner to master `to` (`CLUSTER SETSLOT .. MIGRATING` on
    /// the owner, `IMPORTING` on `to`). Returns false if a migration is under way.
    pub(crate) fn start(&mut self, nodes: &mut [Node], slot: u16, to: usize) -> bool {
        let from = self.owner(slot);
        if self.migration.is_some() || from == to {
            return false;
        }
        self.migration = Some((slot, from, to));
        shard(nodes, self.servers[from]).migrating = Some((slot, to));
        shard(nodes, self.servers[to]).importing = Some((slot, from));
        true
    }

    /// Move keys of the migrating slot at `now`: one drawn with `rng`, or (`None`) all that
    /// are left. `lossy`: they are dropped instead (UNSAFE). Returns how many moved.
    pub(crate) fn move_keys(&mut self, nodes: &mut [Node], now: Time, rng: Option<&mut Rng>, lossy: bool) -> usize {
        let Some((slot, from, to)) = self.migration else { return 0 };
        let (src, dst) = (self.servers[from], self.servers[to]);
        let mut names = nodes[src].slot_keys(now, slot);
        if let Some(rng) = rng {
            if names.is_empty() {
                return 0;
            }
            let one = names.swap_remove(rng.below(names.len() as u64) as usize);
            names = vec![one];
        }
        let moved: Moved = nodes[src].export(now, &names);
        let n = moved.len();
        if !lossy {
            nodes[dst].import(now, moved);
        }
        self.keys_moved += n as u64;
        n
    }

    /// The migration ends at `now`: the rest of the slot's keys move, and the slot is the
    /// target's on both masters (`CLUSTER SETSLOT .. NODE`). Returns the slot, the old owner
    /// and the new one (the other masters learn it by gossip).
    pub(crate) fn finish(&mut self, nodes: &mut [Node], now: Time, lossy: bool) -> Option<(u16, usize, usize)> {
        let (slot, from, to) = self.migration?;
        self.move_keys(nodes, now, None, lossy);
        for m in [from, to] {
            nodes[self.servers[m]].set_slot_owner(slot, to);
            let s = shard(nodes, self.servers[m]);
            s.migrating = None;
            s.importing = None;
        }
        self.owner[slot as usize] = to as u8;
        self.migration = None;
        self.migrations += 1;
        Some((slot, from, to))
    }

    /// Master `master` answers requests for the slot of `stale` with a `MOVED` to the master it
    /// names, whatever it holds, until it ends.
    pub(crate) fn stale(&self, nodes: &mut [Node], master: usize, stale: Stale) {
        shard(nodes, self.servers[master]).inject(stale);
    }
}

/// The shard of model node `server` (a cluster master).
pub(crate) fn shard(nodes: &mut [Node], server: usize) -> &mut Shard {
    nodes[server].shard.as_mut().expect("a cluster's masters have a shard")
}
