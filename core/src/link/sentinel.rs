//! A node that is a Sentinel-managed primary: its own link first asks the sentinels which
//! master serves the service, then connects to that master, and asks again whenever that
//! connection ends.
//!
//! Asking is a phase of the node's link, as reading a Redis Cluster's slot map is a step of
//! its handshake. A round of asking connects to the sentinels one after another (each
//! connection's handshake is `AUTH` as the sentinels want it and `SENTINEL
//! get-master-addr-by-name SERVICE`), until a majority of the configured sentinels name one
//! address, or every sentinel has been tried: then the address that a majority of those that
//! answered name is the master, and with none (they disagree, or none answered) the round
//! fails, naming what each sentinel said. The link then connects to the master; its handshake
//! asks `ROLE` before anything else, so that no vote counts from a replica, and `ROLE` is asked
//! again every [`REPLICAS_CHECK`](crate::REPLICAS_CHECK) to see a master that was demoted. A
//! `READONLY` or `MASTERDOWN` answer, a demotion, or the end of the connection starts a new
//! round at the next connect attempt.
//!
//! Beside it, the node has a watch link (after the nodes' own links, as a Redis Cluster's links
//! to its masters are): a connection to one sentinel, subscribed to `+switch-master`. When the
//! sentinels switch the service to another master, the node's link to the old one fails at
//! once and the next attempt asks them again. A watch link that fails moves on to the next
//! sentinel.

use std::sync::Arc;
use std::time::Instant;

use super::{Link, Links, Next};
use crate::error::{Fault, LinkError};
use crate::event::{LinkState, NodeId};
use crate::health::{SentinelHealth, SentinelView};
use crate::node::{NodeConfig, SentinelConfig};
use crate::resp;
use crate::wire::{Pending, Step};

/// The channel on which sentinels announce a new master: `SERVICE OLD-IP OLD-PORT NEW-IP
/// NEW-PORT`.
const SWITCH: &[u8] = b"+switch-master";

/// An address: host and port.
pub(crate) type Addr = (Arc<str>, u16);

/// What one sentinel said when asked for the master (`Err`: why it did not name one, and the
/// kind of that failure).
pub(crate) type Said = Result<Addr, (String, Fault)>;

/// A Sentinel-managed node's discovery: what its link asks and where it connects.
#[derive(Debug)]
pub(crate) struct Discovery {
    service: Arc<str>,
    sentinels: Vec<Addr>,
    /// The sentinel the link asks (connects to) now: the asking phase. `None`: the link
    /// connects to [`master`](Self::master).
    asking: Option<usize>,
    /// What each sentinel said in the current round (`None`: not asked in it yet).
    round: Vec<Option<Said>>,
    /// What each sentinel said last, whatever the round (for the health view).
    views: Vec<Option<(Said, Instant)>>,
    /// The master the link connects to (or is connected to) outside the asking phase.
    master: Option<Addr>,
    /// Where a round starts: the sentinel that answered last.
    start: usize,
    /// Times the master in use changed, and the last change: from, to and when.
    switches: u64,
    last_switch: Option<(Addr, Addr, Instant)>,
    /// The handshake of a connection to a sentinel, encoded once.
    handshake: (Vec<u8>, Vec<Step>),
    /// A round just failed on an answer, and the link is being failed for it: its going down
    /// is not another sentinel's answer.
    failed: bool,
    /// The handshake of the watch link: `AUTH` as the sentinels want it, and `SUBSCRIBE
    /// +switch-master`.
    watch_handshake: (Vec<u8>, Vec<Step>),
    /// The sentinel the watch link connects to.
    watching: usize,
}

/// How a round of asking stands after an answer.
enum Round {
    /// Ask this sentinel next.
    Ask(usize),
    /// This is the master.
    Master(Addr),
    /// No master: why, and the kind of failure.
    Failed(String, Fault),
}

