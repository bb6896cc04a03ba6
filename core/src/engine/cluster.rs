//! Requests to Redis Cluster nodes: a lock's call encoded in the cluster form of its keys as
//! well (see [`crate::cluster`]), and redirects followed.

use std::time::Instant;

use super::Engine;
use crate::cluster::{self, Redirect};
use crate::error::{Vote, is_cluster_error};
use crate::event::{LockId, NodeId};
use crate::link::{Cmd, Copy, MAX_HOPS};
use crate::lock::Keys;
use crate::wire::{Names, OpAnswer, Pending, Request};

/// A call's cluster form, when some node is a cluster: its bytes, and the one slot its keys
/// hash to (or why there is none).
pub(super) type ClusterForm = Option<(Vec<u8>, Result<u16, String>)>;

/// Encode `request` into `out` as every standalone node takes it, and return its cluster form
/// when `any_cluster`.
pub(super) fn encode_all<'k>(
    any_cluster: bool,
    out: &mut Vec<u8>,
    request: Request<'_, impl ExactSizeIterator<Item = &'k [u8]> + Clone>,
) -> ClusterForm {
    request.clone().encode(out);
    if !any_cluster {
        return None;
    }
    let mut tagged = Keys::default();
    let mut forms = Vec::with_capacity(request.keys.len());
    for key in request.keys.clone() {
        let mut k = Vec::with_capacity(key.len() + 2);
        if let Err(why) = cluster::cluster_key(&mut k, key) {
            return Some((Vec::new(), Err(why)));
        }
        forms.push(k);
    }
    tagged.set_bytes(forms.iter().map(Vec::as_slice));
    let slot = cluster::one_slot(tagged.iter());
    let mut bytes = Vec::with_capacity(out.len() + 2 * forms.len());
    let Request { call, token, names, eval, .. } = request;
    Request { call, keys: tagged.iter(), token, names: Names { shard: true, ..names }, eval }.encode(&mut bytes);
    Some((bytes, slot))
}

/// The request `plain` with its cluster form, as the links take it.
pub(super) fn cmd<'a>(plain: &'a [u8], cluster: &'a ClusterForm) -> Cmd<'a> {
    Cmd {
        plain,
        cluster: cluster
            .as_ref()
            .map(|(bytes, slot)| (bytes.as_slice(), slot.as_ref().copied().map_err(String::as_str))),
    }
}

impl Engine {
    /// A lock operation's `answer` from `node` that only a Redis Cluster gives (a node not
    /// known as one is one): counted as the vote it is; `true` when it was one.
    pub(super) fn cluster_answer(
        &mut self,
        now: Instant,
        node: NodeId,
        lock: LockId,
        round: u32,
        answer: &OpAnswer,
    ) -> bool {
        if let OpAnswer::Error(m) = answer {
            if is_cluster_error(m) {
                // A Redis Cluster answers (a node not known as one is one). A request whose
                // keys span slots is a misconfiguration; a cluster that is down or resharding
                // (`CLUSTERDOWN`, `TRYAGAIN`) fails this vote only.
                let news = self.links.became_cluster(now, node.index());
                if self.locks.in_round(lock, round) {
                    // (A node just found to be a cluster was sent the keys as they are: the
                    // retry goes out in their cluster form.)
                    let vote = if m.starts_with("CROSSSLOT") && !news {
                        Vote::Misconfigured(format!("{m} (see the crate docs' names on a Redis Cluster)"))
                    } else {
                        Vote::Error(m.clone())
                    };
                    if let Some(fault) = vote.fault() {
                        self.links.count_fault(node, fault);
                    }
                    self.vote(now, lock.index, node.index(), vote);
                }
                return true;
            }
        }
        false
    }

    /// An attempt's cleanup `copy` to go on `to` after its acquisition went on: sent as it
    /// is, it could delete what a later attempt took (the same token). A semaphore's release
    /// names only the permits it holds: the others this cleanup was for go on in its place
    /// once the lock holds its own, or are released when the acquisition settles; a mutex's
    /// release covers every key the attempt took.
    pub(super) fn resend_narrowed(&mut self, now: Instant, to: usize, copy: Copy, ask: bool) {
        let Some(lock) = copy.attempt_of else { return };
        let node = self.links.owner(NodeId(to as u16));
        if let Some(bytes) = self.stray_permits(node, lock) {
            let copy = Copy { bytes, hops: copy.hops, attempt_of: None };
            self.links.resend_copy(now, to, copy, ask);
        }
    }

    /// `pending`, sent on `link`, was redirected: send it where the redirect says (behind
    /// `ASKING` for an `ASK`), unless it followed too many; a lock's request is encoded again
    /// from the lock, a cleanup is sent again as it was kept.
    pub(super) fn on_redirect(&mut self, now: Instant, link: NodeId, pending: Pending, redirect: Redirect) {
        let node = self.links.owner(link);
        match pending {
            Pending::Op { op, lock, round } => {
                if !self.locks.in_round(lock, round) {
                    return;
                }
                let hops = &mut self.locks[lock.index].round.hops;
                let Some(h) = hops.get_mut(node.index()) else { return };
                *h = h.saturating_add(1);
                if *h > MAX_HOPS {
                    let vote = Vote::Error(format!("more than {MAX_HOPS} cluster redirects: {redirect:?}"));
                    self.vote(now, lock.index, node.index(), vote);
                    return;
                }
                let to = match self.links.redirected(now, link.index(), &redirect) {
                    Ok(to) => to,
                    Err(vote) => return self.vote(now, lock.index, node.index(), vote),
                };
                let s = &self.locks[lock.index];
                let Some(call) = s.call(op, self.config.retry) else { return };
                let mut plain = Vec::new();
                let names = s.names(self.config.fence_prefix.as_bytes());
                let request = Request { call, keys: s.keys.iter(), token: &s.token, names, eval: true };
                let form = encode_all(true, &mut plain, request);
                let Some((bytes, _)) = form else { return };
                let sent = self.links.send_asking(now, to, redirect.ask, pending, |out| out.extend_from_slice(&bytes));
                if let Err(vote) = sent {
                    self.vote(now, lock.index, node.index(), vote);
                }
            }
            Pending::Resend { copy } => {
                let Some(copy) = self.links.take_copy(copy) else { return };
                // An attempt's cleanup, sent on another master now, could land after the
                // acquisition's next attempt and delete what it took (the same token): once
                // the acquisition goes on, its final cleanup or release covers this node.
                if copy.hops >= MAX_HOPS {
                    return;
                }
                let Ok(to) = self.links.redirected(now, link.index(), &redirect) else { return };
                if copy.attempt_of.is_some_and(|lock| self.locks.get(lock).is_ok()) {
                    self.resend_narrowed(now, to, copy, redirect.ask);
                } else {
                    self.links.resend_copy(now, to, copy, redirect.ask);
                }
            }
            Pending::Read { read } => self.read_redirected(now, link, node, read, &redirect),
            _ => {}
        }
    }
}
