//! The lock state machine: rounds started and sent, answers turned into votes, decisions
//! carried out (grants, fence rounds, retries, extensions, releases), and each record's timer.

use std::time::{Duration, Instant};

use super::Engine;
use super::cluster::{self, encode_all};
use super::replicas::may_grant;
use super::wake::Verdict;
use crate::error::{AcquireError, ExtendError, LinkError, LostReason, Vote};
use crate::event::{Event, LockId, NodeId};
use crate::lock::{Decision, Phase};
use crate::quorum::valid_until;
use crate::wire::{self, Answer, Op, OpAnswer, Pending, Request};

impl Engine {
    /// Queue the record's next wake-up in the timer table.
    pub(super) fn arm(&mut self, idx: u32) {
        let wake = self.locks[idx].next_wake();
        self.timers.set(idx, wake);
    }

    /// Enter `phase` with a new round started at `start`.
    pub(super) fn begin_round(&mut self, start: Instant, idx: u32, phase: Phase) {
        self.trim_awaiting(start, idx, matches!(phase, Phase::Fencing { .. }));
        self.locks[idx].begin_round(start, self.links.len(), phase);
    }

    /// Start the acquisition's next attempt: a round sent to every node, open until the node
    /// timeout, or until the validity it could still have ends if that comes first.
    pub(super) fn start_attempt(&mut self, now: Instant, idx: u32) {
        let n = self.links.len();
        let s = &mut self.locks[idx];
        s.next_attempt(n);
        // (Only when a second attempt may follow at once: the script takes any free permit, and
        // a try must not fail while one is free.)
        if s.permits.on() && s.tries.made == 1 && s.tries.max > 1 && !s.fencing && s.permits.want == 1 {
            s.permits.fast = self.links.limit_confirmed(&s.permits.limit_key, s.permits.limit);
        }
        let limit = valid_until(now, s.ttl, self.config.drift_factor).unwrap_or(now);
        let deadline = (now + self.config.node_timeout).min(limit);
        self.begin_round(now, idx, Phase::Acquiring { deadline, proposal: 0 });
        self.send_round(now, idx, Op::Acquire);
    }

    /// Write `proposal` as the fencing token to every node; it holds once a quorum of nodes
    /// had all the lock's counters below it. The round keeps the acquisition's start.
    fn fence_round(&mut self, now: Instant, idx: u32, proposal: u64, valid: Instant) {
        let start = self.locks[idx].round.start;
        let deadline = (now + self.config.node_timeout).min(valid);
        self.begin_round(start, idx, Phase::Fencing { deadline, proposal, seen: 0, valid, recording: false });
        self.send_round(now, idx, Op::Fence);
    }

    /// A fenced reader reads the fence counters of every node (a fence round proposing 0, which
    /// raises none); its epoch is the largest of `epoch` and what a quorum of them hold. The
    /// round keeps the acquisition's start.
    fn epoch_round(&mut self, now: Instant, idx: u32, epoch: u64, valid: Instant) {
        let start = self.locks[idx].round.start;
        let deadline = (now + self.config.node_timeout).min(valid);
        self.begin_round(start, idx, Phase::Fencing { deadline, proposal: 0, seen: epoch, valid, recording: false });
        self.send_round(now, idx, Op::Fence);
    }

    /// Start extending the held lock to `ttl` (`manual`: the caller asked for it): a round
    /// sent to every node.
    pub(super) fn start_extend(&mut self, now: Instant, idx: u32, ttl: Duration, manual: bool) {
        self.start_extend_as(now, idx, ttl, manual, false);
    }

    /// [`start_extend`](Self::start_extend); with `downgrade`, the round also turns the write
    /// lock into a read lock.
    pub(super) fn start_extend_as(&mut self, now: Instant, idx: u32, ttl: Duration, manual: bool, downgrade: bool) {
        let mut hold = match self.locks[idx].phase {
            Phase::Held(hold) => hold,
            Phase::Extending { hold, .. } if downgrade => hold,
            _ => return,
        };
        // Any node may apply the new TTL, whatever the round's outcome: when it is shorter
        // than what is left, the shorter deadline holds from now on.
        if let Some(shorter) = valid_until(now, ttl, self.config.drift_factor).filter(|&v| v < hold.valid_until) {
            hold.valid_until = shorter;
            let lock = self.locks.id(idx);
            self.events.push_back(Event::Shortened { lock, valid_until: shorter });
        }
        hold.auto_at = None;
        let deadline = now + self.config.node_timeout;
        self.begin_round(now, idx, Phase::Extending { hold, deadline, ttl, manual, downgrade });
        self.send_round(now, idx, Op::Extend);
    }

