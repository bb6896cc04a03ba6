//! A link's replies: the reply at the front of its input decoded and matched to the oldest
//! pending request, the handshake's answers dealt with; and the handshake itself, encoded once
//! per node.

use std::sync::Arc;
use std::time::Instant;

use super::Links;
use crate::cluster::{self, Redirect};
use crate::config::Config;
use crate::error::{LinkError, is_cluster_error};
use crate::event::{LockId, NodeId, WakeState};
use crate::node::REPLICAS_CHECK;
use crate::resp::{self, MAX_REPLY};
use crate::scripts;
use crate::wire::{self, Answer, Pending, Step, StepAnswer};

/// What the front of a link's input holds.
#[derive(Debug)]
pub(crate) enum Next {
    /// Not a whole reply yet.
    More,
    /// A reply of `used` bytes the link dealt with itself (a handshake step, a cleanup).
    Done(usize),
    /// The reply of `used` bytes completed the handshake: the node is ready.
    Ready(usize),
    /// The reply of `used` bytes refused a subscription: the node's waiters poll it now.
    WakeOff(usize),
    /// A reply of `used` bytes to a lock operation, for the engine.
    Op { used: usize, answer: Answer },
    /// A release message of `used` bytes on `channel` (the releaser's token in `data`).
    Message { used: usize, channel: Vec<u8>, data: Vec<u8> },
    /// A reply of `used` bytes redirecting `pending` to another master of a Redis Cluster.
    Redirect { used: usize, pending: Pending, redirect: Redirect },
    /// The reply of `used` bytes on a Sentinel-managed node's watch link announced a new
    /// master: the node's link `link`, to the old one, fails with `error`.
    Switched { used: usize, link: NodeId, error: LinkError },
    /// The link connects elsewhere now (a Sentinel-managed node's link that asked a sentinel):
    /// its connection is closed, without a failure, and the rest of its input is void.
    Moved,
    /// The reply of `used` bytes showed the node is a Redis Cluster: the requests that waited
    /// for it (`dropped`, encoded with the keys as they are) were never sent, and its map is
    /// being read.
    Cluster { used: usize, dropped: Vec<Pending> },
}

