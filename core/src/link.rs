//! The per-node links: where each connection stands, its buffers and FIFO of pending replies.
//! How a link reads replies and runs its handshake is in [`reply`]; connecting, failing and
//! reconnecting on a schedule, in [`schedule`]; where a request goes, in [`send`]; what
//! waiters subscribe to, in [`subs`]; a node that is a Redis Cluster, in [`cluster`]; a
//! Sentinel-managed node, in [`sentinel`].

mod cluster;
mod confirmed;
mod reply;
mod schedule;
mod send;
mod sentinel;
mod subs;
mod view;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::{Fault, Vote};
use crate::event::{LinkState, NodeId, WakeState};
use crate::node::{MinReplicas, Transport};
use crate::stats::NodeStats;
use crate::wire::{self, Pending, Step};

pub(crate) use cluster::MAX_HOPS;
pub(crate) use reply::Next;
use schedule::Policy;

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
    /// `HELLO 3` is sent and unanswered: requests wait in `held` until its answer brings the
    /// subscriptions, so that a waiter's attempt never goes out ahead of its `SUBSCRIBE`.
    holding: bool,
    held: Vec<u8>,
    held_pending: VecDeque<(Pending, Instant)>,
    /// The wake channels this connection was sent `SUBSCRIBE` (or `SSUBSCRIBE`) for.
    subs: BTreeSet<Vec<u8>>,
    /// `subs` are sharded subscriptions (`SSUBSCRIBE`): the link serves a cluster node.
    subs_sharded: bool,
    /// The node is reached over plain TCP (`redis://`): a connection that ends before its
    /// first reply may be talking to a TLS port.
    plain_tcp: bool,
    /// The connect attempt reached its TLS handshake (a `rediss://` node).
    tls_open: bool,
    /// This connection has had a reply.
    answered: bool,
    /// `WAIT replicas timeout`, sent behind every grant of a round on a node with
    /// [`min_replicas`](crate::NodeConfig::min_replicas).
    wait: Option<Box<[u8]>>,
    min_replicas: Option<MinReplicas>,
    /// The replicas the node reported online at its last `ROLE` (with `min_replicas`).
    replicas_online: Option<u32>,
    /// When the ready link next asks `ROLE` (with `min_replicas`; `None` while one is in
    /// flight, or the link is not ready).
    role_at: Option<Instant>,
    /// [`Links::subs_gen`] when `subs` was last brought in line with the channels.
    subs_gen: u64,
    /// The scripts the handshake does not load (a semaphore's, a read lock's) that this
    /// connection was sent with their source: bits of [`Call::lazy`](crate::wire::Call::lazy).
    sourced: u8,
    /// Semaphores (their limit keys) whose limit the node confirmed on this connection, with
    /// that limit (at most [`MAX_LIMITS`] of them).
    limits: Vec<(Vec<u8>, u16)>,
    /// The node this link belongs to (itself for a node's own link).
    owner: u16,
    /// Where a link to a cluster node's master connects (`None`: a node's own link).
    endpoint: Option<(Arc<str>, u16)>,
    /// A Sentinel-managed node's own link: which sentinel it asks, or which master it uses.
    discovery: Option<Box<sentinel::Discovery>>,
    /// A Sentinel-managed node's link to one of its sentinels, subscribed to
    /// `+switch-master`.
    watch: bool,
}

/// Semaphore limits remembered per connection.
const MAX_LIMITS: usize = 256;

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
        self.is_up()
            && !self.is_asking()
            && self.pending.len() + self.held_pending.len() < MAX_PENDING
            && self.out.len() - self.out_pos + self.held.len() < MAX_UNSENT
    }

    /// Queue a request: `encode` writes it, expecting the reply `pending`.
    #[inline]
    fn push(&mut self, now: Instant, pending: Pending, encode: impl FnOnce(&mut Vec<u8>)) {
        let (out, queue) =
            if self.holding { (&mut self.held, &mut self.held_pending) } else { (&mut self.out, &mut self.pending) };
        encode(out);
        queue.push_back((pending, now));
        if let (Some(wait), Pending::Op { op, lock, round }) = (&self.wait, pending) {
            if op.writes_grant() {
                out.extend_from_slice(wait);
                queue.push_back((Pending::Replicas { lock, round }, now));
            }
        }
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

    /// Forget the connection: buffers emptied, pending requests (held ones too) returned.
    fn reset(&mut self, state: LinkState) -> VecDeque<(Pending, Instant)> {
        self.state = state;
        self.role_at = None;
        self.out.clear();
        self.out_pos = 0;
        self.inbuf.clear();
        self.held.clear();
        self.holding = false;
        self.subs.clear();
        if self.wake == WakeState::On {
            self.wake = WakeState::Unknown;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.append(&mut self.held_pending);
        pending
    }
}

/// One request as each kind of node takes it: as is, and in its cluster form (keys with a
/// hash tag, see [`crate::cluster`]) with the one slot its keys hash to, or why they have
/// none. The cluster form is there whenever a node is a cluster.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cmd<'a> {
    pub(crate) plain: &'a [u8],
    pub(crate) cluster: Option<(&'a [u8], Result<u16, &'a str>)>,
}

