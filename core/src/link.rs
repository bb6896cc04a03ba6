//! The per-node links: where each connection stands, its buffers and FIFO of pending replies,
//! its handshake, and the reconnect schedule (connect deadlines, backoff with jitter).

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::{Fault, LinkError, Vote};
use crate::event::{Event, LinkState, NodeId, WakeState};
use crate::health::{NodeHealth, NodeState};
use crate::lock::min_opt;
use crate::resp::{self, MAX_REPLY};
use crate::rng::Rng;
use crate::scripts;
use crate::stats::NodeStats;
use crate::wire::{self, Answer, Pending, Step, StepAnswer};

/// Requests a link may have in flight; beyond it the node counts as failed for new rounds
/// (a node this far behind is silent, and its backlog must not grow without bound).
pub(crate) const MAX_PENDING: usize = 4096;
/// Unsent bytes a link may hold before the node counts as failed for new rounds (one command
/// of any size is always accepted on an empty buffer).
pub(crate) const MAX_UNSENT: usize = 4 << 20;
/// Wake channels subscribed at once (one per resource with a waiter); waiters on more
/// resources than this poll.
pub(crate) const MAX_CHANNELS: usize = 1024;

/// One node's connection.
#[derive(Debug)]
struct Link {
    state: LinkState,
    /// The delay before the next connect attempt after a failure; doubles per failure.
    backoff: Duration,
    /// Bytes to send; `out[out_pos..]` is still unsent.
    out: Vec<u8>,
    out_pos: usize,
    /// Requests on the wire, oldest first, each with the time it was queued.
    pending: VecDeque<(Pending, Instant)>,
    /// The start of a reply whose end has not arrived yet.
    inbuf: Vec<u8>,
    /// Why the last connect attempt or connection failed (a link error), and its kind, until a
    /// handshake completes again.
    last_error: Option<(Fault, String)>,
    /// Connect attempts that have ended: by completing the handshake, or by failing (to
    /// connect, or before the handshake was answered).
    attempts_ended: u64,
    /// What has been seen of the node.
    stats: NodeStats,
    /// Whether this connection carries release messages (after `HELLO 3`).
    wake: WakeState,
}

impl Link {
    fn is_up(&self) -> bool {
        matches!(self.state, LinkState::Up { .. })
    }

    /// Up with its handshake still unanswered (the handshake is queued first).
    fn is_handshaking(&self) -> bool {
        self.is_up() && matches!(self.pending.front(), Some((Pending::Step(_), _)))
    }

    /// Whether the link takes new requests: up, and not too far behind.
    fn takes_requests(&self) -> bool {
        self.is_up() && self.pending.len() < MAX_PENDING && self.out.len() - self.out_pos < MAX_UNSENT
    }

    /// The vote of a node whose link does not take requests.
    fn down_vote(&self) -> Vote {
        match &self.last_error {
            _ if self.is_up() => Vote::Error(format!(
                "backlog full: {} requests unanswered, {} bytes unsent",
                self.pending.len(),
                self.out.len() - self.out_pos
            )),
            Some((Fault::Misconfigured, e)) => Vote::Misconfigured(e.clone()),
            Some((_, e)) => Vote::Error(e.clone()),
            None => Vote::Down,
        }
    }

    /// Until when the oldest unanswered request may wait: `liveness` after it was queued, or
    /// `connect_timeout` for a handshake step.
    fn silent_at(&self, policy: &Policy) -> Option<(Instant, bool)> {
        let (pending, at) = self.pending.front()?;
        let handshake = matches!(pending, Pending::Step(_));
        let limit = if handshake { policy.connect_timeout } else { policy.liveness };
        Some((*at + limit, handshake))
    }

