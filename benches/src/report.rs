//! Tables, targets, charts and the `docs/benchmarks.md` page.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::machine::{Machine, utc};
use crate::plan::{Mode, Scenario};
use crate::results::{Entry, Results, find, min_max, round_ratios};
use crate::stats::{Dist, fmt_latency, fmt_rate};
use crate::subject::{Paired, Role, Sequential, Style};
use crate::svg::{Axis, Series, fmt_count, fmt_us, line_chart};

/// The peer the targets compare with.
pub const RSLOCK: &str = "rslock";

/// Locker count of the throughput targets.
pub const TARGET_LOCKERS: usize = 16;

/// The charts, by file name (next to `benchmarks.md`).
pub const CHARTS: [&str; 4] = ["bench-latency.svg", "bench-throughput.svg", "bench-scaling.svg", "bench-handoff.svg"];

const NOTES_START: &str = "<!-- notes:start -->";
const NOTES_END: &str = "<!-- notes:end -->";
const TARGETS_START: &str = "<!-- targets:start -->";
const TARGETS_END: &str = "<!-- targets:end -->";

// ----- a markdown table --------------------------------------------------------------------

/// A markdown table whose columns are padded, so that it also reads well in a terminal.
#[derive(Debug, Default)]
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
    left: usize,
}

impl Table {
    /// A table with these column titles.
    pub fn new<S: Into<String>>(head: impl IntoIterator<Item = S>) -> Self {
        Table { head: head.into_iter().map(Into::into).collect(), rows: Vec::new(), left: 1 }
    }

    /// Align the first `n` columns to the left (text); the others go right (figures).
    pub fn left(mut self, n: usize) -> Self {
        self.left = n;
        self
    }

