//! The floors on async-io's sockets, the ones smol and async-std hand out: floor-tokio's client
//! (same commands, same quorum rule, same handling of late replies) over
//! `smol::net::TcpStream` on a smol executor, and over `async_std::net::TcpStream` as a task
//! of async-std's global executor. They are controls for the smol and async-std rows: what the
//! runtime costs a client that does nothing else, beside what it costs redlease-smol.
//!
//! async-io has no readiness cache: a read that finds nothing is a system call, and re-arms
//! the socket in the reactor. So a socket is read only until its reply is in, as floor-tokio
//! does: the sockets a decision did not need are not read, and a later read takes the replies
//! that piled up.

use std::future::poll_fn;
use std::io;
use std::net::TcpStream as StdStream;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use futures_lite::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::asyncrt::{Async, AsyncLocker, AsyncStdExec, AsyncTarget, LockerFactory, SmolExec};
use crate::floor::{self, FloorHeld, FloorRound, FloorState, ROUND_TIMEOUT};
use crate::plan::Scenario;
use crate::subject::{Role, Subject};

/// The async-io floors, in table order (sequential only).
pub fn subjects() -> Vec<Box<dyn Subject>> {
    vec![
        Box::new(Async::new(
            "floor-smol",
            Role::Floor,
            "floor-tokio's client over smol's TcpStream (async-io), its one task on a smol::Executor that one thread runs: the runtime's own floor, a control for the smol row",
            &[Scenario::Sequential],
            IoFloor::<SmolExec>::new(),
        )),
        Box::new(Async::new(
            "floor-async-std",
            Role::Floor,
            "floor-tokio's client over async-std's TcpStream (async-io), its one task on async-std's global executor: the runtime's own floor, a control for the async-std row",
            &[Scenario::Sequential],
            IoFloor::<AsyncStdExec>::new(),
        )),
    ]
}

/// A runtime whose sockets are async-io's.
pub trait IoRuntime: crate::asyncrt::Exec + Default {
    /// The runtime's TCP stream.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Hand a connected (blocking) socket to the runtime.
    fn stream(s: StdStream) -> io::Result<Self::Stream>;
}

impl IoRuntime for SmolExec {
    type Stream = smol::net::TcpStream;

    fn stream(s: StdStream) -> io::Result<Self::Stream> {
        smol::net::TcpStream::try_from(s)
    }
}

impl IoRuntime for AsyncStdExec {
    type Stream = async_std::net::TcpStream;

    fn stream(s: StdStream) -> io::Result<Self::Stream> {
        // async-std makes it non-blocking and registers it with async-io's reactor.
        Ok(async_std::net::TcpStream::from(s))
    }
}

/// The async-io floor on runtime `E`.
#[derive(Debug)]
pub struct IoFloor<E>(std::marker::PhantomData<fn() -> E>);

impl<E> IoFloor<E> {
    /// The floor.
    pub fn new() -> Self {
        IoFloor(std::marker::PhantomData)
    }
}

impl<E> Default for IoFloor<E> {
    fn default() -> Self {
        IoFloor::new()
    }
}

/// The URLs; every locker connects its own sockets.
#[derive(Debug)]
pub struct IoFloorUrls<E> {
    urls: Vec<String>,
    ttl: Duration,
    runtime: std::marker::PhantomData<fn() -> E>,
}

impl<E: IoRuntime> AsyncTarget for IoFloor<E> {
    type Exec = E;
    type Factory = IoFloorUrls<E>;

    fn exec(&self) -> Result<E, String> {
        Ok(E::default())
    }

    async fn connect(&self, _exec: &E, urls: &[String], ttl: Duration) -> Result<IoFloorUrls<E>, String> {
        Ok(IoFloorUrls { urls: urls.to_vec(), ttl, runtime: std::marker::PhantomData })
    }
}

impl<E: IoRuntime> LockerFactory for IoFloorUrls<E> {
    type Locker = IoFloorLocker<E::Stream>;

    async fn locker(&self) -> Result<IoFloorLocker<E::Stream>, String> {
        let (streams, cmds) = floor::connect_all(&self.urls, self.ttl)?;
        let socks =
            streams.into_iter().map(|s| E::stream(s).map_err(|e| e.to_string())).collect::<Result<Vec<_>, _>>()?;
        let state = FloorState::new(cmds, socks.len(), socks.len() as u64 + 100);
        Ok(IoFloorLocker { socks, state })
    }
}

/// One locker of an async-io floor: N sockets of its own.
#[derive(Debug)]
pub struct IoFloorLocker<S> {
    socks: Vec<S>,
    state: FloorState,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> FloorRound for IoFloorLocker<S> {
    /// Write the command buffer to every node, read one reply from each until the round is decided
    /// (each socket only until its reply is in); the number of yes.
    async fn round(&mut self) -> Result<usize, String> {
        for s in &mut self.socks {
            s.write_all(&self.state.out).await.map_err(|e| e.to_string())?;
        }
        for ib in &mut self.state.inbox {
            ib.reset();
        }
        let (socks, inbox, scratch) = (&mut self.socks, &mut self.state.inbox, &mut self.state.scratch);
        let read_all = poll_fn(|cx| {
            for i in 0..socks.len() {
                let (s, ib) = (&mut socks[i], &mut inbox[i]);
                while ib.count() < 1 {
                    match Pin::new(&mut *s).poll_read(cx, scratch) {
                        Poll::Pending => break,
                        Poll::Ready(Ok(0)) => return Poll::Ready(Err("a node closed the connection".to_owned())),
                        Poll::Ready(Ok(n)) => {
                            if let Err(e) = ib.feed(&scratch[..n]) {
                                return Poll::Ready(Err(e));
                            }
                        }
                        Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e.to_string())),
                    }
                }
                if floor::decided(inbox, true) {
                    return Poll::Ready(Ok(()));
                }
            }
            Poll::Pending
        });
        // Like floor-tokio's timeout: a timer armed for every round.
        let timeout = async {
            async_io::Timer::after(ROUND_TIMEOUT).await;
            Err("no reply within 10 s".to_owned())
        };
        futures_lite::future::or(read_all, timeout).await?;
        floor::owe_late(&mut self.state.inbox);
        Ok(floor::yes_votes(&self.state.inbox))
    }

    fn state(&mut self) -> &mut FloorState {
        &mut self.state
    }

    async fn pause(delay: Duration) {
        async_io::Timer::after(delay).await;
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> AsyncLocker for IoFloorLocker<S> {
    type Held = FloorHeld;

    async fn acquire(&mut self, key: &str) -> Result<FloorHeld, String> {
        floor::acquire(self, key).await
    }

    async fn acquire_wait(&mut self, key: &str) -> Result<FloorHeld, String> {
        floor::acquire_wait(self, key).await
    }

    async fn release(&mut self, held: FloorHeld) -> Result<(), String> {
        floor::release(self, &held).await
    }

    fn release_detached(&mut self, _held: FloorHeld) {
        // Never called: the floors sit out the stalled scenario.
    }
}
