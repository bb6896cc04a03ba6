//! The servers of a Sentinel-managed node: a primary, its replicas, and the sentinels that
//! watch it, as model nodes.
//!
//! A replica holds a copy ([`Keyspace`]) of its primary's keys as of the last time it synced (the
//! world syncs every replica online at the replication lag, and at once when a `WAIT` counts
//! it); it answers `ROLE` as a replica and refuses writes with `READONLY`. Its copy is not the
//! node's keyspace until a failover promotes it: then its keys are the new primary's, from
//! that instant, with the expiry they had (Redis replicates absolute expiry times; the servers
//! of one node share its clock). The old primary's keys end there: it comes back as a replica.
//!
//! A sentinel answers `SENTINEL get-master-addr-by-name` with the master it knows for its
//! service, takes `SUBSCRIBE +switch-master` (RESP2, as the engine speaks to sentinels), and
//! announces a switch to its subscribers when it learns one.

use std::collections::{BTreeMap, VecDeque};

use super::{Entry, Key, Node, ReaderSet, Scores, Segment, Session, Time, bulk, parse_int};

/// The host every server of a Sentinel-managed node is named by (as in the engines' configs).
pub(crate) const HOST: &str = "sim";

/// What a replica has of its primary's keyspace: every key with its expiry (readings of the
/// node's clock), waiter queues and readers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Keyspace {
    data: BTreeMap<Key, Entry>,
    queues: BTreeMap<Key, VecDeque<Vec<u8>>>,
    queue_scores: BTreeMap<Key, Scores>,
    queue_expiry: BTreeMap<Key, i64>,
    readers: BTreeMap<Key, ReaderSet>,
}

/// A sentinel: the service it watches, the port of the master it names for it (on [`HOST`]),
/// and the failover that made it the master (its `config-epoch`).
#[derive(Clone, Debug)]
pub(crate) struct Watch {
    pub(crate) service: String,
    pub(crate) master: u16,
    pub(crate) epoch: u64,
}

/// The channel on which sentinels announce a new master.
const SWITCH: &[u8] = b"+switch-master";

impl Node {
    /// A copy of the keyspace at `now`, as a replica that syncs now gets it.
    pub(crate) fn keyspace(&mut self, now: Time) -> Keyspace {
        self.purge(now);
        Keyspace {
            data: self.data.clone(),
            queues: self.queues.clone(),
            queue_scores: self.queue_scores.clone(),
            queue_expiry: self.queue_expiry.clone(),
            readers: self.readers.clone(),
        }
    }

    /// This replica becomes the primary at `now`, with what it had (`copy`): its keys are the
    /// node's from now on.
    pub(crate) fn promote(&mut self, now: Time, copy: Keyspace) {
        self.replica_of = None;
        let Keyspace { mut data, queues, queue_scores, queue_expiry, mut readers } = copy;
        for e in data.values_mut() {
            e.since = now;
        }
        for set in readers.values_mut() {
            for m in set.members.values_mut() {
                m.1 = now;
            }
        }
        (self.data, self.queues, self.queue_scores, self.queue_expiry, self.readers) =
            (data, queues, queue_scores, queue_expiry, readers);
        self.purge(now);
    }

    /// This primary becomes a replica of the server at `master` at `now`: the spans of its
    /// keys end, and its keyspace is a copy of its new primary's from now on (kept by the
    /// world, not here).
    pub(crate) fn demote(&mut self, now: Time, master: u16) {
        self.purge(now);
        for ((db, key), e) in std::mem::take(&mut self.data) {
            if self.is_lock_key(&key) {
                self.history.push(Segment { db, key, token: e.value, from: e.since, to: now });
            }
        }
        for (k, set) in std::mem::take(&mut self.readers) {
            self.close_members(&k, set, now);
        }
        self.queues.clear();
        self.queue_scores.clear();
        self.queue_expiry.clear();
        self.replica_of = Some(master);
    }