    /// Add a row (missing cells are left empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The markdown text.
    pub fn render(&self) -> String {
        let cols = self.head.len();
        let mut width = vec![3; cols];
        for row in std::iter::once(&self.head).chain(&self.rows) {
            for (i, c) in row.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, w) in width.iter().enumerate() {
                let c = cells.get(i).map_or("", String::as_str);
                let pad = w - c.chars().count();
                // Numbers to the right, names to the left.
                if i < self.left {
                    let _ = write!(s, " {c}{} |", " ".repeat(pad));
                } else {
                    let _ = write!(s, " {}{c} |", " ".repeat(pad));
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.head);
        out.push('|');
        for (i, w) in width.iter().enumerate() {
            if i < self.left {
                let _ = write!(out, "{}|", "-".repeat(w + 2));
            } else {
                let _ = write!(out, "{}:|", "-".repeat(w + 1));
            }
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

// ----- helpers -----------------------------------------------------------------------------

fn lat(d: Option<Duration>) -> String {
    d.map_or_else(|| "—".to_owned(), fmt_latency)
}

fn ratio(x: Option<f64>) -> String {
    x.map_or_else(|| "—".to_owned(), |x| format!("{x:.2}×"))
}

/// A spread of per-round ratios, `min–max×`.
fn spread(x: Option<(f64, f64)>) -> String {
    x.map_or_else(|| "—".to_owned(), |(lo, hi)| format!("{lo:.2}–{hi:.2}×"))
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "—".to_owned(), |x| format!("{:+.0} %", x * 100.0))
}

fn div(a: Option<Duration>, b: Option<Duration>) -> Option<f64> {
    let (a, b) = (a?.as_secs_f64(), b?.as_secs_f64());
    (b > 0.0).then(|| a / b)
}

/// The floor an adapter of `style` is compared with in the sequential scenarios.
pub fn floor_for(r: &Results, style: Style) -> Option<&str> {
    r.subjects
        .iter()
        .find(|s| s.role == Role::Floor && s.style == style && s.scenarios.contains(&Scenario::Sequential))
        .map(|s| s.name.as_str())
}

/// The floor of the handoff scenario, of `style` if there is one, else of the other style.
pub fn handoff_floor(r: &Results, style: Style) -> Option<&str> {
    let floors = || r.subjects.iter().filter(|s| s.role == Role::Floor && s.scenarios.contains(&Scenario::Handoff));
    floors().find(|s| s.style == style).or_else(|| floors().next()).map(|s| s.name.as_str())
}

/// The floor of the throughput scenario (the pipelined client).
pub fn throughput_floor(r: &Results) -> Option<&str> {
    r.subjects
        .iter()
        .find(|s| s.role == Role::Floor && s.scenarios.contains(&Scenario::Throughput))
        .map(|s| s.name.as_str())
}

fn seq_p50(r: &Results, subject: &str) -> Option<Duration> {
    find(&r.sequential, subject, 0).and_then(|s| s.cycle.p50())
}

fn seq_server(r: &Results, subject: &str) -> Option<Duration> {
    find(&r.sequential, subject, 0).and_then(|s| s.server_cpu_per_cycle())
}

fn failed_cell<T>(list: &[Entry<T>], subject: &str, point: usize) -> Option<String> {
    list.iter()
        .find(|e| e.subject == subject && e.point == point)
        .and_then(|e| e.result.as_ref().err())
        .map(|e| format!("failed: {}", e.chars().take(80).collect::<String>()))
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Adapter => "adapter",
        Role::Floor => "floor",
        Role::Peer => "peer",
    }
}

// ----- the scenario tables -----------------------------------------------------------------

/// One scenario's heading, parameters and tables, in markdown.
pub fn scenario_section(r: &Results, scenario: Scenario) -> String {
    match scenario {
        Scenario::Sequential => sequential_section(r),
        Scenario::Paired => paired_section(r),
        Scenario::Throughput => throughput_section(r) + &tls_section(r),
        Scenario::Scaling => scaling_section(r),
        Scenario::Stalled => stalled_section(r),
        Scenario::Contention => contention_section(r),
        Scenario::Handoff => handoff_section(r),
    }
}

fn sequential_section(r: &Results) -> String {
    let p = &r.plan;
    let mut out = format!(
        "## 1. Sequential lock+unlock\n\nOne key, N = {}, TTL {} s, {} rounds of {} warm-up + {} cycles: \
         each round measures every subject once, on a fresh cluster, in an order rotated by one per \
         round, and a subject's figures pool its rounds' cycles. \
         \"÷ floor\" compares with the quorum floor of the same style ({} for async, {} for blocking), \
         which decides at the first N/2+1 replies like the adapters; \"by round\" is the spread of that \
         ratio over the rounds, each round's p50 against the floor's in the same round. Server CPU is \
         the `redis-server` processes' CPU time over the recorded cycles (schedstat, all nodes \
         together), per cycle.\n\n",
        p.nodes,
        p.ttl.as_secs(),
        p.sequential_rounds,
        p.sequential.warmup,
        p.sequential.cycles,
        floor_for(r, Style::Async).unwrap_or("—"),
        floor_for(r, Style::Blocking).unwrap_or("—"),
    );
    let rslock = seq_p50(r, RSLOCK);
    let mut cycle = Table::new([
        "subject",
        "kind",
        "cycle p50",
        "p90",
        "p99",
        "max",
        "p50 ÷ floor",
        "by round",
        "p50 ÷ rslock",
        "server CPU/cycle",
        "server CPU ÷ floor",
    ])
    .left(2);
    let mut parts = Table::new([
        "subject",
        "acquire p50",
        "p90",
        "p99",
        "max",
        "release p50",
        "p90",
        "p99",
        "max",
        "client CPU/cycle",
        "thread sleeps/cycle",
    ]);
    for s in r.subjects.iter().filter(|s| s.scenarios.contains(&Scenario::Sequential)) {
        let Some(seq) = find(&r.sequential, &s.name, 0) else {
            let why = failed_cell(&r.sequential, &s.name, 0).unwrap_or_else(|| "not run".into());
            cycle.row(vec![s.name.clone(), role_name(s.role).into(), why]);
            continue;
        };
        let floor = floor_for(r, s.style).and_then(|f| seq_p50(r, f));
        let floor_server = floor_for(r, s.style).and_then(|f| seq_server(r, f));
        let by_round = floor_for(r, s.style).and_then(|f| round_ratios(&r.sequential, &s.name, f, 0));
        let c = seq.cycle.summary();
        cycle.row(vec![
            s.name.clone(),
            role_name(s.role).into(),
            lat(c.map(|c| c.p50)),
            lat(c.map(|c| c.p90)),
            lat(c.map(|c| c.p99)),
            lat(c.map(|c| c.max)),
            ratio(div(seq.cycle.p50(), floor)),
            spread(by_round),
            ratio(div(seq.cycle.p50(), rslock)),
            lat(seq.server_cpu_per_cycle()),
            ratio(div(seq.server_cpu_per_cycle(), floor_server)),
        ]);
        let (a, l) = (seq.acquire.summary(), seq.release.summary());
        parts.row(vec![
            s.name.clone(),
            lat(a.map(|a| a.p50)),
            lat(a.map(|a| a.p90)),
            lat(a.map(|a| a.p99)),
            lat(a.map(|a| a.max)),
            lat(l.map(|l| l.p50)),
            lat(l.map(|l| l.p90)),
            lat(l.map(|l| l.p99)),
            lat(l.map(|l| l.max)),
            lat(seq.client_cpu_per_cycle()),
            seq.sleeps_per_cycle().map_or_else(|| "—".into(), |n| format!("{n:.1}")),
        ]);
    }
    out.push_str(&cycle.render());
    out.push_str(
        "\nAcquire alone and release alone, and the client process's use per cycle: CPU time \
         (getrusage, every thread) and thread sleeps (voluntary context switches, every thread: \
         each is a wake-up paid for later, so this counts the hand-offs between threads):\n\n",
    );
    out.push_str(&parts.render());
    out
}

fn paired_section(r: &Results) -> String {
    let p = &r.plan.paired;
    let mut out = format!(
        "## 1b. Paired with the floor\n\nEach adapter and floor on plain TCP and the floor of its style run \
         their sequential loops on one cluster at once, taking turns of {} cycles: {} warm-up cycles \
         then {} per side and round, {} rounds (a fresh cluster each; the side that goes first \
         alternates). Each turn's first cycle is run but not recorded: it wakes a client that sat \
         idle through the other's turn. Both sides go through the same spells of noise, so their \
         ratio measures the clients rather than the moment they ran in; the floor paired with \
         itself shows what the measurement can resolve. \"by round\" is the spread of each \
         round's own ratio. CPU figures cover each side's recorded cycles only; \"all CPU\" is \
         client and servers together. Where they share the machine's cores, a cycle waits for \
         all of it, and the p50 ratio follows that one.\n\n",
        p.block, p.seq.warmup, p.seq.cycles, p.rounds,
    );
    let mut t = Table::new([
        "subject",
        "floor",
        "cycles",
        "cycle p50",
        "floor's",
        "p50 ÷ floor",
        "by round",
        "server CPU/cycle",
        "floor's",
        "÷ floor",
        "client CPU/cycle",
        "floor's",
        "÷ floor",
        "all CPU ÷ floor",
        "sleeps/cycle",
        "floor's",
    ])
    .left(2);
    let sleeps = |s: &Sequential| s.sleeps_per_cycle().map_or_else(|| "—".into(), |n| format!("{n:.1}"));
    for e in &r.paired {
        let pr = match &e.result {
            Ok(pr) => pr,
            Err(why) => {
                let cell = format!("failed: {}", why.chars().take(80).collect::<String>());
                t.row(vec![e.subject.clone(), "—".into(), cell]);
                continue;
            }
        };
        let (me, floor) = (&pr.subject, &pr.floor);
        t.row(vec![
            e.subject.clone(),
            pr.floor_name.clone(),
            me.cycles.to_string(),
            lat(me.cycle.p50()),
            lat(floor.cycle.p50()),
            ratio(pr.p50_ratio()),
            spread(min_max(e.rounds.iter().copied())),
            lat(me.server_cpu_per_cycle()),
            lat(floor.server_cpu_per_cycle()),
            ratio(div(me.server_cpu_per_cycle(), floor.server_cpu_per_cycle())),
            lat(me.client_cpu_per_cycle()),
            lat(floor.client_cpu_per_cycle()),
            ratio(div(me.client_cpu_per_cycle(), floor.client_cpu_per_cycle())),
            ratio(div(me.all_cpu_per_cycle(), floor.all_cpu_per_cycle())),
            sleeps(me),
            sleeps(floor),
        ]);
    }
    out.push_str(&t.render());
    out
}

fn throughput_section(r: &Results) -> String {
    let p = &r.plan;
    let mut out = format!(
        "## 2. Throughput\n\nEach locker on its own key, N = {}, {} rounds per point of {} s warm-up then a {} s \
         window, in rounds like the sequential scenario (a subject's windows pooled). \
         CPU is the client process's user + system time (getrusage) in the window, per cycle; server CPU \
         is the `redis-server` processes' (schedstat, all nodes together). \
         Ratios compare with {RSLOCK} and with the pipelined floor ({}) at the same locker count; \
         \"by round\" is the spread of the ratio to the pipelined floor over the rounds.\n\n",
        p.nodes,
        p.rounds,
        p.throughput.warmup.as_secs_f64(),
        p.throughput.window.as_secs_f64(),
        throughput_floor(r).unwrap_or("—"),
    );
    let pipelined = throughput_floor(r);
    let mut t = Table::new([
        "subject",
        "lockers",
        "cycles/s",
        "p50",
        "p99",
        "CPU/cycle",
        "÷ rslock",
        "÷ pipelined",
        "by round",
        "CPU ÷ pipelined",
        "server CPU/cycle",
        "server ÷ pipelined",
        "failed",
    ]);
    for s in r.subjects.iter().filter(|s| s.scenarios.contains(&Scenario::Throughput)) {
        for &lockers in &p.lockers {
            let Some(tp) = find(&r.throughput, &s.name, lockers) else {
                let why = failed_cell(&r.throughput, &s.name, lockers).unwrap_or_else(|| "not run".into());
                t.row(vec![s.name.clone(), lockers.to_string(), why]);
                continue;
            };
            let peer = find(&r.throughput, RSLOCK, lockers);
            let floor = pipelined.and_then(|f| find(&r.throughput, f, lockers));
            t.row(vec![
                s.name.clone(),
                lockers.to_string(),
                fmt_rate(tp.rate()),
                lat(tp.latency.p50()),
                lat(tp.latency.quantile(0.99)),
                lat(tp.cpu_per_cycle()),
                ratio(peer.map(|x| tp.rate() / x.rate().max(1e-9))),
                ratio(floor.map(|x| tp.rate() / x.rate().max(1e-9))),
                spread(pipelined.and_then(|f| round_ratios(&r.throughput, &s.name, f, lockers))),
                ratio(div(tp.cpu_per_cycle(), floor.and_then(|x| x.cpu_per_cycle()))),
                lat(tp.server_cpu_per_cycle()),
                ratio(div(tp.server_cpu_per_cycle(), floor.and_then(|x| x.server_cpu_per_cycle()))),
                if tp.errors == 0 { "0".into() } else { tp.errors.to_string() },
            ]);
        }
    }
    out.push_str(&t.render());
    let errors: Vec<String> = r
        .throughput
        .iter()
        .filter_map(|e| {
            let tp = e.result.as_ref().ok()?;
            tp.first_error.as_ref().map(|m| format!("- {} at {} lockers: {m}", e.subject, e.point))
        })
        .collect();
    if !errors.is_empty() {
        out.push_str("\nFirst failure per point:\n\n");
        out.push_str(&errors.join("\n"));
        out.push('\n');
    }
    out
}

/// TLS subjects (`NAME-tls`) against the same client over TCP (`NAME`), in this run.
fn tls_section(r: &Results) -> String {
    let pairs: Vec<(&str, &str)> =
        r.subjects.iter().filter_map(|s| Some((s.name.as_str(), s.name.strip_suffix("-tls")?))).collect();
    if pairs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n### TLS ÷ TCP\n\nThe same client against the same kind of nodes, over TLS (`rediss://`, rustls with the \
         ring provider, TLS 1.3, the nodes' `tls-port`) and over plain TCP, in this run.\n\n",
    );
    let mut t = Table::new(["subject", "sequential p50", "÷ TCP", "16 lockers cycles/s", "÷ TCP"]);
    for (tls, tcp) in pairs {
        let (a, b) = (seq_p50(r, tls), seq_p50(r, tcp));
        let rate = |s: &str| find(&r.throughput, s, 16).map(|t| t.rate());
        let (x, y) = (rate(tls), rate(tcp));
        t.row(vec![
            tls.to_owned(),
            lat(a),
            ratio(div(a, b)),
            x.map_or("—".into(), fmt_rate),
            ratio(x.zip(y).map(|(x, y)| x / y.max(1e-9))),
        ]);
    }
    out.push_str(&t.render());
    out
}

fn scaling_section(r: &Results) -> String {
    let p = &r.plan;
    let mut out = format!(
        "## 3. Scaling in N\n\nSequential lock+unlock cycle p50 for N nodes ({} warm-up + {} cycles each).\n\n",
        p.scaling.warmup, p.scaling.cycles
    );
    let mut head = vec!["subject".to_owned()];
    head.extend(p.scaling_nodes.iter().map(|n| format!("N = {n}")));
    let (three, nine) = (p.scaling_nodes.contains(&3), p.scaling_nodes.contains(&9));
    if three && nine {
        head.push("N=9 ÷ N=3".into());
    }
    let mut t = Table::new(head);
    for s in r.subjects.iter().filter(|s| s.scenarios.contains(&Scenario::Scaling)) {
        let mut row = vec![s.name.clone()];
        for &n in &p.scaling_nodes {
            row.push(match find(&r.scaling, &s.name, n) {
                Some(seq) => lat(seq.cycle.p50()),
                None => failed_cell(&r.scaling, &s.name, n).unwrap_or_else(|| "—".into()),
            });
        }
        if three && nine {
            row.push(ratio(scaling_ratio(r, &s.name)));
        }
        t.row(row);
    }
    out.push_str(&t.render());
    out
}

fn scaling_ratio(r: &Results, subject: &str) -> Option<f64> {
    div(
        find(&r.scaling, subject, 9).and_then(|s| s.cycle.p50()),
        find(&r.scaling, subject, 3).and_then(|s| s.cycle.p50()),
    )
}

fn stalled_section(r: &Results) -> String {
    let p = &r.plan;
    let mut out = format!(
        "## 4. Stalled minority\n\nAcquire latency with 0, then 1, then 2 of {} nodes paused (SIGSTOP); \
         each acquisition on a fresh key, released without waiting, up to {} per level or {} s. \
         Δ compares the p50 with the same subject's healthy p50. The floors sit this one out \
         (they have no per-node timeout: a paused node would block the all-replies ones).\n\n",
        p.nodes,
        p.stalled.max_samples,
        p.stalled.cap.as_secs_f64()
    );
    let mut head = vec!["subject".to_owned()];
    for &level in &p.stalled.levels {
        let name = if level == 0 { "healthy".to_owned() } else { format!("{level} paused") };
        head.push(format!("{name} p50"));
        head.push("p99".into());
        if level > 0 {
            head.push("Δ p50".into());
        }
    }
    head.push("acquisitions (failed)".into());
    let mut t = Table::new(head);
    let mut notes = Vec::new();
    for s in r.subjects.iter().filter(|s| s.scenarios.contains(&Scenario::Stalled)) {
        let Some(levels) = find(&r.stalled, &s.name, 0) else {
            let why = failed_cell(&r.stalled, &s.name, 0).unwrap_or_else(|| "not run".into());
            t.row(vec![s.name.clone(), why]);
            continue;
        };
        let base = levels.iter().find(|l| l.paused == 0).and_then(|l| l.acquire.p50());
        let mut row = vec![s.name.clone()];
        let mut counts = Vec::new();
        for l in levels {
            match l.blocked {
                Some(waited) => {
                    row.push(format!("blocked > {}", fmt_latency(waited)));
                    row.push("—".into());
                }
                None => {
                    row.push(lat(l.acquire.p50()));
                    row.push(lat(l.acquire.quantile(0.99)));
                }
            }
            if l.paused > 0 {
                row.push(pct(div(l.acquire.p50(), base).map(|x| x - 1.0)));
            }
            counts.push(format!("{} ({})", l.acquire.len(), l.errors));
            if let Some(e) = &l.first_error {
                notes.push(format!("- {} with {} paused: {e}", s.name, l.paused));
            }
        }
        row.push(counts.join(" / "));
        t.row(row);
    }
    out.push_str(&t.render());
    if !notes.is_empty() {
        out.push_str("\nFirst failure per level:\n\n");
        out.push_str(&notes.join("\n"));
        out.push('\n');
    }
    out
}

fn contention_section(r: &Results) -> String {
    let p = &r.plan;
    let mut out = format!(
        "## 5. Contention\n\n{} lockers on one key, each retrying (with its library's jitter) until it holds \
         the lock, then releasing it at once; {} s warm-up, {} s window. The spread is the acquisitions per \
         locker (CV = standard deviation ÷ mean).\n\n",
        p.contenders,
        p.contention.warmup.as_secs_f64(),
        p.contention.window.as_secs_f64()
    );
    let mut t = Table::new(["subject", "acquisitions/s", "per locker min", "median", "max", "CV", "failed calls"]);
    for s in r.subjects.iter().filter(|s| s.scenarios.contains(&Scenario::Contention)) {
        let Some(c) = find(&r.contention, &s.name, 0) else {
            let why = failed_cell(&r.contention, &s.name, 0).unwrap_or_else(|| "not run".into());
            t.row(vec![s.name.clone(), why]);
            continue;
        };
        let sp = c.spread();
        t.row(vec![
            s.name.clone(),
            fmt_rate(c.rate()),
            sp.map_or("—".into(), |s| s.min.to_string()),
            sp.map_or("—".into(), |s| s.median.to_string()),
            sp.map_or("—".into(), |s| s.max.to_string()),
            sp.map_or("—".into(), |s| format!("{:.2}", s.cv)),
            c.errors.to_string(),
        ]);
    }
    out.push_str(&t.render());
    out
}

fn handoff_section(r: &Results) -> String {
    let p = &r.plan.handoff;
    let mut out = format!(
        "## 6. Handoff\n\nK contenders on one key, each a client of its own, acquiring it (waiting as long as it \
         takes), holding it {}, releasing it, and again; {} s warm-up, {} s window per K. Handoff: from a \
         holder's release call to the next holder's grant. Wait: from a lock call to its grant; fairness = \
         longest wait ÷ median wait; \"÷ K×h\": the longest wait over K × the hold time (no starvation: a small \
         multiple). \"÷ acquire\": handoff p50 over the subject's own sequential acquire p50 (section 1); \"idle acquire\": \
         the p50 of {} acquisitions of a free key by one of the subject's clients, each after {} of idling \
         (what one round costs when the machine has just been idle, as it has when a holder releases); \
         \"÷ floor\": handoff p50 over the handoff floor's at the same K (the floor of the same style, else the \
         other one).\n\n",
        fmt_latency(p.hold),
        p.load.warmup.as_secs_f64(),
        p.load.window.as_secs_f64(),
        p.idle_acquires,
        fmt_latency(p.hold)
    );
    let mut t = Table::new([
        "subject",
        "K",
        "handoff p50",
        "handoff p99",
        "÷ acquire",
        "idle acquire p50",
        "÷ idle acquire",
        "÷ floor",
        "acquisitions/s",
        "wait p50",
        "wait max",
        "fairness",
        "max ÷ K×h",
        "gave up",
    ]);
    let mut failures = Vec::new();
    for s in r.subjects.iter().filter(|s| s.scenarios.contains(&Scenario::Handoff)) {
        for &k in &p.contenders {
            let Some(h) = find(&r.handoff, &s.name, k) else {
                let why = failed_cell(&r.handoff, &s.name, k).unwrap_or_else(|| "not run".into());
                t.row(vec![s.name.clone(), k.to_string(), why]);
                continue;
            };
            let q = |d: &crate::stats::Dist, q: f64| d.quantile(q).map_or("—".into(), fmt_latency);
            let kh = p.hold.as_secs_f64() * k as f64;
            let acquire = find(&r.sequential, &s.name, 0).and_then(|q| q.acquire.p50());
            let floor = handoff_floor(r, s.style).and_then(|f| find(&r.handoff, f, k)).and_then(|f| f.handoff.p50());
            let idle =
                p.contenders.first().and_then(|&k0| find(&r.handoff, &s.name, k0)).and_then(|h| h.idle_acquire.p50());
            t.row(vec![
                s.name.clone(),
                k.to_string(),
                q(&h.handoff, 0.5),
                q(&h.handoff, 0.99),
                ratio(div(h.handoff.p50(), acquire)),
                lat(idle),
                ratio(div(h.handoff.p50(), idle)),
                ratio(div(h.handoff.p50(), floor)),
                fmt_rate(h.rate()),
                q(&h.wait, 0.5),
                q(&h.wait, 1.0),
                h.fairness().map_or("—".into(), |f| format!("{f:.1}")),
                h.wait.quantile(1.0).map_or("—".into(), |m| format!("{:.1}", m.as_secs_f64() / kh)),
                h.gave_up.to_string(),
            ]);
            if let Some(e) = &h.first_error {
                failures.push(format!(
                    "- {} at K = {k}, first failure: {}\n",
                    s.name,
                    e.chars().take(200).collect::<String>()
                ));
            }
        }
    }
    out.push_str(&t.render());
    if !failures.is_empty() {
        out.push('\n');
        out.extend(failures);
    }
    out
}

// ----- targets -----------------------------------------------------------------------------

/// One target of the issue, measured for one adapter.
#[derive(Clone, Copy, Debug)]
pub struct Check {
    /// The measured ratio (for stalled: the relative increase), if both sides were measured.
    pub value: Option<f64>,
    /// The bound.
    pub limit: f64,
    /// `value` must be at most `limit` (else at least).
    pub at_most: bool,
    /// `limit` itself does not pass (strictly below or above).
    pub strict: bool,
    /// Shown as a percentage increase rather than a ratio.
    pub percent: bool,
}

impl Check {
    /// Whether it is met, if measured.
    pub fn met(&self) -> Option<bool> {
        let v = self.value?;
        Some(match (self.at_most, self.strict) {
            (true, false) => v <= self.limit,
            (true, true) => v < self.limit,
            (false, false) => v >= self.limit,
            (false, true) => v > self.limit,
        })
    }

