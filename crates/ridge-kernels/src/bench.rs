//! A sweep timed into a report: every case of [`crate::sweep::cases`] timed, placed against
//! the measured and datasheet roofs, and the per-op model fitted on it
//! ([`ridge_model::calibrate`]). `ridge bench` prints and writes it; the browser's
//! `Ridge.bench` returns it, so the browser's adapter is calibrated as the native ones are.

use ridge_core::{Context, DType, Result};
use ridge_model::calibrate::Calibration;
use ridge_model::report::{Accuracy, BenchReport, Measured, Row};
use ridge_model::{GpuSpec, OpCost, Precision, hardware};

use crate::sweep::{self, CaseSpec};
use crate::{Gemm, GemmKernel, ceilings};

/// One case of a sweep and its time.
pub struct Timed {
    /// The case.
    pub case: CaseSpec,
    /// Its cost (FLOPs, bytes, reduction depth, tiled FLOPs).
    pub cost: OpCost,
    /// The fastest pass's median, ms; `None` where no launch could be timed.
    pub measured_ms: Option<f64>,
}

/// Times every case in `passes` passes, each case warmed first (up to 200 ms of launches:
/// [`ceilings::SWEEP_WARM_LAUNCHES`]), keeping each case's faster median of `repeats`
/// launches: an NVIDIA GPU that saw a host-side gap can run the next ~0.5 s at idle clocks
/// (the H200 logged SM 480 MHz for 0.75 s mid-bench and those rows ran exactly 4× slow;
/// benches/NOTES.md), which one pass cannot tell from a slow kernel. `progress(pass, case)`
/// is called before each case is timed.
///
/// Errors: a case whose tensors cannot be made (GPU memory); a case that fails to time is
/// kept with no time.
pub async fn time_cases(
    ctx: &Context,
    cases: Vec<CaseSpec>,
    repeats: usize,
    passes: usize,
    mut progress: impl FnMut(usize, &CaseSpec),
) -> Result<Vec<Timed>> {
    let mut timed: Vec<Timed> = Vec::with_capacity(cases.len());
    for pass in 0..passes.max(1) {
        for (i, case) in cases.iter().enumerate() {
            progress(pass, case);
            let prepared = sweep::prepare(ctx, case)?;
            let t = ceilings::warm_median_ms(
                ctx,
                repeats,
                ceilings::SWEEP_WARM_LAUNCHES,
                &prepared.launch,
            )
            .await
            .ok();
            match timed.get_mut(i) {
                Some(best) => {
                    best.measured_ms = match (best.measured_ms, t) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    }
                }
                None => timed.push(Timed {
                    case: case.clone(),
                    cost: prepared.cost,
                    measured_ms: t,
                }),
            }
        }
    }
    Ok(timed)
}

/// The report row of a timed case: its cost, time, and predictions from `spec`'s datasheet
/// and from the measured ceilings `m` (a launch on the tensor cores against their measured
/// peak, not the FMA units').
pub fn row(ctx: &Context, t: &Timed, m: &Measured, spec: Option<&GpuSpec>) -> Row {
    let (case, cost) = (&t.case, &t.cost);
    let f16 = case.dtype == DType::F16;
    let tensor = match case.op.as_str() {
        "gemm" => matches!(
            Gemm::new(case.shape[0], case.shape[1], case.shape[2]).kernel(ctx, case.dtype),
            GemmKernel::Coop(_)
        ),
        op => ridge_model::report::tensor_core_op(op) && f16 && ctx.has_coop_f16(),
    };
    let ceil = m.ceilings_for(f16, tensor);
    let pred = ceil.predict(cost);
    let precision = if f16 { Precision::F16 } else { Precision::F32 };
    Row {
        op: case.op.clone(),
        shape: case.shape.clone(),
        dtype: case.dtype.to_string(),
        flops: cost.flops,
        bytes: cost.bytes,
        depth: cost.depth,
        tiled_flops: cost.tiled_flops,
        workgroups: cost.workgroups,
        invocations: cost.invocations,
        measured_ms: t.measured_ms,
        predicted_spec_ms: spec.map(|s| s.ceilings(precision).predict(cost).seconds * 1e3),
        predicted_measured_ms: pred.seconds * 1e3,
        bound: pred.bound,
        roofline_fraction: t
            .measured_ms
            .and_then(|ms| ceil.fraction_of_roofline(cost, ms * 1e-3)),
    }
}

/// The spec-table row of `ctx`'s adapter ([`hardware::lookup`]).
pub fn spec(ctx: &Context) -> Option<GpuSpec> {
    let fp = ctx.fingerprint();
    hardware::lookup(fp.vendor_id, fp.device_id, &fp.name)
}

/// The report of `rows` timed on `ctx`'s adapter with ceilings `m`: the adapter's
/// fingerprint, how times were taken, the roofline's accuracy and the per-op model fitted on
/// the rows.
pub fn report(ctx: &Context, m: Measured, rows: Vec<Row>) -> BenchReport {
    let fp = ctx.fingerprint();
    let mut report = BenchReport {
        ridge_version: env!("CARGO_PKG_VERSION").into(),
        adapter: fp.name.clone(),
        backend: fp.backend.clone(),
        vendor_id: fp.vendor_id,
        device_id: fp.device_id,
        driver: fp.driver.clone(),
        timing: if ctx.has_timestamps() {
            "GPU timestamps".into()
        } else {
            "wall clock".into()
        },
        spec: spec(ctx),
        measured_ceilings: m.ceilings(false),
        measured: m,
        accuracy_measured: Accuracy::of(&rows, |r| Some(r.predicted_measured_ms)),
        accuracy_spec: Accuracy::of(&rows, |r| r.predicted_spec_ms),
        rows,
        calibration: None,
    };
    report.calibration = Some(Calibration::fit(&report));
    report
}
