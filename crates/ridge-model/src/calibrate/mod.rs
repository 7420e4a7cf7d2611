//! Ridge's own measurements turned into per-op time terms: the roofline plus what an
//! adapter actually achieves, fitted on one `ridge bench` report and held against it.
//!
//! The model of one launch of op kind k (an op in one storage type), after the roofline
//! (Williams et al., "Roofline", CACM 2009) with a fixed cost per launch:
//!
//! ```text
//! t = o + c_k + x / (R · f_k) + τ_k · K + ω_k · W
//! ```
//!
//! where `o` is the adapter's measured dispatch overhead (a trivial dispatch's GPU time, from
//! the report), `x` the launch's work on its binding roof (bytes for a memory-bound kind,
//! FLOPs for a compute-bound one, as the measured roofline classifies the kind's launches;
//! the FLOPs of the whole workgroup tiles launched where the report knows the kernel's
//! tiling, [`OpCost::work_flops`]: a GEMM's output padded up to its tiles),
//! `R` that roof (measured copy bandwidth, or the measured FMA / tensor-core peak of the
//! storage type), `f_k` the fraction of the roof the kind achieves on large launches and
//! `c_k ≥ 0` its fixed cost beyond a trivial dispatch (latency a small launch cannot hide:
//! a reduction's tree, a GEMM's tail wave). `K` is the launch's reduction depth
//! ([`OpCost::depth`]: a product's K, the keys an attention query sees) and `τ_k ≥ 0` the
//! time a workgroup takes per step of it: a product too small to fill the GPU's compute units
//! takes time in proportion to K, whatever its FLOPs (on the H200's report the f32 GEMM of
//! 512³ took 31 µs, where its FLOPs at 4096³'s rate take 6.4). `τ_k` is fitted for
//! compute-bound kinds whose launches have a depth (kept where a time per launch unit joins
//! it); memory-bound kinds stream their bytes and keep `τ_k` = 0 but
//! where it predicts their launches held out better (a decode step's attention over the KV
//! cache: a workgroup a KV head walks the keys tile after tile, its time following the keys,
//! not the bytes of its heads; the choice between two fits by their held-out error flatters
//! that error a little).
//!
//! `W` is the launch's units where its cost states them ([`OpCost::units`]): its
//! invocations where every launch of the kind states them (the matrix-vector products, whose
//! launch shapes put 64 to 256 in a workgroup; [`KindFit::per_invocation`]), else its
//! workgroups (the row kernels: one a row), and `ω_k ≥ 0` a time per unit, fitted only where
//! it predicts the kind's launches held out better than without it (a CPU driver runs a
//! workgroup on a thread, its invocations in turn: SwiftShader's row kinds at a fixed cost a
//! row; the CPU drivers' decode products, whose time follows their invocations more than
//! their bytes).
//!
//! A compute-bound kind whose launches all state their workgroups `G` may be priced in whole
//! waves: with `S_k` workgroups running at once, a launch takes `⌈G/S_k⌉` waves, its work
//! padded to `⌈G/S_k⌉·S_k` workgroups' worth (`x · ⌈G/S_k⌉·S_k / G`) and its depth walked once a
//! wave (`K · ⌈G/S_k⌉`). `S_k` is fitted, since WebGPU does not report a GPU's SM count: the
//! values where some launch's count of waves changes are tried and the one with the smallest
//! squared relative error kept, and the model is kept only where it predicts the kind's
//! launches held out better ([`KindFit::concurrent_workgroups`]; the H100's f32 prompt product,
//! 2048 tokens of SmolLM2's width making 2.2 waves: 1.18× → 1.02× held out, `S` = 240 on 132
//! SMs).
//!
//! Fitted per kind on the report's timed launches, minimising the squared relative error
//! (weights 1/t²); each fit from more launches than it has terms ([`MIN_ROWS_FOR_LATENCY`]);
//! a fit that makes any term negative drops `c_k`, then `τ_k`; where none holds only because
//! time did not grow with the work (flat launches), `c_k` alone, no work term; else `c_k` =
//! `τ_k` = 0 and `f_k` the median of the achieved fractions of the launches whose time is
//! mostly beyond the dispatch overhead (1 where none is). Nothing is per GPU but the report it is
//! fitted on.
//!
//! Errors are reported as factors (`exp(median |ln(predicted / measured)|)`, 1 = exact):
//! for the plain roofline, the fit on all of the kind's launches, and each launch predicted
//! by a fit without it (held out: the honest number).

use serde::{Deserialize, Serialize};

use crate::cost::OpCost;
use crate::report::BenchReport;
use crate::roofline::{Bound, Ceilings};
use crate::transformer::{PlannedOp, Priced};

