//! Attention tilings: the row kernel's [`AttentionConfig`], the register-blocked kernel's
//! [`TiledConfig`] (heuristics, tuning-table parameters, the autotuner's candidates) and the
//! choice between them ([`AttentionKernel`]).

use ridge_core::{Context, DType, Error, Result};

use super::Attention;

/// Tiling of one launch: query rows and keys per block, invocations per query row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttentionConfig {
    /// Query rows per workgroup.
    pub bq: u32,
    /// Keys per block.
    pub bk: u32,
    /// Invocations per query row.
    pub tpr: u32,
}

impl AttentionConfig {
    /// Bytes of workgroup memory for `head_dim`.
    pub fn workgroup_bytes(&self, head_dim: u32) -> u32 {
        4 * (self.bq * head_dim + 2 * self.bk * head_dim + self.bq * self.bk) + 4
    }

    /// The largest dense tiling that fits the adapter (the autotuner can do better).
    pub fn dense(ctx: &Context, head_dim: u32) -> Option<Self> {
        // An invocation's slice of a row is 4·tpr dims: the last tilings (2 and 1 invocations
        // a row) take the head widths that are multiples of 8 and 4 but not of 16.
        [
            (64, 32, 4),
            (32, 32, 8),
            (32, 16, 8),
            (16, 16, 8),
            (16, 8, 8),
            (8, 8, 8),
            (8, 8, 4),
            (16, 16, 2),
            (8, 8, 2),
            (16, 16, 1),
            (8, 8, 1),
        ]
        .into_iter()
        .map(|(bq, bk, tpr)| AttentionConfig { bq, bk, tpr })
        .find(|c| c.fits(ctx, head_dim))
    }

    /// The tiling for a block-sparse layout of `block`-token blocks: BQ = BK = block.
    pub fn sparse(ctx: &Context, head_dim: u32, block: u32) -> Option<Self> {
        [16, 8, 4, 2, 1]
            .into_iter()
            .map(|tpr| AttentionConfig {
                bq: block,
                bk: block,
                tpr,
            })
            .find(|c| c.fits(ctx, head_dim))
    }

    fn fits(&self, ctx: &Context, head_dim: u32) -> bool {
        let l = ctx.limits();
        let threads = self.bq * self.tpr;
        self.bk.is_multiple_of(self.tpr)
            && head_dim.is_multiple_of(4 * self.tpr)
            && threads <= l.max_compute_invocations_per_workgroup
            && threads <= l.max_compute_workgroup_size_x
            && self.workgroup_bytes(head_dim) <= l.max_compute_workgroup_storage_size
    }
}

/// Tiling of the register-blocked kernel (`shaders/attention_tiled.wgsl`): `bq` query rows
/// and `bkv` keys per tile, (bkv/4) × (bq/4) invocations each owning 4 rows × 4 keys of the
/// scores and 4 rows × head_dim/bkv·4 output dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TiledConfig {
    /// Query rows per workgroup.
    pub bq: u32,
    /// Keys per tile.
    pub bkv: u32,
}

impl TiledConfig {
    /// Invocations per workgroup.
    pub fn invocations(&self) -> u32 {
        (self.bq / 4) * (self.bkv / 4)
    }

    /// Bytes of workgroup memory for `head_dim`: Qᵀ, Kᵀ, V, P and the row exchange (f32).
    pub fn workgroup_bytes(&self, head_dim: u32) -> u32 {
        let threads = (self.bq / 4) * (self.bkv / 4);
        4 * (head_dim * self.bq + 2 * head_dim * self.bkv + self.bkv * self.bq + 4 * threads) + 4
    }

    /// 64 query rows × 32 keys where it fits (head widths 32 and 64), else 32 × 32. Where
    /// one tile of 128 rows holds a whole sequence (`seq` ≤ 128) and `heads` (batch × heads)
    /// still make 256 workgroups or more, 128 × 32 first: each head's K and V are then staged
    /// once instead of once per query tile. Measured on the H200 (`benches/attention.rs
    /// --minilm`, benches/NOTES.md run 51), MiniLM's batch 32 × 128 tokens, 12 heads of 32:
    /// 0.0666 → 0.0570 ms f32, 0.0654 → 0.0560 ms f16 (128 × 32 does not fit heads of 64).
    pub fn dense(ctx: &Context, head_dim: u32, seq: usize, heads: usize) -> Option<Self> {
        let whole = seq <= 128 && heads >= 256;
        [(128, 32), (64, 32), (32, 32)]
            .into_iter()
            .skip(usize::from(!whole))
            .map(|(bq, bkv)| TiledConfig { bq, bkv })
            .find(|c| c.fits(ctx, head_dim))
    }

    /// Every tiling the autotuner tries for dense attention over heads of `head_dim`: 16–128
    /// query rows, 16 or 32 keys, those that fit the adapter.
    pub fn candidates(ctx: &Context, head_dim: u32) -> Vec<Self> {
        [
            (128, 32),
            (64, 32),
            (32, 32),
            (16, 32),
            (128, 16),
            (64, 16),
            (32, 16),
        ]
        .into_iter()
        .map(|(bq, bkv)| TiledConfig { bq, bkv })
        .filter(|c| c.fits(ctx, head_dim))
        .collect()
    }

