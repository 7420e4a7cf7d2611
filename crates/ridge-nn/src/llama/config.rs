//! A Llama-family decoder's hyper-parameters, read from a GGUF file's metadata
//! (`<arch>.block_count`, `<arch>.embedding_length`, …: llama.cpp's `LLM_KV_*` keys).

use crate::error::{Error, Result};
use crate::gguf::{Gguf, TensorInfo, Value};

/// Architectures Ridge runs (`general.architecture`).
pub const ARCHITECTURES: [&str; 1] = ["llama"];
/// The `general.architecture` values `ridge predict` prices from a GGUF: decoders whose
/// layers carry Llama's tensors (`attn_q/k/v/output`, `ffn_gate/up/down`).
pub const PRICED_ARCHITECTURES: [&str; 4] = ["llama", "mistral", "qwen2", "qwen3"];

/// A Llama-family decoder's shape (Touvron et al., "LLaMA", 2023): pre-norm RMSNorm blocks,
/// rotary positions, grouped-query attention, a SwiGLU feed-forward.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Transformer blocks.
    pub layers: usize,
    /// Width of the residual stream (d_model).
    pub hidden: usize,
    /// Width of the feed-forward block.
    pub ffn: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention; `heads` is a multiple).
    pub kv_heads: usize,
    /// Width of one head (`hidden / heads`).
    pub head_dim: usize,
    /// RoPE frequency base θ (from a GGUF without it, [`DEFAULT_ROPE_BASE`]).
    pub rope_base: f64,
    /// RMSNorm epsilon (a GGUF without it is refused for running, priced with 1e-5).
    pub rms_eps: f32,
    /// Longest context the model was trained for (positions).
    pub context: usize,
    /// Vocabulary size.
    pub vocab: usize,
}

/// The RoPE base θ of a GGUF without `<arch>.rope.freq_base`: llama.cpp's default
/// (`rope_freq_base_train`, 10000, the base of Su et al., "RoFormer", 2021, and Llama 1/2).
pub const DEFAULT_ROPE_BASE: f64 = 10_000.0;

// Sizes past these are refused as corrupt rather than allocated from: the decoder model's
// bounds, one set for a config.json and a GGUF, for pricing and for running (a file's
// tensors must then match the sizes, `LlamaConfig::check_tensors`).
use ridge_model::decoder::{MAX_CONTEXT, MAX_DIM, MAX_LAYERS};

impl LlamaConfig {
    /// SmolLM2-135M (Hugging Face, 2024): 30 layers, width 576, 9 heads over 3 KV heads,
    /// feed-forward 1536, θ = 100,000, 8192 positions, vocabulary 49,152.
    pub fn smollm2_135m() -> Self {
        Self {
            layers: 30,
            hidden: 576,
            ffn: 1536,
            heads: 9,
            kv_heads: 3,
            head_dim: 64,
            rope_base: 100_000.0,
            rms_eps: 1e-5,
            context: 8192,
            vocab: 49152,
        }
    }

    /// The configuration of a decoder `ridge predict` prices (a preset or a `config.json`):
    /// RoPE's base and RMSNorm's epsilon, which change neither a dispatch nor its cost, set to
    /// Llama's defaults (10,000 and 10⁻⁵).
    pub fn from_shape(shape: &ridge_model::decoder::DecoderShape) -> Self {
        Self {
            layers: shape.layers,
            hidden: shape.hidden,
            ffn: shape.ffn,
            heads: shape.heads,
            kv_heads: shape.kv_heads,
            head_dim: shape.head_dim,
            rope_base: 10_000.0,
            rms_eps: 1e-5,
            context: shape.context,
            vocab: shape.vocab,
        }
    }

