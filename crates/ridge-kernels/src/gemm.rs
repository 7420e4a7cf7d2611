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

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, GEMM, GEMM_COOP, GEMM_REDUCE, Variant};

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

/// Workgroup tiling of the GEMM kernel. Valid when TM and TN are multiples of 4, BM and BN
/// multiples of TM and TN, and BM·BK and BN·BK multiples of the invocation count (each
/// invocation stages the same number of elements); the launcher refuses others with
/// [`Error::InvalidArgument`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    /// Rows of C per workgroup.
    pub bm: u32,
    /// Columns of C per workgroup.
    pub bn: u32,
    /// Depth of each staged K slice.
    pub bk: u32,
    /// Rows of C per invocation.
    pub tm: u32,
    /// Columns of C per invocation.
    pub tn: u32,
    /// Staged slices in workgroup memory: 1 (two barriers per slice: the slice is
    /// overwritten only after every invocation has read it) or 2 (double buffering: the next
    /// slice goes to the other buffer, one barrier per slice, twice the memory).
    pub stages: u32,
    /// Split-K: the K range runs as this many slices side by side, each writing its partial
    /// product to an f32 workspace that a second pass (`shaders/gemm_reduce.wgsl`) sums,
    /// adding β·C, the bias and the activation. More workgroups where the C tile grid alone
    /// leaves the GPU idle (MiniLM's 384-column projections; batch 1), for the workspace's
    /// extra traffic. Applies to unbatched f32 GEMMs, as the largest count ≤ this that
    /// divides K ([`Gemm::splits`]); 1 everywhere else.
    pub splits: u32,
}

impl GemmConfig {
    /// 64 × 64 tiles, 16 deep, 4 × 4 per invocation: 256 invocations and 8.5 KiB of workgroup
    /// memory, within every WebGPU adapter's minimum limits.
    pub const DEFAULT: GemmConfig = GemmConfig {
        bm: 64,
        bn: 64,
        bk: 16,
        tm: 4,
        tn: 4,
        stages: 1,
        splits: 1,
    };

    /// Invocations per workgroup.
    pub fn invocations(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }
    /// Bytes of workgroup memory: the staged f32 slices of A and B (each k row padded by
    /// four values), times the stages.
    pub fn workgroup_bytes(&self) -> u32 {
        (self.bm + self.bn + 8) * self.bk * 4 * self.stages
    }
}

/// Tiling of the tensor-core GEMM (`shaders/gemm_coop.wgsl`): `sg_m × sg_n` subgroups of
/// 32, each owning a (16·`fm`) × (16·`fn_`) block of C as `fm × fn_` cooperative 16×16 f32
/// accumulators; `bk`-deep slices staged in workgroup memory. Valid when `bk` is a multiple
/// of 16 and the staged slices (BM·BK and BN·BK halves) divide evenly over the invocations;
/// the launcher refuses others with [`Error::InvalidArgument`]. (Fragments loaded straight
/// from memory, without staging, measured 0.6–0.8× as fast on the H200: benches/NOTES.md.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopConfig {
    /// Subgroups along M.
    pub sg_m: u32,
    /// Subgroups along N.
    pub sg_n: u32,
    /// 16×16 fragments per subgroup along M.
    pub fm: u32,
    /// 16×16 fragments per subgroup along N.
    pub fn_: u32,
    /// Depth of each staged K slice, a multiple of 16.
    pub bk: u32,
    /// Staged slices in workgroup memory, 1 or 2 (as [`GemmConfig::stages`]).
    pub stages: u32,
}

impl CoopConfig {
    /// 2 × 2 subgroups of 2 × 2 fragments (a 64 × 64 tile, 128 invocations), 32 deep.
    pub const DEFAULT: CoopConfig = CoopConfig {
        sg_m: 2,
        sg_n: 2,
        fm: 2,
        fn_: 2,
        bk: 32,
        stages: 1,
    };

    /// Rows of C per workgroup.
    pub fn bm(&self) -> u32 {
        16 * self.fm * self.sg_m
    }
    /// Columns of C per workgroup.
    pub fn bn(&self) -> u32 {
        16 * self.fn_ * self.sg_n
    }
    /// Invocations per workgroup.
    pub fn invocations(&self) -> u32 {
        32 * self.sg_m * self.sg_n
    }
    /// Bytes of workgroup memory: f16 A and B slices, each staged row padded by 8 halves
    /// (the larger of the two stored layouts), times the stages, plus a 16×16 f32 scratch
    /// per subgroup.
    pub fn workgroup_bytes(&self) -> u32 {
        let slice = |rows: u32| (rows * (self.bk + 8)).max(self.bk * (rows + 8));
        (slice(self.bm()) + slice(self.bn())) * 2 * self.stages + self.sg_m * self.sg_n * 256 * 4
    }
    /// Whether the tiling is valid (see the type's documentation).
    pub fn is_valid(&self) -> bool {
        let t = self.invocations();
        self.sg_m > 0
            && self.sg_n > 0
            && self.fm > 0
            && self.fn_ > 0
            && self.bk > 0
            && self.bk.is_multiple_of(16)
            && (self.stages == 1 || self.stages == 2)
            && (self.bm() * self.bk).is_multiple_of(t)
            && (self.bn() * self.bk).is_multiple_of(t)
    }
}

/// Which kernel runs a GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmKernel {
    /// The tiled SIMT kernel (`shaders/gemm.wgsl`), every adapter.
    Tiled(GemmConfig),
    /// Cooperative matrices (`shaders/gemm_coop.wgsl`): f16 storage on adapters with
    /// f16 → f32 tensor cores.
    Coop(CoopConfig),
}

