//! Fused multi-head attention, dense or BigBird block-sparse: register-blocked tiles
//! (`shaders/attention_tiled.wgsl`) where they fit the adapter and the head width (≤ 64; for
//! sparse, blocks that are multiples of 32, or the head width or half of it), else one query
//! row per few invocations (`shaders/attention.wgsl`). The tiled kernel walks work items
//! ([`SplitPlan`]): rows much longer than the others (BigBird's global rows) and dense
//! launches too small to fill the GPU are cut, and a merge pass combines the pieces
//! (split-KV).
//!
//! `O = softmax(scale · Q·Kᵀ + mask) · V` per (batch, head), n queries and n keys of width
//! `head_dim`. Q, K, V and O are strided views ([`HeadLayout`]): `[B, H, S, D]`, `[B, S, H, D]`
//! or the packed `[B, S, 3, H, D]` output of a fused QKV projection, read in place. Masks:
//! per-batch `lengths` (keys at or after it are padding), `causal`, and for block-sparse a
//! [`BlockLayout`]. A query whose keys are all masked gets zeros.

use std::borrow::Cow;

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;
use ridge_model::sparsity::BlockLayout;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, ATTENTION, ATTENTION_TILED, Variant};

/// Where (batch, position, head) rows live in a tensor, in elements; head dims contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadLayout {
    /// Element offset of (0, 0, 0).
    pub offset: usize,
    /// Elements between batches.
    pub batch_stride: usize,
    /// Elements between positions.
    pub seq_stride: usize,
    /// Elements between heads.
    pub head_stride: usize,
}

impl HeadLayout {
    /// Contiguous `[batch, heads, seq, head_dim]`.
    pub fn bhsd(heads: usize, seq: usize, head_dim: usize) -> Self {
        Self {
            offset: 0,
            batch_stride: heads * seq * head_dim,
            seq_stride: head_dim,
            head_stride: seq * head_dim,
        }
    }
    /// Contiguous `[batch, seq, heads, head_dim]` (a `[tokens, hidden]` activation).
    pub fn bshd(seq: usize, heads: usize, head_dim: usize) -> Self {
        Self {
            offset: 0,
            batch_stride: seq * heads * head_dim,
            seq_stride: heads * head_dim,
            head_stride: head_dim,
        }
    }
    /// Part `which` (0 = Q, 1 = K, 2 = V) of a packed `[batch, seq, 3, heads, head_dim]` tensor.
    pub fn packed_qkv(which: usize, seq: usize, heads: usize, head_dim: usize) -> Self {
        let hd = heads * head_dim;
        Self {
            offset: which * hd,
            batch_stride: seq * 3 * hd,
            seq_stride: 3 * hd,
            head_stride: head_dim,
        }
    }
    fn index(&self, b: usize, s: usize, h: usize) -> usize {
        self.offset + b * self.batch_stride + s * self.seq_stride + h * self.head_stride
    }
    fn words(&self) -> [usize; 4] {
        [
            self.offset,
            self.batch_stride,
            self.seq_stride,
            self.head_stride,
        ]
    }
}

/// An attention problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attention {
    /// Batch entries.
    pub batch: usize,
    /// Heads.
    pub heads: usize,
    /// Queries and keys per head.
    pub seq: usize,
    /// Width of a head (a multiple of 4, at most 256).
    pub head_dim: usize,
    /// Mask keys after each query.
    pub causal: bool,
    /// Multiplies Q·Kᵀ; 1/√head_dim for standard attention (Vaswani et al., 2017).
    pub scale: f32,
    /// Layout of Q.
    pub q: HeadLayout,
    /// Layout of K.
    pub k: HeadLayout,
    /// Layout of V.
    pub v: HeadLayout,
    /// Layout of O.
    pub o: HeadLayout,
    /// Dense attention on the register-blocked kernel: into how many work items each query
    /// block's key tiles are cut ([`SplitPlan`]): more, shorter workgroups where a launch
    /// has too few to fill the GPU. `None`: Ridge's choice ([`Attention::default_kv_splits`]).
    pub kv_splits: Option<usize>,
    /// The register-blocked kernel's tiling; `None`: for dense attention the adapter's tuning
    /// table's (op `attention`, shape `[batch × heads, seq, head_dim]`) where it has one that
    /// fits, else Ridge's choice ([`TiledConfig::dense`], [`TiledConfig::sparse`]). A tiling
    /// that does not fit the adapter, the head width or the block is refused with
    /// [`Error::InvalidArgument`].
    pub tiling: Option<TiledConfig>,
}

/// How the register-blocked kernel walks its rows (a block-sparse layout's, or dense
/// attention's when [`Attention::kv_splits`] cuts them): each row is cut into work items of at
/// most `max_tiles` key blocks or tiles, so that no workgroup walks a row much longer than the
/// others (BigBird's global rows visit every block: uncut, one workgroup per global
/// row is the critical path of the whole launch, and the time grows with n whatever the
/// density). A row cut into several items writes each item's unnormalised output, row maxima
/// and row sums to a partial slot, and a second pass merges them (split-KV, as in
/// Flash-Decoding: Dao, Haziza, Massa & Sizov, 2023).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitPlan {
    /// Work items `[query block, first col_idx entry, end, slot]`, longest first; slot
    /// `u32::MAX` means the item is its whole row and writes O itself.
    pub items: Vec<[u32; 4]>,
    /// Rows cut into several items: `[query block, first slot, slots, 0]`.
    pub merges: Vec<[u32; 4]>,
    /// Partial slots per (batch, head).
    pub slots: u32,
}

