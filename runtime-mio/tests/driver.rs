//! The embeddable driver in a host-owned mio loop, against real `redis-server` processes.

mod support;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use redlease_mio::{
    AcquireError, Config, Driver, Event, LockId, LockOptions, NodeId, NodeState, ReleaseOutcome, new_token,
};
use support::{Redis, servers, urls};

const TTL: Duration = Duration::from_secs(10);
const BASE: Token = Token(100);

/// A host loop: the test's own poll, with the driver and whatever else the test registers.
struct Host {
    poll: Poll,
    events: Events,
    driver: Driver,
    /// Driver events seen so far, in order.
    seen: Vec<Event>,
}

impl Host {
    fn new(urls: Vec<String>) -> Host {
        Host::with(urls, |_| {})
    }

    fn with(urls: Vec<String>, tweak: impl FnOnce(&mut Config)) -> Host {
        let mut cfg = Config::from_urls(urls).unwrap();
        tweak(&mut cfg);
        cfg.reconnect_min = Duration::from_millis(10);
        cfg.reconnect_max = Duration::from_millis(200);
        let poll = Poll::new().unwrap();
        let mut driver = Driver::new(cfg, BASE).unwrap();
        driver.register(poll.registry(), Instant::now()).unwrap();
        let mut host = Host { poll, events: Events::with_capacity(64), driver, seen: Vec::new() };
        host.run_until(Duration::from_secs(5), |h| h.driver.all_nodes_tried());
        host
    }

    /// One turn of the loop; foreign events go to `foreign`.
    fn turn(&mut self, max: Duration, foreign: &mut dyn FnMut(&Poll, &mio::event::Event)) {
        let now = Instant::now();
        self.driver.flush(now);
        let timeout = self.driver.poll_timeout().map_or(max, |t| t.saturating_duration_since(now).min(max));
        self.poll.poll(&mut self.events, Some(timeout)).unwrap();
        let now = Instant::now();
        for ev in self.events.iter() {
            if !self.driver.handle_event(now, ev) {
                foreign(&self.poll, ev);
            }
        }
        self.driver.handle_timeout(now);
        while let Some(ev) = self.driver.poll_event() {
            self.seen.push(ev);
        }
    }

    /// Turn until `done` (a liveness bound of `limit`); panics past it.
    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Host) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(start.elapsed() < limit, "not done within {limit:?}; seen {:?}; {:?}", self.seen, self.driver);
            self.turn(Duration::from_millis(50), &mut |_, _| {});
        }
    }

    /// Take the final event of `lock`'s acquisition or release, if it arrived.
    fn take(&mut self, lock: LockId) -> Option<Event> {
        let i = self.seen.iter().position(|e| match e {
            Event::Acquired { lock: l, .. }
            | Event::AcquireFailed { lock: l, .. }
            | Event::Released { lock: l, .. } => *l == lock,
            _ => false,
        })?;
        Some(self.seen.remove(i))
    }

    fn wait(&mut self, lock: LockId) -> Event {
        let mut out = None;
        self.run_until(Duration::from_secs(10), |h| {
            out = h.take(lock);
            out.is_some()
        });
        out.unwrap()
    }

    fn acquire(&mut self, resource: &str) -> LockId {
        let token = new_token().unwrap();
        let lock = self.driver.acquire(Instant::now(), &LockOptions::new(resource, TTL), token.as_bytes()).unwrap();
        match self.wait(lock) {
            Event::Acquired { .. } => lock,
            other => panic!("expected Acquired, got {other:?}"),
        }
    }

    fn release(&mut self, lock: LockId) -> ReleaseOutcome {
        self.driver.release(Instant::now(), lock).unwrap();
        match self.wait(lock) {
            Event::Released { report, .. } => report.outcome,
            other => panic!("expected Released, got {other:?}"),
        }
    }
}

/// An edge-triggered echo server: the host's own sockets in the same poll.
struct Echo {
    listener: TcpListener,
    conns: HashMap<Token, (TcpStream, Vec<u8>)>,
    next: usize,
    echoed: usize,
}

const LISTENER: Token = Token(1);

