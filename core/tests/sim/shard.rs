//! A master of a simulated Redis Cluster: which requests it serves and which it redirects, as
//! Redis does (`getNodeByQuery`): by its own view of the slot map, the slot it is migrating out
//! or importing, the `ASKING` flag of the connection, and which of the request's keys it has.
//! Besides, injected stale entries make it answer `MOVED` for a slot it may well own, pointing
//! at another master, to provoke redirect ping-pong.
//!
//! The keyspace stays in [`Node`](super::Node); a master is a node with a shard.

use redlease_core::cluster::{SLOTS, hash_slot};

use super::{READERS_PREFIX, Time};

/// The host every master announces (the engines' nodes are `sim:<port>`).
pub(crate) const HOST: &str = "sim";

/// What a master answered, for the run summary.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ShardStats {
    pub(crate) moved: u64,
    pub(crate) ask: u64,
    pub(crate) tryagain: u64,
    /// Redirects answered from an injected stale entry (counted in `moved` too).
    pub(crate) stale: u64,
    /// Requests served under `ASKING` (for an importing slot).
    pub(crate) asking: u64,
    /// `CLUSTER SLOTS` answered.
    pub(crate) map_reads: u64,
    /// Of those, `CLUSTER SLOTS` (asked of an older server, which refused `CLUSTER SHARDS`).
    pub(crate) slots_reads: u64,
    /// Requests whose keys were in two slots (a correct engine never sends one).
    pub(crate) crossslot: u64,
}

/// An injected stale entry: until `until`, requests for `slot` are moved to master `to`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stale {
    pub(crate) slot: u16,
    pub(crate) to: usize,
    pub(crate) until: Time,
}

/// One master's cluster state.
pub(crate) struct Shard {
    /// This master's index in its cluster, and every master's port.
    me: usize,
    ports: Vec<u16>,
    /// This master's view of the slot map: the owner of each slot.
    view: Vec<u8>,
    /// The slot this master migrates to another (`CLUSTER SETSLOT s MIGRATING to`).
    pub(crate) migrating: Option<(u16, usize)>,
    /// The slot this master imports from another (`CLUSTER SETSLOT s IMPORTING from`).
    pub(crate) importing: Option<(u16, usize)>,
    stale: Vec<Stale>,
    pub(crate) stats: ShardStats,
    /// A server older than Redis 7: no `CLUSTER SHARDS`, no sharded pub/sub.
    pub(crate) old: bool,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("me", &self.me)
            .field("ports", &self.ports)
            .field("migrating", &self.migrating)
            .field("importing", &self.importing)
            .field("stale", &self.stale)
            .finish_non_exhaustive()
    }
}

impl Shard {
    /// Master `me` of the cluster whose masters listen on `ports`, seeing the map `view` (the
    /// owner of each slot).
    /// (`old`: a server older than Redis 7.)
    pub(crate) fn new(me: usize, ports: Vec<u16>, view: Vec<u8>, old: bool) -> Self {
        assert_eq!(view.len(), SLOTS);
        let stats = ShardStats::default();
        Shard { me, ports, view, migrating: None, importing: None, stale: Vec::new(), stats, old }
    }

    /// This master's index in its cluster.
    pub(crate) fn me(&self) -> usize {
        self.me
    }

    /// Whether a sharded subscription to a channel of `slot` is served here at `now`
    /// (`Err`: the `MOVED`): by the slot's owner, whatever its migration state.
    pub(crate) fn channel_route(&mut self, now: Time, slot: u16) -> Result<(), String> {
        self.stale.retain(|s| s.until > now);
        if let Some(s) = self.stale.iter().find(|s| s.slot == slot).copied() {
            self.stats.stale += 1;
            return Err(self.redirect(slot, s.to, false));
        }
        let owner = self.owner(slot);
        if owner != self.me {
            return Err(self.redirect(slot, owner, false));
        }
        Ok(())
    }

    /// The owner of `slot` in this master's view.
    pub(crate) fn owner(&self, slot: u16) -> usize {
        self.view[slot as usize] as usize
    }

    /// This master learns that `owner` serves `slot` (`CLUSTER SETSLOT s NODE`, or gossip).
    pub(crate) fn set_owner(&mut self, slot: u16, owner: usize) {
        self.view[slot as usize] = owner as u8;
    }

    pub(crate) fn inject(&mut self, stale: Stale) {
        self.stale.push(stale);
    }

    fn addr(&self, master: usize) -> String {
        format!("{HOST}:{}", self.ports[master])
    }

    /// Whether a request over `keys` is served here at `now` (`asking`: the connection sent
    /// `ASKING` just before; `exists`: whether this master has a key). `Err`: the error reply
    /// (without its `-` and line end): `MOVED`, `ASK`, `TRYAGAIN` or `CROSSSLOT`.
    pub(crate) fn route(
        &mut self,
        now: Time,
        keys: &[&[u8]],
        asking: bool,
        exists: impl Fn(&[u8]) -> bool,
    ) -> Result<(), String> {
        let Some(first) = keys.first() else { return Ok(()) };
        let slot = hash_slot(first);
        if keys.iter().any(|k| hash_slot(k) != slot) {
            self.stats.crossslot += 1;
            return Err("CROSSSLOT Keys in request don't hash to the same slot".to_owned());
        }
        self.stale.retain(|s| s.until > now);
        if let Some(s) = self.stale.iter().find(|s| s.slot == slot).copied() {
            self.stats.stale += 1;
            return Err(self.redirect(slot, s.to, false));
        }
        let owner = self.owner(slot);
        let migrating = self.migrating.filter(|&(s, _)| s == slot && owner == self.me);
        let importing = self.importing.filter(|&(s, _)| s == slot);
        let mut distinct: Vec<&[u8]> = keys.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let missing = distinct.iter().filter(|k| !exists(k)).count();
        let (multiple, existing) = (distinct.len() > 1, distinct.len() - missing);
        if let Some((_, to)) = migrating {
            if missing > 0 {
                // Some keys already left: the request cannot run here as a whole.
                return Err(if existing > 0 { self.tryagain() } else { self.redirect(slot, to, true) });
            }
        }
        if importing.is_some() && asking {
            if multiple && missing > 0 {
                return Err(self.tryagain());
            }
            self.stats.asking += 1;
            return Ok(());
        }
        if owner != self.me {
            return Err(self.redirect(slot, owner, false));
        }
        Ok(())
    }

