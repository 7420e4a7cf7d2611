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
use crate::shaders::{self, GEMM, Variant};

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
}

/// Workgroup tiling of the GEMM kernel.
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
}

impl GemmConfig {
    /// 64 × 64 tiles, 16 deep, 4 × 4 per invocation: 256 invocations and 8 KiB of workgroup
    /// memory, within every WebGPU adapter's minimum limits.
    pub const DEFAULT: GemmConfig = GemmConfig {
        bm: 64,
        bn: 64,
        bk: 16,
        tm: 4,
        tn: 4,
    };

    /// Invocations per workgroup.
    pub fn invocations(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }
    /// Bytes of workgroup memory (two f32 tiles).
    pub fn workgroup_bytes(&self) -> u32 {
        (self.bm + self.bn) * self.bk * 4
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
    /// β ≠ 0 and M·N·batch for a bias. Bytes: A and B read once each (`a_batches`,
    /// `b_batches` ∈ {1, batch}), C written once and read once when β ≠ 0, the bias read once.
    pub fn cost(&self, dtype: DType, a_batches: usize, b_batches: usize, bias: bool) -> OpCost {
        ridge_model::ops::gemm(
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
                    out[ci] = v as f32;
                }
            }
        }
        out
    }

    /// Per-element error bound of the kernel against [`Gemm::reference`] (same arguments,
    /// `want` its result): |C − Ĉ| ≤ γ_{K+2}·(|α|·(|A||B|) + |β||C₀| + |bias|) + u_T·|Ĉ|,
    /// Higham's bound for f32 accumulation in any order plus the final rounding to the
    /// storage type T (see [`crate::check::gamma`]).
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
            ..*self
        };
        let magnitude = plain.reference(&abs(a), &abs(b), None, &[]);
        let gk = crate::check::gamma(self.k + 2);
        let u_out = crate::check::unit_roundoff(dtype);
        (0..want.len())
            .map(|i| {
                let mut m = self.alpha.abs() as f64 * magnitude[i] as f64;
                if self.beta != 0.0 {
                    m += (self.beta.abs() * c_old[i].abs()) as f64;
                }
                if let Some(bias) = bias {
                    m += bias[i % self.n.max(1)].abs() as f64;
                }
                gk * m + u_out * want[i].abs() as f64 + f64::MIN_POSITIVE
            })
            .collect()
    }

    /// Runs the GEMM with the default tiling.
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
        self.run_with(ctx, GemmConfig::DEFAULT, a, b, bias, c)
    }

    /// Runs the GEMM with a given tiling (the autotuner's entry point).
    pub fn run_with(
        &self,
        ctx: &Context,
        config: GemmConfig,
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
        check_config(&config)?;
        launch::check_workgroup(ctx, name, config.invocations(), config.workgroup_bytes())?;
        for t in [a, b, c] {
            launch::fits_u32(name, "elements", t.numel())?;
        }

        let tiles_m = self.m.div_ceil(config.bm as usize) as u64;
        let tiles_n = self.n.div_ceil(config.bn as usize) as u64;
        let total = tiles_m * tiles_n * self.batch as u64;
        let u = |v: usize| v as u32; // every value below is ≤ an element count checked above
        let (lda, ldb) = (self.a_dims()[1], self.b_dims()[1]);
        let stride = |batches: usize, dims: [usize; 2]| {
            if batches == 1 { 0 } else { dims[0] * dims[1] }
        };
        let params = Params::new()
            .words(&[u(self.m), u(self.n), u(self.k), u(self.batch)])
            .words(&[u(lda), u(ldb), u(self.n), tiles_n as u32])
            .words(&[
                u(stride(a_batches, self.a_dims())),
                u(stride(b_batches, self.b_dims())),
                u(self.m * self.n),
                tiles_m as u32,
            ])
            .f(self.alpha)
            .f(self.beta);
        let defines = config_defines(
            launch::dtype_defines(ctx, name, c.dtype())?,
            &config,
            self,
            bias.is_some(),
        );
        let bias = bias.map_or(ctx.placeholder(), |t| t);
        Launch {
            label: name,
            shader: &GEMM,
            entry: "gemm",
            defines,
            params,
            buffers: vec![(1, a), (2, b), (3, bias), (4, c)],
            workgroups: ctx.fold_workgroups(name, total)?,
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

fn check_config(c: &GemmConfig) -> Result<()> {
    let ok =
        c.tm > 0 && c.tn > 0 && c.bk > 0 && c.bm.is_multiple_of(c.tm) && c.bn.is_multiple_of(c.tn);
    if ok {
        return Ok(());
    }
    Err(Error::invalid(
        "gemm",
        format!("tiling {c:?}: BM and BN must be multiples of TM and TN"),
    ))
}

fn config_defines(
    d: ridge_core::Defines,
    c: &GemmConfig,
    g: &Gemm,
    bias: bool,
) -> ridge_core::Defines {
    d.u32("BM", c.bm)
        .u32("BN", c.bn)
        .u32("BK", c.bk)
        .u32("TM", c.tm)
        .u32("TN", c.tn)
        .bool("TRANS_A", g.trans_a)
        .bool("TRANS_B", g.trans_b)
        .bool("HAS_BIAS", bias)
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    for (trans_a, trans_b, bias) in [
        (false, false, false),
        (true, true, true),
        (false, true, true),
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
            bias,
        );
        v.push((&GEMM, "gemm", d));
    }
    v
}
