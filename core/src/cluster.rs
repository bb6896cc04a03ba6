//! Redis Cluster, the pure parts: hash slots (CRC16 and hash tags), the form a lock key takes
//! on a cluster node, and the slot map read from `CLUSTER SHARDS` (or `CLUSTER SLOTS`).
//!
//! A node that is a Redis Cluster stays one vote: its vote for a lock is the vote of the
//! master that owns the lock's slot. Every key one script touches must hash to that slot, so on
//! a cluster node a lock key carries a hash tag: a key that has one (`orders:{42}`) keeps it,
//! and a key without one is sent as `{key}`. The keys named after a lock key (its fence
//! counter, waiter queue and readers) are a fixed prefix without braces followed by that key,
//! so they share its tag, and its slot.

use crate::resp::{self, Frame};

/// Hash slots of a Redis Cluster.
pub const SLOTS: usize = 16384;

/// Links one cluster node may open beyond its own (its masters, and the importing masters an
/// `ASK` names): a driver that sizes per-link tables once needs at most
/// `nodes × (1 + MAX_MASTERS)` entries.
pub const MAX_MASTERS: usize = 256;

/// CRC16/XMODEM, the checksum Redis Cluster hashes keys with.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The hash tag of `key`: what lies between its first `{` and the first `}` after it, when
/// that is not empty.
pub fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let close = key[open + 1..].iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &key[open + 1..open + 1 + close])
}

/// The hash slot of `key`, as Redis Cluster computes it (`CLUSTER KEYSLOT`).
pub fn hash_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS as u16
}

/// Append the form `key` takes on a cluster node: itself when it has a hash tag, else `{key}`.
/// `Err` for a key that cannot get a tag that way (it starts with `}` and has none).
pub fn cluster_key(out: &mut Vec<u8>, key: &[u8]) -> Result<(), String> {
    if hash_tag(key).is_some() {
        out.extend_from_slice(key);
        return Ok(());
    }
    if key.first() == Some(&b'}') {
        return Err(format!(
            "the key {:?} starts with '}}' and has no hash tag: on a Redis Cluster node, give it one ({{tag}})",
            String::from_utf8_lossy(key)
        ));
    }
    out.push(b'{');
    out.extend_from_slice(key);
    out.push(b'}');
    Ok(())
}

/// The one slot of keys already in their cluster form, or why there is none: keys in several
/// slots cannot be locked by one script on a cluster node.
pub(crate) fn one_slot<'k>(keys: impl Iterator<Item = &'k [u8]>) -> Result<u16, String> {
    let mut slot = None;
    for key in keys {
        let s = hash_slot(key);
        match slot {
            None => slot = Some(s),
            Some(first) if first != s => {
                return Err(format!(
                    "the lock's resources hash to different slots of a Redis Cluster node ({first} and {s}): \
                     give them one hash tag, e.g. {{order:42}}:a and {{order:42}}:b"
                ));
            }
            Some(_) => {}
        }
    }
    slot.ok_or_else(|| "a lock without keys".to_owned())
}

/// One range of hash slots, the master that serves it and its replicas, as a cluster node's
/// `CLUSTER SHARDS` ([`parse_shards`]) or `CLUSTER SLOTS` ([`parse_slots`]) describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotRange {
    /// The first slot.
    pub start: u16,
    /// The last slot (included).
    pub end: u16,
    /// The master serving the range.
    pub master: SlotNode,
    /// Its replicas.
    pub replicas: Vec<SlotNode>,
}

/// A node of a [`SlotRange`]: its endpoint and its cluster node id.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotNode {
    /// Its host as the cluster announces it; empty or `?` when the cluster does not know it,
    /// meaning the host of the node that answered.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Its node id (empty when the answer has none: `CLUSTER SLOTS` before Redis 4).
    pub id: String,
}

/// Slot ranges one map may hold: a cluster's map is rarely more than a few hundred ranges.
pub(crate) const MAX_RANGES: usize = 4096;

