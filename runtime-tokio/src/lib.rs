#![doc = include_str!("../README.md")]

mod runtime;

use redlease_client::aio;

pub use redlease_client::api::*;
pub use runtime::TokioRuntime;

/// A Redlock client for one set of nodes, on tokio: cheap to clone, every clone talking to the
/// same driver (a task spawned with `tokio::spawn`) over one connection per node.
pub type Client = aio::Client<TokioRuntime>;
/// The future that does all the I/O of a [`Client`] and its clones, for callers who run it
/// themselves ([`Client::with_driver`]).
pub type Driver = aio::Driver<TokioRuntime>;
pub use aio::{Guard, Leadership};
/// The changes of leader of one election ([`Client::observe`]): a `Stream`.
pub type Observation = aio::Observation<TokioRuntime>;
