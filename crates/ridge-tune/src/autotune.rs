//! The autotuner: for each op and representative shape, every candidate that fits the
//! adapter is first checked against the f64 reference on an odd-shaped proxy problem, then
//! timed (median of repeated launches); it stops early once a candidate reaches the set
//! fraction of the roofline, and when the problem's share of the time budget is spent.

use std::sync::Arc;
use std::time::Duration;

// std's clock panics in the browser; web-time is std's natively and `performance.now()` there.
use web_time::{Instant, SystemTime};

use ridge_core::{Context, DType, Result, Tensor, Tuning, VariantParams};
use ridge_kernels::attention::{Attention, TiledConfig};
use ridge_kernels::check::compare;
use ridge_kernels::{Gemm, GemmKernel, Norm, NormKind, Softmax, ceilings, rows};
use ridge_model::roofline::Ceilings;

use crate::key;
use crate::table::{Entry, Origin, Table, shader_hash};

/// Every op the autotuner tunes, by name.
pub const OPS: [&str; 5] = ["gemm", "layer_norm", "rms_norm", "softmax", "attention"];

/// A candidate replaces the choice in force only when faster by this fraction, in two
/// measurements: run-to-run noise on a busy machine is a few percent (the same entry timed
/// twice on lavapipe differed by 3 %), and a tie is not worth an entry.
pub const MARGIN: f64 = 0.05;

/// What to tune and how hard.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Ops to tune (`gemm`, `layer_norm`, `rms_norm`, `softmax`, `attention`); empty tunes all.
    pub ops: Vec<String>,
    /// Wall-clock budget for the whole run, shared out as it goes: each problem may use what
    /// is left divided by the problems left (time a quick problem leaves passes on), and its
    /// first candidate is always tried, so every problem gets an entry.
    pub budget: Duration,
    /// Timed launches per candidate.
    pub repeats: usize,
    /// Stop trying candidates for a problem once one reaches this fraction of the roofline.
    pub good_enough: f64,
}

/// The rooflines the autotuner stops early against, by storage type. An f16 GEMM runs on
/// the tensor cores where the adapter has them, so its roof must be theirs: against the f32
/// FMA units' roof a tensor-core GEMM at a sixth of their peak looked good enough, and the
/// H200's 4096³ f16 bucket was tuned to 1.33 ms where 0.87 ms was among the candidates.
#[derive(Clone, Debug)]
pub struct Roofs {
    /// For f32 problems.
    pub f32: Ceilings,
    /// For f16 problems: the tensor cores' where there are some, else the f16 FMA units'.
    pub f16: Ceilings,
}

impl Roofs {
    /// The roof of a problem stored as `dtype`.
    pub fn of(&self, dtype: DType) -> &Ceilings {
        if dtype == DType::F16 {
            &self.f16
        } else {
            &self.f32
        }
    }
}

/// Where the autotuner is: candidates tried so far, of how many, on which problem.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Candidates done (tried, skipped or pruned).
    pub done: usize,
    /// All candidates of all problems.
    pub total: usize,
    /// The problem being tuned, e.g. `softmax [1024, 512] f32`.
    pub problem: String,
}

/// One problem to tune.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// Op name.
    pub op: String,
    /// Shape in the op's convention (GEMM [m, n, k], row ops [rows, cols]).
    pub shape: Vec<usize>,
    /// Storage type.
    pub dtype: DType,
}

