//! What goes on the wire and what comes back: the requests a link has in flight, the script
//! calls of a lock encoded from narrow arguments, and replies classified against the request
//! they answer.

use crate::event::LockId;
use crate::resp;
use crate::scripts;

/// A step of the connection handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Auth,
    /// `HELLO 3`: push messages on this connection (refused: the node is polled).
    Hello,
    Select,
    SetName,
    /// The node's lock format ([`scripts::FORMAT_CHECK`]): another one than ours is refused.
    Format,
    /// `SCRIPT LOAD` of the script with this digest; `last` marks the end of the handshake.
    ScriptLoad {
        sha: &'static str,
        last: bool,
    },
    /// `CLUSTER SHARDS` (or `SLOTS`) on a node that turned out to be a Redis Cluster: it is ready once its
    /// slot map is read.
    Slots,
    /// `INFO cluster`, when `HELLO` was refused and so did not say whether the node is a
    /// Redis Cluster: requests wait for its answer.
    ClusterInfo,
    /// `ROLE`, on a node with [`min_replicas`](crate::NodeConfig::min_replicas): a primary
    /// with fewer replicas online than its grants wait for fails the handshake; on a
    /// Sentinel-managed node, a replica does.
    Role,
    /// `SENTINEL get-master-addr-by-name SERVICE`, on a Sentinel-managed node's link while it
    /// asks a sentinel.
    SentinelMaster,
    /// `SUBSCRIBE +switch-master`, on a Sentinel-managed node's watch link.
    SentinelWatch,
}

impl Step {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Step::Auth => "AUTH",
            Step::Hello => "HELLO",
            Step::Select => "SELECT",
            Step::SetName => "CLIENT SETNAME",
            Step::Format => "the lock format check",
            Step::ScriptLoad { .. } => "SCRIPT LOAD",
            Step::Slots => "CLUSTER SHARDS (or SLOTS)",
            Step::ClusterInfo => "INFO cluster",
            Step::Role => "ROLE",
            Step::SentinelMaster => "SENTINEL get-master-addr-by-name",
            Step::SentinelWatch => "SUBSCRIBE +switch-master",
        }
    }
}

/// An operation of a lock whose reply is counted as a vote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Acquire,
    /// The acquire's cheap command, `SET key token NX PX ttl` (see [`Call::SetNx`]).
    SetNx,
    Extend,
    Release,
    Fence,
    /// A semaphore's acquire ([`Call::Permits`]): its grant names the permits taken.
    Permits,
}

/// `WAIT replicas timeout_ms`, or with `fsync` `WAITAOF 0 replicas timeout_ms`, encoded.
pub(crate) fn wait_command(m: crate::node::MinReplicas) -> Box<[u8]> {
    let mut out = Vec::new();
    let ms = u64::try_from(m.timeout.as_millis()).unwrap_or(u64::MAX).max(1);
    if m.fsync {
        resp::array(&mut out, 4);
        resp::bulk(&mut out, b"WAITAOF");
        // No fsync of the node's own AOF is asked: the replicas' is what a failover keeps.
        resp::bulk(&mut out, b"0");
    } else {
        resp::array(&mut out, 3);
        resp::bulk(&mut out, b"WAIT");
    }
    resp::bulk_uint(&mut out, u64::from(m.replicas));
    resp::bulk_uint(&mut out, ms);
    out.into_boxed_slice()
}

impl Op {
    /// Whether a grant of this op is a write a failover could lose, so that a node with
    /// [`min_replicas`](crate::NodeConfig::min_replicas) counts it only once its replicas
    /// have it. (A release that a failover undoes leaves a key that expires.)
    pub(crate) fn writes_grant(self) -> bool {
        !matches!(self, Op::Release)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Acquire => "the acquire script",
            Op::SetNx => "the acquire's SET NX PX",
            Op::Extend => "the extend script",
            Op::Release => "the release script",
            Op::Fence => "the fence write-back script",
            Op::Permits => "the semaphore acquire script",
        }
    }
}

