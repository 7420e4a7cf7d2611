//! A decoder layer's attention block for one token in one dispatch
//! (`shaders/decode_attention.wgsl`): RMSNorm, the Q/K/V rows, RoPE, the KV-cache append,
//! attention over the cache and each head's share of the O projection, left pending in the
//! residual stream for the next products to add ([`crate::QMatmul::run_with_parts`]). Past
//! [`MAX_KEYS`] keys, two: the heads' workgroups split the keys into spans of [`SPAN`]
//! (`partial`), and a merge pass combines them and computes the O shares (`merge_o`).
//!
//! Shapes: the stream `resid` `[1 + nh, H]` (row 0 the token's `x`; rows `1..=nh` receive the
//! heads' partial O products), γ `[H]`, `W_qkv` `[(nh + 2·nkv)·dh, H]` (llama.cpp's row
//! order: RoPE on adjacent pairs), `W_o` `[H, nh·dh]` with `nh·dh = H`, the caches
//! `[capacity, nkv, dh]`. The token sits at position `pos`; keys `0..pos` are cached.
//!
//! Why one dispatch: a decode step of a small model on a large GPU is bound by its chain of
//! dependent dispatches, ~2.4 µs each before any work, and by each kernel's own ramp
//! (SmolLM2-135M on an H100: ~6.5 µs a dispatch for ~1 MB of weights, benches/NOTES.md);
//! the block's three dispatches (Q/K/V product, attention, O projection) become one (past
//! [`MAX_KEYS`] keys four, with the split attention's merge, become two), and the O
//! projection's sum over heads rides in the next products' reads. Measured slower on an H100
//! all the same ([`DecodeAttention::chosen`]): off by default.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::quant::{BLOCK, QuantFormat, QuantMatrix};
use crate::rope::RopeTable;
use crate::shaders::{self, DECODE_ATTENTION, Variant};

/// Invocations per workgroup (one workgroup per query head).
const WG: usize = 256;
/// The longest context one workgroup per head attends over (its scores sit in workgroup
/// memory); also the most spans a longer context splits into.
pub const MAX_KEYS: usize = 512;
/// Keys a span of a longer context: at 4096 keys, SmolLM2-135M's 9 heads run 144
/// workgroups (a large GPU's 132 SMs each take one or two), near the unfused split
/// attention's aim ([`crate::kv_attention::TARGET_WORKGROUPS`]).
pub const SPAN: usize = 256;
/// Lanes a row of `W_qkv` takes.
const TPR: usize = 4;
/// Storage buffers the kernel binds (WebGPU guarantees 8 a stage; adapters with fewer take
/// the unfused kernels).
const STORAGE_BUFFERS: u32 = 9;

thread_local! {
    static FORCED: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// The attention block of one decoder layer for one token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeAttention {
    /// The stream's width `H` (`nh·dh`).
    pub hidden: usize,
    /// Query heads `nh`.
    pub heads: usize,
    /// Key/value heads `nkv` (`nh` a multiple).
    pub kv_heads: usize,
    /// Head width `dh`.
    pub head_dim: usize,
    /// The token's position: keys `0..pos` are in the cache.
    pub pos: usize,
}

impl DecodeAttention {
    fn group(&self) -> usize {
        self.heads / self.kv_heads.max(1)
    }

    /// Workgroup memory: x normalised, the reductions, the Q/K/V lane sums, q, k, v, the
    /// scores, the value lanes' sums and the head's output (decode_attention.wgsl).
    fn shared_bytes(&self) -> usize {
        let dh = self.head_dim;
        4 * (self.hidden + WG + 3 * dh * TPR + 3 * dh + MAX_KEYS + 4 * WG + dh)
    }

    /// Spans of keys the block's workgroups split the context into: 1 up to [`MAX_KEYS`]
    /// keys (one dispatch), else spans of [`SPAN`] and a merge pass.
    pub fn spans(&self) -> usize {
        if self.pos < MAX_KEYS {
            1
        } else {
            (self.pos + 1).div_ceil(SPAN)
        }
    }

