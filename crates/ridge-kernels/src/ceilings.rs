//! Ceilings Ridge measures on the adapter itself: streaming bandwidth over working-set sizes
//! (the curve shows the caches), f32 and f16 FMA peak, the tensor-core peak where there are
//! tensor cores, per-dispatch overhead. The roofline model uses them beside the datasheet
//! figures.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::report::{CurvePoint, Measured};

use crate::launch::{self, Launch, Params};
use crate::shaders::{CEILINGS, TENSOR_PEAK, Variant, storage_defines};

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
const WARM_MS: f64 = 200.0;
/// Warm-up launches at most where candidates or shapes are timed one right after another
/// (the autotuner, the kernel benches): shorter kernels are bound by host recording anyway.
pub const WARM_LAUNCHES: usize = 2000;
/// Warm-up launches at most in `ridge bench`'s sweep, whose every case follows the host's
/// preparation of its tensors (cold weight copies: up to a second) while the GPU idles: 200
/// ms of a 4 µs kernel. With [`WARM_LAUNCHES`] (20 ms of a 10 µs kernel) the H200's decoder
/// sweep timed whole widths' products 2–3× slower than they run alone or in a decode step,
/// its SM clock logged at 345 MHz for a third of the sweep, and 6 of its 30 kinds fit worse
/// than 1.25× held out; with this, every product kind within 1.10× (benches/NOTES.md, runs
/// 152–154).
pub const SWEEP_WARM_LAUNCHES: usize = 50_000;

/// As [`median_ms`], but when the launches are shorter than [`WARM_MS`] together, enough
/// untimed launches to fill it (at most `max_warm`: [`WARM_LAUNCHES`] or
/// [`SWEEP_WARM_LAUNCHES`]) run first and the launches are timed again: an idle GPU runs its
/// first launches at idle clocks (on the H200 the autotuner, comparing candidates one after
/// another from idle, timed 1024³ GEMMs 3–5× slower than the bench did; benches/NOTES.md).
/// For comparisons of short kernels.
///
/// Errors: as [`median_ms`].
pub async fn warm_median_ms(
    ctx: &Context,
    repeats: usize,
    max_warm: usize,
    launch: &dyn Fn(&Context) -> Result<()>,
) -> Result<f64> {
    let first = median_ms(ctx, repeats, launch).await?;
    let repeats = repeats.max(1);
    if first * repeats as f64 >= WARM_MS {
        return Ok(first);
    }
    let warm = ((WARM_MS / first.max(1e-3)).ceil() as usize).min(max_warm);
    for _ in 0..warm {
        launch(ctx)?;
    }
    timed_median_ms(ctx, repeats, launch).await
}

