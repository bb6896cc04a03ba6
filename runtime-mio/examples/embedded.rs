//! A custom mio loop that serves TCP echo connections while holding a Redlock lock.
//!
//! The host owns the `Poll`; the redlease driver shares it. The lock is acquired with
//! auto-extension on, so the core extends it about every `ttl / 3` as long as this loop runs.
//! When the time is up (or the lock is lost) the loop releases the lock and exits.
//!
//! ```text
//! cargo run -p redlease-mio --example embedded -- [--listen 127.0.0.1:7777] [--for 20] \
//!     redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002
//! ```
//! Then talk to it: `nc 127.0.0.1 7777`.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Registry, Token};
use redlease_mio::{Config, Driver, Event, LockOptions, ReleaseOutcome, new_token};

const LISTENER: Token = Token(0);
/// Echo connections use tokens from here on.
const FIRST_CONN: usize = 1;
/// The driver's nodes use `REDLEASE`, `REDLEASE + 1`, ...: far from the connections.
const REDLEASE: Token = Token(1 << 20);

/// One echo client: bytes read but not yet written back.
struct Conn {
    stream: TcpStream,
    pending: Vec<u8>,
    writing: bool,
}

impl Conn {
    /// Read until WouldBlock, echo what fits, watch for writability if some is left.
    /// Returns false when the connection is finished.
    fn ready(&mut self, registry: &Registry, token: Token) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        while !self.pending.is_empty() {
            match self.stream.write(&self.pending) {
                Ok(0) => return false,
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        let want = !self.pending.is_empty();
        if want != self.writing {
            self.writing = want;
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            if registry.reregister(&mut self.stream, token, interest).is_err() {
                return false;
            }
        }
        true
    }
}

struct Args {
    listen: SocketAddr,
    run_for: Duration,
    urls: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { listen: ([127, 0, 0, 1], 0).into(), run_for: Duration::from_secs(20), urls: Vec::new() };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--listen" => {
                let v = it.next().ok_or("--listen needs an address, e.g. 127.0.0.1:7777")?;
                args.listen = v.parse().map_err(|e| format!("--listen {v:?}: {e}"))?;
            }
            "--for" => {
                let v = it.next().ok_or("--for needs a number of seconds")?;
                args.run_for = Duration::from_secs(v.parse().map_err(|e| format!("--for {v:?}: {e}"))?);
            }
            _ => args.urls.push(a),
        }
    }
    if args.urls.is_empty() {
        return Err("usage: embedded [--listen ADDR] [--for SECS] redis://host:port ...".into());
    }
    Ok(args)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(256);

    let mut listener = TcpListener::bind(args.listen)?;
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
    println!("echo server on {}", listener.local_addr()?);

    let mut driver = Driver::new(Config::from_urls(&args.urls)?, REDLEASE)?;
    driver.register(poll.registry(), Instant::now())?;

    let token = new_token()?;
    let mut lock = None;

    let mut conns: HashMap<Token, Conn> = HashMap::new();
    let mut next_conn = FIRST_CONN;
    let stop_at = Instant::now() + args.run_for;
    let mut releasing = false;

    loop {
        // Write out what the driver queued, then wake for sockets, for the driver's next
        // deadline, or for our own stop time.
        let now = Instant::now();
        driver.flush(now);
        let wake = driver.poll_timeout().map_or(stop_at, |t| t.min(stop_at));
        if let Err(e) = poll.poll(&mut events, Some(wake.saturating_duration_since(now))) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
        }
        let now = Instant::now();

        for event in events.iter() {
            if driver.handle_event(now, event) {
                continue;
            }
            match event.token() {
                LISTENER => loop {
                    match listener.accept() {
                        Ok((mut stream, peer)) => {
                            let t = Token(next_conn);
                            next_conn += 1;
                            poll.registry().register(&mut stream, t, Interest::READABLE)?;
                            conns.insert(t, Conn { stream, pending: Vec::new(), writing: false });
                            println!("client {peer} connected");
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e.into()),
                    }
                },
                t => {
                    let done = conns.get_mut(&t).is_some_and(|c| !c.ready(poll.registry(), t));
                    if done {
                        if let Some(mut c) = conns.remove(&t) {
                            let _ = poll.registry().deregister(&mut c.stream);
                        }
                    }
                }
            }
        }

        driver.handle_timeout(now);

        // A node still connecting would count as a failed vote: acquire once a quorum is
        // connected (or every node has tried once).
        if lock.is_none() && driver.ready() {
            let options = LockOptions::new("redlease:example:embedded", Duration::from_secs(3))
                .auto_extend(true)
                .wait(Duration::from_secs(30));
            lock = Some(driver.acquire(now, &options, token.as_bytes())?);
        }

        if let Some(lock) = lock.filter(|_| now >= stop_at && !releasing) {
            releasing = true;
            if driver.release(now, lock).is_err() {
                // Still acquiring: abandon the attempt (whatever it took is released).
                driver.cancel(now, lock)?;
            }
        }

        while let Some(event) = driver.poll_event() {
            match event {
                Event::Acquired { valid_until, attempts, .. } => {
                    println!("lock held (after {attempts} attempt(s)), valid for {:?}", valid_until - now);
                }
                Event::Extended { valid_until, .. } => println!("lock extended, valid for {:?}", valid_until - now),
                Event::AcquireFailed { error, .. } => {
                    println!("no lock: {error}");
                    return Ok(());
                }
                Event::Lost { lock: l, reason } => {
                    println!("lock lost ({reason:?}): stopping the work it protects");
                    driver.release(now, l)?;
                    releasing = true;
                }
                Event::Released { report, .. } => {
                    let how = if report.outcome == ReleaseOutcome::Released { "released" } else { "gone" };
                    println!("lock {how} ({report:?}); served {} connection(s)", next_conn - FIRST_CONN);
                    return Ok(());
                }
                Event::LinkFailed { error } => eprintln!("redis link failed: {error}"),
                _ => {}
            }
        }
    }
}
