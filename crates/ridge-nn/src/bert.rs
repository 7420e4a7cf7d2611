//! A BERT encoder built only from Ridge's kernels (Devlin et al., "BERT", NAACL 2019;
//! the layer is Hugging Face's `BertLayer`: post-norm, erf GELU).
//!
//! Per layer, for `T = batch·seq` tokens of width `H`, `nh` heads of width `dh`:
//! ```text
//! qkv   = x·W_qkvᵀ + b_qkv                      gemm      [T, 3H] = [B, S, 3, nh, dh]
//! ctx   = softmax(q·kᵀ/√dh + padding) · v        attention [B, S, nh, dh] = [T, H]
//!         (one fused kernel reading q, k, v in place from the packed projection)
//! x     = LN(x + ctx·W_oᵀ + b_o)                 gemm (β = 1 onto x) + layer_norm
//! x     = LN(x + GELU(x·W_1ᵀ + b_1)·W_2ᵀ + b_2)   gemm (GELU epilogue) + gemm (β = 1) + layer_norm
//! ```
//! Weights are uploaded once; a forward pass is one submission of dispatches with no
//! host round trip until the caller reads a result.
//!
//! Precision: f32 storage, or (opt-in, on adapters with `shader-f16`) f16 storage of weights
//! and activations with f32 accumulation in every kernel: on tensor-core adapters every
//! projection runs on the cooperative-matrix GEMM. The GPU test keeps all-MiniLM-L6-v2's f16
//! embeddings within 1e-3 of sentence-transformers' f32 ones.

use ridge_core::{Context, DType, Tensor};
use ridge_kernels::attention::Attention;
use ridge_kernels::{binary, embedding};

use crate::config::BertConfig;
use crate::error::{Error, Result};
use crate::layers::{Epilogue, Linear, Norm};
use crate::weights::Weights;

struct Layer {
    qkv: Linear,
    out: Linear,
    norm1: Norm,
    up: Linear,
    down: Linear,
    norm2: Norm,
}

/// A BERT encoder on the GPU.
pub struct Bert {
    config: BertConfig,
    dtype: DType,
    word: Tensor,
    position: Tensor,
    token_type0: Tensor,
    norm: Norm,
    layers: Vec<Layer>,
}

/// Token ids of several sequences, right-padded to one length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// `batch · seq` ids, row-major; padding uses the pad id.
    pub ids: Vec<u32>,
    /// Real tokens per sequence.
    pub lengths: Vec<u32>,
    /// Sequences.
    pub batch: usize,
    /// Padded length (the longest sequence).
    pub seq: usize,
}

impl Batch {
    /// Pads `sequences` with `pad_id` to the longest one.
    ///
    /// Errors: [`Error::Input`] for no sequences or an empty one (a tokenizer always emits
    /// at least `[CLS]` and `[SEP]`).
    pub fn new(sequences: &[Vec<u32>], pad_id: u32) -> Result<Self> {
        let seq = sequences
            .iter()
            .map(Vec::len)
            .max()
            .ok_or_else(|| Error::Input("no sequences to encode".into()))?;
        if sequences.iter().any(Vec::is_empty) {
            return Err(Error::Input("a sequence with no tokens".into()));
        }
        let mut ids = Vec::with_capacity(sequences.len() * seq);
        for s in sequences {
            ids.extend_from_slice(s);
            ids.extend(std::iter::repeat_n(pad_id, seq - s.len()));
        }
        Ok(Self {
            ids,
            lengths: sequences.iter().map(|s| s.len() as u32).collect(),
            batch: sequences.len(),
            seq,
        })
    }
}

/// The encoder's outputs, on the GPU.
pub struct Encoded {
    /// Last hidden state `[batch, seq, hidden]`; padded positions hold values that nothing
    /// downstream reads.
    pub last: Tensor,
    /// With `keep_hidden`: the embedding output and each layer's output, `[batch, seq, hidden]`.
    pub hidden: Vec<Tensor>,
    /// Real tokens per sequence, u32 `[batch]`.
    pub lengths: Tensor,
}

