//! One lock's record: what it locks (keys, token, options), its attempts, the round in flight
//! with its tally, and the phase it is in, which carries that phase's data. Deciding a round
//! is here; carrying the decision out (sending, events) is the engine's.

use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::config::Retry;
use crate::error::{AcquireError, Fault, ReleaseOutcome, ReleaseReport, Vote, Votes};
use crate::event::{LockInfo, LockState};
use crate::options::LockOptions;
use crate::quorum::{drift, valid_until, validity_left, whole_ms};
use crate::wire::{Call, Op, OpAnswer, Queue};

/// The resource names of a lock, back to back (one buffer, reused with the slot).
#[derive(Debug, Default)]
pub(crate) struct Keys {
    bytes: Vec<u8>,
    /// `ends[i]` is the end of the i-th name.
    ends: Vec<u32>,
}

impl Keys {
    pub(crate) fn set<S: AsRef<str>>(&mut self, names: &[S]) {
        self.bytes.clear();
        self.ends.clear();
        for name in names {
            self.bytes.extend_from_slice(name.as_ref().as_bytes());
            self.ends.push(self.bytes.len() as u32);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone + '_ {
        (0..self.ends.len()).map(move |i| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            &self.bytes[start..self.ends[i] as usize]
        })
    }
}

/// The votes of one round, by node.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    votes: Vec<Vote>,
    pub(crate) yes: usize,
    pub(crate) no: usize,
    pub(crate) failed: usize,
}

impl Tally {
    fn reset(&mut self, n: usize) {
        self.votes.clear();
        self.votes.resize(n, Vote::Pending);
        self.yes = 0;
        self.no = 0;
        self.failed = 0;
    }

    /// Record `node`'s vote; `false` if it already voted in this round.
    #[inline]
    pub(crate) fn record(&mut self, node: usize, vote: Vote) -> bool {
        if self.votes[node] != Vote::Pending {
            return false;
        }
        match vote {
            Vote::Granted => self.yes += 1,
            Vote::Refused => self.no += 1,
            Vote::Pending => return false,
            _ => self.failed += 1,
        }
        self.votes[node] = vote;
        true
    }

    /// The node timeout passed: every node that has not answered timed out (`each` is told
    /// which).
    pub(crate) fn time_out(&mut self, mut each: impl FnMut(usize)) {
        for (i, v) in self.votes.iter_mut().enumerate().filter(|(_, v)| **v == Vote::Pending) {
            *v = Vote::TimedOut;
            self.failed += 1;
            each(i);
        }
    }

    pub(crate) fn open(&self) -> usize {
        self.votes.len() - self.yes - self.no - self.failed
    }

    pub(crate) fn votes(&self) -> &[Vote] {
        &self.votes
    }
}

/// The round in flight (or the last one): its identity, start and votes.
#[derive(Debug)]
pub(crate) struct Round {
    /// Bumped at every phase change; replies of older rounds are ignored.
    pub(crate) id: u32,
    pub(crate) start: Instant,
    pub(crate) tally: Tally,
}

/// How the acquisition is bounded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tries {
    pub(crate) made: u32,
    pub(crate) max: u32,
    /// When `acquire` was called.
    pub(crate) called: Instant,
    pub(crate) give_up_at: Option<Instant>,
}

/// The largest fencing token that Lua's doubles still count exactly: 2^53 − 1.
pub(crate) const MAX_FENCE: u64 = (1 << 53) - 1;

/// A held lock's state, kept through extensions and the release.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hold {
    pub(crate) valid_until: Instant,
    pub(crate) fence: Option<u64>,
    /// Never extended past this (`max_hold` after the acquisition).
    pub(crate) cap: Option<Instant>,
    /// The next automatic extension.
    pub(crate) auto_at: Option<Instant>,
    /// Known lost: the validity ran out, or an extension was refused.
    pub(crate) lost: bool,
    /// Nodes that refused the extension that found the lock lost (0 if it expired).
    pub(crate) refused: usize,
}

