//! Causal attention against a KV cache with grouped-query heads, keys split across
//! workgroups and merged (flash-decoding) so that one query over a long context still fills
//! the GPU (`shaders/kv_attention.wgsl`).
//!
//! Shapes: `q` `[T, nh, dh]` (the tokens at positions `pos0..pos0 + T`), `k_cache` and
//! `v_cache` `[capacity, nkv, dh]` holding positions `0..pos0 + T`, `out` `[T, nh, dh]`.
//! Query head `h` reads KV head `h / (nh / nkv)` (Ainslie et al., "GQA", 2023); token `t`
//! sees keys `0..=pos0 + t`. Scores are scaled by `1/√dh` (Vaswani et al., 2017).
//!
//! Decode is `T = 1`: over at most [`WIDE_CONTEXT`] keys, one workgroup of 256 per KV head
//! walks them in tiles of 256 and writes the output (no merge pass); over more, the keys are
//! split into spans of a multiple of 128 (workgroups of [`SPLIT_WG`]; 64 on CPU drivers) so
//! that about [`TARGET_WORKGROUPS`] workgroups run, each writing a partial softmax that a
//! second pass merges (Dao et al., "Flash-Decoding for long-context inference", 2023).
//! Prefill (many tokens) fills the GPU with one span per token and skips the merge; on the
//! tensor cores a prompt's keys are split into spans of [`COOP_SPAN`] past that many, and
//! merged by the same pass.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, KV_ATTENTION, KV_ATTENTION_COOP, Variant};

/// Invocations per workgroup, and keys per tile.
const WG: u32 = 64;
/// The workgroup (and tile) of a decode step whose context is at most [`WIDE_CONTEXT`] keys:
/// one workgroup per KV head walks the keys 256 at a time, and no merge pass follows (on the
/// H200 a decode step's 30 merge dispatches cost ~0.19 ms of GPU time and as much of the
/// host's recording, benches/NOTES.md run 90; at depth 258, run 92, the wide attention took
/// 0.47 ms a token against 0.50 for the split one and its merge).
const WIDE_WG: u32 = 256;
/// The workgroup (and tile) of a decode step past [`WIDE_CONTEXT`] keys on a GPU, split in
/// spans of a multiple of this many keys. On an H100 (benches/NOTES.md, 2026-12-06, one call,
/// SmolLM2's 3 KV heads) spans of 128 keys against 64: decode at 4096 +4–5 % (the merge walks
/// half the spans: 10.7 → 8.5 µs profiled), at 1024 unchanged; spans of 256 (a quarter of the
/// spans) gained 3 % at 4096 but lost 2–5 % at 1024 (4 spans a head: too few workgroups). On
/// lavapipe spans of 128 were 1–10 % slower up to 4096 keys and 25 % at 8191, so CPU drivers
/// keep [`WG`].
const SPLIT_WG: u32 = 128;
/// Loads a loop issues before using any (vec4s of a key row, value rows): a lone workgroup
/// hides memory latency only with many in flight. On CPU drivers 4: lavapipe spilled the
/// 16-wide register arrays, attention 2.3–2.7× slower than with 4 (benches/NOTES.md).
const CHUNK: u32 = 16;
/// [`CHUNK`] on CPU drivers.
const CPU_CHUNK: u32 = 4;
/// Neighbouring lanes that share a key row's loads in the scores (kv_attention.wgsl's
/// `KLANES`): a warp's load then touches 8 key rows' pieces of four vec4s (64 bytes in f32,
/// 32 in f16) instead of 32 rows' single vec4s, a quarter of the rows (the shader's partial
/// sums meet through workgroup memory: two barriers a head a tile).
const KEY_LANES: u32 = 4;
/// Keys a workgroup walks from which GPUs share key rows ([`KvLoads::GPU_SHARED_ROWS`], f32
/// caches only). On the H200 (benches/NOTES.md, 2026-12-05, one call, old ÷ new kernel over
/// two rounds) sharing cost 3–9 % at 64–256 keys a workgroup and saved 8 % at 511, 13–22 %
/// where 32 KV heads' spans walk 256–1024 keys, 12–31 % in the prompt kernel at 256–4096
/// tokens; in f16 it lost 8–57 % everywhere (a key row's quarter is 32 bytes, two vec4s).
pub const SHARED_ROWS_MIN_KEYS: usize = 256;
/// The longest context decoded by [`WIDE_WG`] workgroups without a key split: two tiles
/// (measured at 258 keys; between 258 and 512 not yet).
pub const WIDE_CONTEXT: usize = 512;
/// Workgroups the key split aims for: enough to fill a large GPU's compute units.
pub const TARGET_WORKGROUPS: usize = 256;
/// The largest `G · ⌈dh/256⌉` (query heads per KV head × quads of dimensions an invocation
/// owns): the per-invocation accumulators, in vec4s.
pub const MAX_ACCUMULATORS: usize = 32;

