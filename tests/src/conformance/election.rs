//! The election cases, once per adapter over TCP: a campaign leads with an epoch and a value
//! that observers read, a resign hands over at once to the candidate in line with a larger
//! epoch, a lost leadership is signalled, bad input is refused naming the field; and an
//! observer reports every change of leader, woken by the release message rather than its poll.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlease_core::{ElectionOptions, Leader, LeaderChange, Misuse, ReleaseOutcome, Retry};

use super::cases::{connect, eventually, ok, queue_lengths, subscribers, values};
use super::{BoxFuture, Failure, FailureKind, Options, Subject};
use crate::{RedisCluster, Reply, Servers, key_slot};

/// Where an observer puts the changes it reports, as they come.
pub type Sink = Arc<Mutex<Vec<LeaderChange>>>;

/// What an adapter offers for elections, beside its [`Subject`] side.
pub trait Elections: Subject {
    /// A leadership (`campaign`'s handle).
    type Leadership: Send + 'static;
    /// `client.campaign(options)`, awaited.
    fn campaign(
        client: &Self::Client,
        options: ElectionOptions,
    ) -> BoxFuture<'static, Result<Self::Leadership, Failure>>;
    /// `leadership.epoch()`.
    fn epoch(leadership: &Self::Leadership) -> u64;
    /// `leadership.lost()`.
    fn leadership_lost(leadership: &Self::Leadership) -> Self::Lost;
    /// `leadership.resign()`.
    fn resign(leadership: Self::Leadership) -> BoxFuture<'static, Result<redlease_core::ReleaseReport, Failure>>;
    /// `client.leader(name)`.
    fn leader(client: &Self::Client, name: &str) -> BoxFuture<'static, Result<Option<Leader>, Failure>>;
    /// `client.observe(name)` with `poll_every(poll)`: push the first `changes` changes to
    /// `sink` as they come, then stop observing.
    fn observe(
        client: &Self::Client,
        name: &str,
        poll: Duration,
        changes: usize,
        sink: Sink,
    ) -> BoxFuture<'static, Result<(), Failure>>;
}

/// The election's lock key.
const KEY: &str = "redlease:elect:{jobs}";

/// Options whose retries are 5 s apart: a candidate that gets the leadership sooner was handed
/// it by the release (its queue entry and the release message).
fn slow() -> Options {
    Options { retry: Retry::new(3, Duration::from_secs(5), Duration::from_secs(5)), ..Options::default() }
}

/// A campaign leads with an epoch and its value on the nodes, which `leader` reads; a second
/// candidate waits in line and gets the leadership within 2 s of the resign, with a larger
/// epoch; a leadership taken away is signalled lost and `leader` shows none; a bounded
/// campaign times out; bad names and values are refused naming the field.
pub fn election_campaign<S: Elections>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let a = connect::<S>(servers.urls(), Options::default()).await;
        let b = connect::<S>(servers.urls(), slow()).await;
        let observer = connect::<S>(servers.urls(), Options::default()).await;
        assert_eq!(ok::<S, _>(S::leader(&observer, "jobs").await, "leader before any"), None);
        let first = ok::<S, _>(S::campaign(&a, ElectionOptions::new("jobs", "10.0.0.1:80")).await, "campaign a");
        let e1 = S::epoch(&first);
        assert!(e1 > 0, "[{}] epoch {e1}", S::NAME);
        let hex_a = redlease_core::token_hex(b"10.0.0.1:80");
        let on_nodes = values(&servers, KEY);
        let holding = on_nodes.iter().flatten().filter(|(v, _)| v.as_deref().is_some_and(|v| v.starts_with(&hex_a)));
        assert!(
            holding.clone().count() >= 2 && holding.clone().all(|(_, pttl)| *pttl > 0),
            "[{}] {on_nodes:?}",
            S::NAME
        );
        let seen = ok::<S, _>(S::leader(&observer, "jobs").await, "leader").expect("a leader");
        assert_eq!((seen.value.as_slice(), seen.epoch), (&b"10.0.0.1:80"[..], e1), "[{}]", S::NAME);

        // A second candidate waits in line; the resign hands over at once.
        let options = ElectionOptions::new("jobs", "b").ttl(Duration::from_secs(2));
        let second = {
            let b = b.clone();
            S::spawn(async move { S::campaign(&b, options).await })
        };
        eventually::<S>(Duration::from_secs(3), "b queued on every node", || {
            queue_lengths(&servers, "redlease:queue:redlease:elect:{jobs}") == vec![1; 3]
        })
        .await;
        let resigned = Instant::now();
        assert_eq!(ok::<S, _>(S::resign(first).await, "resign").outcome, ReleaseOutcome::Released);
        let second = ok::<S, _>(second.await, "campaign b");
        let took = resigned.elapsed();
        assert!(took < Duration::from_secs(2), "[{}] the handover took {took:?}", S::NAME);
        let e2 = S::epoch(&second);
        assert!(e2 > e1, "[{}] epochs {e1} then {e2}", S::NAME);
        let seen = ok::<S, _>(S::leader(&observer, "jobs").await, "leader").expect("b leads");
        assert_eq!((seen.value.as_slice(), seen.epoch), (&b"b"[..], e2), "[{}]", S::NAME);

        // A bounded campaign gives up while b leads.
        let bounded = ElectionOptions::new("jobs", "c").wait(Duration::from_millis(300));
        match S::campaign(&observer, bounded).await {
            Err(Failure { kind: FailureKind::WaitTimeout { .. }, .. }) => {}
            Err(e) => panic!("[{}] a bounded campaign: {e}", S::NAME),
            Ok(_) => panic!("[{}] a second leader while b leads", S::NAME),
        }

        // b's leadership is taken away on every node: the loss is signalled, nobody leads.
        let lost = S::leadership_lost(&second);
        for n in servers.nodes() {
            n.conn().unwrap().checked(&["SET", KEY, "intruder", "PX", "5000"]).unwrap();
        }
        assert!(S::wait_lost(&lost, Duration::from_secs(5)).await, "[{}] b's loss was not signalled", S::NAME);
        assert_eq!(ok::<S, _>(S::leader(&observer, "jobs").await, "leader after the loss"), None);
        drop(second);

        for (options, field) in
            [(ElectionOptions::new("a{b}", "v"), "name"), (ElectionOptions::new("jobs", vec![0; 513]), "value")]
        {
            match S::campaign(&a, options).await {
                Err(Failure { kind: FailureKind::Misuse(Misuse::Election { field: f, .. }), message }) => {
                    assert_eq!(f, field, "[{}] {message}", S::NAME);
                    assert!(message.contains(field), "[{}] {message}", S::NAME);
                }
                Err(e) => panic!("[{}] a bad {field}: {e}", S::NAME),
                Ok(_) => panic!("[{}] a bad {field} campaigned", S::NAME),
            }
        }
        match S::leader(&a, "").await {
            Err(Failure { kind: FailureKind::Misuse(Misuse::Election { field: "name", .. }), .. }) => {}
            other => panic!("[{}] leader of an empty name: {:?}", S::NAME, other.map(|_| ())),
        }
        for client in [&a, &b, &observer] {
            S::close(client).await;
        }
    });
    servers.assert_no_leaks();
}

