//! Ceilings Ridge measures on the adapter itself: streaming bandwidth over working-set sizes
//! (the curve shows the caches), f32 and f16 FMA peak, per-dispatch overhead. The roofline
//! model uses them beside the datasheet figures.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::report::{CurvePoint, Measured};

use crate::launch::{self, Launch, Params};
use crate::shaders::{CEILINGS, Variant, storage_defines};

const WG: u32 = 256;
/// FMA iterations per invocation in `fma_peak` (64 FLOPs each).
const ITERS: u32 = 256;

/// Median GPU time of `repeats` launches, ms (after one untimed launch).
///
/// Errors: [`Error::Gpu`] when the adapter could not time them.
pub async fn median_ms(
    ctx: &Context,
    repeats: usize,
    launch: &dyn Fn(&Context) -> Result<()>,
) -> Result<f64> {
    launch(ctx)?;
    timed_median_ms(ctx, repeats, launch).await
}

/// GPU time [`warm_median_ms`] keeps the GPU busy before it counts, ms. An H200 that had
/// idled logged 480–525 MHz SM clocks for up to ≈ 0.75 s of following work (sampled every
/// 0.25 s); 20 ms of warm-up did not cover that, 200 ms is the compromise with bench time.
/// At most 2000 warm-up launches: shorter kernels are bound by host recording anyway.
const WARM_MS: f64 = 200.0;

/// As [`median_ms`], but when the launches are shorter than [`WARM_MS`] together, enough
/// untimed launches to fill it run first and the launches are timed again: an idle GPU runs
/// its first launches at idle clocks (on the H200 the autotuner, comparing candidates one
/// after another from idle, timed 1024³ GEMMs 3–5× slower than the bench did;
/// benches/NOTES.md). For comparisons of short kernels.
///
/// Errors: as [`median_ms`].
pub async fn warm_median_ms(
    ctx: &Context,
    repeats: usize,
    launch: &dyn Fn(&Context) -> Result<()>,
) -> Result<f64> {
    let first = median_ms(ctx, repeats, launch).await?;
    let repeats = repeats.max(1);
    if first * repeats as f64 >= WARM_MS {
        return Ok(first);
    }
    let warm = (WARM_MS / first.max(1e-3)).ceil().min(2000.0) as usize;
    for _ in 0..warm {
        launch(ctx)?;
    }
    timed_median_ms(ctx, repeats, launch).await
}

async fn timed_median_ms(
    ctx: &Context,
    repeats: usize,
    launch: &dyn Fn(&Context) -> Result<()>,
) -> Result<f64> {
    ctx.start_profiling();
    for _ in 0..repeats.max(1) {
        launch(ctx)?;
    }
    let profile = ctx.finish_profiling().await?;
    let name = profile.spans.first().map_or("", |s| s.name.as_str());
    profile
        .median_launch_ms(repeats.max(1))
        .ok_or_else(|| Error::Gpu(format!("{name}: this adapter could not time the launches")))
}

fn copy_launch<'a>(ctx: &Context, src: &'a Tensor, dst: &'a Tensor, n: u32) -> Result<Launch<'a>> {
    Ok(Launch {
        label: "stream_copy",
        shader: &CEILINGS,
        entry: "stream_copy",
        defines: storage_defines(DType::F32)
            .u32("WG", WG)
            .u32("ITERS", ITERS),
        params: Params::new().u(n),
        buffers: vec![(1, src), (2, dst)],
        workgroups: ctx.fold_workgroups("stream_copy", n.div_ceil(WG) as u64)?,
    })
}

/// The longest single launch `measure` lets itself make, ms. Sizes grow 4× per step and
/// stop once a launch takes this long, so no dispatch comes near a GPU watchdog (Chrome's
/// GPU process and Windows' TDR reset a device after about 2 s; a CPU driver such as
/// SwiftShader runs the largest sizes for seconds).
const LAUNCH_BUDGET_MS: f64 = 25.0;