/// A request on the wire whose reply has not come back yet. Replies are matched by position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pending {
    /// A handshake step.
    Step(Step),
    /// A round of a lock: the reply is a vote if the lock is still in that round.
    Op { op: Op, lock: LockId, round: u32 },
    /// A release after a failed attempt or a cancel: the reply is not waited for.
    Cleanup,
    /// The cleanup of `lock`'s failed attempt (a [`Cleanup`](Self::Cleanup) that must not
    /// overtake the lock's next attempt: see [`Resend`](Self::Resend)).
    AttemptCleanup { lock: LockId },
    /// A cleanup to a Redis Cluster node, kept (under `copy`) to be sent again on a redirect;
    /// an attempt's cleanup is dropped instead once that acquisition made another attempt (the
    /// same token: sent again on another master, it could delete what that attempt took).
    Resend { copy: u32 },
    /// `CLUSTER SHARDS` (or `SLOTS`) on a cluster node, to refresh its slot map.
    Slots,
    /// `ASKING` ahead of a request redirected by `ASK`: the reply is not waited for.
    Asking,
    /// `SUBSCRIBE` to one wake channel (answered by a `subscribe` push, or an error), or
    /// `SSUBSCRIBE` to one in slot `shard` on a cluster node's master.
    Subscribe { shard: Option<u16> },
    /// `UNSUBSCRIBE` from one wake channel, or `SUNSUBSCRIBE` (`sharded`) on a cluster node's
    /// master. A master that loses a slot also unsubscribes its clients from the slot's
    /// channels unasked, with the same push; so every `sunsubscribe` push is read as a
    /// subscription gone, and a [`Ping`](Self::Ping) follows the `SUNSUBSCRIBE`s: its answer
    /// ends theirs (each is that push, read before, or an error).
    Unsubscribe { sharded: bool },
    /// `PING` after `SUNSUBSCRIBE`s: its answer closes theirs.
    Ping,
    /// `WAIT` after a grant of a round (on a node with
    /// [`min_replicas`](crate::NodeConfig::min_replicas)): how many replicas have it.
    Replicas { lock: LockId, round: u32 },
    /// `ROLE` on a ready link of a node with [`min_replicas`](crate::NodeConfig::min_replicas),
    /// every [`REPLICAS_CHECK`](crate::REPLICAS_CHECK): its replicas are counted again.
    Role,
    /// An observer's read of an election (its lock key and fence counter), for the read `read`.
    Read { read: u32 },
}

impl Pending {
    /// The request's name, for errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Pending::Step(step) => step.name(),
            Pending::Op { op, .. } => op.name(),
            Pending::Cleanup | Pending::AttemptCleanup { .. } | Pending::Resend { .. } => "the cleanup release",
            Pending::Slots => "CLUSTER SHARDS (or SLOTS)",
            Pending::Asking => "ASKING",
            Pending::Subscribe { shard: None } => "SUBSCRIBE",
            Pending::Subscribe { shard: Some(_) } => "SSUBSCRIBE",
            Pending::Unsubscribe { sharded: false } => "UNSUBSCRIBE",
            Pending::Unsubscribe { sharded: true } => "SUNSUBSCRIBE",
            Pending::Ping => "PING",
            Pending::Replicas { .. } => "WAIT (or WAITAOF)",
            Pending::Role => "ROLE",
            Pending::Read { .. } => "the election read script",
        }
    }
}