impl Links {
    /// Decode the reply at the front of `buf` and match it to the oldest pending request.
    /// Handshake replies and cleanups are dealt with here; `Err` is a reason to fail the link.
    ///
    /// A lock operation's answer, the common case, goes straight through; the handshake's
    /// steps and the subscriptions' answers go to [`on_link_answer`](Self::on_link_answer).
    #[inline]
    pub(crate) fn next_reply(&mut self, now: Instant, link: NodeId, buf: &[u8]) -> Result<Next, LinkError> {
        let node = self.owner(link);
        let i = link.index();
        if self.links[i].watch {
            return self.read_watch(now, link, buf);
        }
        // Replies read from their raw frame, by what they answer.
        match (self.links[i].pending.front().map(|(p, _)| *p), buf.first()) {
            (Some(front @ (Pending::Slots | Pending::Step(Step::Slots))), Some(b'*' | b'-')) => {
                if let Some(next) = self.read_map_answer(now, link, front, buf)? {
                    return Ok(next);
                }
            }
            (Some(Pending::Replicas { lock, round }), Some(b'*')) => {
                return self.read_waitaof(now, link, lock, round, buf);
            }
            (Some(Pending::Role | Pending::Step(Step::Role)), Some(b'*')) => return self.read_role(now, link, buf),
            (Some(Pending::Step(Step::SentinelMaster)), Some(_)) => return self.read_sentinel_answer(now, link, buf),
            _ => {}
        }
        let Some((reply, used)) = self.decode_front(link, buf)? else { return Ok(Next::More) };
        if let resp::Reply::Error(e) = reply {
            // A Sentinel-managed node's master that is not one any more.
            if let Some(error) = self.demoted(link, e) {
                return Err(error);
            }
        }
        if let resp::Reply::Push { kind, channel, data } = reply {
            if kind.eq_ignore_ascii_case(b"message") || kind.eq_ignore_ascii_case(b"smessage") {
                return Ok(Next::Message { used, channel: channel.to_vec(), data: data.to_vec() });
            }
            if kind.eq_ignore_ascii_case(b"sunsubscribe") {
                // Asked for or not (the master no longer serves the channel's slot), the
                // subscription is gone (see `Pending::Ping`).
                self.shard_dropped(now, i, Some(channel), cluster::hash_slot(channel));
                return Ok(Next::Done(used));
            }
        }
        if !matches!(reply, resp::Reply::Error(_)) {
            // The `PING`'s answer: the `SUNSUBSCRIBE`s ahead of it were answered by pushes.
            let l = &mut self.links[i];
            while matches!(l.pending.front(), Some((Pending::Unsubscribe { sharded: true }, _))) {
                l.pending.pop_front();
            }
        }
        let l = &mut self.links[i];
        let Some((pending, queued)) = l.pending.pop_front() else {
            let addr = Arc::clone(&self.addrs[i]);
            return Err(LinkError::Unsolicited { node, addr, reply: reply.render() });
        };
        l.stats.reply(now, now.saturating_duration_since(queued), self.on_time);
        l.answered = true;
        if let (resp::Reply::Error(e), Pending::Op { .. } | Pending::Resend { .. } | Pending::Read { .. }) =
            (&reply, pending)
        {
            if let Some(redirect) = cluster::redirect(e) {
                // Only a Redis Cluster redirects: a node not known as one is.
                self.became_cluster(now, node.index());
                return Ok(Next::Redirect { used, pending, redirect });
            }
        }
        if let (resp::Reply::Error(e), Pending::Resend { copy }) = (&reply, pending) {
            // The cleanup's slot is migrating: it goes again shortly.
            if e.starts_with(b"TRYAGAIN") && self.try_again(now, i, copy) {
                return Ok(Next::Done(used));
            }
        }
        if let Pending::Resend { copy } = pending {
            // The kept cleanup was answered (not redirected): nothing to send again.
            self.copies.remove(&copy);
        }
        if pending == Pending::Slots {
            // A map refresh refused or answered with garbage: the old map stays.
            self.apply_map(now, i, Err(reply.render()));
            return Ok(Next::Done(used));
        }
        let answer = wire::classify(pending, &reply).map_err(|request| LinkError::Unexpected {
            node,
            addr: Arc::clone(&self.addrs[i]),
            request,
            reply: reply.render(),
        })?;
        match answer {
            Answer::Op { .. } | Answer::Replicas { .. } | Answer::Read { .. } => Ok(Next::Op { used, answer }),
            answer => self.on_link_answer(now, link, pending, answer, used),
        }
    }

