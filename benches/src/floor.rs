//! The floors: small hand-written clients with no library in between.
//!
//! - **floor-tokio** (async style): per locker, N tokio `TcpStream`s; `SET key token NX PX
//!   ttl` is written to every node at once, and the round is decided at the first `N/2 + 1`
//!   replies, as the adapters decide (success at a quorum of yes, failure as soon as a quorum
//!   of yes is out of reach); the release is `EVALSHA` of a compare-and-delete script (loaded
//!   beforehand) to every node, decided the same way. Late replies are not waited for: each
//!   node's socket skips as many replies as it still owes before the next round's are counted.
//!   A socket is read only while the round still needs it, so the sockets of the nodes that
//!   answer last are often not read for several rounds, and one read then takes every reply
//!   that piled up. This is the fair floor of a library that decides early.
//! - **floor-tokio-rearm**, **floor-tokio-eager** (controls, sequential only): floor-tokio
//!   reading each socket until tokio says `Pending`, and floor-tokio reading every socket the
//!   reactor reports before it decides, as the adapters' driver does (see [`Reads`]).
//! - **floor-mio** (blocking style): the same over N non-blocking mio sockets with a `Poll`
//!   of their own, one OS thread per locker. It reads every socket a poll reports before it
//!   decides.
//! - **floor-tokio-all**, **floor-mio-all**: the same clients reading every reply of every
//!   round (an extra row: slower than the quorum floors by the wait for the slowest node).
//! - **floor-pipelined** (throughput): one socket per node shared by all lockers; each phase
//!   writes every locker's command in one write per node and reads every reply (lockstep).
//!
//! The handoff floor, built on floor-tokio, is in `floor_wake.rs`.
//!
//! Tokens come from a userspace generator (no system call), and a failed attempt is
//! released on every node and retried after 20–200 ms of jitter, as the adapters do.
//! The floors sit out the stalled scenario (the all-replies ones would block on a paused node).

use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::TcpStream as StdStream;
use std::task::Poll as TaskPoll;
use std::time::{Duration, Instant};

use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};
use redlease_core::NodeConfig;
use tokio::io::{AsyncRead, AsyncWriteExt};

use crate::asyncrt::{Async, AsyncLocker, AsyncTarget, LockerFactory, TokioExec};
use crate::blocking::{Blocking, BlockingFactory, BlockingLocker, BlockingTarget};
use crate::load::{LoadState, keys};
use crate::plan::{LoadPlan, Scenario, SeqPlan, StallPlan};
use crate::resp::{self, Reply};
use crate::stats::Samples;
use crate::subject::{Common, Contention, Role, Sequential, StallLevel, Style, Subject, Throughput};

/// The floors' release script: delete the key only if it holds our token.
pub const RELEASE_SCRIPT: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// A floor gives up on a round after this long without every reply (never in a healthy run).
pub(crate) const ROUND_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes read per call.
pub(crate) const READ_CHUNK: usize = 16 * 1024;

/// The floor subjects, in table order.
pub fn subjects() -> Vec<Box<dyn Subject>> {
    const PER_LOCKER: &[Scenario] = &[Scenario::Sequential, Scenario::Scaling, Scenario::Contention];
    // The quorum floors come first: the report compares each adapter with the first floor
    // of its style.
    vec![
        Box::new(Async::new(
            "floor-tokio",
            Role::Floor,
            "N tokio TcpStreams per locker (current-thread runtime): SET NX PX to all, decide at the first N/2+1 replies (late ones skipped when their socket is next read, which may be rounds later); EVALSHA release likewise",
            PER_LOCKER,
            TokioFloor { early: true, multi_thread: false, reads: Reads::UntilReply },
        )),
        Box::new(Async::new(
            "floor-tokio-rearm",
            Role::Floor,
            "floor-tokio reading as the adapters' driver does: each socket with poll_read until tokio says Pending (the waker registered again after every reply), never a read the reactor did not report",
            &[Scenario::Sequential],
            TokioFloor { early: true, multi_thread: false, reads: Reads::UntilPending },
        )),
        Box::new(Async::new(
            "floor-tokio-eager",
            Role::Floor,
            "floor-tokio reading every reported socket before deciding, as the adapters' driver does: each round sweeps all N sockets with poll_read until tokio says Pending and decides after the sweep, so the late replies are read as they come instead of piling up on the sockets that were not needed",
            &[Scenario::Sequential],
            TokioFloor { early: true, multi_thread: false, reads: Reads::Every },
        )),
        Box::new(Blocking::new(
            "floor-mio",
            Role::Floor,
            "N non-blocking mio sockets per locker with a Poll of their own (one OS thread per locker), same commands, decides at the quorum like floor-tokio",
            PER_LOCKER,
            MioFloor { early: true },
        )),
        Box::new(Async::new(
            "floor-tokio-all",
            Role::Floor,
            "floor-tokio reading all N replies of every round before deciding",
            PER_LOCKER,
            TokioFloor { early: false, multi_thread: false, reads: Reads::UntilReply },
        )),
        Box::new(Async::new(
            "floor-tokio-mt",
            Role::Floor,
            "floor-tokio on a multi-thread runtime (one worker per core), lockers as tasks: the multi-thread runtime's own floor",
            &[Scenario::Sequential],
            TokioFloor { early: true, multi_thread: true, reads: Reads::UntilReply },
        )),
        Box::new(Blocking::new(
            "floor-mio-all",
            Role::Floor,
            "floor-mio reading all N replies of every round before deciding",
            PER_LOCKER,
            MioFloor { early: false },
        )),
        Box::new(Pipelined),
    ]
}