    /// The tuning-table form: `BQ`, `BKV`.
    pub fn to_params(&self) -> ridge_core::VariantParams {
        [("BQ".to_string(), self.bq), ("BKV".to_string(), self.bkv)]
            .into_iter()
            .collect()
    }

    /// From the tuning-table form; `None` when a key is missing.
    pub fn from_params(p: &ridge_core::VariantParams) -> Option<Self> {
        Some(TiledConfig {
            bq: *p.get("BQ")?,
            bkv: *p.get("BKV")?,
        })
    }

    /// Dense attention's tiling from the adapter's tuning table (op `attention`, shape
    /// `[batch × heads, seq, head_dim]`), where it has one that fits; else `None`.
    pub(super) fn tuned(ctx: &Context, att: &Attention, dtype: DType) -> Option<Self> {
        let shape = [att.batch * att.heads, att.seq, att.head_dim];
        ctx.tuned("attention", &shape, dtype)
            .and_then(|p| Self::from_params(&p))
            .filter(|c| c.fits(ctx, att.head_dim as u32))
    }

    /// Tiles that divide the block: dense attention's 64 × 32 where the block is a multiple
    /// of 64 and it fits, else 32 × 32 where the block is a multiple of 32, else one tile per
    /// block. A block of 64 is then two key tiles (and, at 32 × 32, two query tiles): on the
    /// H200 BigBird blocks of 32 ran at 7.8 TFLOP/s, dense 64 × 32 tiles at 16.7.
    pub fn sparse(ctx: &Context, head_dim: u32, block: u32) -> Option<Self> {
        [(64, 32), (32, 32), (block, block)]
            .into_iter()
            .filter(|&(bq, bkv)| block.is_multiple_of(bq) && block.is_multiple_of(bkv))
            .map(|(bq, bkv)| TiledConfig { bq, bkv })
            .find(|c| c.fits(ctx, head_dim))
    }

    /// `self` where it fits the adapter, the head width and, for block-sparse attention, the
    /// `block` (a multiple of both tile sides); else [`Error::InvalidArgument`].
    pub(super) fn checked(
        self,
        ctx: &Context,
        head_dim: u32,
        block: Option<u32>,
        op: &str,
    ) -> Result<Self> {
        let divides = block.is_none_or(|b| b.is_multiple_of(self.bq) && b.is_multiple_of(self.bkv));
        if divides && self.fits(ctx, head_dim) {
            return Ok(self);
        }
        Err(Error::invalid(
            op,
            format!(
                "tiling {} × {} does not fit head_dim {head_dim}{} on this adapter",
                self.bq,
                self.bkv,
                block.map_or(String::new(), |b| format!(" and blocks of {b}"))
            ),
        ))
    }

    /// Whether the tiling fits the adapter's limits and `head_dim`: sides multiples of 4,
    /// `head_dim` one or two key tiles wide, the staged operands spread evenly over the
    /// invocations, eight storage bindings.
    pub fn fits(&self, ctx: &Context, head_dim: u32) -> bool {
        let l = ctx.limits();
        let (x, y) = (self.bkv / 4, self.bq / 4);
        // At most two output quads per key quad: 32 accumulators per invocation. Eight
        // storage bindings: Q, K, V, lengths, work list, block columns, O, partial outputs.
        l.max_storage_buffers_per_shader_stage >= 8
            && self.bq.is_multiple_of(4)
            && self.bkv.is_multiple_of(4)
            && x > 0
            && y > 0
            && head_dim.is_multiple_of(self.bkv)
            && head_dim / self.bkv <= 2
            && x <= l.max_compute_workgroup_size_x
            && y <= l.max_compute_workgroup_size_y
            // Checked: a tuning table's entry may hold any numbers.
            && x.checked_mul(y).is_some_and(|xy| {
                xy <= l.max_compute_invocations_per_workgroup
                    && (self.bkv * head_dim / 4).is_multiple_of(xy)
                    && self.bq.checked_mul(head_dim).is_some_and(|q| (q / 4).is_multiple_of(xy))
            })
            && self.workgroup_bytes(head_dim) <= l.max_compute_workgroup_storage_size
    }
}

/// The kernel an attention launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionKernel {
    /// Register-blocked tiles.
    Tiled(TiledConfig),
    /// A few invocations per query row.
    Rows(AttentionConfig),
}

impl AttentionKernel {
    /// The register-blocked kernel where it fits, else the row kernel, for `seq` tokens and
    /// `heads` (batch × heads) of dense attention ([`TiledConfig::dense`]); `None` when
    /// neither fits the adapter's workgroup limits.
    pub fn choose(
        ctx: &Context,
        head_dim: u32,
        block: Option<u32>,
        seq: usize,
        heads: usize,
    ) -> Option<Self> {
        let tiled = match block {
            Some(b) => TiledConfig::sparse(ctx, head_dim, b),
            None => TiledConfig::dense(ctx, head_dim, seq, heads),
        };
        tiled.map(AttentionKernel::Tiled).or_else(|| {
            match block {
                Some(b) => AttentionConfig::sparse(ctx, head_dim, b),
                None => AttentionConfig::dense(ctx, head_dim),
            }
            .map(AttentionKernel::Rows)
        })
    }

    /// Query rows and keys per tile.
    pub(super) fn tile(&self) -> (u32, u32) {
        match self {
            AttentionKernel::Tiled(c) => (c.bq, c.bkv),
            AttentionKernel::Rows(c) => (c.bq, c.bk),
        }
    }
}