impl Discovery {
    /// The discovery of `node`, whose sentinels are `sentinel`: nothing asked yet.
    pub(super) fn new(node: &NodeConfig, sentinel: &SentinelConfig) -> Box<Self> {
        let mut out = Vec::new();
        let mut steps = Vec::new();
        if let (user, Some(pass)) = sentinel.auth(node) {
            match user {
                Some(user) => resp::command(&mut out, &[b"AUTH", user.as_bytes(), pass.as_bytes()]),
                None => resp::command(&mut out, &[b"AUTH", pass.as_bytes()]),
            }
            steps.push(Step::Auth);
        }
        let (mut watch, mut watch_steps) = (out.clone(), steps.clone());
        resp::command(&mut watch, &[b"SUBSCRIBE", SWITCH]);
        watch_steps.push(Step::SentinelWatch);
        resp::command(&mut out, &[b"SENTINEL", b"get-master-addr-by-name", sentinel.service.as_bytes()]);
        steps.push(Step::SentinelMaster);
        let n = sentinel.sentinels.len();
        Box::new(Discovery {
            service: Arc::from(sentinel.service.as_str()),
            sentinels: sentinel.sentinels.iter().map(|(h, p)| (Arc::from(h.as_str()), *p)).collect(),
            asking: Some(0),
            round: vec![None; n],
            views: vec![None; n],
            master: None,
            start: 0,
            switches: 0,
            last_switch: None,
            handshake: (out, steps),
            failed: false,
            watch_handshake: (watch, watch_steps),
            watching: 0,
        })
    }

    /// Whether the link is in its asking phase (connected, or connecting, to a sentinel).
    pub(super) fn is_asking(&self) -> bool {
        self.asking.is_some()
    }

    /// The handshake of a connection to a sentinel: its bytes and steps.
    pub(super) fn handshake(&self) -> (&Vec<u8>, &Vec<Step>) {
        (&self.handshake.0, &self.handshake.1)
    }

    /// The handshake of the watch link: its bytes and steps.
    pub(super) fn watch_handshake(&self) -> (&Vec<u8>, &Vec<Step>) {
        (&self.watch_handshake.0, &self.watch_handshake.1)
    }

    /// Where the link connects now: the sentinel it asks, or the master.
    fn target(&self) -> Option<&Addr> {
        match self.asking {
            Some(k) => self.sentinels.get(k),
            None => self.master.as_ref(),
        }
    }

    /// Start a new round at the next connect attempt.
    fn new_round(&mut self) {
        self.asking = Some(self.start);
        self.round.iter_mut().for_each(|r| *r = None);
    }

    /// Record what sentinel `k` said at `now`, and how the round stands.
    fn heard(&mut self, now: Instant, k: usize, said: Said) -> Round {
        if said.is_ok() {
            self.start = k;
        }
        self.views[k] = Some((said.clone(), now));
        self.round[k] = Some(said);
        let n = self.sentinels.len();
        let named: Vec<&Addr> = self.round.iter().flatten().filter_map(|s| s.as_ref().ok()).collect();
        let count = |a: &Addr| named.iter().filter(|b| **b == a).count();
        // A majority of the configured sentinels agree: no need to ask the rest.
        if let Some(a) = named.iter().find(|a| count(a) > n / 2) {
            return Round::Master((*a).clone());
        }
        if let Some(next) = (1..n).map(|d| (k + d) % n).find(|&j| self.round[j].is_none()) {
            return Round::Ask(next);
        }
        // Every sentinel asked: a majority of those that named one.
        if let Some(a) = named.iter().find(|a| count(a) > named.len() / 2) {
            return Round::Master((*a).clone());
        }
        let each: Vec<String> = (0..n)
            .map(|j| {
                let said = match &self.round[j] {
                    Some(Ok((h, p))) => format!("names {}", crate::node::hostport(h, *p)),
                    Some(Err((why, _))) => why.clone(),
                    None => "not asked".to_owned(),
                };
                format!("sentinel {}: {said}", self.sentinel_addr(j))
            })
            .collect();
        if named.is_empty() {
            // Misconfigured when every sentinel refused us for a reason of configuration.
            let misconfigured = self.round.iter().flatten().all(|s| matches!(s, Err((_, Fault::Misconfigured))));
            let fault = if misconfigured { Fault::Misconfigured } else { Fault::Unreachable };
            let what = if misconfigured { "no sentinel names a master" } else { "no sentinel answered" };
            Round::Failed(format!("{what} for service {:?}: {}", self.service, each.join("; ")), fault)
        } else {
            Round::Failed(
                format!("the sentinels disagree on the master of service {:?}: {}", self.service, each.join("; ")),
                Fault::Unreachable,
            )
        }
    }

