//! The redlease adapters as subjects: tokio (multi-thread and current-thread), smol,
//! async-std and the blocking mio client. (The embedded mio driver is in [`crate::embedded`].)
//!
//! Every adapter runs with its defaults, as a user gets it: node timeout 50 ms, 3 attempts
//! with 20–200 ms of jitter between them, drift factor 0.01.

use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use redlease_async::{Client, Guard, LockOptions, ReleaseOutcome, ReleaseReport, Runtime};

use crate::asyncrt::{Async, AsyncLocker, AsyncStdExec, AsyncTarget, LockerFactory, SmolExec, TokioExec};
use crate::blocking::{Blocking, BlockingFactory, BlockingLocker, BlockingTarget};
use crate::nodes::config;
use crate::plan::{CONTENDED_WAIT, Scenario};
use crate::subject::{Role, Subject};

/// Every scenario.
const ALL: &[Scenario] = &Scenario::ALL;

/// The adapter subjects, in table order.
pub fn subjects() -> Vec<Box<dyn Subject>> {
    vec![
        Box::new(Async::new(
            "tokio-mt",
            Role::Adapter,
            "redlease-tokio on a multi-thread tokio runtime (one worker per core); lockers are tasks",
            Scenario::WITH_HANDOFF,
            TokioAdapter { multi_thread: true, wake: true },
        )),
        Box::new(Async::new(
            "tokio-mt-poll",
            Role::Adapter,
            "tokio-mt with wake-on-release off (Config::wake(false)): waiters retry on their jitter alone",
            &[Scenario::Handoff],
            TokioAdapter { multi_thread: true, wake: false },
        )),
        Box::new(Async::new(
            "tokio-ct",
            Role::Adapter,
            "redlease-tokio on a current-thread tokio runtime: driver and lockers share one thread",
            Scenario::WITH_HANDOFF,
            TokioAdapter { multi_thread: false, wake: true },
        )),
        Box::new(Async::new(
            "tokio-ct-joined",
            Role::Adapter,
            "control: tokio-ct with no task of its own for the driver, which the locker's task polls during each call (Client::with_driver); measures the hand-off between two tasks, not a way to run the client",
            &[Scenario::Sequential],
            JoinedTokio,
        )),
        Box::new(Async::new(
            "smol",
            Role::Adapter,
            "redlease-smol, its driver spawned on a smol::Executor that one thread runs",
            ALL,
            SmolAdapter,
        )),
        Box::new(Async::new(
            "async-std",
            Role::Adapter,
            "redlease-smol under async-std: driver and lockers spawned on its global executor",
            ALL,
            AsyncStdAdapter,
        )),
        Box::new(Blocking::new(
            "mio-blocking",
            Role::Adapter,
            "redlease-mio's blocking Client, one clone per OS thread (the waiting thread drives the loop)",
            Scenario::WITH_HANDOFF,
            MioBlocking,
        )),
        Box::new(crate::embedded::Embedded),
        Box::new(OverTls::new(
            "tokio-mt-tls",
            "tokio-mt over TLS (rediss://, rustls with ring, TLS 1.3) to the same nodes",
            Box::new(Async::new(
                "tokio-mt",
                Role::Adapter,
                "",
                &TLS_SCENARIOS,
                TokioAdapter { multi_thread: true, wake: true },
            )),
        )),
        Box::new(OverTls::new(
            "mio-embedded-tls",
            "mio-embedded over TLS (rediss://, rustls with ring, TLS 1.3) to the same nodes",
            Box::new(crate::embedded::Embedded),
        )),
    ]
}

/// What the TLS subjects run: the two figures compared with TCP.
const TLS_SCENARIOS: [Scenario; 2] = [Scenario::Sequential, Scenario::Throughput];

/// A subject run against nodes that listen with TLS: the same client, `rediss://` URLs.
struct OverTls {
    name: &'static str,
    about: &'static str,
    inner: Box<dyn Subject>,
}

impl OverTls {
    fn new(name: &'static str, about: &'static str, inner: Box<dyn Subject>) -> Self {
        OverTls { name, about, inner }
    }
}

impl Subject for OverTls {
    fn name(&self) -> &str {
        self.name
    }
    fn about(&self) -> String {
        self.about.to_owned()
    }
    fn role(&self) -> Role {
        self.inner.role()
    }
    fn style(&self) -> crate::subject::Style {
        self.inner.style()
    }
    fn listen(&self) -> redlease_cluster::Listen {
        redlease_cluster::Listen::Tls
    }
    fn supports(&self, scenario: Scenario) -> bool {
        TLS_SCENARIOS.contains(&scenario) && self.inner.supports(scenario)
    }
    fn sequential(
        &self,
        urls: &[String],
        common: crate::subject::Common,
        plan: crate::plan::SeqPlan,
    ) -> Result<crate::Sequential, String> {
        self.inner.sequential(urls, common, plan)
    }
    fn throughput(
        &self,
        urls: &[String],
        common: crate::subject::Common,
        plan: crate::plan::LoadPlan,
        lockers: usize,
    ) -> Result<crate::Throughput, String> {
        self.inner.throughput(urls, common, plan, lockers)
    }
    fn stalled(
        &self,
        _: &[String],
        _: crate::subject::Common,
        _: &crate::plan::StallPlan,
        _: &mut dyn FnMut(usize),
    ) -> Result<Vec<crate::StallLevel>, String> {
        Err("not measured over TLS".into())
    }
    fn contention(
        &self,
        _: &[String],
        _: crate::subject::Common,
        _: crate::plan::LoadPlan,
        _: usize,
    ) -> Result<crate::Contention, String> {
        Err("not measured over TLS".into())
    }
}

