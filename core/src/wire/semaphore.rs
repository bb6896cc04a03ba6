//! A semaphore's acquire call.

use super::{Call, Request, script_head};
use crate::{resp, scripts};

/// A semaphore's acquire ([`scripts::SEM_ACQUIRE`]): the permit keys, the limit key, the queue,
/// the fence counters with fencing; then the token, TTL, limit, permits wanted, wait mode,
/// queue TTL and reservation.
pub(super) fn permits<'k>(out: &mut Vec<u8>, request: Request<'_, impl ExactSizeIterator<Item = &'k [u8]> + Clone>) {
    let Request { call, keys, token, names, eval } = request;
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
