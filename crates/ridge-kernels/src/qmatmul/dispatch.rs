//! The products' launches: shapes checked, the kernel and its defines chosen, the dispatch.

use ridge_core::{Context, DType, Error, Result, Tensor};

use super::matvec::{TPR, WG, lanes, shuffled_lanes};
use super::{
    MATVEC_MAX_M, MATVEC_ROWS, MATVEC_RPT, MatvecShape, QMatmul, RopeAppend, TILE, TILE_SHORT,
};
use crate::launch::{self, Launch, Params};
use crate::quant::{BLOCK, QuantFormat, QuantMatrix};
use crate::shaders::{self, QMATMUL, Variant};

impl QMatmul {
    /// `y = x·Wᵀ` (or `y += x·Wᵀ`, or the gated form) on the GPU.
    ///
    /// Errors: [`Error::Shape`] unless `x` is `[.., K]` with `M` rows and `y` is `[M, N]`
    /// (`[M, N/2]` gated; N even); [`Error::InvalidArgument`] when `y` shares a buffer with
    /// `x` or `W`; dtype errors unless `x` and `y` share a float type the adapter runs; limit
    /// errors (binding size, workgroups) as every op.
    pub fn run(&self, ctx: &Context, x: &Tensor, w: &QuantMatrix, y: &Tensor) -> Result<()> {
        self.run_fused(ctx, x, None, None, w, y)
    }

    /// `y = RMSNorm(x)·γ·Wᵀ` (with the epilogue): each row of `x` scaled by
    /// 1/√(mean(x²) + eps) and by `gamma` `[K]` as the kernel reads it.
    ///
    /// Errors: as [`QMatmul::run`], and [`Error::Shape`] unless `gamma` is `[K]` of `x`'s
    /// type; [`Error::InvalidArgument`] for a negative or NaN `eps` or without `rms_norm`.
    pub fn run_with_norm(
        &self,
        ctx: &Context,
        x: &Tensor,
        gamma: &Tensor,
        eps: f32,
        w: &QuantMatrix,
        y: &Tensor,
    ) -> Result<()> {
        self.run_fused(ctx, x, Some((gamma, eps)), None, w, y)
    }

    /// The product with whichever of the RMSNorm prologue (`norm`: γ and eps, with
    /// `rms_norm`) and the RoPE + KV-append epilogue (`rope`, with `rope`) its flags name.
    ///
    /// Errors: as [`QMatmul::run_with_norm`]; [`Error::InvalidArgument`] when the flags and
    /// the arguments disagree, or RoPE with another epilogue; [`Error::Shape`] when `W`'s rows
    /// are not `(nh + 2·nkv)·dh` with an even `dh` matching the table, `y` is not
    /// `[M, nh, dh]`, the caches are not `[capacity, nkv, dh]`, or positions `pos0..pos0 + M`
    /// run past the caches or the table.
    pub fn run_fused(
        &self,
        ctx: &Context,
        x: &Tensor,
        norm: Option<(&Tensor, f32)>,
        rope: Option<&RopeAppend<'_>>,
        w: &QuantMatrix,
        y: &Tensor,
    ) -> Result<()> {
        if self.rms_norm != norm.is_some() || self.rope != rope.is_some() {
            return Err(Error::invalid(
                self.name(),
                "rms_norm needs γ and eps, rope needs its table and caches, and only they",
            ));
        }
        if let Some((gamma, eps)) = norm {
            self.check_norm(x, gamma, eps, w)?;
        }
        if let Some(r) = rope {
            self.check_rope(r, x, w, y)?;
        }
        self.launch(ctx, x, norm, rope, 0, w, y)
    }