impl SplitPlan {
    /// A block-sparse layout's rows in items of at most `max_tiles` (≥ 1) block-CSR entries;
    /// a longer row is cut into the fewest items of near-equal length.
    pub fn new(layout: &BlockLayout, max_tiles: usize) -> Self {
        let rows = (0..layout.blocks).map(|qb| (layout.row_ptr[qb], layout.row_ptr[qb + 1]));
        Self::from_rows(rows, max_tiles)
    }

    /// Dense attention's rows: query block `qb` walks key tiles `0..tiles(qb)`, cut into
    /// items of at most `max_tiles`.
    pub fn dense(query_blocks: usize, tiles: impl Fn(usize) -> u32, max_tiles: usize) -> Self {
        Self::from_rows((0..query_blocks).map(|qb| (0, tiles(qb))), max_tiles)
    }

    /// Row `qb` covers entries (sparse) or tiles (dense) `start..end`.
    fn from_rows(rows: impl Iterator<Item = (u32, u32)>, max_tiles: usize) -> Self {
        let max_tiles = max_tiles.max(1);
        let (mut items, mut merges, mut slots) = (Vec::new(), Vec::new(), 0u32);
        for (qb, (start, end)) in rows.enumerate() {
            let len = (end - start) as usize;
            let parts = len.div_ceil(max_tiles).max(1);
            if parts == 1 {
                items.push([qb as u32, start, end, u32::MAX]);
                continue;
            }
            merges.push([qb as u32, slots, parts as u32, 0]);
            for i in 0..parts {
                let from = start + (i * len / parts) as u32;
                let to = start + ((i + 1) * len / parts) as u32;
                items.push([qb as u32, from, to, slots]);
                slots += 1;
            }
        }
        // Longest first: they start first and the short ones fill in behind them.
        items.sort_by_key(|it| std::cmp::Reverse(it[2] - it[1]));
        Self {
            items,
            merges,
            slots,
        }
    }

    /// The default cut: items no longer than the mean row (at least 4 blocks, below which
    /// the merge costs more than it balances).
    pub fn default_max_tiles(layout: &BlockLayout) -> usize {
        layout.nnz().div_ceil(layout.blocks.max(1)).max(4)
    }

    /// The plan for query tiles of block / `query_tiles` rows: every item and merge once per
    /// query tile (item query index qb · query_tiles + h), slot s of tile h renumbered
    /// h · slots + s so that each merge's slots stay consecutive.
    pub fn per_query_tile(&self, query_tiles: u32) -> Self {
        let q = query_tiles.max(1);
        let tile = |qb: u32, h: u32| qb * q + h;
        let slot = |s: u32, h: u32| match s {
            u32::MAX => u32::MAX,
            s => h * self.slots + s,
        };
        Self {
            items: (0..q)
                .flat_map(|h| {
                    self.items
                        .iter()
                        .map(move |&[qb, from, to, s]| [tile(qb, h), from, to, slot(s, h)])
                })
                .collect(),
            merges: (0..q)
                .flat_map(|h| {
                    self.merges
                        .iter()
                        .map(move |&[qb, first, n, _]| [tile(qb, h), slot(first, h), n, 0])
                })
                .collect(),
            slots: self.slots * q,
        }
    }

    /// The work list as the kernel reads it (the items, then the merges), uploaded.
    fn upload(&self, ctx: &Context) -> Result<Tensor> {
        let words: Vec<u32> = self
            .items
            .iter()
            .chain(&self.merges)
            .flatten()
            .copied()
            .collect();
        Tensor::from_slice(ctx, &words, &[words.len()])
    }
}

/// A [`BlockLayout`] uploaded for the kernels: its block CSR, and its work list
/// ([`SplitPlan`]) for the register-blocked kernel.
pub struct SparseLayout {
    /// The layout.
    pub layout: BlockLayout,
    /// How the register-blocked kernel cuts its rows.
    pub plan: SplitPlan,
    row_ptr: Tensor,
    col_idx: Tensor,
    work: Tensor,
}

impl SparseLayout {
    /// Uploads `layout` with the default cut ([`SplitPlan::default_max_tiles`]).
    pub fn upload(ctx: &Context, layout: BlockLayout) -> Result<Self> {
        let max_tiles = SplitPlan::default_max_tiles(&layout);
        Self::upload_split(ctx, layout, max_tiles)
    }

