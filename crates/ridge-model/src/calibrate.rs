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
//! Fitted per kind on the report's timed launches, minimising the squared relative error
//! (weights 1/t²); each fit from more launches than it has terms ([`MIN_ROWS_FOR_LATENCY`]);
//! a fit that makes any term negative drops `c_k`, then `τ_k`; where none holds, `c_k` = `τ_k`
//! = 0 and `f_k` the median of the achieved fractions of the launches whose time is mostly
//! beyond the dispatch overhead (1 where none is). Nothing is per GPU but the report it is
//! fitted on.
//!
//! Errors are reported as factors (`exp(median |ln(predicted / measured)|)`, 1 = exact):
//! for the plain roofline, the fit on all of the kind's launches, and each launch predicted
//! by a fit without it (held out: the honest number).

use serde::{Deserialize, Serialize};

use crate::cost::OpCost;
use crate::report::{BenchReport, Row};
use crate::roofline::{Bound, Ceilings};
use crate::transformer::{PlannedOp, Priced};

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

/// A timed launch: work on its roof (x / R, seconds), reduction depth, measured time
/// (seconds), and the roofline's time.
#[derive(Clone, Copy)]
struct Sample {
    roof_s: f64,
    depth: f64,
    /// Its launch units ([`OpCost::units`]).
    units: f64,
    measured_s: f64,
    roofline_s: f64,
}

/// A kind's timed launches ([`kind_samples`]): the roof they are held against, whether their
/// launch units are invocations, and each launch's row index and sample.
struct KindSamples {
    bound: Bound,
    per_invocation: bool,
    samples: Vec<(usize, Sample)>,
}

/// A kind's fitted terms.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Terms {
    /// `f_k`.
    efficiency: f64,
    /// `c_k`, seconds.
    latency_s: f64,
    /// `τ_k`, seconds per step of depth.
    depth_s: f64,
    /// `ω_k`, seconds per workgroup.
    workgroup_s: f64,
}

/// The median error of (predicted, measured) pairs as a factor: 2 to the power of
/// [`crate::roofline::median_abs_log2_error`] (NaN without a usable pair).
fn error_factor(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let pairs: Vec<(f64, f64)> = pairs.collect();
    crate::roofline::median_abs_log2_error(&pairs).map_or(f64::NAN, f64::exp2)
}

/// The terms for `samples`: t − o = c + roof_s / f + τ·depth, weighted least squares on
/// relative error, the first of `model`'s sets of terms ([`Model::columns`]) whose fit has more
/// samples than terms and no term below 0; where none does, `f` alone. `f` may pass 1: a
/// measured roof is itself a measurement, and a cache-resident working set beats the copy it
/// was taken from. A model without the work term leaves `f` at [`NO_WORK_TERM`].
fn fit(samples: &[Sample], overhead_s: f64, model: Model) -> Terms {
    // One parameter: the median of the launches' achieved fractions (robust to one odd
    // launch; picking the fraction with the smallest in-sample error held out worse), over
    // the launches whose time is mostly work: one within the dispatch overhead's noise says
    // nothing about the fraction (on lavapipe a 64 K add took less than the overhead
    // measured, and its "fraction" came out 4.5).
    let direct = || {
        let mut f: Vec<f64> = samples
            .iter()
            .filter(|s| s.measured_s - overhead_s > INFORMATIVE * s.measured_s)
            .map(|s| s.roof_s / (s.measured_s - overhead_s))
            .collect();
        f.sort_by(f64::total_cmp);
        Terms {
            // An even count takes the upper middle (the faster launch of two: averaging the
            // middle two held out worse on the H200's norms, 1.42× against 1.13×).
            efficiency: f.get(f.len() / 2).copied().unwrap_or(1.0),
            latency_s: 0.0,
            depth_s: 0.0,
            workgroup_s: 0.0,
        }
    };
    let y: Vec<f64> = samples.iter().map(|s| s.measured_s - overhead_s).collect();
    let w: Vec<f64> = samples
        .iter()
        .map(|s| 1.0 / (s.measured_s * s.measured_s))
        .collect();
    for &columns in model.columns() {
        // Over-determined fits only: p terms from at least p + 1 launches.
        if samples.len() <= columns.len() {
            continue;
        }
        let x: Vec<Vec<f64>> = samples
            .iter()
            .map(|s| {
                let all = [1.0, s.roof_s, s.depth, s.units];
                columns.iter().map(|&c| all[c]).collect()
            })
            .collect();
        let Some(b) = weighted_least_squares(&x, &y, &w) else {
            continue;
        };
        let term = |c: usize| columns.iter().position(|&k| k == c).map_or(0.0, |i| b[i]);
        let (c, slope, tau, omega) = (term(0), term(1), term(2), term(3));
        let work = columns.contains(&1);
        // Outside the model (time falling with work, depth or launch units, a negative fixed
        // cost): the next, smaller one.
        if (slope > 0.0 || !work) && c >= 0.0 && tau >= 0.0 && omega >= 0.0 {
            return Terms {
                efficiency: if work { 1.0 / slope } else { NO_WORK_TERM },
                latency_s: c,
                depth_s: tau,
                workgroup_s: omega,
            };
        }
    }
    direct()
}

