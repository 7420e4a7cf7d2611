//! Fitting one kind's terms: weighted least squares over its timed launches, the models a
//! kind may take, and each launch predicted held out.

use super::{INFORMATIVE, NO_WORK_TERM};
use crate::cost::OpCost;
use crate::report::{BenchReport, Row};
use crate::roofline::{Bound, Ceilings};

/// A timed launch: work on its roof (x / R, seconds), reduction depth, measured time
/// (seconds), and the roofline's time.
#[derive(Clone, Copy)]
pub(super) struct Sample {
    pub(super) roof_s: f64,
    pub(super) depth: f64,
    /// Its launch units ([`OpCost::units`]).
    pub(super) units: f64,
    /// Its workgroups ([`OpCost::workgroups`]; 0 where not stated): what its waves over the
    /// GPU are counted in.
    pub(super) workgroups: f64,
    pub(super) measured_s: f64,
    pub(super) roofline_s: f64,
}

/// A kind's timed launches ([`kind_samples`]): the roof they are held against, whether their
/// launch units are invocations, and each launch's row index and sample.
pub(super) struct KindSamples {
    pub(super) bound: Bound,
    pub(super) per_invocation: bool,
    pub(super) samples: Vec<(usize, Sample)>,
}

/// A kind's fitted terms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Terms {
    /// `f_k`.
    pub(super) efficiency: f64,
    /// `c_k`, seconds.
    pub(super) latency_s: f64,
    /// `τ_k`, seconds per step of depth.
    pub(super) depth_s: f64,
    /// `ω_k`, seconds per workgroup.
    pub(super) workgroup_s: f64,
    /// `S_k`, the workgroups that run at once (0: no waves term).
    pub(super) slots: f64,
}

/// The median error of (predicted, measured) pairs as a factor: 2 to the power of
/// [`crate::roofline::median_abs_log2_error`] (NaN without a usable pair).
pub(super) fn error_factor(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let pairs: Vec<(f64, f64)> = pairs.collect();
    crate::roofline::median_abs_log2_error(&pairs).map_or(f64::NAN, f64::exp2)
}

/// The terms for `samples`: t − o = c + roof_s / f + τ·depth, weighted least squares on
/// relative error, the first of `model`'s sets of terms ([`Model::columns`]) whose fit has more
/// samples than terms and no term below 0; where none does but only because time did not
/// grow with the work (the launches' times flat or falling across their bytes: greedy's
/// argmax over 32,000 to 256,000 logits took 14.2–14.4 µs on an H100, in no order of size),
/// `c` alone; else `f` alone. `f` may pass 1: a measured roof is itself a measurement, and a
/// cache-resident working set beats the copy it was taken from. A model without the work term
/// leaves `f` at [`NO_WORK_TERM`].
pub(super) fn fit(samples: &[Sample], overhead_s: f64, model: Model) -> Terms {
    if !model.waves() {
        return fit_terms(samples, overhead_s, model);
    }
    // The waves term's `S`: each candidate's terms fitted on the launches padded to whole
    // waves, the one with the smallest weighted squared relative error kept (ties to the
    // larger `S`, the fewer waves).
    let mut best: Option<(f64, Terms)> = None;
    for slots in slot_candidates(samples) {
        let padded: Vec<Sample> = samples.iter().map(|s| s.in_waves(slots)).collect();
        let terms = Terms {
            slots,
            ..fit_terms(&padded, overhead_s, model)
        };
        let sse: f64 = samples
            .iter()
            .map(|s| (predict(s, overhead_s, terms) / s.measured_s - 1.0).powi(2))
            .sum();
        if best.is_none_or(|(b, _)| sse < b * (1.0 - 1e-9)) {
            best = Some((sse, terms));
        }
    }
    best.map_or_else(|| fit_terms(samples, overhead_s, model), |(_, t)| t)
}