/// Where a lock is, with the data that only that phase has.
#[derive(Debug)]
pub(crate) enum Phase {
    Free,
    /// An attempt in flight; `proposal` is the largest fencing proposal of the granting nodes.
    Acquiring {
        deadline: Instant,
        proposal: u64,
    },
    /// The quorum granted, the fence round is in flight; `seen` is the largest counter a node
    /// reported at or above `proposal`, `valid` the validity the lock will have.
    Fencing {
        deadline: Instant,
        proposal: u64,
        seen: u64,
        valid: Instant,
    },
    /// The attempt failed; the next starts at `at`.
    RetryWait {
        at: Instant,
    },
    Held(Hold),
    /// An extension to `ttl` is in flight; `manual`: asked for by the caller.
    Extending {
        hold: Hold,
        deadline: Instant,
        ttl: Duration,
        manual: bool,
    },
    Releasing {
        hold: Hold,
        deadline: Instant,
    },
    /// The release was decided (its event is out, the id is free), but nodes have not all
    /// answered yet: the slot waits for them until `deadline`, so that a late `NOSCRIPT` can
    /// still be resent with the keys and token it needs.
    Draining {
        deadline: Instant,
    },
}

/// What a round's votes decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Not decided yet.
    Open,
    /// Held until `valid`, with this fencing token.
    Grant {
        valid: Instant,
        fence: Option<u64>,
    },
    /// Run a fence round proposing `proposal`; the lock is then valid until `valid`.
    Fence {
        proposal: u64,
        valid: Instant,
    },
    /// Release everywhere, then retry or give up.
    AttemptFailed,
    Extended(Instant),
    /// A majority refused the extension: the lock is lost.
    ExtendLost,
    ExtendUnconfirmed,
    /// A quorum extended, but only after the current validity ran out: too late.
    ExtendExpired,
    Released(ReleaseReport),
    /// A node's fence counter is at the limit Lua counts exactly: no token can be issued.
    FenceExhausted(u64),
    /// Every node of a draining release answered (or timed out): the slot is free.
    Drained,
}

/// One lock; slots are reused so steady-state cycles do not allocate.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) generation: u32,
    pub(crate) keys: Keys,
    pub(crate) token: Vec<u8>,
    pub(crate) ttl: Duration,
    pub(crate) fencing: bool,
    pub(crate) auto_extend: bool,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) tries: Tries,
    pub(crate) round: Round,
    pub(crate) phase: Phase,
    /// Registered as a waiter on its resources' wake channels.
    pub(crate) waiting: bool,
    /// What each node's latest release message since the current attempt was sent said (after
    /// its reply on that node); counted by [`heard_count`](Self::heard_count).
    pub(crate) heard: Vec<Heard>,
    /// Wake-ups this acquisition has had without winning.
    pub(crate) wakes: u32,
    /// Whether the next attempt marks the key that refuses it, and whether and where it joins
    /// the key's waiter queue.
    pub(crate) queue: Queue,
}

/// What the latest release message from one node, since a waiter's current attempt, said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Heard {
    /// No message.
    #[default]
    Nothing,
    /// A release, naming no waiter (the node keeps no queue, or it was empty).
    Released,
    /// A release that named this waiter next.
    NamedUs,
    /// A release that named another waiter next.
    NamedOther,
}

/// How many nodes' latest messages said what: released (any), named us, named another.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HeardCount {
    pub(crate) released: usize,
    pub(crate) named_us: usize,
    pub(crate) named_other: usize,
}

impl Slot {
    pub(crate) fn new(now: Instant) -> Self {
        Slot {
            generation: 0,
            keys: Keys::default(),
            token: Vec::new(),
            ttl: Duration::ZERO,
            fencing: false,
            auto_extend: false,
            max_hold: None,
            tries: Tries { made: 0, max: 1, called: now, give_up_at: None },
            round: Round { id: 0, start: now, tally: Tally::default() },
            phase: Phase::Free,
            waiting: false,
            heard: Vec::new(),
            wakes: 0,
            queue: Queue::No,
        }
    }

