//! A semaphore's acquire script (its permits are mutex keys, released and extended by the
//! mutex's scripts). The handshake does not load it: a connection's first call carries its
//! source.

#[cfg(doc)]
use super::{ACQUIRE, RELEASE};

/// The prefix of every key of a semaphore (after the config's key prefix): the permits are
/// `redlease:sem:{NAME}:0` .. `:{L-1}`, the recorded limit `redlease:sem:{NAME}:limit`, the
/// waiter queue `redlease:queue:` + `redlease:sem:{NAME}` (with the key prefix before each
/// name). Every key of one semaphore carries the hash tag `{NAME}`.
pub(crate) const SEM_PREFIX: &str = "redlease:sem:";

/// Take `m` of a semaphore's `n` permits, all or nothing on this node: the permits that
/// already hold our token first (a re-entry, or a permit a release handed to us), then free
/// ones, in the order of `KEYS` (the client's own order of the permits). Each permit is a lock
/// key like a mutex's: the holder's token, marked with [`WAITED`] once a waiter was refused by
/// it.
///
/// `KEYS`: the `n` permit keys, the limit key, the waiter queue, then (with fencing) the `n`
/// fence counters. `ARGV`: token, TTL in ms, `n` (the limit), `m`, wait mode, queue TTL in
/// ms, the waiter's reservation in ms (as [`ACQUIRE`]).
///
/// The limit is recorded on first use (without a TTL, like the fence counters); another limit
/// is refused with a `WRONGLIMIT` error. Returns 0 when fewer than `m` permits are ours or free
/// (a queuing waiter then marks the taken permits and joins the one queue of the semaphore, as
/// `token:ms`, or `token:ms:m` for more than one permit: see [`RELEASE`]),
/// else a string: the fencing proposal (one more than the largest counter of the permits taken)
/// and the 1-based positions in `KEYS` of the permits taken, separated by spaces.
pub(crate) const SEM_ACQUIRE: &str = r"local t = ARGV[1]
local n = tonumber(ARGV[3])
local m = tonumber(ARGV[4])
local q = ARGV[5]
local lim = redis.call('GET', KEYS[n + 1])
if not lim then
  redis.call('SET', KEYS[n + 1], ARGV[3])
elseif lim ~= ARGV[3] then
  return redis.error_reply('WRONGLIMIT the semaphore has ' .. lim .. ' permits on this node, the client asks for a limit of ' .. ARGV[3])
end
local vals, mine, free = {}, {}, {}
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  vals[i] = v
  if v == t or v == t .. ':' then
    mine[#mine + 1] = i
  elseif not v then
    free[#free + 1] = i
  end
end
local queues = q == '1' or q == '2'
local entry = t .. ':' .. ARGV[7]
if m > 1 then entry = entry .. ':' .. ARGV[4] end
if #mine + #free < m then
  if queues then
    for i = 1, n do
      local v = vals[i]
      if v and v ~= t and v ~= t .. ':' and string.byte(v, -1) ~= 58 then
        redis.pcall('SET', KEYS[i], v .. ':', 'KEEPTTL')
      end
    end
    local qk = KEYS[n + 2]
    local at = redis.pcall('LPOS', qk, entry)
    if type(at) ~= 'table' then
      if q == '2' and at ~= 0 then
        if at then redis.pcall('LREM', qk, 1, entry) end
        redis.pcall('LPUSH', qk, entry)
      elseif not at then
        redis.pcall('RPUSH', qk, entry)
      end
      local left = redis.pcall('PTTL', qk)
      if type(left) == 'number' and left < tonumber(ARGV[6]) then redis.pcall('PEXPIRE', qk, ARGV[6]) end
    end
  end
  return 0
end
local take = {}
for _, i in ipairs(mine) do
  if #take < m then take[#take + 1] = i end
end
for _, i in ipairs(free) do
  if #take < m then take[#take + 1] = i end
end
local f = 0
for _, i in ipairs(take) do
  redis.call('SET', KEYS[i], vals[i] or t, 'PX', ARGV[2])
  if #KEYS > n + 2 then
    local c = tonumber(redis.call('GET', KEYS[n + 2 + i]) or '0') or 0
    if c > f then f = c end
  end
end
if queues then redis.pcall('LREM', KEYS[n + 2], 1, entry) end
return string.format('%.0f', f + 1) .. ' ' .. table.concat(take, ' ')
";
/// SHA-1 of [`SEM_ACQUIRE`].
pub(crate) const SEM_ACQUIRE_SHA: &str = "90185e906b207b5aed6c133257e11bef880b7fd8";