impl GemmKernel {
    /// The vendor-heuristic default: tensor cores for f16 where the adapter has them; on CPU
    /// drivers 128 × 128 tiles with 8 × 8 per invocation (fastest on lavapipe,
    /// benches/NOTES.md); elsewhere [`GemmConfig::DEFAULT`].
    pub fn heuristic(ctx: &Context, dtype: DType) -> Self {
        if dtype == DType::F16 && ctx.has_coop_f16() {
            GemmKernel::Coop(CoopConfig::DEFAULT)
        } else if ctx.info().device_type == ridge_core::wgpu::DeviceType::Cpu {
            GemmKernel::Tiled(GemmConfig {
                bm: 128,
                bn: 128,
                bk: 8,
                tm: 8,
                tn: 8,
                stages: 1,
                splits: 1,
            })
        } else {
            GemmKernel::Tiled(GemmConfig::DEFAULT)
        }
    }

    /// Whether this kernel can run `dtype` on `ctx` within its limits.
    pub fn fits(&self, ctx: &Context, dtype: DType) -> bool {
        let l = ctx.limits();
        let (invocations, bytes, ok) = match self {
            GemmKernel::Tiled(c) => (
                c.invocations(),
                c.workgroup_bytes(),
                check_config(c).is_ok(),
            ),
            GemmKernel::Coop(c) => (
                c.invocations(),
                c.workgroup_bytes(),
                dtype == DType::F16 && ctx.has_coop_f16() && c.is_valid(),
            ),
        };
        ok && invocations <= l.max_compute_invocations_per_workgroup
            && bytes <= l.max_compute_workgroup_storage_size
            && (dtype != DType::F16 || ctx.has_f16())
    }