    /// `host:port` of sentinel `k`.
    fn sentinel_addr(&self, k: usize) -> String {
        self.sentinels.get(k).map_or_else(String::new, |(h, p)| crate::node::hostport(h, *p))
    }

    /// `host:port` of the master in use, if any.
    pub(super) fn master_addr(&self) -> Option<String> {
        self.master.as_ref().map(|(h, p)| crate::node::hostport(h, *p))
    }

    /// Use `to` as the master from now on, counting a switch if it replaces another.
    fn use_master(&mut self, now: Instant, to: Addr) {
        self.asking = None;
        self.note_master(now, to);
    }

    /// Note `to` as the master, counting a switch if it replaces another, without ending the
    /// asking phase.
    fn note_master(&mut self, now: Instant, to: Addr) {
        if self.master.as_ref() != Some(&to) {
            if let Some(from) = self.master.take() {
                self.switches += 1;
                self.last_switch = Some((from, to.clone(), now));
            }
            self.master = Some(to);
        }
    }
}

impl Links {
    /// The discovery of `link`, if it is a Sentinel-managed node's own link.
    pub(super) fn discovery(&self, link: usize) -> Option<&Discovery> {
        self.links.get(link)?.discovery.as_deref()
    }

    /// Whether `link` is a Sentinel-managed node's own link or its watch link.
    pub(crate) fn is_sentinel_link(&self, link: NodeId) -> bool {
        self.links.get(link.index()).is_some_and(|l| l.watch || l.discovery.is_some())
    }

    /// Where a Sentinel-managed node's own link connects now: `(node, host, port)`.
    pub(super) fn sentinel_endpoint(&self, link: NodeId) -> Option<(NodeId, &str, u16)> {
        let (host, port) = self.discovery(link.index())?.target()?;
        Some((link, host, *port))
    }

    /// The answer to `SENTINEL get-master-addr-by-name` at the front of `buf`, on `link`: what
    /// that sentinel said goes into the round, and the link either connects to the next
    /// sentinel or the master ([`Next::Moved`]: the connection is closed without a failure), or
    /// fails with what every sentinel said.
    pub(super) fn read_sentinel_answer(&mut self, now: Instant, link: NodeId, buf: &[u8]) -> Result<Next, LinkError> {
        let (i, node) = (link.index(), self.owner(link));
        let addr = Arc::clone(&self.addrs[i]);
        let used = match resp::frame_len(buf, 8, 4096) {
            Ok(Some(used)) => used,
            Ok(None) => return Ok(Next::More),
            Err(detail) => return Err(LinkError::Malformed { node, addr, detail }),
        };
        let l = &mut self.links[i];
        if let Some((_, queued)) = l.pending.pop_front() {
            l.stats.reply(now, now.saturating_duration_since(queued), self.on_time);
        }
        l.answered = true;
        let Some(d) = l.discovery.as_deref_mut() else { return Ok(Next::Done(used)) };
        let Some(k) = d.asking else { return Ok(Next::Done(used)) };
        let said = master_named(&buf[..used], &d.service);
        match d.heard(now, k, said) {
            Round::Ask(next) => d.asking = Some(next),
            Round::Master(to) => d.use_master(now, to),
            Round::Failed(reason, fault) => {
                d.new_round();
                d.failed = true;
                // The node's connect attempt ends here (its handshake steps are all answered).
                l.attempts_ended += 1;
                return Err(LinkError::Sentinel { node, addr, reason, fault });
            }
        }
        // To the next sentinel, or the master: not a failure, and not the end of an attempt.
        let _ = l.reset(LinkState::Down { retry_at: None });
        self.closes.push_back(link);
        Ok(Next::Moved)
    }