/// redlease-tokio, on a multi-thread or a current-thread runtime.
#[derive(Debug)]
pub struct TokioAdapter {
    /// Multi-thread (one worker per core) rather than current-thread.
    pub multi_thread: bool,
    /// Wake waiters on release ([`Config::wake`](redlease_async::Config::wake)).
    pub wake: bool,
}

impl AsyncTarget for TokioAdapter {
    type Exec = TokioExec;
    type Factory = Shared<redlease_tokio::Tokio>;

    fn exec(&self) -> Result<TokioExec, String> {
        if self.multi_thread { TokioExec::multi_thread() } else { TokioExec::current_thread() }
    }

    async fn connect(&self, _exec: &TokioExec, urls: &[String], ttl: Duration) -> Result<Self::Factory, String> {
        let config = config(urls)?.wake(self.wake);
        let client = redlease_tokio::Client::with_config(config).await.map_err(|e| e.to_string())?;
        Ok(Shared { client, ttl })
    }
}

/// redlease-smol with its driver on a smol executor.
#[derive(Debug)]
pub struct SmolAdapter;

impl AsyncTarget for SmolAdapter {
    type Exec = SmolExec;
    type Factory = Shared<redlease_smol::AsyncIo>;

    fn exec(&self) -> Result<SmolExec, String> {
        Ok(SmolExec::new())
    }

    async fn connect(&self, exec: &SmolExec, urls: &[String], ttl: Duration) -> Result<Self::Factory, String> {
        let (client, driver) = redlease_smol::Client::with_driver(config(urls)?).await.map_err(|e| e.to_string())?;
        exec.detach(driver);
        Ok(Shared { client, ttl })
    }
}

/// redlease-smol with its driver on async-std's executor.
#[derive(Debug)]
pub struct AsyncStdAdapter;

impl AsyncTarget for AsyncStdAdapter {
    type Exec = AsyncStdExec;
    type Factory = Shared<redlease_smol::AsyncIo>;

    fn exec(&self) -> Result<AsyncStdExec, String> {
        Ok(AsyncStdExec)
    }

    async fn connect(&self, _exec: &AsyncStdExec, urls: &[String], ttl: Duration) -> Result<Self::Factory, String> {
        let (client, driver) = redlease_smol::Client::with_driver(config(urls)?).await.map_err(|e| e.to_string())?;
        async_std::task::spawn(driver);
        Ok(Shared { client, ttl })
    }
}

/// One async client shared by every locker (each locker holds a clone).
#[derive(Debug)]
pub struct Shared<R> {
    client: Client<R>,
    ttl: Duration,
}

impl<R: Runtime + Send + Sync + 'static> LockerFactory for Shared<R> {
    type Locker = Locker<R>;

    async fn locker(&self) -> Result<Locker<R>, String> {
        Ok(Locker { client: self.client.clone(), ttl: self.ttl })
    }
}

/// A clone of the async client.
#[derive(Debug)]
pub struct Locker<R> {
    client: Client<R>,
    ttl: Duration,
}

impl<R: Runtime + Send + Sync + 'static> AsyncLocker for Locker<R> {
    type Held = Guard;

    async fn acquire(&mut self, key: &str) -> Result<Guard, String> {
        self.client.lock(key, self.ttl).await.map_err(|e| e.to_string())
    }

    async fn acquire_wait(&mut self, key: &str) -> Result<Guard, String> {
        self.client.lock_with(LockOptions::new(key, self.ttl).wait(CONTENDED_WAIT)).await.map_err(|e| e.to_string())
    }

    async fn release(&mut self, held: Guard) -> Result<(), String> {
        released(held.release().await.map_err(|e| e.to_string())?)
    }

    fn release_detached(&mut self, held: Guard) {
        // Dropping a guard tells the driver to release it; nobody waits for the outcome.
        drop(held);
    }
}

/// An async release's report as the bench wants it: released, or an error that says how not.
fn released(report: ReleaseReport) -> Result<(), String> {
    match report.outcome {
        ReleaseOutcome::Released => Ok(()),
        other => Err(format!("release: {other:?} ({report:?})")),
    }
}

/// redlease-mio's blocking client.
#[derive(Debug)]
pub struct MioBlocking;

