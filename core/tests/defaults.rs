//! Defaults a user meets: how long an acquisition tries (`lock` waits like a mutex with a
//! bound, the config's `Retry`, 10 s; `try_lock` makes one attempt; a count or a wait of the
//! call's own replaces the config's; a misconfiguration fails at once), and the key prefix.
//! Simulated time.

mod rig;

use std::time::Duration;

use redlease_core::{AcquireError, Config, ConfigError, Engine, Event, LockOptions, NodeConfig, Retry};
use rig::Rig;

const TTL: Duration = Duration::from_secs(10);

/// Answer every command on every node until the acquisition ends — with `reply`, or (`None`)
/// as refusals: `SET NX` with nil, scripts with 0 — and count the attempts; the attempts
/// made, the error and when it ended.
fn run(rig: &mut Rig, options: &LockOptions, script: Option<&[u8]>) -> (u32, AcquireError, Duration) {
    rig.engine.acquire(rig.t0, options, b"tok").unwrap();
    let mut now = rig.t0;
    let mut attempts = 0;
    loop {
        for (i, cmds) in rig.sent_commands().into_iter().enumerate() {
            for cmd in cmds {
                let reply: &[u8] = match (cmd[0].as_slice(), script) {
                    (_, Some(reply)) => reply,
                    (b"SET", None) => b"$-1\r\n",
                    (_, None) => b":0\r\n",
                };
                // Node 0 counts the attempts: the first is a SET NX, every retry a script that
                // names the lock's key first (a cleanup names it too, but takes no TTL).
                if i == 0 && (cmd[0] == b"SET" || cmd.iter().any(|a| a == b"10000")) {
                    attempts += 1;
                }
                rig.reply(now, i, reply);
            }
        }
        for event in rig.events() {
            if let Event::AcquireFailed { error, .. } = event {
                return (attempts, error, now - rig.t0);
            }
        }
        now = rig.engine.poll_timeout().expect("a retry is armed");
        rig.engine.handle_timeout(now);
    }
}

#[test]
fn by_default_an_acquisition_waits_up_to_ten_seconds() {
    assert_eq!(Retry::default().wait, Some(Duration::from_secs(10)));
    let mut rig = Rig::new(3);
    let (attempts, error, took) = run(&mut rig, &LockOptions::new("r", TTL), None);
    assert!(attempts > 3, "more than the three attempts of a count: {attempts}");
    assert!(took <= Duration::from_secs(10) && took > Duration::from_secs(9), "{took:?}");
    assert!(matches!(error, AcquireError::WaitTimeout { .. }), "{error}");
}

#[test]
fn one_attempt_is_one_attempt_and_a_count_alone_has_no_time_bound() {
    let mut rig = Rig::new(3);
    let (attempts, error, _) = run(&mut rig, &LockOptions::new("r", TTL).attempts(1), None);
    assert_eq!(attempts, 1);
    assert!(matches!(error, AcquireError::Held { attempts: 1, .. }), "{error}");
    let slow = Retry::new(4, Duration::from_secs(5), Duration::from_secs(5));
    let mut rig = Rig::with(3, |c| {
        c.retry = slow;
        // Idle for seconds between attempts: no liveness probe to answer.
        c.liveness_timeout = Some(Duration::from_secs(60));
    });
    let (attempts, error, took) = run(&mut rig, &LockOptions::new("r", TTL), None);
    assert_eq!(attempts, 4, "{error} after {took:?}");
    assert!(took >= Duration::from_secs(15), "no 10 s bound under Retry::new: {took:?}");
    assert!(matches!(error, AcquireError::Held { attempts: 4, .. }), "{error}");
}

#[test]
fn a_wait_of_the_call_replaces_the_configs() {
    let mut rig = Rig::new(3);
    let options = LockOptions::new("r", TTL).wait(Duration::from_secs(1));
    let (_, error, took) = run(&mut rig, &options, None);
    assert!(took <= Duration::from_secs(1), "{took:?}");
    assert!(matches!(error, AcquireError::WaitTimeout { .. }), "{error}");
}

#[test]
fn a_majority_refusing_us_for_a_configuration_reason_fails_at_once() {
    let mut rig = Rig::new(3);
    let wrongtype = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    let (attempts, error, _) = run(&mut rig, &LockOptions::new("r", TTL), Some(wrongtype));
    assert_eq!(attempts, 1, "retrying cannot mend it");
    assert!(matches!(error, AcquireError::Misconfigured { attempts: 1, .. }), "{error}");
}