/// Tokens from which a prompt's attention runs on the tensor cores
/// ([`KvAttention::on_tensor_cores`]): past the matrix-vector products' rows, where the
/// quantized products take the tensor cores too.
pub const TENSOR_CORE_MIN_TOKENS: usize = crate::qmatmul::MATVEC_MAX_M + 1;
/// Query tokens a tensor-core workgroup takes (`shaders/kv_attention_coop.wgsl`).
const COOP_QUERIES: usize = 64;
/// Keys a tensor-core workgroup walks at most (8 tiles of 32): a longer prompt's keys are
/// split into spans of this many and merged, so that its last query tile, which sees every
/// key, is not the whole dispatch's time. On the H200 (benches/NOTES.md runs 119–120) a
/// 1024-token prompt's attention went from 1.75 to 1.22 ms (+ 0.38 ms of merge passes);
/// spans of 512 measured the same.
pub const COOP_SPAN: usize = 256;

/// Causal grouped-query attention over a KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvAttention {
    /// Query tokens `T`.
    pub tokens: usize,
    /// Query heads `nh`.
    pub heads: usize,
    /// Key/value heads `nkv` (`nh` a multiple).
    pub kv_heads: usize,
    /// Head width `dh`.
    pub head_dim: usize,
    /// Position of the first query token (keys `0..pos0` are already cached).
    pub pos0: usize,
}

impl KvAttention {
    /// Keys the last query sees.
    pub fn context(&self) -> usize {
        self.pos0 + self.tokens
    }

    fn group(&self) -> usize {
        self.heads / self.kv_heads.max(1)
    }

    /// (spans, keys per span) on a CPU driver (`cpu`) or a GPU: spans of a multiple of the
    /// workgroup's keys ([`KvAttention::workgroup`]), as many as bring the grid to about
    /// [`TARGET_WORKGROUPS`] (one span when the tokens alone do).
    pub fn split(&self, cpu: bool) -> (usize, usize) {
        let len = self.context().max(1);
        let wg = self.workgroup(cpu) as usize;
        if wg == WIDE_WG as usize {
            return (1, len.div_ceil(wg) * wg);
        }
        let tiles = len.div_ceil(wg);
        let want = TARGET_WORKGROUPS.div_ceil(self.tokens.max(1) * self.kv_heads.max(1));
        let spans = want.clamp(1, tiles);
        let chunk = tiles.div_ceil(spans) * wg;
        (len.div_ceil(chunk), chunk)
    }

    /// The most keys one workgroup of the SIMT kernel walks: its span's, at most the context.
    pub fn keys_walked(&self, cpu: bool) -> usize {
        self.split(cpu).1.min(self.context())
    }

    /// Invocations per workgroup (and keys per tile) on a CPU driver (`cpu`) or a GPU: for a
    /// decode step [`WIDE_WG`] over at most [`WIDE_CONTEXT`] keys, over more [`SPLIT_WG`] on
    /// a GPU and 64 on a CPU driver; 64 for a prompt. (A head group whose workgroup memory at
    /// that width would pass WebGPU's guaranteed 16 KiB stays at 64.)
    pub fn workgroup(&self, cpu: bool) -> u32 {
        if self.tokens != 1 {
            return WG;
        }
        let wide = match (self.context() <= WIDE_CONTEXT, cpu) {
            (true, _) => WIDE_WG,
            (false, false) => SPLIT_WG,
            (false, true) => WG,
        };
        if self.shared_bytes(wide) <= 16 << 10 {
            wide
        } else {
            WG
        }
    }

    /// Workgroup memory of a launch with `wg` invocations: G queries, G·TILE weights, the
    /// vec4 and scalar reductions.
    fn shared_bytes(&self, wg: u32) -> usize {
        let (g, w) = (self.group(), wg as usize);
        4 * (g * self.head_dim + g * w + 4 * w + w)
    }

