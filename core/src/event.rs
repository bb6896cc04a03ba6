//! Handles, requests and the events the engine reports.

use std::fmt;
use std::time::Instant;

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

/// Handle of one lock of a client (its health view's [`LockHealth::lock`](crate::LockHealth::lock)):
/// issued when the acquisition starts (by the mio `Driver`'s `acquire`, or `Engine::acquire`),
/// valid until the lock's final event ([`Event::AcquireFailed`] or [`Event::Released`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl fmt::Debug for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockId({}.{})", self.index, self.generation)
    }
}

impl LockId {
    /// A dense number for this lock (the index of its record), reused after the lock is gone;
    /// handy for tables.
    pub fn index(self) -> usize {
        self.index as usize
    }
}

/// The phase a lock is in, as the health view shows it ([`LockHealth::state`](crate::LockHealth::state)).
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

/// Whether a node wakes waiters when a lock is released; see
/// [`Engine::wake_state`](crate::Engine::wake_state).
///
/// Waiters subscribe to a resource's wake channel on every node whose connection speaks RESP3
/// (`HELLO 3`, Redis 6 or later); the release script publishes on it. A node that refuses
/// (an older Redis, an ACL without `HELLO` or the channel) is polled: its waiters retry on
/// their jittered delay, as without wake-ups.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WakeState {
    /// Not known yet: the connection is down or its handshake has not answered `HELLO`.
    Unknown,
    /// Release messages arrive on the node's connection.
    On,
    /// Wake-ups are off: [`Config::wake`](crate::Config::wake) is off, or the node refused
    /// (`reason`, e.g. `HELLO refused: ERR unknown command 'HELLO'`).
    Polling {
        /// Why.
        reason: String,
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

/// What happened to a lock or a node: what the mio `Driver`'s `poll_event` (and
/// `Engine::poll_event`) hand out, one at a time.
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
    /// The lock's validity moved earlier: an extension to a TTL shorter than the validity
    /// left was sent, and any node may apply it whatever the round's outcome, so the lock is
    /// valid until `valid_until` at most from now on (a later [`Event::Extended`] moves it
    /// again). Holders MUST stop relying on the older, later deadline.
    Shortened {
        /// The lock.
        lock: LockId,
        /// The new, earlier deadline.
        valid_until: Instant,
    },
    /// An extension asked for (the driver's `extend`) failed.
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
    /// A node's connection completed its handshake: the node takes part in rounds again.
    LinkUp {
        /// The node.
        node: NodeId,
    },
    /// A node that carried release messages refused to subscribe a waiter (an ACL without
    /// the channel, say): its waiters poll it from now on, until it reconnects. For logging
    /// and health; the reason is in the health view ([`NodeHealth::wake`](crate::NodeHealth::wake)).
    WakeOff {
        /// The node.
        node: NodeId,
    },
    /// A node's connection (or connect attempt) is unusable: it is taken down, and the next
    /// attempt is scheduled with backoff (whether the engine found the failure or the socket
    /// reported it). For logging and health; the driver drops the socket and reconnects by
    /// itself.
    LinkFailed {
        /// What went wrong, naming the node.
        error: LinkError,
    },
    /// An election read (`read_leader`, of the engine or the mio driver) is decided:
    /// every node answered, failed or timed out.
    LeaderRead {
        /// The read.
        read: ReadId,
        /// The leader a quorum of the nodes hold ([`leader_of`](crate::leader_of)), if any.
        leader: Option<crate::Leader>,
    },
    /// A node announced a release of the lock of the election `name`, which an observer
    /// watches (`watch_leader`, of the engine or the mio driver): who leads may have
    /// changed (one event per node that announced it).
    LeaderWake {
        /// The election.
        name: String,
    },
}

/// Handle of one election read (`read_leader`, of the engine or the mio driver), named
/// again by its [`Event::LeaderRead`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReadId(pub u32);

impl Event {
    /// The lock the event is about (`None` for [`Event::LinkUp`], [`Event::LinkFailed`] and [`Event::WakeOff`]).
    pub fn lock(&self) -> Option<LockId> {
        match self {
            Event::Acquired { lock, .. }
            | Event::AcquireFailed { lock, .. }
            | Event::Extended { lock, .. }
            | Event::Shortened { lock, .. }
            | Event::ExtendFailed { lock, .. }
            | Event::Lost { lock, .. }
            | Event::Released { lock, .. } => Some(*lock),
            Event::LinkFailed { .. }
            | Event::LinkUp { .. }
            | Event::WakeOff { .. }
            | Event::LeaderRead { .. }
            | Event::LeaderWake { .. } => None,
        }
    }
}