    /// Send the round's command to every connected node; down nodes vote at once.
    ///
    /// The command is the same for every node: it is encoded once and copied. If down nodes
    /// voted, the round is evaluated right away: they may already decide it (an acquisition
    /// that can no longer reach a quorum fails without waiting for the live nodes' replies).
    pub(super) fn send_round(&mut self, now: Instant, idx: u32, op: Op) {
        let s = &mut self.locks[idx];
        let Some(call) = s.call(op, self.config.retry) else { return };
        let mut cmd = std::mem::take(&mut self.scratch);
        cmd.clear();
        let keys = &s.keys;
        let names = s.names(self.config.fence_prefix.as_bytes());
        let lazy = call.lazy(names.sem.is_some());
        let eval = lazy != 0 && self.links.needs_source(lazy);
        let form = encode_all(
            self.links.any_cluster(),
            &mut cmd,
            Request { call, keys: keys.iter(), token: &s.token, names, eval },
        );
        let lock = LockId { index: idx, generation: s.generation };
        // Replies are classified against the command actually sent.
        let op = match call {
            wire::Call::SetNx { .. } | wire::Call::ReadSetNx { .. } => Op::SetNx,
            wire::Call::Permits { .. } => Op::Permits,
            _ => op,
        };
        let pending = Pending::Op { op, lock, round: s.round.id };
        let tally = &mut s.round.tally;
        self.links.broadcast(now, cluster::cmd(&cmd, &form), pending, |node, vote| {
            tally.record(node, vote);
        });
        let failed = tally.failed;
        self.scratch = cmd;
        if failed > 0 {
            self.evaluate(now, idx);
        }
    }

    /// Release whatever the record's attempt took, on every connected node, without waiting;
    /// with `leave`, the acquisition ends here and leaves the waiter queues it joined.
    ///
    /// A node that refused the acquire script took nothing: the script grants a key that
    /// holds our own token (a re-entry) and checks every key before it sets any, so a refusal
    /// means another token holds one. Such a node gets no cleanup, unless the cleanup must
    /// also leave the queue there. (A refused `SET NX` cannot tell our own leftover from
    /// another's key, so its cleanup still goes everywhere; but a read lock's is a fresh
    /// token's first attempt, with nothing of it on any node yet.) Under contention most
    /// retries are refused by every node: their cleanups would only cost each node a script
    /// run. A reader that joins others is refused its `SET NX` by every node: no cleanup.
    pub(super) fn send_cleanup(&mut self, now: Instant, idx: u32, leave: bool) {
        let s = &self.locks[idx];
        let call = s.release_call(leave, true, self.config.retry);
        let leaves = matches!(call, wire::Call::Release { leave: true, .. });
        let by_script = matches!(s.phase, Phase::Acquiring { .. })
            && matches!(
                s.call(Op::Acquire, self.config.retry),
                Some(
                    wire::Call::Acquire { .. }
                        | wire::Call::Permits { .. }
                        | wire::Call::Read { .. }
                        | wire::Call::ReadSetNx { .. }
                        | wire::Call::Reentry(wire::reentry::Step::Acquire { .. })
                )
            );
        let votes = s.round.tally.votes();
        let took_nothing = |node: usize| !leaves && by_script && votes.get(node) == Some(&Vote::Refused);
        if (0..self.links.len()).all(took_nothing) {
            return;
        }
        let mut cmd = std::mem::take(&mut self.scratch);
        cmd.clear();
        let form = encode_all(
            self.links.any_cluster(),
            &mut cmd,
            Request { call, keys: s.keys.iter(), token: &s.token, names: s.names(b""), eval: true },
        );
        for node in (0..self.links.len()).filter(|&n| !took_nothing(n)) {
            let pending = Pending::AttemptCleanup { lock: self.locks.id(idx) };
            let _ = self.links.send(now, node, cluster::cmd(&cmd, &form), pending);
        }
        self.scratch = cmd;
    }

