//! The quantized matrix-vector product on large matrices (4096² and 8192² by default; decode's
//! product at a 7–70 B model's width): GPU time from timestamps (median of `--repeats`),
//! GB/s on the packed weights (plus x and y), and the ratio to this adapter's measured copy
//! bandwidth — the roofline for a product that reads every weight once. Not a test:
//! `cargo bench --bench qmatvec [-- --sizes 4096,8192] [--repeats 20]`.

mod common;

use ridge::core::{DType, Tensor};
use ridge::kernels::QMatmul;
use ridge::kernels::ceilings;
use ridge::kernels::quant::{QuantFormat, QuantMatrix, quantize};

fn main() {
    let sizes = common::list("--sizes", &[4096, 8192]);
    let repeats = common::list("--repeats", &[20])[0];
    let ctx = common::context();
    let m = pollster::block_on(ceilings::measure(&ctx, 1 << 30, 5)).expect("ceilings");
    println!(
        "quantized matrix-vector products on {} (copy bandwidth measured here: {:.0} GB/s)",
        ctx.describe(),
        m.bandwidth_gbps
    );
    for &n in &sizes {
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 500.0)
            .collect();
        let xt = Tensor::from_slice(&ctx, &x, &[1, n]).expect("x");
        let y = Tensor::empty(&ctx, &[1, n], DType::F32).expect("y");
        let values: Vec<f32> = (0..n * n)
            .map(|i| ((i * 2654435761usize) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        for format in QuantFormat::ALL {
            let w = QuantMatrix::upload(&ctx, format, n, n, &quantize(format, &values).expect("q"))
                .expect("w");
            let op = QMatmul::new(1);
            op.run(&ctx, &xt, &w, &y).expect("warm");
            ctx.start_profiling();
            for _ in 0..repeats {
                op.run(&ctx, &xt, &w, &y).expect("run");
            }
            let profile = pollster::block_on(ctx.finish_profiling()).expect("profile");
            let mut ms: Vec<f64> = profile.spans.iter().filter_map(|s| s.ms).collect();
            ms.sort_by(f64::total_cmp);
            let Some(&median) = ms.get(ms.len() / 2) else {
                println!("  {n}² {format}: no timestamps on this adapter");
                continue;
            };
            let bytes = op.cost(format, n, n, DType::F32).bytes;
            let gbps = bytes / (median * 1e-3) / 1e9;
            println!(
                "  {n}² {format}: {median:.4} ms, {:.1} MB packed, {gbps:.0} GB/s = {:.2}× copy",
                w.bytes() as f64 / 1e6,
                gbps / m.bandwidth_gbps
            );
        }
    }
}
