//! The orchestrator: phases, the faults each one injects, and what each one must show.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redlease_servers::{FENCE_PREFIX, Placement, Reply, Servers};

use super::check::{self, Finals, Report};
use super::clock::mono_ns;
use super::event::{Event, Fenced, LockKind, Record};
use super::netns::{Cut, NODE_PORT, NetLab};
use super::shim::{ClockShift, SHIFT_VAR, Shim};
use super::store::{Store, StoreKeys};
use super::sys::{self, interrupted};
use super::worker::{ClientKind, Shape, WorkerArgs};

/// Lock nodes per phase.
const NODES: usize = 5;
/// The TTL of every lock.
const TTL: Duration = Duration::from_secs(1);
/// The clients' per-node timeout.
const NODE_TIMEOUT: Duration = Duration::from_millis(100);
/// Each `lock_with` waits at most this long.
const WAIT: Duration = Duration::from_secs(1);
/// The limit of the semaphore phases' semaphore.
const SEM_LIMIT: u32 = 3;

/// How to run the suite.
#[derive(Clone, Debug)]
pub struct Options {
    /// A few seconds per phase (the version `scripts/test.sh` runs) instead of the full one.
    pub short: bool,
    /// Run only these phases (by id: `1`, `2`, `5a`, ...); all when empty.
    pub only: Vec<String>,
    /// Worker processes per mutex phase (half tokio, half blocking mio); the semaphore and
    /// reader-writer phases run one more, at least 5.
    pub workers: usize,
    /// The worker binary (`redlease-fault-worker`).
    pub worker_bin: PathBuf,
    /// Where the phases' logs go (kept when a phase fails).
    pub log_dir: PathBuf,
}

/// Why the suite could not run at all.
#[derive(Debug)]
pub enum SuiteError {
    /// The machine does not allow it (not root, a tool missing, no namespaces): a skip.
    Unsupported(String),
    /// Something that should have worked did not (a server, a namespace, the shim).
    Setup(String),
}

/// What a phase must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Inside the algorithm's assumptions: no overlap, no lost update anywhere, fences in
    /// order. (A holder the machine stalls past its validity is outside them: the unchecked
    /// counter may then lose updates, the fenced one never.)
    Safe,
    /// Outside them, forced: at least one overlap, and the fenced store loses nothing.
    Overlaps,
    /// A holder paused past its validity: no overlap of windows, but a late write after a newer
    /// holder read the store, which the fence check must refuse, and updates lost in the
    /// unchecked counter.
    LateWrite,
}

/// The lock a phase's workers take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// A mutex: every worker.
    Mutex,
    /// A semaphore of `SEM_LIMIT` permits: every worker takes one, but the last, which takes
    /// two at once.
    Semaphore,
    /// A reader-writer lock: workers 0 and 1 write, the others read.
    ReadWrite,
    /// An election: every worker campaigns; the leader writes with its epoch as the fence.
    Election,
}

impl Lock {
    /// The semaphore's limit, for a semaphore.
    pub fn limit(self) -> Option<u32> {
        (self == Lock::Semaphore).then_some(SEM_LIMIT)
    }

    /// What worker `id` of `n` takes.
    fn shape(self, id: usize, n: usize) -> Shape {
        match self {
            Lock::Mutex => Shape::Mutex,
            Lock::Election => Shape::Election,
            Lock::Semaphore => Shape::Semaphore { limit: SEM_LIMIT, permits: if id + 1 == n { 2 } else { 1 } },
            Lock::ReadWrite if id < 2 => Shape::Write,
            Lock::ReadWrite => Shape::Read,
        }
    }

    /// Worker processes for `options`.
    fn workers(self, options: &Options) -> usize {
        match self {
            Lock::Mutex | Lock::Election => options.workers,
            Lock::Semaphore | Lock::ReadWrite => options.workers.max(4) + 1,
        }
    }
}

