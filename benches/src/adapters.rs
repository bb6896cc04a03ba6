//! The redlease adapters, each with the bench config ([`config`]: 3
//! attempts 20–200 ms apart, wake-on-release on) and one client shared by every locker; each locks a
//! mutex, one permit of a semaphore of 4 (`…-sem4`), a read lock (`…-read`), or a mutex whose
//! grants wait for each node's replica (`…-replicas`).

use crate::embedded::Embed;
use crate::exec::{AsyncStd, Exec, Smol, Threads, Tokio};
use crate::floor::{ASYNC, BLOCKING};
use crate::plan::{Scenario, Shape, WAIT};
use crate::subject::{Generic, Locker, Subject, Target, config, released};

/// The five adapters with a client, in table order, then two of them on a semaphore of 4 and
/// with a read lock, and one on nodes with replicas, each paired with its own mutex, then the
/// embedded mio driver.
pub fn subjects() -> Vec<Box<dyn Subject>> {
    use Scenario::{Cluster, Handoff, Lockers, Sentinel, Sequential, Stalled, Tls};
    use Shape::{Mutex, Read, Replicated};
    const ALL: &[Scenario] = &[Sequential, Lockers, Stalled, Handoff];
    const MT: &[Scenario] = &[Sequential, Lockers, Stalled, Handoff, Tls, Cluster, Sentinel];
    const SEM: &[Scenario] = &[Sequential, Handoff];
    let (mt, mio, sem4) =
        (|s| TokioAdapter(|| Tokio::new(true), s), |s| MioBlocking(|| Ok(Threads), s), Shape::Semaphore(4));
    vec![
        Box::new(Generic::new("tokio-mt", ASYNC, MT, mt(Mutex))),
        Box::new(Generic::new("tokio-ct", ASYNC, ALL, TokioAdapter(|| Tokio::new(false), Mutex))),
        Box::new(Generic::new("smol", ASYNC, ALL, SmolAdapter(|| Ok(Smol::default()), Mutex))),
        Box::new(Generic::new("async-std", ASYNC, ALL, SmolAdapter(|| Ok(AsyncStd), Mutex))),
        Box::new(Generic::new(
            "mio-blocking",
            BLOCKING,
            &[Sequential, Lockers, Stalled, Handoff, Sentinel],
            mio(Mutex),
        )),
        Box::new(Generic::new("tokio-mt-sem4", "tokio-mt", &[Sequential, Handoff, Cluster], mt(sem4))),
        Box::new(Generic::new("mio-blocking-sem4", "mio-blocking", SEM, mio(sem4))),
        Box::new(Generic::new("tokio-mt-read", "tokio-mt", &[Sequential], mt(Read))),
        Box::new(Generic::new("mio-blocking-read", "mio-blocking", &[Sequential], mio(Read))),
        Box::new(Generic::new("tokio-mt-replicas", "tokio-mt", &[Sequential], mt(Replicated))),
        Box::new(Generic::new("mio-embedded", BLOCKING, &[Sequential, Lockers, Stalled, Tls], Embed)),
    ]
}

/// An adapter as a [`Target`]: the runtime its function makes, its client (connected by
/// `$connect`, given the config and the runtime) and a clone of it per locker of the lockers
/// scenario, locking the shape given, its calls awaited (`[.await]`) or not (`[]`). The
/// crates name their types alike.
macro_rules! adapter {
    ($target:ident, $locker:ident, $krate:ident, [$($aw:tt)*], |$config:ident, $exec:ident| $connect:expr) => {
        #[doc = concat!("`", stringify!($krate), "` on the runtime its function makes, locking a shape.")]
        #[derive(Debug)]
        pub struct $target<E>(pub fn() -> Result<E, String>, pub Shape);

        impl<E: Exec> Target for $target<E> {
            type Exec = E;
            type Locker = $locker;

            fn exec(&self) -> Result<E, String> {
                (self.0)()
            }

            async fn connect(&self, $exec: &E, urls: &[String]) -> Result<$locker, String> {
                let $config = config(urls, self.1)?;
                let client: Result<$krate::Client, String> = $connect;
                Ok($locker(client?, self.1))
            }

            fn shape(&self) -> Shape {
                self.1
            }
        }

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

            fn fork(&self) -> Result<Self, String> {
                Ok($locker(self.0.clone(), self.1))
            }

            fn permit(held: &$krate::Guard) -> u16 {
                held.permits().first().copied().unwrap_or(0)
            }
        }
    };
    // An async client: its driver (from `with_driver`) is spawned on the runtime, as `with_config` does.
    ($target:ident, $locker:ident, $krate:ident, with_driver) => {
        adapter!($target, $locker, $krate, [.await], |config, exec| {
            let (client, driver) = $krate::Client::with_driver(config).await.map_err(|e| e.to_string())?;
            exec.detach(driver);
            Ok(client)
        });
    };
}

adapter!(TokioAdapter, TokioLocker, redlease_tokio, with_driver);
adapter!(SmolAdapter, SmolLocker, redlease_smol, with_driver);
// redlease-mio's blocking client, on threads.
adapter!(MioBlocking, MioLocker, redlease_mio, [], |config, _exec| {
    redlease_mio::Client::with_config(config).map_err(|e| e.to_string())
});