    /// Uploads `layout`, cutting rows into work items of at most `max_tiles` key blocks.
    pub fn upload_split(ctx: &Context, layout: BlockLayout, max_tiles: usize) -> Result<Self> {
        let plan = SplitPlan::new(&layout, max_tiles);
        let work = plan.upload(ctx)?;
        let row_ptr = Tensor::from_slice(ctx, &layout.row_ptr, &[layout.row_ptr.len()])?;
        let cols = if layout.col_idx.is_empty() {
            vec![0]
        } else {
            layout.col_idx.clone()
        };
        let col_idx = Tensor::from_slice(ctx, &cols, &[cols.len()])?;
        Ok(Self {
            layout,
            plan,
            row_ptr,
            col_idx,
            work,
        })
    }
}

/// Tiling of one launch: query rows and keys per block, invocations per query row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    fn tuned(ctx: &Context, att: &Attention, dtype: DType) -> Option<Self> {
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
    fn checked(self, ctx: &Context, head_dim: u32, block: Option<u32>, op: &str) -> Result<Self> {
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
            && (self.bkv * head_dim / 4).is_multiple_of(x * y)
            && (self.bq * head_dim / 4).is_multiple_of(x * y)
            && x <= l.max_compute_workgroup_size_x
            && y <= l.max_compute_workgroup_size_y
            && x * y <= l.max_compute_invocations_per_workgroup
            && self.workgroup_bytes(head_dim) <= l.max_compute_workgroup_storage_size
    }
}

/// The kernel an attention launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    fn tile(&self) -> (u32, u32) {
        match self {
            AttentionKernel::Tiled(c) => (c.bq, c.bkv),
            AttentionKernel::Rows(c) => (c.bq, c.bk),
        }
    }
}

impl Attention {
    /// Standard attention over contiguous `[batch, heads, seq, head_dim]` tensors, scale
    /// 1/√head_dim, no causal mask.
    pub fn new(batch: usize, heads: usize, seq: usize, head_dim: usize) -> Self {
        let l = HeadLayout::bhsd(heads, seq, head_dim);
        Self {
            batch,
            heads,
            seq,
            head_dim,
            causal: false,
            scale: 1.0 / (head_dim as f32).sqrt(),
            q: l,
            k: l,
            v: l,
            o: l,
            kv_splits: None,
            tiling: None,
        }
    }

    /// Dense attention's cut when [`Attention::kv_splits`] is `None`, for `query_blocks`
    /// workgroups per (batch, head) walking `key_tiles` tiles each: enough items for 256
    /// workgroups, none shorter than 16 tiles. Measured on the H200 (`benches/attention.rs`,
    /// benches/NOTES.md runs 23–24), 12 heads of 64: n = 1024 (192 workgroups) cut 2 ways
    /// 0.282 → 0.231 ms; n = 512 (96 workgroups of 16 tiles) cut 2 ways 0.079 → 0.088 ms;
    /// from n = 2048 (384 workgroups) on, no cut was fastest; MiniLM's batch 32 × 128 (768
    /// workgroups of 4 tiles) took 30–39 % longer cut 2 ways.
    pub fn default_kv_splits(&self, query_blocks: usize, key_tiles: usize) -> usize {
        let workgroups = (self.batch * self.heads * query_blocks).max(1);
        256usize.div_ceil(workgroups).min(key_tiles / 16).max(1)
    }

    /// Attention reading Q, K and V in place from one packed projection `[batch, seq, 3 ·
    /// heads · head_dim]` (Q | K | V per token) and writing the heads side by side,
    /// `[batch, seq, heads, head_dim]`: what a Transformer layer feeds it, no permutes.
    pub fn packed_qkv(batch: usize, heads: usize, seq: usize, head_dim: usize) -> Self {
        Self {
            q: HeadLayout::packed_qkv(0, seq, heads, head_dim),
            k: HeadLayout::packed_qkv(1, seq, heads, head_dim),
            v: HeadLayout::packed_qkv(2, seq, heads, head_dim),
            o: HeadLayout::bshd(seq, heads, head_dim),
            ..Self::new(batch, heads, seq, head_dim)
        }
    }

    /// Whether Q, K and V can be read four head dims per load: every offset and stride a
    /// multiple of 4 elements (the head width already is).
    fn vec_loads(&self) -> bool {
        [&self.q, &self.k, &self.v]
            .iter()
            .all(|l| l.words().iter().all(|w| w.is_multiple_of(4)))
    }