/// One phase of the suite.
#[derive(Clone, Copy)]
pub struct Phase {
    /// Short id (`1`, `5a`, `s2`, ...).
    pub id: &'static str,
    /// Name in the table.
    pub name: &'static str,
    /// The lock its workers take.
    pub lock: Lock,
    /// What it must show.
    pub expect: Expect,
    /// Nodes run with `appendonly yes` + `appendfsync always`.
    pub persist: bool,
    /// The workers' time between read and write.
    pub work: Duration,
    script: fn(&mut PhaseRun<'_>) -> Result<(), String>,
}

/// Every phase, in order.
pub fn phases() -> Vec<Phase> {
    let quick = Duration::from_millis(20);
    // Long enough for another worker to get in while the holder works (after a restart, a
    // healed partition or a clock jump), short enough to finish well within the validity.
    let long = Duration::from_millis(400);
    vec![
        Phase {
            id: "1",
            name: "baseline",
            lock: Lock::Mutex,
            expect: Expect::Safe,
            persist: false,
            work: quick,
            script: baseline,
        },
        Phase {
            id: "2",
            name: "minority partition (2 of 5, rotating)",
            lock: Lock::Mutex,
            expect: Expect::Safe,
            persist: false,
            work: quick,
            script: minority_partition,
        },
        Phase {
            id: "3",
            name: "majority partition (3 of 5), then healed",
            lock: Lock::Mutex,
            expect: Expect::Safe,
            persist: false,
            work: quick,
            script: majority_partition,
        },
        Phase {
            id: "4",
            name: "node pause (SIGSTOP 1, then 2 nodes)",
            lock: Lock::Mutex,
            expect: Expect::Safe,
            persist: false,
            work: quick,
            script: node_pause,
        },
        Phase {
            id: "5a",
            name: "kill -9 + restart of a majority, appendfsync always",
            lock: Lock::Mutex,
            expect: Expect::Safe,
            persist: true,
            work: long,
            script: restart_majority,
        },
        Phase {
            id: "5b",
            name: "kill -9 + restart of a majority, no persistence",
            lock: Lock::Mutex,
            expect: Expect::Overlaps,
            persist: false,
            work: long,
            script: restart_majority,
        },
        Phase {
            id: "6a",
            name: "clock jump (+2 TTL) on one node",
            lock: Lock::Mutex,
            expect: Expect::Overlaps,
            persist: false,
            work: long,
            script: clock_jump_one,
        },
        Phase {
            id: "6b",
            name: "clock jump (+2 TTL) on a majority",
            lock: Lock::Mutex,
            expect: Expect::Overlaps,
            persist: false,
            work: long,
            script: clock_jump_majority,
        },
        Phase {
            id: "7",
            name: "holder paused (SIGSTOP) for 2 TTL",
            lock: Lock::Mutex,
            expect: Expect::LateWrite,
            persist: false,
            work: Duration::from_millis(300),
            script: holder_pause,
        },
        // The semaphore: 3 permits, 5 workers (the last takes 2 permits at once). Every
        // semaphore phase must show: at most 3 permits held at any instant of the workers'
        // windows (none beyond the limit), nothing lost in the fenced store (a counter and a
        // highest fence per permit).
        //
        // s2 must show, besides: the 3 permits all held at some instant, no two holders of one
        // permit at once, nothing lost without the fence either, fences in order per permit;
        // acquisitions while a pair is cut off, none granted from 1 s into the majority cut
        // until it heals, typed `unreachable` errors, an acquisition after healing.
        Phase {
            id: "s2",
            name: "semaphore: minority partitions, then a majority partition",
            lock: Lock::Semaphore,
            expect: Expect::Safe,
            persist: false,
            work: quick,
            script: partitions,
        },
        // s4: safe as s2, and acquisitions while nodes are paused.
        Phase {
            id: "s4",
            name: "semaphore: node pause (SIGSTOP 1, then 2 nodes)",
            lock: Lock::Semaphore,
            expect: Expect::Safe,
            persist: false,
            work: quick,
            script: node_pause,
        },
        // s5: safe as s2; the restarted nodes still hold the holder's permit key (at least one of
        // the three: they meet its quorum) and the permit's fence counter.
        Phase {
            id: "s5",
            name: "semaphore: kill -9 + restart of a majority, appendfsync always",
            lock: Lock::Semaphore,
            expect: Expect::Safe,
            persist: true,
            work: long,
            script: restart_majority,
        },
        // s7: no two holders of a permit at once, a late write, every late write refused by the
        // permit's highest fence, updates lost without the check, fences in order per permit.
        Phase {
            id: "s7",
            name: "semaphore: holder paused (SIGSTOP) for 2 TTL",
            lock: Lock::Semaphore,
            expect: Expect::LateWrite,
            persist: false,
            work: Duration::from_millis(300),
            script: holder_pause,
        },
        // The reader-writer lock: 2 writers, 3 readers; readers read the store at the start and
        // the end of each hold, under their writer epoch. Every reader-writer phase must show:
        // no reader that saw the fenced counter change under it, nothing lost in the fenced
        // store.
        //
        // rw2 must show, besides: no writer's window beside a reader's or another writer's,
        // readers together at some instant, no reader that saw even the unchecked counter
        // change, nothing lost without the fence either, epochs in order; liveness and the
        // majority cut as s2.
        Phase {
            id: "rw2",
            name: "reader-writer: minority partitions, then a majority partition",
            lock: Lock::ReadWrite,
            expect: Expect::Safe,
            persist: false,
            work: quick,
            script: partitions,
        },
        // rw4: safe as rw2, and acquisitions while nodes are paused.
        Phase {
            id: "rw4",
            name: "reader-writer: node pause (SIGSTOP 1, then 2 nodes)",
            lock: Lock::ReadWrite,
            expect: Expect::Safe,
            persist: false,
            work: quick,
            script: node_pause,
        },
        // rw5: safe as rw2; the restarted nodes still hold the writer's key, then the reader
        // among the readers, and the fence counter.
        Phase {
            id: "rw5",
            name: "reader-writer: kill -9 + restart of a majority, appendfsync always",
            lock: Lock::ReadWrite,
            expect: Expect::Safe,
            persist: true,
            work: long,
            script: restart_majority,
        },
        // rw7: no writer beside another holder, a late write, every late write refused (by a
        // newer writer's fence or a reader's epoch), updates lost without the check; the
        // paused reader's late read refused by a newer writer's epoch.
        Phase {
            id: "rw7",
            name: "reader-writer: a writer, then a reader paused (SIGSTOP) for 2 TTL",
            lock: Lock::ReadWrite,
            expect: Expect::LateWrite,
            persist: false,
            work: Duration::from_millis(300),
            script: holder_pause,
        },
        // The election: every worker campaigns, and its leader writes with its epoch as the
        // fence. e2 must show what 2 shows (no two leaders at once, nothing lost), with
        // minority partitions, then a majority cut as s2.
        Phase {
            id: "e2",
            name: "election: minority partitions, then a majority partition",
            lock: Lock::Election,
            expect: Expect::Safe,
            persist: false,
            work: quick,
            script: partitions,
        },
        // e7: a leader paused past its TTL while another leads: leaders never overlap on the
        // workers' clocks, a late write, every late write refused by the newer leader's epoch,
        // updates lost without the check, epochs in order.
        Phase {
            id: "e7",
            name: "election: leader paused (SIGSTOP) for 2 TTL",
            lock: Lock::Election,
            expect: Expect::LateWrite,
            persist: false,
            work: Duration::from_millis(300),
            script: holder_pause,
        },
    ]
}

/// The outcome of one phase.
#[derive(Clone, Debug)]
pub struct PhaseResult {
    /// Its id.
    pub id: &'static str,
    /// Its name.
    pub name: &'static str,
    /// The lock its workers took.
    pub lock: Lock,
    /// What it had to show.
    pub expect: Expect,
    /// The checker's counts.
    pub report: Report,
    /// What happened, step by step.
    pub notes: Vec<String>,
    /// Broken expectations (empty: passed).
    pub failures: Vec<String>,
    /// Wall time of the phase.
    pub seconds: f64,
}

impl PhaseResult {
    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

fn is_on_path(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain(["/usr/sbin".into(), "/sbin".into()]).any(|d| d.join(program).is_file())
}

/// Check that the machine allows the suite: root, `ip`, `iptables`, `gcc`, `redis-server`,
/// and network namespaces.
pub fn preflight() -> Result<(), SuiteError> {
    if !sys::is_root() {
        return Err(SuiteError::Unsupported(
            "it needs root (it creates network namespaces and iptables rules): run it as root".into(),
        ));
    }
    for (program, package) in
        [("ip", "iproute2"), ("iptables", "iptables"), ("gcc", "gcc"), ("redis-server", "redis-server")]
    {
        if !is_on_path(program) {
            return Err(SuiteError::Unsupported(format!(
                "{program} not found: install it with 'apt-get install {package}' (scripts/ensure-faults.sh does)"
            )));
        }
    }
    // What the suite will do, once, in a throwaway namespace: create it, move one end of a
    // veth pair into it, and add an iptables rule inside it.
    let pid = std::process::id();
    let (ns, host, peer) = (format!("rlf{pid}n99"), format!("rlf{pid}h99"), format!("rlf{pid}p99"));
    sys::run("ip", &["netns", "add", &ns])
        .map_err(|e| SuiteError::Unsupported(format!("this machine does not allow network namespaces: {e}")))?;
    let probe = sys::run("ip", &["link", "add", &host, "type", "veth", "peer", "name", &peer])
        .and_then(|_| sys::run("ip", &["link", "set", &peer, "netns", &ns]))
        .map_err(|e| format!("this machine does not allow veth pairs into a namespace: {e}"))
        .and_then(|_| {
            sys::run("ip", &["netns", "exec", &ns, "iptables", "-w", "-A", "INPUT", "-i", &peer, "-j", "DROP"])
                .map_err(|e| format!("iptables does not work inside a network namespace here: {e}"))
        });
    let _ = sys::run("ip", &["netns", "del", &ns]);
    let _ = sys::run("ip", &["link", "del", &host]);
    probe.map(|_| ()).map_err(SuiteError::Unsupported)
}

/// Run the phases; the results, or why the suite could not run.
pub fn run(options: &Options) -> Result<Vec<PhaseResult>, SuiteError> {
    preflight()?;
    let setup = SuiteError::Setup;
    for removed in NetLab::remove_leftovers().map_err(setup)? {
        eprintln!("removed a leftover of an earlier run: {removed}");
    }
    let mut lab = NetLab::create(NODES).map_err(setup)?;
    let shim = Shim::build().map_err(setup)?;
    let store = Servers::builder().nodes(1).try_start().map_err(setup)?;
    std::fs::create_dir_all(&options.log_dir).map_err(|e| setup(format!("{}: {e}", options.log_dir.display())))?;
    let ctx = Ctx { options, shim: &shim, store: store.node(0).addr() };
    eprintln!(
        "fault suite ({}): {NODES} redis-server nodes in network namespaces {} .. {} ({} .. {}), a store on {}, {} workers per mutex phase, {} per semaphore or reader-writer phase",
        if options.short { "short" } else { "full" },
        lab.nodes()[0].ns,
        lab.nodes()[NODES - 1].ns,
        lab.nodes()[0].ip,
        lab.nodes()[NODES - 1].ip,
        ctx.store,
        options.workers,
        Lock::Semaphore.workers(options),
    );
    let mut results = Vec::new();
    for phase in phases() {
        if !options.only.is_empty() && !options.only.iter().any(|id| id == phase.id) {
            continue;
        }
        if interrupted() {
            return Err(setup("interrupted".into()));
        }
        eprint!("phase {:>3} {} ... ", phase.id, phase.name);
        let result = run_phase(&ctx, &mut lab, phase).map_err(setup)?;
        eprintln!("{} ({:.1} s)", if result.passed() { "ok" } else { "FAILED" }, result.seconds);
        for f in &result.failures {
            eprintln!("    broken expectation: {f}");
        }
        results.push(result);
    }
    Ok(results)
}

struct Ctx<'a> {
    options: &'a Options,
    shim: &'a Shim,
    store: SocketAddr,
}

impl Ctx<'_> {
    /// `short` seconds in the short version, `full` in the full one.
    fn secs(&self, short: f64, full: f64) -> Duration {
        Duration::from_secs_f64(if self.options.short { short } else { full })
    }

    fn rounds(&self, short: usize, full: usize) -> usize {
        if self.options.short { short } else { full }
    }
}

/// A line a worker wrote, with the worker's number.
type Msg = (usize, String);

struct WorkerProc {
    id: usize,
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<()>>,
    stderr: PathBuf,
}

/// The phase's worker processes; killed (SIGKILL) and reaped on drop if still running.
struct Workers {
    procs: Vec<WorkerProc>,
}