/// `b` minimising Σ w_i (x_i · b − y_i)² (normal equations on columns scaled to unit size,
/// Gaussian elimination with partial pivoting); `None` where the columns are dependent.
fn weighted_least_squares(x: &[Vec<f64>], y: &[f64], w: &[f64]) -> Option<Vec<f64>> {
    let n = x.first()?.len();
    let scale: Vec<f64> = (0..n)
        .map(|j| x.iter().map(|r| r[j].abs()).fold(0.0, f64::max))
        .collect();
    if scale.iter().any(|s| *s <= 0.0 || !s.is_finite()) {
        return None;
    }
    // The augmented normal equations [XᵀWX | XᵀWy] on the scaled columns.
    let mut a = vec![vec![0.0; n + 1]; n];
    for ((r, yi), wi) in x.iter().zip(y).zip(w) {
        for i in 0..n {
            let xi = r[i] / scale[i];
            for j in 0..n {
                a[i][j] += wi * xi * r[j] / scale[j];
            }
            a[i][n] += wi * xi * yi;
        }
    }
    let norm = a.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
    for col in 0..n {
        let pivot = (col..n).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[pivot][col].abs() <= 1e-12 * norm {
            return None;
        }
        a.swap(col, pivot);
        let p = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / p[col];
                for (x, pk) in row.iter_mut().zip(&p).skip(col) {
                    *x -= f * pk;
                }
            }
        }
    }
    Some((0..n).map(|i| a[i][n] / a[i][i] / scale[i]).collect())
}

fn predict(s: &Sample, overhead_s: f64, t: Terms) -> f64 {
    t.time(overhead_s, s.roof_s, s.depth, s.units)
}

impl Terms {
    /// `o + c + x / (R · f) + τ · K + ω · W`: a launch with `roof_s` of work on its roof,
    /// depth `depth` and `units` launch units, seconds (the module's model, in one place).
    fn time(&self, overhead_s: f64, roof_s: f64, depth: f64, units: f64) -> f64 {
        overhead_s
            + self.latency_s
            + roof_s / self.efficiency
            + self.depth_s * depth
            + self.workgroup_s * units
    }
}

/// A launch's work on the roof that bounds its kind, in seconds (`x / R`): its bytes at the
/// bandwidth, or its FLOPs at the peak — the whole tiles' FLOPs where the sweep knew the
/// kernel's tiling ([`OpCost::work_flops`]: 16 rows in 128-row tiles take 128 rows' time,
/// as lavapipe's Linear layers of 16, 64 and 128 rows did, 7.8–8.0 ms each).
fn on_roof(bound: Bound, cost: &OpCost, roof: &Ceilings) -> f64 {
    match bound {
        Bound::Memory => cost.bytes / roof.bandwidth,
        Bound::Compute => cost.work_flops() / roof.peak_flops,
    }
}

/// The efficiency of a fit without a work term (its launches' time follows their depth and
/// not their bytes): the largest finite one, so that the work prices nothing.
pub const NO_WORK_TERM: f64 = f64::MAX;

/// The terms a kind's fit may take: sets of columns of `t − o` — 0 the fixed cost `c`, 1 the
/// work on the roof (`1/f`), 2 the depth (`τ`), 3 the launch units (`ω`) — tried fullest first
/// ([`fit`]).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Model {
    /// `c` and `f`.
    Work,
    /// `c`, `f` and `τ`.
    WorkAndDepth,
    /// `c` and `τ`: no work term.
    Depth,
    /// `c`, `f` and `ω`.
    WorkAndUnits,
    /// `c`, `f`, `τ` and `ω`: a compute-bound kind's depth term kept beside a time per unit.
    WorkDepthAndUnits,
}