    /// Reads the configuration from `g`'s metadata; the vocabulary size is the tokenizer's
    /// token count (or `<arch>.vocab_size`).
    ///
    /// Errors: [`Error::Unsupported`] for an architecture other than [`ARCHITECTURES`] or
    /// rope scaling; [`Error::Config`] naming the key for a missing, mistyped, zero, absurd or
    /// inconsistent value.
    pub fn from_gguf(g: &Gguf) -> Result<Self> {
        Self::read(g, true)
    }

    /// The shape of any decoder whose layers carry Llama's tensors ([`PRICED_ARCHITECTURES`]:
    /// Qwen2's Q/K/V biases and Qwen3's Q/K norms are a few KB a layer), for pricing it:
    /// `<arch>.attention.key_length` gives the head width where present, and rope scaling or
    /// a partial rotation, which change no op's cost, are not refused.
    ///
    /// Errors: as [`LlamaConfig::from_gguf`], for an architecture not in
    /// [`PRICED_ARCHITECTURES`].
    pub fn shape_from_gguf(g: &Gguf) -> Result<Self> {
        Self::read(g, false)
    }

    /// The configuration from `g`'s metadata: for Ridge to run it (`run`: [`ARCHITECTURES`],
    /// plain RoPE over whole heads), or to price it.
    fn read(g: &Gguf, run: bool) -> Result<Self> {
        let path = g.path();
        let cfg = |message: String| Error::Config {
            path: path.into(),
            message,
        };
        let arch = g
            .get("general.architecture")
            .and_then(Value::as_str)
            .ok_or_else(|| cfg("no general.architecture in the metadata".into()))?;
        let accepted: &[&str] = if run {
            &ARCHITECTURES
        } else {
            &PRICED_ARCHITECTURES
        };
        if !accepted.contains(&arch) {
            return Err(Error::Unsupported {
                path: path.into(),
                message: format!(
                    "architecture {arch:?} (Ridge {} decoders of: {})",
                    if run { "runs" } else { "prices" },
                    accepted.join(", ")
                ),
            });
        }
        let int = |key: &str, max: u64| -> Result<usize> {
            let full = format!("{arch}.{key}");
            match g.get(&full).map(|v| (v, v.as_u64())) {
                None => Err(cfg(format!("no {full} in the metadata"))),
                Some((_, Some(n))) if (1..=max).contains(&n) => Ok(n as usize),
                Some((v, _)) => Err(cfg(format!("{full} = {v} is not an integer in 1..={max}"))),
            }
        };
        let float = |key: &str| -> Result<Option<f64>> {
            let full = format!("{arch}.{key}");
            match g.get(&full) {
                None => Ok(None),
                Some(v) => match v.as_f64() {
                    Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
                    _ => Err(cfg(format!("{full} = {v} is not a positive number"))),
                },
            }
        };
        if let Some(kind) = g
            .get(&format!("{arch}.rope.scaling.type"))
            .and_then(Value::as_str)
            && kind != "none"
            && run
        {
            return Err(Error::Unsupported {
                path: path.into(),
                message: format!("rope scaling {kind:?} (Ridge runs plain RoPE)"),
            });
        }
        let hidden = int("embedding_length", MAX_DIM)?;
        let heads = int("attention.head_count", MAX_DIM)?;
        let kv_heads = match g.get(&format!("{arch}.attention.head_count_kv")) {
            None => heads,
            Some(_) => int("attention.head_count_kv", MAX_DIM)?,
        };
        let key_length = match g.get(&format!("{arch}.attention.key_length")) {
            Some(_) if !run => Some(int("attention.key_length", MAX_DIM)?),
            _ => None,
        };
        if (key_length.is_none() && !hidden.is_multiple_of(heads))
            || !heads.is_multiple_of(kv_heads)
        {
            return Err(cfg(format!(
                "width {hidden}, {heads} heads and {kv_heads} KV heads do not divide evenly"
            )));
        }
        let head_dim = key_length.unwrap_or(hidden / heads);
        if let Some(v) = g.get(&format!("{arch}.rope.dimension_count"))
            && v.as_u64() != Some(head_dim as u64)
            && run
        {
            return Err(Error::Unsupported {
                path: path.into(),
                message: format!(
                    "{arch}.rope.dimension_count = {v}: Ridge rotates whole heads of {head_dim}"
                ),
            });
        }
        let vocab = match g.get("tokenizer.ggml.tokens").and_then(Value::as_array) {
            Some(tokens) => {
                if g.get(&format!("{arch}.vocab_size")).is_some() {
                    let stated = int("vocab_size", MAX_DIM)?;
                    if stated != tokens.len() {
                        return Err(cfg(format!(
                            "{arch}.vocab_size = {stated}, but the tokenizer has {} tokens",
                            tokens.len()
                        )));
                    }
                }
                tokens.len()
            }
            None => int("vocab_size", MAX_DIM)?,
        };
        // The epsilon changes every norm's output: a file without it is refused for running,
        // as llama.cpp refuses it ("key not found"), rather than run with a guess; pricing
        // needs none.
        let eps_key = "attention.layer_norm_rms_epsilon";
        let rms_eps = match float(eps_key)? {
            Some(eps) => eps,
            None if run => {
                return Err(cfg(format!(
                    "no {arch}.{eps_key} in the metadata (the RMSNorm epsilon: every norm's \
                     output depends on it)"
                )));
            }
            None => 1e-5,
        };
        let config = Self {
            layers: int("block_count", MAX_LAYERS)?,
            hidden,
            ffn: int("feed_forward_length", MAX_DIM)?,
            heads,
            kv_heads,
            head_dim,
            rope_base: float("rope.freq_base")?.unwrap_or(DEFAULT_ROPE_BASE),
            rms_eps: rms_eps as f32,
            context: int("context_length", MAX_CONTEXT)?,
            vocab,
        };
        if !head_dim.is_multiple_of(2)
            || !hidden.is_multiple_of(32)
            || !config.ffn.is_multiple_of(32)
        {
            return Err(cfg(format!(
                "head width {head_dim} must be even, width {hidden} and feed-forward {} \
                 multiples of 32 (the quantized blocks)",
                config.ffn
            )));
        }
        Ok(config)
    }

