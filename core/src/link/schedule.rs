//! The links' schedule: connections opened, lost and failed, connect deadlines, the liveness
//! bound of a connection that is up, and the reconnect backoff with jitter.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Link, Links};
use crate::config::Config;
use crate::error::{Fault, LinkError};
use crate::event::{Event, LinkState, NodeId};
use crate::lock::min_opt;
use crate::rng::Rng;
use crate::wire::{Pending, Step};

/// The reconnect and liveness policy, from [`Config`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Policy {
    connect_timeout: Duration,
    min: Duration,
    max: Duration,
    jitter: f64,
    liveness: Duration,
}

impl Policy {
    /// The first reconnect delay.
    pub(super) fn min(&self) -> Duration {
        self.min
    }

    pub(super) fn new(config: &Config) -> Self {
        Policy {
            connect_timeout: config.connect_timeout,
            min: config.reconnect_min,
            max: config.reconnect_max,
            jitter: config.reconnect_jitter,
            liveness: config.liveness(),
        }
    }
}

impl Link {
    /// Until when the oldest unanswered request may wait: `liveness` after it was queued, or
    /// `connect_timeout` for a handshake step.
    fn silent_at(&self, policy: &Policy) -> Option<(Instant, bool)> {
        let (pending, at) = self.pending.front()?;
        let handshake = matches!(pending, Pending::Step(_));
        let limit = if handshake { policy.connect_timeout } else { policy.liveness };
        Some((*at + limit, handshake))
    }
}