    /// Act on a lock operation's answer from `node`, read on `link` (the node's own, or on a
    /// node that is a Redis Cluster, the link to one of its masters). An `Err` is a link
    /// failure.
    pub(super) fn on_answer(
        &mut self,
        now: Instant,
        link: NodeId,
        node: NodeId,
        answer: Answer,
    ) -> Result<(), LinkError> {
        let (op, lock, round, answer) = match answer {
            Answer::Op { op, lock, round, answer } => (op, lock, round, answer),
            Answer::Replicas { lock, round, acked } => return self.on_replicas(now, node, lock, round, acked),
            Answer::Read { read, reply } => {
                self.read_answered(now, node, read, reply);
                return Ok(());
            }
            _ => return Ok(()),
        };
        if op == Op::Permits && matches!(answer, OpAnswer::Permits { .. } | OpAnswer::Int(_) | OpAnswer::Held(_)) {
            // The script ran: the server behind this link has the semaphore's limit.
            if let Some(s) = self.locks.last(lock).filter(|s| s.permits.on()) {
                self.links.confirm_limit(link, &s.permits.limit_key, s.permits.limit);
            }
        }
        let answer = if self.links.min_replicas(node).is_some() && op.writes_grant() && may_grant(op, &answer) {
            // Counted once the node's replicas have it: its `WAIT` follows on the connection.
            match self.hold_back(node, op, lock, round, answer) {
                Ok(()) => return Ok(()),
                Err(late) => late,
            }
        } else {
            answer
        };
        self.cast(now, node, op, lock, round, answer)
    }

    /// Count `node`'s `answer` to `op` of `lock`'s round `round`.
    #[inline]
    pub(super) fn cast(
        &mut self,
        now: Instant,
        node: NodeId,
        op: Op,
        lock: LockId,
        round: u32,
        answer: OpAnswer,
    ) -> Result<(), LinkError> {
        let idx = lock.index;
        if self.cluster_answer(now, node, lock, round, &answer) {
            return Ok(());
        }
        if !self.locks.in_round(lock, round) && op == Op::Permits {
            self.late_permits(now, node, lock, &answer);
        }
        if !self.locks.in_round(lock, round) {
            // A late reply to an earlier round: ignored.
            return Ok(());
        }
        let s = &mut self.locks[idx];
        let vote = match s.answer(node.index(), op, answer) {
            Ok(Some(vote)) => {
                if let Some(fault) = vote.fault() {
                    self.links.count_fault(node, fault);
                }
                vote
            }
            Ok(None) => {
                // The script cache was flushed: resend with the script text (which reloads it).
                let Some(call) = s.call(op, self.config.retry) else { return Ok(()) };
                let names = s.names(self.config.fence_prefix.as_bytes());
                let (keys, token) = (s.keys.iter(), &s.token);
                let pending = Pending::Op { op, lock, round };
                let mut plain = Vec::new();
                let form =
                    encode_all(self.links.any_cluster(), &mut plain, Request { call, keys, token, names, eval: true });
                if self.links.send(now, node.index(), cluster::cmd(&plain, &form), pending).is_ok() {
                    return Ok(());
                }
                // The node's backlog is full: it counts as failed for this round.
                Vote::Error("backlog full: the script could not be resent".to_owned())
            }
            Err(reply) => {
                let (addr, request) = (self.links.addr(node), op.name());
                return Err(LinkError::Unexpected { node, addr, request, reply });
            }
        };
        self.vote(now, idx, node.index(), vote);
        Ok(())
    }

    // Always inlined into the reply path, so that the vote is built in place: copied through
    // memory, it stalls on store forwarding, and a plain `#[inline]` is not taken here.
    #[inline(always)]
    pub(super) fn vote(&mut self, now: Instant, idx: u32, node: usize, vote: Vote) {
        // An open round keeps its deadline: the timer needs re-arming only after a decision.
        if self.locks[idx].round.tally.record(node, vote) && self.evaluate(now, idx) {
            self.arm(idx);
        }
    }

