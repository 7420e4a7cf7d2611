// Element-wise binary ops with NumPy broadcasting, by strides: out[i] = op(a[ia], b[ib]).
//
// add:       out[i] = a[ia] + b[ib]
// bias_gelu: out[i] = gelu(a[ia] + b[ib])
//
// out is contiguous; its index i is unravelled over `rank` dims (outermost first, at most 8),
// each dims[d] = (size, a's stride, b's stride, 0) in elements, a stride 0 on a dim the
// operand broadcasts over. The launcher drops size-1 dims and merges dims that are contiguous
// in both operands, so a bias or a residual add is one or two dims.
//
// Defines: T (storage type), V = T, VF = f32 (the GELU include's types), WG. Linear grid.

struct Params { n: u32, rank: u32, pad0: u32, pad1: u32, dims: array<vec4<u32>, 8> }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<T>;
@group(0) @binding(2) var<storage, read> b: array<T>;
@group(0) @binding(3) var<storage, read_write> out: array<T>;

fn element(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
}

// gelu(x) = x/2 * (1 + erf(x / sqrt(2))) (shaders/include/gelu.wgsl).
//@GELU

// Elements of a and b that out[i] reads.
fn sources(i: u32) -> vec2<u32> {
    var rest = i;
    var at = vec2<u32>(0u, 0u);
    for (var d = p.rank; d > 0u; d--) {
        let dim = p.dims[d - 1u];
        at += (rest % dim.x) * dim.yz;
        rest /= dim.x;
    }
    return at;
}

@compute @workgroup_size(WG)
fn add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if i >= p.n { return; }
    let at = sources(i);
    out[i] = T(f32(a[at.x]) + f32(b[at.y]));
}

@compute @workgroup_size(WG)
fn bias_gelu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if i >= p.n { return; }
    let at = sources(i);
    out[i] = T(gelu(f32(a[at.x]) + f32(b[at.y])));
}