/// The values of `S` worth trying for `samples`' waves, largest first: `ceil(G / n)` for each
/// launch's workgroups `G` and `n` = 1 to [`MAX_WAVES`] waves (between two of them every
/// launch's count of waves, and so the fit, is the same).
fn slot_candidates(samples: &[Sample]) -> Vec<f64> {
    let mut s: Vec<f64> = samples
        .iter()
        .filter(|s| s.workgroups >= 1.0)
        .flat_map(|s| (1..=MAX_WAVES).map(move |n| (s.workgroups / n as f64).ceil()))
        .collect();
    s.sort_by(|a, b| b.total_cmp(a));
    s.dedup();
    s
}

/// The most waves a candidate `S` gives a kind's largest launch ([`slot_candidates`]): an H100
/// runs 132 SMs, each one or more workgroups at a time, and Ridge's largest GEMM launches
/// (4096³ in 64×64 tiles) make 4096 workgroups, 31 waves of 132.
const MAX_WAVES: usize = 64;

/// `t − o = c + roof_s / f + τ·depth + ω·units` by [`fit`]'s rules, with no waves term.
fn fit_terms(samples: &[Sample], overhead_s: f64, model: Model) -> Terms {
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
            slots: 0.0,
        }
    };
    let y: Vec<f64> = samples.iter().map(|s| s.measured_s - overhead_s).collect();
    let w: Vec<f64> = samples
        .iter()
        .map(|s| 1.0 / (s.measured_s * s.measured_s))
        .collect();
    // Whether a fit failed only by a work term at or below 0.
    let mut flat = false;
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
                slots: 0.0,
            };
        }
        flat |= work && slope <= 0.0 && c >= 0.0 && tau >= 0.0 && omega >= 0.0;
    }
    if flat {
        // The weighted mean of t − o: the fixed cost that fits flat launches (no work term:
        // the median fraction would price them in proportion to bytes their times do not
        // follow).
        let mean = y.iter().zip(&w).map(|(y, w)| y * w).sum::<f64>() / w.iter().sum::<f64>();
        if mean >= 0.0 {
            return Terms {
                efficiency: NO_WORK_TERM,
                latency_s: mean,
                depth_s: 0.0,
                workgroup_s: 0.0,
                slots: 0.0,
            };
        }
    }
    direct()
}

/// `b` minimising Σ w_i (x_i · b − y_i)² (normal equations on columns scaled to unit size,
/// Gaussian elimination with partial pivoting); `None` where the columns are dependent.
pub(super) fn weighted_least_squares(x: &[Vec<f64>], y: &[f64], w: &[f64]) -> Option<Vec<f64>> {
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

pub(super) fn predict(s: &Sample, overhead_s: f64, t: Terms) -> f64 {
    t.time(overhead_s, s.roof_s, s.depth, s.units, s.workgroups)
}

impl Sample {
    /// The launch as the linear terms see it in whole waves of `slots` workgroups (unchanged
    /// for 0 slots or an unstated count): its work padded to `ceil(G / S) · S` workgroups, its
    /// depth walked once a wave ([`waves`], as [`Terms::time`] prices it).
    fn in_waves(&self, slots: f64) -> Sample {
        let (pad, waves) = waves(self.workgroups, slots);
        Sample {
            roof_s: self.roof_s * pad,
            depth: self.depth * waves,
            ..*self
        }
    }
}

/// A launch of `workgroups` on a GPU that runs `slots` at once: the factor its work grows by
/// when padded to whole waves (`ceil(G / S) · S / G`) and its number of waves `ceil(G / S)`;
/// (1, 1) where either is 0 (not stated, or no waves term).
fn waves(workgroups: f64, slots: f64) -> (f64, f64) {
    if workgroups < 1.0 || slots < 1.0 {
        return (1.0, 1.0);
    }
    let n = (workgroups / slots).ceil();
    (n * slots / workgroups, n)
}

impl Terms {
    /// `o + c + x / (R · f) + τ · K + ω · W`: a launch with `roof_s` of work on its roof,
    /// depth `depth`, `units` launch units and `workgroups` workgroups, seconds (the module's
    /// model, in one place); with a waves term (`S`), `x` padded to whole waves and `K` walked
    /// once a wave ([`waves`]).
    pub(super) fn time(
        &self,
        overhead_s: f64,
        roof_s: f64,
        depth: f64,
        units: f64,
        workgroups: f64,
    ) -> f64 {
        let (pad, waves) = waves(workgroups, self.slots);
        overhead_s
            + self.latency_s
            + roof_s * pad / self.efficiency
            + self.depth_s * depth * waves
            + self.workgroup_s * units
    }
}

/// A launch's work on the roof that bounds its kind, in seconds (`x / R`): its bytes at the
/// bandwidth, or its FLOPs at the peak — the whole tiles' FLOPs where the sweep knew the
/// kernel's tiling ([`OpCost::work_flops`]: 16 rows in 128-row tiles take 128 rows' time,
/// as lavapipe's Linear layers of 16, 64 and 128 rows did, 7.8–8.0 ms each).
pub(super) fn on_roof(bound: Bound, cost: &OpCost, roof: &Ceilings) -> f64 {
    match bound {
        Bound::Memory => cost.bytes / roof.bandwidth,
        Bound::Compute => cost.work_flops() / roof.peak_flops,
    }
}

/// The terms a kind's fit may take: sets of columns of `t − o` — 0 the fixed cost `c`, 1 the
/// work on the roof (`1/f`), 2 the depth (`τ`), 3 the launch units (`ω`) — tried fullest first
/// ([`fit`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Model {
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
    /// `c` and `f` in whole waves of `S` workgroups.
    WorkInWaves,
    /// `c`, `f` and `τ` in whole waves of `S` workgroups.
    WorkAndDepthInWaves,
}

