//! Leader election, a lock shape: [`ElectionOptions`] (what a candidate campaigns for) and
//! [`leader_of`] (what observers conclude from what every node holds).
//!
//! A campaign is a wait for the election's lock, [`election_key`]`(name)`, with fencing and
//! automatic extension: the candidate that holds it leads, its fencing token is its **epoch**,
//! and a resign is a release, which hands the key at once to the next candidate in the queue.
//! The candidate's value (an id, an address) is in its lock token — the token is the value in
//! hex, `.`, then random hex — so the value is on each node exactly while the candidate's
//! grant is: written by the grant itself, with the lock's TTL, and deleted by its release.
//! Every key of one election carries the hash tag `{name}` (the lock, its fence counter, its
//! queue), so a Redis Cluster node serves all of them from one slot.

use std::time::Duration;

use crate::error::Misuse;
use crate::options::LockOptions;

/// The prefix of an election's lock key: the election `NAME` locks `redlease:elect:{NAME}`
/// (after the config's key prefix).
pub const ELECTION_PREFIX: &str = "redlease:elect:";

/// The longest candidate value, in bytes (it travels in every lock command, as hex).
pub const MAX_VALUE_LEN: usize = 512;

/// The longest election name, in bytes.
pub const MAX_NAME_LEN: usize = 256;

/// Separates the hex of a candidate's value from the random part of its token.
const SEPARATOR: u8 = b'.';

/// The lock key of the election `name`: `redlease:elect:{name}` (the hash tag keeps every key
/// of the election in one Redis Cluster slot).
pub fn election_key(name: &str) -> String {
    format!("{ELECTION_PREFIX}{{{name}}}")
}

/// What a candidate campaigns for: the election's name, the value observers see while it
/// leads, the TTL of its leadership (kept extended about every `ttl / 3`) and how long to
/// wait for it.
///
/// ```
/// use std::time::Duration;
/// # use redlease_core::ElectionOptions;
/// let options = ElectionOptions::new("scheduler", "10.0.0.7:8080").ttl(Duration::from_secs(5));
/// let lock = options.lock_options().unwrap();
/// assert_eq!(lock.resources, ["redlease:elect:{scheduler}"]);
/// assert!(lock.fencing && lock.auto_extend);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ElectionOptions {
    /// The election's name: not empty, at most [`MAX_NAME_LEN`] bytes, without `{` or `}`.
    pub name: String,
    /// The candidate's value, visible to observers while it leads (at most [`MAX_VALUE_LEN`]
    /// bytes).
    pub value: Vec<u8>,
    /// The TTL of the leadership: a leader that stops (crash, partition, pause) is replaced
    /// within about this long.
    pub ttl: Duration,
    /// Give up campaigning after this long ([`AcquireError::WaitTimeout`](crate::AcquireError::WaitTimeout));
    /// `None`: campaign until elected.
    pub wait: Option<Duration>,
}

impl ElectionOptions {
    /// Campaign in the election `name` with `value`, a 10 s TTL, waiting without a bound.
    pub fn new(name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        ElectionOptions { name: name.into(), value: value.into(), ttl: Duration::from_secs(10), wait: None }
    }

    /// Set the TTL of the leadership.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Give up after `wait` without being elected.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// The election's lock key ([`election_key`]).
    pub fn key(&self) -> String {
        election_key(&self.name)
    }

    /// Check the name and the value: a [`Misuse::Election`] names the field.
    pub fn check(&self) -> Result<(), Misuse> {
        let bad = |field, reason| Err(Misuse::Election { field, reason });
        if self.name.is_empty() {
            return bad("name", "empty: name the election, e.g. \"scheduler\"");
        }
        if self.name.len() > MAX_NAME_LEN {
            return bad("name", "longer than 256 bytes");
        }
        if self.name.contains(['{', '}']) {
            return bad("name", "contains '{' or '}': the name is the hash tag of the election's keys");
        }
        if self.value.len() > MAX_VALUE_LEN {
            return bad("value", "longer than 512 bytes: give an id or an address");
        }
        Ok(())
    }

    /// The lock a campaign waits for: the election's key, fenced (the epoch), extended
    /// automatically, waiting as [`wait`](Self::wait) says.
    pub fn lock_options(&self) -> Result<LockOptions, Misuse> {
        self.check()?;
        let options = LockOptions::new(self.key(), self.ttl).fencing(true).auto_extend(true);
        Ok(match self.wait {
            Some(wait) => options.wait(wait),
            None => options.wait_forever(),
        })
    }

    /// The candidate's lock token: its value in lowercase hex, `.`, and `random` in hex
    /// (draw 20 bytes from the OS random source: the token must be unique).
    pub fn token(&self, random: &[u8]) -> Vec<u8> {
        let mut token = crate::token_hex(&self.value).into_bytes();
        token.push(SEPARATOR);
        token.extend_from_slice(crate::token_hex(random).as_bytes());
        token
    }
}