    /// Forget the connection: buffers emptied, pending requests returned.
    fn reset(&mut self, state: LinkState) -> VecDeque<(Pending, Instant)> {
        self.state = state;
        self.out.clear();
        self.out_pos = 0;
        self.inbuf.clear();
        if self.wake == WakeState::On {
            self.wake = WakeState::Unknown;
        }
        std::mem::take(&mut self.pending)
    }
}

/// The reconnect and liveness policy, from [`Config`].
#[derive(Clone, Copy, Debug)]
struct Policy {
    connect_timeout: Duration,
    min: Duration,
    max: Duration,
    jitter: f64,
    liveness: Duration,
}

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
}

/// Every node's link.
#[derive(Debug)]
pub(crate) struct Links {
    links: Vec<Link>,
    /// Each node's address without its password, for link errors and votes.
    addrs: Arc<[Arc<str>]>,
    /// Each node's handshake (AUTH, SELECT, CLIENT SETNAME, SCRIPT LOAD), encoded once.
    handshakes: Vec<(Vec<u8>, Vec<Step>)>,
    policy: Policy,
    /// Nodes whose connection or connect attempt the driver must drop.
    closes: VecDeque<NodeId>,
    /// The wake channels waiters need, subscribed on every link whose wake state is on.
    channels: BTreeSet<Vec<u8>>,
}

impl Links {
    /// Links for `config.nodes`, all down and due for a first connect at once.
    pub(crate) fn new(config: &Config) -> Self {
        let links = config
            .nodes
            .iter()
            .map(|_| Link {
                state: LinkState::Down { retry_at: None },
                backoff: config.reconnect_min,
                out: Vec::new(),
                out_pos: 0,
                pending: VecDeque::new(),
                inbuf: Vec::new(),
                last_error: None,
                attempts_ended: 0,
                stats: NodeStats::default(),
                wake: if config.wake {
                    WakeState::Unknown
                } else {
                    WakeState::Polling { reason: "wake-ups are off in the config".to_owned() }
                },
            })
            .collect();
        let addrs = config.nodes.iter().map(|c| Arc::from(c.to_string())).collect();
        let handshakes = config.nodes.iter().map(|node| handshake(config, node)).collect();
        let policy = Policy {
            connect_timeout: config.connect_timeout,
            min: config.reconnect_min,
            max: config.reconnect_max,
            jitter: config.reconnect_jitter,
            liveness: config.liveness(),
        };
        Links { links, addrs, handshakes, policy, closes: VecDeque::new(), channels: BTreeSet::new() }
    }

    // ----- getters -------------------------------------------------------------------------

    pub(crate) fn len(&self) -> usize {
        self.links.len()
    }

    pub(crate) fn state(&self, node: NodeId) -> Option<LinkState> {
        self.links.get(node.index()).map(|l| l.state)
    }

    pub(crate) fn is_up(&self, node: NodeId) -> bool {
        self.links.get(node.index()).is_some_and(Link::is_up)
    }

    pub(crate) fn is_ready(&self, node: NodeId) -> bool {
        self.links.get(node.index()).is_some_and(|l| l.is_up() && !l.is_handshaking())
    }

    pub(crate) fn last_error(&self, node: NodeId) -> Option<(Fault, &str)> {
        let (fault, text) = self.links.get(node.index())?.last_error.as_ref()?;
        Some((*fault, text))
    }

    pub(crate) fn in_flight(&self, node: NodeId) -> usize {
        self.links.get(node.index()).map_or(0, |l| l.pending.len())
    }

    pub(crate) fn attempts_ended(&self, node: NodeId) -> u64 {
        self.links.get(node.index()).map_or(0, |l| l.attempts_ended)
    }

    pub(crate) fn stats(&self, node: NodeId) -> Option<&NodeStats> {
        self.links.get(node.index()).map(|l| &l.stats)
    }

    /// Count a failure of `kind` on `node` (an error reply, a timed-out vote's absence is
    /// counted by [`timed_out`](Self::timed_out)).
    pub(crate) fn count_fault(&mut self, node: NodeId, kind: Fault) {
        if let Some(l) = self.links.get_mut(node.index()) {
            l.stats.fault(kind);
        }
    }

