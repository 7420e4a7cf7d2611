//! The matrix-vector kernel's launch shape (`matvec` in `shaders/qmatmul.wgsl`): invocations
//! a workgroup, lanes a row of `W`, rows an invocation, chosen per product; and the lanes'
//! subgroup sums.

use ridge_core::{Context, DType};

use crate::quant::{BLOCK, QuantFormat};

/// Rows of `W` a matrix-vector invocation takes at once for one row of `x`, from
/// [`MATVEC_WIDE_N`] rows of `W` on: `x`'s block loaded once for all of them, and that many
/// weight blocks in flight.
pub const MATVEC_RPT: usize = 4;
/// Rows of `W` from which one row of `x` takes [`MATVEC_RPT`] rows an invocation (see
/// [`MatvecShape::for_product`]).
pub const MATVEC_WIDE_N: usize = 4096;
/// Blocks of a row (K / 32) from which a one-row product rounds `x` to 8 bits on a GPU (see
/// [`MatvecShape::for_product`]): K ≥ 2048 (below it, SmolLM2-135M's products gained nothing).
pub const INT8_MIN_BLOCKS: usize = 64;
/// Invocations per workgroup of the gather kernel and of the matrix-vector kernel for short
/// prompts and narrow products.
pub(super) const WG: u32 = 64;
/// Invocations sharing one row of W in the matrix-vector kernel for short prompts (several
/// rows of `x`; one row of `x` takes [`MatvecShape::for_product`]).
pub(super) const TPR: u32 = 16;

/// The matrix-vector kernel's launch shape for one row of `x`: invocations a workgroup (`wg`),
/// invocations sharing a row of `W` (`tpr`, a power of two dividing `wg`), rows of `W` an
/// invocation (`rpt`), and what a lane takes of a row (`words`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatvecShape {
    /// Invocations a workgroup.
    pub wg: u32,
    /// Invocations sharing a row of `W`.
    pub tpr: u32,
    /// Rows of `W` an invocation.
    pub rpt: u32,
    /// Lanes take a row's quant words (4 or 8 a block) instead of whole blocks, so that
    /// neighbouring lanes read neighbouring values of `x`.
    pub words: bool,
    /// `x` rounded to 8 bits in blocks of 32 (ggml's Q8_0 rounding: `d = max|x| / 127`) in
    /// workgroup memory first, and each block's product taken by packed 4 × 8-bit integer dot
    /// products (WGSL's `dot4I8Packed`, as llama.cpp's integer matrix-vector kernels do): an
    /// error of at most `d / 2` a value of `x` ([`super::QMatmul::error_bounds`]), and
    /// `K / 32` × 44 bytes of workgroup memory. Lanes on blocks only (not `words`).
    pub int8_x: bool,
}

/// What an adapter's one-row launch shapes depend on ([`MatvecShape::rule`]): as a live
/// context has it ([`MatvecRule::of`]), or as a report recorded it, for plans priced without
/// a GPU (a report from before a field holds the shape it was swept with).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatvecRule {
    /// Where one-row products may round `x` to 8 bits ([`MatvecShape::int8_storage`]), the
    /// adapter's workgroup memory in bytes; `None`: none do.
    pub int8_storage: Option<u32>,
    /// One-row products take a row of `W` a lane ([`MatvecShape::LANE_ROWS`]): a CPU driver.
    pub lane_rows: bool,
    /// Products of 2 to [`super::MATVEC_MAX_M`] rows of `x` take a row of `W` a lane
    /// ([`MatvecShape::PROMPT_LANE_ROWS`]): Mesa's llvmpipe (lavapipe and its GL), where it
    /// was measured faster ([`MatvecRule::of`]).
    pub prompt_lane_rows: bool,
}

impl MatvecRule {
    /// The rule of the adapter behind `ctx`. Short prompts take a row of `W` a lane on Mesa's
    /// llvmpipe alone (its Vulkan driver, lavapipe, and its GL): measured there 1.4–1.9×
    /// sooner than [`MatvecShape::ROWS`], where SwiftShader, Chromium's CPU adapter, ran 16
    /// and 32 rows of `x` up to 1.8× slower with it (benches/NOTES.md, 2026-12-06, seventh
    /// session).
    pub fn of(ctx: &Context) -> Self {
        let cpu = ctx.is_cpu_driver();
        Self {
            int8_storage: MatvecShape::int8_storage(ctx),
            lane_rows: cpu,
            prompt_lane_rows: cpu && ctx.info().name.contains("llvmpipe"),
        }
    }

