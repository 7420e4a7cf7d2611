//! The benchmark sweep: every kernel over sizes that cross the ridge point, each case with
//! its cost and a launcher, for `ridge bench` (and the dashboard) to time.

use ridge_core::{Context, DType, Result, Tensor};
use ridge_model::OpCost;
use serde::{Deserialize, Serialize};

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
    /// GEMM 64³ … 4096³ and memory-bound ops up to hundreds of MB: for real GPUs.
    Full,
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
pub const OPS: [&str; 11] = [
    "gemm",
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
];

/// The sweep for an adapter: f32 always, f16 GEMMs where it has `shader-f16`. `ops` keeps
/// only the named ops (empty keeps all; names from [`OPS`]).
pub fn cases(ctx: &Context, size: SweepSize, ops: &[String]) -> Vec<CaseSpec> {
    let full = size == SweepSize::Full;
    let f32 = DType::F32;
    let mut v = Vec::new();
    let gemm_sizes: &[usize] = if full {
        &[64, 128, 256, 512, 1024, 2048, 4096]
    } else {
        &[64, 128, 256]
    };
    for &n in gemm_sizes {
        v.push(spec("gemm", &[n, n, n], f32));
    }
    if ctx.has_f16() {
        for &n in gemm_sizes {
            v.push(spec("gemm", &[n, n, n], DType::F16));
        }
    }
    let rows_cols: &[[usize; 2]] = if full {
        &[[1024, 384], [4096, 1024], [16384, 4096]]
    } else {
        &[[256, 384], [1024, 1024]]
    };
    for op in ["layer_norm", "rms_norm", "softmax"] {
        for rc in rows_cols {
            v.push(spec(op, rc, f32));
        }
    }
    let lengths: &[usize] = if full {
        &[1 << 16, 1 << 20, 1 << 24]
    } else {
        &[1 << 16, 1 << 20]
    };
    for op in ["gelu", "add"] {
        for &n in lengths {
            v.push(spec(op, &[n], f32));
        }
    }
    let transposes: &[&[usize]] = if full {
        &[&[1024, 1024], &[4096, 4096], &[8192, 8192]]
    } else {
        &[&[512, 512]]
    };
    for s in transposes {
        v.push(spec("transpose", s, f32));
    }
    let images: &[&[usize]] = if full {
        &[&[8, 64, 56, 56], &[32, 64, 112, 112]]
    } else {
        &[&[4, 32, 28, 28]]
    };
    for s in images {
        v.push(spec("nchw_to_nhwc", s, f32));
        v.push(spec("nhwc_to_nchw", &[s[0], s[2], s[3], s[1]], f32));
    }
    // Dense vs BigBird attention (12 heads of 64; `bigbird`).
    let lengths: &[usize] = if full {
        &[512, 1024, 2048, 4096, 8192]
    } else {
        &[128, 256]
    };
    for &n in lengths {
        v.push(spec("attention", &[1, 12, n, 64], f32));
        v.push(spec("sparse_attention", &[1, 12, n, 64], f32));
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

/// FLOPs and bytes of one launch of a case, without a GPU (the dashboard shows them before
/// a shape is run).
///
/// Errors: `InvalidArgument` for an unknown op.
pub fn cost(c: &CaseSpec) -> Result<OpCost> {
    let (s, d) = (c.shape.as_slice(), c.dtype);
    Ok(match c.op.as_str() {
        "gemm" => Gemm::new(s[0], s[1], s[2]).cost(d, d, 1, 1, false),
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
                cost,
                launch: Box::new(move |ctx| g.run(ctx, &a, &b, None, &o)),
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
        other => {
            return Err(ridge_core::Error::invalid(
                "bench",
                format!("unknown op {other:?}"),
            ));
        }
    })
}
