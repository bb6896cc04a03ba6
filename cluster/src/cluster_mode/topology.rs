//! What the nodes of a Redis Cluster say about it: `CLUSTER SLOTS`, `INFO` fields, the hash
//! slot of a key, and waiting until they say what is expected.

use std::time::{Duration, Instant};

use crate::node::Node;
use crate::resp::{RedisConn, Reply};

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

/// One range of `CLUSTER SLOTS`: its slots, its master's node id and its replicas' ids.
#[derive(Clone, Debug)]
pub(crate) struct SlotRange {
    pub(crate) start: u16,
    pub(crate) end: u16,
    pub(crate) master: String,
    pub(crate) replicas: Vec<String>,
}

/// `CLUSTER SLOTS` on `conn`.
pub(crate) fn cluster_slots(conn: &mut RedisConn) -> Result<Vec<SlotRange>, String> {
    let reply = conn.checked(&["CLUSTER", "SLOTS"]).map_err(|e| e.to_string())?;
    let bad = |what: &Reply| format!("CLUSTER SLOTS: unexpected {what:?}");
    let Reply::Array(Some(ranges)) = &reply else { return Err(bad(&reply)) };
    let slot = |r: &Reply| match r {
        Reply::Int(n) => u16::try_from(*n).ok().filter(|s| *s < SLOTS),
        _ => None,
    };
    // A node: [ip, port, id, ...]; the id is there since Redis 4.
    let id = |r: &Reply| match r {
        Reply::Array(Some(parts)) => parts.get(2).and_then(Reply::as_text),
        _ => None,
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Reply::Array(Some(parts)) = range else { return Err(bad(range)) };
        let (Some(start), Some(end), Some(master)) =
            (parts.first().and_then(slot), parts.get(1).and_then(slot), parts.get(2).and_then(id))
        else {
            return Err(bad(range));
        };
        let replicas = parts[3..].iter().map(|r| id(r).ok_or_else(|| bad(r))).collect::<Result<_, _>>()?;
        out.push(SlotRange { start, end, master, replicas });
    }
    Ok(out)
}

/// Per slot, the node id of its owner in `ranges` (`None`: not covered).
pub(crate) fn owners(ranges: &[SlotRange]) -> Vec<Option<&str>> {
    let mut owners = vec![None; usize::from(SLOTS)];
    for r in ranges {
        for owner in &mut owners[usize::from(r.start)..=usize::from(r.end)] {
            *owner = Some(r.master.as_str());
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
}
