//! The peers from crates.io, each with its defaults: `rslock` 0.10 (async, redis-rs
//! multiplexed connections, on a multi-thread tokio runtime) and `redlock` 2.0 (blocking
//! redis-rs, a new connection per command, nodes one after another, on threads).

use std::sync::Arc;

use redlease_benches::exec::{Exec, Threads, Tokio};
use redlease_benches::floor::{ASYNC, BLOCKING};
use redlease_benches::plan::{Scenario, TTL};
use redlease_benches::subject::{Generic, Locker, Subject, Target};

/// The two peers, in table order.
pub(crate) fn subjects() -> Vec<Box<dyn Subject>> {
    use Scenario::{Handoff, Lockers, Sequential, Stalled};
    // rslock connects on first use; redlock connects per command, with no timeout at all: a
    // stopped node blocks its calls until it resumes.
    let rslock = Peer(|| Tokio::new(true), |urls| RslockLocker(rslock::LockManager::new(urls.to_vec())));
    let redlock = Peer(|| Ok(Threads), |urls| RedlockLocker(Arc::new(redlock::RedLock::new(urls.to_vec()))));
    vec![
        Box::new(Generic::new("rslock", ASYNC, &[Sequential, Lockers, Stalled, Handoff], rslock)),
        Box::new(Generic::new("redlock", BLOCKING, &[Sequential, Lockers, Handoff], redlock)),
    ]
}

/// A peer: the runtime its first function makes, and a locker made of the URLs by the second.
struct Peer<E, L>(fn() -> Result<E, String>, fn(&[String]) -> L);

impl<E: Exec, L: Locker> Target for Peer<E, L> {
    type Exec = E;
    type Locker = L;

    fn exec(&self) -> Result<E, String> {
        (self.0)()
    }

    async fn connect(&self, _: &E, urls: &[String]) -> Result<L, String> {
        Ok((self.1)(urls))
    }
}

/// A lock manager; its clones share its connections.
#[derive(Clone)]
struct RslockLocker(rslock::LockManager);

impl Locker for RslockLocker {
    type Held = rslock::Lock;

    fn fork(&self) -> Result<Self, String> {
        Ok(self.clone())
    }

    async fn lock(&mut self, key: &str) -> Result<rslock::Lock, String> {
        self.0.lock(key, TTL).await.map_err(|e| e.to_string())
    }

    async fn unlock(&mut self, held: rslock::Lock) -> Result<(), String> {
        // Best effort: rslock reports nothing.
        self.0.unlock(&held).await;
        Ok(())
    }

    async fn lock_wait(&mut self, key: &str) -> Result<rslock::Lock, String> {
        self.0.acquire(key, TTL).await.map(|guard| guard.lock).map_err(|e| e.to_string())
    }

    fn unlock_detached(&mut self, held: rslock::Lock) {
        let manager = self.0.clone();
        tokio::spawn(async move { manager.unlock(&held).await });
    }
}

/// A shared `RedLock`.
#[derive(Clone)]
struct RedlockLocker(Arc<redlock::RedLock>);

/// A held redlock lock: its key and value (redlock's `Lock` borrows the manager).
type RedlockHeld = (Vec<u8>, Vec<u8>);

impl RedlockLocker {
    fn attempt(&self, key: &str) -> Result<Option<RedlockHeld>, String> {
        let ttl_ms = TTL.as_millis() as usize;
        Ok(self.0.lock(key.as_bytes(), ttl_ms).map_err(|e| e.to_string())?.map(|l| (l.resource, l.val)))
    }
}

impl Locker for RedlockLocker {
    type Held = RedlockHeld;

    fn fork(&self) -> Result<Self, String> {
        Ok(self.clone())
    }

    async fn lock(&mut self, key: &str) -> Result<Self::Held, String> {
        self.attempt(key)?.ok_or_else(|| "not acquired in redlock's 3 attempts".to_owned())
    }

    async fn unlock(&mut self, (resource, val): Self::Held) -> Result<(), String> {
        // Best effort: redlock reports nothing.
        self.0.unlock(&redlock::Lock { resource, val, validity_time: 0, lock_manager: &self.0 });
        Ok(())
    }

    async fn lock_wait(&mut self, key: &str) -> Result<Self::Held, String> {
        loop {
            if let Some(held) = self.attempt(key)? {
                return Ok(held);
            }
        }
    }
}