    /// `node` did not answer a round within the node timeout.
    pub(crate) fn timed_out(&mut self, node: usize) {
        if let Some(l) = self.links.get_mut(node) {
            l.stats.timeouts += 1;
        }
    }

    /// Every node's health.
    pub(crate) fn health(&self) -> Vec<NodeHealth> {
        self.links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let handshaking = l.is_handshaking();
                let state = match l.state {
                    LinkState::Up { .. } if handshaking => NodeState::Handshaking,
                    LinkState::Up { .. } => NodeState::Ready,
                    LinkState::Connecting { .. } => NodeState::Connecting,
                    LinkState::Down { retry_at } => NodeState::Down { retry_at },
                };
                NodeHealth {
                    node: NodeId(i as u16),
                    addr: Arc::clone(&self.addrs[i]),
                    state,
                    last_error: l.last_error.as_ref().map(|(_, e)| e.clone()),
                    fault: l.last_error.as_ref().map(|(f, _)| *f),
                    stats: l.stats.clone(),
                    wake: l.wake.clone(),
                }
            })
            .collect()
    }

    pub(crate) fn addr(&self, node: NodeId) -> Arc<str> {
        Arc::clone(&self.addrs[node.index()])
    }

    pub(crate) fn addr_of(&self, node: NodeId) -> Option<&str> {
        self.addrs.get(node.index()).map(|a| &**a)
    }

    pub(crate) fn wake_state(&self, node: NodeId) -> Option<&WakeState> {
        self.links.get(node.index()).map(|l| &l.wake)
    }

    /// Links whose release messages arrive now.
    pub(crate) fn waking(&self) -> usize {
        self.links.iter().filter(|l| l.wake == WakeState::On && l.is_up()).count()
    }

    /// Subscribe every link that carries release messages to `channel`; `false` if the cap
    /// of channels is reached (the waiters on it poll).
    pub(crate) fn subscribe(&mut self, now: Instant, channel: &[u8]) -> bool {
        if self.channels.contains(channel) {
            return true;
        }
        if self.channels.len() >= MAX_CHANNELS {
            return false;
        }
        self.channels.insert(channel.to_vec());
        for link in self.links.iter_mut().filter(|l| l.wake == WakeState::On && l.takes_requests()) {
            resp::command(&mut link.out, &[b"SUBSCRIBE", channel]);
            link.pending.push_back((Pending::Subscribe, now));
        }
        true
    }

    /// No waiter needs `channel` any more: unsubscribe.
    pub(crate) fn unsubscribe(&mut self, now: Instant, channel: &[u8]) {
        if !self.channels.remove(channel) {
            return;
        }
        for link in self.links.iter_mut().filter(|l| l.wake == WakeState::On && l.takes_requests()) {
            resp::command(&mut link.out, &[b"UNSUBSCRIBE", channel]);
            link.pending.push_back((Pending::Unsubscribe, now));
        }
    }

    /// Every node's address, by node.
    pub(crate) fn addrs(&self) -> Arc<[Arc<str>]> {
        Arc::clone(&self.addrs)
    }

    /// The earliest reconnect time, connect deadline or liveness deadline of any link (the
    /// deadline [`Link::silent_at`] gives for its oldest request).
    ///
    /// Drivers ask after every batch of events, so this takes the oldest request of each
    /// kind first and adds its limit once, instead of computing every link's deadline.
    pub(crate) fn wake(&self) -> Option<Instant> {
        let (mut other, mut step, mut op) = (None, None, None);
        for l in &self.links {
            match l.state {
                LinkState::Down { retry_at } => other = min_opt(other, retry_at),
                LinkState::Connecting { deadline } => other = min_opt(other, Some(deadline)),
                LinkState::Up { .. } => match l.pending.front() {
                    Some((Pending::Step(_), at)) => step = min_opt(step, Some(*at)),
                    Some((_, at)) => op = min_opt(op, Some(*at)),
                    None => {}
                },
            }
        }
        let step = step.map(|at| at + self.policy.connect_timeout);
        let op = op.map(|at| at + self.policy.liveness);
        min_opt(other, min_opt(step, op))
    }

    // ----- connection lifecycle -------------------------------------------------------------

    /// A connection to `node` is open: queue its handshake; later requests are pipelined
    /// behind it. The caller has taken down an older connection first.
    pub(crate) fn connected(&mut self, now: Instant, node: NodeId) {
        let i = node.index();
        let link = &mut self.links[i];
        link.reset(LinkState::Up { since: now });
        let (bytes, steps) = &self.handshakes[i];
        link.out.extend_from_slice(bytes);
        link.pending.extend(steps.iter().map(|&s| (Pending::Step(s), now)));
        // This connection replaces whatever was still held for the node.
        self.closes.retain(|&n| n != node);
    }

    /// The connect attempt to `node` failed for `reason`; ignored (`None`) unless it is
    /// connecting. Returns the error to report.
    pub(crate) fn connect_failed(
        &mut self,
        now: Instant,
        node: NodeId,
        reason: &str,
        rng: &mut Rng,
    ) -> Option<LinkError> {
        let addr = Arc::clone(self.addrs.get(node.index())?);
        let link = &mut self.links[node.index()];
        if !matches!(link.state, LinkState::Connecting { .. }) {
            return None;
        }
        let error = LinkError::ConnectFailed { node, addr, reason: reason.to_owned() };
        link.last_error = Some((Fault::Unreachable, error.reason()));
        link.stats.fault(Fault::Unreachable);
        link.attempts_ended += 1;
        self.schedule_reconnect(now, node.index(), None, rng);
        Some(error)
    }

    /// The driver lost `node`'s connection for `reason` (end of stream, a socket error):
    /// record it. The caller takes the link down.
    pub(crate) fn lost(&mut self, node: NodeId, reason: &str) -> Option<LinkError> {
        let addr = Arc::clone(self.addrs.get(node.index())?);
        let link = &mut self.links[node.index()];
        if !link.is_up() {
            return None;
        }
        let error = LinkError::Lost { node, addr, reason: reason.to_owned() };
        link.last_error = Some((Fault::Unreachable, error.reason()));
        link.stats.fault(Fault::Unreachable);
        Some(error)
    }

    /// The connection (or connect attempt) of `node` is gone: the link is down until the
    /// backoff has passed. Returns the requests that were in flight on a connection that was
    /// up; `None` if there was none.
    pub(crate) fn take_down(
        &mut self,
        now: Instant,
        node: NodeId,
        rng: &mut Rng,
    ) -> Option<VecDeque<(Pending, Instant)>> {
        let i = node.index();
        let link = self.links.get_mut(i)?;
        let since = match link.state {
            LinkState::Up { since } => since,
            LinkState::Connecting { .. } => {
                link.attempts_ended += 1;
                self.schedule_reconnect(now, i, None, rng);
                return None;
            }
            LinkState::Down { .. } => return None,
        };
        if link.is_handshaking() {
            // The attempt ends here, before its handshake was answered.
            link.attempts_ended += 1;
        }
        // Down first, so that whatever the caller decides about the pending requests is not
        // sent to this link.
        let pending = link.reset(LinkState::Down { retry_at: None });
        link.stats.disconnects += 1;
        self.schedule_reconnect(now, i, Some(since), rng);
        Some(pending)
    }

    /// The engine fails `error.node()`'s link: record why, and have the driver close it.
    /// The caller takes the link down.
    pub(crate) fn failed(&mut self, error: &LinkError) {
        let node = error.node();
        if let Some(link) = self.links.get_mut(node.index()) {
            link.last_error = Some((error.fault(), error.reason()));
            link.stats.fault(error.fault());
            self.closes.push_back(node);
        }
    }

    /// Skip the backoff of a down link and start it over.
    pub(crate) fn reconnect_now(&mut self, node: NodeId) {
        let min = self.policy.min;
        let Some(link) = self.links.get_mut(node.index()) else {
            return;
        };
        if let LinkState::Down { .. } = link.state {
            link.state = LinkState::Down { retry_at: None };
            link.backoff = min;
        }
    }

    /// Hand out a node whose connect attempt is due; it becomes connecting.
    pub(crate) fn poll_connect(&mut self, now: Instant) -> Option<NodeId> {
        let i = self.links.iter().position(|l| match l.state {
            LinkState::Down { retry_at } => retry_at.is_none_or(|t| t <= now),
            _ => false,
        })?;
        self.links[i].state = LinkState::Connecting { deadline: now + self.policy.connect_timeout };
        let node = NodeId(i as u16);
        // A new attempt replaces whatever was still held for the node.
        self.closes.retain(|&n| n != node);
        Some(node)
    }

    /// A node whose connection or connect attempt the driver must drop.
    #[inline]
    pub(crate) fn poll_close(&mut self) -> Option<NodeId> {
        self.closes.pop_front()
    }

    /// Abandon connect attempts past their deadline (a [`LinkError::ConnectTimeout`] event
    /// each); make due the links whose reconnect time has come.
    pub(crate) fn handle_timeout(&mut self, now: Instant, rng: &mut Rng, events: &mut VecDeque<Event>) {
        let after = self.policy.connect_timeout;
        for i in 0..self.links.len() {
            match self.links[i].state {
                LinkState::Down { retry_at: Some(t) } if t <= now => {
                    self.links[i].state = LinkState::Down { retry_at: None };
                }
                LinkState::Connecting { deadline } if deadline <= now => {
                    let node = NodeId(i as u16);
                    let error = LinkError::ConnectTimeout { node, addr: self.addr(node), after };
                    let link = &mut self.links[i];
                    link.last_error = Some((error.fault(), error.reason()));
                    link.stats.fault(error.fault());
                    link.attempts_ended += 1;
                    self.closes.push_back(node);
                    self.schedule_reconnect(now, i, None, rng);
                    events.push_back(Event::LinkFailed { error });
                }
                _ => {}
            }
        }
    }

    /// The link of `node`, if it is up and its oldest request has waited past its bound at
    /// `now`: the error to fail it with.
    pub(crate) fn silent(&self, node: NodeId, now: Instant) -> Option<LinkError> {
        let link = self.links.get(node.index()).filter(|l| l.is_up())?;
        let (at, handshake) = link.silent_at(&self.policy).filter(|(at, _)| *at <= now)?;
        let queued = at - if handshake { self.policy.connect_timeout } else { self.policy.liveness };
        let waited = now.saturating_duration_since(queued);
        Some(LinkError::Silent { node, addr: self.addr(node), waited, handshake })
    }

    /// Link `i` just failed (or its connection, up since `up_since`, was lost): it is down
    /// until `now` + the backoff. The backoff starts over after a connection that stayed up
    /// for `max`; otherwise (refused connects, a handshake that fails at once) it doubles, up
    /// to `max`.
    fn schedule_reconnect(&mut self, now: Instant, i: usize, up_since: Option<Instant>, rng: &mut Rng) {
        let Policy { min, max, jitter, .. } = self.policy;
        let link = &mut self.links[i];
        if up_since.is_some_and(|since| now.saturating_duration_since(since) >= max) {
            link.backoff = min;
        }
        let delay =
            if jitter > 0.0 { rng.between(link.backoff.mul_f64(1.0 - jitter), link.backoff) } else { link.backoff };
        link.state = LinkState::Down { retry_at: Some(now + delay) };
        link.backoff = link.backoff.saturating_mul(2).min(max);
    }

    // ----- bytes ---------------------------------------------------------------------------

    /// Queue `cmd` at `now` on every link that takes requests, expecting the reply `pending`;
    /// `down` is told the vote of every other node (down, or too far behind).
    pub(crate) fn broadcast(&mut self, now: Instant, cmd: &[u8], pending: Pending, mut down: impl FnMut(usize, Vote)) {
        for (i, link) in self.links.iter_mut().enumerate() {
            if link.takes_requests() {
                link.out.extend_from_slice(cmd);
                link.pending.push_back((pending, now));
            } else {
                down(i, link.down_vote());
            }
        }
    }

    /// Queue one request at `now` on `node`'s link, if it takes requests: `encode` writes it
    /// to the output buffer. Returns whether it was queued.
    pub(crate) fn send(
        &mut self,
        now: Instant,
        node: NodeId,
        pending: Pending,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> bool {
        match self.links.get_mut(node.index()).filter(|l| l.takes_requests()) {
            Some(link) => {
                encode(&mut link.out);
                link.pending.push_back((pending, now));
                true
            }
            None => false,
        }
    }

    #[inline]
    pub(crate) fn unsent(&self, node: NodeId) -> Option<&[u8]> {
        let link = self.links.get(node.index())?;
        let b = &link.out[link.out_pos..];
        (!b.is_empty()).then_some(b)
    }

    #[inline]
    pub(crate) fn advance(&mut self, node: NodeId, n: usize) {
        if let Some(link) = self.links.get_mut(node.index()) {
            link.out_pos = (link.out_pos + n).min(link.out.len());
            if link.out_pos == link.out.len() {
                link.out.clear();
                link.out_pos = 0;
            }
        }
    }

    /// The start of a reply kept from earlier input, taken out (empty if none).
    pub(crate) fn take_partial(&mut self, node: NodeId) -> Vec<u8> {
        std::mem::take(&mut self.links[node.index()].inbuf)
    }

    /// Put back the start of a reply taken out with [`take_partial`](Self::take_partial).
    pub(crate) fn put_partial(&mut self, node: NodeId, buf: Vec<u8>) {
        self.links[node.index()].inbuf = buf;
    }

    /// Keep `rest`, the start of a reply, for the next input.
    pub(crate) fn extend_partial(&mut self, node: NodeId, rest: &[u8]) {
        self.links[node.index()].inbuf.extend_from_slice(rest);
    }

    pub(crate) fn has_partial(&self, node: NodeId) -> bool {
        !self.links[node.index()].inbuf.is_empty()
    }

    /// Decode the reply at the front of `buf` and match it to the oldest pending request.
    /// Handshake replies and cleanups are dealt with here; `Err` is a reason to fail the link.
    #[inline]
    pub(crate) fn next_reply(&mut self, now: Instant, node: NodeId, buf: &[u8]) -> Result<Next, LinkError> {
        let addr = || Arc::clone(&self.addrs[node.index()]);
        let (reply, used) = match resp::decode(buf) {
            Ok(Some(whole)) => whole,
            Ok(None) if buf.len() > MAX_REPLY => {
                let detail = format!("a reply longer than {MAX_REPLY} bytes without an end");
                return Err(LinkError::Malformed { node, addr: addr(), detail });
            }
            Ok(None) => return Ok(Next::More),
            Err(detail) => return Err(LinkError::Malformed { node, addr: addr(), detail }),
        };
        if let resp::Reply::Push { kind, channel, data } = reply {
            if kind.eq_ignore_ascii_case(b"message") {
                return Ok(Next::Message { used, channel: channel.to_vec(), data: data.to_vec() });
            }
        }
        let link = &mut self.links[node.index()];
        let Some((pending, queued)) = link.pending.pop_front() else {
            return Err(LinkError::Unsolicited { node, addr: addr(), reply: reply.render() });
        };
        link.stats.reply(now, now.saturating_duration_since(queued));
        let answer = wire::classify(pending, &reply).map_err(|request| LinkError::Unexpected {
            node,
            addr: addr(),
            request,
            reply: reply.render(),
        })?;
        let refused = |step: Step, message| LinkError::Handshake { node, addr: addr(), step: step.name(), message };
        match answer {
            Answer::Op { .. } => return Ok(Next::Op { used, answer }),
            Answer::Step(Step::Hello, StepAnswer::Ok) => {
                // RESP3 from here on: subscribe to what the waiters need, behind the handshake.
                link.wake = WakeState::On;
                for channel in &self.channels {
                    resp::command(&mut link.out, &[b"SUBSCRIBE", channel]);
                    link.pending.push_back((Pending::Subscribe, now));
                }
            }
            Answer::Step(Step::Hello, StepAnswer::Refused(message)) => {
                link.wake = WakeState::Polling { reason: format!("HELLO 3 refused: {message}") };
            }
            Answer::SubscribeRefused(message) => {
                let was_on = link.wake == WakeState::On;
                link.wake = WakeState::Polling { reason: format!("SUBSCRIBE refused: {message}") };
                if was_on {
                    return Ok(Next::WakeOff(used));
                }
            }
            Answer::Ignored | Answer::Step(_, StepAnswer::Ok) => {}
            Answer::Step(step, StepAnswer::Refused(message)) => return Err(refused(step, message)),
            Answer::Step(step, StepAnswer::Digest { matches: false }) => {
                let message = "the server's script digest differs from the expected one".to_owned();
                return Err(refused(step, message));
            }
            Answer::Step(step, StepAnswer::Digest { matches: true }) => {
                if let Step::ScriptLoad { last: true, .. } = step {
                    // The end of the handshake: the link is healthy again.
                    link.last_error = None;
                    link.attempts_ended += 1;
                    link.stats.connects += 1;
                    return Ok(Next::Ready(used));
                }
            }
        }
        Ok(Next::Done(used))
    }
}

