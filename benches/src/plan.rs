//! Command-line options and the measurement plan (counts and durations per mode).

use std::fmt;
use std::time::Duration;

/// How long a contender keeps retrying before its call gives up (far longer than a window).
pub const CONTENDED_WAIT: Duration = Duration::from_secs(60);

/// How much to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A smoke test of a few seconds: tiny counts, every subject and scenario, nothing written.
    Quick,
    /// The full benchmark of the issue (about ten minutes on two cores).
    Full,
}

/// One of the measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// Lock+unlock on one key, one after the other.
    Sequential,
    /// Sequential cycles of each adapter and floor taking turns with the floor of its style
    /// on one cluster (the runner pairs them; no subject lists it).
    Paired,
    /// Concurrent lockers, each on its own key.
    Throughput,
    /// The sequential p50 for several node counts.
    Scaling,
    /// Acquire latency with a paused minority of the nodes.
    Stalled,
    /// Many lockers on one key.
    Contention,
    /// Lock handoff: contenders on one key, each holding it briefly.
    Handoff,
}

impl Scenario {
    /// The scenarios every subject takes part in unless it says otherwise.
    pub const ALL: [Scenario; 5] =
        [Scenario::Sequential, Scenario::Throughput, Scenario::Scaling, Scenario::Stalled, Scenario::Contention];

    /// Every scenario, in the order they run (handoff only for the subjects that list it,
    /// paired for the adapters and floors).
    pub const RUN: [Scenario; 7] = [
        Scenario::Sequential,
        Scenario::Paired,
        Scenario::Throughput,
        Scenario::Scaling,
        Scenario::Stalled,
        Scenario::Contention,
        Scenario::Handoff,
    ];

    /// [`ALL`](Self::ALL) and the handoff scenario.
    pub const WITH_HANDOFF: &'static [Scenario] = &Scenario::RUN;

    /// The name used on the command line and in the progress display.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Sequential => "sequential",
            Scenario::Paired => "paired",
            Scenario::Throughput => "throughput",
            Scenario::Scaling => "scaling",
            Scenario::Stalled => "stalled",
            Scenario::Contention => "contention",
            Scenario::Handoff => "handoff",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the command line asked for.
#[derive(Clone, Debug)]
pub struct Options {
    /// Quick or full.
    pub mode: Mode,
    /// `--only` words: scenario names select scenarios, other words select the subjects whose
    /// name contains them. Empty: everything.
    pub only: Vec<String>,
    /// `--no-write`: print only, even after a full unfiltered run.
    pub no_write: bool,
    /// `--help` was given.
    pub help: bool,
    /// `--hold MS`: the handoff scenario's hold time instead of the plan's.
    pub hold: Option<Duration>,
    /// Arguments that were not understood (ignored with a warning: `cargo test` and
    /// `cargo bench` pass their own filters to every target).
    pub ignored: Vec<String>,
}

/// The usage text for `--help`.
pub const USAGE: &str = "\
cross-runtime latency/throughput benchmark of redlease against the floor and its peers

usage: cargo bench -p redlease-benches --bench runtimes [-- OPTIONS]   (full run, writes docs/)
       cargo test  -p redlease-benches --bench runtimes                (quick smoke run)

options:
  --quick            a few seconds with tiny counts; prints the tables, writes nothing
  --only WORDS       comma-separated: scenario names (sequential, paired, throughput,
                     scaling, stalled, contention, handoff) and/or parts of subject names (tokio, floor, mio,
                     rslock, ...; =NAME for that subject alone, e.g. =floor-tokio); a filtered run
                     writes nothing
  --no-write         print the tables only, do not write docs/benchmarks.md and the charts
  --hold MS          the handoff scenario's hold time in milliseconds (e.g. 0.2; default 5,
                     2 with --quick); a run with it writes nothing
  -h, --help         this text";

