//! Rotary position embedding on a packed Q/K/V projection, with the KV-cache append in the
//! same pass (`shaders/rope.wgsl`).
//!
//! Shapes: `qkv` `[T, nh + 2·nkv, dh]` (Q heads, then K, then V, as one product writes
//! them), `q` `[T, nh, dh]`, `k_cache` and `v_cache` `[capacity, nkv, dh]`; token `t` is at
//! position `pos0 + t` and lands in row `pos0 + t` of the caches. The angle table is
//! `[positions, dh/2]` (cos, sin) pairs, computed in f64 ([`RopeTable`]).
//!
//! RoPE: Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021;
//! pair `j` of a head turns by `pos·θ_j`, `θ_j = base^(−2j/dh)`.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, ROPE, Variant};

const WG_CAP: u32 = 256;

/// Which elements of a head form a rotated pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PairLayout {
    /// `(2j, 2j + 1)`: llama.cpp's layout (GGUF files store Q and K rows permuted for it).
    Adjacent,
    /// `(j, j + dh/2)`: Hugging Face's `rotate_half` on the original rows.
    Halves,
}

/// The cosines and sines of every (position, pair) angle, on the GPU.
#[derive(Clone, Debug)]
pub struct RopeTable {
    /// `[positions, dh/2, 2]` f32: (cos, sin) of `pos·base^(−2j/dh)`, computed in f64.
    pub table: Tensor,
    /// Positions covered (0 to `positions − 1`).
    pub positions: usize,
    /// Head width.
    pub head_dim: usize,
    /// The frequency base (10,000 in RoFormer; 100,000 in SmolLM2).
    pub base: f64,
}

impl RopeTable {
    /// The (cos, sin) pairs on the host: `[positions, dh/2]` flattened.
    pub fn values(positions: usize, head_dim: usize, base: f64) -> Vec<f32> {
        let half = head_dim / 2;
        let mut v = Vec::with_capacity(positions * head_dim);
        for pos in 0..positions {
            for j in 0..half {
                let angle = pos as f64 * base.powf(-2.0 * j as f64 / head_dim as f64);
                v.push(angle.cos() as f32);
                v.push(angle.sin() as f32);
            }
        }
        v
    }

    /// Uploads the table for positions `0..positions`.
    ///
    /// Errors: [`Error::InvalidArgument`] for an odd or zero head width, no positions, or a
    /// base that is not finite and > 1; limit errors for a table larger than a buffer.
    pub fn new(ctx: &Context, positions: usize, head_dim: usize, base: f64) -> Result<Self> {
        if head_dim == 0 || !head_dim.is_multiple_of(2) || positions == 0 {
            return Err(Error::invalid(
                "rope",
                format!("needs an even head width and positions, got {head_dim} and {positions}"),
            ));
        }
        if !(base.is_finite() && base > 1.0) {
            return Err(Error::invalid(
                "rope",
                format!("frequency base {base} must be > 1"),
            ));
        }
        let values = Self::values(positions, head_dim, base);
        Ok(Self {
            table: Tensor::from_slice(ctx, &values, &[positions, head_dim / 2, 2])?,
            positions,
            head_dim,
            base,
        })
    }
}

/// RoPE on Q and K of a packed projection, K and V appended to the caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RopeQkv {
    /// Tokens `T`.
    pub tokens: usize,
    /// Query heads `nh`.
    pub heads: usize,
    /// Key/value heads `nkv` (grouped-query attention: `nh` a multiple).
    pub kv_heads: usize,
    /// Head width `dh` (even).
    pub head_dim: usize,
    /// Position of the first token.
    pub pos0: usize,
    /// Pairing of a head's elements.
    pub layout: PairLayout,
}

impl RopeQkv {
    /// Cost: the projection read and written once (Q to `q`, K and V to the caches), the
    /// table's entries for T positions read; 6 FLOPs per rotated pair (4 multiplies, 2 adds).
    pub fn cost(&self, dtype: DType) -> OpCost {
        let (t, dh) = (self.tokens as f64, self.head_dim as f64);
        let all = t * (self.heads + 2 * self.kv_heads) as f64 * dh;
        let pairs = t * (self.heads + self.kv_heads) as f64 * dh / 2.0;
        OpCost::new(6.0 * pairs, 2.0 * all * dtype.size() as f64 + t * dh * 4.0)
    }