    /// As named parameters for a tuning table.
    pub fn to_params(&self) -> ridge_core::VariantParams {
        let pairs: Vec<(&str, u32)> = match *self {
            GemmKernel::Tiled(c) => vec![
                ("COOP", 0),
                ("BM", c.bm),
                ("BN", c.bn),
                ("BK", c.bk),
                ("TM", c.tm),
                ("TN", c.tn),
                ("STAGES", c.stages),
                ("SPLITS", c.splits),
            ],
            GemmKernel::Coop(c) => vec![
                ("COOP", 1),
                ("SG_M", c.sg_m),
                ("SG_N", c.sg_n),
                ("FM", c.fm),
                ("FN", c.fn_),
                ("BK", c.bk),
                ("STAGES", c.stages),
            ],
        };
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// From a tuning table's parameters; `None` when some are missing (a missing `STAGES` or
    /// `SPLITS` means 1).
    pub fn from_params(p: &ridge_core::VariantParams) -> Option<Self> {
        let g = |k: &str| p.get(k).copied();
        let stages = g("STAGES").unwrap_or(1);
        Some(if g("COOP")? == 1 {
            GemmKernel::Coop(CoopConfig {
                sg_m: g("SG_M")?,
                sg_n: g("SG_N")?,
                fm: g("FM")?,
                fn_: g("FN")?,
                bk: g("BK")?,
                stages,
            })
        } else {
            GemmKernel::Tiled(GemmConfig {
                bm: g("BM")?,
                bn: g("BN")?,
                bk: g("BK")?,
                tm: g("TM")?,
                tn: g("TN")?,
                stages,
                splits: g("SPLITS").unwrap_or(1),
            })
        })
    }

    /// Candidates the autotuner tries on `ctx` for `dtype` (those that fit).
    pub fn candidates(ctx: &Context, dtype: DType) -> Vec<Self> {
        // (tiling, stages): double buffering where the H200 measured it competitive
        // (benches/NOTES.md); each candidate costs the tests a compile on every adapter.
        let tiled = |bm, bn, bk, tm, tn, stages| {
            GemmKernel::Tiled(GemmConfig {
                bm,
                bn,
                bk,
                tm,
                tn,
                stages,
                splits: 1,
            })
        };
        // Split-K (f32 only) for grids of few tiles: small tiles split far for batch 1's
        // 128-row products, large ones split less for 384-column ones. A split shares its
        // tiling's shader, so it costs no compile of its own.
        let split = |kernel, splits| match kernel {
            GemmKernel::Tiled(c) => GemmKernel::Tiled(GemmConfig { splits, ..c }),
            coop => coop,
        };
        let mut v = vec![
            tiled(64, 64, 16, 4, 4, 1),
            tiled(64, 64, 16, 4, 4, 2),
            tiled(64, 64, 8, 4, 4, 1),
            tiled(64, 64, 8, 4, 4, 2),
            tiled(32, 32, 16, 4, 4, 1),
            tiled(128, 64, 8, 8, 4, 1),
            tiled(64, 128, 8, 4, 8, 1),
            tiled(128, 128, 8, 8, 8, 1),
            tiled(128, 128, 8, 8, 8, 2),
            tiled(128, 128, 16, 8, 8, 1),
            tiled(64, 64, 32, 4, 4, 1),
            tiled(128, 64, 16, 8, 4, 1),
            tiled(256, 128, 8, 8, 8, 1),
            tiled(128, 128, 8, 16, 8, 1),
            // 8 × 8 and 8 × 4 blocks on small tiles: with loads free of bounds checks they
            // lead at MiniLM's 384- and 1152-column products (benches/NOTES.md, run 68).
            tiled(64, 128, 16, 8, 8, 1),
            tiled(128, 64, 16, 8, 8, 1),
            tiled(64, 64, 16, 8, 8, 1),
            tiled(64, 64, 16, 8, 4, 1),
        ];
        if dtype == DType::F32 {
            v.extend([
                split(tiled(32, 32, 16, 4, 4, 1), 4),
                split(tiled(32, 32, 16, 4, 4, 1), 8),
                split(tiled(64, 64, 16, 4, 4, 1), 2),
                split(tiled(64, 64, 16, 4, 4, 1), 4),
                split(tiled(128, 64, 16, 8, 4, 1), 2),
                split(tiled(128, 128, 8, 8, 8, 1), 2),
                split(tiled(128, 128, 8, 8, 8, 1), 3),
            ]);
        }
        for (sg_m, sg_n, fm, fn_, bk, stages) in [
            (2, 2, 2, 2, 32, 1),
            (2, 2, 2, 2, 64, 1),
            (2, 2, 2, 2, 64, 2),
            (2, 2, 4, 4, 32, 1),
            (2, 2, 4, 4, 64, 1),
            (4, 2, 2, 2, 32, 1),
            (4, 4, 2, 2, 32, 1),
            (4, 4, 2, 2, 16, 1),
            (4, 4, 2, 2, 16, 2),
            (4, 4, 2, 4, 32, 1),
            (4, 4, 4, 2, 32, 1),
            (4, 2, 4, 4, 32, 1),
            (2, 4, 4, 4, 32, 1),
            (2, 4, 2, 4, 32, 1),
        ] {
            v.push(GemmKernel::Coop(CoopConfig {
                sg_m,
                sg_n,
                fm,
                fn_,
                bk,
                stages,
            }));
        }
        v.retain(|k| k.fits(ctx, dtype));
        // Tensor cores first: where they run they win, and a short tuning budget reaches them.
        v.sort_by_key(|k| !matches!(k, GemmKernel::Coop(_)));
        v
    }
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

    /// Cost: 2·M·N·K·batch FLOPs for the product (a multiply-add is 2), 2·M·N·batch more when
    /// β ≠ 0, M·N·batch for a bias and 5·M·N·batch for GELU. Bytes: A and B read once each (`a_batches`,
    /// `b_batches` ∈ {1, batch}), C written once and read once when β ≠ 0, the bias read once.
    pub fn cost(&self, dtype: DType, a_batches: usize, b_batches: usize, bias: bool) -> OpCost {
        let gelu = if self.gelu {
            (5 * self.m * self.n * self.batch) as f64
        } else {
            0.0
        };
        OpCost::new(gelu, 0.0)
            + ridge_model::ops::gemm(
                self.m,
                self.n,
                self.k,
                self.batch,
                a_batches,
                b_batches,
                self.beta != 0.0,
                bias,
                dtype.size(),
            )
    }

    /// f64 reference. `a` and `b` hold `a.len() / (M·K)` and `b.len() / (K·N)` matrices (1 or
    /// batch); `c` is the old C (`batch·M·N`, read only when β ≠ 0).
    pub fn reference(&self, a: &[f32], b: &[f32], bias: Option<&[f32]>, c: &[f32]) -> Vec<f32> {
        let (m, n, k) = (self.m, self.n, self.k);
        let a_step = if a.len() > m * k { m * k } else { 0 };
        let b_step = if b.len() > k * n { k * n } else { 0 };
        let mut out = vec![0f32; self.batch * m * n];
        for bi in 0..self.batch {
            let (ab, bb) = (bi * a_step, bi * b_step);
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0f64;
                    for p in 0..k {
                        let av = if self.trans_a {
                            a[ab + p * m + i]
                        } else {
                            a[ab + i * k + p]
                        };
                        let bv = if self.trans_b {
                            b[bb + j * k + p]
                        } else {
                            b[bb + p * n + j]
                        };
                        acc += av as f64 * bv as f64;
                    }
                    let ci = bi * m * n + i * n + j;
                    let mut v = self.alpha as f64 * acc;
                    if self.beta != 0.0 {
                        v += self.beta as f64 * c[ci] as f64;
                    }
                    if let Some(bias) = bias {
                        v += bias[j] as f64;
                    }
                    if self.gelu {
                        v = crate::elementwise::gelu_f64(v);
                    }
                    out[ci] = v as f32;
                }
            }
        }
        out
    }

    /// Per-element error bound of the kernel against [`Gemm::reference`] (same arguments,
    /// `want` its result): |C − Ĉ| ≤ γ_{K+2}·(|α|·(|A||B|) + |β||C₀| + |bias|) + u_T·|Ĉ|,
    /// Higham's bound for f32 accumulation in any order plus the final rounding to the
    /// storage type T (see [`crate::check::gamma`]). With GELU the pre-activation bound is
    /// scaled by max |GELU′| < 1.13 and GELU's own bound is added
    /// ([`crate::elementwise::error_bound`], which includes the final rounding).
    pub fn error_bounds(
        &self,
        dtype: DType,
        a: &[f32],
        b: &[f32],
        bias: Option<&[f32]>,
        c_old: &[f32],
        want: &[f32],
    ) -> Vec<f64> {
        let abs = |v: &[f32]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
        let plain = Gemm {
            alpha: 1.0,
            beta: 0.0,
            gelu: false,
            ..*self
        };
        let magnitude = plain.reference(&abs(a), &abs(b), None, &[]);
        let pre = if self.gelu {
            Gemm {
                gelu: false,
                ..*self
            }
            .reference(a, b, bias, c_old)
        } else {
            Vec::new()
        };
        let gk = crate::check::gamma(self.k + 2);
        (0..want.len())
            .map(|i| {
                let mut m = self.alpha.abs() as f64 * magnitude[i] as f64;
                if self.beta != 0.0 {
                    m += (self.beta.abs() * c_old[i].abs()) as f64;
                }
                if let Some(bias) = bias {
                    m += bias[i % self.n.max(1)].abs() as f64;
                }
                if self.gelu {
                    1.13 * gk * m + crate::elementwise::error_bound(true, dtype, pre[i], want[i])
                } else {
                    gk * m + crate::check::storage_rounding(dtype, want[i] as f64)
                }
            })
            .collect()
    }

    /// The kernel Ridge picks for this problem on `ctx`: the installed tuning table's entry
    /// when it has one that fits the adapter, else [`GemmKernel::heuristic`].
    pub fn kernel(&self, ctx: &Context, dtype: DType) -> GemmKernel {
        ctx.tuned("gemm", &[self.m, self.n, self.k], dtype)
            .and_then(|p| GemmKernel::from_params(&p))
            .filter(|k| k.fits(ctx, dtype))
            .unwrap_or_else(|| GemmKernel::heuristic(ctx, dtype))
    }

    /// Runs the GEMM with the kernel [`Gemm::kernel`] picks.
    ///
    /// Errors: [`Error::Shape`] when a tensor does not hold the matrices described above;
    /// [`Error::DType`] when the dtypes differ; [`Error::InvalidArgument`] when `c` aliases an
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
        self.run_with(ctx, self.kernel(ctx, c.dtype()), a, b, bias, c)
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
        launch::same_dtype(name, c.dtype(), &inputs)?;
        launch::no_alias(name, c, &inputs)?;
        let (bm, bn, invocations, bytes) = match kernel {
            GemmKernel::Tiled(cfg) => {
                check_config(&cfg)?;
                (cfg.bm, cfg.bn, cfg.invocations(), cfg.workgroup_bytes())
            }
            GemmKernel::Coop(cfg) => {
                if c.dtype() != DType::F16 || !ctx.has_coop_f16() || !cfg.is_valid() {
                    return Err(Error::invalid(
                        name,
                        format!(
                            "the cooperative-matrix kernel needs f16 tensors, an adapter with \
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
        if splits == 1 {
            let layout = Layout {
                lda,
                ldb,
                stride_a: stride(a_batches, self.a_dims()),
                stride_b: stride(b_batches, self.b_dims()),
                stride_c: self.m * self.n,
            };
            return self.dispatch(ctx, kernel, [bm, bn, invocations], &layout, a, b, bias, c);
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
        part.dispatch(
            ctx,
            kernel,
            [bm, bn, invocations],
            &layout,
            a,
            b,
            None,
            &parts,
        )?;
        self.reduce(ctx, &parts, splits, bias, c)
    }

    /// The number of K slices `kernel` runs this problem as ([`GemmConfig::splits`]): the
    /// largest count ≤ the tiling's that divides K, for an unbatched f32 GEMM of K ≥ 2 whose
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
    /// kernel's [BM, BN, invocations].
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &self,
        ctx: &Context,
        kernel: GemmKernel,
        [bm, bn, invocations]: [u32; 3],
        l: &Layout,
        a: &Tensor,
        b: &Tensor,
        bias: Option<&Tensor>,
        c: &Tensor,
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
        launch::float_dtype(ctx, name, c.dtype())?;
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
            dtype: c.dtype(),
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
            label: name,
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
            label: name,
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

/// The most K slices a split-K GEMM runs ([`GemmConfig::splits`]).
pub const MAX_SPLITS: u32 = 64;

fn check_config(c: &GemmConfig) -> Result<()> {
    let ok = c.tm > 0
        && c.tn > 0
        && c.tm.is_multiple_of(4)
        && c.tn.is_multiple_of(4)
        && c.bk > 0
        && (c.stages == 1 || c.stages == 2)
        && (1..=MAX_SPLITS).contains(&c.splits)
        && c.bm.is_multiple_of(c.tm)
        && c.bn.is_multiple_of(c.tn)
        && (c.bm * c.bk).is_multiple_of(c.invocations())
        && (c.bn * c.bk).is_multiple_of(c.invocations());
    if ok {
        return Ok(());
    }
    Err(Error::invalid(
        "gemm",
        format!(
            "tiling {c:?}: TM and TN must be multiples of 4, BM and BN of TM and TN, \
             BM·BK and BN·BK of the invocation count, stages 1 or 2 and splits 1 to {MAX_SPLITS}"
        ),
    ))
}

/// How a kernel reaches A, B and C in memory: the width of each load (1, or a vector along
/// the stored contiguous dimension), whether every tile lies inside the matrices, and the
/// width of the epilogue's accesses to C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Access {
    a: u32,
    b: u32,
    /// M, N and K are multiples of BM, BN and BK and both operands load vectors: no load
    /// crosses an edge, so the loads skip their bounds checks and index from row offsets
    /// computed once (`interior_loads`).
    interior: bool,
    /// Width of C's loads and stores and of the bias's loads in the tiled kernel's epilogue:
    /// 4 (vec4) where N is a multiple of 4, else 1; always 1 for the tensor-core kernel.
    c: u32,
}

/// The loaders of `shaders/gemm.wgsl` for `w`: scalar, or vec4 along the stored contiguous
/// dimension (k for A, n for B when not transposed) with the lanes past the edge zeroed.
fn loaders(w: Access) -> String {
    let one = |name: &str, buf: &str, rows: &str, cols: &str, ld: &str, trans: &str| {
        format!(
            "fn load_{name}(base: u32, row: u32, col: u32) -> f32 {{
    if row >= p.{rows} || col >= p.{cols} {{ return 0.0; }}
    if {trans} {{ return f32({buf}[base + col * p.{ld} + row]); }}
    return f32({buf}[base + row * p.{ld} + col]);
}}
"
        )
    };
    let four = |name: &str, buf: &str, rows: &str, cols: &str, ld: &str, trans: &str| {
        format!(
            "fn load_{name}(base: u32, row: u32, col: u32) -> vec4<f32> {{
    if row >= p.{rows} || col >= p.{cols} {{ return vec4<f32>(); }}
    if {trans} {{ return inside(vec4<f32>({buf}[(base + col * p.{ld} + row) / 4u]), row, p.{rows}); }}
    return inside(vec4<f32>({buf}[(base + row * p.{ld} + col) / 4u]), col, p.{cols});
}}
"
        )
    };
    let a = if w.a == 4 { four } else { one };
    let b = if w.b == 4 { four } else { one };
    a("a", "a", "m", "k", "lda", "TRANS_A") + &b("b", "b", "k", "n", "ldb", "TRANS_B")
}

/// The generated parts of the tiled kernel (`//@` markers in `shaders/gemm.wgsl`): the
/// `TM × TN/4` vec4 accumulators and the pipeline registers holding the next slice
/// (`BM·BK` and `BN·BK` values in loads of `w` elements spread over the invocations), all
/// with constant names; the loads of a slice into those registers, their stores to
/// workgroup memory, the multiply-adds of one k step, and the stores of C.
fn register_block(c: &GemmConfig, g: &Gemm, w: Access) -> Vec<(&'static str, String)> {
    let (row_quads, col_quads) = (c.tm / 4, c.tn / 4);
    let per_a = c.bm * c.bk / (w.a * c.invocations());
    let per_b = c.bn * c.bk / (w.b * c.invocations());
    let mut declare = String::new();
    let mut load = String::new();
    let mut stage = String::new();
    let mut fma = String::new();
    for (s, per, width) in [("a", per_a, w.a), ("b", per_b, w.b)] {
        let ty = if width == 4 { "vec4<f32>()" } else { "0.0" };
        for e in 0..per {
            declare.push_str(&format!(
                "let {s}p{e} = {s}_pos(tid + {e}u * THREADS);\nvar {s}r{e} = {ty};\n"
            ));
        }
    }
    let comps = ["x", "y", "z", "w"];
    // Stores register `reg` to `tile` (k rows of `stride` vec4s, slices of `slice` vec4s) at
    // the staging slot `so`, with its first element at k row `k`, column `c`: one element, a
    // vec4 along the columns, or (`along_k`) a vec4 down four k rows.
    let stage_one =
        |(tile, stride, slice): (&str, &str, &str), reg: &str, k: &str, c: &str, width, along_k| {
            let at = |k: &str| format!("{tile}[so * {slice} + {k} * {stride} + {c} / 4u]");
            match (width, along_k) {
                (1, _) => format!("{}[{c} % 4u] = {reg};\n", at(k)),
                (_, false) => format!("{} = {reg};\n", at(k)),
                _ => comps
                    .iter()
                    .enumerate()
                    .map(|(l, comp)| {
                        format!(
                            "{}[{c} % 4u] = {reg}.{comp};\n",
                            at(&format!("({k} + {l}u)"))
                        )
                    })
                    .collect(),
            }
        };
    if w.interior {
        // Stored (row, column) of each load without k1: A is M × K (K × M transposed), B is
        // K × N (N × K); a_pos and b_pos give (m, k) and (k, n).
        let a_at = |e| match g.trans_a {
            false => (format!("m0 + ap{e}.x"), format!("ap{e}.y")),
            true => (format!("ap{e}.y"), format!("m0 + ap{e}.x")),
        };
        let b_at = |e| match g.trans_b {
            false => (format!("bp{e}.x"), format!("n0 + bp{e}.y")),
            true => (format!("n0 + bp{e}.y"), format!("bp{e}.x")),
        };
        for (s, per, k_rows, at) in [
            (
                "a",
                per_a,
                g.trans_a,
                &a_at as &dyn Fn(u32) -> (String, String),
            ),
            ("b", per_b, !g.trans_b, &b_at),
        ] {
            let (d, l) = interior_loads(s, per, 4, k_rows, at, "vec4<f32>");
            declare.push_str(&d);
            load.push_str(&l);
        }
    }
    for e in 0..per_a {
        if !w.interior {
            load.push_str(&format!(
                "ar{e} = load_a(a_base, m0 + ap{e}.x, k1 + ap{e}.y);\n"
            ));
        }
        let (k, c) = (format!("ap{e}.y"), format!("ap{e}.x"));
        stage.push_str(&stage_one(
            ("a_tile", "AS", "A_SLICE"),
            &format!("ar{e}"),
            &k,
            &c,
            w.a,
            !g.trans_a,
        ));
    }
    for e in 0..per_b {
        if !w.interior {
            load.push_str(&format!(
                "br{e} = load_b(b_base, k1 + bp{e}.x, n0 + bp{e}.y);\n"
            ));
        }
        let (k, c) = (format!("bp{e}.x"), format!("bp{e}.y"));
        stage.push_str(&stage_one(
            ("b_tile", "BS", "B_SLICE"),
            &format!("br{e}"),
            &k,
            &c,
            w.b,
            g.trans_b,
        ));
    }
    // The k steps unrolled: step kk's workgroup reads are issued before step kk−1's
    // multiply-adds, so they are in flight while those run.
    let reads = |kk: u32| {
        let mut r = String::new();
        for i in 0..row_quads {
            r.push_str(&format!(
                "let a{kk}_{i} = a_tile[ro * A_SLICE + {kk}u * AS + lid.y + {i}u * WG_Y];\n"
            ));
        }
        for j in 0..col_quads {
            r.push_str(&format!(
                "let b{kk}_{j} = b_tile[ro * B_SLICE + {kk}u * BS + lid.x + {j}u * WG_X];\n"
            ));
        }
        r
    };
    fma.push_str(&reads(0));
    for kk in 0..c.bk {
        if kk + 1 < c.bk {
            fma.push_str(&reads(kk + 1));
        }
        for i in 0..row_quads {
            for (r, comp) in comps.iter().enumerate() {
                let row = 4 * i + r as u32;
                for j in 0..col_quads {
                    fma.push_str(&format!(
                        "acc{row}_{j} = fma(vec4<f32>(a{kk}_{i}.{comp}), b{kk}_{j}, acc{row}_{j});\n"
                    ));
                }
            }
        }
    }
    for i in 0..row_quads {
        for r in 0..4 {
            for j in 0..col_quads {
                declare.push_str(&format!("var acc{}_{j} = vec4<f32>();\n", 4 * i + r));
            }
        }
    }
    let (epilogue, store) = epilogue(row_quads, col_quads, w.c);
    vec![
        ("LOADERS", loaders(w)),
        ("DECLARE", declare),
        ("LOAD", load),
        ("STAGE", stage),
        ("FMA", fma),
        ("EPILOGUE", epilogue),
        ("STORE", store),
    ]
}

/// The tiled kernel's epilogue functions and the stores of its `4·row_quads × 4·col_quads`
/// accumulators (`acc{row}_{quad}`, at rows 4·(lid.y + i·WG_Y) + r and columns
/// 4·(lid.x + j·WG_X)). Element by element with `width` 1. With 4: the bias read once per
/// column quad, then per row quad every C value it needs read before any is written (the
/// writes cannot move above reads of the same buffer, so interleaved they wait on each
/// other), one vec4 per load and store.
fn epilogue(row_quads: u32, col_quads: u32, width: u32) -> (String, String) {
    let mut store = String::new();
    if width == 1 {
        for i in 0..row_quads {
            for r in 0..4 {
                for j in 0..col_quads {
                    store.push_str(&format!(
                        "store4(c_base, m0 + (lid.y + {i}u * WG_Y) * 4u + {r}u, \
                         n0 + (lid.x + {j}u * WG_X) * 4u, acc{}_{j});\n",
                        4 * i + r
                    ));
                }
            }
        }
        let functions = "fn store4(c_base: u32, row: u32, col: u32, acc: vec4<f32>) {
    if row >= p.m { return; }
    for (var e = 0u; e < 4u; e++) {
        let cc = col + e;
        if cc >= p.n { return; }
        let ci = c_base + row * p.ldc + cc;
        var v = p.alpha * acc[e];
        if p.beta != 0.0 { v += p.beta * f32(c[ci]); }
        if HAS_BIAS { v += f32(bias[cc]); }
        if ACT_GELU { v = gelu(v); }
        c[ci] = T(v);
    }
}
";
        return (functions.to_string(), store);
    }
    for j in 0..col_quads {
        store.push_str(&format!(
            "let sc{j} = n0 + (lid.x + {j}u * WG_X) * 4u;\nlet sb{j} = bias4(sc{j});\n"
        ));
    }
    for i in 0..row_quads {
        store.push_str(&format!("let sr{i} = m0 + (lid.y + {i}u * WG_Y) * 4u;\n"));
        for r in 0..4 {
            for j in 0..col_quads {
                store.push_str(&format!(
                    "let so{i}_{r}_{j} = old4(c_base, sr{i} + {r}u, sc{j});\n"
                ));
            }
        }
        for r in 0..4 {
            for j in 0..col_quads {
                store.push_str(&format!(
                    "put4(c_base, sr{i} + {r}u, sc{j}, p.alpha * acc{}_{j} + so{i}_{r}_{j} + sb{j});\n",
                    4 * i + r
                ));
            }
        }
    }
    let functions = "fn bias4(col: u32) -> vec4<f32> {
    if !HAS_BIAS || col >= p.n { return vec4<f32>(); }
    return vec4<f32>(bias[col / 4u]);
}
fn old4(c_base: u32, row: u32, col: u32) -> vec4<f32> {
    if p.beta == 0.0 || row >= p.m || col >= p.n { return vec4<f32>(); }
    return p.beta * vec4<f32>(c[(c_base + row * p.ldc + col) / 4u]);
}
fn put4(c_base: u32, row: u32, col: u32, v: vec4<f32>) {
    if row >= p.m || col >= p.n { return; }
    var x = v;
    if ACT_GELU { x = gelu(x); }
    c[(c_base + row * p.ldc + col) / 4u] = CT(x);
}
";
    (functions.to_string(), store)
}