/// Parse a whole `CLUSTER SLOTS` reply (RESP2 or RESP3): every range, its master and its
/// replicas (the metadata after a node's id is skipped). A null host (as with
/// `cluster-preferred-endpoint-type unknown-endpoint`) is an empty one. `Err` names what is
/// wrong, also for a map of more than 4096 ranges.
///
/// ```
/// use redlease_core::cluster::parse_slots;
///
/// let reply = b"*1\r\n*4\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nm0\r\n\
///               *3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nr0\r\n";
/// let ranges = parse_slots(reply).unwrap();
/// assert_eq!((ranges[0].start, ranges[0].end, ranges[0].master.port), (0, 16383, 7000));
/// assert_eq!(ranges[0].replicas[0].id, "r0");
/// ```
pub fn parse_slots(reply: &[u8]) -> Result<Vec<SlotRange>, String> {
    let mut r = Reader { buf: reply, pos: 0 };
    let n = r.aggregate()?;
    if n > MAX_RANGES {
        return Err(format!("{n} slot ranges, more than {MAX_RANGES}"));
    }
    let mut ranges = Vec::with_capacity(n);
    for _ in 0..n {
        let items = r.aggregate()?;
        if items < 3 {
            return Err("a slot range without its master".to_owned());
        }
        let start = r.int()?;
        let end = r.int()?;
        if start > end || end >= SLOTS as i64 || start < 0 {
            return Err(format!("the slot range {start}-{end}"));
        }
        let master = r.slots_node()?;
        let replicas = (3..items).map(|_| r.slots_node()).collect::<Result<_, _>>()?;
        ranges.push(SlotRange { start: start as u16, end: end as u16, master, replicas });
    }
    Ok(ranges)
}

/// Parse a whole `CLUSTER SHARDS` reply (Redis 7; RESP2 or RESP3): every shard's slot ranges,
/// the master serving them (one that is `online` if the shard has several, as after a
/// failover) and the shard's replicas, each node at its endpoint (its `ip` when the endpoint
/// is unknown) and with its TLS port when `tls`. `Err` names what is wrong.
pub fn parse_shards(reply: &[u8], tls: bool) -> Result<Vec<SlotRange>, String> {
    let mut r = Reader { buf: reply, pos: 0 };
    let n = r.aggregate()?;
    let mut ranges = Vec::new();
    for _ in 0..n {
        let mut slots = Vec::new();
        let mut master: Option<ShardNode> = None;
        let mut replicas = Vec::new();
        for _ in 0..r.map()? {
            match r.string()? {
                b"slots" => {
                    let k = r.aggregate()?;
                    if k % 2 != 0 || k / 2 + ranges.len() > MAX_RANGES {
                        return Err(format!("{k} slot bounds in a shard"));
                    }
                    for _ in 0..k / 2 {
                        let (start, end) = (r.int()?, r.int()?);
                        if start > end || end >= SLOTS as i64 || start < 0 {
                            return Err(format!("the slot range {start}-{end}"));
                        }
                        slots.push((start as u16, end as u16));
                    }
                }
                b"nodes" => {
                    for _ in 0..r.aggregate()? {
                        let node = r.shard_node(tls)?;
                        if node.role == b"replica" {
                            let port = node.port.ok_or("a replica without a port")?;
                            replicas.push(SlotNode { host: node.host, port, id: node.id });
                        } else if node.role == b"master" && master.as_ref().is_none_or(|m| !m.online && node.online) {
                            master = Some(node);
                        }
                    }
                }
                _ => r.skip()?,
            }
        }
        if slots.is_empty() {
            continue;
        }
        let Some(m) = master else { return Err("a shard with slots and no master".to_owned()) };
        let port = m.port.ok_or("a master without a port")?;
        let master = SlotNode { host: m.host, port, id: m.id };
        ranges.extend(slots.into_iter().map(|(start, end)| SlotRange {
            start,
            end,
            master: master.clone(),
            replicas: replicas.clone(),
        }));
    }
    Ok(ranges)
}

/// One node of a shard, as `CLUSTER SHARDS` describes it.
struct ShardNode {
    /// `master` or `replica`.
    role: Vec<u8>,
    online: bool,
    /// Its endpoint (empty or `?` when unknown).
    host: String,
    port: Option<u16>,
    id: String,
}