/// A request kept for a redirect: its bytes, the redirects it followed, and the lock whose
/// failed attempt it cleans up, if it is such a cleanup.
#[derive(Debug)]
pub(crate) struct Copy {
    pub(crate) bytes: Box<[u8]>,
    pub(crate) hops: u8,
    pub(crate) attempt_of: Option<crate::event::LockId>,
}

/// Every node's link, then the links to cluster nodes' masters.
#[derive(Debug)]
pub(crate) struct Links {
    links: Vec<Link>,
    /// The number of nodes: `links[..nodes]` are their own links.
    nodes: usize,
    /// Each link's address without its password, for link errors and votes.
    addrs: Vec<Arc<str>>,
    /// Each node's handshake (AUTH, SELECT, HELLO 3, CLIENT SETNAME, SCRIPT LOAD), encoded
    /// once; and the one of a link to a master of it, if it is a cluster (AUTH, CLIENT
    /// SETNAME, SCRIPT LOAD).
    handshakes: Vec<(Vec<u8>, Vec<Step>)>,
    master_handshakes: Vec<(Vec<u8>, Vec<Step>)>,
    /// Each node's routing, once it turned out to be a Redis Cluster.
    routes: Vec<Option<Box<cluster::Routes>>>,
    /// Each node's configured host and port (TCP nodes), to know its own link in a map.
    seeds: Vec<Option<(String, u16)>>,
    /// Requests to cluster nodes kept for a redirect that carry no lock to encode them again
    /// from (cleanups), by [`Pending::Resend`] number, with the redirects they followed.
    copies: std::collections::HashMap<u32, Copy>,
    next_copy: u32,
    /// Kept cleanups a master answered `TRYAGAIN` (its slot was migrating): each is sent
    /// again on its link at its time, one redirect further (see [`TRYAGAIN_BACKOFF`]).
    again: Vec<(Instant, usize, u32)>,
    policy: Policy,
    /// Nodes whose connection or connect attempt the driver must drop.
    closes: VecDeque<NodeId>,
    /// The wake channels waiters need, and who announces on each: every link whose wake
    /// state is on subscribes to those it carries before the next request it sends.
    channels: BTreeMap<Vec<u8>, subs::Listen>,
    /// Bumped whenever `channels` changes.
    subs_gen: u64,
    /// Replies read later than this after their request (the node timeout) are late, not
    /// round-trip samples.
    on_time: Duration,
}

