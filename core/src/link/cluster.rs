//! A node that is a Redis Cluster: its slot map, the links to its masters (created as the map
//! names them, after the node's own links), routing by hash slot, and redirects followed
//! within a bound.
//!
//! The node's own link (to the address configured) reads the map with `CLUSTER SHARDS` (`CLUSTER
//! SLOTS` on a server that refuses it: older than Redis 7, or an ACL without it) once its
//! handshake shows a cluster (`HELLO`'s mode, or a `MOVED`/`CROSSSLOT` answer), and every
//! [`REFRESH`] after. A `MOVED` points the slot at its new owner at once and asks for a fresh
//! map; an `ASK` sends that one request to the importing master behind `ASKING`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Link, Links};
use crate::cluster::{MAX_MASTERS, Redirect, SLOTS, SlotRange};
use crate::error::Vote;
use crate::event::{LinkState, NodeId, WakeState};
use crate::health::{ClusterHealth, MasterHealth, NodeState};
use crate::resp;
use crate::wire::{Pending, Step};

/// How often a cluster node's map is read again without a redirect asking for it.
pub(crate) const REFRESH: Duration = Duration::from_secs(10);
/// The soonest a redirect asks for another map after the last one was asked for.
const REFRESH_MIN: Duration = Duration::from_millis(100);
/// Redirects one request follows before its node's vote fails.
pub(crate) const MAX_HOPS: u8 = 5;

/// How long a cleanup answered `TRYAGAIN` (its keys' slot was migrating) waits before it is
/// sent again, doubled at each further try; with [`MAX_HOPS`] tries, about a third of a
/// second in all, the length of a small slot's migration.
const TRYAGAIN_BACKOFF: Duration = Duration::from_millis(10);
/// No link serves the slot (the map has not named one).
const NONE: u16 = u16::MAX;

/// A cluster node's routing.
#[derive(Debug)]
pub(crate) struct Routes {
    /// The link serving each slot, or [`NONE`].
    slots: Box<[u16]>,
    /// A whole map has been read.
    known: bool,
    /// A map read is on the wire.
    reading: bool,
    /// Maps are read with `CLUSTER SHARDS` until the node refuses it (so the one on the wire
    /// is one of those, when this is set).
    shards: bool,
    /// When the map is read again.
    refresh_at: Option<Instant>,
    /// When a map was last asked for.
    asked_at: Option<Instant>,
    /// Redirects followed (`MOVED` and `ASK`).
    redirects: u64,
}

impl Routes {
    /// Whether the map routes `slot` to `link`.
    pub(super) fn serves(&self, slot: u16, link: usize) -> bool {
        self.slots.get(slot as usize).is_some_and(|&l| l as usize == link)
    }

    fn new() -> Box<Self> {
        Box::new(Routes {
            slots: vec![NONE; SLOTS].into_boxed_slice(),
            known: false,
            reading: false,
            shards: true,
            refresh_at: None,
            asked_at: None,
            redirects: 0,
        })
    }
}

impl Links {
    /// Whether `node` is a Redis Cluster.
    pub(crate) fn is_cluster(&self, node: usize) -> bool {
        self.routes.get(node).is_some_and(Option::is_some)
    }

    /// Whether any node is a Redis Cluster (keys then need their cluster form too).
    pub(crate) fn any_cluster(&self) -> bool {
        self.routes.iter().any(Option::is_some)
    }

    /// The node a link belongs to.
    #[inline]
    pub(crate) fn owner(&self, link: NodeId) -> NodeId {
        self.links.get(link.index()).map_or(link, |l| NodeId(l.owner))
    }

    /// Where a request of `node` for `slot` goes: the node's own link, or on a cluster node the
    /// link of the slot's master. `Err`: the vote of a cluster node that has no link for it.
    pub(crate) fn route(&self, node: usize, slot: u16) -> Result<usize, Vote> {
        let Some(Some(routes)) = self.routes.get(node) else { return Ok(node) };
        match routes.slots.get(slot as usize) {
            Some(&link) if link != NONE => Ok(link as usize),
            _ if !routes.known => Err(Vote::Error("the cluster's slot map is not read yet".to_owned())),
            _ => Err(Vote::Error(format!("no master of the cluster serves slot {slot}"))),
        }
    }

    /// `node` turned out to be a Redis Cluster after its handshake (a redirect, `CROSSSLOT`):
    /// route by slot from now on, and read its map on its own link. Returns whether it was
    /// news.
    pub(crate) fn became_cluster(&mut self, now: Instant, node: usize) -> bool {
        let news = self.mark_cluster(node);
        if news {
            self.read_map(now, node, true);
        }
        news
    }

