//! The `redlease-mio` driver embedded in a foreign mio loop that also serves its own sockets
//! (an echo listener answering clients on other threads), against real servers with faults:
//! locks are taken and released, and a long-held auto-extended lock is kept, while a node is
//! paused (SIGSTOP), killed and restarted. Both the echo service and the locks keep working
//! in every phase.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlease_mio::mio::event::Event as MioEvent;
use redlease_mio::mio::net::{TcpListener, TcpStream};
use redlease_mio::mio::{Events, Interest, Poll, Token};
use redlease_mio::{Config, Driver, Event, LockId, LockOptions, LockShape, ReleaseOutcome, new_token};
use redlease_tests::Servers;

const LISTENER: Token = Token(0);
const FIRST_CONN: usize = 1;
/// The driver's node tokens start here, far from the echo connections.
const REDLEASE: Token = Token(1_000_000);
const CLIENTS: usize = 4;

/// The host's own service: an edge-triggered echo server.
struct Echo {
    listener: TcpListener,
    conns: HashMap<Token, (TcpStream, Vec<u8>, bool)>,
    next: usize,
}

impl Echo {
    fn on_event(&mut self, poll: &Poll, ev: &MioEvent) {
        if ev.token() == LISTENER {
            loop {
                match self.listener.accept() {
                    Ok((mut s, _)) => {
                        let t = Token(self.next);
                        self.next += 1;
                        poll.registry().register(&mut s, t, Interest::READABLE).unwrap();
                        self.conns.insert(t, (s, Vec::new(), false));
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                    Err(e) => panic!("accept: {e}"),
                }
            }
        }
        let t = ev.token();
        let Some((s, pending, writing)) = self.conns.get_mut(&t) else {
            panic!("an event for a token neither the host nor the driver owns: {ev:?}");
        };
        let mut closed = false;
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        while !closed && !pending.is_empty() {
            match s.write(pending) {
                Ok(n) => {
                    pending.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => closed = true,
            }
        }
        if closed {
            let (mut s, _, _) = self.conns.remove(&t).unwrap();
            poll.registry().deregister(&mut s).unwrap();
            return;
        }
        let want = !pending.is_empty();
        if want != *writing {
            *writing = want;
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            poll.registry().reregister(s, t, interest).unwrap();
        }
    }
}

/// The foreign loop: one poll for the echo server and the driver.
struct Host {
    poll: Poll,
    events: Events,
    echo: Echo,
    driver: Driver,
    seen: Vec<Event>,
    /// The long-held lock: it must never be reported lost.
    leader: Option<LockId>,
}

impl Host {
    fn turn(&mut self) {
        let now = Instant::now();
        let max = Duration::from_millis(20);
        self.driver.flush(now);
        let timeout = self.driver.poll_timeout().map_or(max, |t| t.saturating_duration_since(now).min(max));
        match self.poll.poll(&mut self.events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => return,
            Err(e) => panic!("poll: {e}"),
        }
        let now = Instant::now();
        for ev in self.events.iter() {
            if !self.driver.handle_event(now, ev) {
                self.echo.on_event(&self.poll, ev);
            }
        }
        self.driver.handle_timeout(now);
        while let Some(ev) = self.driver.poll_event() {
            if let Event::Lost { lock, reason } = &ev {
                assert_ne!(Some(*lock), self.leader, "the auto-extended lock was lost: {reason:?}");
            }
            self.seen.push(ev);
        }
    }

    fn run_until(&mut self, what: &str, mut done: impl FnMut(&mut Host) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(start.elapsed() < Duration::from_secs(15), "not within 15s: {what}; {:?}", self.driver);
            self.turn();
        }
    }

    fn outcome(&mut self, lock: LockId) -> Event {
        let mut out = None;
        self.run_until("an outcome", |h| {
            let i = h.seen.iter().position(|e| match e {
                Event::Acquired { lock: l, .. }
                | Event::AcquireFailed { lock: l, .. }
                | Event::Released { lock: l, .. } => *l == lock,
                _ => false,
            });
            out = i.map(|i| h.seen.remove(i));
            out.is_some()
        });
        out.unwrap()
    }

    fn acquire(&mut self, resource: &str, ttl: Duration, auto_extend: bool) -> LockId {
        let token = new_token().unwrap();
        let options = LockOptions::new(resource, ttl).auto_extend(auto_extend).wait(Duration::from_secs(10));
        let lock = self.driver.acquire(Instant::now(), &options, token.as_bytes()).unwrap();
        match self.outcome(lock) {
            Event::Acquired { .. } => lock,
            other => panic!("lock {resource}: {other:?}"),
        }
    }

    /// Try once for `permits` of the semaphore `name` of `limit`: the permits held, or `None`.
    fn try_permits(&mut self, name: &str, limit: u32, permits: u32) -> Option<(LockId, Vec<u16>)> {
        let token = new_token().unwrap();
        let options = LockOptions::new(name, Duration::from_secs(5)).semaphore(limit).permits(permits).attempts(1);
        let lock = self.driver.acquire(Instant::now(), &options, token.as_bytes()).unwrap();
        match self.outcome(lock) {
            Event::Acquired { .. } => Some((lock, self.driver.permits(lock).expect("a semaphore's permits").to_vec())),
            Event::AcquireFailed { .. } => None,
            other => panic!("semaphore {name}: {other:?}"),
        }
    }

    fn release(&mut self, lock: LockId) {
        self.driver.release(Instant::now(), lock).unwrap();
        match self.outcome(lock) {
            Event::Released { report, .. } => assert_eq!(report.outcome, ReleaseOutcome::Released, "{report:?}"),
            other => panic!("release: {other:?}"),
        }
    }

    /// Lock/release cycles, with the echo service served in between; checks that the echo
    /// clients made progress meanwhile.
    fn phase(&mut self, what: &str, echoes: &AtomicUsize) {
        let before = echoes.load(Ordering::SeqCst);
        let start = Instant::now();
        let mut cycles = 0;
        // At least half a second per phase, so that the 1 s leader lock needs extending.
        while cycles < 10
            || start.elapsed() < Duration::from_millis(500)
            || echoes.load(Ordering::SeqCst) < before + 2 * CLIENTS
        {
            assert!(start.elapsed() < Duration::from_secs(15), "{what}: no echo progress while locking");
            let lock = self.acquire("embedded", Duration::from_secs(5), false);
            self.release(lock);
            cycles += 1;
        }
    }
}

#[test]
fn a_foreign_mio_loop_keeps_serving_while_locks_are_taken_and_released() {
    let servers = Servers::start(3);
    let poll = Poll::new().unwrap();
    let mut listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE).unwrap();
    let addr = listener.local_addr().unwrap();

