//! The Lua scripts the engine runs on every node, their SHA-1 digests, and the one scheme of
//! names every redlease key and channel follows.
//!
//! The digests are checked at run time: the handshake's `SCRIPT LOAD` replies must equal them.
//!
//! Every redlease key and channel follows one scheme (the crate docs' "Names"): the scripts
//! take every key they touch in `KEYS`, and spell only the wake channel themselves.

/// Lua statements that queue a refused waiter behind the key `KEYS[1]` holding `v`: mark the
/// key as waited for (`:` appended), and put `entry` in the waiter queue `KEYS[3]` if it is
/// not there (wait mode `q` `1`), or at its head (`2`: the waiter a release named), the queue
/// living at least `qttl` ms. Shared by the re-entrant and read locks' acquire scripts.
macro_rules! queue_waiter {
    () => {
        r"    if string.byte(v, -1) ~= 58 then redis.pcall('SET', KEYS[1], v .. ':', 'KEEPTTL') end
    local at = redis.pcall('LPOS', KEYS[3], entry)
    if type(at) ~= 'table' then
      if q == '2' and at ~= 0 then
        if at then redis.pcall('LREM', KEYS[3], 1, entry) end
        redis.pcall('LPUSH', KEYS[3], entry)
      elseif not at then
        redis.pcall('RPUSH', KEYS[3], entry)
      end
      local left = redis.pcall('PTTL', KEYS[3])
      if type(left) == 'number' and left < tonumber(qttl) then redis.pcall('PEXPIRE', KEYS[3], qttl) end
    end
"
    };
}

/// A Lua function that hands the released key `k` to the next waiter of its queue `q` and
/// announces it: the head entry (`token:ms`) is taken off, the key set to that waiter's token
/// for its reservation, marked (`:`: others may still listen), and `r:next` published on the
/// key's wake channel (`r`: the releaser's token; `next` empty when nobody is named;
/// `sharded`: `SPUBLISH`). An entry that is not `token:ms` is dropped; the releaser's own entry
/// at the head stays there and names nobody when `keep` (a waiter that releases what its own
/// failed attempt took keeps its place), else it is dropped too. The queue commands and the
/// publish are `pcall`s. Shared by the release scripts of the mutex, the re-entrant lock and
/// the read lock.
macro_rules! hand_off {
    () => {
        r"local function hand_off(k, q, r, keep, sharded)
  local nxt = ''
  local head = redis.pcall('LINDEX', q, 0)
  if type(head) == 'string' then
    local tok, ms = string.match(head, '^([^:]*):(%d+)$')
    if not tok or (tok == r and not keep) then
      redis.pcall('LPOP', q)
    elseif tok ~= r then
      redis.pcall('LPOP', q)
      redis.call('SET', k, tok .. ':', 'PX', ms)
      nxt = tok
    end
  end
  redis.pcall(sharded and 'SPUBLISH' or 'PUBLISH', 'redlease:wake:' .. k, r .. ':' .. nxt)
end
"
    };
}

mod reentry;
mod rwlock;
mod semaphore;

pub(crate) use reentry::*;
pub(crate) use rwlock::*;
pub(crate) use semaphore::*;

/// The lock format of this engine's scripts (see the crate docs' names).
pub(crate) const FORMAT: &str = "2";
/// The key that records a node's lock format.
pub(crate) const FORMAT_KEY: &str = "redlease:format";
/// The prefix of a resource's waiter queue.
pub(crate) const QUEUE_PREFIX: &str = "redlease:queue:";
/// The prefix of a resource's wake channel, as the release scripts spell it.
pub(crate) const WAKE_PREFIX: &str = "redlease:wake:";

/// Record [`FORMAT`] on a node that has no format yet, and return the node's format.
/// `KEYS`: [`FORMAT_KEY`]. `ARGV`: the format. Run once per connection, by `EVAL`.
pub(crate) const FORMAT_CHECK: &str = r"local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return v
";

