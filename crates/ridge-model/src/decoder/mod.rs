//! Decoder LLMs of the Llama family (Llama, Mistral, Qwen2, SmolLM2, TinyLlama): their
//! shapes ([`DecoderShape`]: presets, a Hugging Face `config.json`, or a GGUF file's metadata
//! read by the caller), their weights' bytes in any storage format or llama.cpp mix
//! ([`ModelWeights`]), every op of prefill and decode with its FLOPs and bytes ([`phase`]),
//! memory and what fits ([`memory`]), and predicted time and tokens/s on a GPU of the spec
//! table ([`predict`]).

pub mod formats;
pub mod memory;
pub mod phase;
pub mod predict;

use serde::{Deserialize, Serialize};

pub use formats::{Quant, Slot, TensorKind, WeightFormat};

/// The shape of a Llama-style decoder: RMSNorm, rotary positions, grouped-query attention,
/// SwiGLU feed-forward.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecoderShape {
    /// Name (preset, file or config).
    pub name: String,
    /// Layers (blocks).
    pub layers: usize,
    /// Model width d.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention: heads / kv_heads queries share one).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// SwiGLU hidden width (gate and up each project to it).
    pub ffn: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// The LM head is the embedding table (no `output` tensor).
    pub tied_embeddings: bool,
    /// Context length the model was trained for (`max_position_embeddings`).
    pub context: usize,
}

/// The presets, one row each, from each model's `config.json` on Hugging Face: (name, layers,
/// hidden, heads, KV heads, head width, FFN width, vocabulary, tied embeddings, context).
#[rustfmt::skip]
#[allow(clippy::type_complexity)]
pub const PRESETS: &[(&str, usize, usize, usize, usize, usize, usize, usize, bool, usize)] = &[
    ("smollm2-135m",   30,  576,  9,  3,  64,  1536,  49152, true,    8192),
    ("smollm2-360m",   32,  960, 15,  5,  64,  2560,  49152, true,    8192),
    ("smollm2-1.7b",   24, 2048, 32, 32,  64,  8192,  49152, true,    8192),
    ("tinyllama-1.1b", 22, 2048, 32,  4,  64,  5632,  32000, false,   2048),
    ("llama-3.2-1b",   16, 2048, 32,  8,  64,  8192, 128256, true,  131072),
    ("llama-3.2-3b",   28, 3072, 24,  8, 128,  8192, 128256, true,  131072),
    ("llama-2-7b",     32, 4096, 32, 32, 128, 11008,  32000, false,   4096),
    ("llama-3-8b",     32, 4096, 32,  8, 128, 14336, 128256, false,   8192),
    ("llama-3.1-8b",   32, 4096, 32,  8, 128, 14336, 128256, false, 131072),
    ("mistral-7b",     32, 4096, 32,  8, 128, 14336,  32000, false,  32768),
    ("qwen2.5-0.5b",   24,  896, 14,  2,  64,  4864, 151936, true,   32768),
    ("qwen2.5-1.5b",   28, 1536, 12,  2, 128,  8960, 151936, true,   32768),
    ("qwen2.5-7b",     28, 3584, 28,  4, 128, 18944, 152064, false,  32768),
    ("llama-2-13b",    40, 5120, 40, 40, 128, 13824,  32000, false,   4096),
    ("llama-3-70b",    80, 8192, 64,  8, 128, 28672, 128256, false,   8192),
    ("llama-3.1-70b",  80, 8192, 64,  8, 128, 28672, 128256, false, 131072),
    ("qwen2.5-3b",     36, 2048, 16,  2, 128, 11008, 151936, true,   32768),
    ("qwen2.5-14b",    48, 5120, 40,  8, 128, 13824, 152064, false, 131072),
    ("qwen2.5-32b",    64, 5120, 40,  8, 128, 27648, 152064, false, 131072),
    ("deepseek-r1-distill-qwen-1.5b", 28, 1536, 12, 2, 128, 8960, 151936, false, 131072),
    ("qwen3-0.6b",     28, 1024, 16,  8, 128,  3072, 151936, true,   40960),
    ("qwen3-1.7b",     28, 2048, 16,  8, 128,  6144, 151936, true,   40960),
    ("qwen3-4b",       36, 2560, 32,  8, 128,  9728, 151936, true,   40960),
    ("qwen3-8b",       36, 4096, 32,  8, 128, 12288, 151936, false,  40960),
    ("qwen3-14b",      40, 5120, 40,  8, 128, 17408, 151936, false,  40960),
    ("phi-3-mini",     32, 3072, 32, 32,  96,  8192,  32064, false,   4096),
    ("mistral-nemo-12b", 40, 5120, 32, 8, 128, 14336, 131072, false, 128000),
];