/// Two observers follow one election: one that polls every 100 ms sees a, then b, then the
/// vacancy after b resigns; one whose poll is 30 s sees b within 2 s of a's resign (the
/// release message woke it). Epochs strictly increase; the watch ends with the observers.
pub fn election_observe<S: Elections>() {
    let servers = Servers::start(3);
    S::block_on(async {
        let a = connect::<S>(servers.urls(), Options::default()).await;
        let b = connect::<S>(servers.urls(), slow()).await;
        let watcher = connect::<S>(servers.urls(), Options::default()).await;
        let first = ok::<S, _>(S::campaign(&a, ElectionOptions::new("jobs", "a")).await, "campaign a");
        let (polling, woken): (Sink, Sink) = (Sink::default(), Sink::default());
        let polling_done = S::spawn(S::observe(&watcher, "jobs", Duration::from_millis(100), 3, Arc::clone(&polling)));
        let woken_done = S::spawn(S::observe(&watcher, "jobs", Duration::from_secs(30), 2, Arc::clone(&woken)));
        eventually::<S>(Duration::from_secs(3), "both observers saw a", || {
            polling.lock().unwrap().len() == 1 && woken.lock().unwrap().len() == 1
        })
        .await;
        let second = {
            let b = b.clone();
            S::spawn(async move { S::campaign(&b, ElectionOptions::new("jobs", "b")).await })
        };
        eventually::<S>(Duration::from_secs(3), "b queued on every node", || {
            queue_lengths(&servers, "redlease:queue:redlease:elect:{jobs}") == vec![1; 3]
        })
        .await;
        ok::<S, _>(S::resign(first).await, "resign a");
        eventually::<S>(Duration::from_secs(2), "the 30 s poller saw b (woken by the release)", || {
            woken.lock().unwrap().len() == 2
        })
        .await;
        // b leads until the 100 ms poller saw it too: an observer reports the leaders it
        // reads, and a leadership shorter than its poll may pass unseen.
        eventually::<S>(Duration::from_secs(3), "the 100 ms poller saw b", || polling.lock().unwrap().len() >= 2).await;
        ok::<S, _>(woken_done.await, "observe (30 s poll)");
        let second = ok::<S, _>(second.await, "campaign b");
        let e2 = S::epoch(&second);
        ok::<S, _>(S::resign(second).await, "resign b");
        eventually::<S>(Duration::from_secs(3), "the 100 ms poller saw the vacancy", || {
            polling.lock().unwrap().len() == 3
        })
        .await;
        ok::<S, _>(polling_done.await, "observe (100 ms poll)");
        for (sink, what) in [(&polling, "100 ms"), (&woken, "30 s")] {
            let changes = sink.lock().unwrap().clone();
            let elected: Vec<(Vec<u8>, u64)> = changes
                .iter()
                .filter_map(|c| match c {
                    LeaderChange::Elected(l) => Some((l.value.clone(), l.epoch)),
                    _ => None,
                })
                .collect();
            assert_eq!(elected.len(), 2, "[{}] the {what} observer: {changes:?}", S::NAME);
            assert_eq!((elected[0].0.as_slice(), elected[1].0.as_slice()), (&b"a"[..], &b"b"[..]), "[{}]", S::NAME);
            assert!(elected[0].1 < elected[1].1 && elected[1].1 == e2, "[{}] {changes:?}", S::NAME);
        }
        assert_eq!(polling.lock().unwrap()[2], LeaderChange::Vacant, "[{}]", S::NAME);
        eventually::<S>(Duration::from_secs(3), "no subscription left on the election's channel", || {
            subscribers(&servers, "redlease:wake:redlease:elect:{jobs}") == 0
        })
        .await;
        for client in [&a, &b, &watcher] {
            S::close(client).await;
        }
    });
    servers.assert_no_leaks();
}