    fn cell(&self) -> String {
        let shown = if self.percent { pct(self.value) } else { ratio(self.value) };
        match self.met() {
            Some(true) => format!("{shown} ✓"),
            Some(false) => format!("{shown} ✗"),
            None => shown,
        }
    }
}

/// The column titles of the targets table (after "adapter").
pub const TARGET_TITLES: [&str; 11] = [
    "seq p50 ÷ floor (≤ 1.05)",
    "seq server CPU ÷ floor (≤ 1.05)",
    "paired: seq p50 ÷ floor (≤ 1.05)",
    "paired: server CPU ÷ floor (≤ 1.05)",
    "seq p50 ÷ rslock (< 1)",
    "16 lockers ÷ rslock (≥ 2)",
    "16 lockers ÷ pipelined (≥ 0.9; tokio-mt ≥ 0.7)",
    "CPU/cycle ÷ pipelined (≤ 1.2)",
    "1 paused Δ p50 (≤ +10 %)",
    "2 paused Δ p50 (≤ +10 %)",
    "N=9 ÷ N=3 (≤ 1.3)",
];

/// The targets for every adapter, in [`TARGET_TITLES`] order.
pub fn targets(r: &Results) -> Vec<(String, Vec<Check>)> {
    let rslock_seq = seq_p50(r, RSLOCK);
    let tp = |s: &str| find(&r.throughput, s, TARGET_LOCKERS);
    let pipelined = throughput_floor(r).and_then(tp);
    let rslock_tp = tp(RSLOCK);
    r.subjects
        .iter()
        .filter(|s| s.role == Role::Adapter)
        .map(|s| {
            let seq = seq_p50(r, &s.name);
            let floor = floor_for(r, s.style).and_then(|f| seq_p50(r, f));
            let floor_server = floor_for(r, s.style).and_then(|f| seq_server(r, f));
            let paired = find(&r.paired, &s.name, 0);
            let mine = tp(&s.name);
            let tp_limit = if s.name == "tokio-mt" { 0.7 } else { 0.9 };
            let stall = |paused: usize| {
                let levels = find(&r.stalled, &s.name, 0)?;
                let base = levels.iter().find(|l| l.paused == 0)?.acquire.p50();
                let at = levels.iter().find(|l| l.paused == paused)?;
                if at.blocked.is_some() {
                    return None;
                }
                div(at.acquire.p50(), base).map(|x| x - 1.0)
            };
            let check = |value, limit, at_most, strict, percent| Check { value, limit, at_most, strict, percent };
            let rate = |a: Option<&crate::subject::Throughput>, b: Option<&crate::subject::Throughput>| {
                Some(a?.rate() / b?.rate().max(1e-9))
            };
            (
                s.name.clone(),
                vec![
                    check(div(seq, floor), 1.05, true, false, false),
                    check(div(seq_server(r, &s.name), floor_server), 1.05, true, false, false),
                    check(paired.and_then(Paired::p50_ratio), 1.05, true, false, false),
                    check(
                        paired.and_then(|p| div(p.subject.server_cpu_per_cycle(), p.floor.server_cpu_per_cycle())),
                        1.05,
                        true,
                        false,
                        false,
                    ),
                    check(div(seq, rslock_seq), 1.0, true, true, false),
                    check(rate(mine, rslock_tp), 2.0, false, false, false),
                    check(rate(mine, pipelined), tp_limit, false, false, false),
                    check(
                        div(mine.and_then(|m| m.cpu_per_cycle()), pipelined.and_then(|p| p.cpu_per_cycle())),
                        1.2,
                        true,
                        false,
                        false,
                    ),
                    check(stall(1), 0.10, true, false, true),
                    check(stall(2), 0.10, true, false, true),
                    check(scaling_ratio(r, &s.name), 1.3, true, false, false),
                ],
            )
        })
        .collect()
}

/// The targets table, with a count of the targets met.
pub fn targets_section(r: &Results) -> String {
    let rows = targets(r);
    let mut t = Table::new(std::iter::once("adapter").chain(TARGET_TITLES));
    let (mut met, mut measured) = (0, 0);
    for (name, checks) in &rows {
        let mut row = vec![name.clone()];
        for c in checks {
            row.push(c.cell());
            if let Some(ok) = c.met() {
                measured += 1;
                met += usize::from(ok);
            }
        }
        t.row(row);
    }
    format!(
        "## Targets\n\nRatios within this run (✓ met, ✗ missed, — not measured). {met} of {measured} met.\n\n{}",
        t.render()
    )
}

// ----- charts ------------------------------------------------------------------------------

/// The charts as `(file name, SVG)`.
pub fn charts(r: &Results) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    // Latency by percentile: x = -log10(1 - q), so 90 %, 99 %, 99.9 % are evenly spaced.
    let latency: Vec<Series> = r
        .sequential
        .iter()
        .filter_map(|e| {
            let seq = e.result.as_ref().ok()?;
            Some(Series {
                name: e.subject.clone(),
                points: percentile_points(&seq.cycle),
                markers: false,
                dash: dash(r, &e.subject),
            })
        })
        .collect();
    let q_ticks = vec![
        (0.0, "0 %".to_owned()),
        (-(0.5f64.log10()), "50 %".to_owned()),
        (1.0, "90 %".to_owned()),
        (2.0, "99 %".to_owned()),
        (3.0, "99.9 %".to_owned()),
    ];
    out.push((
        CHARTS[0],
        line_chart(
            &format!("Sequential lock+unlock cycle latency by percentile (N = {})", r.plan.nodes),
            &Axis::new("percentile", false, fmt_count).with_ticks(q_ticks),
            &Axis::new("cycle latency", true, fmt_us),
            &latency,
        ),
    ));
    let throughput: Vec<Series> = r
        .subjects
        .iter()
        .filter(|s| s.scenarios.contains(&Scenario::Throughput))
        .map(|s| Series {
            name: s.name.clone(),
            points: r
                .plan
                .lockers
                .iter()
                .filter_map(|&l| find(&r.throughput, &s.name, l).map(|t| (l as f64, t.rate())))
                .collect(),
            markers: true,
            dash: dash(r, &s.name),
        })
        .collect();
    let locker_ticks = r.plan.lockers.iter().map(|&l| (l as f64, l.to_string())).collect();
    out.push((
        CHARTS[1],
        line_chart(
            &format!("Throughput vs concurrent lockers (own keys, N = {})", r.plan.nodes),
            &Axis::new("lockers", true, fmt_count).with_ticks(locker_ticks),
            &Axis::new("cycles/s", true, fmt_count),
            &throughput,
        ),
    ));
    let scaling = p50_series(r, Scenario::Scaling, &r.plan.scaling_nodes, |s, n| find(&r.scaling, s, n)?.cycle.p50());
    let node_ticks = r.plan.scaling_nodes.iter().map(|&n| (n as f64, n.to_string())).collect();
    out.push((
        CHARTS[2],
        line_chart(
            "Sequential lock+unlock p50 vs number of nodes N",
            &Axis::new("nodes (N)", false, fmt_count).with_ticks(node_ticks),
            &Axis::new("cycle p50", true, fmt_us),
            &scaling,
        ),
    ));
    // Handoff p50 against K: one line per subject that takes part.
    let handoff =
        p50_series(r, Scenario::Handoff, &r.plan.handoff.contenders, |s, k| find(&r.handoff, s, k)?.handoff.p50());
    let k_ticks = r.plan.handoff.contenders.iter().map(|&k| (k as f64, k.to_string())).collect();
    out.push((
        CHARTS[3],
        line_chart(
            &format!(
                "Handoff p50 (release to the next holder's grant) vs contenders K, hold {} ms",
                r.plan.handoff.hold.as_millis()
            ),
            &Axis::new("contenders (K)", true, fmt_count).with_ticks(k_ticks),
            &Axis::new("handoff p50", true, fmt_us),
            &handoff,
        ),
    ));
    out
}

