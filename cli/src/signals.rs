//! How `redlease run` ends early, and the signals it watches while it connects, waits and runs
//! the command: what both its steps (the lock, then the command) share.

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::Usage;

/// How `redlease run` ends before the command has run to its end.
pub(crate) enum Early {
    /// Exit with this status; why has been said on stderr.
    Exit(u8),
    /// Bad usage: exit 64 with this message.
    Usage(Usage),
}

impl From<Usage> for Early {
    fn from(usage: Usage) -> Self {
        Early::Usage(usage)
    }
}

/// SIGTERM, SIGINT and SIGHUP, as a stream of signal numbers.
pub(crate) struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// Install the handlers: from now on these signals are received here, not fatal.
    pub(crate) fn install() -> Result<Self, Usage> {
        let install = |kind| signal(kind).map_err(|e| Usage(format!("cannot install the signal handlers: {e}")));
        Ok(Signals {
            term: install(SignalKind::terminate())?,
            int: install(SignalKind::interrupt())?,
            hup: install(SignalKind::hangup())?,
        })
    }

    /// The next signal received.
    pub(crate) async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.term.recv() => libc::SIGTERM,
            _ = self.int.recv() => libc::SIGINT,
            _ = self.hup.recv() => libc::SIGHUP,
        }
    }
}

/// A signal's name, for messages.
pub(crate) fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}
