//! The kernel suite: every op on seeded random data against its f64 reference, with its
//! error bound, measured GPU time and cost. `ridge check`, `cargo xtask demo` and the
//! browser page run it; tests go further (odd shapes, traps, limits).

use rand::{RngExt, SeedableRng, rngs::StdRng};
use ridge_core::{Context, DType, Result, Tensor};
use ridge_model::OpCost;
use serde::Serialize;

use crate::attention::{Attention, HeadLayout, SparseLayout};
use crate::check::{self, Comparison};
use crate::elementwise::{Binary, Unary, binary, unary};
use crate::gemm::Gemm;
use crate::layout;
use crate::norm::{Norm, NormKind};
use crate::softmax::Softmax;

/// One op on one shape, checked and timed.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// Op name.
    pub op: String,
    /// Human-readable shape.
    pub shape: String,
    /// Storage type.
    pub dtype: DType,
    /// Largest |GPU − reference|.
    pub max_abs_error: f64,
    /// Largest error ÷ the op's bound (≤ 1 passes).
    pub worst_ratio: f64,
    /// Whether every element is within its bound.
    pub passed: bool,
    /// What went wrong, if anything.
    pub detail: String,
    /// Median GPU time over the timed launches, ms; `None` when it could not be measured.
    pub ms: Option<f64>,
    /// FLOPs and bytes.
    pub cost: OpCost,
}

impl CaseResult {
    /// Achieved GFLOP/s, when the time was measured.
    pub fn gflops(&self) -> Option<f64> {
        self.ms.and_then(|ms| self.cost.gflops(ms))
    }
    /// Achieved GB/s, when the time was measured.
    pub fn gbps(&self) -> Option<f64> {
        self.ms.and_then(|ms| self.cost.gbps(ms))
    }
}

/// Records one launch of a case's op.
type Launcher = Box<dyn Fn(&Context) -> Result<()>>;

/// A prepared case: inputs uploaded, reference computed, output allocated.
struct Case {
    op: &'static str,
    shape: String,
    cost: OpCost,
    launch: Launcher,
    output: Tensor,
    want: Vec<f32>,
    bounds: Vec<f64>,
}

