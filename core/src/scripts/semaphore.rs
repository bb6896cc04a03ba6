//! A semaphore's acquire and release scripts (its permits are lock keys, extended by the
//! mutex's script). The handshake does not load them: a connection's first call of each
//! carries its source.

#[cfg(doc)]
use super::{ACQUIRE, WAKE_PREFIX};

/// The prefix of every key of a semaphore (after the config's key prefix): the permits are
/// `redlease:sem:{NAME}:0` .. `:{L-1}`, the recorded limit `redlease:sem:{NAME}:limit`, the
/// waiter queue `redlease:queue:` + `redlease:sem:{NAME}` (with the key prefix before each
/// name). Every key of one semaphore carries the hash tag `{NAME}`.
pub(crate) const SEM_PREFIX: &str = "redlease:sem:";

/// The Lua function both scripts join a semaphore's queue with: `join(qk, entry, ticket,
/// ttl)` adds `entry` at score `ticket` unless it is there (`ZADD NX`), the score kept between
/// the queue's oldest and a second past its newest (a client whose clock is off can neither
/// jump the queue nor be stuck behind it), and gives the queue at least `ttl` ms to live.
macro_rules! join_queue {
    () => {
        r"local function join(qk, entry, ticket, ttl)
  if not redis.pcall('ZSCORE', qk, entry) then
    local at = tonumber(ticket)
    local first = redis.pcall('ZRANGE', qk, 0, 0, 'WITHSCORES')
    if type(first) == 'table' and first[2] then
      local last = redis.pcall('ZRANGE', qk, -1, -1, 'WITHSCORES')
      at = math.min(math.max(at, tonumber(first[2])), tonumber(last[2]) + 1000000)
    end
    redis.pcall('ZADD', qk, 'NX', string.format('%.0f', at), entry)
  end
  local left = redis.pcall('PTTL', qk)
  if type(left) == 'number' and left < tonumber(ttl) then redis.pcall('PEXPIRE', qk, ttl) end
end
"
    };
}

/// The Lua function both scripts hand a permit on with: `pass(qk, t, k, v, g, sharded)`, once
/// permit `k` that held our token `t` (as `v`: `t`, or `t:` when it was handed to us) is
/// deleted, reserves it for `g`, the waiter being served (`{ token, ms, permits still to
/// hand }`), or, when `g` has all it asked for, for the head of queue `qk` (taking it off the
/// queue; never ourselves), and announces `t:next` on the semaphore's wake channel if it named
/// someone or `k` was handed over before. Returns the waiter being served.
macro_rules! pass_on {
    () => {
        r"local function pass(qk, t, k, v, g, sharded)
  if not (g and g[3] > 0) then
    g = nil
    local head = redis.pcall('ZRANGE', qk, 0, 0)
    if type(head) == 'table' and head[1] then
      local tok, ms, w = string.match(head[1], '^([^:]*):(%d+):?(%d*)$')
      if tok ~= t then redis.pcall('ZREM', qk, head[1]) end
      if tok and tok ~= t then g = { tok, ms, tonumber(w) or 1 } end
    end
  end
  local nxt = ''
  if g then
    redis.call('SET', k, g[1] .. ':', 'PX', g[2])
    nxt = g[1]
    g[3] = g[3] - 1
  end
  if nxt ~= '' or v ~= t then
    redis.pcall(sharded and 'SPUBLISH' or 'PUBLISH', 'redlease:wake:' .. string.sub(qk, 16), t .. ':' .. nxt)
  end
  return g
end
"
    };
}

