//! The decoder's cases: SmolLM2's and larger decoders' widths, cold weights, attention over a
//! KV cache.

use ridge_core::DType;

use super::{CaseSpec, DECODER_OPS, SweepSize, spec};
use crate::attention::Attention;

/// The quantization of the decoder cases' weights.
pub(super) const DECODER_FORMAT: crate::quant::QuantFormat = crate::quant::QuantFormat::Q4_1;
/// The decoder cases' head width.
pub(super) const DECODER_HEAD_DIM: usize = 64;
/// Bytes of weight copies a decoder product case cycles through: more than the last-level
/// cache of the GPUs Ridge has measured (the H200's L2 holds 50 MB, SmolLM2-135M's weights
/// 98 MB).
pub(super) const COLD_WEIGHT_BYTES: usize = 128 << 20;

/// SmolLM2-135M's, -360M's and -1.7B's and Qwen2.5-0.5B's (hidden, MLP, query heads, KV
/// heads): four widths, so that each decode kind's fixed cost is fitted.
pub(super) const DECODER_WIDTHS: [(usize, usize, usize, usize); 4] = [
    (576, 1536, 9, 3),
    (960, 2560, 15, 5),
    (2048, 8192, 32, 32),
    (896, 4864, 14, 2),
];

/// Qwen2.5-1.5B's, Llama-3.2-1B's and -3B's and Llama-3-8B's (hidden, MLP, query heads, KV
/// heads), in the full sweep: decode products past K = 2048, so that where the adapter rounds
/// `x` there, each kind of the integer kernel ([`crate::QMatmul::kind`]) and of the float one
/// has four widths or more.
pub(super) const LARGER_WIDTHS: [(usize, usize, usize, usize); 4] = [
    (1536, 8960, 12, 2),
    (2048, 8192, 32, 8),
    (3072, 8192, 24, 8),
    (4096, 14336, 32, 8),
];

