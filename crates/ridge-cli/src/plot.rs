//! `ridge bench --svg`: the run as a figure. A log-log roofline (FLOP/s over arithmetic
//! intensity) holds every op with FLOPs; ops that only move bytes (layout conversions) get a
//! bandwidth panel (GB/s over bytes moved) against the copy's measured curve. The legend and
//! the notes sit beside the plots, never over them; each op keeps one colour and marker in
//! every plot (`ridge_model::report::OP_COLOURS`); a run above its roof is drawn hollow and the
//! notes say why.

use std::path::Path;

use plotters::coord::Shift;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters_backend::{BackendCoord, DrawingErrorKind};
use ridge_kernels::sweep;
use ridge_model::Bound;
use ridge_model::report::{BenchReport, Row};
use ridge_model::roofline::Ceilings;

type Error = Box<dyn std::error::Error>;

const WIDTH: u32 = 1040;
/// Width of the legend and notes column right of each plot, px.
const SIDE: u32 = 300;
const ROOFLINE_HEIGHT: u32 = 600;
const BANDWIDTH_HEIGHT: u32 = 440;
const TITLE_HEIGHT: u32 = 36;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Circle,
    Triangle,
    Square,
}

/// How one op is drawn: the colour names the op (one each), the shape its storage type.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Style {
    color: RGBColor,
    shape: Shape,
}

impl Style {
    /// The colour names the op (`ridge_model::report::OP_COLOURS`, the dashboard's too); the
    /// shape its storage type (f32 circles, f16 triangles, any other squares).
    fn of(op: &str, dtype: &str) -> Style {
        let [r, g, b] = ridge_model::report::op_colour(op).unwrap_or([0x80, 0x80, 0x80]);
        Style {
            color: RGBColor(r, g, b),
            shape: match dtype {
                "f32" => Shape::Circle,
                "f16" => Shape::Triangle,
                _ => Shape::Square,
            },
        }
    }
}

/// One marker at a point of any coordinate system; hollow when `filled` is false.
struct Marker<C> {
    at: C,
    style: Style,
    filled: bool,
}

impl<'a, C: 'a> PointCollection<'a, C> for &'a Marker<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;
    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Marker<C> {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        mut pos: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = pos.next() else {
            return Ok(());
        };
        let style = ShapeStyle {
            color: self.style.color.to_rgba(),
            filled: self.filled,
            stroke_width: 2,
        };
        let r = 5;
        let outline = |backend: &mut DB, v: &[BackendCoord]| {
            if self.filled {
                backend.fill_polygon(v.iter().copied(), &style)
            } else {
                backend.draw_path(v.iter().chain(v.first()).copied(), &style)
            }
        };
        match self.style.shape {
            Shape::Circle => backend.draw_circle((x, y), r as u32, &style, self.filled),
            Shape::Square => backend.draw_rect((x - r, y - r), (x + r, y + r), &style, self.filled),
            Shape::Triangle => outline(
                backend,
                &[(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)],
            ),
        }
    }
}

/// A measured case with its place in a plot.
struct Point<'a> {
    row: &'a Row,
    x: f64,
    y: f64,
    /// Above the roof that its prediction used (`roofline_fraction` > 1).
    above: bool,
}

/// What the legend column lists: roofs (lines) and ops (markers), then notes.
enum Entry {
    Line(RGBColor, String),
    Op(Style, String),
    Hollow,
}