/// The loads of operand `s` (`a` or `b`) for tiles inside the matrices
/// ([`Access::interior`]): `per` loads of `vector` elements, load `e` at the stored
/// (row, column) `at(e)` plus k1 along the rows (`k_rows`) or the columns. Returns the
/// declarations, each load's vector index without k1 (`{s}i{e}`, computed once), and the
/// loads of one slice into the pipeline registers: one k1 offset per operand, one add per
/// load, no bounds checks, each value passed through `wrap` (a conversion, or nothing).
fn interior_loads(
    s: &str,
    per: u32,
    vector: u32,
    k_rows: bool,
    at: &dyn Fn(u32) -> (String, String),
    wrap: &str,
) -> (String, String) {
    let mut declare = String::new();
    let mut load = if k_rows {
        format!("let {s}k = k1 * (p.ld{s} / {vector}u);\n")
    } else {
        format!("let {s}k = k1 / {vector}u;\n")
    };
    for e in 0..per {
        let (row, col) = at(e);
        declare.push_str(&format!(
            "let {s}i{e} = ({s}_base + ({row}) * p.ld{s} + {col}) / {vector}u;\n"
        ));
        load.push_str(&format!("{s}r{e} = {wrap}({s}[{s}i{e} + {s}k]);\n"));
    }
    (declare, load)
}