    /// `link`'s connection, or connect attempt, ended with its `last_error` recorded: when it
    /// was to a sentinel, that is what the sentinel said in the round, and the round goes on
    /// at once with the next one (returns `true`: the link is due now, and the attempt is not
    /// over); when it was to the master, the next attempt asks the sentinels again.
    pub(super) fn sentinel_link_down(&mut self, now: Instant, link: usize) -> bool {
        if self.links.get(link).is_some_and(|l| l.watch) {
            self.watch_down(link);
            return false;
        }
        let Some(l) = self.links.get_mut(link) else { return false };
        let Some(d) = l.discovery.as_deref_mut() else { return false };
        if std::mem::take(&mut d.failed) {
            return false;
        }
        let Some(k) = d.asking else {
            d.new_round();
            return false;
        };
        let why = l.last_error.as_ref().map_or_else(|| "connection lost".to_owned(), |(_, e)| e.clone());
        let fault = l.last_error.as_ref().map_or(Fault::Unreachable, |(f, _)| *f);
        match d.heard(now, k, Err((why, fault))) {
            Round::Ask(next) => d.asking = Some(next),
            Round::Master(to) => d.use_master(now, to),
            Round::Failed(reason, fault) => {
                d.new_round();
                l.last_error = Some((fault, reason));
                return false;
            }
        }
        true
    }

    /// The error that fails `link` when its master answered `reply` (an error) and the node is
    /// Sentinel-managed: `READONLY` (it is a replica now) or `MASTERDOWN`.
    pub(super) fn demoted(&self, link: NodeId, reply: &[u8]) -> Option<LinkError> {
        let d = self.discovery(link.index())?;
        if !(reply.starts_with(b"READONLY") || reply.starts_with(b"MASTERDOWN")) {
            return None;
        }
        let text = String::from_utf8_lossy(&reply[..reply.len().min(120)]).into_owned();
        let reason = format!(
            "the master {} answered {text:?}: it is not the master of service {:?} now; asking the sentinels again",
            d.master_addr().unwrap_or_default(),
            d.service
        );
        Some(LinkError::Sentinel { node: self.owner(link), addr: self.addr(link), reason, fault: Fault::Unreachable })
    }

    /// The error that fails `link` when `ROLE` on its master says replica, if the node is
    /// Sentinel-managed.
    pub(super) fn not_a_master(&self, link: NodeId) -> Option<LinkError> {
        let d = self.discovery(link.index())?;
        let reason = format!(
            "the master the sentinels named for service {:?}, {}, answers ROLE as a replica: no vote counts from \
             it; asking the sentinels again",
            d.service,
            d.master_addr().unwrap_or_default()
        );
        Some(LinkError::Sentinel { node: self.owner(link), addr: self.addr(link), reason, fault: Fault::Unreachable })
    }
}

impl Links {
    /// Add every Sentinel-managed node's watch link, down and due to connect at once, to its
    /// first sentinel.
    pub(super) fn add_watches(&mut self) {
        for node in 0..self.nodes {
            let Some(d) = self.links[node].discovery.as_deref() else { continue };
            let Some((host, port)) = d.sentinels.first().cloned() else { continue };
            let addr = format!("{} (its sentinel {})", self.addrs[node], d.sentinel_addr(0));
            let mut link = Link::master_of(&self.links[node], self.policy.min(), (node as u16, false), host, port);
            link.watch = true;
            link.wake = crate::event::WakeState::Polling { reason: "a sentinel's link".to_owned() };
            link.wait = None;
            link.min_replicas = None;
            link.plain_tcp = false;
            self.links.push(link);
            self.addrs.push(Arc::from(addr));
        }
    }

    /// The handshake of a connection `link`'s watch link opened.
    pub(super) fn watch_handshake(&self, link: usize) -> Option<(&Vec<u8>, &Vec<Step>)> {
        let l = self.links.get(link).filter(|l| l.watch)?;
        Some(self.discovery(l.owner as usize)?.watch_handshake())
    }