/// The arguments of one script call beyond the keys and the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// Take the keys for `ttl_ms`; with `fencing`, also read the fence counters. A refused
    /// waiter joins the keys' queues as `queue` says (each queue lives `queue_ttl_ms` from its
    /// last join), asking that a key handed to it stay reserved for `reserve_ms`.
    Acquire { ttl_ms: u64, fencing: bool, queue: Queue, queue_ttl_ms: u64, reserve_ms: u64 },
    /// The cheap acquire of one key without fencing: `SET key token NX PX ttl_ms`, no script.
    /// It cannot re-enter a key that already holds our token, so the engine uses it only on a
    /// lock's first attempt (a fresh token has no leftover yet); the cleanup release after a
    /// failed attempt deletes whatever the attempt left, and retries use the script.
    SetNx { ttl_ms: u64 },
    /// Set the keys' TTL to `ttl_ms` if they are ours.
    Extend { ttl_ms: u64 },
    /// Delete the keys that are ours, handing each to the next queued waiter; with `leave`,
    /// also leave their queues (our entries name our reservation, `reserve_ms`, and a
    /// semaphore waiter's the permits it wants, `want`, when more than one). A `cleanup` of
    /// an acquisition's attempt frees a semaphore's permits the attempt took, handing on only
    /// those that were handed to it (a mutex key an attempt took is unmarked: freed anyway); a
    /// semaphore waiter that waits on `rejoin`s its queue at `(ticket, queue TTL in ms)`.
    Release { leave: bool, reserve_ms: u64, want: u16, cleanup: bool, rejoin: Option<(u64, u64)> },
    /// Raise the fence counters to `proposal`.
    Fence { proposal: u64 },
    /// Take `want` of a semaphore's permits (the keys, in the client's order; their number is
    /// the limit), all or nothing, with [`Acquire`](Call::Acquire)'s other arguments; a
    /// refused waiter queues at `ticket` (µs of wall-clock time, the same on every node); the
    /// permit at the 1-based position `prefer` is tried first (0: none).
    Permits {
        ttl_ms: u64,
        fencing: bool,
        queue: Queue,
        queue_ttl_ms: u64,
        reserve_ms: u64,
        want: u32,
        ticket: u64,
        prefer: u16,
    },
    /// The cheap read acquire of a free key, for the token alone: `SET key :readers:token NX
    /// PX ttl_ms` ([`scripts::SOLE_READER`]), no script. Like [`SetNx`](Call::SetNx), only a
    /// fresh token's first attempt of an unfenced read lock uses it; refused (the key exists,
    /// maybe shared by readers the token could join), the script follows at once.
    ReadSetNx { ttl_ms: u64 },
    /// Join the readers of the (one) key for `ttl_ms`; a waiting reader marks the key and
    /// queues as [`Acquire`](Call::Acquire) does.
    Read { ttl_ms: u64, fencing: bool, queue: Queue, queue_ttl_ms: u64, reserve_ms: u64 },
    /// Extend a read lock to `ttl_ms`.
    ReadExtend { ttl_ms: u64 },
    /// Leave the readers (the last one hands the key on, as a release does); with `leave`,
    /// also leave the queue (the entry of reservation `reserve_ms`).
    ReadRelease { leave: bool, reserve_ms: u64 },
    /// Turn the write lock into a read lock for `ttl_ms`.
    Downgrade { ttl_ms: u64 },
    /// A re-entrant lock's call ([`scripts::REENTRY`]): its owner is in [`Names::owner`], the
    /// hold's token is the request's.
    Reentry(reentry::Step),
}

impl Call {
    /// The bit of a script the handshake does not load (0 for those it loads): sent with its
    /// source on a connection's first use ([`Links::needs_source`](crate::link::Links)). A
    /// release of a semaphore's permits (`sem`) is its own script.
    pub(crate) fn lazy(self, sem: bool) -> u8 {
        match self {
            Call::Release { .. } if sem => 32,
            Call::Permits { .. } => 1,
            Call::Read { .. } => 2,
            Call::ReadExtend { .. } => 4,
            Call::ReadRelease { .. } => 8,
            Call::Downgrade { .. } => 16,
            Call::Reentry(_) => 64,
            _ => 0,
        }
    }
}

/// The names a call derives from its keys besides the keys themselves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Names<'a> {
    /// The prefix of the fence counters.
    pub(crate) fence_prefix: &'a [u8],
    /// A semaphore's limit key and its one waiter queue (a mutex key's queue is
    /// [`scripts::QUEUE_PREFIX`] + the key).
    pub(crate) sem: Option<(&'a [u8], &'a [u8])>,
    /// The call goes to a Redis Cluster node: a script that announces a release does so on
    /// the sharded channel (`SPUBLISH`, a last argument `s`).
    pub(crate) shard: bool,
    /// A re-entrant lock's owner (empty: not re-entrant).
    pub(crate) owner: &'a [u8],
}

/// The argument that makes a script announce on the sharded channel.
pub(crate) const SHARD_ARG: &[u8] = b"s";

