//! A link's replies: the reply at the front of its input decoded and matched to the oldest
//! pending request, the handshake's answers dealt with; and the handshake itself, encoded once
//! per node.

use std::sync::Arc;
use std::time::Instant;

use super::Links;
use crate::config::Config;
use crate::error::LinkError;
use crate::event::{NodeId, WakeState};
use crate::resp::{self, MAX_REPLY};
use crate::scripts;
use crate::wire::{self, Answer, Step, StepAnswer};

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

impl Links {
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
            Err(mut detail) => {
                let link = &self.links[node.index()];
                // A TLS record (an alert, a handshake) where a plaintext reply belongs.
                if link.plain_tcp && !link.answered && matches!(buf.first(), Some(0x15 | 0x16)) {
                    detail.push_str(": a TLS record: is this a TLS port? (use rediss:// for it)");
                }
                return Err(LinkError::Malformed { node, addr: addr(), detail });
            }
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
        link.stats.reply(now, now.saturating_duration_since(queued), self.on_time);
        link.answered = true;
        let answer = wire::classify(pending, &reply).map_err(|request| LinkError::Unexpected {
            node,
            addr: addr(),
            request,
            reply: reply.render(),
        })?;
        let refused = |step: Step, message| LinkError::Handshake { node, addr: addr(), step: step.name(), message };
        match answer {
            Answer::Op { .. } | Answer::Replicas { .. } => return Ok(Next::Op { used, answer }),
            Answer::Step(Step::Hello, StepAnswer::Ok) => {
                // RESP3 from here on: subscribe to what the waiters need, then send what was
                // issued meanwhile.
                link.wake = WakeState::On;
                link.release_held(now, &self.channels, self.subs_gen);
            }
            Answer::Step(Step::Hello, StepAnswer::Refused(message)) => {
                link.wake = WakeState::Polling { reason: format!("HELLO 3 refused: {message}") };
                link.release_held(now, &self.channels, self.subs_gen);
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
            Answer::Step(_, StepAnswer::Cluster(evidence)) => {
                return Err(LinkError::ClusterNode { node, addr: addr(), evidence });
            }
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

/// The handshake of one node: AUTH and SELECT as it needs them, then the lock format check,
/// HELLO 3 (with wake-ups on), CLIENT SETNAME (with a client name) and the five SCRIPT LOADs.
pub(super) fn handshake(config: &Config, node: &crate::NodeConfig) -> (Vec<u8>, Vec<Step>) {
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
    // The lock format of the node (of its database): another than ours fails the handshake.
    resp::command(
        &mut out,
        &[b"EVAL", scripts::FORMAT_CHECK.as_bytes(), b"1", scripts::FORMAT_KEY.as_bytes(), scripts::FORMAT.as_bytes()],
    );
    steps.push(Step::Format);
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