    /// Query–key pairs computed: n² dense, nnz blocks × block² sparse.
    pub fn pairs(&self, layout: Option<&BlockLayout>) -> f64 {
        match layout {
            Some(l) => l.nnz() as f64 * (l.block * l.block) as f64,
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

    /// The kernel a launch of `dtype` runs, for block-sparse blocks of `block` tokens or
    /// dense (`None`): [`Attention::tiling`] where given, else for dense attention the
    /// adapter's tuning table's tiling where it has one that fits, else Ridge's choice
    /// ([`AttentionKernel::choose`]).
    ///
    /// Errors: [`Error::InvalidArgument`] for a given tiling that does not fit;
    /// [`Error::LimitExceeded`] when no kernel fits the adapter's workgroup memory.
    pub fn kernel(
        &self,
        ctx: &Context,
        dtype: DType,
        block: Option<u32>,
    ) -> Result<AttentionKernel> {
        let name = if block.is_some() {
            "sparse_attention"
        } else {
            "attention"
        };
        let d = self.head_dim as u32;
        if let Some(c) = self.tiling {
            return Ok(AttentionKernel::Tiled(c.checked(ctx, d, block, name)?));
        }
        if block.is_none()
            && let Some(c) = TiledConfig::tuned(ctx, self, dtype)
        {
            return Ok(AttentionKernel::Tiled(c));
        }
        AttentionKernel::choose(ctx, d, block, self.seq, self.batch * self.heads).ok_or_else(|| {
            Error::LimitExceeded {
                what: format!("{name} with head_dim {d}"),
                limit: "maxComputeWorkgroupStorageSize",
                // The smallest tiling there is: one invocation a row of 8.
                requested: AttentionConfig {
                    bq: 8,
                    bk: 8,
                    tpr: 1,
                }
                .workgroup_bytes(d) as u64,
                allowed: ctx.limits().max_compute_workgroup_storage_size as u64,
            }
        })
    }

    /// Runs attention: dense, or block-sparse when `sparse` is given. `lengths` (u32
    /// `[batch]`) masks padded keys; without it every key counts.
    ///
    /// Errors: [`Error::Shape`] when a layout reaches past its tensor or the sparse layout is
    /// for another length; [`Error::InvalidArgument`] for a head width that is not a multiple
    /// of 4 up to 256 or an output aliasing an input; [`Error::LimitExceeded`] when no tiling
    /// fits the adapter's workgroup limits; dtype errors as every op.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        ctx: &Context,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        lengths: Option<&Tensor>,
        sparse: Option<&SparseLayout>,
        o: &Tensor,
    ) -> Result<()> {
        let name = if sparse.is_some() {
            "sparse_attention"
        } else {
            "attention"
        };
        launch::same_dtype(name, o.dtype(), &[q, k, v])?;
        launch::no_alias(name, o, &[q, k, v])?;
        let d = self.head_dim;
        if d == 0 || !d.is_multiple_of(4) || d > 256 {
            return Err(Error::invalid(
                name,
                format!("head_dim {d} must be a multiple of 4 up to 256"),
            ));
        }
        if self.batch == 0 || self.heads == 0 || self.seq == 0 {
            return Ok(());
        }
        for (what, t, l) in [
            ("q", q, &self.q),
            ("k", k, &self.k),
            ("v", v, &self.v),
            ("o", o, &self.o),
        ] {
            let last = l.index(self.batch - 1, self.seq - 1, self.heads - 1) + d;
            if last > t.numel() {
                return Err(Error::shape(
                    name,
                    format!(
                        "{what}'s layout {l:?} reaches element {last}, the tensor holds {}",
                        t.numel()
                    ),
                ));
            }
            launch::fits_u32(name, what, t.numel())?;
        }
        if let Some(len) = lengths {
            len.expect_dtype(name, DType::U32)?;
            len.expect_shape(name, "lengths", &[self.batch])?;
        }
        if let Some(s) = sparse
            && s.layout.seq != self.seq
        {
            return Err(Error::shape(
                name,
                format!(
                    "the block layout is for {} tokens, not {}",
                    s.layout.seq, self.seq
                ),
            ));
        }
        let block = sparse.map(|s| s.layout.block as u32);
        let kernel = self.kernel(ctx, o.dtype(), block)?;
        let (bq, bk) = kernel.tile();
        let q_blocks = self.seq.div_ceil(bq as usize);
        let k_blocks = self.seq.div_ceil(bk as usize);
        // The register-blocked kernel walks work items: a sparse layout's (rows cut to
        // balance the workgroups), or dense rows cut `kv_splits` ways; every other launch
        // has a workgroup per query block.
        let tiled = matches!(kernel, AttentionKernel::Tiled(_));
        // Block-sparse tiles: the block is `query_tiles` tiles of queries and `key_tiles` of
        // keys (1 × 1 but for blocks larger than the tiling).
        let block = sparse.map_or(1, |s| s.layout.block as u32);
        let (query_tiles, key_tiles) = match sparse {
            Some(_) if tiled => (block / bq, block / bk),
            _ => (1, 1),
        };
        // The work list: the layout's own (borrowed: already uploaded), or one built for this
        // launch (owned).
        let work_plan: Option<Cow<'_, SplitPlan>> = match sparse {
            Some(s) if tiled && query_tiles > 1 => {
                Some(Cow::Owned(s.plan.per_query_tile(query_tiles)))
            }
            Some(s) => tiled.then_some(Cow::Borrowed(&s.plan)),
            None => {
                let splits = self
                    .kv_splits
                    .unwrap_or_else(|| self.default_kv_splits(q_blocks, k_blocks))
                    .clamp(1, k_blocks);
                // With a causal mask, query block qb needs only the key tiles up to its last
                // row.
                let tiles = |qb: usize| match self.causal {
                    true => (((qb + 1) * bq as usize).min(self.seq)).div_ceil(bk as usize),
                    false => k_blocks,
                } as u32;
                (tiled && splits > 1).then(|| {
                    Cow::Owned(SplitPlan::dense(q_blocks, tiles, k_blocks.div_ceil(splits)))
                })
            }
        };
        let plan = work_plan.as_deref();
        let units = plan.map_or(q_blocks, |p| p.items.len());
        let (slots, merges) = plan.map_or((0, 0), |p| (p.slots, p.merges.len()));
        let mut words: Vec<u32> = vec![
            self.batch as u32,
            self.heads as u32,
            self.seq as u32,
            units as u32,
        ];
        for l in [&self.q, &self.k, &self.v, &self.o] {
            words.extend(l.words().iter().map(|&x| x as u32));
        }
        let params = Params::new()
            .words(&words)
            .f(self.scale)
            .u(k_blocks as u32)
            .u(slots)
            .u(merges as u32);
        launch::float_dtype(ctx, name, o.dtype())?;
        // Row maxima by subgroup shuffles where a row's bk/4 invocations fit in one subgroup.
        let row_lanes = bk / 4;
        let subgroup_rows = ctx.has_subgroups()
            && row_lanes.is_power_of_two()
            && ctx.info().subgroup_min_size >= row_lanes;
        let row_sync = RowSync {
            shuffles: subgroup_rows,
            barrier: subgroup_rows && ctx.has_subgroup_barrier(),
        };
        let spec = Specialisation {
            causal: self.causal,
            sparse: sparse.is_some(),
            items: plan.is_some(),
            vec_loads: self.vec_loads(),
            key_tiles,
            row_sync,
        };
        let (dtype, head_dim) = (o.dtype(), d as u32);
        let shader = kernel_shader(&kernel);
        let defines = launch::memoized(name, &(dtype, head_dim, kernel, spec), |k| {
            kernel_defines(shaders::storage_defines(k.0), k.1, &k.2, k.3).1
        });
        let full_lengths;
        let lengths = match lengths {
            Some(l) => l,
            None => {
                full_lengths =
                    Tensor::from_slice(ctx, &vec![self.seq as u32; self.batch], &[self.batch])?;
                &full_lengths
            }
        };
        let placeholder = ctx.placeholder();
        // Binding 5: the work list (the layout's upload when the plan is its own), or the
        // row kernel's block-CSR row pointers.
        let built_work = match &work_plan {
            Some(Cow::Owned(p)) => Some(p.upload(ctx)?),
            _ => None,
        };
        let rows_or_work = match (sparse, &built_work) {
            (_, Some(w)) => w,
            (Some(s), None) if tiled => &s.work,
            (Some(s), None) => &s.row_ptr,
            (None, None) => placeholder,
        };
        let col_idx = sparse.map_or(placeholder, |s| &s.col_idx);
        let mut buffers = vec![
            (1, q),
            (2, k),
            (3, v),
            (4, lengths),
            (5, rows_or_work),
            (6, col_idx),
            (7, o),
        ];
        // Partial outputs: (batch, head, slot, query row) × (head_dim + 4) f32. Written, so
        // never the read-only placeholder bound above.
        let bh = self.batch * self.heads;
        let partial = if tiled {
            let rows = bh * slots as usize * bq as usize;
            let partial = Tensor::empty(ctx, &[rows.max(1), d + 4], DType::F32)?;
            launch::fits_u32(name, "partial outputs", partial.numel())?;
            Some(partial)
        } else {
            None
        };
        if let Some(t) = &partial {
            buffers.push((8, t));
        }
        let merge_invocations = bh * merges * bq as usize * d / 4;
        launch::fits_u32(name, "merged outputs", merge_invocations)?;
        Launch {
            label: name,
            shader,
            entry: "attention",
            defines: defines.clone(),
            params: params.clone(),
            buffers,
            workgroups: ctx.fold_workgroups(name, (bh * units) as u64)?,
        }
        .run(ctx)?;
        match &partial {
            Some(partial) if merges > 0 => Launch {
                label: name,
                shader,
                entry: "merge",
                defines,
                params,
                buffers: vec![(5, rows_or_work), (7, o), (8, partial)],
                workgroups: ctx.fold_workgroups(name, merge_invocations.div_ceil(64) as u64)?,
            }
            .run(ctx),
            _ => Ok(()),
        }
    }
}

