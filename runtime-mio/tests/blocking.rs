//! The blocking client against real `redis-server` processes.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlease_mio::core::{Misuse, Vote};
use redlease_mio::{
    AcquireError, Client, Config, Error, ExtendError, LockOptions, LostReason, NodeState, ReleaseOutcome,
};
use support::{Redis, all_ready, eventually, servers, urls};

const TTL: Duration = Duration::from_secs(10);

#[test]
fn lock_extend_release_roundtrip() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    assert_eq!(client.node_count(), 3);
    let before = Instant::now();
    let mut guard = client.lock("rt", TTL).unwrap();
    assert_eq!(guard.resource(), "rt");
    assert_eq!(guard.token().len(), 40);
    assert!(guard.valid_until() > before && guard.valid_until() < before + TTL);
    assert_eq!(guard.fence(), None);
    // Decided at a quorum: the third node's SET may still be queued (its connection may have
    // come up after the quorum's) and goes out when somebody next drives the loop.
    let everywhere = || {
        client.run_for(Duration::from_millis(10)).unwrap();
        nodes.iter().all(|n| n.cmd(&["GET", "rt"]) == guard.token())
    };
    assert!(eventually(Duration::from_secs(2), everywhere), "every node holds the token");
    let first = guard.valid_until();
    let until = guard.extend(Duration::from_secs(20)).unwrap();
    assert!(until > first, "an extension to 20s moves the deadline past the 10s one");
    assert_eq!(guard.valid_until(), until);
    // Extended at a quorum, too: node 0's PEXPIRE may come with the loop's next round.
    let extended = || {
        client.run_for(Duration::from_millis(10)).unwrap();
        nodes[0].cmd(&["PTTL", "rt"]).trim_start_matches(':').parse::<u64>().unwrap() > 10_000
    };
    assert!(eventually(Duration::from_secs(5), extended), "PTTL {}", nodes[0].cmd(&["PTTL", "rt"]));
    let report = guard.release().unwrap();
    assert_eq!(report.outcome, ReleaseOutcome::Released);
    // Decided at the quorum; the third node's release goes out with the loop's next round.
    assert!(report.deleted >= 2, "{report:?}");
    for n in &nodes {
        assert!(eventually(Duration::from_secs(5), || {
            client.run_for(Duration::from_millis(10)).unwrap();
            n.cmd(&["EXISTS", "rt"]) == ":0"
        }));
    }
}

#[test]
fn contention_is_reported_as_held_and_wait_times_out() {
    let nodes = servers(3);
    let a = Client::connect(urls(&nodes)).unwrap();
    let b = Client::connect(urls(&nodes)).unwrap();
    // Node 1 is read below: a's lock and b's attempts must reach it.
    all_ready(&a);
    all_ready(&b);
    let held = a.lock("busy", TTL).unwrap();
    match b.try_lock("busy", TTL) {
        Err(Error::Acquire(AcquireError::Held { votes, attempts })) => {
            assert_eq!(attempts, 1);
            // Decided as soon as a quorum became impossible: at least two refusals.
            assert!(votes.iter().filter(|v| **v == Vote::Refused).count() >= 2, "{votes:?}");
        }
        other => panic!("expected Held, got {other:?}"),
    }
    let e = b.try_lock("busy", TTL).unwrap_err();
    assert!(e.is_held() && !e.is_wait_timeout() && !e.is_unreachable() && !e.is_misconfigured(), "{e}");
    match b.lock_with(LockOptions::new("busy", TTL).wait(Duration::from_millis(300))) {
        Err(e @ Error::Acquire(AcquireError::WaitTimeout { .. })) => {
            let Error::Acquire(AcquireError::WaitTimeout { last, .. }) = &e else { unreachable!() };
            assert!(matches!(**last, AcquireError::Held { .. }), "{e}");
            assert!(e.is_held() && e.is_wait_timeout(), "the helpers look through the wait: {e}");
        }
        other => panic!("expected WaitTimeout, got {other:?}"),
    }
    // The failed attempts (cleanup only deletes our token) left the holder's key its token,
    // marked as waited for (`token:`) by the waiting attempts.
    // (Decided at a quorum: node 1's answer, and a's SET there, may come a moment later.)
    let marked = format!("{}:", held.token());
    let on_node_1 = || {
        b.run_for(Duration::from_millis(10)).unwrap();
        nodes[1].cmd(&["GET", "busy"]) == marked
    };
    assert!(eventually(Duration::from_secs(5), on_node_1), "node 1: {}", nodes[1].cmd(&["GET", "busy"]));
    assert_eq!(held.release().unwrap().outcome, ReleaseOutcome::Released);
    b.try_lock("busy", TTL).unwrap().release().unwrap();
}