    /// The reply at the front of `buf` on the watch link `link`: `AUTH`'s, `SUBSCRIBE`'s, or a
    /// `+switch-master` message. A switch of the node's service fails the node's link to the
    /// old master ([`Next::Switched`]).
    pub(super) fn read_watch(&mut self, now: Instant, link: NodeId, buf: &[u8]) -> Result<Next, LinkError> {
        let (i, node) = (link.index(), self.owner(link));
        let addr = Arc::clone(&self.addrs[i]);
        let used = match resp::frame_len(buf, 8, 64 << 10) {
            Ok(Some(used)) => used,
            Ok(None) => return Ok(Next::More),
            Err(detail) => return Err(LinkError::Malformed { node, addr, detail }),
        };
        let frame = &buf[..used];
        let front = self.links[i].pending.front().map(|(p, _)| *p);
        let unexpected = || LinkError::Unexpected {
            node,
            addr: Arc::clone(&addr),
            request: "SUBSCRIBE +switch-master",
            reply: String::from_utf8_lossy(&frame[..frame.len().min(120)]).trim_end().to_owned(),
        };
        match resp::decode(frame) {
            Ok(Some((resp::Reply::Error(e), _))) => {
                let step = match front {
                    Some(Pending::Step(step)) => step,
                    _ => Step::SentinelWatch,
                };
                let message = String::from_utf8_lossy(e).into_owned();
                Err(LinkError::Handshake { node, addr: Arc::clone(&addr), step: step.name(), message })
            }
            Ok(Some((resp::Reply::Status(_), _))) if front == Some(Pending::Step(Step::Auth)) => {
                self.links[i].pending.pop_front();
                Ok(Next::Done(used))
            }
            Ok(Some((resp::Reply::Array(3), at))) => {
                let mut parts = Vec::with_capacity(3);
                let mut at = at;
                for _ in 0..3 {
                    match resp::decode(&frame[at..]) {
                        Ok(Some((resp::Reply::Bulk(b), n))) => (parts.push(b), at += n),
                        Ok(Some((resp::Reply::Int(_), n))) => (parts.push(&[][..]), at += n),
                        _ => return Err(unexpected()),
                    };
                }
                match (parts[0], parts[1]) {
                    (b"subscribe", SWITCH) if front == Some(Pending::Step(Step::SentinelWatch)) => {
                        self.links[i].pending.pop_front();
                        Ok(Next::Done(self.ready(i, used)))
                    }
                    (b"message", SWITCH) => {
                        let data = String::from_utf8_lossy(parts[2]).into_owned();
                        Ok(match self.switched(now, node, &data) {
                            Some(error) => Next::Switched { used, link: node, error },
                            None => Next::Done(used),
                        })
                    }
                    _ => Err(unexpected()),
                }
            }
            _ => Err(unexpected()),
        }
    }

    /// The sentinels announced `data` (`SERVICE OLD-IP OLD-PORT NEW-IP NEW-PORT`) for `node`:
    /// when it is its service, its new master is in use from now on, and the error that fails
    /// its link to the old master if it has one up.
    fn switched(&mut self, now: Instant, node: NodeId, data: &str) -> Option<LinkError> {
        let addr = self.addr(node);
        let l = self.links.get_mut(node.index())?;
        let up = l.is_up();
        // A connection to a sentinel in flight or up finishes its round: it is no master's.
        let busy = !matches!(l.state, LinkState::Down { .. });
        let d = l.discovery.as_deref_mut()?;
        let words: Vec<&str> = data.split(' ').collect();
        let [service, old_ip, old_port, new_ip, new_port] = words.as_slice() else { return None };
        if *service != &*d.service {
            return None;
        }
        let to: Addr = (Arc::from(*new_ip), new_port.parse().ok()?);
        let before = d.master.clone();
        let connected = up && !d.is_asking();
        if busy && d.is_asking() {
            d.note_master(now, to);
            return None;
        }
        d.use_master(now, to.clone());
        if !connected || before.as_ref() == Some(&to) {
            return None;
        }
        let reason = format!(
            "the sentinels switched service {:?} from {} to {}; asking them again",
            d.service,
            crate::node::hostport(old_ip, old_port.parse().unwrap_or(0)),
            crate::node::hostport(&to.0, to.1)
        );
        Some(LinkError::Sentinel { node, addr, reason, fault: Fault::Unreachable })
    }

