//! The command line, the scenarios and how much each one measures.

use std::time::Duration;

use redlease_core::LockOptions;
use redlease_core::cluster::SLOTS;
use redlease_servers::key_slot;

/// TTL of every lock.
pub const TTL: Duration = Duration::from_secs(10);
/// Nodes of every set of standalone servers.
pub const NODES: usize = 5;
/// How long a contender of the handoff scenario keeps waiting (far longer than a window).
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// The key of locker `i` of `n` in the load scenarios: `bench:own:I:J`, the first J whose hash
/// slot (what a Redis Cluster routes a key by) is in the i-th of n equal stripes of the slots,
/// so that the lockers spread evenly over the masters of a cluster node.
pub fn own_key(i: usize, n: usize) -> String {
    let stripe = |key: &String| usize::from(key_slot(key)) * n / SLOTS;
    (0u32..).map(|j| format!("bench:own:{i}:{j}")).find(|key| stripe(key) == i).unwrap_or_default()
}

/// What a subject locks: a mutex, one permit of a semaphore of this many permits, a read lock
/// (readers share it), or a mutex on nodes that each have a replica, its grants waiting for
/// it (`min_replicas(1)`). The last two take part in the sequential scenario only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // Said above.
pub enum Shape {
    Mutex,
    Semaphore(u32),
    Read,
    Replicated,
}

impl Shape {
    /// The options of a lock of this shape on `key`, with every other option the default.
    pub fn options(self, key: &str) -> LockOptions {
        let options = LockOptions::new(key, TTL);
        match self {
            Shape::Mutex | Shape::Replicated => options,
            Shape::Semaphore(limit) => options.semaphore(limit),
            Shape::Read => options.shared(true),
        }
    }
}

/// One of the measurements, in the order they run (see `docs/benchmarks.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // Named by the docs and the tables.
pub enum Scenario {
    Sequential,
    Lockers,
    Stalled,
    Handoff,
    Tls,
    Cluster,
    Sentinel,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 7] =
        [Self::Sequential, Self::Lockers, Self::Stalled, Self::Handoff, Self::Tls, Self::Cluster, Self::Sentinel];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        ["sequential", "lockers", "stalled", "handoff", "tls", "cluster", "sentinel"][self as usize]
    }
}

/// The usage text of `--help`.
pub const USAGE: &str = "\
redlease's runtimes benchmark: every adapter against the floors and two peers

usage: cargo bench -p redlease-benches --bench runtimes [-- OPTIONS]   full run (~10 min on 2 cores)
       cargo test  -p redlease-benches --bench runtimes                quick smoke run

options:
  --only WORDS   comma-separated scenario names (sequential, lockers, stalled, handoff, tls,
                 cluster, sentinel) and/or parts of subject names (tokio, mio, floor, sem, rslock, ...;
                 =NAME for exactly that subject); the partners its ratios need still run
  --hold MS      how long each contender of the handoff scenario holds the lock (default 5)
  -h, --help     this text

Tables go to stdout as each scenario ends, and all of them to target/bench/runtimes.md.";

/// What the command line asked for: the full plan (`cargo bench`) or the quick one, the
/// `--only` words (lowercase), the handoff scenario's hold (`--hold`), `--help`, and the
/// arguments not understood.
#[derive(Clone, Debug, Default)]
#[allow(missing_docs)] // Said above.
pub struct Options {
    pub full: bool,
    pub only: Vec<String>,
    pub hold: Option<Duration>,
    pub help: bool,
    pub ignored: Vec<String>,
}

impl Options {
    /// Parse the arguments after the program's name; `--bench` (which `cargo bench` passes)
    /// selects the full plan.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
        let mut opts = Options::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--bench" => opts.full = true,
                "-h" | "--help" => opts.help = true,
                "--only" => {
                    let words = args.next().ok_or("--only needs words, e.g. --only tokio")?;
                    opts.only.extend(words.split(',').map(|w| w.trim().to_ascii_lowercase()));
                }
                "--hold" => {
                    let ms = args.next().and_then(|a| a.parse::<u64>().ok()).filter(|&ms| (1..=1_000).contains(&ms));
                    opts.hold = Some(Duration::from_millis(ms.ok_or("--hold needs 1 to 1000 (ms), e.g. --hold 1")?));
                }
                _ => opts.ignored.push(arg),
            }
        }
        if opts.only.iter().any(String::is_empty) {
            return Err("--only needs non-empty words, e.g. --only tokio,lockers".into());
        }
        Ok(opts)
    }

    /// Whether `--only` selects `scenario`.
    pub fn wants_scenario(&self, scenario: Scenario) -> bool {
        let named: Vec<_> = self.only.iter().filter(|w| is_scenario(w)).collect();
        named.is_empty() || named.iter().any(|w| *w == scenario.name())
    }

    /// Whether `--only` selects the subject called `name`.
    pub fn wants_subject(&self, name: &str) -> bool {
        let words: Vec<_> = self.only.iter().filter(|w| !is_scenario(w)).collect();
        words.is_empty()
            || words.iter().any(|w| w.strip_prefix('=').map_or_else(|| name.contains(w.as_str()), |n| n == name))
    }
}

