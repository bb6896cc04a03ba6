//! The protected store: a `redis-server` outside the fault domain (on loopback) holding two
//! counters per phase (per permit, for a semaphore), incremented by read-modify-write under the
//! lock.
//!
//! - The **fenced** counter is read and written through scripts that check the holder's
//!   fencing token: an operation is accepted only with a fence at least the highest one the
//!   store has accepted, which it then remembers. The read takes part in the check, so a
//!   stale holder that read before a newer holder cannot write afterwards (a check on writes
//!   alone lets "A reads, B reads, A writes, B writes" lose A's update).
//! - The **plain** counter is read and written without any check: what a store that ignores
//!   fencing tokens would hold. Comparing the two counts what the check saved.
//!
//! With unique fences per holder, every accepted fenced write follows its own read with no
//! other holder's accepted operation in between, so the fenced counter equals the number of
//! accepted writes: a lost update is `accepted − final`.
//!
//! A **semaphore**'s holders use one set of keys per permit ([`StoreKeys::permit`]): the store
//! keeps the highest fence per permit, as the fencing of a semaphore is per permit.
//!
//! A **reader-writer** lock's writers read and write like a mutex's holders; its readers only
//! read ([`Store::read_shared`]), presenting the writer epoch they read under (their fencing
//! token, the token of the last writer). A read is accepted when no writer of a higher epoch
//! has been accepted, and raises the highest epoch read under; a writer's operation is accepted
//! only with a fence above that too: a reader that read under epoch `e` holds its lock after
//! writer `e` lost it, so writer `e` is stale from then on.

use std::io;
use std::net::SocketAddr;

use redlease_servers::{RedisConn, Reply};

use super::event::Fenced;

/// `KEYS`: fenced counter, highest accepted fence, plain counter, highest epoch a reader read
/// under. `ARGV`: fence. Returns `{accepted (1/0), fenced counter (or the highest fence when
/// refused), plain counter}`.
const READ: &str = r"local f = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local plain = tonumber(redis.call('GET', KEYS[3]) or '0')
if f < last or f <= tonumber(redis.call('GET', KEYS[4]) or '0') then return {0, last, plain} end
redis.call('SET', KEYS[2], ARGV[1])
return {1, tonumber(redis.call('GET', KEYS[1]) or '0'), plain}
";

/// `KEYS`: as [`READ`]. `ARGV`: fence, new fenced value (empty: skip the fenced write), new
/// plain value. The plain counter is always written. Returns `{2}` (skipped), `{1}` (accepted)
/// or `{0}` (refused).
const WRITE: &str = r"redis.call('SET', KEYS[3], ARGV[3])
if ARGV[2] == '' then return {2} end
local f = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if f < last or f <= tonumber(redis.call('GET', KEYS[4]) or '0') then return {0} end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
return {1}
";

/// A reader's read. `KEYS`: as [`READ`]. `ARGV`: the writer epoch read under. Accepted
/// unless a writer of a higher epoch was accepted; then raises the highest epoch read under.
/// Returns as [`READ`].
const READ_SHARED: &str = r"local e = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local plain = tonumber(redis.call('GET', KEYS[3]) or '0')
if e < last then return {0, last, plain} end
if e > tonumber(redis.call('GET', KEYS[4]) or '0') then redis.call('SET', KEYS[4], ARGV[1]) end
return {1, tonumber(redis.call('GET', KEYS[1]) or '0'), plain}
";

/// The store's keys for one phase (`prefix:fenced`, `prefix:fence`, `prefix:plain`,
/// `prefix:readers`).
#[derive(Clone, Debug)]
pub struct StoreKeys {
    fenced: String,
    fence: String,
    plain: String,
    readers: String,
}

impl StoreKeys {
    /// The keys under `prefix`.
    pub fn new(prefix: &str) -> StoreKeys {
        StoreKeys {
            fenced: format!("{prefix}:fenced"),
            fence: format!("{prefix}:fence"),
            plain: format!("{prefix}:plain"),
            readers: format!("{prefix}:readers"),
        }
    }

    /// The keys of a semaphore's permit `permit` under `prefix`.
    pub fn permit(prefix: &str, permit: u16) -> StoreKeys {
        StoreKeys::new(&format!("{prefix}:permit{permit}"))
    }
}

/// What a read returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadResult {
    /// The fenced read was accepted.
    pub accepted: bool,
    /// The fenced counter (0 when refused).
    pub fenced: i64,
    /// The plain counter.
    pub plain: i64,
}

/// A connection to the store.
#[derive(Debug)]
pub struct Store {
    conn: RedisConn,
    keys: StoreKeys,
}

fn bad(what: &str, reply: &Reply) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("store {what}: unexpected reply {reply:?}"))
}

fn ints(what: &str, reply: Reply) -> io::Result<Vec<i64>> {
    match &reply {
        Reply::Array(Some(items)) => {
            items.iter().map(|i| if let Reply::Int(v) = i { Ok(*v) } else { Err(bad(what, &reply)) }).collect()
        }
        _ => Err(bad(what, &reply)),
    }
}

impl Store {
    /// Connect to the store at `addr`, for the counters of `keys`.
    pub fn connect(addr: SocketAddr, keys: StoreKeys) -> io::Result<Store> {
        Ok(Store { conn: RedisConn::connect(addr, None)?, keys })
    }

