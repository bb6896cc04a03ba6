//! A reader-writer lock's scripts: a read lock's acquire, extension and release, and a write
//! lock's downgrade. The handshake does not load them: a connection's first call of each
//! carries its source.

#[cfg(doc)]
use super::{ACQUIRE, RELEASE, WAITED};

/// The value a lock key holds while readers share it: not a token (tokens never contain `:`),
/// so every mutex and write lock of the name is refused meanwhile. Followed by [`WAITED`] once
/// a writer was refused by it: no new reader joins until the readers there have left.
///
/// A *sole* reader holds the key as [`READERS`] + `:` + its token ([`SOLE_READER`]), for the
/// key's TTL, with no readers' set: a reader takes a free key with a plain `SET NX`, and leaves
/// it with a compare-and-delete. Nothing else takes that form for a token: every writer's script
/// is refused by it, and marks it with [`WAITED`] as any other holder's value. A second reader
/// turns it into [`READERS`] and the set, the sole reader scored by the key's expiry.
pub(crate) const READERS: &str = ":readers";
/// The prefix of a sole reader's value: the lock key holds it followed by the reader's token
/// (see [`READERS`]).
pub(crate) const SOLE_READER: &str = ":readers:";
/// The prefix of a resource's readers, a sorted set of reader tokens scored by the expiry of
/// each on the node's own clock.
pub(crate) const READERS_PREFIX: &str = "redlease:readers:";

/// Lua statements that set `ms` to the node's clock in whole ms (`TIME`). A script reads the
/// clock only when it needs it: to score a reader, or to tell live readers from expired ones
/// among several.
///
/// A reader is live while its score is ahead of the clock. The lock key and the readers' set
/// expire together with the last live reader, so a set that still exists has a live reader at
/// its top, and a set of one member holds a live reader. Expired readers are dropped
/// (`ZREMRANGEBYSCORE`) whenever a script looks at the readers' scores: when a reader joins
/// others, extends, or leaves others.
macro_rules! clock {
    () => {
        r"local now = redis.call('TIME')
local ms = now[1] * 1000 + (now[2] - now[2] % 1000) / 1000
"
    };
}