impl Model {
    pub(super) fn columns(self) -> &'static [&'static [usize]] {
        match self {
            Model::Work | Model::WorkInWaves => &[&[0, 1]],
            Model::WorkAndDepth | Model::WorkAndDepthInWaves => &[&[0, 1, 2], &[1, 2], &[0, 1]],
            Model::Depth => &[&[0, 2], &[0, 1]],
            Model::WorkAndUnits => &[&[0, 1, 3], &[1, 3], &[0, 1]],
            Model::WorkDepthAndUnits => &[&[0, 1, 2, 3], &[1, 2, 3], &[0, 1, 2]],
        }
    }

    /// Whether the model prices whole waves (fits `S`).
    pub(super) fn waves(self) -> bool {
        matches!(self, Model::WorkInWaves | Model::WorkAndDepthInWaves)
    }

    /// The terms of its fullest fit, `S` counted.
    fn terms(self) -> usize {
        self.columns()[0].len() + usize::from(self.waves())
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
    pub(super) fn of(bound: Bound, samples: &[Sample], overhead_s: f64) -> Self {
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
        // A compute-bound kind whose launches state their workgroups: its work and depth in
        // whole waves over the GPU (a GEMM of 2.2 waves takes what 3 do).
        if bound == Bound::Compute && samples.iter().all(|s| s.workgroups >= 1.0) {
            candidates.push(if base == Model::WorkAndDepth {
                Model::WorkAndDepthInWaves
            } else {
                Model::WorkInWaves
            });
        }
        // Held out, every model's fullest fit must be over-determined (a kind of four launches
        // would compare the three-term model's fallbacks with the others' full fits).
        let fullest = candidates.iter().map(|m| m.terms()).max();
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
pub(super) const BETTER_BY: f64 = 1.05;

/// The error factor of `samples` each predicted by a fit on the others (`None` for a lone
/// sample).
pub(super) fn held_out_error(samples: &[Sample], overhead_s: f64, model: Model) -> Option<f64> {
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
pub(super) fn kind_samples(report: &BenchReport, op: &str, dtype: &str) -> KindSamples {
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
                workgroups: r.workgroups,
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
pub(super) fn held_out(samples: &[Sample], overhead_s: f64, model: Model) -> Vec<Option<f64>> {
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
pub(super) fn kinds_of(report: &BenchReport) -> Vec<(String, String)> {
    let mut kinds: Vec<(String, String)> = Vec::new();
    for r in &report.rows {
        let k = (r.op.clone(), r.dtype.clone());
        if r.measured_ms.is_some() && !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    kinds
}

pub(super) fn overhead_of(report: &BenchReport) -> f64 {
    report.measured.dispatch_overhead_us.unwrap_or(0.0) * 1e-6
}
