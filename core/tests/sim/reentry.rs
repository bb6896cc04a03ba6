//! The model of the re-entrant lock's script: a lock key that holds its owner, and beside it
//! the owner's holds (`redlease:holds:K`, a hash in Redis), kept here in a plain value of the
//! keyspace (so that it expires, migrates and is counted like any key): the owner's recorded
//! fencing token, then one hold's token per line.

use super::{Node, Reply, Time, parse_int, queue_of};

/// The prefix of a lock key's holds.
pub(crate) const HOLDS_PREFIX: &[u8] = b"redlease:holds:";

/// A holds value: the recorded fence (0: none) and the holds' tokens.
pub(crate) fn decode(value: &[u8]) -> (i64, Vec<Vec<u8>>) {
    let mut lines = value.split(|&b| b == b'\n');
    let fence = lines.next().and_then(parse_int).unwrap_or(0);
    (fence, lines.map(<[u8]>::to_vec).collect())
}

fn encode(fence: i64, holds: &[Vec<u8>]) -> Vec<u8> {
    let mut out = fence.to_string().into_bytes();
    for h in holds {
        out.push(b'\n');
        out.extend_from_slice(h);
    }
    out
}

impl Node {
    /// The re-entrant lock's script. KEYS: the lock key, its holds, its queue, its fence
    /// counter; ARGV: the mode (`a`, `e`, `r`, `f`), the owner, the hold's token, and the
    /// mode's arguments (see `scripts::REENTRY` in the core).
    pub(super) fn reentry(&mut self, now: Time, db: u32, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Result<Reply, String> {
        let [k, h, q, f] = keys else { return Err(format!("the re-entry script takes 4 keys, got {}", keys.len())) };
        let [mode, owner, hold, rest @ ..] = argv else { return Err("re-entry: too few arguments".into()) };
        // (The fence counter is named only where the script reads it: a release's cleanup
        // names none.)
        let fenced = matches!(mode.as_slice(), b"a" | b"f" | b"k");
        let good = self.is_lock_key(k)
            && *h == [HOLDS_PREFIX, k].concat()
            && *q == queue_of(k)
            && (!fenced || *f == [self.fence_prefix.as_slice(), k].concat());
        if !good {
            return Err("re-entry: lock, holds, queue and fence keys mixed up".into());
        }
        if owner.is_empty() || owner.contains(&b':') || hold.is_empty() {
            return Err("re-entry: a bad owner or hold".into());
        }
        let lock = (db, k.clone());
        let ours = self.get(db, k) == Some(owner.as_slice());
        let (mut fence, mut holds) = self.get(db, h).map(decode).unwrap_or_default();
        if self.get(db, h).is_some() && self.pttl(now, &(db, h.clone())).is_none() {
            self.problems.push(format!("holds {:?} without a TTL", String::from_utf8_lossy(h)));
        }
        let int = |b: &Vec<u8>, what: &str| parse_int(b).filter(|&t| t > 0).ok_or(format!("re-entry: bad {what}"));
        match (mode.as_slice(), rest) {
            (b"e", [ttl]) => {
                let ttl = int(ttl, "TTL")?;
                if !ours || !holds.contains(hold) {
                    return Ok(Reply::Int(0));
                }
                let ttl = ttl.max(self.pttl(now, &lock).unwrap_or(0));
                self.pexpire(now, db, k, ttl);
                self.pexpire(now, db, h, ttl);
                Ok(Reply::Int(1))
            }
            (b"f", [proposal]) => {
                let t = int(proposal, "proposal")?;
                let c = self.get(db, f).and_then(parse_int).unwrap_or(0);
                if c < t {
                    self.set(now, db, f, proposal, None);
                }
                Ok(Reply::Int(c))
            }
            (b"k", [token]) => {
                let t = int(token, "token")?;
                if !ours || !holds.contains(hold) {
                    return Ok(Reply::Int(0));
                }
                self.keep_ttl(db, h, encode(t, &holds));
                Ok(Reply::Int(1))
            }
            (b"r", [leave, reserve]) => {
                if leave == b"1" {
                    self.leave_queue(&(db, q.clone()), &[owner.as_slice(), b":", reserve].concat());
                }
                let before = holds.len();
                holds.retain(|x| x != hold);
                let d = i64::from(holds.len() < before);
                if !ours {
                    // A late release: its hold goes, from the holds of a key that is not the
                    // owner's any more.
                    if d == 1 && holds.is_empty() {
                        self.del(now, db, h);
                    } else if d == 1 {
                        self.keep_ttl(db, h, encode(fence, &holds));
                    }
                    return Ok(Reply::Int(0));
                }
                if !holds.is_empty() {
                    self.keep_ttl(db, h, encode(fence, &holds));
                    return Ok(Reply::Int(d));
                }
                self.del(now, db, h);
                self.release_keys(now, db, &[k.clone(), q.clone()], owner, None)?;
                Ok(Reply::Int(d))
            }
            (b"a", [ttl, queue, queue_ttl, reserve, fencing]) => {
                let ttl = int(ttl, "TTL")?;
                let front = match queue.as_slice() {
                    b"0" => None,
                    b"1" => Some(false),
                    b"2" => Some(true),
                    _ => return Err("re-entry: bad wait mode".into()),
                };
                let entry = [owner.as_slice(), b":", reserve].concat();
                if self.get(db, k).is_some() && !ours {
                    if let Some(front) = front {
                        self.mark(&lock);
                        let queue_ttl = int(queue_ttl, "queue TTL")?;
                        self.join_queue(now, &(db, q.clone()), &entry, front, queue_ttl);
                    }
                    return Ok(self.held(now, db, &[k]));
                }
                let ttl = if ours {
                    let ttl = ttl.max(self.pttl(now, &lock).unwrap_or(0));
                    self.pexpire(now, db, k, ttl);
                    ttl
                } else {
                    self.del(now, db, h);
                    (fence, holds) = (0, Vec::new());
                    self.set(now, db, k, owner, Some(ttl));
                    ttl
                };
                if !holds.contains(hold) {
                    holds.push(hold.clone());
                }
                self.set(now, db, h, &encode(fence, &holds), Some(ttl));
                self.pexpire(now, db, h, ttl);
                if front.is_some() {
                    self.leave_queue(&(db, q.clone()), &entry);
                }
                if fence > 0 {
                    return Ok(Reply::Int(-fence));
                }
                if fencing != b"1" {
                    return Ok(Reply::Int(1));
                }
                Ok(Reply::Int(self.get(db, f).and_then(parse_int).unwrap_or(0) + 1))
            }
            _ => Err(format!("re-entry: mode {:?} with {} arguments", String::from_utf8_lossy(mode), rest.len())),
        }
    }

    /// Write a holds value, keeping its TTL.
    fn keep_ttl(&mut self, db: u32, h: &[u8], value: Vec<u8>) {
        if let Some(e) = self.data.get_mut(&(db, h.to_vec())) {
            e.value = value;
        }
    }
}
