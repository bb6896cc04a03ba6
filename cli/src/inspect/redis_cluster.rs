//! A node that is a Redis Cluster, as `status` and `scan` read it: its slot map (from
//! `CLUSTER SLOTS`), a connection to each of its masters, and the form the clients give its
//! keys.
//!
//! The clients store a lock key K on a cluster node in its cluster form: K itself when it has a
//! hash tag (`{order:42}:a`), else `{K}`; the keys named after it (its fence counter, waiter
//! queue and readers) are their fixed prefix followed by that form
//! (`redlease:fence:{orders:42}`), so they share its slot. A semaphore's permit keys are tagged
//! by its name already, and its limit key is stored as it is.

use std::time::{Duration, Instant};

use redlease_client::adapter::{NodeTransport, Target};
use redlease_core::cluster::{MAX_MASTERS, Redirect, SLOTS, cluster_key, hash_slot, hash_tag, parse_slots, redirect};
use redlease_core::{NodeConfig, READERS_PREFIX, Transport};
use redlease_servers::{FENCE_PREFIX, RedisConn};

use super::fault::Fault;
use crate::connect::open;

/// The prefix of a lock key's waiter queue.
const QUEUE_PREFIX: &str = "redlease:queue:";

/// The fixed prefixes of the keys named after a lock key.
const DERIVED: [&str; 3] = [FENCE_PREFIX, QUEUE_PREFIX, READERS_PREFIX];

/// The form `key` takes on a cluster node, as the clients store it: itself when it has a hash
/// tag, else `{key}`. A key that starts with `}` and has no tag has no such form (the clients
/// refuse it as misconfigured too).
pub(super) fn cluster_form(key: &str) -> Result<String, Fault> {
    let mut form = Vec::with_capacity(key.len() + 2);
    cluster_key(&mut form, key.as_bytes()).map_err(Fault::misconfigured)?;
    // A key given as text, with braces added, is still text.
    Ok(String::from_utf8_lossy(&form).into_owned())
}

/// The key that `stored` is the cluster form of: `{K}` stands for K when K has no hash tag of
/// its own; any other key stands for itself.
pub(super) fn unwrap_form(stored: &str) -> &str {
    match stored.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        Some(inner) if hash_tag(inner.as_bytes()).is_none() && !inner.starts_with('}') => inner,
        _ => stored,
    }
}

/// The name of a key found on a cluster node, as a standalone node would have it: the lock key
/// it is the form of, and a fence counter, queue or readers' set named after that lock key
/// (`redlease:fence:{orders:42}` is `redlease:fence:orders:42`).
pub(super) fn name_of(stored: &str) -> String {
    for prefix in DERIVED {
        if let Some(rest) = stored.strip_prefix(prefix) {
            return format!("{prefix}{}", unwrap_form(rest));
        }
    }
    unwrap_form(stored).to_owned()
}

