//! An in-process TCP fault proxy in front of one node: pass, delay, blackhole or reset,
//! switchable at run time.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

/// Bytes a connection may hold back per direction before it stops reading (backpressure).
const QUEUE_LIMIT: usize = 1 << 20;

/// What the proxy does with traffic; see [`Proxy::set_mode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward bytes both ways at once.
    Pass,
    /// Forward bytes both ways, each chunk held back this long (order is kept).
    Delay(Duration),
    /// A partition that can heal: connections are accepted, nothing is forwarded either way
    /// and nothing is lost. Bytes already sent wait (in the proxy or in the kernel) and are
    /// delivered, in order, once the mode is switched back to [`Pass`](Mode::Pass) or
    /// [`Delay`](Mode::Delay) — like TCP after a healed partition. New connections are
    /// accepted but only connected upstream once healed.
    Blackhole,
    /// Reset every open connection (RST) and reset each new one right after accepting it.
    Reset,
}

#[derive(Debug, Default)]
struct Stats {
    accepted: AtomicU64,
    active: AtomicUsize,
}

/// A TCP proxy on `127.0.0.1:<free port>` forwarding to one upstream address, with faults
/// switchable at run time.
///
/// It runs on its own single-threaded tokio runtime on a background thread, so tests of any
/// runtime (tokio, smol, async-std, blocking mio) can put it between a client and a node.
/// Dropping it stops the thread and closes every connection.
///
/// ```no_run
/// use redlease_tests::{Mode, Proxy};
/// # let node_addr: std::net::SocketAddr = "127.0.0.1:6379".parse().unwrap();
/// let proxy = Proxy::start(node_addr);
/// let url = format!("redis://{}", proxy.addr()); // give this to the client
/// proxy.set_mode(Mode::Blackhole); // partition the node
/// proxy.set_mode(Mode::Pass); // heal
/// # let _ = url;
/// ```
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    mode: watch::Sender<Mode>,
    stats: Arc<Stats>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Start a proxy in [`Mode::Pass`] forwarding to `upstream`.
    ///
    /// # Panics
    ///
    /// If no loopback port can be bound or the runtime cannot start (test setup failures).
    pub fn start(upstream: SocketAddr) -> Proxy {
        Proxy::try_start(upstream).unwrap_or_else(|e| panic!("proxy for {upstream}: cannot start: {e}"))
    }

    /// Like [`start`](Self::start), returning setup errors.
    pub fn try_start(upstream: SocketAddr) -> io::Result<Proxy> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (mode, mode_rx) = watch::channel(Mode::Pass);
        let stats = Arc::new(Stats::default());
        let (shutdown, shutdown_rx) = oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let task_stats = stats.clone();
        let thread = std::thread::Builder::new().name(format!("proxy-{addr}")).spawn(move || {
            runtime.block_on(async move {
                let listener = match TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => panic!("proxy {addr}: {e}"),
                };
                tokio::select! {
                    _ = shutdown_rx => {}
                    _ = accept_loop(listener, upstream, mode_rx, task_stats) => {}
                }
            });
            // Dropping the runtime cancels every connection task and closes its sockets.
        })?;
        Ok(Proxy { addr, upstream, mode, stats, shutdown: Some(shutdown), thread: Some(thread) })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address traffic is forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Switch the mode; it applies at once to open and new connections.
    pub fn set_mode(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }

    /// Connections accepted since the start.
    pub fn accepted(&self) -> u64 {
        self.stats.accepted.load(Ordering::Relaxed)
    }

    /// Connections currently open through the proxy.
    pub fn active(&self) -> usize {
        self.stats.active.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, mode: watch::Receiver<Mode>, stats: Arc<Stats>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of file descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        if *mode.borrow() == Mode::Reset {
            reset(client);
            continue;
        }
        let stats = stats.clone();
        let mode = mode.clone();
        tokio::spawn(async move {
            stats.active.fetch_add(1, Ordering::Relaxed);
            connection(client, upstream, mode).await;
            stats.active.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Close with RST instead of FIN.
fn reset(stream: TcpStream) {
    // A zero linger makes close() send RST and return at once (it cannot block).
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// Bytes read from one side, waiting to be written to the other.
#[derive(Default)]
struct Queue {
    chunks: VecDeque<(Instant, Vec<u8>)>,
    bytes: usize,
}

impl Queue {
    fn push(&mut self, due: Instant, data: &[u8]) {
        self.bytes += data.len();
        self.chunks.push_back((due, data.to_vec()));
    }

    fn next_due(&self) -> Option<Instant> {
        self.chunks.front().map(|(due, _)| *due)
    }

    fn full(&self) -> bool {
        self.bytes >= QUEUE_LIMIT
    }

    /// Write every chunk that is due to `out`.
    async fn flush_due(&mut self, now: Instant, out: &mut TcpStream) -> io::Result<()> {
        while self.next_due().is_some_and(|d| d <= now) {
            let (_, data) = self.chunks.pop_front().expect("a chunk is due");
            self.bytes -= data.len();
            out.write_all(&data).await?;
        }
        Ok(())
    }
}

async fn connection(client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    let _ = client.set_nodelay(true);
    // Blackholed: accept but do not even connect upstream until healed.
    loop {
        let m = *mode.borrow_and_update();
        match m {
            Mode::Reset => return reset(client),
            Mode::Blackhole => {
                if mode.changed().await.is_err() {
                    return;
                }
            }
            Mode::Pass | Mode::Delay(_) => break,
        }
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        // Upstream down: the client sees its connection fail, as it would without the proxy.
        return reset(client);
    };
    let _ = server.set_nodelay(true);
    let (mut client, mut server) = (client, server);
    let (mut to_server, mut to_client) = (Queue::default(), Queue::default());
    let (mut cbuf, mut sbuf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        let m = *mode.borrow_and_update();
        if m == Mode::Reset {
            reset(client);
            reset(server);
            return;
        }
        let flowing = m != Mode::Blackhole;
        if flowing {
            let now = Instant::now();
            if to_server.flush_due(now, &mut server).await.is_err()
                || to_client.flush_due(now, &mut client).await.is_err()
            {
                return;
            }
        }
        let next_due = if flowing {
            match (to_server.next_due(), to_client.next_due()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            None
        };
        let read_client = flowing && !to_server.full();
        let read_server = flowing && !to_client.full();
        tokio::select! {
            changed = mode.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            r = client.read(&mut cbuf), if read_client => match r {
                Ok(0) | Err(_) => return,
                // The mode as of now, not as of the loop's top: a switch to Delay that
                // raced with these bytes must still delay them.
                Ok(n) => to_server.push(Instant::now() + current_delay(&mode), &cbuf[..n]),
            },
            r = server.read(&mut sbuf), if read_server => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => to_client.push(Instant::now() + current_delay(&mode), &sbuf[..n]),
            },
            _ = tokio::time::sleep_until(next_due.unwrap_or_else(Instant::now)), if next_due.is_some() => {}
        }
    }
}

/// The delay of the mode in force right now (zero unless it is `Delay`).
fn current_delay(mode: &watch::Receiver<Mode>) -> Duration {
    match *mode.borrow() {
        Mode::Delay(d) => d,
        _ => Duration::ZERO,
    }
}