    /// The watch link `link` failed: its next attempt goes to the next sentinel.
    fn watch_down(&mut self, link: usize) {
        let owner = self.links[link].owner as usize;
        let Some(d) = self.links[owner].discovery.as_deref_mut() else { return };
        d.watching = (d.watching + 1) % d.sentinels.len().max(1);
        let next = d.sentinels.get(d.watching).cloned();
        let addr = format!("{} (its sentinel {})", self.addrs[owner], d.sentinel_addr(d.watching));
        self.links[link].endpoint = next;
        self.addrs[link] = Arc::from(addr);
    }

    /// A Sentinel-managed node's view for the health view.
    pub(super) fn sentinel_health(&self, link: usize) -> Option<SentinelHealth> {
        let d = self.discovery(link)?;
        let hp = |(h, p): &Addr| crate::node::hostport(h, *p);
        let sentinels = (0..d.sentinels.len())
            .map(|k| {
                let (said, at) = match &d.views[k] {
                    Some((said, at)) => (Some(said.as_ref().map(hp).map_err(|(why, _)| why.clone())), Some(*at)),
                    None => (None, None),
                };
                SentinelView { addr: d.sentinel_addr(k), said, at }
            })
            .collect();
        Some(SentinelHealth {
            service: Arc::clone(&d.service),
            master: d.master_addr(),
            asking: d.is_asking(),
            sentinels,
            switches: d.switches,
            last_switch: d.last_switch.as_ref().map(|(from, to, at)| (hp(from), hp(to), *at)),
        })
    }
}

impl Link {
    /// Whether this link takes no lock requests because it talks to a sentinel.
    pub(super) fn is_asking(&self) -> bool {
        self.discovery.as_deref().is_some_and(Discovery::is_asking)
    }
}