/// Everything the defines of a GEMM launch depend on.
#[derive(Debug)]
struct VariantKey {
    kernel: GemmKernel,
    dtype: DType,
    trans_a: bool,
    trans_b: bool,
    gelu: bool,
    bias: bool,
    access: Access,
}

impl VariantKey {
    fn defines(&self) -> ridge_core::Defines {
        let g = Gemm {
            trans_a: self.trans_a,
            trans_b: self.trans_b,
            gelu: self.gelu,
            ..Gemm::new(1, 1, 1)
        };
        match self.kernel {
            GemmKernel::Tiled(cfg) => config_defines(
                shaders::storage_defines(self.dtype),
                &cfg,
                &g,
                self.access,
                self.bias,
            ),
            GemmKernel::Coop(cfg) => coop_defines(&cfg, &g, self.access, self.bias),
        }
    }
}

/// Leading dimensions of the stored A and B and the element offsets between the batch
/// entries of A, B and C (0 for an operand every entry shares).
struct Layout {
    lda: usize,
    ldb: usize,
    stride_a: usize,
    stride_b: usize,
    stride_c: usize,
}

/// How a kernel that stages `[BM, BN, BK]` slices over `invocations` reaches operands laid
/// out as `l` (`a_len`, `b_len`, `c_len` elements) for the problem `mnk` (one split's K for
/// split-K). A and B: `vector` elements along the stored contiguous dimension (4 for the
/// tiled kernel's vec4, 8 for the tensor-core kernel's 16-byte f16 loads) when the slices
/// divide evenly into such loads per invocation and every load starts aligned (the leading
/// dimension and the batch stride multiples of `vector`; bindings start aligned); else one
/// element. C and the bias: `c_vector` elements where N is a multiple of it. Empty matrices
/// keep scalar accesses: a vector binding must hold one vector.
fn access(
    [vector, c_vector]: [u32; 2],
    [bm, bn, bk]: [u32; 3],
    invocations: u32,
    l: &Layout,
    [a_len, b_len, c_len]: [usize; 3],
    [m, n, k]: [usize; 3],
) -> Access {
    let width = |tile: u32, ld: usize, stride: usize, len: usize| {
        let even = (tile * bk).is_multiple_of(vector * invocations);
        let v = vector as usize;
        if even && ld.is_multiple_of(v) && stride.is_multiple_of(v) && len > 0 {
            vector
        } else {
            1
        }
    };
    let (a, b) = (
        width(bm, l.lda, l.stride_a, a_len),
        width(bn, l.ldb, l.stride_b, b_len),
    );
    let tiles = |len: usize, tile: u32| len.is_multiple_of(tile as usize);
    Access {
        a,
        b,
        interior: a == vector
            && b == vector
            && tiles(m, bm)
            && tiles(n, bn)
            && tiles(k, bk)
            && k > 0,
        c: if n.is_multiple_of(c_vector as usize) && c_len > 0 {
            c_vector
        } else {
            1
        },
    }
}

