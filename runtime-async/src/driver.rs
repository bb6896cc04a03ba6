//! The driver: one future that owns the sockets and the engine and runs the loop
//! "feed input → flush transmits → re-arm the timer → deliver events".

use std::collections::HashMap;
use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender, WeakSender};
use futures_lite::Stream;
use redlease_core::{
    AcquireError, AcquireRequest, Config, Engine, Event, LinkError, LinkState, LockId, NodeId, ReleaseReport,
};

use crate::client::random_seed;
use crate::error::Error;
use crate::guard::{Guard, LockShared};
use crate::runtime::{BoxFuture, Runtime, Socket, Timer};

/// Bytes read from a socket per call.
const READ_BUF: usize = 16 * 1024;
/// Reads from one socket per pass, so that one busy node cannot starve the others.
const READS_PER_PASS: usize = 16;
/// Commands taken from the channel per pass.
const COMMANDS_PER_PASS: usize = 256;
/// Passes per poll before yielding to the executor.
const PASSES_PER_POLL: usize = 64;

/// An acquisition as the client asks for it.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) resources: Vec<String>,
    pub(crate) token: String,
    pub(crate) ttl: Duration,
    pub(crate) fencing: bool,
    pub(crate) attempts: Option<u32>,
    pub(crate) wait: Option<Duration>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) auto_extend: bool,
}

/// What clients and guards ask of the driver.
#[derive(Debug)]
pub(crate) enum Command {
    Acquire {
        request: Request,
        reply: Sender<Result<Guard, Error>>,
    },
    Extend {
        lock: LockId,
        ttl: Duration,
        reply: Sender<Result<Instant, Error>>,
    },
    Release {
        lock: LockId,
        reply: Option<Sender<Result<ReleaseReport, Error>>>,
    },
    AutoExtend {
        lock: LockId,
        on: bool,
    },
    /// An acquire future was dropped: cancel the acquisitions nobody waits for.
    Sweep,
}

/// The caller waiting for an acquisition.
struct AcquireWaiter {
    reply: Sender<Result<Guard, Error>>,
    resources: Vec<String>,
    token: String,
    started: Instant,
    wait: Option<Duration>,
    attempts: Option<u32>,
}

/// The waiter table's row for one lock.
#[derive(Default)]
struct Entry {
    acquire: Option<AcquireWaiter>,
    shared: Option<Arc<LockShared>>,
    extend: Option<Sender<Result<Instant, Error>>>,
    release: Option<Sender<Result<ReleaseReport, Error>>>,
}

/// What the driver holds for one node. When to connect, and when to give an attempt up, is
/// the engine's decision ([`Engine::poll_connect`], [`Event::LinkFailed`]).
enum Link<S> {
    /// Nothing: waiting for the engine to hand out the next attempt.
    Down,
    /// A connect attempt.
    Connecting(BoxFuture<io::Result<S>>),
    Up(S),
}

struct Node<S> {
    host: String,
    port: u16,
    /// The node's URL without its password, for log messages.
    label: String,
    link: Link<S>,
    /// The first connect attempt has finished (either way).
    tried: bool,
}

/// The future that does all the I/O of one [`Client`](crate::Client) and its clones.
///
/// Poll it to completion on any executor (the adapters' `Client::connect` starts it for you;
/// [`Client::with_driver`](crate::Client::with_driver) hands it over instead). It finishes
/// once every client and guard is dropped and every release they started is done.
#[must_use = "the client does nothing unless the driver runs"]
pub struct Driver<R: Runtime> {
    engine: Engine,
    nodes: Vec<Node<R::Socket>>,
    commands: Pin<Box<Receiver<Command>>>,
    /// For the guards the driver hands out; weak, so that it does not keep the channel open.
    weak: WeakSender<Command>,
    closed: bool,
    entries: HashMap<LockId, Entry>,
    timer: Option<R::Timer>,
    timer_at: Option<Instant>,
    buf: Box<[u8]>,
}