    /// Route `node` by slot from now on (its map is read by the caller). Returns whether it
    /// was news.
    pub(crate) fn mark_cluster(&mut self, node: usize) -> bool {
        if node >= self.nodes || self.is_cluster(node) {
            return false;
        }
        self.routes[node] = Some(Routes::new());
        true
    }

    /// Queue a map read (`CLUSTER SHARDS`, or `CLUSTER SLOTS` on a node that refused it) on a
    /// link of `node` that is up (its own first), unless one is on the wire. `first`: as a
    /// handshake step of its own link, which is ready once it is read.
    pub(crate) fn read_map(&mut self, now: Instant, node: usize, first: bool) {
        let Some(Some(routes)) = self.routes.get_mut(node) else { return };
        if routes.reading {
            return;
        }
        let link = std::iter::once(node)
            .chain((self.nodes..self.links.len()).filter(|&i| self.links[i].owner as usize == node))
            .find(|&i| self.links[i].is_up());
        let Some(link) = link else { return };
        routes.reading = true;
        routes.asked_at = Some(now);
        let what: &[u8] = if routes.shards { b"SHARDS" } else { b"SLOTS" };
        let pending = if first && link == node { Pending::Step(Step::Slots) } else { Pending::Slots };
        let l = &mut self.links[link];
        let (out, queue) = if l.holding { (&mut l.held, &mut l.held_pending) } else { (&mut l.out, &mut l.pending) };
        resp::command(out, &[b"CLUSTER", what]);
        queue.push_back((pending, now));
    }

    /// How `link`'s node reads its map now: the parser for the answer on the wire, and whether
    /// its links use TLS (`CLUSTER SHARDS` names both ports of a master).
    pub(crate) fn map_parser(&self, link: usize) -> (bool, bool) {
        let node = self.links.get(link).map_or(usize::MAX, |l| l.owner as usize);
        let shards = matches!(self.routes.get(node), Some(Some(r)) if r.shards);
        (shards, self.addrs.get(node).is_some_and(|a| a.starts_with("rediss://")))
    }

    /// `link`'s node refused `CLUSTER SHARDS`: read the map again with `CLUSTER SLOTS` (as a
    /// handshake step when `first`). Returns `false` if it had asked `CLUSTER SLOTS` already.
    pub(crate) fn shards_refused(&mut self, now: Instant, link: usize, first: bool) -> bool {
        let node = self.links.get(link).map_or(usize::MAX, |l| l.owner as usize);
        let Some(Some(routes)) = self.routes.get_mut(node) else { return false };
        if !routes.shards {
            return false;
        }
        routes.shards = false;
        routes.reading = false;
        self.read_map(now, node, first);
        true
    }

    /// A map was read on `link` (`Err`: it could not be): route by it, opening links to the
    /// masters it names. Returns whether the link's node now has a whole map.
    pub(crate) fn apply_map(&mut self, now: Instant, link: usize, map: Result<Vec<SlotRange>, String>) -> bool {
        let node = self.links[link].owner as usize;
        let Some(Some(routes)) = self.routes.get_mut(node) else { return false };
        routes.reading = false;
        routes.refresh_at = Some(now + REFRESH);
        let Ok(ranges) = map else { return routes.known };
        let mut slots = vec![NONE; SLOTS].into_boxed_slice();
        for r in &ranges {
            let m = &r.master;
            let host = if m.host.is_empty() || m.host == "?" { self.host_of(link) } else { m.host.clone() };
            let Some(to) = self.link_for(node, &host, m.port) else { continue };
            slots[r.start as usize..=r.end as usize].fill(to as u16);
        }
        let Some(Some(routes)) = self.routes.get_mut(node) else { return false };
        let changed = routes.slots != slots;
        routes.slots = slots;
        routes.known = true;
        if changed {
            self.map_changed(now, node);
        }
        true
    }

    /// Follow `redirect`, met on `link`: a `MOVED` points its slot at the new owner (and asks
    /// for a fresh map). Returns the link to resend to, or the vote when there is none.
    pub(crate) fn redirected(&mut self, now: Instant, link: usize, redirect: &Redirect) -> Result<usize, Vote> {
        let node = self.links[link].owner as usize;
        let host = if redirect.host.is_empty() { self.host_of(link) } else { redirect.host.clone() };
        let to = self.link_for(node, &host, redirect.port).ok_or_else(|| {
            Vote::Error(format!("the cluster names more than {MAX_MASTERS} masters; not following it"))
        })?;
        let Some(Some(routes)) = self.routes.get_mut(node) else { return Err(Vote::Down) };
        routes.redirects += 1;
        if !redirect.ask {
            let moved = std::mem::replace(&mut routes.slots[redirect.slot as usize], to as u16) != to as u16;
            if routes.asked_at.is_none_or(|at| now.saturating_duration_since(at) >= REFRESH_MIN) {
                self.read_map(now, node, false);
            }
            if moved {
                self.map_changed(now, node);
            }
        }
        Ok(to)
    }