/// Writes the figure of `report` to `path`.
///
/// Errors: the file cannot be written, or no case of the run was timed (nothing to draw).
pub fn roofline_svg(report: &BenchReport, path: &Path) -> Result<(), Error> {
    let timed: Vec<&Row> = report
        .rows
        .iter()
        .filter(|r| r.measured_ms.is_some())
        .collect();
    let with_flops: Vec<&Row> = timed.iter().copied().filter(|r| r.flops > 0.0).collect();
    let bytes_only: Vec<&Row> = timed.iter().copied().filter(|r| r.flops <= 0.0).collect();
    if timed.is_empty() {
        return Err("no case of this run could be timed: there is nothing to plot".into());
    }
    let height = TITLE_HEIGHT
        + if with_flops.is_empty() {
            0
        } else {
            ROOFLINE_HEIGHT
        }
        + if bytes_only.is_empty() {
            0
        } else {
            BANDWIDTH_HEIGHT
        };
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, mut rest) = root.split_vertically(TITLE_HEIGHT);
    title.draw_text(
        &format!(
            "ridge bench on {} ({}), {}",
            report.adapter, report.backend, report.timing
        ),
        &("sans-serif", 19).into_font().color(&BLACK),
        (16, 10),
    )?;
    if !with_flops.is_empty() {
        let (top, bottom) = rest.split_vertically(ROOFLINE_HEIGHT);
        roofline_panel(&top, report, &with_flops)?;
        rest = bottom;
    }
    if !bytes_only.is_empty() {
        bandwidth_panel(&rest, report, &bytes_only)?;
    }
    root.present()?;
    Ok(())
}

/// Powers of ten around `lo..hi` (positive), with `pad` × room on each side.
fn decades(lo: f64, hi: f64, pad: f64) -> (f64, f64) {
    let lo = (lo / pad).max(1e-12);
    let hi = (hi * pad).max(lo * 10.0);
    (
        10f64.powf(lo.log10().floor()),
        10f64.powf(hi.log10().ceil()),
    )
}

fn points<'a>(rows: &[&'a Row], xy: impl Fn(&Row) -> Option<(f64, f64)>) -> Vec<Point<'a>> {
    rows.iter()
        .filter_map(|&row| {
            let (x, y) = xy(row)?;
            (x > 0.0 && y > 0.0 && x.is_finite() && y.is_finite()).then_some(Point {
                row,
                x,
                y,
                above: row.roofline_fraction.is_some_and(|f| f > 1.0),
            })
        })
        .collect()
}

/// The (op, storage type) pairs of `points` in [`sweep::OPS`] order, each once, with how many
/// runs it has.
fn ops(points: &[Point]) -> Vec<((String, String), usize)> {
    let mut ops: Vec<(String, String)> = points
        .iter()
        .map(|p| (p.row.op.clone(), p.row.dtype.clone()))
        .collect();
    ops.sort_by_key(|(op, dtype)| {
        (
            sweep::OPS
                .iter()
                .position(|o| o == op)
                .unwrap_or(usize::MAX),
            op.clone(),
            dtype.clone(),
        )
    });
    ops.dedup();
    ops.into_iter()
        .map(|key| {
            let n = points
                .iter()
                .filter(|p| p.row.op == key.0 && p.row.dtype == key.1)
                .count();
            (key, n)
        })
        .collect()
}

fn draw_points<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<DB, Cartesian2d<X, Y>>,
    points: &[Point],
) -> Result<(), Error>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
    DB::ErrorType: 'static,
{
    chart.draw_series(points.iter().map(|p| Marker {
        at: (p.x, p.y),
        style: Style::of(&p.row.op, &p.row.dtype),
        filled: !p.above,
    }))?;
    Ok(())
}

fn roof(c: &Ceilings, x0: f64, x1: f64) -> Vec<(f64, f64)> {
    let ridge = c.ridge_point().clamp(x0, x1);
    [x0, ridge, x1]
        .into_iter()
        .map(|x| (x, c.attainable(x) / 1e9))
        .collect()
}

