//! Attention work splitting side by side (split-KV, `ridge::kernels::attention::SplitPlan`):
//! dense f32 attention, 12 heads of 64, batch 1, with each query block's key tiles cut 1–8
//! ways; BigBird (`sweep::bigbird_with_block`: 2 global, window 1, 3 random) with blocks of 32
//! and rows cut into items of at most 4–16 blocks, the default cut (the mean row) or no cut,
//! and with blocks of 64 (BigBird's own default) cut by default or not; and MiniLM's
//! attention (batch 32 × 128 tokens, 12 heads of 32, packed QKV) at every tiling, f32 and f16. Every setting is first checked
//! against the f64 reference at 256 tokens (1e-5 max abs), then timed (median of GPU
//! timestamps after warming the GPU, `ceilings::warm_median_ms`). Prints ms, TFLOP/s
//! (4·pairs·head_dim FLOPs) and BigBird's time as a fraction of dense next to its density.
//! Not a test: `cargo bench --bench attention` (`-- --sizes 1024,4096` to choose, `-- --minilm`
//! for MiniLM's shape alone).

mod common;

use ridge::core::{Context, DType, Tensor};
use ridge::kernels::attention::{Attention, HeadLayout, SparseLayout, SplitPlan, TiledConfig};
use ridge::kernels::ceilings::{WARM_LAUNCHES, warm_median_ms};
use ridge::kernels::check::compare;
use ridge::kernels::sweep::bigbird_with_block;
use ridge::model::sparsity::BlockLayout;

const HEADS: usize = 12;
const HEAD_DIM: usize = 64;
const REPEATS: usize = 20;

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.5) - 1.0)
        .collect()
}

/// Q, K, V and O for `att` (contiguous [B, H, S, D]) and the host copies of Q, K, V.
fn tensors(ctx: &Context, att: &Attention) -> ([Tensor; 4], [Vec<f32>; 3]) {
    let n = att.batch * att.heads * att.seq * att.head_dim;
    let host = [values(n, 1), values(n, 2), values(n, 3)];
    let t = |v: &[f32]| Tensor::from_slice(ctx, v, &[n]).unwrap();
    let o = Tensor::empty(ctx, &[n], DType::F32).unwrap();
    ([t(&host[0]), t(&host[1]), t(&host[2]), o], host)
}

/// Dense attention cut `kv_splits` ways, or BigBird with blocks of `cut.0` cut at `cut.1`
/// blocks, at 256 tokens against the f64 reference.
fn correct(
    ctx: &Context,
    kv_splits: Option<usize>,
    cut: Option<(usize, usize)>,
) -> Result<(), String> {
    let att = Attention {
        kv_splits,
        ..Attention::new(1, HEADS, 256, HEAD_DIM)
    };
    let layout = cut.map(|(block, _)| bigbird_with_block(256, block));
    let sparse = layout
        .clone()
        .zip(cut)
        .map(|(l, (_, c))| SparseLayout::upload_split(ctx, l, c).unwrap());
    let ([q, k, v, o], [qv, kv, vv]) = tensors(ctx, &att);
    o.poison(ctx);
    att.run(ctx, &q, &k, &v, None, sparse.as_ref(), &o)
        .map_err(|e| e.to_string())?;
    let got = pollster::block_on(o.to_f32(ctx)).map_err(|e| e.to_string())?;
    let want = att.reference(&qv, &kv, &vv, None, layout.as_ref());
    let cmp = compare(&got, &want, |_| 1e-5);
    cmp.passed().then_some(()).ok_or(cmp.to_string())
}

/// Median ms of `att` (dense, or sparse over `layout` cut at `cut` blocks).
fn time(ctx: &Context, att: Attention, layout: Option<(&BlockLayout, usize)>) -> f64 {
    let sparse = layout.map(|(l, c)| SparseLayout::upload_split(ctx, l.clone(), c).unwrap());
    let ([q, k, v, o], _) = tensors(ctx, &att);
    let launch = |ctx: &Context| att.run(ctx, &q, &k, &v, None, sparse.as_ref(), &o);
    pollster::block_on(warm_median_ms(ctx, REPEATS, WARM_LAUNCHES, &launch)).expect("timing")
}

fn tflops(att: &Attention, layout: Option<&BlockLayout>, ms: f64) -> f64 {
    4.0 * (att.batch * att.heads) as f64 * att.pairs(layout) * att.head_dim as f64 / ms / 1e9
}