    /// f64 reference: returns (`q`, the K rows appended, the V rows appended), each
    /// `[T, heads, dh]`.
    pub fn reference(&self, qkv: &[f32], base: f64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let (nh, nkv, dh) = (self.heads, self.kv_heads, self.head_dim);
        let heads = nh + 2 * nkv;
        let (mut q, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new());
        for t in 0..self.tokens {
            let pos = (self.pos0 + t) as f64;
            for h in 0..heads {
                let x = &qkv[(t * heads + h) * dh..(t * heads + h + 1) * dh];
                let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                if h < nh + nkv {
                    for j in 0..dh / 2 {
                        let (a, b) = match self.layout {
                            PairLayout::Adjacent => (2 * j, 2 * j + 1),
                            PairLayout::Halves => (j, j + dh / 2),
                        };
                        let angle = pos * base.powf(-2.0 * j as f64 / dh as f64);
                        let (s, c) = angle.sin_cos();
                        let (x0, x1) = (x[a] as f64, x[b] as f64);
                        out[a] = x0 * c - x1 * s;
                        out[b] = x0 * s + x1 * c;
                    }
                }
                let dst = if h < nh {
                    &mut q
                } else if h < nh + nkv {
                    &mut k
                } else {
                    &mut v
                };
                dst.extend(out.iter().map(|&v| v as f32));
            }
        }
        (q, k, v)
    }

    /// Error bound of one rotated element with reference value `want` from inputs of
    /// magnitude `x0`, `x1`: the table's cos and sin are rounded to f32 (u each) and the
    /// rotation is two products and a sum (2u), so 4u·(|x0| + |x1|), then the storage rounding.
    pub fn error_bound(dtype: DType, x0: f32, x1: f32, want: f32) -> f64 {
        4.0 * crate::check::U32 * (x0.abs() + x1.abs()) as f64
            + crate::check::storage_rounding(dtype, want as f64)
    }

    /// Rotates Q and K of `qkv` into `q` and `k_cache`, copies V into `v_cache`.
    ///
    /// Errors: [`Error::Shape`] for shapes that disagree with the op (see the module docs),
    /// `nh` not a multiple of `nkv`, an odd `dh`, or `pos0 + T` past the caches' capacity or
    /// the table's positions; dtype, alias and limit errors as every op.
    pub fn run(
        &self,
        ctx: &Context,
        qkv: &Tensor,
        table: &RopeTable,
        q: &Tensor,
        k_cache: &Tensor,
        v_cache: &Tensor,
    ) -> Result<()> {
        let name = "rope_qkv";
        let (t, nh, nkv, dh) = (self.tokens, self.heads, self.kv_heads, self.head_dim);
        if nkv == 0 || !nh.is_multiple_of(nkv) || dh == 0 || !dh.is_multiple_of(2) {
            return Err(Error::shape(
                name,
                format!("{nh} heads over {nkv} KV heads of width {dh}"),
            ));
        }
        if table.head_dim != dh {
            return Err(Error::shape(
                name,
                format!("table for width {}, heads of {dh}", table.head_dim),
            ));
        }
        if qkv.numel() != t * (nh + 2 * nkv) * dh {
            return Err(Error::shape(
                name,
                format!(
                    "qkv {:?} is not [{t}, {}]",
                    qkv.shape(),
                    (nh + 2 * nkv) * dh
                ),
            ));
        }
        if q.numel() != t * nh * dh {
            return Err(Error::shape(
                name,
                format!("q {:?} is not [{t}, {nh}, {dh}]", q.shape()),
            ));
        }
        let capacity = k_cache.shape().first().copied().unwrap_or(0);
        for (what, c) in [("k_cache", k_cache), ("v_cache", v_cache)] {
            c.expect_shape(name, what, &[capacity, nkv, dh])?;
        }
        let end = self.pos0.saturating_add(t);
        if end > capacity || end > table.positions {
            return Err(Error::shape(
                name,
                format!(
                    "positions {}..{end} past the cache's {capacity} or the table's {}",
                    self.pos0, table.positions
                ),
            ));
        }
        launch::same_dtype(name, qkv.dtype(), &[q, k_cache, v_cache])?;
        launch::no_alias(name, q, &[qkv, &table.table])?;
        launch::no_alias(name, k_cache, &[qkv, &table.table, q])?;
        launch::no_alias(name, v_cache, &[qkv, &table.table, q, k_cache])?;
        let total = launch::fits_u32(name, "pairs", t * (nh + 2 * nkv) * dh / 2)?;
        launch::fits_u32(name, "cache", k_cache.numel())?;
        let wg = launch::workgroup_size_1d(ctx, WG_CAP);
        Launch {
            label: name,
            shader: &ROPE,
            entry: "rope_qkv",
            defines: launch::dtype_defines(ctx, name, qkv.dtype())?
                .u32("WG", wg)
                .bool("ADJACENT", self.layout == PairLayout::Adjacent),
            params: Params::new()
                .u(t as u32)
                .u(nh as u32)
                .u(nkv as u32)
                .u(dh as u32)
                .u(self.pos0 as u32),
            buffers: vec![
                (1, qkv),
                (2, &table.table),
                (3, q),
                (4, k_cache),
                (5, v_cache),
            ],
            workgroups: ctx.fold_workgroups(name, total.div_ceil(wg) as u64)?,
        }
        .run(ctx)
    }
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    [true, false]
        .into_iter()
        .map(|adjacent| {
            (
                &ROPE,
                "rope_qkv",
                shaders::storage_defines(dtype)
                    .u32("WG", WG_CAP)
                    .bool("ADJACENT", adjacent),
            )
        })
        .collect()
}