    /// The rule a report recorded of its adapter ([`MatvecRule::of`], written by
    /// `ceilings::measure`): what plans priced from it launch.
    pub fn of_report(measured: &ridge_model::report::Measured) -> Self {
        Self {
            int8_storage: measured.int8_storage_bytes,
            lane_rows: measured.lane_rows,
            prompt_lane_rows: measured.prompt_lane_rows,
        }
    }
}

thread_local! {
    /// A launch shape that replaces [`MatvecShape::for_product`]'s choice for products run on
    /// this thread: for benches comparing shapes and tests covering each (see
    /// [`MatvecShape::forced`]).
    static FORCED: std::cell::Cell<Option<MatvecShape>> = const { std::cell::Cell::new(None) };
    /// The same for products of 2 to [`super::MATVEC_MAX_M`] rows of `x`
    /// ([`MatvecShape::forced_rows`]).
    static FORCED_ROWS: std::cell::Cell<Option<MatvecShape>> =
        const { std::cell::Cell::new(None) };
}

impl MatvecShape {
    /// The launch of products of 2 to [`super::MATVEC_MAX_M`] rows of `x`
    /// ([`super::MATVEC_ROWS`] rows of `x` a workgroup) on GPUs: 64 lanes a workgroup, 16 of
    /// them on each row of `W` (its blocks split between them, their sums met by shuffles).
    pub const ROWS: Self = Self {
        wg: WG,
        tpr: TPR,
        rpt: 1,
        words: false,
        int8_x: false,
    };

    /// Runs `f` with every one-row product on this thread taking `shape` (`None`: Ridge's
    /// choice), then puts back what was forced before, also when `f` panics: for benches that
    /// compare launch shapes and tests that cover each (a shape that does not
    /// [`MatvecShape::runs`] is refused at launch).
    pub fn forced<R>(shape: Option<MatvecShape>, f: impl FnOnce() -> R) -> R {
        crate::launch::with_forced(&FORCED, shape, f)
    }

    /// As [`MatvecShape::forced`], for the products of 2 to [`super::MATVEC_MAX_M`] rows of
    /// `x` ([`MatvecShape::rows_rule`]'s choice replaced): so that every adapter's shape is
    /// tested on every adapter (a shape that does not [`MatvecShape::runs_rows`] is refused
    /// at launch).
    pub fn forced_rows<R>(shape: Option<MatvecShape>, f: impl FnOnce() -> R) -> R {
        crate::launch::with_forced(&FORCED_ROWS, shape, f)
    }

    /// The launch of products of 2 to [`super::MATVEC_MAX_M`] rows of `x` on the adapter
    /// behind `ctx`: the one [`MatvecShape::forced_rows`] set, else
    /// [`MatvecShape::rows_rule`]'s.
    pub fn rows_for(ctx: &Context) -> Self {
        FORCED_ROWS
            .get()
            .unwrap_or_else(|| Self::rows_rule(MatvecRule::of(ctx)))
    }

    /// [`MatvecShape::rows_for`]'s rule without a GPU (none forced), for the adapter whose
    /// rule is `adapter`: [`MatvecShape::PROMPT_LANE_ROWS`] where
    /// [`MatvecRule::prompt_lane_rows`], else [`MatvecShape::ROWS`].
    pub fn rows_rule(adapter: MatvecRule) -> Self {
        if adapter.prompt_lane_rows {
            Self::PROMPT_LANE_ROWS
        } else {
            Self::ROWS
        }
    }