impl Workers {
    fn spawn(
        bin: &Path,
        args: Vec<WorkerArgs>,
        tx: &Sender<Msg>,
        log_dir: &Path,
        phase: &str,
    ) -> Result<Workers, String> {
        let mut workers = Workers { procs: Vec::new() };
        for a in args {
            let stderr = log_dir.join(format!("phase-{phase}-worker-{}.stderr", a.id));
            let err_file = File::create(&stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
            let mut child = Command::new(bin)
                .args(a.to_args())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(err_file)
                .spawn()
                .map_err(|e| {
                    format!(
                        "cannot start the worker {}: {e} (build it: cargo build -p redlease-tests --bins)",
                        bin.display()
                    )
                })?;
            let stdout = child.stdout.take().expect("piped stdout");
            let (tx, id) = (tx.clone(), a.id);
            let reader = std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send((id, line)).is_err() {
                        return;
                    }
                }
            });
            let stdin = child.stdin.take();
            workers.procs.push(WorkerProc { id: a.id, child, stdin, reader: Some(reader), stderr });
        }
        Ok(workers)
    }

    fn pid(&self, worker: usize) -> u32 {
        self.procs[worker].child.id()
    }

    /// Close every worker's stdin (they finish their cycle and exit), wake any stopped one,
    /// and wait for them. Returns what went wrong.
    fn stop(&mut self, timeout: Duration) -> Vec<String> {
        let mut problems = Vec::new();
        for p in &mut self.procs {
            p.stdin.take();
            let _ = sys::signal(p.child.id(), libc::SIGCONT);
        }
        let deadline = Instant::now() + timeout;
        for p in &mut self.procs {
            let status = loop {
                match p.child.try_wait() {
                    Ok(Some(status)) => break Some(status),
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                    _ => break None,
                }
            };
            match status {
                Some(s) if s.success() => {}
                Some(s) => {
                    let err = std::fs::read_to_string(&p.stderr).unwrap_or_default();
                    problems.push(format!("worker {} exited with {s}: {}", p.id, err.trim()));
                }
                None => {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    problems.push(format!("worker {} did not stop within {timeout:?}: killed", p.id));
                }
            }
            if let Some(r) = p.reader.take() {
                let _ = r.join();
            }
        }
        problems
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for p in &mut self.procs {
            if let Ok(None) = p.child.try_wait() {
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
        }
    }
}

/// One phase while it runs: its nodes, workers, log, notes and broken expectations.
struct PhaseRun<'a> {
    ctx: &'a Ctx<'a>,
    lab: &'a mut NetLab,
    phase: Phase,
    servers: Servers,
    shifts: Vec<ClockShift>,
    workers: Workers,
    rx: Receiver<Msg>,
    log: Vec<Record>,
    notes: Vec<String>,
    failures: Vec<String>,
    resource: String,
    /// What each worker takes.
    shapes: Vec<Shape>,
    /// The prefix of the phase's keys in the store.
    store_prefix: String,
}

fn secs_between(from: u64, to: u64) -> f64 {
    (to as f64 - from as f64) / 1e9
}

impl PhaseRun<'_> {
    fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    fn fail(&mut self, failure: String) {
        self.failures.push(failure);
    }

    fn take(&mut self, (w, line): Msg) {
        match Record::parse(&line) {
            Ok(r) => self.log.push(r),
            Err(e) => self.failures.push(format!("worker {w} wrote a line the suite cannot read: {e}")),
        }
    }

    /// Take the workers' events until `deadline` or until `pred` accepts a new one.
    fn pump(&mut self, deadline: Instant, mut pred: impl FnMut(&Record) -> bool) -> Result<Option<Record>, String> {
        loop {
            if interrupted() {
                return Err("interrupted".into());
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            match self.rx.recv_timeout((deadline - now).min(Duration::from_millis(50))) {
                Ok(msg) => {
                    let before = self.log.len();
                    self.take(msg);
                    if let Some(r) = self.log[before..].iter().find(|r| pred(r)) {
                        return Ok(Some(r.clone()));
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(
                        deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)),
                    );
                }
            }
        }
    }

    /// Let the workers run for `d`, taking their events.
    fn sleep(&mut self, d: Duration) -> Result<(), String> {
        self.pump(Instant::now() + d, |_| false).map(|_| ())
    }

    /// Wait up to `timeout` for a new event accepted by `pred`.
    fn wait_for(&mut self, timeout: Duration, pred: impl FnMut(&Record) -> bool) -> Result<Option<Record>, String> {
        self.pump(Instant::now() + timeout, pred)
    }

    /// Wait for a fresh acquisition with a fence of at least `min_fence`, started after
    /// `after` (mono ns).
    fn wait_acquired(&mut self, min_fence: u64, after: u64) -> Result<(usize, u64, String), String> {
        match self.wait_acquired_of(None, min_fence, after)? {
            Record { worker, event: Event::Acquired { fence, token, .. }, .. } => Ok((worker, fence, token)),
            _ => unreachable!("wait_acquired_of returns acquisitions"),
        }
    }

    /// [`wait_acquired`](Self::wait_acquired) of a lock of `kind` (any, when `None`).
    fn wait_acquired_of(&mut self, kind: Option<LockKind>, min_fence: u64, after: u64) -> Result<Record, String> {
        let found = self.wait_for(Duration::from_secs(15), |r| {
            matches!(&r.event, Event::Acquired { start, fence, kind: k, .. }
                if *fence >= min_fence && *start > after && kind.is_none_or(|kind| kind == *k))
        })?;
        found.ok_or_else(|| "no acquisition within 15 s".into())
    }

    fn count(&self, pred: impl Fn(&Record) -> bool) -> usize {
        self.log.iter().filter(|r| pred(r)).count()
    }

    fn acquisitions_between(&self, from: u64, to: u64) -> usize {
        self.count(|r| matches!(r.event, Event::Acquired { t, .. } if t >= from && t <= to))
    }

    fn partition(&mut self, nodes: &[usize], cut: Cut) -> Result<(), String> {
        nodes.iter().try_for_each(|&i| self.lab.partition(i, cut))
    }

    fn heal_all(&mut self) -> Result<(), String> {
        self.lab.heal_all()
    }

    /// Move node `i`'s wall clock forward by `by`, and check on the node that it took effect:
    /// a key's PTTL drops by about `by`, and a key with less than `by` left is gone at once.
    fn jump(&mut self, i: usize, by: Duration) -> Result<(), String> {
        let (long, short) = ("redlease-faults:probe:long", "redlease-faults:probe:short");
        let mut conn = self.servers.node(i).conn().map_err(|e| format!("node {i}: {e}"))?;
        let io = |e: std::io::Error| format!("node {i}: {e}");
        conn.set_px(long, "1", Duration::from_secs(600)).map_err(io)?;
        conn.set_px(short, "1", by / 2).map_err(io)?;
        let before = conn.pttl(long).map_err(io)?;
        self.shifts[i].jump(by)?;
        let after = conn.pttl(long).map_err(io)?;
        let short_left = conn.cmd(&["EXISTS", short]).map_err(io)?;
        conn.del(long).map_err(io)?;
        let by_ms = by.as_millis() as i64;
        if after > before - by_ms * 3 / 4 || short_left != Reply::Int(0) {
            return Err(format!(
                "the clock shim had no effect on node {i}: PTTL {before} → {after} ms after a {by_ms} ms jump, short key exists: {short_left:?}"
            ));
        }
        self.note(format!(
            "node {i}'s clock jumped +{by_ms} ms (now +{} ms), checked on the node: PTTL {before} → {after} ms, a key with {} ms left expired at once",
            self.shifts[i].shift().as_millis(),
            by_ms / 2
        ));
        Ok(())
    }

    /// Overlapping windows in the log so far.
    fn overlaps(&self) -> usize {
        check::overlaps(&self.log)
    }

    /// What the checker found that only the shapes have: the most holders at once, and the
    /// readers' view.
    fn shape_notes(&mut self, r: &Report) {
        let holds = check::holds(&self.log);
        let count = |kind: LockKind| holds.iter().filter(|h| h.kind == kind).count();
        match self.phase.lock {
            Lock::Mutex | Lock::Election => {}
            Lock::Semaphore => {
                let two = holds.iter().filter(|h| h.permits.len() == 2).count();
                self.note(format!(
                    "{} holds ({two} of them of 2 permits at once); at most {} of the {SEM_LIMIT} permits held at one instant, {} acquisition(s) beyond the limit; {} pair(s) of holders of one permit at once",
                    holds.len(),
                    r.peak,
                    r.beyond_limit,
                    r.overlaps
                ));
            }
            Lock::ReadWrite => {
                let reads = holds.iter().filter(|h| h.kind == LockKind::Read).map(|h| h.reads.len()).sum::<usize>();
                self.note(format!(
                    "{} write holds, {} read holds ({reads} reads); at most {} holders at once, {} pair(s) of readers together, {} pair(s) with a writer; readers that saw the counter change under them: {} fenced, {} unchecked",
                    count(LockKind::Write),
                    count(LockKind::Read),
                    r.peak,
                    r.shared,
                    r.overlaps,
                    r.changed_fenced,
                    r.changed_plain
                ));
            }
        }
    }

    /// Lock keys without a TTL on every node (fence counters and the lock format key are meant
    /// to live forever).
    fn keys_without_ttl(&mut self) -> usize {
        let mut found = 0;
        for i in 0..NODES {
            let node = self.servers.node(i);
            let scan = node.conn().and_then(|mut c| {
                let keys = c.keys("*")?;
                let mut bad = Vec::new();
                // A semaphore's recorded limit lives forever too.
                let kept = |k: &String| {
                    let limit = k.starts_with(redlease_core::SEMAPHORE_PREFIX) && k.ends_with("}:limit");
                    k.starts_with(FENCE_PREFIX) || k == redlease_core::FORMAT_KEY || limit
                };
                for key in keys.into_iter().filter(|k| !kept(k)) {
                    if c.pttl(&key)? == -1 {
                        bad.push(key);
                    }
                }
                Ok(bad)
            });
            match scan {
                Ok(bad) => {
                    found += bad.len();
                    if !bad.is_empty() {
                        self.failures.push(format!("node {i}: lock keys without a TTL: {bad:?}"));
                    }
                }
                Err(e) => self.failures.push(format!("node {i}: cannot scan its keys after the phase: {e}")),
            }
        }
        found
    }
}