#[test]
fn a_wait_bound_outlasts_the_holder() {
    let nodes = servers(3);
    let a = Client::connect(urls(&nodes)).unwrap();
    let b = Client::connect(urls(&nodes)).unwrap();
    let held = a.lock("handover", Duration::from_millis(400)).unwrap();
    // b waits; a's lock expires after 400ms (nobody extends it).
    let got = b.lock_with(LockOptions::new("handover", TTL).wait(Duration::from_secs(10))).unwrap();
    assert_ne!(got.token(), held.token());
    // a's release finds the lock taken over and deletes nothing of b's. (b was granted at a
    // quorum: a node where a's key outlived the others' by a moment still had it then, and a's
    // release deletes it there, so that node may hold nothing.)
    let report = held.release().unwrap();
    assert_eq!(report.outcome, ReleaseOutcome::NotHeld);
    let values: Vec<String> = nodes.iter().map(|n| n.cmd(&["GET", "handover"])).collect();
    assert!(values.iter().filter(|v| **v == got.token()).count() >= 2, "b holds a quorum: {values:?}");
    assert!(values.iter().all(|v| *v == got.token() || v == "$-1"), "nothing but b's key is left: {values:?}");
}

#[test]
fn drop_releases_in_the_background() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    let guard = client.lock("dropped", TTL).unwrap();
    drop(guard);
    // The release was written at once; the next acquisition (which drives the loop) works.
    let again = client.try_lock("dropped", TTL).unwrap();
    drop(again);
    // Dropping the whole client finishes outstanding releases first.
    drop(client);
    for n in &nodes {
        assert!(eventually(Duration::from_secs(5), || n.cmd(&["EXISTS", "dropped"]) == ":0"));
    }
}

#[test]
fn fencing_tokens_increase() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    let mut last = 0;
    for _ in 0..5 {
        let g = client.lock_with(LockOptions::new("fenced", TTL).fencing(true)).unwrap();
        let f = g.fence().expect("fencing asked for");
        assert!(f > last, "{f} after {last}");
        last = f;
        g.release().unwrap();
    }
}

#[test]
fn several_resources_lock_together() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    let g = client.lock_with(LockOptions::new("multi:a", TTL).resources(["multi:b"])).unwrap();
    assert_eq!(g.resources(), ["multi:a", "multi:b"]);
    assert!(matches!(client.try_lock("multi:b", TTL), Err(Error::Acquire(AcquireError::Held { .. }))));
    g.release().unwrap();
    client.try_lock("multi:b", TTL).unwrap();
}

#[test]
fn misuse_is_refused_at_once() {
    let nodes = servers(1);
    let client = Client::connect(urls(&nodes)).unwrap();
    assert!(matches!(client.lock("x", Duration::ZERO), Err(Error::Misuse(Misuse::ZeroTtl))));
    assert!(matches!(client.lock("", TTL), Err(Error::Misuse(Misuse::EmptyResource))));
    let err = Client::connect(["http://127.0.0.1:1"]).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    assert!(err.to_string().contains("redis://"), "{err}");
}

#[test]
fn auto_extension_without_threads_by_driving_the_loop() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    let other = Client::connect(urls(&nodes)).unwrap();
    let ttl = Duration::from_millis(600);
    let guard = client.lock_with(LockOptions::new("auto", ttl).auto_extend(true)).unwrap();
    let first = guard.valid_until();
    // Drive for several TTLs on this thread.
    let until = Instant::now() + Duration::from_millis(2000);
    while Instant::now() < until {
        client.run_for(Duration::from_millis(50)).unwrap();
        assert!(!guard.is_lost(), "lost while extended: {:?}", guard.lost().reason());
    }
    assert!(guard.valid_until() > first + Duration::from_millis(1000));
    let r = other.try_lock("auto", ttl);
    assert!(matches!(r, Err(Error::Acquire(AcquireError::Held { .. }))), "{r:?}");
    assert_eq!(guard.release().unwrap().outcome, ReleaseOutcome::Released);
}