    /// A map read that could not be made on `link`'s node (the link went down with it).
    pub(crate) fn map_lost(&mut self, link: usize) {
        let node = self.links.get(link).map_or(usize::MAX, |l| l.owner as usize);
        if let Some(Some(routes)) = self.routes.get_mut(node) {
            routes.reading = false;
            // Read again soon (on another link, or this one once it is back).
            routes.refresh_at = routes.asked_at.map(|at| at + REFRESH_MIN);
        }
    }

    /// Cluster nodes whose map is due to be read again at `now`: read it.
    pub(crate) fn refresh_maps(&mut self, now: Instant) {
        for node in 0..self.nodes {
            let due = matches!(&self.routes[node], Some(r) if !r.reading && r.refresh_at.is_some_and(|t| t <= now));
            if due {
                if let Some(r) = self.routes[node].as_mut() {
                    r.refresh_at = Some(now + if r.known { REFRESH } else { REFRESH_MIN });
                }
                self.read_map(now, node, false);
            }
        }
    }

    /// Whether `node` is a cluster whose own link is up while a link to one of its masters
    /// has not ended its first connect attempt.
    pub(crate) fn masters_connecting(&self, node: usize) -> bool {
        self.is_cluster(node)
            && (self.nodes..self.links.len()).any(|i| {
                let l = &self.links[i];
                l.owner as usize == node && l.attempts_ended == 0
            })
    }

    /// A kept cleanup (`copy`) on `link` was answered `TRYAGAIN`: send it again later on the
    /// same link, unless it followed its share of redirects already. Returns whether it will be
    /// (else the caller drops it).
    pub(crate) fn try_again(&mut self, now: Instant, link: usize, copy: u32) -> bool {
        let Some(hops) = self.copies.get(&copy).map(|c| c.hops) else { return false };
        if hops >= MAX_HOPS {
            return false;
        }
        self.again.push((now + TRYAGAIN_BACKOFF * (1 << hops), link, copy));
        true
    }

    /// Send again the cleanups answered `TRYAGAIN` whose time has come, but for an attempt's
    /// cleanup whose acquisition went on (`live`: its lock is still acquiring or held): sent
    /// now, it could delete what a later attempt took (the same token). Those are returned
    /// with their links, for the engine to narrow.
    pub(crate) fn resend_due(
        &mut self,
        now: Instant,
        live: impl Fn(crate::event::LockId) -> bool,
    ) -> Vec<(usize, super::Copy)> {
        let mut superseded = Vec::new();
        let mut i = 0;
        while i < self.again.len() {
            if self.again[i].0 > now {
                i += 1;
                continue;
            }
            let (_, link, copy) = self.again.swap_remove(i);
            match self.copies.remove(&copy) {
                Some(copy) if copy.attempt_of.is_some_and(&live) => superseded.push((link, copy)),
                Some(copy) => self.resend_copy(now, link, copy, false),
                None => {}
            }
        }
        superseded
    }

    /// When the next cleanup answered `TRYAGAIN` is due.
    pub(crate) fn next_again(&self) -> Option<Instant> {
        self.again.iter().map(|a| a.0).min()
    }

    /// The earliest map refresh due. A node whose map read is on the wire has none: its
    /// answer, or its loss, sets the next (a refresh time left in the past while the read is
    /// out would have the driver handle timeouts in a loop until it is answered).
    pub(crate) fn next_refresh(&self) -> Option<Instant> {
        self.routes.iter().flatten().filter(|r| !r.reading).filter_map(|r| r.refresh_at).min()
    }

    /// The link of `node` to `host:port`: its own link when that is where it points, a link
    /// already open, or a new one (down, due to connect at once); `None` past [`MAX_MASTERS`].
    fn link_for(&mut self, node: usize, host: &str, port: u16) -> Option<usize> {
        if self.seeds[node].as_ref().is_some_and(|(h, p)| h == host && *p == port) {
            return Some(node);
        }
        let found = (self.nodes..self.links.len()).find(|&i| {
            let l = &self.links[i];
            l.owner as usize == node && l.endpoint.as_ref().is_some_and(|(h, p)| &**h == host && *p == port)
        });
        if found.is_some() {
            return found;
        }
        let mine = (self.nodes..self.links.len()).filter(|&i| self.links[i].owner as usize == node).count();
        if mine >= MAX_MASTERS || self.links.len() >= usize::from(u16::MAX) {
            return None;
        }
        let wake = self.master_handshakes[node].1.contains(&Step::Hello);
        let link = Link::master_of(&self.links[node], self.policy.min(), (node as u16, wake), Arc::from(host), port);
        let addr = self.master_addr(node, host, port);
        self.links.push(link);
        self.addrs.push(addr);
        Some(self.links.len() - 1)
    }