impl Model {
    fn columns(self) -> &'static [&'static [usize]] {
        match self {
            Model::Work => &[&[0, 1]],
            Model::WorkAndDepth => &[&[0, 1, 2], &[1, 2], &[0, 1]],
            Model::Depth => &[&[0, 2], &[0, 1]],
            Model::WorkAndUnits => &[&[0, 1, 3], &[1, 3], &[0, 1]],
            Model::WorkDepthAndUnits => &[&[0, 1, 2, 3], &[1, 2, 3], &[0, 1, 2]],
        }
    }

    /// The model of a kind's fit, where its launches have a depth: with the depth term for a
    /// compute-bound kind; for a memory-bound one of five launches or more, the work term
    /// alone unless a model with the depth term (instead of the work term, then beside it)
    /// predicts the kind's launches held out [`BETTER_BY`] better than the model before (a
    /// decode step's attention over the KV cache: one workgroup a KV head walks the keys tile
    /// after tile, its time following the keys and not the bytes of its heads, which take SMs
    /// of their own: 1.20–1.22× → 1.06–1.08× held out on the H200's runs 152 and 154; a
    /// product streams its bytes, and a model without them, though as good on the sweep's
    /// launches, would price a wider one as a narrow one); where the launches state their
    /// units (workgroups, or invocations), a time per unit beside the terms before is one
    /// more such candidate, the depth term kept for a compute-bound kind (a CPU driver runs a
    /// workgroup on a thread, its invocations in turn: SwiftShader's row kinds, the decode
    /// products on the CPU drivers). Choosing by the held-out error flatters that error a
    /// little.
    fn of(bound: Bound, samples: &[Sample], overhead_s: f64) -> Self {
        // The models that may take over, fewest terms first: with depths, the depth term
        // instead of the work term, then beside it (memory-bound kinds); where the launches
        // state their units (the row kernels: a workgroup a row; the decode products: their
        // invocations), a time per unit beside the terms (SwiftShader's 4096 rows of 1024
        // took 1.2× the time of 4096 of 384 where their bytes are 2.7×).
        // A compute-bound kind with depths starts from the depth term beside its work (a
        // small product's time follows K), any other from the work term alone.
        let depth = samples.iter().any(|s| s.depth > 0.0);
        let base = if depth && bound == Bound::Compute {
            Model::WorkAndDepth
        } else {
            Model::Work
        };
        let mut candidates = Vec::new();
        if depth && bound == Bound::Memory {
            candidates.extend([Model::Depth, Model::WorkAndDepth]);
        }
        if samples.iter().all(|s| s.units > 0.0) {
            candidates.push(if base == Model::WorkAndDepth {
                Model::WorkDepthAndUnits
            } else {
                Model::WorkAndUnits
            });
        }
        // Held out, every model's fullest fit must be over-determined (a kind of four launches
        // would compare the three-term model's fallbacks with the others' full fits).
        let fullest = candidates.iter().map(|m| m.columns()[0].len()).max();
        if fullest.is_none_or(|n| samples.len() < n + 2) {
            return base;
        }
        // Each takes over only where it is clearly better, so a kind keeps its bytes unless
        // its launches' times plainly do not follow them.
        let error = |m| held_out_error(samples, overhead_s, m).unwrap_or(f64::INFINITY);
        let mut best = (base, error(base));
        for m in candidates {
            let e = error(m);
            if e * BETTER_BY < best.1 {
                best = (m, e);
            }
        }
        best.0
    }
}

/// How much better (a factor on the held-out error) a model with more terms must predict a
/// kind's launches than the model before it ([`Model::of`]: a depth term for a memory-bound
/// kind, a time per launch unit for any): 5 %, about what a kind's held-out error moved
/// between two sweeps of the same kernels (runs 151 and 152 on the H200).
const BETTER_BY: f64 = 1.05;

/// The error factor of `samples` each predicted by a fit on the others (`None` for a lone
/// sample).
fn held_out_error(samples: &[Sample], overhead_s: f64, model: Model) -> Option<f64> {
    let held = held_out(samples, overhead_s, model);
    (samples.len() > 1).then(|| {
        error_factor(
            held.iter()
                .zip(samples)
                .filter_map(|(p, s)| Some(((*p)?, s.measured_s))),
        )
    })
}

/// The timed launches of kind (`op`, `dtype`) in `report`: the roof the kind is held against
/// (the bound of the launches that take most of its measured time: a GEMM kind whose small
/// launches are memory-bound by intensity but whose long ones are compute-bound is held
/// against the compute roof, with the depth term; counting launches instead fitted MiniLM's
/// f16 residual projections to the bandwidth, 1.51× held out, against 1.22×) and each
/// launch's row index and sample.
/// Its launch units are invocations where every launch states them
/// ([`KindFit::per_invocation`]), else workgroups.
fn kind_samples(report: &BenchReport, op: &str, dtype: &str) -> KindSamples {
    let rows: Vec<(usize, &Row)> = report
        .rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.op == op && r.dtype == dtype && r.measured_ms.is_some())
        .collect();
    let time = |b: Option<Bound>| -> f64 {
        rows.iter()
            .filter(|(_, r)| b.is_none_or(|b| r.bound == b))
            .map(|(_, r)| r.measured_ms.unwrap_or(0.0))
            .sum()
    };
    let bound = if 2.0 * time(Some(Bound::Memory)) >= time(None) {
        Bound::Memory
    } else {
        Bound::Compute
    };
    let (roof, _) = report.measured.roof_for(op, dtype == "f16");
    let per_invocation = rows.iter().all(|(_, r)| r.invocations > 0.0);
    let samples = rows
        .into_iter()
        .map(|(i, r)| {
            let sample = Sample {
                roof_s: on_roof(bound, &r.cost(), &roof),
                depth: r.depth,
                units: r.cost().units(per_invocation),
                measured_s: r.measured_ms.unwrap_or(0.0) * 1e-3,
                roofline_s: r.predicted_measured_ms * 1e-3,
            };
            (i, sample)
        })
        .collect();
    KindSamples {
        bound,
        per_invocation,
        samples,
    }
}

