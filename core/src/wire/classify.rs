//! Replies classified against the request they answer: what a handshake step's reply means,
//! and what a lock operation's reply is worth as a vote.

use std::time::Duration;

use super::{Op, Pending, Step};
use crate::error::is_cluster_error;
use crate::event::LockId;
use crate::resp::Reply;
use crate::scripts;

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
    /// The node is a Redis Cluster node: what gave it away (`HELLO`'s mode, or a `MOVED`,
    /// `CROSSSLOT`... error).
    Cluster(String),
}

/// What a reply to a lock operation means (owned, so the input buffer can be released before
/// the engine acts on it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OpAnswer {
    Int(i64),
    /// An acquire refused: the key is held by another token (a semaphore's permits: too few
    /// are free), which has this long left on the node (`None`: a refusing key has no TTL).
    Held(Option<Duration>),
    /// The script cache was flushed: resend with the source.
    NoScript,
    /// A server error (its text).
    Error(String),
    /// A semaphore's grant: the node's fencing proposal, and the 1-based positions of the
    /// permits it took in the order of the call's keys.
    Permits {
        proposal: u64,
        positions: Vec<u16>,
    },
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
    /// `WAIT`'s reply: the replicas that have the writes so far, or the node's error.
    Replicas {
        lock: LockId,
        round: u32,
        acked: Result<i64, String>,
    },
    /// The server refused to `SUBSCRIBE` (its error text): the node is polled.
    SubscribeRefused(String),
    /// An election read's reply: the script's `counter value` string, or the node's error.
    Read {
        read: u32,
        reply: Result<Vec<u8>, String>,
    },
}

