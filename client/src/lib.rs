//! # redlease-client: the client layer every redlease adapter is a thin shell over
//!
//! What a Redlock client needs beyond the sans-IO [`redlease_core::Engine`], written once and
//! runtime-agnostic, so that the async stack (`redlease-async`, under tokio, smol and
//! async-std) and the blocking stack (`redlease-mio`) cannot drift apart:
//!
//! - the [`Router`]: the table that issues the callers' commands to the engine and routes
//!   the engine's events back to the callers waiting on them, releases what nobody wants any
//!   more, and closes cleanly;
//! - the holder's view of a lock, [`Lease`], and its [`LostSignal`] (a guard of either stack
//!   is a `Lease` plus a way to reach its driver);
//! - one-shot replies ([`oneshot`]) that async and blocking callers both wait on;
//! - the [`Error`] type every client returns;
//! - the OS randomness the core takes none of: lock tokens ([`new_token`]) and jitter seeds
//!   ([`seeded`]);
//! - the socket options every adapter applies ([`sockets`]: keepalive, an abortive close for
//!   connections the engine failed);
//! - the byte layer between a socket and the engine ([`transport`]): plain, or TLS with
//!   rustls (feature `tls`), written once for every adapter.
//!
//! It does no I/O and spawns nothing. Lock options ([`LockOptions`]) and the protocol's
//! outcomes are the core's. Use an adapter crate, not this one, unless you are writing an
//! adapter.

mod connect;
mod error;
mod lease;
pub mod monitor;
pub mod oneshot;
mod random;
mod router;
pub mod sockets;
#[cfg(feature = "tls")]
pub mod tls;
pub mod transport;

pub use connect::{connect_settled, require_all};
pub use error::Error;
pub use lease::{Lease, LostSignal, Pump};
pub use random::{new_token, seeded};
pub use router::{AcquireReply, Commands, ExtendReply, ReleaseReply, Router};

pub use redlease_core::{
    AcquireError, Config, ConfigError, ExtendError, LockId, LockOptions, LostReason, Misuse, NodeConfig,
    ReleaseOutcome, ReleaseReport, Retry, Vote,
};

/// Keep `waker` in `slot` as the one to wake, unless the waker already there wakes the same
/// task (then nothing is cloned). For the single-waiter slots of the one-shot reply and the
/// async driver.
#[inline]
pub fn register_waker(slot: &mut Option<std::task::Waker>, waker: &std::task::Waker) {
    if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
        *slot = Some(waker.clone());
    }
}

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