/// Whether a refused acquire attempt marks the keys that refused it as waited for and joins
/// the keys' waiter queues, and where ([`scripts::ACQUIRE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    /// Neither: the lock does not wait.
    No,
    /// Mark, and join at the back unless already in it.
    Back,
    /// Mark, and join at the front: it was named next and still refused.
    Front,
}

impl Queue {
    /// The wait mode argument of the acquire scripts.
    fn arg(self) -> &'static [u8] {
        match self {
            Queue::No => b"0",
            Queue::Back => b"1",
            Queue::Front => b"2",
        }
    }
}

/// One call to encode: what it does, the keys it names, the holder's token, the names derived
/// from the keys, and whether a script goes by its source (`EVAL`, after a `NOSCRIPT` and for
/// cleanups, whose reply is never looked at) rather than its digest (`EVALSHA`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request<'a, K> {
    pub(crate) call: Call,
    pub(crate) keys: K,
    pub(crate) token: &'a [u8],
    pub(crate) names: Names<'a>,
    pub(crate) eval: bool,
}

impl<'k, K: ExactSizeIterator<Item = &'k [u8]> + Clone> Request<'_, K> {
    /// Append the request's bytes: `SET .. NX PX` for [`Call::SetNx`] and
    /// [`Call::ReadSetNx`], else its script call.
    pub(crate) fn encode(self, out: &mut Vec<u8>) {
        match self.call {
            Call::Permits { .. } => semaphore::permits(out, self),
            Call::Release { .. } if self.names.sem.is_some() => semaphore::release(out, self),
            Call::ReadSetNx { ttl_ms } => {
                let key = self.keys.clone().next().unwrap_or_default();
                rwlock::read_set_nx(out, key, self.token, ttl_ms);
            }
            Call::Read { .. } | Call::ReadExtend { .. } | Call::ReadRelease { .. } | Call::Downgrade { .. } => {
                rwlock::read(out, self);
            }
            Call::Reentry(step) => reentry::encode(out, self, step),
            _ => mutex(out, self),
        }
    }
}

/// A mutex's call (and a semaphore's extension of its permits' keys, which are lock keys).
fn mutex<'k>(out: &mut Vec<u8>, request: Request<'_, impl ExactSizeIterator<Item = &'k [u8]> + Clone>) {
    let Request { call, mut keys, token, names, eval } = request;
    let nkeys = keys.len();
    if let Call::SetNx { ttl_ms } = call {
        set_nx(out, keys.next().unwrap_or_default(), token, ttl_ms);
        return;
    }
    // One key, not leaving its queue: the release whose common path is a plain
    // compare-and-delete.
    let one = matches!(call, Call::Release { leave: false, .. }) && nkeys == 1;
    let (script, sha) = match call {
        Call::Acquire { .. } | Call::SetNx { .. } => (scripts::ACQUIRE, scripts::ACQUIRE_SHA),
        Call::Extend { .. } => (scripts::EXTEND, scripts::EXTEND_SHA),
        Call::Release { .. } if one => (scripts::RELEASE_ONE, scripts::RELEASE_ONE_SHA),
        Call::Release { .. } => (scripts::RELEASE, scripts::RELEASE_SHA),
        Call::Fence { .. } => (scripts::FENCE, scripts::FENCE_SHA),
        Call::Permits { .. } => (scripts::SEM_ACQUIRE, scripts::SEM_ACQUIRE_SHA),
        Call::Read { .. }
        | Call::ReadSetNx { .. }
        | Call::ReadExtend { .. }
        | Call::ReadRelease { .. }
        | Call::Downgrade { .. }
        | Call::Reentry(_) => return,
    };
    // Every key a script touches is in KEYS: the lock keys, their queues where the call uses
    // them, the fence counters.
    let queues = match call {
        Call::Acquire { queue, .. } => queue != Queue::No,
        Call::Release { .. } => true,
        _ => false,
    };
    let fences = matches!(call, Call::Acquire { fencing: true, .. } | Call::Fence { .. });
    let locks = !matches!(call, Call::Fence { .. });
    let script_keys = nkeys * (usize::from(locks) + usize::from(queues) + usize::from(fences));
    let extra = match call {
        Call::Acquire { .. } => 6,
        Call::SetNx { .. } => 3,
        Call::Extend { .. } => 2,
        Call::Release { .. } if one => 1,
        Call::Release { .. } => 3,
        _ => 1,
    } + usize::from(names.shard && matches!(call, Call::Release { .. }));
    resp::array(out, 3 + script_keys + extra);
    script_head(out, (script, sha), eval, script_keys);
    if locks {
        for k in keys.clone() {
            resp::bulk(out, k);
        }
    }
    if queues {
        for k in keys.clone() {
            match names.sem {
                Some((_, queue)) => resp::bulk(out, queue),
                None => resp::bulk2(out, scripts::QUEUE_PREFIX.as_bytes(), k),
            }
        }
    }
    if fences {
        for k in keys {
            resp::bulk2(out, names.fence_prefix, k);
        }
    }
    if let Call::Fence { proposal } = call {
        resp::bulk_uint(out, proposal);
        return;
    }
    resp::bulk(out, token);
    script_args(out, call, nkeys, one);
    if names.shard && matches!(call, Call::Release { .. }) {
        resp::bulk(out, SHARD_ARG);
    }
}