/// Bounds far above any published decoder (widths ≈ 2¹⁴, vocabularies ≈ 2¹⁸, contexts ≈ 2²⁰),
/// low enough that products such as vocab · d · layers stay exact in f64: a width, head
/// count, feed-forward width or vocabulary past [`MAX_DIM`], a layer count past
/// [`MAX_LAYERS`] or a context past [`MAX_CONTEXT`] is refused as corrupt, from a
/// config.json as from a GGUF's metadata.
pub const MAX_DIM: u64 = 1 << 20;
/// See [`MAX_DIM`].
pub const MAX_LAYERS: u64 = 1 << 12;
/// See [`MAX_DIM`].
pub const MAX_CONTEXT: u64 = 1 << 24;

impl DecoderShape {
    /// The named presets, from each model's `config.json` on Hugging Face ([`PRESETS`]).
    pub fn presets() -> Vec<DecoderShape> {
        PRESETS
            .iter()
            .map(
                |&(name, layers, hidden, heads, kv_heads, head_dim, ffn, vocab, tied, context)| {
                    DecoderShape {
                        name: name.into(),
                        layers,
                        hidden,
                        heads,
                        kv_heads,
                        head_dim,
                        ffn,
                        vocab,
                        tied_embeddings: tied,
                        context,
                    }
                },
            )
            .collect()
    }

    /// The preset `name` (any case; `smollm2` is SmolLM2-135M).
    pub fn preset(name: &str) -> Option<DecoderShape> {
        let n = name.to_lowercase();
        let n = if n == "smollm2" {
            "smollm2-135m".into()
        } else {
            n
        };
        Self::presets().into_iter().find(|p| p.name == n)
    }

