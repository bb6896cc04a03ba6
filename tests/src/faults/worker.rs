//! The worker process (`redlease-fault-worker`): loops acquire (fenced) → read both counters →
//! work → write both counters → release, logging every step to stdout, until its stdin is
//! closed. A semaphore's holder does that for each permit it holds (the counters of that permit);
//! a reader reads the counters when it has the lock and again after its work, and writes
//! nothing.
//!
//! It writes whatever happens: it does not check its lease before writing (that is the point
//! of the holder-pause phase), but it logs whether the lost signal had fired and whether
//! `valid_until` had passed when it sent each write, so the report can say whether a careful
//! holder would have known.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redlease_client::{
    AcquireError, Config, ElectionOptions, Error, Lease, LockOptions, ReleaseOutcome, ReleaseReport, Retry,
};

use super::clock::{instant_ns, mono_ns};
use super::event::{Event, LockKind, Record};
use super::store::{Store, StoreKeys};

/// The client a worker drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// `redlease-tokio` on a multi-thread runtime (the driver on its worker thread, the loop
    /// on the main thread).
    Tokio,
    /// The blocking `redlease-mio` client.
    Mio,
}

impl ClientKind {
    /// `tokio` or `mio`.
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::Tokio => "tokio",
            ClientKind::Mio => "mio",
        }
    }

    fn parse(s: &str) -> Option<ClientKind> {
        match s {
            "tokio" => Some(ClientKind::Tokio),
            "mio" => Some(ClientKind::Mio),
            _ => None,
        }
    }
}

/// The lock a worker takes, every time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A mutex.
    Mutex,
    /// `permits` of a semaphore of `limit` permits.
    Semaphore {
        /// The semaphore's limit.
        limit: u32,
        /// Permits taken at once.
        permits: u32,
    },
    /// A read lock.
    Read,
    /// The write lock of a reader-writer lock.
    Write,
    /// A campaign in an election (`ElectionOptions`): the leadership's epoch is the fence.
    Election,
}

impl Shape {
    /// What its holds are logged as.
    pub fn kind(self) -> LockKind {
        match self {
            // A leader excludes every other leader, as a mutex's holder does.
            Shape::Mutex | Shape::Election => LockKind::Mutex,
            Shape::Semaphore { .. } => LockKind::Semaphore,
            Shape::Read => LockKind::Read,
            Shape::Write => LockKind::Write,
        }
    }

    /// `mutex`, `sem:LIMIT:PERMITS`, `read` or `write`.
    pub fn to_arg(self) -> String {
        match self {
            Shape::Semaphore { limit, permits } => format!("sem:{limit}:{permits}"),
            Shape::Election => "elect".to_owned(),
            other => other.kind().as_str().to_owned(),
        }
    }

    fn parse(s: &str) -> Option<Shape> {
        if s == "elect" {
            return Some(Shape::Election);
        }
        if let Some(rest) = s.strip_prefix("sem:") {
            let (limit, permits) = rest.split_once(':')?;
            return Some(Shape::Semaphore { limit: limit.parse().ok()?, permits: permits.parse().ok()? });
        }
        match LockKind::parse(s)? {
            LockKind::Mutex => Some(Shape::Mutex),
            LockKind::Read => Some(Shape::Read),
            LockKind::Write => Some(Shape::Write),
            LockKind::Semaphore => None,
        }
    }

    /// The options of every acquisition: fenced, waiting at most `wait`.
    pub fn options(self, resource: &str, ttl: Duration, wait: Duration) -> LockOptions {
        let options = LockOptions::new(resource, ttl).fencing(true).wait(wait);
        match self {
            Shape::Mutex | Shape::Write | Shape::Election => options,
            Shape::Semaphore { limit, permits } => options.semaphore(limit).permits(permits),
            Shape::Read => options.shared(true),
        }
    }
}

/// A worker's settings, passed on its command line.
#[derive(Clone, Debug)]
pub struct WorkerArgs {
    /// Its number in the phase.
    pub id: usize,
    /// Which client it drives.
    pub client: ClientKind,
    /// The store's address.
    pub store: SocketAddr,
    /// Prefix of the store's counter keys for this phase.
    pub keys: String,
    /// The resource to lock.
    pub resource: String,
    /// The lock to take.
    pub shape: Shape,
    /// The lock's TTL.
    pub ttl: Duration,
    /// Time between the read and the write.
    pub work: Duration,
    /// `LockOptions::wait` of each acquisition.
    pub wait: Duration,
    /// The client's per-node timeout.
    pub node_timeout: Duration,
    /// The lock nodes.
    pub nodes: Vec<String>,
}

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

