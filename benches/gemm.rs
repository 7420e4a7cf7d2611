//! GEMM tilings side by side: each candidate checked against the f64 reference on an odd
//! shape, then timed (median of GPU timestamps) at 1024³, 2048³ and 4096³, f32 and f16
//! (tensor cores where the adapter has them). Not a test: `cargo bench --bench gemm`
//! (`-- --sizes 256,512` to choose). Prints TFLOP/s per candidate.

use ridge::core::{Context, DType, Tensor};
use ridge::kernels::ceilings::median_ms;
use ridge::kernels::check::compare;
use ridge::kernels::{CoopConfig, Gemm, GemmConfig, GemmKernel};

fn tiled(bm: u32, bn: u32, bk: u32, tm: u32, tn: u32) -> GemmKernel {
    GemmKernel::Tiled(GemmConfig { bm, bn, bk, tm, tn })
}

fn candidates(ctx: &Context, dtype: DType) -> Vec<GemmKernel> {
    let mut v = vec![
        tiled(64, 64, 16, 4, 4),
        tiled(64, 64, 8, 4, 4),
        tiled(128, 64, 8, 8, 4),
        tiled(64, 128, 8, 4, 8),
        tiled(128, 128, 8, 8, 8),
        tiled(128, 128, 16, 8, 8),
        tiled(128, 128, 32, 8, 8),
        tiled(64, 64, 32, 4, 4),
    ];
    if dtype == DType::F16 && ctx.has_coop_f16() {
        for (sg_m, sg_n, bk) in [
            (2, 2, 32),
            (2, 2, 16),
            (4, 2, 32),
            (2, 4, 32),
            (4, 4, 32),
            (4, 4, 16),
        ] {
            v.push(GemmKernel::Coop(CoopConfig { sg_m, sg_n, bk }));
        }
    }
    v
}

fn upload(ctx: &Context, values: &[f32], shape: &[usize], dtype: DType) -> (Tensor, Vec<f32>) {
    match dtype {
        DType::F16 => {
            let h: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
            (
                Tensor::from_slice(ctx, &h, shape).unwrap(),
                h.iter().map(|v| v.to_f32()).collect(),
            )
        }
        _ => (
            Tensor::from_slice(ctx, values, shape).unwrap(),
            values.to_vec(),
        ),
    }
}

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.5) - 1.0)
        .collect()
}

/// Correct on an odd shape (every tile edge exercised) within the GEMM's error bound.
fn correct(ctx: &Context, kernel: GemmKernel, dtype: DType) -> Result<(), String> {
    let g = Gemm {
        trans_b: true,
        ..Gemm::new(133, 70, 97)
    };
    let (a, av) = upload(ctx, &values(133 * 97, 1), &[133, 97], dtype);
    let (b, bv) = upload(ctx, &values(70 * 97, 2), &[70, 97], dtype);
    let c = Tensor::empty(ctx, &[133, 70], dtype).unwrap();
    c.poison(ctx);
    g.run_with(ctx, kernel, &a, &b, None, &c)
        .map_err(|e| e.to_string())?;
    let got = pollster::block_on(c.to_f32(ctx)).map_err(|e| e.to_string())?;
    let want = g.reference(&av, &bv, None, &[]);
    let bounds = g.error_bounds(dtype, &av, &bv, None, &[], &want);
    let cmp = compare(&got, &want, |i| bounds[i]);
    if cmp.passed() {
        Ok(())
    } else {
        Err(cmp.to_string())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = args
        .iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(|v| v.parse().expect("size")).collect())
        .unwrap_or(vec![1024, 2048, 4096]);
    let ctx = pollster::block_on(Context::new()).expect("adapter");
    println!(
        "GEMM candidates on {} (coop f16: {})",
        ctx.describe(),
        ctx.has_coop_f16()
    );
    let mut dtypes = vec![DType::F32];
    if ctx.has_f16() {
        dtypes.push(DType::F16);
    }
    for dtype in dtypes {
        for kernel in candidates(&ctx, dtype) {
            let mut line = format!("{dtype} {kernel:?}");
            if let Err(e) = correct(&ctx, kernel, dtype) {
                println!("{line}: REJECTED ({e})");
                continue;
            }
            for &n in &sizes {
                let g = Gemm::new(n, n, n);
                let (a, _) = upload(&ctx, &values(n * n, 3), &[n, n], dtype);
                let (b, _) = upload(&ctx, &values(n * n, 4), &[n, n], dtype);
                let c = Tensor::empty(&ctx, &[n, n], dtype).unwrap();
                let launch = |ctx: &Context| g.run_with(ctx, kernel, &a, &b, None, &c);
                match pollster::block_on(median_ms(&ctx, 10, &launch)) {
                    Ok(ms) => line.push_str(&format!(
                        "  {n}³ {:.4} TFLOP/s",
                        2.0 * (n as f64).powi(3) / ms / 1e9
                    )),
                    Err(e) => line.push_str(&format!("  {n}³ failed: {e}")),
                }
            }
            println!("{line}");
        }
    }
}
