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
//! split into spans of a multiple of 64 so that about [`TARGET_WORKGROUPS`] workgroups run,
//! each writing a partial softmax that a second pass merges (Dao et al., "Flash-Decoding for
//! long-context inference", 2023). Prefill (many tokens) fills the GPU with one span per
//! token and skips the merge.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, KV_ATTENTION, Variant};

/// Invocations per workgroup, and keys per tile.
const WG: u32 = 64;
/// The workgroup (and tile) of a decode step whose context is at most [`WIDE_CONTEXT`] keys:
/// one workgroup per KV head walks the keys 256 at a time, and no merge pass follows (on the
/// H200 a decode step's 30 merge dispatches cost ~0.19 ms of GPU time and as much of the
/// host's recording, benches/NOTES.md run 90; at depth 258, run 92, the wide attention took
/// 0.47 ms a token against 0.50 for the split one and its merge).
const WIDE_WG: u32 = 256;
/// Loads a loop issues before using any (vec4s of a key row, value rows): a lone workgroup
/// hides memory latency only with many in flight. On CPU drivers 4: lavapipe spilled the
/// 16-wide register arrays, attention 2.3–2.7× slower than with 4 (benches/NOTES.md).
const CHUNK: u32 = 16;
/// [`CHUNK`] on CPU drivers.
const CPU_CHUNK: u32 = 4;
/// The longest context decoded by [`WIDE_WG`] workgroups without a key split: two tiles
/// (measured at 258 keys; between 258 and 512 not yet).
pub const WIDE_CONTEXT: usize = 512;
/// Workgroups the key split aims for: enough to fill a large GPU's compute units.
pub const TARGET_WORKGROUPS: usize = 256;
/// The largest `G · ⌈dh/256⌉` (query heads per KV head × quads of dimensions an invocation
/// owns): the per-invocation accumulators, in vec4s.
pub const MAX_ACCUMULATORS: usize = 32;

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

    /// (spans, keys per span): spans of a multiple of 64 keys, as many as bring the grid to
    /// about [`TARGET_WORKGROUPS`] (one span when the tokens alone do).
    pub fn split(&self) -> (usize, usize) {
        let len = self.context().max(1);
        let wg = self.workgroup() as usize;
        if wg == WIDE_WG as usize {
            return (1, len.div_ceil(wg) * wg);
        }
        let tiles = len.div_ceil(wg);
        let want = TARGET_WORKGROUPS.div_ceil(self.tokens.max(1) * self.kv_heads.max(1));
        let spans = want.clamp(1, tiles);
        let chunk = tiles.div_ceil(spans) * wg;
        (len.div_ceil(chunk), chunk)
    }

    /// Invocations per workgroup (and keys per tile): [`WIDE_WG`] for a decode step over at
    /// most [`WIDE_CONTEXT`] keys, else 64.
    /// (A head group whose workgroup memory at 256 would pass WebGPU's guaranteed 16 KiB
    /// stays at 64.)
    pub fn workgroup(&self) -> u32 {
        let wide = self.tokens == 1
            && self.context() <= WIDE_CONTEXT
            && self.shared_bytes(WIDE_WG) <= 16 << 10;
        if wide { WIDE_WG } else { WG }
    }

    /// Workgroup memory of a launch with `wg` invocations: G queries, G·TILE weights, the
    /// vec4 and scalar reductions.
    fn shared_bytes(&self, wg: u32) -> usize {
        let (g, w) = (self.group(), wg as usize);
        4 * (g * self.head_dim + g * w + 4 * w + w)
    }

    /// Cost: 4·dh FLOPs per (query head, visible key) for QKᵀ and PV plus 5 for the softmax;
    /// bytes: Q and the output once, the visible K and V rows once.
    pub fn cost(&self, dtype: DType) -> OpCost {
        let pairs: f64 = (0..self.tokens)
            .map(|t| (self.pos0 + t + 1) as f64)
            .sum::<f64>()
            * self.heads as f64;
        let dh = self.head_dim as f64;
        let e = dtype.size() as f64;
        let qo = 2.0 * self.tokens as f64 * self.heads as f64 * dh;
        let kv = 2.0 * self.context() as f64 * self.kv_heads as f64 * dh;
        OpCost::new(pairs * (4.0 * dh + 5.0), (qo + kv) * e)
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
    /// 4·(γ_n + γ_dh·max(|s|, 1) + 2u)·v_max, plus the rounding to the storage type.
    pub fn error_bound(&self, dtype: DType, v_max: f64, score_max: f64, want: f32) -> f64 {
        let g = crate::check::gamma(self.context())
            + crate::check::gamma(self.head_dim) * score_max.max(1.0)
            + 2.0 * crate::check::U32;
        4.0 * g * v_max.max(1e-30) + crate::check::storage_rounding(dtype, want as f64)
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
        let wg = self.workgroup();
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
        let (spans, chunk) = self.split();
        let split = spans > 1;
        let part = if split {
            Tensor::empty(ctx, &[t * nh * spans * (dh + 2)], DType::F32)?
        } else {
            ctx.placeholder().clone()
        };
        launch::fits_u32(name, "partials", part.numel())?;
        launch::float_dtype(ctx, name, q.dtype())?;
        let loads = if ctx.info().device_type == ridge_core::wgpu::DeviceType::Cpu {
            CPU_CHUNK
        } else {
            CHUNK
        };
        let key = (q.dtype(), g, dh, split, wg, loads);
        let defines = launch::memoized(name, &key, |&(dtype, g, dh, split, wg, loads)| {
            defines(shaders::storage_defines(dtype), g, dh, split, wg).u32("CHUNK", loads)
        });
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
            defines: defines.clone(),
            params: params.clone(),
            buffers: vec![(1, q), (2, k_cache), (3, v_cache), (4, out), (5, &part)],
            workgroups: [spans as u32, nkv as u32, t as u32],
        }
        .run(ctx)?;
        if split {
            Launch {
                label: "kv_attention_merge",
                shader: &KV_ATTENTION,
                entry: "merge",
                defines,
                params,
                buffers: vec![(4, out), (5, &part)],
                workgroups: [nh as u32, t as u32, 1],
            }
            .run(ctx)?;
        }
        Ok(())
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
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    for chunk in [CHUNK, CPU_CHUNK] {
        v.push((
            &KV_ATTENTION,
            "partial",
            defines(shaders::storage_defines(dtype), 3, 64, false, WIDE_WG).u32("CHUNK", chunk),
        ));
    }
    for split in [false, true] {
        let d = defines(shaders::storage_defines(dtype), 3, 64, split, WG).u32("CHUNK", CHUNK);
        v.push((&KV_ATTENTION, "partial", d.clone()));
        if split {
            v.push((&KV_ATTENTION, "merge", d));
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

    #[test]
    fn short_decodes_take_one_wide_workgroup_and_no_merge() {
        // SmolLM2: 512 keys in one span of two 256-key tiles; one more key splits.
        let at = decode(WIDE_CONTEXT - 1, 9, 3);
        assert_eq!((at.workgroup(), at.split()), (WIDE_WG, (1, 512)));
        let past = decode(WIDE_CONTEXT, 9, 3);
        assert_eq!(past.workgroup(), WG);
        assert!(past.split().0 > 1);
        // 32 query heads per KV head would need 46 KB of workgroup memory at 256.
        assert_eq!(decode(10, 32, 1).workgroup(), WG);
        // Prefill keeps 64 whatever the context.
        assert_eq!(KvAttention { tokens: 2, ..at }.workgroup(), WG);
    }
}
