//! Ceilings Ridge measures on the adapter itself: streaming bandwidth over working-set sizes
//! (the curve shows the caches), f32 and f16 FMA peak, per-dispatch overhead. The roofline
//! model uses them beside the datasheet figures.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::roofline::{CeilingSource, Ceilings};
use serde::{Deserialize, Serialize};

use crate::launch::{self, Launch, Params};
use crate::shaders::{CEILINGS, Variant, storage_defines};

const WG: u32 = 256;
/// FMA iterations per invocation in `fma_peak` (64 FLOPs each).
const ITERS: u32 = 256;

/// One point of the bandwidth curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BandwidthPoint {
    /// Bytes copied (the working set is twice this: source and destination).
    pub bytes: u64,
    /// Achieved bandwidth, GB/s (bytes read + written per second, 10⁹).
    pub gbps: f64,
}

/// What was measured on an adapter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredCeilings {
    /// Streaming copy bandwidth by size, smallest first.
    pub bandwidth_curve: Vec<BandwidthPoint>,
    /// The bandwidth at the largest size: device memory, past every cache, GB/s.
    pub bandwidth_gbps: f64,
    /// f32 FMA throughput, TFLOP/s (FMA = 2).
    pub f32_tflops: f64,
    /// f16 FMA throughput, TFLOP/s, where the adapter has `shader-f16`.
    pub f16_tflops: Option<f64>,
    /// GPU time of a trivial one-invocation dispatch, µs (timestamps, like every kernel
    /// time): the fixed cost the roofline adds to each dispatch. `None` when untimed.
    pub dispatch_overhead_us: Option<f64>,
    /// Host wall-clock time per dispatch of that kernel in a stream of 200 (recording,
    /// submission, execution), µs: what a chain of small kernels pays end to end. `None` in
    /// the browser.
    pub host_overhead_us: Option<f64>,
}

impl MeasuredCeilings {
    /// Roofline ceilings at f32 or f16 (f16 falls back to f32 without `shader-f16`).
    pub fn ceilings(&self, f16: bool) -> Ceilings {
        let tflops = if f16 {
            self.f16_tflops.unwrap_or(self.f32_tflops)
        } else {
            self.f32_tflops
        };
        Ceilings::new(
            tflops,
            self.bandwidth_gbps,
            self.dispatch_overhead_us.unwrap_or(0.0) * 1e-6,
            CeilingSource::Measured("measured by ridge bench".into()),
        )
    }
}

/// Median GPU time of `repeats` launches, ms (after one untimed launch).
///
/// Errors: [`Error::Gpu`] when the adapter could not time them.
pub async fn median_ms(
    ctx: &Context,
    repeats: usize,
    launch: &dyn Fn(&Context) -> Result<()>,
) -> Result<f64> {
    launch(ctx)?;
    ctx.start_profiling();
    for _ in 0..repeats.max(1) {
        launch(ctx)?;
    }
    let profile = ctx.finish_profiling().await?;
    let name = profile
        .spans
        .first()
        .map(|s| s.name.clone())
        .unwrap_or_default();
    profile
        .median_ms(&name)
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

/// Measures every ceiling. `max_bytes` caps the largest copy (CPU drivers are slow).
pub async fn measure(ctx: &Context, max_bytes: u64, repeats: usize) -> Result<MeasuredCeilings> {
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
        bandwidth_curve.push(BandwidthPoint {
            bytes,
            gbps: 2.0 * bytes as f64 / (ms * 1e-3) / 1e9,
        });
        bytes *= 4;
    }
    let bandwidth_gbps = bandwidth_curve.last().map_or(0.0, |p| p.gbps);

    let invocations: u32 = if ctx.info().device_type == ridge_core::wgpu::DeviceType::Cpu {
        1 << 14
    } else {
        1 << 22
    };
    let sink = Tensor::empty(ctx, &[invocations as usize * 4], DType::F32)?;
    let flops = invocations as f64 * ITERS as f64 * 64.0;
    let peak = |dtype: DType| {
        let defines = launch::dtype_defines(ctx, "fma_peak", dtype)
            .map(|d| d.u32("WG", WG).u32("ITERS", ITERS));
        let sink = &sink;
        async move {
            let defines = defines?;
            let ms = median_ms(ctx, repeats, &|ctx| {
                Launch {
                    label: "fma_peak",
                    shader: &CEILINGS,
                    entry: "fma_peak",
                    defines: defines.clone(),
                    params: Params::new().u(invocations).u(0).f(0.5),
                    buffers: vec![(2, sink)],
                    workgroups: ctx.fold_workgroups("fma_peak", invocations.div_ceil(WG) as u64)?,
                }
                .run(ctx)
            })
            .await?;
            Ok::<f64, Error>(flops / (ms * 1e-3) / 1e12)
        }
    };
    let f32_tflops = peak(DType::F32).await?;
    let f16_tflops = if ctx.has_f16() {
        Some(peak(DType::F16).await?)
    } else {
        None
    };
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
    Ok(MeasuredCeilings {
        bandwidth_curve,
        bandwidth_gbps,
        f32_tflops,
        f16_tflops,
        dispatch_overhead_us,
        host_overhead_us,
    })
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
