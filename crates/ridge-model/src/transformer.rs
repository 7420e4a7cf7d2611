//! Transformer-level formulas: FLOPs per layer op by op (and the widely quoted closed
//! forms), inference and training memory, communication volume. Sources are in each
//! docstring. Conventions as in [`crate::ops`]: a multiply-add is 2 FLOPs.

use serde::{Deserialize, Serialize};

use crate::cost::OpCost;
use crate::ops;

/// The shape of a Transformer stack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransformerShape {
    /// Layers (blocks).
    pub layers: usize,
    /// Model width d.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (= heads without grouped-query attention).
    pub kv_heads: usize,
    /// Feed-forward width d_ff.
    pub intermediate: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Position-table rows (0 for rotary or no learned positions).
    pub max_positions: usize,
}

/// A config.json's `model_type` (`None` when absent or null). Errors: a value that is not a
/// name (a number, a list), refused rather than read as an untyped config.
pub(crate) fn model_type(v: &serde_json::Value) -> Result<Option<&str>, String> {
    match v.get("model_type") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(t) => t.as_str().map(Some).ok_or_else(|| {
            format!("config.json: model_type is {t}, not a name such as \"bert\" or \"llama\"")
        }),
    }
}

impl TransformerShape {
    /// all-MiniLM-L6-v2: 6 layers, d = 384, 12 heads, d_ff = 1536, vocab 30,522, 512
    /// positions (its `config.json`).
    pub fn minilm_l6() -> Self {
        Self {
            layers: 6,
            hidden: 384,
            heads: 12,
            kv_heads: 12,
            intermediate: 1536,
            vocab: 30522,
            max_positions: 512,
        }
    }

    /// Reads a Hugging Face `config.json` (BERT or Llama style field names).
    ///
    /// Errors: a message naming the missing field, a size outside what any Transformer uses
    /// (which would make the FLOP and byte counts overflow or lose exactness), or the JSON
    /// error.
    pub fn from_hf_config(json: &str) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| {
            format!("neither a preset, a GGUF file nor a JSON config.json (as JSON: {e})")
        })?;
        if !v.is_object() {
            return Err("a config.json holds one JSON object of fields".into());
        }
        // Bounds far above any published model (widths ≈ 2^14–2^16, vocabularies ≈ 2^18,
        // contexts ≈ 2^23), low enough that products such as vocab · d and d · d_ff stay exact.
        // Every size is at least 1: a layer count or width of 0 prices nothing.
        let get = |k: &str, max: u64| -> Result<Option<usize>, String> {
            match v.get(k).map(|x| x.as_u64()) {
                None => Ok(None),
                Some(Some(n)) if (1..=max).contains(&n) => Ok(Some(n as usize)),
                Some(_) => Err(format!(
                    "config.json: {k} is not a whole number in 1..={max}"
                )),
            }
        };
        let need =
            |k: &str, max: u64| get(k, max)?.ok_or_else(|| format!("config.json has no {k}"));
        // A decoder (Llama, Mistral, Qwen, GPT-2…) has the same keys but another shape of
        // computation (causal, a KV cache, no pooling): refused rather than priced as an
        // encoder.
        const ENCODERS: [&str; 6] = [
            "bert",
            "roberta",
            "xlm-roberta",
            "electra",
            "mpnet",
            "camembert",
        ];
        let model_type = model_type(&v)?;
        let causal = v
            .get("architectures")
            .and_then(|a| a.as_array())
            .is_some_and(|a| {
                a.iter().any(|x| {
                    x.as_str()
                        .is_some_and(|s| s.ends_with("ForCausalLM") || s.ends_with("LMHeadModel"))
                })
            });
        // Without either field, a decoder's own keys give it away (grouped-query heads,
        // rotary positions, RMSNorm, SiLU).
        let decoder_keys = ["num_key_value_heads", "rope_theta", "rms_norm_eps"]
            .iter()
            .any(|k| v.get(k).is_some())
            || v.get("hidden_act").and_then(|a| a.as_str()) == Some("silu");
        let untyped = model_type.is_none() && v.get("architectures").is_none();
        if causal || model_type.is_some_and(|t| !ENCODERS.contains(&t)) || (untyped && decoder_keys)
        {
            return Err(format!(
                "config.json describes a decoder ({}) that is not of the Llama family (Ridge prices Llama, Mistral and Qwen2 decoders and BERT-style encoders: {})",
                model_type.unwrap_or("a causal language model"),
                ENCODERS.join(", ")
            ));
        }
        let heads = need("num_attention_heads", 1 << 16)?;
        let hidden = need("hidden_size", 1 << 20)?;
        if heads == 0 || hidden % heads != 0 {
            return Err(format!(
                "hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
            ));
        }
        Ok(Self {
            layers: need("num_hidden_layers", 1 << 12)?,
            hidden,
            heads,
            kv_heads: get("num_key_value_heads", 1 << 16)?.unwrap_or(heads),
            intermediate: need("intermediate_size", 1 << 22)?,
            vocab: need("vocab_size", 1 << 24)?,
            max_positions: get("max_position_embeddings", 1 << 26)?.unwrap_or(0),
        })
    }

    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// Parameters of a BERT-style encoder: word, position and 2 token-type embeddings plus
    /// their layer norm; per layer Q, K, V, output projections with biases (K and V
    /// narrowed by grouped-query attention), two layer norms, the two FFN matrices with
    /// biases.
    pub fn encoder_params(&self) -> usize {
        self.embedding_params() + self.layers * self.layer_params()
    }

    /// Parameters of the embeddings: word, position and 2 token-type tables and their
    /// layer norm.
    pub fn embedding_params(&self) -> usize {
        (self.vocab + self.max_positions + 2) * self.hidden + 2 * self.hidden
    }

    /// Parameters of one encoder layer: Q, K, V and output projections with biases (K and V
    /// narrowed by grouped-query attention), two layer norms, the two FFN matrices with
    /// biases.
    pub fn layer_params(&self) -> usize {
        let (d, f) = (self.hidden, self.intermediate);
        let kv = self.kv_heads * self.head_dim();
        let attention = d * d + d + 2 * (d * kv + kv) + d * d + d;
        let ffn = d * f + f + f * d + d;
        attention + ffn + 4 * d
    }
}

