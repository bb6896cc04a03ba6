//! Runs the selected scenarios over the selected subjects, each measurement on fresh
//! `redis-server` processes (stopped when it ends, whatever happened), with a progress line
//! per measurement on stderr and each scenario's table on stdout as soon as it is done; at the
//! end, writes the report (every table).

use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Instant;

use redlease_servers::{Listen, Node, RedisCluster, SentinelNodes, Servers};

use crate::plan::{NODES, Options, Plan, Scenario, Shape};
use crate::report::{self, Pair, Point};
use crate::stats::dur;
use crate::subject::{Handoff, Load, Seq, Subject};
use crate::turns::Recorder;
use crate::usage;

/// Run what `opts` selects. `Ok` carries the failed measurements (none: all completed).
pub fn run(opts: &Options, all: &[Box<dyn Subject>]) -> Result<Vec<String>, String> {
    let mut plan = Plan::new(opts.full);
    plan.hold = opts.hold.unwrap_or(plan.hold);
    if !opts.full {
        eprintln!("quick mode: tiny counts, a smoke test (cargo bench -p redlease-benches --bench runtimes measures)");
    }
    let chosen = |sc: Scenario| -> Vec<&dyn Subject> {
        all.iter().map(|s| s.as_ref()).filter(|s| s.takes(sc) && opts.wants_subject(s.name())).collect()
    };
    let partner = |s: &dyn Subject| all.iter().map(|f| f.as_ref()).find(|f| f.name() == s.info().partner);
    let seq_pairs: Vec<_> = chosen(Scenario::Sequential).into_iter().filter_map(|s| Some((s, partner(s)?))).collect();
    let tls_pairs: Vec<_> = chosen(Scenario::Tls).into_iter().map(|s| (s, s)).collect();
    let sentinel_pairs: Vec<_> = chosen(Scenario::Sentinel).into_iter().map(|s| (s, s)).collect();
    let contenders = |s: &dyn Subject| plan.contenders(s.info().shape);
    let steps = |sc: Scenario| match sc {
        Scenario::Sequential => seq_pairs.len() * plan.seq.rounds,
        Scenario::Tls => tls_pairs.len() * plan.seq.rounds,
        Scenario::Sentinel => sentinel_pairs.len() * plan.seq.rounds,
        Scenario::Lockers => chosen(sc).len() * plan.lockers.len(),
        Scenario::Stalled => chosen(sc).len(),
        Scenario::Handoff => chosen(sc).into_iter().map(|s| contenders(s).len()).sum(),
        Scenario::Cluster => chosen(sc).len() * 4,
    };
    // A scenario none of the chosen subjects takes part in prints no table.
    let scenarios: Vec<Scenario> =
        Scenario::ALL.into_iter().filter(|&sc| opts.wants_scenario(sc) && steps(sc) > 0).collect();
    Servers::builder().nodes(1).try_start().map_err(|e| format!("cannot start redis-server: {e}"))?;
    let total = scenarios.iter().map(|&sc| steps(sc)).sum();
    let mut p = Progress { plan: &plan, step: 0, total, started: Instant::now(), failures: Vec::new() };
    let mut page = report::header(opts.full);
    let tcp = |_| nodes(Listen::Tcp, 0);
    for sc in scenarios {
        let table = match sc {
            Scenario::Sequential => report::sequential(&plan, &p.pairs(sc, &seq_pairs)),
            Scenario::Tls => report::versus(&p.pairs(sc, &tls_pairs), false),
            Scenario::Sentinel => report::versus(&p.pairs(sc, &sentinel_pairs), true),
            Scenario::Lockers => {
                let lockers = |s: &dyn Subject, setup: &Setup, n| s.lockers(&urls(setup.nodes()), &plan, n);
                report::lockers(&plan, &p.points(|_| &plan.lockers, &chosen(sc), "lockers", tcp, lockers))
            }
            Scenario::Handoff => {
                let handoff = |s: &dyn Subject, setup: &Setup, k| s.handoff(&urls(setup.nodes()), &plan, k);
                report::handoff(&plan, &p.points(contenders, &chosen(sc), "contenders, handoff", tcp, handoff))
            }
            Scenario::Stalled => {
                // The last node is stopped between the two levels.
                let stalled = |s: &dyn Subject, setup: &Setup, _| {
                    let nodes = setup.nodes();
                    s.stalled(&urls(nodes), &plan, &|| nodes[NODES - 1].pause())
                };
                report::stalled(&p.points(|_| &[1], &chosen(sc), "of 5 nodes stopped, stalled", tcp, stalled))
            }
            Scenario::Cluster => {
                // One node: a standalone server (0 masters) or a Redis Cluster's seed.
                let one = |m| match m {
                    0 => Servers::builder().nodes(1).try_start().map(Setup::Nodes),
                    m => RedisCluster::builder().masters(m).replicas(0).try_start().map(Setup::Redis),
                };
                let lockers =
                    |s: &dyn Subject, setup: &Setup, _| s.lockers(&urls(&setup.nodes()[..1]), &plan, plan.cluster);
                let what = "master(s) in the node (0: standalone)";
                report::cluster(&plan, &p.points(|_| &[0, 1, 2, 3], &chosen(sc), what, one, lockers))
            }
        };
        println!("\n{table}");
        let _ = std::io::stdout().flush();
        page.push_str(&format!("\n{table}"));
    }
    let dir =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from).join("bench");
    let file = dir.join("runtimes.md");
    std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, &page)).map_err(|e| format!("{file:?}: {e}"))?;
    eprintln!("done in {:.0} s; the tables are in {}", p.started.elapsed().as_secs_f64(), file.display());
    Ok(p.failures)
}