/// The store's keys a phase uses: one set, or one per permit of a semaphore.
fn phase_store_keys(lock: Lock, prefix: &str) -> Vec<StoreKeys> {
    match lock.limit() {
        Some(limit) => (0..limit as u16).map(|s| StoreKeys::permit(prefix, s)).collect(),
        None => vec![StoreKeys::new(prefix)],
    }
}

fn run_phase(ctx: &Ctx<'_>, lab: &mut NetLab, phase: Phase) -> Result<PhaseResult, String> {
    let began = Instant::now();
    let run_id = std::process::id();
    let shifts =
        (0..NODES).map(|i| ctx.shim.shift_file(&format!("{}-{i}", phase.id))).collect::<Result<Vec<_>, _>>()?;
    let placements = (0..NODES)
        .map(|i| {
            Placement::new(lab.nodes()[i].ip.into(), NODE_PORT)
                .command_prefix(lab.exec_prefix(i))
                .env("LD_PRELOAD", ctx.shim.lib())
                .env(SHIFT_VAR, shifts[i].path())
        })
        .collect();
    let servers = Servers::builder().placements(placements).persist(phase.persist).try_start()?;
    let resource = format!("faults:lock:{}", phase.id);
    let keys = format!("faults:{run_id}:{}", phase.id);
    let store_keys = phase_store_keys(phase.lock, &keys);
    for k in &store_keys {
        Store::connect(ctx.store, k.clone()).and_then(|mut s| s.reset()).map_err(|e| format!("store: {e}"))?;
    }
    let (tx, rx) = mpsc::channel();
    let n = phase.lock.workers(ctx.options);
    let shapes: Vec<Shape> = (0..n).map(|id| phase.lock.shape(id, n)).collect();
    let args = (0..n)
        .map(|id| WorkerArgs {
            id,
            client: if id % 2 == 0 { ClientKind::Tokio } else { ClientKind::Mio },
            store: ctx.store,
            keys: keys.clone(),
            resource: resource.clone(),
            shape: shapes[id],
            ttl: TTL,
            work: phase.work,
            wait: WAIT,
            node_timeout: NODE_TIMEOUT,
            nodes: servers.urls(),
        })
        .collect();
    let workers = Workers::spawn(&ctx.options.worker_bin, args, &tx, &ctx.options.log_dir, phase.id)?;
    drop(tx);
    let mut run = PhaseRun {
        ctx,
        lab,
        phase,
        servers,
        shifts,
        workers,
        rx,
        log: Vec::new(),
        notes: Vec::new(),
        failures: Vec::new(),
        resource,
        shapes,
        store_prefix: keys.clone(),
    };

    let mut started = 0;
    while started < n {
        match run.wait_for(Duration::from_secs(20), |r| matches!(r.event, Event::Started { .. }))? {
            Some(_) => started += 1,
            None => {
                let problems = run.workers.stop(Duration::from_secs(5));
                return Err(format!("workers did not start within 20 s: {problems:?}"));
            }
        }
    }

    let t0 = mono_ns();
    if let Err(e) = (phase.script)(&mut run) {
        run.fail(format!("the phase could not do what it must: {e}"));
    }
    if let Err(e) = run.heal_all() {
        run.fail(format!("healing the partitions: {e}"));
    }
    for node in run.servers.nodes() {
        if node.is_paused() {
            node.resume();
        }
    }
    let t1 = mono_ns();
    for problem in run.workers.stop(Duration::from_secs(20)) {
        run.fail(problem);
    }
    while let Ok(msg) = run.rx.try_recv() {
        run.take(msg);
    }

    let keys_without_ttl = run.keys_without_ttl();
    let mut finals = Finals::default();
    for k in store_keys {
        let (fenced, plain) =
            Store::connect(ctx.store, k).and_then(|mut s| s.finals()).map_err(|e| format!("store: {e}"))?;
        finals.fenced += fenced;
        finals.plain += plain;
    }
    let limit = phase.lock.limit().map(|l| l as usize);
    let report = check::check(&run.log, (t0, t1), finals, keys_without_ttl, limit);
    run.shape_notes(&report);
    if report.late_writes > 0 && phase.expect != Expect::LateWrite {
        run.note(format!(
            "{} write(s) went out after their writer's valid_until (the machine stalled the holder past its validity); {} of them after a newer holder had read the store, of which the fenced store accepted {}",
            report.late_writes, report.late_after_newer, report.late_after_newer_accepted
        ));
    }
    expect(phase.lock, phase.expect, &report, &mut run.failures);

    let log_path = ctx.options.log_dir.join(format!("phase-{}.log", phase.id));
    let mut text = String::new();
    for r in &run.log {
        let _ = writeln!(text, "{r}");
    }
    std::fs::write(&log_path, text).map_err(|e| format!("{}: {e}", log_path.display()))?;

    Ok(PhaseResult {
        id: phase.id,
        name: phase.name,
        lock: phase.lock,
        expect: phase.expect,
        report,
        notes: run.notes,
        failures: run.failures,
        seconds: began.elapsed().as_secs_f64(),
    })
}

/// What a phase of `lock` that must show `expect` must show, as its table row says it.
pub fn expected(lock: Lock, expect: Expect) -> String {
    match (lock, expect) {
        (Lock::Mutex | Lock::Election, Expect::Safe) => "safe".into(),
        (Lock::Semaphore, Expect::Safe) => format!("safe: {SEM_LIMIT} holders at most, {SEM_LIMIT} at once"),
        (Lock::ReadWrite, Expect::Safe) => "safe: a writer alone, readers together".into(),
        (_, Expect::Overlaps) => "unsafe: overlaps".into(),
        (Lock::Mutex, Expect::LateWrite) => "unsafe: late write".into(),
        (Lock::Election, Expect::LateWrite) => "unsafe: late write, refused by the epoch".into(),
        (Lock::Semaphore, Expect::LateWrite) => "unsafe: late write, refused by its permit's fence".into(),
        (Lock::ReadWrite, Expect::LateWrite) => "unsafe: late write, refused by the writer epoch".into(),
    }
}

