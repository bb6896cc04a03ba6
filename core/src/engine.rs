//! The engine: many concurrent locks over one link per node.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::{
    AcquireError, ConfigError, ExtendError, LinkError, LostReason, Misuse, ReleaseOutcome, ReleaseReport, Vote,
};
use crate::event::{AcquireRequest, Event, LinkState, LockId, LockInfo, LockState, NodeId};
use crate::link::{Kind, Link, Pending};
use crate::quorum::{drift, quorum, valid_until, validity_left};
use crate::resp::{self, Reply};
use crate::rng::Rng;
use crate::scripts;

/// Longest TTL accepted (about 34 years), far inside Redis' millisecond range.
const MAX_TTL_MS: u128 = 1 << 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Acquiring,
    Fencing,
    RetryWait,
    Held,
    Extending,
    Releasing,
}

/// One lock's record; slots are reused so steady-state cycles do not allocate.
#[derive(Debug)]
struct Slot {
    generation: u32,
    state: State,
    /// The resource names, back to back; `key_ends[i]` is the end of the i-th.
    keys: Vec<u8>,
    key_ends: Vec<u32>,
    token: Vec<u8>,
    ttl: Duration,
    fencing: bool,
    auto_extend: bool,
    attempts: u32,
    max_attempts: u32,
    give_up_at: Option<Instant>,
    max_hold: Option<Duration>,
    cap: Option<Instant>,
    /// Bumped at every new round; replies of older rounds are ignored.
    round: u32,
    start: Instant,
    deadline: Option<Instant>,
    votes: Vec<Vote>,
    yes: usize,
    no: usize,
    failed: usize,
    /// The fencing token: during the acquire round, the largest proposal of the granting
    /// nodes; during the fence round, the proposal being written.
    fence: u64,
    /// The largest counter a node of the fence round reported at or above the proposal.
    fence_seen: u64,
    /// Validity the current acquire attempt will have (fencing phase).
    pending_valid: Option<Instant>,
    valid_until: Option<Instant>,
    auto_at: Option<Instant>,
    lost: bool,
    /// The extension in flight was asked for by the caller (else automatic).
    manual: bool,
    extend_ttl: Duration,
    /// When the slot next needs `handle_timeout`.
    wake: Option<Instant>,
    /// The time of the slot's live entry in the timer heap; never after `wake`. Entries of
    /// other times are stale and skipped; a later `wake` is queued when this one surfaces.
    queued: Option<Instant>,
}

impl Slot {
    fn new(now: Instant) -> Self {
        Slot {
            generation: 0,
            state: State::Free,
            keys: Vec::new(),
            key_ends: Vec::new(),
            token: Vec::new(),
            ttl: Duration::ZERO,
            fencing: false,
            auto_extend: false,
            attempts: 0,
            max_attempts: 1,
            give_up_at: None,
            max_hold: None,
            cap: None,
            round: 0,
            start: now,
            deadline: None,
            votes: Vec::new(),
            yes: 0,
            no: 0,
            failed: 0,
            fence: 0,
            fence_seen: 0,
            pending_valid: None,
            valid_until: None,
            auto_at: None,
            lost: false,
            manual: false,
            extend_ttl: Duration::ZERO,
            wake: None,
            queued: None,
        }
    }

    fn key_iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut start = 0usize;
        self.key_ends.iter().map(move |&end| {
            let k = &self.keys[start..end as usize];
            start = end as usize;
            k
        })
    }

    fn open(&self) -> usize {
        self.votes.len() - self.yes - self.no - self.failed
    }

    fn next_wake(&self) -> Option<Instant> {
        let mut w = self.deadline;
        if matches!(self.state, State::Held | State::Extending) && !self.lost {
            w = min_opt(w, self.valid_until);
            if self.state == State::Held {
                w = min_opt(w, self.auto_at);
            }
        }
        w
    }
}

/// The whole milliseconds of `d` (Redis expiries are in milliseconds).
fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis().min(u64::MAX as u128) as u64)
}

fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// What a reply means, decoded against the request it answers (owned, so the input
/// buffer can be released before the engine acts on it).
#[derive(Debug)]
enum Answer {
    Ok,
    Int(i64),
    ShaMatches(bool),
    NoScript,
    ServerError(String),
}

/// The Redlock engine for one set of N nodes. See the [crate docs](crate) for the run loop.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    quorum: usize,
    links: Vec<Link>,
    /// Each node's address without its password, for link errors.
    addrs: Vec<Arc<str>>,
    /// The earliest reconnect time or connect deadline of any link.
    link_wake: Option<Instant>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    active: usize,
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    events: VecDeque<Event>,
    rng: Rng,
    /// Handshake bytes, encoded once.
    handshake: Vec<u8>,
    /// Reused buffer for a round's command, encoded once and copied to every link.
    scratch: Vec<u8>,
    handshake_kinds: Vec<Kind>,
}