    /// Every tensor a forward reads has the shape this configuration gives it (`[rows, cols]`
    /// of a matrix, `[n]` of a norm's weights; any format): a file whose metadata disagrees
    /// with its tensors is refused by name, for pricing as for running, instead of being
    /// priced or run as the metadata says. `output.weight` may be absent (tied).
    ///
    /// Errors: [`Error::Weights`] naming the first missing or misshapen tensor.
    pub fn check_tensors(&self, g: &Gguf) -> Result<()> {
        let (h, f) = (self.hidden, self.ffn);
        let (q, kv) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        let expect = |name: &str, shape: &[usize], optional: bool| -> Result<()> {
            if !(optional && g.tensor(name).is_none()) {
                tensor_of_shape(g, name, shape)?;
            }
            Ok(())
        };
        expect("token_embd.weight", &[self.vocab, h], false)?;
        expect("output.weight", &[self.vocab, h], true)?;
        expect("output_norm.weight", &[h], false)?;
        for l in 0..self.layers {
            let p = |n: &str| format!("blk.{l}.{n}.weight");
            for (n, shape) in [
                ("attn_norm", vec![h]),
                ("attn_q", vec![q, h]),
                ("attn_k", vec![kv, h]),
                ("attn_v", vec![kv, h]),
                ("attn_output", vec![h, q]),
                ("ffn_norm", vec![h]),
                ("ffn_gate", vec![f, h]),
                ("ffn_up", vec![f, h]),
                ("ffn_down", vec![h, f]),
            ] {
                expect(&p(n), &shape, false)?;
            }
        }
        Ok(())
    }