// ----- shared pieces -----------------------------------------------------------------------

/// Lock tokens: 40 hex characters from a xorshift generator (the floor pays no system call).
#[derive(Debug)]
pub struct Tokens(u64);

impl Tokens {
    /// A generator seeded from the clock and `salt`.
    pub fn new(salt: u64) -> Self {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        Tokens((nanos ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A fresh token.
    pub fn token(&mut self) -> [u8; 40] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 40];
        for chunk in out.chunks_mut(16) {
            let mut v = self.next_u64();
            for b in chunk {
                *b = HEX[(v & 15) as usize];
                v >>= 4;
            }
        }
        out
    }

    /// A retry delay drawn uniformly from 20–200 ms (the adapters' default jitter).
    pub fn jitter(&mut self) -> Duration {
        Duration::from_millis(20 + self.next_u64() % 181)
    }
}

/// The commands of one floor.
#[derive(Debug, Clone)]
pub(crate) struct Cmds {
    pub(crate) ttl_ms: Vec<u8>,
    sha: Vec<u8>,
}

impl Cmds {
    pub(crate) fn set(&self, out: &mut Vec<u8>, key: &[u8], token: &[u8]) {
        resp::encode(out, &[b"SET", key, token, b"NX", b"PX", &self.ttl_ms]);
    }

    pub(crate) fn release(&self, out: &mut Vec<u8>, key: &[u8], token: &[u8]) {
        resp::encode(out, &[b"EVALSHA", &self.sha, b"1", key, token]);
    }
}

/// The replies of one node in the current phase.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    buf: Vec<u8>,
    pos: usize,
    yes: Vec<bool>,
    error: Option<String>,
    /// Late replies of earlier rounds still owed by the node: skipped, not counted.
    skip: usize,
}

impl Inbox {
    pub(crate) fn reset(&mut self) {
        self.yes.clear();
        self.error = None;
    }

    pub(crate) fn count(&self) -> usize {
        self.yes.len()
    }

    pub(crate) fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        self.buf.extend_from_slice(data);
        while let Some((reply, used)) = resp::parse(&self.buf[self.pos..])? {
            self.pos += used;
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            if let Reply::Error(e) = &reply {
                self.error.get_or_insert_with(|| e.clone());
            }
            self.yes.push(reply.is_yes());
        }
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        Ok(())
    }
}

/// Connect to one node (blocking, during set-up), with `TCP_NODELAY`, and load the release
/// script; returns the socket and the script's SHA-1.
fn connect_node(url: &str) -> Result<(StdStream, Vec<u8>), String> {
    let node = NodeConfig::from_url(url).map_err(|e| e.to_string())?;
    if node.password.is_some() || node.db != 0 {
        return Err(format!("{node}: the floors do not log in or select a database"));
    }
    let at = |e: io::Error| format!("{node}: {e}");
    let mut stream = StdStream::connect((node.host.as_str(), node.port)).map_err(at)?;
    stream.set_nodelay(true).map_err(at)?;
    let sha = load_script(&mut stream, RELEASE_SCRIPT).map_err(|e| format!("{node}: {e}"))?;
    Ok((stream, sha))
}