/// The generated output accumulators: DH/TPR dims per invocation as vec4s.
fn accumulators(head_dim: u32, tpr: u32) -> [(&'static str, String); 4] {
    let quads = head_dim / tpr / 4;
    let (mut declare, mut rescale, mut update, mut store) =
        (String::new(), String::new(), String::new(), String::new());
    for i in 0..quads {
        declare.push_str(&format!("var o{i} = vec4<f32>();\n"));
        rescale.push_str(&format!("o{i} *= corr;\n"));
        update.push_str(&format!("o{i} += pj * v_s[vb + {i}u];\n"));
        store.push_str(&format!("let y{i} = o{i} * inv;\n"));
        for (e, comp) in ["x", "y", "z", "w"].iter().enumerate() {
            store.push_str(&format!(
                "o[ob + {}u] = T(y{i}.{comp});\n",
                i * 4 + e as u32
            ));
        }
    }
    [
        ("DECLARE", declare),
        ("RESCALE", rescale),
        ("UPDATE", update),
        ("STORE", store),
    ]
}

/// The generated parts of the register-blocked kernel: 4 rows × `head_dim/bkv` vec4 output
/// accumulators (declared, rescaled, updated by P·V for one key, stored) and the pipeline
/// registers of the next key tile (`bkv · head_dim/4` vec4 of K and of V spread over the
/// invocations: declared, loaded, staged).
fn tiled_blocks(head_dim: u32, c: &TiledConfig) -> [(&'static str, String); 9] {
    let quads = head_dim / c.bkv;
    let per = c.bkv * (head_dim / 4) / c.invocations();
    let comps = ["x", "y", "z", "w"];
    let (mut q_load, mut q_stage) = (String::new(), String::new());
    let q_per = c.bq * (head_dim / 4) / c.invocations();
    for e in 0..q_per {
        q_load.push_str(&format!(
            "let qi{e} = tid + {e}u * THREADS;\n\
             var qv{e} = vec4<f32>();\n\
             if q0 + qi{e} % BQ < p.seq {{ qv{e} = load_q(at(p.q, b, q0 + qi{e} % BQ, h) + (qi{e} / BQ) * 4u); }}\n"
        ));
    }
    for e in 0..q_per {
        q_stage.push_str(&format!(
            "{{\nlet row = qi{e} % BQ;\nlet dq = qi{e} / BQ;\nlet e = qv{e} * (p.scale * LOG2E);\n"
        ));
        for (l, comp) in comps.iter().enumerate() {
            q_stage.push_str(&format!(
                "q_t[(dq * 4u + {l}u) * RQ + row / 4u][row % 4u] = e.{comp};\n"
            ));
        }
        q_stage.push_str("}\n");
    }
    let (mut declare, mut rescale, mut pv, mut store) =
        (String::new(), String::new(), String::new(), String::new());
    let (mut load, mut stage, mut partial) = (String::new(), String::new(), String::new());
    for e in 0..per {
        declare.push_str(&format!(
            "var kr{e} = vec4<f32>();\nvar vr{e} = vec4<f32>();\n"
        ));
        load.push_str(&format!(
            "{{
    let i = tid + {e}u * THREADS;
    let kk = kn * BKV + i % BKV;
    kr{e} = vec4<f32>();
    if kk < len {{ kr{e} = load_k(at(p.k, b, kk, h) + (i / BKV) * 4u); }}
    let vk = kn * BKV + i / DQ4;
    vr{e} = vec4<f32>();
    if vk < len {{ vr{e} = load_v(at(p.v, b, vk, h) + (i % DQ4) * 4u); }}
}}
"
        ));
        stage.push_str(&format!(
            "{{\nlet i = tid + {e}u * THREADS;\nlet key = i % BKV;\nlet dq = i / BKV;\n"
        ));
        for (l, comp) in comps.iter().enumerate() {
            stage.push_str(&format!(
                "k_t[(dq * 4u + {l}u) * KQ + key / 4u][key % 4u] = kr{e}.{comp};\n"
            ));
        }
        stage.push_str(&format!("v_s[i] = vr{e};\n}}\n"));
    }
    for j in 0..quads {
        pv.push_str(&format!("let v{j} = v_s[vb + {j}u * KQ];\n"));
    }
    for (r, c) in comps.iter().enumerate() {
        store.push_str(&format!(
            "if rows.{c} < p.seq {{\nlet ob = at(p.o, b, rows.{c}, h);\n"
        ));
        partial.push_str(&format!(
            "if rows.{c} < p.seq {{\nlet pr = slot_row(bh, item.w, 4u * y + {r}u);\n\
             if x == 0u {{ partial[pr + DQ4] = vec4<f32>(m.{c}, total.{c}, 0.0, 0.0); }}\n"
        ));
        for j in 0..quads {
            declare.push_str(&format!("var o{r}_{j} = vec4<f32>();\n"));
            rescale.push_str(&format!("o{r}_{j} *= corr.{c};\n"));
            pv.push_str(&format!(
                "o{r}_{j} = fma(vec4<f32>(pa.{c}), v{j}, o{r}_{j});\n"
            ));
            store.push_str(&format!(
                "let y{j} = o{r}_{j} * inv.{c};\nlet d{j} = ob + (x + {j}u * KQ) * 4u;\n"
            ));
            for (e, ce) in comps.iter().enumerate() {
                store.push_str(&format!("o[d{j} + {e}u] = T(y{j}.{ce});\n"));
            }
            partial.push_str(&format!("partial[pr + x + {j}u * KQ] = o{r}_{j};\n"));
        }
        store.push_str("}\n");
        partial.push_str("}\n");
    }
    [
        ("DECLARE", declare),
        ("RESCALE", rescale),
        ("PV", pv),
        ("STORE", store),
        ("KV_LOAD", load),
        ("KV_STAGE", stage),
        ("PARTIAL", partial),
        ("Q_LOAD", q_load),
        ("Q_STAGE", q_stage),
    ]
}

