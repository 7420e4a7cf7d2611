//! Log-log roofline plots (Williams, Waterman & Patterson, "Roofline: An Insightful Visual
//! Performance Model for Multicore Architectures", CACM 2009): attainable FLOP/s =
//! min(peak, arithmetic intensity × bandwidth). egui_plot has linear axes, so points are
//! plotted as log10 values and the axes label powers of ten.

use egui::Color32;
use egui_plot::{
    Corner, GridInput, GridMark, HoverPosition, Legend, Line, MarkerShape, Plot, PlotPoints, Points,
};
use ridge_model::roofline::Ceilings;

/// One measured (or predicted) kernel run on the plot.
#[derive(Clone, Debug)]
pub struct RunPoint {
    /// Arithmetic intensity, FLOP/byte.
    pub intensity: f64,
    /// Achieved GFLOP/s.
    pub gflops: f64,
    /// Hover text: op, shape, predicted and measured time.
    pub text: String,
    /// For a measured run: (predicted, measured) ms, the predicted-vs-measured view's point.
    pub times: Option<(f64, f64)>,
}

impl RunPoint {
    /// Whether a log-log roofline can draw it (positive, finite intensity and rate).
    pub fn drawable(&self) -> bool {
        [self.intensity, self.gflops]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0)
    }
}

/// A named set of points drawn in one colour.
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Colour.
    pub color: Color32,
    /// The points.
    pub points: Vec<RunPoint>,
}

/// A roofline to draw: name, ceilings, colour.
pub struct Roof {
    /// Legend name, e.g. `H200 spec`.
    pub name: String,
    /// The ceilings.
    pub ceilings: Ceilings,
    /// Colour.
    pub color: Color32,
}

/// Intensities the plot spans, FLOP/byte (log10).
const X_RANGE: (f64, f64) = (-2.0, 4.0);

/// Grid lines of a log10 axis: one per decade (thick), and at 2–9 × each decade (thin).
fn log_grid(input: GridInput) -> Vec<GridMark> {
    let (lo, hi) = input.bounds;
    let mut marks = Vec::new();
    for decade in lo.floor() as i32..=hi.ceil() as i32 {
        for m in 1..=9 {
            let value = decade as f64 + (m as f64).log10();
            if value >= lo && value <= hi {
                let step_size = if m == 1 { 1.0 } else { 0.1 };
                marks.push(GridMark { value, step_size });
            }
        }
    }
    marks
}

/// The label of a log10 grid line: its value (10^mark) at 1, 2 and 5 × a power of ten,
/// with as many decimals as it needs (0.02, 500, 2k, 5M); other lines are unlabelled.
fn pow10_label(mark: GridMark) -> String {
    let v = 10f64.powf(mark.value);
    let exponent = v.log10().floor();
    let mantissa = (v / 10f64.powf(exponent)).round();
    if ![1.0, 2.0, 5.0].contains(&mantissa) {
        return String::new();
    }
    let v = mantissa * 10f64.powf(exponent);
    match v {
        v if v >= 1e12 => format!("{}T", v / 1e12),
        v if v >= 1e9 => format!("{}G", v / 1e9),
        v if v >= 1e6 => format!("{}M", v / 1e6),
        v if v >= 1e3 => format!("{}k", v / 1e3),
        v if v >= 1.0 => format!("{v}"),
        v => format!("{v:.*}", (-exponent) as usize),
    }
}

/// Log-spaced points of `min(peak, I × bandwidth)` in GFLOP/s, the ridge point included.
fn roof_points(c: &Ceilings) -> Vec<[f64; 2]> {
    let mut xs: Vec<f64> = (0..=60)
        .map(|i| X_RANGE.0 + (X_RANGE.1 - X_RANGE.0) * i as f64 / 60.0)
        .collect();
    xs.push(c.ridge_point().log10());
    xs.sort_by(f64::total_cmp);
    xs.into_iter()
        .map(|x| [x, (c.attainable(10f64.powf(x)) / 1e9).log10()])
        .collect()
}

/// A plot on log10 axes labelled `x_label` and `y_label`, the legend at the bottom right
/// (where a roofline has no data), hover text `texts` (per series, per point) near a point
/// and `elsewhere(x, y)` of the coordinates elsewhere.
fn log_log(
    id: &str,
    [x_label, y_label]: [&str; 2],
    texts: Vec<(String, Vec<String>)>,
    elsewhere: fn(f64, f64) -> String,
) -> Plot<'static> {
    Plot::new(id)
        .legend(Legend::default().position(Corner::RightBottom))
        .x_axis_label(x_label.to_string())
        .y_axis_label(y_label.to_string())
        .x_grid_spacer(log_grid)
        .y_grid_spacer(log_grid)
        .x_axis_formatter(|m, _| pow10_label(m))
        .y_axis_formatter(|m, _| pow10_label(m))
        .label_formatter(move |pos| match pos {
            HoverPosition::NearDataPoint {
                plot_name, index, ..
            } => texts
                .iter()
                .find(|(n, _)| n == plot_name)
                .and_then(|(_, t)| t.get(*index).cloned())
                .or_else(|| Some(plot_name.to_string())),
            HoverPosition::Elsewhere { position } => {
                Some(elsewhere(10f64.powf(position.x), 10f64.powf(position.y)))
            }
        })
}