    /// Mesa's llvmpipe's launch of 2 to [`super::MATVEC_MAX_M`] rows of `x`
    /// ([`MatvecRule::prompt_lane_rows`]): 16 lanes a workgroup, each on one row of `W`, and
    /// [`super::MATVEC_ROWS`] rows of `x` a workgroup. As for one row
    /// ([`MatvecShape::LANE_ROWS`]), no lane shares a row of `W`, so no subgroup shuffle or
    /// barrier tree, which a CPU driver runs as switches between a workgroup's SIMD chunks.
    /// Measured on lavapipe (benches/NOTES.md, 2026-12-06, seventh session): prompts of 3,
    /// 16 and 32 tokens 1.4–1.9× sooner than with [`MatvecShape::ROWS`]. One row of `W` a
    /// lane, not eight as for one row of `x`: the rows loop takes one
    /// ([`MatvecShape::runs_rows`]), and eight were no faster in a kernel that took them.
    pub const PROMPT_LANE_ROWS: Self = Self {
        wg: 16,
        tpr: 1,
        rpt: 1,
        words: false,
        int8_x: false,
    };

    /// Workgroup memory of this launch over rows of `k` values: the lanes' partial sums and
    /// Σ x², and with [`MatvecShape::int8_x`] the rounded `x` (44 bytes a block of 32: 32
    /// values, d, d·Σ q and Σ x²), in bytes.
    pub fn shared_bytes(&self, k: usize) -> usize {
        let x_blocks = if self.int8_x { k / BLOCK } else { 1 };
        4 * (self.rpt as usize + 1) * self.wg as usize + 44 * x_blocks
    }

    /// What [`MatvecShape::runs`] asks, in words.
    pub const RULE: &str = "tpr must be a power of two dividing wg (at most 256), rpt 1 to 8, \
                            a workgroup must hold an even number of rows where the epilogue \
                            pairs them, and lanes on words cannot take x rounded to 8 bits";

    /// Whether the kernel runs this shape ([`MatvecShape::RULE`]); `paired` as in
    /// [`MatvecShape::for_product`].
    pub fn runs(&self, paired: bool) -> bool {
        self.tpr.is_power_of_two()
            && self.wg >= self.tpr
            && self.wg <= 256
            && self.wg.is_multiple_of(self.tpr)
            && (1..=8).contains(&self.rpt)
            && (!paired || (self.wg / self.tpr * self.rpt).is_multiple_of(2))
            && !(self.words && self.int8_x)
    }

    /// What [`MatvecShape::runs_rows`] asks beyond [`MatvecShape::RULE`], in words.
    pub const RULE_ROWS: &str = "with more than one row of x, a lane takes one row of W \
                                 (rpt 1), lanes split its quant blocks (not words), and x \
                                 is not rounded to 8 bits";

    /// Whether the kernel runs this shape over 2 to [`super::MATVEC_MAX_M`] rows of `x`
    /// ([`MatvecShape::RULE`] and [`MatvecShape::RULE_ROWS`]): the rows loop takes one row
    /// of `W` a lane, on blocks, with `x` unrounded (a lane's further rows would be skipped
    /// and their outputs left 0: a wrong answer, so such a launch is refused).
    pub fn runs_rows(&self, paired: bool) -> bool {
        self.runs(paired) && self.rpt == 1 && !self.words && !self.int8_x
    }

    /// A CPU driver's one-row shape: a row of `W` a lane, eight rows a lane, 16 lanes a
    /// workgroup (128 rows: SmolLM2's 576-row products launch 5 workgroups, enough for a
    /// CPU's cores). No lane shares a row, so no subgroup shuffle and one barrier, and `x`'s
    /// block is read once for eight rows. Measured on lavapipe (benches/NOTES.md, 2026-12-06,
    /// fifth session): SmolLM2's decode products 2.6–5.2× faster than the GPU shapes (16–64
    /// lanes a row summed by shuffles and a barrier tree, which a CPU driver runs as switches
    /// between a workgroup's SIMD chunks); widths 16, 32 and 64 within that machine's noise.
    pub const LANE_ROWS: Self = Self {
        wg: 16,
        tpr: 1,
        rpt: 8,
        words: false,
        int8_x: false,
    };

