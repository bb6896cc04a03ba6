//! What clients and guards ask of the driver, over its channel.

use std::time::Duration;

use redlease_client::{AcquireReply, ExtendReply, ReleaseReply};
use redlease_core::{Health, LockId, LockOptions};

/// One request to the driver; each answer goes back on the one-shot reply it carries.
#[derive(Debug)]
pub(crate) enum Command {
    Acquire {
        options: LockOptions,
        token: String,
        reply: AcquireReply,
    },
    Extend {
        lock: LockId,
        ttl: Duration,
        reply: ExtendReply,
    },
    /// `reply: None`: a dropped guard; nobody waits for the report.
    Release {
        lock: LockId,
        reply: Option<ReleaseReply>,
    },
    AutoExtend {
        lock: LockId,
        on: bool,
    },
    /// An acquire future was dropped: cancel the acquisitions nobody waits for.
    Sweep,
    /// The health view of the nodes, as the engine sees them now.
    Health {
        reply: redlease_client::oneshot::Sender<Health>,
    },
    /// Close the client; `done` is answered once the driver has finished.
    Close {
        done: redlease_client::oneshot::Sender<()>,
    },
}
