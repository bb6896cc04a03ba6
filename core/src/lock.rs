//! One lock's record: what it locks (keys, token, options), its attempts, the round in flight
//! with its tally ([`tally`]), and the phase it is in, which carries that phase's data.
//! Deciding a round is in [`decide`], a held lock's life (grant, extensions, expiry) in
//! [`hold`]; carrying a decision out (sending, events) is the engine's.

mod decide;
mod hold;
mod keys;
mod permits;
pub(crate) mod reentry;
mod tally;
mod view;

use std::time::{Duration, Instant};

use crate::config::{Config, Retry};
use crate::error::Vote;
use crate::options::LockOptions;
use crate::wire::{Call, Names, Op, Queue};

pub(crate) use decide::Decision;
pub(crate) use hold::Hold;
pub(crate) use keys::Keys;
pub(crate) use permits::Permits;
use tally::{Round, Tally};

/// How the acquisition is bounded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tries {
    pub(crate) made: u32,
    pub(crate) max: u32,
    /// When `acquire` was called.
    pub(crate) called: Instant,
    pub(crate) give_up_at: Option<Instant>,
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
    /// reported at or above `proposal`, `valid` the validity the lock will have. With
    /// `recording` (a re-entrant lock), a quorum accepted `proposal`, and the round records it
    /// as the owner's token.
    Fencing {
        deadline: Instant,
        proposal: u64,
        seen: u64,
        valid: Instant,
        recording: bool,
    },
    /// The attempt failed; the next starts at `at`.
    RetryWait {
        at: Instant,
    },
    Held(Hold),
    /// An extension to `ttl` is in flight; `manual`: asked for by the caller; `downgrade`: it
    /// also turns the write lock into a read lock.
    Extending {
        hold: Hold,
        deadline: Instant,
        ttl: Duration,
        manual: bool,
        downgrade: bool,
    },
    Releasing {
        hold: Hold,
        deadline: Instant,
    },
    /// The release was decided (its event is out, the id is free), but nodes have not all
    /// answered yet: the record waits for them until `deadline`, so that a late `NOSCRIPT` can
    /// still be resent with the keys and token it needs.
    Draining {
        deadline: Instant,
    },
}

/// One lock's record; records are reused so steady-state cycles do not allocate.
#[derive(Debug)]
pub(crate) struct Record {
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
    /// Whether the next attempt marks the keys that refuse it, and whether and where it joins
    /// their waiter queues.
    pub(crate) queue: Queue,
    /// How long a key handed to this waiter stays reserved for it, in ms (its queue entries
    /// say so): short when it hears release messages, a retry delay when it polls.
    pub(crate) reserve_ms: u64,
    /// A semaphore's permits (off for a mutex): while acquiring, `keys` are every permit in
    /// the client's order; once a quorum granted, the permits held.
    pub(crate) permits: Permits,
    /// A read lock (a write lock that was downgraded included).
    pub(crate) shared: bool,
    /// A semaphore waiter's place in the queue on every node: the wall-clock µs of its first
    /// refusal ([`Config::wall_clock`]).
    pub(crate) ticket: u64,
    /// A re-entrant lock's owner, which its key holds instead of the token (empty: not
    /// re-entrant; the token then names the hold).
    pub(crate) owner: Vec<u8>,
    /// What the current attempt's granting nodes had recorded of the owner's fencing token.
    pub(crate) recorded: reentry::Recorded,
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

impl Record {
    pub(crate) fn new(now: Instant) -> Self {
        Record {
            generation: 0,
            keys: Keys::default(),
            token: Vec::new(),
            ttl: Duration::ZERO,
            fencing: false,
            auto_extend: false,
            max_hold: None,
            tries: Tries { made: 0, max: 1, called: now, give_up_at: None },
            round: Round {
                id: 0,
                start: now,
                tally: Tally::default(),
                awaiting: Vec::new(),
                hops: Vec::new(),
                held: Vec::new(),
            },
            phase: Phase::Free,
            waiting: false,
            heard: Vec::new(),
            wakes: 0,
            queue: Queue::No,
            reserve_ms: 0,
            permits: Permits::default(),
            shared: false,
            ticket: 0,
            owner: Vec::new(),
            recorded: reentry::Recorded::default(),
        }
    }

