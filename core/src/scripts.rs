//! The Lua scripts the engine runs on every node, and their SHA-1 digests.
//!
//! The digests are checked at run time: the handshake's `SCRIPT LOAD` replies must equal them.

/// Acquire all lock keys (all-or-nothing) if free or already ours; `INCR` the fence keys.
///
/// `KEYS`: the lock keys, then the fence keys. `ARGV`: token, TTL in ms, number of lock keys.
/// Returns 0 when any key is held by another token, else the largest fence counter (1 without fencing).
pub(crate) const ACQUIRE: &str = r"local n = tonumber(ARGV[3])
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then return 0 end
end
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
local f = 1
for i = n + 1, #KEYS do
  local c = redis.call('INCR', KEYS[i])
  if c > f then f = c end
end
return f
";
/// SHA-1 of [`ACQUIRE`].
pub(crate) const ACQUIRE_SHA: &str = "06f419a36f62f36fd6d834289091dadfd5ce2948";

/// Set a new TTL on every lock key, only if all of them hold our token. Returns 1 or 0.
pub(crate) const EXTEND: &str = r"for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
";
/// SHA-1 of [`EXTEND`].
pub(crate) const EXTEND_SHA: &str = "9d0f048c74a7982b8f76c183975ef78cf8e24bf8";

/// Delete each lock key that holds our token. Returns how many keys were deleted.
pub(crate) const RELEASE: &str = r"local d = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    d = d + redis.call('DEL', KEYS[i])
  end
end
return d
";
/// SHA-1 of [`RELEASE`].
pub(crate) const RELEASE_SHA: &str = "ed97c228ea3aa4645319993e620398479f2664bb";

/// Raise each fence counter to at least `ARGV[1]` (write-back of the granted fencing token).
pub(crate) const FENCE: &str = r"local t = tonumber(ARGV[1])
for i = 1, #KEYS do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  if c == nil or c < t then redis.call('SET', KEYS[i], ARGV[1]) end
end
return 1
";
/// SHA-1 of [`FENCE`].
pub(crate) const FENCE_SHA: &str = "ebaba22642b6d6cb70ce8a4c0c889c08f1adae4f";
