//! The GPU test harness: every test runs once per adapter present (lavapipe's Vulkan and
//! llvmpipe's GL here and in CI; real GPUs elsewhere), with per-adapter expectations as data.
//!
//! `RIDGE_TEST_ADAPTERS` narrows the adapters (same syntax as `RIDGE_ADAPTER`, comma
//! separated). With no adapter at all the harness fails loudly: a GPU test that silently
//! runs nothing cannot fail, and a test that cannot fail is a defect.

use std::sync::OnceLock;

use rand::{RngExt, SeedableRng, rngs::StdRng};
use ridge::core::{Context, ContextOptions, Error, Result, context};

/// What a test is expected to do on an adapter, when not simply "pass".
#[allow(
    dead_code,
    reason = "variants are used by EXPECTATIONS entries as adapters need them"
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not run: the adapter lacks what the test needs, or is known to hang/crash on it.
    Skip,
    /// Expected to fail; if it passes, the harness says so and the entry must go.
    Fail,
}

/// One known deviation: adapter (name substring) + backend + test name.
pub struct Expectation {
    pub adapter: &'static str,
    pub backend: &'static str,
    pub test: &'static str,
    pub outcome: Outcome,
    pub why: &'static str,
}

/// Known deviations, per adapter. Add entries here, not `#[ignore]`s in tests.
///
/// On llvmpipe's GL (the OpenGL backend through naga's GLSL writer, on the CPU) the tests
/// that compile every variant of a kernel, or check host logic the same on every backend,
/// are left to lavapipe's Vulkan, which runs them all: GL tests take turns on one thread,
/// and these took ~940 of its ~1,800 s with Mesa's shader cache cold, as CI has it (benches/
/// NOTES.md, 2026-12-07, fifth session), and SmolLM2's generation and per-layer tests 154 of
/// the 785 left (sixth session). Every kernel still runs on GL through the other
/// tests (the tuning table's GEMM tilings, the decode attention and products as a forward
/// launches them, the reference forwards of MiniLM and SmolLM2).
pub const EXPECTATIONS: &[Expectation] = &[
    gl_left_to_vulkan(
        "minilm_split_batches",
        "host logic (a batch past the binding limit split): 8,448 tokens, 336 s",
    ),
    gl_left_to_vulkan(
        "gemm_candidates",
        "every tuning candidate's GEMM pipelines: 109 s of compiles",
    ),
    gl_left_to_vulkan(
        "kv_attention_loads",
        "every way of loading a decode attention's keys: 85 s of compiles",
    ),
    gl_left_to_vulkan(
        "qmatvec_launch_shapes",
        "every matrix-vector launch shape: 68 s of compiles",
    ),
    gl_left_to_vulkan(
        "decode_attention",
        "the opt-in fused decode attention block (off by default): 72 s of compiles",
    ),
    gl_left_to_vulkan(
        "smollm2_fused",
        "SmolLM2's forward with the opt-in fused block against the reference: 218 s",
    ),
    gl_left_to_vulkan(
        "smollm2_generate",
        "host logic (the generation loop's stops, the cache's length, sampled draws replayed), \
         its kernels in smollm2_f32 and sample: 109 s",
    ),
    gl_left_to_vulkan(
        "smollm2_hidden",
        "the per-layer residual RMS of the forward smollm2_f32 runs on GL: 45 s",
    ),
];

/// A test skipped on llvmpipe's GL and run on Vulkan (see [`EXPECTATIONS`]).
const fn gl_left_to_vulkan(test: &'static str, why: &'static str) -> Expectation {
    Expectation {
        adapter: "llvmpipe",
        backend: "gl",
        test,
        outcome: Outcome::Skip,
        why,
    }
}

