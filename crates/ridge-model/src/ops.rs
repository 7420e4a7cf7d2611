//! Cost formulas of every op Ridge runs. The kernels' `cost` functions delegate here, so
//! the model predicts a Transformer without a GPU and the bench measures the same numbers.
//!
//! FLOPs: a multiply-add is 2; an add, a multiply, a divide and a transcendental function
//! (exp, erf, rsqrt) each count 1. Bytes: every input read once, every output written once,
//! `e` bytes per element (4 for f32, 2 for f16).

use crate::cost::OpCost;

/// GEMM `C = α·op(A)·op(B) (+ β·C) (+ bias)` over `batch` matrices of `m × n`, depth `k`;
/// `a_batches`/`b_batches` ∈ {1, batch} matrices are read. 2·m·n·k per matrix for the
/// product, 2·m·n more when C is read back (`beta`), m·n for a bias. Depth: k.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    a_batches: usize,
    b_batches: usize,
    beta: bool,
    bias: bool,
    e: usize,
) -> OpCost {
    let (m, n, k, batch) = (m as f64, n as f64, k as f64, batch as f64);
    let mut flops = 2.0 * m * n * k * batch;
    let mut elems = a_batches as f64 * m * k + b_batches as f64 * k * n + batch * m * n;
    if beta {
        flops += 2.0 * m * n * batch;
        elems += batch * m * n;
    }
    if bias {
        flops += m * n * batch;
        elems += n;
    }
    OpCost::new(flops, elems * e as f64).with_depth(k)
}

/// The workgroups a row kernel launches over `rows × cols`: one a row (Ridge's norms and
/// softmax), none for an empty row.
fn row_workgroups(rows: usize, cols: usize) -> usize {
    if cols == 0 { 0 } else { rows }
}

/// Layer norm (`rms = false`, 8 FLOPs per element: sum, subtract, square-accumulate twice,
/// subtract, scale, affine) or RMS norm (5) over `rows × cols`; γ (and β) read once each;
/// one workgroup a row.
pub fn norm(rows: usize, cols: usize, rms: bool, affine: bool, e: usize) -> OpCost {
    let n = (rows * cols) as f64;
    let (per, params) = if rms { (5.0, 1.0) } else { (8.0, 2.0) };
    let param_elems = if affine { params * cols as f64 } else { 0.0 };
    OpCost::new(per * n, (2.0 * n + param_elems) * e as f64)
        .with_workgroups(row_workgroups(rows, cols))
}

/// Softmax over `rows × cols` (5 FLOPs per element: scale, mask add, subtract max, exp,
/// divide), with `mask_elems` mask values read once; one workgroup a row.
pub fn softmax(rows: usize, cols: usize, mask_elems: usize, e: usize) -> OpCost {
    let n = (rows * cols) as f64;
    OpCost::new(5.0 * n, (2.0 * n + mask_elems as f64) * e as f64)
        .with_workgroups(row_workgroups(rows, cols))
}

/// An element-wise op over `n` elements with `flops_per_element`, reading `second` extra
/// elements (a broadcast operand: 0 for unary ops).
pub fn elementwise(n: usize, second: usize, flops_per_element: f64, e: usize) -> OpCost {
    OpCost::new(flops_per_element * n as f64, ((2 * n + second) * e) as f64)
}

/// Any permute, transpose or layout conversion of `n` elements: no FLOPs, read + write once.
pub fn permute(n: usize, e: usize) -> OpCost {
    OpCost::new(0.0, (2 * n * e) as f64)
}

/// Embedding lookup of `n` rows of `hidden`: the rows read and written once, 4-byte ids.
pub fn embedding(n: usize, hidden: usize, e: usize) -> OpCost {
    OpCost::new(0.0, (2 * n * hidden * e + 4 * n) as f64)
}

