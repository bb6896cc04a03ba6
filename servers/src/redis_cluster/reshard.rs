//! Changing who serves what in a [`RedisCluster`]: slot migrations (with their keys, as
//! `redis-cli --cluster reshard` does them) and failovers.

use std::collections::HashMap;

use redlease_core::cluster::SLOTS;

use super::topology::{SETTLE_TIMEOUT, field, info, wait_for};
use super::{RedisCluster, Shard};
use crate::conn::{RedisConn, Reply};
use crate::node::Node;

/// Keys moved per `MIGRATE`.
const BATCH: usize = 100;

/// A slot migration under way, from [`RedisCluster::begin_migration`]: the target node
/// imports the slot and the source migrates it, so a client asking the source for a key
/// already moved is told `-ASK` (and `-TRYAGAIN` for several keys split between the two).
/// [`move_key`](Self::move_key) and [`move_keys`](Self::move_keys) move keys;
/// [`finish`](Self::finish) moves the rest and gives the slot to the target.
///
/// Dropped without `finish`, the migration stays open (the slot stays migrating and
/// importing on the two nodes).
#[must_use = "a migration stays open (the slot MIGRATING and IMPORTING) until finish() is called"]
#[derive(Debug)]
pub struct Migration<'c> {
    cluster: &'c RedisCluster,
    slot: u16,
    source: usize,
    target: usize,
}

impl Migration<'_> {
    /// The slot being migrated.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// The node the slot moves away from.
    pub fn source(&self) -> &Node {
        &self.cluster.nodes[self.source]
    }

    /// The node the slot moves to.
    pub fn target(&self) -> &Node {
        &self.cluster.nodes[self.target]
    }

    /// Move `key` (of this slot) to the target now (`MIGRATE`); a key the source does not
    /// have is left alone.
    ///
    /// # Panics
    ///
    /// If the source refuses (e.g. the target has the key already) or does not answer.
    pub fn move_key(&self, key: &str) {
        let mut conns = Conns::new(self.cluster);
        self.cluster
            .migrate_keys(&mut conns, self.source, self.target, &[key.to_owned()])
            .unwrap_or_else(|e| panic!("redis cluster: slot {}: moving {key:?}: {e}", self.slot));
    }

    /// Move every key of the slot the source has now to the target; how many there were.
    ///
    /// # Panics
    ///
    /// If the source refuses or does not answer.
    pub fn move_keys(&self) -> usize {
        let mut conns = Conns::new(self.cluster);
        self.cluster
            .move_slot_keys(&mut conns, self.slot, self.source, self.target)
            .unwrap_or_else(|e| panic!("redis cluster: slot {}: moving its keys: {e}", self.slot))
    }

    /// Move the keys left, give the slot to the target (`CLUSTER SETSLOT slot NODE target` on
    /// the target, the source and every other running master), and wait until every running
    /// node says the target serves it.
    ///
    /// # Panics
    ///
    /// If a node refuses or does not answer, or the nodes do not agree within 20 s.
    pub fn finish(self) {
        let cluster = self.cluster;
        let mut conns = Conns::new(cluster);
        let done = cluster
            .move_slot_keys(&mut conns, self.slot, self.source, self.target)
            .and_then(|_| cluster.assign(&mut conns, self.slot, self.source, self.target))
            .and_then(|()| cluster.await_owner(&[self.slot], self.target));
        done.unwrap_or_else(|e| panic!("redis cluster: finishing the migration of slot {}: {e}", self.slot));
    }
}

/// Connections to nodes, opened on first use.
struct Conns<'c> {
    cluster: &'c RedisCluster,
    open: HashMap<usize, RedisConn>,
}

impl<'c> Conns<'c> {
    fn new(cluster: &'c RedisCluster) -> Self {
        Conns { cluster, open: HashMap::new() }
    }

