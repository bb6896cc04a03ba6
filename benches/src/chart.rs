//! The report's charts, as SVG: the cross-runtime comparison ([`runtimes`]: each subject's
//! sequential cycle against its floor's and rslock's, each one's lockers throughput against
//! the pipelined ceiling's) and the handoff waits ([`handoff`]).
//!
//! They are drawn from a report's markdown tables, those [`report`](crate::report) writes
//! (`target/bench/runtimes.md`) or a page quoting them (`docs/benchmarks.md`), so a chart
//! shows the figures of the text beside it; [`beside`] writes them next to that file.

use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, DefaultFormatting, KeyPointHint, Ranged, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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

    /// The values there are, each with the top of its row on the rows' axis of `n` rows.
    fn tops(&self, n: f64) -> impl Iterator<Item = (f64, &(f64, String))> + '_ {
        self.values.iter().enumerate().filter_map(move |(i, v)| Some((n - i as f64 - 0.1, v.as_ref()?)))
    }
}

const COLORS: [RGBColor; 3] = [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44)];
const WIDTH: u32 = 900;
/// In pixels: a bar's height, a legend entry's, and what a panel adds to its rows and its
/// legend (title, axis, margins).
const BAR: u32 = 14;
const ENTRY: u32 = 18;
const FRAME: u32 = 110;

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
    let heights: Vec<u32> = panels.iter().map(|p| FRAME + p.rows.len() as u32 * p.row() + p.legend()).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, heights.iter().sum())).into_drawing_area();
        root.fill(&WHITE).map_err(fail)?;
        let breaks: Vec<u32> = heights.iter().scan(0, |y, h| Some(std::mem::replace(y, *y + h))).skip(1).collect();
        for (area, p) in root.split_by_breakpoints([0u32; 0], breaks).iter().zip(panels) {
            if log {
                let (lo, hi) = (min.log10().floor() as i32, max.log10().ceil().max(min.log10().floor() + 1.0) as i32);
                let decades = (lo..=hi).map(|e| 10f64.powi(e)).collect();
                let x = (10f64.powi(lo)..10f64.powi(hi)).log_scale().with_key_points(decades);
                panel(area, p, x, &|v| if *v >= 1e3 { format!("{} s", v / 1e3) } else { format!("{v} ms") })?;
            } else {
                let median = values.get(values.len() / 2).copied().unwrap_or(1.0);
                let hi = max.min(3.0 * median).max(p.rule.as_ref().map_or(0.0, |r| r.0)) * 1.1;
                panel(area, p, 0.0..hi, &|v| format!("{v:.1}×"))?;
            }
        }
        root.present().map_err(fail)?;
    }
    Ok(Some(svg))
}

impl Panel {
    /// The series drawn as bars.
    fn bars(&self) -> usize {
        self.series.iter().filter(|s| !s.mark).count().max(1)
    }

    /// A row's height, in pixels.
    fn row(&self) -> u32 {
        self.bars() as u32 * BAR + 10
    }

    /// The legend's height, in pixels: it sits above the first row.
    fn legend(&self) -> u32 {
        (self.series.len() + usize::from(self.rule.is_some())) as u32 * ENTRY + 12
    }
}

/// `p` in `area`, on the x axis `x`, its ticks labelled by `tick`: the bars, then the marks
/// and the rule, then each bar's figure.
fn panel<X>(area: &DrawingArea<SVGBackend, Shift>, p: &Panel, x: X, tick: &dyn Fn(&f64) -> String) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let n = p.rows.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 17))
        .margin(10)
        .margin_right(80)
        .x_label_area_size(42)
        .y_label_area_size(140)
        .build_cartesian_2d(x, Rows { rows: p.rows.len(), above: f64::from(p.legend()) / f64::from(p.row()) })
        .map_err(fail)?;
    let Range { start: lo, end: hi } = chart.x_range();
    let row = |y: &f64| p.rows.get((n - y - 0.5).round().max(0.0) as usize).cloned().unwrap_or_default();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_max_light_lines(1)
        .x_desc(&p.x)
        .x_label_formatter(tick)
        .y_label_formatter(&row)
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(fail)?;
    // Each row's top, each bar series' offset in it, each series' color.
    let h = 0.8 / p.bars() as f64;
    let series: Vec<_> = (p.series.iter().zip(COLORS.iter().cycle()))
        .scan(0, |next, (s, &color)| Some((s, color, std::mem::replace(next, *next + usize::from(!s.mark)))))
        .collect();
    for &(s, color, k) in series.iter().filter(|s| !s.0.mark) {
        let top = |t: f64| t - k as f64 * h;
        let bars = s.tops(n).map(|(t, (v, _))| Rectangle::new([(lo, top(t)), (v.min(hi), top(t) - h)], color.filled()));
        let anno = chart.draw_series(bars).map_err(fail)?.label(&s.name);
        anno.legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    for &(s, ..) in series.iter().filter(|s| s.0.mark) {
        let mark =
            |(t, (v, _)): (f64, &(f64, String))| PathElement::new(vec![(*v, t), (*v, t - 0.8)], BLACK.stroke_width(2));
        let anno = chart.draw_series(s.tops(n).map(mark)).map_err(fail)?.label(&s.name);
        anno.legend(|(x, y)| PathElement::new(vec![(x + 5, y - 7), (x + 5, y + 7)], BLACK.stroke_width(2)));
    }
    if let Some((at, name)) = &p.rule {
        let style = BLACK.mix(0.6).stroke_width(1);
        let anno = chart.draw_series([PathElement::new(vec![(*at, 0.0), (*at, n)], style)]).map_err(fail)?;
        anno.label(name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], style));
    }
    let style = TextStyle::from(("sans-serif", 11)).pos(Pos::new(HPos::Left, VPos::Center));
    for &(s, _, k) in series.iter().filter(|s| !s.0.mark) {
        let text = |(t, (v, label)): (f64, &(f64, String))| {
            EmptyElement::at((v.min(hi), t - (k as f64 + 0.5) * h)) + Text::new(label.clone(), (3, 0), style.clone())
        };
        chart.draw_series(s.tops(n).map(text)).map_err(fail)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(fail)
}

/// The rows' axis, upwards: row `i` (from the top) of `rows` spans `rows - i - 1` to
/// `rows - i`, its name written at its centre; the legend sits in the space `above` them
/// (in rows).
struct Rows {
    rows: usize,
    above: f64,
}

impl Ranged for Rows {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, (from, to): (i32, i32)) -> i32 {
        from + (f64::from(to - from) * value / (self.rows as f64 + self.above)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, _: H) -> Vec<f64> {
        (0..self.rows).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> Range<f64> {
        0.0..self.rows as f64 + self.above
    }
}

/// A drawing error as the harness's one-line reason.
fn fail(e: impl std::fmt::Display) -> String {
    format!("chart: {e}")
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
