// Rotary position embedding (Su et al., "RoFormer", 2021) on the packed Q/K/V projection,
// with the KV-cache append in the same pass:
//   q[t, h]            = rope(qkv[t, h],            pos0 + t)    h < nh
//   k_cache[pos0 + t, h] = rope(qkv[t, nh + h],       pos0 + t)    h < nkv
//   v_cache[pos0 + t, h] = qkv[t, nh + nkv + h]
// Each head of width dh rotates dh/2 pairs; pair j turns by the angle (pos0 + t)·θ_j, whose
// cosine and sine come from a table computed on the host in f64. ADJACENT pairs are
// (2j, 2j+1), as llama.cpp stores Q and K rows in GGUF files; otherwise pairs are
// (j, j + dh/2), Hugging Face's rotate_half on the original rows.
//
// One invocation per pair of every head (Q, K and V) of every token.
//
// Defines: T (storage type), WG, ADJACENT.

struct Params { tokens: u32, nh: u32, nkv: u32, dh: u32, pos0: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<T>;
@group(0) @binding(2) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> q: array<T>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<T>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<T>;

@compute @workgroup_size(WG)
fn rope_qkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
    let half = p.dh / 2u;
    let heads = p.nh + 2u * p.nkv;
    if i >= p.tokens * heads * half { return; }
    let t = i / (heads * half);
    let head = (i / half) % heads;
    let j = i % half;
    let pos = p.pos0 + t;
    var a = 2u * j;
    var b = 2u * j + 1u;
    if !ADJACENT {
        a = j;
        b = j + half;
    }
    let src = t * heads * p.dh + head * p.dh;
    let x0 = f32(qkv[src + a]);
    let x1 = f32(qkv[src + b]);
    if head >= p.nh + p.nkv {
        let dst = (pos * p.nkv + head - p.nh - p.nkv) * p.dh;
        v_cache[dst + a] = T(x0);
        v_cache[dst + b] = T(x1);
        return;
    }
    let cs = table[pos * half + j];
    let r0 = T(x0 * cs.x - x1 * cs.y);
    let r1 = T(x0 * cs.y + x1 * cs.x);
    if head < p.nh {
        let dst = (t * p.nh + head) * p.dh;
        q[dst + a] = r0;
        q[dst + b] = r1;
    } else {
        let dst = (pos * p.nkv + head - p.nh) * p.dh;
        k_cache[dst + a] = r0;
        k_cache[dst + b] = r1;
    }
}