    /// Decide the record's round if it can be decided, and carry the decision out. Returns
    /// `false` if the round stays open (nothing changed).
    fn evaluate(&mut self, now: Instant, idx: u32) -> bool {
        let (n, q) = (self.links.len(), self.quorum);
        let s = &self.locks[idx];
        let lock = self.locks.id(idx);
        let decision = s.decide(now, n, q, self.config.drift_factor);
        let settle = matches!(decision, Decision::Grant { .. } | Decision::Fence { .. })
            && s.permits.on()
            && matches!(s.phase, Phase::Acquiring { .. });
        if settle {
            self.settle_permits(now, idx);
        }
        let s = &self.locks[idx];
        match decision {
            Decision::Open => return false,
            Decision::Grant { valid, fence } => {
                if !self.record_round(now, idx, fence, valid) {
                    self.granted(idx, valid, fence);
                }
            }
            Decision::Fence { proposal, valid } => self.fence_round(now, idx, proposal, valid),
            Decision::ReadEpoch { epoch, valid } => self.epoch_round(now, idx, epoch, valid),
            Decision::AttemptFailed => self.attempt_failed(now, idx),
            Decision::FenceExhausted(counter) => {
                self.send_cleanup(now, idx, true);
                self.finish(idx, Event::AcquireFailed { lock, error: AcquireError::FenceExhausted { counter } });
            }
            Decision::Extended(valid) => {
                self.locks[idx].extended(valid);
                self.events.push_back(Event::Extended { lock, valid_until: valid });
            }
            Decision::ExtendLost => {
                let manual = matches!(s.phase, Phase::Extending { manual: true, .. });
                let downgrade = matches!(s.phase, Phase::Extending { downgrade: true, .. });
                let refused = s.round.tally.no;
                let already = self.locks[idx].extension_refused(now);
                if downgrade {
                    self.leave_readers(now, idx);
                }
                if manual {
                    let error = ExtendError::Lost { refused, nodes: n };
                    self.events.push_back(Event::ExtendFailed { lock, error });
                }
                if !already {
                    self.events.push_back(Event::Lost { lock, reason: LostReason::Refused });
                }
            }
            Decision::ExtendUnconfirmed => self.extend_unconfirmed(now, idx),
            Decision::ExtendExpired => {
                let manual = matches!(s.phase, Phase::Extending { manual: true, .. });
                let downgrade = matches!(s.phase, Phase::Extending { downgrade: true, .. });
                let already = self.locks[idx].extension_too_late(now);
                if downgrade {
                    self.leave_readers(now, idx);
                }
                if !already {
                    self.events.push_back(Event::Lost { lock, reason: LostReason::Expired });
                }
                if manual {
                    self.events.push_back(Event::ExtendFailed { lock, error: ExtendError::Expired });
                }
            }
            Decision::Released(report) => {
                // The outcome is out; the nodes that have not answered yet are still waited
                // for (until the round's deadline), so that a late NOSCRIPT can be resent.
                let deadline = self.locks[idx].deadline().unwrap_or(now);
                self.events.push_back(Event::Released { lock, report });
                if report.pending > 0 {
                    self.locks[idx].enter_draining(deadline);
                } else {
                    self.free(idx);
                }
            }
            Decision::Drained => self.free(idx),
        }
        true
    }

    fn extend_unconfirmed(&mut self, now: Instant, idx: u32) {
        let s = &self.locks[idx];
        let manual = matches!(s.phase, Phase::Extending { manual: true, .. });
        if matches!(s.phase, Phase::Extending { downgrade: true, .. }) {
            // Some nodes may have turned the lock into a read lock, and others not: it is
            // neither any more. It is lost, and its release clears both forms.
            return self.downgrade_failed(now, idx, manual);
        }
        let lock = self.locks.id(idx);
        let error =
            ExtendError::Unconfirmed { extended: s.round.tally.yes, nodes: self.links.len(), quorum: self.quorum };
        self.locks[idx].back_to_held(now);
        if manual {
            self.events.push_back(Event::ExtendFailed { lock, error });
        }
    }

