//! A Llama-family decoder built only from Ridge's kernels, its weights straight from a GGUF
//! file and kept quantized on the GPU.
//!
//! Per layer, for `T` new tokens at positions `pos0..pos0 + T` (width `H`, `nh` query heads
//! and `nkv` KV heads of width `dh`, feed-forward `F`):
//! ```text
//! q, K[pos0..], V[pos0..] = RoPE(RMSNorm(x)·γ_attn·[W_q; W_k; W_v]ᵀ)   rms_qmatmul_rope
//!                                                         (the KV-cache append in its epilogue)
//! a     = softmax(q·Kᵀ/√dh, causal)·V  (GQA)              kv_attention, or attention
//!                                              (a prompt into an empty cache)  [T, nh·dh]
//! x    += a·W_oᵀ                                          qmatmul (residual epilogue)
//! g     = silu(h·W_gateᵀ) ⊙ (h·W_upᵀ), h = RMSNorm(x)·γ_ffn  rms_qmatmul (SwiGLU)  [T, F]
//! x    += g·W_downᵀ                                       qmatmul (residual epilogue)
//! ```
//! then `logits = RMSNorm(x_last)·γ_out·W_outᵀ` for the last token only (W_out is the token
//! embedding when the file has no `output.weight`: tied). 5 dispatches per layer (6 when
//! decode attention splits its keys across workgroups and merges them; see `attend.rs` for
//! which attention runs): each RMSNorm runs inside
//! the product after it, which normalises its rows of `x` as it reads them, and RoPE with
//! the KV-cache append in the Q/K/V product's epilogue.
//!
//! Where the fused attention block is chosen ([`ridge_kernels::DecodeAttention::chosen`]:
//! opt-in, off by default: slower on an H100), a decode step runs 3 dispatches per layer (4
//! past 512 keys: the block's spans, then their merge) ([`DecoderPlan::decode_attention`]):
//! the attention block's first three as one
//! (`decode_attention`: each query head's workgroup normalises `x`, computes its Q and its
//! group's K and V, attends, and writes its share `a_h·W_o[:, h]ᵀ` of the O projection into
//! row `1 + h` of the stream), then the gate/up product reading `x + Σ_h` those rows, and the
//! down projection adding them and its product into `x`.
//!
//! Precision: f32 activations and KV cache, or (opt-in, adapters with `shader-f16`) f16;
//! f32 accumulation everywhere; the weights as the file stores them (Q8_0, Q4_0, Q4_1).

mod attend;
pub mod config;
pub mod plan;
pub mod random;
pub mod timeline;
pub mod tokenizer;

use ridge_core::{Context, DType, Tensor};
use ridge_kernels::qmatmul::gather_rows;
use ridge_kernels::quant::{QuantFormat, QuantMatrix, interleave_rows};
use ridge_kernels::{PairLayout, RopeQkv, RopeTable};

use attend::Attend;

pub use config::LlamaConfig;
pub use plan::{DecoderPlan, LayerFormats, OpPrice, PlannedOp, price_ops};
pub use timeline::DecodeTimeline;

use crate::error::{Error, Result};
use crate::gguf::{Gguf, TensorInfo};
use crate::layers::{Epilogue, Linear, Norm};

struct Layer {
    attn_norm: Norm,
    /// Q, K and V as one product: `[(nh + 2·nkv)·dh, H]`.
    qkv: Linear,
    out: Linear,
    ffn_norm: Norm,
    /// Gate and up interleaved row by row, SwiGLU in the epilogue: `[2·F, H]`.
    gate_up: Linear,
    down: Linear,
}

impl Layer {
    /// The fused attention block of a decode step ([`ridge_kernels::DecodeAttention`]): reads
    /// the stream's row 0, leaves the heads' partial O products in its rows `1..=nh`.
    fn attention_block(
        &self,
        ctx: &Context,
        block: &ridge_kernels::DecodeAttention,
        stream: &Tensor,
        table: &RopeTable,
        k_cache: &Tensor,
        v_cache: &Tensor,
    ) -> Result<()> {
        let (Some(w_qkv), Some(w_o), Some((gamma, eps))) = (
            self.qkv.quantized(),
            self.out.quantized(),
            self.attn_norm.rms_terms(),
        ) else {
            return Err(Error::Input(
                "the fused attention block needs quantized weights and an RMS norm".into(),
            ));
        };
        Ok(block.run(ctx, stream, gamma, eps, w_qkv, w_o, table, k_cache, v_cache)?)
    }
}