fn is_scenario(word: &str) -> bool {
    Scenario::ALL.iter().any(|s| s.name() == word)
}

/// How much one run measures: the sequential, tls and sentinel scenarios; the locker counts and the
/// window of the lockers scenario (the cluster scenario's lockers: `cluster`); the stalled
/// scenario's most acquisitions and time per level; the contender counts (on a mutex, on a
/// semaphore), each one's hold and the window of the handoff scenario.
#[derive(Clone, Debug)]
#[allow(missing_docs)] // Said above.
pub struct Plan {
    pub seq: Seq,
    pub lockers: Vec<usize>,
    pub load: Window,
    pub cluster: usize,
    pub stall: (usize, Duration),
    pub contenders: Vec<usize>,
    pub sem_contenders: Vec<usize>,
    pub hold: Duration,
    pub handoff: Window,
}

/// Pairs taking turns: `rounds` (each pair on fresh servers, the side going first
/// alternating), each of `warmup` then `cycles` cycles per side, in turns of `turn` cycles.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)] // Said above.
pub struct Seq {
    pub rounds: usize,
    pub warmup: usize,
    pub cycles: usize,
    pub turn: usize,
}

/// A window of `length` after `warmup`.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)] // Said above.
pub struct Window {
    pub warmup: Duration,
    pub length: Duration,
}

impl Plan {
    /// The full plan, or the quick one (every subject and scenario, tiny counts).
    pub fn new(full: bool) -> Plan {
        let ms = Duration::from_millis;
        let window = |warmup, length| Window { warmup: ms(warmup), length: ms(length) };
        match full {
            true => Plan {
                seq: Seq { rounds: 5, warmup: 100, cycles: 2_000, turn: 50 },
                lockers: vec![16, 256],
                load: window(500, 3_000),
                cluster: 256,
                stall: (2_000, ms(3_000)),
                contenders: vec![2, 16],
                sem_contenders: vec![16],
                hold: ms(5),
                handoff: window(500, 3_000),
            },
            false => Plan {
                seq: Seq { rounds: 1, warmup: 5, cycles: 40, turn: 10 },
                lockers: vec![4, 16],
                load: window(100, 300),
                cluster: 16,
                stall: (20, ms(200)),
                contenders: vec![2],
                sem_contenders: vec![6],
                hold: ms(2),
                handoff: window(20, 150),
            },
        }
    }

    /// The handoff scenario's contender counts on a lock of `shape`.
    pub fn contenders(&self, shape: Shape) -> &[usize] {
        if shape == Shape::Mutex { &self.contenders } else { &self.sem_contenders }
    }
}

#[cfg(test)]
#[test]
fn modes_and_filters() {
    let parse = |args: &[&str]| Options::parse(args.iter().map(|s| s.to_string()));
    assert!(parse(&["--bench"]).unwrap().full && !parse(&[]).unwrap().full);
    let o = parse(&["--only", "tokio,Lockers"]).unwrap();
    assert!(o.wants_subject("tokio-mt") && !o.wants_subject("smol") && !o.wants_scenario(Scenario::Tls));
    let o = parse(&["--only", "floor,=smol"]).unwrap();
    assert!(o.wants_subject("floor-mio") && o.wants_subject("smol") && o.wants_scenario(Scenario::Tls));
    let o = parse(&["--only", "sem"]).unwrap();
    assert!(o.wants_subject("mio-blocking-sem4") && !o.wants_subject("mio-blocking"));
    assert!(Plan::new(false).contenders(Shape::Semaphore(4)).iter().all(|&k| k > 4), "more than the permits");
    assert!(parse(&["--only"]).is_err() && parse(&["--only", "a,,b"]).is_err());
    assert_eq!(parse(&["--hold", "1"]).unwrap().hold, Some(Duration::from_millis(1)));
    assert!(parse(&["--hold", "0"]).is_err() && parse(&["--hold"]).is_err());
}