impl Options {
    /// Parse the arguments after the program name. `--bench` (passed by `cargo bench`)
    /// selects the full run unless `--quick` is given; without it the run is quick.
    pub fn parse<I, S>(args: I) -> Result<Options, String>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut bench = false;
        let mut quick = false;
        let mut opts = Options {
            mode: Mode::Quick,
            only: Vec::new(),
            no_write: false,
            help: false,
            hold: None,
            ignored: Vec::new(),
        };
        let mut args = args.into_iter().map(Into::into);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--bench" => bench = true,
                "--quick" => quick = true,
                "--no-write" => opts.no_write = true,
                "-h" | "--help" => opts.help = true,
                "--only" => {
                    let words = args.next().ok_or("--only needs a value, e.g. --only tokio,floor")?;
                    opts.only.extend(split_words(&words));
                }
                "--hold" => {
                    let ms = args.next().ok_or("--hold needs a value in milliseconds, e.g. --hold 0.2")?;
                    opts.hold = Some(parse_hold(&ms)?);
                }
                _ => match arg.strip_prefix("--only=") {
                    Some(words) => opts.only.extend(split_words(words)),
                    None => opts.ignored.push(arg),
                },
            }
        }
        if opts.only.iter().any(String::is_empty) {
            return Err("--only needs non-empty words, e.g. --only tokio,floor".into());
        }
        opts.mode = if bench && !quick { Mode::Full } else { Mode::Quick };
        Ok(opts)
    }

    /// Whether `scenario` is selected by `--only`.
    pub fn wants_scenario(&self, scenario: Scenario) -> bool {
        let named: Vec<&String> = self.only.iter().filter(|w| is_scenario(w)).collect();
        named.is_empty() || named.iter().any(|w| w.as_str() == scenario.name())
    }

    /// Whether the subject called `name` is selected by `--only`.
    pub fn wants_subject(&self, name: &str) -> bool {
        let words: Vec<&String> = self.only.iter().filter(|w| !is_scenario(w)).collect();
        words.is_empty()
            || words.iter().any(|w| match w.strip_prefix('=') {
                Some(exact) => name == exact,
                None => name.contains(w.as_str()),
            })
    }

    /// Whether the results go to `docs/`: a full run of everything, not told otherwise.
    pub fn writes_docs(&self) -> bool {
        self.mode == Mode::Full && self.only.is_empty() && !self.no_write && self.hold.is_none()
    }
}

/// A hold time in milliseconds, from 0.01 ms to 1 s.
fn parse_hold(ms: &str) -> Result<Duration, String> {
    let bad = || format!("--hold takes milliseconds from 0.01 to 1000, e.g. --hold 0.2; got {ms:?}");
    let v: f64 = ms.trim().parse().map_err(|_| bad())?;
    if !(0.01..=1000.0).contains(&v) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(v / 1000.0))
}

fn split_words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(',').map(|w| w.trim().to_ascii_lowercase())
}

fn is_scenario(word: &str) -> bool {
    Scenario::RUN.iter().any(|s| s.name() == word)
}

/// Counts for sequential lock+unlock cycles, and the turn to take if paired.
#[derive(Clone, Debug)]
pub struct SeqPlan {
    /// Cycles run first and not recorded.
    pub warmup: usize,
    /// Cycles run after the warm-up (all recorded, unless paired: each turn's first cycle is
    /// not).
    pub cycles: usize,
    /// The side of a pair this run is, or `None` to run alone.
    pub turn: Option<crate::turns::Turn>,
}

impl SeqPlan {
    /// Run alone: `warmup` cycles, then `cycles` recorded.
    pub const fn alone(warmup: usize, cycles: usize) -> SeqPlan {
        SeqPlan { warmup, cycles, turn: None }
    }

    /// The same counts as one side of a pair.
    pub fn paired(&self, turn: crate::turns::Turn) -> SeqPlan {
        SeqPlan { turn: Some(turn), ..self.clone() }
    }
}

/// Durations of a timed measurement with concurrent lockers.
#[derive(Clone, Copy, Debug)]
pub struct LoadPlan {
    /// Time the lockers run before the window opens.
    pub warmup: Duration,
    /// The measured window.
    pub window: Duration,
}

