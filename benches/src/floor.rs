//! The quorum floors, hand-written clients with no library in between: each locker has N
//! sockets of its own; a lock writes `SET key token NX PX ttl` to every node at once and is
//! decided at the first `N/2 + 1` replies, as redlease decides; an unlock is `EVALSHA` of a
//! compare-and-delete script, decided the same way. Late replies are not waited for (a node's
//! next replies skip as many as it still owes); tokens come from a userspace generator.
//! floor-async runs tokio sockets on a current-thread runtime, a socket read only while the
//! round needs it; floor-mio runs mio sockets with a `Poll` of their own, a thread per locker.
//! floor-pipelined, the ceiling of the lockers scenario, shares one mio socket per node among
//! every locker, in lockstep: each phase writes every locker's command to a node in one write
//! and reads all of that node's replies, what a client that batched perfectly would cost.

use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::marker::PhantomData;
use std::net::{SocketAddr, TcpStream};
use std::task::Poll as TaskPoll;
use std::time::{Duration, Instant};

use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};
use redis_protocol::resp2::{decode::decode_range, encode::encode_borrowed, types::BorrowedFrame, types::RangeFrame};
use redlease_servers::{RedisConn, Reply};
use tokio::io::AsyncWriteExt;

use crate::exec::{Exec, Threads, Tokio};
use crate::plan::{Plan, Scenario, TTL, own_key};
use crate::subject::{Generic, Load, Locker, Subject, Target};
use crate::usage::Usage;

/// The quorum floor of async clients.
pub const ASYNC: &str = "floor-async";
/// The quorum floor of blocking clients and mio loops.
pub const BLOCKING: &str = "floor-mio";

/// The release script: delete the key only if it holds our token.
const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
/// A round not decided in this long fails (never in a healthy run).
const ROUND_TIMEOUT: Duration = Duration::from_secs(10);

/// The two quorum floors and the pipelined ceiling, in table order.
pub fn subjects() -> Vec<Box<dyn Subject>> {
    const SEQ: &[Scenario] = &[Scenario::Sequential];
    vec![
        Box::new(Generic::new(ASYNC, ASYNC, SEQ, Floor::<Vec<tokio::net::TcpStream>>(PhantomData))),
        Box::new(Generic::new(BLOCKING, BLOCKING, SEQ, Floor::<MioSocks>(PhantomData))),
        Box::new(Generic::new("floor-pipelined", "", &[Scenario::Lockers], Floor::<MioSocks>(PhantomData))),
    ]
}

/// Append one command to `out`, RESP-encoded.
fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut frames = [const { BorrowedFrame::Null }; 8];
    for (frame, arg) in frames.iter_mut().zip(args) {
        *frame = BorrowedFrame::BulkString(arg);
    }
    let frame = BorrowedFrame::Array(&frames[..args.len()]);
    let at = out.len();
    out.resize(at + frame.encode_len(false), 0);
    encode_borrowed(&mut out[at..], &frame, false).expect("the buffer was sized for the frame");
}

/// The replies of one node: this round's votes (yes: `+OK` or `:1`), and how many replies
/// of earlier rounds it still owes (skipped).
#[derive(Debug, Default)]
struct Inbox {
    buf: Vec<u8>,
    pos: usize,
    votes: Vec<bool>,
    skip: usize,
}

impl Inbox {
    /// Take bytes read from the node.
    fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        self.buf.extend_from_slice(data);
        while let Some((frame, used)) = decode_range(&self.buf[self.pos..]).map_err(|e| e.to_string())? {
            let reply = &self.buf[self.pos..self.pos + used];
            let yes = match frame {
                RangeFrame::SimpleString((s, e)) => &reply[s..e] == b"OK",
                RangeFrame::Integer(i) => i == 1,
                RangeFrame::Error((s, e)) => return Err(String::from_utf8_lossy(&reply[s..e]).into_owned()),
                _ => false,
            };
            self.pos += used;
            match self.skip {
                0 => self.votes.push(yes),
                _ => self.skip -= 1,
            }
        }
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        Ok(())
    }
}

/// What a floor keeps besides its sockets: per-node inboxes, the commands' fixed parts, the
/// token generator, the bytes a round writes to every node (`out`) and a read buffer.
#[derive(Debug)]
struct Nodes {
    inbox: Vec<Inbox>,
    sha: Vec<u8>,
    ttl_ms: Vec<u8>,
    rng: u64,
    out: Vec<u8>,
    scratch: Vec<u8>,
}

