//! The benchmark sweep: every kernel over sizes that cross the ridge point, each case with
//! its cost and a launcher, for `ridge bench` (and the dashboard) to time.

use ridge_core::{Context, DType, Result};
use ridge_model::OpCost;
use serde::{Deserialize, Serialize};

use crate::elementwise::{Binary, Unary};
use crate::gemm::Gemm;
use crate::layout;
use crate::norm::{Norm, NormKind};
use crate::softmax::Softmax;

mod decoder;
mod prepare;

use decoder::{
    DECODER_FORMAT, attention_causal_of, decode_attention_of, decoder_cases, decoder_product,
    is_decoder_product, kv_attention_of,
};
pub use prepare::prepare;

/// How far a sweep goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SweepSize {
    /// Up to 256³ GEMMs and a few MB per memory-bound op: minutes on a CPU driver.
    Quick,
    /// Every kind of the full sweep (the Linear layers', the f16 encoder's and the decoder's
    /// too) with enough launches to fit each kind's terms (`ridge_model::calibrate`: five
    /// sizes a kind where the full sweep has five), at sizes a CPU driver runs: GEMM to 512³,
    /// Linear layers at MiniLM's 16 to 4096 rows, prompts to 512 tokens, attention to 1024.
    /// About 10 minutes on lavapipe with 2 cores.
    Medium,
    /// GEMM 64³ … 4096³ and memory-bound ops up to hundreds of MB: for real GPUs.
    Full,
}

impl SweepSize {
    /// Every size by its name, as `ridge bench --size` and the browser's `Ridge.bench` take it.
    pub const NAMES: [(&'static str, SweepSize); 3] = [
        ("quick", SweepSize::Quick),
        ("medium", SweepSize::Medium),
        ("full", SweepSize::Full),
    ];

    /// The size named `name` ([`SweepSize::NAMES`]), `None` for any other.
    pub fn parse(name: &str) -> Option<SweepSize> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, s)| *s == self)
            .map(|(n, _)| *n)
            .expect("every size is named")
    }
}

/// One benchmark case: an op, its problem shape and storage type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseSpec {
    /// Op name (as in profiles).
    pub op: String,
    /// Problem shape: GEMM `[m, n, k]`; norms and softmax `[rows, cols]`; element-wise `[n]`;
    /// layout ops the input shape.
    pub shape: Vec<usize>,
    /// Storage type.
    pub dtype: DType,
}

/// Records one launch of a prepared case.
pub type Launcher = Box<dyn Fn(&Context) -> Result<()>>;

/// A case with its tensors allocated.
pub struct Prepared {
    /// FLOPs and bytes of one launch.
    pub cost: OpCost,
    /// Records one launch.
    pub launch: Launcher,
}

fn spec(op: &str, shape: &[usize], dtype: DType) -> CaseSpec {
    CaseSpec {
        op: op.into(),
        shape: shape.to_vec(),
        dtype,
    }
}

/// Every op the sweep times, by name.
pub const OPS: [&str; 35] = [
    "gemm",
    "linear",
    "linear_residual",
    "linear_gelu",
    "layer_norm",
    "rms_norm",
    "softmax",
    "gelu",
    "add",
    "transpose",
    "nchw_to_nhwc",
    "nhwc_to_nchw",
    "attention",
    "sparse_attention",
    "qmatvec",
    "rms_qmatvec",
    "rms_qmatvec_swiglu",
    "rms_qmatvec_rope",
    "qmatmul",
    "rms_qmatmul_swiglu",
    "rms_qmatmul_rope",
    "kv_attention",
    "kv_attention_prefill",
    "kv_attention_split",
    "attention_causal",
    "qmatvec_int8",
    "rms_qmatvec_int8",
    "rms_qmatvec_swiglu_int8",
    "rms_qmatvec_rope_int8",
    "qmatvec_rows",
    "rms_qmatvec_swiglu_rows",
    "rms_qmatvec_rope_rows",
    "argmax",
    "decode_attention",
    "decode_attention_split",
];