/// The workspace's folder (cargo runs a bench in its package's folder).
fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new("."))
}

/// What a measurement returns: its progress line, or why it counts as failed (nothing
/// measured).
trait Figures {
    fn summary(&self) -> Result<String, String>;
}

impl Figures for (Seq, Seq) {
    fn summary(&self) -> Result<String, String> {
        let (a, b) = (self.0.cycle.p50().ok_or("no cycle")?, self.1.cycle.p50().ok_or("no cycle for the partner")?);
        Ok(format!("p50 {} against {}", dur(Some(a)), dur(Some(b))))
    }
}

impl Figures for Load {
    fn summary(&self) -> Result<String, String> {
        let line = format!("{:.0} cycles/s, p50 {}", self.rate(), dur(self.latency.p50()));
        if self.cycles > 0 { Ok(line) } else { Err("no cycle completed".into()) }
    }
}

impl Figures for [Load; 2] {
    fn summary(&self) -> Result<String, String> {
        let up = self[0].latency.p50().ok_or("no acquisition with every node up")?;
        let down = self[1].latency.p50().ok_or("no acquisition with a node stopped")?;
        Ok(format!("p50 {} → {}", dur(Some(up)), dur(Some(down))))
    }
}

impl Figures for Handoff {
    fn summary(&self) -> Result<String, String> {
        let p50 = self.handoff.p50().ok_or("no handoff in the window")?;
        Ok(format!("handoff p50 {}, {} grants", dur(Some(p50)), self.grants))
    }
}

/// The plan, the progress display and the failures so far.
struct Progress<'a> {
    plan: &'a Plan,
    step: usize,
    total: usize,
    started: Instant,
    failures: Vec<String>,
}

impl Progress<'_> {
    /// One measurement on servers `start` starts for it.
    fn measure<T: Figures>(
        &mut self,
        name: &str,
        what: &str,
        start: impl FnOnce() -> Result<Setup, String>,
        measure: impl FnOnce(&Setup) -> Result<T, String>,
    ) -> Result<T, String> {
        self.step += 1;
        eprint!("[{:>3}/{}] {name:<15} {what} ... ", self.step, self.total);
        let _ = std::io::stderr().flush();
        let t0 = Instant::now();
        let result = start().and_then(|servers| {
            usage::set_servers(servers.pids());
            let result = guarded(|| measure(&servers));
            usage::set_servers(Vec::new());
            result
        });
        match result.as_ref().map_err(Clone::clone).and_then(T::summary) {
            Ok(line) => eprintln!("{line} ({:.1} s)", t0.elapsed().as_secs_f64()),
            Err(e) => {
                eprintln!("FAILED: {e}");
                self.failures.push(format!("{name}, {what}: {e}"));
                return Err(e);
            }
        }
        result
    }

    /// Every subject at each of its counts (lockers, contenders, masters), one after another,
    /// by count, each on the servers `start` starts for the count.
    fn points<'c, T: Figures>(
        &mut self,
        counts: impl Fn(&dyn Subject) -> &'c [usize],
        subjects: &[&dyn Subject],
        what: &str,
        start: impl Fn(usize) -> Result<Setup, String>,
        measure: impl Fn(&dyn Subject, &Setup, usize) -> Result<T, String>,
    ) -> Vec<Point<T>> {
        let mut points: Vec<_> = subjects.iter().flat_map(|&s| counts(s).iter().map(move |&n| (n, s))).collect();
        points.sort_by_key(|&(n, _)| n);
        let mut rows = Vec::new();
        for (n, s) in points {
            let r = self.measure(s.name(), &format!("{n} {what}"), || start(n), |c| measure(s, c, n));
            rows.push((s.name(), n, r));
        }
        rows
    }

    /// Every pair's sequential cycles taking turns on the same servers, round after round; with
    /// `Scenario::Tls` the first of a pair runs over TLS and the second over TCP, with
    /// `Scenario::Sentinel` on Sentinel-managed nodes and on their primaries' plain URLs.
    fn pairs(&mut self, sc: Scenario, pairs: &[(&dyn Subject, &dyn Subject)]) -> Vec<Pair> {
        let mut pooled: Vec<Result<(Seq, Seq), String>> = vec![Ok(Default::default()); pairs.len()];
        for round in 0..self.plan.seq.rounds {
            for (&(a, b), pool) in pairs.iter().zip(&mut pooled) {
                let Ok((pa, pb)) = pool else {
                    self.step += 1;
                    continue;
                };
                let (listen, with) = if sc == Scenario::Tls { (Listen::Tls, "TCP") } else { (Listen::Tcp, b.name()) };
                let what = format!("{}, round {}/{}, with {with}", sc.name(), round + 1, self.plan.seq.rounds);
                let plan = self.plan;
                let replicas = usize::from(a.info().shape == Shape::Replicated);
                let start = || match sc {
                    Scenario::Sentinel => SentinelNodes::builder().nodes(NODES).try_start().map(Setup::Sentinel),
                    _ => nodes(listen, replicas),
                };
                let r = self.measure(a.name(), &what, start, |setup| {
                    let (urls, plain) = setup.urls();
                    pair(plan, (a, &urls), (b, &plain), round % 2 == 1)
                });
                match r {
                    Ok((x, y)) => {
                        pa.add(&x);
                        pb.add(&y);
                    }
                    Err(e) => *pool = Err(e),
                }
            }
        }
        pairs.iter().zip(pooled).map(|((a, b), r)| (a.name(), b.name(), r)).collect()
    }
}