/// The decoder cases on an adapter whose products may round `x` with `int8` bytes of
/// workgroup memory ([`crate::qmatmul::MatvecShape::int8_storage`]), a CPU driver (`cpu`) or
/// a GPU. Products: `[m, n, k]` (`n` the rows of W: 2× the MLP width for SwiGLU); with RoPE
/// `[m, heads, kv_heads, k]`; named by the kind they launch as ([`crate::QMatmul::kind`]:
/// `…_int8` where the adapter rounds `x`). Attention: `[tokens, heads, kv_heads, head_dim,
/// pos0]`, and for `kv_attention_split` the keys of a span on this adapter
/// ([`crate::KvAttention::split`]).
pub(super) fn decoder_cases(
    int8: Option<u32>,
    cpu: bool,
    dtype: DType,
    size: SweepSize,
) -> Vec<CaseSpec> {
    let full = size == SweepSize::Full;
    let mut v = Vec::new();
    // Medium (CPU drivers): three of the larger widths' decode products too, so that each
    // decode kind has seven launches and a fit may take a third term (a CPU driver's time an
    // invocation: four launches over two launch shapes held out at 1.2–1.4×).
    let larger: &[_] = if full {
        &LARGER_WIDTHS
    } else {
        &LARGER_WIDTHS[..3]
    };
    for &(h, f, nh, nkv) in DECODER_WIDTHS.iter().chain(larger) {
        // Decode: one row of x. The output and down projections (with the residual), the
        // normed gate/up and Q/K/V products, the LM head over 49,152 rows.
        v.push(spec("qmatvec", &[1, h, h], dtype));
        v.push(spec("qmatvec", &[1, h, f], dtype));
        v.push(spec("rms_qmatvec_swiglu", &[1, 2 * f, h], dtype));
        v.push(spec("rms_qmatvec_rope", &[1, nh, nkv, h], dtype));
        v.push(spec("rms_qmatvec", &[1, 49152, h], dtype));
    }
    // The full sweep's LM heads over the other common vocabularies too (Llama 2's 32,000,
    // Llama 3's 128,256) at the two small widths: the normed product's only launch a token.
    // Fitted on four launches its kind was held out at 1.18× (H100, f16); on eight, 1.03×
    // (benches/NOTES.md, 2026-12-07, fourth session).
    if full {
        for &(h, ..) in &DECODER_WIDTHS[..2] {
            for vocab in [32_000, 128_256] {
                v.push(spec("rms_qmatvec", &[1, vocab, h], dtype));
            }
        }
    }
    // Prompts at the two small widths: of 128 to 2048 tokens, and of 4096 at the smallest
    // (a fit extrapolated from 1024 priced SmolLM2's 4096-token f16 prompt 1.4× fast); on
    // CPU drivers (the medium sweep) 64 to 512 tokens. And short prompts, 3, 16 and 32
    // tokens, which the matrix-vector kernel takes (the `…_rows` kinds). Prompts of 512 and
    // 2048 tokens show the f32 prompt product's waves over the GPU (on an H100, 11.9 TFLOP/s
    // at 1024 tokens, 10.8 at 2048, 15.0 at 4096), which a fit without its waves term priced
    // 1.16× off (benches/NOTES.md, 2026-12-07, fourth session).
    for (i, &(h, f, nh, nkv)) in DECODER_WIDTHS[..2].iter().enumerate() {
        let long: &[usize] = match (full, i) {
            (true, 0) => &[3, 16, 32, 128, 512, 1024, 2048, 4096],
            (true, _) => &[3, 16, 32, 128, 512, 1024, 2048],
            (false, 0) => &[3, 16, 32, 64, 128, 512],
            (false, _) => &[3, 16, 32, 64, 128],
        };
        for &m in long {
            v.push(spec("qmatmul", &[m, h, h], dtype));
            v.push(spec("qmatmul", &[m, h, f], dtype));
            v.push(spec("rms_qmatmul_swiglu", &[m, 2 * f, h], dtype));
            v.push(spec("rms_qmatmul_rope", &[m, nh, nkv, h], dtype));
        }
    }
    let adapter = crate::qmatmul::MatvecRule {
        int8_storage: int8,
        lane_rows: cpu,
        prompt_lane_rows: cpu,
    };
    // Each product named by the kind it launches as: a prompt of up to 32 tokens (the
    // medium sweep's 16) runs the matrix-vector kernel, a kind of the decode products.
    for c in &mut v {
        let (q, n, k) = decoder_product(&c.op, &c.shape);
        c.op = q
            .kind_and_cost(DECODER_FORMAT, n, k, dtype, adapter)
            .0
            .to_string();
    }
    // Medium: six contexts a kind (on CPU drivers a launch's time moves more from launch to
    // launch, and the fit's launches are cheap).
    let (one_pass, split): (&[usize], &[usize]) = if full {
        (&[64, 128, 256, 511], &[1024, 2048, 4096, 8191])
    } else {
        (
            &[32, 64, 128, 256, 384, 511],
            &[600, 1024, 1536, 2048, 4096, 8191],
        )
    };
    // One workgroup a KV head walks a decode step's keys (a span of them where split): the
    // full sweep adds SmolLM2-360M's, Llama-3's and SmolLM2-1.7B's heads at two depths each,
    // so that a fit tells the walk's time (its depth) from the bytes read (its heads).
    let more_heads: &[(usize, usize)] = if full {
        &[(15, 5), (32, 8), (32, 32)]
    } else {
        &[]
    };
    let heads = std::iter::once((9, 3, one_pass, split)).chain(
        more_heads
            .iter()
            .map(|&(nh, nkv)| (nh, nkv, &[128, 511][..], &[2048, 8191][..])),
    );
    for (nh, nkv, one_pass, split) in heads {
        for &ctx in one_pass {
            let shape = [1, nh, nkv, DECODER_HEAD_DIM, ctx];
            v.push(spec("kv_attention", &shape, dtype));
        }
        for &ctx in split {
            let shape = [1, nh, nkv, DECODER_HEAD_DIM, ctx];
            let span = kv_attention_of(&shape).split(cpu).1;
            v.push(spec(
                "kv_attention_split",
                &[1, nh, nkv, DECODER_HEAD_DIM, ctx, span],
                dtype,
            ));
        }
    }
    // A decode step's fused attention block ([`crate::DecodeAttention`]) at the widths it
    // takes, four contexts each in one pass (the medium sweep's spread for a CPU driver's
    // noisier launches), and longer ones in spans with their merge pass.
    let (block_keys, split_keys): (&[usize], &[usize]) = if full {
        (&[64, 128, 256, 511], &[1024, 2048, 4096])
    } else {
        (&[32, 128, 384, 511], &[512, 1024])
    };
    for &(h, _, nh, nkv) in &DECODER_WIDTHS {
        let kinds = [
            ("decode_attention", block_keys),
            ("decode_attention_split", split_keys),
        ];
        for (kind, keys) in kinds {
            for &pos in keys {
                let shape = [h, nh, nkv, pos];
                if decode_attention_of(&shape).shape_fits() {
                    v.push(spec(kind, &shape, dtype));
                }
            }
        }
    }
    let prompts: &[usize] = if full {
        &[128, 256, 512, 1024, 2048, 4096]
    } else {
        &[32, 64, 128, 256, 512]
    };
    for &t in prompts {
        v.push(spec(
            "kv_attention_prefill",
            &[t, 9, 3, DECODER_HEAD_DIM, 0],
            dtype,
        ));
    }
    // Prompts from 1024 tokens, where the decoder takes the dense kernel (f32; f16 where the
    // tensor cores do not take them); the medium sweep's from 256 (the kernel's terms, at sizes
    // a CPU driver runs).
    let dense: &[(usize, usize, usize)] = if full {
        &[
            (1024, 9, 3),
            (2048, 9, 3),
            (4096, 9, 3),
            (1024, 15, 5),
            (2048, 15, 5),
        ]
    } else {
        &[
            (256, 9, 3),
            (512, 9, 3),
            (1024, 9, 3),
            (256, 15, 5),
            (512, 15, 5),
        ]
    };
    for &(t, nh, nkv) in dense {
        v.push(spec(
            "attention_causal",
            &[t, nh, nkv, DECODER_HEAD_DIM],
            dtype,
        ));
    }
    // Greedy decoding's argmax over the logits: Llama-2's, SmolLM2's, Llama-3's, Qwen2.5's
    // and Gemma's vocabularies.
    for vocab in [32_000, 49_152, 128_256, 151_936, 256_000] {
        v.push(spec("argmax", &[1, vocab], dtype));
    }
    v
}

