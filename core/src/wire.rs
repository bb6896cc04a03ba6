//! What goes on the wire and what comes back: the requests a link has in flight, the script
//! calls of a lock encoded from narrow arguments, and replies classified against the request
//! they answer.

use crate::event::LockId;
use crate::resp::{self, Reply};
use crate::scripts;

/// A step of the connection handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Auth,
    /// `HELLO 3`: push messages on this connection (refused: the node is polled).
    Hello,
    Select,
    SetName,
    /// `SCRIPT LOAD` of the script with this digest; `last` marks the end of the handshake.
    ScriptLoad {
        sha: &'static str,
        last: bool,
    },
}

impl Step {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Step::Auth => "AUTH",
            Step::Hello => "HELLO",
            Step::Select => "SELECT",
            Step::SetName => "CLIENT SETNAME",
            Step::ScriptLoad { .. } => "SCRIPT LOAD",
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
}

impl Op {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Acquire => "the acquire script",
            Op::SetNx => "the acquire's SET NX PX",
            Op::Extend => "the extend script",
            Op::Release => "the release script",
            Op::Fence => "the fence write-back script",
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
    /// `SUBSCRIBE` to one wake channel (answered by a `subscribe` push, or an error).
    Subscribe,
    /// `UNSUBSCRIBE` from one wake channel.
    Unsubscribe,
}

impl Pending {
    fn name(self) -> &'static str {
        match self {
            Pending::Step(step) => step.name(),
            Pending::Op { op, .. } => op.name(),
            Pending::Cleanup => "the cleanup release",
            Pending::Subscribe => "SUBSCRIBE",
            Pending::Unsubscribe => "UNSUBSCRIBE",
        }
    }
}

/// The arguments of one script call beyond the keys and the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// Take the keys for `ttl_ms`; with `fencing`, also read the fence counters. A refused
    /// waiter joins the first key's queue as `queue` says, which lives `queue_ttl_ms` from its
    /// last join.
    Acquire { ttl_ms: u64, fencing: bool, queue: Queue, queue_ttl_ms: u64 },
    /// The cheap acquire of one key without fencing: `SET key token NX PX ttl_ms`, no script.
    /// It cannot re-enter a key that already holds our token, so the engine uses it only on a
    /// lock's first attempt (a fresh token has no leftover yet); the cleanup release after a
    /// failed attempt deletes whatever the attempt left, and retries use the script.
    SetNx { ttl_ms: u64 },
    /// Set the keys' TTL to `ttl_ms` if they are ours.
    Extend { ttl_ms: u64 },
    /// Delete the keys that are ours, handing each to the next queued waiter for
    /// `reserve_ms`; with `leave`, also leave their queues.
    Release { leave: bool, reserve_ms: u64 },
    /// Raise the fence counters to `proposal`.
    Fence { proposal: u64 },
}

/// Whether a refused acquire attempt marks the key that refused it as waited for, and
/// whether and where it joins the key's waiter queue ([`scripts::ACQUIRE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    /// Neither: the lock does not wait for wake-ups.
    No,
    /// Mark, and join at the back unless already in it.
    Back,
    /// Mark, and join at the front: it was named next and still refused.
    Front,
    /// Only mark: a lock of several keys waits for wake-ups but joins no queue.
    Mark,
}