/// The candidate value a campaign's token carries ([`ElectionOptions::token`]); `None` for a
/// token that is not a candidate's.
pub fn candidate_value(token: &[u8]) -> Option<Vec<u8>> {
    let hex = &token[..token.iter().position(|&b| b == SEPARATOR)?];
    if hex.len() % 2 != 0 {
        return None;
    }
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    hex.chunks_exact(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}

/// What one node holds of an election: its lock key's value (`None`: no key) and its fence
/// counter (0 when it has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeElection<'a> {
    /// The lock key's value as stored (the holder's token, `:`-marked when waited for).
    pub holder: Option<&'a [u8]>,
    /// The election's fence counter on the node.
    pub counter: u64,
}

/// The leader observers agree on ([`leader_of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The leader's candidate value.
    pub value: Vec<u8>,
    /// Its epoch: the largest fence counter that a quorum of the nodes have reached.
    pub epoch: u64,
    /// Its lock token (two campaigns of one value have different tokens).
    pub token: String,
}

/// A lock value without its waited-for mark: the holder's token.
fn unmarked(value: &[u8]) -> &[u8] {
    value.strip_suffix(b":").unwrap_or(value)
}

/// The leader, from what each node holds (`None` for a node that did not answer): the
/// candidate whose token a quorum of the nodes hold, with its epoch, or `None`.
///
/// What an observer can see: no two candidates are held by a quorum at once (quorums
/// intersect and a node holds one token), so at most one leader shows. During a handover there
/// is a moment with no leader (the key released or expired on some nodes, not yet granted
/// again on a quorum). In the round trip between a new leader's grant and its fence round —
/// before its campaign returns — the epoch shown can still be its predecessor's; a change of
/// leader is only reported as such ([`Observer`]) once the epoch has grown.
pub fn leader_of(nodes: &[Option<NodeElection<'_>>], quorum: usize) -> Option<Leader> {
    let holders = || nodes.iter().flatten().filter_map(|n| Some((unmarked(n.holder?), n.counter)));
    let (token, _) = holders().find(|(t, _)| holders().filter(|(o, _)| o == t).count() >= quorum)?;
    // The largest counter a quorum of the nodes reached: a leader's fence round raised a
    // quorum to its epoch before its campaign returned, and no later epoch reaches a quorum
    // before the next leader is granted (a stale proposal reaches fewer).
    let mut counters: Vec<u64> = nodes.iter().flatten().map(|n| n.counter).collect();
    counters.sort_unstable_by(|a, b| b.cmp(a));
    let epoch = *counters.get(quorum.checked_sub(1)?)?;
    let value = candidate_value(token)?;
    (epoch > 0).then(|| Leader { value, epoch, token: String::from_utf8_lossy(token).into_owned() })
}

/// Follows an election through successive reads and says when its leader changed: a read
/// names a new leader only with an epoch above every one reported before, so the changes
/// reported have strictly increasing epochs (a read in the moment before a new leader's fence
/// round landed, which shows its predecessor's epoch, is not a change yet).
///
/// It also says when to read next ([`next_read`](Self::next_read)).
#[derive(Clone, Debug, Default)]
pub struct Observer {
    current: Option<Leader>,
    epoch: u64,
    /// Reads in a row that showed a new holder whose epoch had not landed.
    settling: u32,
}

/// How soon an observer reads again while a new holder's epoch has not landed (its fence
/// round is about a round trip away), and how many times in a row at most.
const SETTLE: Duration = Duration::from_millis(5);
const SETTLE_READS: u32 = 200;

/// A change an [`Observer`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderChange {
    /// A new leader (its epoch above every earlier one).
    Elected(Leader),
    /// The leader is gone (resigned, expired or out of reach) and none has a quorum yet.
    Vacant,
}

impl Observer {
    /// A new observer, which has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The leader last reported.
    pub fn current(&self) -> Option<&Leader> {
        self.current.as_ref()
    }

    /// Take a read ([`leader_of`]'s result) and return the change it makes, if any.
    pub fn update(&mut self, read: Option<Leader>) -> Option<LeaderChange> {
        let settling = std::mem::take(&mut self.settling);
        match read {
            Some(l) if self.current.as_ref().is_some_and(|c| c.token == l.token) => None,
            Some(l) if l.epoch > self.epoch => {
                self.epoch = l.epoch;
                self.current = Some(l.clone());
                Some(LeaderChange::Elected(l))
            }
            // A new holder whose epoch has not landed yet: not a change until it has.
            Some(_) => {
                self.settling = settling.saturating_add(1);
                None
            }
            None => self.current.take().map(|_| LeaderChange::Vacant),
        }
    }

    /// How long to wait before the next read, after a read that was no change, for an
    /// observer that otherwise reads every `poll` (or sooner, when a release is announced):
    /// 5 ms while the last read showed a new holder whose epoch had not landed (its campaign
    /// is a round trip from returning; 200 such reads in a row at most), else `poll`.
    pub fn next_read(&self, poll: Duration) -> Duration {
        if (1..=SETTLE_READS).contains(&self.settling) { SETTLE } else { poll }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(holder: Option<&[u8]>, counter: u64) -> Option<NodeElection<'_>> {
        Some(NodeElection { holder, counter })
    }

