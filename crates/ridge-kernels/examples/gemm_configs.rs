use ridge_core::{Context, DType, Tensor};
use ridge_kernels::{Gemm, GemmConfig};

fn main() {
    let ctx = pollster::block_on(Context::new()).unwrap();
    let (m, n, k) = (512, 1536, 384);
    let a = Tensor::from_slice(&ctx, &vec![0.5f32; m * k], &[m, k]).unwrap();
    let b = Tensor::from_slice(&ctx, &vec![0.25f32; n * k], &[n, k]).unwrap();
    let c = Tensor::empty(&ctx, &[m, n], DType::F32).unwrap();
    let g = Gemm {
        trans_b: true,
        ..Gemm::new(m, n, k)
    };
    for (bm, bn, bk, tm, tn) in [
        (64, 64, 16, 4, 4),
        (32, 32, 16, 4, 4),
        (32, 32, 8, 2, 2),
        (64, 64, 8, 8, 8),
        (16, 16, 16, 1, 1),
        (64, 32, 16, 4, 4),
        (128, 128, 8, 8, 8),
        (32, 64, 32, 4, 4),
    ] {
        let cfg = GemmConfig { bm, bn, bk, tm, tn };
        g.run_with(&ctx, cfg, &a, &b, None, &c).unwrap();
        pollster::block_on(c.to_vec::<f32>(&ctx)).unwrap();
        ctx.start_profiling();
        for _ in 0..3 {
            g.run_with(&ctx, cfg, &a, &b, None, &c).unwrap();
        }
        let p = pollster::block_on(ctx.finish_profiling()).unwrap();
        let ms = p.median_ms("gemm").unwrap();
        println!(
            "{cfg:?}: {ms:.1} ms, {:.2} GFLOP/s",
            2.0 * (m * n * k) as f64 / ms / 1e6
        );
    }
}