/// A long prompt's dense causal attention `[tokens, heads, kv_heads, head_dim]`.
pub(super) fn attention_causal_of(s: &[usize]) -> Attention {
    Attention::grouped_causal(s[2], s[1] / s[2].max(1), s[0], s[3])
}

/// Whether `op` is one of the decoder's products (the [`DECODER_OPS`] with a quantized
/// product), whose flags [`decoder_product`] reads from the name.
pub(super) fn is_decoder_product(op: &str) -> bool {
    DECODER_OPS.contains(&op) && op.contains("qmat")
}

/// A decoder product case's op (its flags from the name) and W's rows.
pub(super) fn decoder_product(op: &str, s: &[usize]) -> (crate::qmatmul::QMatmul, usize, usize) {
    let q = crate::qmatmul::QMatmul {
        residual: !op.starts_with("rms_"),
        glu: op.contains("_swiglu"),
        rms_norm: op.starts_with("rms_"),
        rope: op.contains("_rope"),
        ..crate::qmatmul::QMatmul::new(s[0])
    };
    if q.rope {
        (q, (s[1] + 2 * s[2]) * DECODER_HEAD_DIM, s[3])
    } else {
        (q, s[1], s[2])
    }
}

/// The attention of a `kv_attention…` shape `[T, nh, nkv, dh, pos0]`; a
/// `kv_attention_split` shape adds the keys a span held when it was measured, which prices
/// its merge (spans of 64 keys on every adapter before 2026-12-06; since, of 128 on GPUs).
pub(super) fn kv_attention_of(s: &[usize]) -> crate::KvAttention {
    crate::KvAttention {
        tokens: s[0],
        heads: s[1],
        kv_heads: s[2],
        head_dim: s[3],
        pos0: s[4],
    }
}

/// The fused attention block of a `decode_attention` shape `[hidden, heads, kv_heads, pos]`
/// (heads of [`DECODER_HEAD_DIM`]).
pub(super) fn decode_attention_of(s: &[usize]) -> crate::DecodeAttention {
    crate::DecodeAttention {
        hidden: s[0],
        heads: s[1],
        kv_heads: s[2],
        head_dim: DECODER_HEAD_DIM,
        pos: s[3],
    }
}
