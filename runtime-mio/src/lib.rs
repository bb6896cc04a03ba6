#![doc = include_str!("../README.md")]

mod client;
mod driver;
mod error;
mod guard;
mod random;

pub use client::{Client, KeepAlive, LockBuilder};
pub use driver::{Driver, LinkState, NodeStatus};
pub use error::Error;
pub use guard::{Guard, LostSignal};
pub use random::new_token;

/// The mio version this crate is built on, re-exported so that a host loop uses the same one.
pub use mio;
/// The core crate, re-exported for its types (`Config`, `Event`, `AcquireRequest`, ...).
pub use redlease_core as core;
pub use redlease_core::{
    AcquireError, Config, ConfigError, Event, ExtendError, LockId, LostReason, NodeConfig, NodeId, ReleaseOutcome,
    ReleaseReport, Retry,
};