/// Draws rooflines and points; hovering a point shows its text, elsewhere the coordinates.
pub fn roofline(ui: &mut egui::Ui, id: &str, roofs: &[Roof], series: &[Series]) {
    // Points without FLOPs (copies, transposes) have no place on a log FLOP/s axis.
    let shown: Vec<(&Series, Vec<&RunPoint>)> = series
        .iter()
        .map(|s| {
            let pts = s
                .points
                .iter()
                .filter(|p| p.intensity > 0.0 && p.gflops > 0.0);
            (s, pts.collect())
        })
        .collect();
    let texts: Vec<(String, Vec<String>)> = shown
        .iter()
        .map(|(s, pts)| (s.name.clone(), pts.iter().map(|p| p.text.clone()).collect()))
        .collect();
    log_log(
        id,
        ["arithmetic intensity (FLOP/byte)", "GFLOP/s"],
        texts,
        |x, y| format!("{x:.3} FLOP/byte\n{y:.1} GFLOP/s"),
    )
    .default_x_bounds(X_RANGE.0, X_RANGE.1)
    .show(ui, |plot| {
        for r in roofs {
            plot.line(
                Line::new(r.name.clone(), PlotPoints::from(roof_points(&r.ceilings)))
                    .color(r.color)
                    .width(2.0),
            );
            let ridge = r.ceilings.ridge_point();
            plot.points(
                Points::new(
                    format!("{} ridge point", r.name),
                    vec![[ridge.log10(), (r.ceilings.peak_flops / 1e9).log10()]],
                )
                .shape(MarkerShape::Diamond)
                .radius(5.0)
                .color(r.color),
            );
        }
        for (s, pts) in shown {
            let pts: Vec<[f64; 2]> = pts
                .iter()
                .map(|p| [p.intensity.log10(), p.gflops.log10()])
                .collect();
            plot.points(
                Points::new(s.name.clone(), pts)
                    .radius(3.5)
                    .filled(true)
                    .color(s.color),
            );
        }
    });
}

/// A log-log scatter of `series` (each point's `intensity` is x, `gflops` is y) with
/// reference `lines` (log10 coordinates), axis labels `x_label` and `y_label`; hovering a
/// point shows its text.
pub fn scatter(
    ui: &mut egui::Ui,
    id: &str,
    [x_label, y_label]: [&str; 2],
    lines: &[(String, Color32, Vec<[f64; 2]>)],
    series: &[Series],
) {
    let texts: Vec<(String, Vec<String>)> = series
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                s.points.iter().map(|p| p.text.clone()).collect(),
            )
        })
        .collect();
    log_log(id, [x_label, y_label], texts, |x, y| {
        format!("{x:.1} · {y:.1}")
    })
    .data_aspect(1.0)
    .show(ui, |plot| {
        for (name, color, pts) in lines {
            plot.line(Line::new(name.clone(), PlotPoints::from(pts.clone())).color(*color));
        }
        for s in series {
            let pts: Vec<[f64; 2]> = s
                .points
                .iter()
                .filter(|p| p.drawable())
                .map(|p| [p.intensity.log10(), p.gflops.log10()])
                .collect();
            plot.points(
                Points::new(s.name.clone(), pts)
                    .radius(4.0)
                    .filled(true)
                    .color(s.color),
            );
        }
    });
}

/// Twelve colours told apart (Tableau 10, black's stand-in light grey, olive), one per op
/// where a plot colours by op.
pub const OP_PALETTE: [Color32; 12] = [
    Color32::from_rgb(0x4e, 0x79, 0xa7),
    Color32::from_rgb(0xf2, 0x8e, 0x2b),
    Color32::from_rgb(0xe1, 0x57, 0x59),
    Color32::from_rgb(0x76, 0xb7, 0xb2),
    Color32::from_rgb(0x59, 0xa1, 0x4f),
    Color32::from_rgb(0x79, 0x70, 0x6e),
    Color32::from_rgb(0xb0, 0x7a, 0xa1),
    Color32::from_rgb(0xff, 0x9d, 0xa7),
    Color32::from_rgb(0x9c, 0x75, 0x5f),
    Color32::from_rgb(0xed, 0xc9, 0x48),
    Color32::from_rgb(0xd0, 0xd0, 0xd0),
    Color32::from_rgb(0x80, 0x80, 0x00),
];

/// Distinct colours for series and roofs.
pub const PALETTE: [Color32; 6] = [
    Color32::from_rgb(31, 119, 180),
    Color32::from_rgb(214, 39, 40),
    Color32::from_rgb(44, 160, 44),
    Color32::from_rgb(255, 127, 14),
    Color32::from_rgb(148, 103, 189),
    Color32::from_rgb(140, 86, 75),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn label(v: f64) -> String {
        pow10_label(GridMark {
            value: v.log10(),
            step_size: 0.1,
        })
    }

    #[test]
    fn log_axis_labels_name_one_two_five_once_per_decade() {
        assert_eq!(label(0.02), "0.02");
        assert_eq!(label(0.5), "0.5");
        assert_eq!(label(1.0), "1");
        assert_eq!(label(2000.0), "2k");
        assert_eq!(label(5e9), "5G");
        assert_eq!(label(3.0), "");
        assert_eq!(label(0.07), "");
        let marks = log_grid(GridInput {
            bounds: (-2.0, 1.0),
            base_step_size: 0.01,
        });
        // 1–9 × 0.01, 0.1 and 1, then 10: 28 lines, 4 of them decades.
        assert_eq!(marks.len(), 28);
        assert_eq!(marks.iter().filter(|m| m.step_size == 1.0).count(), 4);
    }
}