impl WorkerArgs {
    /// The command line for these settings (what [`parse`](Self::parse) reads back).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "--id".to_owned(),
            self.id.to_string(),
            "--client".into(),
            self.client.name().into(),
            "--store".into(),
            self.store.to_string(),
            "--keys".into(),
            self.keys.clone(),
            "--resource".into(),
            self.resource.clone(),
            "--shape".into(),
            self.shape.to_arg(),
            "--ttl-ms".into(),
            ms(self.ttl),
            "--work-ms".into(),
            ms(self.work),
            "--wait-ms".into(),
            ms(self.wait),
            "--node-timeout-ms".into(),
            ms(self.node_timeout),
        ];
        args.extend(self.nodes.iter().cloned());
        args
    }

    /// Read the command line written by [`to_args`](Self::to_args).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<WorkerArgs, String> {
        let mut args = args.into_iter();
        let (mut id, mut client, mut store, mut keys, mut resource) = (None, None, None, None, None);
        let mut shape = Shape::Mutex;
        let (mut ttl, mut work, mut wait, mut node_timeout) = (None, None, None, None);
        let mut nodes = Vec::new();
        while let Some(arg) = args.next() {
            if !arg.starts_with("--") {
                nodes.push(arg);
                continue;
            }
            let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
            let millis = |v: &str| v.parse::<u64>().map(Duration::from_millis).map_err(|e| format!("{arg} {v}: {e}"));
            match arg.as_str() {
                "--id" => id = Some(value.parse::<usize>().map_err(|e| format!("--id {value}: {e}"))?),
                "--client" => {
                    client = Some(ClientKind::parse(&value).ok_or(format!("--client {value}: tokio or mio"))?)
                }
                "--store" => store = Some(value.parse::<SocketAddr>().map_err(|e| format!("--store {value}: {e}"))?),
                "--keys" => keys = Some(value),
                "--resource" => resource = Some(value),
                "--shape" => {
                    shape = Shape::parse(&value)
                        .ok_or(format!("--shape {value}: mutex, sem:LIMIT:PERMITS, read or write"))?
                }
                "--ttl-ms" => ttl = Some(millis(&value)?),
                "--work-ms" => work = Some(millis(&value)?),
                "--wait-ms" => wait = Some(millis(&value)?),
                "--node-timeout-ms" => node_timeout = Some(millis(&value)?),
                _ => return Err(format!("unknown option {arg}")),
            }
        }
        let need = |name: &str| format!("missing {name}");
        if nodes.is_empty() {
            return Err("no node URLs".into());
        }
        Ok(WorkerArgs {
            id: id.ok_or_else(|| need("--id"))?,
            client: client.ok_or_else(|| need("--client"))?,
            store: store.ok_or_else(|| need("--store"))?,
            keys: keys.ok_or_else(|| need("--keys"))?,
            resource: resource.ok_or_else(|| need("--resource"))?,
            shape,
            ttl: ttl.ok_or_else(|| need("--ttl-ms"))?,
            work: work.ok_or_else(|| need("--work-ms"))?,
            wait: wait.ok_or_else(|| need("--wait-ms"))?,
            node_timeout: node_timeout.ok_or_else(|| need("--node-timeout-ms"))?,
            nodes,
        })
    }

    /// The client settings every worker uses: the given node timeout, quick retries within
    /// the wait bound, and quick reconnects (nodes are restarted and partitions heal).
    pub fn config(&self) -> Result<Config, Error> {
        Ok(Config::from_urls(&self.nodes)?
            .node_timeout(self.node_timeout)
            .retry(Retry::new(3, Duration::from_millis(5), Duration::from_millis(30)))
            .connect_timeout(Duration::from_millis(250))
            .reconnect(Duration::from_millis(10), Duration::from_millis(100)))
    }
}

/// The kind of a failed acquisition, as logged (see [`Event::AcquireFailed`]).
pub fn error_kind(e: &Error) -> String {
    fn acquire(a: &AcquireError) -> String {
        match a {
            AcquireError::Held { .. } => "held".into(),
            AcquireError::Unreachable { .. } => "unreachable".into(),
            AcquireError::TooSlow { .. } => "too_slow".into(),
            AcquireError::WaitTimeout { last, .. } => format!("wait:{}", acquire(last)),
            AcquireError::Cancelled => "cancelled".into(),
            AcquireError::Misconfigured { .. } => "misconfigured".into(),
            _ => "other".into(),
        }
    }
    match e {
        Error::Acquire(a) => acquire(a),
        Error::Closed => "closed".into(),
        _ => "other".into(),
    }
}

/// A held lock, whichever client took it.
trait Held {
    fn lease(&self) -> &Lease;
    fn release(self: Box<Self>) -> Result<ReleaseReport, Error>;
}

