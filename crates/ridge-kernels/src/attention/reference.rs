//! Attention's f64 reference, its error bound and its cost.

use ridge_core::DType;
use ridge_model::OpCost;
use ridge_model::sparsity::BlockLayout;

use super::Attention;

impl Attention {
    /// Query–key pairs computed: n² dense (n(n + 1)/2 with a causal mask), nnz blocks ×
    /// block² sparse.
    pub fn pairs(&self, layout: Option<&BlockLayout>) -> f64 {
        match layout {
            Some(l) => l.nnz() as f64 * (l.block * l.block) as f64,
            // A causal mask leaves each query the keys up to its own: n(n + 1)/2 (the kernels
            // skip key tiles wholly past a query tile).
            None if self.causal => (self.seq * (self.seq + 1) / 2) as f64,
            None => (self.seq * self.seq) as f64,
        }
    }

    /// Cost (see `ridge_model::ops::attention`).
    pub fn cost(&self, dtype: DType, layout: Option<&BlockLayout>) -> OpCost {
        ridge_model::ops::attention(
            self.batch,
            self.heads,
            self.seq,
            self.head_dim,
            self.pairs(layout),
            dtype.size(),
        )
    }

    /// f64 reference: dense attention with the expanded mask (lengths, causal, and the block
    /// layout's token mask). Returns `[batch, heads, seq, head_dim]`, whatever the O layout.
    pub fn reference(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        lengths: Option<&[u32]>,
        layout: Option<&BlockLayout>,
    ) -> Vec<f32> {
        let (n, d) = (self.seq, self.head_dim);
        let allowed = layout.map(BlockLayout::to_dense_mask);
        let mut out = vec![0f32; self.batch * self.heads * n * d];
        for b in 0..self.batch {
            let len = lengths.map_or(n, |l| (l[b] as usize).min(n));
            for h in 0..self.heads {
                for i in 0..n {
                    let keys: Vec<usize> = (0..n)
                        .filter(|&j| {
                            j < len
                                && !(self.causal && j > i)
                                && allowed.as_ref().is_none_or(|m| m[i * n + j])
                        })
                        .collect();
                    if keys.is_empty() {
                        continue;
                    }
                    let qi = self.q.index(b, i, h);
                    let scores: Vec<f64> = keys
                        .iter()
                        .map(|&j| {
                            let kj = self.k.index(b, j, h);
                            (0..d)
                                .map(|t| q[qi + t] as f64 * k[kj + t] as f64)
                                .sum::<f64>()
                                * self.scale as f64
                        })
                        .collect();
                    let mx = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
                    let sum: f64 = w.iter().sum();
                    let base = ((b * self.heads + h) * n + i) * d;
                    for t in 0..d {
                        let acc: f64 = keys
                            .iter()
                            .zip(&w)
                            .map(|(&j, wj)| wj * v[self.v.index(b, j, h) + t] as f64)
                            .sum();
                        out[base + t] = (acc / sum) as f32;
                    }
                }
            }
        }
        out
    }

    /// Error bound against [`Attention::reference`] for an output with reference `want`, for
    /// values of V bounded by `v_max` in magnitude: the output is a convex combination of V
    /// rows, each weight off by a few ulps relative (f32 exp and a sum over ≤ n terms, γ_n)
    /// plus the f32 dot products of QKᵀ (γ_d relative to |q||k|·scale, which shifts weights by
    /// at most that much in the exponent), so 4·(γ_n + γ_d·|s|_max + u)·v_max + the final
    /// rounding to the storage type. `score_max` bounds |scale·q·k|.
    pub fn error_bound(&self, dtype: DType, v_max: f64, score_max: f64, want: f32) -> f64 {
        let g = crate::check::gamma(self.seq)
            + crate::check::gamma(self.head_dim) * score_max.max(1.0)
            + crate::check::U32;
        4.0 * g * v_max.max(1e-30) + crate::check::storage_rounding(dtype, want as f64)
    }
}