/// Send `args` on a blocking socket and read one reply.
fn call(stream: &mut StdStream, args: &[&[u8]]) -> Result<Reply, String> {
    let mut cmd = Vec::new();
    resp::encode(&mut cmd, args);
    stream.set_read_timeout(Some(ROUND_TIMEOUT)).map_err(|e| e.to_string())?;
    stream.write_all(&cmd).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    let reply = loop {
        let n = stream.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before replying".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((reply, _)) = resp::parse(&buf)? {
            break reply;
        }
    };
    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
    Ok(reply)
}

/// `SCRIPT LOAD` `src` on a blocking socket; its SHA-1.
pub(crate) fn load_script(stream: &mut StdStream, src: &str) -> Result<Vec<u8>, String> {
    match call(stream, &[b"SCRIPT", b"LOAD", src.as_bytes()])? {
        Reply::Bulk(Some(sha)) => Ok(sha),
        other => Err(format!("SCRIPT LOAD answered {other:?}")),
    }
}

pub(crate) fn connect_all(urls: &[String], ttl: Duration) -> Result<(Vec<StdStream>, Cmds), String> {
    let mut streams = Vec::with_capacity(urls.len());
    let mut sha = Vec::new();
    for url in urls {
        let (s, h) = connect_node(url)?;
        streams.push(s);
        sha = h;
    }
    let mut ttl_ms = Vec::new();
    resp::push_usize(&mut ttl_ms, ttl.as_millis() as usize);
    Ok((streams, Cmds { ttl_ms, sha }))
}

/// A held floor lock.
#[derive(Debug)]
pub struct FloorHeld {
    pub(crate) key: Vec<u8>,
    pub(crate) token: [u8; 40],
}

pub(crate) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// Whether a round of one command per node is decided: with `early`, as soon as a quorum
/// said yes or can no longer say yes; otherwise once every node answered.
pub(crate) fn decided(inbox: &[Inbox], early: bool) -> bool {
    let n = inbox.len();
    if !early {
        return inbox.iter().all(|ib| ib.count() >= 1);
    }
    let yes = inbox.iter().filter(|ib| ib.yes.first() == Some(&true)).count();
    let no = inbox.iter().filter(|ib| ib.yes.first() == Some(&false)).count();
    yes >= quorum(n) || no > n - quorum(n)
}

/// After a decided round: every node that has not answered yet owes one reply, skipped at
/// the next round.
pub(crate) fn owe_late(inbox: &mut [Inbox]) {
    for ib in inbox {
        if ib.count() == 0 {
            ib.skip += 1;
        }
    }
}

pub(crate) fn yes_votes(inbox: &[Inbox]) -> usize {
    inbox.iter().filter(|ib| ib.yes.first() == Some(&true)).count()
}

/// Read `s` with `poll_read` until tokio says `Pending` (the task's waker is then registered),
/// feeding `ib`.
fn read_until_pending(
    s: &mut tokio::net::TcpStream,
    ib: &mut Inbox,
    scratch: &mut [u8],
    cx: &mut std::task::Context<'_>,
) -> Result<(), String> {
    loop {
        let mut buf = tokio::io::ReadBuf::new(scratch);
        match std::pin::Pin::new(&mut *s).poll_read(cx, &mut buf) {
            TaskPoll::Pending => return Ok(()),
            TaskPoll::Ready(Err(e)) => return Err(e.to_string()),
            TaskPoll::Ready(Ok(())) if buf.filled().is_empty() => return Err("a node closed the connection".to_owned()),
            TaskPoll::Ready(Ok(())) => {
                let n = buf.filled().len();
                ib.feed(&scratch[..n])?;
            }
        }
    }
}

// ----- floor-tokio -------------------------------------------------------------------------

/// The async floor on a tokio runtime; `early`: decide at the quorum.
#[derive(Debug)]
pub struct TokioFloor {
    /// Decide at the quorum (else read every reply).
    pub early: bool,
    /// On a multi-thread runtime (else current-thread).
    pub multi_thread: bool,
    /// How a round reads the sockets.
    pub reads: Reads,
}

/// How a round of floor-tokio reads its sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Each socket in turn until its reply is in, deciding after each: floor-tokio. The
    /// sockets a decision did not need are not read, and their replies pile up until a round
    /// needs them.
    UntilReply,
    /// Each socket in turn until tokio says `Pending`, deciding after each: every reply is
    /// seen through the reactor (floor-tokio-rearm).
    UntilPending,
    /// Every socket until tokio says `Pending`, deciding after the sweep, as the adapters'
    /// driver reads what the reactor reported before it hands out the decision: every late
    /// reply is read as it comes (floor-tokio-eager).
    Every,
}

