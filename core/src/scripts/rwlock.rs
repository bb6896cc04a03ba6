//! A reader-writer lock's scripts: a read lock's acquire, extension and release, and a write
//! lock's downgrade. The handshake does not load them: a connection's first call of each
//! carries its source.

#[cfg(doc)]
use super::{ACQUIRE, RELEASE, WAITED};

/// The value a lock key holds while readers share it: not a token (tokens never contain `:`),
/// so every mutex and write lock of the name is refused meanwhile. Followed by [`WAITED`] once
/// a writer was refused by it: no new reader joins until the readers there have left.
pub(crate) const READERS: &str = ":readers";
/// The prefix of a resource's readers, a sorted set of reader tokens scored by the expiry of
/// each on the node's own clock.
pub(crate) const READERS_PREFIX: &str = "redlease:readers:";

/// The start of every script over a resource's readers: `t` (the token), `ms` (the node's
/// clock in ms, `TIME`), the expired readers dropped from `KEYS[2]`, and `settle()`, which
/// sets the lock key's and the readers' TTL to the last live reader's expiry (`false` when
/// none is left).
macro_rules! readers_prelude {
    () => {
        r"local t = ARGV[1]
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
local function settle()
  local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if not top[1] then return false end
  local left = math.max(tonumber(top[2]) - ms, 1)
  redis.call('PEXPIRE', KEYS[1], left)
  redis.call('PEXPIRE', KEYS[2], left)
  return true
end
"
    };
}

/// Take a read lock: join the readers of the lock key. A reader is a token in the readers'
/// sorted set scored by its expiry on the node's clock (`TIME`), so a crashed reader holds
/// writers off until its own TTL only; the lock key holds [`READERS`] and the readers' set
/// each expire with the last live reader.
///
/// Refused (0) while a writer holds the key (a mutex or write lock of the name), or while a
/// writer waits ([`READERS`] marked) unless the token already reads (a re-entry). A refused
/// waiter (wait mode `1` or `2`, as for [`ACQUIRE`]) marks the key and joins its waiter queue
/// (a mark whose queue is gone, a crashed writer's, is dropped)
/// — the writers' queue: readers and writers are handed the key in the order they queued, so
/// neither starves. A key handed to the token (`token:`) turns into [`READERS`], and if others
/// still queue, a release message wakes them: readers join, a writer marks the key again (and
/// is handed it by the last reader). Returns one
/// more than the fence counter: the writer epoch read under.
///
/// `KEYS`: the lock key, its readers, its waiter queue, (with fencing) its fence counter.
/// `ARGV`: token, TTL in ms, wait mode, queue TTL in ms, the waiter's reservation in ms.
pub(crate) const READ_ACQUIRE: &str = concat!(
    readers_prelude!(),
    r"local v = redis.call('GET', KEYS[1])
if v == ':readers:' and type(redis.pcall('LINDEX', KEYS[3], 0)) ~= 'string' then
  -- The writer that marked it is gone (its queue expired): no one waits.
  redis.call('SET', KEYS[1], ':readers', 'KEEPTTL')
  v = ':readers'
end
local mine = redis.call('ZSCORE', KEYS[2], t)
local handed = v == t .. ':'
local q = ARGV[3]
local entry = t .. ':' .. ARGV[5]
if not (not v or v == ':readers' or handed or (v == ':readers:' and mine)) then
  if q == '1' or q == '2' then
    if string.byte(v, -1) ~= 58 then redis.pcall('SET', KEYS[1], v .. ':', 'KEEPTTL') end
    local at = redis.pcall('LPOS', KEYS[3], entry)
    if type(at) ~= 'table' then
      if q == '2' and at ~= 0 then
        if at then redis.pcall('LREM', KEYS[3], 1, entry) end
        redis.pcall('LPUSH', KEYS[3], entry)
      elseif not at then
        redis.pcall('RPUSH', KEYS[3], entry)
      end
      local left = redis.pcall('PTTL', KEYS[3])
      if type(left) == 'number' and left < tonumber(ARGV[4]) then redis.pcall('PEXPIRE', KEYS[3], ARGV[4]) end
    end
  end
  return 0
end
redis.call('ZADD', KEYS[2], ms + tonumber(ARGV[2]), t)
if q == '1' or q == '2' then redis.pcall('LREM', KEYS[3], 1, entry) end
if not v or handed then redis.call('SET', KEYS[1], ':readers') end
if handed and type(redis.pcall('LINDEX', KEYS[3], 0)) == 'string' then
  -- The others queued wake up: readers join us, a writer marks the key again.
  redis.pcall(ARGV[6] == 's' and 'SPUBLISH' or 'PUBLISH', 'redlease:wake:' .. KEYS[1], t .. ':')
end
settle()
local f = 0
if #KEYS > 3 then f = tonumber(redis.call('GET', KEYS[4]) or '0') or 0 end
return f + 1
"
);
/// SHA-1 of [`READ_ACQUIRE`].
pub(crate) const READ_ACQUIRE_SHA: &str = "f4fbe9d2bca46123dd40c0103ab2179024165cd6";

