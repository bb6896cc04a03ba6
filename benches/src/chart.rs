//! The report's charts, as SVG: the cross-runtime comparison ([`runtimes`]: each subject's
//! sequential cycle against its floor's and rslock's, each one's lockers throughput against
//! the pipelined ceiling's) and the handoff waits ([`handoff`]).
//!
//! They are drawn from a report's markdown tables, those [`report`](crate::report) writes
//! (`target/bench/runtimes.md`) or a page quoting them (`docs/benchmarks.md`), so a chart
//! shows the figures of the text beside it; [`beside`] writes them next to that file.

use std::path::{Path, PathBuf};

/// Draw the charts of the tables in `page` (the text of `file`, a markdown report) into the
/// folder named like `file` without its extension (`docs/benchmarks.md`: `docs/benchmarks/`):
/// `runtimes.svg` if it has the sequential or the lockers table, `handoff.svg` if it has the
/// handoff table. Returns the files written.
pub fn beside(file: &Path, page: &str) -> Result<Vec<PathBuf>, String> {
    let dir = file.with_extension("");
    let mut written = Vec::new();
    for (name, svg) in [("runtimes.svg", runtimes(page)?), ("handoff.svg", handoff(page)?)] {
        let Some(svg) = svg else { continue };
        let path = dir.join(name);
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&path, svg))
            .map_err(|e| format!("{path:?}: {e}"))?;
        written.push(path);
    }
    Ok(written)
}

/// The cross-runtime comparison, if `page` has the sequential or the lockers table: the
/// cycle p50 of each subject paired with a floor, ÷ that floor's and ÷ rslock's; the
/// cycles/s of each subject at each locker count ÷ `floor-pipelined`'s.
pub fn runtimes(page: &str) -> Result<Option<String>, String> {
    let mut panels = Vec::new();
    if let Some(t) = Table::find(page, "Sequential lock+unlock") {
        let rows: Vec<_> = t
            .select(["subject", "paired with", "p50 ÷ partner", "p50 ÷ rslock"])
            .filter(|[name, partner, ..]| partner.starts_with("floor") && !name.starts_with("floor"))
            .collect();
        panels.push(Panel {
            title: "Sequential lock+unlock: cycle p50 ÷ the reference's (shorter is faster)".into(),
            x: "cycle p50 ÷ the reference's".into(),
            rows: rows.iter().map(|r| r[0].to_owned()).collect(),
            series: vec![
                Series::bars("÷ the floor of its I/O style (taking turns with it)", rows.iter().map(|r| r[2])),
                Series::bars("÷ rslock", rows.iter().map(|r| r[3])),
            ],
            rule: Some((1.0, "1× = as fast as the reference".into())),
        });
    }
    if let Some(t) = Table::find(page, "Concurrent lockers") {
        let cells: Vec<_> = t.select(["subject", "lockers", "÷ pipelined"]).collect();
        let names = unique(cells.iter().map(|r| r[0]).filter(|&name| name != "floor-pipelined"));
        let series: Vec<_> = (unique(cells.iter().map(|r| r[1])).into_iter())
            .map(|n| {
                let at = |name: &String| {
                    cells.iter().find(|r| (r[0], r[1]) == (name.as_str(), n.as_str())).map_or("—", |r| r[2])
                };
                Series::bars(&format!("{n} lockers"), names.iter().map(at))
            })
            .collect();
        panels.push(Panel {
            title: "Concurrent lockers: cycles/s ÷ the pipelined ceiling's (longer is faster)".into(),
            x: "cycles/s ÷ floor-pipelined's at the same locker count".into(),
            rows: names,
            series,
            rule: Some((1.0, "1× = the pipelined ceiling".into())),
        });
    }
    draw(&panels, false)
}