/// The stalled-minority measurement.
#[derive(Clone, Debug)]
pub struct StallPlan {
    /// Acquisitions before the first level, not recorded.
    pub warmup: usize,
    /// Paused nodes per level, in order (0 = all healthy, the baseline).
    pub levels: Vec<usize>,
    /// Most acquisitions recorded per level.
    pub max_samples: usize,
    /// Time bound per level: a subject that waits long on a paused node stops early.
    pub cap: Duration,
    /// How long past `cap` an acquisition may still be stuck before the subject is reported
    /// as blocked (it has no timeout of its own).
    pub grace: Duration,
}

/// Everything one run measures.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Quick or full.
    pub mode: Mode,
    /// Nodes of every scenario but scaling.
    pub nodes: usize,
    /// TTL of every lock.
    pub ttl: Duration,
    /// Rounds of the throughput measurement (the sequential one has
    /// [`Plan::sequential_rounds`]). Each round measures every subject once (a fresh cluster
    /// each time), in an order rotated by one subject per round; a subject's rounds are pooled
    /// into its figures. A noisy spell on this shared machine then falls on every subject's
    /// figures alike instead of on one subject's whole measurement, and the per-round ratios
    /// show how much one round can move.
    pub rounds: usize,
    /// Rounds of the sequential measurement, taken like [`Plan::rounds`] but more of them:
    /// its targets are a few per cent while one round's ratio moves by ±15–25 % here, and a
    /// round costs about half a second per subject.
    pub sequential_rounds: usize,
    /// Sequential cycles, per round.
    pub sequential: SeqPlan,
    /// The paired sequential measurement.
    pub paired: PairPlan,
    /// Locker counts of the throughput scenario.
    pub lockers: Vec<usize>,
    /// Throughput timing, per round.
    pub throughput: LoadPlan,
    /// Node counts of the scaling scenario.
    pub scaling_nodes: Vec<usize>,
    /// Cycles per node count.
    pub scaling: SeqPlan,
    /// The stalled minority.
    pub stalled: StallPlan,
    /// Lockers on the one contended key.
    pub contenders: usize,
    /// Contention timing.
    pub contention: LoadPlan,
    /// The handoff scenario.
    pub handoff: HandoffPlan,
}

/// Sequential cycles of a subject and its floor taking turns on one cluster (see
/// [`crate::turns`]).
#[derive(Clone, Debug)]
pub struct PairPlan {
    /// Rounds, each on a fresh cluster, the pairs in an order rotated by one per round; the
    /// side that goes first alternates from one round to the next.
    pub rounds: usize,
    /// Cycles per side and round (the warm-up taken in turns too).
    pub seq: SeqPlan,
    /// Cycles per turn; each turn's first cycle is not recorded.
    pub block: usize,
}

/// Contenders on one key, each holding it for `hold` per acquisition.
#[derive(Clone, Debug)]
pub struct HandoffPlan {
    /// Contender counts, each measured on a fresh cluster.
    pub contenders: Vec<usize>,
    /// How long each holder keeps the lock.
    pub hold: Duration,
    /// Warm-up and measured window per count.
    pub load: LoadPlan,
    /// Acquisitions after an idle gap of `hold`, measured once (with the first count).
    pub idle_acquires: usize,
}

impl HandoffPlan {
    /// How many idle acquisitions to measure at `contenders`: all of them at the first count,
    /// none after.
    pub fn idle_acquires_at(&self, contenders: usize) -> usize {
        if self.contenders.first() == Some(&contenders) { self.idle_acquires } else { 0 }
    }
}

