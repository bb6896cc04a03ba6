#![doc = include_str!("../README.md")]

mod client;
mod conn;
mod driver;
mod guard;
mod shared;

pub use client::{Client, KeepAlive};
pub use driver::Driver;
pub use guard::Guard;

/// The mio version this crate is built on, re-exported so that a host loop uses the same one.
pub use mio;
pub use redlease_client::{Error, Lease, LostSignal, new_token};
/// The core crate, re-exported for its types (`Config`, `Event`, `LockOptions`, ...).
pub use redlease_core as core;
pub use redlease_core::{
    AcquireError, Config, ConfigError, Event, ExtendError, Fault, Health, LockId, LockOptions, LostReason, Misuse,
    NodeConfig, NodeHealth, NodeId, NodeState, NodeStats, Pem, ReleaseOutcome, ReleaseReport, Retry, TlsSettings,
    Transport, Vote,
};