/// The representative problems for `ctx`: GEMMs, row ops and dense attention at MiniLM's sizes
/// and at sizes
/// that cross the ridge point (smaller on CPU drivers), of the `ops` and storage types
/// `dtypes` asked for (empty: all; f16 only where the adapter has `shader-f16`).
pub fn problems(ctx: &Context, ops: &[String], dtypes: &[DType]) -> Vec<Problem> {
    let cpu = ctx.is_cpu_driver();
    let mut v = Vec::new();
    let p = |op: &str, shape: &[usize], dtype| Problem {
        op: op.into(),
        shape: shape.to_vec(),
        dtype,
    };
    let gemms: &[[usize; 3]] = if cpu {
        &[[128, 128, 128], [512, 1536, 384]]
    } else {
        // Square sizes, and MiniLM's projections at batch 32 and 1 (128 tokens each):
        // QKV and FFN-up (K = 384), the attention output (384 × 384) and FFN-down
        // (K = 1536), each in its own bucket.
        &[
            [256, 256, 256],
            [4096, 1536, 384],
            [4096, 384, 384],
            [4096, 384, 1536],
            [128, 1536, 384],
            [128, 384, 384],
            [128, 384, 1536],
            [1024, 1024, 1024],
            [4096, 4096, 4096],
        ]
    };
    for g in gemms {
        v.push(p("gemm", g, DType::F32));
        if ctx.has_f16() {
            v.push(p("gemm", g, DType::F16));
        }
    }
    let row_shapes: &[[usize; 2]] = if cpu {
        &[[1024, 384]]
    } else {
        &[[4096, 384], [16384, 4096]]
    };
    // f16 rows too: without an entry of their own they ran at the vendor heuristic's 256
    // invocations, and MiniLM's f16 layer norm took twice the f32 one's time on the H200.
    for op in ["layer_norm", "rms_norm", "softmax"] {
        for s in row_shapes {
            v.push(p(op, s, DType::F32));
            if ctx.has_f16() {
                v.push(p(op, s, DType::F16));
            }
        }
    }
    // Dense attention, [batch × heads, seq, head_dim]: MiniLM's batch 32 (12 heads of 32 over
    // 128 tokens), and heads of 64 over 1024 and 4096 tokens.
    let attention: &[[usize; 3]] = if cpu {
        &[[24, 64, 32]]
    } else {
        &[[384, 128, 32], [12, 1024, 64], [12, 4096, 64]]
    };
    for s in attention {
        v.push(p("attention", s, DType::F32));
        if ctx.has_f16() {
            v.push(p("attention", s, DType::F16));
        }
    }
    v.retain(|pr| {
        (ops.is_empty() || ops.contains(&pr.op))
            && (dtypes.is_empty() || dtypes.contains(&pr.dtype))
    });
    v
}

/// A tuning that answers every query for one op with fixed parameters: how the autotuner
/// runs a candidate through the normal launch path.
struct Fixed(String, VariantParams);

impl Tuning for Fixed {
    fn variant(&self, op: &str, _: &[usize], _: DType) -> Option<VariantParams> {
        (op == self.0).then(|| self.1.clone())
    }
}

/// Whether `params` (a table entry's) would run `pr` on `ctx`: each launcher ignores an
/// entry whose variant does not fit the adapter (or the head width) and takes its
/// heuristic instead; `ridge tune --show` says so.
pub fn usable(ctx: &Context, pr: &Problem, params: &VariantParams) -> bool {
    match pr.op.as_str() {
        "gemm" => GemmKernel::from_params(params).is_some_and(|k| k.fits(ctx, pr.dtype)),
        "attention" => {
            TiledConfig::from_params(params).is_some_and(|c| c.fits(ctx, pr.shape[2] as u32))
        }
        _ => params.get("WG").is_some_and(|&wg| rows::fits(ctx, wg)),
    }
}

fn candidates(ctx: &Context, pr: &Problem) -> Vec<VariantParams> {
    match pr.op.as_str() {
        "gemm" => GemmKernel::candidates(ctx, pr.dtype)
            .iter()
            .map(GemmKernel::to_params)
            .collect(),
        "attention" => TiledConfig::candidates(ctx, pr.shape[2] as u32)
            .iter()
            .map(TiledConfig::to_params)
            .collect(),
        _ => rows::candidates(ctx)
            .into_iter()
            .map(|wg| [("WG".to_string(), wg)].into_iter().collect())
            .collect(),
    }
}

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.5) - 1.0)
        .collect()
}

fn upload(ctx: &Context, v: &[f32], shape: &[usize], dtype: DType) -> Result<(Tensor, Vec<f32>)> {
    match dtype {
        DType::F16 => {
            let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
            Ok((
                Tensor::from_slice(ctx, &h, shape)?,
                h.iter().map(|x| x.to_f32()).collect(),
            ))
        }
        _ => Ok((Tensor::from_slice(ctx, v, shape)?, v.to_vec())),
    }
}