/// The handoff waits, if `page` has the handoff table: a panel per contender count K, each
/// subject's wait p50 and longest wait in ms, and the longest wait of a fair queue
/// (K / L × hold) as a mark.
pub fn handoff(page: &str) -> Result<Option<String>, String> {
    let Some(t) = Table::find(page, "Handoff") else { return Ok(None) };
    let cells: Vec<_> = t.select(["subject", "K", "wait p50", "longest wait", "÷ K/L × hold"]).collect();
    let panels = unique(cells.iter().map(|r| r[1])).into_iter().map(|k| {
        let rows: Vec<_> = cells.iter().filter(|r| r[1] == k).collect();
        let fair = rows.iter().map(|r| Some((figure(r[3])? / figure(r[4])? * 1e3, String::new())));
        Panel {
            title: format!("Handoff, K = {k} clients on one key: how long a lock call waits"),
            x: "wait (ms, log scale)".into(),
            rows: rows.iter().map(|r| r[0].to_owned()).collect(),
            series: vec![
                Series::bars("wait p50", rows.iter().map(|r| r[2])).scaled(1e3),
                Series::bars("longest wait", rows.iter().map(|r| r[3])).scaled(1e3),
                Series { name: "K/L × hold: a fair queue's longest wait".into(), mark: true, values: fair.collect() },
            ],
            rule: None,
        }
    });
    draw(&panels.collect::<Vec<_>>(), true)
}

/// A cell's figure in its base unit (seconds, a ratio, a count): `248 µs`, `1.86 ms`,
/// `1.65 s`, `1.10×`, `1.04 ×`, `24.7 k`, `778`; `None` for `—` or text.
pub fn figure(cell: &str) -> Option<f64> {
    let cell = cell.trim().trim_end_matches('×').trim_end();
    let (number, scale) = match cell.rsplit_once(' ') {
        Some((n, "µs")) => (n, 1e-6),
        Some((n, "ms")) => (n, 1e-3),
        Some((n, "s")) => (n, 1.0),
        Some((n, "k")) => (n, 1e3),
        _ => (cell, 1.0),
    };
    number.replace(',', "").parse::<f64>().ok().filter(|v| v.is_finite()).map(|v| v * scale)
}

/// The first markdown table under a heading: its columns' names and its rows, cells trimmed.
struct Table<'a> {
    head: Vec<&'a str>,
    rows: Vec<Vec<&'a str>>,
}

impl<'a> Table<'a> {
    /// The table under the heading (any level) reading `title`, if there is one.
    fn find(page: &'a str, title: &str) -> Option<Table<'a>> {
        let heading = |l: &str| l.starts_with('#') && l.trim_start_matches('#').trim() == title;
        let lines = page.lines().skip_while(|l| !heading(l)).skip(1);
        let mut rows = lines
            .skip_while(|l| !l.starts_with('|') && !l.starts_with('#'))
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim().trim_matches('|').split('|').map(str::trim).collect::<Vec<_>>());
        let head = rows.next()?;
        Some(Table { head, rows: rows.skip(1).collect() })
    }

    /// The cells of the columns named `columns` (the first of each name), row by row; `—` for
    /// a missing column or cell.
    fn select<const N: usize>(&self, columns: [&str; N]) -> impl Iterator<Item = [&'a str; N]> + '_ {
        let at = columns.map(|c| self.head.iter().position(|h| *h == c));
        self.rows.iter().map(move |row| at.map(|i| i.and_then(|i| row.get(i).copied()).unwrap_or("—")))
    }
}

/// The distinct values of `items`, in the order they first come.
fn unique<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    items.for_each(|i| {
        if !seen.iter().any(|s| s == i) {
            seen.push(i.to_owned())
        }
    });
    seen
}

/// One chart of horizontal bars: a row per subject (top to bottom), a bar per series in each
/// row, and a vertical rule at a reference value.
struct Panel {
    title: String,
    x: String,
    rows: Vec<String>,
    series: Vec<Series>,
    rule: Option<(f64, String)>,
}

/// A series' value in each row, with the cell it was read from (written at the bar's end); a
/// mark is a short vertical line across the row rather than a bar.
struct Series {
    name: String,
    mark: bool,
    values: Vec<Option<(f64, String)>>,
}

impl Series {
    /// Bars of the figures of `cells`, labelled with the cells.
    fn bars<'a>(name: &str, cells: impl Iterator<Item = &'a str>) -> Series {
        let values = cells.map(|c| Some((figure(c)?, c.to_owned()))).collect();
        Series { name: name.to_owned(), mark: false, values }
    }

    /// The series with its values multiplied `by` (seconds `by` 1e3: ms).
    fn scaled(mut self, by: f64) -> Series {
        self.values.iter_mut().flatten().for_each(|(v, _)| *v *= by);
        self
    }
}

