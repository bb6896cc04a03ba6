//! A reader-writer lock's calls: a read lock's acquire, extension and release, and a write
//! lock's downgrade.

use super::{Call, Request, script_head};
use crate::{resp, scripts};

/// `SET key :readers:token NX PX ttl_ms`: a fresh reader's first attempt, taking a free key
/// for itself alone ([`scripts::SOLE_READER`]).
pub(super) fn read_set_nx(out: &mut Vec<u8>, key: &[u8], token: &[u8], ttl_ms: u64) {
    resp::array(out, 6);
    resp::bulk(out, b"SET");
    resp::bulk(out, key);
    resp::bulk2(out, scripts::SOLE_READER.as_bytes(), token);
    resp::bulk(out, b"NX");
    resp::bulk(out, b"PX");
    resp::bulk_uint(out, ttl_ms);
}

/// A read lock's call on `key` ([`scripts::READ_ACQUIRE`] and its kin): the key, its readers,
/// then the queue (an acquire or a release) and the fence counter (an acquire with fencing);
/// the token, the TTL, and an acquire's wait mode, queue TTL and reservation.
pub(super) fn read<'k>(out: &mut Vec<u8>, request: Request<'_, impl Iterator<Item = &'k [u8]>>) {
    let Request { call, mut keys, token, names, eval } = request;
    let key = keys.next().unwrap_or_default();
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
