//! What clients and guards ask of the driver, and the queue that carries it.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::router::{AcquireReply, ExtendReply, ReleaseReply};
use redlease_core::{Health, LockId, LockOptions};
use tracing::Span;

/// One request to the driver; each answer goes back on the one-shot reply it carries.
#[derive(Debug)]
pub(crate) enum Command {
    /// `span`, as in `Extend` and `Release`: the operation's span, made by the caller (a child
    /// of the caller's span); the driver records the outcome on it.
    Acquire {
        options: LockOptions,
        token: String,
        reply: AcquireReply,
        span: Span,
    },
    Extend {
        lock: LockId,
        ttl: Duration,
        reply: ExtendReply,
        span: Span,
    },
    Downgrade {
        lock: LockId,
        reply: ExtendReply,
        span: Span,
    },
    /// `reply: None`: a dropped guard; nobody waits for the report.
    Release {
        lock: LockId,
        reply: Option<ReleaseReply>,
        span: Span,
    },
    AutoExtend {
        lock: LockId,
        on: bool,
    },
    /// An acquire future was dropped: cancel the acquisitions nobody waits for.
    Sweep,
    /// The health view of the nodes, as the engine sees them now.
    Health {
        reply: crate::oneshot::Sender<Health>,
    },
    /// Read who leads an election.
    ReadLeader {
        name: String,
        reply: crate::router::LeaderReply,
    },
    /// Start or stop watching an election for an observer.
    Watch {
        name: String,
        on: bool,
    },
    /// Tell `reply` at the next release message of a watched election.
    ArmWake {
        name: String,
        reply: crate::router::WakeReply,
    },
    /// Close the client; `done` is answered once the driver has finished.
    Close {
        done: crate::oneshot::Sender<()>,
    },
}

/// The driver's command queue: a sender per client and guard, one receiver, the driver.
///
/// A mutex around a queue and the driver's waker: a call takes it once to push, the driver
/// once per command to pop. Nothing is allocated per command or per wait.
pub(crate) fn queue() -> (Sender, Receiver) {
    let queue = Queue { commands: VecDeque::new(), senders: 1, closed: false, driver: None, linger: None };
    let shared = Arc::new(Mutex::new(queue));
    (Sender { shared: Arc::clone(&shared) }, Receiver { shared })
}

/// Whether the driver has finished, for a last sender that waits for it.
#[derive(Debug, Default)]
struct Finished {
    done: Mutex<bool>,
    signal: Condvar,
}

impl Finished {
    fn set(&self) {
        *self.done.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.signal.notify_all();
    }

    /// Wait until set, or `bound` passes.
    fn wait(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        while !*done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            done = self.signal.wait_timeout(done, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

struct Queue {
    commands: VecDeque<Command>,
    /// Live senders: at zero nothing more can come.
    senders: usize,
    /// The receiver closed the queue or is gone: sends are refused.
    closed: bool,
    /// The driver's task, to wake when a command arrives or the last sender goes.
    driver: Option<Waker>,
    /// For a driver on a thread of its own ([`Receiver::linger`]): how long the last sender
    /// waits for it to finish, and the signal that it has.
    linger: Option<(Duration, Arc<Finished>)>,
}

fn lock(shared: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    // Only plain field updates happen under the lock: a panic cannot leave it inconsistent.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A command was refused: the driver is gone or closed its queue.
#[derive(Debug)]
pub(crate) struct Closed;

/// The sending side: cloned into every client and guard.
pub(crate) struct Sender {
    shared: Arc<Mutex<Queue>>,
}

impl Sender {
    /// Queue `command` for the driver; refused if the driver is gone or closed the queue (the
    /// command is dropped, and with it its reply, so its caller sees the client closed).
    pub(crate) fn send(&self, command: Command) -> Result<(), Closed> {
        let (driver, refused) = {
            let mut q = lock(&self.shared);
            if q.closed {
                (None, Some(command))
            } else {
                q.commands.push_back(command);
                (q.driver.take(), None)
            }
        };
        // Dropped outside the lock: a reply's drop wakes its caller.
        if refused.is_some() {
            return Err(Closed);
        }
        if let Some(driver) = driver {
            driver.wake();
        }
        Ok(())
    }

    /// Whether sends are refused now.
    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.shared).closed
    }
}

impl Clone for Sender {
    fn clone(&self) -> Self {
        lock(&self.shared).senders += 1;
        Sender { shared: Arc::clone(&self.shared) }
    }
}

impl Drop for Sender {
    /// The last sender gone, the driver finishes (once the releases it has are done). A driver
    /// on a thread of its own is waited for, within a bound, so that a program returning from
    /// `main` right after dropping its last client or guard does not end the process before
    /// the releases are out.
    fn drop(&mut self) {
        let (driver, linger) = {
            let mut q = lock(&self.shared);
            q.senders -= 1;
            if q.senders > 0 {
                return;
            }
            (q.driver.take(), q.linger.clone())
        };
        if let Some(driver) = driver {
            driver.wake();
        }
        if let Some((bound, finished)) = linger {
            finished.wait(bound);
        }
    }
}

/// The driver's side.
pub(crate) struct Receiver {
    shared: Arc<Mutex<Queue>>,
}

impl Receiver {
    /// The next command; `Ready(None)` once every sender is gone (or the queue is closed) and
    /// nothing is left. `Pending` registers the task to wake.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Command>> {
        let mut q = lock(&self.shared);
        if let Some(command) = q.commands.pop_front() {
            return Poll::Ready(Some(command));
        }
        if q.senders == 0 || q.closed {
            return Poll::Ready(None);
        }
        crate::register_waker(&mut q.driver, cx.waker());
        Poll::Pending
    }

    /// Refuse further sends, and drop what is still queued: each command's reply is dropped,
    /// so its caller sees the client closed instead of waiting forever.
    pub(crate) fn close(&self) {
        let (queued, linger) = {
            let mut q = lock(&self.shared);
            q.closed = true;
            q.driver = None;
            (std::mem::take(&mut q.commands), q.linger.take())
        };
        // Dropped outside the lock: a reply's drop wakes its caller.
        drop(queued);
        if let Some((_, finished)) = linger {
            finished.set();
        }
    }

    /// The driver runs on a thread of its own, which a returning `main` does not wait for:
    /// the last sender to go waits up to `bound` for it to finish (see [`Sender`]'s drop).
    pub(crate) fn linger(&self, bound: Duration) {
        let mut q = lock(&self.shared);
        if !q.closed {
            q.linger = Some((bound, Arc::new(Finished::default())));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.close();
    }
}