/// The URLs; every locker connects its own sockets.
#[derive(Debug)]
pub struct FloorUrls {
    urls: Vec<String>,
    ttl: Duration,
    early: bool,
    reads: Reads,
}

impl AsyncTarget for TokioFloor {
    type Exec = TokioExec;
    type Factory = FloorUrls;

    fn exec(&self) -> Result<TokioExec, String> {
        if self.multi_thread { TokioExec::multi_thread() } else { TokioExec::current_thread() }
    }

    async fn connect(&self, _exec: &TokioExec, urls: &[String], ttl: Duration) -> Result<FloorUrls, String> {
        Ok(FloorUrls { urls: urls.to_vec(), ttl, early: self.early, reads: self.reads })
    }
}

impl LockerFactory for FloorUrls {
    type Locker = TokioFloorLocker;

    async fn locker(&self) -> Result<TokioFloorLocker, String> {
        let (streams, cmds) = connect_all(&self.urls, self.ttl)?;
        TokioFloorLocker::new(streams, cmds, self.early, self.reads)
    }
}

/// One locker of the async floor: N sockets of its own.
#[derive(Debug)]
pub struct TokioFloorLocker {
    socks: Vec<tokio::net::TcpStream>,
    pub(crate) state: FloorState,
    early: bool,
    /// See [`TokioFloor::reads`].
    reads: Reads,
}

impl TokioFloorLocker {
    /// A locker over connected (blocking) sockets, made non-blocking for tokio.
    pub(crate) fn new(streams: Vec<StdStream>, cmds: Cmds, early: bool, reads: Reads) -> Result<Self, String> {
        let mut socks = Vec::with_capacity(streams.len());
        for s in streams {
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            socks.push(tokio::net::TcpStream::from_std(s).map_err(|e| e.to_string())?);
        }
        let state = FloorState::new(cmds, socks.len(), socks.len() as u64);
        Ok(TokioFloorLocker { socks, state, early, reads })
    }

    /// The number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.socks.len()
    }

    /// Whether some node had not answered when the last round was decided.
    pub(crate) fn unanswered(&self) -> bool {
        self.state.inbox.iter().any(|ib| ib.count() == 0)
    }

    /// Write the command buffer (`state.out`) to every node, read one reply from each; the number of yes.
    ///
    /// How the sockets are read is [`Reads`]. With [`Reads::UntilReply`] a socket is read
    /// until its reply is in. tokio's `try_read` leaves the socket's readiness set after a read
    /// that did not drain it, so the next round reads it without waiting for the reactor to
    /// report it: the reply may be there already, or the read finds nothing (`WouldBlock`,
    /// which clears the readiness; about 2.8 such reads per cycle). With the other two, each
    /// socket is read with `poll_read` until tokio says `Pending`, as the adapters' driver
    /// does: every reply is seen through the reactor, and a read never finds nothing. With
    /// [`Reads::Every`] the late replies that came since the last round are read before the
    /// writes, and a round decides only after a sweep of every socket.
    pub(crate) async fn round(&mut self) -> Result<usize, String> {
        let reads = self.reads;
        if reads == Reads::Every {
            let (socks, inbox, scratch) = (&mut self.socks, &mut self.state.inbox, &mut self.state.scratch);
            poll_fn(|cx| {
                TaskPoll::Ready(
                    socks
                        .iter_mut()
                        .zip(inbox.iter_mut())
                        .try_for_each(|(s, ib)| read_until_pending(s, ib, scratch, cx)),
                )
            })
            .await?;
        }
        for s in &mut self.socks {
            s.write_all(&self.state.out).await.map_err(|e| e.to_string())?;
        }
        for ib in &mut self.state.inbox {
            ib.reset();
        }
        let (socks, inbox, scratch, early) =
            (&mut self.socks, &mut self.state.inbox, &mut self.state.scratch, self.early);
        let read_all = poll_fn(|cx| {
            for i in 0..socks.len() {
                let (s, ib) = (&mut socks[i], &mut inbox[i]);
                if reads == Reads::UntilReply {
                    while ib.count() < 1 {
                        match s.poll_read_ready(cx) {
                            TaskPoll::Pending => break,
                            TaskPoll::Ready(Err(e)) => return TaskPoll::Ready(Err(e.to_string())),
                            TaskPoll::Ready(Ok(())) => match s.try_read(scratch) {
                                Ok(0) => return TaskPoll::Ready(Err("a node closed the connection".to_owned())),
                                Ok(n) => {
                                    if let Err(e) = ib.feed(&scratch[..n]) {
                                        return TaskPoll::Ready(Err(e));
                                    }
                                }
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                                Err(e) => return TaskPoll::Ready(Err(e.to_string())),
                            },
                        }
                    }
                } else if let Err(e) = read_until_pending(s, ib, scratch, cx) {
                    return TaskPoll::Ready(Err(e));
                }
                if reads != Reads::Every && decided(inbox, early) {
                    return TaskPoll::Ready(Ok(()));
                }
            }
            if reads == Reads::Every && decided(inbox, early) {
                return TaskPoll::Ready(Ok(()));
            }
            TaskPoll::Pending
        });
        tokio::time::timeout(ROUND_TIMEOUT, read_all).await.map_err(|_| "no reply within 10 s".to_owned())??;
        owe_late(&mut self.state.inbox);
        Ok(yes_votes(&self.state.inbox))
    }
}