/// A cursor over a whole RESP frame (the caller checked it is whole), read with the crate's
/// decoder one frame at a time.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// The next frame, and the byte that gives its type.
    fn next(&mut self) -> Result<(u8, Frame<'a>), String> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let (frame, used) = resp::decode_frame(rest)?.ok_or("a frame cut short")?;
        self.pos += used;
        Ok((rest[0], frame))
    }

    fn aggregate(&mut self) -> Result<usize, String> {
        match self.next()? {
            (_, Frame::Array(n) | Frame::Set(n)) => Ok(n),
            (_, Frame::Null) => Err("a null array".to_owned()),
            (kind, _) => Err(format!("{:?} where an array belongs", kind as char)),
        }
    }

    /// A map's header (RESP3), or an array of keys and values (RESP2): the number of pairs.
    fn map(&mut self) -> Result<usize, String> {
        match self.next()? {
            (_, Frame::Map(n)) => Ok(n),
            (_, Frame::Array(n)) if n % 2 == 0 => Ok(n / 2),
            (_, Frame::Array(_)) => Err("an odd array where a map belongs".to_owned()),
            (_, Frame::Null) => Err("a null map".to_owned()),
            (kind, _) => Err(format!("{:?} where a map belongs", kind as char)),
        }
    }

    /// One node of a `CLUSTER SLOTS` range: `[host, port, id, metadata...]` (the id is there
    /// since Redis 4, the metadata since Redis 7). A null host is an empty one.
    fn slots_node(&mut self) -> Result<SlotNode, String> {
        let fields = self.aggregate()?;
        if fields < 2 {
            return Err("a node without its port".to_owned());
        }
        let host = self.string_or_null()?.unwrap_or_default();
        let port = self.int()?;
        let port = u16::try_from(port).map_err(|_| format!("the port {port}"))?;
        let id = if fields > 2 { self.string_or_null()?.unwrap_or_default() } else { b"" };
        for _ in 3..fields {
            self.skip()?;
        }
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Ok(SlotNode { host: text(host), port, id: text(id) })
    }

    /// One node of `CLUSTER SHARDS`: its id, role, health, endpoint (`ip` if no `endpoint`)
    /// and port (`tls-port` with `tls`, if it has one).
    fn shard_node(&mut self, tls: bool) -> Result<ShardNode, String> {
        let mut node =
            ShardNode { role: Vec::new(), online: false, host: String::new(), port: None, id: String::new() };
        let (mut plain, mut secure, mut ip) = (None, None, String::new());
        for _ in 0..self.map()? {
            let field = self.string()?;
            match field {
                b"port" | b"tls-port" => {
                    let port = self.int()?;
                    let port = u16::try_from(port).map_err(|_| format!("the port {port}"))?;
                    *if field == b"port" { &mut plain } else { &mut secure } = Some(port);
                }
                b"role" => node.role = self.string()?.to_vec(),
                b"id" | b"endpoint" | b"ip" | b"health" => {
                    let value = String::from_utf8_lossy(self.string()?).into_owned();
                    match field {
                        b"id" => node.id = value,
                        b"endpoint" => node.host = value,
                        b"ip" => ip = value,
                        _ => node.online = value == "online",
                    }
                }
                _ => self.skip()?,
            }
        }
        if node.host.is_empty() || node.host == "?" {
            node.host = ip;
        }
        node.port = if tls { secure.or(plain) } else { plain.or(secure) };
        Ok(node)
    }

    fn int(&mut self) -> Result<i64, String> {
        match self.next()? {
            (_, Frame::Int(n)) => Ok(n),
            (kind, _) => Err(format!("{:?} where a number belongs", kind as char)),
        }
    }

    fn string(&mut self) -> Result<&'a [u8], String> {
        self.string_or_null()?.ok_or_else(|| "a null string".to_owned())
    }

    /// A string, or `None` for a null (RESP2 `$-1`, RESP3 `_`).
    fn string_or_null(&mut self) -> Result<Option<&'a [u8]>, String> {
        match self.next()? {
            (_, Frame::Simple(text) | Frame::Bulk(text)) => Ok(Some(text)),
            (_, Frame::Null) => Ok(None),
            (kind, _) => Err(format!("{:?} where a string belongs", kind as char)),
        }
    }

    fn skip(&mut self) -> Result<(), String> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        self.pos += resp::frame_len(rest, 4096, rest.len())?.ok_or("a frame cut short")?;
        Ok(())
    }
}

