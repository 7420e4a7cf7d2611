//! The roofline plot (log-log SVG): measured and spec ceilings, ridge points, one point per
//! measured case.

use std::path::Path;

use plotters::prelude::*;
use ridge_model::report::BenchReport;
use ridge_model::roofline::Ceilings;

fn roof(c: &Ceilings, x0: f64, x1: f64) -> Vec<(f64, f64)> {
    let ridge = c.ridge_point().clamp(x0, x1);
    vec![
        (x0, c.attainable(x0) / 1e9),
        (ridge, c.attainable(ridge) / 1e9),
        (x1, c.attainable(x1) / 1e9),
    ]
}

/// Writes the roofline of `report` to `path`. Ops without FLOPs (layout conversions) have
/// no place on a FLOP/s axis and are left out.
pub fn roofline_svg(report: &BenchReport, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let points: Vec<(f64, f64, &str)> = report
        .rows
        .iter()
        .filter(|r| r.flops > 0.0)
        .filter_map(|r| Some((r.intensity(), r.gflops()?, r.op.as_str())))
        .collect();
    let mut ceilings = vec![(report.measured_ceilings.clone(), "measured", BLUE)];
    if let Some(spec) = &report.spec {
        ceilings.push((spec.ceilings(ridge_model::Precision::F32), "spec f32", RED));
    }
    if let Some(c) = report.measured.tensor_ceilings() {
        ceilings.push((c, "measured tensor-core", RGBColor(0, 140, 140)));
    }
    let (x0, x1) = (0.01f64, 1000.0f64);
    let y_max = ceilings
        .iter()
        .map(|(c, _, _)| c.peak_flops / 1e9)
        .fold(1.0, f64::max)
        * 2.0;
    let y_min = points
        .iter()
        .map(|p| p.1)
        .fold(y_max, f64::min)
        .min(x0 * report.measured_ceilings.bandwidth / 1e9)
        / 2.0;

    let root = SVGBackend::new(path, (900, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!("Roofline: {} ({})", report.adapter, report.backend);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), (y_min.max(1e-6)..y_max).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP/byte)")
        .y_desc("GFLOP/s")
        .draw()?;
    for (c, name, color) in &ceilings {
        chart
            .draw_series(LineSeries::new(roof(c, x0, x1), color.stroke_width(2)))?
            .label(format!(
                "{name} roof, ridge point {:.2} FLOP/B",
                c.ridge_point()
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    let palette = [
        BLACK,
        GREEN,
        MAGENTA,
        CYAN,
        RGBColor(200, 120, 0),
        RGBColor(120, 60, 160),
    ];
    let mut ops: Vec<&str> = points.iter().map(|p| p.2).collect();
    ops.dedup();
    for (i, op) in ops.iter().enumerate() {
        let color = palette[i % palette.len()];
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|p| p.2 == *op)
                    .map(|p| Circle::new((p.0, p.1), 4, color.filled())),
            )?
            .label(op.to_string())
            .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