/// The interface both kernels share (`shaders/include/attention_io.wgsl`) and the loads of
/// four head dims of Q, K and V: one vec4 load each with `vec_loads`, else four scalar ones.
fn io(vec_loads: bool) -> String {
    let (elem, load): (&str, fn(&str) -> String) = if vec_loads {
        ("vec4<T>", |n| {
            format!("fn load_{n}(i: u32) -> vec4<f32> {{ return vec4<f32>({n}[i / 4u]); }}\n")
        })
    } else {
        ("T", |n| {
            format!(
                "fn load_{n}(i: u32) -> vec4<f32> {{ return vec4<f32>(f32({n}[i]), \
                 f32({n}[i + 1u]), f32({n}[i + 2u]), f32({n}[i + 3u])); }}\n"
            )
        })
    };
    let loads: String = ["q", "k", "v"].into_iter().map(load).collect();
    format!("alias QKV = {elem};\n{}{loads}", shaders::ATTENTION_IO)
}

/// The shader file `kernel` runs.
fn kernel_shader(kernel: &AttentionKernel) -> &'static ridge_core::ShaderSource {
    match kernel {
        AttentionKernel::Rows(_) => &ATTENTION,
        AttentionKernel::Tiled(_) => &ATTENTION_TILED,
    }
}

