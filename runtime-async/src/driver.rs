//! The driver: one future that owns the sockets, the engine and the router, and runs the
//! loop "feed input → flush transmits → re-arm the timer → deliver events".

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use redlease_client::transport::{self, Layer, NodeTransport, Target};
use redlease_client::{Error, Router, oneshot};
use redlease_core::{Config, Engine, NodeId};

use crate::command::{Command, Receiver};
use crate::runtime::{BoxFuture, Runtime, Socket, Timer};

/// Bytes read from a socket per call.
const READ_BUF: usize = 16 * 1024;
/// Reads from one socket per pass, so that one busy node cannot starve the others.
const READS_PER_PASS: usize = 16;
/// Commands taken from the queue per pass.
const COMMANDS_PER_PASS: usize = 256;
/// Passes per poll before yielding to the executor.
const PASSES_PER_POLL: usize = 64;

/// What the driver holds for one node. When to connect, and when to drop a connection, is
/// the engine's decision ([`Engine::poll_connect`], [`Engine::poll_close`]).
enum Link<S> {
    /// Nothing: waiting for the engine to hand out the next attempt.
    Down,
    /// A connect attempt.
    Connecting(BoxFuture<io::Result<S>>),
    /// Connected, in the TLS handshake: the engine still counts it as connecting (its connect
    /// timeout bounds the handshake).
    Handshaking(S, Layer),
    /// Connected (and past the TLS handshake): the engine's link.
    Up(S, Layer),
}

struct Node<S> {
    transport: NodeTransport,
    link: Link<S>,
    /// The waker its socket's reads register: it marks the node readable, then wakes the
    /// driver's task ([`Readable`]).
    waker: Waker,
}

/// Which nodes' sockets may have something to read, so that a wake-up reads those and not
/// every socket: a read answered `Pending` registered the node's own waker, and only that
/// waker (the runtime's reactor calling it) marks the node again.
struct Readable {
    /// The task that polls the driver now.
    task: Mutex<Option<Waker>>,
    ready: Box<[AtomicBool]>,
}

impl Readable {
    /// Remember the task to wake; every node starts marked (nothing registered yet).
    fn new(nodes: usize) -> Arc<Self> {
        Arc::new(Readable { task: Mutex::new(None), ready: (0..nodes).map(|_| AtomicBool::new(true)).collect() })
    }

    fn set_task(&self, waker: &Waker) {
        redlease_client::register_waker(&mut self.task.lock().unwrap_or_else(PoisonError::into_inner), waker);
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
        // The waker is taken, not cloned: the first node to fire wakes the task, and the
        // others, finding the slot empty, only mark themselves. The task registers its waker
        // again at the start of its next poll, before it reads the marks, so a mark set after
        // that registration wakes it again.
        let task = self.readable.task.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(task) = task {
            task.wake();
        }
    }
}

/// The future that does all the I/O of one [`Client`](crate::Client) and its clones.
///
/// Poll it to completion on any executor (the adapters' `Client::connect` starts it for you;
/// [`Client::with_driver`](crate::Client::with_driver) hands it over instead). It finishes
/// once every client and guard is dropped and every release they started is done, or once
/// [`Client::close`](crate::Client::close) is done. Dropped earlier, it marks every lock still
/// held lost ([`LostReason::Stopped`](redlease_core::LostReason::Stopped)).
#[must_use = "the client does nothing unless the driver runs"]
pub struct Driver<R: Runtime> {
    engine: Engine,
    router: Router,
    nodes: Vec<Node<R::Socket>>,
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
    buf: Box<[u8]>,
    /// Plaintext out of a TLS session, on its way to the engine.
    plain: Vec<u8>,
    /// The driver yielded once since new commands arrived, before writing them.
    yielded: bool,
    /// Engine events routed to callers since new commands were last written: roughly, the
    /// callers answered that may be about to send their next command.
    answered: usize,
    /// Commands taken since new commands were last written.
    taken: usize,
}

