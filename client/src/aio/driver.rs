//! The driver: one future that owns the sockets, the engine and the router, and runs the
//! loop "feed input → flush transmits → re-arm the timer → deliver events".

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use redlease_core::{Config, Engine};

use super::command::{Command, Receiver};
use super::runtime::{BoxFuture, Runtime, Socket, Timer};
use crate::link::{Conn, Flush, Links, Read, ReadUntil, SocketIo, node_id};
use crate::transport::{self, Target};
use crate::{Error, Router, oneshot};

/// Reads from one socket per pass, so that one busy node cannot starve the others.
const READS_PER_PASS: usize = 16;
/// Commands taken from the queue per pass.
const COMMANDS_PER_PASS: usize = 256;
/// Passes per poll before yielding to the executor.
const PASSES_PER_POLL: usize = 64;

/// Which nodes' sockets may have something to read, so that a wake-up reads those and not
/// every socket: a read answered `Pending` registered the node's own waker, and only that
/// waker (the runtime's reactor calling it) marks the node again.
struct Readable {
    /// The task that polls the driver now.
    task: Mutex<Option<Waker>>,
    ready: Box<[AtomicBool]>,
}

impl Readable {
    fn new(nodes: usize) -> Arc<Self> {
        Arc::new(Readable { task: Mutex::new(None), ready: (0..nodes).map(|_| AtomicBool::new(false)).collect() })
    }

    fn set_task(&self, waker: &Waker) {
        crate::register_waker(&mut self.task.lock().unwrap_or_else(PoisonError::into_inner), waker);
    }

    fn mark(&self, node: usize) {
        self.ready[node].store(true, Ordering::Release);
    }

    /// Whether `node` was marked; unmarks it. An unmarked node costs a load, not a swap.
    fn take(&self, node: usize) -> bool {
        let ready = &self.ready[node];
        ready.load(Ordering::Acquire) && ready.swap(false, Ordering::AcqRel)
    }
}

/// One node's waker: mark the node readable, wake the driver's task.
struct NodeWaker {
    readable: Arc<Readable>,
    node: usize,
}

impl Wake for NodeWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.readable.mark(self.node);
        // Taken, not cloned: the first node to fire wakes the task, the others only mark
        // themselves. The task registers its waker again at the start of its next poll, before
        // it reads the marks, so a mark set after that registration wakes it again.
        let task = self.readable.task.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(task) = task {
            task.wake();
        }
    }
}

/// Reads and writes through `poll_read`/`poll_write` with one task context: `Pending` (the
/// waker is registered) is `WouldBlock` to the connection state machine.
struct Polled<'a, 'b>(&'a mut Context<'b>);