    /// The reply at the front of `buf`, whole, and its length (`None`: not whole yet). `Err`:
    /// it is malformed, or longer than any reply may be.
    #[inline]
    fn decode_front<'b>(&self, link: NodeId, buf: &'b [u8]) -> Result<Option<(resp::Reply<'b>, usize)>, LinkError> {
        let malformed = |detail| LinkError::Malformed {
            node: self.owner(link),
            addr: Arc::clone(&self.addrs[link.index()]),
            detail,
        };
        match resp::decode(buf) {
            Ok(Some(whole)) => Ok(Some(whole)),
            Ok(None) if buf.len() > MAX_REPLY => {
                Err(malformed(format!("a reply longer than {MAX_REPLY} bytes without an end")))
            }
            Ok(None) => Ok(None),
            Err(mut detail) => {
                let l = &self.links[link.index()];
                // A TLS record (an alert, a handshake) where a plaintext reply belongs.
                if l.plain_tcp && !l.answered && matches!(buf.first(), Some(0x15 | 0x16)) {
                    detail.push_str(": a TLS record: is this a TLS port? (use rediss:// for it)");
                }
                Err(malformed(detail))
            }
        }
    }

    /// The answer to `CLUSTER SHARDS` (or `SLOTS`), `front` on `link`: a map read whole, or a
    /// refusal of `CLUSTER SHARDS` (asked again as `CLUSTER SLOTS`). `None`: a reply for the
    /// common path (any other error).
    fn read_map_answer(
        &mut self,
        now: Instant,
        link: NodeId,
        front: Pending,
        buf: &[u8],
    ) -> Result<Option<Next>, LinkError> {
        if buf.first() == Some(&b'*') {
            return self.read_slots(now, link, buf).map(Some);
        }
        let Ok(Some((_, used))) = resp::decode(buf) else { return Ok(None) };
        let first = front == Pending::Step(Step::Slots);
        if !self.shards_refused(now, link.index(), first) {
            return Ok(None);
        }
        // An older server, or an ACL without it: `CLUSTER SLOTS` instead.
        self.links[link.index()].pending.pop_front();
        Ok(Some(Next::Done(used)))
    }

    /// `WAITAOF`'s answer to `lock`'s round `round` at the front of `buf`: the local and the
    /// replica counts that have the writes on disk.
    fn read_waitaof(
        &mut self,
        now: Instant,
        link: NodeId,
        lock: LockId,
        round: u32,
        buf: &[u8],
    ) -> Result<Next, LinkError> {
        let used = match resp::frame_len(buf, 3, 64) {
            Ok(Some(used)) => used,
            Ok(None) => return Ok(Next::More),
            Err(detail) => {
                let (node, addr) = (self.owner(link), Arc::clone(&self.addrs[link.index()]));
                return Err(LinkError::Malformed { node, addr, detail });
            }
        };
        let l = &mut self.links[link.index()];
        if let Some((_, queued)) = l.pending.pop_front() {
            l.stats.reply(now, now.saturating_duration_since(queued), self.on_time);
        }
        let acked = aof_replicas(&buf[..used]);
        Ok(Next::Op { used, answer: Answer::Replicas { lock, round, acked } })
    }

    /// An answer (`used` bytes) to `pending` on `link` that the link deals with itself: a
    /// handshake step (its node's kind, its wake-ups, its scripts) or a subscription's.
    fn on_link_answer(
        &mut self,
        now: Instant,
        link: NodeId,
        pending: Pending,
        answer: Answer,
        used: usize,
    ) -> Result<Next, LinkError> {
        let (i, node) = (link.index(), self.owner(link));
        let cluster = self.is_cluster(node.index());
        let addr = Arc::clone(&self.addrs[i]);
        let refused = |step: Step, message| LinkError::Handshake { node, addr, step: step.name(), message };
        let link = &mut self.links[i];
        match answer {
            Answer::Step(Step::Hello, hello) if i >= self.nodes => {
                // A link to a cluster node's master: it carries the release messages of the
                // master's slots.
                link.wake = match hello {
                    StepAnswer::Refused(message) => {
                        WakeState::Polling { reason: format!("HELLO 3 refused: {message}") }
                    }
                    _ if link.wake == WakeState::Unknown => WakeState::On,
                    _ => link.wake.clone(),
                };
                self.release_held(now, i);
            }
            Answer::Step(Step::Hello, StepAnswer::Ok) => {
                // RESP3 from here on: subscribe to what the waiters need, then send what was
                // issued meanwhile (unless the format check showed a cluster).
                if link.wake == WakeState::Unknown {
                    link.wake = WakeState::On;
                }
                if cluster {
                    return Ok(self.cluster_found(now, i, used));
                }
                self.release_held(now, i);
            }
            Answer::Step(Step::Hello, StepAnswer::Cluster(_)) => {
                if link.wake == WakeState::Unknown {
                    link.wake = WakeState::On;
                }
                return Ok(self.cluster_found(now, i, used));
            }
            Answer::Step(Step::Format, StepAnswer::Cluster(_)) => {
                // The format key is in another master's slot: a Redis Cluster, whose map is read
                // once HELLO has answered (requests wait for it).
                self.mark_cluster(node.index());
            }
            Answer::Step(Step::Hello, StepAnswer::Refused(message)) => {
                if link.wake == WakeState::Unknown {
                    link.wake = WakeState::Polling { reason: format!("HELLO 3 refused: {message}") };
                }
                if cluster {
                    return Ok(self.cluster_found(now, i, used));
                }
                // Without HELLO's mode, INFO says whether the node is a cluster; requests
                // wait for its answer.
                resp::command(&mut link.out, &[b"INFO", b"cluster"]);
                link.pending.push_back((Pending::Step(Step::ClusterInfo), now));
            }
            Answer::Step(Step::ClusterInfo, StepAnswer::Cluster(_)) => return Ok(self.cluster_found(now, i, used)),
            Answer::Step(Step::ClusterInfo, _) => {
                self.release_held(now, i);
                return Ok(Next::Ready(self.ready(i, used)));
            }
            Answer::SubscribeRefused(message) if is_cluster_error(&message) => {
                // A sharded subscription the master does not serve now: `MOVED` moves its slot
                // (and the subscription with it); a slot in flux is tried again later.
                if let Pending::Subscribe { shard: Some(slot) } = pending {
                    match cluster::redirect(message.as_bytes()) {
                        Some(redirect) if !redirect.ask => drop(self.redirected(now, i, &redirect)),
                        _ => self.shard_dropped(now, i, None, slot),
                    }
                }
            }
            Answer::SubscribeRefused(message) => {
                let was_on = link.wake == WakeState::On;
                // (A cluster node whose waiters poll already, through another master, is no
                // news.)
                let news = was_on && !matches!(self.wake_state(node), Some(WakeState::Polling { .. }));
                self.links[i].wake = WakeState::Polling { reason: format!("{} refused: {message}", pending.name()) };
                if news {
                    return Ok(Next::WakeOff(used));
                }
            }
            Answer::Op { .. }
            | Answer::Replicas { .. }
            | Answer::Read { .. }
            | Answer::Ignored
            | Answer::Step(_, StepAnswer::Ok) => {}
            Answer::Step(Step::Format, StepAnswer::Refused(message)) if message.contains("unknown command 'EVAL'") => {
                // What a Redis Sentinel answers: it runs no scripts.
                let message = format!(
                    "this looks like a sentinel, not a data node (it does not know EVAL): give the master it \
                     watches as redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE ({message})"
                );
                return Err(refused(Step::Format, message));
            }
            Answer::Step(step, StepAnswer::Refused(message) | StepAnswer::Cluster(message)) => {
                return Err(refused(step, message));
            }
            Answer::Step(step, StepAnswer::Digest { matches: false }) => {
                let message = "the server's script digest differs from the expected one".to_owned();
                return Err(refused(step, message));
            }
            Answer::Step(step, StepAnswer::Digest { matches: true }) => {
                let later = |p: &Pending| matches!(p, Pending::Step(Step::Slots | Step::ClusterInfo));
                let map_next =
                    link.pending.iter().any(|(p, _)| later(p)) || link.held_pending.iter().any(|(p, _)| later(p));
                if let Step::ScriptLoad { last: true, .. } = step {
                    if map_next {
                        // Ready once the node's kind is known (and a cluster's map read).
                        return Ok(Next::Done(used));
                    }
                    return Ok(Next::Ready(self.ready(i, used)));
                }
            }
        }
        Ok(Next::Done(used))
    }
}