    /// Parameters (weights) of the model, for reports.
    pub fn parameters(&self) -> usize {
        let (h, f, kv) = (self.hidden, self.ffn, self.kv_heads * self.head_dim);
        let layer = h * (h + 2 * kv) + h * h + 3 * h * f + 2 * h;
        self.vocab * h + self.layers * layer + h
    }
}

/// `g`'s tensor `name`, which must have `shape` (`[rows, cols]` of a matrix, `[n]` of a
/// vector): what [`LlamaConfig::check_tensors`] checks and the loader reads through.
///
/// Errors: [`Error::Weights`] for a missing tensor or another shape.
pub(crate) fn tensor_of_shape<'a>(
    g: &'a Gguf,
    name: &str,
    shape: &[usize],
) -> Result<&'a TensorInfo> {
    let err = |message| Error::Weights {
        path: g.path().into(),
        message,
    };
    let t = g
        .tensor(name)
        .ok_or_else(|| err(format!("missing tensor {name:?}")))?;
    if t.shape() != shape {
        return Err(err(format!(
            "tensor {name:?} has shape {:?}, the metadata says {shape:?}",
            t.shape()
        )));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::FileBytes;
    use crate::gguf::Writer;
    use std::path::Path;

    /// Qwen3-0.6B's metadata (heads of 128 over a width of 1024, YaRN rope scaling):
    /// priced, not run.
    fn qwen3() -> Gguf {
        let u = |v: u32| Value::U32(v);
        let bytes = Writer::new()
            .meta("general.architecture", Value::String("qwen3".into()))
            .meta("qwen3.block_count", u(28))
            .meta("qwen3.embedding_length", u(1024))
            .meta("qwen3.feed_forward_length", u(3072))
            .meta("qwen3.attention.head_count", u(16))
            .meta("qwen3.attention.head_count_kv", u(8))
            .meta("qwen3.attention.key_length", u(128))
            .meta("qwen3.context_length", u(40960))
            .meta("qwen3.vocab_size", u(151936))
            .meta("qwen3.rope.scaling.type", Value::String("yarn".into()))
            .finish();
        Gguf::parse(FileBytes::from_bytes(Path::new("q.gguf"), bytes)).unwrap()
    }

    #[test]
    fn other_llama_like_architectures_are_priced_not_run() {
        let g = qwen3();
        let c = LlamaConfig::shape_from_gguf(&g).unwrap();
        assert_eq!(
            (c.layers, c.heads, c.kv_heads, c.head_dim),
            (28, 16, 8, 128)
        );
        let e = LlamaConfig::from_gguf(&g).unwrap_err().to_string();
        assert!(e.contains("architecture \"qwen3\""), "{e}");
    }

    /// A Llama GGUF without its RMSNorm epsilon is refused for running (llama.cpp refuses
    /// it too) and still priced; one without a RoPE base takes llama.cpp's 10000.
    #[test]
    fn a_missing_epsilon_is_refused_for_running() {
        let u = |v: u32| Value::U32(v);
        let file = |eps: bool| {
            let mut w = Writer::new()
                .meta("general.architecture", Value::String("llama".into()))
                .meta("llama.block_count", u(2))
                .meta("llama.embedding_length", u(64))
                .meta("llama.feed_forward_length", u(128))
                .meta("llama.attention.head_count", u(4))
                .meta("llama.context_length", u(256))
                .meta("llama.vocab_size", u(100));
            if eps {
                w = w.meta("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-6));
            }
            Gguf::parse(FileBytes::from_bytes(Path::new("l.gguf"), w.finish())).unwrap()
        };
        let e = LlamaConfig::from_gguf(&file(false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("llama.attention.layer_norm_rms_epsilon"), "{e}");
        assert_eq!(
            LlamaConfig::shape_from_gguf(&file(false)).unwrap().rms_eps,
            1e-5
        );
        let c = LlamaConfig::from_gguf(&file(true)).unwrap();
        assert_eq!((c.rms_eps, c.rope_base), (1e-6, DEFAULT_ROPE_BASE));
    }
}