const COLORS: [&str; 3] = ["#1f77b4", "#ff7f0e", "#2ca02c"];
/// In pixels: the chart's width, the rows' names' column, the room right of the axis for the
/// figures past its end, a bar's height, a legend entry's, and what a panel adds to its rows
/// and its legend (title, axis, margins).
const WIDTH: f64 = 900.0;
const NAMES: f64 = 150.0;
const RIGHT: f64 = 90.0;
const BAR: f64 = 14.0;
const ENTRY: f64 = 18.0;
const FRAME: f64 = 90.0;

/// The panels, one under the other, on one x axis (from 0, or logarithmic from the decade
/// under the smallest value); `None` if there is none. A linear axis ends at 3 × the median
/// value: a bar past it stops at the edge, its figure written beyond.
fn draw(panels: &[Panel], log: bool) -> Result<Option<String>, String> {
    if panels.iter().all(|p| p.rows.is_empty()) {
        return Ok(None);
    }
    let mut values: Vec<f64> =
        panels.iter().flat_map(|p| &p.series).flat_map(|s| &s.values).flatten().map(|v| v.0).collect();
    values.retain(|v| *v > 0.0);
    values.sort_by(f64::total_cmp);
    let (min, max) = (values.first().copied().unwrap_or(1.0), values.last().copied().unwrap_or(1.0));
    let axis = if log {
        let lo = min.log10().floor() as i32;
        Axis::Log(lo, (max.log10().ceil() as i32).max(lo + 1))
    } else {
        let median = values.get(values.len() / 2).copied().unwrap_or(1.0);
        let rule = panels.iter().filter_map(|p| p.rule.as_ref()).map(|r| r.0).fold(0.0, f64::max);
        Axis::Linear(max.min(3.0 * median).max(rule) * 1.1)
    };
    let mut body = Svg::default();
    let height = panels.iter().fold(0.0, |top, p| p.draw(&mut body, top, &axis));
    let head = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" font-family=\"sans-serif\">"
    );
    Ok(Some(format!("{head}\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{}</svg>\n", body.0)))
}

/// The x axis: linear from 0 to the value given, or logarithmic over the decades given
/// (as powers of ten).
enum Axis {
    Linear(f64),
    Log(i32, i32),
}

impl Axis {
    /// Where `v` falls, from 0 (the axis's start) to 1 (its end), clamped.
    fn at(&self, v: f64) -> f64 {
        let f = match *self {
            Axis::Linear(hi) => v / hi,
            Axis::Log(lo, hi) => (v.max(f64::MIN_POSITIVE).log10() - f64::from(lo)) / f64::from(hi - lo),
        };
        f.clamp(0.0, 1.0)
    }

    /// The ticks: each value and its label (a ratio, or ms and s on the log axis).
    fn ticks(&self) -> Vec<(f64, String)> {
        match *self {
            Axis::Linear(hi) => {
                let step =
                    [0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0].into_iter().find(|s| hi / s <= 8.0).unwrap_or(20.0);
                (0..).map(|i| f64::from(i) * step).take_while(|v| *v <= hi).map(|v| (v, format!("{v:.1}×"))).collect()
            }
            Axis::Log(lo, hi) => (lo..=hi)
                .map(|e| 10f64.powi(e))
                .map(|v| (v, if v >= 1e3 { format!("{} s", v / 1e3) } else { format!("{v} ms") }))
                .collect(),
        }
    }
}

impl Panel {
    /// The series drawn as bars.
    fn bars(&self) -> usize {
        self.series.iter().filter(|s| !s.mark).count().max(1)
    }

