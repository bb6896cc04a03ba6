//! # redlease-client: the client layer every redlease adapter is built on
//!
//! What a Redlock client needs beyond the sans-IO [`redlease_core::Engine`], written once and
//! runtime-agnostic, so that the async adapters (`redlease-tokio`, `redlease-smol`) and the
//! blocking one (`redlease-mio`) offer the same API and cannot drift apart.
//!
//! **Use the `redlease` crate (or an adapter crate), not this one**: they re-export what users
//! need from here.
//!
//! - At the root, what every adapter re-exports: the [`Error`] type, the holder's view of a
//!   lock ([`Lease`], [`LostSignal`]), lock tokens ([`new_token`]) and the core's options,
//!   settings and outcomes.
//! - [`aio`]: the async client, one [`Client`](aio::Client), [`Guard`](aio::Guard) and
//!   [`Driver`](aio::Driver) generic over a small [`Runtime`](aio::Runtime) trait, which each
//!   async adapter implements and names its client for (`redlease_tokio::Client` is
//!   `aio::Client<TokioRuntime>`).
//! - [`monitor`]: what every client reports (`tracing` levels, metric names).
//!
//! The rest — the table that routes the engine's events to waiting callers, the one per-node
//! connection state machine (connect → TLS → handshake → up → lost) that both I/O styles
//! drive, the TLS byte layer, socket options — is shared by the workspace's own adapters and is
//! not part of the supported API.
//!
//! It does no I/O of its own and spawns nothing.

pub mod aio;
mod connect;
mod error;
mod layer_error;
mod lease;
mod link;
pub mod monitor;
mod oneshot;
mod random;
mod router;
mod sockets;
mod spans;
#[cfg(feature = "tls")]
mod tls;
mod transport;

/// What every adapter re-exports, in one list: `pub use redlease_client::api::*;`. The same
/// items are at the crate root, where they are documented.
#[doc(hidden)]
pub mod api {
    pub use crate::error::Error;
    pub use crate::lease::{Lease, LostSignal};
    pub use crate::random::new_token;
    pub use redlease_core::{
        AcquireError, Config, ConfigError, ElectionOptions, ExtendError, Fault, Health, Leader, LeaderChange,
        LockHealth, LockId, LockOptions, LockShape, LockState, LostReason, Misuse, NodeConfig, NodeElection,
        NodeHealth, NodeId, NodeState, NodeStats, Observer, Pem, ReleaseOutcome, ReleaseReport, Retry, TlsSettings,
        Transport, Vote, Votes, election_key, leader_of, split_node_list,
    };
}

#[doc(inline)]
pub use api::*;

/// The pieces the workspace's own adapters (`redlease-mio`, `redlease-smol`) and command line
/// are assembled from. Not part of the supported API: hidden from the docs, and free to change
/// in any release.
#[doc(hidden)]
pub mod adapter {
    pub use crate::connect::{connect_settled, connected};
    pub use crate::lease::Pump;
    pub use crate::link::{Conn, Flush, Links, Read, ReadUntil, SocketIo, node_id};
    pub use crate::random::{campaign_token, seeded};
    pub use crate::router::Router;
    #[cfg(feature = "tls")]
    pub use crate::tls::Blocking as BlockingTls;
    pub use crate::transport::{NodeTransport, Target, prepare};

    /// The spans of the operations a caller waits for, made on the caller's side (children of
    /// the caller's span) and handed to the [`Router`] with the command.
    pub mod spans {
        pub use crate::spans::*;
    }

    /// One-shot replies that async and blocking callers both wait on.
    pub mod oneshot {
        pub use crate::oneshot::*;
    }

    /// Keep `waker` in `cell` as the one to wake, unless the waker already there wakes the same
    /// task (then nothing is cloned). For single-waiter cells (one-shot replies, the driver).
    #[inline]
    pub fn register_waker(cell: &mut Option<std::task::Waker>, waker: &std::task::Waker) {
        if !cell.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *cell = Some(waker.clone());
        }
    }
}

pub(crate) use adapter::register_waker;
pub(crate) use connect::{connect_settled, connected};
pub(crate) use random::seeded;
pub(crate) use router::Router;

/// Run a future to completion on this thread (tests only: the crate depends on no runtime).
#[cfg(test)]
pub(crate) fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    use std::thread::{self, Thread};
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::{Duration, Instant};

    use redlease_core::{Config, Engine, LockId, LockOptions, NodeConfig};

    /// A lock id the engine issued (its one node is down, so the acquisition fails at once).
    pub(crate) fn some_lock() -> LockId {
        let mut engine = Engine::new(Config::new(vec![NodeConfig::new("h", 1)])).unwrap();
        engine.acquire(Instant::now(), &LockOptions::new("r", Duration::from_secs(1)), b"t").unwrap()
    }
}