/// A client, tokio or blocking.
trait Locker {
    fn lock(&self, options: LockOptions) -> Result<Box<dyn Held + '_>, Error>;
    fn campaign(&self, options: ElectionOptions) -> Result<Box<dyn Held + '_>, Error>;
    fn close(&self);
}

struct TokioLocker {
    rt: tokio::runtime::Runtime,
    client: redlease_tokio::Client,
}

struct TokioHeld<'a> {
    rt: &'a tokio::runtime::Runtime,
    guard: redlease_tokio::Guard,
}

impl Held for TokioHeld<'_> {
    fn lease(&self) -> &Lease {
        self.guard.lease()
    }

    fn release(self: Box<Self>) -> Result<ReleaseReport, Error> {
        self.rt.block_on(self.guard.release())
    }
}

struct TokioLeading<'a> {
    rt: &'a tokio::runtime::Runtime,
    leadership: redlease_tokio::Leadership,
}

impl Held for TokioLeading<'_> {
    fn lease(&self) -> &Lease {
        self.leadership.lease()
    }

    fn release(self: Box<Self>) -> Result<ReleaseReport, Error> {
        self.rt.block_on(self.leadership.resign())
    }
}

impl Locker for TokioLocker {
    fn lock(&self, options: LockOptions) -> Result<Box<dyn Held + '_>, Error> {
        let guard = self.rt.block_on(self.client.lock_with(options))?;
        Ok(Box::new(TokioHeld { rt: &self.rt, guard }))
    }

    fn campaign(&self, options: ElectionOptions) -> Result<Box<dyn Held + '_>, Error> {
        let leadership = self.rt.block_on(self.client.campaign(options))?;
        Ok(Box::new(TokioLeading { rt: &self.rt, leadership }))
    }

    fn close(&self) {
        self.rt.block_on(self.client.close());
    }
}

struct MioLocker {
    client: redlease_mio::Client,
}

struct MioHeld {
    guard: redlease_mio::Guard,
}

impl Held for MioHeld {
    fn lease(&self) -> &Lease {
        self.guard.lease()
    }

    fn release(self: Box<Self>) -> Result<ReleaseReport, Error> {
        self.guard.release()
    }
}

impl Held for redlease_mio::Leadership {
    fn lease(&self) -> &Lease {
        redlease_mio::Leadership::lease(self)
    }

    fn release(self: Box<Self>) -> Result<ReleaseReport, Error> {
        self.resign()
    }
}

impl Locker for MioLocker {
    fn lock(&self, options: LockOptions) -> Result<Box<dyn Held + '_>, Error> {
        Ok(Box::new(MioHeld { guard: self.client.lock_with(options)? }))
    }

    fn campaign(&self, options: ElectionOptions) -> Result<Box<dyn Held + '_>, Error> {
        Ok(Box::new(self.client.campaign(options)?))
    }

    fn close(&self) {
        self.client.close();
    }
}

fn connect(args: &WorkerArgs) -> Result<Box<dyn Locker>, Error> {
    let config = args.config()?;
    Ok(match args.client {
        ClientKind::Tokio => {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
            let client = rt.block_on(redlease_tokio::Client::with_config(config))?;
            Box::new(TokioLocker { rt, client })
        }
        ClientKind::Mio => Box::new(MioLocker { client: redlease_mio::Client::with_config(config)? }),
    })
}

fn outcome(report: &Result<ReleaseReport, Error>) -> &'static str {
    match report {
        Ok(r) => match r.outcome {
            ReleaseOutcome::Released => "released",
            ReleaseOutcome::NotHeld => "not_held",
            ReleaseOutcome::Unreachable => "unreachable",
            _ => "other",
        },
        Err(_) => "error",
    }
}