impl<R: Runtime> Driver<R> {
    /// Build the driver and run it until every node has connected or failed its first attempt.
    pub(crate) async fn start(
        config: Config,
        commands: Receiver<Command>,
        weak: WeakSender<Command>,
    ) -> Result<Self, Error> {
        let mut core = config;
        if core.seed == Config::DEFAULT_SEED {
            core.seed = random_seed()?;
        }
        let nodes = core
            .nodes
            .iter()
            .map(|n| Node { host: n.host.clone(), port: n.port, label: n.to_string(), link: Link::Down, tried: false })
            .collect();
        let mut driver = Driver {
            engine: Engine::new(core)?,
            nodes,
            commands: Box::pin(commands),
            weak,
            closed: false,
            entries: HashMap::new(),
            timer: None,
            timer_at: None,
            buf: vec![0; READ_BUF].into_boxed_slice(),
        };
        poll_fn(|cx| {
            // It cannot finish here: the caller still holds the channel's only sender.
            let _ = driver.poll_loop(cx);
            if driver.nodes.iter().all(|n| n.tried) { Poll::Ready(()) } else { Poll::Pending }
        })
        .await;
        Ok(driver)
    }

    fn poll_loop(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        for _ in 0..PASSES_PER_POLL {
            let now = Instant::now();
            let mut progress = self.poll_commands(cx, now);
            progress |= self.poll_nodes(cx, now);
            if self.engine.poll_timeout().is_some_and(|t| t <= now) {
                self.engine.handle_timeout(now);
            }
            progress |= self.start_connects(now);
            progress |= self.deliver_events(now);
            progress |= self.flush(cx, now);
            progress |= self.deliver_events(now);
            if self.finished() {
                return Poll::Ready(());
            }
            progress |= self.poll_timer(cx, now);
            if !progress {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Every sender is gone and nothing is left to finish.
    fn finished(&self) -> bool {
        self.closed
            && self.entries.is_empty()
            && self.engine.active_locks() == 0
            && (0..self.nodes.len()).all(|i| self.engine.poll_transmit(node_id(i)).is_none())
    }

    fn poll_commands(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let mut progress = false;
        for _ in 0..COMMANDS_PER_PASS {
            if self.closed {
                break;
            }
            match self.commands.as_mut().poll_next(cx) {
                Poll::Ready(Some(command)) => {
                    self.apply(now, command);
                    progress = true;
                }
                Poll::Ready(None) => self.closed = true,
                Poll::Pending => break,
            }
        }
        progress
    }

    fn apply(&mut self, now: Instant, command: Command) {
        match command {
            Command::Acquire { request: r, reply } => {
                let keys: Vec<&[u8]> = r.resources.iter().map(|k| k.as_bytes()).collect();
                let mut req = AcquireRequest::new(&keys, r.token.as_bytes(), r.ttl);
                req.fencing = r.fencing;
                req.attempts = r.attempts;
                req.wait = r.wait;
                req.max_hold = r.max_hold;
                req.auto_extend = r.auto_extend;
                match self.engine.acquire(now, &req) {
                    Ok(lock) => {
                        let waiter = AcquireWaiter {
                            reply,
                            resources: r.resources,
                            token: r.token,
                            started: now,
                            wait: r.wait,
                            attempts: r.attempts,
                        };
                        self.entries.insert(lock, Entry { acquire: Some(waiter), ..Entry::default() });
                    }
                    Err(misuse) => {
                        let _ = reply.try_send(Err(misuse.into()));
                    }
                }
            }
            Command::Extend { lock, ttl, reply } => match self.engine.extend(now, lock, Some(ttl)) {
                Ok(()) => self.entries.entry(lock).or_default().extend = Some(reply),
                Err(misuse) => {
                    let _ = reply.try_send(Err(misuse.into()));
                }
            },
            Command::Release { lock, reply } => match self.engine.release(now, lock) {
                Ok(()) => self.entries.entry(lock).or_default().release = reply,
                Err(misuse) => {
                    if let Some(reply) = reply {
                        let _ = reply.try_send(Err(misuse.into()));
                    }
                }
            },
            Command::AutoExtend { lock, on } => {
                // Cannot fail for a lock whose guard is alive.
                let _ = self.engine.set_auto_extend(now, lock, on);
            }
            Command::Sweep => {
                let abandoned: Vec<LockId> = self
                    .entries
                    .iter()
                    .filter(|(_, e)| e.acquire.as_ref().is_some_and(|w| w.reply.is_closed()))
                    .map(|(lock, _)| *lock)
                    .collect();
                for lock in abandoned {
                    let _ = self.engine.cancel(now, lock);
                }
            }
        }
    }

    /// Start the connect attempts the engine asks for. The new futures are polled in the
    /// next pass.
    fn start_connects(&mut self, now: Instant) -> bool {
        let mut started = false;
        while let Some(id) = self.engine.poll_connect(now) {
            let node = &mut self.nodes[id.index()];
            // Whatever was still held for the node is stale: the engine has it down.
            node.link = Link::Connecting(R::connect(&node.host, node.port));
            started = true;
        }
        started
    }

    /// Finish connects, read what has arrived.
    fn poll_nodes(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let mut progress = false;
        for i in 0..self.nodes.len() {
            let node = &mut self.nodes[i];
            let Link::Connecting(attempt) = &mut node.link else {
                progress |= self.read(cx, now, i);
                continue;
            };
            let Poll::Ready(result) = attempt.as_mut().poll(cx) else {
                continue;
            };
            progress = true;
            match result {
                Ok(socket) => {
                    log::debug!("redlease: {}: connected", node.label);
                    node.link = Link::Up(socket);
                    node.tried = true;
                    self.engine.handle_connected(now, node_id(i));
                }
                Err(e) => {
                    self.engine.handle_connect_failed(now, node_id(i), &e.to_string());
                    self.link_down(i, now, log::Level::Debug, &format_args!("connect failed: {e}"));
                }
            }
        }
        progress
    }

    fn read(&mut self, cx: &mut Context<'_>, now: Instant, i: usize) -> bool {
        let Link::Up(socket) = &mut self.nodes[i].link else {
            return false;
        };
        for _ in 0..READS_PER_PASS {
            match socket.poll_read(cx, &mut self.buf) {
                Poll::Ready(Ok(n)) if n > 0 => self.engine.handle_data(now, node_id(i), &self.buf[..n]),
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(result) => {
                    self.connection_lost(i, now, result.err(), "connection lost", "connection closed by the server");
                    return true;
                }
                Poll::Pending => return false,
            }
        }
        true
    }

    /// Write what the engine has queued to every connected node, as far as the sockets take it.
    fn flush(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let mut progress = false;
        for i in 0..self.nodes.len() {
            let Link::Up(socket) = &mut self.nodes[i].link else {
                continue;
            };
            while let Some(bytes) = self.engine.poll_transmit(node_id(i)) {
                match socket.poll_write(cx, bytes) {
                    Poll::Ready(Ok(n)) if n > 0 => self.engine.advance_transmit(node_id(i), n),
                    Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                    Poll::Ready(result) => {
                        self.connection_lost(i, now, result.err(), "write failed", "the socket takes no more bytes");
                        progress = true;
                        break;
                    }
                    Poll::Pending => break,
                }
            }
        }
        progress
    }

    /// Node `i`'s socket failed (`error`, logged after `context`) or ended (`ended`): tell the
    /// engine, close it.
    fn connection_lost(&mut self, i: usize, now: Instant, error: Option<io::Error>, context: &str, ended: &str) {
        self.engine.handle_disconnected(now, node_id(i));
        match error {
            Some(e) => self.link_down(i, now, log::Level::Warn, &format_args!("{context}: {e}")),
            None => self.link_down(i, now, log::Level::Warn, &ended),
        }
    }

    /// Close node `i`'s connection (or attempt) and log why, with the delay until the engine
    /// hands out the next attempt. The engine must already consider the link down.
    fn link_down(&mut self, i: usize, now: Instant, level: log::Level, why: &dyn fmt::Display) {
        let node = &mut self.nodes[i];
        node.link = Link::Down;
        node.tried = true;
        match self.engine.link_state(node_id(i)) {
            Some(LinkState::Down { retry_at: Some(t) }) => {
                let delay = t.saturating_duration_since(now);
                log::log!(level, "redlease: {}: {why}; reconnecting in {delay:?}", node.label);
            }
            _ => log::log!(level, "redlease: {}: {why}; reconnecting", node.label),
        }
    }

    /// Hand the engine's events to whoever waits for them.
    fn deliver_events(&mut self, now: Instant) -> bool {
        let mut progress = false;
        while let Some(event) = self.engine.poll_event() {
            progress = true;
            match event {
                Event::Acquired { lock, valid_until, fence, .. } => self.acquired(now, lock, valid_until, fence),
                Event::AcquireFailed { lock, error } => {
                    let Some(waiter) = self.entries.remove(&lock).and_then(|e| e.acquire) else {
                        continue;
                    };
                    let _ = waiter.reply.try_send(Err(acquire_error(&waiter, now, error)));
                }
                Event::Extended { lock, valid_until } => {
                    if let Some(entry) = self.entries.get_mut(&lock) {
                        if let Some(shared) = &entry.shared {
                            shared.set_valid_until(valid_until);
                        }
                        if let Some(reply) = entry.extend.take() {
                            let _ = reply.try_send(Ok(valid_until));
                        }
                    }
                }
                Event::ExtendFailed { lock, error } => {
                    if let Some(reply) = self.entries.get_mut(&lock).and_then(|e| e.extend.take()) {
                        let _ = reply.try_send(Err(error.into()));
                    }
                }
                Event::Lost { lock, reason } => {
                    if let Some(shared) = self.entries.get(&lock).and_then(|e| e.shared.as_ref()) {
                        shared.mark_lost(Some(reason));
                    }
                }
                Event::Released { lock, report } => {
                    let entry = self.entries.remove(&lock);
                    if let Some(reply) = entry.and_then(|e| e.release) {
                        let _ = reply.try_send(Ok(report));
                    }
                }
                Event::LinkFailed { error } => {
                    // The engine took the link down (and recorded the reason for the votes);
                    // close what we hold, unless a newer attempt has started since.
                    let node = error.node();
                    let down = matches!(self.engine.link_state(node), Some(LinkState::Down { .. }));
                    if down && node.index() < self.nodes.len() {
                        let level = match error {
                            LinkError::ConnectTimeout { .. } => log::Level::Debug,
                            _ => log::Level::Warn,
                        };
                        self.link_down(node.index(), now, level, &error.reason());
                    }
                }
                _ => {}
            }
        }
        progress
    }

    fn acquired(&mut self, now: Instant, lock: LockId, valid_until: Instant, fence: Option<u64>) {
        let shared = Arc::new(LockShared::new(valid_until));
        let entry = self.entries.entry(lock).or_default();
        entry.shared = Some(shared.clone());
        let waiter = entry.acquire.take();
        let tx = self.weak.upgrade();
        match (waiter, tx) {
            (Some(w), Some(tx)) if !w.reply.is_closed() => {
                let guard = Guard { tx, lock, resources: w.resources, token: w.token, fence, shared, released: false };
                // If the caller went away meanwhile, the returned guard is dropped here and
                // its drop queues the release.
                let _ = w.reply.try_send(Ok(guard));
            }
            _ => {
                // Nobody wants it any more.
                let _ = self.engine.release(now, lock);
            }
        }
    }

    /// Arm the one timer at the engine's timeout (lock timers, connect deadlines, reconnect
    /// times); report whether it fired.
    fn poll_timer(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let next = self.engine.poll_timeout();
        let Some(next) = next else {
            self.timer_at = None;
            return false;
        };
        if next <= now {
            return true;
        }
        if self.timer_at != Some(next) {
            match &mut self.timer {
                Some(timer) => timer.reset(next),
                None => self.timer = Some(R::timer(next)),
            }
            self.timer_at = Some(next);
        }
        match self.timer.as_mut().map(|t| t.poll_fire(cx)) {
            Some(Poll::Ready(())) => {
                self.timer_at = None;
                true
            }
            _ => false,
        }
    }
}

impl<R: Runtime> Future for Driver<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_loop(cx)
    }
}

impl<R: Runtime> Drop for Driver<R> {
    fn drop(&mut self) {
        // Nobody will extend these locks any more: tell their holders.
        for shared in self.entries.values().filter_map(|e| e.shared.as_ref()) {
            shared.mark_lost(None);
        }
    }
}

impl<R: Runtime> fmt::Debug for Driver<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let up = (0..self.nodes.len()).filter(|&i| self.engine.is_connected(node_id(i))).count();
        f.debug_struct("Driver")
            .field("nodes", &self.nodes.len())
            .field("connected", &up)
            .field("locks", &self.engine.active_locks())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

fn node_id(i: usize) -> NodeId {
    // The engine refuses configs with more than u16::MAX nodes.
    NodeId(i as u16)
}

/// The error for a failed acquisition: a wait bound that ran out becomes `WaitTimeout`.
fn acquire_error(waiter: &AcquireWaiter, now: Instant, error: AcquireError) -> Error {
    let attempts = match &error {
        AcquireError::Held { attempts, .. }
        | AcquireError::Unreachable { attempts, .. }
        | AcquireError::TooSlow { attempts, .. } => *attempts,
        _ => return error.into(),
    };
    let attempts_ran_out = waiter.attempts.is_some_and(|limit| attempts >= limit.max(1));
    if waiter.wait.is_some() && !attempts_ran_out {
        return Error::WaitTimeout { waited: now.saturating_duration_since(waiter.started), last: Some(error) };
    }
    error.into()
}

#[cfg(test)]
mod tests {
    use redlease_core::Vote;