impl Links {
    /// The handshake of node link `link` showed a Redis Cluster: drop the requests held behind
    /// it (their keys are not in the cluster form), stop holding, read the map.
    fn cluster_found(&mut self, now: Instant, link: usize, used: usize) -> Next {
        self.mark_cluster(link);
        let l = &mut self.links[link];
        l.held.clear();
        let dropped = l.held_pending.drain(..).map(|(p, _)| p).collect();
        self.release_held(now, link);
        self.read_map(now, link, true);
        Next::Cluster { used, dropped }
    }

    /// The handshake of `link` is over: it is healthy again. Returns `used`.
    pub(super) fn ready(&mut self, link: usize, used: usize) -> usize {
        let link = &mut self.links[link];
        link.last_error = None;
        link.attempts_ended += 1;
        link.stats.connects += 1;
        used
    }

    /// The reply to `CLUSTER SHARDS` (or `SLOTS`) at the front of `buf`, read whole and applied.
    fn read_slots(&mut self, now: Instant, link: NodeId, buf: &[u8]) -> Result<Next, LinkError> {
        let (i, node) = (link.index(), self.owner(link));
        let addr = Arc::clone(&self.addrs[i]);
        let used = match resp::frame_len(buf, cluster::MAX_RANGES * 16, MAX_MAP_REPLY) {
            Ok(Some(used)) => used,
            Ok(None) => return Ok(Next::More),
            Err(detail) => return Err(LinkError::Malformed { node, addr, detail }),
        };
        let Some((pending, queued)) = self.links[i].pending.pop_front() else { return Ok(Next::More) };
        self.links[i].stats.reply(now, now.saturating_duration_since(queued), self.on_time);
        let map = match self.map_parser(i) {
            (true, tls) => cluster::parse_shards(&buf[..used], tls),
            (false, _) => cluster::parse_slots(&buf[..used]),
        };
        if pending == Pending::Slots {
            self.apply_map(now, i, map);
            return Ok(Next::Done(used));
        }
        if let Err(message) = map {
            // The read is over (its request is off the queue): read again soon, or the node
            // would never read its map again.
            self.map_lost(i);
            let message = format!("its answer does not read as a slot map: {message}");
            return Err(LinkError::Handshake { node, addr, step: Step::Slots.name(), message });
        }
        self.apply_map(now, i, map);
        Ok(Next::Ready(self.ready(i, used)))
    }
}

