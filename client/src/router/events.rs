//! The router's input: the engine's events, each routed to whoever waits for it.

use std::sync::Arc;
use std::time::Instant;

use redlease_core::{Engine, Event, ExtendError, LinkError, LockId, ReleaseReport};

use super::{Entry, Release, Router};
use crate::lease::{Lease, LockState};

impl Router {
    /// Route one engine event to whoever waits for it, and report it. Returns the link
    /// failures, for a shell that wants them too (the router has logged them already).
    pub fn route(&mut self, engine: &mut Engine, now: Instant, event: Event) -> Option<LinkError> {
        match event {
            Event::Acquired { lock, valid_until, fence, attempts } => {
                self.acquired(engine, now, lock, valid_until, fence, attempts);
            }
            Event::AcquireFailed { lock, error } => {
                if let Some(a) = self.entries.remove(&lock).and_then(|e| e.acquire) {
                    self.monitor.acquire_failed(engine, lock, a.op, now, &error);
                    let _ = a.reply.send(Err(error.into()));
                }
            }
            Event::Extended { lock, valid_until } => {
                if let Some(entry) = self.entries.get_mut(&lock) {
                    if let Some(state) = entry.state() {
                        state.set_valid_until(valid_until);
                    }
                    let (reply, op) = entry.extend.take().unzip();
                    self.monitor.extended(engine, lock, entry.resource(), op, now, None);
                    if let Some(reply) = reply {
                        let _ = reply.send(Ok(valid_until));
                    }
                }
            }
            Event::Shortened { lock, valid_until } => {
                if let Some(state) = self.entries.get(&lock).and_then(Entry::state) {
                    state.set_valid_until(valid_until);
                }
            }
            Event::ExtendFailed { lock, error } => self.extend_failed(engine, now, lock, error),
            Event::Lost { lock, reason } => {
                if let Some(state) = self.entries.get(&lock).and_then(Entry::state) {
                    self.monitor.lost(engine, self.entries[&lock].resource(), &reason);
                    state.mark_lost(reason);
                }
            }
            Event::Released { lock, report } => self.released(engine, now, lock, report),
            Event::LinkUp { node } => self.monitor.link_up(engine, node, now),
            Event::WakeOff { node } => self.monitor.wake_changed(engine, node),
            Event::LinkFailed { error } => {
                self.monitor.link_failed(engine, &error, now);
                return Some(error);
            }
            Event::LeaderRead { read, leader } => self.leader_read(read, leader),
            Event::LeaderWake { name } => self.leader_woken(&name),
            _ => {}
        }
        self.monitor.gauges(engine, now, false);
        None
    }

    /// A lock was granted: hand its lease to the caller, or release it if the caller is gone.
    fn acquired(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        lock: LockId,
        valid_until: Instant,
        fence: Option<u64>,
        attempts: u32,
    ) {
        let state = Arc::new(LockState::new(valid_until));
        let entry = self.entries.entry(lock).or_insert_with(|| Entry::new(None));
        entry.held_since = Some(now);
        let unwanted = match entry.acquire.take() {
            Some(a) => {
                self.monitor.acquired(engine, lock, a.op, now, attempts);
                let lease = Lease::new(lock, a.resources, a.token, fence, state)
                    .holding(engine.permits(lock).unwrap_or_default());
                entry.lease = Some(lease.clone());
                a.reply.send(Ok(lease)).is_err()
            }
            None => true,
        };
        if unwanted {
            // The caller went away meanwhile: nobody will use or release it.
            match engine.release(now, lock) {
                Ok(()) => entry.release = Release::Detached,
                Err(_) => {
                    self.entries.remove(&lock);
                }
            }
        }
    }

    fn extend_failed(&mut self, engine: &Engine, now: Instant, lock: LockId, error: ExtendError) {
        let Some(entry) = self.entries.get_mut(&lock) else { return };
        if error == ExtendError::Cancelled && std::mem::take(&mut entry.extend_cancelled) {
            // The abandoned extension's end, not the answer to the one in flight.
        } else if let Some((reply, op)) = entry.extend.take() {
            self.monitor.extended(engine, lock, entry.resource(), Some(op), now, Some(&error));
            let _ = reply.send(Err(error.into()));
        }
    }

    fn released(&mut self, engine: &Engine, now: Instant, lock: LockId, report: ReleaseReport) {
        if let Some(mut entry) = self.entries.remove(&lock) {
            let op = entry.release_op.take();
            self.monitor.released(engine, lock, op, now, report.outcome, entry.held_since);
            if let Release::Waiting(reply) = entry.release {
                let _ = reply.send(Ok(report));
            }
        }
    }
}