/// An election over three Redis Clusters (3 masters each): its keys share the hash tag `{jobs}`,
/// so each cluster serves the lock, its counter and its queue from one master; `leader` reads
/// that master; a candidate in line is handed the leadership within 2 s of the resign (sharded
/// release message) with a larger epoch, and an observer whose poll is 30 s sees it as soon.
pub fn election_cluster<S: Elections>() {
    let clusters: Vec<RedisCluster> = std::thread::scope(|s| {
        let started: Vec<_> =
            (0..3).map(|_| s.spawn(|| RedisCluster::builder().masters(3).replicas(0).start())).collect();
        started.into_iter().map(|h| h.join().expect("a cluster started")).collect()
    });
    let urls: Vec<String> = clusters.iter().map(RedisCluster::seed_url).collect();
    let queued = || {
        clusters.iter().all(|c| {
            let master = c.master(c.master_of_key(KEY));
            matches!(
                master.conn().and_then(|mut m| m.cmd(&["LLEN", "redlease:queue:redlease:elect:{jobs}"])),
                Ok(Reply::Int(1))
            )
        })
    };
    S::block_on(async {
        let a = connect::<S>(urls.clone(), Options::default()).await;
        let b = connect::<S>(urls.clone(), slow()).await;
        let watcher = connect::<S>(urls.clone(), Options::default()).await;
        let first = ok::<S, _>(S::campaign(&a, ElectionOptions::new("jobs", "a")).await, "campaign a");
        let e1 = S::epoch(&first);
        let seen = ok::<S, _>(S::leader(&watcher, "jobs").await, "leader").expect("a leads");
        assert_eq!((seen.value.as_slice(), seen.epoch), (&b"a"[..], e1), "[{}]", S::NAME);
        let sink = Sink::default();
        let observed = S::spawn(S::observe(&watcher, "jobs", Duration::from_secs(30), 2, Arc::clone(&sink)));
        eventually::<S>(Duration::from_secs(3), "the observer saw a", || sink.lock().unwrap().len() == 1).await;
        let second = {
            let b = b.clone();
            S::spawn(async move { S::campaign(&b, ElectionOptions::new("jobs", "b")).await })
        };
        eventually::<S>(Duration::from_secs(3), "b queued on every cluster", queued).await;
        let resigned = Instant::now();
        ok::<S, _>(S::resign(first).await, "resign a");
        let second = ok::<S, _>(second.await, "campaign b");
        let took = resigned.elapsed();
        assert!(took < Duration::from_secs(2), "[{}] the handover took {took:?}", S::NAME);
        let e2 = S::epoch(&second);
        assert!(e2 > e1, "[{}] epochs {e1} then {e2}", S::NAME);
        eventually::<S>(Duration::from_secs(3), "the observer saw b", || sink.lock().unwrap().len() == 2).await;
        ok::<S, _>(observed.await, "observe");
        let changes = sink.lock().unwrap().clone();
        match changes.as_slice() {
            [LeaderChange::Elected(x), LeaderChange::Elected(y)] => {
                assert_eq!((x.epoch, y.value.as_slice(), y.epoch), (e1, &b"b"[..], e2), "[{}]", S::NAME);
            }
            other => panic!("[{}] observed {other:?}", S::NAME),
        }
        let seen = ok::<S, _>(S::leader(&watcher, "jobs").await, "leader").expect("b leads");
        assert_eq!((seen.value.as_slice(), seen.epoch), (&b"b"[..], e2), "[{}]", S::NAME);

        // The election's slot moves to another master in every cluster: a read follows the
        // redirect (the watcher's map still has the old master) and still sees b.
        let slot = key_slot(KEY);
        for c in &clusters {
            c.migrate_slot(slot, (c.master_of_slot(slot) + 1) % 3);
        }
        let seen = ok::<S, _>(S::leader(&watcher, "jobs").await, "leader after the slot moved");
        let seen = seen.expect("b leads after the slot moved");
        assert_eq!((seen.value.as_slice(), seen.epoch), (&b"b"[..], e2), "[{}]", S::NAME);
        ok::<S, _>(S::resign(second).await, "resign b");
        for client in [&a, &b, &watcher] {
            S::close(client).await;
        }
    });
    for c in &clusters {
        c.assert_no_leaks();
    }
}
