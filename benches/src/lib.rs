//! # redlease-benches: which runtime, how fast, against what
//!
//! The library behind the `runtimes` bench target. Every measurement runs against real
//! `redis-server` processes that [`redlease_cluster::Cluster`] starts on free loopback ports
//! and stops afterwards. The subjects ([`Subject`]) are redlease's six adapters
//! ([`adapters`], [`embedded`]), one quorum floor per I/O style and the pipelined ceiling
//! ([`floor`], [`pipelined`]), and, in the bench target, two peers from crates.io. Most are
//! a [`generic::Generic`]: a runtime, a client and its lockers, with every scenario written
//! once. [`run::run`] measures the scenarios ([`plan::Scenario`]) and [`report`] prints
//! their tables; sequential ratios come from two clients taking turns on one cluster
//! ([`turns`]).

pub mod adapters;
pub mod embedded;
pub mod floor;
pub mod generic;
pub mod pipelined;
pub mod plan;
pub mod report;
pub mod run;
pub mod stats;
pub mod subject;
pub mod turns;
pub mod usage;

pub use subject::Subject;