#[test]
fn keepalive_thread_extends_while_the_caller_sleeps() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    let keepalive = client.spawn_keepalive().unwrap();
    let ttl = Duration::from_millis(600);
    let guard = client.lock_with(LockOptions::new("ka", ttl).auto_extend(true)).unwrap();
    let first = guard.valid_until();
    std::thread::sleep(Duration::from_millis(2000));
    assert!(!guard.is_lost());
    assert!(guard.valid_until() > first + Duration::from_millis(1000));
    // Commands still work while the helper owns the poll.
    let mut guard = guard;
    guard.extend(Duration::from_secs(5)).unwrap();
    keepalive.stop();
    assert_eq!(guard.release().unwrap().outcome, ReleaseOutcome::Released);
}

#[test]
fn auto_extension_needs_nothing_from_the_busy_caller() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    // Every node is read below: the lock must reach every node.
    all_ready(&client);
    let ttl = Duration::from_millis(600);
    let guard = client.lock_with(LockOptions::new("busy-caller", ttl).auto_extend(true)).unwrap();
    let first = guard.valid_until();
    // The caller's thread is busy for more than three TTLs: no call, no keep-alive.
    std::thread::sleep(Duration::from_millis(2000));
    assert!(!guard.is_lost(), "lost while auto-extended: {:?}", guard.lost().reason());
    assert!(guard.valid_until() > first + Duration::from_millis(1000));
    for n in &nodes {
        assert_eq!(n.cmd(&["GET", "busy-caller"]), guard.token());
    }
    assert_eq!(guard.release().unwrap().outcome, ReleaseOutcome::Released);
}

#[test]
fn past_its_deadline_a_lock_is_lost_by_the_clock_with_no_call_made() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    let guard = client.lock("undriven", Duration::from_millis(300)).unwrap();
    assert!(!guard.is_lost());
    // Nobody drives the loop meanwhile: only the clock can tell.
    std::thread::sleep(Duration::from_millis(600));
    assert!(guard.is_lost() && guard.remaining().is_zero());
    assert_eq!(guard.lost().reason(), Some(LostReason::Expired));
    assert_eq!(guard.release().unwrap().outcome, ReleaseOutcome::NotHeld);
}

#[test]
fn replies_read_late_are_not_round_trips() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    // Every node's figures are read below: the lock and its release must reach every node.
    all_ready(&client);
    let timeout = Config::from_urls(urls(&nodes)).unwrap().node_timeout; // what `connect` uses
    // Dropped: the release goes out at once, and its replies wait unread in the sockets.
    drop(client.lock("late", TTL).unwrap());
    std::thread::sleep(timeout * 10);
    client.run_for(Duration::from_millis(50)).unwrap();
    let health = client.health();
    assert!(health.nodes.iter().all(|n| n.stats.late >= 1), "{health}");
    for n in &health.nodes {
        assert!(n.stats.rtt_max().is_some_and(|rtt| rtt <= timeout), "{:?} against {timeout:?}", n.stats);
    }
}

#[test]
fn with_lock_runs_the_work_under_auto_extension() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    // Node 0 is read below: the lock must reach it.
    all_ready(&client);
    let ttl = Duration::from_millis(600);
    let out = client
        .with_lock(LockOptions::new("scoped", ttl), |lease| {
            // Granted at a quorum: node 0's SET may land a moment later.
            let granted = || nodes[0].cmd(&["GET", "scoped"]).len() == 40;
            assert!(eventually(Duration::from_secs(5), granted), "node 0 never got the lock");
            let token = nodes[0].cmd(&["GET", "scoped"]);
            std::thread::sleep(Duration::from_millis(1800));
            assert!(!lease.is_lost());
            // Still ours after three TTLs.
            (token.clone(), nodes[0].cmd(&["GET", "scoped"]))
        })
        .unwrap();
    assert_eq!(out.0.len(), 40);
    assert_eq!(out.0, out.1);
    for n in &nodes {
        assert!(eventually(Duration::from_secs(5), || n.cmd(&["EXISTS", "scoped"]) == ":0"), "released after the work");
    }
}

#[test]
fn a_refused_extension_fires_the_lost_signal() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    let mut guard = client.lock_with(LockOptions::new("stolen", Duration::from_millis(900)).auto_extend(true)).unwrap();
    let lost = guard.lost();
    for n in &nodes {
        n.cmd(&["SET", "stolen", "someone-else"]);
    }
    let reason = lost.wait_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(reason, Some(LostReason::Refused));
    assert!(guard.is_lost());
    match guard.extend(TTL) {
        Err(Error::Extend(ExtendError::Lost { .. })) => {}
        other => panic!("expected Lost, got {other:?}"),
    }
    // Releasing deletes nothing of the new holder's.
    assert_eq!(guard.release().unwrap().outcome, ReleaseOutcome::NotHeld);
    assert_eq!(nodes[0].cmd(&["GET", "stolen"]), "someone-else");
}