    /// One token's product with `parts` partial sums pending in the residual stream (what
    /// [`crate::DecodeAttention`] leaves: each query head's share of the O projection): with
    /// a residual epilogue `y` is the stream `[1 + parts, N]` and its rows `1..` are added
    /// into row 0 with the product; otherwise `x` is `[1 + parts, K]` and its rows are added
    /// to row 0 as it is read (the RMSNorm prologue normalising their sum).
    ///
    /// Errors: as [`QMatmul::run_fused`]; [`Error::InvalidArgument`] unless `M` is 1 and
    /// there is no RoPE epilogue.
    pub fn run_with_parts(
        &self,
        ctx: &Context,
        x: &Tensor,
        norm: Option<(&Tensor, f32)>,
        parts: usize,
        w: &QuantMatrix,
        y: &Tensor,
    ) -> Result<()> {
        if self.rms_norm != norm.is_some() || self.rope || self.m != 1 {
            return Err(Error::invalid(
                self.name(),
                "pending partial sums join one row of x, without RoPE, with γ and eps where \
                 the product normalises x",
            ));
        }
        if let Some((gamma, eps)) = norm {
            self.check_norm(x, gamma, eps, w)?;
        }
        self.launch(ctx, x, norm, None, parts, w, y)
    }

    fn check_rope(
        &self,
        r: &RopeAppend<'_>,
        x: &Tensor,
        w: &QuantMatrix,
        y: &Tensor,
    ) -> Result<()> {
        let name = self.name();
        let (nh, nkv, dh) = (r.heads, r.kv_heads, r.table.head_dim);
        if self.glu || self.residual {
            return Err(Error::invalid(
                name,
                "RoPE takes the product's only epilogue",
            ));
        }
        if nh == 0 || nkv == 0 || w.rows != (nh + 2 * nkv) * dh || !dh.is_multiple_of(2) {
            return Err(Error::shape(
                name,
                format!(
                    "W has {} rows, not ({nh} + 2·{nkv})·{dh} with an even head width",
                    w.rows
                ),
            ));
        }
        if y.numel() != self.m * nh * dh {
            return Err(Error::shape(
                name,
                format!("q {:?} is not [{}, {nh}, {dh}]", y.shape(), self.m),
            ));
        }
        let capacity = r.k_cache.shape().first().copied().unwrap_or(0);
        for (what, c) in [("k_cache", r.k_cache), ("v_cache", r.v_cache)] {
            c.expect_shape(name, what, &[capacity, nkv, dh])?;
        }
        let end = r.pos0.saturating_add(self.m);
        if end > capacity || end > r.table.positions {
            return Err(Error::shape(
                name,
                format!(
                    "positions {}..{end} past the cache's {capacity} or the table's {}",
                    r.pos0, r.table.positions
                ),
            ));
        }
        launch::same_dtype(name, x.dtype(), &[r.k_cache, r.v_cache])?;
        launch::no_alias(name, r.k_cache, &[x, y, r.v_cache, &r.table.table])?;
        launch::no_alias(name, r.v_cache, &[x, y, &r.table.table])?;
        launch::fits_u32(name, "cache", r.k_cache.numel())?;
        Ok(())
    }