fn roofline_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    report: &BenchReport,
    rows: &[&Row],
) -> Result<(), Error>
where
    DB::ErrorType: 'static,
{
    let points = points(rows, |r| Some((r.intensity(), r.gflops()?)));
    let f16 = rows.iter().any(|r| r.dtype == "f16");
    let m = &report.measured;
    let mut roofs = vec![(m.ceilings(false), "measured f32", RGBColor(20, 40, 140))];
    if f16 && m.f16_tflops.is_some() {
        roofs.push((m.ceilings(true), "measured f16", RGBColor(110, 30, 150)));
    }
    if let Some(c) = m.tensor_ceilings().filter(|_| f16) {
        roofs.push((c, "measured tensor-core", RGBColor(0, 120, 120)));
    }
    if let Some(spec) = &report.spec {
        roofs.push((
            spec.ceilings(ridge_model::Precision::F32),
            "spec f32",
            RGBColor(170, 20, 20),
        ));
        if f16 {
            roofs.push((
                spec.ceilings(ridge_model::Precision::F16),
                "spec f16",
                RGBColor(200, 110, 0),
            ));
        }
    }
    let ridges = roofs.iter().map(|(c, _, _)| c.ridge_point());
    let (x0, x1) = decades(
        points.iter().map(|p| p.x).fold(0.1, f64::min),
        points
            .iter()
            .map(|p| p.x)
            .chain(ridges)
            .fold(10.0, f64::max),
        3.0,
    );
    let peak = roofs
        .iter()
        .map(|(c, _, _)| c.peak_flops / 1e9)
        .fold(0.0, f64::max);
    let floor = roofs
        .iter()
        .map(|(c, _, _)| c.attainable(x0) / 1e9)
        .fold(f64::MAX, f64::min);
    let (y0, y1) = decades(
        points.iter().map(|p| p.y).fold(floor, f64::min),
        points.iter().map(|p| p.y).fold(peak, f64::max),
        1.5,
    );

    let (plot, side) = area.split_horizontally(WIDTH - SIDE);
    let mut chart = ChartBuilder::on(&plot)
        .caption(
            "Roofline: achieved GFLOP/s over arithmetic intensity",
            ("sans-serif", 17),
        )
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(74)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP/byte)")
        .y_desc("GFLOP/s")
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| short(*v))
        .draw()?;
    let mut legend = Vec::new();
    for (c, name, color) in &roofs {
        chart.draw_series(LineSeries::new(roof(c, x0, x1), color.stroke_width(2)))?;
        legend.push(Entry::Line(
            *color,
            format!("{name} roof · ridge {} FLOP/B", short(c.ridge_point())),
        ));
    }
    draw_points(&mut chart, &points)?;
    points_legend(report, &points, legend, &side)
}

fn bandwidth_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    report: &BenchReport,
    rows: &[&Row],
) -> Result<(), Error>
where
    DB::ErrorType: 'static,
{
    let points = points(rows, |r| Some((r.bytes, r.gbps()?)));
    // A copy of `bytes` reads them and writes them: it moves 2 × bytes.
    let curve: Vec<(f64, f64)> = report
        .measured
        .bandwidth_curve
        .iter()
        .map(|p| (2.0 * p.bytes as f64, p.gbps))
        .filter(|p| p.1 > 0.0 && p.1.is_finite())
        .collect();
    let spec = report.spec.as_ref().map(|s| s.bandwidth_gbps);
    let xs = points.iter().map(|p| p.x).chain(curve.iter().map(|p| p.0));
    let (x0, x1) = decades(
        xs.clone().fold(f64::MAX, f64::min),
        xs.fold(0.0, f64::max),
        2.0,
    );
    let ys = points
        .iter()
        .map(|p| p.y)
        .chain(curve.iter().map(|p| p.1))
        .chain(spec)
        .chain([report.measured.bandwidth_gbps]);
    let (y0, y1) = decades(
        ys.clone().fold(f64::MAX, f64::min),
        ys.fold(0.0, f64::max),
        1.5,
    );

    let (plot, side) = area.split_horizontally(WIDTH - SIDE);
    let mut chart = ChartBuilder::on(&plot)
        .caption(
            "Bandwidth of the ops without FLOPs (layout conversions)",
            ("sans-serif", 17),
        )
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(74)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("bytes moved by one launch")
        .y_desc("GB/s")
        .x_label_formatter(&|v| bytes(*v))
        .y_label_formatter(&|v| short(*v))
        .draw()?;
    let mut legend = Vec::new();
    let navy = RGBColor(20, 40, 140);
    chart.draw_series(LineSeries::new(curve.iter().copied(), navy.stroke_width(2)))?;
    chart.draw_series(curve.iter().map(|&p| Circle::new(p, 2, navy.filled())))?;
    legend.push(Entry::Line(navy, "measured copy, by size".into()));
    let flat = RGBColor(90, 110, 200);
    let level = report.measured.bandwidth_gbps;
    chart.draw_series(LineSeries::new(
        [(x0, level), (x1, level)],
        flat.stroke_width(1),
    ))?;
    legend.push(Entry::Line(
        flat,
        format!("measured roof {} GB/s", short(level)),
    ));
    if let Some(s) = spec {
        let red = RGBColor(170, 20, 20);
        chart.draw_series(LineSeries::new([(x0, s), (x1, s)], red.stroke_width(2)))?;
        legend.push(Entry::Line(red, format!("spec {} GB/s", short(s))));
    }
    draw_points(&mut chart, &points)?;
    points_legend(report, &points, legend, &side)
}