impl FloorRound for TokioFloorLocker {
    fn round(&mut self) -> impl Future<Output = Result<usize, String>> + Send {
        TokioFloorLocker::round(self)
    }

    fn pause(delay: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(delay)
    }

    fn state(&mut self) -> &mut FloorState {
        &mut self.state
    }
}

impl AsyncLocker for TokioFloorLocker {
    type Held = FloorHeld;

    async fn acquire(&mut self, key: &str) -> Result<FloorHeld, String> {
        acquire(self, key).await
    }

    async fn acquire_wait(&mut self, key: &str) -> Result<FloorHeld, String> {
        acquire_wait(self, key).await
    }

    async fn release(&mut self, held: FloorHeld) -> Result<(), String> {
        release(self, &held).await
    }

    fn release_detached(&mut self, _held: FloorHeld) {
        // Never called: the floors sit out the stalled scenario.
    }
}

impl TokioFloorLocker {
    /// The last round's votes, for an error message.
    pub(crate) fn votes(&self) -> String {
        votes(&self.state.inbox)
    }
}

pub(crate) fn votes(inbox: &[Inbox]) -> String {
    let yes = yes_votes(inbox);
    let error = inbox.iter().find_map(|ib| ib.error.as_deref());
    match error {
        Some(e) => format!("{yes} of {} nodes said yes; an error: {e}", inbox.len()),
        None => format!("{yes} of {} nodes said yes", inbox.len()),
    }
}

/// What an async floor's locker keeps besides its sockets.
#[derive(Debug)]
pub(crate) struct FloorState {
    /// The last round's replies, one inbox per node.
    pub(crate) inbox: Vec<Inbox>,
    pub(crate) cmds: Cmds,
    pub(crate) tokens: Tokens,
    /// The command a round writes to every node.
    pub(crate) out: Vec<u8>,
    /// The buffer sockets are read into.
    pub(crate) scratch: Vec<u8>,
}

impl FloorState {
    /// The state of a locker of `n` nodes; `seed` seeds its tokens and jitter.
    pub(crate) fn new(cmds: Cmds, n: usize, seed: u64) -> Self {
        FloorState {
            inbox: (0..n).map(|_| Inbox::default()).collect(),
            cmds,
            tokens: Tokens::new(seed),
            out: Vec::with_capacity(256),
            scratch: vec![0; READ_CHUNK],
        }
    }

    /// Put `key`'s release for `token` in the command buffer.
    fn set_release(&mut self, key: &[u8], token: &[u8]) {
        self.out.clear();
        self.cmds.release(&mut self.out, key, token);
    }

    /// Whether the last round's yes votes make a quorum.
    fn quorum(&self, yes: usize) -> bool {
        yes >= quorum(self.inbox.len())
    }
}

/// What the async floors' lock and release are made of: one round over the locker's own
/// sockets (each floor reads them its own way), and the state a round works on.
pub(crate) trait FloorRound: Send {
    /// Write the state's command buffer to every node and read until the round is decided;
    /// the number of yes.
    fn round(&mut self) -> impl Future<Output = Result<usize, String>> + Send;
    /// The replies, commands, tokens and buffers.
    fn state(&mut self) -> &mut FloorState;
    /// Sleep `delay` on the floor's runtime (between attempts).
    fn pause(delay: Duration) -> impl Future<Output = ()> + Send;
}

