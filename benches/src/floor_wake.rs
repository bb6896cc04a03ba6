//! The handoff floor, `floor-tokio-wake`: floor-tokio plus the least a lock needs to pass
//! itself from one client to a waiting one, with nothing else in between.
//!
//! - A waiter subscribes to the key's wake channel on every node (a second socket per node)
//!   before its first attempt, so no release can fall between its attempt and its wait.
//! - Each attempt of a waiting lock call is one script per node: take the key if it is free
//!   or holds our token (a reservation made for us), else join the key's queue on that node.
//! - A release removes the key only if it holds the holder's token. If the node's queue has a
//!   head, it pops it and reserves the key for it (20 ms, the adapters' default
//!   `retry.min_delay`) instead of deleting; then it publishes `holder:next`.
//! - A waiter named by a quorum of nodes retries at once. So does one named by some nodes once
//!   every node has released (the queues disagree). Otherwise it waits out 20–200 ms of
//!   jitter, as the adapters do, then retries.
//! - A failed attempt is released where it may have taken the key: everywhere, if a node
//!   granted it or had not answered when the round was decided.
//!
//! The decision and I/O are floor-tokio's (current-thread runtime, one task per locker, the
//! round decided at the quorum). It leaves out what a library needs and this bench does not:
//! queues that expire, waiters that give up and leave the queue, fencing, more than one key
//! per locker, and polling when a server refuses pub/sub.

use std::future::poll_fn;
use std::io::{self, Write};
use std::net::TcpStream as StdStream;
use std::task::Poll;
use std::time::Duration;

use redlease_core::NodeConfig;

use crate::asyncrt::{Async, AsyncLocker, AsyncTarget, LockerFactory, TokioExec};
use crate::floor::{self, FloorHeld, Reads, TokioFloorLocker};
use crate::plan::Scenario;
use crate::resp::{self, Reply};
use crate::subject::{Role, Subject};

/// A waiting attempt: take the key if it is free or ours, else join its queue.
/// `KEYS[1]` key, `KEYS[2]` queue; `ARGV[1]` token, `ARGV[2]` TTL in ms.
pub const ACQUIRE_SCRIPT: &str = "local v = redis.call('get', KEYS[1]) \
if v == false or v == ARGV[1] then \
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2]) redis.call('lrem', KEYS[2], 0, ARGV[1]) return 1 end \
if not redis.call('lpos', KEYS[2], ARGV[1]) then redis.call('rpush', KEYS[2], ARGV[1]) end \
return 0";

/// Release: if the key holds our token, reserve it for the queue's head (or delete it when
/// nobody waits) and announce `holder:next`.
/// `KEYS[1]` key, `KEYS[2]` queue; `ARGV[1]` token, `ARGV[2]` reservation in ms, `ARGV[3]`
/// the wake channel.
pub const RELEASE_SCRIPT: &str = "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end \
local nxt = redis.call('lpop', KEYS[2]) \
if nxt then redis.call('set', KEYS[1], nxt, 'px', ARGV[2]) else redis.call('del', KEYS[1]) nxt = '' end \
redis.call('publish', ARGV[3], ARGV[1] .. ':' .. nxt) \
return 1";

/// The handoff floor, as the subject list the benchmark chains after floor.rs's (the report
/// takes the first floor of each kind as the reference).
pub fn subjects() -> Vec<Box<dyn Subject>> {
    vec![Box::new(Async::new(
        "floor-tokio-wake",
        Role::Floor,
        "floor-tokio plus the least a handoff needs: a waiter queue per key on every node, a release that reserves the key for the queue's head and publishes it, waiters subscribed on a second socket per node (this module)",
        &[Scenario::Sequential, Scenario::Handoff],
        WakeFloor,
    ))]
}

/// How long a release reserves the key for the waiter it names, in ms.
const RESERVE_MS: &[u8] = b"20";

/// The handoff floor's target: a current-thread tokio runtime.
#[derive(Debug)]
pub struct WakeFloor;

/// The URLs; every locker connects its own sockets.
#[derive(Debug)]
pub struct WakeFloorUrls {
    urls: Vec<String>,
    ttl: Duration,
}

impl AsyncTarget for WakeFloor {
    type Exec = TokioExec;
    type Factory = WakeFloorUrls;

    fn exec(&self) -> Result<TokioExec, String> {
        TokioExec::current_thread()
    }