/// The shader and defines of `kernel` (with the shared interface at its `//@IO` line).
fn kernel_defines(
    d: ridge_core::Defines,
    head_dim: u32,
    kernel: &AttentionKernel,
    s: Specialisation,
) -> (&'static ridge_core::ShaderSource, ridge_core::Defines) {
    let Specialisation {
        causal,
        sparse,
        items,
        vec_loads,
        key_tiles,
        row_sync,
    } = s;
    let d = d.block("IO", io(vec_loads));
    let shader = kernel_shader(kernel);
    match kernel {
        AttentionKernel::Rows(c) => (shader, attention_defines(d, head_dim, c, causal, sparse)),
        AttentionKernel::Tiled(c) => {
            let d = tiled_blocks(head_dim, c)
                .into_iter()
                .fold(d, |d, (name, code)| d.block(name, code))
                .u32("DH", head_dim)
                .u32("BQ", c.bq)
                .u32("BKV", c.bkv)
                .bool("CAUSAL", causal)
                .bool("SPARSE", sparse)
                .u32("SUB", key_tiles)
                .bool("ITEMS", items)
                .block("ROW_MAX", row_max(row_sync.shuffles))
                .block(
                    "ROW_SYNC",
                    if row_sync.barrier {
                        "subgroupBarrier();"
                    } else {
                        "workgroupBarrier();"
                    }
                    .into(),
                );
            (shader, d)
        }
    }
}

/// What one launch's shader is specialised for.
#[derive(Clone, Copy, Debug)]
struct Specialisation {
    /// Keys after each query masked.
    causal: bool,
    /// A block-sparse layout.
    sparse: bool,
    /// A work list (the tiled kernel: always when sparse; dense rows cut).
    items: bool,
    /// Q, K and V read four head dims per load.
    vec_loads: bool,
    /// Key tiles per block-sparse block (the tiled kernel's SUB; 1 when dense).
    key_tiles: u32,
    /// How a row's invocations exchange values (the tiled kernel).
    row_sync: RowSync,
}

/// How the invocations of one query-row quad of `shaders/attention_tiled.wgsl` (neighbouring
/// lanes) exchange values: subgroup shuffles for the row maxima, a subgroup barrier before
/// reading each other's probabilities; or workgroup memory and barriers.
#[derive(Clone, Copy, Debug)]
struct RowSync {
    shuffles: bool,
    barrier: bool,
}

/// The row maxima of `shaders/attention_tiled.wgsl` (its ROW_MAX block): subgroup shuffles
/// across the row's KQ neighbouring lanes (log2 KQ steps), or through workgroup memory
/// behind a barrier. Subgroup builtins must not appear in a shader for an adapter without
/// them, hence a generated block rather than a constant branch.
fn row_max(subgroups: bool) -> String {
    if subgroups {
        "var across = mine;
for (var lane = 1u; lane < KQ; lane <<= 1u) {
    across = max(across, subgroupShuffleXor(across, lane));
}
mx = max(mx, across);"
            .into()
    } else {
        "red[y * KQ + x] = mine;
workgroupBarrier();
for (var i = 0u; i < KQ; i++) { mx = max(mx, red[y * KQ + i]); }"
            .into()
    }
}

