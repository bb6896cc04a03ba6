//! Hand-written SVG line charts (no plotting dependency): axes with linear or logarithmic
//! scales, one polyline with markers per series, and a legend.

use std::fmt::Write as _;

/// Colours of the series, in order (then again from the start).
const PALETTE: [&str; 12] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
    "#393b79", "#637939",
];

const WIDTH: f64 = 920.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// One axis.
#[derive(Clone, Debug)]
pub struct Axis {
    /// The axis title.
    pub label: String,
    /// Logarithmic (base 10) rather than linear.
    pub log: bool,
    /// Ticks as `(value, label)`; `None`: chosen automatically and labelled with `format`.
    pub ticks: Option<Vec<(f64, String)>>,
    /// Labels of automatic ticks.
    pub format: fn(f64) -> String,
}

impl Axis {
    /// An axis with automatic ticks.
    pub fn new(label: impl Into<String>, log: bool, format: fn(f64) -> String) -> Self {
        Axis { label: label.into(), log, ticks: None, format }
    }

    /// The same axis with these ticks.
    pub fn with_ticks(mut self, ticks: Vec<(f64, String)>) -> Self {
        self.ticks = Some(ticks);
        self
    }

    fn map(&self, v: f64) -> f64 {
        if self.log { v.max(f64::MIN_POSITIVE).log10() } else { v }
    }
}

/// One line of the chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, y)` points in data units; points that a log axis cannot show are skipped.
    pub points: Vec<(f64, f64)>,
    /// Draw a dot at every point.
    pub markers: bool,
    /// An SVG `stroke-dasharray` (e.g. `"6 3"`), or `None` for a solid line.
    pub dash: Option<&'static str>,
}