/// One line per subject that takes part in `scenario`: a p50 (in µs) at each of `xs`.
fn p50_series(
    r: &Results,
    scenario: Scenario,
    xs: &[usize],
    p50: impl Fn(&str, usize) -> Option<Duration>,
) -> Vec<Series> {
    r.subjects
        .iter()
        .filter(|s| s.scenarios.contains(&scenario))
        .map(|s| Series {
            name: s.name.clone(),
            points: xs.iter().filter_map(|&x| Some((x as f64, p50(&s.name, x)?.as_secs_f64() * 1e6))).collect(),
            markers: true,
            dash: dash(r, &s.name),
        })
        .collect()
}

/// Floors dashed, peers dotted, adapters solid.
fn dash(r: &Results, subject: &str) -> Option<&'static str> {
    match r.subject(subject).map(|s| s.role) {
        Some(Role::Floor) => Some("7 4"),
        Some(Role::Peer) => Some("2 3"),
        _ => None,
    }
}

/// The latency at evenly spaced `x = -log10(1 - q)`, from the smallest sample (q = 0) to the
/// largest sample, so that 90 %, 99 % and 99.9 % are evenly spaced and the tail gets as many
/// points as the body.
fn percentile_points(d: &Dist) -> Vec<(f64, f64)> {
    let n = d.len();
    if n == 0 {
        return Vec::new();
    }
    // The last rank sits at q = 1 - 1/(2n) (mid-rank), which keeps x finite.
    let last = -(0.5 / n as f64).log10();
    let steps = 200;
    (0..=steps)
        .filter_map(|k| {
            let x = last * k as f64 / steps as f64;
            let q = if k == steps { 1.0 } else { 1.0 - 10f64.powf(-x) };
            d.quantile(q).map(|lat| (x, lat.as_secs_f64() * 1e6))
        })
        .collect()
}