/// The handshake of one node: AUTH and SELECT as it needs them, then the shared CLIENT SETNAME
/// and the five SCRIPT LOADs.
fn handshake(config: &Config, node: &crate::NodeConfig) -> (Vec<u8>, Vec<Step>) {
    let mut out = Vec::new();
    let mut steps = Vec::new();
    if let Some(pass) = &node.password {
        match &node.user {
            Some(user) => resp::command(&mut out, &[b"AUTH", user.as_bytes(), pass.as_bytes()]),
            None => resp::command(&mut out, &[b"AUTH", pass.as_bytes()]),
        }
        steps.push(Step::Auth);
    }
    if node.db != 0 {
        resp::array(&mut out, 2);
        resp::bulk(&mut out, b"SELECT");
        resp::bulk_uint(&mut out, node.db.into());
        steps.push(Step::Select);
    }
    if config.wake {
        resp::command(&mut out, &[b"HELLO", b"3"]);
        steps.push(Step::Hello);
    }
    if let Some(name) = &config.client_name {
        resp::command(&mut out, &[b"CLIENT", b"SETNAME", name.as_bytes()]);
        steps.push(Step::SetName);
    }
    let scripts = [
        (scripts::ACQUIRE, scripts::ACQUIRE_SHA),
        (scripts::EXTEND, scripts::EXTEND_SHA),
        (scripts::RELEASE, scripts::RELEASE_SHA),
        (scripts::FENCE, scripts::FENCE_SHA),
        (scripts::RELEASE_ONE, scripts::RELEASE_ONE_SHA),
    ];
    for (i, (script, sha)) in scripts.into_iter().enumerate() {
        resp::command(&mut out, &[b"SCRIPT", b"LOAD", script.as_bytes()]);
        steps.push(Step::ScriptLoad { sha, last: i == scripts.len() - 1 });
    }
    (out, steps)
}
