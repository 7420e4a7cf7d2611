// Embedding lookup (gather): out[t, h] = table[ids[t], h], one element per invocation.
// An id outside the table gives a row of zeros, never an out-of-bounds read (callers reject
// such ids before upload; this is the last line of defence).
//
// Defines: T (storage type), WG. Linear workgroup grid.

struct Params { n: u32, hidden: u32, vocab: u32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> table: array<T>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<T>;

@compute @workgroup_size(WG)
fn gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
    if i >= p.n * p.hidden { return; }
    let id = ids[i / p.hidden];
    var v = T(0.0);
    if id < p.vocab { v = table[id * p.hidden + i % p.hidden]; }
    out[i] = v;
}
