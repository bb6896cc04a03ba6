//! # redlease-core: a sans-IO Redlock engine
//!
//! This crate implements the [Redlock] distributed lock over N independent Redis masters as a
//! pure state machine. It turns lock requests into RESP command bytes, turns reply bytes into
//! outcomes, tallies quorums and does the clock-drift arithmetic.
//!
//! ## The determinism contract
//!
//! - **No I/O.** The engine never opens, reads or writes a socket; the caller moves bytes.
//! - **No clocks.** Every input that depends on time takes `now: Instant` from the caller,
//!   and `now` MUST NOT go backwards between calls. The engine never calls `Instant::now()`.
//! - **No OS randomness.** Lock tokens are supplied by the caller; retry jitter comes from a
//!   generator seeded by [`Config::seed`].
//! - **No threads.** One `&mut Engine` call runs to completion.
//!
//! The same sequence of calls with the same arguments therefore always yields the same bytes
//! and the same events, which is what the crate's simulation tests rely on.
//!
//! ## The API
//!
//! An [`Engine`] serves one set of nodes and carries any number of concurrent locks, each
//! named by a [`LockId`]. Its methods come in four groups:
//!
//! - getters: [`Engine::lock_info`], [`Engine::is_connected`], [`Engine::link_state`],
//!   [`Engine::last_error`], [`Engine::node_stats`] (round trips, replies, timeouts, failures
//!   by kind), [`Engine::health`] (every node, and the fault tolerance left), ...
//! - inputs: [`Engine::handle_connected`], [`Engine::handle_connect_failed`],
//!   [`Engine::handle_data`], [`Engine::handle_disconnected`], [`Engine::handle_timeout`], and
//!   for a driver with TLS [`Engine::handle_tls_started`] and [`Engine::handle_tls_failed`];
//! - commands: [`Engine::acquire`] (a mutex, a semaphore's permits with
//!   [`LockOptions::semaphore`], a read lock with [`LockOptions::shared`]),
//!   [`Engine::extend`], [`Engine::downgrade`], [`Engine::release`], [`Engine::cancel`], and
//!   for observers of an election [`Engine::read_leader`] and [`Engine::watch_leader`] — misuse
//!   is an error returned at once ([`Misuse`]);
//! - outputs: [`Engine::poll_close`], [`Engine::poll_connect`], [`Engine::poll_transmit`] /
//!   [`Engine::advance_transmit`] per node, [`Engine::poll_timeout`], [`Engine::poll_event`]
//!   — outcomes are [`Event`]s.
//!
//! Inside, the engine is an orchestrator over sub-states that own their data: the per-node
//! links (buffers, pending FIFO, handshake, reconnect schedule), the lock records (each a phase
//! enum carrying that phase's data, and the tally of its round), the acquisitions waiting on
//! each wake channel, the timer table, and the wire layer (script calls encoded from narrow
//! arguments, replies classified against the request they answer).
//!
//! ## Run loop
//!
//! A driver loops: close and start the connections the engine asks for → feed input → flush
//! transmits → re-arm the one timer → deliver events. It makes no protocol decisions of its
//! own, and keeps no reconnect schedule: the engine owns it. In order:
//!
//! 1. **Links.** While [`Engine::poll_close`] yields a node, drop the connection or connect
//!    attempt you hold for it (the engine failed it: garbage, a refused handshake, a connect
//!    past its deadline). Then, while [`Engine::poll_connect`]`(now)` yields a node, start a
//!    non-blocking connect to it, dropping whatever you still hold for that node. When the
//!    attempt completes call [`Engine::handle_connected`]; when it fails,
//!    [`Engine::handle_connect_failed`] with the reason (it shows in the node's votes).
//! 2. **Input.** Bytes read: [`Engine::handle_data`]. End of stream or a socket error: close
//!    the socket and call [`Engine::handle_disconnected`].
//! 3. **Flush.** [`Engine::poll_transmit`] / [`Engine::advance_transmit`] for every
//!    connected node, with non-blocking writes.
//! 4. **Timer.** Arm one timer at [`Engine::poll_timeout`] (lock timers, connect deadlines
//!    and reconnect times all count) and call [`Engine::handle_timeout`] once it has passed.
//! 5. **Events.** Drain [`Engine::poll_event`]: lock outcomes for the callers waiting on
//!    them, and [`Event::LinkFailed`] to log. Inputs and timeouts may fail links, so step 1
//!    comes again before the next wait.
//!
//! Here the "network" is a buffer, every connect succeeds at once and the replies come from
//! memory:
//!
//! ```
//! use std::time::{Duration, Instant};
//! use redlease_core::{Config, Engine, Event, LockOptions, NodeConfig, NodeId, ReleaseOutcome};
//!
//! let nodes = (0..3).map(|i| NodeConfig::new("127.0.0.1", 7000 + i)).collect();
//! // No CLIENT SETNAME: keep the handshake to the lock format check, HELLO 3 (wake-ups on
//! // release; and whether the node is a Redis Cluster) and the five SCRIPT LOADs.
//! let mut engine = Engine::new(Config::new(nodes).client_name(None)).unwrap();
//! let now = Instant::now();
//!
//! // 1. Every node is due for a first connect. Here each connects at once; the engine
//! //    queues its handshake.
//! while let Some(node) = engine.poll_connect(now) {
//!     engine.handle_connected(now, node);
//! }
//! // 2. Commands are issued at any time; they are pipelined behind the handshake.
//! let options = LockOptions::new("orders:42", Duration::from_secs(10));
//! let lock = engine.acquire(now, &options, b"my-unique-token").unwrap();
//! // 3. Flush: write what the engine wants sent to each node.
//! for i in 0..3 {
//!     let node = NodeId(i);
//!     while let Some(bytes) = engine.poll_transmit(node) {
//!         let n = bytes.len(); // a real driver writes to a non-blocking socket here
//!         engine.advance_transmit(node, n);
//!     }
//! }
//! // 4. Replies arrive, in order per node: the node's lock format, HELLO's map, five SCRIPT
//! //    LOAD digests, then the acquire's `+OK` (one resource without fencing: the first
//! //    attempt is `SET key token NX PX ttl`).
//! let digests = redlease_core::script_digests();
//! for i in 0..3 {
//!     engine.handle_data(now, NodeId(i), b"$1\r\n2\r\n%1\r\n$5\r\nproto\r\n:3\r\n");
//!     for sha in digests {
//!         engine.handle_data(now, NodeId(i), format!("${}\r\n{sha}\r\n", sha.len()).as_bytes());
//!     }
//!     engine.handle_data(now, NodeId(i), b"+OK\r\n");
//! }
//! // 5. Events: the quorum (2 of 3) was reached at once. `LinkUp` says a node finished its
//! //    handshake (for health views and logs).
//! let valid_until = loop {
//!     match engine.poll_event() {
//!         Some(Event::LinkUp { .. }) => {}
//!         Some(Event::Acquired { lock: l, valid_until, .. }) if l == lock => break valid_until,
//!         other => panic!("{other:?}"),
//!     }
//! };
//! assert!(valid_until < now + Duration::from_secs(10)); // ttl minus the drift margin
//! // 6. The timer: arm one at `poll_timeout`, call `handle_timeout` when it fires.
//! let _next = engine.poll_timeout();
//!
//! engine.release(now, lock).unwrap();
//! for i in 0..3 {
//!     engine.handle_data(now, NodeId(i), b":1\r\n");
//! }
//! loop {
//!     match engine.poll_event() {
//!         Some(Event::LinkUp { .. }) => {}
//!         Some(Event::Released { report, .. }) => break assert_eq!(report.outcome, ReleaseOutcome::Released),
//!         other => panic!("{other:?}"),
//!     }
//! }
//! ```
//!
//! ## Connections and reconnects
//!
//! Each node has one link, which is [`LinkState::Down`] (with the time of its next connect
//! attempt), [`LinkState::Connecting`] (with a deadline) or [`LinkState::Up`]. A new engine's
//! links are all down and due at once. While a link is not up, operations count the node as
//! failed at once, with the reason of its last failure when there is one
//! ([`Vote::Error`]`("connect failed: Connection refused")`, `"AUTH failed: WRONGPASS ..."`)
//! and [`Vote::Down`] otherwise.
//!
//! A connect that fails, a connect attempt past [`Config::connect_timeout`], a lost
//! connection and a link the engine fails itself ([`Event::LinkFailed`]) all schedule the
//! next attempt after a backoff: [`Config::reconnect_min`] at first, doubling with every
//! failure up to [`Config::reconnect_max`]. A connection that stayed up for at least
//! `reconnect_max` starts the backoff over; one that fails right away (a wrong password)
//! keeps doubling it, so that a misconfigured node is not hammered.
//!
//! ## Safety
//!
//! A lock is valid until `start + ttl − drift` on the caller's monotonic clock, with
//! `drift = ttl × drift_factor + 2 ms`; the engine never reports a later deadline. Mutual
//! exclusion holds when the holder finishes within that deadline and no node's clock jumps
//! by more than the drift margin. A node that restarts without its keys (no persistence, or
//! `appendfsync everysec` after a power loss) can grant a lock twice: run nodes with
//! `appendfsync always`, or keep a crashed node down for longer than the largest TTL.
//!
//! Fencing tokens ([`LockOptions::fencing`]) strictly increase across successful
//! acquisitions of a resource. Each node keeps a counter per resource (plain keys without
//! TTL, prefix [`Config::fence_prefix`]; they must survive restarts). The acquire script
//! reads the counters, and each granting node proposes one more than its largest; once a
//! quorum has granted, a *fence round* sends the largest proposal to every node, which
//! raises its counters to it and reports the largest counter it had before. The token holds
//! when a quorum of nodes had every counter below it; otherwise (an earlier holder's token
//! got there first) the engine proposes above what it saw and runs the round again, within
//! the lock's validity. Quorum intersection makes each token larger than every earlier
//! holder's. This costs one extra round trip, only when fencing is asked for.
//!
//! Why not raise the counters in the acquire script itself, and write back the maximum
//! afterwards? Because a node's grant can come *before* an earlier holder's write-back
//! reaches it and the rest of the quorum *after* that holder's release: the later holder then
//! reads stale counters and can get a smaller token (the crate's simulation tests replay
//! exactly that).
//!
//! ## Names
//!
//! For a resource `R`, whose lock key `K` is `R` itself, or `{key_prefix}R` with
//! [`Config::key_prefix`] (programs sharing one Redis):
//!
//! | what | name | kind |
//! |---|---|---|
//! | the lock | `K` | string: the holder's token, then `:` once a waiter was refused by it |
//! | its fencing counter | `{fence_prefix}K` (default `redlease:fence:K`) | integer, no TTL |
//! | its waiter queue | `redlease:queue:K` | list of `token:reservation_ms`, with a TTL |
//! | its wake channel | `redlease:wake:K` | pub/sub channel (sharded on a Redis Cluster node, where `K` is in its cluster form) |
//! | its readers ([`LockOptions::shared`]) | `redlease:readers:K` | sorted set of reader tokens scored by their expiry (ms, the node's clock), with a TTL; `K` holds [`READERS_VALUE`] meanwhile; a sole reader holds `K` as `:readers:TOKEN` with no set ([`sole_reader`]) |
//! | its holds ([`LockOptions::reentrant`]) | `redlease:holds:K` ([`HOLDS_PREFIX`]) | hash: a field per hold's token, and `:fence`, the owner's fencing token, with `K`'s TTL; `K` holds the owner meanwhile |
//! | the node's lock format | [`FORMAT_KEY`] (`redlease:format`) | string, no TTL |
//!
//! A semaphore `S` of limit L ([`LockOptions::semaphore`]) has the keys `P` + `:0` .. `:{L-1}`
//! (its permits, each a lock key as above, with its own fencing counter), `P:limit` (the limit,
//! no TTL) and one waiter queue `redlease:queue:P` (a sorted set of `token:reservation_ms`, or
//! `token:reservation_ms:permits` for a waiter of several, scored by the waiter's ticket: µs
//! since the epoch on the client's clock at its first refusal, with a TTL), where `P` is
//! `{key_prefix}redlease:sem:{S}` ([`SEMAPHORE_PREFIX`]): every key of one semaphore carries
//! the hash tag `{S}`.
//!
//! An election `E` ([`ElectionOptions`]) is a lock of the key `{key_prefix}redlease:elect:{E}`
//! ([`election_key`]), with its fencing counter, queue and wake channel as above: its
//! candidates' tokens carry their values ([`candidate_value`]), and its hash tag `{E}` keeps its
//! keys in one slot.
//!
//! Every key a script touches is passed in `KEYS`, so ACL key patterns see them all. A lock key
//! may not start with the fence prefix, `redlease:queue:`, `redlease:readers:`,
//! `redlease:holds:` or `redlease:sem:`, nor be `redlease:format`, and the fence prefix and the key prefix may not
//! overlap those names ([`Misuse::ReservedResource`],
//! [`ConfigError::FencePrefixReserved`], [`ConfigError::KeyPrefixReserved`]).
//!
//! What the scripts store is lock format [`LOCK_FORMAT`]. Every connection's handshake records
//! it on a node that has none and refuses a node that has another, as misconfigured: clients
//! of two formats never share a node unnoticed.
//!
//! [Redlock]: https://redis.io/docs/latest/develop/use/patterns/distributed-locks/

