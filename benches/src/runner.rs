//! Runs every selected scenario over every selected subject, each measurement on a fresh
//! cluster of real `redis-server` processes, with a progress display on stderr and each
//! scenario's table on stdout as soon as it is done.

use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant, SystemTime};

use redlease_cluster::Cluster;

use crate::plan::{Options, PairPlan, Plan, Scenario};
use crate::report;
use crate::results::{Entry, Results, SubjectInfo};
use crate::stats::{fmt_latency, fmt_rate};
use crate::subject::{Common, Paired, Pooled, Role, Subject};
use crate::turns::Turn;

/// Run what `opts` selects over `subjects`. Fails only if no cluster can be started at all
/// (e.g. `redis-server` is not installed); a subject that fails is reported and skipped.
pub fn run(opts: &Options, subjects: &[Box<dyn Subject>]) -> Result<Results, String> {
    let mut plan = Plan::new(opts.mode);
    if let Some(hold) = opts.hold {
        plan.handoff.hold = hold;
    }
    let chosen: Vec<&dyn Subject> =
        subjects.iter().map(|s| s.as_ref()).filter(|s| opts.wants_subject(s.name())).collect();
    let scenarios: Vec<Scenario> = Scenario::RUN.into_iter().filter(|&s| opts.wants_scenario(s)).collect();
    if chosen.is_empty() {
        return Err("--only selects no subject".into());
    }
    check_redis()?;
    let mut results = Results {
        plan: plan.clone(),
        subjects: chosen
            .iter()
            .map(|s| SubjectInfo {
                name: s.name().to_owned(),
                about: s.about(),
                role: s.role(),
                style: s.style(),
                scenarios: Scenario::RUN.into_iter().filter(|&sc| s.supports(sc)).collect(),
            })
            .collect(),
        scenarios: scenarios.clone(),
        sequential: Vec::new(),
        paired: Vec::new(),
        throughput: Vec::new(),
        scaling: Vec::new(),
        stalled: Vec::new(),
        contention: Vec::new(),
        handoff: Vec::new(),
        started: SystemTime::now(),
        elapsed: Duration::ZERO,
    };
    let total = scenarios
        .iter()
        .map(|&sc| {
            let points = match sc {
                Scenario::Sequential => plan.sequential_rounds,
                Scenario::Paired => {
                    return chosen.iter().filter(|s| paired_floor(subjects, **s).is_some()).count()
                        * plan.paired.rounds;
                }
                Scenario::Throughput => plan.lockers.len() * plan.rounds,
                Scenario::Scaling => plan.scaling_nodes.len(),
                Scenario::Handoff => plan.handoff.contenders.len(),
                _ => 1,
            };
            chosen.iter().filter(|s| s.supports(sc)).count() * points
        })
        .sum();
    let mut progress = Progress { step: 0, total, started: Instant::now() };
    let common = Common { ttl: plan.ttl };
    for &scenario in &scenarios {
        let taking: Vec<&dyn Subject> = chosen.iter().copied().filter(|s| s.supports(scenario)).collect();
        match scenario {
            // Sequential and throughput go round every subject in turn (see `Plan::rounds`);
            // the others measure one subject after another.
            Scenario::Sequential => {
                results.sequential = progress.rounds(
                    plan.sequential_rounds,
                    &taking,
                    0,
                    "sequential",
                    plan.nodes,
                    |s, c, _| s.sequential(&c.urls(), common, plan.sequential.clone()),
                    |r| format!("cycle p50 {}", p50(&r.cycle)),
                );
            }
            Scenario::Paired => {
                let pairs: Vec<&dyn Subject> =
                    chosen.iter().copied().filter(|&s| paired_floor(subjects, s).is_some()).collect();
                results.paired = progress.rounds(
                    plan.paired.rounds,
                    &pairs,
                    0,
                    "paired with its floor",
                    plan.nodes,
                    |s, c, round| {
                        // The side that goes first alternates from one round to the next.
                        let floor = paired_floor(subjects, s).ok_or("no floor to pair with")?;
                        paired(s, floor, &c.urls(), common, &plan.paired, round % 2 == 1)
                    },
                    |r| {
                        let ratio = r.p50_ratio().map_or_else(|| "-".to_owned(), |x| format!("{x:.3}"));
                        format!(
                            "cycle p50 {} against {} {}: {ratio}",
                            p50(&r.subject.cycle),
                            r.floor_name,
                            p50(&r.floor.cycle)
                        )
                    },
                );
            }
            Scenario::Throughput => {
                for &lockers in &plan.lockers {
                    let what = format!("throughput, {lockers} locker{}", if lockers == 1 { "" } else { "s" });
                    results.throughput.extend(progress.rounds(
                        plan.rounds,
                        &taking,
                        lockers,
                        &what,
                        plan.nodes,
                        |s, c, _| s.throughput(&c.urls(), common, plan.throughput, lockers),
                        |r| format!("{} cycles/s, p50 {}", fmt_rate(r.rate()), p50(&r.latency)),
                    ));
                }
            }
            Scenario::Scaling => {
                for &s in &taking {
                    for &nodes in &plan.scaling_nodes {
                        results.scaling.push(progress.item(
                            s,
                            nodes,
                            &format!("scaling, N = {nodes}"),
                            nodes,
                            |c| s.sequential(&c.urls(), common, plan.scaling.clone()),
                            |r| format!("cycle p50 {}", p50(&r.cycle)),
                        ));
                    }
                }
            }
            Scenario::Stalled => {
                for &s in &taking {
                    results.stalled.push(progress.item(
                        s,
                        0,
                        "stalled minority",
                        plan.nodes,
                        |c| {
                            let n = c.len();
                            let mut paused = 0;
                            let mut stall = |want: usize| {
                                while paused < want.min(n) {
                                    c.node(n - 1 - paused).pause();
                                    paused += 1;
                                }
                                while paused > want {
                                    paused -= 1;
                                    c.node(n - 1 - paused).resume();
                                }
                            };
                            s.stalled(&c.urls(), common, &plan.stalled, &mut stall)
                        },
                        |levels| {
                            levels
                                .iter()
                                .map(|l| match l.blocked {
                                    Some(d) => format!("{} paused: blocked > {}", l.paused, fmt_latency(d)),
                                    None => format!("{} paused: p50 {}", l.paused, p50(&l.acquire)),
                                })
                                .collect::<Vec<_>>()
                                .join(", ")
                        },
                    ));
                }
            }
            Scenario::Contention => {
                let what = format!("contention, {} lockers on one key", plan.contenders);
                for &s in &taking {
                    results.contention.push(progress.item(
                        s,
                        0,
                        &what,
                        plan.nodes,
                        |c| s.contention(&c.urls(), common, plan.contention, plan.contenders),
                        |r| format!("{} acquisitions/s", fmt_rate(r.rate())),
                    ));
                }
            }
            Scenario::Handoff => {
                for &s in &taking {
                    for &k in &plan.handoff.contenders {
                        results.handoff.push(progress.item(
                            s,
                            k,
                            &format!("handoff, {k} contenders holding {:?}", plan.handoff.hold),
                            plan.nodes,
                            |c| s.handoff(&c.urls(), common, &plan.handoff, k),
                            |r| format!("handoff p50 {}, {} acquisitions/s", p50(&r.handoff), fmt_rate(r.rate())),
                        ));
                    }
                }
            }
        }
        results.elapsed = progress.started.elapsed();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "\n{}", report::scenario_section(&results, scenario));
        let _ = out.flush();
    }
    results.elapsed = progress.started.elapsed();
    Ok(results)
}

