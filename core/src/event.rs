//! Handles, requests and the events the engine reports.

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{AcquireError, ExtendError, LinkError, LostReason, ReleaseReport};

/// Index of a node in [`Config::nodes`](crate::Config::nodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u16);

impl NodeId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Handle of one lock in an [`Engine`](crate::Engine): issued by
/// [`acquire`](crate::Engine::acquire), valid until the lock's final event
/// ([`Event::AcquireFailed`] or [`Event::Released`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockId {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}

impl fmt::Debug for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockId({}.{})", self.slot, self.generation)
    }
}

impl LockId {
    /// A dense number for this lock (the slot), reused after the lock is gone; handy for tables.
    pub fn slot(self) -> usize {
        self.slot as usize
    }
}

/// What to lock and how: the argument of [`Engine::acquire`](crate::Engine::acquire).
#[derive(Clone, Debug)]
pub struct AcquireRequest<'a> {
    /// The keys to lock together (all-or-nothing on each node). At least one, none empty.
    pub resources: &'a [&'a [u8]],
    /// The caller's unique token for this acquisition (e.g. 20 random bytes, hex-encoded).
    pub token: &'a [u8],
    /// Time to live of the keys on the nodes, in whole milliseconds (a fraction is dropped,
    /// and the validity is computed from what is sent).
    pub ttl: Duration,
    /// Also produce a fencing token (one extra round trip).
    pub fencing: bool,
    /// Attempts in all; `None`: [`Retry::attempts`](crate::Retry::attempts) of the config,
    /// or unlimited within `wait` when a `wait` is given.
    pub attempts: Option<u32>,
    /// Give up once no retry can start within this time of the call.
    pub wait: Option<Duration>,
    /// Extend the lock automatically about every `ttl / 3` while it is held.
    pub auto_extend: bool,
    /// Never extend the lock past this long after it was acquired.
    pub max_hold: Option<Duration>,
}

impl<'a> AcquireRequest<'a> {
    /// A request for these resources with this token and TTL; defaults for the rest.
    pub fn new(resources: &'a [&'a [u8]], token: &'a [u8], ttl: Duration) -> Self {
        AcquireRequest {
            resources,
            token,
            ttl,
            fencing: false,
            attempts: None,
            wait: None,
            auto_extend: false,
            max_hold: None,
        }
    }
}

/// The phase a lock is in; see [`Engine::lock_info`](crate::Engine::lock_info).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockState {
    /// An attempt is in flight, or a retry is scheduled.
    Acquiring,
    /// Held (perhaps lost: see [`LockInfo::lost`]).
    Held,
    /// Held, with an extension in flight.
    Extending,
    /// A release is in flight.
    Releasing,
}

/// Where one node's connection stands; see [`Engine::link_state`](crate::Engine::link_state).
///
/// The engine keeps this per node and owns the reconnect policy: a link that goes down waits
/// out a backoff (from [`Config::reconnect_min`](crate::Config::reconnect_min), doubling per
/// failure up to [`Config::reconnect_max`](crate::Config::reconnect_max)), then
/// [`Engine::poll_connect`](crate::Engine::poll_connect) hands it to the driver to connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkState {
    /// Not connected. The next connect attempt is due at `retry_at`; `None`: due now (a new
    /// engine, [`Engine::reconnect_now`](crate::Engine::reconnect_now), or once
    /// [`Engine::handle_timeout`](crate::Engine::handle_timeout) has seen the time come).
    Down {
        /// When the next attempt is due, if not at once.
        retry_at: Option<Instant>,
    },
    /// [`Engine::poll_connect`](crate::Engine::poll_connect) handed out an attempt; it is
    /// abandoned (with [`Event::LinkFailed`]) if it has not connected by `deadline`.
    Connecting {
        /// `poll_connect`'s `now` plus [`Config::connect_timeout`](crate::Config::connect_timeout).
        deadline: Instant,
    },
    /// Connected since `since` (the handshake may still be in flight).
    Up {
        /// When [`Engine::handle_connected`](crate::Engine::handle_connected) was called.
        since: Instant,
    },
}

/// A snapshot of one lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockInfo {
    /// Its phase.
    pub state: LockState,
    /// Valid until this instant of the caller's monotonic clock (once held).
    pub valid_until: Option<Instant>,
    /// Fencing token (once held, when asked for).
    pub fence: Option<u64>,
    /// Known lost: validity ran out, or an extension was refused.
    pub lost: bool,
    /// Attempts made so far.
    pub attempts: u32,
}

/// What the engine has to tell the caller; drained with [`Engine::poll_event`](crate::Engine::poll_event).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The lock is held until `valid_until` (the caller's monotonic clock), never longer.
    Acquired {
        /// The lock.
        lock: LockId,
        /// Deadline of the validity: `start + ttl − drift`.
        valid_until: Instant,
        /// The fencing token, when asked for.
        fence: Option<u64>,
        /// Attempts it took.
        attempts: u32,
    },
    /// The acquisition ended without the lock; the id is now free.
    AcquireFailed {
        /// The lock.
        lock: LockId,
        /// Why.
        error: AcquireError,
    },
    /// An extension (asked for, or automatic) succeeded.
    Extended {
        /// The lock.
        lock: LockId,
        /// The new deadline.
        valid_until: Instant,
    },
    /// An extension asked for with [`Engine::extend`](crate::Engine::extend) failed.
    /// Nothing was deleted.
    ExtendFailed {
        /// The lock.
        lock: LockId,
        /// Why.
        error: ExtendError,
    },
    /// A held lock is lost: stop relying on it. Emitted once; the lock stays until released.
    Lost {
        /// The lock.
        lock: LockId,
        /// Why.
        reason: LostReason,
    },
    /// The release finished; the id is now free.
    Released {
        /// The lock.
        lock: LockId,
        /// What the nodes said.
        report: ReleaseReport,
    },
    /// A node's connection (or connect attempt) is unusable: the engine has taken the link
    /// down and scheduled the next attempt. The adapter MUST close what it holds for
    /// [`error.node()`](LinkError::node) — unless it has since started a newer attempt that
    /// [`poll_connect`](crate::Engine::poll_connect) handed out (then the link is no longer
    /// [`LinkState::Down`]) — and connect again when `poll_connect` says so.
    LinkFailed {
        /// What went wrong, naming the node.
        error: LinkError,
    },
}