    use super::*;

    fn waiter(wait: Option<Duration>, attempts: Option<u32>) -> AcquireWaiter {
        let (reply, _rx) = async_channel::bounded(1);
        let started = Instant::now();
        AcquireWaiter { reply, resources: vec!["r".into()], token: "t".into(), started, wait, attempts }
    }

    fn held(attempts: u32) -> AcquireError {
        AcquireError::Held { votes: vec![Vote::Refused; 3], attempts }
    }

    #[test]
    fn a_wait_bound_that_runs_out_is_a_wait_timeout_carrying_the_last_error() {
        let w = waiter(Some(Duration::from_millis(300)), None);
        match acquire_error(&w, w.started + Duration::from_millis(310), held(7)) {
            Error::WaitTimeout { waited, last } => {
                assert_eq!(waited, Duration::from_millis(310));
                assert_eq!(last, Some(held(7)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn attempts_running_out_first_or_no_wait_bound_keep_the_acquire_error() {
        let w = waiter(Some(Duration::from_secs(10)), Some(2));
        assert!(matches!(acquire_error(&w, w.started, held(2)), Error::Acquire(AcquireError::Held { .. })));
        let w = waiter(None, None);
        assert!(matches!(acquire_error(&w, w.started, held(3)), Error::Acquire(AcquireError::Held { .. })));
        let w = waiter(Some(Duration::from_secs(1)), None);
        assert!(matches!(
            acquire_error(&w, w.started, AcquireError::Cancelled),
            Error::Acquire(AcquireError::Cancelled)
        ));
    }
}