/// Take a read lock: join the readers of the lock key. A reader is a token in the readers'
/// sorted set scored by its expiry on the node's clock, so a crashed reader holds
/// writers off until its own TTL only; the lock key holds [`READERS`] and the readers' set
/// each expire with the last live reader. A sole reader holds the key as [`SOLE_READER`] +
/// its token instead, with no set.
///
/// Refused (`HELD ms`, what the key has left, as [`ACQUIRE`]) while a writer holds the key (a
/// mutex or write lock of the name), or while a writer waits (the readers' value marked) unless
/// the token already reads (a re-entry). A refused waiter (wait mode `1` or `2`, as for
/// [`ACQUIRE`]) marks the key and joins its waiter queue (a mark whose queue is gone, a crashed
/// writer's, is dropped) — the writers' queue: readers and writers are handed the key in the
/// order they queued, so neither starves. A key handed to the token (`token:`) turns into
/// [`READERS`], and if others still queue, a release message wakes them: readers join, a writer
/// marks the key again (and is handed it by the last reader). Returns one more than the fence
/// counter: the writer epoch read under.
///
/// The first command, `SET K :readers:token NX PX ttl`, takes a free key for the token alone
/// (what the engine's first attempt sends without a script). A second reader turns a sole
/// reader's key into [`READERS`] and the set: the sole reader scored by the key's expiry
/// (`TIME` + `PTTL`), itself by its TTL, both keys expiring with the later. A reader joining
/// others also drops the expired ones, and extends the key and the set to its TTL if that is
/// the later expiry.
///
/// `KEYS`: the lock key, its readers, its waiter queue, (with fencing) its fence counter.
/// `ARGV`: token, TTL in ms, wait mode, queue TTL in ms, the waiter's reservation in ms.
pub(crate) const READ_ACQUIRE: &str = concat!(
    r"local t = ARGV[1]
local ttl = ARGV[2]
local q = ARGV[3]
local function epoch()
  if #KEYS > 3 then return (tonumber(redis.call('GET', KEYS[4]) or '0') or 0) + 1 end
  return 1
end
local function joined()
  if q == '1' or q == '2' then redis.pcall('LREM', KEYS[3], 1, t .. ':' .. ARGV[5]) end
  return epoch()
end
local sole = ':readers:' .. t
if redis.call('SET', KEYS[1], sole, 'NX', 'PX', ttl) then return joined() end
local function refuse(v)
  if q == '1' or q == '2' then
    local entry, qttl = t .. ':' .. ARGV[5], ARGV[4]
",
    queue_waiter!(),
    r"  end
  local p = redis.call('PTTL', KEYS[1])
  if p >= 0 then return redis.status_reply(string.format('HELD %d', p)) end
  return redis.status_reply('HELD')
end
local v = redis.call('GET', KEYS[1])
if string.sub(v, 1, 8) == ':readers' and string.byte(v, -1) == 58 and type(redis.pcall('LINDEX', KEYS[3], 0)) ~= 'string' then
  -- The writer that marked it is gone (its queue expired): no one waits.
  v = string.sub(v, 1, -2)
  redis.call('SET', KEYS[1], v, 'KEEPTTL')
end
if v == sole or v == sole .. ':' then
  -- The token reads alone already (an earlier attempt's): it keeps the later expiry.
  if redis.call('PTTL', KEYS[1]) < tonumber(ttl) then redis.call('PEXPIRE', KEYS[1], ttl) end
  return joined()
end
local other = string.match(v, '^:readers:([^:]+)$')
local handed = v == t .. ':'
if v ~= ':readers' and v ~= ':readers:' and not handed and not other then return refuse(v) end
",
    clock!(),
    r"if other then
  -- A second reader: the sole one joins the set, scored by the key's expiry.
  local p = redis.call('PTTL', KEYS[1])
  local left = math.max(p, tonumber(ttl))
  redis.call('DEL', KEYS[2])
  redis.call('ZADD', KEYS[2], ms + p, other, ms + ttl, t)
  redis.call('SET', KEYS[1], ':readers', 'PX', left)
  redis.call('PEXPIRE', KEYS[2], left)
  return joined()
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
if v == ':readers:' and not redis.call('ZSCORE', KEYS[2], t) then return refuse(v) end
redis.call('ZADD', KEYS[2], ms + ttl, t)
if q == '1' or q == '2' then redis.pcall('LREM', KEYS[3], 1, t .. ':' .. ARGV[5]) end
if handed then
  local left = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2] - ms
  redis.call('SET', KEYS[1], ':readers', 'PX', left)
  redis.call('PEXPIRE', KEYS[2], left)
  if type(redis.pcall('LINDEX', KEYS[3], 0)) == 'string' then
    -- The others queued wake up: readers join us, a writer marks the key again.
    redis.pcall(ARGV[6] == 's' and 'SPUBLISH' or 'PUBLISH', 'redlease:wake:' .. KEYS[1], t .. ':')
  end
elseif redis.call('PTTL', KEYS[1]) < tonumber(ttl) then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return epoch()
"
);
/// SHA-1 of [`READ_ACQUIRE`].
pub(crate) const READ_ACQUIRE_SHA: &str = "e94ac32d75e121b8aa4ea5feffc4ec349adb5957";

/// Extend a read lock to `ARGV[2]` ms from the node's now, if the token still reads. Returns
/// 1 or 0. A sole reader ([`SOLE_READER`]) extends the key alone, without reading the clock.
/// `KEYS`: the lock key, its readers. `ARGV`: token, TTL in ms.
pub(crate) const READ_EXTEND: &str = concat!(
    r"local t = ARGV[1]
local v = redis.call('GET', KEYS[1])
if v == ':readers:' .. t or v == ':readers:' .. t .. ':' then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if v ~= ':readers' and v ~= ':readers:' then return 0 end
",
    clock!(),
    r"redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
if not redis.call('ZSCORE', KEYS[2], t) then return 0 end
redis.call('ZADD', KEYS[2], ms + ARGV[2], t)
local left = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2] - ms
redis.call('PEXPIRE', KEYS[1], left)
redis.call('PEXPIRE', KEYS[2], left)
return 1
"
);
/// SHA-1 of [`READ_EXTEND`].
pub(crate) const READ_EXTEND_SHA: &str = "5e92ed04a9bd9ddd2f07023b8efb97f724c54819";