    let mut config = Config::from_urls(servers.urls()).unwrap();
    config.reconnect_min = Duration::from_millis(10);
    config.reconnect_max = Duration::from_millis(200);
    let mut driver = Driver::new(config, REDLEASE).unwrap();
    driver.register(poll.registry(), Instant::now()).unwrap();
    let echo = Echo { listener, conns: HashMap::new(), next: FIRST_CONN };
    let mut host = Host { poll, events: Events::with_capacity(128), echo, driver, seen: Vec::new(), leader: None };
    // Every node tried is not every node ready (a connect or handshake may have failed, and
    // a quorum is enough to lock): the leader lock below must be on every node, node 0 and
    // node 1 included, to outlive their faults.
    host.run_until("every node ready", |h| redlease_tests::every_node_ready(&h.driver.health()));

    // Echo clients: request/response round trips until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let echoes = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (stop, echoes) = (stop.clone(), echoes.clone());
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let msg = format!("client {c} message {i}\n");
                    s.write_all(msg.as_bytes()).unwrap();
                    let mut back = vec![0u8; msg.len()];
                    s.read_exact(&mut back).expect("the echo server stopped answering");
                    assert_eq!(back, msg.as_bytes());
                    echoes.fetch_add(1, Ordering::SeqCst);
                    i += 1;
                    std::thread::sleep(Duration::from_millis(2));
                }
                i
            })
        })
        .collect();

    // A lock held through the first phases, kept alive by the core's auto-extension (3 s TTL,
    // extended about every second) as long as this loop turns. Node 0 is paused for less than
    // the TTL, so it keeps the key; node 1 comes back empty, so the lock is released before a
    // second node goes down (its keys would then be on a minority: the lock would be lost).
    let leader = host.acquire("leader", Duration::from_secs(3), true);
    host.leader = Some(leader);
    let first_deadline = host.driver.lock_info(leader).unwrap().valid_until.unwrap();

    host.phase("all nodes up", &echoes);

    servers.node(0).pause();
    host.phase("node 0 paused", &echoes);
    servers.node(0).resume();

    servers.node(1).kill();
    host.phase("node 1 killed", &echoes);
    servers.node(1).restart(false);
    host.run_until("node 1 reconnected", |h| h.driver.health().nodes[1].is_ready());

    // The leader lock survived all of it, extended all along.
    let info = host.driver.lock_info(leader).unwrap();
    assert!(!info.lost, "{info:?}");
    assert!(info.valid_until.unwrap() > first_deadline, "never extended: {info:?}");
    assert!(info.valid_until.unwrap() > Instant::now());
    host.leader = None;
    host.release(leader);

    servers.node(2).kill();
    // Now a quorum needs the restarted node 1: the driver reconnected to it by itself.
    host.phase("node 1 restarted, node 2 killed", &echoes);
    servers.node(2).restart(false);
    host.run_until("node 2 reconnected", |h| h.driver.health().nodes[2].is_ready());
    host.phase("all nodes back", &echoes);

    stop.store(true, Ordering::SeqCst);
    // Serve until every client has finished its last round trip.
    host.run_until("echo clients finished", |_| clients.iter().all(|c| c.is_finished()));
    let total: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert!(total >= (5 * 2 * CLIENTS) as u64, "{total} echoes");
    assert_eq!(total as usize, echoes.load(Ordering::SeqCst));
    servers.assert_no_leaks();
}