fn layer_norm(
    ctx: &Context,
    w: &Weights,
    prefix: &str,
    config: &BertConfig,
    dtype: DType,
) -> Result<Norm> {
    let h = config.hidden_size;
    Ok(Norm::layer(
        upload(ctx, &w.get(&format!("{prefix}.weight"), &[h])?, &[h], dtype)?,
        upload(ctx, &w.get(&format!("{prefix}.bias"), &[h])?, &[h], dtype)?,
        config.layer_norm_eps as f32,
    ))
}

fn upload(ctx: &Context, data: &[f32], shape: &[usize], dtype: DType) -> Result<Tensor> {
    Ok(Tensor::from_f32(ctx, data, shape, dtype)?)
}

impl Bert {
    /// Uploads every weight (Hugging Face `BertModel` names, with or without a `bert.`
    /// prefix) as `dtype` (f32, or f16 for the f16 path; see the module docs), checking
    /// presence and shape first.
    ///
    /// Errors: [`Error::Weights`] for a missing tensor or a wrong shape or dtype;
    /// `MissingFeature` (a GPU error) for f16 on an adapter without `shader-f16`;
    /// [`Error::Input`] for a dtype that is not a float; GPU errors.
    pub fn load(
        ctx: &Context,
        config: BertConfig,
        weights: &mut Weights,
        dtype: DType,
    ) -> Result<Self> {
        match dtype {
            DType::F32 => {}
            DType::F16 if ctx.has_f16() => {}
            DType::F16 => {
                return Err(ridge_core::Error::MissingFeature {
                    what: "the f16 BERT encoder".into(),
                    feature: "shader-f16",
                    adapter: ctx.info().name.clone(),
                }
                .into());
            }
            other => {
                return Err(Error::Input(format!(
                    "BERT runs in f32 or f16, not {other}"
                )));
            }
        }
        weights.detect_prefix("embeddings.word_embeddings.weight", "bert.");
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let w = &*weights;
        let get = |name: &str, shape: &[usize]| -> Result<Tensor> {
            upload(ctx, &w.get(name, shape)?, shape, dtype)
        };
        let linear = |name: &str, out: usize, inp: usize| -> Result<Linear> {
            Ok(Linear::Dense {
                weight: get(&format!("{name}.weight"), &[out, inp])?,
                bias: Some(get(&format!("{name}.bias"), &[out])?),
            })
        };
        let token_types = w.get(
            "embeddings.token_type_embeddings.weight",
            &[config.type_vocab_size, h],
        )?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            // Q, K and V fused into one [3H, H] weight: one GEMM instead of three.
            let mut qkv_w = Vec::with_capacity(3 * h * h);
            let mut qkv_b = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                qkv_w.extend(w.get(&format!("{p}.attention.self.{part}.weight"), &[h, h])?);
                qkv_b.extend(w.get(&format!("{p}.attention.self.{part}.bias"), &[h])?);
            }
            layers.push(Layer {
                qkv: Linear::Dense {
                    weight: upload(ctx, &qkv_w, &[3 * h, h], dtype)?,
                    bias: Some(upload(ctx, &qkv_b, &[3 * h], dtype)?),
                },
                out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                norm1: layer_norm(
                    ctx,
                    w,
                    &format!("{p}.attention.output.LayerNorm"),
                    &config,
                    dtype,
                )?,
                up: linear(&format!("{p}.intermediate.dense"), i, h)?,
                down: linear(&format!("{p}.output.dense"), h, i)?,
                norm2: layer_norm(ctx, w, &format!("{p}.output.LayerNorm"), &config, dtype)?,
            });
        }
        let bert = Self {
            word: get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?,
            position: get(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type0: upload(ctx, &token_types[..h], &[h], dtype)?,
            norm: layer_norm(ctx, w, "embeddings.LayerNorm", &config, dtype)?,
            layers,
            config,
            dtype,
        };
        // Tensors the configuration does not reach mean the two disagree (config.json with
        // num_hidden_layers 3 on a 6-layer file would run half the model without a word).
        // The pooler, a classifier head and position ids are left out by design.
        let unused = w.unused(&["pooler.", "cls.", "classifier.", "position_ids"]);
        if !unused.is_empty() {
            return Err(Error::Weights {
                path: w.path().into(),
                message: format!(
                    "{} tensors that config.json's model does not use (first: {:?}): does \
                     config.json match the weights?",
                    unused.len(),
                    &unused[..unused.len().min(4)]
                ),
            });
        }
        Ok(bert)
    }

    /// The configuration.
    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// Storage type of the weights and activations (f32 or f16).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Encodes a batch. All token-type ids are 0 (single-sentence input, as
    /// sentence-transformers uses). With `keep_hidden`, every intermediate hidden state is
    /// kept for inspection.
    ///
    /// Errors: [`Error::Input`] for an id outside the vocabulary or a sequence longer than
    /// the position table; GPU errors.
    pub fn forward(&self, ctx: &Context, batch: &Batch, keep_hidden: bool) -> Result<Encoded> {
        let c = &self.config;
        let (b, s, h) = (batch.batch, batch.seq, c.hidden_size);
        let (nh, dh) = (c.num_attention_heads, c.head_dim());
        let t = b * s;
        if s > c.max_position_embeddings {
            return Err(Error::Input(format!(
                "sequence of {s} tokens is longer than the model's {} positions",
                c.max_position_embeddings
            )));
        }
        if let Some(bad) = batch.ids.iter().find(|&&id| id as usize >= c.vocab_size) {
            return Err(Error::Input(format!(
                "token id {bad} is outside the vocabulary of {}",
                c.vocab_size
            )));
        }
        let new = |shape: &[usize]| Tensor::empty(ctx, shape, self.dtype);
        let mut hidden = Vec::new();

        // Embeddings: word + position + token type 0, then layer norm.
        ctx.set_scope("embeddings");
        let ids = Tensor::from_slice(ctx, &batch.ids, &[b, s])?;
        let lengths = Tensor::from_slice(ctx, &batch.lengths, &[b])?;
        let words = new(&[b, s, h])?;
        embedding::gather(ctx, &self.word, &ids, &words)?;
        let with_pos = new(&[b, s, h])?;
        binary(
            ctx,
            ridge_kernels::Binary::Add,
            &words,
            &self.position.narrow(0, s)?,
            &with_pos,
        )?;
        let summed = new(&[b, s, h])?;
        binary(
            ctx,
            ridge_kernels::Binary::Add,
            &with_pos,
            &self.token_type0,
            &summed,
        )?;
        let mut x = new(&[b, s, h])?;
        self.norm.forward(ctx, &summed, &x)?;
        if keep_hidden {
            hidden.push(x.clone());
        }

        for (l, layer) in self.layers.iter().enumerate() {
            ctx.set_scope_with(|| format!("layer {l} · attention"));
            let qkv = new(&[b, s, 3, nh, dh])?;
            layer.qkv.forward(ctx, &x, &qkv, Epilogue::None)?;
            // Fused attention reads Q, K and V straight out of the packed projection and writes
            // the heads side by side: no permutes, no score matrix in memory.
            let merged = new(&[b, s, nh, dh])?;
            let attention = Attention::packed_qkv(b, nh, s, dh);
            attention.run(ctx, &qkv, &qkv, &qkv, Some(&lengths), None, &merged)?;
            // The residual add rides in the GEMM's epilogue: C = merged·W_oᵀ + b_o + 1·C with
            // C holding x (a copy when x is kept as a hidden state).
            let residual = if keep_hidden {
                x.duplicate(ctx)?
            } else {
                x.clone()
            };
            layer
                .out
                .forward(ctx, &merged, &residual, Epilogue::Residual)?;
            let x1 = new(&[t, h])?;
            layer.norm1.forward(ctx, &residual, &x1)?;

            ctx.set_scope_with(|| format!("layer {l} · feed-forward"));
            let act = new(&[t, c.intermediate_size])?;
            layer.up.forward(ctx, &x1, &act, Epilogue::Gelu)?;
            // x1 is needed only as the residual: the down projection accumulates into it.
            layer.down.forward(ctx, &act, &x1, Epilogue::Residual)?;
            x = new(&[b, s, h])?;
            layer.norm2.forward(ctx, &x1, &x)?;
            if keep_hidden {
                hidden.push(x.clone());
            }
        }
        ctx.set_scope("");
        Ok(Encoded {
            last: x,
            hidden,
            lengths,
        })
    }
}