/// The head of a script call, after the array header: `EVAL source` (`eval`) or `EVALSHA
/// digest`, then the number of keys.
fn script_head(out: &mut Vec<u8>, (script, sha): (&str, &str), eval: bool, nkeys: usize) {
    if eval {
        resp::bulk(out, b"EVAL");
        resp::bulk(out, script.as_bytes());
    } else {
        resp::bulk(out, b"EVALSHA");
        resp::bulk(out, sha.as_bytes());
    }
    resp::bulk_uint(out, nkeys as u64);
}

/// `SET key token NX PX ttl_ms`: the cheap acquire of one key.
#[inline]
fn set_nx(out: &mut Vec<u8>, key: &[u8], token: &[u8], ttl_ms: u64) {
    resp::array(out, 6);
    resp::bulk(out, b"SET");
    resp::bulk(out, key);
    resp::bulk(out, token);
    resp::bulk(out, b"NX");
    resp::bulk(out, b"PX");
    resp::bulk_uint(out, ttl_ms);
}

/// The arguments of a script call after the token (`one`: the release of one key that leaves
/// no queue, over `nkeys` lock keys).
#[inline]
fn script_args(out: &mut Vec<u8>, call: Call, nkeys: usize, one: bool) {
    match call {
        Call::Acquire { ttl_ms, queue, queue_ttl_ms, reserve_ms, .. } => {
            resp::bulk_uint(out, ttl_ms);
            resp::bulk_uint(out, nkeys as u64);
            resp::bulk(out, queue.arg());
            resp::bulk_uint(out, queue_ttl_ms);
            resp::bulk_uint(out, reserve_ms);
        }
        Call::Extend { ttl_ms } => resp::bulk_uint(out, ttl_ms),
        Call::Release { .. } if one => {}
        Call::Release { leave, reserve_ms, want, .. } => {
            resp::bulk(out, if leave { b"1" } else { b"0" });
            if want > 1 {
                // The queue entry of a waiter of several permits: `token:ms:want`.
                resp::bulk(out, format!("{reserve_ms}:{want}").as_bytes());
            } else {
                resp::bulk_uint(out, reserve_ms);
            }
        }
        _ => {}
    }
}

mod classify;
pub(crate) mod reentry;
mod rwlock;
mod semaphore;

pub(crate) use classify::{Answer, OpAnswer, StepAnswer, classify};

#[cfg(test)]
mod tests {
    use super::*;