#[test]
fn an_embedded_driver_takes_a_semaphores_permits() {
    let servers = Servers::start(3);
    let poll = Poll::new().unwrap();
    let mut listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE).unwrap();
    let mut driver = Driver::new(Config::from_urls(servers.urls()).unwrap(), REDLEASE).unwrap();
    driver.register(poll.registry(), Instant::now()).unwrap();
    let echo = Echo { listener, conns: HashMap::new(), next: FIRST_CONN };
    let mut host = Host { poll, events: Events::with_capacity(128), echo, driver, seen: Vec::new(), leader: None };
    host.run_until("every node tried", |h| h.driver.all_nodes_tried());

    // Three permits: two held one by one, then the last two at once are refused, one is not.
    let (a, sa) = host.try_permits("embedded-pool", 3, 1).expect("a first permit");
    let (b, sb) = host.try_permits("embedded-pool", 3, 1).expect("a second permit");
    assert!(sa.len() == 1 && sb.len() == 1 && sa != sb, "{sa:?} {sb:?}");
    assert!(host.try_permits("embedded-pool", 3, 2).is_none(), "2 permits granted with 1 free");
    let (c, sc) = host.try_permits("embedded-pool", 3, 1).expect("the third permit");
    assert!(!sa.contains(&sc[0]) && !sb.contains(&sc[0]));
    assert!(host.try_permits("embedded-pool", 3, 1).is_none(), "a fourth permit of three");
    // The health view shows the three permits held, each with its number.
    let h = host.driver.health();
    let mut shown: Vec<Vec<u16>> = h
        .locks
        .iter()
        .map(|l| match &l.shape {
            LockShape::Semaphore { limit: 3, permits: 1, held } if l.resources == ["embedded-pool"] => held.clone(),
            other => panic!("{other:?}\n{h}"),
        })
        .collect();
    shown.sort();
    let mut held = vec![sa.clone(), sb.clone(), sc.clone()];
    held.sort();
    assert_eq!(shown, held, "{h}");
    for lock in [a, b, c] {
        host.release(lock);
    }
    let (all, numbers) = host.try_permits("embedded-pool", 3, 3).expect("every permit once all are free");
    assert_eq!(numbers, [0, 1, 2]);
    host.release(all);
    servers.assert_no_leaks();
}