/// The contexts of every adapter present, created once per test binary.
pub fn contexts() -> &'static [Context] {
    static CONTEXTS: OnceLock<Vec<Context>> = OnceLock::new();
    CONTEXTS.get_or_init(|| {
        let mut all = pollster::block_on(context::adapters());
        if let Ok(filter) = std::env::var("RIDGE_TEST_ADAPTERS") {
            let wanted: Vec<&str> = filter.split(',').map(str::trim).collect();
            all.retain(|a| {
                wanted
                    .iter()
                    .any(|w| !context::select(vec![a.clone()], w).is_empty())
            });
        }
        let contexts: Vec<Context> = all
            .into_iter()
            .filter_map(|a| {
                let name = context::describe(&a.get_info());
                match pollster::block_on(Context::on_adapter(a, &ContextOptions::default())) {
                    Ok(ctx) => {
                        // Tests never autotune: they run with the fixed, shipped table.
                        let (tables, warnings) = ridge::tune::tables_for(&ctx.fingerprint(), None);
                        assert!(warnings.is_empty(), "shipped tables: {warnings:?}");
                        ctx.set_tuning(Some(std::sync::Arc::new(tables)));
                        Some(ctx)
                    }
                    Err(e) => {
                        eprintln!("harness: skipping {name}: {e}");
                        None
                    }
                }
            })
            .collect();
        assert!(
            !contexts.is_empty(),
            "no GPU adapter: install a Vulkan driver (on Debian: apt-get install mesa-vulkan-drivers) \
             or run `cargo xtask test`, which does"
        );
        contexts
    })
}

fn expectation(ctx: &Context, test: &str) -> Option<&'static Expectation> {
    let info = ctx.info();
    EXPECTATIONS.iter().find(|e| {
        info.name.to_lowercase().contains(&e.adapter.to_lowercase())
            && info.backend.to_str() == e.backend
            && test == e.test
    })
}

