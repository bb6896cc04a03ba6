//! Deterministic simulation of reader-writer locks: the simulation's world, faults and model
//! nodes (`sim`), with every lock a read lock or a write lock of one resource (some waiting
//! for wake-ups, some fenced, some auto-extending, some write locks downgraded while held),
//! checked for: never a writer together with another holder of the same resource (a
//! downgraded lock is a writer until it asks to downgrade — the nodes let readers in as they
//! apply it, possibly before the quorum's confirmation reaches the client — and a reader from
//! the confirmation on), each hold
//! backed by a quorum while it is held (a reader by its membership of the key's readers while
//! the key holds `:readers`, or the key itself while it holds `:readers:TOKEN`, a sole
//! reader's value), a reader's fencing token never below the token of a writer whose hold
//! ended before, no key left without a TTL, and a vanished holder's lock coming back. Scripted
//! runs show a second reader joining a sole reader, and a writer handed the key by one.
//!
//! To look at one run step by step:
//!
//! ```text
//! SIM_RWLOCKS=1 SIM_SEED=1234 SIM_PROFILE=safe cargo test -p redlease-core --test simulation trace_one_seed -- --ignored --nocapture
//! ```

mod sim;

use std::ops::Range;
use std::time::Duration;

use redlease_core::LockOptions;
use sim::RWLOCKS;
use sim::checker::{self, Hold, Violation};
use sim::node::{MS, Time};
use sim::scenario::{Profile, Scenario};
use sim::script::{Role, Script};
use sim::world::{Outcome, run};

/// Assert that no seed broke a rule, and that the runs really exercised read and write locks.
fn assert_safe(profile: Profile, seeds: Range<u64>) {
    let n = seeds.end - seeds.start;
    let stats = RWLOCKS.band(profile, seeds).stats;
    // Not vacuous: readers and writers were granted, readers shared, locks were contended,
    // fenced, extended, handed over on release, downgraded; vanished holders' locks came back.
    assert!(stats.reads > 2 * n && stats.writes > 2 * n, "{stats:?}");
    assert!(stats.reader_overlaps > n, "readers rarely shared: {stats:?}");
    assert!(stats.held_by_others > 0 && stats.released > 0 && stats.extended > 0, "{stats:?}");
    assert!(stats.published > 0, "{stats:?}");
    if profile != Profile::DelayedRestart {
        assert!(stats.fenced > 0, "{stats:?}");
    }
    if n >= 100 {
        assert!(stats.downgrades > 0, "{stats:?}");
    }
}

#[test]
fn safe_rwlocks_seeds_0_to_400() {
    assert_safe(Profile::Safe, 0..400);
}

#[test]
fn safe_rwlocks_seeds_400_to_800() {
    assert_safe(Profile::Safe, 400..800);
}

#[test]
fn safe_rwlocks_seeds_800_to_1200() {
    assert_safe(Profile::Safe, 800..1200);
}

#[test]
fn safe_rwlocks_seeds_1200_to_1600() {
    assert_safe(Profile::Safe, 1200..1600);
}

#[test]
#[ignore = "long: 100,000 seeds; run with --ignored --release"]
fn safe_rwlocks_100k_seeds() {
    assert_safe(Profile::Safe, 1_000_000..1_100_000);
}

#[test]
fn restarts_with_the_data_or_after_the_ttl_are_safe_for_rwlocks() {
    assert_safe(Profile::RestartKeepData, 0..100);
    assert_safe(Profile::DelayedRestart, 0..100);
}

/// The unsafe setups are caught with read and write locks too.
#[test]
fn unsafe_setups_are_caught_with_rwlocks() {
    for profile in [Profile::RestartEmpty, Profile::ClockJump] {
        let bad = RWLOCKS.run_seeds(profile, 0..100).bad;
        assert!(!bad.is_empty(), "{profile:?} was never flagged in 100 seeds");
        let (seed, v) = (&bad[0].0, &bad[0].1[0]);
        println!("{profile:?}: {} flagged seeds, e.g. seed {seed}: {v}", bad.len());
    }
}

#[test]
fn rwlock_runs_are_reproducible() {
    let (mut readers, mut writers) = (0, 0);
    for seed in [5, 99] {
        let a = sim::run_twice(&Scenario::rwlocks(seed, Profile::Safe));
        assert!(a.holds.len() > 2, "seed {seed}: {} holds", a.holds.len());
        readers += a.holds.iter().filter(|h| h.shared).count();
        writers += a.holds.iter().filter(|h| !h.shared).count();
    }
    assert!(readers > 0 && writers > 0, "{readers} read holds, {writers} write holds");
}

// ----- the checker's reader-writer rules can fail -------------------------------------------

fn hold(client: usize, token: &str, shared: bool, start: u64, end: u64, fence: Option<u64>) -> Hold {
    Hold {
        client,
        token: token.into(),
        resources: vec![b"r".to_vec()],
        start: start * MS,
        end: end * MS,
        fence,
        semaphore: None,
        shared,
    }
}