    /// Whether a `config.json` describes a decoder this module models: its `architectures`
    /// or `model_type` names Llama, Mistral or Qwen2, or, with neither, it has a Llama's keys.
    pub fn is_decoder_config(json: &str) -> bool {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
            return false;
        };
        let names: Vec<String> = v["architectures"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_lowercase))
            .chain(v["model_type"].as_str().map(str::to_lowercase))
            .collect();
        let named = names
            .iter()
            .any(|n| ["llama", "mistral", "qwen2"].iter().any(|k| n.contains(k)));
        // A config with neither field: a Llama's own keys (grouped-query heads, rotary
        // positions, RMSNorm, SiLU) make it one.
        let untyped = v.get("model_type").is_none() && v.get("architectures").is_none();
        let llama_keys = ["num_key_value_heads", "rope_theta", "rms_norm_eps"]
            .iter()
            .any(|k| v.get(k).is_some())
            || v["hidden_act"].as_str() == Some("silu");
        named || (untyped && llama_keys)
    }

    /// Reads a Hugging Face `config.json` of a Llama, Mistral or Qwen2 model.
    ///
    /// Errors: a message naming a missing or impossible field (heads that do not divide the
    /// width, KV heads that do not divide the heads, sizes beyond any published model).
    pub fn from_hf_config(name: &str, json: &str) -> Result<DecoderShape, String> {
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        crate::transformer::model_type(&v)?;
        let get = |k: &str, max: u64| -> Result<Option<usize>, String> {
            match v.get(k) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(x) => match x.as_u64() {
                    Some(n) if (1..=max).contains(&n) => Ok(Some(n as usize)),
                    _ => Err(format!(
                        "config.json: {k} is not a whole number in 1..={max}"
                    )),
                },
            }
        };
        let need = |k: &str, max: u64| get(k, max)?.ok_or_else(|| format!("config.json: no {k}"));
        let hidden = need("hidden_size", MAX_DIM)?;
        let heads = need("num_attention_heads", MAX_DIM)?;
        let kv_heads = get("num_key_value_heads", MAX_DIM)?.unwrap_or(heads);
        let head_dim = match get("head_dim", MAX_DIM)? {
            Some(d) => d,
            None if hidden.is_multiple_of(heads) => hidden / heads,
            None => {
                return Err(format!(
                    "config.json: {heads} heads do not divide hidden_size {hidden} and there is no head_dim"
                ));
            }
        };
        let s = DecoderShape {
            name: name.into(),
            layers: need("num_hidden_layers", MAX_LAYERS)?,
            hidden,
            heads,
            kv_heads,
            head_dim,
            ffn: need("intermediate_size", MAX_DIM)?,
            vocab: need("vocab_size", MAX_DIM)?,
            tied_embeddings: v["tie_word_embeddings"].as_bool().unwrap_or(false),
            context: get("max_position_embeddings", MAX_CONTEXT)?.unwrap_or(4096),
        };
        s.check()?;
        Ok(s)
    }

    /// Checks what every source must satisfy: sizes in range, KV heads dividing the heads.
    pub fn check(&self) -> Result<(), String> {
        let in_range = |v: usize, max: u64| v >= 1 && v as u64 <= max;
        let dims = [
            self.hidden,
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.ffn,
            self.vocab,
        ];
        if !dims.iter().all(|&d| in_range(d, MAX_DIM))
            || !in_range(self.layers, MAX_LAYERS)
            || !in_range(self.context, MAX_CONTEXT)
        {
            return Err(format!(
                "{}: a size is 0 or beyond any published decoder",
                self.name
            ));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(format!(
                "{}: {} KV heads do not divide {} query heads",
                self.name, self.kv_heads, self.heads
            ));
        }
        Ok(())
    }

    /// Parameters: embedding (and LM head when untied), per layer the Q, K, V, O and three
    /// feed-forward matrices and two norms, and the final norm.
    pub fn params(&self) -> f64 {
        let (d, v) = (self.hidden as f64, self.vocab as f64);
        let embed = if self.tied_embeddings {
            v * d
        } else {
            2.0 * v * d
        };
        let l = self.layer_params();
        embed + self.layers as f64 * (l.iter().map(|(_, n, _)| n).sum::<f64>() + 2.0 * d) + d
    }

    /// The weight matrices of one layer: kind, element count, and the weights in a row (the
    /// product's input width, which decides llama.cpp's fallbacks: [`Slot::row`]).
    fn layer_params(&self) -> [(TensorKind, f64, usize); 5] {
        let (d, f) = (self.hidden as f64, self.ffn as f64);
        let (q, kv) = (
            (self.heads * self.head_dim) as f64,
            (self.kv_heads * self.head_dim) as f64,
        );
        [
            (TensorKind::AttnQK, d * q + d * kv, self.hidden),
            (TensorKind::AttnV, d * kv, self.hidden),
            (TensorKind::AttnOutput, q * d, self.heads * self.head_dim),
            (TensorKind::FfnGateUp, 2.0 * d * f, self.hidden),
            (TensorKind::FfnDown, f * d, self.ffn),
        ]
    }
}

/// Bytes of one layer's weights, by the matrices each op reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerBytes {
    /// Q, K and V (one product over the normed input).
    pub qkv: f64,
    /// The attention output projection.
    pub o: f64,
    /// Gate and up.
    pub gate_up: f64,
    /// Down.
    pub down: f64,
    /// The two RMSNorm weights.
    pub norms: f64,
}