    async fn connect(&self, _exec: &TokioExec, urls: &[String], ttl: Duration) -> Result<WakeFloorUrls, String> {
        Ok(WakeFloorUrls { urls: urls.to_vec(), ttl })
    }
}

impl LockerFactory for WakeFloorUrls {
    type Locker = WakeFloorLocker;

    async fn locker(&self) -> Result<WakeFloorLocker, String> {
        let (mut streams, cmds) = floor::connect_all(&self.urls, self.ttl)?;
        let (mut acquire_sha, mut release_sha) = (Vec::new(), Vec::new());
        for (s, url) in streams.iter_mut().zip(&self.urls) {
            let at = |e: String| format!("{}: {e}", redact(url));
            acquire_sha = floor::load_script(s, ACQUIRE_SCRIPT).map_err(at)?;
            release_sha = floor::load_script(s, RELEASE_SCRIPT).map_err(at)?;
        }
        Ok(WakeFloorLocker {
            base: TokioFloorLocker::new(streams, cmds, true, Reads::UntilReply)?,
            urls: self.urls.clone(),
            acquire_sha,
            release_sha,
            subs: None,
        })
    }
}

/// A node's URL as errors show it.
fn redact(url: &str) -> String {
    NodeConfig::from_url(url).map_or_else(|_| "a node".to_owned(), |n| n.to_string())
}

/// One locker of the handoff floor: floor-tokio's sockets, and a subscriber socket per node.
#[derive(Debug)]
pub struct WakeFloorLocker {
    base: TokioFloorLocker,
    urls: Vec<String>,
    acquire_sha: Vec<u8>,
    release_sha: Vec<u8>,
    /// The subscription, made at the first waiting lock call.
    subs: Option<Subs>,
}

impl WakeFloorLocker {
    /// Put the release of `held` in the out buffer.
    fn release_cmd(&mut self, held: &FloorHeld) {
        let (queue, channel) = wake_names(&held.key);
        let base = &mut self.base;
        base.state.out.clear();
        resp::encode(
            &mut base.state.out,
            &[b"EVALSHA", &self.release_sha, b"2", &held.key, &queue, &held.token, RESERVE_MS, &channel],
        );
    }
}

impl AsyncLocker for WakeFloorLocker {
    type Held = FloorHeld;

    async fn acquire(&mut self, key: &str) -> Result<FloorHeld, String> {
        self.base.acquire(key).await
    }

    async fn acquire_wait(&mut self, key: &str) -> Result<FloorHeld, String> {
        if self.subs.as_ref().is_none_or(|s| s.key != key.as_bytes()) {
            self.subs = Some(Subs::connect(&self.urls, key)?);
        }
        let held = FloorHeld { key: key.as_bytes().to_vec(), token: self.base.state.tokens.token() };
        let (queue, _) = wake_names(&held.key);
        let need = floor::quorum(self.base.len());
        loop {
            let subs = self.subs.as_mut().expect("subscribed above");
            // Only what is announced after this attempt is sent can wake it.
            subs.drain(&held.token)?;
            let base = &mut self.base;
            base.state.out.clear();
            resp::encode(
                &mut base.state.out,
                &[b"EVALSHA", &self.acquire_sha, b"2", &held.key, &queue, &held.token, &base.state.cmds.ttl_ms],
            );
            let yes = self.base.round().await?;
            if yes >= need {
                return Ok(held);
            }
            if yes > 0 || self.base.unanswered() {
                self.release_cmd(&held);
                self.base.round().await?;
            }
            let jitter = self.base.state.tokens.jitter();
            let subs = self.subs.as_mut().expect("subscribed above");
            if let Ok(woken) = tokio::time::timeout(jitter, subs.woken(need, &held.token)).await {
                woken?;
            }
        }
    }

    async fn release(&mut self, held: FloorHeld) -> Result<(), String> {
        self.release_cmd(&held);
        let yes = self.base.round().await?;
        if yes >= floor::quorum(self.base.len()) { Ok(()) } else { Err(format!("release: {}", self.base.votes())) }
    }

    fn release_detached(&mut self, _held: FloorHeld) {
        // Never called: the floors sit out the stalled scenario.
    }
}

/// The key's queue and wake channel.
fn wake_names(key: &[u8]) -> (Vec<u8>, Vec<u8>) {
    ([key, b":floor-queue"].concat(), [b"floor-wake:", key].concat())
}

