//! An in-memory model of one Redis node: the commands the engine sends (AUTH, SELECT,
//! CLIENT SETNAME, SCRIPT LOAD, EVALSHA, EVAL, `SET key token NX PX ttl`), the six scripts
//! (the five the handshake loads and the semaphore's acquire) executed natively, key expiry on
//! the node's own clock, crashes with or without the data, pauses and script-cache flushes.
//!
//! Besides serving requests the model keeps the ground truth the checker needs: for every
//! lock key, the spans of global time during which it held a given token (`history`).
//!
//! A node with a [`Shard`] is one master of a Redis Cluster: it says so in `HELLO`, answers
//! `CLUSTER SLOTS` and `ASKING`, redirects what it does not serve, publishes cluster-wide, and
//! hands the keys of a migrating slot to another master with their TTL.
//!
//! The servers of a Sentinel-managed node (its primary, replicas and sentinels) are model nodes
//! too (see [`replication`]).

#[path = "reentry.rs"]
pub(crate) mod reentry;
#[path = "replication.rs"]
pub(crate) mod replication;
#[path = "shard.rs"]
pub(crate) mod shard;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use redis_protocol::resp2::decode::decode;
use redis_protocol::resp2::types::OwnedFrame;
use redlease_core::cluster::hash_slot;

pub(crate) use shard::Shard;

/// Global simulated time, in nanoseconds since the start of the run.
pub(crate) type Time = u64;

/// One millisecond of simulated time.
pub(crate) const MS: Time = 1_000_000;

/// A node's clock: global time plus an offset that may jump forward, running a little fast
/// or slow (`skew_ppm` parts per million).
#[derive(Clone, Debug)]
pub(crate) struct Clock {
    /// `(from, offset)`: from global time `from` on, the offset is `offset` (ns).
    steps: Vec<(Time, i64)>,
    skew_ppm: i64,
}

impl Clock {
    pub(crate) fn new(offset: i64, skew_ppm: i64) -> Self {
        assert!(skew_ppm.abs() < 100_000, "the model assumes a nearly-right clock rate");
        Clock { steps: vec![(0, offset)], skew_ppm }
    }

    /// From `at` on, the clock reads `by` ns later than it would have (forward jumps only).
    pub(crate) fn jump(&mut self, at: Time, by: i64) {
        assert!(by >= 0, "the model's clocks only jump forward");
        let last = self.steps.last().map_or(0, |s| s.1);
        self.steps.push((at, last + by));
    }

    fn offset_at(&self, t: Time) -> i64 {
        self.steps.iter().rev().find(|(from, _)| *from <= t).map_or(0, |s| s.1)
    }

    /// The node's reading at global time `t` (ns).
    pub(crate) fn local(&self, t: Time) -> i64 {
        self.reading(t, self.offset_at(t))
    }

    fn reading(&self, t: Time, offset: i64) -> i64 {
        let t = t as i64;
        t + offset + t * self.skew_ppm / 1_000_000
    }

    /// The first global time `>= not_before` at which the clock reads at least `reading`.
    pub(crate) fn when_reads(&self, reading: i64, not_before: Time) -> Time {
        for (i, &(from, offset)) in self.steps.iter().enumerate() {
            let end = self.steps.get(i + 1).map_or(Time::MAX, |s| s.0);
            let start = from.max(not_before);
            if start >= end {
                continue;
            }
            let at_start = self.reading(start, offset);
            if at_start >= reading {
                return start;
            }
            // Within one step the clock runs at rate (1 + skew): estimate, then fix rounding.
            let gap = (reading - at_start) as i128;
            let mut t = start.saturating_add((gap * 1_000_000 / (1_000_000 + self.skew_ppm as i128)) as Time);
            while self.reading(t, offset) < reading {
                t += 1;
            }
            while t > start && self.reading(t - 1, offset) >= reading {
                t -= 1;
            }
            if t < end {
                return t;
            }
        }
        unreachable!("the last step of a clock never ends")
    }
}

/// A span during which a lock key held a token, on the global clock: `[from, to)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) db: u32,
    pub(crate) key: Vec<u8>,
    pub(crate) token: Vec<u8>,
    pub(crate) from: Time,
    pub(crate) to: Time,
}

#[derive(Clone, Debug)]
struct Entry {
    value: Vec<u8>,
    /// Expiry as a reading of the node's clock (ns), `None`: no TTL.
    expires: Option<i64>,
    /// When the current value was written (global time).
    since: Time,
    /// A waiter was refused by this value: the real scripts append `:` to it (modelled as a
    /// flag, so that `value` stays the holder's token for the checker).
    marked: bool,
}

#[derive(Debug, Default)]
struct Session {
    inbuf: Vec<u8>,
    authed: bool,
    db: u32,
    /// The connection is gone; input that reached the node before is still processed.
    closed: bool,
    /// A protocol error: the server stops reading this connection.
    broken: bool,
    /// `HELLO 3` was accepted: push messages may be sent.
    resp3: bool,
    /// Subscribed channels.
    channels: BTreeSet<Vec<u8>>,
    /// Subscribed sharded channels (`SSUBSCRIBE`).
    shard_channels: BTreeSet<Vec<u8>>,
    /// This connection is refused `HELLO 3`, as by an old Redis.
    refuse_hello: bool,
    /// A cluster master: the connection sent `ASKING`, which holds for its next command.
    asking: bool,
    /// Commands read from this connection so far.
    executed: u64,
}

/// Credentials a node requires.
#[derive(Clone, Debug)]
pub(crate) struct Auth {
    pub(crate) user: Option<String>,
    pub(crate) password: String,
}

/// Counters for the run summary.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NodeStats {
    pub(crate) commands: u64,
    pub(crate) noscript: u64,
    pub(crate) evals: u64,
    /// Keys deleted by a release that nobody had waited for (no mark): nothing published.
    pub(crate) quiet_releases: u64,
    /// `WAIT`s answered, and of them: too few replicas, refused, lost with the connection,
    /// answered late.
    pub(crate) waits: u64,
    pub(crate) waits_short: u64,
    pub(crate) waits_refused: u64,
    pub(crate) waits_lost: u64,
    pub(crate) waits_late: u64,
}

type Key = (u32, Vec<u8>);

/// A lock key granted to a token or released by it: when, the number of the command on the
/// node (to order those of one instant), the connection and the command's number on it (to
/// know which request it was), the token and the key.
pub(crate) type Taken = (Time, u64, (usize, u64), Vec<u8>, Vec<u8>);

/// The value of a lock key while readers share it (`:readers:` when marked).
pub(crate) const READERS: &[u8] = b":readers";
/// The prefix of a lock key's readers (a sorted set).
pub(crate) const READERS_PREFIX: &[u8] = b"redlease:readers:";
/// The prefix of a sole reader's value of a lock key: `:readers:` and its token (no set).
pub(crate) const SOLE_READER: &[u8] = b":readers:";

/// The token of the sole reader whose value of a lock key `value` is, if it is one.
pub(crate) fn sole_reader(value: &[u8]) -> Option<&[u8]> {
    value.strip_prefix(SOLE_READER).filter(|t| !t.is_empty() && !t.contains(&b':'))
}

/// Whether a lock key's `value` is the readers' (shared, or a sole reader's).
fn for_readers(value: &[u8]) -> bool {
    value == READERS || sole_reader(value).is_some()
}

/// A lock key's readers (`redlease:readers:K`): each token's score (its expiry in ms on the
/// node's clock) and since when (global time) it has had that score.
#[derive(Clone, Debug, Default)]
struct ReaderSet {
    members: BTreeMap<Vec<u8>, (i64, Time)>,
    /// The set's own expiry, as a reading of the node's clock (ns).
    expires: i64,
}

/// A node whose grants count once a replica acknowledges them (`min_replicas`): how its
/// `WAIT` answers, per mille: enough replicas, too few (`:0`), an error, or the connection
/// breaking before the answer; the rest of the time the answer is late (up to `late`).
#[derive(Clone, Debug)]
pub(crate) struct ReplicaPlan {
    pub(crate) short_per_mille: u64,
    pub(crate) error_per_mille: u64,
    pub(crate) lost_per_mille: u64,
    pub(crate) late_per_mille: u64,
    pub(crate) late: Time,
}

/// The next draw of a `WAIT` plan's own generator (SplitMix64), in `0..n`.
fn draw(state: &mut u64, n: u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % n.max(1)
}

/// One Redis node.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) clock: Clock,
    /// How `WAIT` answers, if the node's grants wait for a replica, with its generator.
    pub(crate) replicas: Option<(ReplicaPlan, u64)>,
    /// The answer of a `WAIT` just executed is late by this much, or (`Time::MAX`) lost with
    /// its connection: the world delays or breaks it.
    pub(crate) wait_fate: Option<Time>,
    auth: Option<Auth>,
    fence_prefix: Vec<u8>,
    data: BTreeMap<Key, Entry>,
    /// Lock keys of a crash without persistence: nobody can take them until the restart.
    lost: Vec<(Key, Entry)>,
    /// The script cache: which of [`known_scripts`] were loaded (by `SCRIPT LOAD` or `EVAL`).
    scripts: [bool; SCRIPTS],
    pub(crate) up: bool,
    pub(crate) paused: bool,
    held: Vec<(usize, Vec<u8>)>,
    sessions: BTreeMap<usize, Session>,
    /// Closed spans of lock-key ownership.
    pub(crate) history: Vec<Segment>,
    /// Things the engine did that a real server would reject or that break a rule.
    pub(crate) problems: Vec<String>,
    pub(crate) stats: NodeStats,
    /// Refuses `HELLO 3` (a Redis older than 6).
    resp2: bool,
    /// Release messages of the command being executed: `(channel, message)`.
    published: Vec<(Vec<u8>, Vec<u8>)>,
    /// The script being executed announces on sharded channels (`SPUBLISH`).
    sharded: bool,
    /// Waiter queues by name, oldest first (the real scripts' `redlease:queue:<key>` lists,
    /// one per mutex key and one per semaphore; their TTL is not modelled, only checked to be
    /// passed: the engine leaves them when it ends).
    queues: BTreeMap<Key, VecDeque<Vec<u8>>>,
    /// The scores of a semaphore's queue (a sorted set: the real scripts' `ZADD`, its entries
    /// kept in `queues` in the order of their scores, then of the entries).
    queue_scores: BTreeMap<Key, Scores>,
    /// Each queue's expiry, as a reading of the node's clock (ns): a join gives it at least
    /// the queue TTL the waiter asks for (`PEXPIRE` when less is left), and it is gone after.
    queue_expiry: BTreeMap<Key, i64>,
    /// The readers of each lock key, by the lock key.
    readers: BTreeMap<Key, ReaderSet>,
    /// Readers of a crash without persistence: they hold writers off until the restart.
    lost_readers: Vec<(Key, ReaderSet)>,
    /// Closed spans of reader membership (key: the lock key); at the end of the run each is
    /// cut to the spans in which the key really held `:readers`, and recorded in `history`
    /// under the readers' key (`redlease:readers:K`) with the reader's token.
    memberships: Vec<Segment>,
    /// Push messages for connections other than the one whose input is being processed.
    pub(crate) outbox: Vec<(usize, Vec<u8>)>,
    /// A master of a Redis Cluster: its routing.
    pub(crate) shard: Option<Shard>,
    /// A sentinel (it serves no keys): what it watches.
    pub(crate) sentinel: Option<replication::Watch>,
    /// A replica of a Sentinel-managed node: the port of its primary.
    pub(crate) replica_of: Option<u16>,
    /// A Sentinel-managed node's primary: its replicas online now (set by the world before
    /// each input; `ROLE` lists them, `WAIT` counts them).
    pub(crate) in_sync: Option<usize>,
    /// A `WAIT` counted replicas: the world copies the keyspace to them once the input is done.
    pub(crate) synced: bool,
    /// A cluster master's release messages for the other masters' subscribers (the cluster
    /// bus): `(channel, push frame)`.
    pub(crate) bus: Vec<(Vec<u8>, Vec<u8>)>,
    /// What releases took away: when, whose token, which lock key (a reader's: the key it
    /// read). No release of a token may take what the attempt that got the lock was granted
    /// before its holder asks (see the world).
    pub(crate) released: Vec<Taken>,
    /// What acquisitions took: when, which token, which lock key (a reader's: the key).
    pub(crate) granted: Vec<Taken>,
    /// The command being executed: its connection, and its number on it.
    current: (usize, u64),
}