fn config_defines(
    d: ridge_core::Defines,
    c: &GemmConfig,
    g: &Gemm,
    w: Access,
    bias: bool,
) -> ridge_core::Defines {
    let vector = |width: u32| if width == 4 { "vec4<T>" } else { "T" };
    common_defines(d, register_block(c, g, w), w, vector, g, bias)
        .u32("BM", c.bm)
        .u32("BN", c.bn)
        .u32("BK", c.bk)
        .u32("TM", c.tm)
        .u32("TN", c.tn)
        .u32("STAGES", c.stages)
}

/// The defines both GEMM kernels share: the GELU include, the generated `blocks`, the operand
/// types (`vector` names the type of one load of `w` elements), transposes, bias, activation.
fn common_defines(
    d: ridge_core::Defines,
    blocks: Vec<(&'static str, String)>,
    w: Access,
    vector: fn(u32) -> &'static str,
    g: &Gemm,
    bias: bool,
) -> ridge_core::Defines {
    let d = d
        .block("GELU", shaders::GELU.to_string())
        .alias("VF", if w.c == 4 { "vec4<f32>" } else { "f32" });
    blocks
        .into_iter()
        .fold(d, |d, (name, code)| d.block(name, code))
        .alias("AT", vector(w.a))
        .alias("BT", vector(w.b))
        .alias("CT", vector(w.c))
        .u32("VA", w.a)
        .u32("VB", w.b)
        .u32("VC", w.c)
        .bool("TRANS_A", g.trans_a)
        .bool("TRANS_B", g.trans_b)
        .bool("HAS_BIAS", bias)
        .bool("ACT_GELU", g.gelu)
}

/// The generated parts of the tensor-core kernel (`//@` markers in `shaders/gemm_coop.wgsl`):
/// loaders and stagers for the widths `w`, the `fm × fn_` accumulators and the pipeline
/// registers, the loads of the next slice into them, their stores to workgroup memory, the
/// unrolled k steps (step k's fragment loads issued before step k−1's multiply-adds), and the
/// epilogue of every accumulator.
fn coop_block(c: &CoopConfig, g: &Gemm, w: Access) -> Vec<(&'static str, String)> {
    let mut loaders = String::new();
    for (s, width) in [("a", w.a), ("b", w.b)] {
        if width == 8 {
            loaders.push_str(&format!(
                "fn load_{s}(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> mat2x4<f16> {{
    if row >= rows || col >= cols {{ return mat2x4<f16>(); }}
    return {s}[(base + row * p.ld{s} + col) / 8u];
}}
fn stage_{s}(i: u32, v: mat2x4<f16>) {{
"
            ));
            for h in 0..8 {
                loaders.push_str(&format!(
                    "    {s}_tile[i + {h}u] = v[{}][{}];\n",
                    h / 4,
                    h % 4
                ));
            }
            loaders.push_str("}\n");
        } else {
            loaders.push_str(&format!(
                "fn load_{s}(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> f16 {{
    if row >= rows || col >= cols {{ return f16(0.0); }}
    return {s}[base + row * p.ld{s} + col];
}}
fn stage_{s}(i: u32, v: f16) {{ {s}_tile[i] = v; }}
"
            ));
        }
    }
    let per_a = c.bm() * c.bk / (w.a * c.invocations());
    let per_b = c.bn() * c.bk / (w.b * c.invocations());
    let mut declare = String::new();
    let mut load = String::new();
    let mut stage = String::new();
    // Stored (row, column) of load e: A is M × K (K × M transposed), B is K × N (N × K).
    let (a_row, a_col) = if g.trans_a {
        ("k1", "m0")
    } else {
        ("m0", "k1")
    };
    let (b_row, b_col) = if g.trans_b {
        ("n0", "k1")
    } else {
        ("k1", "n0")
    };
    for (s, per, row, col, ty, stride, s_slice) in [
        ("a", per_a, a_row, a_col, "AT", "AS", "A_SLICE"),
        ("b", per_b, b_row, b_col, "BT", "BS", "B_SLICE"),
    ] {
        for e in 0..per {
            declare.push_str(&format!(
                "let {s}p{e} = {s}_pos(tid + {e}u * THREADS);\nvar {s}r{e} = {ty}();\n"
            ));
            if !w.interior {
                load.push_str(&format!(
                    "{s}r{e} = load_{s}({s}_base, {row} + {s}p{e}.x, {col} + {s}p{e}.y, {s}_rows, {s}_cols);\n"
                ));
            }
            stage.push_str(&format!(
                "stage_{s}(so * {s_slice} + {s}p{e}.x * {stride} + {s}p{e}.y, {s}r{e});\n"
            ));
        }
    }
    if w.interior {
        let at = |s: &str, row: &str, col: &str, e: u32| {
            let part = |x: &str, c: &str| match x {
                "k1" => format!("{s}p{e}.{c}"),
                x => format!("{x} + {s}p{e}.{c}"),
            };
            (part(row, "x"), part(col, "y"))
        };
        for (s, per, row, col, width) in [
            ("a", per_a, a_row, a_col, w.a),
            ("b", per_b, b_row, b_col, w.b),
        ] {
            let (d, l) = interior_loads(s, per, width, row == "k1", &|e| at(s, row, col, e), "");
            declare.push_str(&d);
            load.push_str(&l);
        }
    }
    // Fragment loads of k step kk: row-major (coopLoadT) when the stored layout is the
    // fragment's row-major one, column-major (coopLoad) when it is transposed.
    let fragments = |kk: u32| {
        let mut r = String::new();
        for i in 0..c.fm {
            let (f, at) = if g.trans_a {
                (
                    "coopLoad",
                    format!("ro * A_SLICE + {kk}u * AS + sm + {}u", 16 * i),
                )
            } else {
                (
                    "coopLoadT",
                    format!("ro * A_SLICE + (sm + {}u) * AS + {kk}u", 16 * i),
                )
            };
            r.push_str(&format!(
                "let fa{kk}_{i} = {f}<coop_mat16x16<f16, A>>(&a_tile[{at}], AS);\n"
            ));
        }
        for j in 0..c.fn_ {
            let (f, at) = if g.trans_b {
                (
                    "coopLoad",
                    format!("ro * B_SLICE + (sn + {}u) * BS + {kk}u", 16 * j),
                )
            } else {
                (
                    "coopLoadT",
                    format!("ro * B_SLICE + {kk}u * BS + sn + {}u", 16 * j),
                )
            };
            r.push_str(&format!(
                "let fb{kk}_{j} = {f}<coop_mat16x16<f16, B>>(&b_tile[{at}], BS);\n"
            ));
        }
        r
    };
    let steps: Vec<u32> = (0..c.bk).step_by(16).collect();
    let mut mma = fragments(0);
    for (n, &kk) in steps.iter().enumerate() {
        if let Some(&next) = steps.get(n + 1) {
            mma.push_str(&fragments(next));
        }
        for i in 0..c.fm {
            for j in 0..c.fn_ {
                mma.push_str(&format!(
                    "acc{i}_{j} = coopMultiplyAdd(fa{kk}_{i}, fb{kk}_{j}, acc{i}_{j});\n"
                ));
            }
        }
    }
    let mut store = String::new();
    for i in 0..c.fm {
        for j in 0..c.fn_ {
            declare.push_str(&format!("var acc{i}_{j} = coop_mat16x16<f32, C>();\n"));
            store.push_str(&format!(
                "coopStoreT(acc{i}_{j}, &scratch[sg * 256u], 16u);
subgroupBarrier();
store_tile(sg, lane, c_base, row0 + {}u, col0 + {}u);
subgroupBarrier();
",
                16 * i,
                16 * j
            ));
        }
    }
    vec![
        ("LOADERS", loaders),
        ("DECLARE", declare),
        ("LOAD", load),
        ("STAGE", stage),
        ("MMA", mma),
        ("STORE", store),
    ]
}

