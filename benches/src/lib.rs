//! # redlease-benches: latency and throughput across runtimes, against peers and the floor
//!
//! The library behind the `runtimes` bench target (`benches/runtimes.rs`). One run measures,
//! always against real `redis-server` processes started by [`redlease_cluster::Cluster`]:
//!
//! 1. **sequential** lock+unlock on one key (cycle, acquire alone, release alone), and the
//!    same **paired**: each adapter and floor taking turns with the floor of its style on one
//!    cluster ([`turns`]), which resolves a few per cent where one after the other cannot;
//! 2. **throughput** with 1, 16 and 256 concurrent lockers, each on its own key (cycles/s,
//!    latency under load, client CPU time per cycle from `getrusage`, server CPU time per
//!    cycle from `/proc/<pid>/task/*/schedstat` of the `redis-server` processes);
//! 3. **scaling** of the sequential p50 in the number of nodes N;
//! 4. **stalled** minority: acquire latency with 1 and then 2 of 5 nodes paused (SIGSTOP);
//! 5. **contention**: 16 lockers on one key (acquisitions/s and the spread per locker);
//! 6. **handoff**: K contenders on one key, each holding it briefly (handoff latency, the
//!    spread of waits), against the handoff floor and the cost of one acquisition after the
//!    same idle gap.
//!
//! The subjects are every adapter ([`adapters`], [`embedded`]), hand-written floors with no
//! library in between ([`floor`]) and, in the bench target, peers from crates.io. Each
//! subject implements [`Subject`]; most do so through the generic runners
//! [`asyncrt::Async`] (any async runtime) and [`blocking::Blocking`] (OS threads), which
//! run the same scenario code for every locker type. [`runner::run`] drives the scenarios
//! with a progress display and collects [`results`], [`report`] turns them into tables, targets and the
//! `docs/benchmarks.md` page, and [`svg`] draws its charts.

pub mod adapters;
pub mod asyncrt;
pub mod blocking;
pub mod cpu;
pub mod embedded;
pub mod floor;
pub mod floor_io;
pub mod floor_wake;
mod load;
pub mod machine;
mod nodes;
pub mod plan;
pub mod report;
pub mod resp;
pub mod results;
pub mod runner;
pub mod seq;
pub mod server;
pub mod stats;
pub mod subject;
pub mod svg;
pub mod turns;

pub use plan::{Mode, Options, Plan, Scenario};
pub use results::Results;
pub use stats::{Dist, Samples, Summary};
pub use subject::{Contention, Handoff, Paired, Role, Sequential, StallLevel, Style, Subject, Throughput};