impl Nodes {
    /// A fresh 40-hex-digit token (xorshift).
    fn token(&mut self) -> [u8; 40] {
        let mut token = [0; 40];
        for chunk in token.chunks_mut(16) {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = b"0123456789abcdef"[(self.rng >> (4 * i)) as usize & 15];
            }
        }
        token
    }

    /// Append `SET key token NX PX ttl` to `out`.
    fn set(&mut self, key: &[u8], token: &[u8]) {
        encode(&mut self.out, &[b"SET", key, token, b"NX", b"PX", &self.ttl_ms]);
    }

    /// Append the compare-and-delete of `key` for `token` to `out`.
    fn release(&mut self, key: &[u8], token: &[u8]) {
        encode(&mut self.out, &[b"EVALSHA", &self.sha, b"1", key, token]);
    }

    /// The majority.
    fn quorum(&self) -> usize {
        self.inbox.len() / 2 + 1
    }

    fn yes(&self) -> usize {
        self.inbox.iter().filter(|b| b.votes.first() == Some(&true)).count()
    }

    /// Whether a round of one command per node is decided, either way.
    fn decided(&self) -> bool {
        let no = self.inbox.iter().filter(|b| b.votes.first() == Some(&false)).count();
        self.yes() >= self.quorum() || no > self.inbox.len() - self.quorum()
    }
}

/// Connect to every node (blocking, `TCP_NODELAY`); the script is loaded over a connection
/// of the harness's own.
fn connect(urls: &[String]) -> Result<(Vec<TcpStream>, Nodes), String> {
    let (mut streams, mut sha) = (Vec::new(), Vec::new());
    for url in urls {
        let addr: SocketAddr =
            url.strip_prefix("redis://").and_then(|a| a.parse().ok()).ok_or("floors take redis://IP:PORT")?;
        let err = |e: io::Error| format!("{addr}: {e}");
        match RedisConn::connect(addr, None).and_then(|mut c| c.checked(&["SCRIPT", "LOAD", RELEASE])).map_err(err)? {
            Reply::Bulk(Some(digest)) => sha = digest,
            other => return Err(format!("{addr}: SCRIPT LOAD answered {other:?}")),
        }
        let stream = TcpStream::connect(addr).map_err(err)?;
        stream.set_nodelay(true).map_err(err)?;
        streams.push(stream);
    }
    let seed = std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(1, |d| d.as_nanos() as u64) | 1;
    let inbox = urls.iter().map(|_| Inbox::default()).collect();
    let (ttl_ms, out, scratch) = (TTL.as_millis().to_string().into_bytes(), Vec::new(), vec![0; 16 * 1024]);
    Ok((streams, Nodes { inbox, sha, ttl_ms, rng: seed, out, scratch }))
}

/// N sockets of one kind, and the runtime they need.
trait Socks: Sized + Send + 'static {
    type Exec: Exec;
    fn exec() -> Result<Self::Exec, String>;
    fn new(streams: Vec<TcpStream>) -> Result<Self, String>;
    /// Write `nodes.out` to every node and read until the round is decided.
    fn round(&mut self, nodes: &mut Nodes) -> impl Future<Output = Result<(), String>> + Send;
}

/// A quorum floor on sockets `S`: every locker connects its own; its lockers scenario is the
/// pipelined ceiling.
#[derive(Debug)]
struct Floor<S>(PhantomData<fn() -> S>);

impl<S: Socks> Target for Floor<S> {
    type Exec = S::Exec;
    type Locker = FloorLocker<S>;

    fn exec(&self) -> Result<S::Exec, String> {
        S::exec()
    }

    async fn connect(&self, _: &S::Exec, urls: &[String]) -> Result<FloorLocker<S>, String> {
        let (streams, nodes) = connect(urls)?;
        Ok(FloorLocker { socks: S::new(streams)?, nodes })
    }

    fn lockers(&self, urls: &[String], plan: &Plan, lockers: usize) -> Option<Result<Load, String>> {
        Some(pipelined(urls, plan, lockers))
    }
}

/// One locker of a floor.
#[derive(Debug)]
struct FloorLocker<S> {
    socks: S,
    nodes: Nodes,
}