    fn check_norm(&self, x: &Tensor, gamma: &Tensor, eps: f32, w: &QuantMatrix) -> Result<()> {
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid(
                self.name(),
                format!("eps must be ≥ 0, got {eps}"),
            ));
        }
        gamma.expect_shape(self.name(), "gamma", &[w.cols])?;
        launch::same_dtype(self.name(), x.dtype(), &[gamma])?;
        if !launch::starts_on_vector(gamma, 4) {
            return Err(Error::invalid(
                self.name(),
                "gamma must start on a 4-element boundary",
            ));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        ctx: &Context,
        x: &Tensor,
        norm: Option<(&Tensor, f32)>,
        rope: Option<&RopeAppend<'_>>,
        parts: usize,
        w: &QuantMatrix,
        y: &Tensor,
    ) -> Result<()> {
        let name = self.name();
        w.check(name)?;
        let (n, k) = (w.rows, w.cols);
        // Pending partial sums ride in rows 1.. of y (a residual product) or of x.
        let (x_parts, y_parts) = if self.residual {
            (0, parts)
        } else {
            (parts, 0)
        };
        let rows: usize = x.shape().iter().rev().skip(1).product();
        if x.shape().last().copied() != Some(k) || rows != self.m + x_parts {
            return Err(Error::shape(
                name,
                format!(
                    "x {:?} is not [{} rows, {k}] for W [{n}, {k}]",
                    x.shape(),
                    self.m + x_parts
                ),
            ));
        }
        if self.glu && !n.is_multiple_of(2) {
            return Err(Error::shape(
                name,
                format!("a gated W needs an even row count, not {n}"),
            ));
        }
        if self.glu && self.residual {
            return Err(Error::invalid(
                name,
                "a gated product cannot also be residual",
            ));
        }
        let want = [self.m + y_parts, self.out_cols(n)];
        if rope.is_none()
            && (y.numel() != want[0] * want[1] || y.shape().last().copied() != Some(want[1]))
        {
            return Err(Error::shape(
                name,
                format!("y {:?} is not {want:?}", y.shape()),
            ));
        }
        launch::same_dtype(name, x.dtype(), &[y])?;
        launch::no_alias(name, y, &[x, &w.quants, &w.scales])?;
        if !launch::starts_on_vector(x, 4) {
            return Err(Error::invalid(
                name,
                "x must start on a 4-element boundary (it is read as vec4s)",
            ));
        }
        launch::fits_u32(name, "x", x.numel())?;
        launch::fits_u32(name, "y", y.numel())?;
        let params = Params::new()
            .u(launch::fits_u32(name, "M", self.m)?)
            .u(launch::fits_u32(name, "N", n)?)
            .u(k as u32)
            .u((k / BLOCK) as u32)
            .f(norm.map_or(0.0, |n| n.1))
            .u(rope.map_or(0, |r| r.pos0 as u32))
            .u(rope.map_or(0, |r| r.heads as u32))
            .u(rope.map_or(0, |r| r.kv_heads as u32))
            .u(rope.map_or(0, |r| r.table.head_dim as u32));
        let matvec = self.m <= MATVEC_MAX_M;
        let mrows = self.matvec_rows();
        // SwiGLU and RoPE epilogues take rows of W in pairs within a workgroup.
        let paired = self.glu || self.rope;
        let shape = self.matvec_shape(ctx, x.dtype(), w);
        let runs = if self.m == 1 {
            shape.runs(paired)
        } else {
            shape.runs_rows(paired)
        };
        if matvec && !runs {
            return Err(Error::invalid(
                name,
                format!(
                    "matrix-vector launch {shape:?} over {} rows of x: {}; {}",
                    self.m,
                    MatvecShape::RULE,
                    MatvecShape::RULE_ROWS
                ),
            ));
        }
        // x rounded to 8 bits: K / 32 blocks of it in workgroup memory.
        let x_blocks = if shape.int8_x { k / BLOCK } else { 1 };
        if shape.int8_x {
            launch::check_workgroup(ctx, name, shape.wg, shape.shared_bytes(k) as u32)?;
        }
        let coop = !matvec && self.on_tensor_cores(ctx, x.dtype(), w);
        let bm = if matvec {
            TILE_SHORT
        } else {
            self.tile_rows(n)
        };
        launch::float_dtype(ctx, name, x.dtype())?;
        // Built once per variant: a decode token launches ~120 of these, and building and
        // hashing the defines (the RoPE block is a kilobyte of WGSL) cost µs each time.
        let sgl = shuffled_lanes(ctx, shape.tpr);
        let key = (
            x.dtype(),
            w.format,
            self.residual,
            self.glu,
            norm.is_some(),
            rope.is_some(),
            (mrows, parts),
            (shape, sgl, x_blocks),
            bm,
            coop,
        );
        let defines = launch::memoized(
            "qmatmul",
            &key,
            |&(
                dtype,
                format,
                residual,
                glu,
                norm,
                rope,
                (mrows, parts),
                (shape, sgl, xb),
                bm,
                coop,
            )| {
                let d = defines(
                    shaders::storage_defines(dtype),
                    format,
                    residual,
                    glu,
                    norm,
                    rope,
                    parts,
                );
                lanes(
                    if coop { tensor_cores(d) } else { d },
                    shape.wg,
                    shape.tpr,
                    sgl,
                )
                .u32("MROWS", mrows as u32)
                .u32("RPT", shape.rpt)
                .bool("WORDS", shape.words)
                .bool("INT8X", shape.int8_x)
                .u32("XB", xb as u32)
                .u32("BM", bm as u32)
            },
        );
        let workgroups = if matvec {
            let groups = shape.workgroups(n) as u64;
            let [gx, gy, gz] = ctx.fold_workgroups(name, groups)?;
            if gz > 1 {
                return Err(Error::LimitExceeded {
                    what: format!("{name}: {n} rows"),
                    limit: "maxComputeWorkgroupsPerDimension²",
                    requested: groups,
                    allowed: (ctx.limits().max_compute_workgroups_per_dimension as u64).pow(2),
                });
            }
            [gx, gy, self.m.div_ceil(mrows) as u32]
        } else {
            [
                launch::fits_u32(name, "column tiles", n.div_ceil(TILE))?,
                launch::fits_u32(name, "row tiles", self.m.div_ceil(bm))?,
                1,
            ]
        };
        Launch {
            label: name,
            shader: &QMATMUL,
            entry: match (matvec, coop) {
                (true, _) => "matvec",
                (false, false) => "matmul",
                (false, true) => "matmul_coop",
            },
            defines,
            params,
            buffers: [
                (1, x),
                (2, &w.quants),
                (3, &w.scales),
                (4, y),
                (6, norm.map_or(ctx.placeholder(), |n| n.0)),
            ]
            .into_iter()
            .chain(
                rope.into_iter()
                    .flat_map(|r| [(7, &r.table.table), (8, r.k_cache), (9, r.v_cache)]),
            )
            .collect(),
            workgroups,
        }
        .run(ctx)
    }
}