impl Echo {
    fn new(poll: &Poll) -> Echo {
        let mut listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE).unwrap();
        Echo { listener, conns: HashMap::new(), next: 10_000, echoed: 0 }
    }

    fn on_event(&mut self, poll: &Poll, ev: &mio::event::Event) {
        if ev.token() == LISTENER {
            loop {
                match self.listener.accept() {
                    Ok((mut s, _)) => {
                        let t = Token(self.next);
                        self.next += 1;
                        poll.registry().register(&mut s, t, Interest::READABLE | Interest::WRITABLE).unwrap();
                        self.conns.insert(t, (s, Vec::new()));
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                    Err(e) => panic!("accept: {e}"),
                }
            }
        }
        let Some((s, pending)) = self.conns.get_mut(&ev.token()) else {
            panic!("an event for a token nobody owns: {ev:?}");
        };
        let mut buf = [0u8; 1024];
        let mut closed = false;
        loop {
            match s.read(&mut buf) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        while !pending.is_empty() {
            match s.write(pending) {
                Ok(n) => {
                    self.echoed += n;
                    pending.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        if closed {
            let (mut s, _) = self.conns.remove(&ev.token()).unwrap();
            poll.registry().deregister(&mut s).unwrap();
        }
    }
}

#[test]
fn a_foreign_loop_serves_its_own_sockets_while_locking() {
    let nodes = servers(3);
    let mut host = Host::new(urls(&nodes));
    let mut echo = Echo::new(&host.poll);
    let addr = echo.listener.local_addr().unwrap();

    // Echo clients on their own threads, talking while the loop takes and releases locks.
    let clients: Vec<_> = (0..4)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                for i in 0..50 {
                    let msg = format!("client {c} message {i}\n");
                    s.write_all(msg.as_bytes()).unwrap();
                    let mut back = vec![0u8; msg.len()];
                    s.read_exact(&mut back).unwrap();
                    assert_eq!(back, msg.as_bytes());
                }
            })
        })
        .collect();

    let mut cycles = 0;
    let start = Instant::now();
    while clients.iter().any(|c| !c.is_finished()) || cycles < 20 {
        assert!(start.elapsed() < Duration::from_secs(30), "the loop stalled");
        // A lock cycle, with the echo server served on every turn in between.
        let token = new_token().unwrap();
        let options = LockOptions::new("embedded", TTL);
        let lock = host.driver.acquire(Instant::now(), &options, token.as_bytes()).unwrap();
        let acquired = loop {
            if let Some(ev) = host.take(lock) {
                break ev;
            }
            host.turn(Duration::from_millis(50), &mut |p, ev| echo.on_event(p, ev));
        };
        assert!(matches!(acquired, Event::Acquired { .. }), "{acquired:?}");
        host.driver.release(Instant::now(), lock).unwrap();
        let released = loop {
            if let Some(ev) = host.take(lock) {
                break ev;
            }
            host.turn(Duration::from_millis(50), &mut |p, ev| echo.on_event(p, ev));
        };
        match released {
            Event::Released { report, .. } => assert_eq!(report.outcome, ReleaseOutcome::Released),
            other => panic!("{other:?}"),
        }
        cycles += 1;
    }
    for c in clients {
        c.join().unwrap();
    }
    assert!(cycles >= 20);
    let expected: usize =
        (0..4).map(|c| (0..50).map(|i| format!("client {c} message {i}\n").len()).sum::<usize>()).sum();
    assert_eq!(echo.echoed, expected);
}

#[test]
fn large_commands_go_out_in_partial_writes() {
    let nodes = servers(3);
    // Moving 8 MiB through Lua takes a while (debug builds, 2 cores): a roomy node timeout.
    let mut host = Host::with(urls(&nodes), |c| c.node_timeout = Duration::from_secs(5));
    // An 8 MiB resource name: far more than a socket buffer takes in one write.
    let resource = "k".repeat(8 << 20);
    // Every node tried is not every node ready; node 0 is read below.
    host.run_until(Duration::from_secs(10), |h| h.driver.health().all_ready());
    let lock = host.acquire(&resource);
    let info = host.driver.lock_info(lock).unwrap();
    assert!(info.valid_until.is_some());
    // The lock, and the key that records the nodes' lock format: on node 0 too, though the
    // acquisition was decided at a quorum (node 0's 8 MiB may still be on its way).
    host.run_until(Duration::from_secs(10), |_| nodes[0].cmd(&["DBSIZE"]) == ":2");
    assert_eq!(host.release(lock), ReleaseOutcome::Released);
    // Small commands still flow afterwards (the WRITABLE interest was dropped cleanly).
    let lock = host.acquire("small");
    assert_eq!(host.release(lock), ReleaseOutcome::Released);
}

