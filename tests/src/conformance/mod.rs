//! The conformance suite: every case written once, run against every adapter.
//!
//! An adapter's test file implements [`Subject`] in a thin wrapper and expands
//! [`conformance_tests!`](crate::conformance_tests), which generates one `#[test]` per case:
//!
//! ```ignore
//! struct TokioSubject;
//! impl redlease_tests::conformance::Subject for TokioSubject { /* ... */ }
//! redlease_tests::conformance_tests!(TokioSubject);
//! ```
//!
//! Each case starts its own real `redis-server` nodes (and proxies where it needs faults),
//! asserts behaviour, not micro-timings (only generous liveness bounds of seconds), and ends
//! with [`Servers::assert_no_leaks`](crate::Servers::assert_no_leaks): no lock key may be left
//! without a TTL.
//!
//! | case | what it proves |
//! |---|---|
//! | [`basics`] | guard token/validity/keys on the nodes, extend moves the deadline and the TTL, release deletes everywhere |
//! | [`mutual_exclusion`] | 16 tasks × 30 read-modify-write cycles: no lost update, no overlapping holders |
//! | [`contention`] | a held lock refuses `try_lock` (typed `Held` with per-node votes), `.wait(d)` gives `WaitTimeout`, a waiter gets the lock once it is released |
//! | [`minority_down`] | 2 of 5 nodes blackholed, then 2 of 5 killed (also at connect time): locks still work |
//! | [`majority_down`] | 3 of 5 blackholed / reset / killed: typed `Unreachable` within seconds (node timeout × attempts, not TCP timeouts); progress resumes after healing |
//! | [`paused_node`] | a SIGSTOPped node (also one paused before connecting) does not hold up lock or release |
//! | [`kill_restart`] | nodes killed with SIGKILL and restarted on the same port: the client reconnects by itself |
//! | [`crash_recovery`] | with `appendfsync always` a restarted majority still knows the lock; without persistence it does not (the documented unsafe case) |
//! | [`release_after_expiry`] | a release after the TTL reports `NotHeld` and leaves the next holder's key alone |
//! | [`extend_after_loss`] | an extend of a lost lock reports `Lost` (or `Expired`), fires the lost signal and touches nothing |
//! | [`auto_extension`] | a 1 s lock survives 5 s of work under `with_lock`, and under `set_auto_extend` |
//! | [`lost_signal`] | the lost signal fires when a majority of nodes is taken away during `with_lock` |
//! | [`fencing_monotonic`] | 1,000 fenced acquisitions from 8 tasks, with a rotating partition: tokens strictly increase |
//! | [`script_flush`] | `SCRIPT FLUSH` on every node mid-run: lock, extend and release keep working (NOSCRIPT fallback) |
//! | [`acl_auth`] | ACL user + password from the URL works; a wrong or missing password gives a clear error naming the node |
//! | [`config_errors`] | malformed URL, empty node list, zero TTL, empty resource: typed errors with clear messages |
//! | [`drop_releases`] | dropping a guard (also inside a finished task) releases the lock |
//! | [`ready_at_quorum`] | with 2 of 5 nodes' connects hanging, `connect` is ready at the quorum (not after the connect timeout), locking works, closing does not wait for them |
//! | [`honest_reports`] | releases count unanswered nodes as pending, failures name nodes by address, wrong passwords on a majority fail `connect` as misconfigured, no reachable quorum fails `connect`, refused extensions count the refusals |
//! | [`failed_links_are_reset`] | a connection the engine fails (garbage from the "server") is closed with a reset |
//! | [`health_view`] | of five nodes one refuses the password and one is killed: the health view names both with their kind, 3 usable, no fault tolerance left, RTTs for the rest, no password anywhere; after the fix every node is ready and 2 may fail |
//! | [`wake_on_release`] | a release nobody waits for publishes nothing; a waiter's refused attempt marks the holder's key on a quorum of nodes at least (`token:`, expiry untouched); with a 5 s retry delay a waiter gets a released lock within 2 s (the release message woke it), also one waiting on two resources; keys freed without a message still go to it through the fallback retry; subscriptions end with the last waiter |
//! | [`waiters_in_order`] | two waiters with a 5 s retry delay are served in the order they queued, each within 2 s of the release before (the release names the next waiter and reserves the key for it: the releaser's own next call is refused); no queue is left |
//! | [`semaphore_limit`] | 8 tasks × 6 cycles on a semaphore of 3: never more than 3 holders, never two on one permit, 3 at once reached |
//! | [`semaphore_permits`] | permits are keys with the token and a TTL on a quorum; the limit is recorded and another refused as misconfigured at once; 2 permits all or nothing; extend; a permit taken away is lost |
//! | [`semaphore_fencing`] | 40 fenced acquisitions of a semaphore of 2: per permit the tokens strictly increase |
//! | [`semaphore_faults`] | 8 workers on a semaphore of 3 over 5 nodes, one node paused and another killed: never more than 3 holders, progress throughout, nothing left without a TTL |
//! | [`semaphore_wake`] | with a 5 s retry delay a waiter gets the freed permit within 2 s of the release; no queue left |
//! | [`semaphore_freed_permits`] | a holder of both permits of a semaphore of 2 releases them while two waiters of one permit queue (5 s retry delay): each gets a permit within 2 s |
//! | [`semaphore_reentry`] | a waiter whose own token is already on the permit's key on one node (a lost cleanup's leftover) re-enters it there when the others hand it the permit: held on every node with the lock's TTL |
//! | [`rw_lock`] | readers share and refuse a writer; a waiting writer marks the key, stops new readers and is woken by the last reader; a writer refuses readers; downgrade lets a reader in and still refuses writers; a reader's fencing token is the last writer's |
//! | [`rw_sole_reader`] | a reader that may retry takes a free key alone (`:readers:TOKEN`, no set) and extends it; a second reader turns it into `:readers` and the set of both, the first scored by the key's expiry; a writer behind a sole reader marks it, stops new readers and is handed the key |
//! | [`rw_fair_order`] | with a 5 s retry delay, a reader queued behind a writer goes before a writer that queued after it, each within 2 s of the release before it |
//! | [`rw_crashed_reader`] | a crashed reader's 1 s entry holds a writer off for its own TTL only, while another reader renews for 2.5 s |
//! | [`rw_exclusion`] | 8 tasks reading and writing one resource: never a writer with anyone, readers overlap |
//! | [`reentry`] | holds of one owner from two clients: granted at once while the owner holds the lock, counted on every node (key = owner, its holds beside it, both with a TTL), the first hold's fencing token; other owners and plain locks refused until the last release, a waiter then woken; an extension lengthens the key for all, none shortens it; a lock taken from the owner is lost to every hold; a semaphore refuses re-entry |
//! | [`cluster_locks`] | a Redlock of three Redis Clusters (3 masters + 3 replicas each): every node seen as a cluster covering every hash slot, 24 locks spread over every master, a counter under a fenced lock with increasing tokens, a waiter woken by the release, a semaphore and a read lock |
//! | [`cluster_resharding`] | one cluster as the node, 8 tasks on 4 resources while their slots migrate between masters in two phases: no lost update, no overlap, redirects followed, nothing left without a TTL |
//! | [`sentinel_locks`] | a Redlock of three Sentinel-managed nodes (a primary and a replica each, three sentinels, `min_replicas=1`): each node seen through its sentinels, a fenced counter exact with increasing tokens while one node fails over, a lock held across another node's failover refuses a second client and its extension and release reach the new primary |
//! | [`election_campaign`] | a campaign leads with an epoch and its value on the nodes, which `leader` reads; a candidate in line gets the leadership within 2 s of the resign (5 s retry delay), with a larger epoch; a leadership taken away is signalled lost and nobody leads; a bounded campaign times out; bad names and values are refused naming the field |
//! | [`election_observe`] | observers report a, b, then the vacancy, with strictly increasing epochs; one polling every 30 s sees the handover within 2 s (the release message woke it); the watch ends with the observers |
//! | [`election_cluster`] | an election over three Redis Clusters: `leader` reads the master of `{jobs}`, a resign hands over within 2 s (sharded release message) with a larger epoch, a 30 s poller sees it as soon |
//! | [`close_releases`] | `close()` releases a held and a just-dropped guard before it returns, fires the lost signal, and closes every clone |