/// Take `m` of a semaphore's `n` permits, all or nothing on this node: the permits that
/// already hold our token first (a re-entry, or a permit a release handed to us), then free
/// ones, in the order of `KEYS` (the client's own order of the permits), the preferred
/// position first. Each permit is a lock key like a mutex's, holding its holder's token.
///
/// `KEYS`: the `n` permit keys, the limit key, the waiter queue, then (with fencing) the `n`
/// fence counters. `ARGV`: token, TTL in ms, `n` (the limit), `m`, wait mode, queue TTL in
/// ms, the waiter's reservation in ms (as [`ACQUIRE`]), its ticket, the preferred position
/// (0: none; after an attempt whose nodes granted different permits, the one most granted),
/// then `s` on a Redis Cluster node (announce on the sharded channel).
///
/// The limit is recorded on first use (without a TTL, like the fence counters); another limit
/// is refused with a `WRONGLIMIT` error. Returns the status `HELD ms` when fewer than `m`
/// permits are ours or free, `ms` how long until enough of the others' permits expired (`HELD`
/// alone when one has no TTL), else a string: the fencing proposal (one more than the largest
/// counter of the permits taken) and the 1-based positions in `KEYS` of the permits taken,
/// separated by spaces.
///
/// The queue is a sorted set of waiters, `token:ms` (or `token:ms:m` for more than one permit:
/// see [`SEM_RELEASE`]), scored by the waiter's ticket: the wall-clock time (µs) of its first
/// refusal, which it sends to every node, so that every node orders the waiters alike and
/// [`SEM_RELEASE`] hands each freed permit to the same waiter everywhere. A refused waiter (wait
/// mode `1` or `2`) joins it once, at its ticket (see `join_queue!`); if it heads the queue,
/// the permits already handed to it stay reserved for another reservation while it waits for
/// the rest (only the head keeps them: two waiters each keeping some could wait for each other
/// for ever). A granted waiter leaves the queue, and hands on, as a release would, every permit
/// handed to it that it does not take: a release hands the head as many permits as its entry
/// asks for, not knowing what an earlier release handed it already (a waiter handed fewer than
/// it asked for left the queue, and joined it again with the same entry), so a waiter can find
/// more permits its own than it wants; its client learns only of those it takes, and the others
/// would stay reserved, released by nobody, until the reservation ran out.
pub(crate) const SEM_ACQUIRE: &str = concat!(
    join_queue!(),
    pass_on!(),
    r"local t = ARGV[1]
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
local pref = tonumber(ARGV[9]) or 0
for j = 0, n do
  local i = j
  if j == 0 then i = pref elseif j == pref then i = 0 end
  if i > 0 and i <= n then
    local v = redis.call('GET', KEYS[i])
    vals[i] = v
    if v == t or v == t .. ':' then
      mine[#mine + 1] = i
    elseif not v then
      free[#free + 1] = i
    end
  end
end
local qk = KEYS[n + 2]
local queues = q == '1' or q == '2'
local entry = t .. ':' .. ARGV[7]
if m > 1 then entry = entry .. ':' .. ARGV[4] end
if #mine + #free < m then
  if queues then
    join(qk, entry, ARGV[8], ARGV[6])
    if #mine > 0 and redis.pcall('ZRANK', qk, entry) == 0 then
      for _, i in ipairs(mine) do redis.call('PEXPIRE', KEYS[i], ARGV[7]) end
    end
  end
  local left = {}
  for i = 1, n do
    local v = vals[i]
    if v and v ~= t and v ~= t .. ':' then left[#left + 1] = redis.call('PTTL', KEYS[i]) end
  end
  table.sort(left)
  local w = left[m - #mine - #free]
  if w and left[1] >= 0 then return redis.status_reply(string.format('HELD %d', w)) end
  return redis.status_reply('HELD')
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
if queues then redis.pcall('ZREM', qk, entry) end
local g = nil
for j = m + 1, #mine do
  local i = mine[j]
  if vals[i] ~= t then
    redis.call('DEL', KEYS[i])
    g = pass(qk, t, KEYS[i], vals[i], g, ARGV[10] == 's')
  end
end
return string.format('%.0f', f + 1) .. ' ' .. table.concat(take, ' ')
"
);
/// SHA-1 of [`SEM_ACQUIRE`].
pub(crate) const SEM_ACQUIRE_SHA: &str = "5c7540870eaef3c3d5374e95ba29cc1edc58c99c";

/// Delete each permit that holds our token (marked or not), handing it to the waiter that
/// heads the semaphore's queue ([`SEM_ACQUIRE`]), reserved for it for the time its entry names,
/// and announce it as `token:next` on the semaphore's one wake channel ([`WAKE_PREFIX`] +
/// `redlease:sem:{NAME}`, with the key prefix: the queue's name after `redlease:queue:`), which
/// its waiters subscribe to once whatever the limit.
/// Returns how many permits were deleted.
///
/// `KEYS`: the permit keys, then the queue. `ARGV`: token, mode (`1`: also leave the queue,
/// with the entry our reservation `ARGV[3]` made, `ms` or `ms:m`; plus `2`: the cleanup of an
/// acquisition's attempt; plus `4`: the acquisition waits on, and joins the queue again at its
/// ticket), the ticket, the queue TTL in ms, then `s` on a Redis Cluster node (announce on the
/// sharded channel). A waiting acquisition's attempt that a node granted took it off the queue
/// there; when no quorum agreed, its cleanup puts it back, in its place, so that the node names
/// it in turn like the others.
///
/// A holder's release looks at the queue, whoever took the permit and however: a permit taken
/// while nobody waited is handed on too once someone does, so a releaser's next `SET NX` never
/// takes back what a waiter was queued for. A cleanup frees what its attempt took as it was
/// (free: handing it on from the few nodes that granted it would name a waiter that no quorum
/// names), and hands on only what was handed to it. The permits one release frees go to the waiters in
/// order, each as many as its entry asks for, before the next waiter gets the rest; a waiter
/// handed fewer than it asked for keeps them reserved and leaves the queue, joins it again at
/// its ticket (its place) with its next attempt, and a later release tops it up: with as many
/// as its entry asks for (the release cannot know what the waiter has), and the waiter's grant
/// hands on what it does not take (see [`SEM_ACQUIRE`]). A release that names nobody announces itself only if the permit was handed over
/// before (someone may listen). A waiter that releases what its own failed attempt took while
/// it heads the queue keeps its place and names nobody; an entry that is not `token:ms[:m]` is
/// dropped. The queue commands and the publish are `pcall`s: a server whose ACL forbids them
/// still releases (its waiters poll).
pub(crate) const SEM_RELEASE: &str = concat!(
    join_queue!(),
    pass_on!(),
    r"local t = ARGV[1]
local n = #KEYS - 1
local qk = KEYS[n + 1]
local mode = tonumber(ARGV[2])
local entry = t .. ':' .. ARGV[3]
if mode % 2 == 1 then redis.pcall('ZREM', qk, entry) end
if mode >= 4 then join(qk, entry, ARGV[4], ARGV[5]) end
local cleanup = mode % 4 >= 2
local d = 0
local g = nil
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v == t and cleanup then
    d = d + redis.call('DEL', KEYS[i])
  elseif v == t or v == t .. ':' then
    d = d + redis.call('DEL', KEYS[i])
    g = pass(qk, t, KEYS[i], v, g, ARGV[6] == 's')
  end
end
return d
"
);
/// SHA-1 of [`SEM_RELEASE`].
pub(crate) const SEM_RELEASE_SHA: &str = "a22aa54658dd33ad49b8ac1b57afc07c93f271f9";
