//! GEMM tilings side by side: each of the autotuner's candidates checked against the f64
//! reference on an odd shape and on one whose dims are multiples of 4 and 8 (the vector
//! loads), then timed (median of GPU timestamps after
//! warming the GPU, `ceilings::warm_median_ms`) at 1024³, 2048³ and 4096³ with B stored K × N
//! ("NN") and N × K ("NT", a Linear layer's weight), and at MiniLM's projections at batch 32
//! and 1 (NT; `ratios.py` sets them against cuBLAS), f32 and f16 (tensor cores where the
//! adapter has them). Then the GELU epilogue at
//! MiniLM's up projection: fused into the GEMM against the GEMM followed by the element-wise
//! GELU, next to the saving the roofline model predicts (the GELU pass's bytes ÷ measured
//! copy bandwidth, plus one dispatch overhead). Not a test: `cargo bench --bench gemm`
//! (`-- --sizes 256,512` to choose; `-- --coop` or `-- --tiled` for one kernel's candidates;
//! `-- --tilings 128x96x24x8x8` for SIMT tilings outside the candidates).
//! Prints TFLOP/s and ms, and first, where there are tensor cores, their ceilings
//! (`ceilings::tensor_peak`).

mod common;

use ridge::core::{Context, DType, Tensor};
use ridge::kernels::ceilings::{self, WARM_LAUNCHES, warm_median_ms};
use ridge::kernels::check::compare;
use ridge::kernels::{Gemm, GemmConfig, GemmKernel, Unary, unary};

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

/// Correct on `m × n × k` (Bᵀ) within the GEMM's error bound.
fn correct(
    ctx: &Context,
    kernel: GemmKernel,
    dtype: DType,
    m: usize,
    n: usize,
    k: usize,
) -> Result<(), String> {
    let g = Gemm {
        trans_b: true,
        ..Gemm::new(m, n, k)
    };
    let (a, av) = upload(ctx, &values(m * k, 1), &[m, k], dtype);
    let (b, bv) = upload(ctx, &values(n * k, 2), &[n, k], dtype);
    let c = Tensor::empty(ctx, &[m, n], dtype).unwrap();
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
    common::check_args(
        &["--coop", "--tiled"],
        &["--sizes", "--tilings"],
        "cargo bench --bench gemm [-- OPTIONS]\n\nGEMM tilings side by side: each candidate checked against the f64 reference, then timed at square sizes and MiniLM's projections, f32 and f16.\n\n  --sizes 1024,2048,4096     square sizes\n  --coop / --tiled           one kernel's candidates only\n  --tilings 128x96x24x8x8    SIMT tilings outside the candidates (BMxBNxBKxTMxTN)",
    );
    let sizes = common::list("--sizes", &[1024, 2048, 4096]);
    let ctx = common::context();
    println!(
        "GEMM candidates on {} (coop f16: {})",
        ctx.describe(),
        ctx.has_coop_f16()
    );
    if ctx.has_coop_f16() {
        // The tensor cores' ceilings as WGSL reaches them, and a GEMM's main loop rebuilt on
        // them a piece at a time (`ceilings::TensorFeed`).
        for feed in ceilings::TensorFeed::ALL {
            let tflops =
                pollster::block_on(ceilings::tensor_peak(&ctx, feed, 5)).expect("tensor peak");
            println!("tensor cores (16×16×16 f16 → f32), {feed:?}: {tflops:.1} TFLOP/s");
        }
    }
    let mut dtypes = vec![DType::F32];
    if ctx.has_f16() {
        dtypes.push(DType::F16);
    }
    // MiniLM's projections (QKV, attention output, FFN up, FFN down) at batch 32 and 1 × 128
    // tokens.
    let minilm: Vec<(usize, usize, usize)> = [4096, 128]
        .into_iter()
        .flat_map(|m| {
            [
                (m, 1152, 384),
                (m, 384, 384),
                (m, 1536, 384),
                (m, 384, 1536),
            ]
        })
        .collect();
    // `--coop`: only the tensor-core candidates (`--tiled`: only the SIMT ones).
    let (coop_only, tiled_only) = (common::flag("--coop"), common::flag("--tiled"));
    let tilings = tilings();
    for dtype in dtypes {
        let candidates = match &tilings {
            Some(t) => t.iter().map(|&c| GemmKernel::Tiled(c)).collect(),
            None => GemmKernel::candidates(&ctx, dtype),
        };
        for kernel in candidates {
            let coop = matches!(kernel, GemmKernel::Coop(_));
            if (coop_only && !coop) || (tiled_only && coop) {
                continue;
            }
            let mut line = format!("{dtype} {kernel:?}");
            if let Err(e) = correct(&ctx, kernel, dtype, 133, 70, 97)
                .and_then(|()| correct(&ctx, kernel, dtype, 132, 68, 96))
            {
                println!("{line}: REJECTED ({e})");
                continue;
            }
            let time = |m: usize, n: usize, k: usize, trans_b: bool| {
                let g = Gemm {
                    trans_b,
                    ..Gemm::new(m, n, k)
                };
                let (a, _) = upload(&ctx, &values(m * k, 3), &[m, k], dtype);
                let (b, _) = upload(&ctx, &values(k * n, 4), &g.b_dims(), dtype);
                let c = Tensor::empty(&ctx, &[m, n], dtype).unwrap();
                let launch = |ctx: &Context| g.run_with(ctx, kernel, &a, &b, None, &c);
                match pollster::block_on(warm_median_ms(&ctx, 10, WARM_LAUNCHES, &launch)) {
                    Ok(ms) => format!("{:.1}", 2.0 * (m * n * k) as f64 / ms / 1e9),
                    Err(e) => format!("failed: {e}"),
                }
            };
            for &n in &sizes {
                let (nn, nt) = (time(n, n, n, false), time(n, n, n, true));
                line.push_str(&format!("  {n}³ NN {nn} NT {nt}"));
            }
            for &(m, n, k) in &minilm {
                line.push_str(&format!("  {m}×{n}×{k} NT {}", time(m, n, k, true)));
            }
            line.push_str("  TFLOP/s");
            println!("{line}");
        }
    }
    if tilings.is_none() {
        layer_forms(&ctx, &minilm);
        gelu_epilogue(&ctx);
    }
}