#[test]
fn eof_is_noticed_and_the_node_reconnected() {
    let mut nodes = servers(3);
    let mut host = Host::new(urls(&nodes));
    let lock = host.acquire("eof");
    assert_eq!(host.release(lock), ReleaseOutcome::Released);

    nodes[0].stop();
    let node = NodeId(0);
    host.run_until(Duration::from_secs(10), |h| !h.driver.engine().is_connected(node));
    let status = host.driver.health().nodes[0].clone();
    assert!(matches!(status.state, NodeState::Down { .. } | NodeState::Connecting), "{status:?}");
    assert!(status.last_error.is_some(), "a lost connection says why: {status:?}");
    // The reconnect attempts are refused, and say so.
    let refused = |h: &mut Host| {
        h.driver.health().nodes[0].last_error.as_deref().is_some_and(|e| e.starts_with("connect failed: "))
    };
    host.run_until(Duration::from_secs(10), refused);
    // Two of three still make a quorum.
    let lock = host.acquire("eof");
    assert_eq!(host.release(lock), ReleaseOutcome::Released);

    nodes[0].restart();
    // Connected, and the reason is gone once the handshake is through.
    host.run_until(Duration::from_secs(10), |h| {
        let status = &h.driver.health().nodes[0];
        status.state == NodeState::Ready && status.last_error.is_none()
    });
    nodes[1].stop();
    nodes[2].stop();
    // With 1 of 3 left nothing works; with node 1 back the restarted node 0 is needed.
    let token = new_token().unwrap();
    let options = LockOptions::new("eof", TTL).attempts(1);
    let lock = host.driver.acquire(Instant::now(), &options, token.as_bytes()).unwrap();
    assert!(matches!(host.wait(lock), Event::AcquireFailed { error: AcquireError::Unreachable { .. }, .. }));
    nodes[1].restart();
    host.run_until(Duration::from_secs(10), |h| h.driver.engine().is_connected(NodeId(1)));
    let lock = host.acquire("eof");
    assert_eq!(host.release(lock), ReleaseOutcome::Released);
}

#[test]
fn a_wrong_password_is_a_link_failure_and_reconnects_with_backoff() {
    let node = Redis::start_with(Some("secret"));
    let mut host = Host::new(vec![format!("redis://:nope@127.0.0.1:{}", node.port)]);
    // Every link failure is an event (a refused connect too, while the server starts up): wait
    // for the handshake's.
    let auth = |h: &Host| {
        h.seen.iter().find_map(|e| match e {
            Event::LinkFailed { error } if error.to_string().contains("AUTH") => Some(error.to_string()),
            _ => None,
        })
    };
    host.run_until(Duration::from_secs(10), |h| auth(h).is_some());
    let text = auth(&host).unwrap();
    assert!(text.contains("AUTH") && text.contains("#0"), "{text}");
    let health = host.driver.health();
    assert!(health.nodes[0].last_error.as_deref().is_some_and(|e| e.contains("AUTH")), "{health}");
    assert!(health.misconfigured() && !health.can_lock(), "{health}");
    // It keeps trying (with backoff), and keeps failing the same way.
    host.run_until(Duration::from_secs(10), |h| {
        h.seen.iter().filter(|e| matches!(e, Event::LinkFailed { .. })).count() >= 3
    });
}

#[test]
fn deregister_closes_everything_and_register_starts_over() {
    let nodes = servers(3);
    let mut host = Host::new(urls(&nodes));
    let lock = host.acquire("dereg");
    host.driver.deregister(Instant::now());
    for i in 0..3 {
        assert!(matches!(host.driver.health().nodes[i].state, NodeState::Down { retry_at: None }));
    }
    assert!(!host.driver.is_registered());
    assert_eq!(host.driver.poll_timeout().filter(|_| host.driver.engine().active_locks() == 0), None);
    // The release cannot reach anybody.
    host.driver.release(Instant::now(), lock).unwrap();
    match host.wait(lock) {
        Event::Released { report, .. } => assert_eq!(report.outcome, ReleaseOutcome::Unreachable),
        other => panic!("{other:?}"),
    }
    host.driver.register(host.poll.registry(), Instant::now()).unwrap();
    host.run_until(Duration::from_secs(5), |h| h.driver.all_nodes_tried());
    // The old key is still there (unreachable release); a new token cannot take it.
    let token = new_token().unwrap();
    let options = LockOptions::new("dereg", TTL).attempts(1);
    let l = host.driver.acquire(Instant::now(), &options, token.as_bytes()).unwrap();
    assert!(matches!(host.wait(l), Event::AcquireFailed { error: AcquireError::Held { .. }, .. }));
    let lock = host.acquire("dereg-other");
    assert_eq!(host.release(lock), ReleaseOutcome::Released);
    assert!(
        host.driver.node_of(Token(BASE.0 + 2)) == Some(NodeId(2)) && host.driver.node_of(Token(BASE.0 + 3)).is_none()
    );
}
