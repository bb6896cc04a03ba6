//! Observers' reads of an election: [`Engine::read_leader`] sends a read-only script to every
//! node (its lock key and fence counter, in one slot), and once every node answered, failed or
//! timed out, [`Event::LeaderRead`] says who leads ([`leader_of`]).

use std::collections::BTreeMap;
use std::time::Instant;

use super::Engine;
use super::cluster::cmd;
use crate::cluster::{self, Redirect};
use crate::election::{NodeElection, election_key, leader_of};
use crate::error::{Misuse, Vote};
use crate::event::{Event, NodeId, ReadId};
use crate::link::MAX_HOPS;
use crate::wire::Pending;

/// The read script: `counter value`, the value empty when there is no key.
const READ: &[u8] = b"local v = redis.call('GET', KEYS[1]) or ''
return (redis.call('GET', KEYS[2]) or '0') .. ' ' .. v";

/// At most this many reads in flight; more are refused (see [`Engine::read_leader`]).
const MAX_READS: usize = 1024;

/// What one node holds of an election: its lock key's value, if any, and its fence counter.
type View = (Option<Vec<u8>>, u64);

/// One read in flight: what each node said (`None`: no answer yet; `Err`: no usable one), the
/// command (sent again where a Redis Cluster node redirects it), and the redirects each node's
/// copy followed.
#[derive(Debug)]
struct Read {
    id: u32,
    deadline: Instant,
    answers: Vec<Option<Result<View, ()>>>,
    command: Vec<u8>,
    hops: Vec<u8>,
}

/// The reads in flight, and the elections observers watch.
#[derive(Debug, Default)]
pub(super) struct Reads {
    reads: Vec<Read>,
    next: u32,
    /// Watched wake channels: the election's name, and how many watch it.
    watched: BTreeMap<Vec<u8>, (String, u32)>,
}

impl Reads {
    /// Whether an observer watches `channel`.
    pub(super) fn watches(&self, channel: &[u8]) -> bool {
        self.watched.contains_key(channel)
    }

    /// The election whose wake channel `channel` is, if an observer watches it.
    pub(super) fn watched(&self, channel: &[u8]) -> Option<&str> {
        self.watched.get(channel).map(|(name, _)| name.as_str())
    }

    /// How many reads are in flight.
    pub(super) fn in_flight(&self) -> usize {
        self.reads.len()
    }

    /// How many elections are watched.
    pub(super) fn watching(&self) -> usize {
        self.watched.len()
    }

    /// The earliest deadline of a read in flight.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.reads.iter().map(|r| r.deadline).min()
    }
}

/// A vote that is not an answer, as a reason.
pub(super) fn vote_text(vote: &Vote) -> String {
    match vote {
        Vote::Error(e) | Vote::Misconfigured(e) => e.clone(),
        other => format!("{other:?}"),
    }
}

/// Parse the read script's `counter value`.
fn parse(reply: &[u8]) -> Option<View> {
    let at = reply.iter().position(|&b| b == b' ')?;
    let counter = std::str::from_utf8(&reply[..at]).ok()?.parse().ok()?;
    let value = &reply[at + 1..];
    Some(((!value.is_empty()).then(|| value.to_vec()), counter))
}

impl Engine {
    /// Read who leads the election `name` on every node at once (its lock key and its fence
    /// counter, both under the hash tag `{name}`): [`Event::LeaderRead`] gives the leader a
    /// quorum of the nodes hold, with its epoch ([`leader_of`]), once every node answered,
    /// failed, or took longer than the node timeout. Reads nothing else and writes nothing.
    ///
    /// Refused at once ([`Misuse::Election`]) for a name an election cannot have, and while
    /// 1,024 reads are in flight.
    pub fn read_leader(&mut self, now: Instant, name: &str) -> Result<ReadId, Misuse> {
        crate::ElectionOptions::new(name, Vec::new()).check()?;
        if self.reads.reads.len() >= MAX_READS {
            return Err(Misuse::Election { field: "reads", reason: "1,024 in flight: wait for their events" });
        }
        let key = format!("{}{}", self.config.key_prefix, election_key(name));
        let fence = format!("{}{}", self.config.fence_prefix, key);
        let mut plain = Vec::new();
        crate::resp::command(&mut plain, &[b"EVAL", READ, b"2", key.as_bytes(), fence.as_bytes()]);
        // Both keys carry the hash tag `{name}`: a cluster sends them as they are.
        let form = self.links.any_cluster().then(|| (plain.clone(), Ok(cluster::hash_slot(key.as_bytes()))));
        let id = self.reads.next;
        self.reads.next = self.reads.next.wrapping_add(1);
        let n = self.links.len();
        let deadline = now + self.config.node_timeout;
        let mut failed = Vec::new();
        self.links.broadcast(now, cmd(&plain, &form), Pending::Read { read: id }, |node, _| failed.push(node));
        self.reads.reads.push(Read { id, deadline, answers: vec![None; n], command: plain, hops: vec![0; n] });
        for node in failed {
            self.read_answered(now, NodeId(node as u16), id, Err(String::new()));
        }
        self.links.sync_all(now);
        Ok(ReadId(id))
    }