    /// Take the slot for a new acquisition of `options` with `token`, the TTL `ttl` (checked),
    /// called at `now`; `default_attempts` applies when the options give none.
    pub(crate) fn start(
        &mut self,
        now: Instant,
        options: &LockOptions,
        token: &[u8],
        ttl: Duration,
        default_attempts: u32,
    ) {
        self.generation = self.generation.wrapping_add(1);
        self.keys.set(&options.resources);
        self.token.clear();
        self.token.extend_from_slice(token);
        self.ttl = ttl;
        self.fencing = options.fencing;
        self.auto_extend = options.auto_extend;
        self.max_hold = options.max_hold;
        self.wakes = 0;
        self.queue = Queue::No;
        self.tries = Tries {
            made: 0,
            max: options.attempts.unwrap_or(default_attempts).max(1),
            called: now,
            // A wait too long to add (e.g. `Duration::MAX`) means no bound.
            give_up_at: options.wait.and_then(|w| now.checked_add(w)),
        };
    }

    /// Enter `phase` with a new round started at `start` over `n` nodes.
    pub(crate) fn begin_round(&mut self, start: Instant, n: usize, phase: Phase) {
        self.round.id = self.round.id.wrapping_add(1);
        self.round.start = start;
        self.round.tally.reset(n);
        self.phase = phase;
    }

    /// The release was decided with nodes still to answer: wait for them until `deadline`.
    pub(crate) fn enter_draining(&mut self, deadline: Instant) {
        // The round id is kept: the release's replies still belong to it.
        self.phase = Phase::Draining { deadline };
    }

    /// Turn automatic extension on or off; a held lock's next one is a third of its TTL away.
    pub(crate) fn set_auto_extend(&mut self, now: Instant, on: bool) {
        self.auto_extend = on;
        let ttl = self.ttl;
        if let Phase::Held(hold) = &mut self.phase {
            hold.auto_at = on.then(|| now + ttl / 3);
        }
    }

    /// Move to `phase`; replies of the round so far no longer count.
    pub(crate) fn enter(&mut self, phase: Phase) {
        self.round.id = self.round.id.wrapping_add(1);
        self.phase = phase;
    }

    /// The held state, in the phases that have one.
    pub(crate) fn hold(&self) -> Option<&Hold> {
        match &self.phase {
            Phase::Held(h) | Phase::Extending { hold: h, .. } | Phase::Releasing { hold: h, .. } => Some(h),
            _ => None,
        }
    }

    pub(crate) fn hold_mut(&mut self) -> Option<&mut Hold> {
        match &mut self.phase {
            Phase::Held(h) | Phase::Extending { hold: h, .. } | Phase::Releasing { hold: h, .. } => Some(h),
            _ => None,
        }
    }

    /// Whether the acquisition joined (or joins with its next attempt) the key's waiter
    /// queue: it leaves the queues when it ends.
    pub(crate) fn queued(&self) -> bool {
        matches!(self.queue, Queue::Back | Queue::Front)
    }

    /// The release call: hand each key to the next queued waiter for the shortest fallback
    /// delay (a named waiter that is gone costs the others no more than that); with `leave`,
    /// leave the queues too.
    pub(crate) fn release_call(&self, leave: bool, retry: Retry) -> Call {
        Call::Release { leave: leave && self.queued(), reserve_ms: (retry.min_delay.as_millis() as u64).max(1) }
    }

    /// The script call of `op` in the current phase (`None` if the phase has no such call),
    /// under the client's `retry` schedule.
    pub(crate) fn call(&self, op: Op, retry: Retry) -> Option<Call> {
        match (op, &self.phase) {
            // The common case (one key, no fencing, first attempt) takes the cheap command: a
            // fresh token has no leftover to re-enter. Retries re-enter by script.
            (Op::Acquire, _) if !self.fencing && self.keys.len() == 1 && self.tries.made <= 1 => {
                Some(Call::SetNx { ttl_ms: self.ttl.as_millis() as u64 })
            }
            (Op::SetNx, _) => Some(Call::SetNx { ttl_ms: self.ttl.as_millis() as u64 }),
            (Op::Acquire, _) => Some(Call::Acquire {
                ttl_ms: self.ttl.as_millis() as u64,
                fencing: self.fencing,
                queue: self.queue,
                // The queue outlives a waiter that stopped retrying without leaving it (a
                // crash) by a few fallback delays; unused (0) without a queue.
                queue_ttl_ms: if self.queued() {
                    (retry.max_delay * 4).max(self.ttl).max(Duration::from_secs(1)).as_millis() as u64
                } else {
                    0
                },
            }),
            (Op::Extend, Phase::Extending { ttl, .. }) => Some(Call::Extend { ttl_ms: ttl.as_millis().max(1) as u64 }),
            (Op::Release, _) => Some(self.release_call(true, retry)),
            (Op::Fence, Phase::Fencing { proposal, .. }) => Some(Call::Fence { proposal: *proposal }),
            _ => None,
        }
    }