/// The side column of a panel: `legend` (its roofs), an entry per (op, storage type) of
/// `points`, and the notes on runs above their roof.
fn points_legend<DB: DrawingBackend>(
    report: &BenchReport,
    points: &[Point],
    mut legend: Vec<Entry>,
    side: &DrawingArea<DB, Shift>,
) -> Result<(), Error>
where
    DB::ErrorType: 'static,
{
    for ((op, dtype), n) in ops(points) {
        legend.push(Entry::Op(
            Style::of(&op, &dtype),
            format!("{op} {dtype} ({n})"),
        ));
    }
    let notes = above_roof_notes(report, points);
    if !notes.is_empty() {
        legend.push(Entry::Hollow);
    }
    side_column(side, &legend, &notes)
}

/// Why runs sit above their roof, one line per op that has any: a working set small enough
/// to run at a cache's bandwidth (the copy of about that size ran as fast), or a ceiling
/// that measured lower than this run (ceilings are measurements and vary run to run).
fn above_roof_notes(report: &BenchReport, points: &[Point]) -> Vec<String> {
    let curve = &report.measured.bandwidth_curve;
    // The copy's bandwidth at the size nearest `bytes` moved (log distance).
    let copy_at = |bytes: f64| {
        curve
            .iter()
            .map(|p| (2.0 * p.bytes as f64, p.gbps))
            .min_by(|a, b| {
                let d = |x: f64| (x / bytes).ln().abs();
                d(a.0).total_cmp(&d(b.0))
            })
    };
    let mut notes = Vec::new();
    for ((op, dtype), _) in ops(points) {
        let above: Vec<&Point> = points
            .iter()
            .filter(|p| p.above && p.row.op == op && p.row.dtype == dtype)
            .collect();
        let Some(top) = above
            .iter()
            .filter_map(|p| p.row.roofline_fraction)
            .reduce(f64::max)
        else {
            continue;
        };
        let cached = above.iter().all(|p| {
            p.row.bound == Bound::Memory
                && p.row
                    .gbps()
                    .zip(copy_at(p.row.bytes))
                    .is_some_and(|(g, (_, copy))| {
                        copy > report.measured.bandwidth_gbps * 1.1 && g <= copy * 1.1
                    })
        });
        let largest = above.iter().map(|p| p.row.bytes).fold(0.0, f64::max);
        let why = if cached {
            format!(
                "working sets up to {} fit a cache: copies of those sizes ran as fast",
                bytes(largest)
            )
        } else if above.iter().all(|p| p.row.bound == Bound::Compute) {
            "faster than the FMA peak measured for this run: ceilings vary run to run".into()
        } else {
            "faster than the copy measured for this run: ceilings vary run to run".into()
        };
        notes.push(format!(
            "{op} {dtype}: {} of its runs above the roof (up to {:.0} %): {why}.",
            above.len(),
            100.0 * top
        ));
    }
    notes
}