fn coop_defines(c: &CoopConfig, g: &Gemm, w: Access, bias: bool) -> ridge_core::Defines {
    let vector = |width: u32| if width == 8 { "mat2x4<f16>" } else { "f16" };
    let d = ridge_core::Defines::new()
        .enable("f16")
        .enable("wgpu_cooperative_matrix");
    common_defines(d, coop_block(c, g, w), w, vector, g, bias)
        .u32("SG_M", c.sg_m)
        .u32("SG_N", c.sg_n)
        .u32("FM", c.fm)
        .u32("FN", c.fn_)
        .u32("BK", c.bk)
        .u32("STAGES", c.stages)
}

pub(crate) fn coop_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for (trans_a, trans_b, width, cfg) in [
        (false, true, 8, CoopConfig::DEFAULT),
        (true, false, 1, CoopConfig::DEFAULT),
        (
            false,
            false,
            8,
            CoopConfig {
                fm: 4,
                fn_: 4,
                ..CoopConfig::DEFAULT
            },
        ),
    ] {
        let g = Gemm {
            trans_a,
            trans_b,
            gelu: width == 8,
            ..Gemm::new(1, 1, 1)
        };
        let w = Access {
            a: width,
            b: width,
            interior: width == 8 && !trans_b,
            c: 1,
        };
        v.push((&GEMM_COOP, "gemm_coop", coop_defines(&cfg, &g, w, true)));
    }
    v
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    for (trans_a, trans_b, bias, width, interior) in [
        (false, false, false, 1, false),
        (true, true, true, 4, true),
        (false, true, true, 4, false),
        (false, true, true, 4, true),
        (false, false, true, 4, true),
    ] {
        let g = Gemm {
            trans_a,
            trans_b,
            ..Gemm::new(1, 1, 1)
        };
        let d = config_defines(
            shaders::storage_defines(dtype),
            &GemmConfig::DEFAULT,
            &g,
            Access {
                a: width,
                b: width,
                interior,
                c: if bias { width } else { 1 },
            },
            bias,
        );
        v.push((&GEMM, "gemm", d));
    }
    for (width, bias, gelu) in [(1, false, false), (4, true, true)] {
        let d = crate::elementwise::vector_defines(shaders::storage_defines(dtype), dtype, width)
            .bool("HAS_BIAS", bias)
            .bool("ACT_GELU", gelu)
            .u32("WG", 256);
        v.push((&GEMM_REDUCE, "gemm_reduce", d));
    }
    v
}