    fn granted(&mut self, idx: u32, valid: Instant, fence: Option<u64>) {
        self.unregister(idx);
        let lock = self.locks.id(idx);
        let attempts = self.locks[idx].grant(valid, fence);
        self.events.push_back(Event::Acquired { lock, valid_until: valid, fence, attempts });
    }

    /// The attempt failed: release what it took, then retry later or give up.
    ///
    /// The first failure of an acquisition that may retry registers it as a waiter (the links
    /// subscribe to its wake channels) and sends the next attempt at once, behind the
    /// subscriptions on each connection. That attempt marks the key that refuses it on each
    /// node, in the same script (a one-key lock also joins the key's waiter queue), and the
    /// release of a marked key announces itself: a release is then either seen by that
    /// attempt or announced to us afterwards, with no window in between. (A key that expires
    /// instead, and is taken and released by a newcomer before our next attempt, goes
    /// unannounced: the jittered retry covers it, as it covers a lost message.) A later
    /// failure waits for its jittered delay, cut short when release messages of a quorum were
    /// heard (see [`on_message`](Self::on_message) and [`verdict`](Self::verdict)), and cut
    /// short too when the nodes that refused said when their keys expire: a waiter retries as a
    /// quorum of them are free ([`after_expiry`](Self::after_expiry)).
    fn attempt_failed(&mut self, now: Instant, idx: u32) {
        let tries = self.locks[idx].tries;
        let may_retry = tries.made < tries.max && tries.give_up_at.is_none_or(|g| now <= g);
        if self.retrying && may_retry && !self.locks[idx].misconfigured(self.quorum) {
            // The attempt started from a failed one failed as it was sent: its cleanup goes
            // out, and the next waits for the timer (due now), not for a deeper call.
            self.send_cleanup(now, idx, false);
            self.locks[idx].enter(Phase::RetryWait { at: now });
            self.arm(idx);
            return;
        }
        self.retrying = true;
        self.attempt_failed_once(now, idx);
        self.retrying = false;
    }

    fn attempt_failed_once(&mut self, now: Instant, idx: u32) {
        let retry = self.config.retry;
        let mut delay = self.rng.between(retry.min_delay, retry.max_delay);
        let mut tries = self.locks[idx].tries;
        if self.locks[idx].misconfigured(self.quorum) {
            // It will not heal by retrying: give up now, with the misconfiguration.
            tries.max = tries.made;
        }
        let may_retry = tries.made < tries.max && tries.give_up_at.is_none_or(|g| now <= g);
        if may_retry && self.locks[idx].permits.fast {
            // The client's first permit was taken: the script tries the others, at once.
            self.send_cleanup(now, idx, false);
            self.start_attempt(now, idx);
            return;
        }
        if tries.made < tries.max && self.locks[idx].read_set_nx() {
            // The key exists: the script joins the readers there if they admit us, at once.
            // (Together the two are the first attempt: the wait bound does not cut them apart.)
            self.send_cleanup(now, idx, false);
            self.start_attempt(now, idx);
            return;
        }
        let mut cleaned = false;
        if may_retry && !self.locks[idx].waiting {
            // An acquisition that waits queues from its first refusal on, whatever kind of
            // waiter it is (so that nobody starves because of how others wait), and listens to
            // release messages as soon as it can.
            self.send_cleanup(now, idx, false);
            cleaned = true;
            let listens = self.register(idx);
            let ticket = self.ticket(now);
            self.locks[idx].start_waiting(listens, retry, self.config.node_timeout, ticket);
            if listens {
                self.start_attempt(now, idx);
                return;
            }
        }
        if may_retry && self.locks[idx].waiting && self.retry_split(now, idx) {
            return;
        }
        if self.locks[idx].waiting {
            match self.verdict(idx) {
                Verdict::Now => delay = Duration::ZERO,
                Verdict::Stagger => delay = delay.min(self.stagger(idx)),
                Verdict::Sleep => {}
            }
            if let Some(free) = self.locks[idx].round.free_in(self.quorum) {
                delay = delay.min(self.after_expiry(free));
            }
        }
        let retrying = tries.made < tries.max && tries.give_up_at.is_none_or(|g| now + delay <= g);
        if !cleaned || !retrying {
            // The acquisition leaves the queues it joined when this is its last attempt (a
            // poller's, cleaned up above, only leaves them).
            self.send_cleanup(now, idx, !retrying);
        }
        if retrying {
            if delay.is_zero() {
                self.start_attempt(now, idx);
            } else {
                self.locks[idx].enter(Phase::RetryWait { at: now + delay });
            }
            return;
        }
        let s = &mut self.locks[idx];
        let error = s.give_up(now, self.quorum, self.links.addrs(), self.config.drift_factor);
        let lock = self.locks.id(idx);
        self.finish(idx, Event::AcquireFailed { lock, error });
    }