    /// Whether the tensor-core kernel takes attention of head width `dh` in `dtype` on an
    /// adapter with f16 cooperative matrices and room for its workgroup memory (what
    /// [`KvAttention::tensor_cores_fit`] asks of the shape alone, for a plan made without a
    /// GPU): f16 storage, `dh` a positive multiple of 16.
    pub fn tensor_cores_shape(dtype: DType, dh: usize) -> bool {
        dtype == DType::F16 && dh > 0 && dh.is_multiple_of(16)
    }

    /// Whether an adapter runs attention of head width `dh` in `dtype` on the tensor cores
    /// for prompts of [`TENSOR_CORE_MIN_TOKENS`] or more: f16 storage, f16 × f16 → f32
    /// 16×16×16 cooperative matrices, `dh` a multiple of 16, and the kernel's workgroup
    /// memory within the adapter's limit.
    pub fn tensor_cores_fit(ctx: &Context, dtype: DType, dh: usize) -> bool {
        Self::tensor_cores_shape(dtype, dh)
            && ctx.has_coop_f16()
            && coop_shared_bytes(dh) <= ctx.limits().max_compute_workgroup_storage_size as usize
    }

    /// Whether [`KvAttention::run`] takes the tensor-core kernel: a prompt
    /// ([`KvAttention::prompt_for_tensor_cores`]) where [`KvAttention::tensor_cores_fit`]. It
    /// rounds the probabilities to f16 (see the shader); keys split by
    /// [`KvAttention::coop_split`].
    pub fn on_tensor_cores(&self, ctx: &Context, dtype: DType) -> bool {
        self.prompt_for_tensor_cores() && Self::tensor_cores_fit(ctx, dtype, self.head_dim)
    }

    /// (spans, keys per span) of the tensor-core kernel: spans of [`COOP_SPAN`] keys where the
    /// context is longer (a merge pass follows), else one span of the whole context.
    pub fn coop_split(&self) -> (usize, usize) {
        let len = self.context().max(1);
        if len <= COOP_SPAN {
            (1, len.next_multiple_of(32))
        } else {
            (len.div_ceil(COOP_SPAN), COOP_SPAN)
        }
    }

    /// The merge pass's cost over `spans` partial records: each read once (FLOPs negligible).
    pub fn merge_cost(&self, spans: usize) -> OpCost {
        OpCost::new(
            0.0,
            (self.tokens * self.heads * spans * (self.head_dim + 2) * 4) as f64,
        )
    }

    /// Whether this is a prompt long enough for the tensor cores: [`TENSOR_CORE_MIN_TOKENS`]
    /// or more tokens.
    pub fn prompt_for_tensor_cores(&self) -> bool {
        self.tokens >= TENSOR_CORE_MIN_TOKENS
    }

    /// Cost: 4·dh FLOPs per (query head, visible key) for QKᵀ and PV plus 5 for the softmax;
    /// bytes: Q and the output once, the visible K and V rows once; depth: the keys a query
    /// sees on average.
    pub fn cost(&self, dtype: DType) -> OpCost {
        let pairs: f64 = (0..self.tokens)
            .map(|t| (self.pos0 + t + 1) as f64)
            .sum::<f64>()
            * self.heads as f64;
        let dh = self.head_dim as f64;
        let e = dtype.size() as f64;
        let qo = 2.0 * self.tokens as f64 * self.heads as f64 * dh;
        let kv = 2.0 * self.context() as f64 * self.kv_heads as f64 * dh;
        let queries = (self.tokens * self.heads).max(1) as f64;
        OpCost::new(pairs * (4.0 * dh + 5.0), (qo + kv) * e).with_depth(pairs / queries)
    }

