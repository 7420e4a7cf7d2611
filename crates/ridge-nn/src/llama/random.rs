//! GGUF files of a Llama decoder's exact shape and formats with seeded random weights: for
//! timing the decoder where the real file cannot travel (the GPU machine takes 64 MiB; the
//! SmolLM2 file is 98 MB), and for tests of loading and of bad files.

use rand::{RngExt, SeedableRng, rngs::StdRng};
use ridge_kernels::quant::{QuantFormat, quantize};

use super::config::LlamaConfig;
use crate::gguf::{Value, Writer};

/// The metadata of a Llama GGUF for `config` (no tokenizer: `llama.vocab_size` gives the
/// vocabulary).
pub fn metadata(config: &LlamaConfig) -> Vec<(String, Value)> {
    let c = config;
    let u = |v: usize| Value::U32(v as u32);
    vec![
        ("general.architecture".into(), Value::String("llama".into())),
        (
            "general.name".into(),
            Value::String("random weights".into()),
        ),
        ("llama.block_count".into(), u(c.layers)),
        ("llama.context_length".into(), u(c.context)),
        ("llama.embedding_length".into(), u(c.hidden)),
        ("llama.feed_forward_length".into(), u(c.ffn)),
        ("llama.attention.head_count".into(), u(c.heads)),
        ("llama.attention.head_count_kv".into(), u(c.kv_heads)),
        (
            "llama.rope.freq_base".into(),
            Value::F32(c.rope_base as f32),
        ),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Value::F32(c.rms_eps),
        ),
        ("llama.vocab_size".into(), u(c.vocab)),
        ("llama.rope.dimension_count".into(), u(c.head_dim)),
    ]
}

/// A GGUF file for `config`: linear weights in `linear`, the (tied) embedding in `embed`,
/// norms F32 around 1. Weights are uniform in ±1/√(input width), so activations stay in range
/// through any depth.
pub fn random_gguf(
    config: &LlamaConfig,
    linear: QuantFormat,
    embed: QuantFormat,
    seed: u64,
) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let c = config;
    let mut w = Writer::new();
    for (k, v) in metadata(c) {
        w = w.meta(&k, v);
    }
    let mut matrix = |rows: usize, cols: usize, format: QuantFormat| -> (Vec<u64>, u32, Vec<u8>) {
        let a = 1.0 / (cols as f32).sqrt();
        let v: Vec<f32> = (0..rows * cols).map(|_| rng.random_range(-a..a)).collect();
        let id = match format {
            QuantFormat::Q4_0 => 2,
            QuantFormat::Q4_1 => 3,
            QuantFormat::Q8_0 => 8,
        };
        (
            vec![cols as u64, rows as u64],
            id,
            quantize(format, &v).expect("whole blocks"),
        )
    };
    let norm = |n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|i| (1.0f32 + 0.01 * (i % 7) as f32).to_le_bytes())
            .collect()
    };
    let (h, f, kv) = (c.hidden, c.ffn, c.kv_heads * c.head_dim);
    let (dims, id, data) = matrix(c.vocab, h, embed);
    w = w.tensor("token_embd.weight", &dims, id, data);
    for l in 0..c.layers {
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        w = w.tensor(&p("attn_norm"), &[h as u64], 0, norm(h));
        for (name, rows, cols) in [
            ("attn_q", h, h),
            ("attn_k", kv, h),
            ("attn_v", kv, h),
            ("attn_output", h, h),
            ("ffn_gate", f, h),
            ("ffn_up", f, h),
            ("ffn_down", h, f),
        ] {
            let (dims, id, data) = matrix(rows, cols, linear);
            w = w.tensor(&p(name), &dims, id, data);
        }
        w = w.tensor(&p("ffn_norm"), &[h as u64], 0, norm(h));
    }
    w.tensor("output_norm.weight", &[h as u64], 0, norm(h))
        .finish()
}

/// What [`smollm2_like`] holds, for labels.
pub const SMOLLM2_LIKE: &str =
    "seeded random weights of SmolLM2-135M's shape and formats (Q4_1, Q8_0 embedding)";

/// A GGUF of SmolLM2-135M's shape and formats (Q4_1 linear weights, a Q8_0 embedding, as in
/// the released `SmolLM2-135M-Instruct-Q4_1.gguf`) with seeded random weights: what the
/// generation bench and the dashboard's decode timeline time where the real file is absent.
pub fn smollm2_like(seed: u64) -> Vec<u8> {
    random_gguf(
        &LlamaConfig::smollm2_135m(),
        QuantFormat::Q4_1,
        QuantFormat::Q8_0,
        seed,
    )
}

/// `n` prompt-like token ids below `vocab`: a fixed walk through the vocabulary (steps of
/// the prime 7919, so neighbouring ids differ).
pub fn prompt_ids(n: usize, vocab: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 7919 + 13) % vocab.max(1)) as u32)
        .collect()
}