/// The encoder's `Linear` layers as it launches them ([`Gemm::kind`]): `x·Wᵀ + b` with the
/// weight stored N × K, plain (`linear`, the fused Q/K/V projection), with the residual add
/// fused (`linear_residual`, the attention output and MLP down projections) or GELU
/// (`linear_gelu`, the MLP up projection); swept in the full sweep, or when named, at
/// MiniLM's shapes from 128 to 4096 rows (batch 1 to 32 sentences of 128 tokens).
pub const LINEAR_OPS: &[&str] = OPS.split_at(4).0.split_at(1).1;

/// The decoder's ops, [`OPS`] from its 15th: each the kernel (and profile name) a decoder
/// forward launches — the products with their fused prologue and epilogues (`qmatvec` and
/// `qmatmul` with the residual add, the RMSNorm in `rms_`, SwiGLU, RoPE with the KV-cache
/// append) and attention over the KV cache for one token (`kv_attention`, up to 512 keys: one
/// pass; `kv_attention_split`, longer contexts: keys split across workgroups, then the merge
/// pass, timed together) or a prompt (`kv_attention_prefill`), and a long prompt's dense
/// causal attention from an empty cache (`attention_causal`,
/// [`crate::attention::Attention::grouped_causal`]; the profile names it `attention`) — swept in the full sweep, or when named, at the
/// widths of SmolLM2-135M, -360M and -1.7B and Qwen2.5-0.5B (Q4_1 weights, heads of 64; f16
/// on the tensor cores where the adapter has them), so that a decoder's forward can be
/// predicted from its own kinds. The matrix-vector products that round `x` to 8 bits on the
/// adapter ([`crate::QMatmul::kind`]: from K = 2048 on GPUs with packed dot products) are
/// kinds of their own (`…_int8`), as are the matrix-vector products over the 2 to 32 rows
/// of a short prompt (`…_rows`: a workgroup takes 8 rows); the full sweep adds the widths of Qwen2.5-1.5B,
/// Llama-3.2-1B and -3B and Llama-3-8B, and a decode step's attention at 15/5, 32/8 and
/// 32/32 heads. Greedy decoding's `argmax` over one row of logits `[1, vocab]` (its chunks
/// and their merge, timed together) at five vocabularies from Llama-2's 32,000 to Gemma's
/// 256,000. A decode step's fused attention block (`decode_attention`, [`crate::DecodeAttention`]:
/// `[hidden, heads, kv_heads, pos]`) at the widths it takes, four contexts of one pass each,
/// and past 512 keys in spans with their merge (`decode_attention_split`: 1024, 2048 and
/// 4096 keys; 512 and 1024 in the medium sweep).
pub const DECODER_OPS: &[&str] = OPS.split_at(14).1;