mod cases;
mod cluster;
mod election;
mod recorder;
mod reentry;
mod rwlock;
mod semaphore;
mod sentinel;
mod subject;

pub use cases::*;
pub use cluster::*;
pub use election::*;
pub use recorder::{Hold, HolderLog};
pub use reentry::*;
pub use rwlock::*;
pub use semaphore::*;
pub use sentinel::*;
pub use subject::{BoxFuture, Failure, FailureKind, LockSpec, Options, Subject, Work, failure};

/// Generate one `#[test]` per conformance case for a [`Subject`] type.
///
/// ```ignore
/// redlease_tests::conformance_tests!(TokioSubject);
/// ```
#[macro_export]
macro_rules! conformance_tests {
    // Plain TCP, the default.
    ($subject:ty) => {
        $crate::conformance_tests!($subject, listen = $crate::Listen::Tcp);
    };
    // The cases on Redis Cluster nodes (local clusters listen over TCP only), once per adapter.
    ($subject:ty, clusters) => {
        $crate::conformance_tests!(@cases $subject, $crate::Listen::Tcp; cluster_locks, cluster_resharding);
    };
    // The election cases (over TCP), once per adapter.
    ($subject:ty, elections) => {
        $crate::conformance_tests!(@cases $subject, $crate::Listen::Tcp; election_campaign, election_observe, election_cluster);
    };
    // The case on Sentinel-managed nodes (local sentinels over TCP), once per adapter.
    ($subject:ty, sentinels) => {
        $crate::conformance_tests!(@cases $subject, $crate::Listen::Tcp; sentinel_locks);
    };
    // Every case over the given transport: all the servers a case starts listen that way
    // (`Listen::Tls`: `rediss://` with a generated CA; `Listen::Unix`: `redis+unix://`).
    ($subject:ty, listen = $listen:expr) => {
        $crate::conformance_tests!(@cases $subject, $listen;
            basics,
            mutual_exclusion,
            contention,
            minority_down,
            majority_down,
            paused_node,
            kill_restart,
            crash_recovery,
            release_after_expiry,
            extend_after_loss,
            auto_extension,
            lost_signal,
            fencing_monotonic,
            script_flush,
            acl_auth,
            config_errors,
            drop_releases,
            close_releases,
            ready_at_quorum,
            honest_reports,
            failed_links_are_reset,
            health_view,
            wake_on_release,
            waiters_in_order,
            semaphore_limit,
            semaphore_permits,
            semaphore_fencing,
            semaphore_wake,
            semaphore_freed_permits,
            semaphore_reentry,
            semaphore_faults,
            rw_lock,
            rw_sole_reader,
            rw_fair_order,
            rw_crashed_reader,
            rw_exclusion,
            reentry,
        );
    };
    (@cases $subject:ty, $listen:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::with_listen($listen, || $crate::conformance::$case::<$subject>());
            }
        )*
    };
}