impl Links {
    /// The answer to `ROLE` at the front of `buf` (an array), read whole: a node with fewer
    /// replicas online than its [`min_replicas`](crate::NodeConfig::min_replicas) fails its
    /// link ([`LinkError::Replicas`]); else the next check is due in [`REPLICAS_CHECK`].
    fn read_role(&mut self, now: Instant, link: NodeId, buf: &[u8]) -> Result<Next, LinkError> {
        let (i, node) = (link.index(), self.owner(link));
        let addr = Arc::clone(&self.addrs[i]);
        let used = match resp::frame_len(buf, 4 * MAX_ROLE_REPLICAS + 8, MAX_MAP_REPLY) {
            Ok(Some(used)) => used,
            Ok(None) => return Ok(Next::More),
            Err(detail) => return Err(LinkError::Malformed { node, addr, detail }),
        };
        let cluster = self.is_cluster(node.index());
        let not_a_master = self.not_a_master(link);
        let l = &mut self.links[i];
        if let Some((_, queued)) = l.pending.pop_front() {
            l.stats.reply(now, now.saturating_duration_since(queued), self.on_time);
        }
        let sentinel = l.discovery.is_some();
        if l.min_replicas.is_none() && !sentinel || cluster {
            // A Redis Cluster's seed may be any of its nodes: its masters' replicas count.
            return Ok(Next::Done(used));
        }
        let (online, is_replica) = role_replicas(&buf[..used]).map_err(|reply| LinkError::Unexpected {
            node,
            addr: Arc::clone(&addr),
            request: "ROLE",
            reply,
        })?;
        if let (true, Some(error)) = (is_replica, not_a_master) {
            // The master the sentinels named is a replica (now): no vote counts from it.
            return Err(error);
        }
        let Some(min) = l.min_replicas else {
            // A Sentinel-managed node's master: asked again for a demotion.
            l.role_at = Some(now + REPLICAS_CHECK);
            return Ok(Next::Done(used));
        };
        l.replicas_online = Some(online);
        if online < min.replicas {
            return Err(LinkError::Replicas { node, addr, min_replicas: min.replicas, online, is_replica });
        }
        l.role_at = Some(now + REPLICAS_CHECK);
        Ok(Next::Done(used))
    }
}

/// Replicas a `ROLE` answer may list that are walked to find its end.
const MAX_ROLE_REPLICAS: usize = 1024;

/// The replicas online of a whole `ROLE` answer, and whether the node is a replica itself
/// (`*3 $6 master :offset *N ...`: N replicas; `*5 $5 slave ...`: a replica, none). `Err`: a
/// rendering of an answer that is neither.
fn role_replicas(frame: &[u8]) -> Result<(u32, bool), String> {
    let unexpected = || String::from_utf8_lossy(&frame[..frame.len().min(120)]).trim_end().to_owned();
    let Ok(Some((resp::Reply::Array(_), at))) = resp::decode(frame) else { return Err(unexpected()) };
    let Ok(Some((resp::Reply::Bulk(role), used))) = resp::decode(&frame[at..]) else { return Err(unexpected()) };
    match role {
        b"master" => {}
        b"slave" | b"replica" => return Ok((0, true)),
        _ => return Err(unexpected()),
    }
    let at = at + used;
    let Ok(Some((resp::Reply::Int(_), used))) = resp::decode(&frame[at..]) else { return Err(unexpected()) };
    match resp::decode(&frame[at + used..]) {
        Ok(Some((resp::Reply::Array(n), _))) => Ok((u32::try_from(n).unwrap_or(u32::MAX), false)),
        _ => Err(unexpected()),
    }
}

/// The replica count of a whole `WAITAOF` answer (`*2 :local :replicas`), read with the
/// decoder element by element.
fn aof_replicas(frame: &[u8]) -> Result<i64, String> {
    let unexpected = || format!("WAITAOF: an unexpected reply {:?}", String::from_utf8_lossy(frame).trim_end());
    let Ok(Some((resp::Reply::Array(2), mut at))) = resp::decode(frame) else { return Err(unexpected()) };
    let mut counts = [0; 2];
    for count in &mut counts {
        let Ok(Some((resp::Reply::Int(n), used))) = resp::decode(&frame[at..]) else { return Err(unexpected()) };
        (*count, at) = (n, at + used);
    }
    Ok(counts[1])
}