/// A Llama-family decoder on the GPU.
pub struct Llama {
    /// The shape, the activations' type, the weights' formats.
    plan: DecoderPlan,
    /// The token embedding, looked up by id.
    embed: QuantMatrix,
    /// The output projection (the embedding itself when tied).
    output: Linear,
    output_norm: Norm,
    layers: Vec<Layer>,
    rope: RopeTable,
}

/// The keys and values of every layer for the positions seen so far, preallocated for a
/// whole context.
pub struct KvCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    capacity: usize,
    len: usize,
}

impl KvCache {
    /// Positions the cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Positions filled so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is filled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every position (the buffers are kept for the next conversation).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `len` positions (to continue a conversation whose prefix is cached).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Bytes on the GPU.
    pub fn bytes(&self) -> u64 {
        self.k.iter().chain(&self.v).map(Tensor::size_bytes).sum()
    }
}

/// What a forward pass leaves on the GPU.
pub struct Forward {
    /// Logits of the last token, `[1, vocab]`.
    pub logits: Tensor,
    /// With `keep_hidden`: the residual stream at the last token after the embedding and
    /// after each layer, `[1, hidden]` each.
    pub hidden: Vec<Tensor>,
}

/// The types of linear weights Ridge runs.
fn runs() -> String {
    QuantFormat::ALL.map(QuantFormat::name).join(", ")
}