/// The floor `subject` takes turns with in the paired scenario: the first floor of its style
/// that runs the sequential scenario (the one its "÷ floor" ratios use), for every adapter and
/// floor on plain TCP (the floors do not speak TLS; a floor is paired with itself, which
/// shows the measurement's own resolution). Peers are not paired.
fn paired_floor<'a>(all: &'a [Box<dyn Subject>], subject: &dyn Subject) -> Option<&'a dyn Subject> {
    if subject.role() == Role::Peer
        || !subject.supports(Scenario::Sequential)
        || subject.listen() != redlease_cluster::Listen::Tcp
    {
        return None;
    }
    all.iter()
        .map(|s| s.as_ref())
        .find(|s| s.role() == Role::Floor && s.style() == subject.style() && s.supports(Scenario::Sequential))
}

/// `subject`'s and `floor`'s sequential loops on one cluster, taking turns (see
/// [`crate::turns`]); with `floor_first`, the floor takes the first turn.
fn paired(
    subject: &dyn Subject,
    floor: &dyn Subject,
    urls: &[String],
    common: Common,
    plan: &PairPlan,
    floor_first: bool,
) -> Result<Paired, String> {
    let (first, second) = Turn::pair(plan.block);
    let (mine, floors) = if floor_first { (second, first) } else { (first, second) };
    let run = |s: &dyn Subject, turn: Turn| {
        let leave = turn.clone();
        let outcome = catch_unwind(AssertUnwindSafe(|| s.sequential(urls, common, plan.seq.paired(turn))))
            .unwrap_or_else(|p| Err(format!("panicked: {}", panic_text(p.as_ref()))));
        // Whatever happened, the other side must not wait for this one any more.
        leave.leave();
        outcome
    };
    let (a, b) = std::thread::scope(|scope| {
        let other = std::thread::Builder::new()
            .name("paired-floor".into())
            .spawn_scoped(scope, || run(floor, floors))
            .map_err(|e| format!("cannot start the floor's thread: {e}"))?;
        let a = run(subject, mine);
        let b = other.join().unwrap_or_else(|_| Err("the floor's thread panicked".into()));
        Ok::<_, String>((a, b))
    })?;
    Ok(Paired {
        floor_name: floor.name().to_owned(),
        subject: a?,
        floor: b.map_err(|e| format!("its floor {}: {e}", floor.name()))?,
    })
}