/// Interpret `reply` as the answer to `pending`; `Err` with the request's name when it cannot
/// be one (the link cannot be trusted any more).
#[inline]
pub(crate) fn classify(pending: Pending, reply: &Reply<'_>) -> Result<Answer, &'static str> {
    let answer = match pending {
        // No request is answered by an array (and only its header was read).
        _ if matches!(reply, Reply::Array(_)) => None,
        Pending::Op { op, lock, round } => op_answer(op, reply).map(|answer| Answer::Op { op, lock, round, answer }),
        Pending::Replicas { lock, round } => match reply {
            Reply::Int(i) => Some(Answer::Replicas { lock, round, acked: Ok(*i) }),
            Reply::Error(e) => Some(Answer::Replicas { lock, round, acked: Err(text(e)) }),
            _ => None,
        },
        Pending::Step(step) => step_answer(step, reply),
        Pending::Subscribe { .. } | Pending::Unsubscribe { .. } => subscription_answer(pending, reply),
        // Answers nobody waits for, whatever they say (but a map or a push answers nothing).
        Pending::Cleanup
        | Pending::AttemptCleanup { .. }
        | Pending::Resend { .. }
        | Pending::Asking
        | Pending::Ping => (!matches!(reply, Reply::Map { .. } | Reply::Push { .. })).then_some(Answer::Ignored),
        // A map read refused (its reply, when it is one, is read before classifying).
        Pending::Slots => matches!(reply, Reply::Error(_)).then_some(Answer::Ignored),
        // (`ROLE`'s answer is read from its frame before classifying.)
        Pending::Role => None,
        Pending::Read { read } => match reply {
            Reply::Bulk(b) => Some(Answer::Read { read, reply: Ok(b.to_vec()) }),
            Reply::Error(e) => Some(Answer::Read { read, reply: Err(text(e)) }),
            _ => None,
        },
    };
    answer.ok_or(pending.name())
}

/// A lock operation's answer (`None`: not one `op` can have).
#[inline]
fn op_answer(op: Op, reply: &Reply<'_>) -> Option<OpAnswer> {
    match (op, reply) {
        // Only a script call can meet a flushed script cache: a `NOSCRIPT` to `SET NX PX` is a
        // plain error vote, never a reason to resend (and grant on the resend).
        (_, Reply::Error(e)) if e.starts_with(b"NOSCRIPT") && op != Op::SetNx => Some(OpAnswer::NoScript),
        (_, Reply::Error(e)) => Some(OpAnswer::Error(text(e))),
        // The cheap acquire (`SET .. NX PX`): `+OK` set the key, nil (RESP2 `$-1`, RESP3 `_`)
        // found it taken. Nothing else is an answer to it, an integer included: a server that
        // answers `SET` with `:1` is not one we understand, and must not count as a grant.
        (Op::SetNx, Reply::Status(s)) if *s == b"OK" => Some(OpAnswer::Int(1)),
        (Op::SetNx, Reply::Nil) => Some(OpAnswer::Int(0)),
        (Op::SetNx, _) => None,
        (Op::Acquire | Op::Permits, Reply::Status(s)) if s.starts_with(b"HELD") => held(&s[4..]).map(OpAnswer::Held),
        (Op::Permits, Reply::Bulk(b)) => {
            grant(b).map(|(proposal, positions)| OpAnswer::Permits { proposal, positions })
        }
        (_, Reply::Int(i)) => Some(OpAnswer::Int(*i)),
        _ => None,
    }
}

/// The rest of an acquire's `HELD` status: empty, or a space and the milliseconds the refusing
/// key has left (`None` when it is neither).
fn held(rest: &[u8]) -> Option<Option<Duration>> {
    match rest {
        [] => Some(None),
        [b' ', ms @ ..] => {
            let ms: u64 = std::str::from_utf8(ms).ok()?.parse().ok()?;
            Some(Some(Duration::from_millis(ms)))
        }
        _ => None,
    }
}

/// A handshake step's answer (`None`: not one `step` can have).
fn step_answer(step: Step, reply: &Reply<'_>) -> Option<Answer> {
    let answer = match (step, reply) {
        (Step::Hello, Reply::Map { mode, .. }) if mode.eq_ignore_ascii_case(b"cluster") => {
            StepAnswer::Cluster("HELLO says mode cluster".to_owned())
        }
        (Step::Hello, Reply::Map { .. }) => StepAnswer::Ok,
        (_, Reply::Map { .. } | Reply::Push { .. }) => return None,
        (Step::SetName, _) => return Some(Answer::Ignored),
        // A node refusing INFO too is taken for what it answers as: standalone until a
        // redirect says otherwise.
        (Step::ClusterInfo, Reply::Bulk(b)) if b.windows(17).any(|w| w == b"cluster_enabled:1") => {
            StepAnswer::Cluster("INFO says cluster_enabled:1".to_owned())
        }
        (Step::ClusterInfo, Reply::Bulk(_) | Reply::Error(_)) => StepAnswer::Ok,
        (_, Reply::Error(e)) if is_cluster_error(&text(e)) => StepAnswer::Cluster(text(e)),
        (_, Reply::Error(e)) => StepAnswer::Refused(text(e)),
        (Step::Auth | Step::Select, Reply::Status(_)) => StepAnswer::Ok,
        (Step::Format, Reply::Bulk(b)) if *b == scripts::FORMAT.as_bytes() => StepAnswer::Ok,
        (Step::Format, Reply::Bulk(b)) => StepAnswer::Refused(format!(
            "the node's locks are in format {} ({}), this client's in format {}: run clients of one format \
             against a node",
            String::from_utf8_lossy(b),
            scripts::FORMAT_KEY,
            scripts::FORMAT
        )),
        (Step::ScriptLoad { sha, .. }, Reply::Bulk(b)) => {
            StepAnswer::Digest { matches: b.eq_ignore_ascii_case(sha.as_bytes()) }
        }
        _ => return None,
    };
    Some(Answer::Step(step, answer))
}

/// A subscription's answer, or an unsubscription's (`None`: not one `pending` can have).
fn subscription_answer(pending: Pending, reply: &Reply<'_>) -> Option<Answer> {
    match (pending, reply) {
        (Pending::Subscribe { shard }, Reply::Push { kind, .. })
            if kind.eq_ignore_ascii_case(if shard.is_some() { b"ssubscribe" } else { b"subscribe" }) =>
        {
            Some(Answer::Ignored)
        }
        (Pending::Unsubscribe { sharded: false }, Reply::Push { kind, .. })
            if kind.eq_ignore_ascii_case(b"unsubscribe") =>
        {
            Some(Answer::Ignored)
        }
        (Pending::Subscribe { .. }, Reply::Error(e)) => Some(Answer::SubscribeRefused(text(e))),
        // A master that lost the slot answers `MOVED`: the subscription is gone either way.
        (Pending::Unsubscribe { .. }, Reply::Error(_)) => Some(Answer::Ignored),
        _ => None,
    }
}

/// An error's text.
fn text(e: &[u8]) -> String {
    String::from_utf8_lossy(e).into_owned()
}

/// A semaphore grant, `"proposal p1 p2 ..."`: the proposal and at least one position.
fn grant(b: &[u8]) -> Option<(u64, Vec<u16>)> {
    let text = std::str::from_utf8(b).ok()?;
    let mut parts = text.split(' ');
    let proposal = parts.next()?.parse().ok()?;
    let positions = parts.map(|p| p.parse().ok()).collect::<Option<Vec<u16>>>()?;
    (!positions.is_empty()).then_some((proposal, positions))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock() -> LockId {
        LockId { index: 0, generation: 1 }
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
    fn a_semaphore_grant_is_a_proposal_and_positions() {
        let op = Pending::Op { op: Op::Permits, lock: lock(), round: 1 };
        let granted = |proposal, positions: &[u16]| {
            Ok(Answer::Op {
                op: Op::Permits,
                lock: lock(),
                round: 1,
                answer: OpAnswer::Permits { proposal, positions: positions.to_vec() },
            })
        };
        assert_eq!(classify(op, &Reply::Bulk(b"1 3")), granted(1, &[3]));
        assert_eq!(classify(op, &Reply::Bulk(b"9007199254740991 2 1")), granted((1 << 53) - 1, &[2, 1]));
        assert_eq!(
            classify(op, &Reply::Int(0)),
            Ok(Answer::Op { op: Op::Permits, lock: lock(), round: 1, answer: OpAnswer::Int(0) })
        );
        for garbage in [&b"1"[..], b"", b"1 x", b"-1 2", b"1  2", b"1 70000", b"1e+15 1"] {
            assert_eq!(classify(op, &Reply::Bulk(garbage)), Err("the semaphore acquire script"), "{garbage:?}");
        }
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

    #[test]
    fn a_refused_acquire_says_how_long_the_holder_has_left() {
        let acquire = Pending::Op { op: Op::Acquire, lock: lock(), round: 1 };
        let held = |left| Ok(Answer::Op { op: Op::Acquire, lock: lock(), round: 1, answer: OpAnswer::Held(left) });
        assert_eq!(classify(acquire, &Reply::Status(b"HELD 1500")), held(Some(Duration::from_millis(1500))));
        assert_eq!(classify(acquire, &Reply::Status(b"HELD 0")), held(Some(Duration::ZERO)));
        assert_eq!(classify(acquire, &Reply::Status(b"HELD")), held(None));
        for garbage in [&b"HELD -1"[..], b"HELD ", b"HELD1", b"HELD 1 2", b"HELD x", b"HELD 99999999999999999999"] {
            assert_eq!(classify(acquire, &Reply::Status(garbage)), Err("the acquire script"), "{garbage:?}");
        }
        let permits = Pending::Op { op: Op::Permits, lock: lock(), round: 1 };
        assert!(matches!(
            classify(permits, &Reply::Status(b"HELD 7")),
            Ok(Answer::Op { answer: OpAnswer::Held(_), .. })
        ));
        // Only an acquire is refused so.
        let release = Pending::Op { op: Op::Release, lock: lock(), round: 1 };
        assert_eq!(classify(release, &Reply::Status(b"HELD 5")), Err("the release script"));
    }
}
