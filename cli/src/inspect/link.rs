//! A node as `status` and `scan` read it: a standalone Redis (one connection), or a Redis
//! Cluster (a connection to each master, each key read on the master serving its slot, in the
//! form the clients store it). The readers above see one node's view either way.

use std::collections::BTreeMap;
use std::io;
use std::time::{Duration, Instant};

use redlease_client::adapter::NodeTransport;
use redlease_core::NodeConfig;
use redlease_core::cluster::hash_slot;
use redlease_core::resp::{Frame, decode_frame};
use redlease_servers::{RedisConn, Reply};

use super::fault::Fault;
use super::redis_cluster::{ClusterLink, cluster_form, name_of, unwrap_form};
use super::sentinel::{Seen, open_master};
use crate::connect::open;

/// A connection to a node that answered.
pub(super) struct Open {
    link: Link,
    /// The round trip of a `PING` to the node's URL.
    rtt: Duration,
    /// On a Sentinel-managed node: what its sentinels said, and the master in use.
    pub(super) sentinel: Option<Seen>,
}

enum Link {
    Standalone(RedisConn),
    Cluster(Box<ClusterLink>),
}

/// Where a node that is a Redis Cluster keeps a key: the master serving its slot.
pub(super) struct Served {
    /// The master's `host:port`.
    pub(super) master: String,
    pub(super) slot: u16,
    /// How many masters the node's slot map names.
    pub(super) masters: usize,
}

/// A key found by [`Open::keys`].
pub(super) struct Hit {
    /// Its name as a standalone node has it (a cluster form mapped back).
    pub(super) name: String,
    /// The key as the node stores it.
    pub(super) key: String,
    /// The master it was found on (0 on a standalone node).
    pub(super) master: usize,
}

/// Open a connection to `node`, time a `PING` on it, and find out whether it is a Redis
/// Cluster (`INFO` says `cluster_enabled:1`, or `CLUSTER SLOTS` answers a map): then read its
/// slot map and connect to every master.
pub(super) fn open_node(node: &NodeConfig, how: &NodeTransport) -> Result<Open, Fault> {
    if let Some(sentinel) = &node.sentinel {
        let (mut conn, seen) = open_master(node, sentinel, how)?;
        let started = Instant::now();
        conn.cmd(&["PING"])?;
        let rtt = started.elapsed();
        if let Some(m) = node.min_replicas {
            replicas_online(&mut conn, m.replicas)?;
        }
        return Ok(Open { link: Link::Standalone(conn), rtt, sentinel: Some(seen) });
    }
    let mut conn = open(node, how).map_err(|e| {
        if e.contains("not allowed in cluster mode") {
            Fault::misconfigured(format!(
                "the node is a Redis Cluster, whose only database is 0: drop /{} from its URL ({e})",
                node.db
            ))
        } else {
            Fault::of(e)
        }
    })?;
    let started = Instant::now();
    conn.cmd(&["PING"])?;
    let rtt = started.elapsed();
    let link = match slot_map(&mut conn)? {
        None => {
            if let Some(m) = node.min_replicas {
                replicas_online(&mut conn, m.replicas)?;
            }
            Link::Standalone(conn)
        }
        Some(map) => Link::Cluster(Box::new(ClusterLink::from_slots(node, how, conn, rtt, &map)?)),
    };
    Ok(Open { link, rtt, sentinel: None })
}

/// Whether a standalone node has the `min` replicas online its URL's `min_replicas` asks for
/// (`ROLE`), as a client's handshake checks: a node short of them is misconfigured, with both
/// numbers (none of its grants could count).
fn replicas_online(conn: &mut RedisConn, min: u32) -> Result<(), Fault> {
    let reply = conn.cmd(&["ROLE"])?;
    let items = match &reply {
        Reply::Error(e) => return Err(Fault::of(format!("ROLE: {e}"))),
        Reply::Array(Some(items)) => items,
        other => return Err(Fault::unreachable(format!("ROLE: an unexpected reply {other:?}"))),
    };
    let online = match (items.first().and_then(Reply::as_text).as_deref(), items.get(2)) {
        (Some("master"), Some(Reply::Array(Some(replicas)))) => replicas.len(),
        (Some("slave" | "replica"), _) => {
            return Err(Fault::misconfigured(format!(
                "min_replicas={min}, but the node is a replica, not a primary: its grants could never count (give \
                 the primary's URL)"
            )));
        }
        _ => return Err(Fault::unreachable(format!("ROLE: an unexpected reply {reply:?}"))),
    };
    if online < min as usize {
        return Err(Fault::misconfigured(format!(
            "min_replicas={min}, but the primary has {online} replica(s) online: its grants could never count (give \
             it replicas, or lower min_replicas in its URL)"
        )));
    }
    Ok(())
}