/// Acquire all lock keys (all-or-nothing) if free or already ours; read the fence counters.
///
/// `KEYS`: the `n` lock keys, then their `n` queues (only when the wait mode queues), then the
/// fence keys. `ARGV`: token, TTL in ms, `n`, wait mode, queue TTL in ms, the waiter's
/// reservation in ms. Returns the status `HELD ms` when any key is held by another token, `ms`
/// the longest time a refusing key has left (`HELD` alone when one has no TTL), else one more
/// than the largest fence counter (1 without fencing): the node's proposal for the fencing
/// token.
/// Counters are only read here; the fence round ([`FENCE`]) writes them once the lock is held.
///
/// A key's value is its holder's token, followed by [`WAITED`] once a waiter was refused by
/// it: the mark tells [`RELEASE`] that someone listens, so that a release nobody waits for
/// costs what a plain compare-and-delete costs. A queuing waiter marks every key that refused
/// it (`KEEPTTL`: the holder's expiry is untouched); re-entry keeps the mark.
///
/// The queues order the waiters of each key, for the release to hand the key to the next one.
/// Wait mode `1`: a refused waiter joins every key's queue at the back (once); `2`: at the
/// front (it was named next and lost the race); `0`: neither, and no mark. An entry is the
/// waiter's token, `:`, and how long a key handed to it stays reserved for it (short for a
/// waiter that hears release messages, a retry delay for one that polls). A granted waiter
/// leaves the queues. The mark and every queue command are `pcall`s: a server that forbids
/// them still locks.
pub(crate) const ACQUIRE: &str = r"local n = tonumber(ARGV[3])
local t = ARGV[1]
local q = ARGV[4]
local queues = q == '1' or q == '2'
local entry = t .. ':' .. ARGV[6]
local held = {}
local refused = false
local left = 0
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= t and v ~= t .. ':' then
    refused = true
    local p = redis.call('PTTL', KEYS[i])
    if left and p >= 0 then left = math.max(left, p) else left = nil end
    if queues and string.byte(v, -1) ~= 58 then redis.pcall('SET', KEYS[i], v .. ':', 'KEEPTTL') end
  else
    held[i] = v
  end
end
if refused then
  if queues then
    for i = n + 1, n + n do
      local at = redis.pcall('LPOS', KEYS[i], entry)
      if type(at) ~= 'table' then
        if q == '2' and at ~= 0 then
          if at then redis.pcall('LREM', KEYS[i], 1, entry) end
          redis.pcall('LPUSH', KEYS[i], entry)
        elseif not at then
          redis.pcall('RPUSH', KEYS[i], entry)
        end
        local left = redis.pcall('PTTL', KEYS[i])
        if type(left) == 'number' and left < tonumber(ARGV[5]) then redis.pcall('PEXPIRE', KEYS[i], ARGV[5]) end
      end
    end
  end
  if left then return redis.status_reply(string.format('HELD %d', left)) end
  return redis.status_reply('HELD')
end
for i = 1, n do
  redis.call('SET', KEYS[i], held[i] or t, 'PX', ARGV[2])
end
local first = n + 1
if queues then
  for i = n + 1, n + n do redis.pcall('LREM', KEYS[i], 1, entry) end
  first = n + n + 1
end
local f = 0
for i = first, #KEYS do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  if c > f then f = c end
end
return f + 1
";
/// SHA-1 of [`ACQUIRE`].
pub(crate) const ACQUIRE_SHA: &str = "356d3c19c181b1588b07f239ccdb316d438f7c61";

/// The mark a lock key's value carries after its token once a waiter was refused by it
/// (see [`ACQUIRE`]); tokens may not contain it.
pub(crate) const WAITED: u8 = b':';

/// Set a new TTL on every lock key, only if all of them hold our token (marked or not).
/// Returns 1 or 0.
pub(crate) const EXTEND: &str = r"local m = ARGV[1] .. ':'
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v ~= ARGV[1] and v ~= m then return 0 end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
";
/// SHA-1 of [`EXTEND`].
pub(crate) const EXTEND_SHA: &str = "cb608068a2942f31f21bcdc821cf911e5fe0b1a9";