/// The legend, then the notes wrapped to the column, top to bottom.
fn side_column<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    legend: &[Entry],
    notes: &[String],
) -> Result<(), Error>
where
    DB::ErrorType: 'static,
{
    let font = ("sans-serif", 13).into_font().color(&BLACK);
    let left = font.pos(Pos::new(HPos::Left, VPos::Center));
    let mut y = 52;
    for entry in legend {
        let label = match entry {
            Entry::Line(color, label) => {
                area.draw(&PathElement::new(
                    vec![(6, y), (30, y)],
                    color.stroke_width(2),
                ))?;
                label.as_str()
            }
            Entry::Op(style, label) => {
                area.draw(&Marker {
                    at: (18, y),
                    style: *style,
                    filled: true,
                })?;
                label.as_str()
            }
            Entry::Hollow => {
                let style = Style {
                    color: RGBColor(60, 60, 60),
                    shape: Shape::Circle,
                };
                area.draw(&Marker {
                    at: (18, y),
                    style,
                    filled: false,
                })?;
                "hollow: above its roof (see below)"
            }
        };
        area.draw_text(label, &left, (38, y))?;
        y += 20;
    }
    y += 10;
    let width = (SIDE as usize - 16) / 7;
    for note in notes {
        for line in wrap(note, width) {
            area.draw_text(&line, &left, (6, y))?;
            y += 17;
        }
        y += 6;
    }
    Ok(())
}

/// Greedy word wrap to `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// A number in at most three significant figures, k/M suffixes past 10⁴.
fn short(v: f64) -> String {
    let (v, unit) = match v.abs() {
        a if a >= 1e7 => (v / 1e6, "M"),
        a if a >= 1e4 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let s = if v.abs() >= 100.0 || v == v.round() && v.abs() >= 1.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else if v.abs() >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.0e}")
    };
    format!("{s}{unit}")
}