    fn names(fence_prefix: &[u8]) -> Names<'_> {
        Names { fence_prefix, sem: None, shard: false, owner: b"" }
    }

    #[test]
    fn encodes_calls_from_narrow_arguments() {
        let keys: [&[u8]; 2] = [b"a", b"b"];
        let mut out = Vec::new();
        Request {
            call: Call::Fence { proposal: 7 },
            keys: keys.iter().copied(),
            token: b"tok",
            names: names(b"f:"),
            eval: false,
        }
        .encode(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("*6\r\n$7\r\nEVALSHA\r\n"), "{text}");
        assert!(text.ends_with("$1\r\n2\r\n$3\r\nf:a\r\n$3\r\nf:b\r\n$1\r\n7\r\n"), "{text}");
        let mut out = Vec::new();
        let acquire =
            Call::Acquire { ttl_ms: 10, fencing: true, queue: Queue::Front, queue_ttl_ms: 500, reserve_ms: 20 };
        Request { call: acquire, keys: keys.iter().copied(), token: b"t", names: names(b"f:"), eval: true }
            .encode(&mut out);
        let text = String::from_utf8(out).unwrap();
        // EVAL, source, 6 keys (2 locks, their 2 queues, 2 fence counters), token, ttl, number
        // of lock keys, queue mode, queue TTL, reservation.
        assert!(text.starts_with("*15\r\n$4\r\nEVAL\r\n"), "{text}");
        let keys_part = "$1\r\n6\r\n$1\r\na\r\n$1\r\nb\r\n$16\r\nredlease:queue:a\r\n$16\r\nredlease:queue:b\r\n$3\r\nf:a\r\n$3\r\nf:b\r\n";
        assert!(text.contains(keys_part), "{text}");
        assert!(text.ends_with("$1\r\nt\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n2\r\n$3\r\n500\r\n$2\r\n20\r\n"), "{text}");
        // Not waiting: no queue keys.
        let mut out = Vec::new();
        let acquire = Call::Acquire { ttl_ms: 10, fencing: false, queue: Queue::No, queue_ttl_ms: 0, reserve_ms: 0 };
        Request { call: acquire, keys: keys.iter().copied(), token: b"t", names: names(b"f:"), eval: false }
            .encode(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("*11\r\n") && text.contains("$1\r\n2\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nt\r\n"), "{text}");
        let mut out = Vec::new();
        Request {
            call: Call::Release { leave: true, reserve_ms: 20, want: 1, cleanup: false, rejoin: None },
            keys: keys[..1].iter().copied(),
            token: b"t",
            names: names(b""),
            eval: false,
        }
        .encode(&mut out);
        let text = String::from_utf8(out).unwrap();
        let tail = "$1\r\n2\r\n$1\r\na\r\n$16\r\nredlease:queue:a\r\n$1\r\nt\r\n$1\r\n1\r\n$2\r\n20\r\n";
        assert!(text.starts_with("*8\r\n$7\r\nEVALSHA\r\n") && text.ends_with(tail), "{text}");
        assert!(text.contains(scripts::RELEASE_SHA), "leaving the queue takes the general release: {text}");
        // One key, not leaving: the lean release, its queue as a key, the token only.
        for eval in [false, true] {
            let mut out = Vec::new();
            let release = Call::Release { leave: false, reserve_ms: 20, want: 1, cleanup: false, rejoin: None };
            Request { call: release, keys: keys[..1].iter().copied(), token: b"t", names: names(b""), eval }
                .encode(&mut out);
            let text = String::from_utf8(out).unwrap();
            let script = if eval { scripts::RELEASE_ONE } else { scripts::RELEASE_ONE_SHA };
            let head = format!(
                "*6\r\n${}\r\n{}\r\n${}\r\n{script}\r\n",
                if eval { 4 } else { 7 },
                if eval { "EVAL" } else { "EVALSHA" },
                script.len()
            );
            assert!(
                text.starts_with(&head)
                    && text.ends_with("$1\r\n2\r\n$1\r\na\r\n$16\r\nredlease:queue:a\r\n$1\r\nt\r\n"),
                "{text}"
            );
        }
        // Several keys: the general release, whether leaving or not.
        let mut out = Vec::new();
        Request {
            call: Call::Release { leave: false, reserve_ms: 20, want: 1, cleanup: false, rejoin: None },
            keys: keys.iter().copied(),
            token: b"t",
            names: names(b""),
            eval: false,
        }
        .encode(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("*10\r\n") && text.contains(scripts::RELEASE_SHA), "{text}");
        assert!(text.ends_with("$1\r\nt\r\n$1\r\n0\r\n$2\r\n20\r\n"), "{text}");
    }
}