    /// Watch the election `name` (`on`), or stop watching it: while watched, every release
    /// message of its lock on its wake channel is reported as [`Event::LeaderWake`], so that an
    /// observer reads again at once instead of at its next poll. Counted: each `true` needs
    /// its `false`. With wake-ups off ([`Config::wake`](crate::Config::wake)) nothing is
    /// subscribed and no event comes.
    pub fn watch_leader(&mut self, now: Instant, name: &str, on: bool) -> Result<(), Misuse> {
        crate::ElectionOptions::new(name, Vec::new()).check()?;
        let key = format!("{}{}", self.config.key_prefix, election_key(name));
        let mut channel = Vec::new();
        crate::wake::channel(&mut channel, key.as_bytes());
        if on {
            let entry = self.reads.watched.entry(channel.clone()).or_insert_with(|| (name.to_owned(), 0));
            entry.1 += 1;
            if entry.1 == 1 && self.config.wake {
                // The key has a hash tag: its cluster form is itself, on the sharded channel.
                self.links.subscribe(&channel, false);
                if self.links.any_cluster() {
                    self.links.subscribe(&channel, true);
                }
            }
        } else if let Some(entry) = self.reads.watched.get_mut(&channel) {
            entry.1 -= 1;
            if entry.1 == 0 {
                self.reads.watched.remove(&channel);
                if self.waiters.on(&channel).is_empty() {
                    self.links.unsubscribe(&channel);
                }
            }
        }
        self.links.sync_all(now);
        Ok(())
    }

    /// The read `read`, sent on `link` (a link of `node`), was redirected by a Redis Cluster
    /// node whose slot moved or is moving: send it where the redirect says (behind `ASKING`
    /// for an `ASK`), up to [`MAX_HOPS`] times; then, or when it cannot go there, the node has
    /// no answer.
    pub(super) fn read_redirected(&mut self, now: Instant, link: NodeId, node: NodeId, read: u32, redirect: &Redirect) {
        let Some(r) = self.reads.reads.iter_mut().find(|r| r.id == read) else { return };
        let Some(hops) = r.hops.get_mut(node.index()) else { return };
        *hops = hops.saturating_add(1);
        if *hops > MAX_HOPS {
            let why = format!("more than {MAX_HOPS} cluster redirects: {redirect:?}");
            return self.read_answered(now, node, read, Err(why));
        }
        let command = r.command.clone();
        let sent = self.links.redirected(now, link.index(), redirect).and_then(|to| {
            self.links.send_asking(now, to, redirect.ask, Pending::Read { read }, |out| out.extend_from_slice(&command))
        });
        if let Err(vote) = sent {
            self.read_answered(now, node, read, Err(vote_text(&vote)));
        }
    }

    /// `node`'s answer to the read `read` (late answers are ignored); decides the read once
    /// every node has one.
    pub(super) fn read_answered(&mut self, _now: Instant, node: NodeId, read: u32, reply: Result<Vec<u8>, String>) {
        let Some(i) = self.reads.reads.iter().position(|r| r.id == read) else { return };
        let r = &mut self.reads.reads[i];
        if let Some(slot) = r.answers.get_mut(node.index()) {
            slot.get_or_insert(reply.ok().and_then(|b| parse(&b)).ok_or(()));
        }
        if r.answers.iter().all(Option::is_some) {
            self.decide_read(i);
        }
    }

    /// Decide every read whose deadline passed.
    pub(super) fn reads_due(&mut self, now: Instant) {
        while let Some(i) = self.reads.reads.iter().position(|r| r.deadline <= now) {
            self.decide_read(i);
        }
    }

    fn decide_read(&mut self, i: usize) {
        let r = self.reads.reads.swap_remove(i);
        let views: Vec<Option<NodeElection<'_>>> = r
            .answers
            .iter()
            .map(|a| match a {
                Some(Ok((holder, counter))) => Some(NodeElection { holder: holder.as_deref(), counter: *counter }),
                _ => None,
            })
            .collect();
        let leader = leader_of(&views, self.quorum);
        self.events.push_back(Event::LeaderRead { read: ReadId(r.id), leader });
    }
}