/// What a whole answer to `SENTINEL get-master-addr-by-name` says: the address (`*2 $ip
/// $port`), or why there is none (a nil: no such service; an error: not a sentinel, a login
/// refused).
fn master_named(frame: &[u8], service: &str) -> Said {
    let render = || String::from_utf8_lossy(&frame[..frame.len().min(120)]).trim_end().to_owned();
    match resp::decode(frame) {
        Ok(Some((resp::Reply::Nil, _))) => Err((format!("knows no service named {service:?}"), Fault::Misconfigured)),
        Ok(Some((resp::Reply::Error(e), _))) => {
            let text = String::from_utf8_lossy(e).into_owned();
            if text.contains("unknown command") {
                let why = format!(
                    "answers as a data node, not a sentinel ({text}): list the sentinels' addresses in a \
                     redis+sentinel:// URL, or give a data node as redis://"
                );
                return Err((why, Fault::Misconfigured));
            }
            Err((format!("refused: {text}"), Fault::of_server_error(&text)))
        }
        Ok(Some((resp::Reply::Array(2), at))) => {
            let host = match resp::decode(&frame[at..]) {
                Ok(Some((resp::Reply::Bulk(h), used))) => Some((String::from_utf8_lossy(h).into_owned(), at + used)),
                _ => None,
            };
            let port = host.as_ref().and_then(|(_, at)| match resp::decode(&frame[*at..]) {
                Ok(Some((resp::Reply::Bulk(p), _))) => std::str::from_utf8(p).ok()?.parse::<u16>().ok(),
                _ => None,
            });
            match (host, port) {
                (Some((host, _)), Some(port)) if !host.is_empty() && port > 0 => Ok((Arc::from(host), port)),
                _ => Err((format!("answered {:?}, not an address", render()), Fault::Protocol)),
            }
        }
        _ => Err((format!("answered {:?}, not an address", render()), Fault::Protocol)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeConfig;

    fn discovery(n: usize) -> Box<Discovery> {
        let node = NodeConfig::sentinel((0..n).map(|i| ("s".to_owned(), 26379 + i as u16)), "svc");
        Discovery::new(&node, node.sentinel.as_ref().unwrap())
    }

    fn at(host: &str, port: u16) -> Said {
        Ok((Arc::from(host), port))
    }

    #[test]
    fn answers_read_as_an_address_or_a_reason() {
        assert_eq!(master_named(b"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n", "svc"), at("127.0.0.1", 6380));
        let (why, fault) = master_named(b"*-1\r\n", "svc").unwrap_err();
        assert!(why.contains("no service named \"svc\"") && fault == Fault::Misconfigured, "{why}");
        let (why, fault) =
            master_named(b"-ERR unknown command 'SENTINEL', with args beginning with: \r\n", "svc").unwrap_err();
        assert!(why.contains("answers as a data node") && fault == Fault::Misconfigured, "{why}");
        let (why, fault) = master_named(b"-WRONGPASS invalid username-password pair\r\n", "svc").unwrap_err();
        assert!(why.contains("WRONGPASS") && fault == Fault::Misconfigured, "{why}");
        for garbage in [&b":1\r\n"[..], b"*2\r\n$1\r\nh\r\n$1\r\nx\r\n", b"*2\r\n$0\r\n\r\n$2\r\n10\r\n"] {
            assert_eq!(master_named(garbage, "svc").unwrap_err().1, Fault::Protocol);
        }
    }

    #[test]
    fn a_round_stops_at_a_majority_and_names_each_sentinel_when_it_fails() {
        let now = Instant::now();
        let mut d = discovery(3);
        assert!(matches!(d.heard(now, 0, at("m", 1)), Round::Ask(1)));
        assert!(matches!(d.heard(now, 1, at("m", 1)), Round::Master(ref a) if a.1 == 1));

        // Two unreachable, one answers: it is used. (A round starts at the last that answered.)
        d.new_round();
        assert_eq!(d.asking, Some(1));
        let down = || Err(("connect failed: refused".to_owned(), Fault::Unreachable));
        assert!(matches!(d.heard(now, 1, down()), Round::Ask(2)));
        assert!(matches!(d.heard(now, 2, down()), Round::Ask(0)));
        assert!(matches!(d.heard(now, 0, at("m", 2)), Round::Master(ref a) if a.1 == 2));

        // Three different answers: a failure naming each.
        d.new_round();
        for (k, port) in [(0, 1), (1, 2)] {
            assert!(matches!(d.heard(now, k, at("m", port)), Round::Ask(_)));
        }
        let Round::Failed(why, fault) = d.heard(now, 2, at("m", 3)) else { panic!("no failure") };
        assert!(why.contains("disagree") && why.contains("s:26381: names m:3") && fault == Fault::Unreachable, "{why}");

        // None answers: unreachable; all refuse for configuration: misconfigured.
        for (said, fault, needle) in [
            (down(), Fault::Unreachable, "no sentinel answered"),
            (Err(("knows no service".to_owned(), Fault::Misconfigured)), Fault::Misconfigured, "no sentinel names"),
        ] {
            d.new_round();
            let mut last = None;
            for k in 0..3 {
                last = Some(d.heard(now, k, said.clone()));
            }
            let Some(Round::Failed(why, f)) = last else { panic!("no failure") };
            assert!(why.contains(needle) && why.contains("sentinel s:26379") && f == fault, "{why}");
        }
    }

    #[test]
    fn switches_are_counted_when_the_master_changes() {
        let now = Instant::now();
        let mut d = discovery(1);
        d.use_master(now, (Arc::from("a"), 1));
        d.use_master(now, (Arc::from("a"), 1));
        assert_eq!(d.switches, 0);
        d.use_master(now, (Arc::from("b"), 1));
        assert_eq!(d.switches, 1);
        let (from, to, _) = d.last_switch.as_ref().unwrap();
        assert_eq!((&*from.0, &*to.0), ("a", "b"));
    }
}