/// The RoPE epilogue's bindings and store, inserted at `//@ROPE` in ROPE variants (elsewhere
/// a stub: the bindings must not exist where nothing binds them).
const ROPE_EPILOGUE: &str = "
@group(0) @binding(7) var<storage, read> rope_table: array<vec2<f32>>;
@group(0) @binding(8) var<storage, read_write> k_cache: array<T>;
@group(0) @binding(9) var<storage, read_write> v_cache: array<T>;

// Rows (n, n + 1) of x's row m: Q and K rotated at position pos0 + m, V as it is.
fn rope_store(m: u32, n: u32, x0: f32, x1: f32) {
    let head = n / p.head_dim;
    let d = n % p.head_dim;
    let pos = p.pos0 + m;
    if head >= p.heads + p.kv_heads {
        let at = (pos * p.kv_heads + head - p.heads - p.kv_heads) * p.head_dim + d;
        v_cache[at] = T(x0);
        v_cache[at + 1u] = T(x1);
        return;
    }
    let cs = rope_table[pos * (p.head_dim / 2u) + d / 2u];
    let r0 = T(x0 * cs.x - x1 * cs.y);
    let r1 = T(x0 * cs.y + x1 * cs.x);
    if head < p.heads {
        let at = m * p.heads * p.head_dim + n;
        y[at] = r0;
        y[at + 1u] = r1;
    } else {
        let at = (pos * p.kv_heads + head - p.heads) * p.head_dim + d;
        k_cache[at] = r0;
        k_cache[at + 1u] = r1;
    }
}";