fn attention_defines(
    d: ridge_core::Defines,
    head_dim: u32,
    c: &AttentionConfig,
    causal: bool,
    sparse: bool,
) -> ridge_core::Defines {
    let mut d = d
        .u32("DH", head_dim)
        .u32("BQ", c.bq)
        .u32("BK", c.bk)
        .u32("TPR", c.tpr)
        .bool("CAUSAL", causal)
        .bool("SPARSE", sparse);
    for (name, code) in accumulators(head_dim, c.tpr) {
        d = d.block(name, code);
    }
    d
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    // (head_dim, causal, sparse, items, bq, bkv, subgroups)
    for (head_dim, causal, sparse, items, bq, bkv, subgroups) in [
        (32, false, false, false, 64, 32, false),
        (64, true, false, true, 64, 32, true),
        (64, false, true, true, 32, 32, true),
        (64, true, true, true, 64, 32, true),
        (64, true, true, true, 32, 32, false),
    ] {
        let kernel = AttentionKernel::Tiled(TiledConfig { bq, bkv });
        let (shader, d) = kernel_defines(
            shaders::storage_defines(dtype),
            head_dim,
            &kernel,
            Specialisation {
                causal,
                sparse,
                items,
                vec_loads: !causal,
                key_tiles: if sparse { 2 } else { 1 },
                row_sync: RowSync {
                    shuffles: subgroups,
                    barrier: subgroups,
                },
            },
        );
        if items {
            v.push((shader, "merge", d.clone()));
        }
        v.push((shader, "attention", d));
    }
    for (head_dim, causal, sparse) in [(32, false, false), (64, true, false), (128, false, true)] {
        let c = AttentionConfig {
            bq: 16,
            bk: 16,
            tpr: 4,
        };
        let (shader, d) = kernel_defines(
            shaders::storage_defines(dtype),
            head_dim,
            &AttentionKernel::Rows(c),
            Specialisation {
                causal,
                sparse,
                items: false,
                vec_loads: causal,
                key_tiles: 1,
                row_sync: RowSync {
                    shuffles: false,
                    barrier: false,
                },
            },
        );
        v.push((shader, "attention", d));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use ridge_model::sparsity::BigBird;

    /// Every block-CSR entry in exactly one item of its own row; merges cover the cut rows'
    /// slots, each slot once.
    fn covers(layout: &BlockLayout, plan: &SplitPlan, max_tiles: usize) {
        let mut seen = vec![0u32; layout.nnz()];
        let mut slot_uses = vec![0u32; plan.slots as usize];
        for &[qb, from, to, slot] in &plan.items {
            let qb = qb as usize;
            assert!(layout.row_ptr[qb] <= from && to <= layout.row_ptr[qb + 1]);
            assert!((to - from) as usize <= max_tiles.max(1));
            (from..to).for_each(|e| seen[e as usize] += 1);
            if slot != u32::MAX {
                slot_uses[slot as usize] += 1;
                let m = plan.merges.iter().find(|m| m[0] as usize == qb).unwrap();
                assert!(m[1] <= slot && slot < m[1] + m[2]);
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        assert!(slot_uses.iter().all(|&n| n == 1));
        let lengths: Vec<u32> = plan.items.iter().map(|it| it[2] - it[1]).collect();
        assert!(lengths.windows(2).all(|w| w[0] >= w[1]), "longest first");
    }

    #[test]
    fn dense_cuts_only_launches_too_small_to_fill_the_gpu() {
        let att = |batch, seq| Attention::new(batch, 12, seq, 64);
        // (batch, n) → cut, at 64 query rows and 32 keys per tile.
        for (batch, n, want) in [
            (1, 1024, 2),
            (1, 512, 1),
            (1, 2048, 1),
            (1, 128, 1),
            (32, 128, 1),
        ] {
            let a = att(batch, n);
            assert_eq!(
                a.default_kv_splits(n.div_ceil(64), n.div_ceil(32)),
                want,
                "{batch} × {n}"
            );
        }
    }

    #[test]
    fn split_plan_cuts_only_the_long_rows() {
        let p = BigBird {
            block: 32,
            global: 2,
            window: 1,
            random: 3,
            seed: 1,
        };
        let layout = BlockLayout::bigbird(4096, p);
        let max_tiles = SplitPlan::default_max_tiles(&layout);
        let plan = SplitPlan::new(&layout, max_tiles);
        covers(&layout, &plan, max_tiles);
        // The two global rows (128 blocks each) are cut; the others are not.
        assert_eq!(plan.merges.len(), 2);
        assert!(
            plan.items
                .iter()
                .all(|it| it[2] - it[1] <= max_tiles as u32)
        );
        for max_tiles in [0, 1, 3, 1000] {
            let plan = SplitPlan::new(&layout, max_tiles);
            covers(&layout, &plan, max_tiles);
        }
        // An empty row (no blocks) is still one item: its rows are written as zeros.
        let empty = BlockLayout {
            block: 4,
            seq: 8,
            blocks: 2,
            row_ptr: vec![0, 0, 2],
            col_idx: vec![0, 1],
        };
        let plan = SplitPlan::new(&empty, 1);
        assert_eq!(plan.items.len(), 3);
        assert!(plan.items.contains(&[0, 0, 0, u32::MAX]));
        assert_eq!(plan.merges, vec![[1, 0, 2, 0]]);
        // Two query tiles per block: every item twice, slots renumbered per tile.
        let halves = plan.per_query_tile(2);
        assert_eq!(halves.slots, 4);
        assert_eq!(halves.items.len(), 6);
        assert!(halves.items.contains(&[0, 0, 0, u32::MAX]));
        assert!(halves.items.contains(&[1, 0, 0, u32::MAX]));
        assert!(halves.items.contains(&[3, 1, 2, 3]));
        assert_eq!(halves.merges, vec![[2, 0, 2, 0], [3, 2, 2, 0]]);
        assert_eq!(plan.per_query_tile(1), plan);
    }
}