fn p50(d: &crate::stats::Dist) -> String {
    d.p50().map_or_else(|| "-".to_owned(), fmt_latency)
}

/// Start and stop one node, so that a missing `redis-server` is one clear message.
fn check_redis() -> Result<(), String> {
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = catch_unwind(|| drop(Cluster::builder().nodes(1).start()));
    std::panic::set_hook(quiet);
    outcome.map_err(|p| format!("cannot start redis-server: {}", panic_text(p.as_ref())))
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic".to_owned())
}

/// The `[k/n] subject what ... result (time)` lines on stderr.
struct Progress {
    step: usize,
    total: usize,
    started: Instant,
}

impl Progress {
    /// Measure `point` of every subject in `subjects` in `rounds` rounds, each round over all
    /// of them in an order rotated by one per round, and pool each subject's rounds (see
    /// [`Plan::rounds`](crate::plan::Plan::rounds)). `measure` is told the round (from 0). A
    /// subject that fails a round is not measured again; its entry is the failure.
    #[allow(clippy::too_many_arguments)]
    fn rounds<T: Pooled>(
        &mut self,
        rounds: usize,
        subjects: &[&dyn Subject],
        point: usize,
        what: &str,
        nodes: usize,
        measure: impl Fn(&dyn Subject, &Cluster, usize) -> Result<T, String>,
        summary: impl Fn(&T) -> String,
    ) -> Vec<Entry<T>> {
        let n = subjects.len();
        let mut pooled: Vec<Option<Result<T, String>>> = (0..n).map(|_| None).collect();
        let mut heads: Vec<Vec<Option<f64>>> = vec![Vec::new(); n];
        for round in 0..rounds {
            for k in 0..n {
                let i = (k + round) % n;
                let s = subjects[i];
                if matches!(pooled[i], Some(Err(_))) {
                    self.step += 1;
                    continue;
                }
                let label = if rounds > 1 { format!("{what}, round {}/{rounds}", round + 1) } else { what.to_owned() };
                match self.item(s, point, &label, nodes, |c| measure(s, c, round), &summary).result {
                    Ok(figures) => {
                        heads[i].push(figures.headline());
                        match &mut pooled[i] {
                            Some(Ok(sum)) => sum.pool(figures),
                            slot => *slot = Some(Ok(figures)),
                        }
                    }
                    Err(e) if rounds > 1 => pooled[i] = Some(Err(format!("round {}: {e}", round + 1))),
                    Err(e) => pooled[i] = Some(Err(e)),
                }
            }
        }
        subjects
            .iter()
            .zip(pooled.into_iter().zip(heads))
            .map(|(s, (result, rounds))| Entry {
                subject: s.name().to_owned(),
                point,
                result: result.unwrap_or_else(|| Err("not run".into())),
                rounds,
            })
            .collect()
    }

    fn item<T>(
        &mut self,
        subject: &dyn Subject,
        point: usize,
        what: &str,
        nodes: usize,
        measure: impl FnOnce(&Cluster) -> Result<T, String>,
        summary: impl FnOnce(&T) -> String,
    ) -> Entry<T> {
        self.step += 1;
        let name = subject.name();
        eprint!("[{:>2}/{}] {name:<16} {what} ... ", self.step, self.total);
        let _ = std::io::stderr().flush();
        let t0 = Instant::now();
        let listen = subject.listen();
        let result = match catch_unwind(|| Cluster::builder().nodes(nodes).listen(listen).start()) {
            Err(p) => Err(format!("cluster of {nodes} did not start: {}", panic_text(p.as_ref()))),
            Ok(cluster) => {
                crate::server::set_pids(cluster.nodes().iter().filter_map(|n| n.pid()).collect());
                let r = catch_unwind(AssertUnwindSafe(|| measure(&cluster)))
                    .unwrap_or_else(|p| Err(format!("panicked: {}", panic_text(p.as_ref()))));
                crate::server::set_pids(Vec::new());
                drop(cluster);
                r
            }
        };
        let took = t0.elapsed().as_secs_f64();
        let total = self.started.elapsed().as_secs_f64();
        match &result {
            Ok(v) => eprintln!("{} ({took:.1} s, {total:.0} s in all)", summary(v)),
            Err(e) => eprintln!("FAILED: {e} ({took:.1} s)"),
        }
        Entry { subject: name.to_owned(), point, result, rounds: Vec::new() }
    }
}