/// Run a worker until its stdin is closed. Store failures (the store is never faulted) end
/// it with an error.
pub fn run(args: &WorkerArgs) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            // The orchestrator closes our stdin to stop us (or dies, which closes it too).
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            stop.store(true, Ordering::Release);
        });
    }
    let emit = |event: Event| println!("{}", Record { worker: args.id, client: args.client.name().into(), event });
    let mut store = Store::connect(args.store, StoreKeys::new(&args.keys)).map_err(|e| format!("store: {e}"))?;
    // A loaded machine can leave fresh nodes' first handshakes (with `appendfsync always`, a
    // write and its fsync) unanswered for longer than the connect timeout: starting is not what
    // a phase tests, so try again for a while.
    let deadline = Instant::now() + Duration::from_secs(10);
    let locker = loop {
        match connect(args) {
            Ok(locker) => break locker,
            Err(e) if Instant::now() < deadline => {
                eprintln!("redlease-fault-worker {}: starting the client again: {e}", args.id);
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(format!("client: {e}")),
        }
    };
    let options = args.shape.options(&args.resource, args.ttl, args.wait);
    // An election's candidates: the phase's resource names the election, the worker's number
    // is its value.
    let election =
        ElectionOptions::new(args.resource.clone(), format!("worker-{}", args.id)).ttl(args.ttl).wait(args.wait);
    let mut rng = mono_ns() ^ (u64::from(std::process::id()) << 32) | 1;
    emit(Event::Started { t: mono_ns() });
    while !stop.load(Ordering::Acquire) {
        let start = mono_ns();
        let held = match if args.shape == Shape::Election {
            locker.campaign(election.clone())
        } else {
            locker.lock(options.clone())
        } {
            Ok(held) => held,
            Err(e) => {
                emit(Event::AcquireFailed { start, t: mono_ns(), kind: error_kind(&e) });
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let lease = held.lease().clone();
        let fence = lease.fence().ok_or("a fenced lock came without a fencing token")?;
        let until = instant_ns(lease.valid_until());
        let permits = lease.permits().to_vec();
        let kind = args.shape.kind();
        emit(Event::Acquired { start, t: mono_ns(), fence, until, token: lease.token().to_owned(), kind, permits });

        // The counters of each permit held (a semaphore), or the phase's one pair.
        let keys: Vec<(Option<u16>, StoreKeys)> = if lease.permits().is_empty() {
            vec![(None, StoreKeys::new(&args.keys))]
        } else {
            lease.permits().iter().map(|&s| (Some(s), StoreKeys::permit(&args.keys, s))).collect()
        };
        if kind == LockKind::Read {
            store.set_keys(keys[0].1.clone());
            // A reader reads at the start of its hold and at its end: a writer beside it shows
            // as a change between the two.
            for step in 0..2 {
                if step == 1 {
                    std::thread::sleep(args.work);
                }
                let t = mono_ns();
                let read = store.read_shared(fence).map_err(|e| format!("store read: {e}"))?;
                let (accepted, fenced, plain) = (read.accepted, read.fenced, read.plain);
                emit(Event::Read { t, end: mono_ns(), fence, accepted, fenced, plain, permit: None });
            }
        } else {
            let mut reads = Vec::new();
            for (permit, keys) in &keys {
                store.set_keys(keys.clone());
                let t = mono_ns();
                let read = store.read(fence).map_err(|e| format!("store read: {e}"))?;
                let (accepted, fenced, plain, permit) = (read.accepted, read.fenced, read.plain, *permit);
                emit(Event::Read { t, end: mono_ns(), fence, accepted, fenced, plain, permit });
                reads.push(read);
            }

            std::thread::sleep(args.work);

            for ((permit, keys), read) in keys.iter().zip(reads) {
                store.set_keys(keys.clone());
                let (lost, t) = (lease.is_lost(), mono_ns());
                let expired = Instant::now() > lease.valid_until();
                let fenced = read.accepted.then_some(read.fenced + 1);
                let plain = read.plain + 1;
                let written = store.write(fence, fenced, plain).map_err(|e| format!("store write: {e}"))?;
                let permit = *permit;
                emit(Event::Write { t, end: mono_ns(), fence, fenced: written, plain, lost, expired, permit });
            }
        }

        let (lost, t) = (lease.is_lost(), mono_ns());
        let report = held.release();
        emit(Event::Released { t, end: mono_ns(), outcome: outcome(&report).into(), lost });

        // Let the others in now and then: 0–20 ms before contending again.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(rng % 21));
    }
    locker.close();
    emit(Event::Stopped { t: mono_ns() });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_survive_a_round_trip() {
        let args = WorkerArgs {
            id: 3,
            client: ClientKind::Mio,
            store: "127.0.0.1:7000".parse().unwrap(),
            keys: "faults:p1".into(),
            resource: "faults:lock:p1".into(),
            shape: Shape::Semaphore { limit: 3, permits: 2 },
            ttl: Duration::from_millis(1000),
            work: Duration::from_millis(20),
            wait: Duration::from_millis(900),
            node_timeout: Duration::from_millis(100),
            nodes: vec!["redis://10.0.0.1:6379".into(), "redis://10.0.0.2:6379".into()],
        };
        let back = WorkerArgs::parse(args.to_args()).unwrap();
        assert_eq!(back.to_args(), args.to_args());
        assert!(back.config().is_ok());
        assert!(WorkerArgs::parse(["--id".to_owned()]).is_err());
        for shape in [Shape::Mutex, Shape::Read, Shape::Write, Shape::Semaphore { limit: 5, permits: 1 }] {
            assert_eq!(Shape::parse(&shape.to_arg()), Some(shape));
        }
        assert_eq!(Shape::parse("sem:3"), None);
    }
}