fn random(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// Uploads as `dtype` and returns the values the tensor really holds.
fn upload(ctx: &Context, v: &[f32], shape: &[usize], dtype: DType) -> Result<(Tensor, Vec<f32>)> {
    match dtype {
        DType::F32 | DType::U32 => Ok((Tensor::from_slice(ctx, v, shape)?, v.to_vec())),
        DType::F16 => {
            let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
            let back = h.iter().map(|x| x.to_f32()).collect();
            Ok((Tensor::from_slice(ctx, &h, shape)?, back))
        }
    }
}

fn gemm_case(ctx: &Context, rng: &mut StdRng, g: Gemm, dtype: DType) -> Result<Case> {
    let (a, av) = upload(ctx, &random(rng, g.m * g.k, -1.0, 1.0), &g.a_dims(), dtype)?;
    let (b, bv) = upload(ctx, &random(rng, g.k * g.n, -1.0, 1.0), &g.b_dims(), dtype)?;
    let (bias, biasv) = upload(ctx, &random(rng, g.n, -1.0, 1.0), &[g.n], dtype)?;
    let output = Tensor::empty(ctx, &[g.m, g.n], dtype)?;
    let want = g.reference(&av, &bv, Some(&biasv), &[]);
    let bounds = g.error_bounds(dtype, &av, &bv, Some(&biasv), &[], &want);
    let out = output.clone();
    Ok(Case {
        op: "gemm",
        shape: format!(
            "{}x{}x{}{}",
            g.m,
            g.n,
            g.k,
            if g.trans_b { " Bᵀ" } else { "" }
        ),
        cost: g.cost(dtype, dtype, 1, 1, true),
        launch: Box::new(move |ctx| g.run(ctx, &a, &b, Some(&bias), &out)),
        output,
        want,
        bounds,
    })
}

fn norm_case(ctx: &Context, rng: &mut StdRng, norm: Norm, dtype: DType) -> Result<Case> {
    let (rows, cols) = (norm.rows, norm.cols);
    let (x, xv) = upload(
        ctx,
        &random(rng, rows * cols, -3.0, 3.0),
        &[rows, cols],
        dtype,
    )?;
    let (g, gv) = upload(ctx, &random(rng, cols, 0.5, 2.0), &[cols], dtype)?;
    let (b, bv) = upload(ctx, &random(rng, cols, -1.0, 1.0), &[cols], dtype)?;
    let layer = norm.kind == NormKind::LayerNorm;
    let output = Tensor::empty(ctx, &[rows, cols], dtype)?;
    let beta = layer.then_some(bv.as_slice());
    let want = norm.reference(&xv, Some(&gv), beta);
    let bounds = norm.error_bounds(dtype, &want, Some(&gv), beta);
    let out = output.clone();
    Ok(Case {
        op: norm.name(),
        shape: format!("{rows}x{cols}"),
        cost: norm.cost(dtype, true),
        launch: Box::new(move |ctx| norm.run(ctx, &x, Some(&g), layer.then_some(&b), &out)),
        output,
        want,
        bounds,
    })
}

fn softmax_case(ctx: &Context, rng: &mut StdRng, sm: Softmax, dtype: DType) -> Result<Case> {
    let (x, xv) = upload(
        ctx,
        &random(rng, sm.rows * sm.cols, -8.0, 8.0),
        &[sm.rows, sm.cols],
        dtype,
    )?;
    let mask_rows = sm.rows / sm.mask_group;
    let mask_v: Vec<f32> = (0..mask_rows * sm.cols)
        .map(|i| {
            if i % sm.cols >= sm.cols * 3 / 4 {
                f32::NEG_INFINITY
            } else {
                0.0
            }
        })
        .collect();
    let (mask, maskv) = upload(ctx, &mask_v, &[mask_rows, sm.cols], dtype)?;
    let output = Tensor::empty(ctx, &[sm.rows, sm.cols], dtype)?;
    let want = sm.reference(&xv, Some(&maskv));
    let bounds = want.iter().map(|&w| sm.error_bound(dtype, w)).collect();
    let out = output.clone();
    Ok(Case {
        op: "softmax",
        shape: format!("{}x{} masked", sm.rows, sm.cols),
        cost: sm.cost(dtype, true),
        launch: Box::new(move |ctx| sm.run(ctx, &x, Some(&mask), &out)),
        output,
        want,
        bounds,
    })
}

fn gelu_case(ctx: &Context, rng: &mut StdRng, n: usize, dtype: DType) -> Result<Case> {
    let (x, xv) = upload(ctx, &random(rng, n, -6.0, 6.0), &[n], dtype)?;
    let output = Tensor::empty(ctx, &[n], dtype)?;
    let want = Unary::Gelu.reference(&xv);
    let bounds = (0..n)
        .map(|i| Unary::Gelu.error_bound(dtype, xv[i], want[i]))
        .collect();
    let out = output.clone();
    Ok(Case {
        op: "gelu",
        shape: n.to_string(),
        cost: Unary::Gelu.cost(n, dtype),
        launch: Box::new(move |ctx| unary(ctx, Unary::Gelu, &x, &out)),
        output,
        want,
        bounds,
    })
}

fn add_case(
    ctx: &Context,
    rng: &mut StdRng,
    rows: usize,
    cols: usize,
    dtype: DType,
) -> Result<Case> {
    let (a, av) = upload(
        ctx,
        &random(rng, rows * cols, -6.0, 6.0),
        &[rows, cols],
        dtype,
    )?;
    let (b, bv) = upload(
        ctx,
        &random(rng, rows * cols, -6.0, 6.0),
        &[rows, cols],
        dtype,
    )?;
    let output = Tensor::empty(ctx, &[rows, cols], dtype)?;
    let want = Binary::Add.reference(&av, &[rows, cols], &bv, &[rows, cols])?;
    let bounds = want
        .iter()
        .map(|&w| Binary::Add.error_bound(dtype, 0.0, w))
        .collect();
    let out = output.clone();
    Ok(Case {
        op: "add",
        shape: format!("{rows}x{cols}"),
        cost: Binary::Add.cost(rows * cols, rows * cols, rows * cols, dtype),
        launch: Box::new(move |ctx| binary(ctx, Binary::Add, &a, &b, &out)),
        output,
        want,
        bounds,
    })
}

fn permute_case(
    ctx: &Context,
    rng: &mut StdRng,
    shape: &[usize],
    perm: &'static [usize],
    name: &'static str,
    dtype: DType,
) -> Result<Case> {
    let n = shape.iter().product();
    let (x, xv) = upload(ctx, &random(rng, n, -100.0, 100.0), shape, dtype)?;
    let output = Tensor::empty(ctx, &layout::permuted_shape(shape, perm)?, dtype)?;
    let want = layout::reference(&xv, shape, perm);
    let out = output.clone();
    Ok(Case {
        op: name,
        shape: format!("{shape:?}"),
        cost: layout::cost(n, dtype),
        launch: Box::new(move |ctx| layout::permute(ctx, &x, perm, &out)),
        output,
        want,
        bounds: vec![0.0; n],
    })
}

/// Attention over `att`'s packed QKV (O in `[B, H, S, D]`, as the reference returns it),
/// padded keys per batch entry from `lengths`, dense or over BigBird blocks of `block`.
fn attention_case(
    ctx: &Context,
    rng: &mut StdRng,
    att: Attention,
    lengths: &[u32],
    block: Option<usize>,
    dtype: DType,
) -> Result<Case> {
    let n = att.batch * att.seq * 3 * att.heads * att.head_dim;
    let (qkv, host) = upload(ctx, &random(rng, n, -2.0, 2.0), &[n], dtype)?;
    let out_len = att.batch * att.heads * att.seq * att.head_dim;
    let output = Tensor::empty(ctx, &[out_len], dtype)?;
    let len = Tensor::from_slice(ctx, lengths, &[lengths.len()])?;
    let layout = block.map(|b| crate::sweep::bigbird_with_block(att.seq, b));
    let sparse = layout
        .clone()
        .map(|l| SparseLayout::upload(ctx, l))
        .transpose()?;
    let want = att.reference(&host, &host, &host, Some(lengths), layout.as_ref());
    // |q|, |k|, |v| ≤ 2: |scale · q·k| ≤ 4 · head_dim · scale.
    let score_max = 4.0 * att.head_dim as f64 * att.scale as f64;
    let bounds = want
        .iter()
        .map(|&w| att.error_bound(dtype, 2.0, score_max, w))
        .collect();
    let cost = att.cost(dtype, layout.as_ref());
    let out = output.clone();
    Ok(Case {
        op: if block.is_some() {
            "sparse_attention"
        } else {
            "attention"
        },
        shape: format!(
            "{}x{}x{}x{}{}",
            att.batch,
            att.heads,
            att.seq,
            att.head_dim,
            block.map_or(String::new(), |b| format!(" BigBird {b}"))
        ),
        cost,
        launch: Box::new(move |ctx| {
            att.run(ctx, &qkv, &qkv, &qkv, Some(&len), sparse.as_ref(), &out)
        }),
        output,
        want,
        bounds,
    })
}

fn cases(ctx: &Context, dtype: DType) -> Result<Vec<Case>> {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let r = &mut rng;
    Ok(vec![
        gemm_case(ctx, r, Gemm::new(256, 256, 256), dtype)?,
        // MiniLM's FFN up-projection at 4 × 128 tokens: [512, 384] × [1536, 384]ᵀ.
        gemm_case(
            ctx,
            r,
            Gemm {
                trans_b: true,
                ..Gemm::new(512, 1536, 384)
            },
            dtype,
        )?,
        norm_case(
            ctx,
            r,
            Norm {
                kind: NormKind::LayerNorm,
                rows: 4096,
                cols: 384,
                eps: 1e-12,
            },
            dtype,
        )?,
        norm_case(
            ctx,
            r,
            Norm {
                kind: NormKind::RmsNorm,
                rows: 1024,
                cols: 4096,
                eps: 1e-6,
            },
            dtype,
        )?,
        softmax_case(
            ctx,
            r,
            Softmax {
                rows: 4 * 12 * 128,
                cols: 128,
                scale: 0.125,
                mask_group: 12 * 128,
            },
            dtype,
        )?,
        gelu_case(ctx, r, 1 << 20, dtype)?,
        add_case(ctx, r, 4096, 384, dtype)?,
        permute_case(
            ctx,
            r,
            &[8, 64, 56, 56],
            &layout::NCHW_TO_NHWC,
            "nchw_to_nhwc",
            dtype,
        )?,
        permute_case(
            ctx,
            r,
            &[8, 56, 56, 64],
            &layout::NHWC_TO_NCHW,
            "nhwc_to_nchw",
            dtype,
        )?,
        permute_case(ctx, r, &[4, 12, 128, 32], &[0, 2, 1, 3], "permute", dtype)?,
        permute_case(ctx, r, &[1000, 999], &[1, 0], "transpose", dtype)?,
        // MiniLM's attention at batch 4, read from the packed QKV projection, padded.
        attention_case(
            ctx,
            r,
            Attention {
                o: HeadLayout::bhsd(12, 128, 32),
                ..Attention::packed_qkv(4, 12, 128, 32)
            },
            &[128, 100, 77, 128],
            None,
            dtype,
        )?,
        // BigBird (blocks of 32: 2 global, a window of 1, 3 random) over 256 tokens.
        attention_case(
            ctx,
            r,
            Attention {
                o: HeadLayout::bhsd(4, 256, 64),
                ..Attention::packed_qkv(2, 4, 256, 64)
            },
            &[256, 200],
            Some(32),
            dtype,
        )?,
    ])
}

/// Runs the suite: for each dtype the adapter supports (f32 always, f16 with `shader-f16`),
/// each case once for correctness; then, after [`raise_clocks`], every case's `repeats` timed
/// launches (median) back to back.
///
/// The timing waits for the end: while the correctness pass runs, the GPU idles as the CPU
/// computes each reference, and an idle GPU lowers its clocks. On the H200 `ridge check`
/// timed as it went logged the SM clock falling from 1980 to 870–1125 MHz within 4 s,
/// and the later (f16) cases at 1.6–2.7× their time in a busy forward (benches/NOTES.md).
pub async fn run(ctx: &Context, repeats: usize) -> Result<Vec<CaseResult>> {
    run_with_progress(ctx, repeats, &|_| {}).await
}

/// Where the suite is: `done` of `total` steps (each case is checked, then timed: `total` is
/// twice the cases), and the step just finished, e.g. `checked gemm [33, 67, 129] f32`.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Steps finished.
    pub done: usize,
    /// Steps in all.
    pub total: usize,
    /// The step just finished.
    pub step: String,
}