#[test]
fn validity_running_out_fires_the_lost_signal() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    let guard = client.lock("expiring", Duration::from_millis(300)).unwrap();
    assert_eq!(guard.lost().wait_timeout(Duration::from_secs(10)).unwrap(), Some(LostReason::Expired));
    guard.release().unwrap();
}

#[test]
fn one_client_shared_by_many_threads() {
    let nodes = servers(3);
    let client = Client::connect(urls(&nodes)).unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|s| {
        for _ in 0..8 {
            let client = client.clone();
            let inside = Arc::clone(&inside);
            let done = Arc::clone(&done);
            s.spawn(move || {
                for _ in 0..5 {
                    let g = client.lock_with(LockOptions::new("shared", TTL).wait(Duration::from_secs(30))).unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                    std::thread::sleep(Duration::from_millis(2));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    g.release().unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(done.load(Ordering::SeqCst), 40);
}

#[test]
fn a_down_minority_does_not_stop_locking_and_a_majority_does() {
    let mut nodes = servers(3);
    nodes[2].stop();
    let client = Client::connect(urls(&nodes)).unwrap();
    // `connect` is ready at the quorum; the refused node's attempt ends soon after.
    let waiting = eventually(Duration::from_secs(5), || {
        client.run_for(Duration::from_millis(10)).unwrap();
        matches!(client.health().nodes[2].state, NodeState::Down { .. })
    });
    let health = client.health();
    assert!(waiting, "{health}");
    assert!(health.nodes[2].last_error.is_some(), "{health}");
    assert_eq!((health.usable(), health.fault_tolerance()), (2, 0), "{health}");
    let g = client.lock("minority", TTL).unwrap();
    assert_eq!(g.release().unwrap().deleted, 2);
    nodes[1].stop();
    match client.try_lock("minority", TTL) {
        Err(Error::Acquire(AcquireError::Unreachable { votes, .. })) => {
            assert!(votes[1].is_failure() && votes[2].is_failure(), "{votes:?}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[test]
fn a_restarted_node_is_reconnected() {
    let mut nodes = servers(1);
    let client = Client::connect(urls(&nodes)).unwrap();
    client.lock("re", TTL).unwrap().release().unwrap();
    nodes[0].restart();
    // Reading the EOF and reconnecting happen while the loop is driven.
    let ok = eventually(Duration::from_secs(10), || {
        client.run_for(Duration::from_millis(20)).unwrap();
        client.try_lock("re", TTL).is_ok_and(|g| g.release().is_ok())
    });
    assert!(ok, "no lock after the restart: {}", client.health());
    let health = client.health();
    assert_eq!(health.nodes[0].state, NodeState::Ready, "{health}");
    assert!(health.nodes[0].stats.reconnects() >= 1, "{health}");
}

#[test]
fn a_wrong_password_fails_connect_as_misconfigured() {
    let node = Redis::start_with(Some("right"));
    let url = format!("redis://:wrong@127.0.0.1:{}", node.port);
    let err = Client::connect([url]).unwrap_err();
    let text = err.to_string();
    // A refused password is a configuration problem, named with the node's address.
    let Error::Unhealthy(health) = &err else { panic!("expected Unhealthy, got {text}") };
    assert!(health.misconfigured(), "{health}");
    assert!(err.is_misconfigured() && !err.is_unreachable(), "{text}");
    assert!(text.contains("AUTH") && text.contains(&format!("#0 (redis://127.0.0.1:{})", node.port)), "{text}");
    assert!(!text.contains("wrong"), "no password in the message: {text}");
    let good = Client::connect([format!("redis://:right@127.0.0.1:{}", node.port)]).unwrap();
    good.lock("pw", TTL).unwrap().release().unwrap();
}

#[test]
fn nothing_listening_fails_connect_as_unhealthy() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut cfg = Config::from_urls([format!("redis://127.0.0.1:{port}")]).unwrap();
    cfg.connect_timeout = Duration::from_millis(500);
    let err = Client::with_config(cfg).unwrap_err();
    let Error::Unhealthy(health) = &err else { panic!("expected Unhealthy, got {err}") };
    assert!(!health.misconfigured() && health.usable() == 0, "{health}");
    assert!(err.is_unreachable() && !err.is_misconfigured(), "{err}");
    assert!(err.to_string().contains("0 of 1 ready"), "{err}");
}
