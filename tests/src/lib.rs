//! # redlease-tests: the real-Redis harness, the fault proxy and the conformance suite
//!
//! Everything here runs against **real `redis-server` processes** on loopback ports; nothing is
//! mocked.
//!
//! - [`Servers`] (from `redlease-servers`, shared with the `redlease` command) starts N independent `redis-server` processes on free `127.0.0.1` ports, each in
//!   its own temporary directory, and can pause (SIGSTOP), resume, kill -9, restart (keeping or
//!   dropping its files), flush scripts and configure an ACL user. Every process it started is
//!   killed and reaped when the set is dropped, also while a test panics.
//! - [`RedisConn`] is a tiny synchronous RESP client for assertions (`keys`, `get`, `pttl`, ...).
//! - [`Proxy`] is an in-process TCP fault proxy for one node (pass, delay, blackhole, reset),
//!   switchable at run time; it runs its own tokio runtime on a background thread, so it works
//!   under any runtime the suite drives.
//! - [`faults`] is the real-fault suite (network namespaces, `iptables` partitions, clock
//!   jumps, paused holders, a store that checks fencing tokens), run by `scripts/faults.sh`.
//! - [`all_ready`] waits until a client is connected to every node (`connect` promises a
//!   quorum only), through the client's health view.
//! - [`conformance`] is the suite written once and run against every adapter through the
//!   [`conformance::Subject`] trait; [`conformance_tests!`] generates one `#[test]` per case.
//!
//! If `redis-server` is not on `PATH`, [`Servers::start`] panics with one line saying how to
//! install it.

pub mod conformance;
pub mod faults;
mod proxy;
mod ready;

pub use proxy::{Mode, Proxy};
pub use ready::{READY_WITHIN, all_ready, every_node_ready};
pub use redlease_servers::{
    ClusterModeNode, Listen, Migration, Node, RedisCluster, RedisConn, Reply, Sentinel, SentinelNodes, Servers,
    ServersBuilder, TempDir, key_slot, with_listen,
};

/// The code in the READMEs of the crates that do not make their README their crate docs (it
/// is doc-tested here, so a README cannot drift from the API).
#[cfg(doctest)]
mod readmes {
    #[doc = include_str!("../../core/README.md")]
    struct Core;
    #[doc = include_str!("../../client/README.md")]
    struct Client;
    #[doc = include_str!("../../servers/README.md")]
    struct ServersCrate;
}