/// MiniLM's products with the kernel the tuning table picks (`Gemm::run`, as the encoder
/// launches them), in four forms: B stored K × N (NN, the sweep's `gemm` kind), N × K (NT, a
/// Linear layer's weight), NT with the bias, and NT with the bias and GELU (the MLP's up
/// projection): which of layout and epilogue makes a layer slower than the swept kind.
fn layer_forms(ctx: &Context, shapes: &[(usize, usize, usize)]) {
    let mut dtypes = vec![DType::F32];
    if ctx.has_f16() {
        dtypes.push(DType::F16);
    }
    for dtype in dtypes {
        for &(m, n, k) in shapes {
            let (a, _) = upload(ctx, &values(m * k, 8), &[m, k], dtype);
            let (b_kn, _) = upload(ctx, &values(n * k, 9), &[k, n], dtype);
            let (b_nk, _) = upload(ctx, &values(n * k, 9), &[n, k], dtype);
            let (bias, _) = upload(ctx, &values(n, 10), &[n], dtype);
            let c = Tensor::empty(ctx, &[m, n], dtype).unwrap();
            let nn = Gemm::new(m, n, k);
            let nt = Gemm {
                trans_b: true,
                ..nn
            };
            let forms: [(&str, Gemm, bool); 4] = [
                ("NN", nn, false),
                ("NT", nt, false),
                ("NT+bias", nt, true),
                ("NT+bias+GELU", Gemm { gelu: true, ..nt }, true),
            ];
            let mut line = format!("{dtype} {m}×{n}×{k} tuned:");
            for (name, g, with_bias) in forms {
                let b = if g.trans_b { &b_nk } else { &b_kn };
                let launch = |ctx: &Context| g.run(ctx, &a, b, with_bias.then_some(&bias), &c);
                let ms = pollster::block_on(warm_median_ms(ctx, 20, WARM_LAUNCHES, &launch))
                    .expect("timed");
                line.push_str(&format!("  {name} {:.1} µs", ms * 1e3));
            }
            println!("{line}");
        }
    }
}