    /// The release messages heard since the current attempt, counted.
    pub(crate) fn heard_count(&self) -> HeardCount {
        let mut c = HeardCount::default();
        for h in &self.heard {
            match h {
                Heard::Nothing => continue,
                Heard::Released => {}
                Heard::NamedUs => c.named_us += 1,
                Heard::NamedOther => c.named_other += 1,
            }
            c.released += 1;
        }
        c
    }

    /// When the slot next needs `handle_timeout`.
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        let live = |h: &Hold| (!h.lost).then_some(h.valid_until);
        match &self.phase {
            Phase::Free => None,
            Phase::Acquiring { deadline, .. }
            | Phase::Fencing { deadline, .. }
            | Phase::Releasing { deadline, .. }
            | Phase::Draining { deadline } => Some(*deadline),
            Phase::RetryWait { at } => Some(*at),
            Phase::Held(h) => min_opt(live(h), h.auto_at.filter(|_| !h.lost)),
            Phase::Extending { hold, deadline, .. } => min_opt(Some(*deadline), live(hold)),
        }
    }

    /// The round's deadline, in the phases that wait for replies.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Acquiring { deadline, .. }
            | Phase::Fencing { deadline, .. }
            | Phase::Extending { deadline, .. }
            | Phase::Releasing { deadline, .. }
            | Phase::Draining { deadline } => Some(*deadline),
            _ => None,
        }
    }

    /// A snapshot for [`Engine::lock_info`](crate::Engine::lock_info); `None` when free.
    pub(crate) fn info(&self) -> Option<LockInfo> {
        let state = match &self.phase {
            Phase::Free | Phase::Draining { .. } => return None,
            Phase::Acquiring { .. } | Phase::Fencing { .. } | Phase::RetryWait { .. } => LockState::Acquiring,
            Phase::Held(_) => LockState::Held,
            Phase::Extending { .. } => LockState::Extending,
            Phase::Releasing { .. } => LockState::Releasing,
        };
        let hold = self.hold();
        Some(LockInfo {
            state,
            valid_until: hold.map(|h| h.valid_until),
            fence: hold.and_then(|h| h.fence),
            lost: hold.is_some_and(|h| h.lost),
            attempts: self.tries.made,
        })
    }

    /// What the votes so far decide, at `now`, over `n` nodes with quorum `q`.
    pub(crate) fn decide(&self, now: Instant, n: usize, q: usize, drift_factor: f64) -> Decision {
        let t = &self.round.tally;
        let (yes, no, open) = (t.yes, t.no, t.open());
        let possible = yes + open >= q;
        match &self.phase {
            Phase::Acquiring { proposal, .. } => {
                if yes >= q {
                    match validity_left(self.round.start, now, self.ttl, drift_factor) {
                        Some(_) if self.fencing && *proposal > MAX_FENCE => Decision::FenceExhausted(*proposal - 1),
                        Some(valid) if self.fencing => Decision::Fence { proposal: *proposal, valid },
                        Some(valid) => Decision::Grant { valid, fence: None },
                        None => Decision::AttemptFailed,
                    }
                } else if !possible {
                    Decision::AttemptFailed
                } else {
                    Decision::Open
                }
            }
            Phase::Fencing { proposal, seen, valid, .. } => {
                let valid = Some(*valid).filter(|&v| v > now);
                if yes >= q {
                    match valid {
                        Some(valid) => Decision::Grant { valid, fence: Some(*proposal) },
                        None => Decision::AttemptFailed,
                    }
                } else if !possible {
                    // Too many nodes already had a counter at or above the proposal (a fence
                    // round of an earlier holder got there first): propose above it, while
                    // validity lasts.
                    match valid {
                        Some(_) if *seen >= MAX_FENCE => Decision::FenceExhausted(*seen),
                        Some(valid) if no > 0 => Decision::Fence { proposal: seen + 1, valid },
                        _ => Decision::AttemptFailed,
                    }
                } else {
                    Decision::Open
                }
            }
            Phase::Extending { hold, ttl, .. } => {
                if yes >= q {
                    // A quorum reached after the current validity ran out comes too late: the
                    // lock may already have been someone else's in between.
                    if hold.lost || hold.valid_until <= now {
                        return Decision::ExtendExpired;
                    }
                    match validity_left(self.round.start, now, *ttl, drift_factor) {
                        Some(valid) => Decision::Extended(valid),
                        None => Decision::ExtendUnconfirmed,
                    }
                } else if no > n - q {
                    Decision::ExtendLost
                } else if !possible {
                    Decision::ExtendUnconfirmed
                } else {
                    Decision::Open
                }
            }
            Phase::Releasing { .. } => {
                let outcome = if yes >= q {
                    ReleaseOutcome::Released
                } else if !possible && yes + no >= q {
                    ReleaseOutcome::NotHeld
                } else if yes + no + open < q {
                    ReleaseOutcome::Unreachable
                } else {
                    return Decision::Open;
                };
                Decision::Released(ReleaseReport { outcome, deleted: yes, absent: no, failed: t.failed, pending: open })
            }
            Phase::Draining { .. } if open == 0 => Decision::Drained,
            Phase::Free | Phase::Held(_) | Phase::RetryWait { .. } | Phase::Draining { .. } => Decision::Open,
        }
    }

    /// The vote an answer to `op` of the current round casts: `Ok(None)` for a `NOSCRIPT`
    /// (the engine resends with the source), `Err(v)` for a number the script cannot return.
    /// Keeps the fencing bookkeeping of the acquire and fence rounds.
    #[inline]
    pub(crate) fn answer(&mut self, op: Op, answer: OpAnswer) -> Result<Option<Vote>, i64> {
        let v = match answer {
            OpAnswer::NoScript => return Ok(None),
            OpAnswer::Error(m) if Fault::of_server_error(&m) == Fault::Misconfigured => {
                return Ok(Some(Vote::Misconfigured(m)));
            }
            OpAnswer::Error(m) => return Ok(Some(Vote::Error(m))),
            OpAnswer::Int(v) => v,
        };
        let vote = match (op, &mut self.phase) {
            // The largest counter the node had before the write: the proposal holds on this
            // node iff it was above it.
            (Op::Fence, Phase::Fencing { proposal, seen, .. }) if v >= 0 => {
                if (v as u64) < *proposal {
                    Vote::Granted
                } else {
                    *seen = (*seen).max(v as u64);
                    Vote::Refused
                }
            }
            // The node's fencing proposal: one more than its largest counter.
            (Op::Acquire | Op::SetNx, Phase::Acquiring { proposal, .. }) if v > 0 => {
                *proposal = (*proposal).max(v as u64);
                Vote::Granted
            }
            (Op::Release | Op::Extend, _) if v > 0 => Vote::Granted,
            (Op::Acquire | Op::SetNx | Op::Release | Op::Extend, _) if v == 0 => Vote::Refused,
            _ => return Err(v),
        };
        Ok(Some(vote))
    }

    /// Held from now until `valid`, with `fence`; returns the attempts it took.
    pub(crate) fn grant(&mut self, valid: Instant, fence: Option<u64>) -> u32 {
        let start = self.round.start;
        let hold = Hold {
            valid_until: valid,
            fence,
            // A cap too long to add (e.g. `Duration::MAX`) means no cap.
            cap: self.max_hold.and_then(|h| start.checked_add(h)),
            auto_at: self.auto_extend.then(|| start + self.ttl / 3),
            lost: false,
            refused: 0,
        };
        self.enter(Phase::Held(hold));
        self.tries.made
    }

    /// Back to held after an extension round, its automatic retry soon if one is due.
    pub(crate) fn back_to_held(&mut self, now: Instant) {
        let Some(mut hold) = self.hold().copied() else {
            return;
        };
        if self.auto_extend && !hold.lost && hold.auto_at.is_none() {
            hold.auto_at = Some(now + self.ttl / 10);
        }
        self.enter(Phase::Held(hold));
    }

    /// The extension round succeeded: valid until `valid`, the next one a third of its TTL
    /// after it started.
    pub(crate) fn extended(&mut self, valid: Instant) {
        let Phase::Extending { mut hold, ttl, .. } = self.phase else {
            return;
        };
        hold.valid_until = valid;
        hold.auto_at = self.auto_extend.then(|| self.round.start + ttl / 3);
        self.enter(Phase::Held(hold));
    }

    /// A majority refused the extension: the lock is lost. Returns whether it already was.
    pub(crate) fn extension_refused(&mut self, now: Instant) -> bool {
        let already = self.hold().is_some_and(|h| h.lost);
        let refused = self.round.tally.no;
        if let Some(hold) = self.hold_mut() {
            hold.lost = true;
            hold.refused = refused;
        }
        self.back_to_held(now);
        already
    }

    /// The extension's quorum came after the validity ran out: the lock is lost (it expired).
    /// Returns whether it already was.
    pub(crate) fn extension_too_late(&mut self, now: Instant) -> bool {
        let already = self.hold().is_some_and(|h| h.lost);
        if let Some(hold) = self.hold_mut() {
            hold.lost = true;
            hold.auto_at = None;
        }
        self.back_to_held(now);
        already
    }

    /// Mark a held lock lost if its validity has run out at `now`. Returns whether it just did.
    pub(crate) fn expire(&mut self, now: Instant) -> bool {
        let hold = match &mut self.phase {
            Phase::Held(h) | Phase::Extending { hold: h, .. } => h,
            _ => return false,
        };
        if hold.lost || hold.valid_until > now {
            return false;
        }
        hold.lost = true;
        hold.auto_at = None;
        true
    }

    /// The TTL an extension to `ttl` may have at `now`: cut to the time left before the
    /// `max_hold` cap, `None` once that leaves nothing beyond the drift margin.
    pub(crate) fn capped(&self, now: Instant, ttl: Duration, drift_factor: f64) -> Option<Duration> {
        let Some(cap) = self.hold().and_then(|h| h.cap) else {
            return Some(ttl);
        };
        let room = whole_ms(cap.saturating_duration_since(now));
        (room > drift(room, drift_factor)).then(|| ttl.min(room))
    }

    /// The error of an acquisition that gives up at `now` with quorum `q` (`addrs`: the
    /// nodes' addresses, for messages): the last attempt's outcome, wrapped in a wait timeout
    /// when attempts were left.
    pub(crate) fn give_up(&self, now: Instant, q: usize, addrs: Arc<[Arc<str>]>, drift_factor: f64) -> AcquireError {
        let tally = &self.round.tally;
        let attempts = self.tries.made;
        // Nodes that had not answered when the attempt was decided stay `Pending`: they
        // neither refused nor failed (a node timeout turns them into `TimedOut` first).
        // Too slow: a quorum granted but too late, or the attempt's validity ran out first.
        let too_slow = tally.yes >= q || valid_until(self.round.start, self.ttl, drift_factor).is_none_or(|v| v <= now);
        let n = tally.votes().len();
        let votes = || Votes::new(tally.votes().to_vec(), addrs);
        let misconfigured = tally.votes().iter().any(|v| v.fault() == Some(Fault::Misconfigured));
        let error = if too_slow {
            AcquireError::TooSlow { elapsed: now.saturating_duration_since(self.round.start), ttl: self.ttl, attempts }
        } else if tally.failed > n - q && misconfigured {
            AcquireError::Misconfigured { votes: votes(), attempts }
        } else if tally.failed > n - q {
            AcquireError::Unreachable { votes: votes(), attempts }
        } else {
            AcquireError::Held { votes: votes(), attempts }
        };
        if self.tries.made < self.tries.max {
            // Attempts were left, so the wait bound is what ended it.
            let waited = now.saturating_duration_since(self.tries.called);
            return AcquireError::WaitTimeout { waited, attempts, last: Box::new(error) };
        }
        error
    }
}

pub(crate) fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
