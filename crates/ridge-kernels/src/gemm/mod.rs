//! GEMM: `C = α·op(A)·op(B) + β·C (+ bias)`, batched, f32 or f16 storage, f32 accumulation.
//!
//! Shapes (row-major, the last two dims are the matrix, leading dims are the batch):
//! - `a`: `[..., M, K]`, or `[..., K, M]` with `trans_a`;
//! - `b`: `[..., K, N]`, or `[..., N, K]` with `trans_b` (a PyTorch `Linear` weight);
//! - `c`: `[..., M, N]`; `bias`: `[N]`, added to every row.
//!
//! The leading dims of `c` hold `batch` matrices; `a` and `b` hold either `batch` matrices or
//! one, which is then shared by every batch entry. Any M, N, K ≥ 0 works, 0 and 1 included.
//! With `β = 0`, `c` is never read, so its old contents (NaN included) do not matter; with
//! K = 0 the product is 0 and `c` becomes `β·c + bias`.
//!
//! Storage: `a` and `b` share one type; `c` and the bias have it too, or are f32 while `a` and
//! `b` are f16 (mixed precision: f16 operands, as on the tensor cores, with an f32 result
//! that is never rounded to f16).
//!
//! This module is the launcher: shape and dtype checks, the kernel choice, split-K and the
//! dispatches. The tilings and their candidates are in `tiling.rs`, the f64 reference, error
//! bounds and cost in `reference.rs`, the shader specialisation in `codegen.rs`.

mod codegen;
mod reference;
mod tiling;

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{GEMM, GEMM_COOP, GEMM_REDUCE};
use codegen::{Layout, VariantKey, access};
pub(crate) use codegen::{coop_variants, variants};
use tiling::check_config;
pub use tiling::{CoopConfig, GemmConfig, GemmKernel, MAX_SPLITS};

/// A GEMM problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    /// Rows of op(A) and C.
    pub m: usize,
    /// Columns of op(B) and C.
    pub n: usize,
    /// Columns of op(A), rows of op(B).
    pub k: usize,
    /// Number of C matrices.
    pub batch: usize,
    /// A is stored `[K, M]`.
    pub trans_a: bool,
    /// B is stored `[N, K]`.
    pub trans_b: bool,
    /// Scales the product.
    pub alpha: f32,
    /// Scales the old C; 0 means C is write-only.
    pub beta: f32,
    /// Applies GELU (the erf form) to the result, after α, β and the bias: a feed-forward
    /// up projection and its activation in one pass.
    pub gelu: bool,
}