/// Add the broken expectations of `report` to `failures`.
pub fn expect(lock: Lock, expect: Expect, r: &Report, failures: &mut Vec<String>) {
    let mut must = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    must(r.acquisitions > 0, "no acquisition at all (liveness)".into());
    must(r.lost_fenced == 0, format!("{} update(s) lost in the fenced store (must be 0)", r.lost_fenced));
    must(
        r.late_after_newer_accepted == 0,
        format!(
            "{} late write(s) after a newer holder accepted by the fenced store (must be 0)",
            r.late_after_newer_accepted
        ),
    );
    must(r.keys_without_ttl == 0, format!("{} lock key(s) without a TTL (must be 0)", r.keys_without_ttl));
    must(
        r.untyped_errors == 0,
        format!("{} failed acquisition(s) without a typed reason: {:?}", r.untyped_errors, r.errors),
    );
    // What the shapes must show in every phase: no more holders than permits, and no reader
    // that saw the fenced counter change.
    if let Some(limit) = lock.limit() {
        must(
            r.beyond_limit == 0 && r.peak <= limit as usize,
            format!(
                "{} holders at once, {} acquisition(s) beyond the limit of {limit} (must be at most {limit}, 0)",
                r.peak, r.beyond_limit
            ),
        );
    }
    if lock == Lock::ReadWrite {
        must(
            r.changed_fenced == 0,
            format!("{} reader(s) saw the fenced counter change under them (must be 0)", r.changed_fenced),
        );
    }
    match expect {
        Expect::Safe => {
            match lock {
                Lock::Mutex | Lock::Election => {}
                // (Above the limit is broken in every phase, above.)
                Lock::Semaphore => must(
                    r.peak >= SEM_LIMIT as usize,
                    format!("at most {} holders at once: the {SEM_LIMIT} permits were never all used", r.peak),
                ),
                Lock::ReadWrite => {
                    must(
                        r.changed_plain == 0 || r.late_writes > 0,
                        format!(
                            "{} reader(s) saw the unchecked counter change under them, with no late write (must be 0)",
                            r.changed_plain
                        ),
                    );
                    must(r.shared > 0, "no two readers ever held the lock together (readers must share)".into());
                }
            }
            must(r.overlaps == 0, format!("{} overlapping holder windows (must be 0)", r.overlaps));
            // A holder that writes after its validity (a stall of the machine as long as a
            // paused holder's) is outside the algorithm's assumptions: it may overwrite newer
            // values of the unchecked counter, never of the fenced one.
            must(
                r.lost_plain == 0 || r.late_writes > 0,
                format!("{} update(s) lost in the unchecked counter, with no late write (must be 0)", r.lost_plain),
            );
            must(r.fence_order_errors == 0, format!("{} fence-order error(s) (must be 0)", r.fence_order_errors));
        }
        Expect::Overlaps => {
            must(r.overlaps >= 1, "no overlapping holders: the unsafe case did not show (must be at least 1)".into());
        }
        Expect::LateWrite => {
            must(r.overlaps == 0, format!("{} overlapping holder windows (must be 0)", r.overlaps));
            must(r.late_writes >= 1, "no write after the writer's valid_until (must be at least 1)".into());
            must(
                r.late_after_newer >= 1,
                "no late write came after a newer holder had read the store: the fence check was not put to the test (must be at least 1)".into(),
            );
            // The late write shows on the unchecked counter as an update it overwrote, or (a
            // reader-writer lock, when the holders after the paused writer were readers, so
            // that it had nothing newer to overwrite) as a change under a paused reader.
            let shown = r.lost_plain >= 1 || (lock == Lock::ReadWrite && r.changed_plain >= 1);
            must(
                shown,
                "the unchecked counter lost nothing and changed under no reader: the late write did not show (must be at least 1)"
                    .into(),
            );
            must(r.fence_order_errors == 0, format!("{} fence-order error(s) (must be 0)", r.fence_order_errors));
        }
    }
}

// ---------------------------------------------------------------------------------------
// The phases' scripts.

fn baseline(p: &mut PhaseRun<'_>) -> Result<(), String> {
    let d = p.ctx.secs(3.0, 20.0);
    p.sleep(d)?;
    p.note(format!("{:.0} s without faults", d.as_secs_f64()));
    Ok(())
}

fn minority_partition(p: &mut PhaseRun<'_>) -> Result<(), String> {
    cut_minorities(p, p.ctx.rounds(4, 10), p.ctx.secs(1.0, 2.0))
}

fn majority_partition(p: &mut PhaseRun<'_>) -> Result<(), String> {
    let (before, during, after) = (p.ctx.secs(1.0, 3.0), p.ctx.secs(2.5, 6.0), p.ctx.secs(1.0, 3.0));
    cut_majority(p, before, during, after)
}

/// Phases 2 and 3 in one, shorter: the shapes' partitions.
fn partitions(p: &mut PhaseRun<'_>) -> Result<(), String> {
    cut_minorities(p, p.ctx.rounds(2, 6), p.ctx.secs(1.0, 2.0))?;
    let (before, during, after) = (p.ctx.secs(0.5, 2.0), p.ctx.secs(2.0, 5.0), p.ctx.secs(0.5, 2.0));
    cut_majority(p, before, during, after)
}

/// Cut off nodes (0,1), (2,3), (4,0), ... in turn, `rounds` times for `step` each: locking
/// must go on.
fn cut_minorities(p: &mut PhaseRun<'_>, rounds: usize, step: Duration) -> Result<(), String> {
    let mut during = 0;
    for k in 0..rounds {
        let pair = [(2 * k) % NODES, (2 * k + 1) % NODES];
        let from = mono_ns();
        p.partition(&pair, Cut::Drop)?;
        p.sleep(step)?;
        during += p.acquisitions_between(from, mono_ns());
        p.heal_all()?;
    }
    p.sleep(Duration::from_millis(300))?;
    p.note(format!(
        "{rounds} rounds of {:.0} s, nodes (0,1), (2,3), (4,0), ... cut off by iptables DROP in their namespaces (checked: connects time out); {during} acquisitions while a pair was cut off",
        step.as_secs_f64()
    ));
    if during == 0 {
        p.fail("no acquisition while a minority was partitioned (liveness)".into());
    }
    Ok(())
}

/// Cut off nodes 0, 1, 2 for `during`, after `before`, and let it run `after` the first
/// acquisition once healed: nothing may be granted meanwhile.
fn cut_majority(p: &mut PhaseRun<'_>, before: Duration, during: Duration, after: Duration) -> Result<(), String> {
    p.sleep(before)?;
    // From when the last node is cut off (and checked): on a loaded machine the iptables
    // commands alone can take more than a second.
    p.partition(&[0, 1, 2], Cut::Drop)?;
    let t_part = mono_ns();
    p.sleep(during)?;
    let t_heal = mono_ns();
    p.heal_all()?;
    let recovered =
        p.wait_for(Duration::from_secs(15), |r| matches!(r.event, Event::Acquired { t, .. } if t > t_heal))?;
    p.sleep(after)?;

    // Attempts already in flight when the partition began may finish just after it.
    let granted = p.acquisitions_between(t_part + 1_000_000_000, t_heal);
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for r in &p.log {
        if let Event::AcquireFailed { t, kind, .. } = &r.event {
            if *t > t_part && *t <= t_heal + 1_500_000_000 {
                *kinds.entry(kind.clone()).or_default() += 1;
            }
        }
    }
    let unreachable: usize = kinds.iter().filter(|(k, _)| k.ends_with("unreachable")).map(|(_, n)| n).sum();
    p.note(format!(
        "nodes 0, 1, 2 cut off for {:.1} s: {granted} acquisitions granted from 1 s into it until healed (must be 0), failed acquisitions by kind {kinds:?}",
        secs_between(t_part, t_heal)
    ));
    if granted > 0 {
        p.fail(format!("{granted} acquisition(s) granted while a majority was partitioned"));
    }
    if unreachable == 0 {
        p.fail("no typed 'unreachable' error while a majority was partitioned".into());
    }
    match recovered {
        Some(r) => p.note(format!("first acquisition {:.2} s after healing", secs_between(t_heal, r.event.t()))),
        None => p.fail("no acquisition within 15 s of healing the partition".into()),
    }
    Ok(())
}

fn node_pause(p: &mut PhaseRun<'_>) -> Result<(), String> {
    p.sleep(Duration::from_millis(500))?;
    // With two nodes stopped every grant needs all three others, and the shapes' waiters (a
    // semaphore's permits taken per node, a waiting writer's mark and reservations) can hold
    // grants off for a few seconds first: their short pauses are a TTL longer.
    let hold = TTL
        * match (p.ctx.options.short, p.phase.lock) {
            (true, Lock::Mutex) => 3,
            (true, _) => 4,
            (false, _) => 5,
        };
    let steps: &[&[usize]] = if p.ctx.options.short { &[&[1], &[2, 3]] } else { &[&[1], &[2, 3], &[4], &[0, 1]] };
    for nodes in steps {
        let from = mono_ns();
        for &i in *nodes {
            p.servers.node(i).pause();
        }
        p.sleep(hold)?;
        for &i in *nodes {
            p.servers.node(i).resume();
        }
        let during = p.acquisitions_between(from, mono_ns());
        p.note(format!(
            "nodes {nodes:?} stopped (SIGSTOP) for {:.0} s: {during} acquisitions meanwhile",
            hold.as_secs_f64()
        ));
        if during == 0 {
            p.fail(format!("no acquisition while nodes {nodes:?} were paused (liveness)"));
        }
        p.sleep(Duration::from_millis(500))?;
    }
    Ok(())
}