    /// A master's address as errors show it: the node's, with the master's host and port.
    fn master_addr(&self, node: usize, host: &str, port: u16) -> Arc<str> {
        let base = &self.addrs[node];
        let scheme = if base.starts_with("rediss://") { "rediss" } else { "redis" };
        let user = base.split_once("://").and_then(|(_, rest)| rest.split_once('@')).map(|(u, _)| u);
        let host = if host.contains(':') { format!("[{host}]") } else { host.to_owned() };
        match user {
            Some(user) => Arc::from(format!("{scheme}://{user}@{host}:{port} (a master of {base})")),
            None => Arc::from(format!("{scheme}://{host}:{port} (a master of {base})")),
        }
    }

    /// The host `link` connects to (a master's, or its node's configured host).
    fn host_of(&self, link: usize) -> String {
        match &self.links[link].endpoint {
            Some((host, _)) => host.to_string(),
            None => self.seeds[self.links[link].owner as usize].as_ref().map(|(h, _)| h.clone()).unwrap_or_default(),
        }
    }

    /// Where a link connects when its config does not say: a link beyond the nodes' own (its
    /// node, host and port), or a Sentinel-managed node's own link (the sentinel it asks, or
    /// the master); `None` for a node's own link reached as its config says.
    pub(crate) fn endpoint(&self, link: NodeId) -> Option<(NodeId, &str, u16)> {
        let l = self.links.get(link.index())?;
        match &l.endpoint {
            Some((h, p)) => Some((NodeId(l.owner), &**h, *p)),
            // A Sentinel-managed node's own link: the sentinel it asks, or its master.
            None => self.sentinel_endpoint(link),
        }
    }

    /// A cluster node's masters, slot coverage and redirects, for the health view.
    pub(crate) fn cluster_health(&self, node: usize) -> Option<ClusterHealth> {
        let routes = self.routes.get(node)?.as_ref()?;
        let mut masters: Vec<MasterHealth> = Vec::new();
        for &link in routes.slots.iter().filter(|&&l| l != NONE) {
            match masters.iter_mut().find(|m| m.link == NodeId(link)) {
                Some(m) => m.slots += 1,
                None => {
                    let l = &self.links[link as usize];
                    masters.push(MasterHealth {
                        link: NodeId(link),
                        addr: Arc::clone(&self.addrs[link as usize]),
                        state: link_state(l),
                        slots: 1,
                        last_error: l.last_error.as_ref().map(|(_, e)| e.clone()),
                    });
                }
            }
        }
        let covered = routes.slots.iter().filter(|&&l| l != NONE).count();
        Some(ClusterHealth { masters, covered, known: routes.known, redirects: routes.redirects })
    }
}

/// A link's state as the health view shows it.
pub(super) fn link_state(l: &Link) -> NodeState {
    match l.state {
        LinkState::Up { .. } if l.is_handshaking() => NodeState::Handshaking,
        LinkState::Up { .. } => NodeState::Ready,
        LinkState::Connecting { .. } => NodeState::Connecting,
        LinkState::Down { retry_at } => NodeState::Down { retry_at },
    }
}

impl Link {
    /// A link to one master of cluster node `owner`, reached like `node`'s own link (its
    /// transport, credentials and replicas option), down and due to connect at once; with
    /// `wake`, its handshake asks for RESP3 and it carries the release messages of its slots.
    pub(super) fn master_of(
        node: &Link,
        backoff: Duration,
        (owner, wake): (u16, bool),
        host: Arc<str>,
        port: u16,
    ) -> Link {
        Link {
            state: LinkState::Down { retry_at: None },
            backoff,
            out: Vec::new(),
            out_pos: 0,
            pending: Default::default(),
            inbuf: Vec::new(),
            last_error: None,
            attempts_ended: 0,
            stats: Default::default(),
            wake: if wake {
                WakeState::Unknown
            } else {
                WakeState::Polling { reason: "wake-ups are off in the config".to_owned() }
            },
            holding: false,
            held: Vec::new(),
            held_pending: Default::default(),
            subs: Default::default(),
            subs_sharded: true,
            subs_gen: 0,
            sourced: 0,
            limits: Vec::new(),
            plain_tcp: node.plain_tcp,
            tls_open: false,
            answered: false,
            wait: node.wait.clone(),
            min_replicas: node.min_replicas,
            replicas_online: None,
            role_at: None,
            owner,
            endpoint: Some((host, port)),
            discovery: None,
            watch: false,
        }
    }
}
