//! The calls of the lock shapes beyond the mutex: a semaphore's acquire, and a read lock's
//! acquire, extension, release and a write lock's downgrade.

use super::{Call, Names, script_head};
use crate::{resp, scripts};

/// Encode `call` if it is one of these shapes' (`true`), like [`super::encode`].
pub(super) fn encode<'k>(
    out: &mut Vec<u8>,
    call: Call,
    mut keys: impl ExactSizeIterator<Item = &'k [u8]> + Clone,
    token: &[u8],
    names: Names<'_>,
    eval: bool,
) -> bool {
    match call {
        Call::Permits { .. } => permits(out, call, keys, token, names, eval),
        Call::Read { .. } | Call::ReadExtend { .. } | Call::ReadRelease { .. } | Call::Downgrade { .. } => {
            read(out, call, keys.next().unwrap_or_default(), token, names, eval);
        }
        _ => return false,
    }
    true
}

/// A semaphore's acquire ([`scripts::SEM_ACQUIRE`]): the slot keys, the limit key, the queue,
/// the fence counters with fencing; then the token, TTL, limit, permits wanted, wait mode,
/// queue TTL and reservation.
fn permits<'k>(
    out: &mut Vec<u8>,
    call: Call,
    keys: impl ExactSizeIterator<Item = &'k [u8]> + Clone,
    token: &[u8],
    names: Names<'_>,
    eval: bool,
) {
    let Call::Permits { ttl_ms, fencing, queue, queue_ttl_ms, reserve_ms, want } = call else { return };
    let (limit_key, queue_key) = names.sem.unwrap_or_default();
    let n = keys.len();
    let script_keys = n + 2 + if fencing { n } else { 0 };
    resp::array(out, 3 + script_keys + 7);
    script_head(out, (scripts::SEM_ACQUIRE, scripts::SEM_ACQUIRE_SHA), eval, script_keys);
    for k in keys.clone() {
        resp::bulk(out, k);
    }
    resp::bulk(out, limit_key);
    resp::bulk(out, queue_key);
    if fencing {
        for k in keys {
            resp::bulk2(out, names.fence_prefix, k);
        }
    }
    resp::bulk(out, token);
    resp::bulk_uint(out, ttl_ms);
    resp::bulk_uint(out, n as u64);
    resp::bulk_uint(out, u64::from(want));
    resp::bulk(out, queue.arg());
    resp::bulk_uint(out, queue_ttl_ms);
    resp::bulk_uint(out, reserve_ms);
}

/// A read lock's call on `key` ([`scripts::READ_ACQUIRE`] and its kin): the key, its readers,
/// then the queue (an acquire or a release) and the fence counter (an acquire with fencing);
/// the token, the TTL, and an acquire's wait mode, queue TTL and reservation.
fn read(out: &mut Vec<u8>, call: Call, key: &[u8], token: &[u8], names: Names<'_>, eval: bool) {
    let (script, sha, queue, fence, ttl_ms) = match call {
        Call::Read { ttl_ms, fencing, .. } => {
            (scripts::READ_ACQUIRE, scripts::READ_ACQUIRE_SHA, true, fencing, Some(ttl_ms))
        }
        Call::ReadExtend { ttl_ms } => (scripts::READ_EXTEND, scripts::READ_EXTEND_SHA, false, false, Some(ttl_ms)),
        Call::ReadRelease { .. } => (scripts::READ_RELEASE, scripts::READ_RELEASE_SHA, true, false, None),
        Call::Downgrade { ttl_ms } => (scripts::DOWNGRADE, scripts::DOWNGRADE_SHA, false, false, Some(ttl_ms)),
        _ => return,
    };
    let nkeys = 2 + usize::from(queue) + usize::from(fence);
    // Every one but the extension may announce a release: on a cluster node, sharded.
    let shard = names.shard && !matches!(call, Call::ReadExtend { .. });
    let more = match call {
        Call::Read { .. } => 3,
        Call::ReadRelease { .. } => 2,
        _ => 0,
    } + usize::from(shard);
    resp::array(out, 3 + nkeys + 1 + usize::from(ttl_ms.is_some()) + more);
    script_head(out, (script, sha), eval, nkeys);
    resp::bulk(out, key);
    resp::bulk2(out, scripts::READERS_PREFIX.as_bytes(), key);
    if queue {
        resp::bulk2(out, scripts::QUEUE_PREFIX.as_bytes(), key);
    }
    if fence {
        resp::bulk2(out, names.fence_prefix, key);
    }
    resp::bulk(out, token);
    if let Some(ttl_ms) = ttl_ms {
        resp::bulk_uint(out, ttl_ms);
    }
    if let Call::Read { queue, queue_ttl_ms, reserve_ms, .. } = call {
        resp::bulk(out, queue.arg());
        resp::bulk_uint(out, queue_ttl_ms);
        resp::bulk_uint(out, reserve_ms);
    }
    if let Call::ReadRelease { leave, reserve_ms } = call {
        resp::bulk(out, if leave { b"1" } else { b"0" });
        resp::bulk_uint(out, reserve_ms);
    }
    if shard {
        resp::bulk(out, super::SHARD_ARG);
    }
}
