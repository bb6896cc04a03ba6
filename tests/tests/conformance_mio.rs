//! The conformance suite against the blocking client of `redlease-mio`.
//!
//! The suite's futures wrap blocking calls (`Box::pin(async move { blocking() })`), so each
//! completes on its first poll; `spawn` runs a future on its own thread and `sleep` is
//! `thread::sleep`. Every client the suite connects asks for a keep-alive helper thread
//! ([`Client::spawn_keepalive`]), because the suite holds auto-extended guards while it sleeps;
//! without one, auto-extension runs only while the caller drives the loop (`run_for`), which
//! `redlease-mio`'s own tests cover.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use redlease_core::{Health, ReleaseReport};
use redlease_mio::{Client, ElectionOptions, Guard, KeepAlive, Leader, Leadership, LockOptions, LostSignal};
use redlease_tests::conformance::{BoxFuture, Elections, Failure, LockSpec, Options, Sink, Subject, Work, failure};

struct MioSubject;

/// The suite's client: the blocking client plus the keep-alive thread that drives it.
#[derive(Clone)]
struct MioClient {
    client: Client,
    _keepalive: Arc<KeepAlive>,
}

/// Run a future whose steps are blocking calls: it is ready at its first poll unless it
/// awaits a spawned thread, which also blocks inside `poll`. The loop is only a safety net.
fn run<T>(fut: impl Future<Output = T>) -> T {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

impl Subject for MioSubject {
    const NAME: &'static str = "mio";
    type Client = MioClient;
    type Guard = Guard;
    type Lost = LostSignal;

    fn block_on<T>(fut: impl Future<Output = T>) -> T {
        run(fut)
    }

    fn spawn<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> BoxFuture<'static, T> {
        let thread = std::thread::spawn(move || run(fut));
        Box::pin(async move {
            match thread.join() {
                Ok(v) => v,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    fn sleep(d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async move { std::thread::sleep(d) })
    }

    fn connect(urls: Vec<String>, options: Options) -> BoxFuture<'static, Result<MioClient, Failure>> {
        Box::pin(async move {
            let client = Client::with_config(options.config(&urls)?).map_err(failure)?;
            let keepalive = client.spawn_keepalive().map_err(failure)?;
            Ok(MioClient { client, _keepalive: Arc::new(keepalive) })
        })
    }

    fn lock(client: &MioClient, spec: LockSpec) -> BoxFuture<'static, Result<Guard, Failure>> {
        let client = client.client.clone();
        Box::pin(async move { client.lock_with(spec.options()).map_err(failure) })
    }

    fn with_lock<T: Send + 'static>(
        client: &MioClient,
        resource: &str,
        ttl: Duration,
        work: Work<LostSignal, T>,
    ) -> BoxFuture<'static, Result<T, Failure>> {
        let client = client.client.clone();
        let options = LockOptions::new(resource, ttl);
        Box::pin(async move { client.with_lock(options, |lease| run(work(lease.lost()))).map_err(failure) })
    }

    fn health(client: &MioClient) -> BoxFuture<'static, Result<Health, Failure>> {
        let client = client.client.clone();
        Box::pin(async move { Ok(client.health()) })
    }

    fn close(client: &MioClient) -> BoxFuture<'static, ()> {
        let client = client.client.clone();
        Box::pin(async move { client.close() })
    }

    fn token(guard: &Guard) -> String {
        guard.token().to_owned()
    }

    fn valid_until(guard: &Guard) -> Instant {
        guard.valid_until()
    }

    fn fence(guard: &Guard) -> Option<u64> {
        guard.fence()
    }

    fn permits(guard: &Guard) -> Vec<u16> {
        guard.permits().to_vec()
    }

    fn lost(guard: &Guard) -> LostSignal {
        guard.lost()
    }

    fn set_auto_extend(guard: &Guard, on: bool) {
        guard.set_auto_extend(on);
    }

    fn extend(guard: &mut Guard, ttl: Duration) -> BoxFuture<'_, Result<Instant, Failure>> {
        Box::pin(async move { guard.extend(ttl).map_err(failure) })
    }

    fn downgrade(guard: &mut Guard) -> BoxFuture<'_, Result<Instant, Failure>> {
        Box::pin(async move { guard.downgrade().map_err(failure) })
    }

    fn release(guard: Guard) -> BoxFuture<'static, Result<ReleaseReport, Failure>> {
        Box::pin(async move { guard.release().map_err(failure) })
    }

    fn is_lost(lost: &LostSignal) -> bool {
        lost.is_lost()
    }

    fn wait_lost(lost: &LostSignal, timeout: Duration) -> BoxFuture<'static, bool> {
        let lost = lost.clone();
        Box::pin(async move { matches!(lost.wait_timeout(timeout), Ok(Some(_))) })
    }
}

impl Elections for MioSubject {
    type Leadership = Leadership;

    fn campaign(client: &MioClient, options: ElectionOptions) -> BoxFuture<'static, Result<Leadership, Failure>> {
        let client = client.client.clone();
        Box::pin(async move { client.campaign(options).map_err(failure) })
    }

    fn epoch(leadership: &Leadership) -> u64 {
        leadership.epoch()
    }

    fn leadership_lost(leadership: &Leadership) -> LostSignal {
        leadership.lost()
    }

    fn resign(leadership: Leadership) -> BoxFuture<'static, Result<ReleaseReport, Failure>> {
        Box::pin(async move { leadership.resign().map_err(failure) })
    }

    fn leader(client: &MioClient, name: &str) -> BoxFuture<'static, Result<Option<Leader>, Failure>> {
        let (client, name) = (client.client.clone(), name.to_owned());
        Box::pin(async move { client.leader(&name).map_err(failure) })
    }

    fn observe(
        client: &MioClient,
        name: &str,
        poll: Duration,
        changes: usize,
        sink: Sink,
    ) -> BoxFuture<'static, Result<(), Failure>> {
        let (client, name) = (client.client.clone(), name.to_owned());
        Box::pin(async move {
            let observation = client.observe(&name).map_err(failure)?.poll_every(poll);
            for change in observation.take(changes) {
                sink.lock().unwrap().push(change.map_err(failure)?);
            }
            Ok(())
        })
    }
}

redlease_tests::conformance_tests!(MioSubject);
redlease_tests::conformance_tests!(MioSubject, elections);
redlease_tests::conformance_tests!(MioSubject, clusters);
redlease_tests::conformance_tests!(MioSubject, sentinels);

/// The whole suite with every node reached over TLS (`rediss://`, a generated CA).
mod tls {
    use super::*;

    redlease_tests::conformance_tests!(MioSubject, listen = redlease_tests::Listen::Tls);
}

/// The whole suite with every node reached over its Unix socket (`redis+unix://`).
mod unix {
    use super::*;

    redlease_tests::conformance_tests!(MioSubject, listen = redlease_tests::Listen::Unix);
}
