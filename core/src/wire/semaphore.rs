//! A semaphore's acquire and release calls.

use super::{Call, Request, SHARD_ARG, script_head};
use crate::{resp, scripts};

/// A semaphore's acquire ([`scripts::SEM_ACQUIRE`]): the permit keys, the limit key, the queue,
/// the fence counters with fencing; then the token, TTL, limit, permits wanted, wait mode,
/// queue TTL, reservation, ticket and preferred position, and on a Redis Cluster node the
/// sharded-channel argument (a grant hands on the permits handed to it that it does not take).
pub(super) fn permits<'k>(out: &mut Vec<u8>, request: Request<'_, impl ExactSizeIterator<Item = &'k [u8]> + Clone>) {
    let Request { call, keys, token, names, eval } = request;
    let Call::Permits { ttl_ms, fencing, queue, queue_ttl_ms, reserve_ms, want, ticket, prefer } = call else {
        return;
    };
    let (limit_key, queue_key) = names.sem.unwrap_or_default();
    let n = keys.len();
    let script_keys = n + 2 + if fencing { n } else { 0 };
    resp::array(out, 3 + script_keys + 9 + usize::from(names.shard));
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
    resp::bulk_uint(out, ticket);
    resp::bulk_uint(out, u64::from(prefer));
    if names.shard {
        resp::bulk(out, SHARD_ARG);
    }
}

/// A release of a semaphore's permits ([`scripts::SEM_RELEASE`]): the permit keys and the
/// queue; then the token, the mode (1: it leaves the queue, plus 2: a cleanup, plus 4: it joins
/// the queue again), its entry's reservation (and the permits it wants, when more than one), the
/// ticket and queue TTL it joins with, and on a Redis Cluster node the sharded-channel argument.
pub(super) fn release<'k>(out: &mut Vec<u8>, request: Request<'_, impl ExactSizeIterator<Item = &'k [u8]> + Clone>) {
    let Request { call, keys, token, names, eval } = request;
    let Call::Release { leave, reserve_ms, want, cleanup, rejoin } = call else { return };
    let (_, queue_key) = names.sem.unwrap_or_default();
    let n = keys.len();
    resp::array(out, 3 + n + 1 + 5 + usize::from(names.shard));
    script_head(out, (scripts::SEM_RELEASE, scripts::SEM_RELEASE_SHA), eval, n + 1);
    for k in keys {
        resp::bulk(out, k);
    }
    resp::bulk(out, queue_key);
    resp::bulk(out, token);
    resp::bulk_uint(out, u64::from(leave) + 2 * u64::from(cleanup) + 4 * u64::from(rejoin.is_some()));
    if want > 1 {
        // The queue entry of a waiter of several permits: `token:ms:want`.
        resp::bulk(out, format!("{reserve_ms}:{want}").as_bytes());
    } else {
        resp::bulk_uint(out, reserve_ms);
    }
    let (ticket, queue_ttl_ms) = rejoin.unwrap_or_default();
    resp::bulk_uint(out, ticket);
    resp::bulk_uint(out, queue_ttl_ms);
    if names.shard {
        resp::bulk(out, SHARD_ARG);
    }
}