/// A redirect from a cluster node: `MOVED slot host:port` (the slot has a new owner) or
/// `ASK slot host:port` (this one request goes to the importing master, after `ASKING`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// `ASK` (this request only) rather than `MOVED`.
    pub ask: bool,
    /// The slot redirected.
    pub slot: u16,
    /// Where to: the host as the cluster announces it (empty: the host that answered).
    pub host: String,
    /// Its port.
    pub port: u16,
}

/// The redirect an error reply (its text without the `-`) is, if it is one.
pub fn redirect(error: &[u8]) -> Option<Redirect> {
    let text = std::str::from_utf8(error).ok()?;
    let (ask, rest) = match text.split_once(' ')? {
        ("MOVED", rest) => (false, rest),
        ("ASK", rest) => (true, rest),
        _ => return None,
    };
    let (slot, addr) = rest.trim().split_once(' ')?;
    let slot: u16 = slot.parse().ok().filter(|&s: &u16| (s as usize) < SLOTS)?;
    let (host, port) = addr.rsplit_once(':')?;
    Some(Redirect { ask, slot, host: host.to_owned(), port: port.parse().ok()? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        // `CLUSTER KEYSLOT` answers from the Redis docs.
        assert_eq!(hash_slot(b"somekey"), 11058);
        assert_eq!(hash_slot(b"foo{hash_tag}"), 2515);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"{user1000}.followers"));
        assert_eq!(hash_slot(b"foo{}{bar}"), hash_slot(b"foo{}{bar}"));
        assert_ne!(hash_slot(b"foo{}{bar}"), hash_slot(b"bar"));
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
    }

    #[test]
    fn cluster_keys_share_their_slot_with_what_is_named_after_them() {
        for key in ["orders:42", "a}b", "x{}y", "{tagged}:k", "plain"] {
            let mut k = Vec::new();
            cluster_key(&mut k, key.as_bytes()).unwrap();
            for prefix in ["redlease:fence:", "redlease:queue:", "redlease:readers:"] {
                let derived = [prefix.as_bytes(), &k].concat();
                assert_eq!(hash_slot(&derived), hash_slot(&k), "{key} under {prefix}");
            }
        }
        let mut k = Vec::new();
        assert!(cluster_key(&mut k, b"}x").is_err());
        let keys = [b"{a}1".as_slice(), b"{a}2"];
        assert!(one_slot(keys.iter().copied()).is_ok());
        let keys = [b"{a}1".as_slice(), b"{b}2"];
        assert!(one_slot(keys.iter().copied()).unwrap_err().contains("hash tag"));
    }

    #[test]
    fn redirects_parse() {
        let r = redirect(b"MOVED 3999 127.0.0.1:6381").unwrap();
        assert_eq!(r, Redirect { ask: false, slot: 3999, host: "127.0.0.1".into(), port: 6381 });
        assert!(redirect(b"ASK 1 ::1:7000").is_some_and(|r| r.ask && r.host == "::1"));
        assert!(redirect(b"MOVED 99999 h:1").is_none());
        assert!(redirect(b"ERR nope").is_none());
        assert!(redirect(b"MOVED 1").is_none());
    }

    #[test]
    fn cluster_shards_parse_in_both_protocols() {
        // RESP3, as Redis 7.0 answers (shortened): shard 1 after a failover, its old master
        // failed; a shard without slots.
        let node = |id: &str, port: u16, role: &str, health: &str| {
            format!(
                "%7\r\n$2\r\nid\r\n${}\r\n{id}\r\n$4\r\nport\r\n:{port}\r\n$8\r\ntls-port\r\n:{}\r\n\
                 $2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$1\r\n?\r\n$4\r\nrole\r\n${}\r\n{role}\r\n\
                 $6\r\nhealth\r\n${}\r\n{health}\r\n",
                id.len(),
                port + 1000,
                role.len(),
                health.len()
            )
        };
        let shard = |slots: &str, nodes: &[String]| {
            format!("%2\r\n$5\r\nslots\r\n{slots}$5\r\nnodes\r\n*{}\r\n{}", nodes.len(), nodes.concat())
        };
        let reply = format!(
            "*3\r\n{}{}{}",
            shard(
                "*4\r\n:0\r\n:99\r\n:200\r\n:300\r\n",
                &[node("a", 7000, "master", "online"), node("b", 7003, "replica", "online")]
            ),
            shard(
                "*2\r\n:100\r\n:199\r\n",
                &[node("c", 7001, "master", "failed"), node("d", 7004, "master", "online")]
            ),
            shard("*0\r\n", &[node("e", 7002, "master", "online")]),
        );
        let ranges = parse_shards(reply.as_bytes(), false).unwrap();
        let node = |port, id: &str| SlotNode { host: "127.0.0.1".into(), port, id: id.into() };
        let at =
            |start, end, master, replicas: &[SlotNode]| SlotRange { start, end, master, replicas: replicas.to_vec() };
        assert_eq!(
            ranges,
            [
                at(0, 99, node(7000, "a"), &[node(7003, "b")]),
                at(200, 300, node(7000, "a"), &[node(7003, "b")]),
                at(100, 199, node(7004, "d"), &[])
            ]
        );
        let tls = parse_shards(reply.as_bytes(), true).unwrap();
        assert_eq!(tls[2].master.port, 8004, "the TLS port over TLS");
        assert_eq!(tls[0].replicas[0].port, 8003);
        // RESP2: maps as arrays of keys and values.
        let resp2 = "*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n\
                     *6\r\n$8\r\nendpoint\r\n$4\r\nhost\r\n$4\r\nport\r\n:6379\r\n$4\r\nrole\r\n$6\r\nmaster\r\n";
        let master = SlotNode { host: "host".into(), port: 6379, id: String::new() };
        assert_eq!(
            parse_shards(resp2.as_bytes(), true).unwrap()[0],
            SlotRange { start: 0, end: 16383, master, replicas: Vec::new() }
        );
        assert!(parse_shards(b"*1\r\n%1\r\n$5\r\nslots\r\n*2\r\n:5\r\n:1\r\n", false).is_err());
        let orphan = "*1\r\n%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:1\r\n$5\r\nnodes\r\n*0\r\n";
        assert!(parse_shards(orphan.as_bytes(), false).unwrap_err().contains("no master"));
        assert!(parse_shards(b"*1\r\n*3\r\n", false).is_err());
    }

    #[test]
    fn cluster_slots_parse_in_both_protocols() {
        let resp2 = b"*2\r\n*4\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nr1\r\n*3\r\n:8192\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n%1\r\n$8\r\nhostname\r\n$1\r\nh\r\n";
        let ranges = parse_slots(resp2).unwrap();
        assert_eq!(ranges.len(), 2);
        let node = |port, id: &str| SlotNode { host: "127.0.0.1".into(), port, id: id.into() };
        assert_eq!(
            ranges[0],
            SlotRange { start: 0, end: 8191, master: node(7000, "id"), replicas: vec![node(7003, "r1")] }
        );
        assert_eq!(ranges[1], SlotRange { start: 8192, end: 16383, master: node(7001, "id"), replicas: Vec::new() });
        // `cluster-preferred-endpoint-type unknown-endpoint`: a null host (RESP2 and RESP3), or
        // `?`, is the address the client asked (empty here).
        for null in ["$-1", "_", "$1\r\n?"] {
            let reply = format!("*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n{null}\r\n:7000\r\n$2\r\nid\r\n");
            let ranges = parse_slots(reply.as_bytes()).unwrap_or_else(|e| panic!("{null}: {e}"));
            let host = if null.ends_with('?') { "?" } else { "" };
            let master = SlotNode { host: host.into(), port: 7000, id: "id".into() };
            assert_eq!(ranges, [SlotRange { start: 0, end: 16383, master, replicas: Vec::new() }], "{null}");
        }
        // Before Redis 4 a node has no id.
        let old = parse_slots(b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$1\r\nh\r\n:7000\r\n").unwrap();
        assert_eq!(old[0].master, SlotNode { host: "h".into(), port: 7000, id: String::new() });
        // A replica is a node too.
        assert!(parse_slots(b"*1\r\n*4\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n:5\r\n").is_err());
        assert!(parse_slots(b"*1\r\n*3\r\n:5\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n").is_err());
        assert!(parse_slots(b"*1\r\n*3\r\n:0\r\n:1\r\n").is_err());
        assert!(parse_slots(b"-ERR no\r\n").is_err());
    }
}
