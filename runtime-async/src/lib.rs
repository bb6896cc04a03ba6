//! # redlease-async: the runtime-agnostic async Redlock client
//!
//! The part of the async adapters that does not depend on a runtime: [`Client`] (set up
//! with the core's [`Config`], re-exported here), [`Guard`], [`LockBuilder`], [`LostSignal`],
//! [`Error`], and the [`Driver`] — the one future that owns the sockets and the [`redlease_core::Engine`] and loops "feed input →
//! flush transmits → re-arm the timer → deliver events". It is generic over a small
//! [`Runtime`] trait (connect a TCP stream, make a timer, start the driver); the adapter
//! crates `redlease-tokio` and `redlease-smol` implement it and re-export the rest.
//!
//! Use an adapter crate, not this one, unless you are writing an adapter.
//!
//! ## How the driver works
//!
//! - Clients and guards send commands over a channel; each command that expects an answer
//!   carries a one-shot reply channel, kept in a table keyed by [`redlease_core::LockId`]
//!   until the engine's event for that lock arrives.
//! - Poor man's multiplexing: the engine writes each operation to every node's buffer at
//!   once; the driver writes all of them without waiting, and waits for readiness on all N
//!   sockets together (every socket is polled in the same pass), so a slow node never delays
//!   the reads of the others.
//! - One timer, armed at the engine's [`poll_timeout`], which covers lock timers, connect
//!   deadlines and reconnect times. The clock is read again after every wake-up.
//! - No reconnect schedule of its own: the engine owns it ([`Config`]'s `connect_timeout`,
//!   `reconnect_min`, `reconnect_max`). The driver starts a connect whenever
//!   [`poll_connect`] hands out a node, reports how it went, reports a socket that fails or
//!   closes, and closes what it holds on [`Event::LinkFailed`] (a link the engine failed,
//!   e.g. a wrong password, or a connect attempt past its deadline). While a node is down
//!   the engine counts it as a failed vote at once, with the reason of its last failure.
//! - Link trouble is logged through the [`log`](https://docs.rs/log) facade, naming the node
//!   by its URL without the password: `warn` when a connection is lost or the engine fails a
//!   link (e.g. `AUTH failed: WRONGPASS ...`), `debug` for connects and failed attempts. The
//!   same text reaches callers in the per-node votes of an `Unreachable` error.
//! - No protocol decisions: quorum, retries, validity, extension schedule, handshake and the
//!   `NOSCRIPT` fallback are all the engine's.
//!
//! [`poll_timeout`]: redlease_core::Engine::poll_timeout
//! [`poll_connect`]: redlease_core::Engine::poll_connect
//! [`Event::LinkFailed`]: redlease_core::Event::LinkFailed

mod client;
mod driver;
mod error;
mod guard;
mod runtime;

pub use client::{Client, LockBuilder};
pub use driver::Driver;
pub use error::Error;
pub use guard::{Guard, LostSignal};
pub use runtime::{BoxFuture, Runtime, Socket, Timer};

pub use redlease_core::{
    AcquireError, Config, ConfigError, ExtendError, LostReason, Misuse, NodeConfig, ReleaseOutcome, ReleaseReport,
    Retry, Vote,
};