    /// The integer kernel's shape for `n` rows of `W` ([`MatvecShape::int8_x`]): 256/32/4
    /// from 8192 rows, 256/32/2 from [`MATVEC_WIDE_N`], 256/64/2 below (see
    /// [`MatvecShape::for_product`]).
    fn int8(n: usize) -> Self {
        let (tpr, rpt) = match n {
            8192.. => (32, 4),
            MATVEC_WIDE_N.. => (32, 2),
            _ => (64, 2),
        };
        Self {
            wg: 256,
            tpr,
            rpt,
            words: false,
            int8_x: true,
        }
    }

    /// The workgroup memory, bytes, of an adapter whose one-row products may round `x` to 8
    /// bits: a GPU (not a CPU driver: lavapipe decoded 3× slower so) whose WGSL has packed
    /// integer dot products ([`Context::has_int8_dot`]); `None` elsewhere.
    pub fn int8_storage(ctx: &Context) -> Option<u32> {
        let gpu = !ctx.is_cpu_driver();
        (gpu && ctx.has_int8_dot()).then(|| ctx.limits().max_compute_workgroup_storage_size)
    }

    /// Whether one row of `x` against an `n`-row `W` of `blocks` blocks a row rounds `x` to 8
    /// bits on an adapter with `storage` bytes of workgroup memory that may
    /// ([`MatvecShape::int8_storage`]): from [`INT8_MIN_BLOCKS`] blocks, where the rounded
    /// `x` fits ([`MatvecShape::shared_bytes`]). The rule of [`MatvecShape::for_product`],
    /// for plans priced without a GPU.
    pub fn rounds_x(n: usize, blocks: usize, storage: u32) -> bool {
        blocks >= INT8_MIN_BLOCKS && Self::int8(n).shared_bytes(blocks * BLOCK) <= storage as usize
    }

    /// The shape for one row of `x` against an `n`-row `W` of `blocks` blocks a row in
    /// `format` (unless [`MatvecShape::forced`]). A row's lanes: one per block, rounded up to
    /// a power of two, 16 to 64. From [`MATVEC_WIDE_N`] rows on, [`MATVEC_RPT`] rows an
    /// invocation and 16 rows a workgroup; below it one row an invocation in workgroups of 64,
    /// with fewer lanes a row where more would launch past 64 Ki invocations, and with Q4
    /// weights and f32 activations (`x` in `dtype`) the lanes take quant words rather than
    /// blocks. `paired`: the epilogue takes rows in pairs (SwiGLU's gate and up, RoPE's
    /// rotated pairs), so a workgroup holds at least two.
    ///
    /// Measured on the H200 (benches/NOTES.md, runs 105–106 and 123: each shape against 8–14
    /// launch shapes, interleaved rounds): 4096² and 8192² products 1.2–2.0× faster than the
    /// previous 64/16/4 (best: 256/64/4, with lanes on blocks); SmolLM2's 576 × 1536 down
    /// projection 9–19 % faster at 64/64/1; its 49,152-row output projection 5–10 % faster
    /// at 128/32/4. Below 4096 rows, lanes on words with f32 activations: SmolLM2's decode
    /// products 0–11 % faster in place (run 123: gate/up 0.313 → 0.280 ms a token); with f16
    /// ones its O and down projections lost 8 % in place (though not alone), and Q8_0's
    /// eight words a block lost 0–5 % alone.
    ///
    /// From [`INT8_MIN_BLOCKS`] blocks a row on (K ≥ 2048), on a GPU (not a CPU driver) whose
    /// WGSL has packed integer dot products ([`Context::has_int8_dot`]) and whose workgroup
    /// memory holds it, `x` is rounded to 8 bits ([`MatvecShape::int8_x`]) in
    /// workgroups of 256: 256/32/4 (32 rows a workgroup) from 8192 rows, 256/32/2 from 4096,
    /// 256/64/2 below (so that a workgroup's rounding of `x` serves as many rows as keep
    /// ~256 workgroups running). Measured on the H200 (benches/NOTES.md, runs 146–149, weights
    /// cold; the first or within 3 % of the first of six to nine launch shapes for each):
    /// 8192², 4096² and a Llama-3-8B MLP's products 1.1–2.0× faster than the float kernel,
    /// SmolLM2-1.7B's down projection (2048 × 8192) 1.5–2.0×, 2048² 1.1–1.3×; decode of
    /// SmolLM2-1.7B's and Llama-3.2-1B's shapes 1.5–1.7× faster; SmolLM2-135M's decode (K =
    /// 576 or 1536) no faster with every product rounding `x` (its launch-bound products
    /// ±5 %, its LM head 8–28 % faster, ~1 % of a token) and 3× slower on lavapipe, where every
    /// workgroup's rounding of `x` is the CPU's work.
    pub fn for_product(
        ctx: &Context,
        n: usize,
        blocks: usize,
        format: QuantFormat,
        dtype: DType,
        paired: bool,
    ) -> Self {
        if let Some(s) = FORCED.get() {
            return s;
        }
        Self::rule(n, blocks, format, dtype, paired, MatvecRule::of(ctx))
    }

