//! The redlease adapters, each with the bench config (node timeout 50 ms, 3 attempts
//! 20–200 ms apart, wake-on-release on) and one client shared by every locker; each locks a
//! mutex, one permit of a semaphore of 4 (`…-sem4`), a read lock (`…-read`), or a mutex whose
//! grants wait for each node's replica (`…-replicas`).

use std::time::Duration;

use redlease_core::{Config, ReleaseOutcome, Retry, TlsSettings, Transport};

use crate::exec::{AsyncStd, Exec, Smol, Threads, Tokio};
use crate::floor::{ASYNC, BLOCKING};
use crate::generic::{Generic, Locker, Target};
use crate::plan::{Scenario, Shape, WAIT};
use crate::subject::Subject;

/// The five adapters run through [`Generic`], in table order (the embedded mio driver's
/// subject is `embedded::subject`), then two of them on a semaphore of 4 and with a read lock,
/// and one on nodes with replicas, each paired with its own mutex.
pub fn subjects() -> Vec<Box<dyn Subject>> {
    use Scenario::{Handoff, Lockers, Sequential, Stalled, Tls};
    use Shape::{Mutex, Read, Replicated};
    const ALL: &[Scenario] = &[Sequential, Lockers, Stalled, Handoff];
    const WITH_TLS: &[Scenario] = &[Sequential, Lockers, Stalled, Handoff, Tls];
    const SEM: &[Scenario] = &[Sequential, Handoff];
    let sem4 = Shape::Semaphore(4);
    vec![
        Box::new(Generic::new("tokio-mt", ASYNC, WITH_TLS, TokioAdapter(|| Tokio::new(true), Mutex))),
        Box::new(Generic::new("tokio-ct", ASYNC, ALL, TokioAdapter(|| Tokio::new(false), Mutex))),
        Box::new(Generic::new("smol", ASYNC, ALL, SmolAdapter(|| Ok(Smol::default()), Mutex))),
        Box::new(Generic::new("async-std", ASYNC, ALL, SmolAdapter(|| Ok(AsyncStd), Mutex))),
        Box::new(Generic::new("mio-blocking", BLOCKING, ALL, MioBlocking(Mutex))),
        Box::new(Generic::new("tokio-mt-sem4", "tokio-mt", SEM, TokioAdapter(|| Tokio::new(true), sem4))),
        Box::new(Generic::new("mio-blocking-sem4", "mio-blocking", SEM, MioBlocking(sem4))),
        Box::new(Generic::new("tokio-mt-read", "tokio-mt", &[Sequential], TokioAdapter(|| Tokio::new(true), Read))),
        Box::new(Generic::new("mio-blocking-read", "mio-blocking", &[Sequential], MioBlocking(Read))),
        Box::new(Generic::new(
            "tokio-mt-replicas",
            "tokio-mt",
            &[Sequential],
            TokioAdapter(|| Tokio::new(true), Replicated),
        )),
    ]
}

/// The config for `urls`: the defaults, except 3 attempts 20–200 ms apart instead of waiting
/// up to 10 s (what the peers do); the benchmark's TLS nodes are trusted through their CA.
pub fn config(urls: &[String]) -> Result<Config, String> {
    config_for(urls, Shape::Mutex)
}

/// [`config`], for a subject locking `shape`: [`Shape::Replicated`] nodes count a grant once
/// one replica has it (within 20 ms, what `?min_replicas=1` gives).
fn config_for(urls: &[String], shape: Shape) -> Result<Config, String> {
    let retry = Retry::new(3, Duration::from_millis(20), Duration::from_millis(200));
    let mut config = Config::from_urls(urls).map_err(|e| e.to_string())?.retry(retry);
    if shape == Shape::Replicated {
        config.nodes = config.nodes.into_iter().map(|n| n.min_replicas(1, Duration::from_millis(20))).collect();
    }
    for node in config.nodes.iter_mut().filter(|n| n.transport == Transport::Tls) {
        let files = redlease_cluster::tls_files_for(node.port).ok_or("a TLS node of no cluster of this run")?;
        node.tls = Some(TlsSettings::new().ca_file(&files.ca));
    }
    Ok(config)
}