impl<S: Socks> FloorLocker<S> {
    /// One round: `SET` (with `token`) or the release; the yes votes.
    async fn round(&mut self, key: &str, token: &[u8; 40], set: bool) -> Result<usize, String> {
        self.nodes.out.clear();
        match set {
            true => self.nodes.set(key.as_bytes(), token),
            false => self.nodes.release(key.as_bytes(), token),
        }
        self.socks.round(&mut self.nodes).await?;
        self.nodes.inbox.iter_mut().filter(|b| b.votes.is_empty()).for_each(|b| b.skip += 1);
        Ok(self.nodes.yes())
    }
}

impl<S: Socks> Locker for FloorLocker<S> {
    type Held = (String, [u8; 40]);

    async fn lock(&mut self, key: &str) -> Result<(String, [u8; 40]), String> {
        let token = self.nodes.token();
        match self.round(key, &token, true).await? {
            yes if yes >= self.nodes.quorum() => Ok((key.to_owned(), token)),
            yes => Err(format!("not acquired: {yes} yes (and {} released)", self.round(key, &token, false).await?)),
        }
    }

    async fn unlock(&mut self, (key, token): (String, [u8; 40])) -> Result<(), String> {
        match self.round(&key, &token, false).await? {
            yes if yes >= self.nodes.quorum() => Ok(()),
            yes => Err(format!("not released: {yes} yes")),
        }
    }
}

impl Socks for Vec<tokio::net::TcpStream> {
    type Exec = Tokio;

    fn exec() -> Result<Tokio, String> {
        Tokio::new(false)
    }

    fn new(streams: Vec<TcpStream>) -> Result<Self, String> {
        let tokio = |s: TcpStream| s.set_nonblocking(true).and_then(|()| tokio::net::TcpStream::from_std(s));
        streams.into_iter().map(|s| tokio(s).map_err(|e| e.to_string())).collect()
    }

    async fn round(&mut self, nodes: &mut Nodes) -> Result<(), String> {
        for s in self.iter_mut() {
            s.write_all(&nodes.out).await.map_err(|e| e.to_string())?;
        }
        nodes.inbox.iter_mut().for_each(|b| b.votes.clear());
        let decided = poll_fn(|cx| {
            for (i, sock) in self.iter_mut().enumerate() {
                // A socket tokio still knows to be readable is read at once; one that says
                // `WouldBlock` forgets its readiness and registers the task's waker.
                while nodes.inbox[i].votes.is_empty() {
                    match sock.poll_read_ready(cx) {
                        TaskPoll::Pending => break,
                        TaskPoll::Ready(Err(e)) => return TaskPoll::Ready(Err(e.to_string())),
                        TaskPoll::Ready(Ok(())) => {
                            if let Err(e) = take(sock.try_read(&mut nodes.scratch), nodes, i) {
                                return TaskPoll::Ready(Err(e));
                            }
                        }
                    }
                }
                if nodes.decided() {
                    return TaskPoll::Ready(Ok(()));
                }
            }
            TaskPoll::Pending
        });
        tokio::time::timeout(ROUND_TIMEOUT, decided).await.map_err(|_| "undecided after 10 s")?
    }
}

impl Socks for MioSocks {
    type Exec = Threads;

    fn exec() -> Result<Threads, String> {
        Ok(Threads)
    }

    /// Register connected sockets, readable and writable (edge-triggered).
    fn new(streams: Vec<TcpStream>) -> Result<Self, String> {
        let poll = Poll::new().map_err(|e| e.to_string())?;
        let mut socks = Vec::new();
        for (i, s) in streams.into_iter().enumerate() {
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            let mut s = MioStream::from_std(s);
            let interest = Interest::READABLE | Interest::WRITABLE;
            poll.registry().register(&mut s, Token(i), interest).map_err(|e| e.to_string())?;
            socks.push(s);
        }
        Ok(MioSocks { poll, events: Events::with_capacity(64), written: vec![0; socks.len()], socks })
    }

    async fn round(&mut self, nodes: &mut Nodes) -> Result<(), String> {
        MioSocks::round(self, nodes, Nodes::decided)
    }
}

/// N non-blocking mio sockets with a `Poll` of their own (floor-mio, floor-pipelined).
#[derive(Debug)]
struct MioSocks {
    poll: Poll,
    events: Events,
    socks: Vec<MioStream>,
    /// Bytes of the round written to each node.
    written: Vec<usize>,
}