/// The `CLUSTER SLOTS` map of a node that is a Redis Cluster, whole as it came; `None` for a
/// standalone node (a node whose ACL refuses both `INFO` and `CLUSTER SLOTS` is taken as one).
fn slot_map(conn: &mut RedisConn) -> Result<Option<Vec<u8>>, Fault> {
    let info = conn.cmd(&["INFO", "cluster"])?.as_text().unwrap_or_default();
    let enabled = info.lines().find_map(|l| l.trim().strip_prefix("cluster_enabled:"));
    if enabled == Some("0") {
        return Ok(None);
    }
    let map = conn.cmd_raw(&["CLUSTER", "SLOTS"])?;
    match decode_frame(&map) {
        Ok(Some((Frame::Array(_), _))) => Ok(Some(map)),
        Ok(Some((Frame::Error(e), _))) if enabled == Some("1") => Err(Fault::misconfigured(format!(
            "the node is a Redis Cluster (INFO says cluster_enabled:1) and refuses CLUSTER SLOTS ({}): \
             its ACL user needs +cluster|slots",
            String::from_utf8_lossy(e)
        ))),
        _ => Ok(None),
    }
}

impl Open {
    /// `key` (a lock key, a semaphore's permit key) as the node stores it: its cluster form on a
    /// Redis Cluster.
    pub(super) fn stored(&self, key: &str) -> Result<String, Fault> {
        match &self.link {
            Link::Standalone(_) => Ok(key.to_owned()),
            Link::Cluster(_) => cluster_form(key),
        }
    }

    /// Run `f` on the connection that serves `key` (as stored); an error names the master.
    pub(super) fn on<T>(&mut self, key: &str, f: impl FnMut(&mut RedisConn) -> io::Result<T>) -> Result<T, Fault> {
        let master = match &self.link {
            Link::Standalone(_) => 0,
            Link::Cluster(c) => c.master_of(key)?,
        };
        self.on_master(master, f)
    }

    /// Run `f` on master `m` (the one connection of a standalone node); an error names the
    /// master. On a Redis Cluster whose slot moves meanwhile, `f` follows the redirect: `MOVED`
    /// to the slot's new master (which serves the slot from then on), `ASK` to the importing
    /// one behind `ASKING`; at most [`MAX_HOPS`] of them.
    pub(super) fn on_master<T>(
        &mut self,
        m: usize,
        mut f: impl FnMut(&mut RedisConn) -> io::Result<T>,
    ) -> Result<T, Fault> {
        let c = match &mut self.link {
            Link::Standalone(conn) => return Ok(f(conn)?),
            Link::Cluster(c) => c,
        };
        let (mut at, mut asking) = (m, false);
        for _ in 0..=MAX_HOPS {
            let conn = c.conn(at)?;
            if asking {
                conn.checked(&["ASKING"]).map_err(|e| Fault::of(e).at_master(c.addr(at)))?;
            }
            let error = match f(c.conn(at)?) {
                Ok(value) => return Ok(value),
                Err(e) => e,
            };
            match c.redirected(&error.to_string())? {
                Some((to, ask)) => (at, asking) = (to, ask),
                None => return Err(Fault::of(error).at_master(c.addr(at))),
            }
        }
        Err(Fault::unreachable(format!(
            "the Redis Cluster redirected a read more than {MAX_HOPS} times (is it resharding?): run it again"
        )))
    }

    /// The round trip of a `PING` to where `key` (as stored) is read.
    pub(super) fn rtt_of(&self, key: &str) -> Duration {
        match &self.link {
            Link::Cluster(c) => c.master_of(key).map_or(self.rtt, |m| c.rtt(m)),
            Link::Standalone(_) => self.rtt,
        }
    }

    /// On a Redis Cluster, where `key` (as stored) is read; `None` on a standalone node.
    pub(super) fn served(&self, key: &str) -> Option<Served> {
        let Link::Cluster(c) = &self.link else { return None };
        let master = c.addr(c.master_of(key).ok()?).to_owned();
        Some(Served { master, slot: hash_slot(key.as_bytes()), masters: c.len() })
    }

