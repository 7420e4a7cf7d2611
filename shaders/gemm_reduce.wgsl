// Split-K GEMM, second pass: C = act(sum of the S partial products + beta * C + bias[n]).
//
// The first pass (gemm.wgsl) ran the K range as S slices, each writing alpha * its partial
// product to parts[s] (S x M x N f32, row-major). This pass sums them in order s = 0..S-1,
// adds beta * C (never reading C when beta == 0) and the bias, applies GELU with ACT_GELU and
// stores C in its storage type. One element (V = T) or four along a row (V = vec4<T>, when N
// is a multiple of 4) per invocation.
//
// Defines: T (storage type), V (T or vec4<T>), VF (f32 or vec4<f32>), HAS_BIAS, ACT_GELU, WG.
// Linear grid.

struct Params { count: u32, cols: u32, splits: u32, beta: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> parts: array<VF>;
@group(0) @binding(2) var<storage, read> bias: array<V>;
@group(0) @binding(3) var<storage, read_write> c: array<V>;

// gelu(x) (the erf form, shaders/include/gelu.wgsl).
//@GELU

// count and cols in units of V: the elements of one product, and of one row.
@compute @workgroup_size(WG)
fn gemm_reduce(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
    if i >= p.count { return; }
    var v = parts[i];
    for (var s = 1u; s < p.splits; s++) {
        v += parts[s * p.count + i];
    }
    if p.beta != 0.0 { v += p.beta * VF(c[i]); }
    if HAS_BIAS { v += VF(bias[i % p.cols]); }
    if ACT_GELU { v = gelu(v); }
    c[i] = V(v);
}