/// A line chart as a complete SVG document.
pub fn line_chart(title: &str, x: &Axis, y: &Axis, series: &[Series]) -> String {
    let usable = |a: &Axis, v: f64| v.is_finite() && (!a.log || v > 0.0);
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|&(px, py)| usable(x, px) && usable(y, py))
        .collect();
    let range = |a: &Axis, vals: &mut dyn Iterator<Item = f64>| -> (f64, f64) {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in vals {
            let m = a.map(v);
            lo = lo.min(m);
            hi = hi.max(m);
        }
        if let Some(t) = &a.ticks {
            for &(v, _) in t {
                lo = lo.min(a.map(v));
                hi = hi.max(a.map(v));
            }
        }
        if !lo.is_finite() {
            return (0.0, 1.0);
        }
        if a.log {
            (lo.floor(), if hi.ceil() > lo.floor() { hi.ceil() } else { lo.floor() + 1.0 })
        } else {
            let (lo, hi) = (lo.min(0.0), if hi > lo { hi } else { lo + 1.0 });
            let step = nice_step((hi - lo) / 6.0);
            ((lo / step).floor() * step, (hi / step).ceil() * step)
        }
    };
    let (x0, x1) = range(x, &mut pts.iter().map(|p| p.0));
    let (y0, y1) = range(y, &mut pts.iter().map(|p| p.1));
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let sx = |v: f64| LEFT + (x.map(v) - x0) / (x1 - x0) * pw;
    let sy = |v: f64| TOP + ph - (y.map(v) - y0) / (y1 - y0) * ph;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(svg, r#"<text x="{}" y="28" font-size="16" font-weight="bold">{}</text>"#, LEFT, esc(title));
    // Grid and tick labels.
    for (v, label) in ticks(x, x0, x1) {
        let px = sx(v);
        let _ =
            writeln!(svg, r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#e0e0e0"/>"##, TOP + ph);
        let _ = writeln!(
            svg,
            r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            TOP + ph + 18.0,
            esc(&label)
        );
    }
    for (v, label) in ticks(y, y0, y1) {
        let py = sy(v);
        let _ =
            writeln!(svg, r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e0e0e0"/>"##, LEFT + pw);
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            py + 4.0,
            esc(&label)
        );
    }
    let _ = writeln!(svg, r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##);
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        HEIGHT - 15.0,
        esc(&x.label)
    );
    let _ = writeln!(
        svg,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + ph / 2.0,
        esc(&y.label)
    );
    // Series and legend.
    for (k, s) in series.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let dash = s.dash.map(|d| format!(r#" stroke-dasharray="{d}""#)).unwrap_or_default();
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|&(px, py)| usable(x, px) && usable(y, py))
            .map(|(px, py)| (sx(px), sy(py)))
            .collect();
        if points.len() > 1 {
            let path: Vec<String> = points.iter().map(|(px, py)| format!("{px:.1},{py:.1}")).collect();
            let _ = writeln!(
                svg,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
                path.join(" ")
            );
        }
        if s.markers || points.len() == 1 {
            for (px, py) in &points {
                let _ = writeln!(svg, r#"<circle cx="{px:.1}" cy="{py:.1}" r="3.5" fill="{color}"/>"#);
            }
        }
        let ly = TOP + 10.0 + k as f64 * 20.0;
        let lx = LEFT + pw + 16.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"{dash}/>"#,
            lx + 22.0
        );
        let _ = writeln!(svg, r#"<text x="{}" y="{}">{}</text>"#, lx + 28.0, ly + 4.0, esc(&s.name));
    }
    svg.push_str("</svg>\n");
    svg
}

/// Ticks between the mapped bounds `lo..=hi` of `axis`, in data units.
fn ticks(axis: &Axis, lo: f64, hi: f64) -> Vec<(f64, String)> {
    if let Some(t) = &axis.ticks {
        return t.clone();
    }
    let mut out = Vec::new();
    if axis.log {
        let decades = (hi - lo).round() as i32;
        let steps: &[f64] = if decades <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
        for e in lo as i32..=hi as i32 {
            for &m in steps {
                let v = m * 10f64.powi(e);
                if v.log10() <= hi + 1e-9 && v.log10() >= lo - 1e-9 {
                    out.push((v, (axis.format)(v)));
                }
            }
        }
    } else {
        let step = nice_step((hi - lo) / 6.0);
        let mut v = lo;
        while v <= hi + step * 1e-6 {
            out.push((v, (axis.format)(v)));
            v += step;
        }
    }
    out
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|&s| s >= raw).unwrap_or(10.0 * p)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A tick label for microseconds: `200 µs`, `2 ms`, `1.5 ms`, `1 s`.
pub fn fmt_us(v: f64) -> String {
    if v >= 1e6 {
        format!("{} s", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{} ms", trim(v / 1e3))
    } else {
        format!("{} µs", trim(v))
    }
}

/// A tick label for a count or a rate: `500`, `2 k`, `20 k`.
pub fn fmt_count(v: f64) -> String {
    if v >= 1e3 { format!("{} k", trim(v / 1e3)) } else { trim(v) }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_a_line_per_series_and_a_legend() {
        let x = Axis::new("lockers", true, fmt_count);
        let y = Axis::new("cycles/s", true, fmt_count);
        let series = vec![
            Series {
                name: "a<b".into(),
                points: vec![(1.0, 2_000.0), (16.0, 20_000.0), (256.0, 25_000.0)],
                markers: true,
                dash: Some("6 3"),
            },
            Series {
                name: "zero is skipped on a log axis".into(),
                points: vec![(1.0, 0.0), (16.0, 900.0)],
                markers: false,
                dash: None,
            },
        ];
        let svg = line_chart("Throughput", &x, &y, &series);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("a&lt;b"));
        assert!(svg.contains(r#"stroke-dasharray="6 3""#));
        assert!(svg.contains(">10 k<"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn tick_labels_and_steps() {
        assert_eq!(fmt_us(250.0), "250 µs");
        assert_eq!(fmt_us(1500.0), "1.5 ms");
        assert_eq!(fmt_count(16.0), "16");
        assert_eq!(fmt_count(25_000.0), "25 k");
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(33.0), 50.0);
    }
}
