// Micro-kernels that measure an adapter's ceilings for the roofline model.
//
// stream_copy: dst[i] = src[i] as vec4<f32>, one vec4 per invocation: bytes moved = 2 × size.
// fma_peak:    ITERS iterations of 8 independent vec4 FMA chains per invocation (8 × 4 × 2 =
//              64 FLOPs per iteration), in T (f32 or f16); the chains are long enough that
//              arithmetic, not memory, bounds it; one value per invocation is stored so that
//              nothing is optimised away.
// touch:       one invocation writes one word: the per-dispatch overhead.
//
// Defines: T (arithmetic type), WG, ITERS. Linear workgroup grid.

struct Params { n: u32, pad0: u32, seed: f32, pad1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;

fn index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
}

@compute @workgroup_size(WG)
fn stream_copy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = index(wid, nwg, lid);
    if i >= p.n { return; }
    dst[i] = src[i];
}

@compute @workgroup_size(WG)
fn fma_peak(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let i = index(wid, nwg, lid);
    if i >= p.n { return; }
    // Multipliers just below 1 and small addends keep every value finite and normal.
    let x = vec4<T>(T(p.seed) + T(f32(lid) * 1e-6));
    let m = vec4<T>(T(0.9995));
    let a = vec4<T>(T(0.0001));
    var c0 = x; var c1 = x + a; var c2 = x + a * T(2.0); var c3 = x + a * T(3.0);
    var c4 = x - a; var c5 = x - a * T(2.0); var c6 = x - a * T(3.0); var c7 = x * m;
    for (var k = 0u; k < ITERS; k++) {
        c0 = fma(c0, m, a); c1 = fma(c1, m, a); c2 = fma(c2, m, a); c3 = fma(c3, m, a);
        c4 = fma(c4, m, a); c5 = fma(c5, m, a); c6 = fma(c6, m, a); c7 = fma(c7, m, a);
    }
    let s = (c0 + c1) + (c2 + c3) + (c4 + c5) + (c6 + c7);
    dst[i] = vec4<f32>(s);
}

@compute @workgroup_size(1)
fn touch() {
    dst[0] = vec4<f32>(p.seed);
}
