#![doc = include_str!("../README.md")]

pub use redlease_client::api::*;

/// The client on tokio (feature `tokio`): runs on the tokio runtime you already have,
/// current-thread or multi-thread; the driver is a task spawned with `tokio::spawn`.
#[cfg(feature = "tokio")]
pub mod tokio {
    pub use redlease_tokio::{Client, Driver, Guard, Leadership, Observation};
}

/// The client on `async-io` (feature `smol`): smol and async-std. `Client::connect` runs the
/// driver on a thread of its own; `Client::with_driver` hands it to your executor instead.
#[cfg(feature = "smol")]
pub mod smol {
    pub use redlease_smol::{Client, Driver, Guard, Leadership, Observation};
}

/// The client for plain threads, and the driver for your own `mio::Poll` loop (feature `mio`).
#[cfg(feature = "mio")]
pub mod mio {
    pub use redlease_mio::{Client, Driver, Event, Guard, KeepAlive, Leadership, LockInfo, Observation, mio};
}

/// What the clients report: `tracing` levels and the metric names (feature `metrics`).
pub use redlease_client::monitor;

/// The sans-IO engine every client drives, for writing a driver of your own.
pub use redlease_core as core;