/// A release report's outcome as the bench wants it.
pub(crate) fn released(outcome: ReleaseOutcome) -> Result<(), String> {
    match outcome {
        ReleaseOutcome::Released => Ok(()),
        other => Err(format!("not released: {other:?}")),
    }
}

/// A clone of a client and what it locks, its calls awaited (`[.await]`) or not (`[]`).
macro_rules! locker {
    ($locker:ident, $krate:ident, [$($aw:tt)*]) => {
        #[doc = concat!("A clone of a `", stringify!($krate), "` client, and what it locks.")]
        #[derive(Debug)]
        pub struct $locker($krate::Client, Shape);

        impl Locker for $locker {
            type Held = $krate::Guard;

            async fn lock(&mut self, key: &str) -> Result<$krate::Guard, String> {
                self.0.lock_with(self.1.options(key))$($aw)*.map_err(|e| e.to_string())
            }

            async fn unlock(&mut self, held: $krate::Guard) -> Result<(), String> {
                released(held.release()$($aw)*.map_err(|e| e.to_string())?.outcome)
            }

            async fn lock_wait(&mut self, key: &str) -> Result<$krate::Guard, String> {
                self.0.lock_with(self.1.options(key).wait(WAIT))$($aw)*.map_err(|e| e.to_string())
            }

            fn slot(held: &$krate::Guard) -> u16 {
                held.permits().first().copied().unwrap_or(0)
            }
        }
    };
}

/// An async adapter: its client (`with_driver`, the driver spawned on the runtime the
/// function makes, as `with_config` does) and a clone of it per locker, locking the shape
/// given. The two crates name their types alike.
macro_rules! async_adapter {
    ($target:ident, $locker:ident, $krate:ident) => {
        #[doc = concat!("`", stringify!($krate), "` on the runtime its function makes.")]
        #[derive(Debug)]
        pub struct $target<E>(pub fn() -> Result<E, String>, pub Shape);

        impl<E: Exec> Target for $target<E> {
            type Exec = E;
            type Client = $krate::Client;
            type Locker = $locker;

            fn exec(&self) -> Result<E, String> {
                (self.0)()
            }

            async fn connect(&self, exec: &E, urls: &[String]) -> Result<$krate::Client, String> {
                let (client, driver) =
                    $krate::Client::with_driver(config_for(urls, self.1)?).await.map_err(|e| e.to_string())?;
                exec.detach(driver);
                Ok(client)
            }

            fn locker(&self, client: &$krate::Client) -> Result<$locker, String> {
                Ok($locker(client.clone(), self.1))
            }

            fn shape(&self) -> Shape {
                self.1
            }
        }

        locker!($locker, $krate, [.await]);
    };
}

async_adapter!(TokioAdapter, TokioLocker, redlease_tokio);
async_adapter!(SmolAdapter, SmolLocker, redlease_smol);

/// redlease-mio's blocking client, a clone per locker thread, locking the shape given.
#[derive(Debug)]
pub struct MioBlocking(pub Shape);

impl Target for MioBlocking {
    type Exec = Threads;
    type Client = redlease_mio::Client;
    type Locker = MioLocker;

    fn exec(&self) -> Result<Threads, String> {
        Ok(Threads)
    }

    async fn connect(&self, _: &Threads, urls: &[String]) -> Result<redlease_mio::Client, String> {
        redlease_mio::Client::with_config(config_for(urls, self.0)?).map_err(|e| e.to_string())
    }

    fn locker(&self, client: &redlease_mio::Client) -> Result<MioLocker, String> {
        Ok(MioLocker(client.clone(), self.0))
    }

    fn shape(&self) -> Shape {
        self.0
    }
}

locker!(MioLocker, redlease_mio, []);
