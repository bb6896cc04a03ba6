//! The real-fault suite: Redlock on real `redis-server` nodes, each in a network namespace
//! the suite creates, under partitions, pauses, crashes, clock jumps and a paused holder,
//! with a store that checks fencing tokens.
//!
//! - [`netns`]: the namespaces (one per node, a veth pair each) and `iptables` partitions.
//! - [`shim`]: the `LD_PRELOAD` clock shim (`clockshift.c`, compiled with `gcc`) that makes a
//!   node's wall clock jump.
//! - [`worker`]: the worker process (`redlease-fault-worker`): acquire with fencing (a mutex,
//!   a semaphore's permits, a read or a write lock), read-modify-write two counters in the
//!   [`store`] (one fenced, one not; per permit for a semaphore; a reader only reads, twice),
//!   release; every step logged as an [`event`] with `CLOCK_MONOTONIC` times ([`clock`]).
//! - [`check`]: the checker over the logs (overlaps of holds that exclude each other, peak
//!   holders and the semaphore's limit, changes under a reader, late writes, lost updates,
//!   fence order, availability).
//! - [`suite`]: the phases and what each must show; `redlease-faults` (run by
//!   `scripts/faults.sh`) runs them and prints the table.
//!
//! Everything it starts it stops: servers and workers by process id, namespaces by name, also
//! when a phase panics; leftovers of a run that was killed are removed by the next one.

pub mod check;
pub mod clock;
pub mod event;
pub mod netns;
pub mod shim;
pub mod store;
pub mod suite;
pub mod sys;
pub mod worker;

pub use clock::{instant_ns, mono_ns};