/// Encode one call on `keys` with `token`: `SET .. NX PX` for [`Call::SetNx`], else a script
/// by `EVALSHA`, or `EVAL` with the source (after a `NOSCRIPT`, and for cleanups, whose reply
/// is never looked at).
pub(crate) fn encode<'k>(
    out: &mut Vec<u8>,
    call: Call,
    mut keys: impl ExactSizeIterator<Item = &'k [u8]> + Clone,
    token: &[u8],
    fence_prefix: &[u8],
    eval: bool,
) {
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
    };
    let (script_keys, extra) = match call {
        Call::Acquire { fencing: true, .. } => (2 * nkeys, 5),
        Call::Acquire { fencing: false, .. } => (nkeys, 5),
        Call::SetNx { .. } => (nkeys, 3),
        Call::Extend { .. } => (nkeys, 2),
        Call::Release { .. } if one => (nkeys, 2),
        Call::Release { .. } => (nkeys, 3),
        Call::Fence { .. } => (nkeys, 1),
    };
    resp::array(out, 3 + script_keys + extra);
    if eval {
        resp::bulk(out, b"EVAL");
        resp::bulk(out, script.as_bytes());
    } else {
        resp::bulk(out, b"EVALSHA");
        resp::bulk(out, sha.as_bytes());
    }
    resp::bulk_uint(out, script_keys as u64);
    if let Call::Fence { proposal } = call {
        for k in keys {
            resp::bulk2(out, fence_prefix, k);
        }
        resp::bulk_uint(out, proposal);
        return;
    }
    for k in keys.clone() {
        resp::bulk(out, k);
    }
    if let Call::Acquire { fencing: true, .. } = call {
        for k in keys {
            resp::bulk2(out, fence_prefix, k);
        }
    }
    resp::bulk(out, token);
    script_args(out, call, nkeys, one);
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
        Call::Acquire { ttl_ms, queue, queue_ttl_ms, .. } => {
            resp::bulk_uint(out, ttl_ms);
            resp::bulk_uint(out, nkeys as u64);
            resp::bulk(
                out,
                match queue {
                    Queue::No => b"0",
                    Queue::Back => b"1",
                    Queue::Front => b"2",
                    Queue::Mark => b"3",
                },
            );
            resp::bulk_uint(out, queue_ttl_ms);
        }
        Call::Extend { ttl_ms } => resp::bulk_uint(out, ttl_ms),
        Call::Release { reserve_ms, .. } if one => resp::bulk_uint(out, reserve_ms),
        Call::Release { leave, reserve_ms } => {
            resp::bulk(out, if leave { b"1" } else { b"0" });
            resp::bulk_uint(out, reserve_ms);
        }
        Call::Fence { .. } | Call::SetNx { .. } => {}
    }
}

/// What a reply to a handshake step means.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StepAnswer {
    Ok,
    /// The server refused the step (its error text).
    Refused(String),
    /// A `SCRIPT LOAD` digest, and whether it is the one expected.
    Digest {
        matches: bool,
    },
}

/// What a reply to a lock operation means (owned, so the input buffer can be released before
/// the engine acts on it).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OpAnswer {
    Int(i64),
    /// The script cache was flushed: resend with the source.
    NoScript,
    /// A server error (its text).
    Error(String),
}

/// A reply, classified against the request it answers.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Step(Step, StepAnswer),
    Op {
        op: Op,
        lock: LockId,
        round: u32,
        answer: OpAnswer,
    },
    /// A cleanup's reply: nothing to do.
    Ignored,
    /// The server refused to `SUBSCRIBE` (its error text): the node is polled.
    SubscribeRefused(String),
}