/// A key prefix names every key of a resource after `{prefix}R` on the wire — the lock key
/// and, derived from it, the fence counter — and the reserved spaces are judged on the
/// prefixed name; a prefix that would put every key in a reserved space is refused.
#[test]
fn a_key_prefix_names_every_key_and_keeps_out_of_reserved_spaces() {
    let mut rig = Rig::with(3, |c| c.key_prefix = "app1:".into());
    let options = LockOptions::new("orders", TTL).fencing(true);
    rig.engine.acquire(rig.t0, &options, b"tok").unwrap();
    let sent = rig.sent_commands();
    let args: Vec<String> = sent[0][0].iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    assert!(args.iter().any(|a| a == "app1:orders"), "{args:?}");
    assert!(args.iter().any(|a| a == "redlease:fence:app1:orders"), "{args:?}");
    assert!(!args.iter().any(|a| a == "orders"), "{args:?}");
    // `app1:` + `redlease:queue:x` is not a queue, but a prefix reaching into it is caught.
    rig.engine.acquire(rig.t0, &LockOptions::new("redlease:queue:x", TTL), b"t2").unwrap();
    let mut rig = Rig::with(3, |c| c.key_prefix = "redlease:".into());
    let err = rig.engine.acquire(rig.t0, &LockOptions::new("queue:x", TTL), b"tok").unwrap_err();
    assert!(err.to_string().contains("redlease:queue:x"), "{err}");
    let err = rig.engine.acquire(rig.t0, &LockOptions::new("fence:x", TTL), b"tok").unwrap_err();
    assert!(err.to_string().contains("redlease:fence:x"), "{err}");
    for prefix in ["redlease:fence:", "redlease:queue:a:", "redlease:format"] {
        let config = Config::new(vec![NodeConfig::new("h", 1)]).key_prefix(prefix);
        let err = Engine::new(config).unwrap_err();
        assert!(matches!(err, ConfigError::KeyPrefixReserved { .. }), "{prefix}: {err}");
    }
}

/// Only a misconfiguration that alone leaves no quorum ends an acquisition at once: with one
/// node refusing us for a configuration reason and another loading its data (out of reach for
/// now, it heals), the acquisition keeps trying.
#[test]
fn a_misconfigured_minority_beside_a_loading_node_is_retried() {
    let mut rig = Rig::new(3);
    rig.engine.acquire(rig.t0, &LockOptions::new("r", TTL), b"tok").unwrap();
    rig.sent_commands();
    rig.reply(rig.t0, 0, b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    rig.reply(rig.t0, 1, b"-LOADING Redis is loading the dataset in memory\r\n");
    rig.reply(rig.t0, 2, b"$-1\r\n");
    let events = rig.events();
    assert!(!events.iter().any(|e| matches!(e, Event::AcquireFailed { .. })), "{events:?}");
    assert!(rig.engine.poll_timeout().is_some(), "a retry is armed");
}

/// A server loading its data after a restart answers the handshake's first data command with
/// `LOADING`: the node is out of reach for now, not misconfigured.
#[test]
fn a_loading_node_is_out_of_reach_not_misconfigured() {
    let mut rig = Rig::unconnected(1, |_| {});
    rig.engine.handle_connected(rig.t0, redlease_core::NodeId(0));
    rig.sent(0);
    rig.reply(rig.t0, 0, b"-LOADING Redis is loading the dataset in memory\r\n");
    let events = rig.events();
    let Some(Event::LinkFailed { error }) = events.first() else { panic!("{events:?}") };
    assert_eq!(error.fault(), redlease_core::Fault::Unreachable, "{error}");
    assert!(!rig.engine.health().misconfigured());
}

/// `wait_forever` retries without a bound, whatever the config's `Retry` says; `try_once`
/// makes one attempt, whatever it says.
#[test]
fn wait_forever_never_gives_up_and_try_once_tries_once() {
    for retry in [Retry::default(), Retry::new(3, Duration::from_millis(20), Duration::from_millis(200))] {
        let mut rig = Rig::with(3, |c| c.retry = retry);
        rig.engine.acquire(rig.t0, &LockOptions::new("r", TTL).wait_forever(), b"tok").unwrap();
        let (mut now, mut attempts) = (rig.t0, 0);
        while now - rig.t0 < Duration::from_secs(600) {
            for (i, cmds) in rig.sent_commands().into_iter().enumerate() {
                for cmd in cmds {
                    attempts += usize::from(i == 0 && (cmd[0] == b"SET" || cmd.iter().any(|a| a == b"10000")));
                    rig.reply(now, i, if cmd[0] == b"SET" { b"$-1\r\n" } else { b":0\r\n" });
                }
            }
            let events = rig.events();
            assert!(!events.iter().any(|e| matches!(e, Event::AcquireFailed { .. })), "{retry:?}: {events:?}");
            now = rig.engine.poll_timeout().expect("a retry is armed");
            rig.engine.handle_timeout(now);
        }
        assert!(attempts > 1000, "still retrying after 10 minutes: {attempts}");

        let mut rig = Rig::with(3, |c| c.retry = retry);
        let (attempts, error, took) = run(&mut rig, &LockOptions::new("r", TTL).try_once(), None);
        assert_eq!((attempts, took), (1, Duration::ZERO), "{retry:?}");
        assert!(matches!(error, AcquireError::Held { .. }), "{error}");
    }
}