// ----- the page ----------------------------------------------------------------------------

/// The text between two markers of an earlier page, if any.
fn between<'a>(page: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = page.find(start)? + start.len();
    let to = from + page[from..].find(end)?;
    Some(page[from..to].trim_matches('\n'))
}

/// The whole `docs/benchmarks.md`. `earlier` is the page it replaces: its hand-written
/// notes are kept, and its targets table becomes the "previous run" section.
pub fn page(r: &Results, machine: &Machine, earlier: Option<&str>) -> String {
    let date = utc(r.started);
    let mut out = String::new();
    let _ = writeln!(out, "# Benchmarks: lock latency and throughput across runtimes\n");
    let _ = writeln!(
        out,
        "Written by `cargo bench -p redlease-benches --bench runtimes` (about {:.0} minutes) on {date}. \
         Everything below except the notes is generated; every figure comes from one run, against {} real \
         `redis-server` processes on loopback started by the test harness (a fresh set per measurement). \
         The machine is shared and noisy: compare ratios within a run, not absolute figures across runs.\n",
        r.elapsed.as_secs_f64() / 60.0,
        r.plan.nodes
    );
    let _ = writeln!(out, "## Machine and versions\n");
    let _ = writeln!(out, "- CPU: {} ({} logical CPUs), memory {}", machine.cpu, machine.cores, machine.memory);
    let _ = writeln!(out, "- OS: {}; {}; {}", machine.kernel, machine.rustc, machine.redis);
    let crates: Vec<String> =
        machine.crates.iter().filter(|(_, v)| !v.is_empty()).map(|(c, v)| format!("{c} {v}")).collect();
    let _ = writeln!(out, "- redlease {}; {}", machine.redlease, crates.join(", "));
    let _ = writeln!(out, "- date: {date}; mode: {}\n", if r.plan.mode == Mode::Full { "full" } else { "quick" });
    out.push_str(&method(r));
    let _ = writeln!(out, "{TARGETS_START}\n<!-- run of {date} -->\n{}{TARGETS_END}\n", targets_section(r));
    for &scenario in &r.scenarios {
        out.push_str(&scenario_section(r, scenario));
        let chart = match scenario {
            Scenario::Sequential => Some(CHARTS[0]),
            Scenario::Throughput => Some(CHARTS[1]),
            Scenario::Scaling => Some(CHARTS[2]),
            Scenario::Handoff => Some(CHARTS[3]),
            _ => None,
        };
        if let Some(file) = chart {
            let _ = write!(out, "\n![{}]({file})\n", scenario.name());
        }
        out.push('\n');
    }
    let notes = earlier
        .and_then(|e| between(e, NOTES_START, NOTES_END))
        .unwrap_or("(Hand-written notes go here; they are kept when the page is regenerated.)");
    let _ = writeln!(out, "## Notes\n\n{NOTES_START}\n{notes}\n{NOTES_END}\n");
    if let Some(prev) = earlier.and_then(|e| between(e, TARGETS_START, TARGETS_END)) {
        let prev = prev.replacen("## Targets", "### Targets", 1);
        let _ = writeln!(out, "## Previous run\n\nThe targets of the run this page replaced:\n\n{prev}");
    }
    out
}