/// Interpret `reply` as the answer to `pending`; `Err` with the request's name when it cannot
/// be one (the link cannot be trusted any more).
#[inline]
pub(crate) fn classify(pending: Pending, reply: &Reply<'_>) -> Result<Answer, &'static str> {
    let text = |e: &[u8]| String::from_utf8_lossy(e).into_owned();
    match (pending, reply) {
        // No request is answered by an array (and only its header was read).
        (_, Reply::Array(_)) => Err(pending.name()),
        (Pending::Step(Step::Hello), Reply::Map(_)) => Ok(Answer::Step(Step::Hello, StepAnswer::Ok)),
        (Pending::Subscribe, Reply::Push { kind, .. }) if kind.eq_ignore_ascii_case(b"subscribe") => {
            Ok(Answer::Ignored)
        }
        (Pending::Unsubscribe, Reply::Push { kind, .. }) if kind.eq_ignore_ascii_case(b"unsubscribe") => {
            Ok(Answer::Ignored)
        }
        (Pending::Subscribe | Pending::Unsubscribe, Reply::Error(e)) => Ok(Answer::SubscribeRefused(text(e))),
        (_, Reply::Map(_) | Reply::Push { .. }) => Err(pending.name()),
        (Pending::Cleanup | Pending::Step(Step::SetName), _) => Ok(Answer::Ignored),
        (Pending::Step(step), Reply::Error(e)) => Ok(Answer::Step(step, StepAnswer::Refused(text(e)))),
        (Pending::Step(step @ (Step::Auth | Step::Select)), Reply::Status(_)) => Ok(Answer::Step(step, StepAnswer::Ok)),
        (Pending::Step(step @ Step::ScriptLoad { sha, .. }), Reply::Bulk(b)) => {
            Ok(Answer::Step(step, StepAnswer::Digest { matches: b.eq_ignore_ascii_case(sha.as_bytes()) }))
        }
        (Pending::Op { op, lock, round }, Reply::Error(e)) => {
            // Only a script call can meet a flushed script cache: a `NOSCRIPT` to `SET NX PX`
            // is a plain error vote, never a reason to resend (and grant on the resend).
            let answer = if e.starts_with(b"NOSCRIPT") && op != Op::SetNx {
                OpAnswer::NoScript
            } else {
                OpAnswer::Error(text(e))
            };
            Ok(Answer::Op { op, lock, round, answer })
        }
        // The cheap acquire (`SET .. NX PX`): `+OK` set the key, nil (RESP2 `$-1`, RESP3 `_`)
        // found it taken. Nothing else is an answer to it, an integer included: a server that
        // answers `SET` with `:1` is not one we understand, and must not count as a grant.
        (Pending::Op { op: op @ Op::SetNx, lock, round }, Reply::Status(s)) if *s == b"OK" => {
            Ok(Answer::Op { op, lock, round, answer: OpAnswer::Int(1) })
        }
        (Pending::Op { op: op @ Op::SetNx, lock, round }, Reply::Nil) => {
            Ok(Answer::Op { op, lock, round, answer: OpAnswer::Int(0) })
        }
        (Pending::Op { op: Op::SetNx, .. }, _) => Err(pending.name()),
        (Pending::Op { op, lock, round }, Reply::Int(i)) => {
            Ok(Answer::Op { op, lock, round, answer: OpAnswer::Int(*i) })
        }
        _ => Err(pending.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock() -> LockId {
        LockId { slot: 0, generation: 1 }
    }

    #[test]
    fn classifies_each_request_kind() {
        let op = Pending::Op { op: Op::Acquire, lock: lock(), round: 3 };
        assert_eq!(
            classify(op, &Reply::Int(1)),
            Ok(Answer::Op { op: Op::Acquire, lock: lock(), round: 3, answer: OpAnswer::Int(1) })
        );
        assert!(matches!(
            classify(op, &Reply::Error(b"NOSCRIPT No matching script")),
            Ok(Answer::Op { answer: OpAnswer::NoScript, .. })
        ));
        assert_eq!(classify(op, &Reply::Bulk(b"x")), Err("the acquire script"));
        assert_eq!(classify(Pending::Cleanup, &Reply::Error(b"ERR x")), Ok(Answer::Ignored));
        assert_eq!(classify(Pending::Cleanup, &Reply::Array(2)), Err("the cleanup release"));
        assert_eq!(classify(Pending::Step(Step::SetName), &Reply::Error(b"ERR")), Ok(Answer::Ignored));
        assert_eq!(
            classify(Pending::Step(Step::Auth), &Reply::Error(b"WRONGPASS")),
            Ok(Answer::Step(Step::Auth, StepAnswer::Refused("WRONGPASS".into())))
        );
        assert_eq!(classify(Pending::Step(Step::Select), &Reply::Int(1)), Err("SELECT"));
        let load = Step::ScriptLoad { sha: "ab", last: false };
        assert_eq!(
            classify(Pending::Step(load), &Reply::Bulk(b"AB")),
            Ok(Answer::Step(load, StepAnswer::Digest { matches: true }))
        );
    }

    #[test]
    fn encodes_calls_from_narrow_arguments() {
        let keys: [&[u8]; 2] = [b"a", b"b"];
        let mut out = Vec::new();
        encode(&mut out, Call::Fence { proposal: 7 }, keys.iter().copied(), b"tok", b"f:", false);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("*6\r\n$7\r\nEVALSHA\r\n"), "{text}");
        assert!(text.ends_with("$1\r\n2\r\n$3\r\nf:a\r\n$3\r\nf:b\r\n$1\r\n7\r\n"), "{text}");
        let mut out = Vec::new();
        let acquire = Call::Acquire { ttl_ms: 10, fencing: true, queue: Queue::Front, queue_ttl_ms: 500 };
        encode(&mut out, acquire, keys.iter().copied(), b"t", b"f:", true);
        let text = String::from_utf8(out).unwrap();
        // EVAL, source, 4 keys (2 locks + 2 fence counters), token, ttl, number of lock keys,
        // queue mode, queue TTL.
        assert!(text.starts_with("*12\r\n$4\r\nEVAL\r\n"), "{text}");
        assert!(text.ends_with("$1\r\nt\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n2\r\n$3\r\n500\r\n"), "{text}");
        let mut out = Vec::new();
        encode(&mut out, Call::Release { leave: true, reserve_ms: 20 }, keys[..1].iter().copied(), b"t", b"", false);
        let text = String::from_utf8(out).unwrap();
        let tail = "$1\r\na\r\n$1\r\nt\r\n$1\r\n1\r\n$2\r\n20\r\n";
        assert!(text.starts_with("*7\r\n$7\r\nEVALSHA\r\n") && text.ends_with(tail), "{text}");
        assert!(text.contains(scripts::RELEASE_SHA), "leaving the queue takes the general release: {text}");
        // One key, not leaving: the lean release, token and reservation only.
        for eval in [false, true] {
            let mut out = Vec::new();
            let release = Call::Release { leave: false, reserve_ms: 20 };
            encode(&mut out, release, keys[..1].iter().copied(), b"t", b"", eval);
            let text = String::from_utf8(out).unwrap();
            let script = if eval { scripts::RELEASE_ONE } else { scripts::RELEASE_ONE_SHA };
            let head = format!(
                "*6\r\n${}\r\n{}\r\n${}\r\n{script}\r\n",
                if eval { 4 } else { 7 },
                if eval { "EVAL" } else { "EVALSHA" },
                script.len()
            );
            assert!(
                text.starts_with(&head) && text.ends_with("$1\r\n1\r\n$1\r\na\r\n$1\r\nt\r\n$2\r\n20\r\n"),
                "{text}"
            );
        }
        // Several keys: the general release, whether leaving or not.
        let mut out = Vec::new();
        encode(&mut out, Call::Release { leave: false, reserve_ms: 20 }, keys.iter().copied(), b"t", b"", false);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("*8\r\n") && text.contains(scripts::RELEASE_SHA), "{text}");
        assert!(text.ends_with("$1\r\nt\r\n$1\r\n0\r\n$2\r\n20\r\n"), "{text}");
    }

    #[test]
    fn the_cheap_acquire_answers_ok_or_nil_and_nothing_else_does() {
        let set = Pending::Op { op: Op::SetNx, lock: lock(), round: 1 };
        let int = |i| Ok(Answer::Op { op: Op::SetNx, lock: lock(), round: 1, answer: OpAnswer::Int(i) });
        assert_eq!(classify(set, &Reply::Status(b"OK")), int(1));
        assert_eq!(classify(set, &Reply::Nil), int(0));
        // Any other status, a bulk string, an integer: no answer to SET NX PX, no grant.
        for garbage in [Reply::Status(b"QUEUED"), Reply::Bulk(b"OK"), Reply::Int(1), Reply::Int(0)] {
            assert_eq!(classify(set, &garbage), Err("the acquire's SET NX PX"), "{garbage:?}");
        }
        // A server error (an ACL refusal, OOM, ...) is that node's vote.
        assert!(matches!(classify(set, &Reply::Error(b"NOPERM x")), Ok(Answer::Op { answer: OpAnswer::Error(_), .. })));
        // So is a `NOSCRIPT`: a SET runs no script, and resending it must not turn into a grant.
        assert!(matches!(
            classify(set, &Reply::Error(b"NOSCRIPT No matching script")),
            Ok(Answer::Op { answer: OpAnswer::Error(_), .. })
        ));
        // And the script's answers are integers, never +OK or nil.
        let acquire = Pending::Op { op: Op::Acquire, lock: lock(), round: 1 };
        assert_eq!(classify(acquire, &Reply::Status(b"OK")), Err("the acquire script"));
        assert_eq!(classify(acquire, &Reply::Nil), Err("the acquire script"));
        let release = Pending::Op { op: Op::Release, lock: lock(), round: 1 };
        assert_eq!(classify(release, &Reply::Status(b"OK")), Err("the release script"));
        assert_eq!(classify(release, &Reply::Nil), Err("the release script"));
    }
}