impl Plan {
    /// The plan for a mode.
    pub fn new(mode: Mode) -> Plan {
        match mode {
            Mode::Full => Plan {
                mode,
                nodes: 5,
                ttl: Duration::from_secs(10),
                rounds: 5,
                sequential_rounds: 15,
                sequential: SeqPlan::alone(200, 800),
                paired: PairPlan { rounds: 5, seq: SeqPlan::alone(100, 2_000), block: 50 },
                lockers: vec![1, 16, 256],
                throughput: LoadPlan { warmup: Duration::from_millis(300), window: Duration::from_secs(1) },
                scaling_nodes: vec![1, 3, 5, 7, 9],
                scaling: SeqPlan::alone(100, 1_000),
                stalled: StallPlan {
                    warmup: 200,
                    levels: vec![0, 1, 2],
                    max_samples: 3_000,
                    cap: Duration::from_secs(5),
                    grace: Duration::from_secs(1),
                },
                contenders: 16,
                contention: LoadPlan { warmup: Duration::from_millis(500), window: Duration::from_secs(5) },
                handoff: HandoffPlan {
                    contenders: vec![2, 16, 64],
                    hold: Duration::from_millis(5),
                    load: LoadPlan { warmup: Duration::from_millis(500), window: Duration::from_secs(4) },
                    idle_acquires: 300,
                },
            },
            Mode::Quick => Plan {
                mode,
                nodes: 5,
                ttl: Duration::from_secs(10),
                rounds: 2,
                sequential_rounds: 2,
                sequential: SeqPlan::alone(10, 30),
                paired: PairPlan { rounds: 1, seq: SeqPlan::alone(10, 40), block: 10 },
                lockers: vec![1, 16, 256],
                throughput: LoadPlan { warmup: Duration::from_millis(20), window: Duration::from_millis(30) },
                scaling_nodes: vec![1, 3, 9],
                scaling: SeqPlan::alone(5, 20),
                stalled: StallPlan {
                    warmup: 5,
                    levels: vec![0, 1, 2],
                    max_samples: 20,
                    cap: Duration::from_millis(100),
                    grace: Duration::from_millis(300),
                },
                contenders: 16,
                contention: LoadPlan { warmup: Duration::from_millis(20), window: Duration::from_millis(100) },
                handoff: HandoffPlan {
                    contenders: vec![2, 4],
                    hold: Duration::from_millis(2),
                    load: LoadPlan { warmup: Duration::from_millis(20), window: Duration::from_millis(150) },
                    idle_acquires: 20,
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_bench_runs_full_and_cargo_test_runs_quick() {
        assert_eq!(Options::parse(["--bench"]).unwrap().mode, Mode::Full);
        assert_eq!(Options::parse(Vec::<String>::new()).unwrap().mode, Mode::Quick);
        assert_eq!(Options::parse(["--bench", "--quick"]).unwrap().mode, Mode::Quick);
        assert!(Options::parse(["--bench"]).unwrap().writes_docs());
        assert!(!Options::parse(["--bench", "--no-write"]).unwrap().writes_docs());
        assert!(!Options::parse(["--quick"]).unwrap().writes_docs());
    }

    #[test]
    fn only_selects_scenarios_and_subjects() {
        let o = Options::parse(["--bench", "--only", "tokio,Floor"]).unwrap();
        assert!(!o.writes_docs());
        assert!(o.wants_subject("tokio-mt") && o.wants_subject("floor-mio") && !o.wants_subject("rslock"));
        assert!(Scenario::ALL.iter().all(|&s| o.wants_scenario(s)));
        let o = Options::parse(["--only", "=floor-tokio"]).unwrap();
        assert!(o.wants_subject("floor-tokio") && !o.wants_subject("floor-tokio-mt"), "= names one subject");
        let o = Options::parse(["--only=stalled,rslock"]).unwrap();
        assert!(o.wants_scenario(Scenario::Stalled) && !o.wants_scenario(Scenario::Sequential));
        assert!(o.wants_subject("rslock") && !o.wants_subject("smol"));
    }

    #[test]
    fn bad_and_unknown_arguments() {
        assert!(Options::parse(["--only"]).unwrap_err().contains("--only needs a value"));
        let o = Options::parse(["--bench", "--hold", "0.2"]).unwrap();
        assert_eq!(o.hold, Some(Duration::from_micros(200)));
        assert!(!o.writes_docs(), "a changed plan must not overwrite the docs");
        assert!(Options::parse(["--hold"]).unwrap_err().contains("--hold needs a value"));
        for bad in ["0", "-1", "abc", "1001", "NaN", "inf"] {
            assert!(Options::parse(["--hold", bad]).unwrap_err().contains("--hold takes milliseconds"), "{bad}");
        }
        assert!(Options::parse(["--only", "a,,b"]).unwrap_err().contains("non-empty"));
        let o = Options::parse(["--nocapture", "--bench"]).unwrap();
        assert_eq!(o.ignored, vec!["--nocapture".to_owned()]);
        assert!(Options::parse(["-h"]).unwrap().help);
    }
}