impl Engine {
    /// Build an engine for `config.nodes`, validating the config. Every link starts down and
    /// due for its first connect attempt at once: [`poll_connect`](Self::poll_connect) hands
    /// them out (a caller that opens sockets by itself may call
    /// [`handle_connected`](Self::handle_connected) directly).
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        let n = config.nodes.len();
        let links = (0..n).map(|_| Link::new(config.reconnect_min)).collect();
        let addrs = config.nodes.iter().map(|c| Arc::from(c.to_string())).collect();
        let mut engine = Engine {
            quorum: quorum(n),
            links,
            addrs,
            link_wake: None,
            slots: Vec::new(),
            free: Vec::new(),
            active: 0,
            timers: BinaryHeap::new(),
            events: VecDeque::new(),
            rng: Rng::new(config.seed),
            handshake: Vec::new(),
            scratch: Vec::new(),
            handshake_kinds: Vec::new(),
            config,
        };
        engine.build_handshake();
        Ok(engine)
    }

    fn build_handshake(&mut self) {
        // Every node gets the same handshake except for AUTH/SELECT, which are per node;
        // only the shared tail is cached here.
        let out = &mut self.handshake;
        if let Some(name) = &self.config.client_name {
            resp::command(out, &[b"CLIENT", b"SETNAME", name.as_bytes()]);
            self.handshake_kinds.push(Kind::SetName);
        }
        for (script, sha) in [
            (scripts::ACQUIRE, scripts::ACQUIRE_SHA),
            (scripts::EXTEND, scripts::EXTEND_SHA),
            (scripts::RELEASE, scripts::RELEASE_SHA),
            (scripts::FENCE, scripts::FENCE_SHA),
        ] {
            resp::command(out, &[b"SCRIPT", b"LOAD", script.as_bytes()]);
            self.handshake_kinds.push(Kind::ScriptLoad(sha));
        }
    }

    // ----- getters -------------------------------------------------------------------------

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Number of nodes, N.
    pub fn node_count(&self) -> usize {
        self.links.len()
    }

    /// Nodes that must agree: N / 2 + 1.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Whether the engine considers `node` connected.
    pub fn is_connected(&self, node: NodeId) -> bool {
        self.links.get(node.index()).is_some_and(Link::is_up)
    }

    /// Where `node`'s connection stands (down until a time, connecting, up), or `None` for an
    /// unknown node.
    pub fn link_state(&self, node: NodeId) -> Option<LinkState> {
        self.links.get(node.index()).map(|l| l.state)
    }

    /// Why `node`'s last connect attempt or connection failed (e.g. `connect failed:
    /// Connection refused`, `AUTH failed: WRONGPASS ...`), as its votes report it while it is
    /// down; `None` once a connection has completed its handshake again.
    pub fn last_error(&self, node: NodeId) -> Option<&str> {
        self.links.get(node.index())?.last_error.as_deref()
    }

    /// Number of locks the engine is tracking (acquiring, held or releasing).
    pub fn active_locks(&self) -> usize {
        self.active
    }

    /// Requests sent to `node` whose replies have not arrived yet.
    pub fn in_flight(&self, node: NodeId) -> usize {
        self.links.get(node.index()).map_or(0, |l| l.pending.len())
    }

    /// A snapshot of a lock, or `None` for an unknown id.
    pub fn lock_info(&self, lock: LockId) -> Option<LockInfo> {
        let s = self.slot(lock).ok()?;
        let state = match s.state {
            State::Free => return None,
            State::Acquiring | State::Fencing | State::RetryWait => LockState::Acquiring,
            State::Held => LockState::Held,
            State::Extending => LockState::Extending,
            State::Releasing => LockState::Releasing,
        };
        let held = matches!(state, LockState::Held | LockState::Extending | LockState::Releasing);
        Some(LockInfo {
            state,
            valid_until: s.valid_until,
            fence: (held && s.fencing).then_some(s.fence),
            lost: s.lost,
            attempts: s.attempts,
        })
    }

    // ----- inputs --------------------------------------------------------------------------

    /// A connection to `node` is open (normally the attempt [`poll_connect`](Self::poll_connect)
    /// handed out). The engine queues the handshake (AUTH, SELECT, CLIENT SETNAME, SCRIPT
    /// LOAD); later commands are pipelined behind it.
    ///
    /// Calling it for a link the engine thinks is up first treats the old connection as lost.
    pub fn handle_connected(&mut self, now: Instant, node: NodeId) {
        let Some(link) = self.links.get_mut(node.index()) else {
            return;
        };
        if link.is_up() {
            self.handle_disconnected(now, node);
        }
        let cfg = &self.config.nodes[node.index()];
        let link = &mut self.links[node.index()];
        link.reset(LinkState::Up { since: now });
        let mut push = |kind| link.pending.push_back(Pending { kind, slot: u32::MAX, generation: 0, round: 0 });
        if let Some(pass) = &cfg.password {
            match &cfg.user {
                Some(user) => resp::command(&mut link.out, &[b"AUTH", user.as_bytes(), pass.as_bytes()]),
                None => resp::command(&mut link.out, &[b"AUTH", pass.as_bytes()]),
            }
            push(Kind::Auth);
        }
        if cfg.db != 0 {
            resp::array(&mut link.out, 2);
            resp::bulk(&mut link.out, b"SELECT");
            resp::bulk_uint(&mut link.out, cfg.db.into());
            push(Kind::Select);
        }
        link.out.extend_from_slice(&self.handshake);
        for &k in &self.handshake_kinds {
            link.pending.push_back(Pending { kind: k, slot: u32::MAX, generation: 0, round: 0 });
        }
        self.update_link_wake();
    }

    /// The connect attempt to `node` that [`poll_connect`](Self::poll_connect) handed out
    /// failed (refused, unreachable, unresolvable host...). `reason` is recorded for the
    /// node's votes (`connect failed: {reason}`), and the next attempt is scheduled after the
    /// reconnect backoff. Ignored unless the node is [`LinkState::Connecting`].
    pub fn handle_connect_failed(&mut self, now: Instant, node: NodeId, reason: &str) {
        let Some(link) = self.links.get_mut(node.index()) else {
            return;
        };
        if !matches!(link.state, LinkState::Connecting { .. }) {
            return;
        }
        link.last_error = Some(format!("connect failed: {reason}"));
        self.schedule_reconnect(now, node.index(), None);
        self.update_link_wake();
    }

    /// Bytes arrived from `node`, split anywhere. Complete replies are matched to requests
    /// in order; a partial reply waits for the rest.
    pub fn handle_data(&mut self, now: Instant, node: NodeId, data: &[u8]) {
        let i = node.index();
        let buffered = match self.links.get(i) {
            Some(link) if link.is_up() => !link.inbuf.is_empty(),
            _ => return,
        };
        if !buffered {
            // The usual case: decode straight from the caller's bytes; keep only a partial tail.
            if let Some(used) = self.consume(now, node, data) {
                self.links[i].inbuf.extend_from_slice(&data[used..]);
            }
            return;
        }
        let mut buf = std::mem::take(&mut self.links[i].inbuf);
        buf.extend_from_slice(data);
        if let Some(used) = self.consume(now, node, &buf) {
            buf.drain(..used);
            self.links[i].inbuf = buf;
        }
    }

    /// Decode and act on the whole replies at the front of `buf`. Returns how many bytes
    /// they took, or `None` if the link failed (it is down and its input is void).
    fn consume(&mut self, now: Instant, node: NodeId, buf: &[u8]) -> Option<usize> {
        let i = node.index();
        let mut pos = 0;
        loop {
            let (pending, answer) = match resp::decode(&buf[pos..]) {
                Ok(None) if buf.len() - pos > resp::MAX_REPLY => {
                    let detail = format!("a reply longer than {} bytes without an end", resp::MAX_REPLY);
                    self.fail_link(now, LinkError::Malformed { node, addr: self.addr(node), detail });
                    return None;
                }
                Ok(None) => return Some(pos),
                Err(detail) => {
                    self.fail_link(now, LinkError::Malformed { node, addr: self.addr(node), detail });
                    return None;
                }
                Ok(Some((reply, used))) => {
                    let Some(p) = self.links[i].pending.pop_front() else {
                        let reply = reply.render();
                        self.fail_link(now, LinkError::Unsolicited { node, addr: self.addr(node), reply });
                        return None;
                    };
                    pos += used;
                    match classify(p.kind, &reply) {
                        Some(a) => (p, a),
                        None => {
                            let reply = reply.render();
                            let request = p.kind.name();
                            let addr = self.addr(node);
                            self.fail_link(now, LinkError::Unexpected { node, addr, request, reply });
                            return None;
                        }
                    }
                }
            };
            if let Err(e) = self.apply(now, node, pending, answer) {
                self.fail_link(now, e);
                return None;
            }
            if !self.links[i].is_up() {
                return None;
            }
        }
    }

    /// The connection to `node` is closed (or, while connecting, the attempt was given up).
    /// Requests in flight count as failed on that node, and the next connect attempt is
    /// scheduled after the reconnect backoff.
    pub fn handle_disconnected(&mut self, now: Instant, node: NodeId) {
        self.take_down(now, node, Vote::Down);
    }

    /// Skip the backoff: make `node`'s next connect attempt due at once, and start its backoff
    /// over from [`Config::reconnect_min`]. Does nothing unless the node is
    /// [`LinkState::Down`]. For a driver that (re)starts its sockets; a link that is due
    /// but never handed to [`poll_connect`](Self::poll_connect) costs no timer.
    pub fn reconnect_now(&mut self, node: NodeId) {
        let min = self.config.reconnect_min;
        let Some(link) = self.links.get_mut(node.index()) else {
            return;
        };
        if let LinkState::Down { .. } = link.state {
            link.state = LinkState::Down { retry_at: None };
            link.backoff = min;
            self.update_link_wake();
        }
    }

    /// Time passed: run what is due (node timeouts, retries, expiry, automatic extension,
    /// connect deadlines, reconnect times). Extra calls are harmless.
    ///
    /// A connect attempt past its deadline is abandoned: [`Event::LinkFailed`] with
    /// [`LinkError::ConnectTimeout`], and the next attempt is scheduled. A node whose
    /// reconnect time has come is due for [`poll_connect`](Self::poll_connect).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.link_wake.is_some_and(|w| w <= now) {
            self.link_timeouts(now);
        }
        while let Some(&Reverse((when, slot))) = self.timers.peek() {
            if when > now {
                break;
            }
            self.timers.pop();
            let s = &mut self.slots[slot as usize];
            if s.queued != Some(when) {
                continue;
            }
            s.queued = None;
            if s.wake.is_some_and(|w| w <= now) {
                s.wake = None;
                self.on_slot_timeout(now, slot);
            }
            self.arm(slot);
        }
    }

    // ----- commands ------------------------------------------------------------------------

    /// Start acquiring a lock: the first attempt goes to every connected node at once.
    ///
    /// The outcome arrives as [`Event::Acquired`] or [`Event::AcquireFailed`]. Nodes that are
    /// down count as failed at once.
    pub fn acquire(&mut self, now: Instant, req: &AcquireRequest<'_>) -> Result<LockId, Misuse> {
        let ttl = self.check_ttl(req.ttl)?;
        if req.resources.is_empty() || req.resources.iter().any(|r| r.is_empty()) {
            return Err(Misuse::EmptyResource);
        }
        if req.token.is_empty() {
            return Err(Misuse::EmptyToken);
        }
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::new(now));
                (self.slots.len() - 1) as u32
            }
        };
        self.active += 1;
        let default_attempts = if req.wait.is_some() { u32::MAX } else { self.config.retry.attempts };
        let s = &mut self.slots[idx as usize];
        s.generation = s.generation.wrapping_add(1);
        s.keys.clear();
        s.key_ends.clear();
        for r in req.resources {
            s.keys.extend_from_slice(r);
            s.key_ends.push(s.keys.len() as u32);
        }
        s.token.clear();
        s.token.extend_from_slice(req.token);
        s.ttl = ttl;
        s.fencing = req.fencing;
        s.auto_extend = req.auto_extend;
        s.attempts = 0;
        s.max_attempts = req.attempts.unwrap_or(default_attempts).max(1);
        s.give_up_at = req.wait.map(|w| now + w);
        s.max_hold = req.max_hold;
        s.cap = None;
        s.valid_until = None;
        s.auto_at = None;
        s.lost = false;
        s.manual = false;
        let lock = LockId { slot: idx, generation: s.generation };
        self.start_attempt(now, idx);
        self.arm(idx);
        Ok(lock)
    }

    /// Extend a held lock to `ttl` from now (`None`: its acquire TTL) on every node.
    ///
    /// The outcome arrives as [`Event::Extended`] or [`Event::ExtendFailed`]. A failed
    /// extension never deletes anything. When `ttl` leaves less validity than the lock has,
    /// the shorter deadline applies at once, whatever the outcome: a node may have applied
    /// the new expiry even if its answer never arrived. If an automatic extension is already in flight, its
    /// outcome is reported as the answer to this call.
    pub fn extend(&mut self, now: Instant, lock: LockId, ttl: Option<Duration>) -> Result<(), Misuse> {
        let s = self.slot(lock)?;
        let mut ttl = self.check_ttl(ttl.unwrap_or(s.ttl))?;
        match s.state {
            State::Acquiring | State::Fencing | State::RetryWait => {
                return Err(Misuse::NotAcquired(lock));
            }
            State::Releasing => return Err(Misuse::Busy(lock)),
            State::Extending if s.manual => return Err(Misuse::Busy(lock)),
            State::Extending => {
                self.slots[lock.slot as usize].manual = true;
                return Ok(());
            }
            _ => {}
        }
        if let Some(cap) = s.cap {
            let room = whole_ms(cap.saturating_duration_since(now));
            if room <= drift(room, self.config.drift_factor) {
                return Err(Misuse::CapReached(lock));
            }
            ttl = ttl.min(room);
        }
        let idx = lock.slot;
        if self.expire_if_due(now, idx) || self.slots[idx as usize].lost {
            let error = if self.slots[idx as usize].valid_until.is_some_and(|v| v <= now) {
                ExtendError::Expired
            } else {
                ExtendError::Lost { refused: 0, nodes: self.links.len() }
            };
            self.events.push_back(Event::ExtendFailed { lock, error });
            return Ok(());
        }
        self.start_extend(now, idx, ttl, true);
        self.arm(idx);
        Ok(())
    }

    /// Release a held lock: the compare-and-delete script on every node.
    ///
    /// The outcome arrives as [`Event::Released`], after which the id is free. An extension
    /// in flight is abandoned (reported as [`ExtendError::Cancelled`] if it was asked for).
    pub fn release(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        let s = self.slot(lock)?;
        match s.state {
            State::Acquiring | State::Fencing | State::RetryWait => {
                return Err(Misuse::NotAcquired(lock));
            }
            State::Releasing => return Err(Misuse::Busy(lock)),
            State::Extending if s.manual => {
                self.events.push_back(Event::ExtendFailed { lock, error: ExtendError::Cancelled });
            }
            _ => {}
        }
        let idx = lock.slot;
        self.begin_round(now, idx, State::Releasing);
        let s = &mut self.slots[idx as usize];
        s.deadline = Some(now + self.config.node_timeout);
        self.send_round(now, idx, Kind::Release);
        self.arm(idx);
        Ok(())
    }

    /// Abandon an acquisition (it ends with [`AcquireError::Cancelled`], and whatever it
    /// took is released) or an extension in flight (it ends with [`ExtendError::Cancelled`]).
    pub fn cancel(&mut self, now: Instant, lock: LockId) -> Result<(), Misuse> {
        let s = self.slot(lock)?;
        let idx = lock.slot;
        match s.state {
            State::Acquiring | State::Fencing | State::RetryWait => {
                self.send_cleanup(idx);
                self.finish(idx, Event::AcquireFailed { lock, error: AcquireError::Cancelled });
            }
            State::Extending => {
                let manual = s.manual;
                self.back_to_held(now, idx);
                if manual {
                    self.events.push_back(Event::ExtendFailed { lock, error: ExtendError::Cancelled });
                }
                self.arm(idx);
            }
            _ => return Err(Misuse::NothingToCancel(lock)),
        }
        Ok(())
    }

    /// Turn automatic extension of a lock on or off.
    pub fn set_auto_extend(&mut self, now: Instant, lock: LockId, on: bool) -> Result<(), Misuse> {
        self.slot(lock)?;
        let idx = lock.slot;
        let s = &mut self.slots[idx as usize];
        s.auto_extend = on;
        if s.state == State::Held {
            s.auto_at = on.then(|| now + s.ttl / 3);
        }
        self.arm(idx);
        Ok(())
    }

    // ----- outputs -------------------------------------------------------------------------

    /// The bytes waiting to be written to `node`, if any. Write as many as the socket takes,
    /// then report how many with [`advance_transmit`](Self::advance_transmit).
    pub fn poll_transmit(&self, node: NodeId) -> Option<&[u8]> {
        let link = self.links.get(node.index())?;
        let b = link.unsent();
        (!b.is_empty()).then_some(b)
    }

    /// `n` bytes of [`poll_transmit`](Self::poll_transmit) were written.
    pub fn advance_transmit(&mut self, node: NodeId, n: usize) {
        if let Some(link) = self.links.get_mut(node.index()) {
            link.advance(n);
        }
    }

    /// A node whose connect attempt is due, if any: a new engine's nodes at once, then each
    /// node whose connection or connect attempt failed once its reconnect backoff has passed.
    ///
    /// The link becomes [`LinkState::Connecting`] with a deadline of `now` +
    /// [`Config::connect_timeout`]. The caller MUST start a non-blocking connect to the node
    /// (dropping whatever it still held for it) and report the outcome with
    /// [`handle_connected`](Self::handle_connected) or
    /// [`handle_connect_failed`](Self::handle_connect_failed); if neither comes by the
    /// deadline, [`handle_timeout`](Self::handle_timeout) abandons the attempt with
    /// [`Event::LinkFailed`]. Call it until it returns `None`, after every input.
    pub fn poll_connect(&mut self, now: Instant) -> Option<NodeId> {
        let deadline = now + self.config.connect_timeout;
        let i = self.links.iter().position(|l| match l.state {
            LinkState::Down { retry_at } => retry_at.is_none_or(|t| t <= now),
            _ => false,
        })?;
        self.links[i].state = LinkState::Connecting { deadline };
        self.update_link_wake();
        Some(NodeId(i as u16))
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called, if ever: the
    /// earliest of the locks' timers, connect deadlines and reconnect times.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        min_opt(self.slot_timeout(), self.link_wake)
    }

    /// The earliest live entry of the locks' timer heap (stale entries are dropped).
    fn slot_timeout(&mut self) -> Option<Instant> {
        while let Some(&Reverse((when, slot))) = self.timers.peek() {
            let s = &mut self.slots[slot as usize];
            if s.queued == Some(when) {
                match s.wake {
                    Some(w) if w == when => return Some(when),
                    // The wake-up moved later (or away) since this entry was queued.
                    Some(w) => {
                        s.queued = Some(w);
                        self.timers.pop();
                        self.timers.push(Reverse((w, slot)));
                        continue;
                    }
                    None => s.queued = None,
                }
            }
            self.timers.pop();
        }
        None
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ----- internals -----------------------------------------------------------------------

    /// Validate a TTL and return the whole milliseconds of it that Redis will be given
    /// (`PX`/`PEXPIRE` take milliseconds; the validity is computed from what is sent).
    fn check_ttl(&self, ttl: Duration) -> Result<Duration, Misuse> {
        if ttl.is_zero() {
            return Err(Misuse::ZeroTtl);
        }
        if ttl.as_millis() > MAX_TTL_MS {
            return Err(Misuse::TtlTooLong(ttl));
        }
        let whole = whole_ms(ttl);
        let d = drift(whole, self.config.drift_factor);
        if whole <= d {
            return Err(Misuse::TtlTooShort { ttl, drift: d });
        }
        Ok(whole)
    }

    fn slot(&self, lock: LockId) -> Result<&Slot, Misuse> {
        match self.slots.get(lock.slot as usize) {
            Some(s) if s.generation == lock.generation && s.state != State::Free => Ok(s),
            _ => Err(Misuse::UnknownLock(lock)),
        }
    }

    fn lock_id(&self, idx: u32) -> LockId {
        LockId { slot: idx, generation: self.slots[idx as usize].generation }
    }

    /// Record the slot's next wake-up; queue it in the timer heap only if it is earlier
    /// than the slot's live entry (a later one is re-queued when that entry surfaces).
    fn arm(&mut self, idx: u32) {
        let s = &mut self.slots[idx as usize];
        let want = if s.state == State::Free { None } else { s.next_wake() };
        s.wake = want;
        let Some(w) = want else { return };
        if s.queued.is_some_and(|q| q <= w) {
            return;
        }
        s.queued = Some(w);
        self.timers.push(Reverse((w, idx)));
        // Superseded entries are dropped lazily; keep the heap from growing without bound.
        if self.timers.len() > 64 && self.timers.len() > 4 * self.active {
            let slots = &self.slots;
            self.timers.retain(|Reverse((w, i))| slots[*i as usize].queued == Some(*w));
        }
    }

    fn begin_round(&mut self, now: Instant, idx: u32, state: State) {
        let n = self.links.len();
        let s = &mut self.slots[idx as usize];
        s.state = state;
        s.round = s.round.wrapping_add(1);
        s.start = now;
        s.votes.clear();
        s.votes.resize(n, Vote::Pending);
        s.yes = 0;
        s.no = 0;
        s.failed = 0;
    }

    fn start_attempt(&mut self, now: Instant, idx: u32) {
        self.begin_round(now, idx, State::Acquiring);
        let s = &mut self.slots[idx as usize];
        s.attempts += 1;
        s.fence = 0;
        let limit = valid_until(now, s.ttl, self.config.drift_factor).unwrap_or(now);
        s.deadline = Some((now + self.config.node_timeout).min(limit));
        self.send_round(now, idx, Kind::Acquire);
    }

    fn start_extend(&mut self, now: Instant, idx: u32, ttl: Duration, manual: bool) {
        let shorter = valid_until(now, ttl, self.config.drift_factor);
        self.begin_round(now, idx, State::Extending);
        let s = &mut self.slots[idx as usize];
        // Any node may apply the new TTL, whatever the round's outcome: when it is shorter
        // than what is left, the shorter deadline holds from now on.
        if let (Some(old), Some(new)) = (s.valid_until, shorter) {
            s.valid_until = Some(old.min(new));
        }
        s.manual = manual;
        s.extend_ttl = ttl;
        s.auto_at = None;
        s.deadline = Some(now + self.config.node_timeout);
        self.send_round(now, idx, Kind::Extend);
    }

    fn back_to_held(&mut self, now: Instant, idx: u32) {
        let s = &mut self.slots[idx as usize];
        s.state = State::Held;
        s.round = s.round.wrapping_add(1);
        s.deadline = None;
        s.manual = false;
        if s.auto_extend && !s.lost && s.auto_at.is_none() {
            s.auto_at = Some(now + s.ttl / 10);
        }
    }

    /// Send the round's command to every connected node; down nodes vote at once.
    ///
    /// The command is the same for every node: it is encoded once and copied. If down nodes
    /// voted, the round is evaluated right away: they may already decide it (an acquisition
    /// that can no longer reach a quorum fails without waiting for the live nodes' replies).
    fn send_round(&mut self, now: Instant, idx: u32, kind: Kind) {
        let mut cmd = std::mem::take(&mut self.scratch);
        cmd.clear();
        encode_command(&mut cmd, &self.slots[idx as usize], &self.config.fence_prefix, kind, false);
        let s = &mut self.slots[idx as usize];
        let pending = Pending { kind, slot: idx, generation: s.generation, round: s.round };
        for (node, link) in self.links.iter_mut().enumerate() {
            if link.is_up() {
                link.out.extend_from_slice(&cmd);
                link.pending.push_back(pending);
            } else {
                s.votes[node] = match &link.last_error {
                    Some(e) => Vote::Error(e.clone()),
                    None => Vote::Down,
                };
                s.failed += 1;
            }
        }
        self.scratch = cmd;
        if self.slots[idx as usize].failed > 0 {
            self.evaluate(now, idx);
        }
    }

    /// Release whatever the slot's attempt took, on every connected node, without waiting.
    fn send_cleanup(&mut self, idx: u32) {
        let mut cmd = std::mem::take(&mut self.scratch);
        cmd.clear();
        let s = &self.slots[idx as usize];
        encode_command(&mut cmd, s, &self.config.fence_prefix, Kind::Cleanup, true);
        let pending = Pending { kind: Kind::Cleanup, slot: idx, generation: s.generation, round: s.round };
        for link in self.links.iter_mut().filter(|l| l.is_up()) {
            link.out.extend_from_slice(&cmd);
            link.pending.push_back(pending);
        }
        self.scratch = cmd;
    }

    /// Write one request for slot `idx` on link `node` and remember it in the FIFO.
    fn encode(&mut self, node: usize, idx: u32, kind: Kind, eval: bool) {
        let s = &self.slots[idx as usize];
        let link = &mut self.links[node];
        encode_command(&mut link.out, s, &self.config.fence_prefix, kind, eval);
        link.pending.push_back(Pending { kind, slot: idx, generation: s.generation, round: s.round });
    }

    /// Act on one answer. An `Err` is a link failure.
    fn apply(&mut self, now: Instant, node: NodeId, p: Pending, answer: Answer) -> Result<(), LinkError> {
        let addr = self.addr(node);
        let handshake_err = |step, message| LinkError::Handshake { node, addr, step, message };
        let answer = match (p.kind, answer) {
            (Kind::Auth | Kind::Select, Answer::Ok) | (Kind::SetName, _) => return Ok(()),
            (Kind::Auth | Kind::Select, Answer::ServerError(m)) => {
                return Err(handshake_err(p.kind.name(), m));
            }
            (Kind::ScriptLoad(sha), Answer::ShaMatches(true)) => {
                if sha == scripts::FENCE_SHA {
                    // The last step of the handshake: the link is healthy again.
                    self.links[node.index()].last_error = None;
                }
                return Ok(());
            }
            (Kind::ScriptLoad(_), Answer::ShaMatches(false)) => {
                return Err(handshake_err(
                    "SCRIPT LOAD",
                    "the server's script digest differs from the expected one".into(),
                ));
            }
            (Kind::ScriptLoad(_), Answer::ServerError(m)) => {
                return Err(handshake_err("SCRIPT LOAD", m));
            }
            (Kind::Cleanup, _) => return Ok(()),
            (_, a) => a,
        };
        // An operation's answer: ignore it unless it belongs to the slot's current round.
        let idx = p.slot;
        let current = match self.slots.get(idx as usize) {
            Some(s) => s.generation == p.generation && s.round == p.round && s.state != State::Free,
            None => false,
        };
        if !current {
            return Ok(());
        }
        let vote = match answer {
            Answer::NoScript => {
                // The script cache was flushed: resend with the script text (which reloads it).
                self.encode(node.index(), idx, p.kind, true);
                return Ok(());
            }
            Answer::ServerError(m) => Vote::Error(m),
            Answer::Int(v) => match p.kind {
                Kind::Fence if v >= 0 => {
                    // The largest counter the node had before the write: the proposal holds
                    // on this node iff it was above it.
                    let s = &mut self.slots[idx as usize];
                    if (v as u64) < s.fence {
                        Vote::Granted
                    } else {
                        s.fence_seen = s.fence_seen.max(v as u64);
                        Vote::Refused
                    }
                }
                Kind::Acquire if v > 0 => {
                    let s = &mut self.slots[idx as usize];
                    s.fence = s.fence.max(v as u64);
                    Vote::Granted
                }
                Kind::Release | Kind::Extend if v > 0 => Vote::Granted,
                _ if v == 0 => Vote::Refused,
                _ => {
                    let (addr, request, reply) = (self.addr(node), p.kind.name(), format!(":{v}"));
                    return Err(LinkError::Unexpected { node, addr, request, reply });
                }
            },
            Answer::Ok | Answer::ShaMatches(_) => {
                unreachable!("classify only gives these to handshake requests")
            }
        };
        self.vote(now, idx, node.index(), vote);
        Ok(())
    }

    fn vote(&mut self, now: Instant, idx: u32, node: usize, vote: Vote) {
        let s = &mut self.slots[idx as usize];
        if s.votes[node] != Vote::Pending {
            return;
        }
        match vote {
            Vote::Granted => s.yes += 1,
            Vote::Refused => s.no += 1,
            Vote::Pending => return,
            _ => s.failed += 1,
        }
        s.votes[node] = vote;
        self.evaluate(now, idx);
        self.arm(idx);
    }

    /// Decide the slot's round if it can be decided.
    fn evaluate(&mut self, now: Instant, idx: u32) {
        let n = self.links.len();
        let q = self.quorum;
        let factor = self.config.drift_factor;
        let s = &self.slots[idx as usize];
        let (yes, no, failed, open) = (s.yes, s.no, s.failed, s.open());
        let possible = yes + open >= q;
        let lock = self.lock_id(idx);
        match s.state {
            State::Acquiring => {
                if yes >= q {
                    match validity_left(s.start, now, s.ttl, factor) {
                        Some(valid) if s.fencing => {
                            let proposal = s.fence;
                            self.fence_round(now, idx, proposal, valid);
                        }
                        Some(valid) => self.granted(now, idx, valid),
                        None => self.attempt_failed(now, idx),
                    }
                } else if !possible {
                    self.attempt_failed(now, idx);
                }
            }
            State::Fencing => {
                let valid = s.pending_valid.filter(|&v| v > now);
                if yes >= q {
                    match valid {
                        Some(valid) => self.granted(now, idx, valid),
                        None => self.attempt_failed(now, idx),
                    }
                } else if !possible {
                    // Too many nodes already had a counter at or above the proposal (a fence
                    // round of an earlier holder got there first): propose above it, while
                    // validity lasts.
                    match valid {
                        Some(valid) if no > 0 && s.fence_seen < i64::MAX as u64 => {
                            let proposal = s.fence_seen + 1;
                            self.fence_round(now, idx, proposal, valid);
                        }
                        _ => self.attempt_failed(now, idx),
                    }
                }
            }
            State::Extending => {
                let manual = s.manual;
                if yes >= q {
                    if let Some(valid) = validity_left(s.start, now, s.extend_ttl, factor) {
                        let s = &mut self.slots[idx as usize];
                        let ttl = s.extend_ttl;
                        let start = s.start;
                        s.valid_until = Some(valid);
                        self.back_to_held(now, idx);
                        let s = &mut self.slots[idx as usize];
                        s.auto_at = s.auto_extend.then(|| start + ttl / 3);
                        self.events.push_back(Event::Extended { lock, valid_until: valid });
                        return;
                    }
                    self.extend_unconfirmed(now, idx, manual);
                } else if no > n - q {
                    let s = &mut self.slots[idx as usize];
                    let already = s.lost;
                    s.lost = true;
                    self.back_to_held(now, idx);
                    if manual {
                        self.events.push_back(Event::ExtendFailed {
                            lock,
                            error: ExtendError::Lost { refused: no, nodes: n },
                        });
                    }
                    if !already {
                        self.events.push_back(Event::Lost { lock, reason: LostReason::Refused });
                    }
                } else if !possible {
                    self.extend_unconfirmed(now, idx, manual);
                }
            }
            State::Releasing => {
                let outcome = if yes >= q {
                    ReleaseOutcome::Released
                } else if !possible && yes + no >= q {
                    ReleaseOutcome::NotHeld
                } else if yes + no + open < q {
                    ReleaseOutcome::Unreachable
                } else {
                    return;
                };
                let report = ReleaseReport { outcome, deleted: yes, absent: no, failed: failed + open };
                self.finish(idx, Event::Released { lock, report });
            }
            State::Free | State::Held | State::RetryWait => {}
        }
    }

    /// Write `proposal` as the fencing token to every node; it holds once a quorum of nodes
    /// had all the lock's counters below it.
    fn fence_round(&mut self, now: Instant, idx: u32, proposal: u64, valid: Instant) {
        let start = self.slots[idx as usize].start;
        self.begin_round(start, idx, State::Fencing);
        let s = &mut self.slots[idx as usize];
        s.fence = proposal;
        s.fence_seen = 0;
        s.pending_valid = Some(valid);
        s.deadline = Some((now + self.config.node_timeout).min(valid));
        self.send_round(now, idx, Kind::Fence);
    }

    fn extend_unconfirmed(&mut self, now: Instant, idx: u32, manual: bool) {
        let s = &self.slots[idx as usize];
        let lock = self.lock_id(idx);
        let error = ExtendError::Unconfirmed { extended: s.yes, nodes: self.links.len(), quorum: self.quorum };
        self.back_to_held(now, idx);
        if manual {
            self.events.push_back(Event::ExtendFailed { lock, error });
        }
    }

    fn granted(&mut self, now: Instant, idx: u32, valid: Instant) {
        let lock = self.lock_id(idx);
        let s = &mut self.slots[idx as usize];
        s.state = State::Held;
        s.round = s.round.wrapping_add(1);
        s.deadline = None;
        s.valid_until = Some(valid);
        s.cap = s.max_hold.map(|h| s.start + h);
        s.auto_at = s.auto_extend.then(|| s.start + s.ttl / 3);
        let fence = s.fencing.then_some(s.fence);
        let attempts = s.attempts;
        let _ = now;
        self.events.push_back(Event::Acquired { lock, valid_until: valid, fence, attempts });
    }

    /// The attempt failed: release everywhere, then retry later or give up.
    fn attempt_failed(&mut self, now: Instant, idx: u32) {
        self.send_cleanup(idx);
        let retry = self.config.retry;
        let delay = self.rng.between(retry.min_delay, retry.max_delay);
        let s = &mut self.slots[idx as usize];
        let may_retry = s.attempts < s.max_attempts && s.give_up_at.is_none_or(|g| now + delay <= g);
        if may_retry {
            s.state = State::RetryWait;
            s.round = s.round.wrapping_add(1);
            s.deadline = Some(now + delay);
            return;
        }
        let n = self.links.len();
        let q = self.quorum;
        // Nodes that had not answered when the attempt was decided stay `Pending`: they
        // neither refused nor failed (a node timeout turns them into `TimedOut` first).
        let (yes, failed) = (s.yes, s.failed);
        let votes = s.votes.clone();
        let attempts = s.attempts;
        // Too slow: a quorum granted but too late, or the attempt's validity ran out first.
        let slow = yes >= q || valid_until(s.start, s.ttl, self.config.drift_factor).is_none_or(|v| v <= now);
        let error = if slow {
            AcquireError::TooSlow { elapsed: now.saturating_duration_since(s.start), ttl: s.ttl, attempts }
        } else if failed > n - q {
            AcquireError::Unreachable { votes, attempts }
        } else {
            AcquireError::Held { votes, attempts }
        };
        let lock = self.lock_id(idx);
        self.finish(idx, Event::AcquireFailed { lock, error });
    }

    /// End the slot's life with its final event.
    fn finish(&mut self, idx: u32, event: Event) {
        let s = &mut self.slots[idx as usize];
        s.state = State::Free;
        s.round = s.round.wrapping_add(1);
        s.deadline = None;
        self.free.push(idx);
        self.active -= 1;
        self.events.push_back(event);
        self.arm(idx);
    }

    /// Mark a held lock lost if its validity has run out. Returns whether it just did.
    fn expire_if_due(&mut self, now: Instant, idx: u32) -> bool {
        let lock = self.lock_id(idx);
        let s = &mut self.slots[idx as usize];
        if matches!(s.state, State::Held | State::Extending) && !s.lost && s.valid_until.is_some_and(|v| v <= now) {
            s.lost = true;
            s.auto_at = None;
            self.events.push_back(Event::Lost { lock, reason: LostReason::Expired });
            return true;
        }
        false
    }

    fn on_slot_timeout(&mut self, now: Instant, idx: u32) {
        self.expire_if_due(now, idx);
        let s = &mut self.slots[idx as usize];
        let due = s.deadline.is_some_and(|d| d <= now);
        match s.state {
            State::Acquiring | State::Fencing | State::Extending | State::Releasing if due => {
                s.deadline = None;
                for v in s.votes.iter_mut() {
                    if *v == Vote::Pending {
                        *v = Vote::TimedOut;
                        s.failed += 1;
                    }
                }
                self.evaluate(now, idx);
            }
            State::RetryWait if due => self.start_attempt(now, idx),
            State::Held if !s.lost && s.auto_extend && s.auto_at.is_some_and(|a| a <= now) => {
                let mut ttl = s.ttl;
                if let Some(cap) = s.cap {
                    let room = whole_ms(cap.saturating_duration_since(now));
                    if room <= drift(room, self.config.drift_factor) {
                        s.auto_at = None;
                        return;
                    }
                    ttl = ttl.min(room);
                }
                self.start_extend(now, idx, ttl, false);
            }
            _ => {}
        }
    }

    fn take_down(&mut self, now: Instant, node: NodeId, vote: Vote) {
        let i = node.index();
        let Some(link) = self.links.get_mut(i) else {
            return;
        };
        let since = match link.state {
            LinkState::Up { since } => since,
            LinkState::Connecting { .. } => {
                self.schedule_reconnect(now, i, None);
                self.update_link_wake();
                return;
            }
            LinkState::Down { .. } => return,
        };
        // Down first, so that whatever the votes below decide is not sent to this link.
        let pending = link.reset(LinkState::Down { retry_at: None });
        self.schedule_reconnect(now, i, Some(since));
        self.update_link_wake();
        for p in pending {
            if p.slot == u32::MAX || p.kind == Kind::Cleanup {
                continue;
            }
            let current =
                self.slots.get(p.slot as usize).is_some_and(|s| s.generation == p.generation && s.round == p.round);
            if current {
                self.vote(now, p.slot, i, vote.clone());
            }
        }
    }

    fn fail_link(&mut self, now: Instant, error: LinkError) {
        let node = error.node();
        let reason = error.reason();
        if let Some(link) = self.links.get_mut(node.index()) {
            link.last_error = Some(reason.clone());
        }
        self.events.push_back(Event::LinkFailed { error });
        self.take_down(now, node, Vote::Error(reason));
    }

    fn addr(&self, node: NodeId) -> Arc<str> {
        Arc::clone(&self.addrs[node.index()])
    }

    /// Link `i` just failed (or its connection, up since `up_since`, was lost): it is down
    /// until `now` + the backoff. The backoff starts over after a connection that stayed up
    /// for `reconnect_max`; otherwise (refused connects, a handshake that fails at once) it
    /// doubles, up to `reconnect_max`. The caller updates `link_wake`.
    fn schedule_reconnect(&mut self, now: Instant, i: usize, up_since: Option<Instant>) {
        let (min, max) = (self.config.reconnect_min, self.config.reconnect_max);
        let link = &mut self.links[i];
        if up_since.is_some_and(|since| now.saturating_duration_since(since) >= max) {
            link.backoff = min;
        }
        let jitter = self.config.reconnect_jitter;
        let delay = if jitter > 0.0 {
            self.rng.between(link.backoff.mul_f64(1.0 - jitter), link.backoff)
        } else {
            link.backoff
        };
        link.state = LinkState::Down { retry_at: Some(now + delay) };
        link.backoff = link.backoff.saturating_mul(2).min(max);
    }

    fn update_link_wake(&mut self) {
        self.link_wake = self.links.iter().filter_map(Link::wake).min();
    }

    /// Abandon connect attempts past their deadline; make due the links whose reconnect time
    /// has come.
    fn link_timeouts(&mut self, now: Instant) {
        let after = self.config.connect_timeout;
        for i in 0..self.links.len() {
            match self.links[i].state {
                LinkState::Down { retry_at: Some(t) } if t <= now => {
                    self.links[i].state = LinkState::Down { retry_at: None };
                }
                LinkState::Connecting { deadline } if deadline <= now => {
                    let node = NodeId(i as u16);
                    let error = LinkError::ConnectTimeout { node, addr: self.addr(node), after };
                    self.links[i].last_error = Some(error.reason());
                    self.schedule_reconnect(now, i, None);
                    self.events.push_back(Event::LinkFailed { error });
                }
                _ => {}
            }
        }
        self.update_link_wake();
    }
}

