//! The async client, written once for every async runtime: [`Client`], [`Guard`] and
//! [`Driver`], generic over a small [`Runtime`] trait (connect a socket, make a timer, run a
//! future in the background). Each async adapter implements the trait and names the client for
//! its runtime: `redlease_tokio::Client` is `Client<TokioRuntime>`, `redlease_smol::Client` is
//! `Client<AsyncIoRuntime>`. The [`Driver`] is the one future that owns the sockets and the
//! engine and loops "feed input → flush transmits → re-arm the timer → deliver events".
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
//! - One timer, armed at the engine's `poll_timeout`, which covers lock timers, connect
//!   deadlines and reconnect times. The clock is read again after every wake-up.
//! - Each node's connection follows the one state machine of the client layer
//!   (connect → TLS → handshake → up → lost); when to
//!   connect and when to drop a connection are the engine's decisions.
//! - No protocol decisions: quorum, retries, wait bounds, validity, extension schedule,
//!   handshake and the `NOSCRIPT` fallback are all the engine's. Link trouble and lock
//!   outcomes are reported through `tracing` (and the `metrics` facade with the `metrics`
//!   feature), naming nodes by their URL without the password.

mod client;
mod command;
mod driver;
mod election;
mod guard;
mod runtime;

pub use crate::sockets::AsSocket;
pub use client::Client;
pub use driver::Driver;
pub use election::{Leadership, Observation};
pub use guard::Guard;
pub use runtime::{BoxFuture, Runtime, Socket, Timer};