    /// f64 reference: `q` `[T, nh, dh]`, `k` and `v` `[pos0 + T, nkv, dh]`.
    pub fn reference(&self, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f32> {
        let (nh, nkv, dh) = (self.heads, self.kv_heads, self.head_dim);
        let g = self.group();
        let scale = 1.0 / (dh as f64).sqrt();
        let mut out = Vec::with_capacity(self.tokens * nh * dh);
        for t in 0..self.tokens {
            let visible = self.pos0 + t + 1;
            for h in 0..nh {
                let qh = &q[(t * nh + h) * dh..][..dh];
                let kv = h / g;
                let scores: Vec<f64> = (0..visible)
                    .map(|j| {
                        let kj = &k[(j * nkv + kv) * dh..][..dh];
                        qh.iter()
                            .zip(kj)
                            .map(|(a, b)| *a as f64 * *b as f64)
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = w.iter().sum();
                for d in 0..dh {
                    let o: f64 = (0..visible)
                        .map(|j| w[j] * v[(j * nkv + kv) * dh + d] as f64)
                        .sum();
                    out.push((o / sum) as f32);
                }
            }
        }
        out
    }

    /// Error bound against [`KvAttention::reference`], as for dense attention
    /// ([`crate::Attention::error_bound`]): the output is a convex combination of V rows
    /// (|V| ≤ `v_max`) whose weights are off by γ_n (the sums over n ≤ context keys, and the
    /// merge's rescaling, u) plus γ_dh·|score|_max (`score_max` bounds |q·k|/√dh), so
    /// 4·(γ_n + γ_dh·max(|s|, 1) + 2u)·v_max, plus the rounding to the storage type. On the
    /// tensor cores (`tensor_cores`: [`KvAttention::on_tensor_cores`]) the weights of P·V
    /// are rounded to f16 while the row sum keeps them exact: u₁₆·v_max more.
    pub fn error_bound(
        &self,
        dtype: DType,
        tensor_cores: bool,
        v_max: f64,
        score_max: f64,
        want: f32,
    ) -> f64 {
        let g = crate::check::gamma(self.context())
            + crate::check::gamma(self.head_dim) * score_max.max(1.0)
            + 2.0 * crate::check::U32;
        let rounded_p = if tensor_cores { crate::check::U16 } else { 0.0 };
        (4.0 * g + rounded_p) * v_max.max(1e-30)
            + crate::check::storage_rounding(dtype, want as f64)
    }

    /// Attention of `q` against the first `pos0 + T` rows of the caches into `out`.
    ///
    /// Errors: [`Error::Shape`] for shapes that disagree (module docs), `nh` not a multiple
    /// of `nkv`, `dh` not a multiple of 4, or `pos0 + T` past the caches;
    /// [`Error::InvalidArgument`] for head groups too wide (`G·⌈dh/256⌉` over
    /// [`MAX_ACCUMULATORS`]) and views not starting on a vec4; [`Error::LimitExceeded`] when
    /// the queries of a group overflow workgroup memory; dtype, alias and limit errors as
    /// every op.
    pub fn run(
        &self,
        ctx: &Context,
        q: &Tensor,
        k_cache: &Tensor,
        v_cache: &Tensor,
        out: &Tensor,
    ) -> Result<()> {
        let name = "kv_attention";
        let (t, nh, nkv, dh) = (self.tokens, self.heads, self.kv_heads, self.head_dim);
        if nkv == 0 || dh == 0 || !nh.is_multiple_of(nkv) {
            return Err(Error::shape(
                name,
                format!("{nh} heads over {nkv} KV heads of width {dh}"),
            ));
        }
        if !dh.is_multiple_of(4) {
            return Err(Error::shape(
                name,
                format!(
                    "head width {dh} is not a multiple of 4 (keys and values are read as vec4s)"
                ),
            ));
        }
        let g = self.group();
        let cpu = ctx.is_cpu_driver();
        let wg = self.workgroup(cpu);
        let qpt = dh.div_ceil(4 * wg as usize);
        if g * qpt > MAX_ACCUMULATORS {
            return Err(Error::invalid(
                name,
                format!(
                    "{g} query heads per KV head of width {dh} need {} accumulators per \
                     invocation; the kernel holds {MAX_ACCUMULATORS}",
                    g * qpt
                ),
            ));
        }
        // Workgroup memory: G queries, G·TILE weights, the vec4 and scalar reductions.
        launch::check_workgroup(ctx, name, wg, self.shared_bytes(wg) as u32)?;
        if q.numel() != t * nh * dh {
            return Err(Error::shape(
                name,
                format!("q {:?} is not [{t}, {nh}, {dh}]", q.shape()),
            ));
        }
        out.expect_shape(name, "out", q.shape())?;
        let capacity = k_cache.shape().first().copied().unwrap_or(0);
        for (what, c) in [("k_cache", k_cache), ("v_cache", v_cache)] {
            c.expect_shape(name, what, &[capacity, nkv, dh])?;
        }
        if self.context() > capacity {
            return Err(Error::shape(
                name,
                format!("{} positions in a cache of {capacity}", self.context()),
            ));
        }
        launch::same_dtype(name, q.dtype(), &[k_cache, v_cache, out])?;
        launch::no_alias(name, out, &[q, k_cache, v_cache])?;
        if ![q, k_cache, v_cache]
            .iter()
            .all(|t| launch::starts_on_vector(t, 4))
        {
            return Err(Error::invalid(
                name,
                "q and the caches must start on a 4-element boundary (they are read as vec4s)",
            ));
        }
        launch::fits_u32(name, "cache", k_cache.numel())?;
        if self.on_tensor_cores(ctx, q.dtype()) {
            return self.run_coop(ctx, q, k_cache, v_cache, out);
        }
        let (spans, chunk) = self.split(cpu);
        let split = spans > 1;
        let part = self.partials(ctx, spans)?;
        launch::float_dtype(ctx, name, q.dtype())?;
        let defines = self.cache_defines(ctx, q.dtype(), split);
        let params = Params::new()
            .u(launch::fits_u32(name, "tokens", t)?)
            .u(nh as u32)
            .u(nkv as u32)
            .u(dh as u32)
            .u(launch::fits_u32(name, "pos0", self.pos0)?)
            .u(spans as u32)
            .u(chunk as u32)
            .f(1.0 / (dh as f32).sqrt());
        let max = ctx.limits().max_compute_workgroups_per_dimension as usize;
        if t > max || spans > max || nh > max {
            return Err(Error::LimitExceeded {
                what: format!("{name}: {t} tokens × {nh} heads × {spans} spans"),
                limit: "maxComputeWorkgroupsPerDimension",
                requested: t.max(spans).max(nh) as u64,
                allowed: max as u64,
            });
        }
        Launch {
            label: name,
            shader: &KV_ATTENTION,
            entry: "partial",
            defines,
            params: params.clone(),
            buffers: vec![(1, q), (2, k_cache), (3, v_cache), (4, out), (5, &part)],
            workgroups: [spans as u32, nkv as u32, t as u32],
        }
        .run(ctx)?;
        if split {
            self.merge(ctx, q.dtype(), params, &part, out)?;
        }
        Ok(())
    }

    /// The split's partial records, `spans` per (token, query head): m, l and the `head_dim`
    /// unnormalised outputs, f32 (kv_attention.wgsl's `record`); the placeholder for one span.
    fn partials(&self, ctx: &Context, spans: usize) -> Result<Tensor> {
        if spans == 1 {
            return Ok(ctx.placeholder().clone());
        }
        let n = self.tokens * self.heads * spans * (self.head_dim + 2);
        launch::fits_u32("kv_attention", "partials", n)?;
        Tensor::empty(ctx, &[n], DType::F32)
    }

    /// The merge pass: `part`'s spans rescaled to their common maximum, normalised into
    /// `out` (kv_attention.wgsl's `merge`, a workgroup per query head and token).
    fn merge(
        &self,
        ctx: &Context,
        dtype: DType,
        params: Params,
        part: &Tensor,
        out: &Tensor,
    ) -> Result<()> {
        Launch {
            label: "kv_attention_merge",
            shader: &KV_ATTENTION,
            entry: "merge",
            defines: self.cache_defines(ctx, dtype, true),
            params,
            buffers: vec![(4, out), (5, part)],
            workgroups: [
                self.heads as u32,
                launch::fits_u32("kv_attention", "tokens", self.tokens)?,
                1,
            ],
        }
        .run(ctx)
    }

    /// The memoized defines of kv_attention.wgsl for `dtype` (its merge pass included).
    fn cache_defines(&self, ctx: &Context, dtype: DType, split: bool) -> ridge_core::Defines {
        let cpu = ctx.is_cpu_driver();
        let loads = KvLoads::forced_now()
            .unwrap_or_else(|| KvLoads::rule(cpu, dtype, self.keys_walked(cpu)));
        let key_lanes = loads.key_lanes(self.head_dim);
        let key = (
            dtype,
            self.group(),
            self.head_dim,
            split,
            self.workgroup(cpu),
            (loads.chunk, key_lanes),
        );
        launch::memoized(
            "kv_attention",
            &key,
            |&(dtype, g, dh, split, wg, (chunk, lanes))| {
                defines(shaders::storage_defines(dtype), g, dh, split, wg)
                    .u32("CHUNK", chunk)
                    .u32("KLANES", lanes)
            },
        )
    }

    /// The prompt on the tensor cores: a workgroup per [`COOP_QUERIES`] tokens and query head.
    fn run_coop(
        &self,
        ctx: &Context,
        q: &Tensor,
        k_cache: &Tensor,
        v_cache: &Tensor,
        out: &Tensor,
    ) -> Result<()> {
        let name = "kv_attention";
        let dh = self.head_dim;
        let (spans, chunk) = self.coop_split();
        let split = spans > 1;
        let part = self.partials(ctx, spans)?;
        let defines = launch::memoized("kv_attention_coop", &(dh, split), |&(dh, split)| {
            coop_defines(dh).bool("SPLIT", split)
        });
        let params = Params::new()
            .u(launch::fits_u32(name, "tokens", self.tokens)?)
            .u(self.heads as u32)
            .u(self.kv_heads as u32)
            .u(dh as u32)
            .u(launch::fits_u32(name, "pos0", self.pos0)?)
            .u(launch::fits_u32(name, "spans", spans)?)
            .u(launch::fits_u32(name, "span", chunk)?)
            .f(1.0 / (dh as f32).sqrt());
        Launch {
            label: name,
            shader: &KV_ATTENTION_COOP,
            entry: "prefill_coop",
            defines,
            params: params.clone(),
            buffers: vec![(1, q), (2, k_cache), (3, v_cache), (4, out), (5, &part)],
            workgroups: [
                launch::fits_u32(name, "query tiles", self.tokens.div_ceil(COOP_QUERIES))?,
                self.heads as u32,
                spans as u32,
            ],
        }
        .run(ctx)?;
        if split {
            self.merge(ctx, q.dtype(), params, &part, out)?;
        }
        Ok(())
    }
}

/// Workgroup memory of the tensor-core kernel for head width `dh`: the K and V tiles (32
/// rows of dh + 8 halves each), four subgroups' scores (16 × 32 f32) and probabilities
/// (16 × 40 f16), and 192 f32 of row values.
fn coop_shared_bytes(dh: usize) -> usize {
    2 * 32 * (dh + 8) * 2 + 4 * 16 * 32 * 4 + 4 * 16 * 40 * 2 + 192 * 4
}

/// The tensor-core kernel's defines with its generated blocks for `dh / 16` fragments: the
/// Q fragments (`//@QFRAG`), S = Q·Kᵀ (`//@SCORES`), and O = O·α + P·V slice by slice
/// (`//@PV`).
fn coop_defines(dh: usize) -> ridge_core::Defines {
    let frags = dh / 16;
    let mut qfrag = String::new();
    for i in 0..frags {
        qfrag.push_str(&format!(
            "let qf{i} = coopLoadT<coop_mat16x16<f16, A>>(&kv[sg * 16u * KS + {}u], KS);\n",
            16 * i
        ));
    }
    let mut scores = String::new();
    for n in 0..2 {
        scores.push_str(&format!("var s{n} = coop_mat16x16<f32, C>();\n"));
        for i in 0..frags {
            scores.push_str(&format!(
                "s{n} = coopMultiplyAdd(qf{i}, coopLoad<coop_mat16x16<f16, B>>(&kv[{}u * KS + {}u], KS), s{n});\n",
                16 * n,
                16 * i
            ));
        }
        scores.push_str(&format!("coopStoreT(s{n}, &sc[srow + {}u], BK);\n", 16 * n));
    }
    let mut pv = String::from(
        "let pf0 = coopLoadT<coop_mat16x16<f16, A>>(&ps[prow], PS);
let pf1 = coopLoadT<coop_mat16x16<f16, A>>(&ps[prow + 16u], PS);
",
    );
    for j in 0..frags {
        let c = 16 * j;
        pv.push_str(&format!(
            "{{
var acc = coopMultiplyAdd(pf0, coopLoadT<coop_mat16x16<f16, B>>(&kv[VOFF + {c}u], KS), coop_mat16x16<f32, C>());
acc = coopMultiplyAdd(pf1, coopLoadT<coop_mat16x16<f16, B>>(&kv[VOFF + 16u * KS + {c}u], KS), acc);
coopStoreT(acc, &sc[srow], 16u);
subgroupBarrier();
for (var i = 0u; i < 8u; i++) {{
    let r = lane / 16u + 2u * i;
    o[{j}u * 8u + i] = o[{j}u * 8u + i] * alpha[sg * 16u + r] + sc[srow + r * 16u + lane % 16u];
}}
subgroupBarrier();
}}
"
        ));
    }
    shaders::storage_defines(DType::F16)
        .enable("wgpu_cooperative_matrix")
        .block("IO", shaders::KV_ATTENTION_IO.to_string())
        .u32("DH", dh as u32)
        .block("QFRAG", qfrag)
        .block("SCORES", scores)
        .block("PV", pv)
}

/// How the one-token and SIMT prompt kernel loads the cache: loads issued together, and
/// whether neighbouring lanes share key rows ([`KEY_LANES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLoads {
    /// Loads a loop issues before using any ([`CHUNK`] or [`CPU_CHUNK`]).
    pub chunk: u32,
    /// Whether [`KEY_LANES`] lanes share a key row's loads where the head width allows.
    pub shared_rows: bool,
}