/// One op of a planned forward pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedOp {
    /// Part of the model (`embeddings`, `layer 0 · attention`, …).
    pub scope: String,
    /// Op name, as the profiler names the kernel.
    pub name: String,
    /// Cost.
    pub cost: OpCost,
    /// The cost its kind's fitted terms price it at ([`crate::calibrate::Calibrated::price_planned`]).
    #[serde(default)]
    pub priced: Priced,
}

/// What a kind's fitted terms price a planned op at: `ridge bench` times a launch of a kind
/// whole, so a GEMM split along K (two dispatches, both named by its kind) is one launch of
/// its kind to the fit, not two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum Priced {
    /// Its own cost.
    #[default]
    Own,
    /// The first dispatch of a split GEMM: the whole GEMM's cost, the launch the sweep
    /// timed.
    Whole(OpCost),
    /// A split GEMM's reduce: priced inside the dispatch before it.
    Folded,
}

/// The ops of a BERT encoder forward pass with mean pooling, in the order Ridge's
/// `ridge_nn::Bert` dispatches them, for `batch` sequences of `seq` tokens at `e` bytes per
/// element, every GEMM one dispatch (see [`encoder_ops_split`] for an adapter whose GEMM
/// kernel splits K). A GPU test checks the order and names against a profiled forward pass.
pub fn encoder_ops(
    s: &TransformerShape,
    batch: usize,
    seq: usize,
    normalize: bool,
    e: usize,
) -> Vec<PlannedOp> {
    encoder_ops_split(s, batch, seq, normalize, e, &|_, _, _| 1)
}