impl Llama {
    /// Uploads every weight of a parsed GGUF file as `dtype` activations (f32, or f16 on
    /// adapters with `shader-f16`): the quantized matrices packed as they are, Q, K and V
    /// concatenated into one product, gate and up interleaved into another.
    ///
    /// Errors: as [`LlamaConfig::from_gguf`]; [`Error::Weights`] naming the tensor when one is
    /// missing, has a shape other than the configuration's, a type Ridge does not run, or
    /// when the file holds tensors the model does not use; `MissingFeature` for f16 without
    /// `shader-f16`; GPU errors.
    pub fn load(ctx: &Context, g: &Gguf, dtype: DType) -> Result<Self> {
        if dtype == DType::F16 {
            ctx.require("the f16 decoder", ridge_core::wgpu::Features::SHADER_F16)?;
        }
        let plan = DecoderPlan::from_gguf(g, dtype)?;
        let plan = DecoderPlan {
            tensor_cores: ridge_kernels::KvAttention::tensor_cores_fit(
                ctx,
                dtype,
                plan.config.head_dim,
            ),
            fused_attention: ridge_kernels::DecodeAttention::chosen()
                && plan.attention_block_at(0).fits(ctx),
            matvec: ridge_kernels::qmatmul::MatvecRule::of(ctx),
            ..plan
        };
        let c = &plan.config;
        let (h, f) = (c.hidden, c.ffn);
        let kv = c.kv_heads * c.head_dim;
        let loader = Loader { g };
        let mut layers = Vec::with_capacity(c.layers);
        for (l, formats) in plan.layers.iter().enumerate() {
            let p = |n: &str| format!("blk.{l}.{n}.weight");
            let quantized = |format, rows, cols, bytes: &[u8]| -> Result<Linear> {
                Ok(Linear::Quantized(QuantMatrix::upload(
                    ctx, format, rows, cols, bytes,
                )?))
            };
            let qkv = [
                loader.data(&p("attn_q"), h, h)?,
                loader.data(&p("attn_k"), kv, h)?,
                loader.data(&p("attn_v"), kv, h)?,
            ]
            .concat();
            let gate = loader.data(&p("ffn_gate"), f, h)?;
            let up = loader.data(&p("ffn_up"), f, h)?;
            let gate_up = interleave_rows(gate, up, h / 32 * formats.gate_up.block_bytes())?;
            let norm = |name: &str| -> Result<Norm> {
                Ok(Norm::rms(
                    loader.vector(ctx, &p(name), h, dtype)?,
                    c.rms_eps,
                ))
            };
            layers.push(Layer {
                attn_norm: norm("attn_norm")?,
                qkv: quantized(formats.qkv, h + 2 * kv, h, &qkv)?,
                out: quantized(formats.out, h, h, loader.data(&p("attn_output"), h, h)?)?,
                ffn_norm: norm("ffn_norm")?,
                gate_up: quantized(formats.gate_up, 2 * f, h, &gate_up)?,
                down: quantized(formats.down, h, f, loader.data(&p("ffn_down"), h, f)?)?,
            });
        }
        let embed = loader.data("token_embd.weight", c.vocab, h)?;
        let embed = QuantMatrix::upload(ctx, plan.embed, c.vocab, h, embed)?;
        let output = Linear::Quantized(match g.tensor("output.weight") {
            Some(_) => {
                let out = loader.data("output.weight", c.vocab, h)?;
                QuantMatrix::upload(ctx, plan.output, c.vocab, h, out)?
            }
            None => embed.clone(),
        });
        // Every tensor the model uses is loaded (a missing one named) before the file's
        // others are counted: what is left is what the model would ignore.
        let output_norm = Norm::rms(
            loader.vector(ctx, "output_norm.weight", h, dtype)?,
            c.rms_eps,
        );
        let unused: Vec<&str> = g
            .tensors()
            .iter()
            .map(|t| t.name.as_str())
            .filter(|n| !is_used(n, c.layers))
            .collect();
        if !unused.is_empty() {
            return Err(loader.err(format!(
                "{} tensors the model does not use (first: {:?})",
                unused.len(),
                &unused[..unused.len().min(8)]
            )));
        }
        Ok(Self {
            output_norm,
            rope: RopeTable::new(ctx, c.context, c.head_dim, c.rope_base)?,
            embed,
            output,
            layers,
            plan,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LlamaConfig {
        &self.plan.config
    }

    /// Storage type of activations and the KV cache.
    pub fn dtype(&self) -> DType {
        self.plan.dtype
    }

    /// Bytes of weights on the GPU.
    pub fn weight_bytes(&self) -> u64 {
        let tied = matches!(&self.output, Linear::Quantized(w) if w.quants.buffer() == self.embed.quants.buffer());
        let mut b = self.embed.bytes() + if tied { 0 } else { self.output.bytes() };
        for l in &self.layers {
            b += l.qkv.bytes() + l.out.bytes() + l.gate_up.bytes() + l.down.bytes();
            b += l.attn_norm.bytes() + l.ffn_norm.bytes();
        }
        b + self.output_norm.bytes()
    }

    /// A KV cache for `capacity` positions.
    ///
    /// Errors: [`Error::Input`] for zero positions or more than the model's context;
    /// `LimitExceeded` when a layer's cache exceeds the adapter's buffer or binding size.
    pub fn cache(&self, ctx: &Context, capacity: usize) -> Result<KvCache> {
        let c = self.config();
        if capacity == 0 || capacity > c.context {
            return Err(Error::Input(format!(
                "a context of {capacity} positions: the model runs 1 to {}",
                c.context
            )));
        }
        let shape = [capacity, c.kv_heads, c.head_dim];
        let bytes = (capacity * c.kv_heads * c.head_dim * self.dtype().size()) as u64;
        ctx.check_binding("the KV cache of one layer", bytes)?;
        let mut k = Vec::with_capacity(c.layers);
        let mut v = Vec::with_capacity(c.layers);
        for _ in 0..c.layers {
            k.push(Tensor::empty(ctx, &shape, self.dtype())?);
            v.push(Tensor::empty(ctx, &shape, self.dtype())?);
        }
        Ok(KvCache {
            k,
            v,
            capacity,
            len: 0,
        })
    }

    /// Runs `ids` (positions `cache.len()` onwards) through the model, appending their keys
    /// and values to `cache`, and returns the last token's logits. One submission of
    /// dispatches; nothing is read back.
    ///
    /// Errors: [`Error::Input`] for no ids, an id outside the vocabulary, or more positions
    /// than the cache holds; GPU errors.
    pub fn forward(
        &self,
        ctx: &Context,
        cache: &mut KvCache,
        ids: &[u32],
        keep_hidden: bool,
    ) -> Result<Forward> {
        let c = self.config();
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= c.vocab) {
            return Err(Error::Input(format!(
                "token id {bad} is outside the vocabulary of {}",
                c.vocab
            )));
        }
        if ids.is_empty() {
            return Err(Error::Input("no tokens to run".into()));
        }
        let ids_t = Tensor::from_slice(ctx, ids, &[ids.len()])?;
        self.forward_ids(ctx, cache, &ids_t, keep_hidden)
    }

    /// As [`Llama::forward`], with the ids already on the GPU (u32 `[T]`): greedy decoding
    /// feeds the argmax of one step straight into the next, so the host records step t + 1
    /// while the GPU runs step t. An id past the vocabulary embeds as zeros (the caller checks
    /// the ids it reads back).
    ///
    /// Errors: [`Error::Input`] for no ids, ids not u32, or more positions than the cache
    /// holds; GPU errors.
    pub fn forward_ids(
        &self,
        ctx: &Context,
        cache: &mut KvCache,
        ids_t: &Tensor,
        keep_hidden: bool,
    ) -> Result<Forward> {
        let c = self.config();
        let t = ids_t.numel();
        if t == 0 || ids_t.dtype() != DType::U32 {
            return Err(Error::Input(format!(
                "the ids to run must be a non-empty u32 tensor, not {} {}",
                ids_t.numel(),
                ids_t.dtype()
            )));
        }
        let pos0 = cache.len;
        if pos0 + t > cache.capacity {
            return Err(Error::Input(format!(
                "{} positions do not fit the context of {} (already {pos0})",
                pos0 + t,
                cache.capacity
            )));
        }
        let (h, nh, dh) = (c.hidden, c.heads, c.head_dim);
        let new = |shape: &[usize]| Tensor::empty(ctx, shape, self.dtype());
        let mut hidden = Vec::new();
        ctx.set_scope("embedding");
        // A decode step whose attention blocks are fused keeps the heads' partial O products
        // pending in rows 1..=nh of the stream (`x` its row 0).
        let fused = self.plan.decode_attention(t, pos0);
        let stream = new(&[t + if fused.is_some() { nh } else { 0 }, h])?;
        let x = stream.narrow(0, t)?;
        gather_rows(ctx, &self.embed, &ids_t.reshape(&[t])?, &x)?;
        let keep = |x: &Tensor, hidden: &mut Vec<Tensor>| -> Result<()> {
            if keep_hidden {
                hidden.push(x.narrow(t - 1, 1)?.duplicate(ctx)?);
            }
            Ok(())
        };
        keep(&x, &mut hidden)?;
        let (rope, attention) = self.attention_ops(t, pos0);
        for (l, layer) in self.layers.iter().enumerate() {
            ctx.set_scope_with(|| format!("layer {l} · attention"));
            let (kc, vc) = (&cache.k[l], &cache.v[l]);
            if let Some(block) = fused {
                layer.attention_block(ctx, &block, &stream, &self.rope, kc, vc)?;
            } else {
                let q = new(&[t, nh, dh])?;
                layer.qkv.forward_qkv_rope(
                    ctx,
                    &layer.attn_norm,
                    &x,
                    &rope,
                    &self.rope,
                    kc,
                    vc,
                    &q,
                )?;
                let a = new(&[t, nh, dh])?;
                attention.run(ctx, &q, kc, vc, &a)?;
                layer.out.forward(ctx, &a, &x, Epilogue::Residual)?;
            }

            ctx.set_scope_with(|| format!("layer {l} · feed-forward"));
            let act = new(&[t, c.ffn])?;
            if fused.is_some() {
                let (norm, swiglu) = (Some(&layer.ffn_norm), Epilogue::SwiGlu);
                let gate_up = &layer.gate_up;
                gate_up.forward_pending(ctx, norm, &stream, &act, swiglu, nh)?;
                let down = &layer.down;
                down.forward_pending(ctx, None, &act, &stream, Epilogue::Residual, nh)?;
            } else {
                layer
                    .gate_up
                    .forward_normed(ctx, &layer.ffn_norm, &x, &act, Epilogue::SwiGlu)?;
                layer.down.forward(ctx, &act, &x, Epilogue::Residual)?;
            }
            keep(&x, &mut hidden)?;
        }
        ctx.set_scope("output");
        let last = if t == 1 {
            x
        } else {
            x.narrow(t - 1, 1)?.duplicate(ctx)?
        };
        let logits = new(&[1, c.vocab])?;
        self.output
            .forward_normed(ctx, &self.output_norm, &last, &logits, Epilogue::None)?;
        ctx.set_scope("");
        cache.len = pos0 + t;
        Ok(Forward { logits, hidden })
    }
}

impl Llama {
    /// The dispatches of [`Llama::forward`] over `tokens` tokens at positions
    /// `pos0..pos0 + tokens`, in order, with each kernel's own cost (and the argmax of greedy
    /// decoding after it): for comparing a profile with the roofline, op by op
    /// ([`DecoderPlan::ops`]).
    pub fn plan(&self, tokens: usize, pos0: usize) -> Vec<PlannedOp> {
        self.plan.ops(tokens, pos0)
    }

    /// The RoPE + KV-append and attention ops of a forward over `t` tokens from `pos0`.
    fn attention_ops(&self, t: usize, pos0: usize) -> (RopeQkv, Attend) {
        let c = self.config();
        (
            RopeQkv {
                tokens: t,
                heads: c.heads,
                kv_heads: c.kv_heads,
                head_dim: c.head_dim,
                pos0,
                layout: PairLayout::Adjacent,
            },
            Attend::new(
                t,
                c.heads,
                c.kv_heads,
                c.head_dim,
                pos0,
                self.plan.tensor_cores,
            ),
        )
    }
}

fn is_used(name: &str, layers: usize) -> bool {
    const PARTS: [&str; 9] = [
        "attn_norm",
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_norm",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    ];
    if matches!(
        name,
        "token_embd.weight" | "output_norm.weight" | "output.weight"
    ) {
        return true;
    }
    let Some(rest) = name.strip_prefix("blk.") else {
        return false;
    };
    let Some((l, part)) = rest.split_once('.') else {
        return false;
    };
    l.parse::<usize>().is_ok_and(|l| l < layers)
        && part
            .strip_suffix(".weight")
            .is_some_and(|p| PARTS.contains(&p))
}

struct Loader<'a> {
    g: &'a Gguf,
}

impl<'a> Loader<'a> {
    fn err(&self, message: String) -> Error {
        Error::Weights {
            path: self.g.path().into(),
            message,
        }
    }

    fn info(&self, name: &str, shape: &[usize]) -> Result<&'a TensorInfo> {
        config::tensor_of_shape(self.g, name, shape)
    }

    /// The format of a `rows × cols` matrix, one Ridge runs.
    fn format(&self, name: &str, rows: usize, cols: usize) -> Result<QuantFormat> {
        let t = self.info(name, &[rows, cols])?;
        QuantFormat::from_name(t.ggml_type.name).ok_or_else(|| {
            self.err(format!(
                "tensor {name:?} is {}; Ridge runs linear weights in {}",
                t.ggml_type,
                runs()
            ))
        })
    }

    /// The ggml blocks of a `rows × cols` matrix (its format checked by
    /// [`DecoderPlan::from_gguf`]).
    fn data(&self, name: &str, rows: usize, cols: usize) -> Result<&'a [u8]> {
        Ok(self.g.data(self.info(name, &[rows, cols])?))
    }

    fn same_format(&self, parts: &[(String, QuantFormat)]) -> Result<QuantFormat> {
        let first = parts[0].1;
        match parts.iter().find(|p| p.1 != first) {
            None => Ok(first),
            Some((name, f)) => Err(self.err(format!(
                "{name:?} is {f} but {:?} is {first}: Ridge runs these as one product and \
                 needs them in one format",
                parts[0].0
            ))),
        }
    }

    /// A vector of `n` F32 (or F16) values, uploaded as `dtype`.
    fn vector(&self, ctx: &Context, name: &str, n: usize, dtype: DType) -> Result<Tensor> {
        let t = self.info(name, &[n])?;
        let data = self.g.data(t);
        let values: Vec<f32> = match t.ggml_type.name {
            "F32" => data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            "F16" => data
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(self.err(format!(
                    "tensor {name:?} is {other}; Ridge reads norm weights in F32 and F16"
                )));
            }
        };
        if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
            return Err(self.err(format!(
                "tensor {name:?} holds a non-finite value at {bad} (a corrupt file?)"
            )));
        }
        Ok(Tensor::from_f32(ctx, &values, &[n], dtype)?)
    }
}