fn main() {
    common::check_args(
        &["--minilm"],
        &["--sizes"],
        "cargo bench --bench attention [-- OPTIONS]\n\nAttention work splitting side by side: dense f32 with key tiles cut 1-8 ways, BigBird blocks of 32 and 64, MiniLM's attention at every tiling; each checked, then timed.\n\n  --sizes 1024,4096   sequence lengths\n  --minilm            MiniLM's shape alone",
    );
    let sizes = common::list("--sizes", &[1024, 4096]);
    let ctx = common::context();
    println!("Attention work splitting on {}", ctx.describe());
    if common::flag("--minilm") {
        return minilm(&ctx);
    }
    let splits = [1, 2, 3, 4, 8];
    let cuts = [4, 8, 16, usize::MAX];
    for &s in &splits {
        if let Err(e) = correct(&ctx, Some(s), None) {
            println!("dense cut {s} ways: WRONG: {e}");
            return;
        }
    }
    for (block, c) in cuts.iter().map(|&c| (32, c)).chain([(64, 1), (64, 4)]) {
        if let Err(e) = correct(&ctx, None, Some((block, c))) {
            println!("BigBird (block {block}) cut at {c} blocks: WRONG: {e}");
            return;
        }
    }
    for &n in &sizes {
        let base = Attention::new(1, HEADS, n, HEAD_DIM);
        let mut best_dense = f64::INFINITY;
        for &s in &splits {
            let att = Attention {
                kv_splits: Some(s),
                ..base
            };
            let ms = time(&ctx, att, None);
            best_dense = best_dense.min(ms);
            println!(
                "dense   n {n:>5} cut {s} ways          {ms:>8.4} ms {:>6.2} TFLOP/s",
                tflops(&att, None, ms)
            );
        }
        let dense_uncut = time(&ctx, base, None);
        for (block, c) in cuts.iter().map(|&c| (32, Some(c))).chain([
            (32, None),
            (64, None),
            (64, Some(usize::MAX)),
        ]) {
            let layout = bigbird_with_block(n, block);
            let default = SplitPlan::default_max_tiles(&layout);
            let c = c.unwrap_or(default);
            let ms = time(&ctx, base, Some((&layout, c)));
            let what = match c {
                usize::MAX => "no cut".to_string(),
                c if c == default => format!("default ({c})"),
                c => format!("at {c} blocks"),
            };
            println!(
                "bigbird {block} n {n:>5} {what:<16} {ms:>8.4} ms {:>6.2} TFLOP/s  {:.3} of dense \
                 (uncut {:.3}; density {:.3}, goal 1.3 × density = {:.3})",
                tflops(&base, Some(&layout), ms),
                ms / best_dense,
                ms / dense_uncut,
                layout.density(),
                1.3 * layout.density()
            );
        }
    }
    minilm(&ctx);
}

/// MiniLM's attention as its forward runs it: batch 32 × 128 tokens, 12 heads of 32, Q, K
/// and V read in place from the packed QKV projection, every tiling of the register-blocked
/// kernel that fits, f32 and f16; each first checked at batch 2 against the f64 reference
/// (f32 1e-5, f16 storage 2e-3 max abs: inputs rounded to f16 are the reference's inputs,
/// the output's rounding is 2⁻¹¹ relative on values below 1).
fn minilm(ctx: &Context) {
    const HEADS: usize = 12;
    const HEAD_DIM: usize = 32;
    let tilings = [
        (64, 32),
        (32, 32),
        (16, 32),
        (128, 32),
        (64, 16),
        (32, 16),
        (128, 16),
    ];
    for dtype in [DType::F32, DType::F16] {
        for (bq, bkv) in tilings {
            let tiling = Some(TiledConfig { bq, bkv });
            let at = |batch| Attention {
                tiling,
                o: HeadLayout::bshd(128, HEADS, HEAD_DIM),
                ..Attention::packed_qkv(batch, HEADS, 128, HEAD_DIM)
            };
            let packed = |batch| values(batch * 128 * 3 * HEADS * HEAD_DIM, 4);
            let tensors = |att: &Attention| {
                let qkv = Tensor::from_f32(
                    ctx,
                    &packed(att.batch),
                    &[att.batch * 128 * 3 * HEADS * HEAD_DIM],
                    dtype,
                )
                .unwrap();
                let o = Tensor::empty(ctx, &[att.batch * 128 * HEADS * HEAD_DIM], dtype).unwrap();
                (qkv, o)
            };
            // Correctness at batch 2, O in [B, H, S, D] as the reference returns it.
            let check = Attention {
                o: HeadLayout::bhsd(HEADS, 128, HEAD_DIM),
                ..at(2)
            };
            let (qkv, o) = tensors(&check);
            o.poison(ctx);
            if let Err(e) = check.run(ctx, &qkv, &qkv, &qkv, None, None, &o) {
                println!("minilm  {dtype} tiling {bq} × {bkv}: {e}");
                continue;
            }
            let host = pollster::block_on(qkv.to_f32(ctx)).unwrap();
            let want = check.reference(&host, &host, &host, None, None);
            let got = pollster::block_on(o.to_f32(ctx)).unwrap();
            let tol = if dtype == DType::F32 { 1e-5 } else { 2e-3 };
            let cmp = compare(&got, &want, |_| tol);
            if !cmp.passed() {
                println!("minilm  {dtype} tiling {bq} × {bkv}: WRONG: {cmp}");
                continue;
            }
            let att = at(32);
            let (qkv, o) = tensors(&att);
            let launch = |ctx: &Context| att.run(ctx, &qkv, &qkv, &qkv, None, None, &o);
            let ms = pollster::block_on(warm_median_ms(ctx, REPEATS, WARM_LAUNCHES, &launch))
                .expect("timing");
            println!(
                "minilm  {dtype} batch 32 × 128, 12 heads of 32, tiling {bq:>3} × {bkv:>2}  {ms:>8.4} ms {:>6.2} TFLOP/s",
                tflops(&att, None, ms)
            );
        }
    }
}