fn method(r: &Results) -> String {
    let mut out = String::from("## Subjects and settings\n\n");
    let mut t = Table::new(["subject", "kind", "style", "what it is"]).left(4);
    for s in &r.subjects {
        let style = if s.style == Style::Async { "async" } else { "blocking" };
        t.row(vec![s.name.clone(), role_name(s.role).into(), style.into(), s.about.clone()]);
    }
    out.push_str(&t.render());
    out.push_str(
        "\nTimeouts and retries, each library as its API configures it:\n\n\
         - redlease (every adapter): defaults — node timeout 50 ms per round, early decision as soon as a \
         quorum has answered, 3 attempts with 20–200 ms of jitter, drift factor 0.01, token = 20 bytes of \
         `getrandom`. Contenders use `lock_with(..).wait(60 s)`.\n\
         - rslock 0.10: `LockManager::new` defaults — 3 attempts, 0–200 ms jitter; no per-node timeout of its \
         own: redis-rs's multiplexed connection answers a silent node after its default response timeout \
         (500 ms), which rslock's API does not expose. Contenders use `acquire` (retries until acquired).\n\
         - redlock 2.0: blocking redis-rs 0.23, a new TCP connection per command, nodes asked one after \
         another, 3 attempts with 0–200 ms sleeps, no timeout at all; its async entry point only wraps the \
         blocking call, so it runs on OS threads of its own (one per locker).\n\
         - floors: floor-tokio and floor-mio decide at the first N/2+1 replies like the adapters and skip \
         the late replies before the next round's; the -all floors and floor-pipelined read every reply (a \
         10 s safety bound, never reached in a healthy run); a failed attempt is released everywhere and \
         retried after 20–200 ms, like the adapters. floor-tokio-wake (the handoff floor): see \
         the subjects above and benches/README.md.\n\n",
    );
    out
}