/// Extend a read lock to `ARGV[2]` ms from the node's now, if the token still reads. Returns
/// 1 or 0. `KEYS`: the lock key, its readers. `ARGV`: token, TTL in ms.
pub(crate) const READ_EXTEND: &str = concat!(
    readers_prelude!(),
    r"local v = redis.call('GET', KEYS[1])
if not redis.call('ZSCORE', KEYS[2], t) or (v ~= ':readers' and v ~= ':readers:') then return 0 end
redis.call('ZADD', KEYS[2], ms + tonumber(ARGV[2]), t)
settle()
return 1
"
);
/// SHA-1 of [`READ_EXTEND`].
pub(crate) const READ_EXTEND_SHA: &str = "460778b057f5a4c2cd352be828680ef277d4b614";

/// Leave the readers; the last live reader deletes the lock key, and if a writer marked it,
/// hands it to the head of its waiter queue and announces the release as [`RELEASE`] does. A
/// key handed to the token (`token:`, reserved for it while it was granted on other nodes) is
/// passed on the same way.
/// Returns 1 if the token was a reader, else 0.
///
/// `KEYS`: the lock key, its readers, its waiter queue. `ARGV`: token, leave (`1`: also leave
/// the queue, with the entry our reservation `ARGV[3]` made).
pub(crate) const READ_RELEASE: &str = concat!(
    readers_prelude!(),
    r"local d = redis.call('ZREM', KEYS[2], t)
if ARGV[2] == '1' then redis.pcall('LREM', KEYS[3], 1, t .. ':' .. ARGV[3]) end
local v = redis.call('GET', KEYS[1])
local handed = v == t .. ':'
if not handed and v ~= ':readers' and v ~= ':readers:' then return d end
if not handed and settle() then return d end
redis.call('DEL', KEYS[1])
if v == ':readers:' or handed then
  local nxt = ''
  local head = redis.pcall('LINDEX', KEYS[3], 0)
  if type(head) == 'string' then
    local tok, hold = string.match(head, '^([^:]*):(%d+)$')
    if not tok or tok == t then
      redis.pcall('LPOP', KEYS[3])
    else
      redis.pcall('LPOP', KEYS[3])
      redis.call('SET', KEYS[1], tok .. ':', 'PX', hold)
      nxt = tok
    end
  end
  redis.pcall(ARGV[4] == 's' and 'SPUBLISH' or 'PUBLISH', 'redlease:wake:' .. KEYS[1], t .. ':' .. nxt)
end
return d
"
);
/// SHA-1 of [`READ_RELEASE`].
pub(crate) const READ_RELEASE_SHA: &str = "d6adeed43af50275827f67796d872d409d988219";

/// Turn a write lock into a read lock, atomically on this node: the token joins the readers
/// for `ARGV[2]` ms and the key becomes [`READERS`]; waiters that marked the key are told.
/// Returns 1, or 0 if the key is not the token's.
///
/// `KEYS`: the lock key, its readers. `ARGV`: token, TTL in ms.
pub(crate) const DOWNGRADE: &str = concat!(
    readers_prelude!(),
    r"local v = redis.call('GET', KEYS[1])
if v ~= t and v ~= t .. ':' then return 0 end
redis.call('ZADD', KEYS[2], ms + tonumber(ARGV[2]), t)
redis.call('SET', KEYS[1], ':readers')
settle()
if v == t .. ':' then redis.pcall(ARGV[3] == 's' and 'SPUBLISH' or 'PUBLISH', 'redlease:wake:' .. KEYS[1], t .. ':') end
return 1
"
);
/// SHA-1 of [`DOWNGRADE`].
pub(crate) const DOWNGRADE_SHA: &str = "5bc8d5a7d134a7362aaeb6c8f43a5f15672e4452";