    /// Delete the phase's counters (before the phase starts).
    pub fn reset(&mut self) -> io::Result<()> {
        for key in [&self.keys.fenced, &self.keys.fence, &self.keys.plain, &self.keys.readers] {
            self.conn.del(key)?;
        }
        Ok(())
    }

    fn eval(&mut self, script: &str, args: &[&str]) -> io::Result<Reply> {
        let k = &self.keys;
        let mut argv =
            vec!["EVAL", script, "4", k.fenced.as_str(), k.fence.as_str(), k.plain.as_str(), k.readers.as_str()];
        argv.extend_from_slice(args);
        self.conn.checked(&argv)
    }

    /// Read both counters, presenting `fence`.
    pub fn read(&mut self, fence: u64) -> io::Result<ReadResult> {
        self.read_with(READ, fence)
    }

    /// Read both counters as a reader, presenting the writer `epoch` it reads under.
    pub fn read_shared(&mut self, epoch: u64) -> io::Result<ReadResult> {
        self.read_with(READ_SHARED, epoch)
    }

    fn read_with(&mut self, script: &str, fence: u64) -> io::Result<ReadResult> {
        let reply = self.eval(script, &[&fence.to_string()])?;
        match ints("read", reply)?.as_slice() {
            [ok, fenced, plain] => {
                Ok(ReadResult { accepted: *ok == 1, fenced: if *ok == 1 { *fenced } else { 0 }, plain: *plain })
            }
            other => Err(io::Error::other(format!("store read: {other:?}"))),
        }
    }

    /// Use the keys `keys` from now on (another permit's).
    pub fn set_keys(&mut self, keys: StoreKeys) {
        self.keys = keys;
    }

    /// Write `fenced` (if `Some`) under `fence`, and `plain` unconditionally.
    pub fn write(&mut self, fence: u64, fenced: Option<i64>, plain: i64) -> io::Result<Fenced> {
        let value = fenced.map(|v| v.to_string()).unwrap_or_default();
        let reply = self.eval(WRITE, &[&fence.to_string(), &value, &plain.to_string()])?;
        match ints("write", reply)?.as_slice() {
            [2] => Ok(Fenced::Skipped),
            [1] => Ok(Fenced::Accepted),
            [0] => Ok(Fenced::Rejected),
            other => Err(io::Error::other(format!("store write: {other:?}"))),
        }
    }

    /// The highest fence accepted, and the highest writer epoch a reader read under.
    pub fn marks(&mut self) -> io::Result<(u64, u64)> {
        let get = |conn: &mut RedisConn, key: &str| -> io::Result<u64> {
            let v = conn.get(key)?;
            v.map_or(Ok(0), |v| v.parse().map_err(|e| io::Error::other(format!("store {key}: {v:?}: {e}"))))
        };
        Ok((get(&mut self.conn, &self.keys.fence)?, get(&mut self.conn, &self.keys.readers)?))
    }

    /// The final values: `(fenced, plain)`.
    pub fn finals(&mut self) -> io::Result<(i64, i64)> {
        let get = |conn: &mut RedisConn, key: &str| -> io::Result<i64> {
            let v = conn.get(key)?;
            v.map_or(Ok(0), |v| v.parse().map_err(|e| io::Error::other(format!("store {key}: {v:?}: {e}"))))
        };
        let fenced = get(&mut self.conn, &self.keys.fenced)?;
        let plain = get(&mut self.conn, &self.keys.plain)?;
        Ok((fenced, plain))
    }
}

#[cfg(test)]
mod tests {
    use redlease_servers::Servers;

    use super::*;

    #[test]
    fn the_store_refuses_stale_writers_and_readers_and_keeps_a_fence_per_permit() {
        let servers = Servers::start(1);
        let mut s = Store::connect(servers.node(0).addr(), StoreKeys::new("t")).unwrap();
        s.reset().unwrap();
        // Writer 3 reads and writes; a reader under epoch 3 reads what it wrote.
        assert!(s.read(3).unwrap().accepted);
        assert_eq!(s.write(3, Some(1), 1).unwrap(), Fenced::Accepted);
        assert_eq!(s.read_shared(3).unwrap(), ReadResult { accepted: true, fenced: 1, plain: 1 });
        // From then on writer 3 is stale (the reader held the lock after it); the plain
        // counter takes its write all the same.
        assert_eq!(s.write(3, Some(2), 2).unwrap(), Fenced::Rejected);
        assert!(!s.read(3).unwrap().accepted);
        assert_eq!(s.finals().unwrap(), (1, 2));
        // Writer 4 is not; once it was accepted, a reader under epoch 3 is stale.
        assert!(s.read(4).unwrap().accepted);
        assert!(!s.read_shared(3).unwrap().accepted);
        assert!(s.read_shared(4).unwrap().accepted);
        assert_eq!(s.marks().unwrap(), (4, 4));
        // A semaphore's permits keep their own highest fence.
        s.set_keys(StoreKeys::permit("t", 1));
        s.reset().unwrap();
        assert!(s.read(2).unwrap().accepted);
        assert_eq!(s.marks().unwrap(), (2, 0));
        s.set_keys(StoreKeys::permit("t", 0));
        s.reset().unwrap();
        assert!(s.read(1).unwrap().accepted);
    }
}