pub mod cluster;
mod config;
mod election;
mod engine;
mod error;
mod event;
mod footprint;
mod health;
mod link;
mod lock;
mod locks;
mod node;
mod options;
pub mod quorum;
pub mod resp;
mod rng;
mod scripts;
mod stats;
mod timer;
mod tls;
mod wake;
mod wire;

pub use config::{Config, Retry};
pub use election::{
    ELECTION_PREFIX, ElectionOptions, Leader, LeaderChange, MAX_NAME_LEN, MAX_VALUE_LEN, NodeElection, Observer,
    candidate_value, election_key, leader_of,
};
pub use engine::Engine;
pub use error::{
    AcquireError, ConfigError, ExtendError, Fault, LinkError, LostReason, Misuse, ReleaseOutcome, ReleaseReport, Vote,
    Votes,
};

pub use event::{Event, LinkState, LockId, LockInfo, LockState, NodeId, ReadId, WakeState};
pub use footprint::Footprint;
pub use health::{
    ClusterHealth, Health, LockHealth, LockShape, MasterHealth, NodeHealth, NodeState, SentinelHealth, SentinelView,
};
pub use node::{
    MAX_SENTINELS, MinReplicas, NodeConfig, REPLICAS_CHECK, SENTINEL_PORT, SentinelConfig, Transport, split_node_list,
};
pub use options::{LockOptions, MAX_PERMITS};
pub use stats::NodeStats;
pub use tls::{Pem, TlsSettings};