/// wgpu's GL backend drives one GL context per adapter behind a lock it gives up on after a
/// timeout ("Could not lock adapter context. This is most-likely a deadlock."): a long wait
/// on the GPU in one test thread makes another's call panic. Tests on GL adapters therefore
/// take turns; Vulkan, Metal and DX12 tests run in parallel.
static GL_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` on every adapter; fails listing each adapter where the outcome differed from
/// the expectation.
pub fn on_every_adapter(test: &str, f: impl Fn(&Context) -> Result<()>) {
    let mut failures = Vec::new();
    for ctx in contexts() {
        let expected = expectation(ctx, test);
        if expected.is_some_and(|e| e.outcome == Outcome::Skip) {
            continue;
        }
        let _turn = (ctx.info().backend == ridge::core::wgpu::Backend::Gl)
            .then(|| GL_TURN.lock().unwrap_or_else(|e| e.into_inner()));
        let start = std::time::Instant::now();
        let compiled = ctx.pipelines().compiled();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ctx)));
        record_time(
            test,
            ctx,
            start.elapsed(),
            ctx.pipelines().compiled() - compiled,
        );
        let failed = match &result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("error: {e}")),
            Err(p) => Some(
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into()),
            ),
        };
        match (failed, expected) {
            (Some(why), None) => failures.push(format!("{}: {why}", ctx.describe())),
            (None, Some(e)) => failures.push(format!(
                "{}: passed, but EXPECTATIONS says it fails ({}); remove the entry",
                ctx.describe(),
                e.why
            )),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{test}:\n  {}", failures.join("\n  "));
}

/// Appends the seconds `test` took, the test, the adapter and the pipelines compiled meanwhile
/// (by every test thread on that adapter: exact with `--test-threads 1`) to the file
/// `RIDGE_TEST_TIMES` names, when set: where a slow suite's minutes go (`cargo xtask test`
/// prints the slowest). On CPU drivers most of a test's time is LLVM compiling its pipelines.
fn record_time(test: &str, ctx: &Context, took: std::time::Duration, pipelines: usize) {
    use std::io::Write;
    let Some(path) = std::env::var_os("RIDGE_TEST_TIMES") else {
        return;
    };
    let line = format!(
        "{:.1}\t{test}\t{}\t{pipelines} pipelines\n",
        took.as_secs_f64(),
        ctx.describe()
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Seeded uniform values in `[lo, hi)`: never all zeros, the same on every run.
pub fn random(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// Blocks on a future (tests are synchronous).
pub fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    pollster::block_on(f)
}

/// Checks `got` against `want` element by element with a per-element bound (see
/// `ridge::kernels::check::compare`).
pub fn assert_close(
    what: &str,
    got: &[f32],
    want: &[f32],
    bound: impl Fn(usize) -> f64,
) -> Result<()> {
    let c = ridge::kernels::check::compare(got, want, bound);
    if c.passed() {
        Ok(())
    } else {
        Err(Error::invalid(what, c.to_string()))
    }
}

/// `Ok` if `r` is an error that `matches` accepts, else an error describing what came back.
pub fn expect_err<T>(what: &str, r: Result<T>, matches: impl Fn(&Error) -> bool) -> Result<()> {
    match r {
        Err(e) if matches(&e) => Ok(()),
        Err(e) => Err(Error::invalid(what, format!("wrong error: {e}"))),
        Ok(_) => Err(Error::invalid(what, "succeeded but should have failed")),
    }
}

/// Runs `f` on a fresh context per adapter, made with options derived from the adapter's
/// own limits (for tests of limit handling that must not disturb the shared contexts).
pub fn on_every_adapter_with(
    test: &str,
    options: impl Fn(&ridge::core::wgpu::Adapter) -> ContextOptions,
    f: impl Fn(&Context) -> Result<()>,
) {
    on_every_adapter(test, |shared| {
        let opts = options(shared.adapter());
        let ctx = block(Context::on_adapter(shared.adapter().clone(), &opts))?;
        f(&ctx)
    });
}

/// Options that keep the adapter's limits but change some of them.
pub fn with_limits(
    adapter: &ridge::core::wgpu::Adapter,
    change: impl Fn(&mut ridge::core::wgpu::Limits),
) -> ContextOptions {
    let mut limits = adapter.limits();
    change(&mut limits);
    ContextOptions {
        limits: Some(limits),
        ..Default::default()
    }
}

/// Uploads `data` as `dtype` (rounding to f16 if needed) and returns the tensor and the
/// values it really holds, as f32, for the reference.
pub fn upload(
    ctx: &Context,
    data: &[f32],
    shape: &[usize],
    dtype: ridge::core::DType,
) -> Result<(ridge::core::Tensor, Vec<f32>)> {
    use half::f16;
    use ridge::core::{DType, Tensor};
    match dtype {
        DType::F32 | DType::U32 => Ok((Tensor::from_slice(ctx, data, shape)?, data.to_vec())),
        DType::F16 => {
            let h: Vec<f16> = data.iter().map(|&v| f16::from_f32(v)).collect();
            let back = h.iter().map(|v| v.to_f32()).collect();
            Ok((Tensor::from_slice(ctx, &h, shape)?, back))
        }
    }
}

/// An output tensor filled with NaN.
pub fn poisoned(
    ctx: &Context,
    shape: &[usize],
    dtype: ridge::core::DType,
) -> Result<ridge::core::Tensor> {
    let t = ridge::core::Tensor::empty(ctx, shape, dtype)?;
    t.poison(ctx);
    Ok(t)
}

/// Whether turn `turn` of `turns` runs variant `variant` on `ctx`: on CPU drivers, where LLVM
/// compiles every pipeline at its first dispatch (2–5 s each, two test threads), a test's
/// variants take turns across its dtypes or masks, so each variant still runs, in one of them
/// (benches/NOTES.md, 2026-12-07, seventh session); GPUs run every variant in every turn.
pub fn in_turn(ctx: &Context, variant: usize, turn: usize, turns: usize) -> bool {
    !ctx.is_cpu_driver() || variant % turns == turn
}

/// The dtypes to test on `ctx`: f32 always, f16 where the adapter has `shader-f16`.
pub fn dtypes(ctx: &Context) -> Vec<ridge::core::DType> {
    let mut v = vec![ridge::core::DType::F32];
    if ctx.has_f16() {
        v.push(ridge::core::DType::F16);
    }
    v
}