/// Runs `pr.op` at `shape` through the normal launcher; returns (launcher, output, reference
/// values and bounds).
type Built = (
    Box<dyn Fn(&Context) -> Result<()>>,
    Tensor,
    Option<(Vec<f32>, Vec<f64>)>,
);

fn build(
    ctx: &Context,
    op: &str,
    shape: &[usize],
    dtype: DType,
    with_reference: bool,
) -> Result<Built> {
    Ok(match op {
        "gemm" => {
            let g = Gemm {
                trans_b: true,
                ..Gemm::new(shape[0], shape[1], shape[2])
            };
            let (a, av) = upload(
                ctx,
                &values(shape[0] * shape[2], 1),
                &[shape[0], shape[2]],
                dtype,
            )?;
            let (b, bv) = upload(
                ctx,
                &values(shape[1] * shape[2], 2),
                &[shape[1], shape[2]],
                dtype,
            )?;
            let c = Tensor::empty(ctx, &[shape[0], shape[1]], dtype)?;
            let reference = with_reference.then(|| {
                let want = g.reference(&av, &bv, None, &[]);
                let bounds = g.error_bounds(dtype, &av, &bv, None, &[], &want);
                (want, bounds)
            });
            let out = c.clone();
            (
                Box::new(move |ctx| g.run(ctx, &a, &b, None, &out)),
                c,
                reference,
            )
        }
        "attention" => {
            // [batch × heads, seq, head_dim] as that many heads of one batch entry.
            let att = Attention::new(shape[0], 1, shape[1], shape[2]);
            let n = shape.iter().product::<usize>();
            let (q, qv) = upload(ctx, &values(n, 5), &[n], dtype)?;
            let (k, kv) = upload(ctx, &values(n, 6), &[n], dtype)?;
            let (v, vv) = upload(ctx, &values(n, 7), &[n], dtype)?;
            let o = Tensor::empty(ctx, &[n], dtype)?;
            let reference = with_reference.then(|| {
                let want = att.reference(&qv, &kv, &vv, None, None);
                // Values within ±1: |scale · q·k| ≤ head_dim · scale, |v| ≤ 1.
                let score_max = shape[2] as f64 * att.scale as f64;
                let bounds = want
                    .iter()
                    .map(|&w| att.error_bound(dtype, 1.0, score_max, w))
                    .collect();
                (want, bounds)
            });
            let out = o.clone();
            (
                Box::new(move |ctx| att.run(ctx, &q, &k, &v, None, None, &out)),
                o,
                reference,
            )
        }
        "softmax" => {
            let sm = Softmax::new(shape[0], shape[1]);
            let (x, xv) = upload(ctx, &values(shape[0] * shape[1], 3), shape, dtype)?;
            let y = Tensor::empty(ctx, shape, dtype)?;
            let reference = with_reference.then(|| {
                let want = sm.reference(&xv, None);
                let bounds = want.iter().map(|&w| sm.error_bound(dtype, w)).collect();
                (want, bounds)
            });
            let out = y.clone();
            (
                Box::new(move |ctx| sm.run(ctx, &x, None, &out)),
                y,
                reference,
            )
        }
        _ => {
            let kind = if op == "rms_norm" {
                NormKind::RmsNorm
            } else {
                NormKind::LayerNorm
            };
            let norm = Norm {
                kind,
                rows: shape[0],
                cols: shape[1],
                eps: 1e-5,
            };
            let (x, xv) = upload(ctx, &values(shape[0] * shape[1], 4), shape, dtype)?;
            let y = Tensor::empty(ctx, shape, dtype)?;
            let reference = with_reference.then(|| {
                let want = norm.reference(&xv, None, None);
                let bounds = norm.error_bounds(dtype, &want, None, None);
                (want, bounds)
            });
            let out = y.clone();
            (
                Box::new(move |ctx| norm.run(ctx, &x, None, None, &out)),
                y,
                reference,
            )
        }
    })
}