    /// `ROLE` of a server of a Sentinel-managed node: a replica, or a primary with the
    /// replicas online now. `false`: not such a server.
    pub(super) fn sentinel_role(&self, out: &mut Vec<u8>) -> bool {
        if let Some(master) = self.replica_of {
            let port = master.to_string();
            out.extend_from_slice(b"*5\r\n$5\r\nslave\r\n");
            bulk(out, HOST.as_bytes());
            out.extend_from_slice(format!(":{port}\r\n$9\r\nconnected\r\n:0\r\n").as_bytes());
            return true;
        }
        let Some(online) = self.in_sync else { return false };
        out.extend_from_slice(format!("*3\r\n$6\r\nmaster\r\n:0\r\n*{online}\r\n").as_bytes());
        for _ in 0..online {
            out.extend_from_slice(b"*3\r\n$3\r\nsim\r\n$4\r\n9999\r\n$1\r\n0\r\n");
        }
        true
    }

    /// `WAIT want timeout` on a Sentinel-managed primary: the replicas online now have every
    /// write so far (the world copies the keyspace to them once the command is done). Too few:
    /// the grant it follows is not one of its round's. `false`: not such a primary.
    pub(super) fn sentinel_wait(&mut self, args: &[Vec<u8>], out: &mut Vec<u8>) -> bool {
        let Some(online) = self.in_sync else { return false };
        let want = parse_int(&args[1]).unwrap_or(0);
        self.stats.waits += 1;
        if (online as i64) < want {
            self.stats.waits_short += 1;
            let (conn, i) = self.current;
            self.granted.retain(|g| g.2 != (conn, i.wrapping_sub(1)));
        }
        self.synced |= online > 0;
        out.extend_from_slice(format!(":{online}\r\n").as_bytes());
        true
    }

    /// A command to a sentinel (after `AUTH`, which any node answers).
    pub(super) fn sentinel_command(&mut self, session: &mut Session, name: &[u8], args: &[Vec<u8>], out: &mut Vec<u8>) {
        let Some(watch) = &self.sentinel else { return };
        match (name, args.len()) {
            (b"SENTINEL", 3) if args[1].eq_ignore_ascii_case(b"get-master-addr-by-name") => {
                if args[2] != watch.service.as_bytes() {
                    out.extend_from_slice(b"*-1\r\n");
                    return;
                }
                out.extend_from_slice(b"*2\r\n");
                bulk(out, HOST.as_bytes());
                bulk(out, watch.master.to_string().as_bytes());
            }
            (b"SUBSCRIBE", 2) if args[1] == SWITCH => {
                session.channels.insert(args[1].clone());
                out.extend_from_slice(b"*3\r\n$9\r\nsubscribe\r\n");
                bulk(out, SWITCH);
                out.extend_from_slice(b":1\r\n");
            }
            (b"PING", 1) => out.extend_from_slice(b"+PONG\r\n"),
            _ => {
                self.problems.push(format!("unexpected command to a sentinel {:?}", String::from_utf8_lossy(name)));
                out.extend_from_slice(b"-ERR unknown command\r\n");
            }
        }
    }

    /// This sentinel learns that failover `epoch` made the server at port `to` its service's
    /// master: unless it knows a later one, it names that one from now on, and announces the
    /// switch to its subscribers (through the outbox).
    pub(crate) fn learn_switch(&mut self, epoch: u64, to: u16) {
        let Some(watch) = &mut self.sentinel else { return };
        if watch.epoch >= epoch {
            return;
        }
        watch.epoch = epoch;
        let data = format!("{} {HOST} {} {HOST} {to}", watch.service, watch.master);
        watch.master = to;
        let mut push = b"*3\r\n".to_vec();
        bulk(&mut push, b"message");
        bulk(&mut push, SWITCH);
        bulk(&mut push, data.as_bytes());
        for (&c, s) in &self.sessions {
            if !s.closed && s.channels.contains(SWITCH) {
                self.outbox.push((c, push.clone()));
            }
        }
    }
}

/// Whether `name` writes (a replica refuses it with `READONLY`).
pub(super) fn writes(name: &[u8]) -> bool {
    matches!(name, b"SET" | b"EVAL" | b"EVALSHA" | b"DEL" | b"PEXPIRE")
}