#[derive(Clone, Copy)]
enum Script {
    Acquire,
    Extend,
    Release,
    Fence,
    ReleaseOne,
    SemAcquire,
    SemRelease,
    ReadAcquire,
    ReadExtend,
    ReadRelease,
    Downgrade,
    Reentry,
}

/// How many scripts the model knows.
const SCRIPTS: usize = 12;

/// Every script the model runs: source, SHA-1 digest, and which one it is.
fn known_scripts() -> [(&'static str, &'static str, Script); SCRIPTS] {
    let (s, d) = (redlease_core::script_sources(), redlease_core::script_digests());
    let (sem, sem_sha) = redlease_core::semaphore_script();
    let (sem_release, sem_release_sha) = redlease_core::semaphore_release_script();
    let r = redlease_core::read_lock_scripts();
    let reentry = redlease_core::reentry_script();
    [
        (s[0], d[0], Script::Acquire),
        (s[1], d[1], Script::Extend),
        (s[2], d[2], Script::Release),
        (s[3], d[3], Script::Fence),
        (s[4], d[4], Script::ReleaseOne),
        (sem, sem_sha, Script::SemAcquire),
        (sem_release, sem_release_sha, Script::SemRelease),
        (r[0].0, r[0].1, Script::ReadAcquire),
        (r[1].0, r[1].1, Script::ReadExtend),
        (r[2].0, r[2].1, Script::ReadRelease),
        (r[3].0, r[3].1, Script::Downgrade),
        (reentry.0, reentry.1, Script::Reentry),
    ]
}

/// Which script `arg` (an `EVAL`'s source or an `EVALSHA`'s digest) is, as an index of the
/// scripts the model knows.
pub(crate) fn script_index(arg: &[u8]) -> Option<usize> {
    let sha = arg.to_ascii_lowercase();
    known_scripts().iter().position(|s| s.0.as_bytes() == arg || s.1.as_bytes() == sha.as_slice())
}

/// What a script answers.
pub(super) enum Reply {
    Int(i64),
    /// A status (`+...`).
    Status(String),
    Bulk(Vec<u8>),
    /// A server error the script raises on purpose (a real answer, not a model problem).
    Error(String),
}

/// The prefix of a semaphore's keys (after the key prefix; the simulation uses none).
const SEM_PREFIX: &[u8] = b"redlease:sem:";

/// Whether `key` is a semaphore's recorded limit (`redlease:sem:{NAME}:limit`, no TTL).
fn is_limit_key(key: &[u8]) -> bool {
    key.starts_with(SEM_PREFIX) && key.ends_with(b"}:limit")
}

/// A semaphore permit key `redlease:sem:{NAME}:k`: its base `redlease:sem:{NAME}` and `k`.
fn permit_of(key: &[u8]) -> Option<(&[u8], u32)> {
    if !key.starts_with(SEM_PREFIX) {
        return None;
    }
    let at = key.iter().rposition(|&b| b == b':')?;
    let (base, k) = (&key[..at], &key[at + 1..]);
    let k = std::str::from_utf8(k).ok()?.parse().ok()?;
    (base.ends_with(b"}") && base[SEM_PREFIX.len()..].starts_with(b"{")).then_some((base, k))
}

/// The waiter queue a lock key's release hands it over from: `redlease:queue:` + the key,
/// or + the semaphore's base for a permit (one queue per semaphore).
fn queue_of(key: &[u8]) -> Vec<u8> {
    let name = permit_of(key).map_or(key, |(base, _)| base);
    [b"redlease:queue:".as_slice(), name].concat()
}

impl Node {
    pub(crate) fn new(clock: Clock, auth: Option<Auth>, fence_prefix: &[u8], resp2: bool) -> Self {
        Node {
            clock,
            replicas: None,
            wait_fate: None,
            auth,
            fence_prefix: fence_prefix.to_vec(),
            data: BTreeMap::new(),
            lost: Vec::new(),
            scripts: [false; SCRIPTS],
            up: true,
            paused: false,
            held: Vec::new(),
            sessions: BTreeMap::new(),
            history: Vec::new(),
            problems: Vec::new(),
            stats: NodeStats::default(),
            resp2,
            published: Vec::new(),
            sharded: false,
            queues: BTreeMap::new(),
            queue_scores: BTreeMap::new(),
            queue_expiry: BTreeMap::new(),
            readers: BTreeMap::new(),
            lost_readers: Vec::new(),
            memberships: Vec::new(),
            outbox: Vec::new(),
            shard: None,
            sentinel: None,
            replica_of: None,
            in_sync: None,
            synced: false,
            bus: Vec::new(),
            released: Vec::new(),
            granted: Vec::new(),
            current: (usize::MAX, 0),
        }
    }

    fn is_lock_key(&self, key: &[u8]) -> bool {
        !key.starts_with(&self.fence_prefix)
            && key != b"redlease:format"
            && !is_limit_key(key)
            && !key.starts_with(reentry::HOLDS_PREFIX)
    }

    /// Write a plain key (no TTL) directly, as an operator would; for scripted tests.
    pub(crate) fn put(&mut self, now: Time, db: u32, key: &[u8], value: &[u8]) {
        self.set(now, db, key, value, None);
    }

    // ----- connections ---------------------------------------------------------------------

    pub(crate) fn accept(&mut self, conn: usize) {
        self.sessions.insert(conn, Session::default());
    }

    /// Refuse `HELLO 3` on `conn`, as an old Redis would (a scripted role's RESP2 connections).
    pub(crate) fn refuse_hello(&mut self, conn: usize) {
        if let Some(s) = self.sessions.get_mut(&conn) {
            s.refuse_hello = true;
        }
    }

    pub(crate) fn close(&mut self, conn: usize) {
        if self.held.iter().any(|(c, _)| *c == conn) {
            if let Some(s) = self.sessions.get_mut(&conn) {
                s.closed = true;
            }
        } else {
            self.sessions.remove(&conn);
        }
    }

    /// Bytes arrived on `conn` while the node is paused: they wait in the kernel buffer.
    pub(crate) fn hold(&mut self, conn: usize, bytes: Vec<u8>) {
        self.held.push((conn, bytes));
    }

    pub(crate) fn resume(&mut self, now: Time) -> Vec<(usize, Vec<u8>)> {
        self.paused = false;
        let held = std::mem::take(&mut self.held);
        let mut out = Vec::new();
        for (conn, bytes) in held {
            let reply = self.receive(now, conn, &bytes);
            out.push((conn, reply));
        }
        self.sessions.retain(|_, s| !s.closed);
        out
    }

    /// Process bytes from `conn`; returns the reply bytes (possibly empty).
    pub(crate) fn receive(&mut self, now: Time, conn: usize, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let Some(mut session) = self.sessions.remove(&conn) else {
            return out;
        };
        if session.broken {
            self.sessions.insert(conn, session);
            return out;
        }
        session.inbuf.extend_from_slice(bytes);
        let mut pos = 0;
        loop {
            match decode(&session.inbuf[pos..]) {
                Ok(None) => break,
                Ok(Some((frame, used))) => {
                    pos += used;
                    match command_args(frame) {
                        Some(args) => {
                            self.current = (conn, session.executed);
                            session.executed += 1;
                            self.execute(now, &mut session, &args, &mut out);
                            self.publish(conn, &session, &mut out);
                        }
                        None => {
                            self.problems.push("the engine sent a request that is not an array of bulk strings".into());
                            out.extend_from_slice(b"-ERR Protocol error\r\n");
                            session.broken = true;
                            break;
                        }
                    }
                }
                Err(e) => {
                    self.problems.push(format!("the engine sent malformed RESP: {e:?}"));
                    out.extend_from_slice(b"-ERR Protocol error\r\n");
                    session.broken = true;
                    break;
                }
            }
        }
        session.inbuf.drain(..pos);
        self.sessions.insert(conn, session);
        out
    }

    // ----- faults --------------------------------------------------------------------------

    /// The process dies. Without persistence the data is gone (its lock keys stay
    /// unavailable to others until the restart); with it (`appendfsync always`) it stays.
    pub(crate) fn crash(&mut self, now: Time, keep_data: bool) {
        self.up = false;
        self.paused = false;
        self.sessions.clear();
        self.held.clear();
        if !keep_data {
            self.queues.clear();
            self.queue_scores.clear();
            self.queue_expiry.clear();
            self.purge(now);
            self.lost_readers.extend(std::mem::take(&mut self.readers));
            let data = std::mem::take(&mut self.data);
            for (k, e) in data {
                if self.is_lock_key(&k.1) {
                    self.lost.push((k, e));
                }
            }
        }
    }

    pub(crate) fn restart(&mut self, now: Time) {
        self.up = true;
        // The script cache does not survive a restart.
        self.scripts = [false; SCRIPTS];
        for (k, set) in std::mem::take(&mut self.lost_readers) {
            self.close_members(&k, set, now);
        }
        for ((db, key), e) in std::mem::take(&mut self.lost) {
            let expiry = e.expires.map_or(Time::MAX, |x| self.clock.when_reads(x, e.since));
            let to = expiry.min(now).max(e.since);
            self.history.push(Segment { db, key, token: e.value, from: e.since, to });
        }
    }

    pub(crate) fn flush_scripts(&mut self) {
        self.scripts = [false; SCRIPTS];
    }

    /// End of the run: close every open span (live keys end when they would expire).
    pub(crate) fn finish(&mut self, now: Time) {
        self.close_spans(now);
        let spans = reader_spans(&self.history, std::mem::take(&mut self.memberships));
        self.history.extend(spans);
    }

    /// The first half of [`finish`](Self::finish): every span closed, the readers' memberships
    /// left in `memberships` (a cluster joins them with the lock keys' spans of all its
    /// masters: a slot's keys may migrate one at a time).
    pub(crate) fn close_spans(&mut self, now: Time) {
        if !self.up {
            self.restart(now);
        }
        self.purge(now);
        for ((db, key), e) in std::mem::take(&mut self.data) {
            if !self.is_lock_key(&key) {
                continue;
            }
            let to = match e.expires {
                Some(x) => self.clock.when_reads(x, e.since),
                None => {
                    self.problems.push(format!("lock key {:?} has no TTL", String::from_utf8_lossy(&key)));
                    Time::MAX
                }
            };
            self.history.push(Segment { db, key, token: e.value, from: e.since, to });
        }
        for (k, set) in std::mem::take(&mut self.readers) {
            self.close_members(&k, set, Time::MAX);
        }
    }