/// `host:port` as messages show an address (`[::1]:7000` for IPv6).
fn address(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// A slot no master serves.
const NONE: u16 = u16::MAX;

/// One master of a cluster node.
struct Master {
    /// `host:port`, as messages name it.
    addr: String,
    host: String,
    port: u16,
    /// Its connection once asked for, or why none could be made.
    conn: Option<Result<RedisConn, Fault>>,
    /// The round trip of a `PING` on it.
    rtt: Duration,
}

/// A node that is a Redis Cluster: which master serves each slot, and a connection to each
/// master, made when first needed (`status` reads one master per key, `scan` every master).
pub(super) struct ClusterLink {
    masters: Vec<Master>,
    /// Per slot, the index of its master in `masters` ([`NONE`]: no master serves it).
    slots: Vec<u16>,
    /// How the node is reached (credentials, TLS), which is how its masters are.
    node: NodeConfig,
    how: NodeTransport,
}

impl ClusterLink {
    /// Read the slot map `reply` (the `CLUSTER SLOTS` answer of `seed`, the connection to
    /// `node`, whole as it came), with the clients' parser; its masters are reached as the
    /// clients reach them: with the node's credentials and TLS settings, at the master's host
    /// and port. The seed's connection serves the
    /// master it is. A master that does not answer fails only the keys it serves.
    pub(super) fn from_slots(
        node: &NodeConfig,
        how: &NodeTransport,
        seed: RedisConn,
        seed_rtt: Duration,
        reply: &[u8],
    ) -> Result<ClusterLink, Fault> {
        let ranges = parse_slots(reply).map_err(|e| Fault::unreachable(format!("CLUSTER SLOTS: {e}")))?;
        if ranges.is_empty() {
            return Err(Fault::unreachable("the Redis Cluster serves no slot yet (CLUSTER SLOTS is empty)"));
        }
        // Where the seed is: an announced host that is empty (or `?`) means that host.
        let (seed_host, seed_port) = match &how.target {
            Target::Tcp { host, port } => (host.clone(), Some(*port)),
            // A Unix socket is on this machine.
            Target::Unix(_) => ("localhost".to_owned(), None),
        };
        let mut masters: Vec<Master> = Vec::new();
        let mut slots = vec![NONE; SLOTS];
        let mut seed = Some(seed);
        for r in &ranges {
            let (host, port) = (&r.master.host, r.master.port);
            let host = if host.is_empty() || host == "?" { seed_host.clone() } else { host.clone() };
            let at = match masters.iter().position(|m| m.host == host && m.port == port) {
                Some(at) => at,
                None if masters.len() >= MAX_MASTERS => {
                    return Err(Fault::unreachable(format!(
                        "the Redis Cluster has more than {MAX_MASTERS} masters: more than redlease reads"
                    )));
                }
                None => {
                    let is_seed = host == seed_host && Some(port) == seed_port;
                    let conn = seed.take_if(|_| is_seed).map(Ok);
                    let rtt = if conn.is_some() { seed_rtt } else { Duration::ZERO };
                    masters.push(Master { addr: address(&host, port), host, port, conn, rtt });
                    masters.len() - 1
                }
            };
            slots[usize::from(r.start)..=usize::from(r.end)].fill(at as u16);
        }
        Ok(ClusterLink { masters, slots, node: node.clone(), how: how.clone() })
    }

    /// Follow the redirect that the error `text` is, if it is one (`MOVED slot host:port`, or
    /// `ASK ...`): the master it names (added to the map's masters if new), and whether it is
    /// an `ASK`. A `MOVED` gives that master the slot. `Err` past [`MAX_MASTERS`] masters.
    pub(super) fn redirected(&mut self, text: &str) -> Result<Option<(usize, bool)>, Fault> {
        // The error's text from the redirect on (`GET: MOVED ...`).
        let at = ["MOVED ", "ASK "].iter().filter_map(|p| text.find(p)).min();
        let Some(Redirect { ask, slot, host, port }) = at.and_then(|at| redirect(text[at..].trim_end().as_bytes()))
        else {
            return Ok(None);
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let at = match self.masters.iter().position(|m| m.host == host && m.port == port) {
            Some(at) => at,
            None if self.masters.len() >= MAX_MASTERS => {
                return Err(Fault::unreachable(format!(
                    "the Redis Cluster has more than {MAX_MASTERS} masters: more than redlease reads"
                )));
            }
            None => {
                let addr = address(host, port);
                self.masters.push(Master { addr, host: host.to_owned(), port, conn: None, rtt: Duration::ZERO });
                self.masters.len() - 1
            }
        };
        if !ask {
            self.slots[usize::from(slot)] = at as u16;
        }
        Ok(Some((at, ask)))
    }

    /// How many masters the map names.
    pub(super) fn len(&self) -> usize {
        self.masters.len()
    }

    /// The master serving `key` (in the form the node stores it), by its slot.
    pub(super) fn master_of(&self, key: &str) -> Result<usize, Fault> {
        let slot = hash_slot(key.as_bytes());
        match self.slots[usize::from(slot)] {
            NONE => Err(Fault::unreachable(format!(
                "no master of the Redis Cluster serves slot {slot} (of the key {key:?}): is the cluster down?"
            ))),
            m => Ok(usize::from(m)),
        }
    }

    /// The connection to master `m` (made now if it was not), or why there is none (naming the
    /// master).
    pub(super) fn conn(&mut self, m: usize) -> Result<&mut RedisConn, Fault> {
        let (node, how) = (&self.node, &self.how);
        let master = &mut self.masters[m];
        let conn = master.conn.get_or_insert_with(|| {
            let (conn, rtt) = connect_master(node, how, &master.host, master.port);
            master.rtt = rtt;
            conn
        });
        conn.as_mut().map_err(|e| e.clone())
    }

    /// Master `m`'s address, `host:port`.
    pub(super) fn addr(&self, m: usize) -> &str {
        &self.masters[m].addr
    }

    /// The round trip of a `PING` to master `m` (zero before it is connected).
    pub(super) fn rtt(&self, m: usize) -> Duration {
        self.masters[m].rtt
    }

    /// Every master's address, in the order of the map.
    pub(super) fn addrs(&self) -> Vec<&str> {
        self.masters.iter().map(|m| m.addr.as_str()).collect()
    }
}

/// Connect to a master of a cluster node as to the node itself, at `host:port`, and time a
/// `PING` on it; a failure names the master.
fn connect_master(
    node: &NodeConfig,
    how: &NodeTransport,
    host: &str,
    port: u16,
) -> (Result<RedisConn, Fault>, Duration) {
    let mut how = how.clone();
    how.target = Target::Tcp { host: host.to_owned(), port };
    // The seed's transport: TLS to it means TLS to the masters; a Unix socket means TCP.
    let mut node = node.clone();
    if node.transport != Transport::Tls {
        node.transport = Transport::Tcp;
    }
    let at_master = |e: Fault| e.at_master(&address(host, port));
    let mut conn = match open(&node, &how) {
        Ok(conn) => conn,
        Err(e) => return (Err(at_master(Fault::of(e))), Duration::ZERO),
    };
    let started = Instant::now();
    match conn.cmd(&["PING"]) {
        Ok(_) => (Ok(conn), started.elapsed()),
        Err(e) => (Err(at_master(Fault::of(e))), Duration::ZERO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_keeps_its_tag_or_gets_one() {
        assert_eq!(cluster_form("orders:42").unwrap(), "{orders:42}");
        assert_eq!(cluster_form("{order:42}:a").unwrap(), "{order:42}:a");
        assert_eq!(cluster_form("a{}b").unwrap(), "{a{}b}", "an empty tag is no tag");
        assert_eq!(cluster_form("redlease:sem:{api}:3").unwrap(), "redlease:sem:{api}:3");
        assert!(cluster_form("}x").is_err_and(|e| e.text().contains("starts with '}'")));
        assert_eq!(cluster_form("}{x}").unwrap(), "}{x}", "a tag after a leading brace counts");
    }

    #[test]
    fn a_stored_key_maps_back_to_its_name() {
        for key in ["orders:42", "{order:42}:a", "a{}b", "x}", "", "{abc}", "{{a}b}", "redlease:sem:{api}:0", "é{"] {
            let stored = cluster_form(key).unwrap();
            let back = unwrap_form(&stored);
            // `{abc}` and `abc` share a form; it names the key without a tag of its own.
            let expected = if key == "{abc}" { "abc" } else { key };
            assert_eq!(back, expected, "{key:?} stored as {stored:?}");
            assert_eq!(cluster_form(back).unwrap(), stored, "{key:?}");
        }
        // Keys the clients did not write stand for themselves.
        assert_eq!(unwrap_form("plain"), "plain");
        assert_eq!(unwrap_form("{}"), "");
        assert_eq!(unwrap_form("{}x}"), "{}x}");
        assert_eq!(name_of("redlease:fence:{orders:42}"), "redlease:fence:orders:42");
        assert_eq!(name_of("redlease:readers:{order:42}:a"), "redlease:readers:{order:42}:a");
        assert_eq!(name_of("redlease:queue:{jobs}"), "redlease:queue:jobs");
        assert_eq!(name_of("{app:jobs:1}"), "app:jobs:1");
    }

    #[test]
    fn an_ipv6_address_is_bracketed() {
        assert_eq!(address("::1", 7000), "[::1]:7000");
    }
}
