//! A re-entrant lock's script: one script for its acquire, extension, release and fence round,
//! loaded lazily (a connection's first call carries its source).
//!
//! A re-entrant lock key holds its *owner* (an identity the caller names, not a token), and
//! beside it, under [`HOLDS_PREFIX`] + key (the same hash tag on a Redis Cluster node), a hash
//! of the owner's holds on that node: one field per hold's token, and `:fence` once a fence
//! round recorded the owner's fencing token there. Both always carry a TTL: the lock key's,
//! which a hold's acquire or extension only ever lengthens, so one hold never cuts another's.
//! An acquire writes the holds before the key: a server whose ACL refuses the hash commands
//! fails the script before it took anything.

/// The prefix of the hash of a re-entrant lock key's holds.
pub(crate) const HOLDS_PREFIX: &str = "redlease:holds:";

/// A re-entrant lock's acquire (`a`), extension (`e`), release (`r`) or fence round (`f`).
///
/// `KEYS`: the lock key, its holds, its waiter queue, its fence counter. `ARGV`: the mode, the
/// owner, the hold's token, then
/// - `a`: TTL in ms, wait mode, queue TTL in ms, reservation in ms, fencing (`1`). Refused
///   (`HELD ms`, marking and queuing as [`ACQUIRE`](super::ACQUIRE) does) while another owner
///   holds the key. Else the hold joins: a free key is set to the owner for the TTL (its stale holds
///   dropped), a key the owner holds keeps the longer of its TTL and this one, the holds get
///   the key's TTL. Returns `-fence` when a fence round recorded the owner's token here, else
///   one more than the fence counter with fencing, else 1.
/// - `e`: TTL in ms. 1 if the owner holds the key and the hold is among its holds (the key
///   and holds then get the longer of their TTL and this one), else 0.
/// - `r`: leave (`1`: also leave the queue, with the entry of reservation `ARGV[5]`), then `s`
///   on a Redis Cluster node. Drops the hold from the holds, whoever holds the key now (a
///   release that comes after the key expired leaves nothing behind); 1 if the owner holds the
///   key and the hold was among its holds, else 0. Once no hold is left the key and its holds
///   are deleted, and a marked key is handed to the next waiter as
///   [`RELEASE_ONE`](super::RELEASE_ONE) does, announced as `owner:next`.
/// - `f`: the proposal. [`FENCE`](super::FENCE) on the counter.
/// - `k`: a fencing token a quorum accepted for the hold: recorded as the owner's (`:fence`),
///   if the owner holds the key and the hold is among its holds (so not in the holds of a
///   later grant of the key). 1 if recorded, else 0.
pub(crate) const REENTRY: &str = concat!(
    hand_off!(),
    r"local m, o, h = ARGV[1], ARGV[2], ARGV[3]
local v = redis.call('GET', KEYS[1])
local ours = v == o or v == o .. ':'
if m == 'e' then
  if not ours or redis.call('HEXISTS', KEYS[2], h) == 0 then return 0 end
  local ttl = math.max(tonumber(ARGV[4]), redis.call('PTTL', KEYS[1]))
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  return 1
end
if m == 'f' then
  local c = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
  if c < tonumber(ARGV[4]) then redis.call('SET', KEYS[4], ARGV[4]) end
  return c
end
if m == 'k' then
  if not ours or redis.call('HEXISTS', KEYS[2], h) == 0 then return 0 end
  redis.call('HSET', KEYS[2], ':fence', ARGV[4])
  return 1
end
if m == 'r' then
  if ARGV[4] == '1' then redis.pcall('LREM', KEYS[3], 1, o .. ':' .. ARGV[5]) end
  local d = redis.call('HDEL', KEYS[2], h)
  local left = redis.call('HLEN', KEYS[2]) > redis.call('HEXISTS', KEYS[2], ':fence')
  if not ours then
    if d == 1 and not left then redis.call('DEL', KEYS[2]) end
    return 0
  end
  if left then return d end
  redis.call('DEL', KEYS[1], KEYS[2])
  if v == o then return d end
  hand_off(KEYS[1], KEYS[3], o, true, ARGV[6] == 's')
  return d
end
local q = ARGV[5]
local entry = o .. ':' .. ARGV[7]
local queues = q == '1' or q == '2'
if v and not ours then
  if queues then
    local qttl = ARGV[6]
",
    queue_waiter!(),
    r"  end
  local p = redis.call('PTTL', KEYS[1])
  if p >= 0 then return redis.status_reply(string.format('HELD %d', p)) end
  return redis.status_reply('HELD')
end
local ttl = tonumber(ARGV[4])
if v then
  ttl = math.max(ttl, redis.call('PTTL', KEYS[1]))
else
  redis.call('DEL', KEYS[2])
end
redis.call('HSET', KEYS[2], h, '1')
redis.call('PEXPIRE', KEYS[2], ttl)
if v then
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  redis.call('SET', KEYS[1], o, 'PX', ttl)
end
if queues then redis.pcall('LREM', KEYS[3], 1, entry) end
local s = tonumber(redis.call('HGET', KEYS[2], ':fence') or '0') or 0
if s > 0 then return -s end
if ARGV[8] ~= '1' then return 1 end
return (tonumber(redis.call('GET', KEYS[4]) or '0') or 0) + 1
"
);
/// SHA-1 of [`REENTRY`].
pub(crate) const REENTRY_SHA: &str = "b78d6109c1495cb73c471636e7fdaa9259decc18";