#[test]
fn checker_lets_readers_share_but_no_writer_with_anyone() {
    // Two readers at once, a writer after them: fine.
    let holds = [hold(0, "a", true, 1, 4, None), hold(1, "b", true, 2, 5, None), hold(2, "c", false, 5, 7, None)];
    assert!(checker::check(&holds, &[], &[], 0).is_empty());
    // A writer that overlaps a reader, either way round.
    for (w, r) in [((1, 3), (2, 5)), ((3, 6), (1, 4))] {
        let holds = [hold(0, "w", false, w.0, w.1, None), hold(1, "r", true, r.0, r.1, None)];
        let v = checker::check(&holds, &[], &[], 0);
        assert!(matches!(v.as_slice(), [Violation::Overlap { .. }]), "{v:?}");
    }
}

#[test]
fn checker_holds_readers_to_the_writer_epoch() {
    // Readers share an epoch (equal tokens are fine among readers), at least the last
    // writer's token; a reader below the token of a writer that ended before it is caught.
    let holds = [
        hold(0, "w", false, 1, 3, Some(5)),
        hold(1, "a", true, 3, 6, Some(5)),
        hold(2, "b", true, 4, 6, Some(5)),
        hold(3, "w2", false, 6, 8, Some(6)),
    ];
    assert!(checker::check(&holds, &[], &[], 0).is_empty());
    let holds = [hold(0, "w", false, 1, 3, Some(5)), hold(1, "a", true, 4, 6, Some(4))];
    let v = checker::check(&holds, &[], &[], 0);
    assert!(matches!(v.as_slice(), [Violation::Epoch { .. }]), "{v:?}");
}

// ----- a sole reader (scripted runs) ------------------------------------------------------

/// One read (`shared`) or write lock of `r0` that waits, asked once at `start` ms and held for
/// `hold` ms.
fn once(start: Time, shared: bool, hold: Time) -> Role {
    let options = LockOptions::new("r0", Duration::from_secs(10)).shared(shared).wait(Duration::from_secs(5));
    let mut role = Role::new(start * MS, options, Some(hold * MS));
    role.again = false;
    role
}

/// Run `roles` over three model nodes (0.2 ms one way) until 1 s; no rule broken, nobody gave up.
fn scripted(roles: Vec<Role>) -> Outcome {
    let out = run(&Scenario::scripted(7, 3, (MS / 5, MS / 5), Script { roles, stop_at: 1_000 * MS }), true);
    let mut problems: Vec<String> = out.violations.iter().map(ToString::to_string).collect();
    problems.extend(out.failures().map(|(c, e)| format!("client {c} gave up: {e}")));
    assert!(problems.is_empty(), "{problems:?}");
    out
}

#[test]
fn a_second_reader_joins_a_sole_reader() {
    // The first reader takes the free key alone by `SET NX`; the second joins 10 ms later: the
    // nodes turn the key into `:readers` and the set of both, the first kept (the checker
    // wants each read hold backed by a quorum throughout: by the key while it is the sole
    // reader's, then by its membership).
    let out = scripted(vec![once(10, true, 40), once(20, true, 40)]);
    let sent = |c: usize, what: &str| out.trace.iter().any(|l| l.contains(&format!("c{c} -> n")) && l.contains(what));
    // (Tokens are `s{seed}-c{client}-{n}`; only the `SET` carries `:readers:` before one.)
    assert!(sent(0, ":readers:s7-c0"), "the first reader's plain SET NX");
    assert!(sent(1, ":readers:s7-c1") && sent(1, "local ttl = ARGV[2]"), "the second's SET NX, then the script");
    let (a, b) = (out.grants(0).next().expect("the first reader").0, out.grants(1).next().expect("the second").0);
    assert!(a.shared && b.shared && b.start < a.end, "the readers did not share: {a}; {b}");
    assert_eq!(out.shared_grants(), 1);
}

#[test]
fn a_writer_waiting_for_a_sole_reader_is_handed_the_key_when_it_leaves() {
    // The reader holds 40 ms; the writer asks 10 ms in, is refused and marks the key; the
    // reader's release hands it the key (its retry delay would be far longer).
    let out = scripted(vec![once(10, true, 40), once(20, false, 10)]);
    let (reader, (writer, waited)) =
        (out.grants(0).next().expect("the reader").0, out.grants(1).next().expect("the writer"));
    assert!(!writer.shared && writer.start >= reader.end, "{reader}; {writer}");
    assert!(writer.start - reader.end < 5 * MS, "the writer was not handed the key: {reader}; {writer}");
    assert!(waited < 40 * MS, "the writer waited {} ms", waited / MS);
    // And a reader that comes after the writer queued waits for it (writer preference).
    let out = scripted(vec![once(10, true, 40), once(20, false, 10), once(30, true, 10)]);
    let (writer, late) = (out.grants(1).next().expect("the writer").0, out.grants(2).next().expect("the reader").0);
    assert!(late.start >= writer.end, "a reader overtook the waiting writer: {writer}; {late}");
}