mod fit;

use fit::{KindSamples, Model, Sample, Terms};
use fit::{
    error_factor, fit, held_out, held_out_error, kind_samples, kinds_of, on_roof, overhead_of,
    predict,
};

/// The share of a launch's time that must be beyond the dispatch overhead for its achieved
/// fraction to count in a one-parameter fit.
const INFORMATIVE: f64 = 0.2;

/// Launches a kind needs before its fixed cost `c_k` is fitted beside `f_k`: every fit is
/// over-determined, p terms from at least p + 1 launches (so `τ_k` as well needs 4). Fitting
/// p terms through exactly p launches held out far worse on the H200's decoder kinds, four
/// launches each (rms_qmatmul_rope 2.1× against 1.2×).
pub const MIN_ROWS_FOR_LATENCY: usize = 3;

/// One op kind's fitted terms and errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindFit {
    /// Op name.
    pub op: String,
    /// Storage type (`f32`, `f16`).
    pub dtype: String,
    /// The roof its launches are held against (most of them, on the measured roofline).
    pub bound: Bound,
    /// Timed launches fitted.
    pub rows: usize,
    /// `f_k`: the fraction of the roof achieved on large launches (above 1 where the kind
    /// beats the measured roof: a working set that stays in cache; [`NO_WORK_TERM`] where the
    /// kind's time follows its depth and not its work).
    pub efficiency: f64,
    /// `c_k`: fixed cost beyond the dispatch overhead, seconds.
    pub latency_s: f64,
    /// `τ_k`: seconds per step of reduction depth (compute-bound kinds, and memory-bound ones
    /// where it predicts their launches held out better; 0 elsewhere, and in reports that
    /// predate it).
    #[serde(default)]
    pub depth_s: f64,
    /// `ω_k`: seconds per launch unit, a workgroup or, where [`KindFit::per_invocation`], an
    /// invocation (where it predicts the kind's launches held out better; 0 elsewhere, and
    /// in reports that predate it).
    #[serde(default)]
    pub workgroup_s: f64,
    /// Whether the kind's launch units are invocations (every launch of the report states
    /// them: the matrix-vector products) rather than workgroups; a prediction prices the
    /// same unit ([`OpCost::units`]).
    #[serde(default)]
    pub per_invocation: bool,
    /// `S_k`: the workgroups that run at once, where the kind's time is priced in whole waves
    /// of them (a compute-bound kind whose launches state their workgroups, where it predicts
    /// them held out better); 0 elsewhere, and in reports that predate it.
    #[serde(default)]
    pub concurrent_workgroups: f64,
    /// Median error factor of the measured roofline alone.
    pub roofline_error: f64,
    /// Median error factor of the fit on every launch.
    pub fitted_error: f64,
    /// Median error factor of each launch predicted by a fit without it (`None` with a
    /// single launch).
    pub held_out_error: Option<f64>,
}

/// The fitted terms of one report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// `o`: the measured dispatch overhead, seconds.
    pub overhead_s: f64,
    /// One fit per op kind, in the report's order.
    pub kinds: Vec<KindFit>,
}

/// The efficiency of a fit without a work term (its launches' time follows their depth and
/// not their bytes): the largest finite one, so that the work prices nothing.
pub const NO_WORK_TERM: f64 = f64::MAX;

impl Calibration {
    /// Fits every op kind of `report` with at least one timed launch.
    pub fn fit(report: &BenchReport) -> Self {
        let overhead_s = overhead_of(report);
        let kinds = kinds_of(report)
            .into_iter()
            .map(|(op, dtype)| {
                let KindSamples {
                    bound,
                    per_invocation,
                    samples: indexed,
                } = kind_samples(report, &op, &dtype);
                let samples: Vec<Sample> = indexed.into_iter().map(|(_, s)| s).collect();
                let model = Model::of(bound, &samples, overhead_s);
                let terms = fit(&samples, overhead_s, model);
                let held_out_error = held_out_error(&samples, overhead_s, model);
                KindFit {
                    rows: samples.len(),
                    bound,
                    efficiency: terms.efficiency,
                    latency_s: terms.latency_s,
                    depth_s: terms.depth_s,
                    workgroup_s: terms.workgroup_s,
                    per_invocation,
                    concurrent_workgroups: terms.slots,
                    roofline_error: error_factor(
                        samples.iter().map(|s| (s.roofline_s, s.measured_s)),
                    ),
                    fitted_error: error_factor(
                        samples
                            .iter()
                            .map(|s| (predict(s, overhead_s, terms), s.measured_s)),
                    ),
                    held_out_error,
                    op,
                    dtype,
                }
            })
            .collect();
        Self { overhead_s, kinds }
    }

