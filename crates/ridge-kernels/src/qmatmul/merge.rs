//! The merge prologue of a decode step's O projection (`MERGE` in `shaders/qmatmul.wgsl`):
//! the attention arrives as flash-decoding's partial records ([`Partials`]: per query head and
//! span of keys a maximum, a denominator and the unnormalised output) and every workgroup of
//! the product merges them into workgroup memory before it reads them as `x`. The merge pass
//! a split attention needs (Dao et al., "Flash-Decoding for long-context inference", 2023)
//! then costs no dispatch of its own, and attention can split its keys at every context
//! length, not only where a merge dispatch pays for itself.

use ridge_core::{DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::quant::QuantFormat;

use crate::kv_attention::{MERGED_MAX_SPANS, Partials};
use crate::launch;

/// The `//@MERGE` block of variants that read `x` directly: `xload(i)` is x's vec4 `i`.
pub(super) const PLAIN: &str = "
fn merge_x(lid: u32) {}
fn xload(i: u32) -> vec4<f32> { return vec4<f32>(x[i]); }";

/// The `//@MERGE` block of a MERGE variant for a merged `x` of `k` values over `heads` query
/// heads: the records' binding, `x` merged into workgroup memory (`xm`, `k / 4` vec4s) and
/// each (head, span)'s (m, l), then (weight, l) (`ml`, room for [`MERGED_MAX_SPANS`] spans).
/// The spans' records are loaded eight at a time, all eight issued before any is used.
pub(super) fn block(k: usize, heads: usize) -> String {
    format!(
        "
@group(0) @binding(10) var<storage, read> part: array<vec4<f32>>;
var<workgroup> xm: array<vec4<f32>, {k4}u>;
var<workgroup> ml: array<vec2<f32>, {mw}u>;

fn xload(i: u32) -> vec4<f32> {{ return xm[i]; }}

fn merge_x(lid: u32) {{
    let dh4 = p.head_dim / 4u;
    let rec = dh4 + 1u; // a record's vec4s: (m, l, -, -), then the outputs
    for (var i = lid; i < p.heads * p.spans; i += WG) {{ ml[i] = part[i * rec].xy; }}
    workgroupBarrier();
    // Head h's spans weighted e^(m_s − M) / Σ_s e^(m_s − M)·l_s, M over the spans with keys.
    for (var h = lid; h < p.heads; h += WG) {{
        let at = h * p.spans;
        var top = -1e30;
        for (var s = 0u; s < p.spans; s++) {{
            if ml[at + s].y > 0.0 {{ top = max(top, ml[at + s].x); }}
        }}
        var l = 0.0;
        for (var s = 0u; s < p.spans; s++) {{
            let e = ml[at + s];
            let w = select(0.0, exp(e.x - top), e.y > 0.0);
            l += w * e.y;
            ml[at + s].x = w;
        }}
        let inv = select(0.0, 1.0 / l, l > 0.0);
        for (var s = 0u; s < p.spans; s++) {{ ml[at + s].x *= inv; }}
    }}
    workgroupBarrier();
    for (var c = lid; c < p.k / 4u; c += WG) {{
        let at = (c / dh4) * p.spans;
        var acc = vec4<f32>(0.0);
        for (var s0 = 0u; s0 < p.spans; s0 += 8u) {{
            var o: array<vec4<f32>, 8>;
            for (var u = 0u; u < 8u; u++) {{
                let s = min(s0 + u, p.spans - 1u);
                o[u] = part[(at + s) * rec + 1u + c % dh4];
            }}
            for (var u = 0u; u < 8u; u++) {{
                if s0 + u < p.spans {{ acc += ml[at + s0 + u].x * o[u]; }}
            }}
        }}
        xm[c] = acc;
    }}
    workgroupBarrier();
}}",
        k4 = k / 4,
        mw = heads * MERGED_MAX_SPANS,
    )
}

/// Workgroup memory the MERGE prologue adds for `k` merged values over `heads` heads, bytes.
pub(super) fn shared_bytes(k: usize, heads: usize) -> usize {
    4 * k + 8 * heads * MERGED_MAX_SPANS
}

/// Whether the merging product runs `heads` query heads of width `head_dim` on every
/// adapter: its merged `x` and the spans' weights within WebGPU's guaranteed 16 KiB of
/// workgroup memory beside the product's own sums (SmolLM2's 576 values: 13.8 KiB with the
/// widest launch's sums). One rule for every adapter, so that a plan made without a GPU
/// names the dispatches a forward makes; wider heads (a 4096-wide model) take the merge pass.
pub fn merge_fits(heads: usize, head_dim: usize) -> bool {
    // The widest launch's own sums: 256 invocations' partial sums of up to 8 rows each, and
    // their squares.
    let own = 4 * (8 + 1) * 256;
    shared_bytes(heads * head_dim, heads) + own <= 16 << 10
}

/// The cost of [`crate::QMatmul::run_merged`] over `W` `[n, heads · head_dim]` in `format`,
/// `y` in `dtype`, from `spans` spans: the residual product's ([`crate::QMatmul::cost`]) with
/// `x` read as the records (f32, `heads · spans · (head_dim + 4)`) instead of its own bytes,
/// and 2 FLOPs a merged value a span.
pub fn merged_cost(
    format: QuantFormat,
    n: usize,
    (heads, head_dim, spans): (usize, usize, usize),
    dtype: DType,
) -> OpCost {
    let k = heads * head_dim;
    let product = crate::QMatmul {
        residual: true,
        ..crate::QMatmul::new(1)
    }
    .cost(format, n, k, dtype);
    let records = heads * spans * (head_dim + 4) * 4;
    OpCost::new(
        product.flops + (2 * spans * k) as f64,
        product.bytes - (k * dtype.size()) as f64 + records as f64,
    )
    .with_depth(product.depth)
}

/// Checks `part` as the `x` of a product with `k` inputs writing `y`: one token's records of
/// `nh · dh = k` values, f32, as many as the spans need, not aliasing `y`.
pub(super) fn check(name: &str, part: &Partials, k: usize, y: &Tensor) -> Result<()> {
    if part.width() != k || !part.head_dim.is_multiple_of(4) || part.head_dim == 0 {
        return Err(Error::shape(
            name,
            format!(
                "{} heads of width {} (a positive multiple of 4) merge into {} values, not \
                 W's {k} columns",
                part.heads,
                part.head_dim,
                part.width()
            ),
        ));
    }
    if !(1..=MERGED_MAX_SPANS).contains(&part.spans) {
        return Err(Error::invalid(
            name,
            format!(
                "{} spans of keys; the merge takes 1 to {MERGED_MAX_SPANS}",
                part.spans
            ),
        ));
    }
    let need = part.heads * part.spans * (part.head_dim + 4);
    if part.records.dtype() != DType::F32 || part.records.numel() < need {
        return Err(Error::shape(
            name,
            format!(
                "partial records {:?} {} are not {need} f32 values",
                part.records.shape(),
                part.records.dtype()
            ),
        ));
    }
    launch::no_alias(name, y, &[&part.records])
}