/// [`run`], calling `on_progress` after every case checked and every case timed (the
/// browser's page and `ridge check` show it: the suite takes tens of seconds on a CPU
/// driver).
///
/// Errors: as [`run`].
pub async fn run_with_progress(
    ctx: &Context,
    repeats: usize,
    on_progress: &dyn Fn(Progress),
) -> Result<Vec<CaseResult>> {
    let mut dtypes = vec![DType::F32];
    if ctx.has_f16() {
        dtypes.push(DType::F16);
    }
    let mut all = Vec::new();
    for dtype in dtypes {
        all.extend(cases(ctx, dtype)?.into_iter().map(|c| (dtype, c)));
    }
    let total = 2 * all.len();
    let label = |verb: &str, dtype: DType, case: &Case| {
        format!("{verb} {} {:?} {dtype}", case.op, case.shape)
    };
    let mut checked = Vec::new();
    for (dtype, case) in all {
        case.output.poison(ctx);
        (case.launch)(ctx)?;
        let got = case.output.to_f32(ctx).await?;
        let comparison: Comparison = check::compare(&got, &case.want, |i| case.bounds[i]);
        on_progress(Progress {
            done: checked.len() + 1,
            total,
            step: label("checked", dtype, &case),
        });
        checked.push((dtype, case, comparison));
    }
    raise_clocks(ctx).await?;
    let mut results = Vec::new();
    let n = checked.len();
    for (dtype, case, comparison) in checked {
        ctx.start_profiling();
        for _ in 0..repeats {
            (case.launch)(ctx)?;
        }
        let profile = ctx.finish_profiling().await?;
        on_progress(Progress {
            done: n + results.len() + 1,
            total,
            step: label("timed", dtype, &case),
        });
        results.push(CaseResult {
            op: case.op.to_string(),
            shape: case.shape,
            dtype,
            max_abs_error: comparison.max_abs_error,
            worst_ratio: comparison.worst_ratio,
            passed: comparison.passed(),
            detail: comparison.to_string(),
            ms: profile.median_launch_ms(repeats),
            cost: case.cost,
        });
    }
    Ok(results)
}

