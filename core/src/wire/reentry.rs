//! A re-entrant lock's calls: one script ([`scripts::REENTRY`]) whose first argument says
//! which step it takes.

use super::{Queue, Request, SHARD_ARG, script_head};
use crate::{resp, scripts};

/// What a re-entrant lock's call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Join the owner's holds for `ttl_ms`; a refused waiter queues as an acquire does.
    Acquire { ttl_ms: u64, fencing: bool, queue: Queue, queue_ttl_ms: u64, reserve_ms: u64 },
    /// Extend the hold (and so the owner's key) to at least `ttl_ms`.
    Extend { ttl_ms: u64 },
    /// Leave the holds (the last one releases the key); with `leave`, also the queue.
    Release { leave: bool, reserve_ms: u64 },
    /// The fence round: raise the counter to `proposal`.
    Fence { proposal: u64 },
    /// Record `token`, which a quorum accepted for the hold, as the owner's.
    Record { token: u64 },
}

/// Encode the call `step` of `request` (one key): the lock key, its holds, its queue and its
/// fence counter; the mode, the owner, the hold's token and the step's arguments.
pub(super) fn encode<'k>(out: &mut Vec<u8>, request: Request<'_, impl Iterator<Item = &'k [u8]>>, step: Step) {
    let Request { mut keys, token, names, eval, .. } = request;
    let key = keys.next().unwrap_or_default();
    let shard = names.shard && matches!(step, Step::Release { .. });
    let args = match step {
        Step::Acquire { .. } => 5,
        Step::Extend { .. } | Step::Fence { .. } | Step::Record { .. } => 1,
        Step::Release { .. } => 2,
    } + usize::from(shard);
    resp::array(out, 3 + 4 + 3 + args);
    script_head(out, (scripts::REENTRY, scripts::REENTRY_SHA), eval, 4);
    resp::bulk(out, key);
    resp::bulk2(out, scripts::HOLDS_PREFIX.as_bytes(), key);
    resp::bulk2(out, scripts::QUEUE_PREFIX.as_bytes(), key);
    resp::bulk2(out, names.fence_prefix, key);
    let mode: &[u8] = match step {
        Step::Acquire { .. } => b"a",
        Step::Extend { .. } => b"e",
        Step::Release { .. } => b"r",
        Step::Fence { .. } => b"f",
        Step::Record { .. } => b"k",
    };
    resp::bulk(out, mode);
    resp::bulk(out, names.owner);
    resp::bulk(out, token);
    match step {
        Step::Acquire { ttl_ms, fencing, queue, queue_ttl_ms, reserve_ms } => {
            resp::bulk_uint(out, ttl_ms);
            resp::bulk(out, queue.arg());
            resp::bulk_uint(out, queue_ttl_ms);
            resp::bulk_uint(out, reserve_ms);
            resp::bulk(out, if fencing { b"1" } else { b"0" });
        }
        Step::Extend { ttl_ms } => resp::bulk_uint(out, ttl_ms),
        Step::Release { leave, reserve_ms } => {
            resp::bulk(out, if leave { b"1" } else { b"0" });
            resp::bulk_uint(out, reserve_ms);
        }
        Step::Fence { proposal } => resp::bulk_uint(out, proposal),
        Step::Record { token } => resp::bulk_uint(out, token),
    }
    if shard {
        resp::bulk(out, SHARD_ARG);
    }
}