    /// Send `args` to node `n`; an error reply is an error.
    fn send<S: AsRef<[u8]>>(&mut self, n: usize, args: &[S]) -> Result<Reply, String> {
        let conn = match self.open.entry(n) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.cluster.nodes[n].conn().map_err(|e| format!("node {n}: {e}"))?)
            }
        };
        conn.checked(args).map_err(|e| format!("node {n}: {e}"))
    }
}

impl RedisCluster {
    /// Move `slot`, with its keys, to master `to` (as `redis-cli --cluster reshard` does), and
    /// wait until every running node says `to` serves it. Nothing happens if it does already.
    ///
    /// # Panics
    ///
    /// If `slot` or `to` is out of range, a node refuses or does not answer, or the nodes do
    /// not agree within 20 s.
    pub fn migrate_slot(&self, slot: u16, to: usize) {
        self.migrate_slots([slot], to);
    }

    /// Move every slot of `slots` (such as `0..100`), with their keys, to master `to`, one
    /// after the other, then wait once until every running node says `to` serves them all.
    /// Each slot takes a few milliseconds: every step makes the nodes involved save their
    /// cluster configuration (with an fsync).
    ///
    /// # Panics
    ///
    /// As [`migrate_slot`](Self::migrate_slot).
    pub fn migrate_slots(&self, slots: impl IntoIterator<Item = u16>, to: usize) {
        let slots: Vec<u16> = slots.into_iter().collect();
        self.try_migrate_slots(&slots, to)
            .unwrap_or_else(|e| panic!("redis cluster: migrating slots to master {to}: {e}"));
    }