    /// Each row of `report` predicted by its kind's fit on the kind's other timed rows, ms
    /// (`None` for untimed rows and kinds timed once): the predictions the held-out errors
    /// are made of.
    pub fn held_out_ms(report: &BenchReport) -> Vec<Option<f64>> {
        let overhead_s = overhead_of(report);
        let mut out = vec![None; report.rows.len()];
        for (op, dtype) in kinds_of(report) {
            let KindSamples {
                bound,
                samples: indexed,
                ..
            } = kind_samples(report, &op, &dtype);
            let samples: Vec<Sample> = indexed.iter().map(|(_, s)| *s).collect();
            let model = Model::of(bound, &samples, overhead_s);
            for ((i, _), p) in indexed.iter().zip(held_out(&samples, overhead_s, model)) {
                out[*i] = p.map(|s| s * 1e3);
            }
        }
        out
    }

    /// The median over op kinds of their held-out error factors (`None` when no kind has
    /// two launches).
    pub fn median_held_out(&self) -> Option<f64> {
        let mut e: Vec<f64> = self.kinds.iter().filter_map(|k| k.held_out_error).collect();
        if e.is_empty() {
            return None;
        }
        e.sort_by(f64::total_cmp);
        Some(e[e.len() / 2])
    }

    /// The fitted time of one launch of `op` in `dtype` costing `cost` on the report's
    /// adapter, seconds; `None` for a kind the report did not time.
    pub fn predict(
        &self,
        report: &BenchReport,
        op: &str,
        dtype: &str,
        cost: &OpCost,
    ) -> Option<f64> {
        let k = self.kinds.iter().find(|k| k.op == op && k.dtype == dtype)?;
        let (roof, _) = report.measured.roof_for(op, dtype == "f16");
        let terms = Terms {
            efficiency: k.efficiency,
            latency_s: k.latency_s,
            depth_s: k.depth_s,
            workgroup_s: k.workgroup_s,
            slots: k.concurrent_workgroups,
        };
        let roof_s = on_roof(k.bound, cost, &roof);
        let units = cost.units(k.per_invocation);
        Some(terms.time(self.overhead_s, roof_s, cost.depth, units, cost.workgroups))
    }
}

/// A bench report with its fitted terms: what prices a model's ops on the report's adapter
/// (the benches' and `ridge predict`'s `--report FILE`).
#[derive(Clone, Debug)]
pub struct Calibrated {
    /// The report.
    pub report: BenchReport,
    /// Its terms, fitted on its rows ([`Calibration::fit`]).
    pub fit: Calibration,
}

impl Calibrated {
    /// `report` with its terms, always fitted on its rows: the terms a report carries
    /// ([`BenchReport::calibration`]) are never trusted, so an older fit's or an edited
    /// file's cannot price a model differently from what its rows measured.
    pub fn new(report: BenchReport) -> Self {
        let fit = Calibration::fit(&report);
        Self { report, fit }
    }

    /// Whether the report's rows fitted kind `op` in `dtype` (`"f32"`, `"f16"`).
    pub fn fits_kind(&self, op: &str, dtype: &str) -> bool {
        self.fit
            .kinds
            .iter()
            .any(|k| k.op == op && k.dtype == dtype)
    }

    /// One launch of kind `op` in `dtype` costing `cost`: its fitted time, seconds, and `true`;
    /// for a kind the report did not time, `roof`'s roofline time and `false`.
    pub fn price(&self, op: &str, dtype: &str, cost: &OpCost, roof: &Ceilings) -> (f64, bool) {
        match self.fit.predict(&self.report, op, dtype, cost) {
            Some(s) => (s, true),
            None => (roof.predict(cost).seconds, false),
        }
    }

    /// A planned encoder op in `dtype`, seconds, and whether fitted terms priced it: its kind's
    /// fit at the cost [`Priced`] names — a split GEMM's first dispatch at the whole GEMM's
    /// (the sweep times the launch's two dispatches as one launch of the kind), its reduce at
    /// 0; where the report did not fit the kind, each dispatch at its own cost on `roof`
    /// (pricing the pair as one would drop a dispatch's overhead).
    pub fn price_planned(&self, op: &PlannedOp, dtype: &str, roof: &Ceilings) -> (f64, bool) {
        let own = || (roof.predict(&op.cost).seconds, false);
        match op.priced {
            _ if !self.fits_kind(&op.name, dtype) => own(),
            Priced::Own => self.price(&op.name, dtype, &op.cost, roof),
            Priced::Whole(whole) => self.price(&op.name, dtype, &whole, roof),
            Priced::Folded => (0.0, true),
        }
    }
}

#[cfg(test)]
mod tests;