    #[test]
    fn tokens_carry_the_value() {
        let o = ElectionOptions::new("jobs", b"10.0.0.1:80".to_vec());
        let t = o.token(&[0xab; 4]);
        assert_eq!(t, b"31302e302e302e313a3830.abababab");
        assert_eq!(candidate_value(&t).unwrap(), b"10.0.0.1:80");
        assert_eq!(candidate_value(ElectionOptions::new("j", Vec::new()).token(&[1]).as_slice()), Some(Vec::new()));
        assert_eq!(candidate_value(b"0123abcd"), None);
        assert_eq!(candidate_value(b"0g.12"), None);
        assert!(!t.contains(&b':'));
    }

    #[test]
    fn bad_names_and_values_name_the_field() {
        let field = |o: ElectionOptions| match o.lock_options() {
            Err(Misuse::Election { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(ElectionOptions::new("", "v")), "name");
        assert_eq!(field(ElectionOptions::new("a{b}", "v")), "name");
        assert_eq!(field(ElectionOptions::new("a".repeat(257), "v")), "name");
        assert_eq!(field(ElectionOptions::new("a", vec![0; 513])), "value");
        let lock = ElectionOptions::new("a", "v").wait(Duration::from_secs(3)).lock_options().unwrap();
        assert_eq!(lock.wait, Some(Duration::from_secs(3)));
        assert_eq!(ElectionOptions::new("a", "v").lock_options().unwrap().wait, Some(Duration::MAX));
    }

    #[test]
    fn a_quorum_of_holders_makes_the_leader() {
        let a = ElectionOptions::new("e", "a").token(&[1]);
        let b = ElectionOptions::new("e", "b").token(&[2]);
        let mut marked = a.clone();
        marked.push(b':');
        // Two of three hold a (one marked as waited for): a leads, at the largest counter two
        // nodes reached (a stale proposal of 9 reached one).
        let read = leader_of(&[node(Some(&a), 4), node(Some(&marked), 9), node(Some(&b), 3)], 2).unwrap();
        assert_eq!((read.value.as_slice(), read.epoch), (&b"a"[..], 4));
        // One each, or a node out of reach: nobody.
        assert_eq!(leader_of(&[node(Some(&a), 4), None, node(Some(&b), 3)], 2), None);
        assert_eq!(leader_of(&[node(None, 4), node(None, 4), node(Some(&b), 3)], 2), None);
        // Not fenced yet, or not a candidate's token: nobody.
        assert_eq!(leader_of(&[node(Some(&a), 0), node(Some(&a), 0)], 2), None);
        assert_eq!(leader_of(&[node(Some(b"plain"), 3), node(Some(b"plain"), 3)], 2), None);
    }

    #[test]
    fn observers_report_changes_with_growing_epochs() {
        let leader = |t: &str, epoch| Leader { value: Vec::new(), epoch, token: t.into() };
        let mut o = Observer::new();
        assert_eq!(o.update(None), None);
        assert_eq!(o.update(Some(leader("a", 3))), Some(LeaderChange::Elected(leader("a", 3))));
        assert_eq!(o.update(Some(leader("a", 3))), None);
        // b granted, its fence round not landed: still a's epoch, no change yet.
        assert_eq!(o.update(Some(leader("b", 3))), None);
        assert_eq!(o.update(Some(leader("b", 4))), Some(LeaderChange::Elected(leader("b", 4))));
        assert_eq!(o.update(None), Some(LeaderChange::Vacant));
        assert_eq!(o.update(None), None);
        assert_eq!(o.current(), None);
    }

    #[test]
    fn observers_read_again_soon_while_a_new_epoch_lands() {
        let leader = |t: &str, epoch| Leader { value: Vec::new(), epoch, token: t.into() };
        let poll = Duration::from_secs(1);
        let mut o = Observer::new();
        o.update(Some(leader("a", 3)));
        assert_eq!(o.next_read(poll), poll);
        o.update(Some(leader("a", 3)));
        assert_eq!(o.next_read(poll), poll, "the same leader: the poll");
        for _ in 0..SETTLE_READS {
            assert_eq!(o.update(Some(leader("b", 3))), None);
            assert_eq!(o.next_read(poll), SETTLE, "b's epoch is about to land");
        }
        o.update(Some(leader("b", 3)));
        assert_eq!(o.next_read(poll), poll, "after 200 reads in a row, the poll");
        assert!(o.update(Some(leader("b", 4))).is_some());
        assert_eq!(o.next_read(poll), poll);
        o.update(Some(leader("c", 4)));
        assert_eq!(o.next_read(poll), SETTLE);
        o.update(None);
        assert_eq!(o.next_read(poll), poll, "a read without a new holder ends the settling");
    }
}