    /// How long a refused waiter waits for keys that expire in `free` on a quorum of the nodes
    /// (a holder that crashed announces nothing; its keys end by their TTL): past it by a
    /// millisecond (the servers' expiry resolution) and a random stagger, so that the waiters
    /// of one client do not all retry at once. A server whose clock runs slow refuses the
    /// retry with what its key has left, and the waiter comes back then.
    fn after_expiry(&mut self, free: Duration) -> Duration {
        free + Duration::from_millis(1) + self.rng.between(Duration::ZERO, self.config.wake_stagger)
    }

    /// A waiting semaphore acquisition whose nodes granted permits, but no quorum the same
    /// ones (two releases reached the nodes in different orders, and each named it for
    /// another permit): it heads the queue, and what it took is free again once its cleanup
    /// ran, so it retries at once, the permit most nodes granted first. Twice in a row at most;
    /// `false` when this is no such round.
    fn retry_split(&mut self, now: Instant, idx: u32) -> bool {
        let permits = &mut self.locks[idx].permits;
        let best = permits.split().filter(|_| permits.splits < 2);
        let Some(best) = best else {
            permits.splits = 0;
            return false;
        };
        permits.splits += 1;
        permits.prefer = best;
        self.send_cleanup(now, idx, false);
        self.start_attempt(now, idx);
        true
    }

    /// End the record's life with its final event.
    pub(super) fn finish(&mut self, idx: u32, event: Event) {
        self.events.push_back(event);
        self.free(idx);
    }

    /// The record is done: reusable.
    fn free(&mut self, idx: u32) {
        self.unregister(idx);
        self.locks[idx].enter(Phase::Free);
        self.locks.put_back(idx);
        self.arm(idx);
    }

    /// Mark a held lock lost if its validity has run out. Returns whether it just did.
    pub(super) fn expire_if_due(&mut self, now: Instant, idx: u32) -> bool {
        let expired = self.locks[idx].expire(now);
        if expired {
            let lock = self.locks.id(idx);
            self.events.push_back(Event::Lost { lock, reason: LostReason::Expired });
        }
        expired
    }

    /// The record's timer fired: expiry, the round's node timeout, the retry or the automatic
    /// extension that is due.
    pub(super) fn on_record_timeout(&mut self, now: Instant, idx: u32) {
        self.expire_if_due(now, idx);
        let s = &mut self.locks[idx];
        if s.deadline().is_some_and(|d| d <= now) {
            let links = &mut self.links;
            s.round.tally.time_out(|node| links.timed_out(node));
            // With every vote in, the round is decided: the record moves on.
            self.evaluate(now, idx);
            return;
        }
        let auto_due = match &s.phase {
            Phase::RetryWait { at } if *at <= now => return self.start_attempt(now, idx),
            Phase::Held(hold) => !hold.lost && s.auto_extend && hold.auto_at.is_some_and(|a| a <= now),
            _ => false,
        };
        if auto_due {
            match s.capped(now, s.ttl, self.config.drift_factor) {
                Some(ttl) => self.start_extend(now, idx, ttl, false),
                // The cap leaves no room: no more automatic extensions.
                None => {
                    if let Some(hold) = s.hold_mut() {
                        hold.auto_at = None;
                    }
                }
            }
        }
    }
}