impl Links {
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
        let role = self.links.iter().filter_map(|l| l.role_at).min();
        let again = self.next_again();
        min_opt(min_opt(min_opt(other, self.next_refresh()), min_opt(role, again)), min_opt(step, op))
    }

    /// Ask `ROLE` on every ready link whose replica check is due (nodes with
    /// [`min_replicas`](crate::NodeConfig::min_replicas)): its answer fails a link whose node
    /// has fewer replicas online (see [`REPLICAS_CHECK`](crate::REPLICAS_CHECK)).
    pub(crate) fn check_replicas(&mut self, now: Instant) {
        for l in &mut self.links {
            if l.role_at.is_some_and(|t| t <= now) && l.is_up() && !l.is_handshaking() && !l.holding {
                l.role_at = None;
                l.push(now, Pending::Role, |out| crate::resp::command(out, &[b"ROLE"]));
            }
        }
    }

    /// A connection to `node` is open: queue its handshake; later requests are pipelined
    /// behind it. The caller has taken down an older connection first.
    pub(crate) fn connected(&mut self, now: Instant, node: NodeId) {
        let i = node.index();
        // A Sentinel-managed node's link to a sentinel, subscribed to its switches.
        let watch = self.watch_handshake(i).map(|(bytes, steps)| (bytes.clone(), steps.clone()));
        let link = &mut self.links[i];
        link.reset(LinkState::Up { since: now });
        link.answered = false;
        link.sourced = 0;
        link.limits.clear();
        let (bytes, steps) = match (&watch, &link.endpoint, link.discovery.as_deref()) {
            (Some((bytes, steps)), _, _) => (bytes, steps),
            // A Sentinel-managed node's link asking a sentinel.
            (None, None, Some(d)) if d.is_asking() => d.handshake(),
            (None, None, _) => (&self.handshakes[i].0, &self.handshakes[i].1),
            (None, Some(_), _) => {
                let (b, s) = &self.master_handshakes[link.owner as usize];
                (b, s)
            }
        };
        link.out.extend_from_slice(bytes);
        link.pending.extend(steps.iter().map(|&s| (Pending::Step(s), now)));
        // Requests wait for HELLO's answer, which brings the subscriptions first.
        link.holding = steps.contains(&Step::Hello);
        link.subs_gen = self.subs_gen.wrapping_sub(1);
        // This connection replaces whatever was still held for the node.
        self.closes.retain(|&n| n != node);
    }

    /// The connect attempt to `node` failed with the error `error` makes of the node and its
    /// address; ignored (`None`) unless it is connecting. Returns the error to report.
    pub(crate) fn connect_failed(
        &mut self,
        now: Instant,
        node: NodeId,
        error: impl FnOnce(NodeId, Arc<str>) -> LinkError,
        rng: &mut Rng,
    ) -> Option<LinkError> {
        let addr = Arc::clone(self.addrs.get(node.index())?);
        let owner = self.owner(node);
        let link = &mut self.links[node.index()];
        if !matches!(link.state, LinkState::Connecting { .. }) {
            return None;
        }
        let error = error(owner, addr);
        link.last_error = Some((error.fault(), error.reason()));
        link.stats.fault(error.fault());
        link.attempts_ended += 1;
        self.schedule_reconnect(now, node.index(), None, rng);
        Some(error)
    }

    /// The connect attempt to `node` reached its TLS handshake.
    pub(crate) fn tls_started(&mut self, node: NodeId) {
        if let Some(link) = self.links.get_mut(node.index()) {
            link.tls_open = matches!(link.state, LinkState::Connecting { .. });
        }
    }

    /// The driver lost `node`'s connection for `reason` (end of stream, a socket error):
    /// record it. The caller takes the link down.
    pub(crate) fn lost(&mut self, node: NodeId, reason: &str) -> Option<LinkError> {
        let addr = Arc::clone(self.addrs.get(node.index())?);
        let owner = self.owner(node);
        let link = &mut self.links[node.index()];
        if !link.is_up() {
            return None;
        }
        // A TLS server drops a plaintext client at its first bytes, before any reply.
        let reason = if link.plain_tcp && !link.answered {
            format!("{reason}, before any reply to the handshake: is this a TLS port? (use rediss:// for it)")
        } else {
            reason.to_owned()
        };
        let error = LinkError::Lost { node: owner, addr, reason };
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

    /// The engine fails link `node` (of node `error.node()`): record why, and have the driver
    /// close it. The caller takes the link down.
    pub(crate) fn failed(&mut self, node: NodeId, error: &LinkError) {
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
        self.links[i].tls_open = false;
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
                    let (id, node) = (NodeId(i as u16), self.owner(NodeId(i as u16)));
                    let addr = self.addr(id);
                    let error = if self.links[i].tls_open {
                        // Connected, but no TLS answer: a plain Redis waits for the end of a
                        // line that the client hello does not have.
                        let reason = format!(
                            "no answer within {after:?}: the server did not answer TLS: is it a plain port? \
                             (use redis:// for it)"
                        );
                        LinkError::Tls { node, addr, reason, fault: Fault::Unreachable }
                    } else {
                        LinkError::ConnectTimeout { node, addr, after }
                    };
                    let link = &mut self.links[i];
                    link.last_error = Some((error.fault(), error.reason()));
                    link.stats.fault(error.fault());
                    link.attempts_ended += 1;
                    self.closes.push_back(id);
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
        Some(LinkError::Silent { node: self.owner(node), addr: self.addr(node), waited, handshake })
    }

    /// Link `i` just failed (or its connection, up since `up_since`, was lost): it is down
    /// until `now` + the backoff. The backoff starts over after a connection that stayed up
    /// for `max`; otherwise (refused connects, a handshake that fails at once) it doubles, up
    /// to `max`.
    fn schedule_reconnect(&mut self, now: Instant, i: usize, up_since: Option<Instant>, rng: &mut Rng) {
        if self.sentinel_link_down(now, i) {
            // A sentinel that did not answer: the round goes on with the next one at once, and
            // the node's connect attempt is not over.
            let link = &mut self.links[i];
            link.state = LinkState::Down { retry_at: None };
            link.attempts_ended = link.attempts_ended.saturating_sub(1);
            return;
        }
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
}