/// Kill -9 a majority of the nodes while a holder is in the middle of its work, and restart
/// them at once: with `appendfsync always` they come back with the lock and the fence
/// counters; without persistence they come back empty, and another worker takes the lock.
/// The holder of a semaphore is checked in its (first) permit; of a reader-writer lock, a writer
/// and a reader in turn (a reader's fence is the epoch, which the counter must not be below).
fn restart_majority(p: &mut PhaseRun<'_>) -> Result<(), String> {
    p.sleep(Duration::from_secs(1))?;
    let persist = p.phase.persist;
    // With persistence, a round counts when every restarted node answered within the holder's
    // validity: a restart that outlasts it (a loaded machine) may rightly find the key expired.
    let (min_rounds, max_rounds) =
        if persist { (p.ctx.rounds(2, 6), p.ctx.rounds(2, 6) + 3) } else { (p.ctx.rounds(1, 6), 6) };
    let (mut round, mut counted) = (0, 0);
    while round < max_rounds && if persist { counted < min_rounds } else { round < min_rounds || p.overlaps() == 0 } {
        let want = match p.phase.lock {
            Lock::ReadWrite if round % 2 == 1 => Some(LockKind::Read),
            Lock::ReadWrite => Some(LockKind::Write),
            Lock::Mutex | Lock::Semaphore | Lock::Election => None,
        };
        let min_fence = if want == Some(LockKind::Read) { 1 } else { 3 };
        let acquired = p.wait_acquired_of(want, min_fence, mono_ns())?;
        let Record { worker: holder, event: Event::Acquired { fence, token, kind, permits, until, .. }, .. } = acquired
        else {
            unreachable!("wait_acquired_of returns acquisitions");
        };
        let majority = [round % NODES, (round + 1) % NODES, (round + 2) % NODES];
        for &i in &majority {
            p.servers.node(i).kill();
        }
        let servers = &p.servers;
        let lock_key = match permits.first() {
            Some(permit) => format!("{}{{{}}}:{permit}", redlease_core::SEMAPHORE_PREFIX, p.resource),
            None => p.resource.clone(),
        };
        let fence_key = format!("{FENCE_PREFIX}{lock_key}");
        let readers_key = format!("{}{lock_key}", redlease_core::READERS_PREFIX);
        // Per restarted node, read as soon as it answers PING: its fence counter, whether its
        // lock key holds the holder's token (a reader: whether the key is the readers' and the
        // reader among them), and whether it holds another's. (Another worker may already have
        // taken the lock on a node that came back empty; its fence round, whose quorum can
        // include the nodes that kept the holder's counter, may already have written a counter
        // above the holder's there: such a node's counter says nothing of what survived the
        // restart.)
        let sem_limit = p.phase.lock.limit().unwrap_or(0) as u16;
        let resource = &p.resource;
        let found: Vec<Probe> = std::thread::scope(|s| {
            let handles: Vec<_> = majority
                .iter()
                .map(|&i| {
                    let (fence_key, lock_key, readers_key, token) = (&fence_key, &lock_key, &readers_key, &token);
                    s.spawn(move || {
                        servers.node(i).restart(true);
                        let mut conn = servers.node(i).conn().ok();
                        let answered = mono_ns();
                        let counter = conn.as_mut().and_then(|c| c.get(fence_key).ok().flatten());
                        let value = conn.as_mut().and_then(|c| c.get(lock_key).ok().flatten());
                        let (kept, retaken) = if kind == LockKind::Read {
                            let readers = value.as_deref().is_some_and(|v| v.starts_with(redlease_core::READERS_VALUE));
                            let score = conn.as_mut().and_then(|c| c.cmd(&["ZSCORE", readers_key, token]).ok());
                            let reading = matches!(score, Some(Reply::Bulk(Some(_))));
                            (readers && reading, value.is_some() && !readers)
                        } else {
                            // A waiter's refused attempt marks the value: `token:`.
                            let holder = value.as_deref().map(|v| redlease_core::holder_of(v).0.to_owned());
                            let kept = holder.as_deref() == Some(token.as_str());
                            (kept, holder.is_some() && !kept)
                        };
                        // A semaphore's permits are granted per node: where the token is on this one.
                        let mine = (0..sem_limit)
                            .filter(|k| {
                                let key = format!("{}{{{resource}}}:{k}", redlease_core::SEMAPHORE_PREFIX);
                                let v = conn.as_mut().and_then(|c| c.get(&key).ok().flatten());
                                v.is_some_and(|v| redlease_core::holder_of(&v).0 == token.as_str())
                            })
                            .collect();
                        let counter = counter.and_then(|v| v.parse::<u64>().ok());
                        Probe { counter, kept, retaken, permits: mine, answered }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a restart thread panicked")).collect()
        });
        let counters: Vec<Option<u64>> = found.iter().map(|f| f.counter).collect();
        let kept = found.iter().filter(|f| f.kept).count();
        let last = found.iter().map(|f| f.answered).max().unwrap_or(0);
        p.note(format!(
            "round {}: worker {holder} holds {} {fence}; nodes {majority:?} killed (SIGKILL) and restarted; after the restart {kept} of them still had its lock{}, and their fence counters were {counters:?}",
            round + 1,
            match kind {
                LockKind::Read => "a read lock at epoch",
                LockKind::Write => "the write lock with fence",
                LockKind::Semaphore => "permit(s) with fence",
                LockKind::Mutex => "fence",
            },
            match permits.first() {
                Some(permit) => format!(
                    " in permit {permit} (of {permits:?}; its token was in permits {:?} on them)",
                    found.iter().map(|f| &f.permits).collect::<Vec<_>>()
                ),
                None => String::new(),
            },
        ));
        if persist && counters.iter().all(|c| c.unwrap_or(0) < fence) {
            p.fail(format!(
                "with appendfsync always the restarted nodes lost the holder's fence counter {fence} ({counters:?})"
            ));
        }
        if persist && last >= until {
            p.note(format!(
                "the last restarted node answered {:.0} ms after the holder's valid_until: its key may have expired meanwhile; not counted",
                (last - until) as f64 / 1e6
            ));
        } else if persist {
            counted += 1;
            if kept == 0 {
                p.fail(
                    "with appendfsync always the restarted nodes lost the holder's lock (none kept it), though all answered within its validity"
                        .into(),
                );
            }
        }
        let survived = found.iter().any(|f| !f.retaken && f.counter.unwrap_or(0) >= fence);
        if !persist && (kept > 0 || survived) {
            p.fail(format!(
                "without persistence restarted nodes still had the holder's lock ({kept}) or its fence counter ({counters:?})"
            ));
        }
        p.sleep(p.phase.work + Duration::from_secs(1))?;
        round += 1;
    }
    p.note(format!("{round} round(s); overlapping holder windows in the phase: {}", p.overlaps()));
    if persist && counted < min_rounds {
        p.fail(format!(
            "only {counted} of {min_rounds} restarts finished within the holder's validity in {round} rounds"
        ));
    }
    Ok(())
}

/// What a restarted node held, read as soon as it answered.
struct Probe {
    /// Its fence counter of the holder's key.
    counter: Option<u64>,
    /// Its key still held the holder's token (a reader: the readers' value, with the reader).
    kept: bool,
    /// Its key held another holder's.
    retaken: bool,
    /// A semaphore's permits holding the holder's token there.
    permits: Vec<u16>,
    /// When it answered (mono ns).
    answered: u64,
}

fn clock_jump_one(p: &mut PhaseRun<'_>) -> Result<(), String> {
    let by = 2 * TTL;
    p.sleep(Duration::from_secs(1))?;
    // A jump alone, while the holder's keys are on all five nodes: one node forgets the lock,
    // the other four still refuse everyone else.
    p.wait_acquired(1, mono_ns())?;
    p.jump(4, by)?;
    p.sleep(Duration::from_millis(1500))?;
    let alone = p.overlaps();
    p.note(format!("a jump of node 4 while the holder's keys were on all five nodes: {alone} overlaps"));

    // Kleppmann's interleaving: the holder got only nodes 0, 1, 2 (3 and 4 were cut off);
    // the partition heals and node 2's clock jumps, so 2, 3, 4 grant the lock again. The
    // partition resets connections rather than dropping packets: the others must reach 3 and
    // 4 again while the holder works, and a client gets a silently dropped link back only at
    // TCP's retransmission pace (seconds after a partition this long).
    let rounds = p.ctx.rounds(1, 3);
    let mut done = 0;
    for _ in 0..6 {
        let t_part = mono_ns();
        p.partition(&[3, 4], Cut::Reset)?;
        p.sleep(TTL + Duration::from_millis(300))?;
        let (holder, fence, _) = p.wait_acquired(1, t_part + 100_000_000)?;
        p.heal_all()?;
        p.jump(2, by)?;
        let before = p.overlaps();
        p.sleep(p.phase.work + Duration::from_secs(1))?;
        let now = p.overlaps();
        p.note(format!(
            "worker {holder} (fence {fence}) got nodes 0, 1, 2 while 3, 4 were cut off (iptables REJECT with tcp-reset); healed, node 2 jumped: new overlapping holder windows: {}",
            now - before
        ));
        if now > before {
            done += 1;
            if done >= rounds {
                break;
            }
        }
        p.sleep(Duration::from_millis(500))?;
    }
    Ok(())
}

fn clock_jump_majority(p: &mut PhaseRun<'_>) -> Result<(), String> {
    let by = 2 * TTL;
    p.sleep(Duration::from_secs(1))?;
    let rounds = p.ctx.rounds(1, 3);
    let mut done = 0;
    for k in 0..6 {
        let (holder, fence, _) = p.wait_acquired(1, mono_ns())?;
        let majority = [k % NODES, (k + 1) % NODES, (k + 2) % NODES];
        for &i in &majority {
            p.jump(i, by)?;
        }
        let before = p.overlaps();
        p.sleep(p.phase.work + Duration::from_secs(1))?;
        let now = p.overlaps();
        p.note(format!(
            "worker {holder} (fence {fence}) held the lock; nodes {majority:?} jumped: new overlapping holder windows: {}",
            now - before
        ));
        if now > before {
            done += 1;
            if done >= rounds {
                break;
            }
        }
    }
    Ok(())
}

fn holder_pause(p: &mut PhaseRun<'_>) -> Result<(), String> {
    p.sleep(Duration::from_secs(1))?;
    // Pause a tokio worker, then a blocking mio one, and so on: their lost signals differ. A
    // reader-writer lock's rounds pause a writer, then a reader: a tokio writer, a mio reader,
    // a mio writer, a tokio reader.
    let rounds = p.ctx.rounds(2, 4);
    let mut done = 0;
    for _ in 0..rounds * 3 {
        let tokio = if p.phase.lock == Lock::ReadWrite { done % 4 == 0 || done % 4 == 3 } else { done % 2 == 0 };
        let want = if tokio { ClientKind::Tokio } else { ClientKind::Mio }.name();
        if p.phase.lock == Lock::ReadWrite && done % 2 == 1 {
            if reader_pause(p, want)? {
                done += 1;
                if done >= rounds {
                    break;
                }
                p.sleep(Duration::from_secs(1))?;
            }
            continue;
        }
        // A holder that writes: a reader-writer lock's writer, not a reader.
        let shapes = p.shapes.clone();
        let read = p.wait_for(Duration::from_secs(15), |r| {
            r.client == want && shapes[r.worker] != Shape::Read && matches!(r.event, Event::Read { accepted: true, .. })
        })?;
        let Some(read) = read else {
            return Err(format!("no {want} holder read the store within 15 s"));
        };
        let w = read.worker;
        let pid = p.workers.pid(w);
        sys::signal(pid, libc::SIGSTOP).map_err(|e| format!("SIGSTOP worker {w}: {e}"))?;
        let t_stop = mono_ns();
        if !sys::wait_for_state(pid, |s| s == 'T' || s == 't') {
            return Err(format!("worker {w} did not stop"));
        }
        p.sleep(2 * TTL)?;
        sys::signal(pid, libc::SIGCONT).map_err(|e| format!("SIGCONT worker {w}: {e}"))?;
        let write = p.wait_for(Duration::from_secs(10), |r| r.worker == w && matches!(r.event, Event::Write { .. }))?;
        let Some(Record { client, event: Event::Write { t, fenced, lost, expired, fence, permit, .. }, .. }) = write
        else {
            return Err(format!("worker {w} wrote nothing within 10 s of SIGCONT"));
        };
        if t < t_stop {
            p.note(format!("worker {w}'s write went out before the SIGSTOP landed: not counted, again"));
            continue;
        }
        // The store can refuse it only once a newer holder (of its permit) has read.
        let holds = check::holds(&p.log);
        let after_newer = holds
            .iter()
            .filter(|h| h.worker == w)
            .flat_map(|h| h.late.iter().filter(|l| l.sent == t).map(move |l| (h, l)))
            .any(|(h, l)| check::after_newer_holder(&holds, h, l));
        if !after_newer {
            p.note(format!(
                "worker {w}'s late write went out before any newer holder{} had read the store: not counted, again",
                if p.phase.lock == Lock::Semaphore { " of its permit" } else { "" }
            ));
            continue;
        }
        let until = p
            .log
            .iter()
            .rev()
            .find_map(|r| match r.event {
                Event::Acquired { until, .. } if r.worker == w => Some(until),
                _ => None,
            })
            .unwrap_or(0);
        let fenced = match fenced {
            Fenced::Accepted => "ACCEPTED",
            Fenced::Rejected => "rejected",
            Fenced::Skipped => "skipped",
        };
        let released =
            p.wait_for(Duration::from_secs(10), |r| r.worker == w && matches!(r.event, Event::Released { .. }))?;
        let lost_at_release = match released {
            Some(Record { event: Event::Released { t: at, lost: true, .. }, .. }) => {
                format!("had fired (release came {:.1} ms after the write)", (at as f64 - t as f64) / 1e6)
            }
            Some(_) => "had still not fired".to_owned(),
            None => "unknown (no release logged)".to_owned(),
        };
        // What the store had seen, just after: a newer holder's fence (of the permit), or a
        // reader's epoch as high as the writer's fence.
        let keys = match permit {
            Some(s) => StoreKeys::permit(&p.store_prefix, s),
            None => StoreKeys::new(&p.store_prefix),
        };
        let (highest, epoch) =
            Store::connect(p.ctx.store, keys).and_then(|mut s| s.marks()).map_err(|e| format!("store: {e}"))?;
        let whose = match (p.phase.lock, permit) {
            (Lock::Mutex | Lock::Election, _) => String::new(),
            (Lock::Semaphore, Some(s)) => format!(", permit {s}"),
            (Lock::Semaphore, None) => ", no permit".into(),
            (Lock::ReadWrite, _) => ", a writer".into(),
        };
        let seen = match p.phase.lock {
            Lock::Mutex | Lock::Election => String::new(),
            Lock::Semaphore => {
                format!(" (its fence {fence}; the store's highest for the permit just after: {highest})")
            }
            Lock::ReadWrite => format!(
                " (its fence {fence}; just after, the store's highest writer fence: {highest}, highest epoch read under: {epoch})"
            ),
        };
        p.note(format!(
            "worker {w} ({client}{whose}) stopped for {:.1} s between its read and its write, which went out {:.0} ms after its valid_until; the fenced store {fenced} it{seen}. When it wrote, valid_until {} passed (by the worker's own check) and the lost signal {} fired; when it called release, the lost signal {lost_at_release}",
            (2 * TTL).as_secs_f64(),
            (t as f64 - until as f64) / 1e6,
            if expired { "had" } else { "had not" },
            if lost { "had" } else { "had not" },
        ));
        done += 1;
        if done >= rounds {
            break;
        }
        p.sleep(Duration::from_secs(1))?;
    }
    if done < rounds {
        p.fail(format!(
            "only {done} of {rounds} pauses caught a holder between its read and its write (a reader: between its two reads, with a newer writer accepted meanwhile)"
        ));
    }
    Ok(())
}

/// Stop a reader of the `want` client between its two reads for 2 TTLs. Whether the round
/// counts: its second read went out after the SIGSTOP, and a newer writer had been accepted
/// by then, so the store must refuse it (an accepted read under an old epoch that saw the
/// fenced counter change fails the phase, as in every reader-writer phase).
fn reader_pause(p: &mut PhaseRun<'_>, want: &str) -> Result<bool, String> {
    let shapes = p.shapes.clone();
    // The first read of a hold: the reader's event before it is its acquisition.
    let first = loop {
        let read = p.wait_for(Duration::from_secs(15), |r| {
            r.client == want && shapes[r.worker] == Shape::Read && matches!(r.event, Event::Read { accepted: true, .. })
        })?;
        let Some(read) = read else {
            return Err(format!("no {want} reader read the store within 15 s"));
        };
        let before = p.log.iter().rev().filter(|r| r.worker == read.worker).nth(1);
        if matches!(before, Some(Record { event: Event::Acquired { .. }, .. })) {
            break read;
        }
    };
    let Event::Read { fence: epoch, plain: plain_before, .. } = first.event else {
        unreachable!("the predicate takes reads");
    };
    let w = first.worker;
    let pid = p.workers.pid(w);
    sys::signal(pid, libc::SIGSTOP).map_err(|e| format!("SIGSTOP worker {w}: {e}"))?;
    let t_stop = mono_ns();
    if !sys::wait_for_state(pid, |s| s == 'T' || s == 't') {
        return Err(format!("worker {w} did not stop"));
    }
    p.sleep(2 * TTL)?;
    sys::signal(pid, libc::SIGCONT).map_err(|e| format!("SIGCONT worker {w}: {e}"))?;
    let next = p.wait_for(Duration::from_secs(10), |r| r.worker == w && matches!(r.event, Event::Read { .. }))?;
    let Some(Record { client, event: Event::Read { t, accepted, plain, .. }, .. }) = next else {
        return Err(format!("worker {w} read nothing within 10 s of SIGCONT"));
    };
    if t < t_stop {
        p.note(format!("worker {w}'s second read went out before the SIGSTOP landed: not counted, again"));
        return Ok(false);
    }
    let until = p
        .log
        .iter()
        .rev()
        .find_map(|r| match r.event {
            Event::Acquired { until, .. } if r.worker == w => Some(until),
            _ => None,
        })
        .unwrap_or(0);
    let (highest, _) = Store::connect(p.ctx.store, StoreKeys::new(&p.store_prefix))
        .and_then(|mut s| s.marks())
        .map_err(|e| format!("store: {e}"))?;
    p.note(format!(
        "worker {w} ({client}, a reader at epoch {epoch}) stopped for {:.1} s between its two reads; the second went out {:.0} ms after its valid_until, and the fenced store {} it (the store's highest writer fence just after: {highest}); the unchecked counter had gone from {plain_before} to {plain} under the reader",
        (2 * TTL).as_secs_f64(),
        (t as f64 - until as f64) / 1e6,
        if accepted { "ACCEPTED" } else { "refused" },
    ));
    if accepted {
        p.note(format!("no writer above epoch {epoch} had been accepted by then: not counted, again"));
    }
    Ok(!accepted)
}

// ---------------------------------------------------------------------------------------
// The table.

/// The results as a Markdown table, followed by each phase's notes and broken expectations.
pub fn table(results: &[PhaseResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| phase | expected | acquisitions (tokio/mio) | peak holders | overlaps | beyond limit | changed under a reader | late writes | lost, fenced | lost, no fence | refused by fence | fence-order errors | keys w/o TTL | availability | result |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in results {
        let x = &r.report;
        let beyond = if r.lock == Lock::Semaphore { x.beyond_limit.to_string() } else { "–".into() };
        // Late writes that no newer holder preceded at the store (a stall of the machine) are
        // told apart: the store cannot refuse those, and they conflict with no one.
        let late = if x.late_after_newer == x.late_writes {
            x.late_writes.to_string()
        } else {
            format!("{} ({} after a newer holder)", x.late_writes, x.late_after_newer)
        };
        let changed = if r.lock == Lock::ReadWrite {
            format!("{} / {}", x.changed_fenced, x.changed_plain)
        } else {
            "–".into()
        };
        let _ = writeln!(
            out,
            "| {} {} | {} | {} ({}/{}) | {} | {} | {beyond} | {changed} | {late} | {} | {} | {} | {} | {} | {:.0} % | {} |",
            r.id,
            r.name,
            expected(r.lock, r.expect),
            x.acquisitions,
            x.by_client.get("tokio").unwrap_or(&0),
            x.by_client.get("mio").unwrap_or(&0),
            x.peak,
            x.overlaps,
            x.lost_fenced,
            x.lost_plain,
            x.refused,
            x.fence_order_errors,
            x.keys_without_ttl,
            x.availability * 100.0,
            if r.passed() { "ok" } else { "**FAILED**" },
        );
    }
    out.push('\n');
    for r in results {
        let _ = writeln!(out, "- **{} {}** ({:.0} s):", r.id, r.name, r.seconds);
        for n in &r.notes {
            let _ = writeln!(out, "  - {n}");
        }
        for f in &r.failures {
            let _ = writeln!(out, "  - BROKEN: {f}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_fail_when_the_counts_say_so() {
        let clean = Report { acquisitions: 10, ..Report::default() };
        let mut failures = Vec::new();
        expect(Lock::Mutex, Expect::Safe, &clean, &mut failures);
        assert!(failures.is_empty(), "{failures:?}");
        // A holder stalled past its validity may cost the unchecked counter an update.
        let stalled = Report { late_writes: 1, lost_plain: 1, ..clean.clone() };
        expect(Lock::Mutex, Expect::Safe, &stalled, &mut failures);
        assert!(failures.is_empty(), "{failures:?}");
        expect(Lock::Mutex, Expect::Overlaps, &clean, &mut failures);
        assert_eq!(failures.len(), 1, "an unsafe phase without an overlap fails: {failures:?}");
        failures.clear();
        expect(Lock::Mutex, Expect::LateWrite, &clean, &mut failures);
        assert_eq!(failures.len(), 3, "no late write, none after a newer holder, nothing lost: {failures:?}");
        failures.clear();
        // A late write that no newer holder preceded may be accepted; one after a newer holder
        // may not.
        let late = Report { late_writes: 2, late_accepted: 1, late_after_newer: 1, lost_plain: 1, ..clean.clone() };
        expect(Lock::Mutex, Expect::LateWrite, &late, &mut failures);
        assert!(failures.is_empty(), "{failures:?}");
        let accepted = Report { late_after_newer_accepted: 1, ..late };
        expect(Lock::Mutex, Expect::LateWrite, &accepted, &mut failures);
        assert_eq!(failures.len(), 1, "{failures:?}");
        failures.clear();
        let broken =
            Report { acquisitions: 10, overlaps: 1, lost_fenced: 1, lost_plain: 2, fence_order_errors: 1, ..clean };
        expect(Lock::Mutex, Expect::Safe, &broken, &mut failures);
        assert_eq!(failures.len(), 4, "{failures:?}");
        failures.clear();
        expect(Lock::Mutex, Expect::Overlaps, &broken, &mut failures);
        assert_eq!(failures.len(), 1, "only the fenced loss: {failures:?}");
    }

    #[test]
    fn the_shapes_expectations_fail_when_the_counts_say_so() {
        let mut failures = Vec::new();
        let sem = Report { acquisitions: 10, peak: SEM_LIMIT as usize, ..Report::default() };
        expect(Lock::Semaphore, Expect::Safe, &sem, &mut failures);
        assert!(failures.is_empty(), "{failures:?}");
        let beyond = Report { peak: SEM_LIMIT as usize + 1, beyond_limit: 1, ..sem.clone() };
        expect(Lock::Semaphore, Expect::Safe, &beyond, &mut failures);
        assert_eq!(failures.len(), 1, "beyond the limit: {failures:?}");
        failures.clear();
        let never_full = Report { peak: 1, ..sem.clone() };
        expect(Lock::Semaphore, Expect::Safe, &never_full, &mut failures);
        assert_eq!(failures.len(), 1, "{failures:?}");
        failures.clear();
        let late = Report { late_writes: 1, late_after_newer: 1, lost_plain: 1, ..beyond };
        expect(Lock::Semaphore, Expect::LateWrite, &late, &mut failures);
        assert_eq!(failures.len(), 1, "beyond the limit fails every semaphore phase: {failures:?}");
        failures.clear();

        let rw = Report { acquisitions: 10, peak: 3, shared: 2, ..Report::default() };
        expect(Lock::ReadWrite, Expect::Safe, &rw, &mut failures);
        assert!(failures.is_empty(), "{failures:?}");
        let alone = Report { shared: 0, changed_plain: 1, changed_fenced: 1, overlaps: 1, ..rw.clone() };
        expect(Lock::ReadWrite, Expect::Safe, &alone, &mut failures);
        assert_eq!(failures.len(), 4, "{failures:?}");
        failures.clear();
        let late = Report { late_writes: 1, late_after_newer: 1, lost_plain: 1, changed_plain: 1, ..rw };
        expect(Lock::ReadWrite, Expect::LateWrite, &late, &mut failures);
        assert!(failures.is_empty(), "a change of the unchecked counter is what a late write does: {failures:?}");
    }

    #[test]
    fn phase_ids_are_unique() {
        let ids: Vec<_> = phases().iter().map(|p| p.id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids.len(), sorted.len());
    }
}
