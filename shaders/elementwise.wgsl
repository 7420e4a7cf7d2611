// Element-wise ops over flat arrays, one element (V = T) or four (V = vec4<T>) per invocation.
//
// add:       out[i] = a[i] + b[i % nb]          (residual add: nb = n; bias add: nb = columns)
// scale:     out[i] = alpha * a[i]
// gelu:      out[i] = gelu(a[i])                (the erf form, as BERT uses)
// bias_gelu: out[i] = gelu(a[i] + b[i % nb])
//
// n and nb count V units. With V = vec4<T> each invocation moves 16 (f32) or 8 (f16) bytes
// per load, as the stream-copy ceiling kernel does; scalar loads reached about half of that
// on the H200 (benches/NOTES.md).
//
// Defines: T (storage type), V (T or vec4<T>), VF (f32 or vec4<f32>), WG. Linear grid.

struct Params { n: u32, nb: u32, alpha: f32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<V>;
@group(0) @binding(2) var<storage, read> b: array<V>;
@group(0) @binding(3) var<storage, read_write> out: array<V>;

fn element(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
}

// gelu(x) = x/2 * (1 + erf(x / sqrt(2))), component-wise (shaders/include/gelu.wgsl).
//@GELU

@compute @workgroup_size(WG)
fn add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if i >= p.n { return; }
    out[i] = V(VF(a[i]) + VF(b[i % p.nb]));
}

@compute @workgroup_size(WG)
fn scale(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if i >= p.n { return; }
    out[i] = V(p.alpha * VF(a[i]));
}

@compute @workgroup_size(WG)
fn gelu_erf(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if i >= p.n { return; }
    out[i] = V(gelu(VF(a[i])));
}

@compute @workgroup_size(WG)
fn bias_gelu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let i = element(wid, nwg, lid);
    if i >= p.n { return; }
    out[i] = V(gelu(VF(a[i]) + VF(b[i % p.nb])));
}