/// Odd shapes that exercise every tile edge (attention keeps the problem's head width: the
/// tilings that fit depend on it).
fn proxy(pr: &Problem) -> Vec<usize> {
    match pr.op.as_str() {
        "gemm" => vec![133, 70, 97],
        "attention" => vec![3, 77, pr.shape[2]],
        _ => vec![7, 1001],
    }
}

/// Whether the candidate installed on `ctx` computes `pr.op` within its error bound.
async fn correct(ctx: &Context, pr: &Problem) -> Result<bool> {
    let (launch, out, reference) = build(ctx, &pr.op, &proxy(pr), pr.dtype, true)?;
    out.poison(ctx);
    launch(ctx)?;
    let got = out.to_f32(ctx).await?;
    let (want, bounds) = reference.expect("built with a reference");
    Ok(compare(&got, &want, |i| bounds[i]).passed())
}

/// One line of the tuning log.
#[derive(Clone, Debug)]
pub struct Trial {
    /// The problem.
    pub problem: Problem,
    /// The candidate (for the choice in force, its table entry's, or none for the heuristic).
    pub params: VariantParams,
    /// Median time, ms, or why it was not timed.
    pub result: std::result::Result<f64, String>,
    /// Whether this is the choice in force before tuning (timed first, the one to beat).
    pub in_force: bool,
}

/// Tunes `problems` on `ctx` into a new table for this adapter (`family` names it).
/// `roofs` (measured, or from the spec table) give the rooflines used to stop early;
/// `on_progress` hears of every candidate (the CLI draws a bar, the page a progress
/// element). The table's entries are named after `device`.
pub async fn autotune(
    ctx: &Context,
    problems: &[Problem],
    opts: &TuneOptions,
    roofs: Option<&Roofs>,
    family: &str,
    on_progress: &dyn Fn(Progress),
) -> Result<(Table, Vec<Trial>)> {
    let started = Instant::now();
    // What runs today (the installed tables, else each launcher's heuristic): every problem
    // times it first, and an entry is written only for a candidate that beats it. A short
    // budget must never make Ridge slower (it wrote its first, slow candidate: 1,000
    // embeddings on lavapipe went from 61 s to 93–143 s).
    let in_force = ctx.tuning();
    let mut table = Table::new(family, Some(ctx.fingerprint()));
    let mut trials = Vec::new();
    let total: usize = problems.iter().map(|p| candidates(ctx, p).len()).sum();
    let mut done = 0;
    let date = today();
    for (index, pr) in problems.iter().enumerate() {
        let mut best: Option<(f64, VariantParams)> = None;
        let count = candidates(ctx, pr).len();
        let first = done;
        // This problem's share of what is left: the last problems are not starved by the
        // first (on the H200 the largest GEMM, tuned last, got none of a 180 s budget).
        let share = opts.budget.saturating_sub(started.elapsed()) / (problems.len() - index) as u32;
        let deadline = Instant::now() + share;
        ctx.set_tuning(in_force.clone());
        let incumbent = measure(ctx, pr, opts).await;
        trials.push(Trial {
            problem: pr.clone(),
            params: in_force
                .as_ref()
                .and_then(|t| t.variant(&pr.op, &pr.shape, pr.dtype))
                .unwrap_or_default(),
            result: incumbent.clone(),
            in_force: true,
        });
        for (tried, params) in candidates(ctx, pr).into_iter().enumerate() {
            done += 1;
            on_progress(Progress {
                done,
                total,
                problem: format!("{} {:?} {}", pr.op, pr.shape, pr.dtype),
            });
            if tried > 0 && Instant::now() > deadline {
                trials.push(Trial {
                    problem: pr.clone(),
                    params,
                    result: Err("budget spent".into()),
                    in_force: false,
                });
                continue;
            }
            ctx.set_tuning(Some(Arc::new(Fixed(pr.op.clone(), params.clone()))));
            let result = async {
                if !correct(ctx, pr).await? {
                    return Ok(Err(
                        "wrong results on the proxy problem: rejected".to_string()
                    ));
                }
                Ok::<_, ridge_core::Error>(measure(ctx, pr, opts).await)
            }
            .await;
            let result = result.unwrap_or_else(|e| Err(e.to_string()));
            if let Ok(ms) = result
                && best.as_ref().is_none_or(|(b, _)| ms < *b)
            {
                best = Some((ms, params.clone()));
            }
            trials.push(Trial {
                problem: pr.clone(),
                params,
                result,
                in_force: false,
            });
            // Stop early once the best candidate is close enough to the roofline.
            if let (Some((ms, _)), Some(r)) = (&best, roofs) {
                let cost = cost_of(pr);
                if r.of(pr.dtype)
                    .fraction_of_roofline(&cost, ms * 1e-3)
                    .is_some_and(|f| f >= opts.good_enough)
                {
                    done = first + count;
                    break;
                }
            }
        }
        // A winner must beat the choice in force by MARGIN, be another choice, and do so
        // again when both are measured once more (each keeping its faster time).
        let beats = |ms: f64, now: &std::result::Result<f64, String>| {
            now.as_ref().map_or(true, |&now| ms < now * (1.0 - MARGIN))
        };
        let in_force_params = in_force
            .as_ref()
            .and_then(|t| t.variant(&pr.op, &pr.shape, pr.dtype));
        let mut winner = best.filter(|(ms, params)| {
            beats(*ms, &incumbent) && in_force_params.as_ref() != Some(params)
        });
        let mut incumbent = incumbent;
        if let Some((ms, params)) = winner.take() {
            ctx.set_tuning(in_force.clone());
            let again = measure(ctx, pr, opts).await;
            incumbent = match (incumbent, again) {
                (Ok(a), Ok(b)) => Ok(a.min(b)),
                (a, b) => a.or(b),
            };
            ctx.set_tuning(Some(Arc::new(Fixed(pr.op.clone(), params.clone()))));
            let ms = measure(ctx, pr, opts).await.map_or(ms, |b| ms.min(b));
            winner = beats(ms, &incumbent).then_some((ms, params));
        }
        if let Some((ms, params)) = winner {
            table.insert(Entry {
                op: pr.op.clone(),
                bucket: key::bucket(&pr.shape),
                dtype: key::dtype_name(pr.dtype).into(),
                shader_hash: shader_hash(&pr.op, &params),
                params,
                ms: Some(ms),
                baseline_ms: incumbent.as_ref().ok().copied(),
                origin: Origin::Measured {
                    device: ctx.info().name.clone(),
                    date: date.clone(),
                },
            });
        }
    }
    ctx.set_tuning(in_force);
    // The caller installs the new table (crate::install) once it is saved.
    Ok((table, trials))
}