thread_local! {
    static FORCED_LOADS: std::cell::Cell<Option<KvLoads>> = const { std::cell::Cell::new(None) };
}

impl KvLoads {
    /// GPUs: [`CHUNK`] loads in flight, a lane a key row (measured on the H200, runs 90–132).
    pub const GPU: Self = Self {
        chunk: CHUNK,
        shared_rows: false,
    };
    /// [`KvLoads::GPU`] with key rows shared by [`KEY_LANES`] lanes: a quarter of the cache
    /// lines a warp's key loads touch, for two barriers a head a tile. GPUs' choice for f32
    /// caches where a workgroup walks [`SHARED_ROWS_MIN_KEYS`] keys or more.
    pub const GPU_SHARED_ROWS: Self = Self {
        chunk: CHUNK,
        shared_rows: true,
    };
    /// CPU drivers: [`CPU_CHUNK`] loads (wider register arrays spill), a lane a key row (the
    /// kernel their reports were measured with).
    pub const CPU: Self = Self {
        chunk: CPU_CHUNK,
        shared_rows: false,
    };

    /// The loads on a CPU driver (`cpu`) or a GPU: [`KvLoads::CPU`] on CPU drivers; on GPUs
    /// [`KvLoads::GPU_SHARED_ROWS`] for f32 caches from [`SHARED_ROWS_MIN_KEYS`] keys a
    /// workgroup, else [`KvLoads::GPU`].
    pub fn rule(cpu: bool, dtype: DType, keys: usize) -> Self {
        if cpu {
            Self::CPU
        } else if dtype == DType::F32 && keys >= SHARED_ROWS_MIN_KEYS {
            Self::GPU_SHARED_ROWS
        } else {
            Self::GPU
        }
    }