/// The lock format this engine's scripts read and write (the lock value, its waited-for mark
/// and the waiter queues' entries). Each connection's handshake records it on a node that has
/// none (`redlease:format`) and refuses a node that has another, as misconfigured.
pub const LOCK_FORMAT: &str = scripts::FORMAT;

/// The key that records a node's lock format ([`LOCK_FORMAT`]); it has no TTL, like the
/// fencing counters. Every name redlease uses is in the crate docs' [names](crate#names).
pub const FORMAT_KEY: &str = scripts::FORMAT_KEY;

/// The value a lock key holds while readers share it ([`LockOptions::shared`]); followed by
/// `:` once a writer waits. For tools that inspect the nodes: the readers themselves are the
/// members of the sorted set [`READERS_PREFIX`] + key, scored by their expiry (ms since the
/// epoch, on the node's clock). A reader alone may hold the key as this value, `:` and its
/// token instead, with no set, until a second reader joins (see [`sole_reader`]).
pub const READERS_VALUE: &str = scripts::READERS;

/// The prefix of a semaphore's keys (after the key prefix): `redlease:sem:{NAME}:k` for its
/// permits, `redlease:sem:{NAME}:limit` for its recorded limit.
pub const SEMAPHORE_PREFIX: &str = scripts::SEM_PREFIX;