    fn redirect(&mut self, slot: u16, to: usize, ask: bool) -> String {
        if ask {
            self.stats.ask += 1;
            format!("ASK {slot} {}", self.addr(to))
        } else {
            self.stats.moved += 1;
            format!("MOVED {slot} {}", self.addr(to))
        }
    }

    fn tryagain(&mut self) -> String {
        self.stats.tryagain += 1;
        "TRYAGAIN Multiple keys request during rehashing of slot".to_owned()
    }

    /// This master's view as runs of slots of one owner: `(start, end, owner)`.
    fn runs(&self) -> Vec<(usize, usize, usize)> {
        let mut ranges: Vec<(usize, usize, usize)> = Vec::new();
        for (slot, &owner) in self.view.iter().enumerate() {
            match ranges.last_mut() {
                Some((_, end, o)) if *o == owner as usize && *end + 1 == slot => *end = slot,
                _ => ranges.push((slot, slot, owner as usize)),
            }
        }
        ranges
    }

    /// This master's answer to `CLUSTER SHARDS` (in RESP3 with `resp3`, else with maps as
    /// arrays): one shard per master, its slot ranges in this master's view and itself as
    /// the shard's one node. A server older than Redis 7 refuses it.
    pub(crate) fn shards_reply(&mut self, resp3: bool) -> Vec<u8> {
        if self.old {
            return b"-ERR unknown subcommand 'SHARDS'. Try CLUSTER HELP.\r\n".to_vec();
        }
        self.stats.map_reads += 1;
        let map = |n: usize| if resp3 { format!("%{n}\r\n") } else { format!("*{}\r\n", 2 * n) };
        let runs = self.runs();
        let mut out = format!("*{}\r\n", self.ports.len());
        for (m, port) in self.ports.iter().enumerate() {
            let mine: Vec<_> = runs.iter().filter(|r| r.2 == m).collect();
            out += &map(2);
            out += &format!("$5\r\nslots\r\n*{}\r\n", 2 * mine.len());
            for (start, end, _) in mine {
                out += &format!(":{start}\r\n:{end}\r\n");
            }
            out += "$5\r\nnodes\r\n*1\r\n";
            out += &map(5);
            let id = format!("master-{m}");
            out += &format!("$2\r\nid\r\n${}\r\n{id}\r\n$4\r\nport\r\n:{port}\r\n", id.len());
            out += &format!("$8\r\nendpoint\r\n${}\r\n{HOST}\r\n", HOST.len());
            out += "$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$6\r\nonline\r\n";
        }
        out.into_bytes()
    }

    /// This master's answer to `CLUSTER SLOTS`: its view, one range per run of slots of one
    /// owner, each with the master's host (null from an older server), port and id.
    pub(crate) fn slots_reply(&mut self) -> Vec<u8> {
        self.stats.map_reads += 1;
        self.stats.slots_reads += 1;
        let ranges = self.runs();
        let mut out = format!("*{}\r\n", ranges.len()).into_bytes();
        // An older server runs with `cluster-preferred-endpoint-type unknown-endpoint`: a null
        // host, meaning the address the client asked.
        let host = if self.old { "$-1\r\n".to_owned() } else { format!("${}\r\n{HOST}\r\n", HOST.len()) };
        for (start, end, owner) in ranges {
            let id = format!("master-{owner}");
            out.extend_from_slice(
                format!("*3\r\n:{start}\r\n:{end}\r\n*3\r\n{host}:{}\r\n${}\r\n{id}\r\n", self.ports[owner], id.len())
                    .as_bytes(),
            );
        }
        out
    }
}

/// The keys of a request, as a cluster routes it: `SET`'s key, a script's `KEYS`; none for
/// the rest.
pub(crate) fn request_keys(args: &[Vec<u8>]) -> Vec<&[u8]> {
    let name = args[0].to_ascii_uppercase();
    match name.as_slice() {
        b"SET" if args.len() >= 2 => vec![args[1].as_slice()],
        b"EVAL" | b"EVALSHA" if args.len() >= 3 => {
            let n = std::str::from_utf8(&args[2]).ok().and_then(|s| s.parse::<usize>().ok()).unwrap_or(0);
            args.iter().skip(3).take(n).map(Vec::as_slice).collect()
        }
        _ => Vec::new(),
    }
}

/// A key as the checker names it: the cluster form `{K}` of a lock key `K` without a hash tag
/// becomes `K` again, and so does its readers' key `redlease:readers:{K}`; other keys (a
/// semaphore's permits, tagged already) stay.
pub(crate) fn plain_key(key: &[u8]) -> Vec<u8> {
    let (prefix, rest) = match key.strip_prefix(READERS_PREFIX) {
        Some(rest) => (READERS_PREFIX, rest),
        None => (&b""[..], key),
    };
    match rest.strip_prefix(b"{").and_then(|r| r.strip_suffix(b"}")) {
        Some(inner) if !inner.is_empty() && !inner.contains(&b'{') && !inner.contains(&b'}') => {
            [prefix, inner].concat()
        }
        _ => key.to_vec(),
    }
}