/// The subscriber sockets of one locker, and what they announced since the current attempt.
#[derive(Debug)]
struct Subs {
    key: Vec<u8>,
    socks: Vec<tokio::net::TcpStream>,
    bufs: Vec<Vec<u8>>,
    /// Per node: a release was announced since the attempt (by another holder).
    released: Vec<bool>,
    /// Per node: a release named us next.
    named: Vec<bool>,
    scratch: Vec<u8>,
}

impl Subs {
    /// Subscribe to `key`'s wake channel on every node, each confirmed before returning.
    fn connect(urls: &[String], key: &str) -> Result<Subs, String> {
        let (_, channel) = wake_names(key.as_bytes());
        let mut socks = Vec::with_capacity(urls.len());
        for url in urls {
            let at = |e: String| format!("{}: {e}", redact(url));
            let s = subscribe(url, &channel).map_err(at)?;
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            socks.push(tokio::net::TcpStream::from_std(s).map_err(|e| e.to_string())?);
        }
        let n = socks.len();
        Ok(Subs {
            key: key.as_bytes().to_vec(),
            socks,
            bufs: vec![Vec::new(); n],
            released: vec![false; n],
            named: vec![false; n],
            scratch: vec![0; 4096],
        })
    }

    /// Take in node `i`'s bytes: every whole message counts for the waiter holding `token`.
    fn feed(&mut self, i: usize, n: usize, token: &[u8]) -> Result<(), String> {
        self.bufs[i].extend_from_slice(&self.scratch[..n]);
        let mut at = 0;
        while let Some((frame, used)) = resp::parse_array(&self.bufs[i][at..])? {
            at += used;
            let [Reply::Bulk(Some(kind)), _, Reply::Bulk(Some(payload))] = frame.as_slice() else {
                continue;
            };
            if kind != b"message" {
                continue;
            }
            let (holder, next) = payload.split_at(payload.iter().position(|&b| b == b':').unwrap_or(payload.len()));
            if holder == token {
                continue; // our own cleanup
            }
            self.released[i] = true;
            self.named[i] |= next.get(1..) == Some(token);
        }
        self.bufs[i].drain(..at);
        Ok(())
    }

    /// Read whatever has arrived, then forget it: the next attempt starts afresh.
    fn drain(&mut self, token: &[u8]) -> Result<(), String> {
        for i in 0..self.socks.len() {
            loop {
                match self.socks[i].try_read(&mut self.scratch) {
                    Ok(0) => return Err("a node closed the subscription".into()),
                    Ok(n) => self.feed(i, n, token)?,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
        self.released.fill(false);
        self.named.fill(false);
        Ok(())
    }

    /// Until a quorum named us next, or every node released and some named us.
    async fn woken(&mut self, need: usize, token: &[u8]) -> Result<(), String> {
        poll_fn(|cx| {
            for i in 0..self.socks.len() {
                loop {
                    match self.socks[i].poll_read_ready(cx) {
                        Poll::Pending => break,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e.to_string())),
                        Poll::Ready(Ok(())) => match self.socks[i].try_read(&mut self.scratch) {
                            Ok(0) => return Poll::Ready(Err("a node closed the subscription".into())),
                            Ok(n) => {
                                if let Err(e) = self.feed(i, n, token) {
                                    return Poll::Ready(Err(e));
                                }
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) => return Poll::Ready(Err(e.to_string())),
                        },
                    }
                }
            }
            let named = self.named.iter().filter(|&&b| b).count();
            if named >= need || (named > 0 && self.released.iter().all(|&b| b)) {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

/// A blocking socket to `url`, subscribed to `channel` (confirmed).
fn subscribe(url: &str, channel: &[u8]) -> Result<StdStream, String> {
    let node = NodeConfig::from_url(url).map_err(|e| e.to_string())?;
    let mut s = StdStream::connect((node.host.as_str(), node.port)).map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let mut cmd = Vec::new();
    resp::encode(&mut cmd, &[b"SUBSCRIBE", channel]);
    s.write_all(&cmd).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        let n = io::Read::read(&mut s, &mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed during SUBSCRIBE".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        match resp::parse_array(&buf)? {
            Some((frame, used))
                if used == buf.len() && frame.first() == Some(&Reply::Bulk(Some(b"subscribe".to_vec()))) =>
            {
                break;
            }
            Some((frame, _)) => return Err(format!("SUBSCRIBE answered {frame:?}")),
            None => {}
        }
    }
    s.set_read_timeout(None).map_err(|e| e.to_string())?;
    Ok(s)
}