/// The longest slot map answer read: a few hundred bytes per slot range.
const MAX_MAP_REPLY: usize = 4 << 20;

/// The handshake of a link to a master of cluster node `node`: AUTH as the node needs it,
/// HELLO 3 when wake-ups are on (the link carries the release messages of the master's
/// slots), CLIENT SETNAME (with a client name) and the SCRIPT LOADs. (A cluster has no
/// databases but 0, and takes no lock format key in every slot.)
pub(super) fn master_handshake(config: &Config, node: &crate::NodeConfig) -> (Vec<u8>, Vec<Step>) {
    let mut out = Vec::new();
    let mut steps = Vec::new();
    auth(&mut out, &mut steps, node);
    if config.wake {
        resp::command(&mut out, &[b"HELLO", b"3"]);
        steps.push(Step::Hello);
    }
    set_name(&mut out, &mut steps, config);
    load_scripts(&mut out, &mut steps);
    (out, steps)
}

fn auth(out: &mut Vec<u8>, steps: &mut Vec<Step>, node: &crate::NodeConfig) {
    if let Some(pass) = &node.password {
        match &node.user {
            Some(user) => resp::command(out, &[b"AUTH", user.as_bytes(), pass.as_bytes()]),
            None => resp::command(out, &[b"AUTH", pass.as_bytes()]),
        }
        steps.push(Step::Auth);
    }
}

fn set_name(out: &mut Vec<u8>, steps: &mut Vec<Step>, config: &Config) {
    if let Some(name) = &config.client_name {
        resp::command(out, &[b"CLIENT", b"SETNAME", name.as_bytes()]);
        steps.push(Step::SetName);
    }
}

fn load_scripts(out: &mut Vec<u8>, steps: &mut Vec<Step>) {
    let scripts = [
        (scripts::ACQUIRE, scripts::ACQUIRE_SHA),
        (scripts::EXTEND, scripts::EXTEND_SHA),
        (scripts::RELEASE, scripts::RELEASE_SHA),
        (scripts::FENCE, scripts::FENCE_SHA),
        (scripts::RELEASE_ONE, scripts::RELEASE_ONE_SHA),
    ];
    for (i, (script, sha)) in scripts.into_iter().enumerate() {
        resp::command(out, &[b"SCRIPT", b"LOAD", script.as_bytes()]);
        steps.push(Step::ScriptLoad { sha, last: i == scripts.len() - 1 });
    }
}

/// The handshake of one node: AUTH and SELECT as it needs them, ROLE (a Sentinel-managed
/// node's master), then the lock format check, HELLO 3, CLIENT SETNAME (with a client name),
/// ROLE (with `min_replicas`) and the five SCRIPT LOADs.
pub(super) fn handshake(config: &Config, node: &crate::NodeConfig) -> (Vec<u8>, Vec<Step>) {
    let mut out = Vec::new();
    let mut steps = Vec::new();
    auth(&mut out, &mut steps, node);
    if node.db != 0 {
        resp::array(&mut out, 2);
        resp::bulk(&mut out, b"SELECT");
        resp::bulk_uint(&mut out, node.db.into());
        steps.push(Step::Select);
    }
    if node.sentinel.is_some() {
        // The master the sentinels named must be one before anything is written to it.
        resp::command(&mut out, &[b"ROLE"]);
        steps.push(Step::Role);
    }
    // The lock format of the node (of its database): another than ours fails the handshake.
    resp::command(
        &mut out,
        &[b"EVAL", scripts::FORMAT_CHECK.as_bytes(), b"1", scripts::FORMAT_KEY.as_bytes(), scripts::FORMAT.as_bytes()],
    );
    steps.push(Step::Format);
    // Always: its answer says whether the node is a Redis Cluster, before any request goes out
    // (with wake-ups off the connection speaks RESP3 and subscribes to nothing).
    resp::command(&mut out, &[b"HELLO", b"3"]);
    steps.push(Step::Hello);
    set_name(&mut out, &mut steps, config);
    if node.min_replicas.is_some() && node.sentinel.is_none() {
        // Its grants count only once replicas have them: a primary without them is no use.
        resp::command(&mut out, &[b"ROLE"]);
        steps.push(Step::Role);
    }
    load_scripts(&mut out, &mut steps);
    (out, steps)
}