    /// Lanes a key row of width `dh` takes: [`KEY_LANES`] where rows are shared and their
    /// quads split evenly, else 1.
    pub fn key_lanes(&self, dh: usize) -> u32 {
        if self.shared_rows && dh.is_multiple_of(4 * KEY_LANES as usize) {
            KEY_LANES
        } else {
            1
        }
    }

    /// Runs `f` with every KV attention on this thread loading as `loads` (`None`: the
    /// adapter's choice), then puts back what was forced before, also when `f` panics: for
    /// tests that cover both kernels on any adapter.
    pub fn forced<R>(loads: Option<KvLoads>, f: impl FnOnce() -> R) -> R {
        launch::with_forced(&FORCED_LOADS, loads, f)
    }

    fn forced_now() -> Option<Self> {
        FORCED_LOADS.get()
    }
}

fn defines(
    base: ridge_core::Defines,
    g: usize,
    dh: usize,
    split: bool,
    wg: u32,
) -> ridge_core::Defines {
    base.u32("WG", wg)
        .u32("G", g as u32)
        .u32("DH", dh as u32)
        .bool("SPLIT", split)
        .block("IO", shaders::KV_ATTENTION_IO.to_string())
        .block("REDUCE", shaders::REDUCE.to_string())
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    for (split, wg) in [(false, WIDE_WG), (true, SPLIT_WG)] {
        for loads in [KvLoads::GPU, KvLoads::GPU_SHARED_ROWS, KvLoads::CPU] {
            let d = defines(shaders::storage_defines(dtype), 3, 64, split, wg)
                .u32("CHUNK", loads.chunk)
                .u32("KLANES", loads.key_lanes(64));
            v.push((&KV_ATTENTION, "partial", d.clone()));
            if split && loads == KvLoads::GPU {
                v.push((&KV_ATTENTION, "merge", d));
            }
        }
    }
    for split in [false, true] {
        let base = defines(shaders::storage_defines(dtype), 3, 64, split, WG).u32("CHUNK", CHUNK);
        let shared = base.clone().u32("KLANES", KEY_LANES);
        v.push((&KV_ATTENTION, "partial", shared));
        let d = base.u32("KLANES", KvLoads::GPU.key_lanes(64));
        v.push((&KV_ATTENTION, "partial", d.clone()));
        if split {
            v.push((&KV_ATTENTION, "merge", d));
        }
    }
    if dtype == DType::F16 {
        for dh in [64, 128] {
            for split in [false, true] {
                let d = coop_defines(dh).bool("SPLIT", split);
                v.push((&KV_ATTENTION_COOP, "prefill_coop", d));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(pos0: usize, heads: usize, kv_heads: usize) -> KvAttention {
        KvAttention {
            tokens: 1,
            heads,
            kv_heads,
            head_dim: 64,
            pos0,
        }
    }

    /// A prompt's keys on the tensor cores: one span up to [`COOP_SPAN`], then spans of it
    /// covering the context exactly once.
    #[test]
    fn long_prompts_split_their_keys_on_the_tensor_cores() {
        let prompt = |tokens, pos0| KvAttention {
            tokens,
            heads: 9,
            kv_heads: 3,
            head_dim: 64,
            pos0,
        };
        assert_eq!(prompt(128, 0).coop_split(), (1, 128));
        assert_eq!(prompt(97, 40).coop_split(), (1, 160));
        assert_eq!(prompt(256, 0).coop_split(), (1, 256));
        assert_eq!(prompt(257, 0).coop_split(), (2, 256));
        assert_eq!(prompt(1024, 0).coop_split(), (4, 256));
        assert_eq!(prompt(70, 700).coop_split(), (4, 256));
    }

    #[test]
    fn short_decodes_take_one_wide_workgroup_and_no_merge() {
        // SmolLM2: 512 keys in one span of two 256-key tiles; one more key splits, in spans
        // of 128 keys on a GPU and of 64 on a CPU driver.
        let at = decode(WIDE_CONTEXT - 1, 9, 3);
        for cpu in [false, true] {
            assert_eq!((at.workgroup(cpu), at.split(cpu)), (WIDE_WG, (1, 512)));
        }
        let past = decode(WIDE_CONTEXT, 9, 3);
        assert_eq!(
            (past.workgroup(false), past.split(false)),
            (SPLIT_WG, (5, 128))
        );
        assert_eq!((past.workgroup(true), past.split(true)), (WG, (9, 64)));
        // At 4096 keys, 32 spans of 128 a KV head on a GPU (86 wanted, 32 tiles); 64 of 64.
        assert_eq!(decode(4095, 9, 3).split(false), (32, 128));
        assert_eq!(decode(4095, 9, 3).split(true), (64, 64));
        // 32 query heads per KV head would need 46 KB of workgroup memory at 256, 27 KB at
        // 128.
        assert_eq!(decode(10, 32, 1).workgroup(false), WG);
        assert_eq!(decode(600, 32, 1).workgroup(false), WG);
        // Prefill keeps 64 whatever the context.
        assert_eq!(KvAttention { tokens: 2, ..at }.workgroup(false), WG);
    }

    #[test]
    fn gpus_share_key_rows_of_f32_caches_where_workgroups_walk_many_keys() {
        // SmolLM2's decode: a workgroup a KV head over the whole context up to 511 keys, then
        // spans of 128 at 8191 (64 spans × 3 heads); 32 KV heads take 8 spans of 1024.
        assert_eq!(decode(127, 9, 3).keys_walked(false), 128);
        assert_eq!(decode(510, 9, 3).keys_walked(false), 511);
        assert_eq!(decode(8190, 9, 3).keys_walked(false), 128);
        assert_eq!(decode(8190, 32, 32).keys_walked(false), 1024);
        // A prompt's last token sees the whole context.
        let prompt = KvAttention {
            tokens: 300,
            pos0: 20,
            ..decode(0, 9, 3)
        };
        assert_eq!(prompt.keys_walked(false), 320);
        let rule = KvLoads::rule;
        assert_eq!(
            rule(false, DType::F32, SHARED_ROWS_MIN_KEYS),
            KvLoads::GPU_SHARED_ROWS
        );
        assert_eq!(
            rule(false, DType::F32, SHARED_ROWS_MIN_KEYS - 1),
            KvLoads::GPU
        );
        assert_eq!(rule(false, DType::F16, 8192), KvLoads::GPU);
        assert_eq!(rule(true, DType::F32, 8192), KvLoads::CPU);
    }
}