/// Delete each lock key that holds our token; where a waiter marked it (see [`ACQUIRE`]),
/// also hand it to the waiter next in line and announce the deletion on the key's wake
/// channel ([`WAKE_PREFIX`] + key). Returns how many keys were deleted.
///
/// `KEYS`: the `n` lock keys, then their `n` queues. `ARGV`: token, leave (`1`: also leave
/// the queues, with the entry our reservation `ARGV[3]` made: an acquisition that gave up, or
/// a lock that queued while waiting, at its release).
///
/// An unmarked key (nobody waited) is only compared and deleted. A lock of one key that does
/// not leave its queue releases with [`RELEASE_ONE`] instead, which runs no loop.
///
/// The next waiter is taken off the head of the key's queue; the key is set to its token for
/// the reservation its entry names, marked (other waiters may still listen), so that its
/// attempt re-enters the key and a newcomer's `SET NX` (often the releasing client's own next
/// lock call) cannot barge in. The message is our token, `:`, and the next waiter's token
/// (empty when none waits), so that only that waiter retries at once. If it is gone, the
/// reservation expires and the others' fallback retries take the key. A waiter that releases
/// what its own failed attempt took while it heads the queue keeps its place and names nobody;
/// an entry that is not `token:ms` is dropped.
///
/// A semaphore's permits release with [`SEM_RELEASE`] instead: they share one queue.
///
/// A waiter that leaves (it gave up) while readers hold the key it marked (`:readers:`, or a
/// sole reader's value marked, see [`READ_ACQUIRE`]) takes its mark back: new readers join
/// again, and a writer still waiting marks the key at its next attempt.
///
/// The queue commands and the publish are `pcall`s: a server whose ACL forbids them still
/// releases (its waiters poll).
pub(crate) const RELEASE: &str = concat!(
    hand_off!(),
    r"local d = 0
local t = ARGV[1]
local n = #KEYS / 2
local entry = t .. ':' .. ARGV[3]
for i = 1, n do
  local name = KEYS[n + i]
  if ARGV[2] == '1' then redis.pcall('LREM', name, 1, entry) end
  local v = redis.call('GET', KEYS[i])
  if ARGV[2] == '1' and v and string.sub(v, 1, 8) == ':readers' and string.byte(v, -1) == 58 then
    redis.call('SET', KEYS[i], string.sub(v, 1, -2), 'KEEPTTL')
  elseif v == t then
    d = d + redis.call('DEL', KEYS[i])
  elseif v == t .. ':' then
    d = d + redis.call('DEL', KEYS[i])
    hand_off(KEYS[i], name, t, true, ARGV[4] == 's')
  end
end
return d
"
);
/// [`RELEASE`] of one key, not leaving its queue: every lock of one resource releases with it.
///
/// `KEYS`: the lock key, its queue. `ARGV`: token. Its first two lines are the plain
/// compare-and-delete, which is all a release nobody waited for costs. Returns 1 if it deleted
/// the key, else 0.
pub(crate) const RELEASE_ONE: &str = concat!(
    r"local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then return redis.call('DEL', KEYS[1]) end
if v ~= ARGV[1] .. ':' then return 0 end
redis.call('DEL', KEYS[1])
",
    hand_off!(),
    r"hand_off(KEYS[1], KEYS[2], ARGV[1], true, ARGV[2] == 's')
return 1
"
);
/// SHA-1 of [`RELEASE_ONE`].
pub(crate) const RELEASE_ONE_SHA: &str = "2e4bb954ef77f2b63601423c1dea4e286618b2d4";

/// SHA-1 of [`RELEASE`].
pub(crate) const RELEASE_SHA: &str = "2ad8860349daa3833f7424f8ba0576ac5dff488c";

/// The fence round: raise each fence counter to at least `ARGV[1]` (the proposed token) and
/// return the largest counter found before. The proposal is accepted on this node iff the
/// result is below it.
pub(crate) const FENCE: &str = r"local t = tonumber(ARGV[1])
local m = 0
for i = 1, #KEYS do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  if c > m then m = c end
  if c < t then redis.call('SET', KEYS[i], ARGV[1]) end
end
return m
";
/// SHA-1 of [`FENCE`].
pub(crate) const FENCE_SHA: &str = "e121c0975cef343e043f1dac2d7df5c955787719";

#[cfg(test)]
mod tests {
    use super::*;

    /// SHA-1 (FIPS 180-4), enough to check the digests above without a dependency.
    fn sha1_hex(data: &[u8]) -> String {
        let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
        let mut msg = data.to_vec();
        msg.push(0x80);
        while msg.len() % 64 != 56 {
            msg.push(0);
        }
        msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
        for block in msg.chunks(64) {
            let mut w = [0u32; 80];
            for (i, word) in block.chunks(4).enumerate() {
                w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
            }
            for i in 16..80 {
                w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
            }
            let [mut a, mut b, mut c, mut d, mut e] = h;
            for (i, wi) in w.iter().enumerate() {
                let (f, k) = match i {
                    0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                    20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                    40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                    _ => (b ^ c ^ d, 0xCA62_C1D6),
                };
                let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*wi);
                (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
            }
            for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
                *x = x.wrapping_add(y);
            }
        }
        h.iter().map(|x| format!("{x:08x}")).collect()
    }

    #[test]
    fn digests_match_the_scripts() {
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        for (script, sha) in [
            (ACQUIRE, ACQUIRE_SHA),
            (EXTEND, EXTEND_SHA),
            (RELEASE, RELEASE_SHA),
            (FENCE, FENCE_SHA),
            (RELEASE_ONE, RELEASE_ONE_SHA),
            (SEM_ACQUIRE, SEM_ACQUIRE_SHA),
            (SEM_RELEASE, SEM_RELEASE_SHA),
            (READ_ACQUIRE, READ_ACQUIRE_SHA),
            (READ_EXTEND, READ_EXTEND_SHA),
            (READ_RELEASE, READ_RELEASE_SHA),
            (DOWNGRADE, DOWNGRADE_SHA),
            (REENTRY, REENTRY_SHA),
        ] {
            assert_eq!(sha1_hex(script.as_bytes()), sha, "the digest constant of a script is stale");
        }
    }
}