    /// Whether the kernel takes this shape, without a GPU: a head group, widths of whole
    /// blocks (`H` and `dh` multiples of 32, `H = nh·dh`, `2·dh` ≤ the workgroup) and a
    /// context of at most [`MAX_KEYS`] spans (131,072 keys). Whether an adapter has the
    /// workgroup memory (~19 KB at `H` = 2048, ~31 KB at 4096 with heads of 128, past
    /// WebGPU's guaranteed 16 KiB) is [`DecodeAttention::fits`]'s question.
    pub fn shape_fits(&self) -> bool {
        let (h, dh) = (self.hidden, self.head_dim);
        self.kv_heads > 0
            && self.heads.is_multiple_of(self.kv_heads)
            && dh > 0
            && dh.is_multiple_of(BLOCK)
            && 2 * dh <= WG
            && h == self.heads * dh
            && self.spans() <= MAX_KEYS
    }

    /// Whether `ctx` runs it: [`DecodeAttention::shape_fits`], nine storage buffers a stage
    /// and room for its workgroup memory.
    pub fn fits(&self, ctx: &Context) -> bool {
        let l = ctx.limits();
        self.shape_fits()
            && l.max_storage_buffers_per_shader_stage >= STORAGE_BUFFERS
            && l.max_compute_invocations_per_workgroup as usize >= WG
            && l.max_compute_workgroup_size_x as usize >= WG
            && self.shared_bytes() <= l.max_compute_workgroup_storage_size as usize
    }

    /// Whether a decoder takes the block where it fits: only where
    /// [`DecodeAttention::forced`] says so (the GPU tests, `generate --fused-attention`).
    /// Off by default: measured slower everywhere it ran (benches/NOTES.md, 2026-12-07,
    /// third session). On an H100 (SmolLM2-135M, f32, same binary, alternated) decode ran
    /// at 828 / 716 / 603 tokens/s after 128 / at 440 / at 4096 tokens against the unfused
    /// kernels' 1,001 / 862 / 840: the block itself took about as long as the three
    /// dispatches it replaces (26.4 µs against 27.8 at depth 194: its phases run one after
    /// another on one workgroup per head, each still a round of memory latency), and the
    /// gate/up product reading the nine pending rows took 17.2 µs against 9.6 (every one of
    /// its workgroups sums them for the norm). On lavapipe a step took 1.3–2× longer.
    pub fn chosen() -> bool {
        FORCED.get().unwrap_or(false)
    }

    /// Runs `f` with [`DecodeAttention::chosen`] answering `choice` (`None`: the default,
    /// off).
    pub fn forced<R>(choice: Option<bool>, f: impl FnOnce() -> R) -> R {
        launch::with_forced(&FORCED, choice, f)
    }

    /// Cost of the whole block as run (its dispatches together: [`DecodeAttention::dispatches`]).
    pub fn cost(&self, dtype: DType, qkv: QuantFormat, o: QuantFormat) -> OpCost {
        self.dispatches(dtype, qkv, o)
            .into_iter()
            .fold(OpCost::new(0.0, 0.0), |sum, (_, c)| sum + c)
    }

    /// The block's dispatches as (profile name, cost). Each head's workgroup, in each of its
    /// spans, computes its Q rows and its group's K and V rows (G times over: 2·H FLOPs a
    /// row) and attends over its keys (4·dh + 5 FLOPs a key); with one span it multiplies
    /// its output by its `H × dh` columns of `W_o` (2·H·dh FLOPs), else writes its span's
    /// record (m, l, dh values in f32) for the merge pass, which reads the records and does
    /// the O shares. Bytes: the weights once (`W_qkv` in format `qkv`, `W_o` in `o`), the
    /// stream's row and its `nh` partial rows, the keys and values read, the new row
    /// written, the records. Depth: the keys.
    pub fn dispatches(
        &self,
        dtype: DType,
        qkv: QuantFormat,
        o: QuantFormat,
    ) -> Vec<(&'static str, OpCost)> {
        let (h, nh, nkv, dh) = (self.hidden, self.heads, self.kv_heads, self.head_dim);
        let spans = self.spans();
        let keys = (self.pos + 1) as f64;
        let e = dtype.size() as f64;
        let project = (nh * spans) as f64 * 6.0 * (dh * h) as f64;
        let attend = nh as f64 * keys * (4.0 * dh as f64 + 5.0);
        let o_share = nh as f64 * 2.0 * (h * dh) as f64;
        let w_qkv = qkv.matrix_bytes((nh + 2 * nkv) * dh, h) as f64;
        let w_o = o.matrix_bytes(h, h) as f64;
        let (row, parts) = (h as f64 * e, (nh * h) as f64 * e);
        let cache = (2.0 * keys * (nkv * dh) as f64 + (2 * nkv * dh) as f64) * e;
        if spans == 1 {
            let bytes = w_qkv + w_o + row + parts + cache;
            let whole = OpCost::new(project + attend + o_share, bytes).with_depth(keys);
            return vec![("decode_attention", whole)];
        }
        let records = (nh * spans * (dh + 2) * 4) as f64;
        // Depth: all the keys, as the unfused split attention's cost counts them (each kind
        // fitted on its own).
        let partial = OpCost::new(project + attend, w_qkv + row + cache + records);
        let merge = OpCost::new(o_share, w_o + records + parts);
        vec![
            ("decode_attention", partial.with_depth(keys)),
            ("decode_attention_merge", merge),
        ]
    }

