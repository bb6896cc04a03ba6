//! The peers from crates.io, each with its defaults: `rslock` 0.10 (async, redis-rs
//! multiplexed connections, on a multi-thread tokio runtime) and `redlock` 2.0 (blocking
//! redis-rs, a new connection per command, nodes one after another, on threads).

use std::sync::Arc;

use redlease_benches::exec::{Threads, Tokio};
use redlease_benches::floor::{ASYNC, BLOCKING};
use redlease_benches::plan::{Scenario, TTL};
use redlease_benches::subject::{Generic, Locker, Subject, Target};

/// The two peers, in table order.
pub(crate) fn subjects() -> Vec<Box<dyn Subject>> {
    use Scenario::{Handoff, Lockers, Sequential, Stalled};
    vec![
        Box::new(Generic::new("rslock", ASYNC, &[Sequential, Lockers, Stalled, Handoff], Rslock)),
        // No timeout at all: a stopped node blocks its calls until it resumes.
        Box::new(Generic::new("redlock", BLOCKING, &[Sequential, Lockers, Handoff], Redlock)),
    ]
}

struct Rslock;

impl Target for Rslock {
    type Exec = Tokio;
    type Locker = RslockLocker;

    fn exec(&self) -> Result<Tokio, String> {
        Tokio::new(true)
    }

    async fn connect(&self, _: &Tokio, urls: &[String]) -> Result<RslockLocker, String> {
        Ok(RslockLocker(rslock::LockManager::new(urls.to_vec()))) // It connects on first use.
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

struct Redlock;

impl Target for Redlock {
    type Exec = Threads;
    type Locker = RedlockLocker;

    fn exec(&self) -> Result<Threads, String> {
        Ok(Threads)
    }

    async fn connect(&self, _: &Threads, urls: &[String]) -> Result<RedlockLocker, String> {
        Ok(RedlockLocker(Arc::new(redlock::RedLock::new(urls.to_vec())))) // It connects per command.
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