    /// Write the panel into `out` from `top` (px) down, on `axis`: the title, the legend, the
    /// ticks, each row's name, bars and marks (each bar's figure at its end), the rule, the
    /// axis and its name. Returns where the next panel starts.
    fn draw(&self, out: &mut Svg, top: f64, axis: &Axis) -> f64 {
        let x = |v: f64| NAMES + axis.at(v) * (WIDTH - NAMES - RIGHT);
        let row = self.bars() as f64 * BAR + 10.0;
        out.text(WIDTH / 2.0, top + 22.0, 17, "middle", &self.title);
        let mut y = top + 40.0;
        for (s, color) in self.series.iter().zip(COLORS.iter().cycle()) {
            match s.mark {
                true => out.line((NAMES + 5.0, y - 7.0), (NAMES + 5.0, y + 7.0), "black", 2),
                false => out.rect(NAMES, y - 5.0, 10.0, 10.0, color),
            }
            out.text(NAMES + 16.0, y + 4.0, 12, "start", &s.name);
            y += ENTRY;
        }
        if let Some((_, name)) = &self.rule {
            out.line((NAMES, y), (NAMES + 12.0, y), "#666", 1);
            out.text(NAMES + 16.0, y + 4.0, 12, "start", name);
            y += ENTRY;
        }
        let rows = y + 6.0;
        let bottom = rows + self.rows.len() as f64 * row;
        for (v, label) in axis.ticks() {
            out.line((x(v), rows), (x(v), bottom + 4.0), "#ddd", 1);
            out.text(x(v), bottom + 18.0, 13, "middle", &label);
        }
        for (i, name) in self.rows.iter().enumerate() {
            out.text(NAMES - 6.0, rows + (i as f64 + 0.5) * row, 13, "end", name);
        }
        let mut bar = 0.0;
        for (s, color) in self.series.iter().zip(COLORS.iter().cycle()) {
            for (i, value) in s.values.iter().enumerate() {
                let (Some((v, label)), r) = (value, rows + i as f64 * row) else { continue };
                if s.mark {
                    out.line((x(*v), r), (x(*v), r + row - 10.0), "black", 2);
                } else {
                    let b = r + bar * BAR;
                    out.rect(NAMES, b, x(*v) - NAMES, BAR - 1.0, color);
                    out.text(x(*v) + 3.0, b + BAR - 3.0, 11, "start", label);
                }
            }
            bar += f64::from(u8::from(!s.mark));
        }
        if let Some((at, _)) = &self.rule {
            out.line((x(*at), rows), (x(*at), bottom), "#666", 1);
        }
        out.line((NAMES, bottom), (WIDTH - RIGHT, bottom), "black", 1);
        out.text((NAMES + WIDTH - RIGHT) / 2.0, bottom + 38.0, 13, "middle", &self.x);
        bottom + FRAME - 40.0
    }
}

/// An SVG document's body, written element by element.
#[derive(Default)]
struct Svg(String);

impl Svg {
    /// Text at (`x`, `y`), anchored `anchor` (`start`, `middle`, `end`).
    fn text(&mut self, x: f64, y: f64, size: u8, anchor: &str, text: &str) {
        let text = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        self.0 += &format!("<text x=\"{x}\" y=\"{y}\" font-size=\"{size}\" text-anchor=\"{anchor}\">{text}</text>\n");
    }