/// Keeps a GPU busy with a 1024³ f32 GEMM until its time stops falling, so that what is
/// timed next runs at working clocks: rounds of ≈ 50 ms, until three in a row are no 3 %
/// faster than the best, at most 40 rounds (≈ 2 s). Best effort: the H200's first process
/// on a fresh machine sat at 345–405 MHz through it (benches/NOTES.md, runs 76–77), a state
/// no warm-up of this length lifts. Nothing on CPU drivers, whose clocks are the host's,
/// nor without GPU timestamps, which size the rounds, nor where one GEMM takes over 50 ms
/// (a software adapter a browser does not call a CPU).
///
/// Errors: as the GEMM's launch.
pub async fn raise_clocks(ctx: &Context) -> Result<()> {
    if ctx.is_cpu_driver() || !ctx.has_timestamps() {
        return Ok(());
    }
    let g = Gemm::new(1024, 1024, 1024);
    let a = Tensor::empty(ctx, &g.a_dims(), DType::F32)?;
    let b = Tensor::empty(ctx, &g.b_dims(), DType::F32)?;
    let c = Tensor::empty(ctx, &[g.m, g.n], DType::F32)?;
    let launch = |ctx: &Context| g.run(ctx, &a, &b, None, &c);
    let once = crate::ceilings::median_ms(ctx, 1, &launch).await?;
    if once > 50.0 {
        return Ok(()); // a software adapter behind a browser: no clocks to raise, only time
    }
    let per_round = (50.0 / once.max(1e-3)).ceil().min(1000.0) as usize;
    let (mut best, mut steady) = (once, 0);
    for _ in 0..40 {
        let ms = crate::ceilings::median_ms(ctx, per_round, &launch).await?;
        if ms < 0.97 * best {
            (best, steady) = (ms, 0);
        } else {
            steady += 1;
            if steady == 3 {
                break;
            }
        }
    }
    Ok(())
}