impl LayerBytes {
    /// Their sum.
    pub fn total(&self) -> f64 {
        self.qkv + self.o + self.gate_up + self.down + self.norms
    }
}

/// What a model's weights take, tensor group by tensor group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelWeights {
    /// How they are stored (`Q4_K_M`, or `from the GGUF's tensors`).
    pub format: String,
    /// The embedding table.
    pub embedding: f64,
    /// Bytes of one embedding row (what a lookup reads per token).
    pub embedding_row: f64,
    /// The LM head (the embedding table again when tied).
    pub output: f64,
    /// Each layer.
    pub layers: Vec<LayerBytes>,
    /// The final norm.
    pub final_norm: f64,
}

impl ModelWeights {
    /// Mean bytes per weight of the layers' matrices (the first layer's; norms left out):
    /// 4 for f32, 2 for f16 and bf16, 1.0625 for Q8_0, 0.5625 for Q4_0.
    pub fn matrix_bytes_per_weight(&self, shape: &DecoderShape) -> f64 {
        let params: f64 = shape.layer_params().iter().map(|p| p.1).sum();
        match self.layers.first() {
            Some(l) if params > 0.0 => (l.total() - l.norms) / params,
            _ => 0.0,
        }
    }

    /// The bytes of `shape` stored as `quant` (llama.cpp's per-tensor choice for mixes).
    pub fn of(shape: &DecoderShape, quant: Quant) -> ModelWeights {
        let n = shape.layers;
        let (d, v) = (shape.hidden as f64, shape.vocab as f64);
        let gqa = shape.heads / shape.kv_heads.max(1);
        let bytes = |kind: TensorKind, layer: usize, elems: f64, row: usize| {
            let slot = Slot {
                kind,
                layer,
                layers: n,
                gqa,
                row,
            };
            elems * quant.format(slot).bytes_per_weight()
        };
        // A tied table is stored as the LM head is (llama.cpp quantizes it by the output
        // rules).
        let embed_kind = if shape.tied_embeddings {
            TensorKind::Output
        } else {
            TensorKind::Embedding
        };
        let embedding = bytes(embed_kind, 0, v * d, shape.hidden);
        let layers = (0..n)
            .map(|l| {
                let part = |k: TensorKind| {
                    let (kind, elems, row) = shape
                        .layer_params()
                        .into_iter()
                        .find(|p| p.0 == k)
                        .unwrap_or((k, 0.0, 1));
                    bytes(kind, l, elems, row)
                };
                LayerBytes {
                    qkv: part(TensorKind::AttnQK) + part(TensorKind::AttnV),
                    o: part(TensorKind::AttnOutput),
                    gate_up: part(TensorKind::FfnGateUp),
                    down: part(TensorKind::FfnDown),
                    norms: 2.0 * d * 4.0,
                }
            })
            .collect();
        ModelWeights {
            format: quant.name().into(),
            embedding,
            embedding_row: embedding / v,
            output: if shape.tied_embeddings {
                embedding
            } else {
                bytes(TensorKind::Output, 0, v * d, shape.hidden)
            },
            layers,
            final_norm: d * 4.0,
        }
    }