/// The sweep for an adapter: f32 always, f16 GEMMs where it has `shader-f16`, and in the
/// full sweep or for named ops also f16 norms, softmax, elementwise ops and attention (the
/// opt-in f16 encoder's kinds: a calibrated f16 forward needs their own terms). `ops` keeps
/// only the named ops (empty keeps all; names from [`OPS`]).
pub fn cases(ctx: &Context, size: SweepSize, ops: &[String]) -> Vec<CaseSpec> {
    let full = size == SweepSize::Full;
    let medium = size == SweepSize::Medium;
    // Every kind of the full sweep: the full and medium sweeps (they differ in sizes).
    let all_kinds = full || medium;
    let f32 = DType::F32;
    // The dtypes of the encoder's row and elementwise kinds.
    let row_dtypes: &[DType] = if ctx.has_f16() && (all_kinds || !ops.is_empty()) {
        &[DType::F32, DType::F16]
    } else {
        &[DType::F32]
    };
    let mut v = Vec::new();
    let gemm_sizes: &[usize] = match size {
        SweepSize::Full => &[64, 128, 256, 512, 1024, 2048, 4096],
        SweepSize::Medium => &[32, 64, 128, 256, 384, 512],
        SweepSize::Quick => &[64, 128, 256],
    };
    let gemm_dtypes: &[DType] = if ctx.has_f16() {
        &[f32, DType::F16]
    } else {
        &[f32]
    };
    for &d in gemm_dtypes {
        for &n in gemm_sizes {
            v.push(spec("gemm", &[n, n, n], d));
        }
    }
    // The encoder's Linear layers at MiniLM's products (the fused Q/K/V, the attention output
    // and MLP down projections with the residual, the up projection with GELU), 128 to 4096
    // rows: a K of 384 fills the GPU differently from a cube, and the layout and epilogues
    // cost time of their own (square GEMMs alone priced them 1.2–1.7× fast).
    if all_kinds || LINEAR_OPS.iter().any(|op| ops.iter().any(|o| o == op)) {
        // Medium: from a row to MiniLM's batch 32, its own shapes on a CPU driver too (a fit
        // that stopped at 512 rows priced lavapipe's batch of 8 sentences 1.39× fast).
        let rows: &[usize] = if medium {
            &[16, 64, 128, 256, 1024, 4096]
        } else {
            &[128, 256, 512, 1024, 2048, 4096]
        };
        for &d in gemm_dtypes {
            for &m in rows {
                v.push(spec("linear", &[m, 1152, 384], d));
                v.push(spec("linear_gelu", &[m, 1536, 384], d));
                v.push(spec("linear_residual", &[m, 384, 384], d));
                v.push(spec("linear_residual", &[m, 384, 1536], d));
            }
        }
    }
    // Full: MiniLM's rows at batch 1 and 32 (128 and 4096 × 384) among the larger ones, and
    // five sizes, so that each kind's fixed cost is fitted beside its rate
    // (`ridge_model::calibrate::MIN_ROWS_FOR_LATENCY`).
    let rows_cols: &[[usize; 2]] = match size {
        SweepSize::Full => &[
            [128, 384],
            [1024, 384],
            [4096, 384],
            [4096, 1024],
            [16384, 4096],
        ],
        SweepSize::Medium => &[
            [128, 384],
            [512, 384],
            [1024, 384],
            [4096, 384],
            [4096, 1024],
        ],
        SweepSize::Quick => &[[256, 384], [1024, 1024]],
    };
    for &d in row_dtypes {
        for op in ["layer_norm", "rms_norm", "softmax"] {
            for rc in rows_cols {
                v.push(spec(op, rc, d));
            }
        }
    }
    // Full: MiniLM's residual adds at batch 1 and 32 (128 and 4096 × 384) among them, five
    // lengths for a fixed cost beside the rate.
    let lengths: &[usize] = match size {
        SweepSize::Full => &[128 * 384, 1 << 16, 1 << 20, 4096 * 384, 1 << 24],
        SweepSize::Medium => &[128 * 384, 1 << 16, 1 << 18, 1 << 20, 4096 * 384],
        SweepSize::Quick => &[1 << 16, 1 << 20],
    };
    for &d in row_dtypes {
        for op in ["gelu", "add"] {
            for &n in lengths {
                v.push(spec(op, &[n], d));
            }
        }
    }
    let transposes: &[&[usize]] = match size {
        SweepSize::Full => &[&[1024, 1024], &[4096, 4096], &[8192, 8192]],
        SweepSize::Medium => &[&[256, 256], &[512, 512], &[1024, 1024], &[2048, 2048]],
        SweepSize::Quick => &[&[512, 512]],
    };
    for s in transposes {
        v.push(spec("transpose", s, f32));
    }
    let images: &[&[usize]] = match size {
        SweepSize::Full => &[&[8, 64, 56, 56], &[32, 64, 112, 112]],
        SweepSize::Medium => &[
            &[1, 32, 28, 28],
            &[2, 32, 28, 28],
            &[4, 32, 28, 28],
            &[8, 32, 56, 56],
            &[8, 64, 56, 56],
        ],
        SweepSize::Quick => &[&[4, 32, 28, 28]],
    };
    for s in images {
        v.push(spec("nchw_to_nhwc", s, f32));
        v.push(spec("nhwc_to_nchw", &[s[0], s[2], s[3], s[1]], f32));
    }
    // Dense vs BigBird attention (12 heads of 64; `bigbird`).
    let lengths: &[usize] = match size {
        SweepSize::Full => &[512, 1024, 2048, 4096, 8192],
        SweepSize::Medium => &[64, 128, 256, 512, 1024],
        SweepSize::Quick => &[128, 256],
    };
    for &n in lengths {
        v.push(spec("attention", &[1, 12, n, 64], f32));
        v.push(spec("sparse_attention", &[1, 12, n, 64], f32));
    }
    if row_dtypes.len() > 1 {
        for &n in lengths {
            v.push(spec("attention", &[1, 12, n, 64], DType::F16));
        }
    }
    // Full and medium: MiniLM's own attention too, 1 and 32 sentences of 128 tokens (the long
    // single sequences alone priced its launches 1.2–1.7× fast).
    if all_kinds {
        for &d in row_dtypes {
            for batch in [1, 32] {
                v.push(spec("attention", &[batch, 12, 128, 64], d));
            }
        }
    }
    let named = |op: &&str| ops.iter().any(|o| o == op);
    if all_kinds || DECODER_OPS.iter().any(named) {
        // Named decoder kinds on a quick sweep take the full sweep's sizes (as before).
        let size = if medium { size } else { SweepSize::Full };
        let int8 = crate::qmatmul::MatvecShape::int8_storage(ctx);
        let cpu = ctx.is_cpu_driver();
        v.extend(decoder_cases(int8, cpu, f32, size));
        if ctx.has_f16() {
            v.extend(decoder_cases(int8, cpu, DType::F16, size));
        }
        // The fused attention block only where this adapter runs it (storage buffers,
        // workgroup memory) and on GPUs (CPU drivers keep the unfused kernels).
        v.retain(|c| {
            !c.op.starts_with("decode_attention")
                || !ctx.is_cpu_driver() && decode_attention_of(&c.shape).fits(ctx)
        });
    }
    v.retain(|c| ops.is_empty() || ops.contains(&c.op));
    v
}

