//! # redlease-benches: which runtime, how fast, against what
//!
//! The library behind the `runtimes` bench target (see `docs/benchmarks.md`). Every
//! measurement runs against `redis-server` processes that [`redlease_servers::Servers`] (or,
//! for one node that is a Redis Cluster, [`redlease_servers::RedisCluster`]; for
//! Sentinel-managed nodes, [`redlease_servers::SentinelNodes`]) starts on free loopback ports
//! and stops afterwards. The subjects ([`Subject`]): the six adapters
//! ([`adapters`], [`embedded`]), the quorum floors and the pipelined ceiling ([`floor`]), and,
//! in the bench target, two peers, each a [`subject::Generic`]: a runtime ([`exec`]) and its
//! lockers. [`run::run`] measures, [`report`] prints; sequential ratios come
//! from clients taking turns ([`turns`]).

pub mod adapters;
pub mod embedded;
pub mod exec;
pub mod floor;
pub mod plan;
pub mod report;
pub mod run;
pub mod stats;
pub mod subject;
pub mod turns;
pub mod usage;

pub use subject::Subject;
