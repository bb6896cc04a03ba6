//! # redlease-async: the runtime-agnostic async Redlock client
//!
//! The part of the async adapters that does not depend on a runtime: [`Client`] (set up
//! with the core's [`Config`]), [`Guard`], and the [`Driver`] — the one future that owns the
//! sockets and the [`redlease_core::Engine`] and loops "feed input → flush transmits → re-arm
//! the timer → deliver events". It is generic over a small [`Runtime`] trait (connect a TCP
//! stream, make a timer, run a future in the background); the adapter crates
//! `redlease-tokio` and `redlease-smol` implement it and re-export the rest.
//!
//! Everything that is not about async I/O — the options ([`LockOptions`]), the table that
//! routes the engine's events to waiting callers, the [`Lease`] and [`LostSignal`] a guard
//! shares with the driver, tokens, seeds and the [`Error`] type — is `redlease-client`'s,
//! shared with the blocking `redlease-mio`, so the two stacks offer the same API.
//!
//! Use an adapter crate, not this one, unless you are writing an adapter.
//!
//! ## How the driver works
//!
//! - Clients and guards put commands on the driver's queue (a mutex around a `VecDeque` and
//!   the driver's waker); each command that expects an answer carries a one-shot reply, which
//!   the router keeps until the engine's event for that lock arrives.
//! - Poor man's multiplexing: the engine writes each operation to every node's buffer at
//!   once; the driver writes all of them without waiting, and waits for readiness on all N
//!   sockets together, so a slow node never delays the reads of the others. Each socket's
//!   reads register a waker of the node's own, which marks the node and wakes the driver: a
//!   wake-up reads the sockets that have something, not all N.
//! - One timer, armed at the engine's [`poll_timeout`], which covers lock timers, connect
//!   deadlines and reconnect times. The clock is read again after every wake-up.
//! - No reconnect schedule of its own: the engine owns it ([`Config`]'s `connect_timeout`,
//!   `reconnect_min`, `reconnect_max`). The driver drops the connections [`poll_close`]
//!   names, starts a connect whenever [`poll_connect`] hands out a node, and reports how it
//!   went and any socket that fails or closes. While a node is down the engine counts it as
//!   a failed vote at once, with the reason of its last failure.
//! - Link trouble is logged through the [`log`](https://docs.rs/log) facade, naming the node
//!   by its URL without the password: `warn` when a connection is lost or the engine fails a
//!   link (e.g. `AUTH failed: WRONGPASS ...`), `debug` for connects and failed attempts. The
//!   same text reaches callers in the per-node votes of an `Unreachable` error.
//! - No protocol decisions: quorum, retries, wait bounds, validity, extension schedule,
//!   handshake and the `NOSCRIPT` fallback are all the engine's.
//!
//! [`poll_timeout`]: redlease_core::Engine::poll_timeout
//! [`poll_connect`]: redlease_core::Engine::poll_connect
//! [`poll_close`]: redlease_core::Engine::poll_close

mod client;
mod command;
mod driver;
mod guard;
mod runtime;

pub use client::Client;
pub use driver::Driver;
pub use guard::Guard;
pub use runtime::{BoxFuture, Runtime, Socket, Timer};

pub use redlease_client::{Error, Lease, LostSignal};
pub use redlease_core::{
    AcquireError, Config, ConfigError, ExtendError, Fault, Health, LockId, LockOptions, LostReason, Misuse, NodeConfig,
    NodeHealth, NodeId, NodeState, NodeStats, Pem, ReleaseOutcome, ReleaseReport, Retry, TlsSettings, Transport, Vote,
};