/// Block size of the sweep's BigBird layouts: 64, BigBird's own default (Zaheer et al.,
/// 2020; `block_size=64` in the reference and Hugging Face implementations).
/// `benches/attention.rs` measures blocks of 32 too.
pub const BIGBIRD_BLOCK: usize = 64;

/// The BigBird layout the sweep uses for `n` tokens: blocks of [`BIGBIRD_BLOCK`], 2 global,
/// window 1, 3 random.
pub fn bigbird(n: usize) -> ridge_model::sparsity::BlockLayout {
    bigbird_with_block(n, BIGBIRD_BLOCK)
}

/// The sweep's BigBird layout with blocks of `block` tokens.
pub fn bigbird_with_block(n: usize, block: usize) -> ridge_model::sparsity::BlockLayout {
    let p = ridge_model::sparsity::BigBird {
        block,
        global: 2,
        window: 1,
        random: 3,
        seed: 1,
    };
    ridge_model::sparsity::BlockLayout::bigbird(n, p)
}

/// The GEMM of a [`LINEAR_OPS`] case of shape `[M, N, K]`: B stored N × K, with the
/// residual (β = 1) or GELU its kind names.
fn linear(op: &str, s: &[usize]) -> Gemm {
    Gemm {
        trans_b: true,
        beta: if op == "linear_residual" { 1.0 } else { 0.0 },
        gelu: op == "linear_gelu",
        ..Gemm::new(s[0], s[1], s[2])
    }
}

/// The norm of a `layer_norm` or `rms_norm` case of shape `[rows, cols]` (eps 1e-5).
fn norm_of(op: &str, s: &[usize]) -> Norm {
    Norm {
        kind: if op == "rms_norm" {
            NormKind::RmsNorm
        } else {
            NormKind::LayerNorm
        },
        rows: s[0],
        cols: s[1],
        eps: 1e-5,
    }
}

