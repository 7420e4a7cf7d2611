//! The benchmark sweep: every kernel over sizes that cross the ridge point, each case with
//! its cost and a launcher, for `ridge bench` (and the dashboard) to time.

use ridge_core::{Context, DType, Result, Tensor};
use ridge_model::OpCost;
use serde::{Deserialize, Serialize};

use crate::attention::Attention;
use crate::elementwise::{Binary, Unary, binary, unary};
use crate::gemm::Gemm;
use crate::layout;
use crate::norm::{Norm, NormKind};
use crate::softmax::Softmax;

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
    /// Problem shape: GEMM [m, n, k]; norms and softmax [rows, cols]; element-wise [n];
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
pub const OPS: [&str; 29] = [
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
/// causal attention from an empty cache (`attention_causal`, [`Attention::grouped_causal`];
/// the profile names it `attention`) — swept in the full sweep, or when named, at the
/// widths of SmolLM2-135M, -360M and -1.7B and Qwen2.5-0.5B (Q4_1 weights, heads of 64; f16
/// on the tensor cores where the adapter has them), so that a decoder's forward can be
/// predicted from its own kinds. The matrix-vector products that round `x` to 8 bits on the
/// adapter ([`crate::QMatmul::kind`]: from K = 2048 on GPUs with packed dot products) are
/// kinds of their own (`…_int8`); the full sweep adds the widths of Qwen2.5-1.5B,
/// Llama-3.2-1B and -3B and Llama-3-8B, and a decode step's attention at 15/5, 32/8 and
/// 32/32 heads.
pub const DECODER_OPS: &[&str] = OPS.split_at(14).1;

/// The quantization of the decoder cases' weights.
const DECODER_FORMAT: crate::quant::QuantFormat = crate::quant::QuantFormat::Q4_1;
/// The decoder cases' head width.
const DECODER_HEAD_DIM: usize = 64;
/// Bytes of weight copies a decoder product case cycles through: more than the last-level
/// cache of the GPUs Ridge has measured (the H200's L2 holds 50 MB, SmolLM2-135M's weights
/// 98 MB).
const COLD_WEIGHT_BYTES: usize = 128 << 20;

/// SmolLM2-135M's, -360M's and -1.7B's and Qwen2.5-0.5B's (hidden, MLP, query heads, KV
/// heads): four widths, so that each decode kind's fixed cost is fitted.
const DECODER_WIDTHS: [(usize, usize, usize, usize); 4] = [
    (576, 1536, 9, 3),
    (960, 2560, 15, 5),
    (2048, 8192, 32, 32),
    (896, 4864, 14, 2),
];

/// Qwen2.5-1.5B's, Llama-3.2-1B's and -3B's and Llama-3-8B's (hidden, MLP, query heads, KV
/// heads), in the full sweep: decode products past K = 2048, so that where the adapter rounds
/// `x` there, each kind of the integer kernel ([`crate::QMatmul::kind`]) and of the float one
/// has four widths or more.
const LARGER_WIDTHS: [(usize, usize, usize, usize); 4] = [
    (1536, 8960, 12, 2),
    (2048, 8192, 32, 8),
    (3072, 8192, 24, 8),
    (4096, 14336, 32, 8),
];

/// The decoder cases on an adapter whose products may round `x` with `int8` bytes of
/// workgroup memory ([`crate::qmatmul::MatvecShape::int8_storage`]). Products: `[m, n, k]`
/// (`n` the rows of W: 2× the MLP width for SwiGLU); with RoPE `[m, heads, kv_heads, k]`;
/// named by the kind they launch as ([`crate::QMatmul::kind`]: `…_int8` where the adapter
/// rounds `x`). Attention: `[tokens, heads, kv_heads, head_dim, pos0]`.
fn decoder_cases(int8: Option<u32>, dtype: DType, size: SweepSize) -> Vec<CaseSpec> {
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
    // Each decode product named by the kind it launches as.
    for c in &mut v {
        let (q, n, k) = decoder_product(&c.op, &c.shape);
        let rounds = int8.is_some_and(|bytes| {
            crate::qmatmul::MatvecShape::rounds_x(n, k / crate::quant::BLOCK, bytes)
        });
        c.op = q.kind(rounds).to_string();
    }
    // Prompts of 128 and 1024 tokens at the two small widths, and of 4096 at the smallest
    // (a fit extrapolated from 1024 priced SmolLM2's 4096-token f16 prompt 1.4× fast).
    // (On CPU drivers, the medium sweep: 16 to 512 tokens.)
    for (i, &(h, f, nh, nkv)) in DECODER_WIDTHS[..2].iter().enumerate() {
        let long: &[usize] = match (full, i) {
            (true, 0) => &[128, 1024, 4096],
            (true, _) => &[128, 1024],
            (false, 0) => &[16, 128, 512],
            (false, _) => &[16, 128],
        };
        for &m in long {
            v.push(spec("qmatmul", &[m, h, h], dtype));
            v.push(spec("qmatmul", &[m, h, f], dtype));
            v.push(spec("rms_qmatmul_swiglu", &[m, 2 * f, h], dtype));
            v.push(spec("rms_qmatmul_rope", &[m, nh, nkv, h], dtype));
        }
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
            v.push(spec("kv_attention_split", &shape, dtype));
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
    v
}

/// Attention over a KV cache for shape `[tokens, heads, kv_heads, head_dim, …]`: Q
/// `[tokens, heads, head_dim]` and the caches `[keys, kv_heads, head_dim]` filled, the output
/// empty.
fn cache_attention_tensors(
    ctx: &Context,
    s: &[usize],
    keys: usize,
    d: DType,
) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let (t, nh, nkv, dh) = (s[0], s[1], s[2], s[3]);
    Ok((
        filled(ctx, &[t, nh, dh], d)?,
        filled(ctx, &[keys, nkv, dh], d)?,
        filled(ctx, &[keys, nkv, dh], d)?,
        Tensor::empty(ctx, &[t, nh, dh], d)?,
    ))
}

/// A long prompt's dense causal attention `[tokens, heads, kv_heads, head_dim]`.
fn attention_causal_of(s: &[usize]) -> Attention {
    Attention::grouped_causal(s[2], s[1] / s[2].max(1), s[0], s[3])
}

/// Whether `op` is one of the decoder's products (the [`DECODER_OPS`] with a quantized
/// product), whose flags [`decoder_product`] reads from the name.
fn is_decoder_product(op: &str) -> bool {
    DECODER_OPS.contains(&op) && op.contains("qmat")
}

/// A decoder product case's op (its flags from the name) and W's rows.
fn decoder_product(op: &str, s: &[usize]) -> (crate::qmatmul::QMatmul, usize, usize) {
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

fn kv_attention_of(s: &[usize]) -> crate::KvAttention {
    crate::KvAttention {
        tokens: s[0],
        heads: s[1],
        kv_heads: s[2],
        head_dim: s[3],
        pos0: s[4],
    }
}

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
        v.extend(decoder_cases(int8, f32, size));
        if ctx.has_f16() {
            v.extend(decoder_cases(int8, DType::F16, size));
        }
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

fn filled(ctx: &Context, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|i| (i % 251) as f32 / 251.0 - 0.5).collect();
    Tensor::from_f32(ctx, &values, shape, dtype)
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

/// FLOPs and bytes of one launch of a case, without a GPU (the dashboard shows them before
/// a shape is run).
///
/// Errors: `InvalidArgument` for an unknown op.
pub fn cost(c: &CaseSpec) -> Result<OpCost> {
    let (s, d) = (c.shape.as_slice(), c.dtype);
    Ok(match c.op.as_str() {
        "gemm" => Gemm::new(s[0], s[1], s[2]).cost(d, d, 1, 1, false),
        "linear" | "linear_residual" | "linear_gelu" => linear(&c.op, s).cost(d, d, 1, 1, true),
        "layer_norm" | "rms_norm" => Norm {
            kind: if c.op == "rms_norm" {
                NormKind::RmsNorm
            } else {
                NormKind::LayerNorm
            },
            rows: s[0],
            cols: s[1],
            eps: 1e-5,
        }
        .cost(d, true),
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
        "attention_causal" => attention_causal_of(s).cost(d, None),
        "kv_attention_split" => {
            let op = kv_attention_of(s);
            op.cost(d) + op.merge_cost(op.split().0)
        }
        other => {
            return Err(ridge_core::Error::invalid(
                "bench",
                format!("unknown op {other:?}"),
            ));
        }
    })
}

/// Allocates a case's tensors and returns its cost and launcher.
///
/// Errors: `InvalidArgument` for an unknown op; allocation and limit errors.
pub fn prepare(ctx: &Context, c: &CaseSpec) -> Result<Prepared> {
    let cost = cost(c)?;
    let (s, d) = (c.shape.as_slice(), c.dtype);
    let out = |shape: &[usize]| Tensor::empty(ctx, shape, d);
    Ok(match c.op.as_str() {
        "gemm" => {
            let g = Gemm::new(s[0], s[1], s[2]);
            let (a, b, o) = (
                filled(ctx, &[s[0], s[2]], d)?,
                filled(ctx, &[s[2], s[1]], d)?,
                out(&[s[0], s[1]])?,
            );
            Prepared {
                cost: g.tiled(ctx, d, cost),
                launch: Box::new(move |ctx| g.run(ctx, &a, &b, None, &o)),
            }
        }
        "linear" | "linear_residual" | "linear_gelu" => {
            let g = linear(&c.op, s);
            // C holds values: the residual launches read it (and add to it, launch after
            // launch; the values do not change the time).
            let (x, w, bias, y) = (
                filled(ctx, &[s[0], s[2]], d)?,
                filled(ctx, &[s[1], s[2]], d)?,
                filled(ctx, &[s[1]], d)?,
                filled(ctx, &[s[0], s[1]], d)?,
            );
            Prepared {
                cost: g.tiled(ctx, d, cost),
                launch: Box::new(move |ctx| g.run(ctx, &x, &w, Some(&bias), &y)),
            }
        }
        "layer_norm" | "rms_norm" => {
            let kind = if c.op == "rms_norm" {
                NormKind::RmsNorm
            } else {
                NormKind::LayerNorm
            };
            let norm = Norm {
                kind,
                rows: s[0],
                cols: s[1],
                eps: 1e-5,
            };
            let (x, g, b, y) = (
                filled(ctx, s, d)?,
                filled(ctx, &[s[1]], d)?,
                filled(ctx, &[s[1]], d)?,
                out(s)?,
            );
            let rms = kind == NormKind::RmsNorm;
            Prepared {
                cost,
                launch: Box::new(move |ctx| norm.run(ctx, &x, Some(&g), (!rms).then_some(&b), &y)),
            }
        }
        "softmax" => {
            let sm = Softmax::new(s[0], s[1]);
            let (x, y) = (filled(ctx, s, d)?, out(s)?);
            Prepared {
                cost,
                launch: Box::new(move |ctx| sm.run(ctx, &x, None, &y)),
            }
        }
        "gelu" => {
            let (x, y) = (filled(ctx, s, d)?, out(s)?);
            Prepared {
                cost,
                launch: Box::new(move |ctx| unary(ctx, Unary::Gelu, &x, &y)),
            }
        }
        "add" => {
            let (a, b, y) = (filled(ctx, s, d)?, filled(ctx, s, d)?, out(s)?);
            Prepared {
                cost,
                launch: Box::new(move |ctx| binary(ctx, Binary::Add, &a, &b, &y)),
            }
        }
        "transpose" | "nchw_to_nhwc" | "nhwc_to_nchw" => {
            let perm: &'static [usize] = match c.op.as_str() {
                "transpose" => &[1, 0],
                "nchw_to_nhwc" => &layout::NCHW_TO_NHWC,
                _ => &layout::NHWC_TO_NCHW,
            };
            let x = filled(ctx, s, d)?;
            let y = out(&layout::permuted_shape(s, perm)?)?;
            Prepared {
                cost,
                launch: Box::new(move |ctx| layout::permute(ctx, &x, perm, &y)),
            }
        }
        "attention" | "sparse_attention" => {
            let att = crate::attention::Attention::new(s[0], s[1], s[2], s[3]);
            let (q, k, vv, o) = (
                filled(ctx, s, d)?,
                filled(ctx, s, d)?,
                filled(ctx, s, d)?,
                out(s)?,
            );
            let sparse = (c.op == "sparse_attention")
                .then(|| crate::attention::SparseLayout::upload(ctx, bigbird(s[2])))
                .transpose()?;
            Prepared {
                cost,
                launch: Box::new(move |ctx| att.run(ctx, &q, &k, &vv, None, sparse.as_ref(), &o)),
            }
        }
        op if is_decoder_product(op) => {
            let (q, n, k) = decoder_product(op, s);
            let m = q.m;
            // One row of x: the workgroups the adapter's launch takes.
            let int8 = crate::qmatmul::MatvecShape::int8_storage(ctx);
            let cost = q.launch_cost(DECODER_FORMAT, n, k, d, int8);
            let values: Vec<f32> = (0..n * k).map(|i| (i % 251) as f32 / 251.0 - 0.5).collect();
            let bytes = crate::quant::quantize(DECODER_FORMAT, &values)?;
            // Copies of W that together pass the GPU's last-level cache, one a launch in
            // turn: a forward streams every layer's weights from memory once, and a sweep
            // that reread one matrix from cache timed the products faster than they run.
            let copies = COLD_WEIGHT_BYTES.div_ceil(bytes.len().max(1));
            let ws = (0..copies)
                .map(|_| crate::quant::QuantMatrix::upload(ctx, DECODER_FORMAT, n, k, &bytes))
                .collect::<Result<Vec<_>>>()?;
            let turn = std::cell::Cell::new(0);
            let next = move || {
                let i = turn.get();
                turn.set((i + 1) % ws.len());
                ws[i].clone()
            };
            let x = filled(ctx, &[m, k], d)?;
            let gamma = filled(ctx, &[k], d)?;
            if q.rope {
                let (nh, nkv) = (s[1], s[2]);
                let table = crate::rope::RopeTable::new(ctx, m, DECODER_HEAD_DIM, 10_000.0)?;
                let kc = out(&[m, nkv, DECODER_HEAD_DIM])?;
                let vc = out(&[m, nkv, DECODER_HEAD_DIM])?;
                let q_out = out(&[m, nh, DECODER_HEAD_DIM])?;
                Prepared {
                    cost,
                    launch: Box::new(move |ctx| {
                        let append = crate::qmatmul::RopeAppend {
                            table: &table,
                            k_cache: &kc,
                            v_cache: &vc,
                            heads: nh,
                            kv_heads: nkv,
                            pos0: 0,
                        };
                        q.run_fused(
                            ctx,
                            &x,
                            Some((&gamma, 1e-5)),
                            Some(&append),
                            &next(),
                            &q_out,
                        )
                    }),
                }
            } else {
                let y = out(&[m, q.out_cols(n)])?;
                Prepared {
                    cost,
                    launch: Box::new(move |ctx| {
                        let w = next();
                        q.run_fused(ctx, &x, q.rms_norm.then_some((&gamma, 1e-5)), None, &w, &y)
                    }),
                }
            }
        }
        "kv_attention" | "kv_attention_prefill" | "kv_attention_split" => {
            let op = kv_attention_of(s);
            let (q, kc, vc, o) = cache_attention_tensors(ctx, s, op.context(), d)?;
            Prepared {
                cost,
                launch: Box::new(move |ctx| op.run(ctx, &q, &kc, &vc, &o)),
            }
        }
        "attention_causal" => {
            let att = attention_causal_of(s);
            let (q, kc, vc, o) = cache_attention_tensors(ctx, s, s[0], d)?;
            Prepared {
                cost,
                launch: Box::new(move |ctx| att.run(ctx, &q, &kc, &vc, None, None, &o)),
            }
        }
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
        assert_eq!(DECODER_OPS.len(), 15);
        let is_int8 = |op: &str| op.ends_with("_int8");
        for (dtype, size, int8) in [DType::F32, DType::F16].into_iter().flat_map(|d| {
            [
                (d, SweepSize::Full, None),
                (d, SweepSize::Full, Some(49152)),
                (d, SweepSize::Full, Some(16384)),
                (d, SweepSize::Medium, None),
            ]
        }) {
            let cases = decoder_cases(int8, dtype, size);
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
    /// measured; a change to a cost formula shows here first), and the decode products the
    /// workgroups and invocations of their launch on the report's adapter (written into the
    /// older reports after they were measured, from [`crate::qmatmul::MatvecShape::rule`]).
    #[test]
    fn shipped_reports_cost_what_the_sweep_says() {
        for text in [
            include_str!("../../../benches/reports/h200.json"),
            include_str!("../../../benches/reports/h200-decoder.json"),
            include_str!("../../../benches/reports/lavapipe.json"),
            include_str!("../../../benches/reports/llvmpipe.json"),
            include_str!("../../../benches/reports/swiftshader.json"),
        ] {
            let report: ridge_model::report::BenchReport = serde_json::from_str(text).unwrap();
            let int8 = report.measured.int8_storage_bytes;
            for r in &report.rows {
                let dtype = if r.dtype == "f16" {
                    DType::F16
                } else {
                    DType::F32
                };
                if is_decoder_product(&r.op) && r.shape[0] == 1 {
                    let (q, n, k) = decoder_product(&r.op, &r.shape);
                    let launch = q.launch_cost(DECODER_FORMAT, n, k, dtype, int8);
                    assert_eq!(launch.workgroups, r.workgroups, "{} {:?}", r.op, r.shape);
                    assert_eq!(launch.invocations, r.invocations, "{} {:?}", r.op, r.shape);
                    assert!(r.workgroups > 0.0 && r.invocations >= 64.0 * r.workgroups);
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
