#![doc = include_str!("../README.md")]

mod runtime;

use redlease_client::aio;

pub use redlease_client::api::*;
pub use runtime::AsyncIoRuntime;

/// A Redlock client for one set of nodes, on `async-io` (smol, async-std): cheap to clone,
/// every clone talking to the same driver over one connection per node. [`Client::connect`]
/// runs the driver on a thread of its own; [`Client::with_driver`] hands it to your executor.
pub type Client = aio::Client<AsyncIoRuntime>;
/// The future that does all the I/O of a [`Client`] and its clones, for callers who run it
/// themselves ([`Client::with_driver`]): spawn it on your executor.
pub type Driver = aio::Driver<AsyncIoRuntime>;
pub use aio::{Guard, Leadership};
/// The changes of leader of one election ([`Client::observe`]): a `Stream`.
pub type Observation = aio::Observation<AsyncIoRuntime>;