/// `--tilings 128x96x24x8x8,...`: SIMT tilings (BM × BN × BK × TM × TN, one stage, no split)
/// timed instead of the autotuner's candidates, for tilings outside its list.
///
/// Panics on a malformed tiling (a bench, not a CLI).
fn tilings() -> Option<Vec<GemmConfig>> {
    let args: Vec<String> = std::env::args().collect();
    let list = args.get(args.iter().position(|a| a == "--tilings")? + 1)?;
    let parse = |t: &str| {
        let d: Vec<u32> = t
            .split('x')
            .map(|v| v.parse().expect("--tilings: a number"))
            .collect();
        assert_eq!(d.len(), 5, "--tilings: BMxBNxBKxTMxTN, not {t:?}");
        GemmConfig {
            bm: d[0],
            bn: d[1],
            bk: d[2],
            tm: d[3],
            tn: d[4],
            stages: 1,
            splits: 1,
        }
    };
    Some(list.split(',').map(parse).collect())
}

/// MiniLM's batch-32 up projection (4096 × 1536 × 384, Bᵀ, bias) with GELU fused into the
/// GEMM's epilogue against the GEMM and a separate GELU pass, for each storage type.
fn gelu_epilogue(ctx: &Context) {
    let measured = pollster::block_on(ceilings::measure(ctx, 1 << 28, 10)).expect("ceilings");
    let (m, n, k) = (4096, 1536, 384);
    let mut dtypes = vec![DType::F32];
    if ctx.has_f16() {
        dtypes.push(DType::F16);
    }
    for dtype in dtypes {
        let g = Gemm {
            trans_b: true,
            ..Gemm::new(m, n, k)
        };
        let (a, _) = upload(ctx, &values(m * k, 5), &[m, k], dtype);
        let (b, _) = upload(ctx, &values(n * k, 6), &[n, k], dtype);
        let (bias, _) = upload(ctx, &values(n, 7), &[n], dtype);
        let up = Tensor::empty(ctx, &[m, n], dtype).unwrap();
        let act = Tensor::empty(ctx, &[m, n], dtype).unwrap();
        let fused = |ctx: &Context| Gemm { gelu: true, ..g }.run(ctx, &a, &b, Some(&bias), &act);
        let separate = |ctx: &Context| {
            g.run(ctx, &a, &b, Some(&bias), &up)?;
            unary(ctx, Unary::Gelu, &up, &act)
        };
        let ms = |f: &dyn Fn(&Context) -> ridge::core::Result<()>| {
            pollster::block_on(warm_median_ms(ctx, 20, WARM_LAUNCHES, f)).expect("timed")
        };
        // Alternated twice, the faster of each kept: neither gets the colder GPU.
        let (mut fused_ms, mut separate_ms) = (f64::MAX, f64::MAX);
        for _ in 0..2 {
            fused_ms = fused_ms.min(ms(&fused));
            separate_ms = separate_ms.min(ms(&separate));
        }
        let pass = Unary::Gelu.cost(m * n, dtype);
        let predicted = measured
            .ceilings(dtype == DType::F16)
            .predict(&pass)
            .seconds
            * 1e3;
        println!(
            "{dtype} GELU epilogue at {m}×{n}×{k}: fused {fused_ms:.4} ms, GEMM + GELU \
             {separate_ms:.4} ms, saved {:.4} ms (model: {predicted:.4} ms)",
            separate_ms - fused_ms
        );
    }
}