impl Links {
    /// Links for `config.nodes`, all down and due for a first connect at once.
    pub(crate) fn new(config: &Config) -> Self {
        let links = config
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| Link {
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
                holding: false,
                held: Vec::new(),
                held_pending: VecDeque::new(),
                subs: BTreeSet::new(),
                subs_sharded: false,
                subs_gen: 0,
                sourced: 0,
                limits: Vec::new(),
                plain_tcp: node.transport == Transport::Tcp,
                tls_open: false,
                answered: false,
                wait: node.min_replicas.map(wire::wait_command),
                min_replicas: node.min_replicas,
                replicas_online: None,
                role_at: None,
                owner: i as u16,
                endpoint: None,
                discovery: node.sentinel.as_ref().map(|s| sentinel::Discovery::new(node, s)),
                watch: false,
            })
            .collect();
        let addrs = config.nodes.iter().map(|c| Arc::from(c.to_string())).collect();
        let handshakes = config.nodes.iter().map(|node| reply::handshake(config, node)).collect();
        let master_handshakes = config.nodes.iter().map(|node| reply::master_handshake(config, node)).collect();
        let seeds = config.nodes.iter().map(|node| node.tcp_endpoint()).collect();
        let policy = Policy::new(config);
        let mut links = Links {
            links,
            nodes: config.nodes.len(),
            addrs,
            handshakes,
            master_handshakes,
            routes: (0..config.nodes.len()).map(|_| None).collect(),
            seeds,
            copies: std::collections::HashMap::new(),
            again: Vec::new(),
            next_copy: 0,
            policy,
            closes: VecDeque::new(),
            channels: BTreeMap::new(),
            subs_gen: 0,
            on_time: config.node_timeout,
        };
        links.add_watches();
        links
    }

    // ----- getters -------------------------------------------------------------------------

    /// The number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.nodes
    }

    /// The number of links: the nodes' own, then those to cluster nodes' masters.
    pub(crate) fn count(&self) -> usize {
        self.links.len()
    }

    /// The replicas `node`'s grants wait for, if any.
    #[inline]
    pub(crate) fn min_replicas(&self, node: NodeId) -> Option<MinReplicas> {
        self.links.get(node.index()).and_then(|l| l.min_replicas)
    }

    pub(crate) fn state(&self, node: NodeId) -> Option<LinkState> {
        self.links.get(node.index()).map(|l| l.state)
    }

    pub(crate) fn is_up(&self, node: NodeId) -> bool {
        self.links.get(node.index()).is_some_and(Link::is_up)
    }

    /// Whether `node`'s link is up past its handshake; for a Redis Cluster node, also every
    /// link to a master its map names.
    pub(crate) fn is_ready(&self, node: NodeId) -> bool {
        let ready = |l: &Link| l.is_up() && !l.is_handshaking();
        if !self.links.get(node.index()).is_some_and(ready) {
            return false;
        }
        node.index() >= self.nodes
            || self
                .cluster_health(node.index())
                .is_none_or(|c| c.known && c.masters.iter().all(|m| m.state == crate::health::NodeState::Ready))
    }

    pub(crate) fn last_error(&self, node: NodeId) -> Option<(Fault, &str)> {
        let (fault, text) = self.links.get(node.index())?.last_error.as_ref()?;
        Some((*fault, text))
    }

    /// Whether a request of `lock`'s round `round` to `node` (or the `WAIT` behind its grant)
    /// is on the wire on one of the node's links.
    pub(crate) fn asks(&self, node: usize, lock: crate::event::LockId, round: u32) -> bool {
        self.requests_of(node).any(|p| match p {
            Pending::Op { lock: of, round: r, .. } | Pending::Replicas { lock: of, round: r } => {
                *of == lock && *r == round
            }
            _ => false,
        })
    }

    /// The requests on the wire (or held behind the handshake) on every link of `node`.
    fn requests_of(&self, node: usize) -> impl Iterator<Item = &Pending> {
        let links = self.links.iter().filter(move |l| usize::from(l.owner) == node);
        links.flat_map(|l| l.pending.iter().chain(&l.held_pending).map(|(p, _)| p))
    }

    /// The kept cleanup copies that no request on the wire, nor a resend due later, refers
    /// to (each is dropped when its request is answered, redirected for good or lost).
    pub(crate) fn orphan_copies(&self) -> usize {
        let referred: BTreeSet<u32> = self
            .links
            .iter()
            .flat_map(|l| l.pending.iter().chain(&l.held_pending))
            .filter_map(|(p, _)| match p {
                Pending::Resend { copy } => Some(*copy),
                _ => None,
            })
            .chain(self.again.iter().map(|&(_, _, copy)| copy))
            .collect();
        self.copies.keys().filter(|c| !referred.contains(c)).count()
    }

    /// Whether `node` (any of its links, for a Redis Cluster node) still owes the answer to
    /// an acquisition script of `lock`: a grant it may yet make of any of the keys the script
    /// names. (A `SET NX` takes one key only, the one its attempt holds once granted, or the
    /// one that attempt's cleanup names: what follows it on the connection covers it.)
    pub(crate) fn owes_script_grant(&self, node: usize, lock: crate::event::LockId) -> bool {
        use crate::wire::Op;
        self.requests_of(node)
            .any(|p| matches!(p, Pending::Op { op: Op::Acquire | Op::Permits, lock: of, .. } if *of == lock))
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

    pub(crate) fn addr(&self, node: NodeId) -> Arc<str> {
        Arc::clone(&self.addrs[node.index()])
    }

    pub(crate) fn addr_of(&self, node: NodeId) -> Option<&str> {
        self.addrs.get(node.index()).map(|a| &**a)
    }

    /// Whether `node`'s link wakes waiters; a Redis Cluster node's links to its masters carry
    /// its release messages, so one of them that cannot tells why.
    pub(crate) fn wake_state(&self, node: NodeId) -> Option<&WakeState> {
        let own = &self.links.get(node.index())?.wake;
        if node.index() >= self.nodes || !self.is_cluster(node.index()) {
            return Some(own);
        }
        let polled =
            self.links_of(node.index()).map(|i| &self.links[i].wake).find(|w| matches!(w, WakeState::Polling { .. }));
        Some(polled.unwrap_or(own))
    }

    /// Every node's address, by node.
    pub(crate) fn addrs(&self) -> Arc<[Arc<str>]> {
        self.addrs[..self.nodes].iter().cloned().collect()
    }

    /// Add what the links retain to `fp`: requests awaiting replies (held ones too), unsent
    /// bytes, kept cleanups, wake channels and subscriptions.
    pub(crate) fn footprint(&self, fp: &mut crate::footprint::Footprint) {
        for l in &self.links {
            fp.pending += l.pending.len() + l.held_pending.len();
            fp.unsent += l.out.len() - l.out_pos + l.held.len();
            // (A link whose server refused a subscription holds none: its waiters poll.)
            if l.wake == WakeState::On {
                fp.subscriptions += l.subs.len();
            }
        }
        fp.kept = self.copies.len();
        fp.kept_bytes = self.copies.values().map(|c| c.bytes.len()).sum();
        fp.channels = self.channels.len();
    }

    // ----- bytes ---------------------------------------------------------------------------

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
}
