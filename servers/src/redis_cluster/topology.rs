//! What the nodes of a Redis Cluster say about it: `CLUSTER SLOTS` (read with the core's
//! parser), `INFO` fields, the hash slot of a key, and waiting until they say what is expected.

use std::time::{Duration, Instant};

use redlease_core::cluster::{SLOTS, SlotRange, parse_slots};
use redlease_core::resp::{Frame, decode_frame};

use crate::conn::RedisConn;
use crate::node::Node;

/// How long forming a cluster, a slot migration or a failover may take to settle.
pub(crate) const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// The hash slot of `key`, as Redis Cluster computes it (`CLUSTER KEYSLOT`): CRC16/XMODEM of
/// its hash tag (what lies between its first `{` and the next `}`, when not empty), or of the
/// whole key, modulo 16384 ([`redlease_core::cluster::hash_slot`]).
pub fn key_slot(key: &str) -> u16 {
    redlease_core::cluster::hash_slot(key.as_bytes())
}

/// `CLUSTER SLOTS` on `conn`, read with the core's parser.
pub(crate) fn cluster_slots(conn: &mut RedisConn) -> Result<Vec<SlotRange>, String> {
    let reply = conn.cmd_raw(&["CLUSTER", "SLOTS"]).map_err(|e| e.to_string())?;
    if let Ok(Some((Frame::Error(e), _))) = decode_frame(&reply) {
        return Err(format!("CLUSTER: {}", String::from_utf8_lossy(e)));
    }
    parse_slots(&reply).map_err(|e| format!("CLUSTER SLOTS: {e}"))
}

/// Per slot, the node id of its owner in `ranges` (`None`: not covered).
pub(crate) fn owners(ranges: &[SlotRange]) -> Vec<Option<&str>> {
    let mut owners = vec![None; SLOTS];
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
}
