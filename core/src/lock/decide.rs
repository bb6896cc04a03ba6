//! Deciding a lock's round: the vote an answer casts, what the votes decide, and the error
//! of an acquisition that gives up.

use std::sync::Arc;
use std::time::Instant;

use super::{Phase, Record};
use crate::error::{AcquireError, Fault, ReleaseOutcome, ReleaseReport, Vote, Votes};
use crate::quorum::{valid_until, validity_left};
use crate::wire::{Op, OpAnswer};

/// The largest fencing token that Lua's doubles still count exactly: 2^53 − 1.
const MAX_FENCE: u64 = (1 << 53) - 1;

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
    /// A fenced reader was granted: read the fence counters of every node (a fence round
    /// that proposes 0, so writes nothing), its epoch the largest of `epoch` (what its grants
    /// read) and what a quorum of them holds now; the lock is then valid until `valid`.
    ReadEpoch {
        epoch: u64,
        valid: Instant,
    },
    /// Release what the attempt took, then retry or give up.
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
    /// Every node of a draining release answered (or timed out): the record is free.
    Drained,
}

impl Record {
    /// What the votes so far decide, at `now`, over `n` nodes with quorum `q`.
    pub(crate) fn decide(&self, now: Instant, n: usize, q: usize, drift_factor: f64) -> Decision {
        let t = &self.round.tally;
        let (yes, no, open) = (t.yes, t.no, t.open());
        let possible = yes + open >= q;
        match &self.phase {
            Phase::Acquiring { proposal, .. } => {
                // A semaphore's round is won when enough of its permits each have a quorum.
                let (won, possible) =
                    if self.permits.on() { self.permits.standing(q, open) } else { (yes >= q, possible) };
                if won {
                    match validity_left(self.round.start, now, self.ttl, drift_factor) {
                        Some(_) if self.fencing && *proposal > MAX_FENCE => Decision::FenceExhausted(*proposal - 1),
                        // A re-entry's token is its owner's, where a quorum recorded it.
                        Some(valid) if self.fencing && self.recorded.token(q).is_some() => {
                            Decision::Grant { valid, fence: self.recorded.token(q) }
                        }
                        // A reader's token is the writer epoch it reads under: what its grants
                        // read, unless a writer came and went while its round was open (a node
                        // that granted early read the counter before that writer's fence
                        // round raised it): the counters are read again.
                        Some(valid) if self.fencing && self.shared => {
                            Decision::ReadEpoch { epoch: proposal.saturating_sub(1), valid }
                        }
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
            // The token is the lock's: once a quorum recorded it, or no quorum can, it is held.
            Phase::Fencing { proposal, valid, recording: true, .. } => match Some(*valid).filter(|&v| v > now) {
                Some(valid) if yes >= q || !possible => Decision::Grant { valid, fence: Some(*proposal) },
                Some(_) => Decision::Open,
                None => Decision::AttemptFailed,
            },
            // A reader's read of the counters: every answer is a counter (`seen`, the largest),
            // decided once a quorum answered, since a quorum holds every earlier writer's token.
            Phase::Fencing { proposal: 0, seen, valid, .. } => match Some(*valid).filter(|&v| v > now) {
                Some(valid) if no >= q => Decision::Grant { valid, fence: Some(*seen) },
                Some(_) if no + open >= q => Decision::Open,
                _ => Decision::AttemptFailed,
            },
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

    /// The vote an answer of `node` to `op` of the current round casts: `Ok(None)` for a
    /// `NOSCRIPT` (the engine resends with the source), `Err` with the reply for one the
    /// script cannot return. Keeps the fencing bookkeeping of the acquire and fence rounds,
    /// and which permits each node granted a semaphore.
    #[inline]
    pub(crate) fn answer(&mut self, node: usize, op: Op, answer: OpAnswer) -> Result<Option<Vote>, String> {
        let v = match answer {
            OpAnswer::NoScript => return Ok(None),
            OpAnswer::Error(m) if Fault::of_server_error(&m) == Fault::Misconfigured => {
                return Ok(Some(Vote::Misconfigured(m)));
            }
            OpAnswer::Error(m) => return Ok(Some(Vote::Error(m))),
            OpAnswer::Permits { proposal: p, positions } => {
                let Phase::Acquiring { proposal, .. } = &mut self.phase else {
                    return Err(format!("permits at {positions:?}"));
                };
                self.permits.record(node, &positions)?;
                *proposal = (*proposal).max(p);
                return Ok(Some(Vote::Granted));
            }
            OpAnswer::Held(left) => {
                if !matches!(op, Op::Acquire | Op::Permits) || !matches!(self.phase, Phase::Acquiring { .. }) {
                    return Err("+HELD".to_owned());
                }
                if let Some(slot) = self.round.held.get_mut(node) {
                    *slot = left;
                }
                return Ok(Some(Vote::Refused));
            }
            OpAnswer::Int(v) => v,
        };
        let vote = match (op, &mut self.phase) {
            // The largest counter the node had before the write: the proposal holds on this
            // node iff it was above it.
            // The record of a re-entrant lock's token: 1 where recorded.
            (Op::Fence, Phase::Fencing { recording: true, .. }) if v == 0 || v == 1 => {
                if v == 1 {
                    Vote::Granted
                } else {
                    Vote::Refused
                }
            }
            (Op::Fence, Phase::Fencing { proposal, seen, .. }) if v >= 0 => {
                if (v as u64) < *proposal {
                    Vote::Granted
                } else {
                    *seen = (*seen).max(v as u64);
                    Vote::Refused
                }
            }
            // A re-entry where the owner's token is recorded: it is the hold's token (and the
            // node's proposal, should no quorum have it, is above it).
            (Op::Acquire, Phase::Acquiring { proposal, .. }) if v < 0 && !self.owner.is_empty() => {
                let fence = v.unsigned_abs();
                self.recorded.add(fence);
                *proposal = (*proposal).max(fence.saturating_add(1));
                Vote::Granted
            }
            // The node's fencing proposal: one more than its largest counter.
            (Op::Acquire | Op::SetNx, Phase::Acquiring { proposal, .. }) if v > 0 => {
                *proposal = (*proposal).max(v as u64);
                if self.permits.fast {
                    // `SET NX` of the first permit in the client's order.
                    self.permits.record(node, &[1])?;
                }
                Vote::Granted
            }
            (Op::Release | Op::Extend, _) if v > 0 => Vote::Granted,
            (Op::Acquire | Op::SetNx | Op::Permits | Op::Release | Op::Extend, _) if v == 0 => Vote::Refused,
            _ => return Err(format!(":{v}")),
        };
        Ok(Some(vote))
    }

    /// Whether the last attempt failed for a reason retrying cannot mend: the nodes that
    /// refused us for a configuration reason (a wrong password or database, an ACL, a key of
    /// another type) are alone more than a quorum can spare. Nodes out of reach may come back,
    /// so they do not count.
    pub(crate) fn misconfigured(&self, q: usize) -> bool {
        let votes = self.round.tally.votes();
        votes.iter().filter(|v| v.fault() == Some(Fault::Misconfigured)).count() > votes.len() - q
    }

    /// The error of an acquisition that gives up at `now` with quorum `q` (`addrs`: the
    /// nodes' addresses, for messages): the last attempt's outcome, wrapped in a wait timeout
    /// when attempts were left.
    pub(crate) fn give_up(&self, now: Instant, q: usize, addrs: Arc<[Arc<str>]>, drift_factor: f64) -> AcquireError {
        let tally = &self.round.tally;
        let attempts = self.tries.made;
        // Nodes that had not answered when the attempt was decided stay `Pending`: they
        // neither refused nor failed (a node timeout turns them into `TimedOut` first).
        // Too slow: a quorum granted but too late, or the attempt's validity ran out first. A
        // semaphore's nodes may each grant other permits: its quorum is on the permits.
        let won = if self.permits.on() { self.permits.standing(q, 0).0 } else { tally.yes >= q };
        let too_slow = won || valid_until(self.round.start, self.ttl, drift_factor).is_none_or(|v| v <= now);
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
        if self.tries.made < self.tries.max && !self.misconfigured(q) {
            // Attempts were left, so the wait bound is what ended it (a misconfiguration that
            // leaves no quorum ends it at once, whatever is left).
            let waited = now.saturating_duration_since(self.tries.called);
            return AcquireError::WaitTimeout { waited, attempts, last: Box::new(error) };
        }
        error
    }
}
