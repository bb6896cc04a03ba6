#![doc = include_str!("../README.md")]

mod client;
mod driver;
mod election;
mod guard;
mod shared;
mod socket;

pub use client::{Client, KeepAlive};
pub use driver::Driver;
pub use election::{Leadership, Observation};
pub use guard::Guard;

/// The mio version this crate is built on, re-exported so that a host loop uses the same one.
pub use mio;
pub use redlease_client::api::*;
/// The core crate, re-exported for the embedded driver's events ([`core::Event`]) and lock
/// snapshots.
pub use redlease_core as core;
pub use redlease_core::{Event, LockInfo};
