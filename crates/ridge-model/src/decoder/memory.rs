//! What a decoder needs in GPU memory, and the largest context and batch that fit.

use serde::{Deserialize, Serialize};

use super::phase::{ACTIVATION_BYTES, KV_BYTES};
use super::{DecoderShape, ModelWeights};
use crate::hardware::GpuSpec;

/// Tokens one prefill pass processes at once (llama.cpp's default `n_ubatch`): a longer
/// prompt is processed in passes of this many, so activations stop growing past it.
pub const PREFILL_CHUNK: usize = 512;

/// The bytes of `gpu`'s memory a model may use, `None` where the spec table gives no memory:
/// Apple GPUs get about 75 % of unified memory (`recommendedMaxWorkingSetSize`, Apple's Metal
/// tech talk 10580, 2022); discrete GPUs lose a few percent to the driver and context (5 %
/// assumed).
pub fn usable_bytes(gpu: &GpuSpec) -> Option<f64> {
    let share = if super::predict::vendor(gpu) == "Apple" {
        0.75
    } else {
        0.95
    };
    gpu.memory_gb.map(|gb| gb * 1e9 * share)
}

/// Memory of `batch` sequences of `context` tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecoderMemory {
    /// Every weight tensor.
    pub weights: f64,
    /// K and V of every layer for every cached token, f16.
    pub kv_cache: f64,
    /// The live activations of one prefill pass (up to [`PREFILL_CHUNK`] tokens of all
    /// sequences together): residual stream, normed input, Q/K/V, the feed-forward's gate, up and
    /// product, and the logits.
    pub activations: f64,
}

impl DecoderMemory {
    /// Memory for `batch` sequences of up to `context` tokens.
    pub fn of(s: &DecoderShape, w: &ModelWeights, batch: usize, context: usize) -> Self {
        // In f64: a batch times a context can pass a 32-bit usize (wasm).
        let tokens = batch as f64 * context as f64;
        let rows = tokens.min(PREFILL_CHUNK as f64);
        let (d, f) = (s.hidden as f64, s.ffn as f64);
        let qkv = ((s.heads + 2 * s.kv_heads) * s.head_dim) as f64;
        Self {
            weights: w.total(s.tied_embeddings),
            kv_cache: kv_bytes_per_token(s) * tokens,
            activations: (rows * (2.0 * d + qkv + 3.0 * f) + batch as f64 * s.vocab as f64)
                * ACTIVATION_BYTES,
        }
    }

    /// Their sum.
    pub fn total(&self) -> f64 {
        self.weights + self.kv_cache + self.activations
    }

    /// The longest context of `batch` sequences whose memory stays within `budget` bytes
    /// (capped at the model's trained context); 0 when not even the weights fit.
    pub fn largest_context(s: &DecoderShape, w: &ModelWeights, batch: usize, budget: f64) -> usize {
        largest(s.context, |c| Self::of(s, w, batch, c).total() <= budget)
    }

    /// The largest batch of `context`-token sequences that fits `budget` bytes (searched up to
    /// what the KV cache alone allows, so the answer is the memory's, not a cap's).
    pub fn largest_batch(s: &DecoderShape, w: &ModelWeights, context: usize, budget: f64) -> usize {
        let per_sequence = kv_bytes_per_token(s) * context.max(1) as f64;
        let bound = (budget / per_sequence).clamp(1.0, u32::MAX as f64) as usize;
        largest(bound, |b| Self::of(s, w, b, context).total() <= budget)
    }
}

/// KV-cache bytes per cached token of one sequence: 2 (K, V) · layers · kv_heads · head_dim
/// · 2 bytes (Pope et al., "Efficiently Scaling Transformer Inference", 2022, §2).
pub fn kv_bytes_per_token(s: &DecoderShape) -> f64 {
    2.0 * (s.layers * s.kv_heads * s.head_dim) as f64 * KV_BYTES
}

/// The largest n in 1..=max with `fits(n)` (monotone), or 0.
fn largest(max: usize, fits: impl Fn(usize) -> bool) -> usize {
    if max == 0 || !fits(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1, max);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) { lo = mid } else { hi = mid - 1 }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoder::Quant;

    #[test]
    fn the_kv_cache_of_llama_3_8b_is_128_kib_a_token() {
        let s = DecoderShape::preset("llama-3-8b").unwrap();
        assert_eq!(kv_bytes_per_token(&s), 131072.0);
        let w = ModelWeights::of(&s, Quant::Q4_K_M);
        // 24 GB: the weights (4.9 GB) leave room for the whole 8192-token context …
        assert_eq!(DecoderMemory::largest_context(&s, &w, 1, 24e9), 8192);
        // … and at 8 GB about 21,000 tokens of cache in all.
        let batch = DecoderMemory::largest_batch(&s, &w, 1024, 8e9);
        assert!((18..=24).contains(&batch), "{batch}");
        assert_eq!(DecoderMemory::largest_context(&s, &w, 1, 4e9), 0);
        // A small model's batch is the memory's, not a search's cap (it once stopped at
        // 4096): SmolLM2-135M at 640 tokens in 134 GB holds thousands of sequences.
        let s = DecoderShape::preset("smollm2-135m").unwrap();
        let w = ModelWeights::of(&s, Quant::Q4_K_M);
        let batch = DecoderMemory::largest_batch(&s, &w, 640, 134e9);
        let total = |b| DecoderMemory::of(&s, &w, b, 640).total();
        assert!(batch > 4096 && total(batch) <= 134e9 && total(batch + 1) > 134e9);
    }
}