/// As [`encoder_ops`], with each GEMM of `m × n × k` run as `splits(m, n, k)` slices of K
/// (the adapter's kernel choice: `ridge_kernels::Gemm::planned_splits`). A GEMM of s > 1
/// slices is two dispatches, both named by the launch's kind: the slices' products into s f32 partial
/// matrices (2mnk FLOPs; A, B and s·m·n f32 moved; depth ⌈k/s⌉), then a reduce adding them with the
/// epilogue (s·m·n f32 read, C written, the bias, β·C and GELU applied).
pub fn encoder_ops_split(
    s: &TransformerShape,
    batch: usize,
    seq: usize,
    normalize: bool,
    e: usize,
    splits: &dyn Fn(usize, usize, usize) -> usize,
) -> Vec<PlannedOp> {
    let (b, d, f, nh, dh) = (batch, s.hidden, s.intermediate, s.heads, s.head_dim());
    let t = b * seq;
    let mut out = Vec::new();
    let mut push = |scope: &str, name: &str, (cost, priced): (OpCost, Priced)| {
        out.push(PlannedOp {
            scope: scope.into(),
            name: name.into(),
            cost,
            priced,
        })
    };
    // A GEMM of m × n × k with a bias (and β·C with `residual`, and `epilogue` FLOPs such as
    // GELU's): one dispatch's cost, or a split one's and its reduce's.
    let gemm = |(m, n, k): (usize, usize, usize), residual: bool, epilogue: f64| {
        let whole = ops::gemm(m, n, k, 1, 1, 1, residual, true, e) + OpCost::new(epilogue, 0.0);
        let slices = splits(m, n, k).max(1);
        if slices == 1 {
            return vec![(whole, Priced::Own)];
        }
        let (mn, sl) = ((m * n) as f64, slices as f64);
        let partial_bytes = sl * mn * 4.0;
        let product = OpCost::new(
            2.0 * mn * k as f64,
            ((m * k + k * n) * e) as f64 + partial_bytes,
        )
        .with_depth(k.div_ceil(slices) as f64);
        // The reduce: the partials added, then the epilogue (whole's FLOPs beyond 2mnk).
        let epilogue_flops = whole.flops - 2.0 * mn * k as f64;
        let c_bytes = (1.0 + f64::from(u8::from(residual))) * mn * e as f64;
        let reduce = OpCost::new(
            (sl - 1.0) * mn + epilogue_flops,
            partial_bytes + c_bytes + (n * e) as f64,
        );
        vec![(product, Priced::Whole(whole)), (reduce, Priced::Folded)]
    };
    push(
        "embeddings",
        "embedding",
        (ops::embedding(t, d, e), Priced::Own),
    );
    push(
        "embeddings",
        "add",
        (ops::elementwise(t * d, seq * d, 1.0, e), Priced::Own),
    );
    push(
        "embeddings",
        "add",
        (ops::elementwise(t * d, d, 1.0, e), Priced::Own),
    );
    push(
        "embeddings",
        "layer_norm",
        (ops::norm(t, d, false, true, e), Priced::Own),
    );
    for l in 0..s.layers {
        let a = format!("layer {l} · attention");
        for c in gemm((t, 3 * d, d), false, 0.0) {
            push(&a, "linear", c);
        }
        push(
            &a,
            "attention",
            (
                ops::attention(b, nh, seq, dh, (seq * seq) as f64, e),
                Priced::Own,
            ),
        );
        // The residual add is the output projection's β = 1 epilogue.
        for c in gemm((t, d, d), true, 0.0) {
            push(&a, "linear_residual", c);
        }
        push(
            &a,
            "layer_norm",
            (ops::norm(t, d, false, true, e), Priced::Own),
        );
        let m = format!("layer {l} · feed-forward");
        // The up projection applies GELU in its epilogue (5 FLOPs per element, no bytes).
        for c in gemm((t, f, d), false, 5.0 * (t * f) as f64) {
            push(&m, "linear_gelu", c);
        }
        for c in gemm((t, d, f), true, 0.0) {
            push(&m, "linear_residual", c);
        }
        push(
            &m,
            "layer_norm",
            (ops::norm(t, d, false, true, e), Priced::Own),
        );
    }
    push(
        "pooling",
        "mean_pool",
        (ops::mean_pool(b, seq, d, normalize, e), Priced::Own),
    );
    out
}

/// Forward FLOPs of one layer for `n` tokens (one sequence), counted op by op.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerFlops {
    /// Q, K, V projections: 3 · 2·n·d² (with grouped-query attention K and V shrink).
    pub qkv: f64,
    /// Scores Q·Kᵀ: 2·n²·d.
    pub scores: f64,
    /// Softmax: 5 per score (scale, mask, max-subtract, exp, divide) over heads·n².
    pub softmax: f64,
    /// Weighted sum P·V: 2·n²·d.
    pub context: f64,
    /// Output projection: 2·n·d².
    pub out_proj: f64,
    /// Feed-forward: 2 · 2·n·d·d_ff.
    pub ffn: f64,
}

