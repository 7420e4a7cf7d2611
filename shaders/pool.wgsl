// Mean pooling over the valid tokens of each sequence, optionally L2-normalised:
//   m[b, h] = sum_{t < len[b]} x[b, t, h] / len[b]          (0 for an empty sequence)
//   out[b, :] = m[b, :] / max(||m[b, :]||_2, 1e-12)         (with NORMALIZE; the eps of
//                                                             PyTorch's F.normalize)
// as sentence-transformers' Pooling(mean) and Normalize modules do. One workgroup per
// sequence; with NORMALIZE the means are computed twice (once for the norm, once to write)
// rather than kept in workgroup memory, so any hidden size fits.
//
// Defines: T (storage type), WG (a power of two), NORMALIZE.

struct Params { batch: u32, seq: u32, hidden: u32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> lengths: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<T>;

var<workgroup> partial: array<f32, WG>;

// Eight tokens per step into independent sums, so eight loads are in flight rather than one
// (a loop of dependent additions waited on each load: 128 tokens took ≈ 80 µs on an H200).
fn mean(b: u32, len: u32, h: u32) -> f32 {
    let st = p.hidden;
    let base = b * p.seq * st + h;
    var lo = vec4<f32>();
    var hi = vec4<f32>();
    var t = 0u;
    for (; t + 8u <= len; t += 8u) {
        let i = base + t * st;
        lo += vec4<f32>(f32(x[i]), f32(x[i + st]), f32(x[i + 2u * st]), f32(x[i + 3u * st]));
        hi += vec4<f32>(f32(x[i + 4u * st]), f32(x[i + 5u * st]), f32(x[i + 6u * st]),
                        f32(x[i + 7u * st]));
    }
    var s = dot(lo + hi, vec4<f32>(1.0));
    for (; t < len; t++) { s += f32(x[base + t * st]); }
    return select(0.0, s / f32(len), len > 0u);
}

@compute @workgroup_size(WG)
fn mean_pool(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let b = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
    if b >= p.batch { return; }
    let len = min(lengths[b], p.seq);

    var scale = 1.0;
    if NORMALIZE {
        var sq = 0.0;
        for (var h = lid; h < p.hidden; h += WG) {
            let m = mean(b, len, h);
            sq += m * m;
        }
        partial[lid] = sq;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if lid < s { partial[lid] += partial[lid + s]; }
            workgroupBarrier();
        }
        scale = 1.0 / max(sqrt(partial[0]), 1e-12);
    }
    for (var h = lid; h < p.hidden; h += WG) {
        out[b * p.hidden + h] = T(mean(b, len, h) * scale);
    }
}