/// Each sample predicted by a fit on the others (`None` for a lone sample).
fn held_out(samples: &[Sample], overhead_s: f64, model: Model) -> Vec<Option<f64>> {
    (0..samples.len())
        .map(|i| {
            let rest: Vec<Sample> = samples
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, s)| *s)
                .collect();
            (!rest.is_empty())
                .then(|| predict(&samples[i], overhead_s, fit(&rest, overhead_s, model)))
        })
        .collect()
}

/// The op kinds of `report` with a timed launch, in order of appearance.
fn kinds_of(report: &BenchReport) -> Vec<(String, String)> {
    let mut kinds: Vec<(String, String)> = Vec::new();
    for r in &report.rows {
        let k = (r.op.clone(), r.dtype.clone());
        if r.measured_ms.is_some() && !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    kinds
}

fn overhead_of(report: &BenchReport) -> f64 {
    report.measured.dispatch_overhead_us.unwrap_or(0.0) * 1e-6
}

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
        };
        let roof_s = on_roof(k.bound, cost, &roof);
        let units = cost.units(k.per_invocation);
        Some(terms.time(self.overhead_s, roof_s, cost.depth, units))
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
        let fitted = self
            .fit
            .kinds
            .iter()
            .any(|k| k.op == op.name && k.dtype == dtype);
        match op.priced {
            _ if !fitted => own(),
            Priced::Own => self.price(&op.name, dtype, &op.cost, roof),
            Priced::Whole(whole) => self.price(&op.name, dtype, &whole, roof),
            Priced::Folded => (0.0, true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(name: &str) -> BenchReport {
        let text = match name {
            "h200" => include_str!("../../../benches/reports/h200.json"),
            "h200-decoder" => include_str!("../../../benches/reports/h200-decoder.json"),
            "lavapipe" => include_str!("../../../benches/reports/lavapipe.json"),
            "llvmpipe" => include_str!("../../../benches/reports/llvmpipe.json"),
            "swiftshader" => include_str!("../../../benches/reports/swiftshader.json"),
            other => panic!("no shipped report {other}"),
        };
        serde_json::from_str(text).unwrap()
    }

    /// Launches made from known terms are fitted back exactly: with a depth term on a
    /// compute-bound kind, and without one where the launches carry no depth.
    #[test]
    fn known_terms_are_recovered() {
        for tau in [3e-9, 0.0] {
            let mut r = shipped("h200");
            let o = r.measured.dispatch_overhead_us.unwrap() * 1e-6;
            let (roof, _) = r.measured.roof_for("gemm", false);
            let (f, c) = (0.55, 7e-6);
            r.rows.retain(|row| row.op == "gemm" && row.dtype == "f32");
            for row in &mut r.rows {
                row.bound = Bound::Compute;
                if tau == 0.0 {
                    row.depth = 0.0;
                }
                let t = o + c + row.flops / (roof.peak_flops * f) + tau * row.depth;
                row.measured_ms = Some(t * 1e3);
            }
            let fit = Calibration::fit(&r);
            let k = &fit.kinds[0];
            assert!(
                (k.efficiency - f).abs() < 1e-6
                    && (k.latency_s - c).abs() < 1e-11
                    && (k.depth_s - tau).abs() < 1e-14,
                "{k:?}"
            );
            assert!(k.fitted_error < 1.0 + 1e-6 && k.held_out_error.unwrap() < 1.0 + 1e-6);
            let row = &r.rows[2];
            let t = fit.predict(&r, "gemm", "f32", &row.cost()).unwrap();
            assert!((t * 1e3 / row.measured_ms.unwrap() - 1.0).abs() < 1e-6);
            assert_eq!(
                fit.predict(&r, "softmax", "f32", &OpCost::new(1.0, 1.0)),
                None
            );
        }
    }

    /// A row kind's time per workgroup is fitted where its launches' times follow their rows
    /// and not only their bytes, recovered exactly from the shipped lavapipe report's
    /// layer-norm rows remade from known terms; where they follow the bytes alone, no
    /// workgroup term is fitted; a cost without workgroups prices none.
    #[test]
    fn a_row_kinds_time_per_workgroup_is_recovered() {
        for omega in [30e-6, 0.0] {
            let mut r = shipped("lavapipe");
            let o = r.measured.dispatch_overhead_us.unwrap() * 1e-6;
            let (f, c) = (0.8, 20e-6);
            r.rows
                .retain(|row| row.op == "layer_norm" && row.dtype == "f32");
            assert!(r.rows.len() >= 5 && r.rows.iter().all(|row| row.workgroups > 0.0));
            let bandwidth = r.measured.bandwidth_gbps * 1e9;
            for row in &mut r.rows {
                row.bound = Bound::Memory;
                let t = o + c + row.bytes / (bandwidth * f) + omega * row.workgroups;
                row.measured_ms = Some(t * 1e3);
            }
            let fit = Calibration::fit(&r);
            let k = &fit.kinds[0];
            assert!(
                (k.efficiency - f).abs() < 1e-6 && (k.workgroup_s - omega).abs() < 1e-12,
                "{k:?}"
            );
            assert!(k.held_out_error.unwrap() < 1.0 + 1e-6, "{k:?}");
            let row = &r.rows[1];
            let t = fit.predict(&r, "layer_norm", "f32", &row.cost()).unwrap();
            assert!((t * 1e3 / row.measured_ms.unwrap() - 1.0).abs() < 1e-6);
            let unstated = OpCost {
                workgroups: 0.0,
                ..row.cost()
            };
            let bare = fit.predict(&r, "layer_norm", "f32", &unstated).unwrap();
            assert!((t - bare - omega * row.workgroups).abs() < 1e-12);
        }
    }

    /// A memory-bound kind's model is chosen by its launches: the decode attention's rows of
    /// the shipped decoder report, their times remade from known terms, give back a fit on
    /// the keys alone (no work term) where time follows the keys, a fit on the bytes alone
    /// where it follows the bytes, and both where it follows both, each exact held out (rows
    /// at four head counts: bytes and keys vary apart). A report's JSON keeps a fit without
    /// a work term.
    #[test]
    fn a_memory_bound_kinds_model_follows_its_launches() {
        let r = shipped("h200-decoder");
        let o = r.measured.dispatch_overhead_us.unwrap() * 1e-6;
        let bandwidth = r.measured.roof_for("kv_attention", false).0.bandwidth;
        let c = 4e-6;
        for (f, tau) in [(None, 16e-9), (Some(0.3), 0.0), (Some(0.05), 16e-9)] {
            let mut r = r.clone();
            r.rows
                .retain(|row| row.op == "kv_attention" && row.dtype == "f32");
            assert!(r.rows.len() >= 8);
            for row in &mut r.rows {
                let work = f.map_or(0.0, |f| row.bytes / (bandwidth * f));
                row.measured_ms = Some((o + c + work + tau * row.depth) * 1e3);
            }
            let fit = Calibration::fit(&r);
            let k = &fit.kinds[0];
            assert_eq!(k.bound, Bound::Memory);
            let efficiency = f.unwrap_or(NO_WORK_TERM);
            assert!(
                (k.efficiency / efficiency - 1.0).abs() < 1e-6
                    && (k.latency_s - c).abs() < 1e-11
                    && (k.depth_s - tau).abs() < 1e-14,
                "{f:?} {tau}: {k:?}"
            );
            assert!(k.held_out_error.unwrap() < 1.0 + 1e-6, "{k:?}");
            let text = serde_json::to_string(&fit).unwrap();
            let back: Calibration = serde_json::from_str(&text).unwrap();
            let e = back.kinds[0].efficiency;
            assert!(
                e.is_finite() && (e / efficiency - 1.0).abs() < 1e-12,
                "{text}"
            );
        }
    }

    /// On the shipped H200 report (run 135: the encoder's kinds in f32 and f16, GEMMs square
    /// and at MiniLM's shapes) every op kind is predicted within 1.2× held out (the issue asks
    /// 1.15×: the f32 GEMM's 1.17× misses it), where the roofline alone was 2–3.5× off for
    /// GEMM and attention.
    /// A report's stored terms do not price anything: with every stored kind made 10× as
    /// efficient, a GEMM is priced as its rows' fit prices it.
    #[test]
    fn stored_terms_are_not_trusted() {
        let r = shipped("h200");
        let honest = Calibrated::new(r.clone());
        let mut edited = r;
        let mut terms = Calibration::fit(&edited);
        for k in &mut terms.kinds {
            k.efficiency *= 10.0;
        }
        edited.calibration = Some(terms);
        let edited = Calibrated::new(edited);
        let n = 4096.0_f64;
        let cost = OpCost::new(2.0 * n.powi(3), 3.0 * n * n * 4.0).with_depth(n);
        let roof = edited.report.measured.ceilings(false);
        let (a, fitted) = honest.price("gemm", "f32", &cost, &roof);
        assert!(fitted);
        assert_eq!(edited.price("gemm", "f32", &cost, &roof), (a, true));
    }

    /// MiniLM's f32 batch-1 plan with its GEMMs split along K as the H200's kernel splits the
    /// residual projections: each split pair priced once at its whole GEMM by a report that
    /// fitted its kind (the reduce at 0), each dispatch by its own roofline by one that did
    /// not; the unsplit plan's GEMMs priced the same way as the pair.
    #[test]
    fn a_split_gemm_is_one_launch_of_its_kind() {
        use crate::transformer::{TransformerShape, encoder_ops, encoder_ops_split};
        let s = TransformerShape::minilm_l6();
        let split = |_: usize, n: usize, _: usize| if n == s.hidden { 3 } else { 1 };
        let plan = encoder_ops_split(&s, 1, 128, true, 4, &split);
        let whole = encoder_ops(&s, 1, 128, true, 4);
        let fitted = Calibrated::new(shipped("h200"));
        let roof = fitted.report.measured.ceilings(false);
        let price = |ops: &[PlannedOp], name: &str| -> f64 {
            ops.iter()
                .filter(|o| o.name == name)
                .map(|o| fitted.price_planned(o, "f32", &roof).0)
                .sum()
        };
        let pairs = plan.iter().filter(|o| o.priced == Priced::Folded).count();
        assert_eq!(pairs, 2 * s.layers, "the two residual projections a layer");
        let (a, b) = (
            price(&plan, "linear_residual"),
            price(&whole, "linear_residual"),
        );
        assert!((a - b).abs() <= 1e-12 * b, "{a} vs {b}");
        for o in plan.iter().filter(|o| o.name.starts_with("linear")) {
            let (t, was_fitted) = fitted.price_planned(o, "f32", &roof);
            assert!(was_fitted, "{o:?}");
            assert_eq!(t == 0.0, o.priced == Priced::Folded, "{o:?}");
        }
        // A report without the kind: every dispatch at its own roofline, the reduce too.
        let mut bare = shipped("h200");
        bare.rows.retain(|r| r.op != "linear_residual");
        let bare = Calibrated::new(bare);
        assert!(!bare.fit.kinds.iter().any(|k| k.op == "linear_residual"));
        for o in plan.iter().filter(|o| o.name == "linear_residual") {
            let own = roof.predict(&o.cost).seconds;
            assert_eq!(bare.price_planned(o, "f32", &roof), (own, false));
        }
    }

    #[test]
    fn the_h200_report_held_out() {
        let fit = Calibration::fit(&shipped("h200"));
        assert_eq!(fit.kinds.len(), 24);
        for k in &fit.kinds {
            let held = k.held_out_error.unwrap();
            println!(
                "{} {}: efficiency {:.3}, fixed {:.2} µs, roofline {:.2}×, fitted {:.2}×, held out {held:.2}×",
                k.op,
                k.dtype,
                k.efficiency,
                k.latency_s * 1e6,
                k.roofline_error,
                k.fitted_error
            );
            // Every kind within the 1.15× goal but the f32 dense attention (1.19×: MiniLM's
            // 32 sequences of 128 tokens and single sequences of 512–8192 under one fit).
            let bound = if k.op == "attention" && k.dtype == "f32" {
                1.2
            } else {
                1.15
            };
            assert!(held <= bound, "{} {}: {held:.3}× held out", k.op, k.dtype);
            assert!(k.efficiency > 0.0 && k.latency_s >= 0.0);
            // The Linear layers' kinds are held against the compute roof (most of their
            // time is in compute-bound launches) with the depth term.
            if k.op.starts_with("linear") {
                assert!(k.bound == Bound::Compute && k.depth_s > 0.0, "{k:?}");
            }
        }
        let gemm = |dtype: &str| {
            fit.kinds
                .iter()
                .find(|k| k.op == "gemm" && k.dtype == dtype)
        };
        let (f32, f16) = (gemm("f32").unwrap(), gemm("f16").unwrap());
        assert!(f32.roofline_error > 1.8 && f32.held_out_error.unwrap() < 1.2);
        assert!(f32.depth_s > 0.0 && f16.depth_s > 0.0, "{f32:?} {f16:?}");
        assert!(f16.roofline_error > 2.5 && f16.held_out_error.unwrap() < 1.15);
    }

    /// The decoder's kernels on the H200 (`ridge bench --op` of every decoder kind, run 154:
    /// the integer matrix-vector kernel's kinds and a decode step's attention at four head
    /// counts new, each case after up to 200 ms of warm-up): the median kind held out within
    /// the issue's 1.15×; every kind within 1.3× of its own launches and held out, the decode
    /// products within 1.25× (the LM head's f16 kind 1.20×, the others 1.01–1.13×; run 152,
    /// warmed by 2000 launches at most, had 6 of 30 kinds past 1.25×, up to 2.42×: whole
    /// widths timed 2–3× slow at idle clocks); every fit better than its roofline; the f32
    /// prompt kinds within 1.2×; the one-pass decode attention priced by its keys, without a
    /// work term, within 1.1× (1.20–1.22× by its bytes in run 152); the tensor-core kinds
    /// held against the tensor cores' roof. (The end-to-end check, decoders
    /// priced against the wall clock of the same call, is the CLI's
    /// `predict_prices_ridges_decoder_plan_with_a_reports_terms`.)
    #[test]
    fn decoder_kinds_fit_their_launches() {
        let r = shipped("h200-decoder");
        let fit = Calibration::fit(&r);
        assert_eq!(fit.kinds.len(), 30, "15 decoder kinds × f32, f16");
        for k in &fit.kinds {
            println!(
                "{} {}: efficiency {:.3}, fixed {:.2} µs, {:.2} ns per depth, roofline {:.2}×, fitted {:.2}×, held out {:.2}×",
                k.op,
                k.dtype,
                k.efficiency,
                k.latency_s * 1e6,
                k.depth_s * 1e9,
                k.roofline_error,
                k.fitted_error,
                k.held_out_error.unwrap_or(f64::NAN)
            );
            let limit = if k.op.contains("qmatvec") { 1.25 } else { 1.3 };
            assert!(
                k.fitted_error <= limit,
                "{} {}: {:.3}×",
                k.op,
                k.dtype,
                k.fitted_error
            );
            assert!(k.roofline_error > k.fitted_error, "{k:?}");
            let held = k.held_out_error.unwrap();
            assert!(held <= limit, "{} {}: {held:.3}× held out", k.op, k.dtype);
            let prompt_kinds = [
                "qmatmul",
                "rms_qmatmul_swiglu",
                "kv_attention_prefill",
                "attention_causal",
            ];
            if k.dtype == "f32" && prompt_kinds.contains(&k.op.as_str()) {
                assert!(held <= 1.2, "{} {}: {held:.3}× held out", k.op, k.dtype);
            }
            if k.op == "kv_attention" {
                assert!(k.efficiency == NO_WORK_TERM && k.depth_s > 0.0, "{k:?}");
                assert!(held <= 1.1, "{} {}: {held:.3}× held out", k.op, k.dtype);
            }
        }
        let median = fit.median_held_out().unwrap();
        assert!(median <= 1.15, "median kind {median:.3}× held out");
        let (tensor, name) = r.measured.roof_for("rms_qmatmul_swiglu", true);
        assert_eq!(name, "measured tensor cores");
        assert!(tensor.peak_flops > 5e14);
        assert_eq!(
            r.measured.roof_for("rms_qmatvec_swiglu", true).1,
            "measured f16 FMA"
        );
    }

    /// The CPU drivers' reports (`ridge bench --size medium` on lavapipe, Vulkan, and on
    /// llvmpipe, OpenGL, 2 cores; benches/NOTES.md "the CPU drivers calibrated" and "the CPU
    /// drivers' decode products priced by their invocations"): every kind of the full sweep in
    /// its storage types; the median kind held out within the 1.15× goal where the median
    /// kind's roofline is 3× and 8× off; no kind beyond 1.5×; the Linear kinds within 1.12×
    /// and the GEMMs within 1.25× once their launches are priced by the whole 128-row tiles
    /// the CPU kernel computes (a Linear layer of 16, 64 or 128 rows took 7.8–8.0 ms alike),
    /// where their useful FLOPs fit them worse; the decode products within 1.1× once priced
    /// by their invocations beside their bytes (seven widths a kind: 1.12–1.40× with four
    /// and their bytes alone).
    #[test]
    fn cpu_driver_reports_held_out() {
        for (name, kinds) in [("lavapipe", 46), ("llvmpipe", 25)] {
            let r = shipped(name);
            let fit = Calibration::fit(&r);
            assert_eq!(fit.kinds.len(), kinds, "{name}");
            let median = fit.median_held_out().unwrap();
            assert!(median <= 1.15, "{name}: median kind {median:.3}× held out");
            let mut roofline: Vec<f64> = fit.kinds.iter().map(|k| k.roofline_error).collect();
            roofline.sort_by(f64::total_cmp);
            assert!(roofline[roofline.len() / 2] > 3.0, "{name}: {roofline:?}");
            for k in &fit.kinds {
                let held = k.held_out_error.unwrap();
                println!(
                    "{name} {} {}: roofline {:.2}×, held out {held:.2}×",
                    k.op, k.dtype, k.roofline_error
                );
                assert!(held <= 1.5, "{name} {k:?}");
                let bound = match k.op.as_str() {
                    "gemm" => 1.25,
                    op if op.starts_with("linear") => 1.12,
                    op if op.contains("qmatvec") => 1.1,
                    _ => 1.5,
                };
                assert!(held <= bound, "{name} {} {}: {held:.3}×", k.op, k.dtype);
            }
            // Priced by their useful FLOPs instead, the padded Linear launches fit worse.
            let mut useful = r.clone();
            useful.rows.iter_mut().for_each(|row| row.tiled_flops = 0.0);
            let linear = |f: &Calibration| {
                f.kinds
                    .iter()
                    .find(|k| k.op == "linear" && k.dtype == "f32")
                    .and_then(|k| k.held_out_error)
                    .unwrap()
            };
            let (tiles, flops) = (linear(&fit), linear(&Calibration::fit(&useful)));
            assert!(
                tiles < 1.1 && flops > 1.2,
                "{name}: {tiles:.3}× against {flops:.3}×"
            );
            // Priced per workgroup instead of per invocation, the LM head (3,072 workgroups
            // at every K, of 128 or 256 invocations) keeps its bytes alone and misses.
            let mut by_workgroups = r.clone();
            by_workgroups
                .rows
                .iter_mut()
                .for_each(|row| row.invocations = 0.0);
            let head = |f: &Calibration| {
                f.kinds
                    .iter()
                    .find(|k| k.op == "rms_qmatvec" && k.dtype == "f32")
                    .and_then(|k| k.held_out_error)
                    .unwrap()
            };
            let (units, groups) = (head(&fit), head(&Calibration::fit(&by_workgroups)));
            assert!(
                units < 1.1 && groups > 1.15,
                "{name}: {units:.3}× against {groups:.3}×"
            );
        }
    }

    /// The browser's adapter (`cargo xtask bench-browser`: the medium sweep in headless
    /// Chromium's WebGPU on SwiftShader, 2 cores, GPU timestamps; benches/NOTES.md): 25 kinds
    /// in f32 (no `shader-f16`), the median kind held out within the 1.15× goal where its
    /// roofline is 8–60× off. SwiftShader runs a workgroup on a CPU thread, its invocations
    /// in turn: the row kinds need their workgroups (4096 rows of 1024 took 1.2–1.4× the time
    /// of 4096 of 384 where their bytes are 2.7×; held out 1.5–1.75× without a time per
    /// workgroup, within 1.2× with it, sweep to sweep), the decode products their invocations
    /// (1.25–1.41× on bytes alone and four widths, 1.05–1.20× with seven).
    #[test]
    fn browser_adapter_report_held_out() {
        let r = shipped("swiftshader");
        assert!(r.adapter.contains("swiftshader"), "{}", r.adapter);
        let fit = Calibration::fit(&r);
        assert_eq!(fit.kinds.len(), 25);
        let median = fit.median_held_out().unwrap();
        assert!(median <= 1.15, "median kind {median:.3}× held out");
        let mut roofline: Vec<f64> = fit.kinds.iter().map(|k| k.roofline_error).collect();
        roofline.sort_by(f64::total_cmp);
        assert!(roofline[roofline.len() / 2] > 5.0, "{roofline:?}");
        // The same report with no launch units stated: its kinds fit on their other terms.
        let mut unitless = r.clone();
        unitless.rows.iter_mut().for_each(|row| {
            row.workgroups = 0.0;
            row.invocations = 0.0;
        });
        let without = Calibration::fit(&unitless);
        for (k, bare) in fit.kinds.iter().zip(&without.kinds) {
            let held = k.held_out_error.unwrap();
            let bare_held = bare.held_out_error.unwrap();
            println!(
                "swiftshader {} {}: roofline {:.2}×, held out {held:.2}× ({bare_held:.2}× \
                 without units), {:.2} µs per {}",
                k.op,
                k.dtype,
                k.roofline_error,
                k.workgroup_s * 1e6,
                if k.per_invocation {
                    "invocation"
                } else {
                    "workgroup"
                }
            );
            let row_kind = k.op.ends_with("norm") || k.op == "softmax";
            let decode = k.op.contains("qmatvec");
            if row_kind || decode {
                assert!(k.workgroup_s > 0.0 && k.per_invocation == decode, "{k:?}");
                // The row kinds' times follow their rows far more than their bytes; the decode
                // products' their invocations beside their bytes and depth.
                let by = if row_kind { 1.3 } else { 1.05 };
                assert!(
                    held * by < bare_held,
                    "{} {}: {held:.3}× against {bare_held:.3}×",
                    k.op,
                    k.dtype
                );
            }
            let bound = if row_kind || decode { 1.25 } else { 1.45 };
            assert!(held <= bound, "{} {}: {held:.3}×", k.op, k.dtype);
            assert!(held < k.roofline_error, "{k:?}");
        }
    }

    /// A kind with one launch has no held-out error; a report without timed launches, no kinds.
    #[test]
    fn thin_reports() {
        let mut one = shipped("h200");
        let first = one.rows.iter().position(|r| r.op == "transpose").unwrap();
        one.rows = vec![one.rows[first].clone()];
        let fit = Calibration::fit(&one);
        let t = fit.kinds.iter().find(|k| k.op == "transpose").unwrap();
        assert_eq!((t.rows, t.held_out_error), (1, None));
        let mut r = shipped("h200");
        r.rows.iter_mut().for_each(|row| row.measured_ms = None);
        assert!(Calibration::fit(&r).kinds.is_empty());
    }
}