/// The prefix of the sorted set of a lock key's readers.
pub const READERS_PREFIX: &str = scripts::READERS_PREFIX;

/// SHA-1 digests of the five scripts, in the order the handshake loads them (acquire, extend,
/// release, fence write-back, and the release of one key that leaves no queue, which every
/// lock of one resource uses). Useful to answer `SCRIPT LOAD` in tests.
#[doc(hidden)] // For test doubles of a node; not a supported interface.
pub fn script_digests() -> [&'static str; 5] {
    [scripts::ACQUIRE_SHA, scripts::EXTEND_SHA, scripts::RELEASE_SHA, scripts::FENCE_SHA, scripts::RELEASE_ONE_SHA]
}

/// The semaphore acquire script: its Lua source and SHA-1 digest. The handshake does not load
/// it: a connection's first semaphore attempt carries its source (`EVAL`). Useful to recognise
/// and answer it in tests.
#[doc(hidden)] // For test doubles of a node; not a supported interface.
pub fn semaphore_script() -> (&'static str, &'static str) {
    (scripts::SEM_ACQUIRE, scripts::SEM_ACQUIRE_SHA)
}

/// The semaphore release script (its permits handed to the waiters queued for them): its Lua
/// source and SHA-1 digest, loaded as the acquire script is.
#[doc(hidden)] // For test doubles of a node; not a supported interface.
pub fn semaphore_release_script() -> (&'static str, &'static str) {
    (scripts::SEM_RELEASE, scripts::SEM_RELEASE_SHA)
}