    /// A line from `a` to `b`.
    fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, width: u8) {
        self.0 += &format!(
            "<line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"{stroke}\" stroke-width=\"{width}\"/>\n"
        );
    }

    /// A filled rectangle.
    fn rect(&mut self, x: f64, y: f64, width: f64, height: f64, fill: &str) {
        self.0 += &format!("<rect x=\"{x}\" y=\"{y}\" width=\"{width}\" height=\"{height}\" fill=\"{fill}\"/>\n");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::plan::Plan;
    use crate::report::{self, Pair, Point};
    use crate::stats::Hist;
    use crate::subject::{Handoff, Load, Seq};

    /// Samples of `us` microseconds each.
    fn hist(us: &[u64]) -> Hist {
        let mut h = Hist::default();
        us.iter().for_each(|&us| h.record(Duration::from_micros(us)));
        h
    }

    /// The report's sequential, lockers and handoff tables of a few fixed figures.
    fn page() -> String {
        let plan = Plan::new(false);
        let seq = |us| Seq { cycle: hist(&[us]), ..Seq::default() };
        let pairs: Vec<Pair> = vec![
            ("tokio-mt", "floor-async", Ok((seq(250), seq(225)))),
            ("floor-async", "floor-async", Ok((seq(225), seq(225)))),
            ("rslock", "floor-async", Ok((seq(375), seq(250)))),
        ];
        let load = |cycles| Load { cycles, elapsed: Duration::from_secs(1), latency: hist(&[600]), ..Load::default() };
        let points: Vec<Point<Load>> = vec![
            ("tokio-mt", 16, Ok(load(24_000))),
            ("floor-pipelined", 16, Ok(load(23_000))),
            ("rslock", 16, Ok(load(9_000))),
            ("tokio-mt", 256, Ok(load(28_000))),
            ("floor-pipelined", 256, Ok(load(36_000))),
            ("rslock", 256, Err("no cycle completed".into())),
        ];
        let wait = |us: &[u64]| Handoff {
            wait: hist(us),
            handoff: hist(&[1_500]),
            grants: 100,
            holders: 1,
            ..Handoff::default()
        };
        let waits: Vec<Point<Handoff>> = vec![
            ("tokio-mt", 2, Ok(Handoff { elapsed: Duration::from_secs(1), ..wait(&[3_000, 8_000, 12_000]) })),
            ("rslock", 2, Ok(Handoff { elapsed: Duration::from_secs(1), ..wait(&[300, 400, 1_600_000]) })),
        ];
        [report::sequential(&plan, &pairs), report::lockers(&plan, &points), report::handoff(&plan, &waits)].join("\n")
    }

    #[test]
    fn figures_as_the_report_prints_them() {
        let cases = [("248 µs", 248e-6), ("1.86 ms", 1.86e-3), ("1.65 s", 1.65), ("1.10×", 1.10), ("1.04 ×", 1.04)];
        let more = [("24.7 k", 24_700.0), ("778", 778.0), ("6,271", 6_271.0)];
        for (cell, value) in cases.into_iter().chain(more) {
            assert!(figure(cell).is_some_and(|f| (f - value).abs() < value * 1e-9), "{cell}: {:?}", figure(cell));
        }
        assert_eq!([figure("—"), figure("tokio-mt"), figure("")], [None; 3]);
    }

    #[test]
    fn charts_of_the_report_tables() {
        let file = std::env::temp_dir().join(format!("redlease-charts-{}.md", std::process::id()));
        let written = beside(&file, &page()).unwrap();
        let names: Vec<_> = written.iter().filter_map(|f| f.file_name()?.to_str()).collect();
        assert_eq!(names, ["runtimes.svg", "handoff.svg"]);
        let read = |i: usize| std::fs::read_to_string(&written[i]).unwrap();
        let (runtimes, handoff) = (read(0), read(1));
        let _ = std::fs::remove_dir_all(file.with_extension(""));
        for svg in [&runtimes, &handoff] {
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
            assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        }
        // The subjects paired with a floor and the series, each bar labelled with its cell.
        let wanted: [(&str, &str, &[&str]); 4] = [
            ("runtimes", &runtimes, &["tokio-mt", "rslock", "÷ the floor of its I/O style (taking turns with it)"]),
            ("runtimes", &runtimes, &["÷ rslock", "1.11×", "1.50×"]),
            ("runtimes", &runtimes, &["16 lockers", "256 lockers", "1.04×", "0.78×", "0.39×"]),
            ("handoff", &handoff, &["K = 2", "tokio-mt", "rslock", "wait p50", "longest wait", "1.60 s"]),
        ];
        for (name, svg, texts) in wanted {
            let missing: Vec<_> = texts.iter().filter(|t| !svg.contains(*t)).collect();
            assert!(missing.is_empty(), "{name}.svg lacks {missing:?}");
        }
        assert!(
            !runtimes.contains(">floor-async<") && !runtimes.contains(">floor-pipelined<"),
            "floors are the 1× rule"
        );
    }

    #[test]
    fn no_table_no_chart() {
        let file = std::env::temp_dir().join(format!("redlease-no-charts-{}.md", std::process::id()));
        assert!(beside(&file, "# a page\n\n| a | b |\n|---|---|\n| 1 | 2 |\n").unwrap().is_empty());
        assert!(!file.with_extension("").exists());
    }
}
