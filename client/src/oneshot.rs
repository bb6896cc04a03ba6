//! A one-shot reply: the driver answers once, the caller awaits it (async) or checks it
//! (a blocking client's waiting thread). Either side may go away first.

use std::fmt;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// Make a one-shot reply: the [`Sender`] goes with the request, the [`Receiver`] stays with
/// the caller.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let inner =
        Arc::new(Inner { state: Mutex::new(State { value: None, sender: true, receiver: true, waiter: None }) });
    (Sender { inner: Arc::clone(&inner) }, Receiver { inner })
}

struct Inner<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    value: Option<T>,
    /// The sender is still there (it may still answer).
    sender: bool,
    /// The receiver still wants the answer.
    receiver: bool,
    /// The task awaiting the answer, to wake when it comes or never will.
    waiter: Option<Waker>,
}

impl<T> State<T> {
    /// The answer if it has come, `Err(Dropped)` if it never will, `None` while it may.
    fn outcome(&mut self) -> Option<Result<T, Dropped>> {
        match self.value.take() {
            Some(v) => Some(Ok(v)),
            None if !self.sender => Some(Err(Dropped)),
            None => None,
        }
    }
}

impl<T> Inner<T> {
    fn state(&self) -> MutexGuard<'_, State<T>> {
        // Only plain field updates happen under the lock: a panic cannot leave it inconsistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The answering side of a one-shot reply.
pub struct Sender<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Sender<T> {
    /// Answer; gives the value back if the receiver is gone (nobody wants it).
    pub fn send(self, value: T) -> Result<(), T> {
        let waiter = {
            let mut st = self.inner.state();
            if !st.receiver {
                return Err(value);
            }
            st.value = Some(value);
            st.waiter.take()
        };
        if let Some(waiter) = waiter {
            waiter.wake();
        }
        Ok(())
    }

    /// Whether the receiver is gone (dropped or closed).
    pub fn is_closed(&self) -> bool {
        !self.inner.state().receiver
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waiter = {
            let mut st = self.inner.state();
            st.sender = false;
            st.waiter.take()
        };
        if let Some(waiter) = waiter {
            waiter.wake();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("closed", &self.is_closed()).finish()
    }
}

/// The sender went away without answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dropped;

/// The waiting side of a one-shot reply.
pub struct Receiver<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Receiver<T> {
    /// The answer if it has come (`Some(Ok)`), `Some(Err(Dropped))` if it never will, `None`
    /// while it may still come.
    pub fn try_recv(&self) -> Option<Result<T, Dropped>> {
        self.inner.state().outcome()
    }

    /// Wait for the answer.
    pub async fn recv(&mut self) -> Result<T, Dropped> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The answer, `Err(Dropped)` if it never will come, or `Pending` with the task registered
    /// to be woken when either happens (the last task to poll is the one woken).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, Dropped>> {
        // Checked and registered under one lock, so that an answer in between is not missed.
        let mut st = self.inner.state();
        match st.outcome() {
            Some(r) => Poll::Ready(r),
            None => {
                crate::register_waker(&mut st.waiter, cx.waker());
                Poll::Pending
            }
        }
    }

    /// Stop wanting the answer; returns it if it has already come (the caller then owns it,
    /// e.g. to release a lock nobody will use). A later `send` fails.
    pub fn close(&self) -> Option<T> {
        let mut st = self.inner.state();
        st.receiver = false;
        st.value.take()
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.close();
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.inner.state();
        f.debug_struct("Receiver").field("ready", &st.value.is_some()).field("sender", &st.sender).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::*;

    #[test]
    fn an_answer_reaches_an_async_waiter_on_another_thread() {
        let (tx, mut rx) = channel();
        let t = thread::spawn(move || tx.send(7).unwrap());
        assert_eq!(crate::block_on(rx.recv()), Ok(7));
        t.join().unwrap();
        let (tx, mut rx) = channel::<u8>();
        let t = thread::spawn(move || drop(tx));
        assert_eq!(crate::block_on(rx.recv()), Err(Dropped), "a sender gone unanswered wakes the waiter");
        t.join().unwrap();
    }

    #[test]
    fn either_side_may_go_first() {
        let (tx, rx) = channel::<u8>();
        assert!(rx.try_recv().is_none());
        drop(tx);
        assert_eq!(rx.try_recv(), Some(Err(Dropped)));
        let (tx, rx) = channel();
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.send(1), Err(1), "nobody wants it: the value comes back");
        let (tx, rx) = channel();
        tx.send(2).unwrap();
        assert_eq!(rx.close(), Some(2), "an answer that came before close is handed over");
    }
}
