//! Every op of one decoder forward pass with its FLOPs and fewest bytes: prefill (many new
//! tokens per sequence) and decode (one) are the same pass with a different [`Step`].
//!
//! Conventions: activations f32 (4 bytes), the KV cache f16 (2 bytes) as llama.cpp and Ridge
//! keep them; only the last position's logits are computed (llama.cpp's default outside
//! perplexity runs). Attention counts each query against every key before it
//! (causal): `4·head_dim + 5` FLOPs per pair (two dot products and the softmax, as
//! [`crate::ops::attention`]); its bytes are Q read, O written and the cache read once per
//! sequence and KV head (a fused kernel's minimum).

use serde::{Deserialize, Serialize};

use super::{DecoderShape, ModelWeights};
use crate::cost::OpCost;
use crate::transformer::PlannedOp;

/// Bytes of one activation element (f32).
pub const ACTIVATION_BYTES: f64 = 4.0;
/// Bytes of one KV-cache element (f16).
pub const KV_BYTES: f64 = 2.0;

/// One forward pass: `batch` sequences each append `tokens` new tokens after `past` cached
/// ones.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Sequences.
    pub batch: usize,
    /// New tokens per sequence (the prompt for prefill, 1 for decode).
    pub tokens: usize,
    /// Tokens already in each sequence's KV cache.
    pub past: usize,
}

/// The ops of one forward pass, in order, named by kind (`embedding`, `rms_norm`,
/// `matmul_qkv`, `rope_kv`, `attention`, `matmul_o`, `matmul_gate_up`, `matmul_down`,
/// `lm_head`).
pub fn step_ops(s: &DecoderShape, w: &ModelWeights, step: Step) -> Vec<PlannedOp> {
    let (b, t, past) = (step.batch as f64, step.tokens as f64, step.past as f64);
    let rows = b * t;
    let (d, f, v) = (s.hidden as f64, s.ffn as f64, s.vocab as f64);
    let q = (s.heads * s.head_dim) as f64;
    let kv = (s.kv_heads * s.head_dim) as f64;
    let a = ACTIVATION_BYTES;
    let mut out = Vec::new();
    let mut push = |scope: &str, name: &str, flops: f64, bytes: f64| {
        out.push(PlannedOp {
            scope: scope.into(),
            name: name.into(),
            cost: OpCost::new(flops, bytes),
            priced: Default::default(),
        })
    };
    push(
        "embeddings",
        "embedding",
        0.0,
        rows * (w.embedding_row + d * a),
    );
    // Query–key pairs per head and sequence: each new token sees the past and the new
    // tokens up to itself.
    let pairs = t * past + t * (t + 1.0) / 2.0;
    for (l, lw) in w.layers.iter().enumerate() {
        let scope = format!("layer {l}");
        let norm = |weights: f64| (5.0 * rows * d, 2.0 * rows * d * a + weights / 2.0);
        let (nf, nb) = norm(lw.norms);
        push(&scope, "rms_norm", nf, nb);
        push(
            &scope,
            "matmul_qkv",
            2.0 * rows * (q + 2.0 * kv) * d,
            lw.qkv + rows * (d + q + 2.0 * kv) * a,
        );
        // Rotate Q and K (6 FLOPs a pair of elements), append K and V to the cache.
        push(
            &scope,
            "rope_kv",
            3.0 * rows * (q + kv),
            rows * (q + 2.0 * kv) * a + rows * q * a + rows * 2.0 * kv * KV_BYTES,
        );
        push(
            &scope,
            "attention",
            b * s.heads as f64 * pairs * (4.0 * s.head_dim as f64 + 5.0),
            2.0 * rows * q * a + b * 2.0 * kv * (past + t) * KV_BYTES,
        );
        // The residual add rides in the products' epilogues (+1 FLOP, +1 read per output).
        push(
            &scope,
            "matmul_o",
            2.0 * rows * d * q + rows * d,
            lw.o + rows * (q + 2.0 * d) * a,
        );
        push(&scope, "rms_norm", nf, nb);
        // SwiGLU: silu(gate)·up, 5 FLOPs per hidden element.
        push(
            &scope,
            "matmul_gate_up",
            4.0 * rows * f * d + 5.0 * rows * f,
            lw.gate_up + rows * (d + f) * a,
        );
        push(
            &scope,
            "matmul_down",
            2.0 * rows * d * f + rows * d,
            lw.down + rows * (f + 2.0 * d) * a,
        );
    }
    // The last position of each sequence: final norm, then the LM head.
    push(
        "output",
        "rms_norm",
        5.0 * b * d,
        2.0 * b * d * a + w.final_norm,
    );
    push(
        "output",
        "lm_head",
        2.0 * b * v * d,
        w.output + b * (d + v) * a,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoder::Quant;

    #[test]
    fn decode_reads_every_weight_once_and_the_cache_grows_with_the_context() {
        let s = DecoderShape::preset("llama-3-8b").unwrap();
        let w = ModelWeights::of(&s, Quant::Q4_K_M);
        let at = |past| -> OpCost {
            step_ops(
                &s,
                &w,
                Step {
                    batch: 1,
                    tokens: 1,
                    past,
                },
            )
            .iter()
            .map(|o| o.cost)
            .sum()
        };
        let (c0, c1) = (at(0), at(1000));
        // Weights (all but the table, of which one row) and about 13 MB of activations
        // (tens of 16 kB vectors per layer, the 0.5 MB of logits).
        let weights = w.total(false) - w.embedding;
        let activations = c0.bytes - weights;
        assert!(activations > 1e6 && activations < 16e6, "{activations}");
        // 1000 more cached tokens: 32 layers × 2 × 8 heads × 128 × 2 bytes each.
        let per_token = 32.0 * 2.0 * 1024.0 * 2.0;
        assert!((c1.bytes - c0.bytes - 1000.0 * per_token).abs() < 1.0);
        // About 2 FLOPs per parameter per token.
        assert!(
            (c0.flops / (2.0 * s.params()) - 1.0).abs() < 0.1,
            "{}",
            c0.flops
        );
    }

    #[test]
    fn prefill_attention_is_causal() {
        let s = DecoderShape::preset("smollm2").unwrap();
        let w = ModelWeights::of(&s, Quant::Uniform(crate::decoder::WeightFormat::F16));
        let attention = |t| {
            step_ops(
                &s,
                &w,
                Step {
                    batch: 1,
                    tokens: t,
                    past: 0,
                },
            )
            .iter()
            .find(|o| o.name == "attention")
            .unwrap()
            .cost
            .flops
        };
        // t(t+1)/2 pairs: 4 tokens are 10 pairs, 1 token 1.
        assert_eq!(attention(4), 10.0 * attention(1));
    }
}