/// One attempt: `None` if no quorum (then released everywhere).
pub(crate) async fn attempt<F: FloorRound>(floor: &mut F, key: &str) -> Result<Option<FloorHeld>, String> {
    let st = floor.state();
    let held = FloorHeld { key: key.as_bytes().to_vec(), token: st.tokens.token() };
    st.out.clear();
    st.cmds.set(&mut st.out, &held.key, &held.token);
    let yes = floor.round().await?;
    if floor.state().quorum(yes) {
        return Ok(Some(held));
    }
    floor.state().set_release(&held.key, &held.token);
    floor.round().await?;
    Ok(None)
}

/// One attempt, an error if it got no quorum.
pub(crate) async fn acquire<F: FloorRound>(floor: &mut F, key: &str) -> Result<FloorHeld, String> {
    match attempt(floor, key).await? {
        Some(held) => Ok(held),
        None => Err(format!("not acquired: no quorum ({})", votes(&floor.state().inbox))),
    }
}

/// Attempt until one gets a quorum, a random delay between attempts.
pub(crate) async fn acquire_wait<F: FloorRound>(floor: &mut F, key: &str) -> Result<FloorHeld, String> {
    loop {
        if let Some(held) = attempt(floor, key).await? {
            return Ok(held);
        }
        F::pause(floor.state().tokens.jitter()).await;
    }
}

/// Release `held` on every node; an error unless a quorum said yes.
pub(crate) async fn release<F: FloorRound>(floor: &mut F, held: &FloorHeld) -> Result<(), String> {
    floor.state().set_release(&held.key, &held.token);
    let yes = floor.round().await?;
    let st = floor.state();
    if st.quorum(yes) { Ok(()) } else { Err(format!("release: {}", votes(&st.inbox))) }
}

// ----- mio sockets -------------------------------------------------------------------------

/// N non-blocking mio sockets with a `Poll` of their own; one phase at a time.
#[derive(Debug)]
pub struct MioNodes {
    poll: Poll,
    events: Events,
    socks: Vec<MioStream>,
    inbox: Vec<Inbox>,
    written: Vec<usize>,
    write_interest: Vec<bool>,
    scratch: Vec<u8>,
    cmds: Cmds,
    /// One command per node per round: decide at the quorum (see [`decided`]).
    early: bool,
}

impl MioNodes {
    /// Connect to `urls` and load the release script.
    fn connect(urls: &[String], ttl: Duration, early: bool) -> Result<MioNodes, String> {
        let (streams, cmds) = connect_all(urls, ttl)?;
        let poll = Poll::new().map_err(|e| e.to_string())?;
        let mut socks = Vec::with_capacity(streams.len());
        for (i, s) in streams.into_iter().enumerate() {
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            let mut s = MioStream::from_std(s);
            poll.registry().register(&mut s, Token(i), Interest::READABLE).map_err(|e| e.to_string())?;
            socks.push(s);
        }
        let n = socks.len();
        Ok(MioNodes {
            poll,
            events: Events::with_capacity(64),
            socks,
            inbox: (0..n).map(|_| Inbox::default()).collect(),
            written: vec![0; n],
            write_interest: vec![false; n],
            scratch: vec![0; READ_CHUNK],
            cmds,
            early,
        })
    }

    fn len(&self) -> usize {
        self.socks.len()
    }