impl LayerFlops {
    /// The op-by-op count (biases, norms and activations left out, as the closed forms do;
    /// softmax kept separately).
    pub fn of(s: &TransformerShape, n: usize) -> Self {
        let (n, d, f) = (n as f64, s.hidden as f64, s.intermediate as f64);
        let kv = (s.kv_heads * s.head_dim()) as f64;
        Self {
            qkv: 2.0 * n * d * (d + 2.0 * kv),
            scores: 2.0 * n * n * d,
            softmax: 5.0 * s.heads as f64 * n * n,
            context: 2.0 * n * n * d,
            out_proj: 2.0 * n * d * d,
            ffn: 4.0 * n * d * f,
        }
    }

    /// Everything counted, softmax included.
    pub fn total(&self) -> f64 {
        self.matmul() + self.softmax
    }

    /// The matrix multiplications only (what the closed forms count).
    pub fn matmul(&self) -> f64 {
        self.qkv + self.scores + self.context + self.out_proj + self.ffn
    }
}

/// The quoted attention-sublayer cost 8·n·d² + 4·n²·d: Q, K, V and output projections
/// (4 · 2nd²) plus scores and weighted sum (2 · 2n²d), multiply-add = 2, softmax and the
/// FFN left out (e.g. Vaswani et al. 2017's per-layer complexity table turned into FLOPs;
/// Kaplan et al., "Scaling Laws for Neural Language Models", 2020, Table 1).
pub fn quoted_attention_flops(n: usize, d: usize) -> f64 {
    let (n, d) = (n as f64, d as f64);
    8.0 * n * d * d + 4.0 * n * n * d
}

/// The quoted whole-layer cost 24·n·d² + 4·n²·d: attention as above plus an FFN of width
/// 4d (16nd²), multiply-add = 2, only matrix multiplications (Narayanan et al., "Efficient
/// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC 2021, §5.1:
/// 24Bsh² + 4Bs²h per layer forward).
pub fn quoted_layer_flops(n: usize, d: usize) -> f64 {
    let (n, d) = (n as f64, d as f64);
    24.0 * n * d * d + 4.0 * n * n * d
}

/// KV cache bytes: 2 (K and V) · layers · kv_heads · head_dim · seq · batch · bytes per
/// element (Pope et al., "Efficiently Scaling Transformer Inference", 2022, §2; grouped-query
/// attention shrinks kv_heads, Ainslie et al. 2023).
pub fn kv_cache_bytes(
    layers: usize,
    kv_heads: usize,
    head_dim: usize,
    seq: usize,
    batch: usize,
    bytes: usize,
) -> f64 {
    2.0 * layers as f64
        * kv_heads as f64
        * head_dim as f64
        * seq as f64
        * batch as f64
        * bytes as f64
}

/// Inference memory of a forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct InferenceMemory {
    /// Parameters × bytes.
    pub weights: f64,
    /// Largest live activations of one layer: the residual stream, Q/K/V, the attention
    /// scores and probabilities (heads · seq² per sequence) and the FFN hidden state.
    pub activations: f64,
    /// KV cache for a decoder generating `seq` tokens (an encoder keeps none; reported for
    /// comparison).
    pub kv_cache: f64,
}

impl InferenceMemory {
    /// Memory for `batch` sequences of `seq` tokens at `bytes` per element.
    pub fn of(s: &TransformerShape, batch: usize, seq: usize, bytes: usize) -> Self {
        let (b, n, d) = (batch as f64, seq as f64, s.hidden as f64);
        let e = bytes as f64;
        let per_layer =
            b * n * (2.0 * d + 3.0 * d + s.intermediate as f64) + 2.0 * b * s.heads as f64 * n * n;
        Self {
            weights: s.encoder_params() as f64 * e,
            activations: per_layer * e,
            kv_cache: kv_cache_bytes(s.layers, s.kv_heads, s.head_dim(), seq, batch, bytes),
        }
    }

    /// Sum of the three.
    pub fn total(&self) -> f64 {
        self.weights + self.activations + self.kv_cache
    }
}

/// Training-state bytes per parameter with Adam in fp32: weights 4 + gradients 4 + two
/// moments 8 = 16 (Rajbhandari et al., "ZeRO", SC 2020, §3.1).
pub const ADAM_FP32_BYTES_PER_PARAM: f64 = 16.0;