    /// Bytes of every tensor (a tied table counted once).
    pub fn total(&self, tied: bool) -> f64 {
        let head = if tied { 0.0 } else { self.output };
        self.embedding
            + head
            + self.final_norm
            + self.layers.iter().map(LayerBytes::total).sum::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_the_published_parameter_counts() {
        // (preset, parameters in billions as the model cards state them, tolerance)
        for (name, billions) in [
            ("smollm2-135m", 0.135),
            ("llama-2-7b", 6.74),
            ("llama-3-8b", 8.03),
            ("mistral-7b", 7.24),
            ("qwen2.5-7b", 7.6),
            ("llama-3.2-1b", 1.24),
            ("tinyllama-1.1b", 1.1),
            // As llama-bench prints them (its "params" column).
            ("llama-3.1-70b", 70.55),
            ("qwen2.5-14b", 14.77),
            ("deepseek-r1-distill-qwen-1.5b", 1.78),
            ("phi-3-mini", 3.82),
        ] {
            let s = DecoderShape::preset(name).expect(name);
            s.check().expect(name);
            let got = s.params() / 1e9;
            // Qwen's QKV biases and rounding in the cards: within 1.5 %.
            assert!((got / billions - 1.0).abs() < 0.015, "{name}: {got} B");
        }
    }

    #[test]
    fn file_sizes_match_llama_cpps() {
        // llama-bench prints the file size: Llama 2 7B Q4_0 3.56 GiB (llama.cpp PR #2917),
        // Llama 3 8B Q4_K_M 4.58 GiB (XiongjieDai/GPU-Benchmarks-on-LLM-Inference).
        let gib = |s: &str, q: Quant| {
            let s = DecoderShape::preset(s).unwrap();
            ModelWeights::of(&s, q).total(s.tied_embeddings) / (1u64 << 30) as f64
        };
        let q4_0 = gib("llama-2-7b", Quant::Uniform(WeightFormat::Q4_0));
        assert!((q4_0 - 3.56).abs() < 0.02, "{q4_0}");
        let q4_k_m = gib("llama-3-8b", Quant::Q4_K_M);
        assert!((q4_k_m - 4.58).abs() < 0.03, "{q4_k_m}");
        let f16 = gib("llama-3-8b", Quant::Uniform(WeightFormat::F16));
        assert!((f16 - 14.96).abs() < 0.05, "{f16}");
        // `llama-quantize --help` lists each file type's size for Llama 3 8B (GiB,
        // tools/quantize/quantize.cpp's QUANT_OPTIONS).
        for (name, size) in [
            ("Q2_K", 2.96),
            ("Q3_K_S", 3.41),
            ("Q3_K_M", 3.74),
            ("Q3_K_L", 4.03),
            ("Q4_K_S", 4.37),
            ("Q4_K_M", 4.58),
            ("Q5_K_S", 5.21),
            ("Q5_K_M", 5.33),
            ("Q6_K", 6.14),
            ("Q8_0", 7.96),
        ] {
            let got = gib("llama-3-8b", Quant::parse(name).unwrap());
            println!("{name}: {got:.3} GiB, llama-quantize {size}");
            assert!((got / size - 1.0).abs() < 0.005, "{name}: {got} GiB");
        }
    }

    #[test]
    fn configs_are_read_and_bad_ones_refused() {
        let llama = r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 576,
            "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
            "intermediate_size": 1536, "vocab_size": 49152, "tie_word_embeddings": true,
            "max_position_embeddings": 8192}"#;
        assert!(DecoderShape::is_decoder_config(llama));
        let s = DecoderShape::from_hf_config("smol", llama).unwrap();
        assert_eq!(
            s,
            DecoderShape {
                name: "smol".into(),
                ..DecoderShape::preset("smollm2").unwrap()
            }
        );
        let bert = r#"{"architectures": ["BertModel"], "hidden_size": 384}"#;
        assert!(!DecoderShape::is_decoder_config(bert));
        // Neither field, but a Llama's keys.
        let untyped = llama.replace("\"architectures\": [\"LlamaForCausalLM\"],", "");
        assert!(DecoderShape::is_decoder_config(&untyped));
        assert!(DecoderShape::from_hf_config("x", &untyped).is_ok());
        let bad_kv = llama.replace("\"num_key_value_heads\": 3", "\"num_key_value_heads\": 4");
        assert!(
            DecoderShape::from_hf_config("x", &bad_kv)
                .unwrap_err()
                .contains("do not divide")
        );
        let no_layers = llama.replace("\"num_hidden_layers\": 30,", "");
        assert!(
            DecoderShape::from_hf_config("x", &no_layers)
                .unwrap_err()
                .contains("num_hidden_layers")
        );
        let zero = llama.replace("\"hidden_size\": 576", "\"hidden_size\": 0");
        assert!(DecoderShape::from_hf_config("x", &zero).is_err());
    }
}