/// The fastest of `first` (a median of `launch` already taken) and [`CEILING_TRIALS`] − 1
/// more medians: a sustained ceiling, robust to a run measured low.
async fn best_of_trials(
    ctx: &Context,
    repeats: usize,
    first: f64,
    launch: &dyn Fn(&Context) -> Result<()>,
) -> Result<f64> {
    let mut ms = first;
    for _ in 1..CEILING_TRIALS {
        ms = ms.min(timed_median_ms(ctx, repeats, launch).await?);
    }
    Ok(ms)
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

/// Copies `src` to `dst` with the kernel that measures copy bandwidth (`stream_copy`, one
/// vec4 per invocation): the reference for a memory-bound kernel that moves the same bytes.
///
/// Errors: [`Error::InvalidArgument`] unless both are f32 with the same number of elements, a
/// multiple of 4, and start on a vec4.
pub fn stream_copy(ctx: &Context, src: &Tensor, dst: &Tensor) -> Result<()> {
    let n = src.numel();
    let fits = |t: &Tensor| t.dtype() == DType::F32 && launch::starts_on_vector(t, 4);
    if !fits(src) || !fits(dst) || dst.numel() != n || !n.is_multiple_of(4) {
        return Err(Error::invalid(
            "stream_copy",
            format!(
                "needs f32 tensors of the same length, a multiple of 4, starting on a vec4; \
                 got {} {:?} and {} {:?}",
                src.dtype(),
                src.shape(),
                dst.dtype(),
                dst.shape()
            ),
        ));
    }
    let vectors = u32::try_from(n / 4)
        .map_err(|_| Error::invalid("stream_copy", format!("{n} elements is too many")))?;
    copy_launch(ctx, src, dst, vectors)?.run(ctx)
}

/// The longest single launch `measure` lets itself make, ms. Sizes grow 4× per step and
/// stop once a launch takes this long, so no dispatch comes near a GPU watchdog (Chrome's
/// GPU process and Windows' TDR reset a device after about 2 s; a CPU driver such as
/// SwiftShader runs the largest sizes for seconds).
const LAUNCH_BUDGET_MS: f64 = 25.0;

/// How many times [`measure`] times its largest copy and its FMA peak, keeping the best: one
/// measurement of copy bandwidth on lavapipe read 2.4, 4.3 and 6.7 GB/s in three runs, and a
/// ceiling measured low puts the kernels timed after it above their roof.
const CEILING_TRIALS: usize = 3;

/// Measures every ceiling. `max_bytes` caps the largest copy. The GPU is kept busy for
/// [`WARM_MS`] first (an idle GPU runs its first launches at idle clocks). The copy and the
/// FMA kernel start small and grow 4× per step while a launch stays under
/// [`LAUNCH_BUDGET_MS`]; the FMA peak is taken from the first size that runs ≥ 2 ms (or the
/// largest tried), so a fast GPU is measured past its launch overhead and a slow one is never
/// flooded. The sustained values (the largest copy, the FMA peak) are the best of
/// [`CEILING_TRIALS`] medians.
pub async fn measure(ctx: &Context, max_bytes: u64, repeats: usize) -> Result<Measured> {
    // Work still queued (a model's weights just uploaded) would be timed with the first
    // copies, and the copy's growth stop at a small size: the generation bench's probe after
    // a 1 GB model's upload measured 1,212–1,232 GB/s on an H100 and an H200 where the same
    // probe after SmolLM2's measured 2,455 (benches/NOTES.md, 2026-12-05 third session).
    ctx.flush();
    ctx.wait()?;
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
        let copy = |ctx: &Context| copy_launch(ctx, &src, &dst, n as u32)?.run(ctx);
        let mut ms = if bandwidth_curve.is_empty() {
            warm_median_ms(ctx, repeats, WARM_LAUNCHES, &copy).await?
        } else {
            median_ms(ctx, repeats, &copy).await?
        };
        let last = ms > LAUNCH_BUDGET_MS || bytes * 4 > top;
        if last {
            ms = best_of_trials(ctx, repeats, ms, &copy).await?;
        }
        bandwidth_curve.push(CurvePoint {
            bytes,
            gbps: 2.0 * bytes as f64 / (ms * 1e-3) / 1e9,
        });
        if last {
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
    let tensor_tflops = if ctx.has_coop_f16() {
        Some(tensor_peak(ctx, TensorFeed::Registers, repeats).await?)
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
    let stream_dispatch_us = stream_dispatch_us(ctx, &touch)?;
    let rule = crate::qmatmul::MatvecRule::of(ctx);
    Ok(Measured {
        bandwidth_curve,
        bandwidth_gbps,
        f32_tflops,
        f16_tflops,
        tensor_tflops,
        dispatch_overhead_us,
        host_overhead_us,
        stream_dispatch_us,
        int8_storage_bytes: rule.int8_storage,
        lane_rows: rule.lane_rows,
        prompt_lane_rows: rule.prompt_lane_rows,
    })
}

/// FMA throughput in `dtype`, TFLOP/s: 2¹² invocations, then 4× more per step until a
/// launch takes ≥ 2 ms (past the launch overhead) or would exceed the budget, up to 2²²;
/// that size is timed [`CEILING_TRIALS`] times and the best kept.
async fn fma_peak(ctx: &Context, dtype: DType, repeats: usize) -> Result<f64> {
    let defines = launch::dtype_defines(ctx, "fma_peak", dtype)?
        .u32("WG", WG)
        .u32("ITERS", ITERS);
    let mut invocations: u32 = 1 << 12;
    loop {
        let sink = Tensor::empty(ctx, &[invocations as usize * 4], DType::F32)?;
        let fma = |ctx: &Context| {
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
        };
        let mut ms = median_ms(ctx, repeats, &fma).await?;
        // The next size takes about 4 × ms.
        if ms >= 2.0 || ms * 4.0 > LAUNCH_BUDGET_MS || invocations >= 1 << 22 {
            ms = best_of_trials(ctx, repeats, ms, &fma).await?;
            let flops = invocations as f64 * ITERS as f64 * 64.0;
            return Ok(flops / (ms * 1e-3) / 1e12);
        }
        invocations *= 4;
    }
}

/// Subgroups per `tensor_peak` workgroup.
const PEAK_SUBGROUPS: u32 = 4;
/// Multiply-add steps per subgroup in `tensor_peak` (even: the fed variants go two k steps,
/// one 32-deep slice, at a time).
const PEAK_ITERS: u32 = 1024;

/// How [`tensor_peak`] feeds the tensor cores: from the multiply-add rate itself to a
/// GEMM's main loop rebuilt a piece at a time (`shaders/tensor_peak.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorFeed {
    /// Operands in registers, 8 independent accumulators per subgroup: the peak.
    Registers,
    /// 4 × 4 fragments per subgroup read from workgroup memory each k step, 16 accumulators,
    /// as the tensor-core GEMM's inner loop reads them.
    Workgroup,
    /// As `Workgroup`, with a GEMM's two workgroup barriers per 32-deep slice.
    Barriers,
    /// As `Barriers`, each invocation storing its share of the next slice between them.
    Staged,
    /// As `Staged`, the stored values loaded from global memory (an L2-resident 16 MiB
    /// buffer) at the start of each slice: the GEMM's main loop without its address math.
    Global,
    /// As `Global`, each slice's loads staged a slice later (a second set of registers), so
    /// they have a whole slice to arrive.
    GlobalAhead,
    /// As `Staged`, the tile held as `vec4<f16>` so that staging stores 8 bytes at a time.
    StagedWide,
    /// As `Global`, with `StagedWide`'s stores.
    GlobalWide,
}

impl TensorFeed {
    /// Every feed, from the peak to the GEMM-like loop.
    pub const ALL: [TensorFeed; 8] = [
        TensorFeed::Registers,
        TensorFeed::Workgroup,
        TensorFeed::Barriers,
        TensorFeed::Staged,
        TensorFeed::Global,
        TensorFeed::GlobalAhead,
        TensorFeed::StagedWide,
        TensorFeed::GlobalWide,
    ];
}

/// Cooperative-matrix multiply-add throughput, f16 × f16 → f32 at 16 × 16 × 16, TFLOP/s,
/// with the operands fed as `feed` says (`shaders/tensor_peak.wgsl`). 2⁸ workgroups of
/// [`PEAK_SUBGROUPS`] subgroups, then 4× more per step until a launch takes ≥ 2 ms or would
/// exceed the budget, up to 2¹⁸. `Registers` is the ceiling a tensor-core GEMM
/// (`GemmKernel::Coop`) is measured against; cuBLAS on the same GPU may use instructions
/// this API does not reach (Hopper's warpgroup MMA), so its figure can be higher. The other
/// feeds show what each piece of a GEMM's main loop costs.
///
/// Errors: [`Error::InvalidArgument`] on an adapter without f16 × f16 → f32 16 × 16 × 16
/// cooperative matrices at subgroup size 32 ([`Context::has_coop_f16`]).
pub async fn tensor_peak(ctx: &Context, feed: TensorFeed, repeats: usize) -> Result<f64> {
    if !ctx.has_coop_f16() {
        return Err(Error::invalid(
            "tensor_peak",
            "needs an adapter with f16 x f16 -> f32 16x16x16 cooperative matrices at subgroup \
             size 32",
        ));
    }
    let (shader, entry, defines) = tensor_peak_variant(feed);
    let chains = if feed == TensorFeed::Registers { 8 } else { 16 };
    // Operands near 0.01: a multiply-add adds 16 products of about 1e-4, a run of
    // PEAK_ITERS about 2, so the f32 sums stay finite over any number of runs.
    let operands: Vec<f32> = (0..512).map(|i| 0.01 + (i % 7) as f32 * 1e-3).collect();
    let src = Tensor::from_f32(ctx, &operands, &[512], DType::F16)?;
    let slots = 64 * chains * 256;
    let dst = Tensor::from_slice(ctx, &vec![0.0f32; slots], &[slots])?;
    // The Global feed's source: 16 MiB of halves near 0.01 (the others bind it unread), 2²⁰
    // 16-byte loads: the shader wraps its offsets with a mask, not a division.
    let global = (feed != TensorFeed::Registers)
        .then(|| {
            let n = 8 << 20;
            let values: Vec<f32> = (0..n).map(|i| 0.01 + (i % 5) as f32 * 1e-3).collect();
            Tensor::from_f32(ctx, &values, &[n], DType::F16)
        })
        .transpose()?;
    let mut workgroups: u32 = 1 << 8;
    loop {
        let ms = median_ms(ctx, repeats, &|ctx| {
            let mut buffers = vec![(1, &src), (2, &dst)];
            buffers.extend(global.as_ref().map(|g| (3, g)));
            Launch {
                label: entry,
                shader,
                entry,
                defines: defines.clone(),
                params: Params::new().u(workgroups),
                buffers,
                workgroups: ctx.fold_workgroups(entry, workgroups as u64)?,
            }
            .run(ctx)
        })
        .await?;
        if ms >= 2.0 || ms * 4.0 > LAUNCH_BUDGET_MS || workgroups >= 1 << 18 {
            let subgroups = (workgroups * PEAK_SUBGROUPS) as f64;
            let flops = subgroups * PEAK_ITERS as f64 * chains as f64 * 8192.0;
            return Ok(flops / (ms * 1e-3) / 1e12);
        }
        workgroups *= 4;
    }
}

/// The shader variant of `feed`: `tensor_peak`, or `tensor_tile` with its 4 × 4 fragments
/// per subgroup generated (the `//@` blocks: 16 named accumulators, 8 fragment loads and 16
/// multiply-adds per step) and the pieces of a GEMM's main loop switched on.
fn tensor_peak_variant(feed: TensorFeed) -> Variant {
    let d = ridge_core::Defines::new()
        .enable("f16")
        .enable("wgpu_cooperative_matrix")
        .u32("WG", 32 * PEAK_SUBGROUPS)
        .u32("ITERS", PEAK_ITERS);
    let (mut declare, mut step, mut store) = (String::new(), String::new(), String::new());
    for i in 0..4 {
        step.push_str(&format!(
            "let fa{i} = coopLoadT<coop_mat16x16<f16, A>>(&tile[({}u * TS + at) / TW], TS / TW);\n",
            16 * i
        ));
        step.push_str(&format!(
            "let fb{i} = coopLoadT<coop_mat16x16<f16, B>>(&tile[((64u + at) * TS + {}u) / TW], TS / TW);\n",
            16 * i
        ));
    }
    for i in 0..4 {
        for j in 0..4 {
            let c = 4 * i + j;
            declare.push_str(&format!(
                "var c{c} = coopLoadT<coop_mat16x16<f32, C>>(&dst[slot + {}u], 16u);\n",
                256 * c
            ));
            step.push_str(&format!("c{c} = coopMultiplyAdd(fa{i}, fb{j}, c{c});\n"));
            store.push_str(&format!(
                "coopStoreT(c{c}, &dst[slot + {}u], 16u);\n",
                256 * c
            ));
        }
    }
    use TensorFeed::*;
    let wide = matches!(feed, StagedWide | GlobalWide);
    let stores = if wide {
        "tile[o / 4u] = v[0]; tile[o / 4u + 1u] = v[1];".to_string()
    } else {
        (0..8)
            .map(|h| format!("tile[o + {h}u] = v[{}][{}];", h / 4, h % 4))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let d = d
        .alias("TT", if wide { "vec4<f16>" } else { "f16" })
        .u32("TW", if wide { 4 } else { 1 })
        .block("STAGE_STORES", stores)
        .block("DECLARE", declare)
        .block("STEP", step)
        .block("STORE", store)
        .bool("BARRIERS", !matches!(feed, Registers | Workgroup))
        .bool("STAGE", !matches!(feed, Registers | Workgroup | Barriers))
        .bool("GLOAD", matches!(feed, Global | GlobalAhead | GlobalWide))
        .bool("AHEAD", feed == GlobalAhead);
    let entry = if feed == Registers {
        "tensor_peak"
    } else {
        "tensor_tile"
    };
    (&TENSOR_PEAK, entry, d)
}

/// Every feed's variant, for the shader tests.
pub(crate) fn tensor_peak_variants() -> Vec<Variant> {
    TensorFeed::ALL
        .into_iter()
        .map(tensor_peak_variant)
        .collect()
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

/// Dependent trivial dispatches (each writes the buffer the previous one wrote: a barrier
/// between each two) in the stream [`stream_dispatch_us`] times.
#[cfg(not(target_arch = "wasm32"))]
const STREAM_DISPATCHES: usize = 1000;

/// The GPU's time a dispatch in a stream of [`STREAM_DISPATCHES`] dependent `touch`es,
/// queued behind a blocker ([`queued_gpu_ms`]), µs. `None` when the recording outlasted the
/// blocker anyway (the figure would be the host's), and on the web (no clock to wait on).
#[cfg(not(target_arch = "wasm32"))]
fn stream_dispatch_us(
    ctx: &Context,
    touch: &dyn Fn(&Context) -> Result<()>,
) -> Result<Option<f64>> {
    let stream = || -> Result<()> {
        for _ in 0..STREAM_DISPATCHES {
            touch(ctx)?;
        }
        Ok(())
    };
    let t = std::time::Instant::now();
    stream()?;
    ctx.flush();
    ctx.wait()?;
    let host_ms = t.elapsed().as_secs_f64() * 1e3;
    let (ms, in_time) = queued_gpu_ms(ctx, host_ms, stream)?;
    Ok((in_time && ms > 0.0).then(|| ms * 1e3 / STREAM_DISPATCHES as f64))
}

/// The GPU time of the work `record` records, ms, with the host's recording out of the way:
/// it is queued behind a blocker (copies of 64 MiB, enough of them to outlast three times
/// `host_ms`, the recording's time measured before, plus 20 ms), so that it runs back to
/// back; its time is the wall clock of blocker and work less the blocker's alone. Also
/// whether the recording ended before the blocker did (else the figure is an upper bound:
/// the host's). What the generation bench's GPU-bound decode and [`measure`]'s stream floor
/// are timed by.
///
/// Errors: a buffer the adapter refuses; `record`'s.
#[cfg(not(target_arch = "wasm32"))]
pub fn queued_gpu_ms(
    ctx: &Context,
    host_ms: f64,
    record: impl FnOnce() -> Result<()>,
) -> Result<(f64, bool)> {
    use std::time::Instant;
    let wall_ms = |f: &dyn Fn() -> Result<()>| -> Result<f64> {
        let t = Instant::now();
        f()?;
        ctx.flush();
        ctx.wait()?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    };
    let n = (16usize << 20).min(ctx.limits().max_storage_buffer_binding_size as usize / 16);
    let src = Tensor::empty(ctx, &[n * 4], DType::F32)?;
    let dst = Tensor::empty(ctx, &[n * 4], DType::F32)?;
    let copy = || copy_launch(ctx, &src, &dst, n as u32)?.run(ctx);
    let copies = |count: usize| {
        move || -> Result<()> {
            for _ in 0..count {
                copy()?;
            }
            Ok(())
        }
    };
    wall_ms(&copies(4))?;
    // Amortised over 16: one copy's wall clock is mostly the wait's overhead, and a blocker
    // sized by it ended before the recording it was to hide.
    let copy_ms = (wall_ms(&copies(16))? / 16.0).max(1e-3);
    let blocker = copies(((3.0 * host_ms + 20.0) / copy_ms).ceil().max(4.0) as usize);
    let alone = wall_ms(&blocker)?;
    let t = Instant::now();
    blocker()?;
    ctx.flush();
    record()?;
    let recorded = t.elapsed().as_secs_f64() * 1e3;
    ctx.flush();
    ctx.wait()?;
    let both = t.elapsed().as_secs_f64() * 1e3;
    Ok((both - alone, recorded < alone))
}

#[cfg(target_arch = "wasm32")]
fn stream_dispatch_us(
    _ctx: &Context,
    _touch: &dyn Fn(&Context) -> Result<()>,
) -> Result<Option<f64>> {
    Ok(None)
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