/// Write `benchmarks.md` and the charts into `dir`, keeping the notes of the page there.
pub fn write_docs(r: &Results, machine: &Machine, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let md = dir.join("benchmarks.md");
    let earlier = std::fs::read_to_string(&md).ok();
    let mut written = Vec::new();
    for (file, svg) in charts(r) {
        let path = dir.join(file);
        std::fs::write(&path, svg)?;
        written.push(path);
    }
    std::fs::write(&md, page(r, machine, earlier.as_deref()))?;
    written.push(md);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_padded_markdown() {
        let mut t = Table::new(["subject", "p50"]);
        t.row(vec!["tokio-mt".into(), "412 µs".into()]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "| subject  |    p50 |");
        assert_eq!(lines[1], "|----------|-------:|");
        assert_eq!(lines[2], "| tokio-mt | 412 µs |");
    }

    #[test]
    fn checks() {
        let c = Check { value: Some(1.05), limit: 1.1, at_most: true, strict: false, percent: false };
        assert_eq!(c.met(), Some(true));
        assert_eq!(c.cell(), "1.05× ✓");
        let c = Check { value: Some(1.0), limit: 1.0, at_most: true, strict: true, percent: false };
        assert_eq!(c.met(), Some(false));
        let c = Check { value: Some(0.12), limit: 0.1, at_most: true, strict: false, percent: true };
        assert_eq!(c.cell(), "+12 % ✗");
        let c = Check { value: None, limit: 2.0, at_most: false, strict: false, percent: false };
        assert_eq!((c.met(), c.cell()), (None, "—".to_owned()));
    }

    #[test]
    fn markers_carry_notes_and_the_previous_targets() {
        let old = format!("x\n{NOTES_START}\nmy notes\n{NOTES_END}\n{TARGETS_START}\n## Targets\nold\n{TARGETS_END}\n");
        assert_eq!(between(&old, NOTES_START, NOTES_END), Some("my notes"));
        assert_eq!(between(&old, TARGETS_START, TARGETS_END), Some("## Targets\nold"));
        assert_eq!(between("nothing", NOTES_START, NOTES_END), None);
    }
}