pub(super) fn defines(
    base: ridge_core::Defines,
    format: QuantFormat,
    residual: bool,
    glu: bool,
    norm: bool,
    rope: bool,
    parts: usize,
) -> ridge_core::Defines {
    let store = if rope {
        ROPE_EPILOGUE.to_string()
    } else {
        "fn rope_store(m: u32, n: u32, x0: f32, x1: f32) {}".to_string()
    };
    base.u32("FORMAT", format.shader_id())
        .block("QUANT_BLOCKS", shaders::quant_blocks(""))
        .bool("NORM", norm)
        .bool("ROPE", rope)
        .block("ROPE", store)
        .u32("QW", format.quant_words() as u32)
        .bool("RESIDUAL", residual)
        .bool("GLU", glu)
        .u32("XPARTS", if residual { 0 } else { parts as u32 })
        .u32("YPARTS", if residual { parts as u32 } else { 0 })
}

/// The tensor-core kernel (`shaders/include/qmatmul_coop.wgsl`) inserted at `//@COOP`, with
/// the cooperative-matrix extension it needs.
fn tensor_cores(d: ridge_core::Defines) -> ridge_core::Defines {
    d.enable("wgpu_cooperative_matrix")
        .block("COOP", shaders::QMATMUL_COOP.to_string())
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    for format in QuantFormat::ALL {
        // The last two: a decode step's products after a fused attention, its partial sums
        // pending in the stream (SmolLM2's 9 heads).
        for (residual, glu, norm, rope, parts) in [
            (false, false, false, false, 0),
            (true, false, false, false, 0),
            (false, true, false, false, 0),
            (false, false, true, false, 0),
            (false, true, true, false, 0),
            (false, false, true, true, 0),
            (false, false, false, true, 0),
            (true, false, false, false, 9),
            (false, true, true, false, 9),
        ] {
            let d = defines(
                shaders::storage_defines(dtype),
                format,
                residual,
                glu,
                norm,
                rope,
                parts,
            );
            // The matrix-vector launch shapes' extremes (wg, tpr, rpt, shuffled lanes, x's
            // 8-bit blocks), and short prompts'.
            let wide = MATVEC_RPT as u32;
            for (mrows, wg, tpr, rpt, sgl, words, x_blocks) in [
                (1, WG, TPR, 1, 1, false, 0),
                (1, WG, TPR, 1, TPR, true, 0),
                (1, WG, 64, 1, 32, false, 0),
                (1, WG, TPR, 1, 1, false, 18),
                (1, 256, 64, wide, 1, true, 0),
                (1, 256, 64, wide, 32, false, 0),
                (1, 256, 64, wide, 32, true, 0),
                (1, 256, 64, wide, 32, false, 128),
                (MATVEC_ROWS, WG, TPR, 1, 8, false, 0),
            ] {
                let d = lanes(d.clone(), wg, tpr, sgl)
                    .u32("MROWS", mrows as u32)
                    .u32("RPT", rpt)
                    .bool("WORDS", words)
                    .bool("INT8X", x_blocks > 0)
                    .u32("XB", x_blocks.max(1))
                    .u32("BM", TILE_SHORT as u32);
                v.push((&QMATMUL, "matvec", d));
            }
            if parts > 0 {
                // Pending partial sums join one-token products only.
                continue;
            }
            let d = lanes(d, WG, TPR, 1);
            let d = d
                .u32("MROWS", 1)
                .u32("RPT", 1)
                .bool("WORDS", false)
                .bool("INT8X", false)
                .u32("XB", 1);
            for bm in [TILE, TILE_SHORT] {
                v.push((&QMATMUL, "matmul", d.clone().u32("BM", bm as u32)));
            }
            if dtype == DType::F16 {
                for bm in [TILE, TILE_SHORT] {
                    let coop = tensor_cores(d.clone().u32("BM", bm as u32));
                    v.push((&QMATMUL, "matmul_coop", coop));
                }
            }
            let d = d.u32("BM", TILE_SHORT as u32);
            if !residual && !glu && !norm && !rope {
                v.push((&QMATMUL, "gather", d));
            }
        }
    }
    v
}