/// The read-lock scripts: the Lua source and SHA-1 digest of the read acquire, the read
/// extension, the read release and the write lock's downgrade, in that order. The handshake
/// does not load them: a connection's first call of each carries its source (`EVAL`), later
/// ones its digest. Useful to recognise and answer them in tests.
#[doc(hidden)] // For test doubles of a node; not a supported interface.
pub fn read_lock_scripts() -> [(&'static str, &'static str); 4] {
    [
        (scripts::READ_ACQUIRE, scripts::READ_ACQUIRE_SHA),
        (scripts::READ_EXTEND, scripts::READ_EXTEND_SHA),
        (scripts::READ_RELEASE, scripts::READ_RELEASE_SHA),
        (scripts::DOWNGRADE, scripts::DOWNGRADE_SHA),
    ]
}

/// The re-entrant lock's script ([`LockOptions::reentrant`]): its Lua source and SHA-1
/// digest. The handshake does not load it: a connection's first call carries its source.
/// Useful to recognise and answer it in tests.
#[doc(hidden)] // For test doubles of a node; not a supported interface.
pub fn reentry_script() -> (&'static str, &'static str) {
    (scripts::REENTRY, scripts::REENTRY_SHA)
}

/// The prefix of the hash of a re-entrant lock key's holds ([`LockOptions::reentrant`]): one
/// field per hold's token, and `:fence`, the owner's fencing token, once recorded. It has the
/// lock key's TTL.
pub const HOLDS_PREFIX: &str = scripts::HOLDS_PREFIX;

/// Encode random bytes as a lock token: lowercase hex, two characters per byte.
///
/// The core takes no randomness; adapters draw the bytes (20 from the OS random source) and
/// format them here, so every adapter's tokens look alike.
pub fn token_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = vec![0; bytes.len() * 2];
    for (pair, b) in hex.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[(b >> 4) as usize];
        pair[1] = DIGITS[(b & 15) as usize];
    }
    // Only ASCII digits and letters went in.
    String::from_utf8(hex).unwrap_or_default()
}

/// Read a lock key's value as the scripts write it: the holder's token, and whether a refused
/// waiter marked it as waited for (the token followed by `:`; tokens never contain `:`).
///
/// For tools that inspect the nodes (`redlease status`, tests); the engine itself never reads
/// a value back.
pub fn holder_of(value: &str) -> (&str, bool) {
    match value.strip_suffix(char::from(scripts::WAITED)) {
        Some(token) => (token, true),
        None => (value, false),
    }
}

/// The token of the reader that holds a lock key alone, if the key's holder (its value
/// without the waited-for mark, see [`holder_of`]) is one: `:readers:TOKEN`. Such a key has
/// no readers' set; the reader's time left is the key's. For tools that inspect the nodes.
pub fn sole_reader(holder: &str) -> Option<&str> {
    holder.strip_prefix(scripts::SOLE_READER).filter(|t| !t.is_empty() && !t.contains(char::from(scripts::WAITED)))
}

/// The Lua sources of the five scripts, in the order of [`script_digests`].
#[doc(hidden)] // For test doubles of a node; not a supported interface.
pub fn script_sources() -> [&'static str; 5] {
    [scripts::ACQUIRE, scripts::EXTEND, scripts::RELEASE, scripts::FENCE, scripts::RELEASE_ONE]
}

#[cfg(test)]
mod token_tests {
    #[test]
    fn token_hex_is_lowercase_two_chars_per_byte() {
        assert_eq!(super::token_hex(&[0x00, 0xff, 0x1a, 0x09]), "00ff1a09");
        assert_eq!(super::token_hex(&[]), "");
    }

    #[test]
    fn holder_of_strips_the_waiters_mark() {
        assert_eq!(super::holder_of("00ff"), ("00ff", false));
        assert_eq!(super::holder_of("00ff:"), ("00ff", true));
        assert_eq!(super::sole_reader(super::holder_of(":readers:00ff:").0), Some("00ff"));
        assert_eq!(super::sole_reader(":readers"), None);
        assert_eq!(super::sole_reader("00ff"), None);
    }
}

/// The README's example, run as a doc test so that it keeps compiling.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