    /// Write `out` to every node and read `want` replies from each.
    fn round(&mut self, out: &[u8], want: usize) -> Result<(), String> {
        for i in 0..self.socks.len() {
            self.inbox[i].reset();
            self.written[i] = 0;
            self.write(i, out)?;
        }
        let deadline = Instant::now() + ROUND_TIMEOUT;
        loop {
            let written = (0..self.socks.len()).all(|i| self.written[i] == out.len());
            let done = if self.early {
                written && decided(&self.inbox, true)
            } else {
                written && self.inbox.iter().all(|ib| ib.count() >= want)
            };
            if done {
                if self.early {
                    owe_late(&mut self.inbox);
                }
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("no reply within 10 s".into());
            }
            match self.poll.poll(&mut self.events, Some(left)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.to_string()),
            }
            let ready: Vec<(usize, bool, bool)> = self
                .events
                .iter()
                .map(|e| (e.token().0, e.is_writable(), e.is_readable() || e.is_read_closed() || e.is_error()))
                .collect();
            for (i, writable, readable) in ready {
                if writable && self.written[i] < out.len() {
                    self.write(i, out)?;
                }
                if readable {
                    self.read(i)?;
                }
            }
        }
    }

    /// Write as much of the rest of `out` to node `i` as it takes; ask for `WRITABLE` only
    /// while something is left.
    fn write(&mut self, i: usize, out: &[u8]) -> Result<(), String> {
        while self.written[i] < out.len() {
            match self.socks[i].write(&out[self.written[i]..]) {
                Ok(0) => return Err("a node stopped taking bytes".into()),
                Ok(n) => self.written[i] += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        let want = self.written[i] < out.len();
        if want != self.write_interest[i] {
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            self.poll.registry().reregister(&mut self.socks[i], Token(i), interest).map_err(|e| e.to_string())?;
            self.write_interest[i] = want;
        }
        Ok(())
    }

    /// Read node `i` until `WouldBlock` (edge-triggered).
    fn read(&mut self, i: usize) -> Result<(), String> {
        loop {
            match self.socks[i].read(&mut self.scratch) {
                Ok(0) => return Err("a node closed the connection".into()),
                Ok(n) => self.inbox[i].feed(&self.scratch[..n])?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

// ----- floor-mio ---------------------------------------------------------------------------

/// The blocking-style floor: mio sockets per locker; `early`: decide at the quorum.
#[derive(Debug)]
pub struct MioFloor {
    /// Decide at the quorum (else read every reply).
    pub early: bool,
}

impl BlockingTarget for MioFloor {
    type Factory = FloorUrls;

    fn connect(&self, urls: &[String], ttl: Duration) -> Result<FloorUrls, String> {
        Ok(FloorUrls { urls: urls.to_vec(), ttl, early: self.early, reads: Reads::UntilReply })
    }
}

impl BlockingFactory for FloorUrls {
    type Locker = MioFloorLocker;

    fn locker(&self) -> Result<MioFloorLocker, String> {
        let nodes = MioNodes::connect(&self.urls, self.ttl, self.early)?;
        Ok(MioFloorLocker { tokens: Tokens::new(nodes.len() as u64 + 7), nodes, out: Vec::with_capacity(256) })
    }
}

/// One locker of the blocking floor.
#[derive(Debug)]
pub struct MioFloorLocker {
    nodes: MioNodes,
    tokens: Tokens,
    out: Vec<u8>,
}

impl MioFloorLocker {
    fn yes(&self) -> usize {
        yes_votes(&self.nodes.inbox)
    }

    fn attempt(&mut self, key: &str) -> Result<Option<FloorHeld>, String> {
        let held = FloorHeld { key: key.as_bytes().to_vec(), token: self.tokens.token() };
        self.out.clear();
        self.nodes.cmds.set(&mut self.out, &held.key, &held.token);
        self.nodes.round(&self.out, 1)?;
        if self.yes() >= quorum(self.nodes.len()) {
            return Ok(Some(held));
        }
        self.out.clear();
        self.nodes.cmds.release(&mut self.out, &held.key, &held.token);
        self.nodes.round(&self.out, 1)?;
        Ok(None)
    }
}

impl BlockingLocker for MioFloorLocker {
    type Held = FloorHeld;

    fn acquire(&mut self, key: &str) -> Result<FloorHeld, String> {
        self.attempt(key)?.ok_or_else(|| format!("not acquired: no quorum ({})", votes(&self.nodes.inbox)))
    }

    fn acquire_wait(&mut self, key: &str) -> Result<FloorHeld, String> {
        loop {
            if let Some(held) = self.attempt(key)? {
                return Ok(held);
            }
            std::thread::sleep(self.tokens.jitter());
        }
    }

    fn release(&mut self, held: FloorHeld) -> Result<(), String> {
        self.out.clear();
        self.nodes.cmds.release(&mut self.out, &held.key, &held.token);
        self.nodes.round(&self.out, 1)?;
        if self.yes() >= quorum(self.nodes.len()) {
            Ok(())
        } else {
            Err(format!("release: {}", votes(&self.nodes.inbox)))
        }
    }

    fn release_detached(&mut self, held: FloorHeld) {
        // Not used (the floors sit out the stalled scenario); release and wait.
        let _ = self.release(held);
    }
}

// ----- floor-pipelined ---------------------------------------------------------------------

/// The ideal throughput client: one socket per node shared by every locker, one write per
/// node per phase, lockstep.
#[derive(Debug)]
pub struct Pipelined;

impl Subject for Pipelined {
    fn name(&self) -> &str {
        "floor-pipelined"
    }

    fn about(&self) -> String {
        "one mio socket per node shared by all lockers: each phase writes every locker's command in one write per node and reads all replies (lockstep, one thread)".into()
    }

    fn role(&self) -> Role {
        Role::Floor
    }

    fn style(&self) -> Style {
        Style::Blocking
    }

    fn supports(&self, scenario: Scenario) -> bool {
        scenario == Scenario::Throughput
    }

    fn sequential(&self, _: &[String], _: Common, _: SeqPlan) -> Result<Sequential, String> {
        Err("floor-pipelined only measures throughput".into())
    }

    fn throughput(
        &self,
        urls: &[String],
        common: Common,
        plan: LoadPlan,
        lockers: usize,
    ) -> Result<Throughput, String> {
        let mut nodes = MioNodes::connect(urls, common.ttl, false)?;
        let q = quorum(nodes.len());
        let keys: Vec<Vec<u8>> = (0..lockers).map(|i| keys::own(i).into_bytes()).collect();
        let mut tokens = Tokens::new(lockers as u64);
        let mut held = vec![[0u8; 40]; lockers];
        let mut out = Vec::with_capacity(lockers * 128);
        let mut granted = Vec::with_capacity(lockers);
        let state = LoadState::new(1);
        let mut latency = Samples::with_capacity(1 << 16);
        let mut first_error = None;
        let warm_until = Instant::now() + plan.warmup;
        let mut window = None;
        let mut window_end = None;
        loop {
            let t0 = Instant::now();
            out.clear();
            for (key, token) in keys.iter().zip(&mut held) {
                *token = tokens.token();
                nodes.cmds.set(&mut out, key, token);
            }
            nodes.round(&out, lockers)?;
            granted.clear();
            granted.extend((0..lockers).map(|j| nodes.inbox.iter().filter(|ib| ib.yes[j]).count() >= q));
            out.clear();
            for (key, token) in keys.iter().zip(&held) {
                nodes.cmds.release(&mut out, key, token);
            }
            nodes.round(&out, lockers)?;
            let took = t0.elapsed();
            let mut ok = 0;
            for (j, granted) in granted.iter().enumerate() {
                let released = nodes.inbox.iter().filter(|ib| ib.yes[j]).count() >= q;
                if *granted && released {
                    ok += 1;
                    if state.recording() {
                        latency.push(took);
                    }
                } else {
                    state.failed();
                    first_error.get_or_insert_with(|| format!("locker {j}: granted {granted}, released {released}"));
                }
            }
            state.done[0].fetch_add(ok, std::sync::atomic::Ordering::Relaxed);
            let now = Instant::now();
            match (&window, window_end) {
                (None, _) if now >= warm_until => {
                    window = Some(state.open());
                    window_end = Some(Instant::now() + plan.window);
                }
                (Some(_), Some(end)) if now >= end => break,
                _ => {}
            }
        }
        let closed = state.close(window.ok_or("the window never opened")?);
        Ok(Throughput {
            lockers,
            cycles: closed.per_locker.iter().sum(),
            elapsed: closed.elapsed,
            cpu: closed.cpu,
            latency: latency.into_dist(),
            server_cpu: closed.server_cpu,
            errors: closed.errors,
            first_error,
        })
    }

    fn stalled(
        &self,
        _: &[String],
        _: Common,
        _: &StallPlan,
        _: &mut dyn FnMut(usize),
    ) -> Result<Vec<StallLevel>, String> {
        Err("floor-pipelined only measures throughput".into())
    }

    fn contention(&self, _: &[String], _: Common, _: LoadPlan, _: usize) -> Result<Contention, String> {
        Err("floor-pipelined only measures throughput".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_hex_and_differ() {
        let mut t = Tokens::new(1);
        let (a, b) = (t.token(), t.token());
        assert_ne!(a, b);
        assert!(a.iter().all(|c| c.is_ascii_hexdigit()));
        for _ in 0..100 {
            let d = t.jitter();
            assert!(d >= Duration::from_millis(20) && d <= Duration::from_millis(200));
        }
    }

    #[test]
    fn an_inbox_takes_replies_split_anywhere() {
        let mut ib = Inbox::default();
        let stream = b"+OK\r\n$-1\r\n:1\r\n-NOSCRIPT no\r\n:0\r\n";
        for b in stream.chunks(1) {
            ib.feed(b).unwrap();
        }
        assert_eq!(ib.yes, vec![true, false, true, false, false]);
        assert_eq!(ib.error.as_deref(), Some("NOSCRIPT no"));
        assert!(ib.buf.is_empty());
    }
}
