//! One node's connection state: output buffer, FIFO of pending replies, input buffer, and
//! where the connection stands (down with a reconnect time, connecting, up).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::event::LinkState;

/// What a pending reply answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Auth,
    Select,
    SetName,
    ScriptLoad(&'static str),
    Acquire,
    Extend,
    Release,
    Fence,
    /// Release after a failed attempt or a cancel: the answer is not waited for.
    Cleanup,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Auth => "AUTH",
            Kind::Select => "SELECT",
            Kind::SetName => "CLIENT SETNAME",
            Kind::ScriptLoad(_) => "SCRIPT LOAD",
            Kind::Acquire => "the acquire script",
            Kind::Extend => "the extend script",
            Kind::Release => "the release script",
            Kind::Fence => "the fence write-back script",
            Kind::Cleanup => "the cleanup release",
        }
    }
}

/// A request on the wire whose reply has not come back yet. Replies are matched by position.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub(crate) kind: Kind,
    pub(crate) slot: u32,
    pub(crate) generation: u32,
    pub(crate) round: u32,
}

#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) state: LinkState,
    /// The delay before the next connect attempt after a failure; doubles per failure.
    pub(crate) backoff: Duration,
    /// Bytes to send; `out[out_pos..]` is still unsent.
    pub(crate) out: Vec<u8>,
    pub(crate) out_pos: usize,
    pub(crate) pending: VecDeque<Pending>,
    /// The start of a reply whose end has not arrived yet.
    pub(crate) inbuf: Vec<u8>,
    /// Why the last connect attempt or connection failed (a link error), until a handshake
    /// completes again.
    pub(crate) last_error: Option<String>,
}

impl Link {
    /// A link that is down and due for its first connect attempt at once.
    pub(crate) fn new(backoff: Duration) -> Self {
        Link {
            state: LinkState::Down { retry_at: None },
            backoff,
            out: Vec::new(),
            out_pos: 0,
            pending: VecDeque::new(),
            inbuf: Vec::new(),
            last_error: None,
        }
    }

    pub(crate) fn is_up(&self) -> bool {
        matches!(self.state, LinkState::Up { .. })
    }

    /// When the link needs [`handle_timeout`](crate::Engine::handle_timeout): its reconnect
    /// time or its connect deadline.
    pub(crate) fn wake(&self) -> Option<Instant> {
        match self.state {
            LinkState::Down { retry_at } => retry_at,
            LinkState::Connecting { deadline } => Some(deadline),
            LinkState::Up { .. } => None,
        }
    }

    pub(crate) fn unsent(&self) -> &[u8] {
        &self.out[self.out_pos..]
    }

    pub(crate) fn advance(&mut self, n: usize) {
        self.out_pos = (self.out_pos + n).min(self.out.len());
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
    }

    /// Forget the connection: buffers emptied, pending requests returned to the caller.
    pub(crate) fn reset(&mut self, state: LinkState) -> VecDeque<Pending> {
        self.state = state;
        self.out.clear();
        self.out_pos = 0;
        self.inbuf.clear();
        std::mem::take(&mut self.pending)
    }
}