    /// Runs the block ([`DecodeAttention::dispatches`]): reads row 0 of `resid`, writes its
    /// rows `1..=nh`, appends the token's K and V at `pos`.
    ///
    /// Errors: [`Error::Shape`] for shapes that disagree (module docs), a shape the kernel
    /// does not take ([`DecodeAttention::shape_fits`]), or `pos` past the caches or the
    /// table; [`Error::LimitExceeded`] when the adapter lacks the storage buffers or
    /// workgroup memory; [`Error::InvalidArgument`] for a negative or NaN `eps`; dtype,
    /// alias and limit errors as every op.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        ctx: &Context,
        resid: &Tensor,
        gamma: &Tensor,
        eps: f32,
        w_qkv: &QuantMatrix,
        w_o: &QuantMatrix,
        table: &RopeTable,
        k_cache: &Tensor,
        v_cache: &Tensor,
    ) -> Result<()> {
        let name = "decode_attention";
        let (h, nh, nkv, dh) = (self.hidden, self.heads, self.kv_heads, self.head_dim);
        if !self.shape_fits() {
            return Err(Error::shape(
                name,
                format!(
                    "{nh} heads over {nkv} KV heads of width {dh}, stream {h}, position {}: \
                     the fused kernel takes H = nh·dh, dh a multiple of 32 up to {}, at most \
                     {} keys",
                    self.pos,
                    WG / 2,
                    MAX_KEYS * SPAN
                ),
            ));
        }
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid(name, format!("eps must be ≥ 0, got {eps}")));
        }
        let l = ctx.limits();
        if l.max_storage_buffers_per_shader_stage < STORAGE_BUFFERS {
            return Err(Error::LimitExceeded {
                what: name.to_string(),
                limit: "maxStorageBuffersPerShaderStage",
                requested: STORAGE_BUFFERS as u64,
                allowed: l.max_storage_buffers_per_shader_stage as u64,
            });
        }
        launch::check_workgroup(ctx, name, WG as u32, self.shared_bytes() as u32)?;
        resid.expect_shape(name, "resid", &[1 + nh, h])?;
        gamma.expect_shape(name, "gamma", &[h])?;
        w_qkv.check(name)?;
        w_o.check(name)?;
        if (w_qkv.rows, w_qkv.cols) != ((nh + 2 * nkv) * dh, h) || (w_o.rows, w_o.cols) != (h, h) {
            return Err(Error::shape(
                name,
                format!(
                    "W_qkv [{}, {}] and W_o [{}, {}] are not [{}, {h}] and [{h}, {h}]",
                    w_qkv.rows,
                    w_qkv.cols,
                    w_o.rows,
                    w_o.cols,
                    (nh + 2 * nkv) * dh
                ),
            ));
        }
        let capacity = k_cache.shape().first().copied().unwrap_or(0);
        for (what, c) in [("k_cache", k_cache), ("v_cache", v_cache)] {
            c.expect_shape(name, what, &[capacity, nkv, dh])?;
        }
        if self.pos >= capacity || self.pos >= table.positions || table.head_dim != dh {
            return Err(Error::shape(
                name,
                format!(
                    "position {} in a cache of {capacity} and a table of {} positions of width \
                     {} (head width {dh})",
                    self.pos, table.positions, table.head_dim
                ),
            ));
        }
        let dtype = resid.dtype();
        launch::same_dtype(name, dtype, &[gamma, k_cache, v_cache])?;
        launch::float_dtype(ctx, name, dtype)?;
        launch::no_alias(name, resid, &[gamma, k_cache, v_cache])?;
        launch::no_alias(name, k_cache, &[v_cache])?;
        if ![resid, gamma, k_cache, v_cache]
            .iter()
            .all(|t| launch::starts_on_vector(t, 4))
        {
            return Err(Error::invalid(
                name,
                "the stream, γ and the caches must start on a 4-element boundary (vec4s)",
            ));
        }
        launch::fits_u32(name, "cache", k_cache.numel())?;
        let key = (dtype, w_qkv.format, w_o.format, h, dh, self.group());
        let defines = launch::memoized(name, &key, |&(dtype, fq, fo, h, dh, g)| {
            defines(shaders::storage_defines(dtype), fq, fo, h, dh, g)
        });
        let spans = self.spans();
        let params = Params::new()
            .u(nh as u32)
            .u(nkv as u32)
            .u(self.pos as u32)
            .f(eps)
            .f(1.0 / (dh as f32).sqrt())
            .u(SPAN as u32)
            .u(spans as u32);
        let heads = launch::fits_u32(name, "heads", nh)?;
        let (oq, os) = (&w_o.quants, &w_o.scales);
        // What the projection and the attention read: the stream, γ, W_qkv, the RoPE table
        // and the caches.
        let mut inputs = vec![
            (1, resid),
            (2, gamma),
            (3, &w_qkv.quants),
            (4, &w_qkv.scales),
            (7, &table.table),
            (8, k_cache),
            (9, v_cache),
        ];
        if spans == 1 {
            inputs.extend([(5, oq), (6, os)]);
            return Launch {
                label: name,
                shader: &DECODE_ATTENTION,
                entry: "main",
                defines,
                params,
                buffers: inputs,
                workgroups: [heads, 1, 1],
            }
            .run(ctx);
        }
        // The spans' records: m, l and dh output values each, in f32.
        let part = Tensor::empty(ctx, &[nh * spans * (dh + 2)], DType::F32)?;
        inputs.push((10, &part));
        Launch {
            label: name,
            shader: &DECODE_ATTENTION,
            entry: "partial",
            defines: defines.clone(),
            params: params.clone(),
            buffers: inputs,
            workgroups: [heads, spans as u32, 1],
        }
        .run(ctx)?;
        Launch {
            label: "decode_attention_merge",
            shader: &DECODE_ATTENTION,
            entry: "merge_o",
            defines,
            params,
            buffers: vec![(1, resid), (5, oq), (6, os), (10, &part)],
            workgroups: [heads, 1, 1],
        }
        .run(ctx)
    }

    /// f64 reference with the weights dequantized (`w_qkv` `[(nh + 2·nkv)·dh, H]`, `w_o`
    /// `[H, H]`), `x` the stream's row, the caches' first `pos` rows `[pos, nkv, dh]` and
    /// the RoPE frequency base. K and V enter the attention as `round` leaves them (the
    /// storage type's rounding: the kernel attends over the values the cache holds).
    #[allow(clippy::too_many_arguments)]
    pub fn reference(
        &self,
        x: &[f32],
        gamma: &[f32],
        eps: f32,
        w_qkv: &[f32],
        w_o: &[f32],
        k_cache: &[f32],
        v_cache: &[f32],
        base: f64,
        round: impl Fn(f32) -> f32,
    ) -> DecodeAttentionReference {
        let (h, nh, nkv, dh) = (self.hidden, self.heads, self.kv_heads, self.head_dim);
        let ms = x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / h as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        let xn: Vec<f64> = x
            .iter()
            .zip(gamma)
            .map(|(&v, &g)| v as f64 * inv * g as f64)
            .collect();
        let proj: Vec<f32> = (0..(nh + 2 * nkv) * dh)
            .map(|n| {
                let w = &w_qkv[n * h..(n + 1) * h];
                xn.iter().zip(w).map(|(a, &b)| a * b as f64).sum::<f64>() as f32
            })
            .collect();
        let rope = crate::RopeQkv {
            tokens: 1,
            heads: nh,
            kv_heads: nkv,
            head_dim: dh,
            pos0: self.pos,
            layout: crate::PairLayout::Adjacent,
        };
        let (q, k, v) = rope.reference(&proj, base);
        let mut k_all = k_cache[..self.pos * nkv * dh].to_vec();
        k_all.extend(k.iter().map(|&v| round(v)));
        let mut v_all = v_cache[..self.pos * nkv * dh].to_vec();
        v_all.extend(v.iter().map(|&v| round(v)));
        let attention = crate::KvAttention {
            tokens: 1,
            heads: nh,
            kv_heads: nkv,
            head_dim: dh,
            pos0: self.pos,
        };
        let o = attention.reference(&q, &k_all, &v_all);
        let mut parts = Vec::with_capacity(nh * h);
        for head in 0..nh {
            let oh = &o[head * dh..(head + 1) * dh];
            for i in 0..h {
                let w = &w_o[i * h + head * dh..][..dh];
                let dot: f64 = oh.iter().zip(w).map(|(&a, &b)| a as f64 * b as f64).sum();
                parts.push(dot as f32);
            }
        }
        DecodeAttentionReference {
            parts,
            q,
            k,
            v,
            k_all,
            v_all,
        }
    }
}