/// Mixed precision with Adam: fp16 weights 2 + fp16 gradients 2 + fp32 master weights,
/// momentum and variance 12 = 16 (ZeRO §3.1: 2Ψ + 2Ψ + KΨ with K = 12).
pub const ADAM_MIXED_BYTES_PER_PARAM: f64 = 16.0;

/// ZeRO data-parallel partitioning (Rajbhandari et al. 2020, Figure 1) of mixed-precision
/// Adam state across `gpus`: bytes per GPU for `params` parameters. Stage 0 is plain data
/// parallelism (16Ψ); 1 partitions optimizer states (4Ψ + 12Ψ/N); 2 also gradients
/// (2Ψ + 14Ψ/N); 3 also parameters (16Ψ/N).
pub fn zero_bytes_per_gpu(params: f64, gpus: usize, stage: u8) -> f64 {
    let n = gpus.max(1) as f64;
    match stage {
        0 => 16.0 * params,
        1 => 4.0 * params + 12.0 * params / n,
        2 => 2.0 * params + 14.0 * params / n,
        _ => 16.0 * params / n,
    }
}

/// Activation bytes per layer during training with fp16 activations: s·b·h·(34 + 5·a·s/h)
/// without recomputation, 2·s·b·h with full activation checkpointing (only the layer input
/// kept), at the price of recomputing the forward pass (≈ 1/3 more compute: 4 forward-
/// equivalents instead of 3). Korthikanti et al., "Reducing Activation Recomputation in
/// Large Transformer Models", MLSys 2023, §4, eq. 1.
pub fn training_activation_bytes_per_layer(
    s: &TransformerShape,
    seq: usize,
    batch: usize,
    checkpointing: bool,
) -> f64 {
    let (sq, b, h, a) = (seq as f64, batch as f64, s.hidden as f64, s.heads as f64);
    if checkpointing {
        2.0 * sq * b * h
    } else {
        sq * b * h * (34.0 + 5.0 * a * sq / h)
    }
}

/// Bytes each GPU sends (and receives) in a ring all-reduce of `params` gradients of
/// `bytes` each over `p` GPUs: 2·(p − 1)/p · params · bytes (Patarasuk & Yuan, "Bandwidth
/// optimal all-reduce algorithms", JPDC 2009).
pub fn ring_allreduce_bytes(params: f64, bytes: usize, p: usize) -> f64 {
    let p = p.max(1) as f64;
    2.0 * (p - 1.0) / p * params * bytes as f64
}