/// The median time of `pr` with the tuning installed on `ctx`, ms, or why it was not timed.
async fn measure(
    ctx: &Context,
    pr: &Problem,
    opts: &TuneOptions,
) -> std::result::Result<f64, String> {
    let (launch, _, _) =
        build(ctx, &pr.op, &pr.shape, pr.dtype, false).map_err(|e| e.to_string())?;
    ceilings::warm_median_ms(ctx, opts.repeats, ceilings::WARM_LAUNCHES, &launch)
        .await
        .map_err(|e| e.to_string())
}

fn cost_of(pr: &Problem) -> ridge_model::OpCost {
    let e = pr.dtype.size();
    let s = &pr.shape;
    match pr.op.as_str() {
        "gemm" => ridge_model::ops::gemm(s[0], s[1], s[2], 1, 1, 1, false, false, e),
        "softmax" => ridge_model::ops::softmax(s[0], s[1], 0, e),
        "attention" => ridge_model::ops::attention(s[0], 1, s[1], s[2], (s[1] * s[1]) as f64, e),
        op => ridge_model::ops::norm(s[0], s[1], op == "rms_norm", false, e),
    }
}

/// Today's date (UTC) as YYYY-MM-DD.
fn today() -> String {
    let since_epoch = SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .unwrap_or_default();
    let now = std::time::UNIX_EPOCH + since_epoch;
    humantime::format_rfc3339(now).to_string()[..10].to_string()
}