/// What [`DecodeAttention::reference`] computes.
#[derive(Clone, Debug)]
pub struct DecodeAttentionReference {
    /// The heads' partial O products, `[nh, H]`.
    pub parts: Vec<f32>,
    /// Q after RoPE, unscaled, `[nh, dh]`.
    pub q: Vec<f32>,
    /// The token's K (rotated) and V rows, `[nkv, dh]` each.
    pub k: Vec<f32>,
    /// The token's V rows.
    pub v: Vec<f32>,
    /// The keys attended over (the cache's and the token's, rounded), `[pos + 1, nkv, dh]`.
    pub k_all: Vec<f32>,
    /// The values attended over.
    pub v_all: Vec<f32>,
}

fn defines(
    base: ridge_core::Defines,
    qkv: QuantFormat,
    o: QuantFormat,
    hidden: usize,
    head_dim: usize,
    group: usize,
) -> ridge_core::Defines {
    base.u32("WG", WG as u32)
        .u32("H", hidden as u32)
        .u32("DH", head_dim as u32)
        .u32("G", group as u32)
        .u32("MAXKEYS", MAX_KEYS as u32)
        .u32("TPR", TPR as u32)
        .u32("wq_FORMAT", qkv.shader_id())
        .u32("wo_FORMAT", o.shader_id())
        .block("WQ", shaders::quant_blocks("wq_"))
        .block("WO", shaders::quant_blocks("wo_"))
        .block("REDUCE", shaders::REDUCE.to_string())
}

