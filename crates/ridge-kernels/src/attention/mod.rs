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
//! [`ridge_model::sparsity::BlockLayout`]. A query whose keys are all masked gets zeros.
//!
//! This module is the problem ([`Attention`], [`HeadLayout`]) and its launcher. The work lists
//! are in `split.rs`, the tilings and the kernel choice in `tiling.rs`, the f64 reference,
//! error bound and cost in `reference.rs`, the shader specialisation in `codegen.rs`.

mod codegen;
mod reference;
mod split;
mod tiling;

pub(crate) use codegen::variants;
use codegen::{RowSync, Specialisation, kernel_defines, kernel_shader};
pub use split::{SparseLayout, SplitPlan};
pub use tiling::{AttentionConfig, AttentionKernel, TiledConfig};

use std::borrow::Cow;

use ridge_core::{Context, DType, Error, Result, Tensor};

use crate::launch::{self, Launch, Params};
use crate::shaders;

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

    /// A decoder prompt's causal attention with grouped-query heads, straight over its KV
    /// cache: Q and O `[tokens, kv_heads · g, head_dim]`, K and V `[capacity, kv_heads,
    /// head_dim]` (only the first `tokens` rows read). The `kv_heads` KV heads are the batch
    /// and the `g` query heads of each the heads, K and V read with a head stride of 0, so
    /// every query head of a group reads its group's one K and V row (Ainslie et al., "GQA",
    /// 2023). One dispatch: a prompt's query tiles fill the GPU without cutting key tiles
    /// (no split pass).
    pub fn grouped_causal(kv_heads: usize, g: usize, tokens: usize, head_dim: usize) -> Self {
        let q = HeadLayout {
            offset: 0,
            batch_stride: g * head_dim,
            seq_stride: kv_heads * g * head_dim,
            head_stride: head_dim,
        };
        let kv = HeadLayout {
            offset: 0,
            batch_stride: head_dim,
            seq_stride: kv_heads * head_dim,
            head_stride: 0,
        };
        Self {
            causal: true,
            q,
            k: kv,
            v: kv,
            o: q,
            kv_splits: Some(1),
            ..Self::new(kv_heads, g, tokens, head_dim)
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
        self.check(name, [q, k, v, o], lengths, sparse)?;
        if self.batch == 0 || self.heads == 0 || self.seq == 0 {
            return Ok(());
        }
        launch::float_dtype(ctx, name, o.dtype())?;
        let kernel = self.kernel(ctx, o.dtype(), sparse.map(|s| s.layout.block as u32))?;
        let (bq, bk) = kernel.tile();
        let k_blocks = self.seq.div_ceil(bk as usize);
        let (work_plan, key_tiles) = self.work_plan(kernel, sparse);
        let plan = work_plan.as_deref();
        let units = plan.map_or(self.seq.div_ceil(bq as usize), |p| p.items.len());
        let (slots, merges) = plan.map_or((0, 0), |p| (p.slots, p.merges.len()));
        let params = self.params(units, k_blocks, slots, merges);
        let spec = Specialisation {
            causal: self.causal,
            sparse: sparse.is_some(),
            items: plan.is_some(),
            vec_loads: self.vec_loads(),
            key_tiles,
            row_sync: RowSync::for_rows(ctx, bk / 4),
        };
        let (dtype, head_dim) = (o.dtype(), self.head_dim as u32);
        let shader = kernel_shader(&kernel);
        let defines = launch::memoized(name, &(dtype, head_dim, kernel, spec), |k| {
            kernel_defines(shaders::storage_defines(k.0), k.1, &k.2, k.3).1
        });

        // Bindings: without `lengths` every key counts; binding 5 holds the work list (the
        // layout's upload when the plan is its own, else this launch's) or the row kernel's
        // block-CSR row pointers.
        let full_lengths;
        let lengths = match lengths {
            Some(l) => l,
            None => {
                full_lengths =
                    Tensor::from_slice(ctx, &vec![self.seq as u32; self.batch], &[self.batch])?;
                &full_lengths
            }
        };
        let built_work = match &work_plan {
            Some(Cow::Owned(p)) => Some(p.upload(ctx)?),
            _ => None,
        };
        let tiled = matches!(kernel, AttentionKernel::Tiled(_));
        let placeholder = ctx.placeholder();
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
            let partial = Tensor::empty(ctx, &[rows.max(1), self.head_dim + 4], DType::F32)?;
            launch::fits_u32(name, "partial outputs", partial.numel())?;
            Some(partial)
        } else {
            None
        };
        if let Some(t) = &partial {
            buffers.push((8, t));
        }
        let merge_invocations = bh * merges * bq as usize * self.head_dim / 4;
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

    /// The checks of [`Attention::run`] that need no device: dtypes, aliasing, the head
    /// width, every layout inside its tensor `[q, k, v, o]`, `lengths`, the sparse layout's
    /// length.
    fn check(
        &self,
        name: &str,
        [q, k, v, o]: [&Tensor; 4],
        lengths: Option<&Tensor>,
        sparse: Option<&SparseLayout>,
    ) -> Result<()> {
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
        match sparse {
            Some(s) if s.layout.seq != self.seq => Err(Error::shape(
                name,
                format!(
                    "the block layout is for {} tokens, not {}",
                    s.layout.seq, self.seq
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The register-blocked kernel's work list and the key tiles per block-sparse block.
    /// It walks work items: a sparse layout's (borrowed: already uploaded; rebuilt per query
    /// tile when a block is several tiles), or dense rows cut `kv_splits` ways (owned); every
    /// other launch (`None`) has a workgroup per query block.
    fn work_plan<'a>(
        &self,
        kernel: AttentionKernel,
        sparse: Option<&'a SparseLayout>,
    ) -> (Option<Cow<'a, SplitPlan>>, u32) {
        let (bq, bk) = kernel.tile();
        let tiled = matches!(kernel, AttentionKernel::Tiled(_));
        let q_blocks = self.seq.div_ceil(bq as usize);
        let k_blocks = self.seq.div_ceil(bk as usize);
        match sparse {
            // A block of `query_tiles` × `key_tiles` tiles (1 × 1 but for blocks larger
            // than the tiling).
            Some(s) if tiled => {
                let block = s.layout.block as u32;
                let (query_tiles, key_tiles) = (block / bq, block / bk);
                let plan = if query_tiles > 1 {
                    Cow::Owned(s.plan.per_query_tile(query_tiles))
                } else {
                    Cow::Borrowed(&s.plan)
                };
                (Some(plan), key_tiles)
            }
            Some(_) => (None, 1),
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
                let plan = (tiled && splits > 1).then(|| {
                    Cow::Owned(SplitPlan::dense(q_blocks, tiles, k_blocks.div_ceil(splits)))
                });
                (plan, 1)
            }
        }
    }

    /// The kernels' uniform: sizes, the four layouts, scale, key blocks, partial slots and
    /// merges (`shaders/include/attention_io.wgsl`).
    fn params(&self, units: usize, k_blocks: usize, slots: u32, merges: usize) -> Params {
        let mut words: Vec<u32> = vec![
            self.batch as u32,
            self.heads as u32,
            self.seq as u32,
            units as u32,
        ];
        for l in [&self.q, &self.k, &self.v, &self.o] {
            words.extend(l.words().iter().map(|&x| x as u32));
        }
        Params::new()
            .words(&words)
            .f(self.scale)
            .u(k_blocks as u32)
            .u(slots)
            .u(merges as u32)
    }
}