    /// Take the record for a new acquisition of `options` with `token`, the TTL `ttl` (checked),
    /// called at `now` under `config`: its keys are named `{key_prefix}R`, and the options'
    /// own bounds replace the config's retry bounds (a wait alone has no count limit, a count
    /// alone no time bound).
    pub(crate) fn start(&mut self, now: Instant, options: &LockOptions, token: &[u8], ttl: Duration, config: &Config) {
        let retry = &config.retry;
        let (attempts, wait) = match (options.attempts, options.wait) {
            (None, None) => (retry.attempts, retry.wait),
            (None, Some(wait)) => (u32::MAX, Some(wait)),
            (Some(n), wait) => (n, wait),
        };
        self.generation = self.generation.wrapping_add(1);
        self.keys.set(&config.key_prefix, &options.resources);
        self.token.clear();
        self.token.extend_from_slice(token);
        let (limit, want) = (options.limit.unwrap_or(0), options.permits);
        self.permits.start(&config.key_prefix, &options.resources[0], limit, want, token);
        self.ttl = ttl;
        self.fencing = options.fencing;
        self.shared = options.shared;
        self.owner.clear();
        self.owner.extend_from_slice(options.owner.as_deref().unwrap_or_default().as_bytes());
        self.auto_extend = options.auto_extend;
        self.max_hold = options.max_hold;
        self.wakes = 0;
        self.queue = Queue::No;
        self.reserve_ms = 0;
        self.tries = Tries {
            made: 0,
            max: attempts.max(1),
            called: now,
            // A wait too long to add (e.g. `Duration::MAX`) means no bound.
            give_up_at: wait.and_then(|w| now.checked_add(w)),
        };
    }

    /// Enter `phase` with a new round started at `start` over `n` nodes.
    pub(crate) fn begin_round(&mut self, start: Instant, n: usize, phase: Phase) {
        self.round.id = self.round.id.wrapping_add(1);
        self.round.start = start;
        self.round.reset(n);
        self.phase = phase;
    }

