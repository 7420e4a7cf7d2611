//! The dashboard's panels, one module each.

pub mod adapter;
pub mod compare;
pub mod decode;
pub mod kernels;
pub mod llm;
pub mod roofline;
pub mod teach;
pub mod transformer;

use ridge_core::Context;
use ridge_kernels::sweep::{self, CaseSpec};
use ridge_model::OpCost;
use ridge_model::roofline::Ceilings;

use crate::plot::RunPoint;

/// A time table's header row: `heads`, then the calibrated model's two columns where a
/// report prices them.
pub fn header_row(ui: &mut egui::Ui, heads: &[&str], calibrated: bool) {
    let extra: &[&str] = if calibrated {
        &["calibrated", "measured ÷ calibrated"]
    } else {
        &[]
    };
    for h in heads.iter().chain(extra) {
        ui.strong(*h);
    }
    ui.end_row();
}

/// `1.234 ms`, or `n/a` for a time that could not be measured.
pub fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.4} ms"))
}

/// A measured run as a roofline point, with its prediction under `roof` (ceilings and their
/// name, [`crate::Gpu::ceilings_for`]) in the hover text.
pub fn run_point(
    label: &str,
    cost: &OpCost,
    measured_ms: f64,
    roof: Option<(Ceilings, &str)>,
) -> RunPoint {
    let s = measured_ms * 1e-3;
    let predicted_ms = roof.as_ref().map(|(c, _)| c.predict(cost).seconds * 1e3);
    let mut text = format!(
        "{label}\nmeasured {measured_ms:.4} ms: {:.1} GFLOP/s, {:.1} GB/s",
        cost.flops / s / 1e9,
        cost.bytes / s / 1e9
    );
    if let Some((c, name)) = roof {
        let p = c.predict(cost);
        text += &format!(
            "\npredicted {:.4} ms ({}-bound, {name} roof)",
            p.seconds * 1e3,
            p.bound
        );
        if let Some(f) = c.fraction_of_roofline(cost, s) {
            text += &format!(", {:.0} % of it", f * 100.0);
        }
    }
    RunPoint {
        intensity: cost.flops / cost.bytes.max(1.0),
        gflops: cost.flops / s / 1e9,
        text,
        times: predicted_ms.map(|p| (p, measured_ms)),
    }
}

/// Allocates `case` and measures it (median of 5 launches after one untimed):
/// (label, cost, ms).
pub async fn measure_case(ctx: &Context, case: &CaseSpec) -> Result<(String, OpCost, f64), String> {
    let prepared = sweep::prepare(ctx, case).map_err(|e| e.to_string())?;
    let ms = ridge_kernels::ceilings::median_ms(ctx, 5, &prepared.launch)
        .await
        .map_err(|e| e.to_string())?;
    Ok((label(case), prepared.cost, ms))
}

/// `op [shape] dtype`, the name of a run on the roofline.
pub fn label(case: &CaseSpec) -> String {
    format!("{} {:?} {}", case.op, case.shape, case.dtype)
}

/// A timed row of a `ridge bench` report as a roofline point, labelled `prefix` + the case
/// as [`label`] names it, scored against `roof`; `None` when the row was not timed.
pub fn report_point(
    prefix: &str,
    row: &ridge_model::report::Row,
    roof: Option<(Ceilings, &str)>,
) -> Option<(String, RunPoint)> {
    let ms = row.measured_ms?;
    let label = format!("{prefix}{} {:?} {}", row.op, row.shape, row.dtype);
    let point = run_point(&label, &OpCost::new(row.flops, row.bytes), ms, roof);
    Some((label, point))
}