/// The servers of a measurement, stopped when dropped: nodes of their own, a Redis Cluster
/// (its masters first: a client is given master 0, the cluster's seed, as one node), or
/// Sentinel-managed nodes (the sentinel scenario's).
enum Setup {
    Nodes(Servers),
    Redis(RedisCluster),
    Sentinel(SentinelNodes),
}

impl Setup {
    /// The nodes (not for Sentinel-managed nodes, which the other scenarios do not use).
    fn nodes(&self) -> &[Node] {
        match self {
            Setup::Nodes(c) => c.nodes(),
            Setup::Redis(c) => c.nodes(),
            Setup::Sentinel(_) => &[],
        }
    }

    /// Every server process (for their CPU).
    fn pids(&self) -> Vec<u32> {
        let Setup::Sentinel(set) = self else { return self.nodes().iter().filter_map(Node::pid).collect() };
        let data = (0..set.len()).flat_map(|i| set.data_nodes(i)).filter_map(Node::pid);
        data.chain(set.sentinels().iter().filter_map(|s| s.pid())).collect()
    }

    /// The URLs of a pair's two sides: the nodes as they listen (Sentinel-managed nodes: as
    /// their sentinels name them), and their (primaries') plain URLs.
    fn urls(&self) -> (Vec<String>, Vec<String>) {
        let Setup::Sentinel(set) = self else {
            return (urls(self.nodes()), self.nodes().iter().map(Node::plain_url).collect());
        };
        (set.urls(), (0..set.len()).map(|i| set.data_nodes(i)[0].plain_url()).collect())
    }
}

/// Fresh servers: the plan's nodes, listening as `listen`, each with `replicas` replicas.
fn nodes(listen: Listen, replicas: usize) -> Result<Setup, String> {
    Servers::builder().nodes(NODES).listen(listen).replicas(replicas).try_start().map(Setup::Nodes)
}

/// The URLs of `nodes`, as they listen.
fn urls(nodes: &[Node]) -> Vec<String> {
    nodes.iter().map(Node::url).collect()
}

/// `a`'s and `b`'s sequential cycles on their URLs, taking turns; `b_first`: `b` starts.
fn pair(
    plan: &Plan,
    a: (&dyn Subject, &[String]),
    b: (&dyn Subject, &[String]),
    b_first: bool,
) -> Result<(Seq, Seq), String> {
    let (first, second) = Recorder::pair(plan.seq);
    let (side_a, side_b) = if b_first { (second, first) } else { (first, second) };
    std::thread::scope(|scope| {
        let rb = scope.spawn(|| guarded(|| b.0.sequential(b.1, side_b)));
        let ra = guarded(|| a.0.sequential(a.1, side_a));
        let rb = rb.join().unwrap_or_else(|_| Err("panicked".into()));
        Ok((ra?, rb.map_err(|e| format!("its partner {}: {e}", b.0.name()))?))
    })
}

/// `f`, with a panic turned into an error.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let text = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
        Err(format!("panicked: {}", text.unwrap_or_default()))
    })
}