/// Bytes in decimal units (as GB/s is: the axis' decades land on round numbers).
fn bytes(v: f64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut v = v;
    let mut i = 0;
    while v >= 1000.0 && i + 1 < units.len() {
        v /= 1000.0;
        i += 1;
    }
    format!("{} {}", short(v), units[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_of_the_sweep_has_its_own_style() {
        for op in sweep::OPS {
            assert!(
                ridge_model::report::op_colour(op).is_some(),
                "{op} has no colour"
            );
        }
        let styles: Vec<Style> = sweep::OPS.iter().map(|op| Style::of(op, "f32")).collect();
        for (i, a) in styles.iter().enumerate() {
            for (j, b) in styles.iter().enumerate().skip(i + 1) {
                // Colour alone tells the ops apart.
                assert_ne!(
                    a.color,
                    b.color,
                    "{} and {} share a colour",
                    sweep::OPS[i],
                    sweep::OPS[j]
                );
            }
        }
        // The storage type is the shape.
        assert_ne!(
            Style::of("gemm", "f16").shape,
            Style::of("gemm", "f32").shape
        );
        assert_eq!(
            Style::of("gemm", "f16").color,
            Style::of("gemm", "f32").color
        );
    }

    /// A report shaped like lavapipe's: the copy's curve peaks at 4 MB (a cache) above the
    /// sustained 64 MB figure; one add run moves 12.6 MB at 9.6 GB/s (127 % of the roof,
    /// slower than the 4 MB copy) and one GEMM beats the FMA peak measured.
    fn report_with_runs_above_their_roofs() -> BenchReport {
        serde_json::from_str(
            r#"{"ridge_version": "0", "adapter": "llvmpipe", "backend": "Vulkan",
            "vendor_id": 0, "device_id": 0, "driver": "", "timing": "GPU timestamps",
            "spec": null,
            "measured": {"bandwidth_curve": [{"bytes": 65536, "gbps": 2.6},
                {"bytes": 4194304, "gbps": 10.6}, {"bytes": 67108864, "gbps": 7.54}],
                "bandwidth_gbps": 7.54, "f32_tflops": 0.12, "f16_tflops": null,
                "tensor_tflops": null, "dispatch_overhead_us": 41.0, "host_overhead_us": 44.0},
            "measured_ceilings": {"peak_flops": 1.2e11, "bandwidth": 7.54e9,
                "dispatch_overhead_s": 4.1e-5, "source": {"Measured": "measured by ridge bench"}},
            "rows": [
                {"op": "add", "shape": [1048576], "dtype": "f32", "flops": 0.0,
                 "bytes": 12582912.0, "measured_ms": 1.31, "predicted_spec_ms": null,
                 "predicted_measured_ms": 1.67, "bound": "Memory", "roofline_fraction": 1.27},
                {"op": "add", "shape": [1024], "dtype": "f32", "flops": 0.0,
                 "bytes": 12288.0, "measured_ms": 0.05, "predicted_spec_ms": null,
                 "predicted_measured_ms": 0.04, "bound": "Memory", "roofline_fraction": 0.8},
                {"op": "gemm", "shape": [512, 512, 512], "dtype": "f32", "flops": 268435456.0,
                 "bytes": 3145728.0, "measured_ms": 2.0, "predicted_spec_ms": null,
                 "predicted_measured_ms": 2.2, "bound": "Compute", "roofline_fraction": 1.1}],
            "accuracy_measured": {"all": null, "memory": null, "compute": null},
            "accuracy_spec": {"all": null, "memory": null, "compute": null}}"#,
        )
        .expect("a report")
    }

    #[test]
    fn runs_above_their_roof_are_explained_per_op() {
        let report = report_with_runs_above_their_roofs();
        let rows: Vec<&Row> = report.rows.iter().collect();
        let points = points(&rows, |r| Some((r.bytes, r.measured_ms?)));
        let notes = above_roof_notes(&report, &points);
        assert_eq!(notes.len(), 2, "{notes:?}");
        // In the sweep's order of ops: the GEMM first.
        assert!(
            notes[0].starts_with("gemm f32: 1 of its runs above the roof (up to 110 %)"),
            "{notes:?}"
        );
        assert!(notes[0].contains("FMA peak"), "{notes:?}");
        assert!(
            notes[1].starts_with("add f32: 1 of its runs above the roof (up to 127 %)"),
            "{notes:?}"
        );
        assert!(notes[1].contains("up to 12.6 MB fit a cache"), "{notes:?}");
    }

    #[test]
    fn a_report_draws_both_panels_with_a_legend() {
        let report = report_with_runs_above_their_roofs();
        let path = std::env::temp_dir().join(format!("ridge-plot-{}.svg", std::process::id()));
        roofline_svg(&report, &path).expect("drawn");
        let svg = std::fs::read_to_string(&path).expect("written");
        let _ = std::fs::remove_file(&path);
        for want in [
            "Roofline",
            "Bandwidth",
            "add f32 (2)",
            "gemm f32 (1)",
            "12.6",
        ] {
            assert!(svg.contains(want), "no {want:?} in the SVG");
        }
    }

    #[test]
    fn labels_are_short_and_exact_enough() {
        assert_eq!(short(1000.0), "1000");
        assert_eq!(short(0.38), "0.38");
        assert_eq!(short(12.34), "12.3");
        assert_eq!(short(4.8e6), "4800k");
        assert_eq!(short(0.001), "1e-3");
        assert_eq!(bytes(3e6), "3 MB");
        assert_eq!(bytes(1e5), "100 kB");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(wrap("a bb ccc dddd", 6), ["a bb", "ccc", "dddd"]);
    }

    #[test]
    fn axes_reach_past_every_point() {
        let (lo, hi) = decades(0.02, 3000.0, 3.0);
        assert!(lo <= 0.02 / 3.0 && hi >= 9000.0, "{lo} {hi}");
        assert_eq!((lo, hi), (1e-3, 1e4));
    }
}