/// GPUs of a 3-D parallel layout: data × pipeline × tensor parallel degrees (Narayanan et
/// al. 2021, §2).
pub fn gpus(data: usize, pipeline: usize, tensor: usize) -> usize {
    data * pipeline * tensor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_by_op_matches_the_quoted_forms() {
        // With d_ff = 4d and no GQA, the op-by-op matmuls are exactly the quoted forms.
        for (n, d, heads) in [(128, 384, 12), (512, 768, 12), (4096, 4096, 32)] {
            let s = TransformerShape {
                layers: 1,
                hidden: d,
                heads,
                kv_heads: heads,
                intermediate: 4 * d,
                vocab: 1,
                max_positions: 0,
            };
            let f = LayerFlops::of(&s, n);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b;
            assert!(close(f.matmul(), quoted_layer_flops(n, d)), "{n} {d}");
            assert!(close(
                f.qkv + f.out_proj + f.scores + f.context,
                quoted_attention_flops(n, d)
            ));
        }
        // n = 128, d = 384 by hand: 24·128·384² + 4·128²·384 = 452,984,832 + 25,165,824.
        assert_eq!(quoted_layer_flops(128, 384), 478_150_656.0);
        assert_eq!(
            quoted_attention_flops(128, 384),
            150_994_944.0 + 25_165_824.0
        );
    }

    #[test]
    fn kv_cache_of_a_70b_class_model_with_gqa() {
        // Llama-2-70B: 80 layers, 8 KV heads of 128, fp16: 327,680 bytes per token.
        assert_eq!(kv_cache_bytes(80, 8, 128, 1, 1, 2), 327_680.0);
        // 4096 tokens × batch 1: 1,342,177,280 bytes (1.25 GiB); without GQA (64 heads) 8×.
        assert_eq!(kv_cache_bytes(80, 8, 128, 4096, 1, 2), 1_342_177_280.0);
        assert_eq!(
            kv_cache_bytes(80, 64, 128, 4096, 1, 2),
            8.0 * 1_342_177_280.0
        );
    }

    #[test]
    fn adam_memory_of_a_6_7b_model() {
        let p = 6.7e9;
        assert_eq!(p * ADAM_FP32_BYTES_PER_PARAM, 107.2e9);
        assert_eq!(p * ADAM_MIXED_BYTES_PER_PARAM, 107.2e9);
        // ZeRO paper's 7.5B example over 64 GPUs: 120 GB, 31.4 GB, 16.6 GB, 1.88 GB.
        let z = |stage| zero_bytes_per_gpu(7.5e9, 64, stage) / 1e9;
        assert!((z(0) - 120.0).abs() < 1e-9);
        assert!((z(1) - 31.40625).abs() < 1e-9);
        assert!((z(2) - 16.640625).abs() < 1e-9);
        assert!((z(3) - 1.875).abs() < 1e-9);
    }

    #[test]
    fn minilm_parameter_count() {
        // all-MiniLM-L6-v2's model.safetensors holds 22,713,728 values: 22,565,376 encoder
        // parameters, a 384×384 + 384 pooler sentence-transformers never uses (147,840) and
        // 512 int64 position ids (checked against the file).
        assert_eq!(TransformerShape::minilm_l6().encoder_params(), 22_565_376);
    }

    #[test]
    fn communication_and_layout() {
        assert_eq!(ring_allreduce_bytes(1e9, 2, 1), 0.0);
        assert_eq!(ring_allreduce_bytes(1e9, 2, 8), 2.0 * 7.0 / 8.0 * 2e9);
        assert_eq!(gpus(8, 4, 2), 64);
        let s = TransformerShape::minilm_l6();
        let full = training_activation_bytes_per_layer(&s, 128, 32, false);
        let ckpt = training_activation_bytes_per_layer(&s, 128, 32, true);
        assert!(full > 17.0 * ckpt);
    }

    #[test]
    fn hf_configs_parse() {
        let s = TransformerShape::from_hf_config(r#"{"hidden_size":384,"num_hidden_layers":6,"num_attention_heads":12,"intermediate_size":1536,"vocab_size":30522,"max_position_embeddings":512}"#).unwrap();
        assert_eq!(s, TransformerShape::minilm_l6());
        assert!(
            TransformerShape::from_hf_config("root:x:0:0")
                .unwrap_err()
                .starts_with("neither a preset")
        );
        assert!(
            TransformerShape::from_hf_config("[]")
                .unwrap_err()
                .contains("one JSON object")
        );
        assert!(
            TransformerShape::from_hf_config("{}")
                .unwrap_err()
                .contains("num_attention_heads")
        );
        // Decoders are refused, not priced as encoders.
        let llama = r#"{"model_type":"llama","architectures":["LlamaForCausalLM"],"hidden_size":576,"num_hidden_layers":30,"num_attention_heads":9,"num_key_value_heads":3,"intermediate_size":1536,"vocab_size":49152}"#;
        assert!(
            TransformerShape::from_hf_config(llama)
                .unwrap_err()
                .contains("decoder (llama)")
        );
        let gpt = r#"{"architectures":["GPT2LMHeadModel"],"hidden_size":768,"num_hidden_layers":12,"num_attention_heads":12,"intermediate_size":3072,"vocab_size":50257}"#;
        assert!(
            TransformerShape::from_hf_config(gpt)
                .unwrap_err()
                .contains("decoder")
        );
        // No model_type nor architectures, but a Llama's keys.
        let untyped = r#"{"hidden_size":576,"num_hidden_layers":30,"num_attention_heads":9,"num_key_value_heads":3,"intermediate_size":1536,"vocab_size":49152,"rms_norm_eps":1e-5,"hidden_act":"silu"}"#;
        assert!(
            TransformerShape::from_hf_config(untyped)
                .unwrap_err()
                .contains("decoder")
        );
        let bert = r#"{"model_type":"bert","hidden_size":384,"num_hidden_layers":6,"num_attention_heads":12,"intermediate_size":1536,"vocab_size":30522}"#;
        assert!(TransformerShape::from_hf_config(bert).is_ok());
        // A model_type that is not a name: refused, not read as untyped.
        let numbered = bert.replace(r#""bert""#, "5");
        assert!(
            TransformerShape::from_hf_config(&numbered)
                .unwrap_err()
                .contains("model_type is 5")
        );
        assert!(
            crate::decoder::DecoderShape::from_hf_config("x", &numbered)
                .unwrap_err()
                .contains("model_type is 5")
        );
        // Sizes whose FLOP counts would overflow, negative and fractional sizes: refused by name.
        for (bad, field) in [
            (r#""hidden_size":1099511627776"#, "hidden_size"),
            (r#""hidden_size":-384"#, "hidden_size"),
            (r#""hidden_size":0"#, "hidden_size"),
            (r#""num_hidden_layers":0"#, "num_hidden_layers"),
            (r#""vocab_size":30522.5"#, "vocab_size"),
            (
                r#""max_position_embeddings":18446744073709551615"#,
                "max_position_embeddings",
            ),
        ] {
            let base = r#"{"hidden_size":384,"num_hidden_layers":6,"num_attention_heads":12,"intermediate_size":1536,"vocab_size":30522,"max_position_embeddings":512}"#;
            let key = &bad[..bad.find(':').unwrap()];
            let start = base.find(key).unwrap();
            let end = start + base[start..].find([',', '}']).unwrap();
            let json = format!("{}{bad}{}", &base[..start], &base[end..]);
            let err = TransformerShape::from_hf_config(&json).unwrap_err();
            assert!(err.contains(field) && err.contains("1..="), "{json}: {err}");
        }
    }

    #[test]
    fn planned_encoder_has_seven_ops_per_layer() {
        let ops = encoder_ops(&TransformerShape::minilm_l6(), 2, 16, true, 4);
        assert_eq!(ops.len(), 4 + 6 * 7 + 1);
        let flops = |name: &str| -> f64 {
            ops.iter()
                .filter(|o| o.name == name)
                .map(|o| o.cost.flops)
                .sum()
        };
        let lf = LayerFlops::of(&TransformerShape::minilm_l6(), 16);
        // Two sequences; projections and FFN are GEMMs (bias adds on top); QKᵀ, softmax and
        // P·V are the fused attention.
        let projections = lf.qkv + lf.out_proj + lf.ffn;
        let linear = flops("linear") + flops("linear_residual") + flops("linear_gelu");
        assert!(linear >= 2.0 * 6.0 * projections && linear < 2.0 * 6.0 * projections * 1.01);
        assert_eq!(flops("gemm"), 0.0);
        let attention = lf.scores + lf.context + lf.softmax;
        assert!((flops("attention") - 2.0 * 6.0 * attention).abs() < 1e-6 * attention);
    }

    /// A GEMM split along K is its product and a reduce: the same FLOPs of products plus the
    /// slices' additions, the partials' f32 bytes written once and read once more.
    #[test]
    fn split_gemms_plan_a_reduce_each() {
        let s = TransformerShape::minilm_l6();
        let whole = encoder_ops(&s, 1, 8, true, 4);
        let split_up = |_: usize, n: usize, _: usize| if n == s.intermediate { 4 } else { 1 };
        let split = encoder_ops_split(&s, 1, 8, true, 4, &split_up);
        assert_eq!(
            split.len(),
            whole.len() + s.layers,
            "one reduce per up projection"
        );
        let layer: Vec<_> = split
            .iter()
            .filter(|o| o.scope == "layer 0 · feed-forward")
            .collect();
        let names: Vec<_> = layer.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "linear_gelu",
                "linear_gelu",
                "linear_residual",
                "layer_norm"
            ]
        );
        let up_whole = &whole
            .iter()
            .find(|o| o.scope == "layer 0 · feed-forward")
            .unwrap()
            .cost;
        let (product, reduce) = (&layer[0].cost, &layer[1].cost);
        let (m, n) = (8.0, s.intermediate as f64);
        // FLOPs: 2mnk in the product; the epilogue (bias, GELU) and 3 additions a C element
        // in the reduce.
        assert!((product.flops + reduce.flops - up_whole.flops - 3.0 * m * n).abs() < 1e-6);
        // Bytes: the 4 f32 partials written by the product and read by the reduce, on top
        // of the whole GEMM's.
        let partials = 4.0 * m * n * 4.0;
        assert!((product.bytes + reduce.bytes - up_whole.bytes - 2.0 * partials).abs() < 1e-6);
        // No split: the same plan as encoder_ops.
        assert_eq!(encoder_ops_split(&s, 1, 8, true, 4, &|_, _, _| 1), whole);
    }
}