    /// What the node holds at `now` besides its persistent keys (fence counters, semaphore
    /// limits, the format record): every live lock key with its value, every reader with its
    /// token; as (key, token) pairs. (Waiter queues live at least a second from their last
    /// join, longer than a run: an entry whose leave found its node down stays until then.)
    pub(crate) fn leftovers(&mut self, now: Time) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.purge(now);
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for ((_, key), e) in &self.data {
            if let (true, Some(t)) = (self.is_lock_key(key), sole_reader(&e.value)) {
                out.push(([READERS_PREFIX, key].concat(), t.to_vec()));
            } else if self.is_lock_key(key) && e.value != READERS {
                out.push((key.clone(), e.value.clone()));
            }
        }
        for ((_, key), set) in &self.readers {
            out.extend(set.members.keys().map(|t| ([READERS_PREFIX, key].concat(), t.clone())));
        }
        for ((_, key), e) in &self.data {
            if key.starts_with(reentry::HOLDS_PREFIX) {
                out.extend(reentry::decode(&e.value).1.into_iter().map(|t| (key.clone(), t)));
            }
        }
        out
    }

    /// The keys reserved for `token` at `now` (handed to it as the next waiter: the real
    /// scripts' `token:`, here the token with the mark), or held since they were handed to it.
    pub(crate) fn reserved(&mut self, now: Time, token: &[u8]) -> Vec<Vec<u8>> {
        self.purge(now);
        let handed = |e: &Entry| e.marked && e.value == token;
        self.data.iter().filter(|(_, e)| handed(e)).map(|((_, k), _)| k.clone()).collect()
    }

    /// The keys that hold `token` at `now`: lock keys (taken or reserved) and readers' sets.
    pub(crate) fn holding(&mut self, now: Time, token: &[u8]) -> Vec<Vec<u8>> {
        self.purge(now);
        let held = |k: &[u8], e: &Entry| {
            e.value == token
                || (k.starts_with(reentry::HOLDS_PREFIX) && reentry::decode(&e.value).1.iter().any(|t| t == token))
        };
        let keys = self.data.iter().filter(|((_, k), e)| held(k, e)).map(|((_, k), _)| k.clone());
        let sole = self
            .data
            .iter()
            .filter(|(_, e)| sole_reader(&e.value) == Some(token))
            .map(|((_, k), _)| [READERS_PREFIX, k].concat());
        let keys = keys.chain(sole);
        let readers = self
            .readers
            .iter()
            .filter(|(_, set)| set.members.contains_key(token))
            .map(|((_, k), _)| [READERS_PREFIX, k].concat());
        keys.chain(readers).collect()
    }

    /// What an observer reads of an election at `now`: its lock key's value and its fence
    /// counter (0 without one).
    pub(crate) fn election_view(&mut self, now: Time, db: u32, key: &[u8]) -> (Option<Vec<u8>>, u64) {
        self.purge(now);
        let fence = [self.fence_prefix.as_slice(), key].concat();
        let counter = self.get(db, &fence).and_then(|v| std::str::from_utf8(v).ok()?.parse().ok()).unwrap_or(0);
        (self.get(db, key).map(<[u8]>::to_vec), counter)
    }

    /// The closed spans of reader membership (key: the lock key), taken out.
    pub(crate) fn take_memberships(&mut self) -> Vec<Segment> {
        std::mem::take(&mut self.memberships)
    }

    // ----- a cluster master ----------------------------------------------------------------

    /// What a cluster master does before running a command: `ASKING`, `CLUSTER SLOTS`, `HELLO`
    /// (with its mode), `SELECT` of another database (refused), and the redirects of requests
    /// it does not serve. Returns whether the command was answered here.
    fn cluster_command(
        &mut self,
        now: Time,
        session: &mut Session,
        name: &[u8],
        args: &[Vec<u8>],
        out: &mut Vec<u8>,
    ) -> bool {
        // `ASKING` holds for the next command only, whatever it is.
        let asking = std::mem::take(&mut session.asking);
        let hello_ok = !self.resp2 && !session.refuse_hello;
        let Some(shard) = self.shard.as_mut() else { return false };
        match (name, args.len()) {
            (b"ASKING", 1) => {
                session.asking = true;
                out.extend_from_slice(b"+OK\r\n");
                return true;
            }
            (b"CLUSTER", 2) if args[1].eq_ignore_ascii_case(b"SLOTS") => {
                out.extend_from_slice(&shard.slots_reply());
                return true;
            }
            (b"CLUSTER", 2) if args[1].eq_ignore_ascii_case(b"SHARDS") => {
                out.extend_from_slice(&shard.shards_reply(session.resp3));
                return true;
            }
            (b"SSUBSCRIBE" | b"SUNSUBSCRIBE" | b"SPUBLISH", _) if shard.old => {
                out.extend_from_slice(
                    format!("-ERR unknown command '{}'\r\n", String::from_utf8_lossy(name)).as_bytes(),
                );
                return true;
            }
            (b"INFO", 2) if args[1].eq_ignore_ascii_case(b"cluster") => {
                out.extend_from_slice(b"$30\r\n# Cluster\r\ncluster_enabled:1\r\n\r\n");
                return true;
            }
            (b"HELLO", 2) if hello_ok && args[1] == b"3" => {
                session.resp3 = true;
                out.extend_from_slice(HELLO_CLUSTER);
                return true;
            }
            (b"SSUBSCRIBE" | b"SUNSUBSCRIBE", 2) => {
                // Served by the slot's owner whatever its migration state (Redis exempts
                // sharded pub/sub from it); `MOVED` elsewhere.
                return match shard.channel_route(now, hash_slot(&args[1])) {
                    Ok(()) => false,
                    Err(e) => {
                        out.extend_from_slice(format!("-{e}\r\n").as_bytes());
                        true
                    }
                };
            }
            (b"SELECT", 2) if args[1] != b"0" => {
                self.problems.push("SELECT of a database on a cluster node".into());
                out.extend_from_slice(b"-ERR SELECT is not allowed in cluster mode\r\n");
                return true;
            }
            _ => {}
        }
        let keys = shard::request_keys(args);
        let db = session.db;
        let have: Vec<&[u8]> = keys.iter().copied().filter(|k| self.has_key(db, k)).collect();
        let Some(shard) = self.shard.as_mut() else { return false };
        match shard.route(now, &keys, asking, |k| have.contains(&k)) {
            Ok(()) => {
                // A lock's keys take their cluster form on a cluster node (`{K}`, or tagged):
                // `K` is another key, which a client that uses `{K}` does not see. (The lock
                // format key is read as it is, by the handshake.)
                if let Some(k) = keys.iter().find(|k| !k.contains(&b'{') && **k != b"redlease:format") {
                    let what = String::from_utf8_lossy(&args[0]);
                    self.problems.push(format!(
                        "a cluster master ran {what} over {:?}, a key without its hash tag",
                        show_key(k)
                    ));
                }
                false
            }
            Err(e) => {
                // (Keys without a tag come from an engine that does not know the node is a
                // cluster yet: `CROSSSLOT` is how it learns. Once it knows, it tags them.)
                if e.starts_with("CROSSSLOT") && keys.iter().all(|k| k.contains(&b'{')) {
                    let keys: Vec<String> = keys.iter().map(|k| show_key(k)).collect();
                    self.problems.push(format!("a request over tagged keys of two slots: {keys:?}"));
                }
                out.extend_from_slice(format!("-{e}\r\n").as_bytes());
                true
            }
        }
    }

    /// Whether `key` exists in `db`: a value, a waiter queue, or a lock key's readers.
    fn has_key(&self, db: u32, key: &[u8]) -> bool {
        let k = (db, key.to_vec());
        self.data.contains_key(&k)
            || self.queues.contains_key(&k)
            || key.strip_prefix(READERS_PREFIX).is_some_and(|lock| self.readers.contains_key(&(db, lock.to_vec())))
    }

    /// The names of the keys this master has in `slot` at `now` (a lock key's readers under
    /// their own key, `redlease:readers:K`).
    pub(crate) fn slot_keys(&mut self, now: Time, slot: u16) -> Vec<Vec<u8>> {
        self.purge(now);
        let readers = self.readers.keys().map(|(_, k)| [READERS_PREFIX, k].concat());
        let names = self.data.keys().chain(self.queues.keys()).map(|(_, k)| k.clone()).chain(readers);
        names.filter(|k| hash_slot(k) == slot).collect()
    }

    /// Take the keys `names` out at `now`, as `MIGRATE` sends them (lock keys' spans end here).
    pub(crate) fn export(&mut self, now: Time, names: &[Vec<u8>]) -> Moved {
        self.purge(now);
        let ms = self.clock.local(now).div_euclid(MS as i64);
        let mut moved = Moved::default();
        for name in names {
            let key = (0, name.clone());
            if let Some(e) = self.data.remove(&key) {
                // Redis sends what is left of the TTL, in whole ms, at least 1.
                let ttl = e.expires.map(|x| (x.div_euclid(MS as i64) - ms).max(1));
                if self.is_lock_key(name) {
                    let span = Segment { db: 0, key: name.clone(), token: e.value.clone(), from: e.since, to: now };
                    self.history.push(span);
                }
                moved.data.push((key.clone(), e, ttl));
            }
            if let Some(q) = self.queues.remove(&key) {
                let left = self.queue_expiry.remove(&key).map_or(1, |x| (x.div_euclid(MS as i64) - ms).max(1));
                let scores = self.queue_scores.remove(&key);
                moved.queues.push(MovedQueue(key.clone(), q, scores, left));
            }
            if let Some(lock) = name.strip_prefix(READERS_PREFIX) {
                let lock = (0, lock.to_vec());
                if let Some(set) = self.readers.remove(&lock) {
                    let ttl = (set.expires.div_euclid(MS as i64) - ms).max(1);
                    for (token, &(score, since)) in &set.members {
                        self.close_member(&lock, token.clone(), score, since, now);
                    }
                    moved.readers.push((lock, set, ttl));
                }
            }
        }
        moved
    }

    /// Keys that migrated here arrive at `now` (`RESTORE`): each expires its TTL from now on
    /// this master's clock; spans start here. A key this master has already stays (a
    /// migration never meets one: it is a model problem).
    pub(crate) fn import(&mut self, now: Time, moved: Moved) {
        let ms = self.clock.local(now).div_euclid(MS as i64);
        for (key, mut e, ttl) in moved.data {
            if self.data.contains_key(&key) {
                self.problems.push(format!("BUSYKEY: {:?} migrated to a master that has it", show_key(&key.1)));
                continue;
            }
            e.expires = ttl.map(|t| (ms + t) * MS as i64);
            e.since = now;
            self.data.insert(key, e);
        }
        for MovedQueue(key, q, scores, ttl) in moved.queues {
            self.queue_expiry.insert(key.clone(), (ms + ttl) * MS as i64);
            if let Some(scores) = scores {
                self.queue_scores.insert(key.clone(), scores);
            }
            if self.queues.insert(key.clone(), q).is_some() {
                self.problems.push(format!("BUSYKEY: queue {:?} migrated to a master that has it", show_key(&key.1)));
            }
        }
        for (key, mut set, ttl) in moved.readers {
            set.expires = (ms + ttl) * MS as i64;
            for m in set.members.values_mut() {
                m.1 = now;
            }
            if self.readers.insert(key.clone(), set).is_some() {
                self.problems
                    .push(format!("BUSYKEY: readers of {:?} migrated to a master that has them", show_key(&key.1)));
            }
        }
    }

    // ----- the keyspace --------------------------------------------------------------------

    /// Remove keys whose expiry has passed, recording when they expired.
    ///
    /// A key is treated as expired as soon as the clock reads its expiry (Redis waits until
    /// the millisecond after): the model is a little harsher than a real server.
    fn purge(&mut self, now: Time) {
        let local = self.clock.local(now);
        let expired: Vec<Key> =
            self.data.iter().filter(|(_, e)| e.expires.is_some_and(|x| x <= local)).map(|(k, _)| k.clone()).collect();
        let gone: Vec<Key> = self.readers.iter().filter(|(_, r)| r.expires <= local).map(|(k, _)| k.clone()).collect();
        let queues = &self.queues;
        self.queue_expiry.retain(|k, x| *x > local && queues.contains_key(k));
        let expiry = &self.queue_expiry;
        self.queues.retain(|k, _| expiry.contains_key(k));
        self.queue_scores.retain(|k, _| expiry.contains_key(k));
        for k in gone {
            let set = self.readers.remove(&k).expect("listed above");
            self.close_members(&k, set, now);
        }
        for k in expired {
            let e = self.data.remove(&k).expect("listed above");
            if self.is_lock_key(&k.1) {
                let to = self.clock.when_reads(e.expires.expect("expiring"), e.since).max(e.since);
                self.history.push(Segment { db: k.0, key: k.1, token: e.value, from: e.since, to });
            }
        }
    }

    fn get(&self, db: u32, key: &[u8]) -> Option<&[u8]> {
        self.data.get(&(db, key.to_vec())).map(|e| e.value.as_slice())
    }

    /// `SET key value [PX ms]`; an unchanged value keeps its ownership span open.
    fn set(&mut self, now: Time, db: u32, key: &[u8], value: &[u8], px_ms: Option<i64>) {
        // Redis stores expiry times in whole milliseconds of its clock.
        let expires = px_ms.map(|ms| self.clock.local(now).div_euclid(MS as i64) * MS as i64 + ms * MS as i64);
        let k = (db, key.to_vec());
        let lock_key = self.is_lock_key(key);
        if lock_key && px_ms.is_none() {
            self.problems.push(format!("lock key {:?} written without a TTL", String::from_utf8_lossy(key)));
        }
        match self.data.get_mut(&k) {
            Some(e) if e.value == value => e.expires = expires,
            Some(e) => {
                let old = std::mem::replace(e, Entry { value: value.to_vec(), expires, since: now, marked: false });
                if lock_key {
                    self.history.push(Segment { db, key: key.to_vec(), token: old.value, from: old.since, to: now });
                }
            }
            None => {
                self.data.insert(k, Entry { value: value.to_vec(), expires, since: now, marked: false });
            }
        }
    }

    fn pexpire(&mut self, now: Time, db: u32, key: &[u8], ms: i64) {
        let at = self.clock.local(now).div_euclid(MS as i64) * MS as i64 + ms * MS as i64;
        if let Some(e) = self.data.get_mut(&(db, key.to_vec())) {
            e.expires = Some(at);
        }
    }

    fn del(&mut self, now: Time, db: u32, key: &[u8]) -> bool {
        match self.data.remove(&(db, key.to_vec())) {
            Some(e) => {
                if self.is_lock_key(key) {
                    self.history.push(Segment { db, key: key.to_vec(), token: e.value, from: e.since, to: now });
                }
                true
            }
            None => false,
        }
    }

    // ----- commands ------------------------------------------------------------------------

    fn execute(&mut self, now: Time, session: &mut Session, args: &[Vec<u8>], out: &mut Vec<u8>) {
        self.stats.commands += 1;
        self.purge(now);
        let name = args[0].to_ascii_uppercase();
        if self.auth.is_some() && !session.authed && name != b"AUTH" {
            out.extend_from_slice(b"-NOAUTH Authentication required.\r\n");
            return;
        }
        if self.shard.is_some() && self.cluster_command(now, session, &name, args, out) {
            return;
        }
        if self.sentinel.is_some() && name != b"AUTH" {
            self.sentinel_command(session, &name, args, out);
            return;
        }
        if self.replica_of.is_some() && replication::writes(&name) {
            out.extend_from_slice(b"-READONLY You can't write against a read only replica.\r\n");
            return;
        }
        match (name.as_slice(), args.len()) {
            (b"AUTH", 2 | 3) => {
                let (user, pass) = if args.len() == 3 { (Some(&args[1]), &args[2]) } else { (None, &args[1]) };
                let ok = match &self.auth {
                    None => false,
                    Some(a) => {
                        let user_ok = match (&a.user, user) {
                            (Some(u), Some(given)) => u.as_bytes() == given.as_slice(),
                            (None, None) => true,
                            (None, Some(given)) => given.as_slice() == b"default",
                            (Some(_), None) => false,
                        };
                        user_ok && a.password.as_bytes() == pass.as_slice()
                    }
                };
                if ok {
                    session.authed = true;
                    out.extend_from_slice(b"+OK\r\n");
                } else if self.auth.is_none() {
                    out.extend_from_slice(b"-ERR AUTH <password> called without any password configured\r\n");
                } else {
                    out.extend_from_slice(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
                }
            }
            (b"SELECT", 2) => match parse_int(&args[1]) {
                Some(db @ 0..=15) => {
                    session.db = db as u32;
                    out.extend_from_slice(b"+OK\r\n");
                }
                _ => out.extend_from_slice(b"-ERR DB index is out of range\r\n"),
            },
            (b"CLIENT", 3) if args[1].eq_ignore_ascii_case(b"SETNAME") => out.extend_from_slice(b"+OK\r\n"),
            (b"PING", 1) => out.extend_from_slice(b"+PONG\r\n"),
            (b"ROLE", 1) if self.sentinel_role(out) => {}
            (b"WAIT", 3) if self.sentinel_wait(args, out) => {}
            (b"ROLE", 1) => {
                // A primary: with one replica online when its grants wait for one.
                let replicas: &[u8] = if self.replicas.is_some() {
                    b"*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$4\r\n7100\r\n$1\r\n0\r\n"
                } else {
                    b"*0\r\n"
                };
                out.extend_from_slice(b"*3\r\n$6\r\nmaster\r\n:0\r\n");
                out.extend_from_slice(replicas);
            }
            (b"WAIT", 3) => {
                // The replicas the writes so far reached, as the run's plan draws it.
                let want = parse_int(&args[1]).unwrap_or(0);
                let Some((plan, rng)) = &mut self.replicas else {
                    out.extend_from_slice(b":0\r\n");
                    return;
                };
                self.stats.waits += 1;
                let roll = draw(rng, 1000);
                let (short, error, lost) = (plan.short_per_mille, plan.error_per_mille, plan.lost_per_mille);
                if roll < short + error {
                    // The grant this `WAIT` follows (the command before it on the connection)
                    // does not count: it is not one of its round's grants.
                    let (conn, i) = self.current;
                    self.granted.retain(|g| g.2 != (conn, i.wrapping_sub(1)));
                }
                if roll < short {
                    self.stats.waits_short += 1;
                    out.extend_from_slice(b":0\r\n");
                } else if roll < short + error {
                    self.stats.waits_refused += 1;
                    out.extend_from_slice(b"-NOREPLICAS Not enough good replicas to write.\r\n");
                } else {
                    out.extend_from_slice(format!(":{want}\r\n").as_bytes());
                    if roll < short + error + lost {
                        self.stats.waits_lost += 1;
                        self.wait_fate = Some(Time::MAX);
                    } else if draw(rng, 1000) < plan.late_per_mille {
                        self.stats.waits_late += 1;
                        let late = draw(rng, plan.late + 1);
                        self.wait_fate = Some(self.wait_fate.unwrap_or(0).max(late));
                    }
                }
            }
            (b"INFO", 2) if args[1].eq_ignore_ascii_case(b"cluster") => {
                out.extend_from_slice(b"$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n");
            }
            (b"HELLO", 2) if self.resp2 || session.refuse_hello => {
                out.extend_from_slice(b"-ERR unknown command 'HELLO'\r\n")
            }
            (b"HELLO", 2) if args[1] == b"3" => {
                session.resp3 = true;
                out.extend_from_slice(b"%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n");
            }
            (b"SUBSCRIBE" | b"UNSUBSCRIBE" | b"SSUBSCRIBE" | b"SUNSUBSCRIBE", 2) => {
                if !session.resp3 {
                    self.problems.push("SUBSCRIBE on a RESP2 connection (it would stop answering commands)".into());
                }
                let sharded = name.starts_with(b"SS") || name.starts_with(b"SUNS");
                let sub = !name.ends_with(b"UNSUBSCRIBE");
                // (An engine that learns late that a node is a cluster may still take back a
                // plain subscription there.)
                if (sharded && self.shard.is_none()) || (!sharded && sub && self.shard.is_some()) {
                    let what = String::from_utf8_lossy(&name);
                    self.problems.push(format!("{what} on a {} node", if sharded { "standalone" } else { "cluster" }));
                }
                let channels = if sharded { &mut session.shard_channels } else { &mut session.channels };
                if sub {
                    channels.insert(args[1].clone());
                } else {
                    channels.remove(&args[1]);
                }
                let kind = name.to_ascii_lowercase();
                out.extend_from_slice(b">3\r\n");
                bulk(out, &kind);
                bulk(out, &args[1]);
                out.extend_from_slice(format!(":{}\r\n", channels.len()).as_bytes());
            }
            (b"SCRIPT", 3) if args[1].eq_ignore_ascii_case(b"LOAD") => {
                match known_scripts().iter().position(|s| s.0.as_bytes() == args[2].as_slice()) {
                    Some(i) => {
                        self.scripts[i] = true;
                        bulk(out, known_scripts()[i].1.as_bytes());
                    }
                    None => {
                        self.problems.push("SCRIPT LOAD of a script the model does not know".into());
                        out.extend_from_slice(b"-ERR unknown script (simulation)\r\n");
                    }
                }
            }
            // The cheap acquire: SET key token NX PX ttl.
            (b"SET", 6) if args[3].eq_ignore_ascii_case(b"NX") && args[4].eq_ignore_ascii_case(b"PX") => {
                match parse_int(&args[5]).filter(|&t| t > 0) {
                    None => {
                        self.problems.push("SET NX PX with a bad TTL".into());
                        out.extend_from_slice(b"-ERR invalid expire time in 'set' command\r\n");
                    }
                    Some(_) if !self.is_lock_key(&args[1]) => {
                        self.problems.push("SET NX PX on a key that is not a lock key".into());
                        out.extend_from_slice(b"-ERR not a lock key (simulation)\r\n");
                    }
                    Some(_) if self.get(session.db, &args[1]).is_some() => out.extend_from_slice(b"$-1\r\n"),
                    Some(_) if args[2].starts_with(b":") && sole_reader(&args[2]).is_none() => {
                        self.problems.push("SET NX PX of a value that is neither a token nor a sole reader's".into());
                        out.extend_from_slice(b"-ERR not a lock value (simulation)\r\n");
                    }
                    Some(ttl) => {
                        self.set(now, session.db, &args[1], &args[2], Some(ttl));
                        // A sole reader's value (`:readers:token`) is a grant to its token.
                        let token = sole_reader(&args[2]).unwrap_or(&args[2]).to_vec();
                        self.granted.push((now, self.stats.commands, self.current, token, args[1].clone()));
                        out.extend_from_slice(b"+OK\r\n");
                    }
                }
            }
            (b"EVALSHA", n) if n >= 3 => {
                let sha = args[1].to_ascii_lowercase();
                match known_scripts().iter().position(|s| s.1.as_bytes() == sha.as_slice()) {
                    Some(i) if self.scripts[i] => self.run_script(now, session.db, i, &args[2..], out),
                    _ => {
                        self.stats.noscript += 1;
                        out.extend_from_slice(b"-NOSCRIPT No matching script. Please use EVAL.\r\n");
                    }
                }
            }
            // The handshake's lock format check (`redlease:format`): record ours if none.
            (b"EVAL", 5) if args[3] == b"redlease:format" => {
                let key = (session.db, args[3].clone());
                let format = match self.data.get(&key) {
                    Some(e) => e.value.clone(),
                    None => {
                        self.set(now, session.db, &args[3], &args[4], None);
                        args[4].clone()
                    }
                };
                bulk(out, &format);
            }
            (b"EVAL", n) if n >= 3 => {
                self.stats.evals += 1;
                match known_scripts().iter().position(|s| s.0.as_bytes() == args[1].as_slice()) {
                    Some(i) => {
                        self.scripts[i] = true;
                        self.run_script(now, session.db, i, &args[2..], out);
                    }
                    None => {
                        self.problems.push("EVAL of a script the model does not know".into());
                        out.extend_from_slice(b"-ERR unknown script (simulation)\r\n");
                    }
                }
            }
            _ => {
                self.problems.push(format!("unexpected command {:?}", String::from_utf8_lossy(&args[0])));
                out.extend_from_slice(b"-ERR unknown command\r\n");
            }
        }
    }

    /// Deliver what the last command published: to `session` itself (after its reply), and
    /// to the other subscribed connections through the outbox.
    fn publish(&mut self, conn: usize, session: &Session, out: &mut Vec<u8>) {
        let sharded = std::mem::take(&mut self.sharded);
        if sharded && self.shard.as_ref().is_some_and(|s| s.old) {
            // An older server has no SPUBLISH: the script's `pcall` fails, nothing is announced.
            self.published.clear();
        }
        for (channel, message) in std::mem::take(&mut self.published) {
            if sharded != self.shard.is_some() {
                let what = if sharded { "SPUBLISH on a standalone node" } else { "PUBLISH on a cluster master" };
                self.problems.push(format!("a release announced with {what}"));
            }
            let mut push = b">3\r\n".to_vec();
            bulk(&mut push, if sharded { b"smessage" } else { b"message" });
            bulk(&mut push, &channel);
            bulk(&mut push, &message);
            let listens = |s: &Session| {
                s.resp3 && if sharded { s.shard_channels.contains(&channel) } else { s.channels.contains(&channel) }
            };
            if listens(session) {
                out.extend_from_slice(&push);
            }
            for (&c, s) in &self.sessions {
                if c != conn && !s.closed && listens(s) {
                    self.outbox.push((c, push.clone()));
                }
            }
            if self.shard.is_some() && !sharded {
                // A cluster propagates every PUBLISH to the subscribers of all its masters
                // (an SPUBLISH stays within the slot's shard).
                self.bus.push((channel, push));
            }
        }
    }

    /// This master learns that `owner` serves `slot`: if that was itself and is no more, its
    /// clients' sharded subscriptions to the slot's channels end, each with an `sunsubscribe`
    /// push (through the outbox), as Redis does when a node loses a slot.
    pub(crate) fn set_slot_owner(&mut self, slot: u16, owner: usize) {
        let Some(shard) = self.shard.as_mut() else { return };
        let lost = shard.owner(slot) == shard.me() && owner != shard.me();
        shard.set_owner(slot, owner);
        if !lost {
            return;
        }
        for (&c, s) in self.sessions.iter_mut() {
            let gone: Vec<Vec<u8>> = s.shard_channels.iter().filter(|ch| hash_slot(ch) == slot).cloned().collect();
            for ch in gone {
                s.shard_channels.remove(&ch);
                if s.closed || !s.resp3 {
                    continue;
                }
                let mut push = b">3\r\n".to_vec();
                bulk(&mut push, b"sunsubscribe");
                bulk(&mut push, &ch);
                push.extend_from_slice(format!(":{}\r\n", s.shard_channels.len()).as_bytes());
                self.outbox.push((c, push));
            }
        }
    }

    /// A release message another master of the cluster published: to this master's
    /// subscribers, through the outbox.
    pub(crate) fn relay(&mut self, channel: &[u8], push: &[u8]) {
        for (&c, s) in &self.sessions {
            if s.resp3 && !s.closed && s.channels.contains(channel) {
                self.outbox.push((c, push.to_vec()));
            }
        }
    }

    /// `numkeys key... arg...` of script number `i` (the order of [`known_scripts`]).
    fn run_script(&mut self, now: Time, db: u32, i: usize, rest: &[Vec<u8>], out: &mut Vec<u8>) {
        let Some(numkeys) = parse_int(&rest[0]).filter(|&n| n >= 0 && (n as usize) < rest.len()) else {
            self.problems.push("bad numkeys in a script call".into());
            out.extend_from_slice(b"-ERR Number of keys can't be greater than number of args\r\n");
            return;
        };
        let keys = &rest[1..1 + numkeys as usize];
        let argv = &rest[1 + numkeys as usize..];
        // The argument that makes a script that announces do so on the sharded channel.
        let at = match known_scripts().get(i).map(|s| s.2) {
            Some(Script::Release | Script::ReadRelease) => 3,
            Some(Script::SemRelease) => 5,
            Some(Script::ReleaseOne) => 1,
            Some(Script::ReadAcquire) => 5,
            Some(Script::Downgrade) => 2,
            Some(Script::Reentry) => 5,
            Some(Script::SemAcquire) => 9,
            _ => usize::MAX,
        };
        self.sharded = argv.len().checked_sub(1) == Some(at) && argv[at] == b"s";
        let argv = if self.sharded { &argv[..at] } else { argv };
        let result = match known_scripts().get(i).map(|s| s.2) {
            Some(Script::Acquire) => self.acquire(now, db, keys, argv),
            Some(Script::Extend) => self.extend(now, db, keys, argv).map(Reply::Int),
            Some(Script::Release) => self.release(now, db, keys, argv).map(Reply::Int),
            Some(Script::Fence) => self.fence(now, db, keys, argv).map(Reply::Int),
            Some(Script::ReleaseOne) => self.release_one(now, db, keys, argv).map(Reply::Int),
            Some(Script::SemAcquire) => self.sem_acquire(now, db, keys, argv),
            Some(Script::SemRelease) => self.sem_release(now, db, keys, argv).map(Reply::Int),
            Some(Script::ReadAcquire) => self.read_acquire(now, db, keys, argv),
            Some(Script::ReadExtend) => self.read_extend(now, db, keys, argv).map(Reply::Int),
            Some(Script::ReadRelease) => self.read_release(now, db, keys, argv).map(Reply::Int),
            Some(Script::Downgrade) => self.downgrade(now, db, keys, argv).map(Reply::Int),
            Some(Script::Reentry) => self.reentry(now, db, keys, argv),
            None => Err("no such script".into()),
        };
        match result {
            Ok(Reply::Int(v)) => {
                out.push(b':');
                out.extend_from_slice(v.to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Ok(Reply::Status(m)) => out.extend_from_slice(format!("+{m}\r\n").as_bytes()),
            Ok(Reply::Bulk(b)) => bulk(out, &b),
            Ok(Reply::Error(e)) => out.extend_from_slice(format!("-{e}\r\n").as_bytes()),
            Err(e) => {
                self.problems.push(format!("script error: {e}"));
                out.extend_from_slice(format!("-ERR {e}\r\n").as_bytes());
            }
        }
    }

    /// KEYS: the n lock keys, their n queues (when the wait mode queues), then fence keys;
    /// ARGV: token, ttl ms, n, wait mode, queue TTL, reservation ms. All-or-nothing: 0 if any
    /// lock key holds another token (a queuing waiter then marks every such key and joins every
    /// key's queue, as `token:reservation`); else set them all (re-entry by token), leave the
    /// queues, and return one more than the largest fence counter (1 without fencing).
    fn acquire(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<Reply, String> {
        let [token, ttl, n, queue, queue_ttl, reserve] = argv else {
            return Err(format!("acquire takes 6 arguments, got {}", argv.len()));
        };
        let ttl = parse_int(ttl).filter(|&t| t > 0).ok_or("acquire: the TTL must be a positive integer")?;
        let n = parse_int(n).filter(|&n| n >= 1 && n as usize <= keys.len()).ok_or("acquire: bad lock key count")?;
        let n = n as usize;
        let front = match queue.as_slice() {
            b"0" => None,
            b"1" => Some(false),
            b"2" => Some(true),
            _ => return Err("acquire: bad wait mode".into()),
        };
        if front.is_some() {
            parse_int(queue_ttl).filter(|&t| t > 0).ok_or("acquire: the queue TTL must be a positive integer")?;
            parse_int(reserve).filter(|&t| t > 0).ok_or("acquire: the reservation must be a positive integer")?;
        }
        let queues = if front.is_some() { n } else { 0 };
        if keys.len() < n + queues {
            return Err("acquire: too few keys".into());
        }
        let (locks, rest) = keys.split_at(n);
        let (qkeys, fences) = rest.split_at(queues);
        if locks.iter().any(|k| !self.is_lock_key(k))
            || fences.iter().any(|k| self.is_lock_key(k))
            || locks.iter().any(|k| permit_of(k).is_some())
            || qkeys.iter().zip(locks).any(|(q, k)| *q != queue_of(k))
        {
            return Err("acquire: lock, queue and fence keys mixed up".into());
        }
        let entry = [token.as_slice(), b":", reserve].concat();
        let refused: Vec<&Vec<u8>> =
            locks.iter().filter(|k| self.get(db, k).is_some_and(|v| v != token.as_slice())).collect();
        if !refused.is_empty() {
            let held = self.held(now, db, &refused);
            if let Some(front) = front {
                for k in refused {
                    // The script marks every key that refuses, keeping its TTL.
                    if let Some(e) = self.data.get_mut(&(db, k.clone())) {
                        e.marked = true;
                    }
                }
                for q in qkeys {
                    self.join_queue(now, &(db, q.clone()), &entry, front, parse_int(queue_ttl).unwrap_or(1));
                }
            }
            return Ok(held);
        }
        for k in locks {
            self.set(now, db, k, token, Some(ttl));
            self.granted.push((now, self.stats.commands, self.current, token.clone(), k.clone()));
        }
        if front.is_some() {
            for q in qkeys {
                self.leave_queue(&(db, q.clone()), &entry);
            }
        }
        let mut f = 0;
        for k in fences {
            f = f.max(self.get(db, k).and_then(parse_int).unwrap_or(0));
        }
        Ok(Reply::Int(f + 1))
    }

    /// The semaphore's acquire. KEYS: the n permit keys (in the client's order), the limit key,
    /// the semaphore's one queue, then (with fencing) the n permits' fence counters; ARGV:
    /// token, ttl ms, n (the limit), m (permits wanted), wait mode, queue TTL, reservation ms,
    /// ticket, the preferred position (tried first).
    ///
    /// Records the limit on first use (no TTL) and answers `WRONGLIMIT` for another. Takes m
    /// permits, all or nothing: those holding the token first (marked or not: a re-entry or a
    /// hand-over), then free ones, in KEYS order; replies 0 when fewer than m are ours or free
    /// (a queuing waiter then joins the queue once, at its ticket kept between the oldest score
    /// and a second past the newest, and if it heads the queue keeps the permits handed to it
    /// for another reservation),
    /// else `"<proposal> <p1> <p2> ..."`: one more than the largest counter of the permits
    /// taken (1 without fencing) and the 1-based positions of the permits taken, leaving the
    /// queue and handing on, as a release does, the permits handed to it beyond those taken.
    fn sem_acquire(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<Reply, String> {
        let [token, ttl, limit, m, queue, queue_ttl, reserve, ticket, prefer] = argv else {
            return Err(format!("the semaphore acquire takes 9 arguments, got {}", argv.len()));
        };
        let ttl = parse_int(ttl).filter(|&t| t > 0).ok_or("semaphore: the TTL must be a positive integer")?;
        let n = parse_int(limit).filter(|&n| n >= 1).ok_or("semaphore: the limit must be a positive integer")? as usize;
        let m =
            parse_int(m).filter(|&m| m >= 1 && m as usize <= n).ok_or("semaphore: permits must be 1 to the limit")?;
        let front = match queue.as_slice() {
            b"0" => None,
            b"1" => Some(false),
            b"2" => Some(true),
            _ => return Err("semaphore: bad wait mode".into()),
        };
        if front.is_some() {
            parse_int(queue_ttl).filter(|&t| t > 0).ok_or("semaphore: the queue TTL must be a positive integer")?;
            parse_int(reserve).filter(|&t| t > 0).ok_or("semaphore: the reservation must be a positive integer")?;
        }
        let ticket = parse_int(ticket).filter(|&t| t >= 0).ok_or("semaphore: the ticket must be an integer")?;
        let fencing = match keys.len() {
            k if k == n + 2 => false,
            k if k == 2 * n + 2 => true,
            k => return Err(format!("semaphore: {k} keys for a limit of {n}")),
        };
        let (permits, rest) = keys.split_at(n);
        let (limit_key, qkey, fences) = (&rest[0], &rest[1], &rest[2..]);
        // Every key the script touches is in KEYS: the n distinct permits of one semaphore, its
        // limit, its queue, and the permits' own fence counters, in the permits' order.
        let base = permit_of(&permits[0]).map(|(b, _)| b.to_vec()).ok_or("semaphore: not a permit key")?;
        let mut seen = vec![false; n];
        for k in permits {
            match permit_of(k) {
                Some((b, i)) if b == base && (i as usize) < n && !seen[i as usize] => seen[i as usize] = true,
                _ => return Err("semaphore: the permit keys are not the limit's permits of one semaphore".into()),
            }
        }
        if *limit_key != [base.as_slice(), b":limit"].concat()
            || *qkey != queue_of(&permits[0])
            || (fencing && fences.iter().zip(permits).any(|(f, k)| *f != [self.fence_prefix.as_slice(), k].concat()))
        {
            return Err("semaphore: permit, limit, queue and fence keys mixed up".into());
        }
        match self.get(db, limit_key) {
            None => self.set(now, db, limit_key, limit, None),
            Some(v) if v != limit.as_slice() => {
                let had = String::from_utf8_lossy(v).into_owned();
                let asked = String::from_utf8_lossy(limit);
                return Ok(Reply::Error(format!(
                    "WRONGLIMIT the semaphore has {had} permits on this node, the client asks for a limit of {asked}"
                )));
            }
            Some(_) => {}
        }
        let prefer = parse_int(prefer).filter(|&p| p >= 0).ok_or("semaphore: the preferred position")? as usize;
        let (mut mine, mut free) = (Vec::new(), Vec::new());
        // The preferred position (1-based; 0: none) first, then the others in KEYS order.
        let first = permits.iter().enumerate().filter(|(i, _)| i + 1 == prefer);
        for (i, k) in first.chain(permits.iter().enumerate().filter(|(i, _)| i + 1 != prefer)) {
            match self.get(db, k) {
                Some(v) if v == token.as_slice() => mine.push(i),
                None => free.push(i),
                Some(_) => {}
            }
        }
        // A waiter of several permits queues as `token:ms:m`.
        let mut entry = [token.as_slice(), b":", reserve].concat();
        if m > 1 {
            entry.extend_from_slice(format!(":{m}").as_bytes());
        }
        if mine.len() + free.len() < m as usize {
            if front.is_some() {
                let queue = (db, qkey.clone());
                self.join_sorted(now, &queue, &entry, ticket, parse_int(queue_ttl).unwrap_or(1));
                if self.queues.get(&queue).and_then(|q| q.front()) == Some(&entry) {
                    for &i in &mine {
                        // What was handed to the head stays its while it waits for the rest.
                        self.pexpire(now, db, &permits[i], parse_int(reserve).unwrap_or(1));
                    }
                }
            }
            // How long until enough of the others' permits expired.
            let others: Vec<&Vec<u8>> = permits
                .iter()
                .enumerate()
                .filter(|(i, _)| !mine.contains(i) && !free.contains(i))
                .map(|(_, k)| k)
                .collect();
            let mut left: Vec<Option<i64>> = others.iter().map(|k| self.pttl(now, &(db, (*k).clone()))).collect();
            left.sort();
            let need = m as usize - mine.len() - free.len();
            return Ok(match left.get(need - 1) {
                Some(Some(ms)) if left[0].is_some() => Reply::Status(format!("HELD {}", ms.max(&0))),
                _ => Reply::Status("HELD".to_owned()),
            });
        }
        let take: Vec<usize> = mine.iter().chain(&free).copied().take(m as usize).collect();
        let mut f = 0;
        for &i in &take {
            // A permit already ours keeps its value (and mark); only the TTL is set again.
            self.set(now, db, &permits[i], token, Some(ttl));
            self.granted.push((now, self.stats.commands, self.current, token.clone(), permits[i].clone()));
            if fencing {
                f = f.max(self.get(db, &fences[i]).and_then(parse_int).unwrap_or(0));
            }
        }
        let queue = (db, qkey.clone());
        if front.is_some() {
            self.leave_sorted(&queue, &entry);
        }
        // What was handed to it beyond what it takes goes on, as a release hands it (its
        // client learns only of the permits it takes).
        let mut given = None;
        for &i in mine.iter().skip(m as usize) {
            let key = (db, permits[i].clone());
            if self.data.get(&key).is_some_and(|e| e.marked) && self.del(now, db, &permits[i]) {
                self.pass_on(now, &queue, token, &permits[i], true, &mut given);
            }
        }
        let positions: Vec<String> = take.iter().map(|i| (i + 1).to_string()).collect();
        Ok(Reply::Bulk(format!("{} {}", f + 1, positions.join(" ")).into_bytes()))
    }

    /// Join queue `key` as `entry`: at the back unless already in it, or (`front`) at the
    /// front unless already heading it (the scripts' `LPOS`, `LREM`, `LPUSH`, `RPUSH`).
    fn join_queue(&mut self, now: Time, key: &Key, entry: &[u8], front: bool, ttl_ms: i64) {
        let local = self.clock.local(now);
        let at_least = local + ttl_ms * MS as i64;
        if !self.queues.contains_key(key) {
            self.queue_expiry.insert(key.clone(), at_least);
        }
        let x = self.queue_expiry.entry(key.clone()).or_insert(at_least);
        *x = (*x).max(at_least);
        let q = self.queues.entry(key.clone()).or_default();
        let at = q.iter().position(|t| t == entry);
        if front && at != Some(0) {
            q.retain(|t| t != entry);
            q.push_front(entry.to_vec());
        } else if at.is_none() {
            q.push_back(entry.to_vec());
        }
    }

    /// Join the sorted queue `key` as `entry` at score `ticket` unless already in it (`ZADD
    /// NX`), the score kept between the queue's oldest and a second past its newest; the queue
    /// lives at least `ttl_ms` from now.
    fn join_sorted(&mut self, now: Time, key: &Key, entry: &[u8], ticket: i64, ttl_ms: i64) {
        let local = self.clock.local(now);
        let x = self.queue_expiry.entry(key.clone()).or_insert(local);
        *x = (*x).max(local + ttl_ms * MS as i64);
        let scores = self.queue_scores.entry(key.clone()).or_default();
        if scores.contains_key(entry) {
            return;
        }
        let q = self.queues.entry(key.clone()).or_default();
        let bounds = (q.front().and_then(|e| scores.get(e)), q.back().and_then(|e| scores.get(e)));
        let score = match bounds {
            (Some(&first), Some(&last)) => ticket.max(first).min(last + 1_000_000),
            _ => ticket,
        };
        scores.insert(entry.to_vec(), score);
        let at = q.iter().position(|e| (scores[e], e.as_slice()) > (score, entry)).unwrap_or(q.len());
        q.insert(at, entry.to_vec());
    }

    /// Leave the sorted queue `key` (`ZREM`).
    fn leave_sorted(&mut self, key: &Key, entry: &[u8]) {
        if let Some(scores) = self.queue_scores.get_mut(key) {
            scores.remove(entry);
            if scores.is_empty() {
                self.queue_scores.remove(key);
            }
        }
        self.leave_queue(key, entry);
    }

    fn leave_queue(&mut self, key: &Key, entry: &[u8]) {
        if let Some(q) = self.queues.get_mut(key) {
            if let Some(at) = q.iter().position(|t| t == entry) {
                q.remove(at);
            }
            if q.is_empty() {
                self.queues.remove(key);
            }
        }
    }

    /// KEYS: lock keys; ARGV: token, ttl ms. 1 if all hold the token (and get the new TTL), else 0.
    fn extend(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<i64, String> {
        let [token, ttl] = argv else { return Err(format!("extend takes 2 arguments, got {}", argv.len())) };
        let ttl = parse_int(ttl).filter(|&t| t > 0).ok_or("extend: the TTL must be a positive integer")?;
        if keys.iter().any(|k| self.get(db, k) != Some(token.as_slice())) {
            return Ok(0);
        }
        for k in keys {
            self.pexpire(now, db, k, ttl);
        }
        Ok(1)
    }

    /// KEYS: the n lock keys, then their n queues; ARGV: token, `1` to leave the queues,
    /// our reservation ms (our entries). Deletes the keys holding the token, handing each to
    /// the head of its queue for the reservation its entry names, and naming it next; returns
    /// how many.
    fn release(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<i64, String> {
        let [token, leave, reserve] = argv else {
            return Err(format!("release takes 3 arguments, got {}", argv.len()));
        };
        let leave = match leave.as_slice() {
            b"0" => false,
            b"1" => true,
            _ => return Err("release: leave must be 0 or 1".into()),
        };
        if keys.len() % 2 != 0 {
            return Err("release: the lock keys and their queues".into());
        }
        let entry = [token.as_slice(), b":", reserve].concat();
        self.release_keys(now, db, keys, token, leave.then_some(&entry[..]))
    }

    /// The release of one key that leaves no queue. KEYS: the lock key, its queue; ARGV: token.
    fn release_one(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<i64, String> {
        let [token] = argv else {
            return Err(format!("the one-key release takes 1 argument, got {}", argv.len()));
        };
        if keys.len() != 2 {
            return Err(format!("the one-key release takes 2 keys, got {}", keys.len()));
        }
        self.release_keys(now, db, keys, token, None)
    }

    fn release_keys(
        &mut self,
        now: Time,
        db: u32,
        keys: &[Vec<u8>],
        token: &[u8],
        leave: Option<&[u8]>,
    ) -> Result<i64, String> {
        let (locks, qkeys) = keys.split_at(keys.len() / 2);
        if locks.iter().any(|k| !self.is_lock_key(k)) || qkeys.iter().zip(locks).any(|(q, k)| *q != queue_of(k)) {
            return Err("release: lock and queue keys mixed up".into());
        }
        let mut d = 0;
        for (k, qname) in locks.iter().zip(qkeys) {
            let key = (db, k.clone());
            let queue = (db, qname.clone());
            if let Some(entry) = leave {
                self.leave_queue(&queue, entry);
            }
            let marked = self.data.get(&key).is_some_and(|e| e.marked);
            if leave.is_some() && marked && self.get(db, k).is_some_and(for_readers) {
                // A waiter that leaves takes its mark off a key readers share.
                if let Some(e) = self.data.get_mut(&key) {
                    e.marked = false;
                }
                continue;
            }
            if self.get(db, k) == Some(token) && self.del(now, db, k) {
                d += 1;
                self.released.push((now, self.stats.commands, self.current, token.to_vec(), k.clone()));
                if !marked {
                    // Nobody waited: compare-and-delete only.
                    self.stats.quiet_releases += 1;
                    continue;
                }
                let mut next = Vec::new();
                if let Some(q) = self.queues.get_mut(&queue) {
                    match q.front().map(|head| entry_parts(head).filter(|e| e.2 == 1).map(|e| (e.0.to_vec(), e.1))) {
                        None => {}
                        Some(None) => {
                            q.pop_front();
                        }
                        Some(Some((tok, _))) if tok == token => {}
                        Some(Some((tok, ms))) => {
                            q.pop_front();
                            self.set(now, db, k, &tok, Some(ms));
                            // The reservation stays marked: other waiters may still listen.
                            if let Some(e) = self.data.get_mut(&key) {
                                e.marked = true;
                            }
                            next = tok;
                        }
                    }
                    if self.queues.get(&queue).is_some_and(VecDeque::is_empty) {
                        self.queues.remove(&queue);
                    }
                }
                let channel = [b"redlease:wake:".as_slice(), k].concat();
                self.published.push((channel, [token, b":", &next].concat()));
            }
        }
        Ok(d)
    }

    /// A semaphore's release. KEYS: permit keys, then the semaphore's queue; ARGV: token, mode
    /// (`1`: leave the queue; plus `2`: a cleanup; plus `4`: join the queue again), our entry's
    /// reservation (`ms` or `ms:m`), the ticket and the queue TTL to join with.
    /// Deletes the permits holding the token, handing each to the head of the queue (each
    /// waiter as many as its entry asks for, in order) for the reservation its entry names,
    /// except a cleanup's unmarked ones; announces a permit named to a waiter or handed over
    /// before, on the semaphore's one wake channel. Returns how many permits it deleted.
    fn sem_release(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<i64, String> {
        let [token, mode, reserve, ticket, queue_ttl] = argv else {
            return Err(format!("the semaphore release takes 5 arguments, got {}", argv.len()));
        };
        let Some((qname, permits)) = keys.split_last() else { return Err("semaphore release: no keys".into()) };
        let good = !permits.is_empty() && permits.iter().all(|k| permit_of(k).is_some() && queue_of(k) == *qname);
        if !good {
            return Err("semaphore release: permit and queue keys mixed up".into());
        }
        let queue = (db, qname.clone());
        let mode = parse_int(mode).filter(|m| (0..8).contains(m)).ok_or("semaphore release: mode 0 to 7")?;
        let entry = [token.as_slice(), b":", reserve].concat();
        if mode % 2 == 1 {
            self.leave_sorted(&queue, &entry);
        }
        if mode >= 4 {
            let ticket = parse_int(ticket).ok_or("semaphore release: the ticket must be an integer")?;
            let ttl = parse_int(queue_ttl).filter(|&t| t > 0).ok_or("semaphore release: the queue TTL")?;
            self.join_sorted(now, &queue, &entry, ticket, ttl);
        }
        let cleanup = mode % 4 >= 2;
        let (mut d, mut given): (i64, Option<(Vec<u8>, i64, i64)>) = (0, None);
        for k in permits {
            let key = (db, k.clone());
            let marked = self.data.get(&key).is_some_and(|e| e.marked);
            if self.get(db, k) != Some(token.as_slice()) || !self.del(now, db, k) {
                continue;
            }
            d += 1;
            self.released.push((now, self.stats.commands, self.current, token.to_vec(), k.clone()));
            if cleanup && !marked {
                // A cleanup frees what its attempt took as it was.
                self.stats.quiet_releases += 1;
                continue;
            }
            self.pass_on(now, &queue, token, k, marked, &mut given);
        }
        Ok(d)
    }

    /// The scripts' `pass`: permit `k` of `queue`'s semaphore, which held `token` (`marked`:
    /// handed to it) and was just deleted, is reserved for `given`, the waiter being served
    /// (token, reservation ms, permits still to hand), or once it has all it asked for, for the
    /// head of the queue (taken off it; never `token` itself), and announced if it named
    /// someone or was handed over before.
    fn pass_on(
        &mut self,
        now: Time,
        queue: &Key,
        token: &[u8],
        k: &[u8],
        marked: bool,
        given: &mut Option<(Vec<u8>, i64, i64)>,
    ) {
        if given.as_ref().is_none_or(|g| g.2 == 0) {
            *given = None;
            let head = self.queues.get(queue).and_then(|q| q.front().cloned());
            if let Some(head) = head {
                let parsed = entry_parts(&head).map(|(t, ms, m)| (t.to_vec(), ms, m));
                if parsed.as_ref().is_none_or(|p| p.0 != token) {
                    self.leave_sorted(queue, &head);
                }
                *given = parsed.filter(|p| p.0 != token);
            }
        }
        let mut next = Vec::new();
        if let Some((tok, ms, left)) = given {
            self.set(now, queue.0, k, tok, Some(*ms));
            if let Some(e) = self.data.get_mut(&(queue.0, k.to_vec())) {
                e.marked = true;
            }
            next = tok.clone();
            *left -= 1;
        }
        if next.is_empty() && !marked {
            // Nobody waits, and nobody was handed it: compare-and-delete only.
            self.stats.quiet_releases += 1;
            return;
        }
        let channel = [b"redlease:wake:".as_slice(), &queue.1[b"redlease:queue:".len()..]].concat();
        self.published.push((channel, [token, b":", &next].concat()));
    }

    // ----- read locks ----------------------------------------------------------------------

    /// Close the spans of every member of `set` (readers of `key`) at `at`, or when its score
    /// passed if earlier.
    fn close_members(&mut self, key: &Key, set: ReaderSet, at: Time) {
        for (token, (score, since)) in set.members {
            self.close_member(key, token, score, since, at);
        }
    }

    fn close_member(&mut self, (db, key): &Key, token: Vec<u8>, score: i64, since: Time, at: Time) {
        let to = at.min(self.clock.when_reads(score * MS as i64, since)).max(since);
        self.memberships.push(Segment { db: *db, key: key.clone(), token, from: since, to });
    }

    /// The node's `TIME` in whole ms, and the readers whose expiry it reached dropped
    /// (`ZREMRANGEBYSCORE readers -inf ms`).
    fn read_start(&mut self, now: Time, key: &Key) -> i64 {
        let ms = self.clock.local(now).div_euclid(MS as i64);
        if let Some(mut set) = self.readers.remove(key) {
            let expired: Vec<Vec<u8>> =
                set.members.iter().filter(|(_, (score, _))| *score <= ms).map(|(t, _)| t.clone()).collect();
            for t in expired {
                let (score, since) = set.members.remove(&t).expect("listed above");
                self.close_member(key, t, score, since, now);
            }
            if !set.members.is_empty() {
                self.readers.insert(key.clone(), set);
            }
        }
        ms
    }

    /// `ZADD readers score token` (the caller sets a new set's expiry).
    fn zadd(&mut self, now: Time, key: &Key, token: &[u8], score: i64) {
        let old = self.readers.entry(key.clone()).or_default().members.insert(token.to_vec(), (score, now));
        if let Some((s, since)) = old {
            self.close_member(key, token.to_vec(), s, since, now);
        }
    }

    fn zrem(&mut self, now: Time, key: &Key, token: &[u8]) -> bool {
        let Some(set) = self.readers.get_mut(key) else { return false };
        let Some((score, since)) = set.members.remove(token) else { return false };
        if set.members.is_empty() {
            self.readers.remove(key);
        }
        self.close_member(key, token.to_vec(), score, since, now);
        true
    }

    /// The scripts' `settle`: the lock key and its readers expire with the latest live reader.
    /// Returns false when no reader is left.
    fn settle(&mut self, now: Time, key: &Key, ms: i64) -> bool {
        let Some(set) = self.readers.get_mut(key) else { return false };
        let Some(top) = set.members.values().map(|m| m.0).max() else { return false };
        let left = (top - ms).max(1);
        set.expires = (ms + left) * MS as i64;
        self.pexpire(now, key.0, &key.1, left);
        true
    }

    /// Check that `keys` are a read script's: the lock key, its readers, then (`queue`) its
    /// queue, then (`fence`, when there are that many) its fence counter. Returns whether the
    /// fence counter is there.
    fn read_keys(&self, keys: &[Vec<u8>], queue: bool, fence: bool, what: &str) -> Result<bool, String> {
        let base = 2 + usize::from(queue);
        let fenced = fence && keys.len() == base + 1;
        if keys.len() != base && !fenced {
            return Err(format!("{what}: {} keys", keys.len()));
        }
        let k = &keys[0];
        let mut want = vec![k.clone(), [READERS_PREFIX, k].concat()];
        if queue {
            want.push(queue_of(k));
        }
        if fenced {
            want.push([self.fence_prefix.as_slice(), k].concat());
        }
        if !self.is_lock_key(k) || permit_of(k).is_some() || k.starts_with(b"redlease:") || *keys != want[..] {
            return Err(format!("{what}: the lock key, its readers, queue and fence counter mixed up"));
        }
        Ok(fenced)
    }

    fn marked(&self, key: &Key) -> bool {
        self.data.get(key).is_some_and(|e| e.marked)
    }

    fn mark(&mut self, key: &Key) {
        if let Some(e) = self.data.get_mut(key) {
            e.marked = true;
        }
    }

    /// The read acquire. KEYS: the lock key, its readers, its queue, (with fencing) its fence
    /// counter; ARGV: token, ttl ms, wait mode, queue TTL, reservation ms. Takes a free key for
    /// the token alone (`:readers:token`, no set); joins a sole reader (both then in the set,
    /// the sole one scored by the key's expiry) or the readers unless a writer holds the key or
    /// marked it (a re-entry still joins), or it is reserved for another; a key handed to the
    /// token becomes `:readers` and, if others queue, is announced. A refused waiter marks the
    /// key and queues. Returns 0, or one more than the fence counter.
    fn read_acquire(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<Reply, String> {
        let [token, ttl, queue, queue_ttl, reserve] = argv else {
            return Err(format!("the read acquire takes 5 arguments, got {}", argv.len()));
        };
        let ttl = parse_int(ttl).filter(|&t| t > 0).ok_or("read acquire: the TTL must be a positive integer")?;
        let front = match queue.as_slice() {
            b"0" => None,
            b"1" => Some(false),
            b"2" => Some(true),
            _ => return Err("read acquire: bad wait mode".into()),
        };
        if front.is_some() {
            parse_int(queue_ttl).filter(|&t| t > 0).ok_or("read acquire: the queue TTL must be positive")?;
            parse_int(reserve).filter(|&t| t > 0).ok_or("read acquire: the reservation must be positive")?;
        }
        let fenced = self.read_keys(keys, true, true, "read acquire")?;
        let key = (db, keys[0].clone());
        let qkey = (db, keys[2].clone());
        let entry = [token.as_slice(), b":", reserve].concat();
        let f = if fenced { self.get(db, &keys[3]).and_then(parse_int).unwrap_or(0) } else { 0 };
        let sole = [SOLE_READER, token].concat();
        let joined = |node: &mut Self| {
            node.granted.push((now, node.stats.commands, node.current, token.clone(), key.1.clone()));
            if front.is_some() {
                node.leave_queue(&qkey, &entry);
            }
            Ok(Reply::Int(f + 1))
        };
        if self.get(db, &key.1).is_none() {
            // `SET K :readers:token NX PX ttl` took the free key: no reader is live, the token
            // is the only one.
            let ms = self.clock.local(now).div_euclid(MS as i64);
            if self.readers.get(&key).is_some_and(|s| s.members.values().any(|m| m.0 > ms)) {
                self.problems.push(format!("a live reader of the free key {:?}", show_key(&key.1)));
            }
            self.set(now, db, &key.1, &sole, Some(ttl));
            return joined(self);
        }
        let no_queue = self.queues.get(&qkey).is_none_or(VecDeque::is_empty);
        if self.get(db, &key.1).is_some_and(for_readers) && self.marked(&key) && no_queue {
            // The writer that marked it is gone (its queue expired).
            if let Some(e) = self.data.get_mut(&key) {
                e.marked = false;
            }
        }
        let v = self.get(db, &key.1).map(<[u8]>::to_vec);
        let marked = self.marked(&key);
        if v.as_deref() == Some(sole.as_slice()) {
            // The token reads alone already: it keeps the later expiry.
            if self.pttl(now, &key).is_none_or(|left| left < ttl) {
                self.pexpire(now, db, &key.1, ttl);
            }
            return joined(self);
        }
        if let Some(other) = v.as_deref().and_then(sole_reader).filter(|_| !marked).map(<[u8]>::to_vec) {
            // A second reader: the sole one joins the set (a new one), scored by the key's
            // expiry; the key and the set expire with the later of the two.
            let ms = self.clock.local(now).div_euclid(MS as i64);
            let p = self.pttl(now, &key).unwrap_or(-1);
            let left = p.max(ttl);
            if let Some(set) = self.readers.remove(&key) {
                if set.members.values().any(|m| m.0 > ms) {
                    self.problems
                        .push(format!("a live reader in the set of the sole reader of {:?}", show_key(&key.1)));
                }
                self.close_members(&key, set, now);
            }
            self.zadd(now, &key, &other, ms + p);
            self.zadd(now, &key, token, ms + ttl);
            self.set(now, db, &key.1, READERS, Some(left));
            self.readers.get_mut(&key).expect("just added").expires = (ms + left) * MS as i64;
            return joined(self);
        }
        let handed = v.as_deref() == Some(token.as_slice()) && marked;
        let shared = v.as_deref() == Some(READERS);
        // Joining readers drop the expired ones; while a writer waits, only a re-entry joins.
        let mut ms = 0;
        let joins = (shared || handed) && {
            ms = self.read_start(now, &key);
            handed || !marked || self.readers.get(&key).is_some_and(|s| s.members.contains_key(token))
        };
        if !joins {
            if let Some(front) = front {
                self.mark(&key);
                self.join_queue(now, &qkey, &entry, front, parse_int(queue_ttl).unwrap_or(1));
            }
            return Ok(self.held(now, db, &[&key.1]));
        }
        self.zadd(now, &key, token, ms + ttl);
        self.granted.push((now, self.stats.commands, self.current, token.clone(), key.1.clone()));
        if front.is_some() {
            self.leave_queue(&qkey, &entry);
        }
        if handed {
            // `SET K :readers PX left`: the key and the readers expire with the last reader.
            self.set(now, db, &key.1, READERS, Some(ttl));
            if let Some(e) = self.data.get_mut(&key) {
                e.marked = false;
            }
            self.settle(now, &key, ms);
            if self.queues.get(&qkey).is_some_and(|q| !q.is_empty()) {
                let channel = [b"redlease:wake:".as_slice(), &key.1].concat();
                self.published.push((channel, [token.as_slice(), b":"].concat()));
            }
        } else if self.pttl(now, &key).is_none_or(|left| left < ttl) {
            // The token is now the last reader to expire: the key and the readers last its TTL.
            self.pexpire(now, db, &key.1, ttl);
            self.readers.get_mut(&key).expect("just added").expires = (ms + ttl) * MS as i64;
        }
        Ok(Reply::Int(f + 1))
    }

    /// An acquire's refusal by the keys `refused`: `HELD` and the longest time one has left
    /// (`HELD` alone when one has no TTL).
    pub(super) fn held(&self, now: Time, db: u32, refused: &[&Vec<u8>]) -> Reply {
        let left: Option<Vec<i64>> = refused.iter().map(|k| self.pttl(now, &(db, (*k).clone()))).collect();
        match left.and_then(|l| l.into_iter().max()) {
            Some(ms) => Reply::Status(format!("HELD {}", ms.max(0))),
            None => Reply::Status("HELD".to_owned()),
        }
    }

    /// `PTTL key` in ms (`None`: no TTL or no key).
    fn pttl(&self, now: Time, key: &Key) -> Option<i64> {
        let x = self.data.get(key)?.expires?;
        Some(x.div_euclid(MS as i64) - self.clock.local(now).div_euclid(MS as i64))
    }

    /// KEYS: the lock key, its readers; ARGV: token, ttl ms. 1 if the token still reads (its
    /// expiry is then `ttl` from the node's now), else 0.
    fn read_extend(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<i64, String> {
        let [token, ttl] = argv else { return Err(format!("the read extend takes 2 arguments, got {}", argv.len())) };
        let ttl = parse_int(ttl).filter(|&t| t > 0).ok_or("read extend: the TTL must be a positive integer")?;
        self.read_keys(keys, false, false, "read extend")?;
        let key = (db, keys[0].clone());
        if self.get(db, &key.1).and_then(sole_reader) == Some(token.as_slice()) {
            // A sole reader: the key alone, `ttl` from now.
            self.pexpire(now, db, &key.1, ttl);
            return Ok(1);
        }
        if self.get(db, &key.1) != Some(READERS) {
            return Ok(0);
        }
        let ms = self.read_start(now, &key);
        if !self.readers.get(&key).is_some_and(|s| s.members.contains_key(token)) {
            return Ok(0);
        }
        self.zadd(now, &key, token, ms + ttl);
        self.settle(now, &key, ms);
        Ok(1)
    }

    /// KEYS: the lock key, its readers, its queue; ARGV: token, leave, reservation ms. Leaves
    /// the readers (and with `leave` the queue); the last live reader deletes the key and, if
    /// a writer marked it, hands it to the head of the queue and announces it.
    fn read_release(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<i64, String> {
        let [token, leave, reserve] = argv else {
            return Err(format!("the read release takes 3 arguments, got {}", argv.len()));
        };
        let leave = match leave.as_slice() {
            b"0" => false,
            b"1" => true,
            _ => return Err("read release: leave must be 0 or 1".into()),
        };
        self.read_keys(keys, true, false, "read release")?;
        let key = (db, keys[0].clone());
        let qkey = (db, keys[2].clone());
        if self.get(db, &key.1).and_then(sole_reader) == Some(token.as_slice()) {
            // A sole reader: compare-and-delete, and the hand-over if a writer marked the key.
            if leave {
                self.leave_queue(&qkey, &[token.as_slice(), b":", reserve].concat());
            }
            let marked = self.marked(&key);
            self.del(now, db, &key.1);
            self.released.push((now, self.stats.commands, self.current, token.to_vec(), key.1.clone()));
            if !marked {
                self.stats.quiet_releases += 1;
                return Ok(1);
            }
            self.hand_on(now, &key, &qkey, token);
            return Ok(1);
        }
        // The only member of a set is live (the set expires with it): the only reader leaves
        // without reading the clock. Otherwise the expired readers are dropped first.
        let n = self.readers.get(&key).map_or(0, |s| s.members.len());
        let alone = n == 1 && self.readers.get(&key).is_some_and(|s| s.members.contains_key(token));
        let local_ms = self.clock.local(now).div_euclid(MS as i64);
        if n == 1 && self.readers.get(&key).is_some_and(|s| s.members.values().any(|m| m.0 <= local_ms)) {
            self.problems.push(format!("the only reader of {:?} expired before its set", show_key(&key.1)));
        }
        let ms = (n > 0 && !alone).then(|| self.read_start(now, &key));
        let d = i64::from(self.zrem(now, &key, token));
        // The clock's reading when other live readers are left.
        let others = ms.filter(|_| self.readers.contains_key(&key));
        if d > 0 {
            self.released.push((now, self.stats.commands, self.current, token.to_vec(), key.1.clone()));
        }
        if leave {
            self.leave_queue(&qkey, &[token.as_slice(), b":", reserve].concat());
        }
        // A key handed to us (reserved) while we read elsewhere is passed on like a release.
        let reserved = self.get(db, &key.1) == Some(token.as_slice());
        if !reserved && self.get(db, &key.1) != Some(READERS) {
            return Ok(d);
        }
        if let Some(ms) = others.filter(|_| !reserved) {
            self.settle(now, &key, ms);
            return Ok(d);
        }
        let marked = self.marked(&key);
        self.del(now, db, &key.1);
        if !marked {
            self.stats.quiet_releases += 1;
            return Ok(d);
        }
        self.hand_on(now, &key, &qkey, token);
        Ok(d)
    }

    /// The read release's `hand_off` of the deleted `key`: its queue's head is taken off, and
    /// unless it is `token`'s own (or no `token:ms` entry) the key is reserved for it; the
    /// release is announced, naming it.
    fn hand_on(&mut self, now: Time, key: &Key, qkey: &Key, token: &[u8]) {
        let db = key.0;
        let mut next = Vec::new();
        if let Some(q) = self.queues.get_mut(qkey) {
            if let Some(head) = q.pop_front() {
                let split = head.iter().rposition(|&b| b == b':');
                let parsed = split.and_then(|at| Some((&head[..at], parse_int(&head[at + 1..])?)));
                if let Some((tok, ms)) = parsed.filter(|(tok, _)| *tok != token) {
                    next = tok.to_vec();
                    self.set(now, db, &key.1, &next, Some(ms));
                    self.mark(key);
                }
            }
            if self.queues.get(qkey).is_some_and(VecDeque::is_empty) {
                self.queues.remove(qkey);
            }
        }
        let channel = [b"redlease:wake:".as_slice(), &key.1].concat();
        self.published.push((channel, [token, b":", &next].concat()));
    }

    /// KEYS: the lock key, its readers; ARGV: token, ttl ms. Turns the token's write lock into
    /// a sole reader's (`:readers:token`; announced if a waiter marked the key); 1, or 0 if the
    /// key is not ours.
    fn downgrade(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<i64, String> {
        let [token, ttl] = argv else { return Err(format!("the downgrade takes 2 arguments, got {}", argv.len())) };
        let ttl = parse_int(ttl).filter(|&t| t > 0).ok_or("downgrade: the TTL must be a positive integer")?;
        self.read_keys(keys, false, false, "downgrade")?;
        let key = (db, keys[0].clone());
        if self.get(db, &key.1) != Some(token.as_slice()) {
            return Ok(0);
        }
        // A key a writer holds has no live reader: the token is the only one.
        let marked = self.marked(&key);
        self.set(now, db, &key.1, &[SOLE_READER, token].concat(), Some(ttl));
        if let Some(e) = self.data.get_mut(&key) {
            e.marked = false;
        }
        if marked {
            let channel = [b"redlease:wake:".as_slice(), &key.1].concat();
            self.published.push((channel, [token.as_slice(), b":"].concat()));
        }
        Ok(1)
    }

    /// KEYS: fence keys; ARGV: the proposed token. Raise each counter to at least the
    /// proposal; return the largest counter found before.
    fn fence(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<i64, String> {
        let [t] = argv else { return Err(format!("fence takes 1 argument, got {}", argv.len())) };
        let t = parse_int(t).ok_or("fence: the proposal must be an integer")?;
        let mut m = 0;
        for k in keys {
            let c = self.get(db, k).and_then(parse_int).unwrap_or(0);
            m = m.max(c);
            if c < t {
                self.set(now, db, k, t.to_string().as_bytes(), None);
            }
        }
        Ok(m)
    }
}

/// The spans in which each reader of `memberships` owned its lock key: while a live member and
/// the key held `:readers` (a span of `history`), recorded under the readers' key
/// (`redlease:readers:K`) with the reader's token.
pub(crate) fn reader_spans(history: &[Segment], memberships: Vec<Segment>) -> Vec<Segment> {
    let shared: Vec<&Segment> = history.iter().filter(|s| s.token == READERS).collect();
    // A sole reader owned the key while it held `:readers:token`.
    let mut out: Vec<Segment> = history
        .iter()
        .filter_map(|s| {
            let token = sole_reader(&s.token)?.to_vec();
            Some(Segment { db: s.db, key: [READERS_PREFIX, &s.key].concat(), token, from: s.from, to: s.to })
        })
        .collect();
    for m in memberships {
        for s in shared.iter().filter(|s| s.db == m.db && s.key == m.key) {
            let (from, to) = (m.from.max(s.from), m.to.min(s.to));
            if from < to {
                let key = [READERS_PREFIX, &m.key].concat();
                out.push(Segment { db: m.db, key, token: m.token.clone(), from, to });
            }
        }
    }
    out
}

/// The scores of a sorted queue's entries.
type Scores = BTreeMap<Vec<u8>, i64>;

/// A waiter queue on its way to another master: its entries, their scores if it is sorted, and
/// its TTL in whole milliseconds.
#[derive(Debug)]
struct MovedQueue(Key, VecDeque<Vec<u8>>, Option<Scores>, i64);

/// Keys of one slot on their way from one cluster master to another (`MIGRATE`): values with
/// their TTL in whole milliseconds, as Redis sends it; waiter queues; readers, whose scores
/// are readings of the source's clock (the masters of a simulated cluster share one clock).
#[derive(Debug, Default)]
pub(crate) struct Moved {
    data: Vec<(Key, Entry, Option<i64>)>,
    queues: Vec<MovedQueue>,
    readers: Vec<(Key, ReaderSet, i64)>,
}

impl Moved {
    /// How many keys.
    pub(crate) fn len(&self) -> usize {
        self.data.len() + self.queues.len() + self.readers.len()
    }
}

/// `HELLO 3` as a cluster master answers it (shortened).
const HELLO_CLUSTER: &[u8] = b"%4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n\
$4\r\nmode\r\n$7\r\ncluster\r\n$4\r\nrole\r\n$6\r\nmaster\r\n";

fn show_key(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

fn command_args(frame: OwnedFrame) -> Option<Vec<Vec<u8>>> {
    let OwnedFrame::Array(items) = frame else { return None };
    if items.is_empty() {
        return None;
    }
    items.into_iter().map(|f| if let OwnedFrame::BulkString(b) = f { Some(b) } else { None }).collect()
}

fn parse_int(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// A queue entry's parts: `token:ms` (one permit) or `token:ms:m` (a semaphore waiter of `m`
/// permits); `None` for anything else.
fn entry_parts(entry: &[u8]) -> Option<(&[u8], i64, i64)> {
    let at = entry.iter().position(|&b| b == b':')?;
    let (tok, rest) = (&entry[..at], &entry[at + 1..]);
    match rest.iter().position(|&b| b == b':') {
        None => Some((tok, parse_int(rest)?, 1)),
        Some(at) => Some((tok, parse_int(&rest[..at])?, parse_int(&rest[at + 1..]).filter(|&m| m > 0)?)),
    }
}