impl BlockingTarget for MioBlocking {
    type Factory = MioShared;

    fn connect(&self, urls: &[String], ttl: Duration) -> Result<MioShared, String> {
        let client = redlease_mio::Client::connect(urls).map_err(|e| e.to_string())?;
        Ok(MioShared { client, ttl })
    }
}

/// One blocking client shared by every locker thread.
#[derive(Debug)]
pub struct MioShared {
    client: redlease_mio::Client,
    ttl: Duration,
}

impl BlockingFactory for MioShared {
    type Locker = MioShared;

    fn locker(&self) -> Result<MioShared, String> {
        Ok(MioShared { client: self.client.clone(), ttl: self.ttl })
    }
}

impl BlockingLocker for MioShared {
    type Held = redlease_mio::Guard;

    fn acquire(&mut self, key: &str) -> Result<redlease_mio::Guard, String> {
        self.client.lock(key, self.ttl).map_err(|e| e.to_string())
    }

    fn acquire_wait(&mut self, key: &str) -> Result<redlease_mio::Guard, String> {
        self.client.lock_with(LockOptions::new(key, self.ttl).wait(CONTENDED_WAIT)).map_err(|e| e.to_string())
    }

    fn release(&mut self, held: redlease_mio::Guard) -> Result<(), String> {
        let report = held.release().map_err(|e| e.to_string())?;
        match report.outcome {
            redlease_mio::ReleaseOutcome::Released => Ok(()),
            other => Err(format!("release: {other:?} ({report:?})")),
        }
    }

    fn release_detached(&mut self, held: redlease_mio::Guard) {
        // Released in the background: the next blocking call drives it.
        drop(held);
    }
}

/// A control, `tokio-ct-joined`: redlease-tokio on a current-thread runtime with no task of
/// its own for the driver. The locker's own task polls the driver while one of its calls is
/// pending, so a lock and its release involve one task, as with the floor. It measures what
/// the hand-off between the caller's task and the driver's costs. It is not a way to run the
/// client: between calls nothing polls the driver (no automatic extension, no reconnects).
#[derive(Debug)]
pub struct JoinedTokio;

/// The driver, shared by the lockers that poll it.
type SharedDriver = Arc<Mutex<Pin<Box<redlease_tokio::Driver>>>>;

impl AsyncTarget for JoinedTokio {
    type Exec = TokioExec;
    type Factory = JoinedFactory;

    fn exec(&self) -> Result<TokioExec, String> {
        TokioExec::current_thread()
    }

    async fn connect(&self, _exec: &TokioExec, urls: &[String], ttl: Duration) -> Result<JoinedFactory, String> {
        let (client, driver) = redlease_tokio::Client::with_driver(config(urls)?).await.map_err(|e| e.to_string())?;
        Ok(JoinedFactory { client, driver: Arc::new(Mutex::new(Box::pin(driver))), ttl })
    }
}

/// The client and its driver, for [`JoinedTokio`].
pub struct JoinedFactory {
    client: redlease_tokio::Client,
    driver: SharedDriver,
    ttl: Duration,
}

impl LockerFactory for JoinedFactory {
    type Locker = JoinedLocker;

    async fn locker(&self) -> Result<JoinedLocker, String> {
        Ok(JoinedLocker { client: self.client.clone(), driver: Arc::clone(&self.driver), ttl: self.ttl })
    }
}

/// A locker of [`JoinedTokio`]: it polls the driver while its calls are pending.
pub struct JoinedLocker {
    client: redlease_tokio::Client,
    driver: SharedDriver,
    ttl: Duration,
}

/// Run `call` to completion, polling `driver` from the same task after each poll of `call`
/// that leaves it pending (the call queues its command first, the driver then writes it).
async fn joined<T>(driver: &SharedDriver, call: impl Future<Output = T>) -> T {
    let mut call = pin!(call);
    poll_fn(|cx| {
        if let Poll::Ready(out) = call.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        // The driver only finishes once every client is gone; here it never does.
        let _ = driver.lock().unwrap_or_else(PoisonError::into_inner).as_mut().poll(cx);
        call.as_mut().poll(cx)
    })
    .await
}

impl AsyncLocker for JoinedLocker {
    type Held = Guard;

    async fn acquire(&mut self, key: &str) -> Result<Guard, String> {
        joined(&self.driver, self.client.lock(key, self.ttl)).await.map_err(|e| e.to_string())
    }

    async fn acquire_wait(&mut self, _key: &str) -> Result<Guard, String> {
        Err("tokio-ct-joined takes part in the sequential scenario only".to_owned())
    }

    async fn release(&mut self, held: Guard) -> Result<(), String> {
        released(joined(&self.driver, held.release()).await.map_err(|e| e.to_string())?)
    }

    fn release_detached(&mut self, held: Guard) {
        // The release is queued; the next call's polling of the driver sends it.
        drop(held);
    }
}