impl<S: Socket> SocketIo<S> for Polled<'_, '_> {
    fn read(&mut self, socket: &mut S, buf: &mut [u8]) -> io::Result<usize> {
        match socket.poll_read(self.0, buf) {
            Poll::Ready(result) => result,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn write(&mut self, socket: &mut S, buf: &[u8]) -> io::Result<usize> {
        match socket.poll_write(self.0, buf) {
            Poll::Ready(result) => result,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

/// The future that does all the I/O of one [`Client`](super::Client) and its clones, for callers
/// who run it themselves ([`Client::with_driver`](super::Client::with_driver)); each async
/// adapter names it for its runtime (`redlease::tokio::Driver`, `redlease::smol::Driver`).
///
/// Poll it to completion on any executor. It finishes once every client and guard is dropped
/// and every release they started is done, or once [`Client::close`](super::Client::close) is
/// done. Dropped earlier (with its runtime, when a program returns from `main` without
/// `close()`), it sends the releases of every lock still held in one non-blocking pass, and
/// marks those locks lost ([`LostReason::Stopped`](crate::LostReason::Stopped)); a key whose
/// release its socket did not take at once expires with its TTL.
#[must_use = "the client does nothing unless the driver runs"]
pub struct Driver<R: Runtime> {
    engine: Engine,
    router: Router,
    links: Links<BoxFuture<io::Result<R::Socket>>, R::Socket>,
    /// Each node's waker: its socket's reads register it.
    wakers: Vec<Waker>,
    readable: Arc<Readable>,
    commands: Receiver,
    /// Every sender is gone, or `close` was asked for: finish once the engine is idle.
    stopping: bool,
    /// When the engine was last seen idle while stopping: bytes still unsent to a silent node
    /// are not waited for beyond the node timeout.
    idle_since: Option<Instant>,
    /// The callers of `close`, answered when the driver finishes.
    closers: Vec<oneshot::Sender<()>>,
    timer: Option<R::Timer>,
    /// Where `timer` is armed, until its firing is seen: never later than the engine's
    /// timeout, and earlier when that moved on since (see `poll_timer`).
    timer_at: Option<Instant>,
    /// The task the armed timer was last polled from (it wakes that task's waker).
    timer_polled: Option<Waker>,
    /// Batching: commands taken and callers answered since the last write, and whether the
    /// driver yielded once before writing (see `poll_loop`).
    taken: usize,
    answered: usize,
    yielded: bool,
}

impl<R: Runtime> Driver<R> {
    /// Build the driver for a validated, seeded `config` and run it until a quorum of nodes is
    /// ready (connected, handshake answered), or every node's first attempt has ended, ready
    /// or failed (the rest keep connecting in the background and count as failed votes
    /// meanwhile).
    pub(crate) async fn start(config: Config, commands: Receiver) -> Result<Self, Error> {
        let transports = transport::prepare(&config)?;
        // Room for every link a cluster node may open beyond its own.
        let readable = Readable::new(transports.len() * (1 + redlease_core::cluster::MAX_MASTERS));
        let wakers = (0..transports.len())
            .map(|node| Waker::from(Arc::new(NodeWaker { readable: Arc::clone(&readable), node })))
            .collect();
        let mut driver = Driver {
            engine: Engine::new(config)?,
            router: Router::new(),
            links: Links::new(transports),
            wakers,
            readable,
            commands,
            stopping: false,
            idle_since: None,
            closers: Vec::new(),
            timer: None,
            timer_at: None,
            timer_polled: None,
            taken: 0,
            answered: 0,
            yielded: false,
        };
        poll_fn(|cx| {
            // It cannot finish here: the caller still holds the queue's only sender.
            let _ = driver.poll_loop(cx);
            if crate::connect_settled(&driver.engine, &[]) { Poll::Ready(()) } else { Poll::Pending }
        })
        .await;
        crate::connected(&driver.engine)?;
        Ok(driver)
    }

    /// See [`Runtime::DRIVER_THREAD`]: the last client handle waits up to `bound` for this
    /// driver to finish.
    pub(crate) fn linger(&self, bound: Duration) {
        self.commands.linger(bound);
    }

    fn poll_loop(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // The sockets that their own wakers marked are read.
        self.readable.set_task(cx.waker());
        for _ in 0..PASSES_PER_POLL {
            let now = Instant::now();
            // A pass does all the work it can see; `again` says whether it left some that only
            // another pass would find. Everything else registered a waker: the command
            // queue and the sockets answered `Pending`, the timer is armed.
            let taken = self.poll_commands(cx, now);
            self.taken += taken;
            let mut again = taken == COMMANDS_PER_PASS;
            again |= self.poll_nodes(cx, now);
            if self.timer_at.is_some_and(|t| t <= now) {
                // The timer armed at the engine's timeout is due (its own firing is seen
                // below, by `poll_timer`, only after this pass's work).
                self.engine.handle_timeout(now);
            }
            again |= self.sync_links(now);
            self.deliver_events(now);
            if taken > 0 && !self.yielded && self.answered > self.taken {
                // Callers answered since the last write have not all sent their next command
                // yet: yield once so that one write per node carries theirs too.
                self.yielded = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.yielded = false;
            if self.taken > 0 {
                (self.answered, self.taken) = (0, 0);
            }
            again |= self.flush(cx, now);
            // A caller's reaction to these (a release, an extension) is written next pass.
            again |= self.deliver_events(now);
            if self.stopping && self.engine.active_locks() == 0 {
                let idle_since = *self.idle_since.get_or_insert(now);
                let waited = now.saturating_duration_since(idle_since);
                if self.links.all_sent(&self.engine) || waited >= self.engine.config().node_timeout {
                    self.finish();
                    return Poll::Ready(());
                }
            }
            again |= self.poll_timer(cx, now);
            if !again {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Done: refuse further commands, drop the sockets, answer the callers of `close`.
    fn finish(&mut self) {
        self.router.stop();
        self.links.close_all(drop);
        // Closed last: a last client handle waiting for the driver's end goes on now.
        self.commands.close();
        for done in self.closers.drain(..) {
            let _ = done.send(());
        }
    }

    /// Take and apply the commands that have arrived; returns how many.
    fn poll_commands(&mut self, cx: &mut Context<'_>, now: Instant) -> usize {
        let mut taken = 0;
        while taken < COMMANDS_PER_PASS {
            match self.commands.poll_recv(cx) {
                Poll::Ready(Some(command)) => self.apply(now, command),
                Poll::Ready(None) => {
                    self.stopping = true;
                    break;
                }
                Poll::Pending => break,
            }
            taken += 1;
        }
        taken
    }

    fn apply(&mut self, now: Instant, command: Command) {
        let (router, engine) = (&mut self.router, &mut self.engine);
        match command {
            Command::Acquire { options, token, reply, span } => {
                router.acquire(engine, now, options, token, reply, span);
            }
            Command::Extend { lock, ttl, reply, span } => router.extend(engine, now, lock, ttl, reply, span),
            Command::Downgrade { lock, reply, span } => router.downgrade(engine, now, lock, reply, span),
            Command::Release { lock, reply, span } => router.release(engine, now, lock, reply, span),
            Command::AutoExtend { lock, on } => router.set_auto_extend(engine, now, lock, on),
            Command::Sweep => router.sweep(engine, now),
            Command::Health { reply } => {
                let _ = reply.send(engine.health());
            }
            Command::ReadLeader { name, reply } => router.read_leader(engine, now, &name, reply),
            Command::Watch { name, on } => router.watch(engine, now, &name, on),
            Command::ArmWake { name, reply } => router.arm_wake(&name, reply),
            Command::Close { done } => {
                router.close(engine, now);
                self.stopping = true;
                self.closers.push(done);
            }
        }
    }

    /// Drop the connections the engine failed, then start the connect attempts it asks for
    /// (the new futures are polled in the next pass).
    fn sync_links(&mut self, now: Instant) -> bool {
        let connect = |_, t: &transport::NodeTransport| {
            Ok(match &t.target {
                Target::Tcp { host, port } => R::connect(host, *port),
                Target::Unix(path) => R::connect_unix(path),
            })
        };
        let changed = self.links.sync(&mut self.engine, now, connect, drop);
        while self.wakers.len() < self.links.len() {
            let node = self.wakers.len();
            self.wakers.push(Waker::from(Arc::new(NodeWaker { readable: Arc::clone(&self.readable), node })));
        }
        changed
    }

    /// Finish connects, read what has arrived (TLS handshakes included).
    fn poll_nodes(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let mut progress = false;
        for i in 0..self.links.len() {
            match self.links.conn_mut(i) {
                Conn::Down => {}
                Conn::Connecting(attempt) => {
                    let Poll::Ready(result) = attempt.as_mut().poll(cx) else { continue };
                    progress = true;
                    match result {
                        Ok(socket) => {
                            // A socket refused here is dropped: the engine was told why.
                            let _ = self.links.connected(&mut self.engine, now, i, socket);
                            self.readable.mark(i);
                        }
                        Err(e) => self.links.connect_failed(&mut self.engine, now, i, &e.to_string()),
                    }
                }
                Conn::Tls(..) | Conn::Up(..) => {
                    if !self.readable.take(i) {
                        continue;
                    }
                    let mut node_cx = Context::from_waker(&self.wakers[i]);
                    let mut io = Polled(&mut node_cx);
                    match self.links.read(&mut self.engine, now, i, &mut io, ReadUntil::WouldBlock, READS_PER_PASS) {
                        Read::Drained => {}
                        Read::More => {
                            self.readable.mark(i);
                            progress = true;
                        }
                        Read::Lost(_) => progress = true,
                    }
                }
            }
        }
        progress
    }

    /// Write what is queued to every connected node, as far as the sockets take it.
    fn flush(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let mut progress = false;
        for i in 0..self.links.len() {
            if let Flush::Lost(_) = self.links.flush(&mut self.engine, now, i, &mut Polled(cx)) {
                progress = true;
            }
        }
        progress
    }

    /// Hand the engine's events to whoever waits for them (the router also traces them).
    fn deliver_events(&mut self, now: Instant) -> bool {
        let mut progress = false;
        while let Some(event) = self.engine.poll_event() {
            progress = true;
            self.answered += 1;
            self.router.route(&mut self.engine, now, event);
        }
        progress
    }

    /// Handle the engine's timeout if it is due (another pass then does what it asked for),
    /// else arm the one timer at it (lock timers, connect deadlines, reconnect times); report
    /// whether another pass is needed.
    fn poll_timer(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let next = self.engine.poll_timeout();
        if let Some(next) = next {
            if next <= now {
                self.engine.handle_timeout(now);
                return true;
            }
            // The timer only ever moves earlier. A deadline later than the armed one waits for
            // that one to fire (a pass that finds nothing due and re-arms it): each lock's
            // rounds push the engine's deadline later, and moving a runtime's timer costs more
            // than that pass. It never fires later than the engine asked.
            if self.timer_at.is_none_or(|at| next < at) {
                match &mut self.timer {
                    Some(timer) => timer.reset(next),
                    None => self.timer = Some(R::timer(next)),
                }
                self.timer_at = Some(next);
                self.timer_polled = None;
            }
        }
        let Some(at) = self.timer_at else { return false };
        // The armed timer is polled when it was just armed, when another task polls the driver,
        // and once its deadline has passed (so that its firing is seen and the next deadline
        // arms it again). In between, the waker it holds is the right one.
        if self.timer_polled.as_ref().is_some_and(|w| w.will_wake(cx.waker())) && at > now {
            return false;
        }
        crate::register_waker(&mut self.timer_polled, cx.waker());
        if self.timer.as_mut().is_some_and(|t| t.poll_fire(cx).is_ready()) {
            self.timer_at = None;
            return next.is_some();
        }
        false
    }
}

impl<R: Runtime> Future for Driver<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_loop(cx)
    }
}

impl<R: Runtime> Drop for Driver<R> {
    /// Dropped before it finished — usually with its runtime, when a program returns from
    /// `main` without `close()` (after dropping its guards, or with guards still alive): nobody
    /// will extend these locks any more. Release them (the releases of guards dropped just
    /// before are among them) in one non-blocking pass: what is waiting in the sockets is read
    /// first, so that the close is an orderly one, then each release goes out as far as its
    /// socket takes it at once. Nothing is waited for; a key whose release did not go out
    /// expires with its TTL. Then the holders see their locks lost and every caller still
    /// waiting sees the client closed.
    fn drop(&mut self) {
        if !self.router.is_empty() {
            let now = Instant::now();
            self.router.close(&mut self.engine, now);
            let mut cx = Context::from_waker(Waker::noop());
            for i in 0..self.links.len() {
                if let Conn::Up(..) = self.links.conn_mut(i) {
                    let mut io = Polled(&mut cx);
                    let _ = self.links.read(&mut self.engine, now, i, &mut io, ReadUntil::WouldBlock, READS_PER_PASS);
                }
            }
            let _ = self.flush(&mut cx, now);
        }
        self.router.stop();
        self.commands.close();
    }
}

impl<R: Runtime> fmt::Debug for Driver<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let up = (0..self.links.len()).filter(|&i| self.engine.is_connected(node_id(i))).count();
        f.debug_struct("Driver")
            .field("nodes", &self.links.len())
            .field("connected", &up)
            .field("locks", &self.engine.active_locks())
            .field("stopping", &self.stopping)
            .finish_non_exhaustive()
    }
}