/// FLOPs and bytes of one launch of a case, without a GPU (the dashboard shows them before
/// a shape is run).
///
/// Errors: `InvalidArgument` for an unknown op.
pub fn cost(c: &CaseSpec) -> Result<OpCost> {
    let (s, d) = (c.shape.as_slice(), c.dtype);
    Ok(match c.op.as_str() {
        "gemm" => Gemm::new(s[0], s[1], s[2]).cost(d, d, 1, 1, false),
        "linear" | "linear_residual" | "linear_gelu" => linear(&c.op, s).cost(d, d, 1, 1, true),
        "layer_norm" | "rms_norm" => norm_of(&c.op, s).cost(d, true),
        "softmax" => Softmax::new(s[0], s[1]).cost(d, false),
        "gelu" => Unary::Gelu.cost(s[0], d),
        "add" => Binary::Add.cost(s[0], s[0], s[0], d),
        "transpose" | "nchw_to_nhwc" | "nhwc_to_nchw" => layout::cost(s.iter().product(), d),
        "attention" | "sparse_attention" => {
            let att = crate::attention::Attention::new(s[0], s[1], s[2], s[3]);
            let sparse = (c.op == "sparse_attention").then(|| bigbird(s[2]));
            att.cost(d, sparse.as_ref())
        }
        op if is_decoder_product(op) => {
            let (q, n, k) = decoder_product(op, s);
            q.cost(DECODER_FORMAT, n, k, d)
        }
        "kv_attention" | "kv_attention_prefill" => kv_attention_of(s).cost(d),
        "decode_attention" | "decode_attention_split" => {
            decode_attention_of(s).cost(d, DECODER_FORMAT, DECODER_FORMAT)
        }
        "attention_causal" => attention_causal_of(s).cost(d, None),
        "kv_attention_split" => {
            let op = kv_attention_of(s);
            let span = s.get(5).copied().filter(|&n| n > 0).ok_or_else(|| {
                ridge_core::Error::invalid(
                    "bench",
                    format!("kv_attention_split {s:?}: the shape ends with the keys of a span"),
                )
            })?;
            op.cost(d) + op.merge_cost(op.context().div_ceil(span))
        }
        "argmax" => crate::argmax::dispatches(s[0], s[1], d)
            .into_iter()
            .map(|(_, c)| c)
            .sum(),
        other => {
            return Err(ridge_core::Error::invalid(
                "bench",
                format!("unknown op {other:?}"),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoder's slice of the op list starts at its first product, and every decoder case
    /// is priced (the cost needs no GPU); the full and medium sweeps each give every decoder
    /// kind the adapter runs at least four launches (a fixed cost and a depth term
    /// over-determined): the integer kernel's kinds on an adapter that rounds `x` (the H200's
    /// 48 KiB of workgroup memory, WebGPU's default 16 KiB) in the full sweep, none elsewhere.
    #[test]
    fn decoder_ops_are_the_tail_of_the_list_and_priced() {
        assert_eq!(DECODER_OPS.first(), Some(&"qmatvec"));
        assert_eq!(DECODER_OPS.len(), 21);
        let is_int8 = |op: &str| op.ends_with("_int8");
        for (dtype, size, int8) in [DType::F32, DType::F16].into_iter().flat_map(|d| {
            [
                (d, SweepSize::Full, None),
                (d, SweepSize::Full, Some(49152)),
                (d, SweepSize::Full, Some(16384)),
                (d, SweepSize::Medium, None),
            ]
        }) {
            let cases = decoder_cases(int8, size == SweepSize::Medium, dtype, size);
            for op in DECODER_OPS {
                let n = cases.iter().filter(|c| c.op == *op).count();
                if is_int8(op) && int8.is_none() {
                    assert_eq!(n, 0, "{op} {size:?}");
                } else {
                    assert!(n >= 4, "{op} {size:?} {int8:?}: {n}");
                }
            }
            // Each product named as it launches.
            for c in cases.iter().filter(|c| is_decoder_product(&c.op)) {
                let (q, n, k) = decoder_product(&c.op, &c.shape);
                let rounds = int8.is_some_and(|b| {
                    crate::qmatmul::MatvecShape::rounds_x(n, k / crate::quant::BLOCK, b)
                });
                assert_eq!(is_int8(&c.op), rounds && q.m == 1, "{c:?}");
                assert_eq!(c.op.ends_with("_rows"), (2..=32).contains(&q.m), "{c:?}");
                let adapter = crate::qmatmul::MatvecRule {
                    int8_storage: int8,
                    lane_rows: size == SweepSize::Medium,
                    prompt_lane_rows: size == SweepSize::Medium,
                };
                let kind = q.kind_and_cost(DECODER_FORMAT, n, k, dtype, adapter).0;
                assert_eq!(c.op, kind, "{c:?}");
            }
            for c in &cases {
                let cost = cost(c).unwrap();
                assert!(cost.flops > 0.0 && cost.bytes > 0.0, "{c:?}");
            }
        }
        // A product name the sweep does not make is refused, not read as one.
        assert!(cost(&spec("rms_qmatvec_gelu", &[1, 64, 64], DType::F32)).is_err());
    }

    /// The shipped reports' launches cost what the sweep prices them at now: FLOPs, bytes and
    /// the reduction depth the calibration reads (added to the reports after they were
    /// measured; a change to a cost formula shows here first), and the matrix-vector
    /// products the kind and the workgroups and invocations of their launch on the report's
    /// adapter (written into the older reports after they were measured, from
    /// [`crate::qmatmul::QMatmul::kind_and_cost`]: the matrix-vector launches' on 2026-12-05,
    /// the tiled prompt products' workgroups, a tile each, on 2026-12-07).
    #[test]
    fn shipped_reports_cost_what_the_sweep_says() {
        for text in [
            include_str!("../../../../benches/reports/h200.json"),
            include_str!("../../../../benches/reports/h200-decoder.json"),
            include_str!("../../../../benches/reports/h100-decoder.json"),
            include_str!("../../../../benches/reports/lavapipe.json"),
            include_str!("../../../../benches/reports/llvmpipe.json"),
            include_str!("../../../../benches/reports/swiftshader.json"),
        ] {
            let report: ridge_model::report::BenchReport = serde_json::from_str(text).unwrap();
            let adapter = crate::qmatmul::MatvecRule::of_report(&report.measured);
            for r in &report.rows {
                let dtype = if r.dtype == "f16" {
                    DType::F16
                } else {
                    DType::F32
                };
                if is_decoder_product(&r.op) {
                    let (q, n, k) = decoder_product(&r.op, &r.shape);
                    let (kind, launch) = q.kind_and_cost(DECODER_FORMAT, n, k, dtype, adapter);
                    assert_eq!(kind, r.op, "{:?}", r.shape);
                    assert_eq!(launch.workgroups, r.workgroups, "{} {:?}", r.op, r.shape);
                    assert_eq!(launch.invocations, r.invocations, "{} {:?}", r.op, r.shape);
                    if r.shape[0] <= crate::qmatmul::MATVEC_MAX_M {
                        // 16 lanes a workgroup at least (a CPU driver's
                        // `MatvecShape::LANE_ROWS`).
                        assert!(r.workgroups > 0.0 && r.invocations >= 16.0 * r.workgroups);
                    }
                }
                let c = cost(&spec(&r.op, &r.shape, dtype)).unwrap();
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
                assert!(
                    close(c.flops, r.flops) && close(c.bytes, r.bytes) && close(c.depth, r.depth),
                    "{} {:?} {}: {c:?} against {} FLOPs, {} bytes, depth {}",
                    r.op,
                    r.shape,
                    r.dtype,
                    r.flops,
                    r.bytes,
                    r.depth
                );
            }
        }
    }
}
