//! # redlease-servers: local `redis-server` nodes
//!
//! The one implementation of "start N independent `redis-server` processes and stop them",
//! shared by the `redlease` command (`demo`, `servers`, `status`, `scan`) and the test
//! harness (`redlease-tests`):
//!
//! - [`Servers`] starts N independent `redis-server` processes on free `127.0.0.1` ports, each
//!   in its own temporary directory, and can pause (SIGSTOP), resume, kill -9, restart
//!   (keeping or dropping its files), flush scripts and configure an ACL user. Every process
//!   it started is killed and reaped when the set is dropped, also while a thread panics.
//!   A node can also be placed elsewhere ([`Placement`]: another address, started through a
//!   command such as `ip netns exec NAME`, with extra environment), as the fault suite does.
//! - [`RedisCluster`] starts a local Redis Cluster (M masters with R replicas each,
//!   `cluster-enabled yes`, formed by hand so that one or two masters work too), migrates
//!   slots with their keys (also in two phases, to observe `-ASK`), fails masters over, and
//!   stops every process it started on drop. [`ClusterModeNode`] is its one-master form.
//! - [`SentinelNodes`] starts Sentinel-managed nodes: per node a primary with replicas, and a
//!   group of `redis-server --sentinel` processes watching each primary as a service; it
//!   drives failovers (`SENTINEL FAILOVER`, kill -9 of a primary) and waits until every
//!   sentinel agrees on the new primary.
//! - [`RedisConn`] is a tiny synchronous RESP client for inspection (`keys`, `get`, `pttl`, ...),
//!   over TCP, a Unix socket or any [`Duplex`] stream (the CLI puts TLS in between). It reads
//!   replies with the core's decoder ([`redlease_core::resp::decode_frame`]), and can hand a
//!   reply over whole to the core's parsers, such as a cluster's slot map
//!   ([`redlease_core::cluster::parse_slots`]).
//!
//! If `redis-server` is not on `PATH`, [`Servers::start`] panics (and
//! [`ServersBuilder::try_start`] fails) with one line saying how to install it; so do
//! [`RedisClusterBuilder::start`] and [`RedisClusterBuilder::try_start`].

mod conf;
mod conn;
mod node;
mod placement;
mod process;
mod redis_cluster;
mod sentinel;
mod servers;
mod tempdir;
#[cfg(feature = "tls")]
mod tls;

#[cfg(unix)]
pub use conn::unix;
pub use conn::{Duplex, IO_TIMEOUT, RedisConn, Reply, tcp};
pub use node::Node;
pub use placement::{Listen, Placement, with_listen};
pub use redis_cluster::{ClusterModeNode, Migration, RedisCluster, RedisClusterBuilder, key_slot};
pub use sentinel::{Sentinel, SentinelNodes, SentinelNodesBuilder};
pub use servers::{FENCE_PREFIX, Servers, ServersBuilder};
pub use tempdir::TempDir;
#[cfg(feature = "tls")]
pub use tls::{TlsFiles, tls_files_for};