impl<R: Runtime> Driver<R> {
    /// Build the driver for a validated, seeded `config` and run it until a quorum of nodes is
    /// ready (connected, handshake answered), or every node's first attempt has ended, ready
    /// or failed (the rest keep connecting in the background and count as failed votes
    /// meanwhile).
    pub(crate) async fn start(config: Config, commands: Receiver) -> Result<Self, Error> {
        let transports = transport::prepare(&config)?;
        let readable = Readable::new(transports.len());
        let nodes = transports
            .into_iter()
            .enumerate()
            .map(|(node, t)| Node {
                transport: t,
                link: Link::Down,
                waker: Waker::from(Arc::new(NodeWaker { readable: Arc::clone(&readable), node })),
            })
            .collect();
        let mut driver = Driver {
            engine: Engine::new(config)?,
            router: Router::new(),
            nodes,
            readable,
            commands,
            stopping: false,
            idle_since: None,
            closers: Vec::new(),
            timer: None,
            timer_at: None,
            timer_polled: None,
            buf: vec![0; READ_BUF].into_boxed_slice(),
            plain: Vec::new(),
            yielded: false,
            answered: 0,
            taken: 0,
        };
        poll_fn(|cx| {
            // It cannot finish here: the caller still holds the queue's only sender.
            let _ = driver.poll_loop(cx);
            if redlease_client::connect_settled(&driver.engine, &[]) { Poll::Ready(()) } else { Poll::Pending }
        })
        .await;
        redlease_client::require_all(&driver.engine)?;
        Ok(driver)
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
                // Other callers were answered since the last write and have not sent their
                // next command yet: let them queue it, so that one write per node carries them
                // all (yield once). On a multi-thread executor the caller that woke the driver
                // is often the only one that ran, and writing at once costs every server a
                // read per command. A lone caller is not made to wait: on tokio's
                // multi-thread runtime the yield cost it 5.2 thread sleeps per lock+unlock
                // instead of 0.9 (measured; most likely another worker steals the yielded
                // driver, so each command wakes a thread on each side).
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
                if self.all_sent() || waited >= self.engine.config().node_timeout {
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

    fn all_sent(&self) -> bool {
        (0..self.nodes.len()).all(|i| {
            let layer_done = match &self.nodes[i].link {
                Link::Up(_, layer) => !layer.has_pending(),
                _ => true,
            };
            layer_done && self.engine.poll_transmit(node_id(i)).is_none()
        })
    }

    /// Done: refuse further commands, drop the sockets, answer the callers of `close`.
    fn finish(&mut self) {
        self.refuse_commands();
        self.router.stop();
        for node in &mut self.nodes {
            node.link = Link::Down;
        }
        for done in self.closers.drain(..) {
            let _ = done.send(());
        }
    }

    /// Close the queue and drop what is still in it: each command's reply is dropped, so its
    /// caller sees the client closed instead of waiting forever.
    fn refuse_commands(&mut self) {
        self.commands.close();
    }

    /// Take and apply the commands that have arrived; returns how many.
    fn poll_commands(&mut self, cx: &mut Context<'_>, now: Instant) -> usize {
        let mut taken = 0;
        for _ in 0..COMMANDS_PER_PASS {
            match self.commands.poll_recv(cx) {
                Poll::Ready(Some(command)) => {
                    self.apply(now, command);
                    taken += 1;
                }
                Poll::Ready(None) => {
                    self.stopping = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        taken
    }

    fn apply(&mut self, now: Instant, command: Command) {
        let (router, engine) = (&mut self.router, &mut self.engine);
        match command {
            Command::Acquire { options, token, reply } => {
                router.acquire(engine, now, options, token, reply);
            }
            Command::Extend { lock, ttl, reply } => router.extend(engine, now, lock, ttl, reply),
            Command::Release { lock, reply } => router.release(engine, now, lock, reply),
            Command::AutoExtend { lock, on } => router.set_auto_extend(engine, now, lock, on),
            Command::Sweep => router.sweep(engine, now),
            Command::Health { reply } => {
                let _ = reply.send(engine.health());
            }
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
        let mut changed = false;
        while let Some(node) = self.engine.poll_close() {
            // A connection the engine failed is reset, so that nothing it still carries runs
            // on the server after the next connection's commands.
            if let Link::Up(socket, _) | Link::Handshaking(socket, _) =
                std::mem::replace(&mut self.nodes[node.index()].link, Link::Down)
            {
                redlease_client::sockets::reset_on_close(&socket);
            }
            changed = true;
        }
        while let Some(node) = self.engine.poll_connect(now) {
            let node = &mut self.nodes[node.index()];
            node.link = Link::Connecting(match &node.transport.target {
                Target::Tcp { host, port } => R::connect(host, *port),
                Target::Unix(path) => R::connect_unix(path),
            });
            changed = true;
        }
        changed
    }

    /// Finish connects and TLS handshakes, read what has arrived.
    fn poll_nodes(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let mut progress = false;
        for i in 0..self.nodes.len() {
            match &mut self.nodes[i].link {
                Link::Down => {}
                Link::Up(..) => {
                    if self.readable.take(i) {
                        progress |= self.read(now, i);
                    }
                }
                Link::Handshaking(..) => progress |= self.handshake(cx, now, i),
                Link::Connecting(attempt) => {
                    let Poll::Ready(result) = attempt.as_mut().poll(cx) else {
                        continue;
                    };
                    progress = true;
                    let node = &mut self.nodes[i];
                    match result.map_err(|e| e.to_string()).and_then(|s| Ok((s, node.transport.layer()?))) {
                        Ok((socket, layer)) if layer.is_handshaking() => {
                            node.link = Link::Handshaking(socket, layer);
                            self.handshake(cx, now, i);
                        }
                        Ok((socket, layer)) => {
                            node.link = Link::Up(socket, layer);
                            self.readable.mark(i);
                            self.engine.handle_connected(now, node_id(i));
                        }
                        Err(e) => {
                            node.link = Link::Down;
                            self.engine.handle_connect_failed(now, node_id(i), &e);
                        }
                    }
                }
            }
        }
        progress
    }

    /// Move node `i`'s TLS handshake on: write its records, read the server's. Once it is
    /// done the engine hears of the connection; if it fails, of a failed connect attempt.
    fn handshake(&mut self, cx: &mut Context<'_>, now: Instant, i: usize) -> bool {
        let Link::Handshaking(socket, layer) = &mut self.nodes[i].link else {
            return false;
        };
        // The handshake is moved on at every pass, woken or not: its first read asks the
        // kernel (a `WouldBlock` per pass while the server has not answered yet).
        socket.before_reads();
        let mut progress = false;
        let failed = loop {
            if let Some((out, from)) = layer.next_write(&mut self.engine, node_id(i), true) {
                match socket.poll_write(cx, out) {
                    Poll::Ready(Ok(n)) if n > 0 => {
                        layer.wrote(&mut self.engine, node_id(i), from, n);
                        progress = true;
                        continue;
                    }
                    Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Poll::Ready(Ok(_)) => break Some("the socket takes no bytes".to_owned()),
                    Poll::Ready(Err(e)) => break Some(format!("write failed: {e}")),
                    Poll::Pending => {}
                }
            }
            if !layer.is_handshaking() {
                break None;
            }
            match socket.poll_read(cx, &mut self.buf) {
                Poll::Ready(Ok(0)) => {
                    break Some("the server closed the connection during the TLS handshake".to_owned());
                }
                Poll::Ready(Ok(n)) => {
                    progress = true;
                    // Nothing comes for the engine before the handshake is done: the server
                    // speaks only when spoken to.
                    if let Err(e) = layer.input(&self.buf[..n], &mut self.plain, |_| {}) {
                        break Some(e);
                    }
                }
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => break Some(format!("connection lost during the TLS handshake: {e}")),
                Poll::Pending => return progress,
            }
        };
        let Link::Handshaking(socket, layer) = std::mem::replace(&mut self.nodes[i].link, Link::Down) else {
            return true;
        };
        match failed {
            None => {
                self.nodes[i].link = Link::Up(socket, layer);
                self.readable.mark(i);
                self.engine.handle_connected(now, node_id(i));
            }
            Some(why) => self.engine.handle_connect_failed(now, node_id(i), &why),
        }
        true
    }

    /// Read node `i` until its socket has nothing more (its waker is then registered) or the
    /// pass's share is used up (it stays marked).
    fn read(&mut self, now: Instant, i: usize) -> bool {
        let Node { link: Link::Up(socket, layer), waker, .. } = &mut self.nodes[i] else {
            return false;
        };
        let mut cx = Context::from_waker(waker);
        socket.before_reads();
        for _ in 0..READS_PER_PASS {
            match socket.poll_read(&mut cx, &mut self.buf) {
                Poll::Ready(Ok(n)) if n > 0 => {
                    let engine = &mut self.engine;
                    let fed = layer.input(&self.buf[..n], &mut self.plain, |p| engine.handle_data(now, node_id(i), p));
                    if let Err(why) = fed {
                        self.connection_lost(i, now, None, "", &why);
                        return true;
                    }
                }
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(result) => {
                    self.connection_lost(i, now, result.err(), "connection lost", "connection closed by the server");
                    return true;
                }
                Poll::Pending => return false,
            }
        }
        self.readable.mark(i);
        true
    }

    /// Write what the engine has queued to every connected node, as far as the sockets take it.
    fn flush(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let mut progress = false;
        for i in 0..self.nodes.len() {
            let Link::Up(socket, layer) = &mut self.nodes[i].link else {
                continue;
            };
            while let Some((bytes, from)) = layer.next_write(&mut self.engine, node_id(i), false) {
                match socket.poll_write(cx, bytes) {
                    Poll::Ready(Ok(n)) if n > 0 => {
                        layer.wrote(&mut self.engine, node_id(i), from, n);
                        if socket.read_after_write() {
                            self.readable.mark(i);
                            progress = true;
                        }
                    }
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

    /// Node `i`'s socket failed (`error`, after `context`) or ended (`ended`): close it, tell
    /// the engine why (the router reports it).
    fn connection_lost(&mut self, i: usize, now: Instant, error: Option<io::Error>, context: &str, ended: &str) {
        self.nodes[i].link = Link::Down;
        let reason = match error {
            Some(e) => format!("{context}: {e}"),
            None => ended.to_owned(),
        };
        self.engine.handle_disconnected(now, node_id(i), &reason);
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
        // and once its deadline has passed (even if nothing is waited for any more, so that
        // its firing is seen and the next deadline arms it again). In between, the waker it
        // holds is the right one and polling it again would change nothing.
        if self.timer_polled.as_ref().is_some_and(|w| w.will_wake(cx.waker())) && at > now {
            return false;
        }
        redlease_client::register_waker(&mut self.timer_polled, cx.waker());
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
    fn drop(&mut self) {
        // Nobody will extend these locks any more: tell their holders, and every caller still
        // waiting.
        self.refuse_commands();
        self.router.stop();
    }
}

impl<R: Runtime> fmt::Debug for Driver<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let up = (0..self.nodes.len()).filter(|&i| self.engine.is_connected(node_id(i))).count();
        f.debug_struct("Driver")
            .field("nodes", &self.nodes.len())
            .field("connected", &up)
            .field("locks", &self.engine.active_locks())
            .field("stopping", &self.stopping)
            .finish_non_exhaustive()
    }
}

fn node_id(i: usize) -> NodeId {
    // The engine refuses configs with more than u16::MAX nodes.
    NodeId(i as u16)
}