impl MioSocks {
    /// Write `nodes.out` to every node, then serve what each poll reports until `done`;
    /// writes and reads run until `WouldBlock`.
    fn round(&mut self, nodes: &mut Nodes, done: impl Fn(&Nodes) -> bool) -> Result<(), String> {
        nodes.inbox.iter_mut().for_each(|b| b.votes.clear());
        self.written.fill(0);
        for (sock, written) in self.socks.iter_mut().zip(&mut self.written) {
            write(sock, written, &nodes.out)?;
        }
        let deadline = Instant::now() + ROUND_TIMEOUT;
        while !(self.written.iter().all(|&w| w == nodes.out.len()) && done(nodes)) {
            let left = deadline.checked_duration_since(Instant::now()).ok_or("undecided after 10 s")?;
            match self.poll.poll(&mut self.events, Some(left)) {
                Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(e.to_string()),
                _ => {}
            }
            for i in self.events.iter().map(|e| e.token().0) {
                write(&mut self.socks[i], &mut self.written[i], &nodes.out)?;
                while take(self.socks[i].read(&mut nodes.scratch), nodes, i)? {}
            }
        }
        Ok(())
    }
}

/// Take what a read from node `i` into `nodes.scratch` returned: `Ok(false)` once there is
/// nothing more to read (`WouldBlock`).
fn take(read: io::Result<usize>, nodes: &mut Nodes, i: usize) -> Result<bool, String> {
    match read {
        Ok(0) => Err("a node closed the connection".into()),
        Ok(n) => nodes.inbox[i].feed(&nodes.scratch[..n]).map(|()| true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// Write what is left of `out` to `sock`, until `WouldBlock`.
fn write(sock: &mut MioStream, written: &mut usize, out: &[u8]) -> Result<(), String> {
    while *written < out.len() {
        match sock.write(&out[*written..]) {
            Ok(n) => *written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// floor-pipelined's lockers scenario: every locker's lock in one phase, then every release.
fn pipelined(urls: &[String], plan: &Plan, lockers: usize) -> Result<Load, String> {
    let (streams, mut nodes) = connect(urls)?;
    let mut socks = <MioSocks as Socks>::new(streams)?;
    let keys: Vec<String> = (0..lockers).map(|i| own_key(i, lockers)).collect();
    let mut tokens = vec![[0u8; 40]; lockers];
    let (q, all_in) = (nodes.quorum(), |n: &Nodes| n.inbox.iter().all(|b| b.votes.len() >= lockers));
    let mut granted = vec![false; lockers];
    let (opens, mut window, mut load) = (Instant::now() + plan.load.warmup, None, Load::default());
    loop {
        let t0 = Instant::now();
        nodes.out.clear();
        for (key, token) in keys.iter().zip(&mut tokens) {
            *token = nodes.token();
            nodes.set(key.as_bytes(), token);
        }
        socks.round(&mut nodes, all_in)?;
        for (j, g) in granted.iter_mut().enumerate() {
            *g = nodes.inbox.iter().filter(|b| b.votes[j]).count() >= q;
        }
        nodes.out.clear();
        for (key, token) in keys.iter().zip(&tokens) {
            nodes.release(key.as_bytes(), token);
        }
        socks.round(&mut nodes, all_in)?;
        let (took, now) = (t0.elapsed(), Instant::now());
        if window.is_some() {
            for (j, granted) in granted.iter().enumerate() {
                let released = nodes.inbox.iter().filter(|b| b.votes[j]).count() >= q;
                load.count(if *granted && released { Ok(took) } else { Err(format!("locker {j} failed")) });
            }
        }
        match window {
            None if now >= opens => window = Some((now, Usage::now())),
            Some((at, start)) if now >= at + plan.load.length => {
                return Ok(Load { elapsed: now - at, usage: Usage::since(start), ..load });
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn commands_encode_and_replies_decode_split_anywhere() {
        let mut out = Vec::new();
        super::encode(&mut out, &[b"SET", b"k", b"t"]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nt\r\n");
        let mut inbox = super::Inbox { skip: 1, ..Default::default() };
        for byte in b"+OK\r\n$-1\r\n:1\r\n+OK\r\n:0\r\n".chunks(1) {
            inbox.feed(byte).unwrap();
        }
        assert_eq!(inbox.votes, [false, true, true, false], "the first reply was owed");
        assert!(inbox.buf.is_empty() && inbox.feed(b"-NOSCRIPT x\r\n").unwrap_err().starts_with("NOSCRIPT"));
    }
}
