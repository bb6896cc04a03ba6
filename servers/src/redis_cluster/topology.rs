//! What the nodes of a Redis Cluster say about it: `CLUSTER SLOTS`, `INFO` fields, the hash
//! slot of a key, and waiting until they say what is expected.

use std::time::{Duration, Instant};

use crate::conn::{RedisConn, Reply};
use crate::node::Node;

/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// How long forming a cluster, a slot migration or a failover may take to settle.
pub(crate) const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// The hash slot of `key`, as Redis Cluster computes it (`CLUSTER KEYSLOT`): CRC16/XMODEM of
/// its hash tag (what lies between its first `{` and the next `}`, when not empty), or of the
/// whole key, modulo 16384.
pub fn key_slot(key: &str) -> u16 {
    redlease_core::cluster::hash_slot(key.as_bytes())
}

/// One range of a `CLUSTER SLOTS` answer: its slots, its master and its replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRange {
    /// The first slot.
    pub start: u16,
    /// The last slot.
    pub end: u16,
    /// The master serving them.
    pub master: SlotNode,
    /// Its replicas.
    pub replicas: Vec<SlotNode>,
}

/// A node of a [`SlotRange`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotNode {
    /// As the cluster announces it: empty or `?` when a client is to use the host it asked.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Its node id.
    pub id: String,
}

/// `CLUSTER SLOTS` on `conn`.
pub(crate) fn cluster_slots(conn: &mut RedisConn) -> Result<Vec<SlotRange>, String> {
    parse_cluster_slots(&conn.checked(&["CLUSTER", "SLOTS"]).map_err(|e| e.to_string())?)
}

/// The ranges of a `CLUSTER SLOTS` answer, their masters and replicas (metadata after a node's
/// id is skipped). `Err` names what is malformed.
pub fn parse_cluster_slots(reply: &Reply) -> Result<Vec<SlotRange>, String> {
    let bad = |what: &Reply| format!("CLUSTER SLOTS: unexpected {what:?}");
    let Reply::Array(Some(ranges)) = reply else { return Err(bad(reply)) };
    let slot = |r: &Reply| match r {
        Reply::Int(n) => u16::try_from(*n).ok().filter(|s| *s < SLOTS),
        _ => None,
    };
    // A node: [host, port, id, ...]; the id is there since Redis 4.
    let node = |r: &Reply| match r {
        Reply::Array(Some(parts)) => match parts.as_slice() {
            [host, Reply::Int(port), id, ..] => {
                Some(SlotNode { host: host.as_text()?, port: u16::try_from(*port).ok()?, id: id.as_text()? })
            }
            _ => None,
        },
        _ => None,
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Reply::Array(Some(parts)) = range else { return Err(bad(range)) };
        let (Some(start), Some(end), Some(master)) =
            (parts.first().and_then(slot), parts.get(1).and_then(slot), parts.get(2).and_then(node))
        else {
            return Err(bad(range));
        };
        if start > end {
            return Err(bad(range));
        }
        let replicas = parts[3..].iter().map(|r| node(r).ok_or_else(|| bad(r))).collect::<Result<_, _>>()?;
        out.push(SlotRange { start, end, master, replicas });
    }
    Ok(out)
}

/// Per slot, the node id of its owner in `ranges` (`None`: not covered).
pub(crate) fn owners(ranges: &[SlotRange]) -> Vec<Option<&str>> {
    let mut owners = vec![None; usize::from(SLOTS)];
    for r in ranges {
        for owner in &mut owners[usize::from(r.start)..=usize::from(r.end)] {
            *owner = Some(r.master.id.as_str());
        }
    }
    owners
}

/// `INFO section` on `node` as text.
pub(crate) fn info(node: &Node, section: &str) -> Result<String, String> {
    let mut conn = node.conn().map_err(|e| e.to_string())?;
    conn.checked(&["INFO", section]).map(|r| r.as_text().unwrap_or_default()).map_err(|e| e.to_string())
}

/// The value of `field` in an `INFO` text (`field:value` lines).
pub(crate) fn field<'t>(info: &'t str, field: &str) -> Option<&'t str> {
    info.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')).map(str::trim)
}

/// Call `check` until it returns `Ok` (what `what` waits for is there), for up to `timeout`;
/// then fail with `what` and the last reason `check` gave.
pub(crate) fn wait_for(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match check() {
            Ok(()) => return Ok(()),
            Err(reason) => reason,
        };
        if Instant::now() > deadline {
            return Err(format!("{what}: not done within {timeout:?}; last: {last}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_match_redis() {
        // Values from `CLUSTER KEYSLOT`.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("bar"), 5061);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("foo{{bar}}zap"), key_slot("{bar"));
        assert_eq!(key_slot(""), 0);
    }

    #[test]
    fn info_fields() {
        let text = "# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n";
        assert_eq!(field(text, "role"), Some("slave"));
        assert_eq!(field(text, "master_link_status"), Some("up"));
        assert_eq!(field(text, "master"), None);
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Some(s.as_bytes().to_vec()))
    }

    fn range(start: i64, end: i64, host: &str, port: i64) -> Reply {
        let master = Reply::Array(Some(vec![bulk(host), Reply::Int(port), bulk("id")]));
        let replica = Reply::Array(Some(vec![bulk(host), Reply::Int(port + 3), bulk("id2")]));
        Reply::Array(Some(vec![Reply::Int(start), Reply::Int(end), master, replica]))
    }

    #[test]
    fn reads_the_slot_map_and_refuses_a_malformed_one() {
        let reply = Reply::Array(Some(vec![range(0, 8191, "10.0.0.1", 7000), range(8192, 16383, "", 7001)]));
        let ranges = parse_cluster_slots(&reply).unwrap();
        assert_eq!(ranges.len(), 2);
        let node = |port: u16, id: &str| SlotNode { host: String::new(), port, id: id.to_owned() };
        assert_eq!(
            ranges[1],
            SlotRange { start: 8192, end: 16383, master: node(7001, "id"), replicas: vec![node(7004, "id2")] }
        );
        for bad in [
            Reply::Int(3),
            Reply::Array(Some(vec![range(0, 16384, "h", 7000)])),
            Reply::Array(Some(vec![range(10, 5, "h", 7000)])),
            Reply::Array(Some(vec![range(0, 5, "h", 70000)])),
            Reply::Array(Some(vec![range(-1, 5, "h", 7000)])),
            Reply::Array(Some(vec![Reply::Array(Some(vec![Reply::Int(0), Reply::Int(1)]))])),
        ] {
            assert!(parse_cluster_slots(&bad).is_err(), "{bad:?}");
        }
    }
}