/// Encode the script call of `kind` for slot `s` (`EVALSHA`, or `EVAL` with the source).
fn encode_command(out: &mut Vec<u8>, s: &Slot, fence_prefix: &str, kind: Kind, eval: bool) {
    let nkeys = s.key_ends.len();
    let (script, sha) = match kind {
        Kind::Acquire => (scripts::ACQUIRE, scripts::ACQUIRE_SHA),
        Kind::Extend => (scripts::EXTEND, scripts::EXTEND_SHA),
        Kind::Release | Kind::Cleanup => (scripts::RELEASE, scripts::RELEASE_SHA),
        Kind::Fence => (scripts::FENCE, scripts::FENCE_SHA),
        _ => unreachable!("handshake requests are not encoded here"),
    };
    let (script_keys, extra) = match kind {
        Kind::Acquire if s.fencing => (2 * nkeys, 3),
        Kind::Acquire => (nkeys, 3),
        Kind::Extend => (nkeys, 2),
        _ => (nkeys, 1),
    };
    resp::array(out, 3 + script_keys + extra);
    if eval {
        resp::bulk(out, b"EVAL");
        resp::bulk(out, script.as_bytes());
    } else {
        resp::bulk(out, b"EVALSHA");
        resp::bulk(out, sha.as_bytes());
    }
    resp::bulk_uint(out, script_keys as u64);
    let prefix = fence_prefix.as_bytes();
    match kind {
        Kind::Fence => {
            for k in s.key_iter() {
                resp::bulk2(out, prefix, k);
            }
            resp::bulk_uint(out, s.fence);
        }
        _ => {
            for k in s.key_iter() {
                resp::bulk(out, k);
            }
            if kind == Kind::Acquire && s.fencing {
                for k in s.key_iter() {
                    resp::bulk2(out, prefix, k);
                }
            }
            resp::bulk(out, &s.token);
            match kind {
                Kind::Acquire => {
                    resp::bulk_uint(out, s.ttl.as_millis() as u64);
                    resp::bulk_uint(out, nkeys as u64);
                }
                Kind::Extend => resp::bulk_uint(out, s.extend_ttl.as_millis().max(1) as u64),
                _ => {}
            }
        }
    }
}

/// Interpret a reply as an answer to a request of `kind`; `None` if it cannot be one.
fn classify(kind: Kind, reply: &Reply<'_>) -> Option<Answer> {
    if let Reply::Array(_) = reply {
        // No request is answered by an array (and only its header was read).
        return None;
    }
    if let Reply::Error(e) = reply {
        if e.starts_with(b"NOSCRIPT") && matches!(kind, Kind::Acquire | Kind::Extend | Kind::Release | Kind::Fence) {
            return Some(Answer::NoScript);
        }
        return Some(Answer::ServerError(String::from_utf8_lossy(e).into_owned()));
    }
    match (kind, reply) {
        (Kind::SetName | Kind::Cleanup, _) => Some(Answer::Ok),
        (Kind::Auth | Kind::Select, Reply::Status(_)) => Some(Answer::Ok),
        (Kind::ScriptLoad(sha), Reply::Bulk(b)) => Some(Answer::ShaMatches(b.eq_ignore_ascii_case(sha.as_bytes()))),
        (Kind::Acquire | Kind::Extend | Kind::Release | Kind::Fence, Reply::Int(i)) => Some(Answer::Int(*i)),
        _ => None,
    }
}
