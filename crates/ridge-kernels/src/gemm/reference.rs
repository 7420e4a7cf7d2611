//! The GEMM's f64 reference, its error bounds and its cost.

use ridge_core::DType;
use ridge_model::OpCost;

use super::Gemm;

impl Gemm {
    /// Cost: 2·M·N·K·batch FLOPs for the product (a multiply-add is 2), 2·M·N·batch more when
    /// β ≠ 0, M·N·batch for a bias and 5·M·N·batch for GELU. Bytes: A and B read once each
    /// (`a_batches`, `b_batches` ∈ {1, batch}) in `input`'s size, C written once and read once
    /// when β ≠ 0 and the bias read once, in `output`'s (f32 for a mixed-precision GEMM).
    pub fn cost(
        &self,
        input: DType,
        output: DType,
        a_batches: usize,
        b_batches: usize,
        bias: bool,
    ) -> OpCost {
        let gelu = if self.gelu {
            (5 * self.m * self.n * self.batch) as f64
        } else {
            0.0
        };
        let (m, n, k) = (self.m as f64, self.n as f64, self.k as f64);
        let operands = (a_batches as f64 * m * k + b_batches as f64 * k * n) * input.size() as f64;
        // The product's FLOPs and C's side (C, β·C, the bias) at the output's size; the
        // operands' bytes at the input's.
        OpCost::new(gelu, operands)
            + ridge_model::ops::gemm(
                self.m,
                self.n,
                self.k,
                self.batch,
                0,
                0,
                self.beta != 0.0,
                bias,
                output.size(),
            )
    }

    /// f64 reference. `a` and `b` hold `a.len() / (M·K)` and `b.len() / (K·N)` matrices (1 or
    /// batch); `c` is the old C (`batch·M·N`, read only when β ≠ 0).
    pub fn reference(&self, a: &[f32], b: &[f32], bias: Option<&[f32]>, c: &[f32]) -> Vec<f32> {
        let (m, n, k) = (self.m, self.n, self.k);
        let a_step = if a.len() > m * k { m * k } else { 0 };
        let b_step = if b.len() > k * n { k * n } else { 0 };
        let mut out = vec![0f32; self.batch * m * n];
        // Each batch's A as M rows of K and B as N rows of K (its columns), in f64: the dot
        // products then walk memory in order.
        for bi in 0..self.batch {
            let rows = rows_of_k(&a[bi * a_step..], m, k, !self.trans_a);
            let cols = rows_of_k(&b[bi * b_step..], n, k, self.trans_b);
            for i in 0..m {
                let row = &rows[i * k..][..k];
                for j in 0..n {
                    let col = &cols[j * k..][..k];
                    let acc: f64 = row.iter().zip(col).map(|(x, y)| x * y).sum();
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
}

/// The `r` rows of `k` values of a matrix in f64, from `src` stored as those rows
/// (`row_major`) or as `k` rows of `r` (their transpose).
fn rows_of_k(src: &[f32], r: usize, k: usize, row_major: bool) -> Vec<f64> {
    let mut out = vec![0f64; r * k];
    for i in 0..r {
        for p in 0..k {
            out[i * k + p] = if row_major {
                src[i * k + p]
            } else {
                src[p * r + i]
            } as f64;
        }
    }
    out
}