    /// The release was decided with nodes still to answer: wait for them until `deadline`.
    pub(crate) fn enter_draining(&mut self, deadline: Instant) {
        // The round id is kept: the release's replies still belong to it.
        self.phase = Phase::Draining { deadline };
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

    /// The release call: hand each key to the next queued waiter; with `leave`, leave the
    /// queues this acquisition joined too; a `cleanup` of an attempt hands on only what was
    /// handed to it.
    pub(crate) fn release_call(&self, leave: bool, cleanup: bool, retry: Retry) -> Call {
        if !self.owner.is_empty() {
            let leave = leave && self.queued();
            return Call::Reentry(crate::wire::reentry::Step::Release { leave, reserve_ms: self.reserve_ms });
        }
        if self.shared {
            return Call::ReadRelease { leave: leave && self.queued(), reserve_ms: self.reserve_ms };
        }
        let (reserve_ms, want, leave) = (self.reserve_ms, self.permits.want.max(1), leave && self.queued());
        // A semaphore waiter whose attempt some nodes granted (taking it off their queues) and
        // that waits on goes back in line there.
        let waits = cleanup && !leave && self.queued() && self.permits.on();
        let rejoin = waits.then(|| (self.ticket, self.queue_ttl_ms(retry)));
        Call::Release { leave, reserve_ms, want, cleanup, rejoin }
    }

    /// From now on the acquisition waits: its attempts mark the keys that refuse them and join
    /// their queues, asking for a reservation that covers how it learns of a hand-over (at once
    /// when it `listens` to release messages, else by its next retry). The first call fixes
    /// the reservation (it is part of the acquisition's queue entries) and the `ticket`.
    pub(crate) fn start_waiting(&mut self, listens: bool, retry: Retry, node_timeout: Duration, ticket: u64) {
        if self.queue == Queue::No {
            self.ticket = ticket;
            let reserve = if listens { retry.min_delay } else { retry.max_delay + node_timeout };
            self.reserve_ms = (reserve.as_millis() as u64).max(1);
            self.queue = Queue::Back;
        }
    }

    /// The cleanup release of a semaphore's permits the lock does not hold (its extras, late or
    /// stray grants; with `leave`, also leaving the queue): what was handed to it is handed on.
    pub(crate) fn permit_cleanup(&self, leave: bool) -> Call {
        let (reserve_ms, want) = (self.reserve_ms, self.permits.want.max(1));
        Call::Release { leave, reserve_ms, want, cleanup: true, rejoin: None }
    }

    /// The script call of `op` in the current phase (`None` if the phase has no such call),
    /// under the client's `retry` schedule.
    pub(crate) fn call(&self, op: Op, retry: Retry) -> Option<Call> {
        if !self.owner.is_empty() {
            return self.reentry_call(op, retry);
        }
        match (op, &self.phase) {
            // The common case (one key, no fencing, first attempt) takes the cheap command: a
            // fresh token has no leftover to re-enter. Retries re-enter by script.
            (Op::Acquire, _) if self.read_set_nx() => Some(Call::ReadSetNx { ttl_ms: self.ttl.as_millis() as u64 }),
            (Op::Acquire, _) if self.shared => Some(Call::Read {
                ttl_ms: self.ttl.as_millis() as u64,
                fencing: self.fencing,
                queue: self.queue,
                queue_ttl_ms: self.queue_ttl_ms(retry),
                reserve_ms: self.reserve_ms,
            }),
            (Op::Extend, Phase::Extending { ttl, downgrade: true, .. }) => {
                Some(Call::Downgrade { ttl_ms: ttl.as_millis().max(1) as u64 })
            }
            (Op::Extend, Phase::Extending { ttl, .. }) if self.shared => {
                Some(Call::ReadExtend { ttl_ms: ttl.as_millis().max(1) as u64 })
            }
            (Op::Acquire, _) if self.permits.fast => Some(Call::SetNx { ttl_ms: self.ttl.as_millis() as u64 }),
            (Op::Acquire | Op::Permits, _) if self.permits.on() => Some(Call::Permits {
                ttl_ms: self.ttl.as_millis() as u64,
                fencing: self.fencing,
                queue: self.queue,
                queue_ttl_ms: self.queue_ttl_ms(retry),
                reserve_ms: self.reserve_ms,
                want: u32::from(self.permits.want),
                ticket: self.ticket,
                prefer: self.permits.prefer,
            }),
            (Op::Acquire, _) if !self.fencing && self.keys.len() == 1 && self.tries.made <= 1 => {
                Some(Call::SetNx { ttl_ms: self.ttl.as_millis() as u64 })
            }
            // The cheap command sent again (a cluster's redirect): a reader's is its own.
            (Op::SetNx, _) if self.shared => Some(Call::ReadSetNx { ttl_ms: self.ttl.as_millis() as u64 }),
            (Op::SetNx, _) => Some(Call::SetNx { ttl_ms: self.ttl.as_millis() as u64 }),
            (Op::Acquire, _) => Some(Call::Acquire {
                ttl_ms: self.ttl.as_millis() as u64,
                fencing: self.fencing,
                queue: self.queue,
                queue_ttl_ms: self.queue_ttl_ms(retry),
                reserve_ms: self.reserve_ms,
            }),
            (Op::Extend, Phase::Extending { ttl, .. }) => Some(Call::Extend { ttl_ms: ttl.as_millis().max(1) as u64 }),
            (Op::Release, _) => Some(self.release_call(true, false, retry)),
            (Op::Fence, Phase::Fencing { proposal, .. }) => Some(Call::Fence { proposal: *proposal }),
            _ => None,
        }
    }

    /// Whether the current attempt of a read lock takes a free key for its token alone by a
    /// plain `SET NX` ([`Call::ReadSetNx`]): a fresh token's first attempt (nothing of it to
    /// re-enter), unfenced (the epoch is the script's), when another attempt may follow (a
    /// refusal says only that the key exists: readers there may still admit the token, and the
    /// script then tries at once).
    pub(crate) fn read_set_nx(&self) -> bool {
        self.shared
            && self.owner.is_empty()
            && !self.fencing
            && self.keys.len() == 1
            && self.tries.made <= 1
            && self.tries.max > 1
    }

    /// How long the queue outlives a waiter that stopped retrying without leaving it (a
    /// crash): a few fallback delays; unused (0) without a queue.
    pub(crate) fn queue_ttl_ms(&self, retry: Retry) -> u64 {
        if self.queued() {
            (retry.max_delay * 4).max(self.ttl).max(Duration::from_secs(1)).as_millis() as u64
        } else {
            0
        }
    }

    /// The names a call derives from the keys, under `fence_prefix`.
    pub(crate) fn names<'a>(&'a self, fence_prefix: &'a [u8]) -> Names<'a> {
        let sem = self.permits.on().then_some((self.permits.limit_key.as_slice(), self.permits.queue.as_slice()));
        Names { fence_prefix, sem, shard: false, owner: &self.owner }
    }

    /// Count a new attempt over `n` nodes, which has heard no release message yet. A queued
    /// waiter joins at the back (unless already in the queue), or back at the front if it was
    /// named next and still refused (other nodes named another waiter, or the reservation ran
    /// out first).
    pub(crate) fn next_attempt(&mut self, n: usize) {
        self.tries.made += 1;
        self.recorded = reentry::Recorded::default();
        if self.permits.on() {
            // Every permit is a candidate again, in the client's order.
            self.keys.set_bytes(self.permits.all.iter());
            self.permits.reset_round(n);
            self.permits.fast = false;
        }
        if self.queued() {
            self.queue = if self.heard_count().named_us > 0 { Queue::Front } else { Queue::Back };
        }
        self.heard.clear();
        self.heard.resize(n, Heard::Nothing);
    }

    /// A release message from node `n`: the releasing holder's token, and the waiter the node
    /// named next (`next`; empty when it named none).
    ///
    /// It counts while the current attempt waits for its retry, or once `n` has answered it
    /// (messages and replies share the connection, so a message before the reply announced a
    /// release the attempt itself saw); never for a release of this lock's own token (its
    /// cleanup).
    pub(crate) fn hear(&mut self, n: usize, releaser: &[u8], next: &[u8]) {
        if self.value() == releaser || n >= self.heard.len() {
            return;
        }
        let counts = match &self.phase {
            Phase::Acquiring { .. } => self.round.tally.votes().get(n).is_some_and(|v| *v != Vote::Pending),
            Phase::RetryWait { .. } => true,
            _ => false,
        };
        if counts {
            // The node's latest message is what it says now: a release that named another
            // waiter, then one that names us, counts as naming us. A semaphore's release that
            // frees several permits names a waiter per permit, one message each: once one of
            // them named us, a permit is reserved for us there, whoever the others name.
            if self.permits.on() && self.heard[n] == Heard::NamedUs {
                return;
            }
            self.heard[n] = if next.is_empty() {
                Heard::Released
            } else if next == self.value() {
                Heard::NamedUs
            } else {
                Heard::NamedOther
            };
        }
    }

    /// What the lock key holds for this lock: the owner of a re-entrant lock, else the token.
    pub(crate) fn value(&self) -> &[u8] {
        if self.owner.is_empty() { &self.token } else { &self.owner }
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

    /// When the record next needs `handle_timeout`.
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
}

pub(crate) fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