impl Gemm {
    /// An unbatched `C = A·B` of `[m, k] × [k, n]`.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Self {
            m,
            n,
            k,
            batch: 1,
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 0.0,
            gelu: false,
        }
    }

    /// Shape of the stored A matrix.
    pub fn a_dims(&self) -> [usize; 2] {
        if self.trans_a {
            [self.k, self.m]
        } else {
            [self.m, self.k]
        }
    }
    /// Shape of the stored B matrix.
    pub fn b_dims(&self) -> [usize; 2] {
        if self.trans_b {
            [self.n, self.k]
        } else {
            [self.k, self.n]
        }
    }

    /// The kind of launch this is, as the profiler names its dispatches and `ridge bench`
    /// sweeps it: a `Linear` layer's product (B stored N × K, a bias) is `linear`, or
    /// `linear_residual` with β ≠ 0 (the residual add fused), or `linear_gelu` with GELU in
    /// its epilogue; anything else is `gemm`. On the H200 a Linear layer's f16 product at
    /// MiniLM's shapes took 1.1–1.4× the plain GEMM's time (benches/NOTES.md run 136): its
    /// own kinds price it.
    pub fn kind(&self, bias: bool) -> &'static str {
        if !(self.trans_b && bias) {
            "gemm"
        } else if self.gelu {
            "linear_gelu"
        } else if self.beta != 0.0 {
            "linear_residual"
        } else {
            "linear"
        }
    }

    /// The kernel Ridge picks for this problem on `ctx`: the installed tuning table's entry
    /// when it has one that fits the adapter, else [`GemmKernel::heuristic`].
    pub fn kernel(&self, ctx: &Context, dtype: DType) -> GemmKernel {
        ctx.tuned("gemm", &[self.m, self.n, self.k], dtype)
            .and_then(|p| GemmKernel::from_params(&p))
            .filter(|k| k.fits(ctx, dtype))
            .unwrap_or_else(|| GemmKernel::heuristic(ctx, dtype))
    }

    /// `cost` (this GEMM's, epilogue included) with the work of the whole tiles
    /// [`Gemm::kernel`] launches on `ctx` ([`OpCost::with_tiles`]): C padded up to the
    /// kernel's workgroup tile, each padded element costing what a real one does.
    pub fn tiled(&self, ctx: &Context, dtype: DType, cost: OpCost) -> OpCost {
        let (bm, bn) = self.kernel(ctx, dtype).tile();
        let batch = self.batch.max(1);
        let tiles = self.m.div_ceil(bm) * self.n.div_ceil(bn) * batch;
        let per_element = cost.flops / (self.m * self.n * batch).max(1) as f64;
        cost.with_tiles(tiles, per_element * (bm * bn) as f64)
    }

    /// Runs the GEMM with the kernel [`Gemm::kernel`] picks.
    ///
    /// Errors: [`Error::Shape`] when a tensor does not hold the matrices described above;
    /// [`Error::DType`] when A and B differ in type, or C or the bias has neither theirs nor,
    /// for f16 operands, f32; [`Error::InvalidArgument`] when `c` aliases an
    /// input; [`Error::MissingFeature`] for f16 without `shader-f16`;
    /// [`Error::LimitExceeded`] for bindings or grids beyond the adapter's limits.
    pub fn run(
        &self,
        ctx: &Context,
        a: &Tensor,
        b: &Tensor,
        bias: Option<&Tensor>,
        c: &Tensor,
    ) -> Result<()> {
        self.run_with(ctx, self.kernel(ctx, a.dtype()), a, b, bias, c)
    }

    /// Runs the GEMM with a given kernel and tiling (the autotuner's entry point).
    pub fn run_with(
        &self,
        ctx: &Context,
        kernel: GemmKernel,
        a: &Tensor,
        b: &Tensor,
        bias: Option<&Tensor>,
        c: &Tensor,
    ) -> Result<()> {
        let name = "gemm";
        let a_batches = self.matrices(name, "a", a, self.a_dims(), true)?;
        let b_batches = self.matrices(name, "b", b, self.b_dims(), true)?;
        self.matrices(name, "c", c, [self.m, self.n], false)?;
        let mut inputs = vec![a, b];
        if let Some(bias) = bias {
            bias.expect_shape(name, "bias", &[self.n])?;
            inputs.push(bias);
        }
        // A and B share a type; C and the bias have it too, or f32 for f16 operands.
        launch::same_dtype(name, a.dtype(), &[b])?;
        let out = match (a.dtype(), c.dtype()) {
            (DType::F16, DType::F32) => DType::F32,
            (input, _) => input,
        };
        launch::same_dtype(name, out, &[c])?;
        if let Some(bias) = bias {
            launch::same_dtype(name, out, &[bias])?;
        }
        launch::no_alias(name, c, &inputs)?;
        let (bm, bn, invocations, bytes) = match kernel {
            GemmKernel::Tiled(cfg) => {
                check_config(&cfg)?;
                (cfg.bm, cfg.bn, cfg.invocations(), cfg.workgroup_bytes())
            }
            GemmKernel::Coop(cfg) => {
                if a.dtype() != DType::F16 || !ctx.has_coop_f16() || !cfg.is_valid() {
                    return Err(Error::invalid(
                        name,
                        format!(
                            "the cooperative-matrix kernel needs f16 operands, an adapter with \
                             16x16x16 f16 tensor cores at subgroup size 32, BK a multiple of 16 \
                             and slices that divide over the invocations; got {cfg:?}"
                        ),
                    ));
                }
                (cfg.bm(), cfg.bn(), cfg.invocations(), cfg.workgroup_bytes())
            }
        };
        launch::check_workgroup(ctx, name, invocations, bytes)?;
        for t in [a, b, c] {
            launch::fits_u32(name, "elements", t.numel())?;
        }

        let (lda, ldb) = (self.a_dims()[1], self.b_dims()[1]);
        let stride = |batches: usize, dims: [usize; 2]| {
            if batches == 1 { 0 } else { dims[0] * dims[1] }
        };
        let splits = self.splits(ctx, kernel, c.dtype());
        // Both dispatches of a split launch carry its kind.
        let kind = self.kind(bias.is_some());
        if splits == 1 {
            let layout = Layout {
                lda,
                ldb,
                stride_a: stride(a_batches, self.a_dims()),
                stride_b: stride(b_batches, self.b_dims()),
                stride_c: self.m * self.n,
            };
            let tensors = (a, b, bias, c);
            return self.dispatch(ctx, kernel, [bm, bn, invocations], &layout, tensors, kind);
        }
        // Split-K: slice s is the batch entry whose A and B start s·KC along K and whose C is
        // the workspace's matrix s; α applies there, β, the bias and GELU in the reduction.
        let kc = self.k / splits;
        let part = Gemm {
            k: kc,
            batch: splits,
            beta: 0.0,
            gelu: false,
            ..*self
        };
        let layout = Layout {
            lda,
            ldb,
            stride_a: if self.trans_a { kc * lda } else { kc },
            stride_b: if self.trans_b { kc } else { kc * ldb },
            stride_c: self.m * self.n,
        };
        let parts = Tensor::empty(ctx, &[splits, self.m, self.n], DType::F32)?;
        let tile = [bm, bn, invocations];
        part.dispatch(ctx, kernel, tile, &layout, (a, b, None, &parts), kind)?;
        self.reduce(ctx, &parts, splits, bias, c, kind)
    }

    /// The K slices Ridge runs an unbatched `m × n × k` GEMM with `dtype` operands and
    /// result as on `ctx`: [`Gemm::splits`] of the kernel [`Gemm::kernel`] picks. What the
    /// performance model's encoder plans take (`ridge_model::transformer::encoder_ops_split`):
    /// a split GEMM is two dispatches.
    pub fn planned_splits(
        ctx: &Context,
        dtype: DType,
    ) -> impl Fn(usize, usize, usize) -> usize + '_ {
        move |m, n, k| {
            let g = Gemm::new(m, n, k);
            g.splits(ctx, g.kernel(ctx, dtype), dtype)
        }
    }

    /// The number of K slices `kernel` runs this problem as ([`GemmConfig::splits`]): the
    /// largest count ≤ the tiling's that divides K, for an unbatched GEMM into an f32 C
    /// (`dtype`, C's type; the operands may be f16) of K ≥ 2 whose
    /// workspace (count·M·N f32) fits one binding; 1 otherwise and for the tensor-core kernel.
    pub fn splits(&self, ctx: &Context, kernel: GemmKernel, dtype: DType) -> usize {
        let GemmKernel::Tiled(cfg) = kernel else {
            return 1;
        };
        if dtype != DType::F32 || self.batch != 1 || self.k < 2 {
            return 1;
        }
        // M·N < 2³² (C's elements were checked), so this cannot overflow even on wasm32.
        let fits = |s: usize| {
            s as u64 * (self.m * self.n) as u64 * 4 <= ctx.limits().max_storage_buffer_binding_size
        };
        (1..=(cfg.splits as usize).min(self.k))
            .rev()
            .find(|&s| self.k.is_multiple_of(s) && fits(s))
            .unwrap_or(1)
    }

    /// Records the GEMM kernel for this problem with operands laid out as `l`; `tile` is the
    /// kernel's [BM, BN, invocations], `label` the launch's kind ([`Gemm::kind`]).
    fn dispatch(
        &self,
        ctx: &Context,
        kernel: GemmKernel,
        [bm, bn, invocations]: [u32; 3],
        l: &Layout,
        (a, b, bias, c): (&Tensor, &Tensor, Option<&Tensor>, &Tensor),
        label: &'static str,
    ) -> Result<()> {
        let name = "gemm";
        let tiles_m = self.m.div_ceil(bm as usize) as u64;
        let tiles_n = self.n.div_ceil(bn as usize) as u64;
        let total = tiles_m * tiles_n * self.batch as u64;
        let u = |v: usize| v as u32; // every value below is ≤ an element count checked above
        let params = Params::new()
            .words(&[u(self.m), u(self.n), u(self.k), u(self.batch)])
            .words(&[u(l.lda), u(l.ldb), u(self.n), tiles_n as u32])
            .words(&[u(l.stride_a), u(l.stride_b), u(l.stride_c), tiles_m as u32])
            .f(self.alpha)
            .f(self.beta);
        launch::float_dtype(ctx, name, a.dtype())?;
        // The widest loads of A and B, and of C in the epilogue: vec4s in the tiled kernel;
        // 16-byte loads of A and B, and C element by element, in the tensor-core one.
        let (shader, entry, vectors, bk, kernel) = match kernel {
            // The split count does not change the shader.
            GemmKernel::Tiled(cfg) => (
                &GEMM,
                "gemm",
                [4, 4],
                cfg.bk,
                GemmKernel::Tiled(GemmConfig { splits: 1, ..cfg }),
            ),
            GemmKernel::Coop(cfg) => (&GEMM_COOP, "gemm_coop", [8, 1], cfg.bk, kernel),
        };
        let key = VariantKey {
            kernel,
            input: a.dtype(),
            output: c.dtype(),
            trans_a: self.trans_a,
            trans_b: self.trans_b,
            gelu: self.gelu,
            bias: bias.is_some(),
            access: access(
                vectors,
                [bm, bn, bk],
                invocations,
                l,
                [a.numel(), b.numel(), c.numel()],
                [self.m, self.n, self.k],
            ),
        };
        let defines = launch::memoized(name, &key, VariantKey::defines);
        let bias = bias.unwrap_or(ctx.placeholder());
        Launch {
            label,
            shader,
            entry,
            defines,
            params,
            buffers: vec![(1, a), (2, b), (3, bias), (4, c)],
            workgroups: ctx.fold_workgroups(name, total)?,
        }
        .run(ctx)
    }

    /// Split-K's second pass: `c = act(Σ parts + β·c + bias)` (`shaders/gemm_reduce.wgsl`),
    /// four elements per invocation when N is a multiple of 4.
    fn reduce(
        &self,
        ctx: &Context,
        parts: &Tensor,
        splits: usize,
        bias: Option<&Tensor>,
        c: &Tensor,
        label: &'static str,
    ) -> Result<()> {
        let name = "gemm";
        let aligned = |t: &Tensor| launch::starts_on_vector(t, 4);
        let width = if self.n.is_multiple_of(4) && aligned(c) && bias.is_none_or(aligned) {
            4
        } else {
            1
        };
        let count = launch::fits_u32(name, "elements", self.m * self.n / width)?;
        let wg = launch::workgroup_size_1d(ctx, 256);
        let defines = crate::elementwise::vector_defines(
            launch::dtype_defines(ctx, name, c.dtype())?,
            c.dtype(),
            width,
        )
        .bool("HAS_BIAS", bias.is_some())
        .bool("ACT_GELU", self.gelu)
        .u32("WG", wg);
        Launch {
            label,
            shader: &GEMM_REDUCE,
            entry: "gemm_reduce",
            defines,
            params: Params::new()
                .u(count)
                .u((self.n / width) as u32)
                .u(splits as u32)
                .f(self.beta),
            buffers: vec![(1, parts), (2, bias.unwrap_or(ctx.placeholder())), (3, c)],
            workgroups: ctx.fold_workgroups(name, count.div_ceil(wg) as u64)?,
        }
        .run(ctx)
    }

    /// Checks that `t` holds `batch` (or, if `may_share`, one) `dims` matrices and returns how many.
    fn matrices(
        &self,
        op: &str,
        what: &str,
        t: &Tensor,
        dims: [usize; 2],
        may_share: bool,
    ) -> Result<usize> {
        let s = t.shape();
        let ok_dims = s.len() >= 2 && s[s.len() - 2..] == dims;
        let count: usize = s.iter().rev().skip(2).product();
        if ok_dims && (count == self.batch || (may_share && count == 1)) {
            return Ok(count);
        }
        let expect = if may_share {
            format!("1 or {}", self.batch)
        } else {
            self.batch.to_string()
        };
        Err(Error::shape(
            op,
            format!("{what} has shape {s:?}; expected {expect} matrices of {dims:?}"),
        ))
    }
}