/// Mean pooling of `[batch, seq, hidden]` (read twice when L2-normalised), `[batch, hidden]`
/// written; one add per token element plus the norm.
pub fn mean_pool(batch: usize, seq: usize, hidden: usize, normalize: bool, e: usize) -> OpCost {
    let x = (batch * seq * hidden) as f64;
    let reads = if normalize { 2.0 } else { 1.0 };
    let out = (batch * hidden) as f64;
    OpCost::new(
        reads * x + 3.0 * out,
        (reads * x + out) * e as f64 + 4.0 * batch as f64,
    )
}

/// Attention over `batch · heads` heads of `n` queries and `n` keys of width `d`, of which
/// `pairs` query–key pairs are computed (n² dense; nnz blocks × block² block-sparse): 2 × 2d
/// FLOPs per pair for QKᵀ and P·V plus 5 for the softmax. Bytes: Q, K, V read once and O
/// written once (4·n·d per head) — what a fused kernel must move at least. Depth: the keys a
/// query sees on average (pairs / n).
pub fn attention(batch: usize, heads: usize, n: usize, d: usize, pairs: f64, e: usize) -> OpCost {
    let bh = (batch * heads) as f64;
    OpCost::new(
        bh * pairs * (4.0 * d as f64 + 5.0),
        bh * 4.0 * (n * d * e) as f64,
    )
    .with_depth(pairs / n.max(1) as f64)
}

/// A product `x·Wᵀ` with block-quantized weights: `x` `[m, k]`, `W` `[n, k]` stored in
/// `weight_bytes_per_element` bytes per weight (Q4_0 18/32, Q4_1 20/32, Q8_0 34/32: ggml's
/// block sizes), `e` bytes per activation. 2·m·n·k FLOPs, + m·n for a residual add, + 4 per
/// gated output (silu: exp, add, divide; the product); bytes: the weights once, `x` once, the
/// output once (n/2 columns gated) and read once more for a residual. Depth: k.
pub fn quantized_matmul(
    m: usize,
    n: usize,
    k: usize,
    weight_bytes_per_element: f64,
    residual: bool,
    glu: bool,
    e: usize,
) -> OpCost {
    let (mf, nf, kf) = (m as f64, n as f64, k as f64);
    let out = if glu { mf * nf / 2.0 } else { mf * nf };
    let mut flops = 2.0 * mf * nf * kf;
    let mut bytes = nf * kf * weight_bytes_per_element + (mf * kf + out) * e as f64;
    if residual {
        flops += out;
        bytes += out * e as f64;
    }
    if glu {
        flops += 4.0 * out;
    }
    OpCost::new(flops, bytes).with_depth(kf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multiply_add_counts_two() {
        // One 1×1×1 product: one multiply-add = 2 FLOPs; reads a, b, writes c; K = 1.
        assert_eq!(
            gemm(1, 1, 1, 1, 1, 1, false, false, 4),
            OpCost::new(2.0, 12.0).with_depth(1.0)
        );
    }

    #[test]
    fn batched_gemm_counts_every_matrix() {
        // 8 × (64×32×16): 2·64·32·16·8 = 524,288 FLOPs; A per batch, B shared.
        let c = gemm(64, 32, 16, 8, 8, 1, false, false, 4);
        assert_eq!(c.flops, 524_288.0);
        assert_eq!(c.bytes, ((8 * 64 * 16 + 16 * 32 + 8 * 64 * 32) * 4) as f64);
    }

    #[test]
    fn gemm_intensity_grows_with_size() {
        let mut last = 0.0;
        for n in [16, 64, 256, 1024, 4096] {
            let i = gemm(n, n, n, 1, 1, 1, false, false, 4).intensity();
            assert!(i > last, "{n}: {i} ≤ {last}");
            last = i;
        }
        // Square f32 GEMM: 2n³ / (12 n²) = n/6 FLOP/byte.
        assert!((gemm(600, 600, 600, 1, 1, 1, false, false, 4).intensity() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn memory_bound_ops_scale_with_elements() {
        assert_eq!(permute(1000, 4).bytes, 8000.0);
        assert_eq!(softmax(10, 100, 0, 2).bytes, 4000.0);
        assert_eq!(
            norm(10, 100, false, true, 4).bytes,
            (2000 + 200) as f64 * 4.0
        );
    }
}
