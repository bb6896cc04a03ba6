//! The peers from crates.io: `rslock` 0.10 (async, on tokio) and `redlock` 2.0 (blocking).

use std::sync::Arc;
use std::time::Duration;

use redlease_benches::asyncrt::{Async, AsyncLocker, AsyncTarget, LockerFactory, TokioExec};
use redlease_benches::blocking::{Blocking, BlockingFactory, BlockingLocker, BlockingTarget};
use redlease_benches::{Role, Scenario, Subject};

/// The peer subjects, in table order.
pub(crate) fn subjects() -> Vec<Box<dyn Subject>> {
    vec![
        Box::new(Async::new(
            "rslock",
            Role::Peer,
            "rslock 0.10 (redis-rs 1.x multiplexed connections, one per node) on a multi-thread tokio runtime; lockers are tasks",
            Scenario::WITH_HANDOFF,
            Rslock,
        )),
        Box::new(Blocking::new(
            "redlock",
            Role::Peer,
            "redlock 2.0 (blocking redis-rs 0.23, a new connection per command, nodes one after another) on OS threads of its own",
            &Scenario::ALL,
            Redlock,
        )),
    ]
}

/// rslock on a multi-thread tokio runtime.
struct Rslock;

impl AsyncTarget for Rslock {
    type Exec = TokioExec;
    type Factory = RslockLocker;

    fn exec(&self) -> Result<TokioExec, String> {
        TokioExec::multi_thread()
    }

    async fn connect(&self, _exec: &TokioExec, urls: &[String], ttl: Duration) -> Result<RslockLocker, String> {
        // Connections are opened on first use (the warm-up pays for them).
        Ok(RslockLocker { manager: rslock::LockManager::new(urls.to_vec()), ttl })
    }
}

/// A clone of one `LockManager` (they share its connections).
struct RslockLocker {
    manager: rslock::LockManager,
    ttl: Duration,
}

impl LockerFactory for RslockLocker {
    type Locker = RslockLocker;

    async fn locker(&self) -> Result<RslockLocker, String> {
        Ok(RslockLocker { manager: self.manager.clone(), ttl: self.ttl })
    }
}

impl AsyncLocker for RslockLocker {
    type Held = rslock::Lock;

    async fn acquire(&mut self, key: &str) -> Result<rslock::Lock, String> {
        self.manager.lock(key, self.ttl).await.map_err(|e| e.to_string())
    }

    async fn acquire_wait(&mut self, key: &str) -> Result<rslock::Lock, String> {
        self.manager.acquire(key, self.ttl).await.map(|guard| guard.lock).map_err(|e| e.to_string())
    }

    async fn release(&mut self, held: rslock::Lock) -> Result<(), String> {
        // rslock's unlock is best effort and reports nothing.
        self.manager.unlock(&held).await;
        Ok(())
    }

    fn release_detached(&mut self, held: rslock::Lock) {
        let manager = self.manager.clone();
        tokio::spawn(async move { manager.unlock(&held).await });
    }
}

/// redlock's blocking API on OS threads.
struct Redlock;

impl BlockingTarget for Redlock {
    type Factory = RedlockShared;

    fn connect(&self, urls: &[String], ttl: Duration) -> Result<RedlockShared, String> {
        // `Client::open` only parses the URL; redlock connects per command.
        Ok(RedlockShared { redlock: Arc::new(redlock::RedLock::new(urls.to_vec())), ttl_ms: ttl.as_millis() as usize })
    }
}

/// One `RedLock` shared by every thread.
struct RedlockShared {
    redlock: Arc<redlock::RedLock>,
    ttl_ms: usize,
}

/// A held redlock lock: its key and value (redlock's `Lock` borrows the manager).
struct RedlockHeld {
    resource: Vec<u8>,
    val: Vec<u8>,
}

impl BlockingFactory for RedlockShared {
    type Locker = RedlockShared;

    fn locker(&self) -> Result<RedlockShared, String> {
        Ok(RedlockShared { redlock: Arc::clone(&self.redlock), ttl_ms: self.ttl_ms })
    }
}

impl RedlockShared {
    fn attempt(&self, key: &str) -> Result<Option<RedlockHeld>, String> {
        match self.redlock.lock(key.as_bytes(), self.ttl_ms) {
            Ok(Some(lock)) => Ok(Some(RedlockHeld { resource: lock.resource, val: lock.val })),
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    fn unlock(&self, held: RedlockHeld) {
        let lock =
            redlock::Lock { resource: held.resource, val: held.val, validity_time: 0, lock_manager: &self.redlock };
        self.redlock.unlock(&lock);
    }
}

impl BlockingLocker for RedlockShared {
    type Held = RedlockHeld;

    fn acquire(&mut self, key: &str) -> Result<RedlockHeld, String> {
        self.attempt(key)?.ok_or_else(|| "not acquired (redlock's 3 attempts failed)".to_owned())
    }

    fn acquire_wait(&mut self, key: &str) -> Result<RedlockHeld, String> {
        loop {
            if let Some(held) = self.attempt(key)? {
                return Ok(held);
            }
        }
    }

    fn release(&mut self, held: RedlockHeld) -> Result<(), String> {
        // redlock's unlock is best effort and reports nothing.
        self.unlock(held);
        Ok(())
    }

    fn release_detached(&mut self, held: RedlockHeld) {
        // redlock has no background release: it is done here, outside the timed acquisition.
        self.unlock(held);
    }
}