    /// [`MatvecShape::for_product`]'s rule without a GPU (none forced), for the adapter whose
    /// [`MatvecRule`] is `adapter` (as a report records it, for plans priced without one): a
    /// CPU driver's [`MatvecShape::LANE_ROWS`], else the GPU shapes below.
    pub fn rule(
        n: usize,
        blocks: usize,
        format: QuantFormat,
        dtype: DType,
        paired: bool,
        adapter: MatvecRule,
    ) -> Self {
        if adapter.lane_rows {
            return Self::LANE_ROWS;
        }
        let lanes = blocks.next_power_of_two().clamp(16, 64) as u32;
        if adapter
            .int8_storage
            .is_some_and(|bytes| Self::rounds_x(n, blocks, bytes))
        {
            return Self::int8(n);
        }
        if n >= MATVEC_WIDE_N {
            return Self {
                wg: 4 * lanes,
                tpr: lanes,
                rpt: MATVEC_RPT as u32,
                words: false,
                int8_x: false,
            };
        }
        let mut tpr = lanes;
        while tpr > 16 && n * tpr as usize > 1 << 16 || paired && tpr == WG {
            tpr /= 2;
        }
        Self {
            wg: WG,
            tpr,
            rpt: 1,
            words: format != QuantFormat::Q8_0 && dtype == DType::F32,
            int8_x: false,
        }
    }

    /// Rows of `W` a workgroup takes: (`wg` / `tpr`) · `rpt`.
    pub fn rows_per_workgroup(&self) -> usize {
        (self.wg / self.tpr * self.rpt) as usize
    }

    /// Workgroups the kernel launches over `n` rows of `W` (one row of `x`).
    pub fn workgroups(&self, n: usize) -> usize {
        n.div_ceil(self.rows_per_workgroup())
    }
}

/// The matrix-vector kernel's lanes: `wg` invocations a workgroup, `tpr` a row, the sums of
/// groups of `sgl` neighbouring lanes taken by subgroup shuffles (the `//@ROW_SHUFFLE` block;
/// none for 1: subgroup builtins must not appear in a shader for an adapter without them).
pub(super) fn lanes(d: ridge_core::Defines, wg: u32, tpr: u32, sgl: u32) -> ridge_core::Defines {
    let shuffles = if sgl > 1 {
        "    for (var o = 1u; o < SGL; o <<= 1u) {
        for (var i = 0u; i < MROWS; i++) {
            if NORM { ss[i] += subgroupShuffleXor(ss[i], o); }
            for (var j = 0u; j < RPT; j++) {
                acc[i * RPT + j] += subgroupShuffleXor(acc[i * RPT + j], o);
            }
        }
    }"
    } else {
        ""
    };
    d.u32("WG", wg)
        .u32("TPR", tpr)
        .u32("SGL", sgl)
        .block("ROW_SHUFFLE", shuffles.to_string())
}

/// Lanes of a `tpr`-lane row summed by subgroup shuffles on `ctx`: as many as every subgroup
/// of the adapter holds (its smallest size, a power of two; rows start on multiples of `tpr`,
/// so a group never straddles two subgroups), 1 without subgroups.
pub(super) fn shuffled_lanes(ctx: &Context, tpr: u32) -> u32 {
    let min = ctx.info().subgroup_min_size;
    if ctx.has_subgroups() && min.is_power_of_two() {
        min.min(tpr)
    } else {
        1
    }
}
