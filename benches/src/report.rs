//! The markdown tables, one per scenario, each with a paragraph saying how it was measured.

use std::time::Duration;

use crate::plan::{NODES, Plan};
use crate::stats::{dur, rate, ratio, secs, times};
use crate::subject::{Handoff, Load, Seq};

/// A pair's names and pooled figures: the subject's and its partner's.
pub type Pair = (&'static str, &'static str, Result<(Seq, Seq), String>);
/// A subject's name, its locker or contender count, and its figures.
pub type Point<T> = (&'static str, usize, Result<T, String>);

/// The page's title and what every table shares.
pub fn header(full: bool) -> String {
    let mode = if full { "full" } else { "quick smoke-test" };
    format!(
        "# redlease runtimes benchmark ({mode} run)\n\n{NODES} nodes unless a table says otherwise, fresh each time.\n"
    )
}

/// `a ÷ b` as `1.03×`.
fn over(a: Option<Duration>, b: Option<Duration>) -> String {
    times(ratio(secs(a), secs(b)))
}

/// A markdown table, its columns named in `head` (`|`-separated), the first `left` aligned
/// left and the others right; the failed measurements are listed under it.
fn table(title: &str, about: &str, head: &str, left: usize, rows: Vec<Result<Vec<String>, String>>) -> String {
    let (rows, failed): (Vec<_>, Vec<_>) = rows.into_iter().partition(Result::is_ok);
    let mut rows: Vec<Vec<String>> = rows.into_iter().flatten().collect();
    rows.insert(0, head.split('|').map(String::from).collect());
    let width: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().filter_map(|r| Some(r.get(i)?.chars().count())).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String]| {
        let cells = cells.iter().zip(&width).enumerate();
        let padded: Vec<_> =
            cells.map(|(i, (c, w))| if i < left { format!("{c:<w$}") } else { format!("{c:>w$}") }).collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let rule =
        width.iter().enumerate().map(|(i, w)| if i < left { "-".repeat(w + 2) } else { "-".repeat(w + 1) + ":" });
    let mut out = format!("## {title}\n\n{about}\n\n{}|{}|\n", line(&rows[0]), rule.collect::<Vec<_>>().join("|"));
    rows[1..].iter().for_each(|r| out.push_str(&line(r)));
    failed.into_iter().filter_map(Result::err).for_each(|e| out.push_str(&format!("\nFailed: {e}\n")));
    out
}

/// The sequential scenario.
pub fn sequential(plan: &Plan, pairs: &[Pair]) -> String {
    let rslock = pairs.iter().find(|p| p.0 == "rslock").and_then(|p| p.2.as_ref().ok()?.0.cycle.p50());
    let rows = pairs.iter().map(|(name, partner, r)| {
        let (s, f) = r.as_ref().map_err(|e| format!("{name}: {e}"))?;
        let ((c, sv), (fc, fsv), p50) = (s.usage.per(s.cycle.count()), f.usage.per(f.cycle.count()), s.cycle.p50());
        let mut row = vec![name.to_string(), partner.to_string()];
        row.extend(
            [p50, s.cycle.at(0.9), s.cycle.p99(), s.acquire.p50(), s.release.p50(), c, sv, f.cycle.p50()].map(dur),
        );
        row.extend([(p50, f.cycle.p50()), (c, fc), (sv, fsv), (p50, rslock)].map(|(a, b)| over(a, b)));
        Ok(row)
    });
    let q = plan.seq;
    let about = format!(
        "Each subject taking turns on the same nodes with the floor of its style (a semaphore: with the mutex of its \
         adapter): {} rounds of {} + {} cycles per side, turns of {}.",
        q.rounds, q.warmup, q.cycles, q.turn
    );
    let head = "subject|paired with|cycle p50|p90|p99|acquire p50|release p50|client CPU|server CPU|partner p50|\
                p50 ÷ partner|client CPU ÷ partner|server CPU ÷ partner|p50 ÷ rslock";
    table("Sequential lock+unlock", &about, head, 2, rows.collect())
}

/// The tls scenario, or (`sentinel`) the sentinel scenario: a client on one kind of URL
/// against itself on plain URLs of the same nodes.
pub fn versus(pairs: &[Pair], sentinel: bool) -> String {
    let rows = pairs.iter().map(|(name, _, r)| {
        let (a, b) = r.as_ref().map_err(|e| format!("{name}: {e}"))?;
        let ((c, sv), (bc, bsv)) = (a.usage.per(a.cycle.count()), b.usage.per(b.cycle.count()));
        let mut row = vec![name.to_string()];
        let pairs = [(a.cycle.p50(), b.cycle.p50()), (a.cycle.p99(), b.cycle.p99()), (c, bc), (sv, bsv)];
        row.extend(pairs.iter().flat_map(|&(a, b)| [dur(a), dur(b), over(a, b)]));
        Ok(row)
    });
    let (title, about, x, y) = match sentinel {
        false => {
            ("TLS against TCP", "The same client over TLS (rediss://, rustls with ring) and over TCP.", "TLS", "TCP")
        }
        true => (
            "Sentinel-managed against plain nodes",
            "The same client on Sentinel-managed nodes (redis+sentinel://; a replica each, 3 sentinels) and on \
             redis:// URLs of their primaries.",
            "Sentinel",
            "plain",
        ),
    };
    let about = format!("{about} Taking turns on the same nodes.");
    let head = format!(
        "subject|{x} p50|{y} p50|÷ {y}|{x} p99|{y} p99|÷ {y}|client CPU, {x}|{y}|÷ {y}|server CPU, {x}|{y}|÷ {y}"
    );
    table(title, &about, &head, 1, rows.collect())
}

/// The lockers scenario.
pub fn lockers(plan: &Plan, points: &[Point<Load>]) -> String {
    let rate_of = |who: &str, n: usize| points.iter().find(|p| (p.0, p.1) == (who, n))?.2.as_ref().ok().map(Load::rate);
    let rows = points.iter().map(|(name, n, r)| {
        let l = r.as_ref().map_err(|e| format!("{name}, {n} lockers: {e}"))?;
        let (c, sv) = l.usage.per(l.cycles);
        let mut row = vec![name.to_string(), n.to_string(), rate(l.rate())];
        row.extend([l.latency.p50(), l.latency.p99(), c, sv].map(dur));
        row.extend(["floor-pipelined", "rslock"].map(|who| times(ratio(Some(l.rate()), rate_of(who, *n)))));
        row.push(failed(l));
        Ok(row)
    });
    let about = format!("Each locker on a key of its own; one {} window per point.", dur(Some(plan.load.length)));
    let head = "subject|lockers|cycles/s|p50|p99|client CPU|server CPU|÷ pipelined|÷ rslock|failed";
    table("Concurrent lockers", &about, head, 1, rows.collect())
}

/// The failed cycles of a window, and the first failure.
fn failed(l: &Load) -> String {
    l.first_error.as_ref().map_or_else(|| l.errors.to_string(), |e| format!("{} ({e})", l.errors))
}

/// The cluster scenario: each point's masters (0: a standalone server), its figures and each
/// server's CPU time as a share of the window.
pub fn cluster(plan: &Plan, points: &[Point<Load>]) -> String {
    let alone = |who: &str| points.iter().find(|p| (p.0, p.1) == (who, 0))?.2.as_ref().ok().map(Load::rate);
    let rows = points.iter().map(|(name, m, r)| {
        let node = if *m == 0 { "standalone".to_owned() } else { format!("cluster of {m}") };
        let l = r.as_ref().map_err(|e| format!("{name}, {node}: {e}"))?;
        let ((c, sv), busy) = (l.usage.per(l.cycles), |cpu: Duration| cpu.div_duration_f64(l.elapsed) * 100.0);
        let mut row = vec![name.to_string(), node, rate(l.rate()), times(ratio(Some(l.rate()), alone(name)))];
        row.extend([l.latency.p50(), l.latency.p99(), c, sv].map(dur));
        row.push(format!("{:.0} %", busy(l.usage.client)));
        row.push(l.servers.iter().map(|&cpu| format!("{:.0}", busy(cpu))).collect::<Vec<_>>().join(" / ") + " %");
        row.push(failed(l));
        Ok(row)
    });
    let about = format!(
        "{} lockers, each on a key of its own (the keys spread evenly over the hash slots), on one node: a standalone \
         server, or a Redis Cluster of M masters without replicas; one {} window per point. The client's and each \
         server's CPU time in the window, as a share of one core.",
        plan.cluster,
        dur(Some(plan.load.length))
    );
    let head = "subject|node|cycles/s|÷ standalone|p50|p99|client CPU|server CPU|client busy|servers busy|failed";
    table("Lockers on a cluster node", &about, head, 2, rows.collect())
}

/// The stalled scenario.
pub fn stalled(points: &[Point<[Load; 2]>]) -> String {
    let rows = points.iter().map(|(name, _, r)| {
        let [up, down] = r.as_ref().map_err(|e| format!("{name}: {e}"))?;
        let mut row = vec![name.to_string()];
        row.extend([up.latency.p50(), up.latency.p99(), down.latency.p50(), down.latency.p99()].map(dur));
        let delta = ratio(secs(down.latency.p50()), secs(up.latency.p50()));
        row.push(delta.map_or_else(|| "—".into(), |d| format!("{:+.0} %", (d - 1.0) * 100.0)));
        row.push(format!("{} / {} ({} / {})", up.cycles, down.cycles, up.errors, down.errors));
        Ok(row)
    });
    let about = "Acquisitions of fresh keys (released without waiting), all nodes up, then one stopped (SIGSTOP). \
                 redlock sits this one out: it sets no timeout, so a stopped node blocks its calls.";
    let head = "subject|all up: p50|p99|1 stopped: p50|p99|Δ p50|acquisitions (failed): up / stopped";
    table("One node stopped", about, head, 1, rows.collect())
}

/// The handoff scenario.
pub fn handoff(plan: &Plan, points: &[Point<Handoff>]) -> String {
    let rows = points.iter().map(|(name, k, r)| {
        let h = r.as_ref().map_err(|e| format!("{name}, K = {k}: {e}"))?;
        let fair = plan.hold * u32::try_from(*k).unwrap_or(u32::MAX) / h.holders.max(1);
        let longest = h.wait.at(1.0);
        let mut row = vec![name.to_string(), k.to_string()];
        row.extend([h.handoff.p50(), h.handoff.p99(), h.wait.p50(), longest].map(dur));
        let per_s = h.grants as f64 / h.elapsed.as_secs_f64();
        // Grants/s against what L permits held for the measured mean hold allow.
        let ideal = f64::from(h.holders.max(1)) * h.grants.max(1) as f64 / h.held.as_secs_f64();
        let (least, most) = (h.per_contender.iter().min(), h.per_contender.iter().max());
        let spread = least.zip(most).map_or("—".to_owned(), |(a, b)| format!("{a}–{b}"));
        let retakes = format!("{:.0} %", 100.0 * h.retakes as f64 / h.grants.max(1) as f64);
        row.extend([over(longest, Some(fair)), rate(per_s), times(Some(per_s / ideal)), spread, retakes]);
        Ok(row)
    });
    let about = format!(
        "K clients on one key (a mutex, L = 1, or a semaphore of L permits), each holding it {}; handoff: a permit's \
         release call to its next grant; ÷ L / hold: grants/s over L ÷ the measured mean hold; per client: the \
         fewest and most grants of one client; re-takes: grants of a permit to the client that released it last.",
        dur(Some(plan.hold))
    );
    let head = "subject|K|handoff p50|p99|wait p50|longest wait|÷ K/L × hold|grants/s|÷ L / hold|per client|re-takes";
    table("Handoff", &about, head, 1, rows.collect())
}