/// SmolLM2-135M's shape and a Llama-style one (32 over 8 heads of 64) in every pair of
/// formats, for both storage types: each entry point (one span, a span of a longer context,
/// its merge).
pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    for qkv in QuantFormat::ALL {
        for o in QuantFormat::ALL {
            for (h, dh, g) in [(576, 64, 3), (2048, 64, 4)] {
                let d = defines(shaders::storage_defines(dtype), qkv, o, h, dh, g);
                for entry in ["main", "partial", "merge_o"] {
                    v.push((&DECODE_ATTENTION, entry, d.clone()));
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(pos: usize) -> DecodeAttention {
        DecodeAttention {
            hidden: 576,
            heads: 9,
            kv_heads: 3,
            head_dim: 64,
            pos,
        }
    }

    /// One pass up to MAX_KEYS keys, then spans of SPAN; the span limit is the merge's
    /// MAX_KEYS weights.
    #[test]
    fn spans_and_the_longest_context() {
        assert_eq!(at(MAX_KEYS - 1).spans(), 1);
        assert_eq!(at(MAX_KEYS).spans(), (MAX_KEYS + 1).div_ceil(SPAN));
        assert_eq!(at(MAX_KEYS * SPAN - 1).spans(), MAX_KEYS);
        assert!(at(MAX_KEYS * SPAN - 1).shape_fits());
        assert_eq!(at(MAX_KEYS * SPAN).spans(), MAX_KEYS + 1);
        assert!(!at(MAX_KEYS * SPAN).shape_fits());
    }

    /// The dispatches' costs: one with one span, the spans' pass and their merge beyond,
    /// summing to the whole block's cost.
    #[test]
    fn dispatches_name_each_pass_and_sum_to_the_cost() {
        let f = QuantFormat::Q8_0;
        let one = at(100).dispatches(DType::F32, f, f);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].0, "decode_attention");
        let two = at(4095).dispatches(DType::F32, f, f);
        let names: Vec<&str> = two.iter().map(|d| d.0).collect();
        assert_eq!(names, ["decode_attention", "decode_attention_merge"]);
        let whole = at(4095).cost(DType::F32, f, f);
        let sum = two[0].1 + two[1].1;
        assert_eq!((whole.flops, whole.bytes), (sum.flops, sum.bytes));
        assert!(two.iter().all(|d| d.1.flops > 0.0 && d.1.bytes > 0.0));
    }
}