    /// Open the migration of `slot` to master `to`: `CLUSTER SETSLOT slot IMPORTING source` on
    /// its master now, then `CLUSTER SETSLOT slot MIGRATING target` on the source. No key
    /// moves until [`Migration::move_keys`] or [`Migration::finish`].
    ///
    /// # Panics
    ///
    /// If `slot` or `to` is out of range, `to` serves the slot already, or a node refuses or
    /// does not answer.
    pub fn begin_migration(&self, slot: u16, to: usize) -> Migration<'_> {
        let begun = self.endpoints(slot, to).and_then(|(source, target)| {
            if source == target {
                return Err(format!("master {to} serves it already"));
            }
            self.open_migration(&mut Conns::new(self), slot, source, target)?;
            Ok(Migration { cluster: self, slot, source, target })
        });
        begun.unwrap_or_else(|e| panic!("redis cluster: migrating slot {slot} to master {to}: {e}"))
    }

    /// Promote the first running replica of master `i` with `CLUSTER FAILOVER TAKEOVER` (no
    /// election, no waiting for the master: it works with the master paused or killed too,
    /// and writes the replica has not received yet are lost), wait until every running node
    /// says it serves the shard's slots and the shard's other running nodes replicate it
    /// (the old master too, once it runs and is not paused), and return it: master `i` now.
    ///
    /// # Panics
    ///
    /// If master `i` has no running replica, a node refuses or does not answer, or the failover
    /// has not settled within 20 s.
    pub fn fail_over(&self, i: usize) -> &Node {
        let promoted = self.promote(i, Some("TAKEOVER"));
        &self.nodes[promoted.unwrap_or_else(|e| panic!("redis cluster: failover of master {i}: {e}"))]
    }

    /// Like [`fail_over`](Self::fail_over) with a plain `CLUSTER FAILOVER`: the master stops
    /// its clients until the replica has every write, then the replica is elected by the
    /// masters; nothing is lost. The master must be running and unpaused.
    ///
    /// # Panics
    ///
    /// As [`fail_over`](Self::fail_over).
    pub fn fail_over_gracefully(&self, i: usize) -> &Node {
        let promoted = self.promote(i, None);
        &self.nodes[promoted.unwrap_or_else(|e| panic!("redis cluster: graceful failover of master {i}: {e}"))]
    }

    /// Kill master `i` with SIGKILL (a crash) and reap it. It stays master `i` until a replica
    /// takes over: see [`await_failover`](Self::await_failover) and
    /// [`fail_over`](Self::fail_over).
    pub fn kill_master(&self, i: usize) {
        self.master(i).kill();
    }

    /// Wait until the cluster has failed master `i` over on its own (after
    /// [`kill_master`](Self::kill_master) or a pause: the node timeout is 2 s) and return the
    /// replica that took over, master `i` now. Automatic failover needs a majority of the
    /// masters to see the master fail, so at least 3 masters.
    ///
    /// # Panics
    ///
    /// If no replica has taken over within 20 s.
    pub fn await_failover(&self, i: usize) -> &Node {
        let promoted = self.shard(i).and_then(|shard| {
            let owned = self.served_by(shard.master)?;
            self.await_promotion(i, &shard.replicas, &owned)
        });
        &self.nodes[promoted.unwrap_or_else(|e| panic!("redis cluster: failover of master {i}: {e}"))]
    }

    fn try_migrate_slots(&self, slots: &[u16], to: usize) -> Result<(), String> {
        let target = self.shard(to)?.master;
        if let Some(slot) = slots.iter().find(|&&s| usize::from(s) >= SLOTS) {
            return Err(format!("slot {slot} is not below {SLOTS}"));
        }
        let owners = self.owners()?;
        let mut conns = Conns::new(self);
        let mut moved = Vec::with_capacity(slots.len());
        for &slot in slots {
            let source = owners[usize::from(slot)].ok_or_else(|| format!("slot {slot} is not served"))?;
            if source == target || moved.contains(&slot) {
                continue;
            }
            let step = self
                .open_migration(&mut conns, slot, source, target)
                .and_then(|()| self.move_slot_keys(&mut conns, slot, source, target))
                .and_then(|_| self.assign(&mut conns, slot, source, target));
            step.map_err(|e| format!("slot {slot}: {e}"))?;
            moved.push(slot);
        }
        self.await_owner(&moved, target)
    }

    /// The node serving `slot` now and the master of shard `to`.
    fn endpoints(&self, slot: u16, to: usize) -> Result<(usize, usize), String> {
        let target = self.shard(to)?.master;
        if usize::from(slot) >= SLOTS {
            return Err(format!("slot {slot} is not below {SLOTS}"));
        }
        let source = self.owners()?[usize::from(slot)].ok_or_else(|| format!("slot {slot} is not served"))?;
        Ok((source, target))
    }

    fn open_migration(&self, conns: &mut Conns<'_>, slot: u16, source: usize, target: usize) -> Result<(), String> {
        let slot = slot.to_string();
        conns.send(target, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &self.ids[source]])?;
        conns.send(source, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &self.ids[target]])?;
        Ok(())
    }

    /// Move the keys of `slot` from `source` to `target` until the source has none left.
    fn move_slot_keys(&self, conns: &mut Conns<'_>, slot: u16, source: usize, target: usize) -> Result<usize, String> {
        let mut moved = 0;
        loop {
            let reply = conns.send(source, &["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), &BATCH.to_string()])?;
            let Reply::Array(Some(keys)) = reply else {
                return Err(format!("CLUSTER GETKEYSINSLOT: unexpected {reply:?}"));
            };
            if keys.is_empty() {
                return Ok(moved);
            }
            let keys: Vec<String> = keys.iter().filter_map(Reply::as_text).collect();
            self.migrate_keys(conns, source, target, &keys)?;
            moved += keys.len();
        }
    }

    /// `MIGRATE` `keys` from `source` to `target`, logging in with the cluster's credentials.
    fn migrate_keys(&self, conns: &mut Conns<'_>, source: usize, target: usize, keys: &[String]) -> Result<(), String> {
        let to = self.nodes[target].addr();
        let (ip, port) = (to.ip().to_string(), to.port().to_string());
        let mut args = vec!["MIGRATE", &ip, &port, "", "0", "5000"];
        if let Some((user, pass)) = self.credentials() {
            args.extend(["AUTH2", user, pass]);
        }
        args.push("KEYS");
        args.extend(keys.iter().map(String::as_str));
        conns.send(source, &args).map(drop)
    }

    /// Give `slot` to `target`: on the target first (it leaves the importing state and bumps
    /// its config epoch), then the source, then every other running master.
    fn assign(&self, conns: &mut Conns<'_>, slot: u16, source: usize, target: usize) -> Result<(), String> {
        let (slot, id) = (slot.to_string(), &self.ids[target]);
        let masters: Vec<usize> = self.shards().iter().map(|s| s.master).collect();
        let others = masters.into_iter().filter(|&m| m != source && m != target && self.is_live(m));
        for n in [target, source].into_iter().chain(others) {
            conns.send(n, &["CLUSTER", "SETSLOT", &slot, "NODE", id])?;
        }
        Ok(())
    }

    /// Wait until every running node says `target` serves `slots`.
    fn await_owner(&self, slots: &[u16], target: usize) -> Result<(), String> {
        wait_for("every node to agree on the new owner", SETTLE_TIMEOUT, || {
            self.settled(false, |owners| match slots.iter().find(|&&s| owners[usize::from(s)] != Some(target)) {
                Some(s) => Err(format!("slot {s} is served by {:?}, not node {target}", owners[usize::from(*s)])),
                None => Ok(()),
            })
        })
    }

    /// A copy of shard `i`.
    fn shard(&self, i: usize) -> Result<Shard, String> {
        let shards = self.shards();
        shards.get(i).cloned().ok_or_else(|| format!("there is no master {i} (the cluster has {})", shards.len()))
    }

    /// The slots node `n` serves, as the first running node says.
    fn served_by(&self, n: usize) -> Result<Vec<u16>, String> {
        let owners = self.owners()?;
        Ok(owners.iter().zip(0..).filter(|(owner, _)| **owner == Some(n)).map(|(_, slot)| slot).collect())
    }

    fn promote(&self, i: usize, how: Option<&str>) -> Result<usize, String> {
        let shard = self.shard(i)?;
        let candidate =
            shard.replicas.iter().copied().find(|&r| self.is_live(r)).ok_or("it has no running, unpaused replica")?;
        let owned = self.served_by(shard.master)?;
        let mut args = vec!["CLUSTER", "FAILOVER"];
        args.extend(how);
        Conns::new(self).send(candidate, &args)?;
        self.await_promotion(i, &[candidate], &owned)
    }

    /// Wait until one of `candidates` is a master, make it master `i`, then wait until every
    /// running node says it serves `owned` and the shard's running nodes replicate it.
    fn await_promotion(&self, i: usize, candidates: &[usize], owned: &[u16]) -> Result<usize, String> {
        let mut promoted = None;
        wait_for("a replica to become master", SETTLE_TIMEOUT, || {
            for &c in candidates.iter().filter(|&&c| self.is_live(c)) {
                let info = info(&self.nodes[c], "replication").map_err(|e| format!("node {c}: {e}"))?;
                if field(&info, "role") == Some("master") {
                    promoted = Some(c);
                    return Ok(());
                }
            }
            Err(format!("none of nodes {candidates:?} is master"))
        })?;
        let Some(new) = promoted else { return Err("no replica was promoted".to_owned()) };
        {
            let mut shards = self.shards();
            let shard = &mut shards[i];
            let old = std::mem::replace(&mut shard.master, new);
            shard.replicas.retain(|&r| r != new);
            shard.replicas.push(old);
        }
        wait_for("the failover to settle", SETTLE_TIMEOUT, || {
            self.settled(false, |owners| match owned.iter().find(|&&s| owners[usize::from(s)] != Some(new)) {
                Some(s) => Err(format!("slot {s} is served by {:?}, not node {new}", owners[usize::from(*s)])),
                None => Ok(()),
            })
        })?;
        Ok(new)
    }
}
