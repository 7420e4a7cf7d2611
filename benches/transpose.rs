//! Transpose tilings side by side (`ridge::kernels::layout::TransposeTiling`): each checked
//! for exact equality with the reference on an odd shape, then timed (median of GPU
//! timestamps after warming the GPU, `ceilings::warm_median_ms`) on square transposes
//! (`-- --sizes 4096,8192,4000`, the default) and NCHW ↔ NHWC of [32, 64, 112, 112], f32. Prints ms, GB/s (read + write) and
//! the ratio to a copy of the same bytes timed the same way. Not a test:
//! `cargo bench --bench transpose`.

mod common;

use ridge::core::{Context, DType, Tensor};
use ridge::kernels::ceilings::{self, WARM_LAUNCHES, warm_median_ms};
use ridge::kernels::layout::{self, NCHW_TO_NHWC, NHWC_TO_NCHW, TransposeTiling};

/// (tile, rows per pass, width): single elements, then vec4s.
const TILINGS: [(u32, u32, u32); 10] = [
    (32, 8, 1),
    (32, 4, 1),
    (32, 2, 1),
    (64, 4, 1),
    (16, 4, 1),
    (32, 8, 4),
    (32, 4, 4),
    (32, 2, 4),
    (64, 16, 4),
    (64, 8, 4),
];

fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919) % 2003) as f32).collect()
}

fn exact(ctx: &Context, tiling: TransposeTiling) -> Result<(), String> {
    for (shape, perm) in [
        (vec![3, 37, 5, 11], &NCHW_TO_NHWC[..]),
        (vec![67, 45], &[1, 0][..]),
        (vec![3, 36, 4, 11], &NCHW_TO_NHWC[..]),
        (vec![68, 44], &[1, 0][..]),
    ] {
        let n: usize = shape.iter().product();
        let xv = values(n);
        let x = Tensor::from_slice(ctx, &xv, &shape).map_err(|e| e.to_string())?;
        let out_shape = layout::permuted_shape(&shape, perm).map_err(|e| e.to_string())?;
        let out = Tensor::empty(ctx, &out_shape, DType::F32).map_err(|e| e.to_string())?;
        out.poison(ctx);
        layout::permute_with(ctx, &x, perm, &out, tiling).map_err(|e| e.to_string())?;
        let got = pollster::block_on(out.to_f32(ctx)).map_err(|e| e.to_string())?;
        if got != layout::reference(&xv, &shape, perm) {
            return Err(format!("{shape:?} by {perm:?} differs from the reference"));
        }
    }
    Ok(())
}

fn main() {
    common::check_args(
        &[],
        &["--sizes"],
        "cargo bench --bench transpose [-- --sizes 4096,8192,4000]\n\nTranspose tilings side by side, each checked for exact equality, then timed on square transposes and NCHW <-> NHWC of [32, 64, 112, 112] against a copy of the same bytes.",
    );
    let ctx = common::context();
    println!("Transpose tilings on {}", ctx.describe());
    // Square transposes (`--sizes`; 4000² beside 4096²: the same bytes without a power-of-two
    // row stride, which run 41 timed alike: no partition camping), then NCHW ↔ NHWC.
    let mut cases: Vec<(String, Vec<usize>, &[usize])> =
        common::list("--sizes", &[4096, 8192, 4000])
            .into_iter()
            .map(|n| (format!("transpose {n}²"), vec![n, n], &[1, 0][..]))
            .collect();
    cases.push(("NCHW→NHWC".into(), vec![32, 64, 112, 112], &NCHW_TO_NHWC));
    cases.push(("NHWC→NCHW".into(), vec![32, 112, 112, 64], &NHWC_TO_NCHW));
    // Each case's reference: a copy of the same bytes (`ceilings::stream_copy`), so that a
    // launch's fixed costs (ramp-up and tail, a few µs on the H200) weigh on both alike.
    let copies: Vec<f64> = cases
        .iter()
        .map(|(_, shape, _)| {
            let n: usize = shape.iter().product();
            let src = Tensor::from_slice(&ctx, &values(n), shape).unwrap();
            let dst = Tensor::empty(&ctx, shape, DType::F32).unwrap();
            let launch = |ctx: &Context| ceilings::stream_copy(ctx, &src, &dst);
            pollster::block_on(warm_median_ms(&ctx, 20, WARM_LAUNCHES, &launch)).expect("timing")
        })
        .collect();
    for ((what, shape, _), ms) in cases.iter().zip(&copies) {
        let n: usize = shape.iter().product();
        println!(
            "copy of the same bytes  {what:<16} {ms:>8.4} ms {:>7.0} GB/s",
            (8 * n) as f64 / ms / 1e6
        );
    }
    for (tile, rows_per_pass, width) in TILINGS {
        let tiling = TransposeTiling {
            tile,
            rows_per_pass,
            width,
        };
        if let Err(e) = exact(&ctx, tiling) {
            println!("{tile} × {rows_per_pass} × {width}: skipped ({e})");
            continue;
        }
        for ((what, shape, perm), copy_ms) in cases.iter().zip(&copies) {
            let n: usize = shape.iter().product();
            let x = Tensor::from_slice(&ctx, &values(n), shape).unwrap();
            let out = Tensor::empty(
                &ctx,
                &layout::permuted_shape(shape, perm).unwrap(),
                DType::F32,
            )
            .unwrap();
            let launch = |ctx: &Context| layout::permute_with(ctx, &x, perm, &out, tiling);
            let ms = pollster::block_on(warm_median_ms(&ctx, 20, WARM_LAUNCHES, &launch))
                .expect("timing");
            println!(
                "tile {tile:>2} × {rows_per_pass:>2}, width {width} ({:>2} per invocation)  {what:<16} {ms:>8.4} ms {:>7.0} GB/s {:>5.2}× copy",
                tile / rows_per_pass * width,
                (8 * n) as f64 / ms / 1e6,
                copy_ms / ms
            );
        }
    }
}