/// Measures every ceiling. `max_bytes` caps the largest copy. The copy and the FMA kernel
/// start small and grow 4× per step while a launch stays under [`LAUNCH_BUDGET_MS`]; the
/// FMA peak is taken from the first size that runs ≥ 2 ms (or the largest tried), so a
/// fast GPU is measured past its launch overhead and a slow one is never flooded.
pub async fn measure(ctx: &Context, max_bytes: u64, repeats: usize) -> Result<Measured> {
    let limit = ctx
        .limits()
        .max_storage_buffer_binding_size
        .min(ctx.limits().max_buffer_size);
    let top = max_bytes.min(limit).min(1 << 30);
    let mut bandwidth_curve = Vec::new();
    let mut bytes: u64 = 1 << 16;
    while bytes <= top {
        let n = (bytes / 16) as usize;
        let src = Tensor::empty(ctx, &[n * 4], DType::F32)?;
        let dst = Tensor::empty(ctx, &[n * 4], DType::F32)?;
        let ms = median_ms(ctx, repeats, &|ctx| {
            copy_launch(ctx, &src, &dst, n as u32)?.run(ctx)
        })
        .await?;
        bandwidth_curve.push(CurvePoint {
            bytes,
            gbps: 2.0 * bytes as f64 / (ms * 1e-3) / 1e9,
        });
        if ms > LAUNCH_BUDGET_MS {
            break;
        }
        bytes *= 4;
    }
    let bandwidth_gbps = bandwidth_curve.last().map_or(0.0, |p| p.gbps);

    let f32_tflops = fma_peak(ctx, DType::F32, repeats).await?;
    let f16_tflops = if ctx.has_f16() {
        Some(fma_peak(ctx, DType::F16, repeats).await?)
    } else {
        None
    };
    let sink = Tensor::empty(ctx, &[4], DType::F32)?;
    let touch = |ctx: &Context| {
        Launch {
            label: "touch",
            shader: &CEILINGS,
            entry: "touch",
            defines: storage_defines(DType::F32)
                .u32("WG", WG)
                .u32("ITERS", ITERS),
            params: Params::new(),
            buffers: vec![(2, &sink)],
            workgroups: [1, 1, 1],
        }
        .run(ctx)
    };
    let dispatch_overhead_us = median_ms(ctx, repeats, &touch)
        .await
        .ok()
        .map(|ms| ms * 1e3);
    let host_overhead_us = host_overhead_us(ctx, &touch)?;
    Ok(Measured {
        bandwidth_curve,
        bandwidth_gbps,
        f32_tflops,
        f16_tflops,
        dispatch_overhead_us,
        host_overhead_us,
    })
}

/// FMA throughput in `dtype`, TFLOP/s: 2¹² invocations, then 4× more per step until a
/// launch takes ≥ 2 ms (past the launch overhead) or would exceed the budget, up to 2²².
async fn fma_peak(ctx: &Context, dtype: DType, repeats: usize) -> Result<f64> {
    let defines = launch::dtype_defines(ctx, "fma_peak", dtype)?
        .u32("WG", WG)
        .u32("ITERS", ITERS);
    let mut invocations: u32 = 1 << 12;
    loop {
        let sink = Tensor::empty(ctx, &[invocations as usize * 4], DType::F32)?;
        let ms = median_ms(ctx, repeats, &|ctx| {
            Launch {
                label: "fma_peak",
                shader: &CEILINGS,
                entry: "fma_peak",
                defines: defines.clone(),
                params: Params::new().u(invocations).u(0).f(0.5),
                buffers: vec![(2, &sink)],
                workgroups: ctx.fold_workgroups("fma_peak", invocations.div_ceil(WG) as u64)?,
            }
            .run(ctx)
        })
        .await?;
        // The next size takes about 4 × ms.
        if ms >= 2.0 || ms * 4.0 > LAUNCH_BUDGET_MS || invocations >= 1 << 22 {
            let flops = invocations as f64 * ITERS as f64 * 64.0;
            return Ok(flops / (ms * 1e-3) / 1e12);
        }
        invocations *= 4;
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn host_overhead_us(ctx: &Context, touch: &dyn Fn(&Context) -> Result<()>) -> Result<Option<f64>> {
    touch(ctx)?;
    ctx.flush();
    ctx.wait()?;
    let count = 200;
    let start = std::time::Instant::now();
    for _ in 0..count {
        touch(ctx)?;
    }
    ctx.flush();
    ctx.wait()?;
    Ok(Some(start.elapsed().as_secs_f64() * 1e6 / count as f64))
}

#[cfg(target_arch = "wasm32")]
fn host_overhead_us(
    _ctx: &Context,
    _touch: &dyn Fn(&Context) -> Result<()>,
) -> Result<Option<f64>> {
    Ok(None)
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let d = storage_defines(dtype).u32("WG", WG).u32("ITERS", ITERS);
    ["stream_copy", "fma_peak", "touch"]
        .into_iter()
        .map(|e| (&CEILINGS, e, d.clone()))
        .collect()
}