/// Leave the readers; the last live reader deletes the lock key, and if a writer marked it,
/// hands it to the head of its waiter queue and announces the release as [`RELEASE`] does. A
/// key handed to the token (`token:`, reserved for it while it was granted on other nodes) is
/// passed on the same way.
/// Returns 1 if the token was a (live) reader, else 0.
///
/// A sole reader ([`SOLE_READER`]) costs what a mutex's release costs: its first two lines
/// are a compare-and-delete. The only member of a set is live (the set expires with it): the
/// only reader leaves without a look at the clock, and deletes the key and the set with one
/// `DEL`. Among several, the expired ones are dropped first, and the key and the set then
/// expire with the last live reader left.
///
/// `KEYS`: the lock key, its readers, its waiter queue. `ARGV`: token, leave (`1`: also leave
/// the queue, with the entry our reservation `ARGV[3]` made).
pub(crate) const READ_RELEASE: &str = concat!(
    r"local t = ARGV[1]
local v = redis.call('GET', KEYS[1])
if v == ':readers:' .. t and ARGV[2] ~= '1' then return redis.call('DEL', KEYS[1]) end
if ARGV[2] == '1' then redis.pcall('LREM', KEYS[3], 1, t .. ':' .. ARGV[3]) end
",
    hand_off!(),
    r"if v == ':readers:' .. t or v == ':readers:' .. t .. ':' then
  redis.call('DEL', KEYS[1])
  if v ~= ':readers:' .. t then hand_off(KEYS[1], KEYS[3], t, false, ARGV[4] == 's') end
  return 1
end
local d, ms, top = 0, nil, nil
local first = redis.call('ZRANGE', KEYS[2], 0, 1)
if first[1] == t and not first[2] then
  d = 1
elseif first[1] then
  local now = redis.call('TIME')
  ms = now[1] * 1000 + (now[2] - now[2] % 1000) / 1000
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
  d = redis.call('ZREM', KEYS[2], t)
  top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
end
local handed = v == t .. ':'
if not handed and v ~= ':readers' and v ~= ':readers:' then
  if d == 1 and not ms then redis.call('DEL', KEYS[2]) end
  return d
end
if top then
  if not handed then
    redis.call('PEXPIRE', KEYS[1], top - ms)
    redis.call('PEXPIRE', KEYS[2], top - ms)
    return d
  end
  redis.call('DEL', KEYS[1])
else
  redis.call('DEL', KEYS[1], KEYS[2])
end
if v == ':readers:' or handed then
  hand_off(KEYS[1], KEYS[3], t, false, ARGV[4] == 's')
end
return d
"
);
/// SHA-1 of [`READ_RELEASE`].
pub(crate) const READ_RELEASE_SHA: &str = "66b8c134b26178f432b9627f009c0a759b0f79d4";

/// Turn a write lock into a read lock, atomically on this node: the key becomes the token's
/// as a sole reader ([`SOLE_READER`]) for `ARGV[2]` ms; waiters that marked the key are told.
/// Returns 1, or 0 if the key is not the token's. A key a writer holds has no live reader, so
/// the token is the only one.
///
/// `KEYS`: the lock key, its readers. `ARGV`: token, TTL in ms.
pub(crate) const DOWNGRADE: &str = r"local t = ARGV[1]
local v = redis.call('GET', KEYS[1])
if v ~= t and v ~= t .. ':' then return 0 end
redis.call('SET', KEYS[1], ':readers:' .. t, 'PX', ARGV[2])
if v == t .. ':' then redis.pcall(ARGV[3] == 's' and 'SPUBLISH' or 'PUBLISH', 'redlease:wake:' .. KEYS[1], t .. ':') end
return 1
";
/// SHA-1 of [`DOWNGRADE`].
pub(crate) const DOWNGRADE_SHA: &str = "646632044cba083f2512037954cab1b28e8d5e71";