    /// On a Redis Cluster, its masters' addresses; `None` on a standalone node.
    pub(super) fn masters(&self) -> Option<Vec<&str>> {
        match &self.link {
            Link::Cluster(c) => Some(c.addrs()),
            Link::Standalone(_) => None,
        }
    }

    /// On a Redis Cluster, master `m`'s address.
    pub(super) fn master_addr(&self, m: usize) -> Option<&str> {
        match &self.link {
            Link::Cluster(c) => Some(c.addr(m)),
            Link::Standalone(_) => None,
        }
    }

    /// The values of `keys` (as stored), as text: one `MGET` on a standalone node, one per
    /// slot on a Redis Cluster.
    pub(super) fn mget(&mut self, keys: &[String]) -> Result<Vec<Option<String>>, Fault> {
        if matches!(self.link, Link::Standalone(_)) {
            return self.on_master(0, |c| mget(c, keys));
        }
        let mut by_slot: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, key) in keys.iter().enumerate() {
            by_slot.entry(hash_slot(key.as_bytes())).or_default().push(i);
        }
        let mut values = vec![None; keys.len()];
        for at in by_slot.values() {
            let group: Vec<String> = at.iter().map(|&i| keys[i].clone()).collect();
            let got = self.on(&group[0], |c| mget(c, &group))?;
            for (&i, value) in at.iter().zip(got) {
                values[i] = value;
            }
        }
        Ok(values)
    }

    /// The keys `root` (a literal prefix) followed by what matches `pattern` (a `SCAN` glob),
    /// on every master: on a Redis Cluster both the keys stored as they are and the cluster
    /// forms (`root{…}`) of the keys that match, each named as a standalone node has it. A
    /// master that does not answer fails the whole scan of the node, naming the master.
    pub(super) fn keys(&mut self, root: &str, pattern: &str) -> Result<Vec<Hit>, Fault> {
        let literal = glob_literal(root);
        let masters = match &self.link {
            Link::Standalone(_) => {
                let keys = self.on_master(0, |c| c.keys(&format!("{literal}{pattern}")))?;
                return Ok(keys.into_iter().map(|key| Hit { name: key.clone(), key, master: 0 }).collect());
            }
            Link::Cluster(c) => c.len(),
        };
        let mut hits: Vec<Hit> = Vec::new();
        // A pattern of stars alone matches every key and every form: one `SCAN` finds both.
        let everything = pattern.chars().all(|c| c == '*') && !pattern.is_empty();
        for m in 0..masters {
            let as_is = self.on_master(m, |c| c.keys(&format!("{literal}{pattern}")))?;
            let found: Vec<String> = if everything {
                as_is
            } else {
                let tagged = self.on_master(m, |c| c.keys(&format!("{literal}{{{pattern}}}")))?;
                // A key is found by the pattern of its own form only: `{K}` stands for K, which
                // matched the pattern (or did not) inside the braces.
                let wrapped = |key: &str| key.strip_prefix(root).is_some_and(|rest| unwrap_form(rest) != rest);
                as_is.into_iter().filter(|k| !wrapped(k)).chain(tagged.into_iter().filter(|k| wrapped(k))).collect()
            };
            hits.extend(found.into_iter().map(|key| Hit { name: name_of(&key), key, master: m }));
        }
        // A key on two masters (a slot being migrated) is listed once.
        hits.sort_by(|a, b| a.name.cmp(&b.name).then(a.master.cmp(&b.master)));
        hits.dedup_by(|a, b| a.name == b.name);
        Ok(hits)
    }
}

/// Redirects one read follows on a Redis Cluster, as the clients do.
const MAX_HOPS: usize = 5;

/// `MGET` of `keys`, as text; nothing is sent for no keys.
fn mget(conn: &mut RedisConn, keys: &[String]) -> io::Result<Vec<Option<String>>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec!["MGET"];
    args.extend(keys.iter().map(String::as_str));
    match conn.checked(&args)? {
        Reply::Array(Some(values)) if values.len() == keys.len() => Ok(values.iter().map(Reply::as_text).collect()),
        r => Err(io::Error::other(format!("MGET: unexpected {r:?}"))),
    }
}

/// `text` as a literal in a `SCAN` pattern: its glob characters escaped.
pub(super) fn glob_literal(text: &str) -> String {
    text.chars().flat_map(|c| if "*?[]\\".contains(c) { vec!['\\', c] } else { vec![c] }).collect()
}
